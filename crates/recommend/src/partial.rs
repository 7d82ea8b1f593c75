//! `recommend --emit-partial`: the calibration finished into a partial
//! report (docs/partial-report.md).

use gatecal_analysis::{InputSummary, Recommend, RecommendPartial, RecordSink};
use gatecal_cli::partials::VllmStats;

/// The calibration, finished into a partial report instead of a report.
pub struct PartialRun(pub Recommend);

impl gatecal_cli::pipeline::Analysis for PartialRun {
    type Report = Result<RecommendPartial, String>;
    const READS_VLLM: bool = true;
    fn with_records(self, sink: RecordSink) -> Self {
        PartialRun(self.0.with_records(sink))
    }
    fn push_decision(&mut self, d: gatecal_analysis::DecisionInput) {
        self.0.push_decision(d);
    }
    fn push_vllm(&mut self, s: &VllmStats) {
        self.0.push_vllm(s);
    }
    fn finish(self, input: InputSummary) -> Self::Report {
        self.0.into_partial(input)
    }
}

/// Writes the partial to `dest` and returns the report it finishes into
/// (read back from the line written, as `recommend merge` reads it).
pub fn write(
    partial: Result<RecommendPartial, String>,
    dest: gatecal_cli::output::Destination,
) -> anyhow::Result<gatecal_analysis::RecommendReport> {
    let partial = partial.map_err(|e| anyhow::anyhow!("--emit-partial: {e}"))?;
    let line = partial.to_line();
    drop(partial);
    dest.write(|w| w.write_all(line.as_bytes()))?;
    RecommendPartial::from_json(&line)
        .map_err(|e| {
            anyhow::anyhow!("--emit-partial: the partial written does not read back: {e}")
        })?
        .finish()
        .map_err(|e| anyhow::anyhow!("--emit-partial: {e}"))
}
