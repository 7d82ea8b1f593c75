//! `--follow`: the audit of the last `--window` of log time, every
//! `--every`, while the inputs grow ([`gatecal_cli::follow`]).

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use anyhow::bail;
use gatecal_analysis::{GateDist, GateDistReport, InputSummary};
use gatecal_cli::follow::{TickInfo, Window};
use gatecal_cli::metrics::{Metrics, Shared};
use gatecal_cli::output::{report_format, report_renderer, run_info, table_width};
use gatecal_cli::pipeline::{Inputs, decision_input, summary};
use gatecal_parser::InputSpec;
use gatecal_render::Format;

use crate::args::Args;

/// The span of log time each report covers without `--window`.
pub const DEFAULT_WINDOW_S: f64 = 900.0;

/// Runs `gate-dist --follow`.
pub fn run(args: Args) -> anyhow::Result<()> {
    for (given, flag) in [
        (args.output.is_some(), "-o"),
        (args.svg.is_some(), "--svg"),
        (args.input.emit_decisions.is_some(), "--emit-decisions"),
        (args.input.list_deployments, "--list-deployments"),
        (args.input.kubectl.is_some(), "--kubectl"),
    ] {
        if given {
            bail!(
                "{flag} does not go with --follow, whose reports go to stdout{}",
                if flag == "--kubectl" {
                    " (pipe `kubectl logs -f ... --prefix --timestamps` into `gate-dist --follow -`)"
                } else {
                    ""
                }
            );
        }
    }
    anyhow::ensure!(
        args.since.is_none() && args.until.is_none(),
        "--since/--until do not go with --follow: each report covers the last --window of log time"
    );
    anyhow::ensure!(
        args.every >= 0.1,
        "--every {}: give at least 0.1s",
        args.every
    );
    let mut opts = args.options(None)?;
    opts.window_s = None;
    let window_s = args.window.unwrap_or(DEFAULT_WINDOW_S);
    let mut filter = args.filter.clone();
    filter.peak_prefill_throughput = args.peak_prefill_throughput;
    let configs = filter.config_set()?;
    let format = report_format(args.format, None)?;
    if matches!(format, Format::Markdown | Format::Csv) {
        bail!("--follow prints a table or JSON lines: give --format table or --format json");
    }
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
    let inputs = gatecal_cli::follow::start(&specs, &args.input.parse_options())?;
    let names = inputs.names.clone();
    // The audit of every decision read, run on: it gives each decision's
    // record with its gate as analysed and the config in force, which the
    // window keeps for the reports.
    let report_metrics = metrics.clone();
    let window = Rc::new(RefCell::new(Window::new(window_s)));
    let sink = window.clone();
    let live = RefCell::new(Some(
        GateDist::new(opts.clone(), configs.clone()).with_records(Box::new(move |r| {
            if let Some(m) = &metrics {
                gatecal_cli::metrics::lock(m).observe(&r);
            }
            sink.borrow_mut().push(r);
        })),
    ));
    gatecal_cli::follow::run(
        "gate-dist",
        inputs,
        args.every,
        |d| {
            if let Some(g) = live.borrow_mut().as_mut() {
                g.push(decision_input(*d, true));
            }
        },
        |info| {
            if info.last
                && let Some(g) = live.borrow_mut().take()
            {
                // Its decisions still held (reordered, or waiting for the
                // bar in force) reach the window.
                g.finish(InputSummary::default());
            }
            let w = window.borrow();
            let report = audit(&opts, &configs, &w, &info, &names);
            if let Some(m) = &report_metrics {
                gatecal_cli::metrics::lock(m).set_findings(&report.findings);
            }
            let mut out = std::io::stdout().lock();
            write_report(
                &mut out, &report, &info, &w, format, width, redraw, window_s,
            )?;
            out.flush()?;
            Ok(())
        },
    )
}

/// The audit of the window's decisions.
fn audit(
    opts: &gatecal_analysis::GateDistOptions,
    configs: &gatecal_analysis::ConfigSet,
    window: &Window,
    info: &TickInfo,
    names: &[String],
) -> GateDistReport {
    let mut g = GateDist::new(opts.clone(), configs.clone());
    window.for_each("window", |d| g.push(decision_input(d, false)));
    let mut input = summary(&Inputs {
        ledger: info.ledger.clone(),
        ..Inputs::default()
    });
    input.inputs = names.to_vec();
    input.lines_total = input.lines_total.max(info.lines);
    input.bytes = input.bytes.max(info.bytes);
    input.decisions_assembled = input.decisions_assembled.max(window.read());
    g.finish(input)
}

/// One report: JSON on one line, with the window (`follow`); else a
/// header and the table, the screen cleared first on a terminal.
#[allow(clippy::too_many_arguments)]
fn write_report(
    out: &mut dyn Write,
    report: &GateDistReport,
    info: &TickInfo,
    window: &Window,
    format: Format,
    width: Option<u16>,
    redraw: bool,
    window_s: f64,
) -> anyhow::Result<()> {
    let mut text = Vec::new();
    report_renderer(format, width, run_info(None, None)).gate_dist(report, &mut text)?;
    if format == Format::Json {
        out.write_all(&gatecal_cli::follow::json_line(
            &text, window, window_s, info.last,
        )?)?;
        return Ok(());
    }
    if redraw {
        // Home, clear the screen.
        out.write_all(b"\x1b[H\x1b[2J")?;
    }
    let span = match window.latest() {
        Some(b) => format!(
            "{} to {} UTC",
            gatecal_render::num::utc(b - window_s),
            gatecal_render::num::utc(b)
        ),
        None => "no decision read yet".into(),
    };
    writeln!(
        out,
        "gate-dist --follow: the last {} of log time ({span}); {} decision(s) read in all{}\n",
        gatecal_cli::follow::span_text(window_s),
        gatecal_render::num::group(window.read() as i64),
        if info.last { "; last report" } else { "" }
    )?;
    out.write_all(&text)?;
    if !redraw {
        out.write_all(b"\n")?;
    }
    Ok(())
}
