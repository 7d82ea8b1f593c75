//! gate-dist against simulator truth, for every named scenario: outcome
//! counts, quantiles from decision records (exact to histogram precision),
//! quantiles from logs (within 10 % or 100 ms), evidence and self-check, and
//! the glm-like picture of the seed.

use gatecal_analysis::gate_dist::{
    ConfigSet, GateDist, GateDistOptions, GateDistReport, InputSummary, SourcedConfig,
};
use gatecal_analysis::input::DecisionInput;
use gatecal_parser::{ParseOptions, parse_slice};
use gatecal_sim::{SimOutput, Variant, run, scenario};

fn sim(name: &str) -> (SimOutput, ConfigSet) {
    let s = scenario(name).expect("scenario");
    let config = s.deployments[0].primary_config();
    let out = run(&s, 1, &Variant::default());
    let set = ConfigSet {
        default: vec![(
            String::new(),
            SourcedConfig {
                source: "test".into(),
                parameters: config,
            },
        )],
        ..ConfigSet::default()
    };
    (out, set)
}

fn audit(bytes: &[u8], name: &str, configs: ConfigSet) -> GateDistReport {
    let parsed = parse_slice(name, bytes, &ParseOptions::default()).expect("parse");
    assert!(parsed.ledger.counts.balanced(), "every line accounted for");
    let mut g = GateDist::new(GateDistOptions::default(), configs);
    for d in parsed.decisions() {
        g.push(DecisionInput::from(d));
    }
    g.finish(InputSummary::default())
}

fn records(out: &SimOutput) -> Vec<u8> {
    let mut v = Vec::new();
    for t in &out.truth {
        serde_json::to_writer(&mut v, t).unwrap();
        v.push(b'\n');
    }
    v
}

fn close(got: Option<f64>, want: Option<f64>, rel: f64, abs: f64) -> bool {
    match (got, want) {
        (Some(g), Some(w)) => (g - w).abs() <= (rel * w.abs()).max(abs),
        (None, None) => true,
        _ => false,
    }
}

/// The share of truth gate inputs at or below `v`.
fn truth_rank(out: &SimOutput, v: f64) -> f64 {
    let all: Vec<f64> = out
        .truth
        .iter()
        .filter_map(|t| t.truth_gate_input_ms)
        .collect();
    all.iter().filter(|&&x| x <= v).count() as f64 / all.len().max(1) as f64
}

fn check(name: &str) {
    check_within(name, 0.03);
}

fn check_within(name: &str, rank_tolerance: f64) {
    let (out, configs) = sim(name);
    let truth = &out.summary.overall;

    // From decision records: exact outcomes and quantiles.
    let r = audit(&records(&out), "truth.jsonl", configs.clone());
    let o = &r.overall.stats;
    assert_eq!(o.decisions, truth.decisions, "{name}: decisions");
    for (k, v) in &truth.outcomes {
        assert_eq!(o.outcomes[k], *v, "{name}: outcome {k} from records");
    }
    let g = &o.gate_input_ms;
    assert_eq!(g.count, truth.gate_evaluated, "{name}: gate evaluated");
    for (got, want, q) in [
        (g.p50, truth.gate_input_p50_ms, "p50"),
        (g.p90, truth.gate_input_p90_ms, "p90"),
        (g.p99, truth.gate_input_p99_ms, "p99"),
    ] {
        assert!(
            close(got, want, 0.0006, 0.01),
            "{name}: {q} from records {got:?} vs truth {want:?}"
        );
    }
    assert_eq!(
        o.self_check.replayed, o.self_check.agreed,
        "{name}: self-check"
    );
    assert!((o.released_share - truth.release_share).abs() < 1e-9);

    // From logs: outcomes exact, quantiles within 10 % or 100 ms.
    let r = audit(&out.epp_log, "epp.log", configs);
    let o = &r.overall.stats;
    assert_eq!(o.decisions, truth.decisions, "{name}: decisions from logs");
    for (k, v) in &truth.outcomes {
        assert_eq!(o.outcomes[k], *v, "{name}: outcome {k} from logs");
    }
    let e = &o.evidence;
    assert_eq!(
        e.logged + e.observed + e.reconstructed + e.unknown,
        truth.gate_evaluated,
        "{name}: every evaluated gate has an evidence label"
    );
    // Within 10 % (or 100 ms) of the truth's value, or, where the truth's
    // distribution is sparse, within 3 points of the quantile's rank: in
    // glm-like the truth moves from 131 ms to 475 ms between its 50th and
    // 52nd percentile, so a value test alone would demand more than the
    // evidence holds.
    let g = &o.gate_input_ms;
    for (got, want, q, level) in [
        (g.p50, truth.gate_input_p50_ms, "p50", 0.5),
        (g.p90, truth.gate_input_p90_ms, "p90", 0.9),
        (g.p99, truth.gate_input_p99_ms, "p99", 0.99),
    ] {
        let by_value = close(got, want, 0.10, 100.0);
        let rank = got.map(|v| truth_rank(&out, v)).unwrap_or(f64::NAN);
        assert!(
            by_value || (rank - level).abs() <= rank_tolerance,
            "{name}: {q} from logs {got:?} vs truth {want:?} (rank {rank:.3})"
        );
    }
    assert_eq!(
        o.self_check.replayed, o.self_check.agreed,
        "{name}: self-check from logs: {:?}",
        o.self_check.disagreements
    );
    assert_eq!(
        o.self_check.replayed,
        o.evidence.logged + o.evidence.observed
    );
}

#[test]
fn glm_like() {
    check("glm-like");
    // The seed's picture.
    let (out, configs) = sim("glm-like");
    let r = audit(&out.epp_log, "epp.log", configs);
    let o = &r.overall.stats;
    assert!(o.released_share < 0.01, "released {}", o.released_share);
    assert!(
        (0.10..=0.20).contains(&o.pinned_worse.share),
        "pinned {}",
        o.pinned_worse.share
    );
}

/// Known limitation: with a 5 s bar and frequent releases, the carried-forward
/// queues of released-to endpoints are off by whole requests more often; the
/// quantiles land within 8 rank points (measured: p50 at the truth's 56th).
#[test]
fn glm_like_v1() {
    check_within("glm-like-v1", 0.08);
}

/// A latency-predictor deployment: narrowed decisions cannot be
/// reconstructed from loads, so they are `unknown`; logged breaks are exact.
#[test]
fn latency_predictor_is_honest() {
    let (out, configs) = sim("latency-predictor");
    let r = audit(&out.epp_log, "epp.log", configs);
    let o = &r.overall.stats;
    assert_eq!(o.decisions, out.summary.overall.decisions);
    assert_eq!(o.evidence.reconstructed, 0);
    assert!(o.evidence.unknown > 0);
    assert_eq!(
        o.gate_input_ms.count + o.gate_input_ms.unbounded,
        o.evidence.logged,
        "{:?} {:?} {:?}",
        o.evidence,
        o.gate_input_ms,
        o.outcomes
    );
    assert_eq!(o.self_check.replayed, o.self_check.agreed);
}

#[test]
fn balanced() {
    check("balanced");
}

#[test]
fn eight_deployments() {
    check("eight-deployments");
}

#[test]
fn pd_disagg() {
    check("pd-disagg");
}
