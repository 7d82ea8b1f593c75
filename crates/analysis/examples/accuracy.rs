//! The predicted TTFT's accuracy on held-out simulator runs (`just
//! accuracy`; docs/methodology.md §8).
//!
//! For every scenario and seed, the simulator runs the scenario under the
//! config in force; its `-v=4` log is parsed, the workload inferred and the
//! engine fitted to its observed first tokens, deployment by deployment, and
//! each candidate config is predicted from that log alone. The truth is the
//! simulator's paired run of the same workload under the candidate (every
//! deployment set at once: deployments share nothing but the log). The
//! candidates: the config in force (`current`, the self-check), a lower
//! static bar (a quarter, at least 500 ms), a higher one (twice), the
//! break-even rule (`matchedTokens`, no ceiling) and the corrected peak (the
//! engine's effective saturated rate).
//!
//! Seeds `--fit-seeds` (1–4) calibrate the model-error part of the 90 %
//! interval: the 5th and 95th percentiles of `ln(predicted / true)` per
//! quantile over all their scenarios and candidates, each scenario (and the
//! trace) weighing as one whatever its number of cases (split conformal;
//! the library's `MODEL_ERROR_LN90` is such a calibration). Seeds `--seeds`
//! (5–8) are held out: their errors, the coverage of the interval
//! calibrated in this run and of the library's interval (`predict`) are
//! what the summary reports, beside the seed-to-seed spread of the truth.
//!
//! Users wait for their answers in the simulator (`Scenario::with_users`),
//! so paired runs carry the same requests; `--open-slots` keeps the
//! default closed loop (a slot whose sessions all wait is dropped).
//!
//! The Mooncake trace (`--trace FILE`, or `GATECAL_MOONCAKE_TRACE`; skipped
//! when absent) is replayed as the open-loop arrivals of `--trace-scenario`'s
//! first deployment (default `balanced`), exactly as `epp-sim --scenario
//! balanced --workload-trace FILE` does; the seed then only moves routing.
//!
//! `--routing-floor N` measures instead the floor no prediction can beat:
//! for every scenario, held-out seed and candidate, the simulator's run is
//! repeated with `N` other routing seeds (`Scenario::with_routing_seed`:
//! the same workload, only the routing's tie-breaks, candidate order,
//! missing signals and exploration draws differ), and the table gives how
//! far each quantile moves from the run with the default routing seed:
//! the share of (case, other seed) pairs within the target (10 % for p50
//! and p90, 15 % for p99) and the median and largest move. No log is
//! parsed and nothing is predicted.
//!
//! `--no-decode-share` fits the engine without the decode share of its
//! steps (each request decoding on its endpoint for a fitted time after
//! its first token; methodology §8), as it was before that was modelled,
//! to measure what it changes. `--current-only` predicts the config in
//! force alone (the self-check), without the paired runs.
//!
//! `--kv-capacity TOKENS` sets every simulated engine's prefix cache
//! (`kv_capacity_tokens`, 2 M by default) for every run: with a capacity
//! no run fills (`--kv-capacity 1e12`) the truth evicts nothing, which
//! isolates what eviction contributes to an error.
//!
//!     cargo run --release -p gatecal-analysis --example accuracy -- \
//!         [--scenarios a,b] [--fit-seeds 1,2,3,4] [--seeds 5,6,7,8] \
//!         [--trace FILE] [--trace-scenario NAME] [--open-slots] [--rows] \
//!         [--routing-floor N] [--kv-capacity TOKENS] [--no-decode-share] \
//!         [--current-only]

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use gatecal_analysis::DecisionInput;
use gatecal_analysis::predict::replay::{EngineModel, Picker};
use gatecal_analysis::predict::{
    MODEL_ERROR_LN90, Prediction, infer_and_fit_with, nearest_rank, predict_replay,
    requests_by_deployment, with_model_error,
};
use gatecal_filter::Config;
use gatecal_parser::{ParseOptions, parse_slice};
use gatecal_sim::{Scenario, TruthRecord, Variant, read_trace, run, scenario, scenario_names};

mod common;
use common::LABELS;

/// One predicted case.
#[derive(Clone, Debug)]
struct Case {
    scenario: String,
    seed: u64,
    deployment: String,
    label: &'static str,
    predicted: Prediction,
    truth: [f64; 3],
    truth_n: usize,
}

