//! The upstream filter's behaviours (llm-d-router `prefixcacheaffinity`),
//! checked one by one against `decide`.

use gatecal_filter::{
    Candidate, Config, ConfigError, MissingSignal, Outcome, Rule, TtftSource, best_by_ttft, decide,
};

fn ep(name: &str, match_blocks: i64, in_flight: i64) -> Candidate {
    Candidate::new(name)
        .with_match(match_blocks, 100, 16)
        .with_in_flight_tokens(in_flight)
}

/// Peak 1000 tok/s, so in-flight tokens read as ms.
fn cfg(max_penalty_ms: f64) -> Config {
    Config {
        max_ttft_penalty_ms: max_penalty_ms,
        peak_prefill_throughput: 1000.0,
        ..Config::default()
    }
}

#[test]
fn defaults_are_the_epps() {
    let c = Config::default();
    assert_eq!(c.affinity_threshold, 0.80);
    assert_eq!(c.exploration_probability, 0.0);
    assert_eq!(c.max_ttft_penalty_ms, 18000.0);
    assert_eq!(c.ttft_source, TtftSource::PrefillThroughput);
    assert_eq!(c.peak_prefill_throughput, 15928.0);
    assert_eq!(c.max_in_flight_requests_delta, 0);
    assert_eq!(c.missing_signal, MissingSignal::KeepAll);
}

#[test]
fn at_most_one_endpoint_is_not_applicable() {
    let d = decide(&cfg(1000.0), &[], 1.0);
    assert_eq!(d.outcome, Outcome::NotApplicable);
    assert!(d.kept.is_empty());
    let d = decide(&cfg(1000.0), &[ep("a", 100, 99_999)], 1.0);
    assert_eq!(d.outcome, Outcome::NotApplicable);
    assert_eq!(d.kept, vec![0]);
}

#[test]
fn threshold_zero_is_not_applicable() {
    let c = Config {
        affinity_threshold: 0.0,
        ..cfg(1000.0)
    };
    let d = decide(&c, &[ep("a", 100, 5000), ep("b", 0, 0)], 1.0);
    assert_eq!(d.outcome, Outcome::NotApplicable);
    assert_eq!(d.kept, vec![0, 1]);
}

#[test]
fn no_sticky_endpoint_keeps_all() {
    let d = decide(&cfg(1000.0), &[ep("a", 79, 0), ep("b", 10, 0)], 1.0);
    assert_eq!(d.outcome, Outcome::NoMatch);
    assert_eq!(d.kept, vec![0, 1]);
}

#[test]
fn threshold_is_inclusive() {
    // 80/100 = 0.80 >= 0.80: sticky.
    let d = decide(&cfg(1000.0), &[ep("a", 80, 0), ep("b", 10, 0)], 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.sticky, vec![0]);
}

#[test]
fn all_sticky_narrows_without_gate() {
    let d = decide(&cfg(1000.0), &[ep("a", 90, 90_000), ep("b", 95, 0)], 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.kept, vec![0, 1]);
    assert!(
        d.gate.is_none(),
        "no non-sticky endpoint: the gate does not run"
    );
}

