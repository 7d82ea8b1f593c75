//! Wiring: inputs and calibration files -> analysis -> render.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use gatecal_analysis::{
    CalibrationRecord, ConfigSet, ParamChanges, PassiveInputs, Recommend, RecommendOptions,
    RecommendReport, ReconstructOptions, emit, from_calibration_text, minimal_config,
};
use gatecal_cli::deployments::{Listed, check_names, write_list};
use gatecal_cli::output::{Destination, Outputs, report_format, report_renderer, table_width};
use gatecal_cli::pipeline::{
    Analysed, Emitter, analyse, input_files_since, no_decisions, take_prometheus,
};

use crate::args::Args;

/// Runs the calibration as the flags ask.
pub fn run(args: Args) -> anyhow::Result<()> {
    gatecal_cli::term::set_color(args.input.color);
    if old_peak_spelling(std::env::args_os()) && !args.input.quiet {
        gatecal_cli::term::eprint(
            "recommend",
            gatecal_cli::term::Level::Warning,
            "--peak-prefill-throughput is now --known-peak (the deployment's measured peak); \
             gate-dist's --peak-prefill-throughput overrides the config's peak, which is \
             recommend's --current-peak-prefill-throughput",
        );
    }
    if args.follow {
        return crate::follow::run(args);
    }
    let (opts, configs) = options(&args)?;
    let format = report_format(args.format, args.output.as_deref())?;
    let width = table_width(args.output.as_deref(), args.wide);
    let time_range = opts.time_range;
    // Every output is opened, and checked against the inputs, before any
    // input is read.
    let mut files = input_files_since(&args.input, args.since.as_deref())?;
    let config_paths = args.filter.config_paths();
    let calibration_paths: Vec<&str> = args
        .calibration
        .iter()
        .map(|s| match s.split_once('=') {
            Some((_, p)) => p,
            None => s.as_str(),
        })
        .collect();
    let others: Vec<(&str, &Path)> = config_paths
        .iter()
        .map(|p| ("--config", p.as_path()))
        .chain(
            calibration_paths
                .iter()
                .map(|p| ("--calibration", Path::new(*p))),
        )
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
            Destination::Stdout => bail!("--svg -: give a file (stdout holds the report)"),
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
    let mut emit_configs = Vec::with_capacity(args.emit_config.len());
    for spec in &args.emit_config {
        let (dep, path) = emit_config_spec(spec)?;
        let dest = outputs.open("--emit-config", Some(Path::new(path)), &mut files)?;
        emit_configs.push((dep, path, dest));
    }
    let emit_calibration = match &args.emit_calibration {
        Some(spec) => {
            let (dep, path) = emit_spec("--emit-calibration", spec)?;
            let dest = outputs.open("--emit-calibration", Some(Path::new(path)), &mut files)?;
            Some((dep, path, dest))
        }
        None => None,
    };
    let emitter = Emitter::open(&args.input, emit)?;
    let prometheus = take_prometheus(&mut files, &args.input, args.max_prometheus_mib << 20)?;
    let mut recommend =
        Recommend::new(opts, configs).with_threads(args.input.parse_options().threads);
    for (_, series) in prometheus {
        recommend.push_prometheus(series);
    }
    let list = args.input.list_deployments;
    let Analysed {
        report,
        inputs,
        index,
    } = match partial {
        Some(dest) => {
            let a = analyse(
                &args.input,
                files,
                "recommend",
                args.window,
                emitter,
                crate::partial::PartialRun(recommend),
            )?;
            Analysed {
                report: crate::partial::write(a.report, dest)?,
                inputs: a.inputs,
                index: a.index,
            }
        }
        None => analyse(
            &args.input,
            files,
            "recommend",
            args.window,
            emitter,
            recommend,
        )?,
    };
    let found: Vec<&str> = report.deployments.iter().map(|d| d.name.as_str()).collect();
    let check = || {
        check_names("--config", args.filter.config_names(), &found)?;
        check_names(
            "--calibration",
            args.calibration
                .iter()
                .filter_map(|c| c.split_once('=').map(|(d, _)| d)),
            &found,
        )
    };
    if list {
        let rows: Vec<Listed> = report
            .deployments
            .iter()
            .map(|d| Listed {
                name: &d.name,
                decisions: d.current.decisions,
                config_source: &d.current.config.source,
            })
            .collect();
        let Some(out) = out else { return check() };
        out.write(|w| {
            write_list(
                w,
                &rows,
                &index,
                gatecal_cli::output::list_format(args.format, args.output.as_deref(), format),
            )
        })?;
        return check();
    }
    check()?;
    for (dep, path, dest) in emit_configs {
        emit_config(&args, &report, dep, path, dest)?;
    }
    if let Some((dep, path, dest)) = emit_calibration {
        emit_calibration_record(&args, &report, dep, path, dest)?;
    }
    let mut deployment_svgs = Vec::new();
    if let Some(file) = svg {
        deployment_svgs = write_svgs(&report, file, &outputs)?;
    }
    if let Some(out) = out {
        out.write(|w| {
            let run = gatecal_render::markdown::RunInfo {
                span: index.span,
                ..gatecal_cli::output::run_info_with_svgs(
                    args.output.as_deref(),
                    args.svg.as_deref(),
                    &deployment_svgs,
                )
            };
            report_renderer(format, width, run).recommend(&report, w)
        })?;
    }
    if let Some(w) = gatecal_cli::pipeline::pooled_warning(&report.pooled)
        && !args.input.quiet
    {
        eprintln!("recommend: warning: {w}");
    }
    if let Some(w) = gatecal_render::sections::prometheus_duplicates_note(&report.input.duplicates)
        && !args.input.quiet
    {
        gatecal_cli::term::eprint("recommend", gatecal_cli::term::Level::Warning, &w);
    }
    if let Some(w) = gatecal_render::sections::vllm_cut_note(&report.vllm_cut)
        && !args.input.quiet
    {
        gatecal_cli::term::eprint("recommend", gatecal_cli::term::Level::Warning, &w);
    }
    // A shard without decisions or stats lines still gives its partial.
    if report.deployments.is_empty() && args.emit_partial.is_some() {
        if !args.input.quiet {
            eprintln!(
                "recommend: warning: no decision or vLLM stats line counted; the partial report is empty"
            );
        }
    } else if report.deployments.is_empty() {
        return Err(gatecal_cli::pipeline::none_in_range(
            &time_range,
            args.since.as_deref(),
            index.span,
            &inputs.ledger,
        )
        .unwrap_or_else(|| no_decisions("no filter decisions or vLLM stats", &inputs.ledger)));
    }
    gatecal_cli::fail_if::check_recommend(&args.fail_if, &report)
}

