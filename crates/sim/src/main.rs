//! `epp-sim`: writes synthetic EPP and vLLM logs with their ground truth.
use std::process::ExitCode;

mod cli;

fn main() -> ExitCode {
    match cli::run_cli() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let broken_pipe = err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return ExitCode::SUCCESS;
            }
            eprintln!("epp-sim: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
