//! # Brief overview
//!
//! The filter core of gatecal: the llm-d router's
//! `prefix-cache-affinity-filter` as a pure function. It is the only place in
//! the workspace that answers "hold or release". No I/O, no logging, no clock.
//!
//! Given the filter's [`Config`] and the candidate endpoints, [`decide`]
//! returns the outcome (named as the EPP's metric label), the endpoints kept,
//! and the gate's evaluation with the winning endpoint of each side.
//!
//! ## The rule
//!
//! An endpoint is *sticky* iff `MatchBlocks / TotalBlocks >= affinityThreshold`.
//! With at least one sticky and one non-sticky endpoint, per endpoint
//!
//! ```text
//! TTFT_ms = inFlightTokens / peakPrefillThroughput * 1000     (ttftSource: prefillThroughput)
//! gate input = bestStickyTTFT - bestNonStickyTTFT             (best = lowest, first on ties)
//! ```
//!
//! * `penaltyMode: static` (default): release iff `gate input > maxTTFTPenaltyMs`
//!   (strictly); `maxTTFTPenaltyMs = 0` always sticks.
//! * `penaltyMode: matchedTokens`: release iff
//!   `inFlight(bestSticky) - inFlight(bestNonSticky) > MatchBlocks * BlockSizeTokens`
//!   of the best sticky endpoint, or the static bar fires (it stays as an
//!   absolute ceiling; 0 disables it). No match info gives 0 matched tokens,
//!   which skips the test: it never means release.
//!
//! The *break-even bar* of a request, `matchedTokens / peakPrefillThroughput * 1000`
//! ms, is the static threshold at which both modes agree for it.
//!
//! The whole algorithm, in the order the EPP runs it:
//!
//! 1. at most one candidate or `affinityThreshold <= 0`: `not_applicable`, keep all;
//! 2. `exploration_draw < explorationProbability`: `exploration`, keep all;
//! 3. no sticky endpoint: `no_match`, keep all;
//! 4. the TTFT gate above (static mode runs it only when `maxTTFTPenaltyMs > 0`;
//!    both need a non-sticky endpoint). A side with no load signal gives
//!    `missing_signal` and keeps all under [`MissingSignal::KeepAll`] (newer
//!    upstream, the default); under [`MissingSignal::AsZero`] (v0.9.0/v0.10.0)
//!    absent tokens count as 0 and absent predictions as `f64::MAX`;
//!    a release is `load_override`, keep all;
//! 5. the in-flight request gate (`maxInFlightRequestsDelta > 0`): the
//!    non-sticky endpoints where the request's TTFT (endpoint TTFT plus its
//!    uncached prompt `(TotalBlocks - MatchBlocks) * BlockSizeTokens` at the
//!    peak rate) is at most `maxTTFTPenaltyMs` above its best sticky TTFT are
//!    *within*; if the fewest in-flight requests on a sticky endpoint exceed the
//!    fewest on a *within* endpoint by more than the delta:
//!    `request_load_override`, keep sticky then within;
//! 6. otherwise `sticky`: keep the sticky endpoints.
//!
//! # Example
//!
//! ```
//! use gatecal_filter::{decide, Candidate, Config, Outcome, PenaltyMode, Rule};
//!
//! let candidates = [
//!     // 22 of 25 blocks cached (0.88 >= 0.80): sticky, 41000 tokens queued.
//!     Candidate::new("llm/p-0").with_match(22, 25, 64).with_in_flight_tokens(41_000),
//!     Candidate::new("llm/p-1").with_match(0, 25, 64).with_in_flight_tokens(2_000),
//! ];
//!
//! // Static mode, defaults: (41000 - 2000) / 15928 * 1000 = 2448.5 ms < 18000 ms: hold.
//! let d = decide(&Config::default(), &candidates, 1.0);
//! assert_eq!(d.outcome, Outcome::Sticky);
//! let gate = d.gate.unwrap();
//! assert!((gate.gate_input_ms - 2448.5).abs() < 0.1);
//! assert_eq!(d.kept, vec![0]);
//!
//! // Matched-tokens mode: a 39000-token gap exceeds 22 * 64 = 1408 cached tokens: release.
//! let mt = Config { penalty_mode: PenaltyMode::MatchedTokens, ..Config::default() };
//! let d = decide(&mt, &candidates, 1.0);
//! assert_eq!(d.outcome, Outcome::LoadOverride);
//! assert_eq!(d.gate.unwrap().fired, Some(Rule::BreakEven));
//! assert_eq!(d.kept, vec![0, 1]);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod candidate;
mod config;
mod decide;
mod param;