#[test]
fn bar_comparison_is_strictly_greater() {
    // Gap exactly 1000 ms at a 1000 ms bar: hold.
    let d = decide(&cfg(1000.0), &[ep("s", 90, 2000), ep("n", 0, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.gate.unwrap().gate_input_ms, 1000.0);
    // One token more: release.
    let d = decide(&cfg(1000.0), &[ep("s", 90, 2001), ep("n", 0, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::LoadOverride);
    assert_eq!(d.kept, vec![0, 1]);
}

#[test]
fn zero_penalty_always_sticks() {
    let d = decide(&cfg(0.0), &[ep("s", 90, 10_000_000), ep("n", 0, 0)], 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert!(d.gate.is_none());
}

#[test]
fn exploration_draw_below_probability_explores() {
    let c = Config {
        exploration_probability: 0.25,
        ..cfg(1000.0)
    };
    let eps = [ep("s", 90, 0), ep("n", 0, 0)];
    assert_eq!(decide(&c, &eps, 0.2499).outcome, Outcome::Exploration);
    assert_eq!(decide(&c, &eps, 0.25).outcome, Outcome::Sticky);
    // Exploration is checked before stickiness, as upstream does.
    let none_sticky = [ep("a", 0, 0), ep("b", 0, 0)];
    assert_eq!(decide(&c, &none_sticky, 0.1).outcome, Outcome::Exploration);
}

#[test]
fn best_by_ttft_returns_the_first_of_ties() {
    let eps = [
        ep("s0", 90, 3000),
        ep("s1", 90, 1000),
        ep("s2", 90, 1000),
        ep("n0", 0, 500),
        ep("n1", 0, 500),
    ];
    let d = decide(&cfg(100.0), &eps, 1.0);
    let g = d.gate.unwrap();
    assert_eq!(g.best_sticky.index, 1);
    assert_eq!(g.best_non_sticky.index, 3);
    assert_eq!(g.best_sticky.in_flight_tokens, Some(1000));
    assert_eq!(g.gate_input_ms, 500.0);
    assert_eq!(g.fired, Some(Rule::StaticBar));
}

fn predictor(missing: MissingSignal) -> Config {
    Config {
        ttft_source: TtftSource::LatencyPredictor,
        max_ttft_penalty_ms: 5000.0,
        missing_signal: missing,
        ..Config::default()
    }
}

#[test]
fn predictor_path_sticky_without_prediction_breaks_with_max_float() {
    // v0.9/v0.10: a side without predictions has best = f64::MAX, so a missing
    // sticky prediction breaks the gate with penalty = MaxFloat64.
    let eps = [
        Candidate::new("s").with_match(90, 100, 16),
        Candidate::new("n")
            .with_match(0, 100, 16)
            .with_predicted_ttft_ms(120.0),
    ];
    let d = decide(&predictor(MissingSignal::AsZero), &eps, 1.0);
    assert_eq!(d.outcome, Outcome::LoadOverride);
    let g = d.gate.unwrap();
    assert_eq!(g.best_sticky.ttft_ms, f64::MAX);
    assert_eq!(g.gate_input_ms, f64::MAX - 120.0);
    assert_eq!(g.gate_input_ms, f64::MAX, "120 vanishes next to MaxFloat64");
    // Both sides missing: penalty 0, nothing happens.
    let none = [
        Candidate::new("s").with_match(90, 100, 16),
        Candidate::new("n").with_match(0, 100, 16),
    ];
    let d = decide(&predictor(MissingSignal::AsZero), &none, 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.gate.unwrap().gate_input_ms, 0.0);
}

#[test]
fn newer_semantics_missing_side_keeps_all() {
    let eps = [
        Candidate::new("s").with_match(90, 100, 16),
        Candidate::new("n")
            .with_match(0, 100, 16)
            .with_predicted_ttft_ms(120.0),
    ];
    let d = decide(&predictor(MissingSignal::KeepAll), &eps, 1.0);
    assert_eq!(d.outcome, Outcome::MissingSignal);
    assert_eq!(d.kept, vec![0, 1]);
    let s = d.signal.unwrap();
    assert!(!s.sticky_observed && s.non_sticky_observed);
}

#[test]
fn throughput_path_absent_tokens_per_semantics() {
    let mut s = ep("s", 90, 0);
    s.in_flight_tokens = None;
    let eps = [s, ep("n", 0, 3000)];
    // v0.9/v0.10: absent = 0 tokens, so the sticky endpoint looks idle: hold.
    let old = Config {
        missing_signal: MissingSignal::AsZero,
        ..cfg(1000.0)
    };
    let d = decide(&old, &eps, 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.gate.unwrap().gate_input_ms, -3000.0);
    // Newer: no signal on the sticky side: keep all.
    assert_eq!(
        decide(&cfg(1000.0), &eps, 1.0).outcome,
        Outcome::MissingSignal
    );
    // An endpoint without the signal is skipped, not counted as 0.
    let mut s2 = ep("s2", 95, 0);
    s2.in_flight_tokens = None;
    let eps = [s2, ep("s3", 90, 4000), ep("n", 0, 1000)];
    let g = decide(&cfg(1000.0), &eps, 1.0).gate.unwrap();
    assert_eq!(g.best_sticky.index, 1);
    assert_eq!(g.gate_input_ms, 3000.0);
}

#[test]
fn missing_match_attribute_is_not_sticky() {
    let eps = [Candidate::new("a").with_in_flight_tokens(0), ep("b", 10, 0)];
    assert_eq!(decide(&cfg(1000.0), &eps, 1.0).outcome, Outcome::NoMatch);
    // TotalBlocks = 0 scores 0 too.
    let eps = [
        Candidate::new("a")
            .with_match(5, 0, 16)
            .with_in_flight_tokens(0),
        ep("b", 10, 0),
    ];
    assert_eq!(decide(&cfg(1000.0), &eps, 1.0).outcome, Outcome::NoMatch);
}

fn request_gate_cfg() -> Config {
    Config {
        max_in_flight_requests_delta: 2,
        ..cfg(1000.0)
    }
}

#[test]
fn request_gate_adds_endpoints_within_the_penalty() {
    // Sticky: 90/100 blocks cached, 10 blocks * 16 = 160 uncached tokens;
    // request TTFT = 500 + 160 = 660 ms. n-near: 600 + 100*16 = 2200 ms
    // (1540 ms above: over the 1000 ms penalty, not within). n-far-but-cheap:
    // 0 + 100*16 = 1600 ms (940 above: within).
    let eps = [
        ep("sticky", 90, 500).with_in_flight_requests(9),
        ep("n-near", 0, 600).with_in_flight_requests(0),
        ep("n-cheap", 0, 0).with_in_flight_requests(3),
    ];
    let d = decide(&request_gate_cfg(), &eps, 1.0);
    // The TTFT gate holds (500 - 0 = 500 ms <= 1000 ms).
    assert_eq!(d.gate.unwrap().fired, None);
    assert_eq!(d.outcome, Outcome::RequestLoadOverride);
    assert_eq!(d.kept, vec![0, 2]);
    let r = d.request_gate.unwrap();
    assert_eq!((r.sticky_requests, r.within_requests), (9, 3));
    assert_eq!(r.within, vec![2]);
}

#[test]
fn request_gate_needs_more_than_delta() {
    let eps = [
        ep("sticky", 90, 500).with_in_flight_requests(5),
        ep("n", 0, 0).with_in_flight_requests(3),
    ];
    let d = decide(&request_gate_cfg(), &eps, 1.0);
    assert_eq!(d.outcome, Outcome::Sticky, "5 - 3 = 2 is not > 2");
    assert!(!d.request_gate.unwrap().fired);
}

#[test]
fn validation_texts_are_the_epps() {
    let cases = [
        (
            r#"{"affinityThreshold": 1.5}"#,
            "invalid config: affinityThreshold must be in [0, 1], got 1.500000",
        ),
        (
            r#"{"explorationProbability": -0.1}"#,
            "invalid config: explorationProbability must be in [0, 1], got -0.100000",
        ),
        (
            r#"{"maxTTFTPenaltyMs": -1}"#,
            "invalid config: maxTTFTPenaltyMs must be >= 0, got -1.000000",
        ),
        (
            r#"{"peakPrefillThroughput": -5}"#,
            "invalid config: peakPrefillThroughput must be >= 0, got -5.000000",
        ),
        (
            r#"{"ttftSource": "magic"}"#,
            r#"invalid config: ttftSource must be "latencyPredictor" or "prefillThroughput", got "magic""#,
        ),
        (
            r#"{"peakPrefillThroughput": 0}"#,
            "invalid config: peakPrefillThroughput must be > 0 when ttftSource is prefillThroughput",
        ),
        (
            r#"{"maxInFlightRequestsDelta": -1}"#,
            "invalid config: maxInFlightRequestsDelta must be >= 0, got -1",
        ),
        (
            r#"{"maxInFlightRequestsDelta": 3, "maxTTFTPenaltyMs": 0}"#,
            "invalid config: maxTTFTPenaltyMs must be > 0 when maxInFlightRequestsDelta is set",
        ),
    ];
    for (json, want) in cases {
        assert_eq!(
            Config::from_json(json).unwrap_err().to_string(),
            want,
            "{json}"
        );
    }
    // A zero peak is fine when the gate never runs.
    assert!(Config::from_json(r#"{"peakPrefillThroughput": 0, "maxTTFTPenaltyMs": 0}"#).is_ok());
}

#[test]
fn decoding_is_strict_but_accepts_real_keys() {
    let e = Config::from_json(r#"{"maxTtftPenaltyMs": 100}"#).unwrap_err();
    assert!(matches!(e, ConfigError::Unmarshal(_)), "{e:?}");
    assert!(
        e.to_string().contains("unknown field `maxTtftPenaltyMs`"),
        "{e}"
    );
    let e = Config::from_json(r#"{"maxTTFTPenaltyMs": "100"}"#).unwrap_err();
    assert!(matches!(e, ConfigError::Unmarshal(_)));
    let c = Config::from_json(
        r#"{"affinityThreshold":0.99,"ttftSource":"latencyPredictor","maxTTFTPenaltyMs":5000,
            "latencyPredictionInfoProducerName":"predicted-latency-producer"}"#,
    )
    .unwrap();
    assert_eq!(c.affinity_threshold, 0.99);
    assert_eq!(c.ttft_source, TtftSource::LatencyPredictor);
}

#[test]
fn parameters_round_trip() {
    let c =
        Config::from_json(r#"{"penaltyMode":"matchedTokens","maxTTFTPenaltyMs":30000}"#).unwrap();
    let back = Config::from_value(&c.to_parameters()).unwrap();
    assert_eq!(back, c);
    assert_eq!(c.to_parameters()["maxTTFTPenaltyMs"], 30000.0);
}

#[test]
fn best_by_ttft_is_public_and_returns_the_endpoint() {
    let eps = [ep("a", 90, 700), ep("b", 90, 300)];
    let b = best_by_ttft(&cfg(1.0), &eps, &[0, 1]).unwrap();
    assert_eq!(b.index, 1);
    assert_eq!(b.ttft_ms, 300.0);
}
