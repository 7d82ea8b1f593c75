//! The allocator's setting for long runs. Both binaries allocate with
//! mimalloc, which hands freed pages back to the system a while after
//! they empty (its purge delay, 1 s by default): that saves calls to the
//! system in a run of a few seconds or minutes, while in `--follow`,
//! which may run for days, the pages freed within that second add to the
//! peak (docs/performance.md, "Follow mode").

use std::ffi::c_long;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_e`
/// (`mimalloc.h`, versions 2 and 3), which the Rust bindings name no
/// constant for.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay `--follow` runs with, in milliseconds: freed pages go
/// back to the system at once.
pub const FOLLOW_PURGE_DELAY_MS: c_long = 0;

/// Has mimalloc return freed pages to the system after
/// [`FOLLOW_PURGE_DELAY_MS`], unless the environment sets the delay
/// (`MIMALLOC_PURGE_DELAY`, or its old name `MIMALLOC_RESET_DELAY`): the
/// user's value wins (in any case of letters, as mimalloc reads it).
/// Returns the delay in force, in milliseconds. Called once, as
/// `--follow` starts, before the threads that read the inputs.
#[allow(unsafe_code)]
pub fn purge_freed_memory_at_once() -> c_long {
    // SAFETY: both functions take an option's number and a value, no
    // pointer; mimalloc checks the number's range. `mi_option_set_default`
    // writes the option's entry in mimalloc's table only when the
    // environment did not set it (a value read from it is kept, whether
    // read at load or on the first `mi_option_get`), and
    // `mi_option_get` reads it. The entry is a plain word that mimalloc
    // reads when it frees a page: this runs before the threads that
    // read the inputs start, while the only other thread waits for
    // signals, so no thread frees pages meanwhile.
    unsafe {
        libmimalloc_sys::mi_option_set_default(PURGE_DELAY, FOLLOW_PURGE_DELAY_MS);
        libmimalloc_sys::mi_option_get(PURGE_DELAY)
    }
}
