//! The scenarios that each make one failure mode the reports' findings
//! name, and what each gets wrong.

use super::*;

/// The scenarios that each make one failure mode the reports' findings
/// name; listed by `epp-sim list`, kept out of [`scenario_names`] (the
/// committed fixtures and the tests over every scenario).
pub fn failure_scenario_names() -> &'static [&'static str] {
    &[
        "affinity-off",
        "missing-signal",
        "active-active",
        "inert-breaks",
        "undersized-index",
        "stale-index",
    ]
}

/// What a failure scenario gets wrong (its summary's `failure_mode`), or
/// `None` for the other scenarios.
pub fn failure_truth(name: &str) -> Option<&'static str> {
    match name {
        "affinity-off" => Some(
            "affinity_disengaged: affinityThreshold 0.97 is above almost every prompt's prefix score, so the filter almost never pins",
        ),
        "missing-signal" => Some(
            "missing_signal: 35 % of the candidates lack their in-flight load at each decision, so a side often has no signal and the gate is skipped",
        ),
        "active-active" => Some(
            "split_load_view: two EPP replicas decide for one pool, each request at random, and each counts only its own in-flight tokens, so every gate input sees about half the pool's load",
        ),
        "inert-breaks" => Some(
            "inert_breaks: a prefix-cache-scorer (weight 2) after the filter outweighs the token-load scorer (weight 1), so a request the gate releases goes back to a sticky endpoint most of the time",
        ),
        "undersized-index" => Some(
            "affinity_disengaged: the approximate prefix producer's index holds 128 blocks (8192 tokens) per engine, so a session's earlier turns are evicted before it returns and the filter finds no sticky endpoint, while vLLM's own caches still hit",
        ),
        "stale-index" => Some(
            "reuse_shortfall: each engine's KV cache holds 16384 tokens while the approximate prefix producer's index keeps every session, so the router pins follow-ups to prefixes vLLM has already evicted",
        ),
        _ => None,
    }
}

/// `balanced`'s deployment on 64-token blocks whose engines keep only
/// 16384 tokens of prefix cache each (a few sessions), while the
/// approximate producer's index keeps 2,000,000 tokens per engine: the
/// filter pins each follow-up to the engine the index says holds it, and
/// vLLM finds little of it. No exploration, no missing signal.
pub(super) fn stale_index() -> Scenario {
    let mut s = balanced();
    s.name = "stale-index".to_string();
    s.description = "qwen3-32b as balanced on 64-token blocks, engines caching 16384 tokens under an index that keeps everything (reuse_shortfall)".to_string();
    for d in &mut s.deployments {
        d.block_size = 64;
        d.missing_signal_prob = 0.0;
        for p in &mut d.pools {
            p.index_capacity_tokens = Some(p.kv_capacity_tokens);
            p.kv_capacity_tokens = 16384;
            for f in &mut p.filters {
                f.config.exploration_probability = 0.0;
            }
        }
    }
    s
}

/// `balanced`'s deployment decided by two active EPP replicas (no
/// exploration, no missing signal): each request goes to one of them at
/// random, and each gates on its own in-flight tokens only.
pub(super) fn active_active() -> Scenario {
    let mut s = balanced();
    s.name = "active-active".to_string();
    s.description = "qwen3-32b as balanced, two EPP replicas deciding at once, each seeing its own in-flight tokens (split_load_view)".to_string();
    for d in &mut s.deployments {
        d.epp_replicas = 2;
        d.missing_signal_prob = 0.0;
        for p in &mut d.pools {
            for f in &mut p.filters {
                f.config.exploration_probability = 0.0;
            }
        }
    }
    s
}

/// `glm-like` at its true peak (3000 tok/s) with a bar that releases
/// (8000 ms), plus a `prefix-cache-scorer` of weight 2 after the filter:
/// when the gate releases and keeps every endpoint, the prefix scorer's
/// matched-over-total blocks (up to 2 weighted points) outweighs the
/// token-load scorer's spread (at most 1), so the picker sends the
/// request back to a sticky endpoint unless another one also holds most
/// of the prompt.
pub(super) fn inert_breaks() -> Scenario {
    let mut s = glm_like();
    s.name = "inert-breaks".to_string();
    s.description = "glm-like at its true peak and an 8000 ms bar, prefix-cache-scorer (weight 2) after the filter (inert_breaks)".to_string();
    for d in &mut s.deployments {
        for p in &mut d.pools {
            p.prefix_scorer_weight = 2.0;
            for f in &mut p.filters {
                f.config.peak_prefill_throughput = 3000.0;
                f.config.max_ttft_penalty_ms = 8000.0;
            }
        }
    }
    s
}

/// `balanced`'s deployment on 64-token blocks (the approximate prefix
/// producer) whose index holds 128 blocks per engine
/// (`lruCapacityPerServer: 128`, against an upstream default of 31250):
/// the engines' caches keep every session, the index only the last one or
/// two, so the filter rarely finds a sticky endpoint while vLLM's prefix
/// cache keeps hitting. No exploration, no missing signal.
pub(super) fn undersized_index() -> Scenario {
    let mut s = balanced();
    s.name = "undersized-index".to_string();
    s.description = "qwen3-32b as balanced on 64-token blocks, approximate producer index of 128 blocks per engine (affinity_disengaged)".to_string();
    for d in &mut s.deployments {
        d.block_size = 64;
        d.missing_signal_prob = 0.0;
        for p in &mut d.pools {
            p.index_capacity_tokens = Some(128 * 64);
            for f in &mut p.filters {
                f.config.exploration_probability = 0.0;
            }
        }
    }
    s
}

/// `balanced`'s deployment with `affinityThreshold: 0.97`, above the
/// prefix score any follow-up prompt reaches (its new message and the
/// previous answer are never cached), no exploration and no missing
/// signal: the filter finds no sticky endpoint while prompts share most of
/// their prefix.
pub(super) fn affinity_off() -> Scenario {
    let mut s = balanced();
    s.name = "affinity-off".to_string();
    s.description = "qwen3-32b as balanced, affinityThreshold 0.97: no endpoint is ever sticky (affinity_disengaged)".to_string();
    for d in &mut s.deployments {
        d.missing_signal_prob = 0.0;
        for p in &mut d.pools {
            for f in &mut p.filters {
                f.config.affinity_threshold = 0.97;
                f.config.exploration_probability = 0.0;
            }
        }
    }
    s
}

/// `balanced`'s deployment whose candidates lack their in-flight load 35 %
/// of the time (the newer upstream semantics: a side without signal skips
/// the gate and keeps every endpoint).
pub(super) fn missing_signal() -> Scenario {
    let mut s = balanced();
    s.name = "missing-signal".to_string();
    s.description =
        "qwen3-32b as balanced, 35 % of candidates without their load attribute (missing_signal)"
            .to_string();
    for d in &mut s.deployments {
        d.missing_signal_prob = 0.35;
        for p in &mut d.pools {
            for f in &mut p.filters {
                f.config.exploration_probability = 0.0;
            }
        }
    }
    s
}
