//! `recommend`: peak prefill throughput, break-even bar and the filter config
//! to apply, per deployment. See `recommend --help`.

mod args;
mod follow;
mod merge;
mod partial;
mod run;

use std::process::ExitCode;

/// mimalloc, as in gate-dist (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gatecal_cli::internal_error::install("recommend");
    gatecal_cli::atomic::clean_up_on_signals();
    // `recommend merge ...` (a log file named `merge` is given as
    // `./merge`).
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("merge")) {
        let argv = std::iter::once("recommend merge".into()).chain(std::env::args_os().skip(2));
        return match <merge::MergeArgs as clap::Parser>::try_parse_from(argv) {
            Ok(a) => gatecal_cli::output::exit("recommend", merge::run(a)),
            Err(e) => {
                let _ = e.print();
                ExitCode::from(if e.use_stderr() { 2 } else { 0 })
            }
        };
    }
    match gatecal_cli::pipeline::parse_args::<args::Args>() {
        Ok(args) => {
            if args.follow {
                // A run of days: freed memory goes back at once.
                gatecal_cli::allocator::purge_freed_memory_at_once();
            }
            let result = match args.input.generate {
                Some(kind) => gatecal_cli::generate::to_stdout::<args::Args>(kind),
                None => gatecal_cli::kubectl::finish("recommend", run::run(args)),
            };
            gatecal_cli::output::exit("recommend", result)
        }
        Err(code) => code,
    }
}
