//! Parser throughput on an in-memory sample: a few MB of simulated `-v=4`
//! EPP log (eight deployments interleaved, with the endpoint dumps), parsed
//! with 1 and 2 threads; and, per message, a block of copies of one line of
//! that message (an ignored one, which must stay on the prefilter path, and
//! used ones, which are scanned and assembled); and the same run's trace
//! spans as OTLP/JSON lines (the Collector's `file` exporter), every
//! request traced, read as inputs are read (the exporter lines' fast path)
//! and by the general trace reader alone.
//!
//! ```text
//! cargo bench -p gatecal-parser --features bench --bench parse
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatecal_parser::{ParseOptions, parse_slice, trace_reference};
use gatecal_sim::{Variant, run, scenario, write_traces};

/// About `bytes` of simulated log (whole lines).
fn sample(bytes: usize) -> Vec<u8> {
    let s = scenario("eight-deployments")
        .expect("scenario")
        .with_requests(3_000);
    let variant = Variant {
        full_dumps: true,
        ..Variant::default()
    };
    let log = run(&s, 1, &variant).epp_log;
    let mut out = Vec::with_capacity(bytes + log.len());
    while out.len() < bytes {
        out.extend_from_slice(&log);
    }
    let cut = out[..bytes]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(bytes, |p| p + 1);
    out.truncate(cut);
    out
}

fn line_of<'a>(log: &'a [u8], msg: &str) -> &'a [u8] {
    let needle = format!("\"msg\":\"{msg}\"");
    log.split(|&b| b == b'\n')
        .find(|l| l.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .expect("line in sample")
}

fn parse(c: &mut Criterion) {
    let log = sample(8 << 20);
    let mut g = c.benchmark_group("parse_slice");
    g.throughput(Throughput::Bytes(log.len() as u64));
    g.sample_size(20);
    for threads in [1, 2] {
        let opts = ParseOptions {
            threads,
            ..ParseOptions::default()
        };
        g.bench_function(format!("threads={threads}"), |b| {
            b.iter(|| {
                let p = parse_slice("bench/epp.log", black_box(&log), &opts).expect("parse");
                black_box(p.items.len())
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("lines_of");
    let opts = ParseOptions::default();
    for msg in [
        "Candidate pods for picking",
        "TokenLoadScorer scoring",
        "Calculated score",
        "Before running filter plugins",
        "Completed running filter plugin successfully",
    ] {
        let line = line_of(&log, msg);
        let mut block = Vec::with_capacity(2_000 * (line.len() + 1));
        for _ in 0..2_000 {
            block.extend_from_slice(line);
            block.push(b'\n');
        }
        g.throughput(Throughput::Bytes(block.len() as u64));
        g.bench_function(msg, |b| {
            b.iter(|| {
                let p = parse_slice("bench/epp.log", black_box(&block), &opts).expect("parse");
                black_box(p.ledger.counts.lines_used)
            })
        });
    }
    g.finish();
}

/// About `bytes` of OTLP/JSON trace lines of the same run.
fn trace_sample(bytes: usize) -> Vec<u8> {
    let s = scenario("eight-deployments")
        .expect("scenario")
        .with_requests(3_000);
    let out = run(&s, 1, &Variant::default());
    let (lines, _) = write_traces(Vec::new(), &s, &out.truth, 1, 1.0).expect("traces");
    let mut v = Vec::with_capacity(bytes + lines.len());
    while v.len() < bytes {
        v.extend_from_slice(&lines);
    }
    v
}

/// The trace lines read as `gate-dist` reads them (the fast path for the
/// exporter's lines), and by the general reader alone, side by side.
fn parse_traces(c: &mut Criterion) {
    let traces = trace_sample(8 << 20);
    let mut g = c.benchmark_group("parse_traces");
    g.throughput(Throughput::Bytes(traces.len() as u64));
    g.sample_size(20);
    let opts = ParseOptions::default();
    let fast = parse_slice("bench/traces.jsonl", &traces, &opts).expect("parse");
    let general =
        trace_reference::parse_slice("bench/traces.jsonl", &traces, &opts).expect("parse");
    assert_eq!(fast.items.len(), general.items.len());
    g.bench_function("otlp_json_lines", |b| {
        b.iter(|| {
            let p = parse_slice("bench/traces.jsonl", black_box(&traces), &opts).expect("parse");
            black_box(p.items.len())
        })
    });
    g.bench_function("otlp_json_lines_general_reader", |b| {
        b.iter(|| {
            let p = trace_reference::parse_slice("bench/traces.jsonl", black_box(&traces), &opts)
                .expect("parse");
            black_box(p.items.len())
        })
    });
    g.finish();
}

criterion_group!(benches, parse, parse_traces);
criterion_main!(benches);
