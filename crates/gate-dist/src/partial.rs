//! Partial reports: `--emit-partial` and `gate-dist merge`
//! (docs/partial-report.md).

use gatecal_analysis::{GateDist, InputSummary, Partial, RecordSink};
use gatecal_cli::output::Destination;
use gatecal_cli::pipeline::{Analysed, Analysis, Emitter, analyse};
use gatecal_parser::{InputFiles, VllmStats};

use crate::args::Args;

/// The audit, finished into a partial report instead of a report.
struct PartialRun(GateDist);

impl Analysis for PartialRun {
    type Report = Partial;
    const READS_VLLM: bool = false;
    fn with_records(self, sink: RecordSink) -> Self {
        PartialRun(self.0.with_records(sink))
    }
    fn push_decision(&mut self, d: gatecal_analysis::DecisionInput) {
        self.0.push(d);
    }
    fn push_vllm(&mut self, _s: &VllmStats) {}
    fn finish(self, input: InputSummary) -> Partial {
        self.0.into_partial(input)
    }
}

/// Runs the audit, writes its partial report to `dest`, and returns the
/// report the partial finishes into (the one the run gives without
/// `--emit-partial`).
pub fn emit(
    args: &Args,
    files: InputFiles,
    emitter: Option<Emitter>,
    audit: GateDist,
    dest: Destination,
) -> anyhow::Result<Analysed<gatecal_analysis::GateDistReport>> {
    let Analysed {
        report: partial,
        inputs,
        index,
    } = analyse(
        &args.input,
        files,
        "gate-dist",
        args.window,
        emitter,
        PartialRun(audit),
    )?;
    let line = partial.to_line();
    drop(partial);
    dest.write(|w| w.write_all(line.as_bytes()))?;
    let report = Partial::from_json(&line)
        .map_err(|e| {
            anyhow::anyhow!("--emit-partial: the partial written does not read back: {e}")
        })?
        .finish();
    Ok(Analysed {
        report,
        inputs,
        index,
    })
}