impl Case {
    /// `ln(predicted / true)` of quantile `k`.
    fn log_ratio(&self, k: usize) -> f64 {
        (self.predicted.quantiles_ms[k] / self.truth[k]).ln()
    }

    /// Relative error of quantile `k`, %.
    fn error_pct(&self, k: usize) -> f64 {
        (self.predicted.quantiles_ms[k] / self.truth[k] - 1.0) * 100.0
    }

    /// Whether the library's interval ([`predict`]: the replay's, widened
    /// by the model error it was built with) covers the truth.
    ///
    /// [`predict`]: gatecal_analysis::predict::predict
    fn library_covers(&self, k: usize) -> bool {
        let [lo, hi] = with_model_error(&self.predicted, &MODEL_ERROR_LN90).intervals_ms[k];
        (lo..=hi).contains(&self.truth[k])
    }

    /// The calibrated interval: the replay's, widened by the model error
    /// seen on the fitting seeds.
    fn interval(&self, k: usize, cal: &Calibration) -> [f64; 2] {
        let p = self.predicted.quantiles_ms[k];
        let [lo, hi] = self.predicted.intervals_ms[k];
        let [elo, ehi] = cal.log_ratio[k];
        [lo.min(p * (-ehi).exp()), hi.max(p * (-elo).exp())]
    }

    fn covers(&self, k: usize, cal: &Calibration) -> bool {
        let [lo, hi] = self.interval(k, cal);
        (lo..=hi).contains(&self.truth[k])
    }
}

/// The 5th and 95th percentiles of `ln(predicted / true)` per quantile.
#[derive(Clone, Debug)]
struct Calibration {
    log_ratio: [[f64; 2]; 3],
    n: usize,
}

/// Nearest-rank percentile of unsorted values.
fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    nearest_rank(&s, q).unwrap_or(f64::NAN)
}

/// Weighted nearest-rank percentile: the least value whose share of the
/// total weight at or below it reaches `q` (non-finite values left out).
fn weighted_percentile(v: &[(f64, f64)], q: f64) -> f64 {
    let mut s: Vec<(f64, f64)> = v.iter().copied().filter(|(x, _)| x.is_finite()).collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = s.iter().map(|(_, w)| w).sum();
    let mut acc = 0.0;
    for (x, w) in &s {
        acc += w;
        if acc >= q * total * (1.0 - 1e-12) {
            return *x;
        }
    }
    s.last().map_or(f64::NAN, |(x, _)| *x)
}

/// The model error of the fitting cases, each scenario (and the trace)
/// weighing as one whatever its number of cases: `eight-deployments` and
/// `peak-sweep` hold most cases and the smallest errors, and would
/// otherwise set the interval of every other kind of deployment.
fn calibrate(cases: &[&Case]) -> Calibration {
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for c in cases {
        *per.entry(c.scenario.as_str()).or_default() += 1;
    }
    let mut log_ratio = [[0.0; 2]; 3];
    for (k, lr) in log_ratio.iter_mut().enumerate() {
        let v: Vec<(f64, f64)> = cases
            .iter()
            .map(|c| (c.log_ratio(k), 1.0 / per[c.scenario.as_str()] as f64))
            .collect();
        *lr = [
            weighted_percentile(&v, 0.05).min(0.0),
            weighted_percentile(&v, 0.95).max(0.0),
        ];
    }
    Calibration {
        log_ratio,
        n: cases.len(),
    }
}

/// The truth's TTFT p50/p90/p99 of one deployment, one value per request.
fn truth_quantiles(truth: &[TruthRecord], dep: &str) -> ([f64; 3], usize) {
    let mut seen = HashSet::new();
    let mut v: Vec<f64> = truth
        .iter()
        .filter(|t| t.deployment == dep && seen.insert(t.request_id.clone()))
        .map(|t| t.ttft_ms)
        .collect();
    v.sort_by(f64::total_cmp);
    let q = |x| nearest_rank(&v, x).unwrap_or(f64::NAN);
    ([q(0.5), q(0.9), q(0.99)], v.len())
}

/// How the cases are predicted.
#[derive(Clone, Copy, Debug)]
struct Opts {
    /// Bound of the replay's prefix cache per endpoint.
    replay_cache: Option<f64>,
    /// Whether the engine's decode share is fitted (`--no-decode-share`
    /// leaves it out, as the engine was before it was modelled).
    decode_share: bool,
    /// Only the config in force (the self-check): no paired runs.
    current_only: bool,
}

