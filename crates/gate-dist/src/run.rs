//! Wiring: inputs -> analysis -> render.

use std::path::{Path, PathBuf};

use gatecal_analysis::{GateDist, GateDistReport, Stats};
use gatecal_cli::deployments::{Listed, check_names, write_list};
use gatecal_cli::output::{
    Destination, OutputFile, Outputs, report_format, report_renderer, table_width,
};
use gatecal_cli::pipeline::{Analysed, Emitter, analyse, input_files_since, no_decisions};
use gatecal_render::svg::{SvgHistogram, histogram_svg};

use crate::args::Args;

/// Runs the audit as the flags ask.
pub fn run(args: Args) -> anyhow::Result<()> {
    gatecal_cli::term::set_color(args.input.color);
    if args.comparing() {
        return crate::compare::run(args);
    }
    if args.follow {
        return crate::follow::run(args);
    }
    let span = gatecal_cli::pipeline::span_for(
        &args.input,
        "gate-dist",
        args.since.as_deref(),
        args.until.as_deref(),
    )?;
    let opts = args.options(span)?;
    let time_range = opts.time_range;
    let mut filter = args.filter.clone();
    filter.peak_prefill_throughput = args.peak_prefill_throughput;
    let configs = filter.config_set()?;
    let format = report_format(args.format, args.output.as_deref())?;
    let width = table_width(args.output.as_deref(), args.wide);
    // Every output is opened, and checked against the inputs, before any
    // input is read.
    let mut files = input_files_since(&args.input, args.since.as_deref())?;
    let config_paths = args.filter.config_paths();
    let others: Vec<(&str, &Path)> = config_paths
        .iter()
        .map(|p| ("--config", p.as_path()))
        .chain(
            args.candidates
                .candidate_config
                .iter()
                .map(|p| ("--candidate-config", Path::new(p))),
        )
        .collect();
    let mut outputs = Outputs::new(&files, &others);
    let emit = match &args.input.emit_decisions {
        Some(p) => Some(outputs.open("--emit-decisions", Some(p), &mut files)?),
        None => None,
    };
    let svg = match &args.svg {
        Some(p) => match outputs.open("--svg", Some(p), &mut files)? {
            Destination::File(f) => Some(f),
            Destination::Stdout => anyhow::bail!("--svg -: give a file (stdout holds the report)"),
        },
        None => None,
    };
    let partial = match &args.emit_partial {
        Some(p) => Some(outputs.open("--emit-partial", Some(p), &mut files)?),
        None => None,
    };
    // `--emit-partial -` takes stdout: the report is written only with -o.
    let out = match (&partial, &args.output) {
        (Some(Destination::Stdout), None) => None,
        _ => Some(outputs.open("-o", args.output.as_deref(), &mut files)?),
    };
    let emitter = Emitter::open(&args.input, emit)?;
    let list = args.input.list_deployments;
    // The threads that read the inputs also settle and report the
    // deployments at the end.
    let audit = GateDist::new(opts, configs).with_threads(args.input.parse_options().threads);
    let Analysed {
        report,
        inputs,
        index,
    } = match partial {
        Some(dest) => crate::partial::emit(&args, files, emitter, audit, dest)?,
        None => analyse(&args.input, files, "gate-dist", args.window, emitter, audit)?,
    };
    let found: Vec<&str> = report.deployments.iter().map(|d| d.name.as_str()).collect();
    if list && let Some(out) = out {
        let rows: Vec<Listed> = report
            .deployments
            .iter()
            .map(|d| Listed {
                name: &d.name,
                decisions: d.stats.decisions,
                config_source: &d.config.source,
            })
            .collect();
        out.write(|w| {
            write_list(
                w,
                &rows,
                &index,
                gatecal_cli::output::list_format(args.format, args.output.as_deref(), format),
            )
        })?;
        return check_names("--config", args.filter.config_names(), &found);
    }
    check_names("--config", args.filter.config_names(), &found)?;
    let mut deployment_svgs = Vec::new();
    if let Some(svg) = svg {
        deployment_svgs = write_svgs(&report, svg, &outputs, args.svg_scale == "log")?;
    }
    let Some(out) = out else {
        return finish_quietly(&args, &report);
    };
    out.write(|w| {
        report_renderer(
            format,
            width,
            gatecal_cli::output::run_info_with_svgs(
                args.output.as_deref(),
                args.svg.as_deref(),
                &deployment_svgs,
            ),
        )
        .gate_dist(&report, w)
    })?;
    if let Some(w) = gatecal_cli::pipeline::pooled_warning(&report.pooled)
        && !args.input.quiet
    {
        eprintln!("gate-dist: warning: {w}");
    }
    // A shard without decisions (a quiet hour) still gives its partial.
    if report.deployments.is_empty() && args.emit_partial.is_some() {
        if !args.input.quiet {
            eprintln!("gate-dist: warning: no decision counted; the partial report is empty");
        }
    } else if report.deployments.is_empty() {
        return Err(gatecal_cli::pipeline::none_in_range(
            &time_range,
            args.since.as_deref(),
            index.span,
            &inputs.ledger,
        )
        .unwrap_or_else(|| no_decisions("no filter decisions", &inputs.ledger)));
    }
    if !args.input.quiet {
        use gatecal_render::notes::{Note, collapse};
        use gatecal_render::sections::{config_notes, replay_notes};
        let mut warnings = Vec::new();
        for d in &report.deployments {
            warnings.extend(config_notes(&d.name, &d.config));
            warnings.extend(replay_notes(&d.name, &d.stats));
            for c in &d.stats.candidates {
                if let Some(e) = &c.error {
                    warnings.push(Note::warning(
                        &d.name,
                        format!(
                            "candidate {}: not valid for this deployment's config: {e}",
                            c.label
                        ),
                    ));
                }
            }
        }
        warnings.retain(Note::is_warning);
        // The same warning about several deployments, once, naming them.
        for w in collapse(&warnings) {
            gatecal_cli::term::eprint("gate-dist", gatecal_cli::term::Level::Warning, &w.body());
        }
    }
    gatecal_cli::fail_if::check_gate_dist(&args.fail_if, &report)
}