/// The calibration's options and the configs in force, as the flags give
/// them (the calibration files read).
pub(crate) fn options(args: &Args) -> anyhow::Result<(RecommendOptions, ConfigSet)> {
    if let Some(p) = args.known_peak {
        anyhow::ensure!(p > 0.0 && p.is_finite(), "--known-peak must be > 0");
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
    let opts = RecommendOptions {
        reconstruct: ReconstructOptions {
            max_staleness_s: args.max_staleness,
            ..ReconstructOptions::default()
        },
        pinned_worse_min_ms: args.pinned_worse_min,
        window_s: args.window,
        user_peak: args.known_peak,
        calibration,
        candidates: args.candidates.candidates()?,
        time_range: gatecal_cli::time::time_range_in(
            args.since.as_deref(),
            args.until.as_deref(),
            gatecal_cli::pipeline::span_for(
                &args.input,
                "recommend",
                args.since.as_deref(),
                args.until.as_deref(),
            )?,
        )?,
        block_sizes: args.filter.block_sizes()?,
        objective: args.objective.into(),
        choose: args.choose.clone(),
        mode: args.mode.map(Into::into),
    };
    Ok((opts, configs))
}

/// `--svg`: every deployment's predicted TTFT in FILE (stacked), and with
/// several one file per deployment beside it.
fn write_svgs(
    report: &RecommendReport,
    file: gatecal_cli::output::OutputFile,
    outputs: &Outputs,
) -> anyhow::Result<Vec<(String, std::path::PathBuf)>> {
    use gatecal_render::ttft_svg::{predicted_ttft_svg, stacked_svg};
    let names: Vec<&str> = report.deployments.iter().map(|d| d.name.as_str()).collect();
    let one = |i: usize| predicted_ttft_svg(&report.deployments[i]);
    gatecal_cli::output::write_svg_set(
        file,
        outputs,
        &names,
        "recommend",
        || stacked_svg(&report.deployments),
        one,
    )
}

/// Whether the command line spells `--known-peak` by its old name
/// (before any `--`).
fn old_peak_spelling(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .any(|a| a == "--peak-prefill-throughput" || a.starts_with("--peak-prefill-throughput="))
}

/// `--emit-config [DEPLOYMENT=]FILE`: the deployment named, if any, and the file.
fn emit_config_spec(spec: &str) -> anyhow::Result<(Option<&str>, &str)> {
    emit_spec("--emit-config", spec)
}

/// `FLAG [DEPLOYMENT=]FILE`: the deployment named, if any, and the file.
fn emit_spec<'a>(flag: &str, spec: &'a str) -> anyhow::Result<(Option<&'a str>, &'a str)> {
    match spec.split_once('=') {
        Some((d, p)) if !d.is_empty() && !p.is_empty() => Ok((Some(d), p)),
        Some(_) => bail!("{flag} {spec:?}: expected FILE or DEPLOYMENT=FILE"),
        None => Ok((None, spec)),
    }
}

