//! The rules on hand-built decisions: each fires on its failure and stays
//! silent on a healthy deployment.

use gatecal_filter::{Candidate, Outcome};

use crate::config::source::{ConfigSet, flag_bar};
use crate::findings::{Finding, Severity, ids};
use crate::input::{DecisionInput, LoggedGate, ScoredEndpoint};
use crate::report::gate_dist::{GateDist, GateDistOptions, InputSummary};

fn scored(ep: &str, load: f64, score: Option<f64>) -> ScoredEndpoint {
    ScoredEndpoint {
        endpoint: ep.into(),
        token_load: Some(load),
        prefix_score: score,
        in_flight_tokens: None,
    }
}

fn base(i: usize, outcome: Outcome) -> DecisionInput {
    DecisionInput {
        deployment: "d".into(),
        ts: Some(1000.0 + i as f64),
        request_id: Some(format!("r{i}").into()),
        outcome: Some(outcome),
        total: Some(2),
        affinity_threshold: Some(0.8),
        ..DecisionInput::default()
    }
}

fn run(set: ConfigSet, ds: Vec<DecisionInput>) -> Vec<Finding> {
    let mut g = GateDist::new(GateDistOptions::default(), set);
    for d in ds {
        g.push(d);
    }
    g.finish(InputSummary::default()).findings
}

fn ids_of(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.id).collect()
}

/// A healthy deployment: most decisions pin at low load, a few release;
/// the bar comes from a flag (no default-peak finding about it either:
/// the peak is given too).
fn healthy() -> (ConfigSet, Vec<DecisionInput>) {
    let mut set = flag_bar(5_000.0);
    for (_, c) in &mut set.default {
        c.parameters.peak_prefill_throughput = 8_000.0;
        c.parameter_sources.insert(
            "peakPrefillThroughput".into(),
            crate::config::source::ParamSource::Flag,
        );
    }
    let mut v = Vec::new();
    for i in 0..100 {
        let mut d = if i % 10 == 0 {
            let mut d = base(i, Outcome::LoadOverride);
            d.logged_gate = Some(LoggedGate {
                best_sticky_ttft_ms: Some(6_100.0),
                best_non_sticky_ttft_ms: Some(100.0),
                penalty_ms: 6_000.0,
                max_penalty_ms: Some(5_000.0),
            });
            d.scored = vec![
                scored("ns/a", 50_000.0, Some(0.9)),
                scored("ns/b", 1_000.0, Some(0.0)),
            ];
            d.chosen = Some("ns/b".into());
            d
        } else if i % 10 == 1 {
            let mut d = base(i, Outcome::NoMatch);
            d.scored = vec![
                scored("ns/a", 1_000.0, Some(0.1)),
                scored("ns/b", 1_000.0, Some(0.0)),
            ];
            d
        } else {
            let mut d = base(i, Outcome::Sticky);
            d.sticky_count = Some(1);
            d.survivors = Some(vec!["ns/a".into()]);
            d.scored = vec![scored("ns/a", 1_000.0, Some(0.95))];
            d
        };
        d.epp_pod = Some("d-epp-0".into());
        v.push(d);
    }
    (set, v)
}

#[test]
fn a_healthy_deployment_has_no_findings() {
    let (set, ds) = healthy();
    let f = run(set, ds);
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn affinity_disengaged_fires_when_no_endpoint_reaches_the_threshold() {
    let (set, mut ds) = healthy();
    for d in &mut ds {
        d.outcome = Some(Outcome::NoMatch);
        d.logged_gate = None;
        d.scored = vec![
            scored("ns/a", 1_000.0, Some(0.7)),
            scored("ns/b", 1_000.0, Some(0.1)),
        ];
    }
    let f = run(set, ds);
    assert_eq!(ids_of(&f), [ids::AFFINITY_DISENGAGED], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].evidence.figures["best_prefix_score_p50"], 0.7);
    assert!(
        f[0].action.contains("affinityThreshold: 0.70"),
        "{}",
        f[0].action
    );
    // No reuse at all: nothing for affinity to pin, no finding.
    let (set, mut ds) = healthy();
    for d in &mut ds {
        d.outcome = Some(Outcome::NoMatch);
        d.logged_gate = None;
        d.scored = vec![scored("ns/a", 1_000.0, Some(0.05))];
    }
    assert!(run(set, ds).is_empty());
}

#[test]
fn inert_breaks_fire_when_releases_go_to_a_sticky_endpoint() {
    let (set, mut ds) = healthy();
    for d in &mut ds {
        if d.outcome == Some(Outcome::LoadOverride) {
            d.chosen = Some("ns/a".into());
        }
    }
    let f = run(set, ds);
    assert_eq!(ids_of(&f), [ids::INERT_BREAKS], "{f:#?}");
    assert_eq!((f[0].evidence.count, f[0].evidence.decisions), (10, 10));
    assert_eq!(f[0].evidence.endpoints, ["ns/a"]);
}