/// The checks of a run whose report is not written (`--emit-partial -`
/// without -o): `--config` names, and the `--fail-if` gates.
fn finish_quietly(args: &Args, report: &GateDistReport) -> anyhow::Result<()> {
    let found: Vec<&str> = report.deployments.iter().map(|d| d.name.as_str()).collect();
    check_names("--config", args.filter.config_names(), &found)?;
    gatecal_cli::fail_if::check_gate_dist(&args.fail_if, report)
}

/// The SVG of `--svg` (opened before reading), and with several
/// deployments one per deployment beside it (checked against the inputs
/// when written).
fn write_svgs(
    report: &GateDistReport,
    file: OutputFile,
    outputs: &Outputs,
    log_scale: bool,
) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let pmin = Some(report.options.pinned_worse_min_ms);
    // Deployments with different bars: the overall SVG draws none, and says so.
    let mut bars: Vec<(String, f64)> = report
        .deployments
        .iter()
        .filter_map(|d| d.stats.bar_ms.map(|b| (d.name.clone(), b)))
        .collect();
    bars.sort_by(|a, b| a.1.total_cmp(&b.1));
    let differ = bars.windows(2).any(|w| w[0].1 != w[1].1);
    let note = differ.then(|| {
        let list: Vec<String> = bars
            .iter()
            .take(4)
            .map(|(n, b)| format!("{n} {}", gatecal_render::num::ms(Some(*b))))
            .collect();
        format!(
            "the deployments' bars differ ({}{} ms): no bar drawn here; see each deployment's SVG",
            list.join(", "),
            if bars.len() > 4 { ", …" } else { "" }
        )
    });
    let svg = |title: &str, bins, stats: &Stats, note: Option<&str>| {
        histogram_svg(&SvgHistogram {
            title,
            bins,
            bar_ms: if note.is_some() { None } else { stats.bar_ms },
            pinned_min_ms: pmin,
            n: stats.gate_input_ms.count,
            note,
            log_scale,
        })
    };
    let names: Vec<&str> = report.deployments.iter().map(|d| d.name.as_str()).collect();
    let o = &report.overall;
    gatecal_cli::output::write_svg_set(
        file,
        outputs,
        &names,
        "gate-dist",
        || svg("all deployments", &o.histogram, &o.stats, note.as_deref()),
        |i| {
            let d = &report.deployments[i];
            svg(&d.name, &d.histogram, &d.stats, None)
        },
    )
}
