//! `gate-dist`: audit the TTFT load gate from EPP logs. See `gate-dist --help`.

mod args;
mod run;

use std::process::ExitCode;

fn main() -> ExitCode {
    match gatecal_cli::pipeline::parse_args::<args::Args>() {
        Ok(args) => gatecal_cli::output::exit("gate-dist", run::run(args)),
        Err(code) => code,
    }
}
