//! `recommend`: peak prefill throughput, break-even bar and the filter config
//! to apply, per deployment. See `recommend --help`.

mod args;
mod run;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match args::Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // --help and --version print and succeed; usage errors exit 2.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    gatecal_cli::output::exit("recommend", run::run(args))
}
