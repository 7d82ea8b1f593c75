//! Wiring: inputs -> analysis -> render.

use std::path::{Path, PathBuf};

use anyhow::Context;
use gatecal_analysis::gate_dist::{GateDist, GateDistReport};
use gatecal_analysis::stats::Stats;
use gatecal_cli::output::{resolve_format, stdout_is_terminal, write_output};
use gatecal_cli::pipeline::{Emitter, decision_input, note_empty, read_inputs, summary};
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
    let emitter = Emitter::open(&args.input)?;
    let mut audit = GateDist::new(opts, configs);
    if let Some(e) = &emitter {
        audit = audit.with_records(e.sink());
    }
    let emit = emitter.is_some();
    let ledger = read_inputs(&args.input, |d| audit.push(decision_input(d, emit)), |_| {})?;
    let report = audit.finish(summary(&ledger));
    if let Some(e) = emitter {
        e.finish()?;
    }
    if let Some(svg) = &args.svg {
        write_svgs(&report, svg)?;
    }
    write_output(args.output.as_deref(), |w| {
        renderer(format).gate_dist(&report, w)
    })?;
    if report.deployments.is_empty() {
        note_empty(
            &args.input,
            "gate-dist: no filter decisions found",
            &report.input,
        );
    }
    Ok(())
}

fn write_svgs(report: &GateDistReport, path: &Path) -> anyhow::Result<()> {
    let pmin = Some(report.options.pinned_worse_min_ms);
    let write = |p: &Path, title: &str, bins, stats: &Stats| {
        let svg = histogram_svg(&SvgHistogram {
            title,
            bins,
            bar_ms: stats.bar_ms,
            pinned_min_ms: pmin,
            n: stats.gate_input_ms.count,
        });
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))
    };
    if let [d] = report.deployments.as_slice() {
        return write(path, &d.name, &d.histogram, &d.stats);
    }
    let o = &report.overall;
    write(path, "all deployments", &o.histogram, &o.stats)?;
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
        write(&p, &d.name, &d.histogram, &d.stats)?;
    }
    Ok(())
}
