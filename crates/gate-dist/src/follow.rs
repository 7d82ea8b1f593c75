//! `--follow`: the audit of the last `--window` of log time, every
//! `--every`, while the inputs grow ([`gatecal_cli::follow`]).

use std::io::Write;
use std::sync::{Arc, Mutex};

use gatecal_analysis::GateDist;
use gatecal_cli::follow::{audit, write_report};
use gatecal_cli::metrics::{Metrics, Shared};
use gatecal_cli::output::{report_format, report_renderer, run_info, table_width};
use gatecal_parser::InputSpec;
use gatecal_render::Format;

use crate::args::Args;

/// The span of log time each report covers without `--window`.
pub const DEFAULT_WINDOW_S: f64 = 900.0;

/// Runs `gate-dist --follow`.
pub fn run(args: Args) -> anyhow::Result<()> {
    gatecal_cli::follow_flags::check(
        "gate-dist",
        &[
            (args.output.is_some(), "-o"),
            (args.svg.is_some(), "--svg"),
            (args.input.emit_decisions.is_some(), "--emit-decisions"),
            (args.input.list_deployments, "--list-deployments"),
            (args.input.kubectl.is_some(), "--kubectl"),
        ],
        args.since.is_some() || args.until.is_some(),
        args.every,
    )?;
    let mut opts = args.options(None)?;
    opts.window_s = None;
    let window_s = args.window.unwrap_or(DEFAULT_WINDOW_S);
    let mut filter = args.filter.clone();
    filter.peak_prefill_throughput = args.peak_prefill_throughput;
    let configs = filter.config_set()?;
    let format = gatecal_cli::follow_flags::format(report_format(args.format, None)?)?;
    let width = table_width(None, args.wide);
    let redraw = format == Format::Table && gatecal_cli::output::stdout_is_terminal(None);
    let metrics = match &args.serve_metrics {
        Some(addr) => {
            let m: Shared = Arc::new(Mutex::new(Metrics::new(opts.pinned_worse_min_ms)));
            let bound = gatecal_cli::metrics::serve(addr, m.clone())?;
            if !args.input.quiet {
                gatecal_cli::term::eprint(
                    "gate-dist",
                    gatecal_cli::term::Level::Note,
                    &format!("serving metrics at http://{bound}/metrics"),
                );
            }
            Some(m)
        }
        None => None,
    };
    let specs: Vec<InputSpec> = args
        .input
        .inputs
        .iter()
        .map(|a| InputSpec::parse(a))
        .collect();
    let inputs = gatecal_cli::follow::start(&specs, &args.input.parse_options(), false)?;
    // The audit of every decision read, run on: it gives each decision's
    // record with its gate as analysed and the config in force, which the
    // window keeps for the reports.
    let report_metrics = metrics.clone();
    gatecal_cli::follow::follow(
        "gate-dist",
        inputs,
        args.every,
        window_s,
        // Decisions wait for their deployment's bar a short while only:
        // they reach no report while they wait. It keeps nothing but the
        // records: each report audits them again.
        GateDist::new(opts.clone(), configs.clone())
            .with_max_pending(gatecal_analysis::MAX_PENDING_DECISIONS_FOLLOWING)
            .records_only(),
        move |r| {
            if let Some(m) = &metrics {
                gatecal_cli::metrics::lock(m).observe(r);
            }
        },
        |info, windows| {
            let report = audit(GateDist::new(opts.clone(), configs.clone()), windows, info);
            if let Some(m) = &report_metrics {
                gatecal_cli::metrics::lock(m).set_findings(&report.findings);
            }
            let mut text = Vec::new();
            report_renderer(format, width, run_info(None, None)).gate_dist(&report, &mut text)?;
            let mut out = std::io::stdout().lock();
            write_report(
                &mut out,
                "gate-dist",
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
