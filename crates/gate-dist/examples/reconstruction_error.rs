//! Measures the reconstruction error of the gate input against simulator
//! truth, per decision: `cargo run --release -p gate-dist --example
//! reconstruction_error -- x.log x.truth.jsonl` (files from `epp-sim --out x.log`).
//! Prints the error quantiles (estimate − truth) of the best sticky and best
//! non-sticky in-flight tokens and of the gate input, and the drain rates.
//! The figures in docs/methodology.md come from here. The config is the
//! filter's defaults with the values the log shows (`maxPenalty`,
//! `prefillThroughput`, `affinityThreshold`), as gate-dist reads them;
//! `--censor-feedback` also feeds the logged holds back into the queue
//! model (off by default, as in gate-dist; the estimates are censored
//! either way).

use std::collections::HashMap;

use gatecal_analysis::{
    DecisionInput, ParamSource, ReconstructOptions, Reconstructor, Reorder, Replay, SourcedConfig,
    merge_log,
};
use gatecal_filter::Config;
use gatecal_parser::{ParseOptions, parse_slice};

fn quantiles(name: &str, v: &mut [f64]) {
    if v.is_empty() {
        println!("{name}: no samples");
        return;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    println!(
        "{name}: n={} p10={:.0} p50={:.0} p90={:.0} mean={:.0}",
        v.len(),
        q(0.1),
        q(0.5),
        q(0.9),
        v.iter().sum::<f64>() / v.len() as f64
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().collect();
    let feedback = match args.iter().position(|a| a == "--censor-feedback") {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    };
    let [_, log, truth] = args.as_slice() else {
        return Err("usage: reconstruction_error [--censor-feedback] LOG TRUTH_JSONL".into());
    };
    let mut t: HashMap<(String, String), serde_json::Value> = HashMap::new();
    for l in std::fs::read_to_string(truth)?.lines() {
        let v: serde_json::Value = serde_json::from_str(l)?;
        let key = (
            v["request_id"].as_str().unwrap_or_default().to_string(),
            v["profile"].as_str().unwrap_or_default().to_string(),
        );
        t.insert(key, v);
    }
    let parsed = parse_slice(log, &std::fs::read(log)?, &ParseOptions::default())?;
    let mut ordered = Vec::new();
    let mut reorder = Reorder::new(30.0);
    for d in parsed.decisions() {
        reorder.push(DecisionInput::from(d), &mut |x| ordered.push(x));
    }
    reorder.finish(&mut |x| ordered.push(x));
    let mut r = Reconstructor::new(ReconstructOptions {
        censor_feedback: feedback,
        ..ReconstructOptions::default()
    });
    let first = |f: &dyn Fn(&DecisionInput) -> Option<f64>| ordered.iter().find_map(f);
    let config = merge_log(
        &SourcedConfig::new("default", Config::default(), ParamSource::Default),
        first(&|d| d.logged_gate.and_then(|g| g.max_penalty_ms)),
        first(&|d| d.prefill_throughput),
        first(&|d| d.affinity_threshold),
    )
    .parameters;
    let mut censored = Vec::new();
    // The gate input error before the logged holds censored it.
    let mut raw = Vec::new();
    let (mut es, mut en, mut eg) = (Vec::new(), Vec::new(), Vec::new());
    for d in &ordered {
        let s = r.sample(d, &config);
        if let Some(m) = s.censored_ms {
            censored.push(m);
        }
        let moved = s.censored_ms.unwrap_or(0.0);
        let key = (
            d.request_id.clone().unwrap_or_default().to_string(),
            d.profile.clone().unwrap_or_default().to_string(),
        );
        let (Some(tv), Replay::Candidates(c)) = (t.get(&key), &s.replay) else {
            continue;
        };
        let (Some(ts), Some(tn), Some(tg)) = (
            tv["truth_best_sticky_in_flight"].as_f64(),
            tv["truth_best_non_sticky_in_flight"].as_f64(),
            tv["truth_gate_input_ms"].as_f64(),
        ) else {
            continue;
        };
        let (Some(st), Some(nt), Some(g)) = (
            c[0].in_flight_tokens,
            c[1].in_flight_tokens,
            s.gate_input_ms,
        ) else {
            continue;
        };
        es.push(st as f64 - ts);
        en.push(nt as f64 - tn);
        eg.push(g - tg);
        raw.push(g + moved - tg);
    }
    quantiles("best sticky in-flight error (tokens)", &mut es);
    quantiles("best non-sticky in-flight error (tokens)", &mut en);
    quantiles("gate input error (ms)", &mut eg);
    quantiles("gate input error before censoring (ms)", &mut raw);
    quantiles("censored by a logged hold (ms moved)", &mut censored);
    for (dep, rate) in r.drain_rates() {
        println!(
            "drain rate {dep}: {:.0} tok/s ({} samples)",
            rate.median, rate.samples
        );
    }
    Ok(())
}