pub use candidate::Candidate;
pub use config::{Config, ConfigError, DEFAULT_CONFIG, MissingSignal, PenaltyMode, TtftSource};
pub use decide::{
    Best, Decision, GateEval, Outcome, RequestGateEval, Rule, SideSignal, Verdict, best_by_ttft,
    decide, decide_verdict,
};
pub use param::Param;

/// Smallest `peakPrefillThroughput` gatecal computes with, tokens/s: below
/// it a TTFT overflows to infinity and every gate decision drops out of a
/// row (the EPP itself takes any positive value).
pub const MIN_PEAK_TOK_S: f64 = 1.0;

/// Largest `peakPrefillThroughput` gatecal computes with, tokens/s (a
/// billion; one engine reaches about 10^5): above it every TTFT is 0.
pub const MAX_PEAK_TOK_S: f64 = 1e9;

/// Largest `maxTTFTPenaltyMs` (or other TTFT in ms) gatecal computes with:
/// one day. A longer bar holds every request.
pub const MAX_BAR_MS: f64 = 86_400_000.0;

/// The first of `config`'s parameters outside the ranges gatecal computes
/// with, whatever the value came from (a flag or a config file): the
/// parameter's EPP name, its value, and the range in words. The filter's
/// own validation ([`Config::validate`]) comes first; this is narrower.
///
/// ```
/// use gatecal_filter::{DEFAULT_CONFIG, Config, outside_range};
/// assert_eq!(outside_range(&DEFAULT_CONFIG), None);
/// let tiny = Config { peak_prefill_throughput: 1e-320, ..DEFAULT_CONFIG };
/// assert_eq!(outside_range(&tiny).unwrap().0, "peakPrefillThroughput");
/// ```
pub fn outside_range(config: &Config) -> Option<(&'static str, f64, String)> {
    let peak = config.peak_prefill_throughput;
    if config.ttft_source == TtftSource::PrefillThroughput
        && !(MIN_PEAK_TOK_S..=MAX_PEAK_TOK_S).contains(&peak)
    {
        return Some((
            Param::PeakPrefillThroughput.name(),
            peak,
            format!("{MIN_PEAK_TOK_S} to {MAX_PEAK_TOK_S} tok/s"),
        ));
    }
    let bar = config.max_ttft_penalty_ms;
    if !(0.0..=MAX_BAR_MS).contains(&bar) {
        return Some((
            Param::MaxTtftPenaltyMs.name(),
            bar,
            format!("0 to {MAX_BAR_MS} ms (one day)"),
        ));
    }
    None
}

/// The time in ms to prefill `tokens` at `peak_prefill_throughput`
/// tokens/s, `tokens / peak_prefill_throughput * 1000`: the filter's TTFT
/// of an endpoint's in-flight tokens on the throughput path, and the
/// difference in ms of two sides that differ by `tokens`. The one place
/// this conversion is written; every crate calls it.
///
/// ```
/// assert_eq!(gatecal_filter::ttft_ms(15928.0, 15928.0), 1000.0);
/// assert_eq!(gatecal_filter::ttft_ms(500.0, 10_000.0), 50.0);
/// ```
pub fn ttft_ms(tokens: f64, peak_prefill_throughput: f64) -> f64 {
    tokens / peak_prefill_throughput * 1000.0
}

/// The break-even bar of a request in ms: the static `maxTTFTPenaltyMs` at
/// which static and matched-tokens modes agree for it, the [`ttft_ms`] of
/// its matched tokens.
///
/// ```
/// assert_eq!(gatecal_filter::break_even_ms(15928, 15928.0), 1000.0);
/// ```
pub fn break_even_ms(matched_tokens: i64, peak_prefill_throughput: f64) -> f64 {
    ttft_ms(matched_tokens as f64, peak_prefill_throughput)
}