/// The deployment `DEPLOYMENT=` names, or the only one.
fn pick_deployment<'r>(
    flag: &str,
    report: &'r RecommendReport,
    dep: Option<&str>,
    out: &str,
) -> anyhow::Result<&'r gatecal_analysis::DeploymentRec> {
    match dep {
        Some(name) => report
            .deployments
            .iter()
            .find(|d| d.name == name)
            .with_context(|| format!("{flag} {name}={out}: no deployment {name:?} in the report")),
        None => match report.deployments.as_slice() {
            [d] => Ok(d),
            [] => bail!("{flag} {out}: no deployment in the input"),
            many => bail!(
                "{flag} {out}: {} deployments ({}); name one with DEPLOYMENT=FILE",
                many.len(),
                many.iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

/// `--emit-calibration [DEPLOYMENT=]FILE`: the router's calibration record
/// from the deployment's passive peak estimate.
fn emit_calibration_record(
    args: &Args,
    report: &RecommendReport,
    dep: Option<&str>,
    out: &str,
    dest: Destination,
) -> anyhow::Result<()> {
    let d = pick_deployment("--emit-calibration", report, dep, out)?;
    let peak = &d.peak_prefill_throughput;
    let estimate = gatecal_analysis::PeakEstimate {
        value: peak.value,
        source: peak.source,
        samples: peak.samples,
        spread_low: peak.spread_low,
        spread_high: peak.spread_high,
        interval: peak.interval,
        engines: 0,
        method: peak.method.clone(),
        estimates: Vec::new(),
    };
    let fingerprint = args
        .calibration_fingerprint
        .clone()
        .unwrap_or_else(|| format!("gatecal-passive:{}", d.name));
    let record = CalibrationRecord::from_passive(&PassiveInputs {
        peak: &estimate,
        median_ttft_ms: d.observed_ttft_ms.p50,
        ttft_requests: d.observed_ttft_ms.n,
        ttft_source: &d.observed_ttft_ms.source,
        chunk_tokens: args.chunk_tokens.unwrap_or(0),
        fingerprint: &fingerprint,
    })
    .map_err(|e| anyhow::anyhow!("--emit-calibration {out}: {}: {e}", d.name))?;
    if let Some(why) = record.unusable_reason(&fingerprint)
        && !args.input.quiet
    {
        eprintln!(
            "recommend: warning: --emit-calibration {out}: the filter will not apply it: {why}"
        );
    }
    dest.write(|w| w.write_all(record.to_json().as_bytes()))
        .with_context(|| format!("--emit-calibration {out}"))
}

/// `--emit-config [DEPLOYMENT=]FILE`: the deployment's config file written
/// back with the recommended parameters (to `dest`, opened with the other
/// outputs before any input was read).
fn emit_config(
    args: &Args,
    report: &RecommendReport,
    dep: Option<&str>,
    out: &str,
    dest: Destination,
) -> anyhow::Result<()> {
    let d = pick_deployment("--emit-config", report, dep, out)?;
    let Some(paste) = &d.paste else {
        let why = d
            .warnings
            .iter()
            .find(|w| w.starts_with("no recommendation") || w.starts_with("--choose"))
            .map_or("no config to write", String::as_str);
        bail!(
            "--emit-config {out}: nothing to write for {}: {why}",
            d.name
        );
    };
    if let Some(label) = &args.choose
        && !d
            .rows
            .iter()
            .any(|r| r.error.is_none() && (r.label == *label || r.kind.as_str() == label))
    {
        bail!(
            "--emit-config {out}: --choose {label:?} names no valid row of {} (rows: {})",
            d.name,
            d.rows
                .iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let changes = ParamChanges {
        peak_prefill_throughput: paste.params.peak_prefill_throughput,
        max_ttft_penalty_ms: paste.params.max_ttft_penalty_ms,
        penalty_mode: paste.params.penalty_mode,
    };
    let text = match args.filter.config_file(&d.name) {
        Some(path) => {
            let text = gatecal_cli::config_file::read("--config", path)?;
            let (new, _) = emit(&text, &changes, |_, _| true)
                .map_err(|e| anyhow::anyhow!("--emit-config {out} from {path}: {e}"))?;
            new
        }
        None => minimal_config(&changes),
    };
    dest.write(|w| w.write_all(text.as_bytes()))
        .with_context(|| format!("--emit-config {out}"))
}
