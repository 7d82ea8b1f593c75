//! Wiring: inputs -> analysis -> render.

use std::path::{Path, PathBuf};

use anyhow::Context;
use gatecal_analysis::gate_dist::{GateDist, GateDistReport};
use gatecal_analysis::input::DecisionInput;
use gatecal_cli::output::{StrictFailure, resolve_format, stdout_is_terminal, write_output};
use gatecal_cli::pipeline::{read_inputs, summary};
use gatecal_render::renderer;
use gatecal_render::svg::{SvgHistogram, histogram_svg};

use crate::args::Args;

/// Runs the audit as the flags ask.
pub fn run(args: Args) -> anyhow::Result<()> {
    let opts = args.options()?;
    let mut filter = args.filter.clone();
    filter.peak_prefill_throughput = args.peak_prefill_throughput;
    let configs = filter.config_set()?;
    let format = resolve_format(
        args.format.as_deref(),
        stdout_is_terminal(args.output.as_deref()),
    )?;
    let mut audit = GateDist::new(opts, configs);
    let ledger = read_inputs(&args.input, |d| audit.push(DecisionInput::from(d)), |_| {})?;
    let report = audit.finish(summary(&ledger));
    if let Some(svg) = &args.svg {
        write_svgs(&report, svg)?;
    }
    write_output(args.output.as_deref(), |w| {
        renderer(format).gate_dist(&report, w)
    })?;
    if report.deployments.is_empty() && !args.input.quiet {
        eprintln!(
            "gate-dist: no filter decisions found in {} line(s): are these EPP logs at -v=4?",
            report.input.lines_total
        );
    }
    if args.input.strict && report.input.lines_malformed > 0 {
        return Err(StrictFailure(format!(
            "{} malformed line(s)",
            report.input.lines_malformed
        ))
        .into());
    }
    Ok(())
}

fn write_svgs(report: &GateDistReport, path: &Path) -> anyhow::Result<()> {
    let pmin = Some(report.options.pinned_worse_min_ms);
    let write = |p: &Path, svg: String| {
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))
    };
    if let [d] = report.deployments.as_slice() {
        return write(
            path,
            histogram_svg(&SvgHistogram {
                title: &d.name,
                bins: &d.histogram,
                bar_ms: d.stats.bar_ms,
                pinned_min_ms: pmin,
                n: d.stats.gate_input_ms.count,
            }),
        );
    }
    write(
        path,
        histogram_svg(&SvgHistogram {
            title: "all deployments",
            bins: &report.overall.histogram,
            bar_ms: report.overall.stats.bar_ms,
            pinned_min_ms: pmin,
            n: report.overall.stats.gate_input_ms.count,
        }),
    )?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gate-dist".into());
    for d in &report.deployments {
        let safe: String = d
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let p: PathBuf = path.with_file_name(format!("{stem}-{safe}.svg"));
        write(
            &p,
            histogram_svg(&SvgHistogram {
                title: &d.name,
                bins: &d.histogram,
                bar_ms: d.stats.bar_ms,
                pinned_min_ms: pmin,
                n: d.stats.gate_input_ms.count,
            }),
        )?;
    }
    Ok(())
}
