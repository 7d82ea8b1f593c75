//! From the parser's assembled [`Decision`] to the analysis' [`DecisionInput`].

use gatecal_parser::{Completion, Decision, FilterMsg};

use crate::input::{DecisionInput, LoggedGate, MatchedSource, ScoredEndpoint};

/// Whether a scorer plugin (`name/type`) scores prefix-cache matches: its
/// type (after the last `/`) contains `prefix` and not `affinity`.
fn is_prefix_scorer(plugin: &str) -> bool {
    let b = plugin.as_bytes();
    let t = match b.iter().rposition(|&c| c == b'/') {
        Some(i) => &b[i + 1..],
        None => b,
    };
    contains(t, b"prefix") && !contains(t, b"affinity")
}

/// `needle` occurs in `hay` (a plain window scan: plugin names are short,
/// and the general substring searcher's setup costs more than the scan).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Builds that log every candidate's in-flight tokens (P2251's `calculated
/// endpoint TTFT`) make a narrowed or no-match decision exact: the
/// survivors of a narrowed decision are the sticky set, and no candidate of a
/// no-match decision is sticky. Match info is not logged, so stickiness is
/// written as a 1/1 or 0/1 match without block size (matched tokens unknown).
fn per_endpoint_loads(d: &Decision) -> Option<Vec<gatecal_filter::Candidate>> {
    use gatecal_filter::{Candidate, Outcome};
    if d.candidates.len() < 2 || d.candidates.iter().any(|c| c.in_flight_tokens.is_none()) {
        return None;
    }
    let sticky = |ep: &str| match (d.outcome, &d.survivors) {
        (Some(Outcome::Sticky), Some(s)) => Some(s.iter().any(|x| x == ep)),
        (Some(Outcome::NoMatch), _) => Some(false),
        _ => None,
    };
    d.candidates
        .iter()
        .map(|c| {
            let hit = sticky(&c.endpoint)?;
            Some(Candidate {
                id: c.endpoint.clone(),
                match_blocks: Some(i64::from(hit)),
                total_blocks: Some(1),
                in_flight_tokens: c.in_flight_tokens,
                in_flight_requests: c.in_flight_requests,
                ..Candidate::default()
            })
        })
        .collect()
}

impl From<&Decision> for DecisionInput {
    fn from(d: &Decision) -> DecisionInput {
        DecisionInput::from(d.clone())
    }
}

/// By value: the decision's strings move into the input (the pipeline's
/// path, one decision at a time).
impl From<Decision> for DecisionInput {
    fn from(d: Decision) -> DecisionInput {
        let logged_gate = match d.message {
            FilterMsg::TtftGateBroken => d.penalty.map(|p| LoggedGate {
                best_sticky_ttft_ms: d.best_sticky_ttft_ms,
                best_non_sticky_ttft_ms: d.best_non_sticky_ttft_ms,
                penalty_ms: p,
                max_penalty_ms: d.max_penalty,
            }),
            _ => None,
        };
        // Exact when every candidate carries its match info and its load
        // (decision records, or builds that log both). A record without
        // match info cannot be replayed: its gate input is unknown.
        let exact_ok = !d.candidates.is_empty()
            && d.candidates.iter().all(|c| {
                c.total_blocks.is_some()
                    && c.match_blocks.is_some()
                    && (d.completion == Completion::Record
                        || c.in_flight_tokens.is_some()
                        || c.predicted_ttft_ms.is_some())
            });
        let exact = if exact_ok {
            Some(d.candidates.iter().map(|c| c.to_candidate()).collect())
        } else {
            per_endpoint_loads(&d)
        };
        let prompt = d.prompt_tokens.map(|p| p.round() as i64);
        // The config in force, where the line shows it (finite, in range).
        let affinity_threshold = d
            .affinity_threshold
            .filter(|t| t.is_finite() && (0.0..=1.0).contains(t));
        let prefill_throughput = d
            .extras
            .prefill_throughput
            .or(d.startup_peak)
            .filter(|p| p.is_finite() && *p > 0.0);
        let traced = d.traced.then_some(crate::input::TracedGate {
            penalty_ms: d.traced_penalty_ms,
            joined: d.completion != Completion::Traced,
        });
        let Decision {
            deployment,
            ts,
            request_id,
            profile,
            filter,
            outcome,
            sticky,
            total,
            survivors,
            candidates,
            chosen,
            hit_prefix_tokens,
            recorded,
            ..
        } = d;
        let scored: Vec<ScoredEndpoint> = candidates
            .into_iter()
            .filter(|c| c.token_load.is_some() || c.in_flight_tokens.is_some())
            .map(|c| ScoredEndpoint {
                prefix_score: c
                    .scores
                    .iter()
                    .find(|(p, _)| is_prefix_scorer(p))
                    .map(|(_, s)| *s),
                endpoint: c.endpoint,
                token_load: c.token_load,
                in_flight_tokens: c.in_flight_tokens,
            })
            .collect();
        // Matched tokens: the PD decider's hit, else the best prefix score of a
        // survivor times the prompt length.
        let decider = hit_prefix_tokens.map(|h| h.round() as i64);
        let scored_hit = decider.is_none().then(|| {
            let p = prompt?;
            let best = scored
                .iter()
                .filter(|e| {
                    survivors
                        .as_ref()
                        .is_none_or(|s| s.iter().any(|x| x == &e.endpoint))
                })
                .filter_map(|e| e.prefix_score)
                .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))))?;
            Some((best * p as f64).round() as i64)
        });
        let (hit, matched_source) = match (decider, scored_hit.flatten()) {
            (Some(h), _) => (Some(h), Some(MatchedSource::PdDecider)),
            (None, Some(h)) => (Some(h), Some(MatchedSource::PrefixScorePrompt)),
            (None, None) => (None, None),
        };
        DecisionInput {
            deployment,
            ts,
            request_id,
            profile,
            filter,
            outcome,
            logged_gate,
            sticky_count: sticky,
            total,
            survivors,
            scored,
            exact,
            chosen,
            prompt_tokens: prompt,
            hit_prefix_tokens: hit,
            recorded,
            record: None,
            affinity_threshold,
            prefill_throughput,
            traced,
            matched_source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_parser::{ParseOptions, parse_slice};

    #[test]
    fn per_endpoint_ttft_builds_are_exact() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/edge/all_filter_versions.log"
        );
        let bytes = std::fs::read(path).unwrap();
        let parsed =
            parse_slice("all_filter_versions.log", &bytes, &ParseOptions::default()).unwrap();
        let d = parsed
            .decisions()
            .find(|d| d.request_id.as_deref() == Some("p2251"))
            .expect("the P2251 decision");
        let input = DecisionInput::from(d);
        let exact = input
            .exact
            .expect("every candidate's in-flight tokens are logged");
        assert!(exact.iter().all(|c| c.in_flight_tokens.is_some()));
        assert!(exact.iter().any(|c| c.in_flight_tokens == Some(64000)));
    }
}
