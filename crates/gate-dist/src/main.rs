//! `gate-dist`: audit the TTFT load gate from EPP logs. See `gate-dist --help`.

mod args;
mod compare;
mod follow;
mod merge;
mod partial;
mod plan;
mod run;

use std::process::ExitCode;

/// mimalloc: the parser allocates a few short strings per used line on
/// worker threads and the assembling thread frees them; glibc's malloc
/// spent about 10 % of the CPU on that (docs/performance.md). Built
/// without transparent huge pages (`no_thp`): with them, every fresh arena
/// page cleared 2 MiB, a quarter of the CPU of a run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gatecal_cli::internal_error::install("gate-dist");
    gatecal_cli::atomic::clean_up_on_signals();
    // `gate-dist merge ...` and `gate-dist plan ...` (a log file named
    // `merge` or `plan` is given as `./merge`).
    match std::env::args_os()
        .nth(1)
        .as_deref()
        .and_then(|a| a.to_str())
    {
        Some("merge") => {
            let argv = std::iter::once("gate-dist merge".into()).chain(std::env::args_os().skip(2));
            return match <merge::MergeArgs as clap::Parser>::try_parse_from(argv) {
                Ok(a) => gatecal_cli::output::exit("gate-dist", merge::run(a)),
                Err(e) => {
                    let _ = e.print();
                    ExitCode::from(if e.use_stderr() { 2 } else { 0 })
                }
            };
        }
        Some("plan") => {
            let argv = std::iter::once("gate-dist plan".into()).chain(std::env::args_os().skip(2));
            return match <plan::PlanArgs as clap::Parser>::try_parse_from(argv) {
                Ok(a) => gatecal_cli::output::exit("gate-dist", plan::run(a)),
                Err(e) => {
                    let _ = e.print();
                    ExitCode::from(if e.use_stderr() { 2 } else { 0 })
                }
            };
        }
        _ => {}
    }
    match gatecal_cli::pipeline::parse_args::<args::Args>() {
        Ok(args) => {
            if args.follow {
                // A run of days: freed memory goes back at once.
                gatecal_cli::allocator::purge_freed_memory_at_once();
            }
            let result = match args.input.generate {
                Some(kind) => gatecal_cli::generate::to_stdout::<args::Args>(kind),
                None => gatecal_cli::kubectl::finish("gate-dist", run::run(args)),
            };
            gatecal_cli::output::exit("gate-dist", result)
        }
        Err(code) => code,
    }
}
