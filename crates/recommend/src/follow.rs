//! `--follow`: the calibration over the last `--window` of log time (EPP
//! decisions and vLLM stats lines), every `--every`, while the inputs
//! grow ([`gatecal_cli::follow`]).

use std::io::Write;

use gatecal_analysis::Recommend;
use gatecal_cli::follow::{audit, write_report};
use gatecal_cli::output::{report_format, report_renderer, run_info, table_width};
use gatecal_parser::InputSpec;
use gatecal_render::Format;

use crate::args::Args;

/// The span of log time each report covers without `--window`.
pub const DEFAULT_WINDOW_S: f64 = 900.0;

/// Runs `recommend --follow`.
pub fn run(args: Args) -> anyhow::Result<()> {
    gatecal_cli::follow_flags::check(
        "recommend",
        &[
            (args.output.is_some(), "-o"),
            (args.svg.is_some(), "--svg"),
            (args.input.emit_decisions.is_some(), "--emit-decisions"),
            (args.emit_partial.is_some(), "--emit-partial"),
            (!args.emit_config.is_empty(), "--emit-config"),
            (args.emit_calibration.is_some(), "--emit-calibration"),
            (args.input.list_deployments, "--list-deployments"),
            (!args.fail_if.is_empty(), "--fail-if"),
            (args.input.kubectl.is_some(), "--kubectl"),
        ],
        args.since.is_some() || args.until.is_some(),
        args.every,
    )?;
    let format = gatecal_cli::follow_flags::format(report_format(args.format, None)?)?;
    let (mut opts, configs) = crate::run::options(&args)?;
    // --window is the span each report covers, not drift windows.
    opts.window_s = None;
    let window_s = args.window.unwrap_or(DEFAULT_WINDOW_S);
    let width = table_width(None, args.wide);
    let redraw = format == Format::Table && gatecal_cli::output::stdout_is_terminal(None);
    let specs: Vec<InputSpec> = args
        .input
        .inputs
        .iter()
        .map(|a| InputSpec::parse(a))
        .collect();
    let parse = args.input.parse_options();
    let inputs = gatecal_cli::follow::start(&specs, &parse, true)?;
    let threads = parse.threads;
    gatecal_cli::follow::follow(
        "recommend",
        inputs,
        args.every,
        window_s,
        // Decisions wait for their deployment's bar a short while only:
        // they reach no report while they wait. It keeps nothing but the
        // records: each report audits them again.
        Recommend::new(opts.clone(), configs.clone())
            .with_max_pending(gatecal_analysis::MAX_PENDING_DECISIONS_FOLLOWING)
            .records_only(),
        |_| {},
        |info, windows| {
            let fresh = Recommend::new(opts.clone(), configs.clone()).with_threads(threads);
            let report = audit(fresh, windows, info);
            let mut text = Vec::new();
            report_renderer(format, width, run_info(None, None)).recommend(&report, &mut text)?;
            let mut out = std::io::stdout().lock();
            write_report(
                &mut out,
                "recommend",
                &text,
                info,
                windows,
                format == Format::Json,
                redraw,
            )?;
            out.flush()?;
            Ok(())
        },
    )
}
