//! `recommend`: peak prefill throughput, break-even bar and the filter config
//! to apply, per deployment. See `recommend --help`.

mod args;
mod follow;
mod run;

use std::process::ExitCode;

/// mimalloc, as in gate-dist (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gatecal_cli::internal_error::install("recommend");
    gatecal_cli::atomic::clean_up_on_signals();
    match gatecal_cli::pipeline::parse_args::<args::Args>() {
        Ok(args) => {
            let result = match args.input.generate {
                Some(kind) => gatecal_cli::generate::to_stdout::<args::Args>(kind),
                None => gatecal_cli::kubectl::finish("recommend", run::run(args)),
            };
            gatecal_cli::output::exit("recommend", result)
        }
        Err(code) => code,
    }
}
