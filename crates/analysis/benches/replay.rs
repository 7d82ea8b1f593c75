//! The predicted-TTFT replay on one simulated `-v=4` log (glm-like, the
//! demo's scenario): the workload inferred and the engine fitted once
//! (`engine`), and one config predicted (`predict`: the config in force's
//! replay with the logged arrivals, then the candidate's, at the fitted
//! speed and at both ends of its interval).
//!
//! ```text
//! cargo bench -p gatecal-analysis --features bench --bench replay
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatecal_analysis::DecisionInput;
use gatecal_analysis::predict::per_deployment::{MAX_REPLAY_REQUESTS_TOTAL, Requests};
use gatecal_filter::Config;
use gatecal_parser::{Item, ParseOptions, parse_slice};

fn requests() -> (Requests, Config) {
    let s = gatecal_sim::scenario("glm-like")
        .expect("scenario")
        .with_requests(1_200);
    let out = gatecal_sim::run(&s, 2, &gatecal_sim::Variant::default());
    let parsed = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).expect("parse");
    let mut r = Requests::default();
    let mut room = MAX_REPLAY_REQUESTS_TOTAL;
    for i in &parsed.items {
        if let Item::Decision(d) = i {
            r.push(&DecisionInput::from(&**d), &mut room);
        }
    }
    let config = s.deployments[0].pools[0]
        .filters
        .last()
        .expect("a filter")
        .config
        .clone();
    (r, config)
}

fn replay(c: &mut Criterion) {
    let (mut r, config) = requests();
    let n = r.observed().n;
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(n));
    g.bench_function("engine", |b| {
        b.iter(|| black_box(r.engine(config.peak_prefill_throughput, 0.8, 64)))
    });
    let e = r.engine(config.peak_prefill_throughput, 0.8, 64);
    let fitted = e.fitted_peak().expect("a fit");
    let candidate = Config {
        peak_prefill_throughput: fitted.round(),
        ..config.clone()
    };
    g.bench_function("predict", |b| {
        b.iter(|| black_box(e.predict(&config, &candidate)))
    });
    g.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
