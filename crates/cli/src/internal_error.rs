//! A panic is a gatecal bug: the process reports it and ends at once.
//!
//! [`install`] replaces the panic hook with one that prints, on stderr,
//! `BIN: internal error (a gatecal bug, please report it): MESSAGE at
//! FILE:LINE` (and a backtrace when `RUST_BACKTRACE` asks for one), then
//! exits with [`EXIT_CODE`] from whichever thread panicked. No thread is
//! left waiting for the one that panicked, whatever it was doing (reading
//! stdin, waiting for a block), and no partial report is written (the
//! temporary files of the outputs are removed: [`crate::atomic`]).

use std::backtrace::{Backtrace, BacktraceStatus};
use std::io::Write;

/// The exit code after an internal error (a panic): 101, what Rust gives a
/// panic that ends a program.
pub const EXIT_CODE: i32 = 101;

/// Installs the panic hook for the binary `bin` (see the module docs).
pub fn install(bin: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "{bin}: internal error (a gatecal bug, please report it): {msg}{at}"
        );
        let bt = Backtrace::capture();
        if bt.status() == BacktraceStatus::Captured {
            let _ = writeln!(err, "{bt}");
        }
        let _ = err.flush();
        // No output is left half written under a temporary name.
        let _held = crate::atomic::remove_all();
        std::process::exit(EXIT_CODE);
    }));
}
