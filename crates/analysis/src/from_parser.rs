//! From the parser's assembled [`Decision`] to the analysis' [`DecisionInput`].

use gatecal_parser::{Completion, Decision, FilterMsg};

use crate::input::{DecisionInput, LoggedGate, ScoredEndpoint};

/// Whether a scorer plugin (`name/type`) scores prefix-cache matches.
fn is_prefix_scorer(plugin: &str) -> bool {
    let t = plugin.rsplit('/').next().unwrap_or(plugin);
    t.contains("prefix") && !t.contains("affinity")
}

impl From<&Decision> for DecisionInput {
    fn from(d: &Decision) -> DecisionInput {
        let logged_gate = match d.message {
            FilterMsg::TtftGateBroken => d.penalty.map(|p| LoggedGate {
                best_sticky_ttft_ms: d.best_sticky_ttft_ms,
                best_non_sticky_ttft_ms: d.best_non_sticky_ttft_ms,
                penalty_ms: p,
                max_penalty_ms: d.max_penalty,
            }),
            _ => None,
        };
        let scored: Vec<ScoredEndpoint> = d
            .candidates
            .iter()
            .filter(|c| c.token_load.is_some() || c.in_flight_tokens.is_some())
            .map(|c| ScoredEndpoint {
                endpoint: c.endpoint.clone(),
                token_load: c.token_load,
                prefix_score: c
                    .scores
                    .iter()
                    .find(|(p, _)| is_prefix_scorer(p))
                    .map(|(_, s)| *s),
                in_flight_tokens: c.in_flight_tokens,
            })
            .collect();
        // Exact when every candidate carries its match info and its load
        // (decision records, or builds that log both).
        let exact_ok = !d.candidates.is_empty()
            && (d.completion == Completion::Record
                || d.candidates.iter().all(|c| {
                    c.total_blocks.is_some()
                        && c.match_blocks.is_some()
                        && (c.in_flight_tokens.is_some() || c.predicted_ttft_ms.is_some())
                }));
        let exact = exact_ok.then(|| d.candidates.iter().map(|c| c.to_candidate()).collect());
        let prompt = d.prompt_tokens.map(|p| p.round() as i64);
        // Matched tokens: the PD decider's hit, else the best prefix score of a
        // survivor times the prompt length.
        let hit = d.hit_prefix_tokens.map(|h| h.round() as i64).or_else(|| {
            let p = prompt?;
            let best = scored
                .iter()
                .filter(|e| {
                    d.survivors
                        .as_ref()
                        .is_none_or(|s| s.iter().any(|x| x == &e.endpoint))
                })
                .filter_map(|e| e.prefix_score)
                .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))))?;
            Some((best * p as f64).round() as i64)
        });
        DecisionInput {
            deployment: d.deployment.clone(),
            ts: d.ts,
            request_id: d.request_id.clone(),
            profile: d.profile.clone(),
            filter: d.filter.clone(),
            outcome: d.outcome,
            logged_gate,
            sticky_count: d.sticky,
            total: d.total,
            survivors: d.survivors.clone(),
            scored,
            exact,
            chosen: d.chosen.clone(),
            prompt_tokens: prompt,
            hit_prefix_tokens: hit,
        }
    }
}
