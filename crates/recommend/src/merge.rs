//! `recommend merge`: recommend partial reports in, the calibration one run
//! over all their input gives out (docs/partial-report.md).

use clap::Parser;
use gatecal_analysis::{RecommendPartial, merge_recommend_partials};

/// Merges recommend partial reports (written with --emit-partial) into one
/// report: the calibration and predicted TTFT, in every format, one
/// recommend run over all their input would print. Partials counting the
/// same decisions twice, run with other options, under another config, or
/// of gate-dist are refused, naming the file.
#[derive(Parser, Debug)]
#[command(name = "recommend merge", version = gatecal_cli::term::VERSION, max_term_width = 100)]
pub struct MergeArgs {
    #[command(flatten)]
    pub merge: gatecal_cli::partials::MergeCommon,

    /// Exit 4 when EXPR holds, as recommend --fail-if.
    #[arg(long, value_name = "EXPR", value_parser = gatecal_cli::fail_if::parse_recommend)]
    pub fail_if: Vec<gatecal_cli::fail_if::Gate>,
}

/// Runs `recommend merge`.
pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let report = gatecal_cli::partials::run_merge(
        &args.merge,
        RecommendPartial::from_json,
        |partials| merge_recommend_partials(partials).map_err(|e| anyhow::anyhow!("{e}")),
        |m| m.to_line(),
        |m| m.finish().map_err(|e| anyhow::anyhow!("{e}")),
        |r, report, w| r.recommend(report, w),
    )?;
    gatecal_cli::fail_if::check_recommend(&args.fail_if, &report)
}
