//! What the accuracy examples share: the candidate configs that
//! `just accuracy` checks, and the effective peak one of them is built
//! from.

use gatecal_filter::{Config, PenaltyMode};
use gatecal_sim::SimOutput;

/// The candidates, the config in force first.
pub const LABELS: [&str; 5] = ["current", "bar-low", "bar-high", "matched", "peak"];

/// The candidate `label` for a deployment whose config in force is `c`
/// and whose engines' effective saturated rate is `effective`:
/// `bar-low` (a quarter of the bar, at least 500 ms), `bar-high` (twice
/// the bar), `matched` (matchedTokens without ceiling), `peak` (the
/// effective peak); any other label is the config in force.
pub fn candidate(label: &str, c: &Config, effective: f64) -> Config {
    match label {
        "bar-low" => Config {
            max_ttft_penalty_ms: (c.max_ttft_penalty_ms / 4.0).max(500.0),
            ..c.clone()
        },
        "bar-high" => Config {
            max_ttft_penalty_ms: c.max_ttft_penalty_ms * 2.0,
            ..c.clone()
        },
        "matched" => Config {
            penalty_mode: PenaltyMode::MatchedTokens,
            max_ttft_penalty_ms: 0.0,
            ..c.clone()
        },
        "peak" => Config {
            peak_prefill_throughput: effective,
            ..c.clone()
        },
        _ => c.clone(),
    }
}

/// The effective saturated prefill rate of `deployment`'s engines in a
/// simulator run, as its summary states it, else `fallback` (the pool's
/// true peak).
pub fn effective_peak(out: &SimOutput, deployment: &str, fallback: f64) -> f64 {
    out.summary
        .deployments
        .iter()
        .find(|d| d.deployment == deployment)
        .and_then(|d| d.effective_peak_prefill_tps)
        .unwrap_or(fallback)
}
