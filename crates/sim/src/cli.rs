//! The `epp-sim` command line.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use gatecal_sim::{
    Scenario, Summary, TraceWriter, TruthRecord, Variant, run, run_streaming, scenario,
    scenario_names, to_jaeger, to_tempo, write_traces,
};

/// Synthetic llm-d EPP logs (and vLLM logs) with the ground truth of every
/// prefix-cache-affinity-filter decision.
#[derive(Parser, Debug)]
#[command(name = "epp-sim", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    generate: GenArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the named scenarios.
    List,
    /// Regenerate the committed fixtures under DIR.
    GenFixtures {
        /// Fixture directory (e.g. `fixtures`).
        dir: PathBuf,
    },
}

#[derive(Args, Debug)]
struct GenArgs {
    /// Print a shell completion script or the man page to stdout, and exit.
    #[arg(long, value_name = "KIND", value_enum)]
    generate: Option<Completion>,
    /// Scenario name (see `epp-sim list`).
    #[arg(long, default_value = "glm-like")]
    scenario: String,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// EPP log path (its folder is created if missing); truth goes to
    /// `<stem>.truth.jsonl`, the summary to
    /// `<stem>.summary.json`, vLLM logs to `<stem>.vllm/<pod>.log`, the engines'
    /// Prometheus series to `<stem>.prometheus/<query>.json`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// About this many requests (stretches the scenario's duration).
    #[arg(long)]
    requests: Option<u64>,
    /// Simulated duration in seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Keep writing (repeating the scenario) until the log has this many
    /// bytes; vLLM logs are then skipped.
    #[arg(long)]
    target_bytes: Option<u64>,
    /// Frame lines as `kubectl logs --timestamps`.
    #[arg(long)]
    timestamps: bool,
    /// Frame lines as `kubectl logs --prefix`.
    #[arg(long)]
    prefix: bool,
    /// Add noise: klog lines, a Go panic, empty lines, invalid UTF-8, a truncated last line.
    #[arg(long)]
    noise: bool,
    /// Older encoding: `Level(-N)` levels and RFC3339 second-precision `ts`.
    #[arg(long)]
    old_encoding: bool,
    /// Also write the `Before running … plugins` endpoint dumps.
    #[arg(long)]
    full_dumps: bool,
    /// Also write the prefix producers' `-v=5` lines (`Found cached servers`
    /// and the prefix scorer's scores, or the precise producer's `Produce
    /// completed`).
    #[arg(long)]
    producers_v5: bool,
    /// Do not write vLLM logs.
    #[arg(long)]
    no_vllm: bool,
    /// Also write the EPP's trace spans of the decisions as OTLP/JSON lines
    /// (the Collector's `file` exporter) to FILE, default `<stem>.traces.jsonl`
    /// beside `--out`.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    #[allow(clippy::option_option)]
    traces: Option<Option<PathBuf>>,
    /// Share of requests whose traces are kept (head sampling, per request,
    /// deterministic in the seed), 0 to 1; the EPP's default sampler keeps 0.1.
    #[arg(long, value_name = "RATIO", default_value_t = 0.1)]
    trace_sample_ratio: f64,
    /// Set a filter parameter (EPP name: maxTTFTPenaltyMs,
    /// peakPrefillThroughput, penaltyMode, affinityThreshold,
    /// explorationProbability, ttftSource, maxInFlightRequestsDelta) on every
    /// deployment, or `DEPLOYMENT:KEY=VALUE` on one; repeatable. The
    /// workload stays the same (a paired run).
    #[arg(long = "set", value_name = "[DEPLOYMENT:]KEY=VALUE")]
    set: Vec<String>,
    /// Seed of the routing's random stream alone (candidate order, missing
    /// signals, exploration, tie-breaks), default `--seed`. The workload
    /// stays that of `--seed`: two runs differing only in it show how much
    /// the result moves with the routing's randomness.
    #[arg(long, value_name = "N")]
    routing_seed: Option<u64>,
    /// Replay a request trace (Mooncake JSON lines: timestamp ms,
    /// input_length, output_length, hash_ids of 512-token blocks) as the
    /// open-loop arrivals of the scenario's deployment (see
    /// `--trace-deployment`); the other deployments are left out.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["requests", "duration"])]
    workload_trace: Option<PathBuf>,
    /// The deployment of `--scenario` that serves `--workload-trace`
    /// (default: the first).
    #[arg(long, value_name = "NAME", requires = "workload_trace")]
    trace_deployment: Option<String>,
}

