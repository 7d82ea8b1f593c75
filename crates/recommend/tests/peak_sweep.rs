//! The peak estimator from vLLM stats lines across scenarios and seeds,
//! against the simulator's effective saturated prefill rate: error,
//! coverage and width of the 90 % interval (the table in
//! docs/methodology.md §6 is this test's output, `--nocapture`).

use std::collections::BTreeMap;

use gatecal_analysis::throughput::{PeakSource, VllmEstimator};
use gatecal_parser::{Item, ParseOptions, parse_slice};
use gatecal_sim::{Variant, run, scenario};

/// One deployment of one run.
struct Row {
    scenario: &'static str,
    deployment: String,
    saturated: u64,
    truth: f64,
    estimate: f64,
    interval: [f64; 2],
}

fn sweep(name: &'static str, seed: u64) -> Vec<Row> {
    let s = scenario(name).expect("scenario");
    let out = run(&s, seed, &Variant::default());
    let mut est = VllmEstimator::default();
    for (pod, bytes) in &out.vllm_logs {
        let parsed = parse_slice(&format!("vllm/{pod}.log"), bytes, &ParseOptions::default())
            .expect("parse");
        let dep = s
            .deployments
            .iter()
            .find(|d| pod.starts_with(&format!("{}-", d.name)))
            .expect("pod of a deployment");
        for it in parsed.items {
            if let Item::VllmStats(mut v) = it {
                v.deployment = dep.name.clone();
                est.push(&v);
            }
        }
    }
    let e = est.estimates();
    let mut rows = Vec::new();
    for d in &out.summary.deployments {
        let (Some(truth), Some(p)) = (d.effective_peak_prefill_tps, e.get(&d.deployment)) else {
            continue;
        };
        if p.source != PeakSource::VllmStats {
            continue;
        }
        rows.push(Row {
            scenario: name,
            deployment: d.deployment.clone(),
            saturated: d.saturated_intervals.unwrap_or(0),
            truth,
            estimate: p.value,
            interval: p.interval.expect("a saturated estimate has an interval"),
        });
    }
    rows
}

#[test]
fn peak_estimate_error_coverage_and_width_across_seeds() {
    let runs: Vec<(&'static str, u64)> = ["peak-sweep", "eight-deployments", "glm-like"]
        .into_iter()
        .flat_map(|s| (1..=4).map(move |seed| (s, seed)))
        .collect();
    let rows: Vec<Row> = std::thread::scope(|sc| {
        let hs: Vec<_> = runs
            .iter()
            .map(|&(s, seed)| sc.spawn(move || sweep(s, seed)))
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().expect("sweep thread"))
            .collect()
    });
    // Per scenario and deployment: median and max |error|, coverage, width.
    let mut per: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for r in &rows {
        per.entry((r.scenario.to_string(), r.deployment.clone()))
            .or_default()
            .push(r);
    }
    eprintln!(
        "| scenario | deployment | saturated intervals | median error | max error | coverage | median width |"
    );
    eprintln!("|---|---|---|---|---|---|---|");
    for ((s, d), v) in &per {
        let mut errs: Vec<f64> = v
            .iter()
            .map(|r| (r.estimate - r.truth).abs() / r.truth)
            .collect();
        errs.sort_by(f64::total_cmp);
        let mut widths: Vec<f64> = v
            .iter()
            .map(|r| (r.interval[1] - r.interval[0]) / r.estimate)
            .collect();
        widths.sort_by(f64::total_cmp);
        let mut sat: Vec<u64> = v.iter().map(|r| r.saturated).collect();
        sat.sort_unstable();
        let covered = v
            .iter()
            .filter(|r| r.interval[0] <= r.truth && r.truth <= r.interval[1])
            .count();
        eprintln!(
            "| {s} | {d} | {}–{} | {:.1} % | {:.1} % | {covered}/{} | {:.0} % |",
            sat[0],
            sat[sat.len() - 1],
            errs[errs.len() / 2] * 100.0,
            errs[errs.len() - 1] * 100.0,
            v.len(),
            widths[widths.len() / 2] * 100.0
        );
    }
    let n = rows.len();
    assert!(n >= 60, "{n} deployment runs");
    let covered = rows
        .iter()
        .filter(|r| r.interval[0] <= r.truth && r.truth <= r.interval[1])
        .count();
    assert!(
        covered as f64 >= 0.9 * n as f64,
        "interval holds the truth in {covered} of {n}"
    );
    for r in &rows {
        assert!(
            r.interval[0] <= r.estimate && r.estimate <= r.interval[1],
            "{} {}: estimate {} outside its interval {:?}",
            r.scenario,
            r.deployment,
            r.estimate,
            r.interval
        );
    }
    let sat: Vec<&Row> = rows.iter().filter(|r| r.saturated >= 8).collect();
    let within = sat
        .iter()
        .filter(|r| (r.estimate - r.truth).abs() / r.truth <= 0.10)
        .count();
    let mut errs: Vec<f64> = sat
        .iter()
        .map(|r| (r.estimate - r.truth).abs() / r.truth)
        .collect();
    errs.sort_by(f64::total_cmp);
    let narrow = sat
        .iter()
        .filter(|r| r.interval[1] - r.interval[0] <= 0.4 * r.estimate)
        .count();
    eprintln!(
        "saturated >= 8: {} runs, within 10 %: {within}, median error {:.1} %, width <= 40 %: {narrow}; coverage {covered}/{n}",
        sat.len(),
        errs[errs.len() / 2] * 100.0
    );
    assert!(
        errs[errs.len() / 2] <= 0.05,
        "median error {}",
        errs[errs.len() / 2]
    );
    assert!(
        within as f64 >= 0.9 * sat.len() as f64,
        "within 10 % in {within} of {}",
        sat.len()
    );
    assert!(
        narrow as f64 >= 0.65 * sat.len() as f64,
        "width <= 40 % in {narrow} of {}",
        sat.len()
    );
}
