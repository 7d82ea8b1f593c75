//! Merging 1,000 partial reports (`gate-dist merge`): each read from its
//! line of JSON, checked, merged in canonical order and finished into the
//! report. The partials are 1,000 time shards of one simulated log (the
//! demo's scenario, 6,000 requests), each with its histograms, what-if
//! tallies, config and ledger.
//!
//! ```text
//! cargo bench -p gatecal-analysis --bench merge
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary, Partial, TimeRange,
    merge_partials,
};
use gatecal_parser::{ParseOptions, parse_slice};

const PARTS: usize = 1_000;

/// One line of JSON per shard.
fn partials() -> Vec<String> {
    let s = gatecal_sim::scenario("glm-like")
        .expect("scenario")
        .with_requests(6_000);
    let out = gatecal_sim::run(&s, 3, &gatecal_sim::Variant::default());
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
    let lines = partials();
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
}

criterion_group!(benches, merge);
criterion_main!(benches);
