//! The nine tests of the matched-tokens change's test table, with its numbers.
//!
//! As in the change's own tests, an endpoint is built with a prefix match of
//! `match` blocks out of 100 at 16 tokens per block (90 blocks = 1440 tokens)
//! and the peak throughput is 1000 tok/s, so in-flight tokens read as ms.

use gatecal_filter::{
    Candidate, Config, ConfigError, Outcome, PenaltyMode, Rule, TtftSource, decide,
};

fn ep(name: &str, match_blocks: i64, in_flight: i64) -> Candidate {
    Candidate::new(name)
        .with_match(match_blocks, 100, 16)
        .with_in_flight_tokens(in_flight)
}

fn matched_tokens(max_penalty_ms: f64) -> Config {
    Config {
        affinity_threshold: 0.80,
        max_ttft_penalty_ms: max_penalty_ms,
        ttft_source: TtftSource::PrefillThroughput,
        peak_prefill_throughput: 1000.0,
        penalty_mode: PenaltyMode::MatchedTokens,
        ..Config::default()
    }
}

#[test]
fn keeps_pin_when_gap_below_matched_tokens() {
    let d = decide(
        &matched_tokens(18000.0),
        &[ep("sticky", 90, 2000), ep("free", 10, 1000)],
        1.0,
    );
    assert_eq!(d.outcome, Outcome::Sticky, "gap 1000 < matched 1440 holds");
    assert_eq!(d.kept, vec![0]);
    let g = d.gate.unwrap();
    assert_eq!(g.matched_tokens, Some(1440));
    assert_eq!(g.token_gap, Some(1000));
    assert_eq!(g.fired, None);
}

#[test]
fn releases_pin_when_gap_exceeds_matched_tokens() {
    let d = decide(
        &matched_tokens(18000.0),
        &[ep("sticky", 90, 5000), ep("free", 10, 1000)],
        1.0,
    );
    assert_eq!(
        d.outcome,
        Outcome::LoadOverride,
        "gap 4000 > matched 1440 releases"
    );
    assert_eq!(d.kept, vec![0, 1]);
    assert_eq!(d.gate.unwrap().fired, Some(Rule::BreakEven));
}

#[test]
fn scales_with_cache_value() {
    let c = matched_tokens(18000.0);
    // 100 * 16 = 1600 matched tokens do not cover a 4000-token gap.
    let d = decide(&c, &[ep("sticky", 100, 5000), ep("free", 10, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::LoadOverride);
    // Same gap, 128-token blocks: 90 * 128 = 11520 matched tokens cover it.
    let big = Candidate::new("sticky-big")
        .with_match(90, 100, 128)
        .with_in_flight_tokens(5000);
    let d = decide(&c, &[big, ep("free", 10, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.gate.unwrap().matched_tokens, Some(11520));
}

#[test]
fn ceiling_still_applies() {
    // 90 * 1024 matched tokens outvalue the 4000-token gap, but 4000 ms > 100 ms.
    let big = Candidate::new("sticky")
        .with_match(90, 100, 1024)
        .with_in_flight_tokens(5000);
    let d = decide(&matched_tokens(100.0), &[big, ep("free", 10, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::LoadOverride);
    assert_eq!(d.gate.unwrap().fired, Some(Rule::Ceiling));
}

#[test]
fn no_match_info_is_no_op() {
    // Block size 0 (unreadable match) gives 0 matched tokens: hold, not release.
    let sticky = Candidate::new("sticky")
        .with_match(90, 100, 0)
        .with_in_flight_tokens(9000);
    let d = decide(
        &matched_tokens(18000.0),
        &[sticky, ep("free", 10, 1000)],
        1.0,
    );
    assert_eq!(d.outcome, Outcome::Sticky);
    assert_eq!(d.gate.unwrap().matched_tokens, Some(0));
    // And with the block size absent altogether.
    let mut sticky = ep("sticky", 90, 9000);
    sticky.block_size_tokens = None;
    let d = decide(
        &matched_tokens(18000.0),
        &[sticky, ep("free", 10, 1000)],
        1.0,
    );
    assert_eq!(d.outcome, Outcome::Sticky);
}

#[test]
fn static_mode_unchanged() {
    let c = Config {
        max_ttft_penalty_ms: 1000.0,
        peak_prefill_throughput: 1000.0,
        penalty_mode: PenaltyMode::Static,
        ..Config::default()
    };
    // 4000 ms > 1000 ms: release.
    let d = decide(&c, &[ep("sticky", 90, 5000), ep("free", 10, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::LoadOverride);
    assert_eq!(d.gate.unwrap().fired, Some(Rule::StaticBar));
    assert_eq!(d.gate.unwrap().matched_tokens, None);
    // 500 ms under the bar: hold, whatever the matched tokens.
    let d = decide(&c, &[ep("sticky", 90, 1500), ep("free", 10, 1000)], 1.0);
    assert_eq!(d.outcome, Outcome::Sticky);
}

#[test]
fn default_penalty_mode_is_static() {
    assert_eq!(Config::default().penalty_mode, PenaltyMode::Static);
    assert_eq!(
        Config::from_json("{}").unwrap().penalty_mode,
        PenaltyMode::Static
    );
    assert_eq!(Config::from_json("null").unwrap(), Config::default());
}

#[test]
fn matched_tokens_rejects_latency_predictor() {
    let e = Config::from_json(r#"{"penaltyMode":"matchedTokens","ttftSource":"latencyPredictor"}"#)
        .unwrap_err();
    assert_eq!(e, ConfigError::MatchedTokensNeedsThroughput);
    assert!(e.to_string().contains("requires ttftSource"), "{e}");
}

#[test]
fn rejects_unknown_penalty_mode() {
    let e = Config::from_json(r#"{"penaltyMode":"nonsense"}"#).unwrap_err();
    assert_eq!(e, ConfigError::PenaltyMode("nonsense".into()));
    assert_eq!(
        e.to_string(),
        r#"invalid config: penaltyMode must be "static" or "matchedTokens", got "nonsense""#
    );
}
