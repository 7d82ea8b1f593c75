//! Not built yet: this binary's issue fills it in.
use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!("{}: not built yet", env!("CARGO_PKG_NAME"));
    ExitCode::from(2)
}
