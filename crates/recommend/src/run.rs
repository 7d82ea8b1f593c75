//! Wiring: inputs and calibration files -> analysis -> render.

use std::cell::RefCell;
use std::collections::BTreeMap;

use anyhow::{Context, bail};
use gatecal_analysis::recommend::{Recommend, RecommendOptions};
use gatecal_analysis::reconstruct::ReconstructOptions;
use gatecal_analysis::throughput::from_calibration_text;
use gatecal_cli::output::{resolve_format, stdout_is_terminal, write_output};
use gatecal_cli::pipeline::{Emitter, decision_input, note_empty, read_inputs, summary};
use gatecal_render::renderer;

use crate::args::Args;

/// Runs the calibration as the flags ask.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(p) = args.peak_prefill_throughput {
        anyhow::ensure!(
            p > 0.0 && p.is_finite(),
            "--peak-prefill-throughput must be > 0"
        );
    }
    let mut filter = args.filter.clone();
    filter.peak_prefill_throughput = args.current_peak_prefill_throughput;
    let configs = filter.config_set()?;
    let mut calibration = BTreeMap::new();
    for spec in &args.calibration {
        let (dep, path) = match spec.split_once('=') {
            Some((d, p)) if !d.is_empty() && !p.is_empty() => (d.to_string(), p),
            Some(_) => bail!("--calibration {spec:?}: expected FILE or DEPLOYMENT=FILE"),
            None => (String::new(), spec.as_str()),
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --calibration {path}"))?;
        let est = from_calibration_text(&text).with_context(|| {
            format!(
                "{path}: no PEAK_PREFILL_THROUGHPUT= line and no TTFT samples (columns prompt_tokens and ttft_ms/ttft_s)"
            )
        })?;
        calibration.insert(dep, est);
    }
    let format = resolve_format(
        args.format.as_deref(),
        stdout_is_terminal(args.output.as_deref()),
    )?;
    let opts = RecommendOptions {
        reconstruct: ReconstructOptions {
            max_staleness_s: args.max_staleness,
            ..ReconstructOptions::default()
        },
        pinned_worse_min_ms: args.pinned_worse_min,
        window_s: args.window,
        user_peak: args.peak_prefill_throughput,
        calibration,
    };
    let emitter = Emitter::open(&args.input)?;
    let mut recommend = Recommend::new(opts, configs);
    if let Some(e) = &emitter {
        recommend = recommend.with_records(e.sink());
    }
    let emit = emitter.is_some();
    let rec = RefCell::new(recommend);
    let ledger = read_inputs(
        &args.input,
        |d| rec.borrow_mut().push_decision(decision_input(d, emit)),
        |s| rec.borrow_mut().push_vllm(s),
    )?;
    let report = rec.into_inner().finish(summary(&ledger));
    if let Some(e) = emitter {
        e.finish()?;
    }
    write_output(args.output.as_deref(), |w| {
        renderer(format).recommend(&report, w)
    })?;
    if report.deployments.is_empty() {
        note_empty(
            &args.input,
            "recommend: no decisions or vLLM stats found",
            &report.input,
        );
    }
    Ok(())
}
