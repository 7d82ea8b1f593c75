//! The two analyses and their reports: the gate audit of `gate-dist`
//! ([`gate_dist`]), the calibration of `recommend` ([`recommend`]), and the
//! decision records both write ([`records`]); and the comparison of two
//! audits, before and after a change ([`compare`]).

pub mod compare;
pub mod gate_dist;
mod intake;
pub mod partial;
mod parts;
pub mod recommend;
pub mod records;

/// A deployment's histogram buckets, kept beside its report for the
/// bootstrap: `(bucket midpoint in ms, count)`, ascending. Only the buckets
/// holding values are kept (at most one per value, and at most the
/// histogram's own buckets: 16 bytes each, no more than the accumulator
/// they are read from, which is dropped).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    /// The gate input's.
    pub gate_input_ms: Vec<(f64, u64)>,
    /// The observed TTFT's (one per request).
    pub observed_ttft_ms: Vec<(f64, u64)>,
}

#[cfg(test)]
mod tests {
    use gatecal_filter::Outcome;

    use crate::config::source::{ConfigSet, ParamSource, SourcedConfig, flag_bar};
    use crate::input::{DecisionInput, LoggedGate, ScoredEndpoint};
    use crate::report::gate_dist::{GateDist, GateDistOptions, InputSummary};
    use crate::report::recommend::{Recommend, RecommendOptions};

    fn scored(ep: &str, load: f64) -> ScoredEndpoint {
        ScoredEndpoint {
            endpoint: ep.into(),
            token_load: Some(load),
            prefix_score: None,
            in_flight_tokens: None,
        }
    }

    /// Kept both endpoints, narrowed to `ns/a` (about 10 s ahead: held
    /// under the default 18 s bar, released under 5 s), and a break whose
    /// `maxPenalty` shows the log's bar of 5 s.
    fn decisions() -> Vec<DecisionInput> {
        let base = DecisionInput {
            deployment: "d".into(),
            total: Some(2),
            affinity_threshold: Some(0.9),
            ..DecisionInput::default()
        };
        vec![
            DecisionInput {
                ts: Some(1.0),
                request_id: Some("k".into()),
                outcome: Some(Outcome::NoMatch),
                scored: vec![scored("ns/a", 1_000.0), scored("ns/b", 1_000.0)],
                ..base.clone()
            },
            DecisionInput {
                ts: Some(2.0),
                request_id: Some("held".into()),
                outcome: Some(Outcome::Sticky),
                sticky_count: Some(1),
                survivors: Some(vec!["ns/a".into()]),
                scored: vec![scored("ns/a", 160_000.0)],
                ..base.clone()
            },
            DecisionInput {
                ts: Some(3.0),
                request_id: Some("brk".into()),
                outcome: Some(Outcome::LoadOverride),
                logged_gate: Some(LoggedGate {
                    best_sticky_ttft_ms: Some(6_100.0),
                    best_non_sticky_ttft_ms: Some(100.0),
                    penalty_ms: 6_000.0,
                    max_penalty_ms: Some(5_000.0),
                }),
                ..base
            },
        ]
    }

    /// The config in force and the replayed release share (over all
    /// decisions) of gate-dist and of recommend, on the same decisions.
    fn both(set: &ConfigSet) -> ((SourcedConfig, f64), (SourcedConfig, f64)) {
        let mut g = GateDist::new(GateDistOptions::default(), set.clone());
        let mut r = Recommend::new(RecommendOptions::default(), set.clone());
        for d in decisions() {
            g.push(d.clone());
            r.push_decision(d);
        }
        let g = g.finish(InputSummary::default());
        let r = r.finish(InputSummary::default());
        let (g, r) = (&g.deployments[0], &r.deployments[0].current);
        (
            (
                g.config.clone(),
                g.stats.replay.replayed_released as f64 / g.stats.decisions as f64,
            ),
            (r.config.clone(), r.released_share),
        )
    }

    #[test]
    fn recommend_replays_under_gate_dists_config_in_force() {
        let (g, r) = both(&ConfigSet::default());
        assert_eq!(g, r);
        let (config, released) = r;
        assert_eq!(config.source, "log");
        assert_eq!(config.parameters.max_ttft_penalty_ms, 5_000.0);
        assert_eq!(config.parameters.affinity_threshold, 0.9);
        assert_eq!(config.source_of("maxTTFTPenaltyMs"), ParamSource::Log);
        assert!(config.log_disagreements.is_empty());
        // The held decision, reconstructed at about 10 s, is censored to
        // the log's 5 s bar: the break alone is released, as logged.
        assert!((released - 1.0 / 3.0).abs() < 1e-12, "{released}");
    }

    #[test]
    fn a_flag_against_the_log_is_a_disagreement_in_both() {
        let set = flag_bar(7_000.0);
        let (g, r) = both(&set);
        assert_eq!(g, r);
        let (config, released) = r;
        assert_eq!(config.source, "flags+log");
        assert_eq!(config.parameters.max_ttft_penalty_ms, 7_000.0);
        // The threshold's default is not given: the log's value, no
        // disagreement.
        assert_eq!(config.parameters.affinity_threshold, 0.9);
        let w = &config.log_disagreements;
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].parameter, "maxTTFTPenaltyMs");
        assert_eq!((w[0].log, w[0].given), (5_000.0, 7_000.0));
        assert_eq!(
            (w[0].given_source, w[0].used),
            (ParamSource::Flag, ParamSource::Flag)
        );
        // The flag's 7 s bar holds the 6 s break.
        assert_eq!(released, 0.0);
    }
}
