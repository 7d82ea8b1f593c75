//! `gate-dist merge`: partial reports in, the report one run over all their
//! input would give out (docs/partial-report.md, docs/scale-out.md).

use clap::Parser;
use gatecal_analysis::{Partial, merge_partials};

/// Merges partial reports (written with --emit-partial) into one report:
/// the report, in every format, one gate-dist run over all their input
/// would print. Over shards of one log (by EPP pod, by time with a warm-up
/// before each shard's --since) the counts and exact gate inputs merge
/// exactly, reconstructed ones within the bound of docs/scale-out.md;
/// partials counting the same decisions twice, run with other options, or
/// under another config are refused, naming the file.
#[derive(Parser, Debug)]
#[command(name = "gate-dist merge", version = gatecal_cli::term::VERSION, max_term_width = 100)]
pub struct MergeArgs {
    #[command(flatten)]
    pub merge: gatecal_cli::partials::MergeCommon,

    /// Exit 4 when EXPR holds, as gate-dist --fail-if.
    #[arg(long, value_name = "EXPR", value_parser = gatecal_cli::fail_if::parse_gate_dist)]
    pub fail_if: Vec<gatecal_cli::fail_if::Gate>,
}

/// Runs `gate-dist merge`.
pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let report = gatecal_cli::partials::run_merge(
        &args.merge,
        Partial::from_json,
        |partials| merge_partials(partials).map_err(|e| anyhow::anyhow!("{e}")),
        |m| m.to_line(),
        |m| Ok(m.finish()),
        |r, report, w| r.gate_dist(report, w),
    )?;
    gatecal_cli::fail_if::check_gate_dist(&args.fail_if, &report)
}
