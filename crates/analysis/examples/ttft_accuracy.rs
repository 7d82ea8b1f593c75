//! Predicted TTFT against the simulator's paired runs: for each scenario
//! and seed, the prediction made from the default run's `-v=4` log (the
//! workload inferred from it, the engine fitted to its observed first
//! tokens) for each candidate config, against the truth of the run of the
//! same workload under that config (`--set`).
//!
//!     cargo run --release -p gatecal-analysis --example ttft_accuracy -- SCENARIO SEED...
//!
//! One line per (seed, deployment, candidate): predicted and true TTFT
//! p50/p90/p99 (ms), the errors, and whether the 90 % intervals cover the
//! truth.

use std::collections::HashSet;

use gatecal_analysis::DecisionInput;
use gatecal_analysis::predict::replay::{EngineModel, Picker};
use gatecal_analysis::predict::{infer_and_fit, nearest_rank, predict, requests_by_deployment};
use gatecal_filter::Config;
use gatecal_parser::{ParseOptions, parse_slice};
use gatecal_sim::{TruthRecord, Variant, run, scenario};

mod common;

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or("glm-like", String::as_str);
    let seeds: Vec<u64> = args.iter().skip(1).filter_map(|s| s.parse().ok()).collect();
    let seeds = if seeds.is_empty() {
        vec![5, 6, 7, 8]
    } else {
        seeds
    };
    let Some(base) = scenario(name) else {
        eprintln!("unknown scenario {name}");
        std::process::exit(2);
    };
    println!(
        "scenario seed deployment candidate | predicted p50 p90 p99 | true p50 p90 p99 (n) | error % | covered"
    );
    for seed in seeds {
        let out = run(&base, seed, &Variant::default());
        let parsed = match parse_slice("epp.log", &out.epp_log, &ParseOptions::default()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{name} seed {seed}: {e}");
                continue;
            }
        };
        let inputs: Vec<DecisionInput> = parsed.decisions().map(DecisionInput::from).collect();
        let per_dep = requests_by_deployment(&inputs);
        for dep in &base.deployments {
            let Some(seen) = per_dep.get(&dep.name) else {
                continue;
            };
            let pool = &dep.pools[0];
            let Some(config) = pool.filters.last().map(|f| f.config.clone()) else {
                continue;
            };
            let start = EngineModel::unfitted(pool.true_peak_tps, dep.block_size);
            let (w, fit) = infer_and_fit(seen, &[], config.affinity_threshold, &start);
            let Some(fit) = fit else {
                println!(
                    "{name} {seed} {}: no engine fit (no observed first tokens)",
                    dep.name
                );
                continue;
            };
            println!(
                "{name} {seed} {}: engine fit {:.0} tok/s, {:.0} ms a request, from {} requests (median error {:.1} %)",
                dep.name,
                fit.tokens_per_s,
                fit.overhead_s * 1000.0,
                fit.n,
                fit.median_error * 100.0
            );
            let model = fit.model(&start);
            let effective = common::effective_peak(&out, &dep.name, pool.true_peak_tps);
            let candidates: Vec<(&str, Config)> = common::LABELS
                .iter()
                .map(|&l| (l, common::candidate(l, &config, effective)))
                .collect();
            let picker = Picker::default();
            for (label, c) in candidates {
                let mut s = base.clone();
                let set = |s: &mut gatecal_sim::Scenario, k: &str, v: &str| {
                    s.set_filter_param(Some(&dep.name), k, v)
                        .expect("a valid parameter");
                };
                set(
                    &mut s,
                    "maxTTFTPenaltyMs",
                    &c.max_ttft_penalty_ms.to_string(),
                );
                set(
                    &mut s,
                    "peakPrefillThroughput",
                    &c.peak_prefill_throughput.to_string(),
                );
                set(&mut s, "penaltyMode", c.penalty_mode.as_str());
                let t = run(&s, seed, &Variant::default());
                let (tq, tn) = truth_quantiles(&t.truth, &dep.name);
                let Some(p) = predict(&w, &config, &c, &picker, &model, None) else {
                    continue;
                };
                let err: Vec<String> = (0..3)
                    .map(|k| format!("{:+.1}", (p.quantiles_ms[k] / tq[k] - 1.0) * 100.0))
                    .collect();
                let covered = (0..3)
                    .filter(|&k| (p.intervals_ms[k][0]..=p.intervals_ms[k][1]).contains(&tq[k]))
                    .count();
                println!(
                    "{name} {seed} {} {label} | {:.0} {:.0} {:.0} | {:.0} {:.0} {:.0} ({tn}) | {} | {covered}/3",
                    dep.name,
                    p.quantiles_ms[0],
                    p.quantiles_ms[1],
                    p.quantiles_ms[2],
                    tq[0],
                    tq[1],
                    tq[2],
                    err.join(" ")
                );
            }
        }
    }
}
