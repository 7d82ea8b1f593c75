//! Merging 1,000 partial reports (`gate-dist merge`, `recommend merge`):
//! each read from its line of JSON, checked, merged in canonical order and
//! finished into the report. The partials are 1,000 time shards of one
//! simulated log (the demo's scenario, 6,000 requests), each with its
//! histograms, what-if tallies, config and ledger; recommend's with its
//! decisions, the vLLM stats lines of its stretch of the run and its
//! routed requests.
//!
//! ```text
//! cargo bench -p gatecal-analysis --features bench --bench merge
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary, Partial, Recommend,
    RecommendOptions, RecommendPartial, TimeRange, merge_partials, merge_recommend_partials,
};
use gatecal_parser::{ParseOptions, parse_slice};

const PARTS: usize = 1_000;

/// The simulated run.
fn sim() -> gatecal_sim::SimOutput {
    let s = gatecal_sim::scenario("glm-like")
        .expect("scenario")
        .with_requests(6_000);
    gatecal_sim::run(&s, 3, &gatecal_sim::Variant::default())
}

/// Recommend's partials: the decisions cut by time as gate-dist's, the
/// stats lines in 1,000 runs of consecutive lines, one a shard.
fn recommend_partials(out: &gatecal_sim::SimOutput) -> Vec<String> {
    let parsed = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).expect("parse");
    let ds: Vec<DecisionInput> = parsed.decisions().map(DecisionInput::from).collect();
    let mut stats = Vec::new();
    for (pod, bytes) in &out.vllm_logs {
        let p = parse_slice(&format!("vllm/{pod}.log"), bytes, &ParseOptions::default())
            .expect("parse");
        stats.extend(p.vllm_stats().cloned());
    }
    let ts: Vec<f64> = ds.iter().filter_map(|d| d.ts).collect();
    let first = ts.iter().copied().fold(f64::INFINITY, f64::min).floor();
    let last = ts.iter().copied().fold(f64::NEG_INFINITY, f64::max).floor() + 1.0;
    let step = (last - first) / PARTS as f64;
    let mut shards: Vec<Vec<DecisionInput>> = vec![Vec::new(); PARTS];
    for d in ds {
        if let Some(t) = d.ts {
            let i = (((t - first) / step) as usize).min(PARTS - 1);
            shards[i].push(d);
        }
    }
    let per = stats.len().div_ceil(PARTS).max(1);
    let mut lines = stats.chunks(per);
    shards
        .into_iter()
        .enumerate()
        .map(|(i, shard)| {
            let opts = RecommendOptions {
                time_range: TimeRange {
                    since: Some(first + i as f64 * step),
                    until: Some(first + (i + 1) as f64 * step),
                },
                ..RecommendOptions::default()
            };
            let mut r = Recommend::new(opts, ConfigSet::default());
            for d in shard {
                r.push_decision(d);
            }
            for s in lines.next().unwrap_or_default() {
                r.push_vllm(s);
            }
            let input = InputSummary {
                inputs: vec![format!("shard-{i:04}.log")],
                ..InputSummary::default()
            };
            r.into_partial(input).expect("partial").to_line()
        })
        .collect()
}

/// One line of JSON per shard.
fn partials(out: &gatecal_sim::SimOutput) -> Vec<String> {
    let parsed = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).expect("parse");
    let ds: Vec<DecisionInput> = parsed.decisions().map(DecisionInput::from).collect();
    let ts: Vec<f64> = ds.iter().filter_map(|d| d.ts).collect();
    let first = ts.iter().copied().fold(f64::INFINITY, f64::min).floor();
    let last = ts.iter().copied().fold(f64::NEG_INFINITY, f64::max).floor() + 1.0;
    let step = (last - first) / PARTS as f64;
    let mut shards: Vec<Vec<DecisionInput>> = vec![Vec::new(); PARTS];
    for d in ds {
        if let Some(t) = d.ts {
            let i = (((t - first) / step) as usize).min(PARTS - 1);
            shards[i].push(d);
        }
    }
    shards
        .into_iter()
        .enumerate()
        .map(|(i, shard)| {
            let opts = GateDistOptions {
                time_range: TimeRange {
                    since: Some(first + i as f64 * step),
                    until: Some(first + (i + 1) as f64 * step),
                },
                ..GateDistOptions::default()
            };
            let mut g = GateDist::new(opts, ConfigSet::default());
            for d in shard {
                g.push(d);
            }
            let input = InputSummary {
                inputs: vec![format!("shard-{i:04}.log")],
                ..InputSummary::default()
            };
            g.into_partial(input).to_line()
        })
        .collect()
}

fn merge(c: &mut Criterion) {
    let out = sim();
    let lines = partials(&out);
    let bytes: usize = lines.iter().map(String::len).sum();
    let mut g = c.benchmark_group("merge");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("1000 partials", |b| {
        b.iter(|| {
            let parts: Vec<(String, Partial)> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| (format!("p{i}"), Partial::from_json(l).expect("partial")))
                .collect();
            black_box(merge_partials(parts).expect("merge").finish())
        })
    });
    g.finish();
    let lines = recommend_partials(&out);
    let bytes: usize = lines.iter().map(String::len).sum();
    let mut g = c.benchmark_group("recommend merge");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("1000 partials", |b| {
        b.iter(|| {
            let parts: Vec<(String, RecommendPartial)> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    (
                        format!("p{i}"),
                        RecommendPartial::from_json(l).expect("partial"),
                    )
                })
                .collect();
            black_box(
                merge_recommend_partials(parts)
                    .expect("merge")
                    .finish()
                    .expect("finish"),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, merge);
criterion_main!(benches);