/// What `--generate` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Completion {
    CompleteBash,
    CompleteZsh,
    CompleteFish,
    Man,
}

fn completion(kind: Completion) -> Result<()> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    let shell = match kind {
        Completion::CompleteBash => clap_complete::Shell::Bash,
        Completion::CompleteZsh => clap_complete::Shell::Zsh,
        Completion::CompleteFish => clap_complete::Shell::Fish,
        Completion::Man => {
            cmd.build();
            return clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("writing the man page");
        }
    };
    // clap_complete panics on a write error (a closed pipe): write to
    // memory first.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "epp-sim", &mut buf);
    out.write_all(&buf).context("writing the completion script")
}

/// Parses the command line and runs it.
pub fn run_cli() -> Result<()> {
    let cli = Cli::parse();
    if let Some(kind) = cli.generate.generate {
        return completion(kind);
    }
    match cli.command {
        Some(Command::List) => list(),
        Some(Command::GenFixtures { dir }) => gen_fixtures(&dir),
        None => generate(&cli.generate),
    }
}

fn list() -> Result<()> {
    let mut out = std::io::stdout().lock();
    for name in scenario_names()
        .iter()
        .chain(gatecal_sim::failure_scenario_names())
    {
        if let Some(s) = scenario(name) {
            writeln!(out, "{name}\t{}", s.description)?;
        }
    }
    Ok(())
}

fn load(name: &str, requests: Option<u64>, duration: Option<f64>) -> Result<Scenario> {
    let Some(mut s) = scenario(name) else {
        bail!(
            "unknown scenario {name:?}; known: {}, {}",
            scenario_names().join(", "),
            gatecal_sim::failure_scenario_names().join(", ")
        );
    };
    if let Some(d) = duration {
        if !(d > 0.0 && d.is_finite()) {
            bail!("--duration must be a positive number of seconds, got {d}");
        }
        s = s.with_duration(d);
    }
    if let Some(n) = requests {
        s = s.with_requests(n);
    }
    Ok(s)
}

/// Applies one `--set [DEPLOYMENT:]KEY=VALUE`.
fn apply_set(s: &mut Scenario, setting: &str) -> Result<()> {
    let Some((lhs, value)) = setting.split_once('=') else {
        bail!("--set {setting:?}: expected [DEPLOYMENT:]KEY=VALUE");
    };
    let (deployment, key) = match lhs.rsplit_once(':') {
        Some((d, k)) => (Some(d), k),
        None => (None, lhs),
    };
    if key.is_empty() || value.is_empty() || deployment.is_some_and(str::is_empty) {
        bail!("--set {setting:?}: expected [DEPLOYMENT:]KEY=VALUE");
    }
    s.set_filter_param(deployment, key, value)
        .map_err(|e| anyhow::anyhow!("--set {setting:?}: {e}"))
}

fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "epp".to_string());
    out.with_file_name(format!("{stem}{suffix}"))
}

fn create(path: &Path) -> Result<BufWriter<File>> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(BufWriter::new(f))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn summary_json(s: &Summary) -> Result<Vec<u8>> {
    let mut v = serde_json::to_vec_pretty(s).context("encoding the summary")?;
    v.push(b'\n');
    Ok(v)
}

/// Writes the Prometheus `query_range` responses, one file per query.
fn write_prometheus(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, bytes) in files {
        write_file(&dir.join(name), bytes)?;
    }
    Ok(())
}

