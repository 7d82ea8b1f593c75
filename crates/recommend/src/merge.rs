//! `recommend merge`: recommend partial reports in, the calibration one run
//! over all their input gives out (docs/partial-report.md).

use std::path::PathBuf;

use clap::Parser;
use gatecal_analysis::{RecommendPartial, merge_recommend_partials};
use gatecal_cli::output::{report_format, report_renderer, table_width};

/// Merges recommend partial reports (written with --emit-partial) into one
/// report: the calibration and predicted TTFT, in every format, one
/// recommend run over all their input would print. Partials counting the
/// same decisions twice, run with other options, under another config, or
/// of gate-dist are refused, naming the file.
#[derive(Parser, Debug)]
#[command(name = "recommend merge", version = gatecal_cli::term::VERSION, max_term_width = 100)]
pub struct MergeArgs {
    /// Partial reports: files, folders (every *.part and *.json file in
    /// them), or - (stdin: any number of partials, one per line).
    #[arg(required = true, value_name = "PARTIAL")]
    pub partials: Vec<String>,

    /// Output format [default: from -o's extension, else table on a
    /// terminal, json otherwise].
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub format: Option<gatecal_cli::output::FormatArg>,

    /// Write the report to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Draw tables at their full width, even on a narrower terminal.
    #[arg(long)]
    pub wide: bool,

    /// Exit 4 when EXPR holds, as recommend --fail-if.
    #[arg(long, value_name = "EXPR", value_parser = gatecal_cli::fail_if::parse_recommend)]
    pub fail_if: Vec<gatecal_cli::fail_if::Gate>,

    /// Also write the merged partial report to FILE (- for stdout, the
    /// report then written only with -o), to merge again later.
    #[arg(long, value_name = "FILE")]
    pub emit_partial: Option<PathBuf>,
}

/// Runs `recommend merge`.
pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let format = report_format(args.format, args.output.as_deref())?;
    let width = table_width(args.output.as_deref(), args.wide);
    let (partial_out, out) = gatecal_cli::partials::merge_outputs(
        &args.partials,
        args.emit_partial.as_deref(),
        args.output.as_deref(),
    )?;
    let partials = gatecal_cli::partials::read_all(&args.partials, RecommendPartial::from_json)?;
    let merged = merge_recommend_partials(partials).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(dest) = partial_out {
        let line = merged.to_line();
        dest.write(|w| w.write_all(line.as_bytes()))?;
    }
    let report = merged.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(out) = out {
        out.write(|w| {
            report_renderer(
                format,
                width,
                gatecal_cli::output::run_info_with_svgs(args.output.as_deref(), None, &[]),
            )
            .recommend(&report, w)
        })?;
    }
    gatecal_cli::fail_if::check_recommend(&args.fail_if, &report)
}
