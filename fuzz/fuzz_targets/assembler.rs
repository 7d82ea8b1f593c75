//! The assembler fed arbitrary sequences of real lines: each step picks a
//! fixture line and maybe replaces one number by an edge value, changes
//! its request id or cuts it; the sequence is assembled with tight bounds
//! (few open requests, no idle age), so eviction, reuse and retries are
//! all reached.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gatecal_fuzz_entry::assembler(data);
});