fn write_vllm(dir: &Path, logs: &[(String, Vec<u8>)]) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Pod names change with the seed: drop the logs of an earlier run.
    let entries = fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries {
        let p = e
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        if p.extension().is_some_and(|x| x == "log") {
            fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    for (pod, bytes) in logs {
        write_file(&dir.join(format!("{pod}.log")), bytes)?;
    }
    Ok(())
}

/// Writes the trace spans of the decisions in the truth file `truth`.
fn write_traces_file(
    s: &Scenario,
    seed: u64,
    ratio: f64,
    truth: &Path,
    path: &Path,
) -> Result<u64> {
    use std::io::BufRead;
    let r = std::io::BufReader::new(
        File::open(truth).with_context(|| format!("reading {}", truth.display()))?,
    );
    let mut w = TraceWriter::new(create(path)?, s, seed, ratio);
    for line in r.lines() {
        let line = line.with_context(|| format!("reading {}", truth.display()))?;
        let rec: TruthRecord =
            serde_json::from_str(&line).with_context(|| format!("reading {}", truth.display()))?;
        w.push(&rec)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let (_, n) = w
        .finish()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(n)
}

fn generate(a: &GenArgs) -> Result<()> {
    let mut s = load(&a.scenario, a.requests, a.duration)?;
    if let Some(path) = &a.workload_trace {
        let trace = gatecal_sim::read_trace(path)?;
        if trace.is_empty() {
            bail!("{}: no requests", path.display());
        }
        let name = match &a.trace_deployment {
            Some(n) => n.clone(),
            None => s.deployments[0].name.clone(),
        };
        let known: Vec<String> = s.deployments.iter().map(|d| d.name.clone()).collect();
        s = s
            .with_workload_trace(&name, trace.into())
            .with_context(|| {
                format!(
                    "--trace-deployment {name:?}: scenario {} has {}",
                    a.scenario,
                    known.join(", ")
                )
            })?;
    }
    for setting in &a.set {
        apply_set(&mut s, setting)?;
    }
    if let Some(r) = a.routing_seed {
        s = s.with_routing_seed(r);
    }
    let variant = Variant {
        timestamps: a.timestamps,
        prefix: a.prefix,
        noise: a.noise,
        old_encoding: a.old_encoding,
        full_dumps: a.full_dumps,
        producers_v5: a.producers_v5,
    };
    let vllm = !a.no_vllm && a.target_bytes.is_none();
    if !(0.0..=1.0).contains(&a.trace_sample_ratio) {
        bail!(
            "--trace-sample-ratio must be between 0 and 1, got {}",
            a.trace_sample_ratio
        );
    }
    if a.traces.is_some() && a.out.is_none() {
        bail!("--traces needs --out (the traces are made from the truth written beside it)");
    }
    match &a.out {
        Some(out) => {
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            let mut log = create(out)?;
            let truth_path = sibling(out, ".truth.jsonl");
            let mut truth = create(&truth_path)?;
            let r = run_streaming(
                &s,
                a.seed,
                &variant,
                a.target_bytes,
                vllm,
                &mut log,
                Some(&mut truth),
            )
            .with_context(|| format!("writing {} and {}", out.display(), truth_path.display()))?;
            log.flush()
                .with_context(|| format!("writing {}", out.display()))?;
            truth
                .flush()
                .with_context(|| format!("writing {}", truth_path.display()))?;
            write_file(&sibling(out, ".summary.json"), &summary_json(&r.summary)?)?;
            if vllm {
                write_vllm(&sibling(out, ".vllm"), &r.vllm_logs)?;
                write_prometheus(&sibling(out, ".prometheus"), &r.prometheus)?;
            }
            if let Some(t) = &a.traces {
                let path = t.clone().unwrap_or_else(|| sibling(out, ".traces.jsonl"));
                let n = write_traces_file(&s, a.seed, a.trace_sample_ratio, &truth_path, &path)?;
                eprintln!("epp-sim: {n} traced decisions -> {}", path.display());
            }
            eprintln!(
                "epp-sim: {} bytes, {} decisions -> {}",
                r.epp_bytes,
                r.records,
                out.display()
            );
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = BufWriter::new(stdout.lock());
            run_streaming(&s, a.seed, &variant, a.target_bytes, false, &mut lock, None)
                .context("writing the log to stdout")?;
            lock.flush().context("writing the log to stdout")?;
        }
    }
    Ok(())
}

fn truth_jsonl(truth: &[TruthRecord]) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    for t in truth {
        serde_json::to_writer(&mut v, t).context("encoding truth")?;
        v.push(b'\n');
    }
    Ok(v)
}

/// The committed fixtures: small samples of each scenario (seed 1).
fn fixture_scenarios() -> Result<Vec<(&'static str, Scenario)>> {
    // The whole run is simulated (warm caches, drifted prompts); the log
    // keeps a short window so that the files stay small. The windows are
    // chosen (for seed 1) to include each scenario's rarer outcomes:
    // exploration and missing signal (balanced), load overrides
    // (glm-like-v1, latency-predictor, whose window also holds a
    // `math.MaxFloat64` penalty).
    Ok(vec![
        (
            "glm-like",
            load("glm-like", None, None)?.with_log_window(0.88, 0.95),
        ),
        (
            "glm-like-v1",
            load("glm-like-v1", None, None)?.with_log_window(0.5956, 0.604),
        ),
        (
            "eight-deployments",
            load("eight-deployments", None, Some(600.0))?.with_log_window(0.85, 0.855),
        ),
        (
            "balanced",
            load("balanced", None, None)?.with_log_window(0.993, 0.9985),
        ),
        (
            "pd-disagg",
            load("pd-disagg", None, None)?.with_log_window(0.50, 0.508),
        ),
        (
            "latency-predictor",
            load("latency-predictor", None, None)?.with_log_window(0.9933, 0.9995),
        ),
    ])
}

/// The variant samples: (directory, scenario, window, variant).
fn variant_samples() -> [(&'static str, &'static str, (f64, f64), Variant); 6] {
    let v = Variant::default;
    [
        (
            "timestamps",
            "glm-like",
            (0.90, 0.915),
            Variant {
                timestamps: true,
                ..v()
            },
        ),
        (
            "prefix",
            "eight-deployments",
            (0.85, 0.855),
            Variant {
                prefix: true,
                ..v()
            },
        ),
        (
            "prefix-timestamps",
            "eight-deployments",
            (0.85, 0.855),
            Variant {
                prefix: true,
                timestamps: true,
                ..v()
            },
        ),
        (
            "noise",
            "glm-like",
            (0.90, 0.935),
            Variant { noise: true, ..v() },
        ),
        (
            "old-encoding",
            "glm-like",
            (0.90, 0.915),
            Variant {
                old_encoding: true,
                ..v()
            },
        ),
        (
            "full-dumps",
            "glm-like",
            (0.90, 0.908),
            Variant {
                full_dumps: true,
                ..v()
            },
        ),
    ]
}

/// The trace sample ratio of the fixtures' `traces.jsonl`.
const FIXTURE_TRACE_RATIO: f64 = 0.5;

fn gen_fixtures(dir: &Path) -> Result<()> {
    let seed = 1;
    for (name, s) in fixture_scenarios()? {
        let out = run(&s, seed, &Variant::default());
        let d = dir.join(name);
        fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        write_file(&d.join("epp.log"), &out.epp_log)?;
        write_file(&d.join("truth.jsonl"), &truth_jsonl(&out.truth)?)?;
        write_file(&d.join("summary.json"), &summary_json(&out.summary)?)?;
        let vd = d.join("vllm");
        if vd.exists() {
            fs::remove_dir_all(&vd).with_context(|| format!("clearing {}", vd.display()))?;
        }
        write_vllm(&vd, &out.vllm_logs)?;
        let (traces, _) = write_traces(Vec::new(), &s, &out.truth, seed, FIXTURE_TRACE_RATIO)
            .context("writing traces")?;
        write_file(&d.join("traces.jsonl"), &traces)?;
        if name == "glm-like" {
            let otlp = String::from_utf8_lossy(&traces);
            write_file(
                &d.join("traces.jaeger.json"),
                to_jaeger(&otlp, 12).as_bytes(),
            )?;
            write_file(&d.join("traces.tempo.json"), to_tempo(&otlp, 12).as_bytes())?;
        }
        let pd = d.join("prometheus");
        if pd.exists() {
            fs::remove_dir_all(&pd).with_context(|| format!("clearing {}", pd.display()))?;
        }
        write_prometheus(&pd, &out.prometheus)?;
    }
    let vdir = dir.join("variants");
    for (label, name, (from, to), variant) in variant_samples() {
        let s = load(name, None, None)?.with_log_window(from, to);
        let out = run(&s, seed, &variant);
        let d = vdir.join(label);
        fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        write_file(&d.join("epp.log"), &out.epp_log)?;
        write_file(&d.join("truth.jsonl"), &truth_jsonl(&out.truth)?)?;
        write_file(&d.join("summary.json"), &summary_json(&out.summary)?)?;
    }
    Ok(())
}