#[test]
fn missing_signal_fires_past_five_percent() {
    let (set, mut ds) = healthy();
    for (i, d) in ds.iter_mut().enumerate() {
        if i % 4 == 2 {
            d.outcome = Some(Outcome::MissingSignal);
            d.scored = vec![scored("ns/a", 1_000.0, Some(0.9))];
        }
    }
    let f = run(set, ds);
    assert_eq!(ids_of(&f), [ids::MISSING_SIGNAL], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].evidence.count, 25);
}

#[test]
fn split_load_view_fires_on_interleaved_replicas_and_reports_each() {
    let (set, mut ds) = healthy();
    for (i, d) in ds.iter_mut().enumerate() {
        d.epp_pod = Some(format!("d-epp-{}", i % 2).into());
    }
    let mut g = GateDist::new(GateDistOptions::default(), set);
    for d in ds {
        g.push(d);
    }
    let r = g.finish(InputSummary::default());
    assert_eq!(
        ids_of(&r.findings),
        [ids::SPLIT_LOAD_VIEW],
        "{:#?}",
        r.findings
    );
    assert_eq!(r.findings[0].evidence.pods, ["d-epp-0", "d-epp-1"]);
    assert!(
        r.findings[0].action.contains("2500"),
        "{}",
        r.findings[0].action
    );
    let reps = &r.deployments[0].replicas;
    assert_eq!(reps.len(), 2);
    assert_eq!(reps[0].decisions + reps[1].decisions, 100);
    assert_eq!(reps[0].released + reps[1].released, 10);
    // One replica after the other (a rollout): no overlap, no finding.
    let (set, mut ds) = healthy();
    for (i, d) in ds.iter_mut().enumerate() {
        d.epp_pod = Some(format!("d-epp-{}", usize::from(i >= 50)).into());
    }
    let mut g = GateDist::new(GateDistOptions::default(), set);
    for d in ds {
        g.push(d);
    }
    let r = g.finish(InputSummary::default());
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(r.deployments[0].replicas.len(), 2);
}

#[test]
fn default_peak_is_said_to_be_assumed_with_its_scale() {
    let (_, ds) = healthy();
    let f = run(flag_bar(5_000.0), ds);
    assert_eq!(ids_of(&f), [ids::DEFAULT_PEAK_ASSUMED], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].summary.contains("15928/P"), "{}", f[0].summary);
    assert!(
        f[0].summary.contains("recommend measures P"),
        "{}",
        f[0].summary
    );
    assert!(!f[0].evidence.figures.contains_key("scale"), "{f:#?}");
}

/// A decision whose candidates carry exact in-flight tokens and whose gate
/// line logs TTFTs at a peak of 7,400 tok/s.
fn exact_break(i: usize, peak: f64) -> DecisionInput {
    let (ks, kn) = (80_000_i64, 20_000_i64);
    let mut d = base(i, Outcome::LoadOverride);
    d.exact = Some(vec![
        Candidate::new("ns/a")
            .with_match(20, 20, 64)
            .with_in_flight_tokens(ks),
        Candidate::new("ns/b")
            .with_match(0, 20, 64)
            .with_in_flight_tokens(kn),
    ]);
    let (ts, tn) = (ks as f64 / peak * 1000.0, kn as f64 / peak * 1000.0);
    d.logged_gate = Some(LoggedGate {
        best_sticky_ttft_ms: Some(ts),
        best_non_sticky_ttft_ms: Some(tn),
        penalty_ms: ts - tn,
        max_penalty_ms: Some(5_000.0),
    });
    d.chosen = Some("ns/b".into());
    d
}

#[test]
fn a_peak_implied_by_logged_ttfts_is_inferred_and_used() {
    let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
    for i in 0..40 {
        g.push(exact_break(i, 7_400.0));
    }
    let r = g.finish(InputSummary::default());
    let d = &r.deployments[0];
    assert!((d.config.parameters.peak_prefill_throughput - 7_400.0).abs() < 1e-6);
    let f: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.id == ids::DEFAULT_PEAK_ASSUMED)
        .collect();
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].severity, Severity::Info);
    assert_eq!(f[0].evidence.count, 40);
    assert!((f[0].evidence.figures["inferred_peak"] - 7_400.0).abs() < 1e-6);
    // The two sides disagree: nothing inferred.
    let mut d = exact_break(0, 7_400.0);
    if let Some(g) = d.logged_gate.as_mut() {
        g.best_non_sticky_ttft_ms = Some(1.0);
    }
    d.infer_peak(0.8);
    assert_eq!(d.prefill_throughput, None);
}

