//! Invariants of `decide` over arbitrary candidates and configs.

use gatecal_filter::{
    Candidate, Config, MissingSignal, Outcome, PenaltyMode, TtftSource, decide, decide_verdict,
};
use proptest::prelude::*;

fn candidate() -> impl Strategy<Value = Candidate> {
    (
        proptest::option::of(0i64..120),
        proptest::option::of(0i64..100),
        proptest::option::of(0i64..256),
        proptest::option::of(-10i64..2_000_000),
        proptest::option::of(0i64..50),
        proptest::option::of(prop_oneof![
            0.0f64..60_000.0,
            Just(f64::NAN),
            Just(f64::MAX)
        ]),
    )
        .prop_map(|(m, t, b, tok, req, pred)| Candidate {
            id: String::new(),
            match_blocks: m,
            total_blocks: t,
            block_size_tokens: b,
            in_flight_tokens: tok,
            in_flight_requests: req,
            predicted_ttft_ms: pred,
        })
}

fn config() -> impl Strategy<Value = Config> {
    (
        0.0f64..=1.0,
        0.0f64..=1.0,
        prop_oneof![Just(0.0), 0.0f64..40_000.0],
        prop_oneof![
            Just(TtftSource::PrefillThroughput),
            Just(TtftSource::LatencyPredictor)
        ],
        1.0f64..40_000.0,
        prop_oneof![Just(PenaltyMode::Static), Just(PenaltyMode::MatchedTokens)],
        0i64..5,
        prop_oneof![Just(MissingSignal::KeepAll), Just(MissingSignal::AsZero)],
    )
        .prop_map(|(a, e, m, s, p, mode, d, ms)| Config {
            affinity_threshold: a,
            exploration_probability: e,
            max_ttft_penalty_ms: m,
            ttft_source: s,
            peak_prefill_throughput: p,
            penalty_mode: mode,
            max_in_flight_requests_delta: d,
            missing_signal: ms,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn kept_is_a_subset_without_repeats(c in config(), cands in proptest::collection::vec(candidate(), 0..8), draw in 0.0f64..1.0) {
        let d = decide(&c, &cands, draw);
        let mut seen = vec![false; cands.len()];
        for &i in &d.kept {
            prop_assert!(i < cands.len());
            prop_assert!(!seen[i]);
            seen[i] = true;
        }
        for &i in &d.sticky {
            prop_assert!(i < cands.len());
        }
    }

    #[test]
    fn keep_all_outcomes_keep_all(c in config(), cands in proptest::collection::vec(candidate(), 0..8), draw in 0.0f64..1.0) {
        let d = decide(&c, &cands, draw);
        let all: Vec<usize> = (0..cands.len()).collect();
        match d.outcome {
            Outcome::NotApplicable | Outcome::Exploration | Outcome::NoMatch
            | Outcome::LoadOverride | Outcome::MissingSignal => prop_assert_eq!(&d.kept, &all),
            Outcome::Sticky => prop_assert_eq!(&d.kept, &d.sticky),
            Outcome::RequestLoadOverride => {
                prop_assert!(d.kept.starts_with(&d.sticky));
                prop_assert!(d.kept.len() > d.sticky.len());
            }
        }
        if d.outcome == Outcome::LoadOverride {
            prop_assert!(d.gate.and_then(|g| g.fired).is_some());
        }
    }

    #[test]
    fn sticky_endpoints_reach_the_threshold(c in config(), cands in proptest::collection::vec(candidate(), 2..8)) {
        let d = decide(&c, &cands, 1.0);
        for &i in &d.sticky {
            prop_assert!(cands[i].prefix_score() >= c.affinity_threshold);
        }
    }

    #[test]
    fn static_mode_never_reads_block_size(c in config(), cands in proptest::collection::vec(candidate(), 0..8), bs in proptest::option::of(0i64..4096)) {
        // With the request gate off, the block size only matters to the
        // break-even test: changing it cannot change a static-mode decision.
        let c = Config { penalty_mode: PenaltyMode::Static, max_in_flight_requests_delta: 0, ..c };
        let other: Vec<Candidate> = cands.iter().cloned().map(|mut x| { x.block_size_tokens = bs; x }).collect();
        let a = decide(&c, &cands, 1.0);
        let b = decide(&c, &other, 1.0);
        prop_assert_eq!(a.outcome, b.outcome);
        prop_assert_eq!(a.kept, b.kept);
    }

    #[test]
    fn matched_tokens_without_ceiling_releases_only_on_break_even(c in config(), cands in proptest::collection::vec(candidate(), 0..8)) {
        let c = Config { penalty_mode: PenaltyMode::MatchedTokens, ttft_source: TtftSource::PrefillThroughput, max_ttft_penalty_ms: 0.0, max_in_flight_requests_delta: 0, ..c };
        let d = decide(&c, &cands, 1.0);
        if d.outcome == Outcome::LoadOverride {
            let g = d.gate.unwrap();
            let m = g.matched_tokens.unwrap();
            prop_assert!(m > 0, "no match info never releases");
            prop_assert!(g.token_gap.unwrap() > m);
        }
    }

    #[test]
    fn raising_the_static_bar_never_adds_releases(c in config(), cands in proptest::collection::vec(candidate(), 0..8), extra in 0.0f64..10_000.0) {
        let lo = Config { penalty_mode: PenaltyMode::Static, max_in_flight_requests_delta: 0, max_ttft_penalty_ms: c.max_ttft_penalty_ms.max(1.0), ..c };
        let hi = Config { max_ttft_penalty_ms: lo.max_ttft_penalty_ms + extra, ..lo.clone() };
        let a = decide(&lo, &cands, 1.0);
        let b = decide(&hi, &cands, 1.0);
        if b.outcome == Outcome::LoadOverride {
            prop_assert_eq!(a.outcome, Outcome::LoadOverride);
        }
    }

    #[test]
    fn the_verdict_is_decides_outcome_and_gate(c in config(), cands in proptest::collection::vec(candidate(), 0..20), draw in 0.0f64..1.0) {
        let d = decide(&c, &cands, draw);
        let v = decide_verdict(&c, &cands, draw);
        prop_assert_eq!(v.outcome, d.outcome);
        // Bitwise, NaN included.
        prop_assert_eq!(format!("{:?}", v.gate), format!("{:?}", d.gate));
    }
}