/// One deployment's candidates (label, config) and their predictions.
type Plan = (String, Vec<(&'static str, Config)>, Vec<Option<Prediction>>);

/// Every case of one scenario run with one seed.
fn cases_of(name: &str, base: &Scenario, seed: u64, opts: &Opts) -> Result<Vec<Case>, String> {
    let t0 = std::time::Instant::now();
    let out = run(base, seed, &Variant::default());
    let parsed = parse_slice("epp.log", &out.epp_log, &ParseOptions::default())
        .map_err(|e| format!("{name} seed {seed}: {e}"))?;
    let inputs: Vec<DecisionInput> = parsed.decisions().map(DecisionInput::from).collect();
    let per_dep = requests_by_deployment(&inputs);
    // Per deployment: its config in force and candidates, and the
    // prediction of each.
    let mut plans: Vec<Plan> = Vec::new();
    for dep in &base.deployments {
        let pool = &dep.pools[0];
        let Some(config) = pool.filters.last().map(|f| f.config.clone()) else {
            continue;
        };
        let effective = common::effective_peak(&out, &dep.name, pool.true_peak_tps);
        let configs: Vec<(&'static str, Config)> = LABELS
            .iter()
            .map(|&l| (l, common::candidate(l, &config, effective)))
            .collect();
        let Some(seen) = per_dep.get(&dep.name) else {
            eprintln!("{name} {seed} {}: no decisions in the log", dep.name);
            continue;
        };
        let start = EngineModel::unfitted(pool.true_peak_tps, dep.block_size);
        let (w, fit) = infer_and_fit_with(
            seen,
            &[],
            config.affinity_threshold,
            &start,
            opts.decode_share,
        );
        let Some(fit) = fit else {
            eprintln!(
                "{name} {seed} {}: no engine fit (too few observed first tokens)",
                dep.name
            );
            continue;
        };
        let mut model = fit.model(&start);
        if let Some(c) = opts.replay_cache {
            model.cache_capacity_tokens = c;
        }
        let preds = configs
            .iter()
            .map(|(_, c)| predict_replay(&w, &config, c, &Picker::default(), &model, None))
            .collect();
        plans.push((dep.name.clone(), configs, preds));
    }
    let mut cases = Vec::new();
    for (li, &label) in LABELS.iter().enumerate() {
        if opts.current_only && label != "current" {
            continue;
        }
        // Deployments for which the candidate is not a valid config (the
        // break-even rule under a latency predictor) are left out of it.
        let mut invalid: HashSet<&str> = HashSet::new();
        let truth = if label == "current" {
            out.truth.clone()
        } else {
            let mut s = base.clone();
            for (dep, configs, _) in &plans {
                let c = &configs[li].1;
                let mut t = s.clone();
                let set = [
                    ("maxTTFTPenaltyMs", c.max_ttft_penalty_ms.to_string()),
                    (
                        "peakPrefillThroughput",
                        c.peak_prefill_throughput.to_string(),
                    ),
                    ("penaltyMode", c.penalty_mode.as_str().to_string()),
                ]
                .iter()
                .try_for_each(|(k, v)| t.set_filter_param(Some(dep), k, v));
                match set {
                    Ok(()) => s = t,
                    Err(e) => {
                        eprintln!("{name} {seed} {dep} {label}: not a valid config: {e}");
                        invalid.insert(dep);
                    }
                }
            }
            run(&s, seed, &Variant::default()).truth
        };
        for (dep, _, preds) in &plans {
            if invalid.contains(dep.as_str()) {
                continue;
            }
            let Some(p) = &preds[li] else { continue };
            let (tq, tn) = truth_quantiles(&truth, dep);
            if tn == 0 {
                continue;
            }
            cases.push(Case {
                scenario: name.to_string(),
                seed,
                deployment: dep.clone(),
                label,
                predicted: p.clone(),
                truth: tq,
                truth_n: tn,
            });
        }
    }
    eprintln!(
        "{name} seed {seed}: {} cases in {:.1} s",
        cases.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(cases)
}

/// The truth under each candidate of one scenario run with one seed,
/// under the default routing seed and `n` others: per (deployment,
/// candidate), the quantiles of each run, the default's first.
fn routing_runs(
    name: &str,
    base: &Scenario,
    seed: u64,
    n: u64,
) -> BTreeMap<(String, &'static str), Vec<[f64; 3]>> {
    let t0 = std::time::Instant::now();
    let out = run(base, seed, &Variant::default());
    let mut per: BTreeMap<(String, &'static str), Vec<[f64; 3]>> = BTreeMap::new();
    for (li, &label) in LABELS.iter().enumerate() {
        let mut s = base.clone();
        // Deployments for which the candidate is not a valid config (the
        // break-even rule under a latency predictor) are left out of it.
        let mut invalid: HashSet<&str> = HashSet::new();
        for dep in &base.deployments {
            let pool = &dep.pools[0];
            let Some(config) = pool.filters.last().map(|f| f.config.clone()) else {
                continue;
            };
            let effective = common::effective_peak(&out, &dep.name, pool.true_peak_tps);
            let c = common::candidate(label, &config, effective);
            let mut t = s.clone();
            let set = [
                ("maxTTFTPenaltyMs", c.max_ttft_penalty_ms.to_string()),
                (
                    "peakPrefillThroughput",
                    c.peak_prefill_throughput.to_string(),
                ),
                ("penaltyMode", c.penalty_mode.as_str().to_string()),
            ]
            .iter()
            .try_for_each(|(k, v)| t.set_filter_param(Some(&dep.name), k, v));
            match set {
                Ok(()) => s = t,
                Err(_) => {
                    invalid.insert(&dep.name);
                }
            }
        }
        // The default routing seed (the run's own), then `n` others.
        let routing: Vec<Option<u64>> = std::iter::once(None)
            .chain((1..=n).map(|j| Some(seed.wrapping_add(1000 * j))))
            .collect();
        for r in routing {
            let truth = if li == 0 && r.is_none() {
                out.truth.clone()
            } else {
                let s = match r {
                    Some(r) => s.clone().with_routing_seed(r),
                    None => s.clone(),
                };
                run(&s, seed, &Variant::default()).truth
            };
            for dep in base
                .deployments
                .iter()
                .filter(|d| !invalid.contains(d.name.as_str()))
            {
                let (q, tn) = truth_quantiles(&truth, &dep.name);
                if tn > 0 {
                    per.entry((dep.name.clone(), label)).or_default().push(q);
                }
            }
        }
    }
    eprintln!(
        "{name} seed {seed}: {} routing runs in {:.1} s",
        LABELS.len() as u64 * (n + 1),
        t0.elapsed().as_secs_f64()
    );
    per
}

/// The routing-noise floor (`--routing-floor N`): how far each quantile
/// of the truth moves when only the routing's random stream changes.
fn floor_report(runs: &[(String, Scenario)], seeds: &[u64], n: u64, users: bool) -> ExitCode {
    // (scenario, label, seed, deployment) -> per quantile, the moves
    // |other / default − 1| of the other routing seeds, %.
    let mut moves: Vec<(String, &'static str, [Vec<f64>; 3])> = Vec::new();
    for (name, s) in runs {
        for &seed in seeds {
            for ((_, label), qs) in routing_runs(name, s, seed, n) {
                let Some((first, rest)) = qs.split_first() else {
                    continue;
                };
                let mut m: [Vec<f64>; 3] = Default::default();
                for q in rest {
                    for (k, mk) in m.iter_mut().enumerate() {
                        mk.push((q[k] / first[k] - 1.0) * 100.0);
                    }
                }
                moves.push((name.clone(), label, m));
            }
        }
        eprintln!("{name}: done");
    }
    println!(
        "# Routing-noise floor: the truth under {n} other routing seeds against the default ({})\n",
        if users {
            "users wait for their answers"
        } else {
            "open slots"
        }
    );
    println!(
        "Seeds {seeds:?}; a pair is one case (seed, deployment, candidate) and one other routing seed.\n"
    );
    println!(
        "| scope | pairs | p50 within 10 % | p90 within 10 % | p99 within 15 % | median / largest move p50 % | p90 % | p99 % |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut scopes: Vec<(String, Option<&str>)> = Vec::new();
    for (name, _) in runs {
        scopes.push((name.clone(), None));
        scopes.push((name.clone(), Some("current")));
    }
    scopes.push(("all".to_string(), None));
    for (scope, only) in &scopes {
        let sel: Vec<&[Vec<f64>; 3]> = moves
            .iter()
            .filter(|(s, l, _)| (scope == "all" || s == scope) && only.is_none_or(|o| o == *l))
            .map(|(_, _, m)| m)
            .collect();
        let v = |k: usize| -> Vec<f64> { sel.iter().flat_map(|m| m[k].iter().copied()).collect() };
        let pairs = v(0).len();
        if pairs == 0 {
            continue;
        }
        let within = |k: usize, tol: f64| v(k).iter().filter(|x| x.abs() <= tol).count();
        let mw: Vec<String> = (0..3)
            .map(|k| {
                let (m, w) = median_worst(&v(k));
                format!("{m:.1} / {w:+.0}")
            })
            .collect();
        let label = match only {
            Some(o) => format!("{scope} ({o})"),
            None => scope.clone(),
        };
        println!(
            "| {label} | {pairs} | {} | {} | {} | {} | {} | {} |",
            share(within(0, 10.0), pairs),
            share(within(1, 10.0), pairs),
            share(within(2, 15.0), pairs),
            mw[0],
            mw[1],
            mw[2],
        );
    }
    ExitCode::SUCCESS
}

/// Median and worst (largest absolute) of signed values.
fn median_worst(v: &[f64]) -> (f64, f64) {
    let abs: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    let worst = v
        .iter()
        .copied()
        .max_by(|a, b| a.abs().total_cmp(&b.abs()))
        .unwrap_or(f64::NAN);
    (percentile(&abs, 0.5), worst)
}

fn share(n: usize, of: usize) -> String {
    if of == 0 {
        "–".to_string()
    } else {
        format!("{:.0} % ({n}/{of})", n as f64 * 100.0 / of as f64)
    }
}

/// One summary line over `cases`: within target, coverage, median and
/// worst error per quantile.
fn summary_row(label: &str, cases: &[&Case], cal: &Calibration, spread: &str) -> String {
    let n = cases.len();
    let within = |k: usize, tol: f64| cases.iter().filter(|c| c.error_pct(k).abs() <= tol).count();
    let covered = |k: usize| cases.iter().filter(|c| c.covers(k, cal)).count();
    let library_cov = |k: usize| cases.iter().filter(|c| c.library_covers(k)).count();
    let mw: Vec<String> = (0..3)
        .map(|k| {
            let (m, w) = median_worst(&cases.iter().map(|c| c.error_pct(k)).collect::<Vec<_>>());
            format!("{m:.1} / {w:+.0}")
        })
        .collect();
    format!(
        "| {label} | {n} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} | {spread} |",
        share(within(0, 10.0), n),
        share(within(1, 10.0), n),
        share(within(2, 15.0), n),
        share(covered(0), n),
        share(covered(1), n),
        share(covered(2), n),
        share(library_cov(0), n),
        share(library_cov(1), n),
        share(library_cov(2), n),
        mw[0],
        mw[1],
        mw[2],
    )
}

/// Seed-to-seed spread of the truth: for each (scenario, deployment,
/// candidate), the relative range `(max − min) / median` of each quantile
/// over the seeds; the median of those, per quantile, as `p50 / p90 / p99`.
fn truth_spread(cases: &[&Case]) -> String {
    let mut groups: BTreeMap<(&str, &str, &str), Vec<&Case>> = BTreeMap::new();
    for c in cases {
        groups
            .entry((&c.scenario, &c.deployment, c.label))
            .or_default()
            .push(c);
    }
    let per_q: Vec<String> = (0..3)
        .map(|k| {
            let v: Vec<f64> = groups
                .values()
                .filter(|g| g.len() >= 2)
                .map(|g| {
                    let t: Vec<f64> = g.iter().map(|c| c.truth[k]).collect();
                    let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    (hi - lo) / percentile(&t, 0.5) * 100.0
                })
                .collect();
            if v.is_empty() {
                "–".to_string()
            } else {
                format!("{:.0}", percentile(&v, 0.5))
            }
        })
        .collect();
    format!("{} %", per_q.join(" / "))
}

fn list(v: &str) -> Vec<u64> {
    v.split(',').filter_map(|s| s.trim().parse().ok()).collect()
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut names: Vec<String> = scenario_names().iter().map(|s| s.to_string()).collect();
    let mut fit_seeds = vec![1, 2, 3, 4];
    let mut seeds = vec![5, 6, 7, 8];
    let mut trace: Option<PathBuf> = std::env::var_os("GATECAL_MOONCAKE_TRACE").map(PathBuf::from);
    let mut trace_scenario = "balanced".to_string();
    let mut users = true;
    let mut rows = false;
    let mut routing_floor: Option<u64> = None;
    let mut kv_capacity: Option<i64> = None;
    let mut replay_cache: Option<f64> = None;
    let mut decode_share = true;
    let mut current_only = false;
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match a.as_str() {
            "--scenarios" => {
                names = value()
                    .split(',')
                    .map(str::to_string)
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            "--fit-seeds" => fit_seeds = list(&value()),
            "--seeds" => seeds = list(&value()),
            "--trace" => trace = Some(PathBuf::from(value())),
            "--trace-scenario" => trace_scenario = value(),
            "--open-slots" => users = false,
            "--rows" => rows = true,
            "--routing-floor" => match value().parse() {
                Ok(n) if n > 0 => routing_floor = Some(n),
                _ => {
                    eprintln!("--routing-floor needs a number of routing seeds, at least 1");
                    return ExitCode::from(2);
                }
            },
            "--kv-capacity" => match value().parse::<f64>() {
                Ok(n) if n >= 1.0 => kv_capacity = Some(n.min(i64::MAX as f64 / 2.0) as i64),
                _ => {
                    eprintln!("--kv-capacity needs a number of tokens, at least 1");
                    return ExitCode::from(2);
                }
            },
            "--replay-cache" => match value().parse::<f64>() {
                Ok(n) if n > 0.0 => replay_cache = Some(n),
                _ => {
                    eprintln!("--replay-cache needs a number of tokens");
                    return ExitCode::from(2);
                }
            },
            "--no-decode-share" => decode_share = false,
            "--current-only" => current_only = true,
            other => {
                eprintln!("unknown argument {other:?} (see the example's docs)");
                return ExitCode::from(2);
            }
        }
    }
    let mut runs: Vec<(String, Scenario)> = Vec::new();
    for name in &names {
        let Some(s) = scenario(name) else {
            eprintln!(
                "unknown scenario {name:?}; known: {}",
                scenario_names().join(", ")
            );
            return ExitCode::from(2);
        };
        runs.push((name.clone(), if users { s.with_users() } else { s }));
    }
    match &trace {
        Some(path) if path.exists() => {
            let Some(s) = scenario(&trace_scenario) else {
                eprintln!("unknown scenario {trace_scenario:?}");
                return ExitCode::from(2);
            };
            let reqs = match read_trace(path) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{}: {e}", path.display());
                    return ExitCode::from(2);
                }
            };
            let dep = s.deployments[0].name.clone();
            match s.with_workload_trace(&dep, Arc::from(reqs)) {
                Some(s) => runs.push(("mooncake".to_string(), s)),
                None => eprintln!("{trace_scenario}: no deployment {dep}"),
            }
        }
        Some(path) => eprintln!(
            "{}: not found; the Mooncake trace is skipped",
            path.display()
        ),
        None => {
            eprintln!("no Mooncake trace (--trace FILE or GATECAL_MOONCAKE_TRACE); it is skipped")
        }
    }

    if let Some(cap) = kv_capacity {
        for (_, s) in &mut runs {
            for p in s.deployments.iter_mut().flat_map(|d| d.pools.iter_mut()) {
                p.kv_capacity_tokens = cap;
            }
        }
    }

    if let Some(n) = routing_floor {
        return floor_report(&runs, &seeds, n, users);
    }

    let mut fit: Vec<Case> = Vec::new();
    let mut held: Vec<Case> = Vec::new();
    for (name, s) in &runs {
        for (set, seeds) in [(&mut fit, &fit_seeds), (&mut held, &seeds)] {
            for &seed in seeds {
                let opts = Opts {
                    replay_cache,
                    decode_share,
                    current_only,
                };
                match cases_of(name, s, seed, &opts) {
                    Ok(c) => set.extend(c),
                    Err(e) => eprintln!("{e}"),
                }
            }
        }
        eprintln!("{name}: done");
    }
    let candidates =
        |v: &[Case]| -> Vec<Case> { v.iter().filter(|c| c.label != "current").cloned().collect() };
    let fit_cands = candidates(&fit);
    let cal = calibrate(&fit_cands.iter().collect::<Vec<_>>());

    println!(
        "# Predicted TTFT against the simulator's paired runs ({})\n",
        if users {
            "users wait for their answers"
        } else {
            "open slots: a slot whose sessions all wait is dropped"
        }
    );
    println!(
        "Fitting seeds {:?}, held-out seeds {:?}. Interval calibration from the {} fitting cases, each scenario weighing as one: ln(predicted / true) 5th..95th percentile p50 [{:+.3}, {:+.3}], p90 [{:+.3}, {:+.3}], p99 [{:+.3}, {:+.3}].\n",
        fit_seeds,
        seeds,
        cal.n,
        cal.log_ratio[0][0],
        cal.log_ratio[0][1],
        cal.log_ratio[1][0],
        cal.log_ratio[1][1],
        cal.log_ratio[2][0],
        cal.log_ratio[2][1],
    );
    if rows {
        println!(
            "| scenario | seed | deployment | candidate | predicted p50 / p90 / p99 ms | true p50 / p90 / p99 ms (n) | error % | covered |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for c in &held {
            let p = c.predicted.quantiles_ms;
            let t = c.truth;
            println!(
                "| {} | {} | {} | {} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} ({}) | {:+.1} / {:+.1} / {:+.1} | {}/3 |",
                c.scenario,
                c.seed,
                c.deployment,
                c.label,
                p[0],
                p[1],
                p[2],
                t[0],
                t[1],
                t[2],
                c.truth_n,
                c.error_pct(0),
                c.error_pct(1),
                c.error_pct(2),
                (0..3).filter(|&k| c.covers(k, &cal)).count()
            );
        }
        println!();
    }
    println!("## Held-out seeds: the four candidates\n");
    println!(
        "| scope | cases | p50 within 10 % | p90 within 10 % | p99 within 15 % | calibrated interval covers p50 / p90 / p99 | library interval covers p50 / p90 / p99 | median / worst error p50 % | p90 % | p99 % | truth seed-to-seed spread p50 / p90 / p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let held_cands = candidates(&held);
    let mut scopes: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    scopes.push("all".to_string());
    for scope in &scopes {
        let cs: Vec<&Case> = held_cands
            .iter()
            .filter(|c| scope == "all" || &c.scenario == scope)
            .collect();
        if cs.is_empty() {
            continue;
        }
        let all: Vec<&Case> = held
            .iter()
            .filter(|c| scope == "all" || &c.scenario == scope)
            .collect();
        println!("{}", summary_row(scope, &cs, &cal, &truth_spread(&all)));
    }
    for label in &LABELS[1..] {
        let cs: Vec<&Case> = held_cands.iter().filter(|c| c.label == *label).collect();
        println!("{}", summary_row(label, &cs, &cal, ""));
    }
    println!("\n## Held-out seeds: the self-check (config in force vs observed)\n");
    println!(
        "| scope | cases | p50 within 10 % | p90 within 10 % | p99 within 15 % | calibrated interval covers p50 / p90 / p99 | library interval covers p50 / p90 / p99 | median / worst error p50 % | p90 % | p99 % | |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for scope in &scopes {
        let cs: Vec<&Case> = held
            .iter()
            .filter(|c| c.label == "current" && (scope == "all" || &c.scenario == scope))
            .collect();
        if !cs.is_empty() {
            println!("{}", summary_row(scope, &cs, &cal, ""));
        }
    }
    // The logged decisions the config in force decides the other way on
    // the replay: the self-check fails it above 5 %.
    let share = |c: &Case| {
        let [differ, compared] = c.predicted.logged_outcomes;
        differ as f64 / compared.max(1) as f64
    };
    if let Some(c) = held
        .iter()
        .filter(|c| c.label == "current")
        .max_by(|a, b| share(a).total_cmp(&share(b)))
    {
        let [differ, compared] = c.predicted.logged_outcomes;
        println!(
            "\nLogged outcomes the config in force decides the other way on the replay: at most {:.2} % ({differ} of {compared}, {} seed {} {}).",
            100.0 * share(c),
            c.scenario,
            c.seed,
            c.deployment
        );
    }
    ExitCode::SUCCESS
}