#[test]
fn gate_never_fires_when_many_stay_pinned_and_none_release() {
    let (set, mut ds) = healthy();
    for d in &mut ds {
        if d.outcome == Some(Outcome::LoadOverride) {
            d.outcome = Some(Outcome::Sticky);
            d.logged_gate = None;
        }
    }
    // Exact sticky decisions at 3 s (the bar is 5 s): pinned worse at a
    // 2 s minimum.
    for (i, d) in ds.iter_mut().enumerate().filter(|(i, _)| i % 10 == 5) {
        d.scored = Vec::new();
        d.exact = Some(vec![
            Candidate::new("ns/a")
                .with_match(20, 20, 64)
                .with_in_flight_tokens(25_000 + i as i64),
            Candidate::new("ns/b")
                .with_match(0, 20, 64)
                .with_in_flight_tokens(1_000),
        ]);
    }
    let opts = GateDistOptions {
        pinned_worse_min_ms: 2_000.0,
        ..GateDistOptions::default()
    };
    let mut g = GateDist::new(opts, set);
    for d in ds {
        g.push(d);
    }
    let r = g.finish(InputSummary::default());
    assert_eq!(
        ids_of(&r.findings),
        [ids::GATE_NEVER_FIRES],
        "{:#?}",
        r.findings
    );
    assert_eq!(r.findings[0].severity, Severity::Warning);
    assert_eq!(r.findings[0].evidence.count, 10);
}

#[test]
fn a_records_penalty_beside_its_in_flight_tokens_gives_the_peak() {
    let mut d = exact_break(0, 7_400.0);
    if let Some(g) = d.logged_gate.as_mut() {
        g.best_sticky_ttft_ms = None;
        g.best_non_sticky_ttft_ms = None;
    }
    d.infer_peak(0.8);
    let p = d.prefill_throughput.unwrap();
    assert!((p - 7_400.0).abs() < 1e-6, "{p}");
    assert!(d.peak_inferred);
    // A logged peak is never overridden.
    let mut d = exact_break(0, 7_400.0);
    d.prefill_throughput = Some(9_000.0);
    d.infer_peak(0.8);
    assert_eq!(d.prefill_throughput, Some(9_000.0));
    assert!(!d.peak_inferred);
}

/// A release at `-v=5` with the approximate producer: three candidates
/// scored (their `tokenLoad` and prefix score), the prompt 20 blocks of
/// 64 tokens plus 30 past them, the gate's TTFTs at 7,400 tok/s.
fn v5_break(peak: f64) -> DecisionInput {
    use crate::input::{MatchedSource, PickedMatch};
    // In-flight tokens: sticky a 80000, non-sticky b 20000 and c 50000;
    // each load adds the request's uncached tokens there.
    let (t, bs, rest) = (20_i64, 64_i64, 30_i64);
    let load = |k: i64, m: i64| (k + (t - m) * bs + rest) as f64;
    let mut d = base(0, Outcome::LoadOverride);
    d.scored = vec![
        scored("ns/a", load(80_000, 18), Some(18.0 / 20.0)),
        scored("ns/b", load(20_000, 3), Some(3.0 / 20.0)),
        scored("ns/c", load(50_000, 0), Some(0.0)),
    ];
    d.picked_match = Some(PickedMatch {
        source: MatchedSource::ApproximateProducer,
        match_blocks: 3,
        total_blocks: t,
        block_size: bs,
    });
    let (ts, tn) = (80_000.0 / peak * 1000.0, 20_000.0 / peak * 1000.0);
    d.logged_gate = Some(LoggedGate {
        best_sticky_ttft_ms: Some(ts),
        best_non_sticky_ttft_ms: Some(tn),
        penalty_ms: ts - tn,
        max_penalty_ms: Some(5_000.0),
    });
    d.chosen = Some("ns/b".into());
    d
}

#[test]
fn a_peak_is_inferred_from_v5_loads_and_scores() {
    let mut d = v5_break(7_400.0);
    d.infer_peak(0.8);
    let p = d.prefill_throughput.unwrap();
    assert!((p - 7_400.0).abs() < 1e-6, "{p}");
    assert!(d.peak_inferred);
    // TTFTs at another peak than the loads' difference allows put the
    // shared constant outside one block: nothing inferred.
    let mut d = v5_break(7_400.0);
    if let Some(g) = d.logged_gate.as_mut() {
        g.best_sticky_ttft_ms = g.best_sticky_ttft_ms.map(|x| x + 1_000.0);
        g.best_non_sticky_ttft_ms = g.best_non_sticky_ttft_ms.map(|x| x + 1_000.0);
    }
    d.infer_peak(0.8);
    assert_eq!(d.prefill_throughput, None);
    // A score that is no whole number of blocks: nothing inferred.
    let mut d = v5_break(7_400.0);
    d.scored[1].prefix_score = Some(0.151);
    d.infer_peak(0.8);
    assert_eq!(d.prefill_throughput, None);
    // A load at the scorer's cap: nothing inferred.
    let mut d = v5_break(7_400.0);
    d.scored[2].token_load = Some(4_194_304.0);
    d.infer_peak(0.8);
    assert_eq!(d.prefill_throughput, None);
}
