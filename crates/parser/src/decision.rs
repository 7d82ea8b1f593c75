//! The assembled decision: one call of one prefix-cache-affinity-filter
//! instance in one scheduling profile run of one request.

use crate::fields::Key;
use crate::name::Name;
use gatecal_filter::{Candidate, Outcome};
use serde::Serialize;

/// Where a line came from: the input's display name and the 1-based line number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SourceLoc {
    /// The input's display name: its path, `-` for stdin, or the name given
    /// to [`crate::parse_slice`].
    pub file: Name,
    /// 1-based line number within that input (after decompression).
    pub line: u64,
}

impl std::fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Which filter message produced the decision's outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FilterMsg {
    /// `PrefixCacheAffinityFilter: exploration skip, keeping all` (V1+).
    ExplorationSkip,
    /// `PrefixCacheAffinityFilter: epsilon skip, keeping all` (G0).
    EpsilonSkip,
    /// `PrefixCacheAffinityFilter: no sticky endpoints`.
    NoSticky,
    /// `PrefixCacheAffinityFilter: TTFT load gate broken`.
    TtftGateBroken,
    /// `PrefixCacheAffinityFilter: TTFT load gate skipped, missing signal` (V5, V6).
    MissingSignal,
    /// `PrefixCacheAffinityFilter: in-flight tokens load gate broken` (V2).
    TokensGateBroken,
    /// `PrefixCacheAffinityFilter: in-flight request gate broken` (V6a/V6b).
    RequestGateBroken,
    /// `PrefixCacheAffinityFilter: narrowed to sticky`.
    NarrowedToSticky,
    /// `PrefixCacheAffinityFilter: session cost gate` (SC).
    SessionCostGate,
    /// No filter line was logged, but the instance's
    /// `Completed running filter plugin successfully` line was (at `-v=4` this
    /// means at most one candidate or a threshold `<= 0`: `not_applicable`).
    /// Emitted only with [`crate::ParseOptions::infer_not_applicable`].
    #[default]
    None,
}

impl FilterMsg {
    /// The outcome a line of this kind stands for. [`FilterMsg::SessionCostGate`]
    /// has none by itself (see [`Decision::outcome`]).
    pub fn outcome(self) -> Option<Outcome> {
        match self {
            FilterMsg::ExplorationSkip | FilterMsg::EpsilonSkip => Some(Outcome::Exploration),
            FilterMsg::NoSticky => Some(Outcome::NoMatch),
            FilterMsg::TtftGateBroken | FilterMsg::TokensGateBroken => Some(Outcome::LoadOverride),
            FilterMsg::MissingSignal => Some(Outcome::MissingSignal),
            FilterMsg::RequestGateBroken => Some(Outcome::RequestLoadOverride),
            FilterMsg::NarrowedToSticky => Some(Outcome::Sticky),
            FilterMsg::SessionCostGate => None,
            FilterMsg::None => Some(Outcome::NotApplicable),
        }
    }

    /// The exact message suffix after `PrefixCacheAffinityFilter: `.
    pub fn as_str(self) -> &'static str {
        match self {
            FilterMsg::ExplorationSkip => "exploration skip, keeping all",
            FilterMsg::EpsilonSkip => "epsilon skip, keeping all",
            FilterMsg::NoSticky => "no sticky endpoints",
            FilterMsg::TtftGateBroken => "TTFT load gate broken",
            FilterMsg::MissingSignal => "TTFT load gate skipped, missing signal",
            FilterMsg::TokensGateBroken => "in-flight tokens load gate broken",
            FilterMsg::RequestGateBroken => "in-flight request gate broken",
            FilterMsg::NarrowedToSticky => "narrowed to sticky",
            FilterMsg::SessionCostGate => "session cost gate",
            FilterMsg::None => "",
        }
    }
}

/// How a decision was closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    /// The request's `Request handled` line was seen.
    Handled,
    /// The same request id was received again (`EPP received request`)
    /// before `Request handled`: a retry or a reused id.
    Superseded,
    /// The input ended first (the log ends mid-request).
    #[default]
    EndOfInput,
    /// Evicted by the open-request cap or age limit
    /// ([`crate::ParseOptions::max_open_requests`], [`crate::ParseOptions::max_open_age_secs`]).
    Evicted,
    /// Read from a decisions JSON-lines record.
    Record,
    /// Read from a `filter_prefix_cache_affinity` trace span.
    Traced,
}

/// Values flagged on a decision's numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ValueFlags {
    /// A number was `>= 1e300` in magnitude (`math.MaxFloat64` printed as 309
    /// digits: a side without a prediction on the latency-predictor path).
    pub huge: bool,
    /// A number was logged as the string `"NaN"`, `"+Inf"` or `"-Inf"`.
    pub non_finite: bool,
    /// The key of a filter line's number outside its domain, read as text
    /// through [`ValueFlags::out_of_range`] (a one-byte key keeps the
    /// flags, carried by every used line, small).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "key_name")]
    pub(crate) out_of_range: Option<Key>,
}

// The flags ride on every used line and event: three bytes, not a pointer
// and a length.
const _: () = assert!(size_of::<ValueFlags>() == 3);

fn key_name<S: serde::Serializer>(k: &Option<Key>, s: S) -> Result<S::Ok, S::Error> {
    match k {
        Some(k) => s.serialize_some(k.name()),
        None => s.serialize_none(),
    }
}

impl ValueFlags {
    /// Merges two sets of flags.
    pub fn union(self, other: ValueFlags) -> ValueFlags {
        ValueFlags {
            huge: self.huge || other.huge,
            non_finite: self.non_finite || other.non_finite,
            out_of_range: self.out_of_range.or(other.out_of_range),
        }
    }

    /// The key of a filter line's number outside its domain (a negative
    /// count, a non-finite threshold) or with no number at all: the line
    /// is counted malformed, and its decision's outcome is unknown.
    pub fn out_of_range(&self) -> Option<&'static str> {
        self.out_of_range.map(Key::name)
    }
}

/// Version-specific values of the filter line, all optional: only the keys
/// the line had are set.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FilterExtras {
    /// `prefillThroughput` (P2251), tokens/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_throughput: Option<f64>,
    /// `stickyObserved` of the missing-signal line (V5/V6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_observed: Option<bool>,
    /// `nonStickyObserved` of the missing-signal line (V5/V6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_sticky_observed: Option<bool>,
    /// `bestStickyTokens` of the V2 in-flight tokens gate line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_sticky_tokens: Option<f64>,
    /// `bestNonStickyTokens` of the V2 in-flight tokens gate line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_non_sticky_tokens: Option<f64>,
    /// `stickyRequests` of the V6 request gate line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_requests: Option<f64>,
    /// `nonStickyRequests` of the V6 request gate line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_sticky_requests: Option<f64>,
    /// `maxDelta` of the V6 request gate line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delta: Option<f64>,
    /// `stickyRequestTTFT` (V6a), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_request_ttft_ms: Option<f64>,
    /// `nonStickyRequestTTFT` (V6a), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_sticky_request_ttft_ms: Option<f64>,
    /// `added` (V6b): non-sticky endpoints added to the sticky set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added: Option<f64>,
    /// `minCachedTokensFraction` (MF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cached_tokens_fraction: Option<f64>,
    /// `minCachedTokens` (MF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cached_tokens: Option<f64>,
    /// `stickyCost` of the session-cost line (SC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_cost: Option<f64>,
    /// `nonStickyCost` of the session-cost line (SC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_sticky_cost: Option<f64>,
    /// `remainingTurns` of the session-cost line (SC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_turns: Option<f64>,
    /// `penaltySource` (SC): `constant` or `sessionCost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty_source: Option<String>,
}

/// A filter line without version-specific values.
static NO_EXTRAS: FilterExtras = FilterExtras {
    prefill_throughput: None,
    sticky_observed: None,
    non_sticky_observed: None,
    best_sticky_tokens: None,
    best_non_sticky_tokens: None,
    sticky_requests: None,
    non_sticky_requests: None,
    max_delta: None,
    sticky_request_ttft_ms: None,
    non_sticky_request_ttft_ms: None,
    added: None,
    min_cached_tokens_fraction: None,
    min_cached_tokens: None,
    sticky_cost: None,
    non_sticky_cost: None,
    remaining_turns: None,
    penalty_source: None,
};

impl FilterExtras {
    /// Whether no value is set.
    pub fn is_empty(&self) -> bool {
        *self == NO_EXTRAS
    }
}

fn extras_or_none<S: serde::Serializer>(
    x: &Option<Box<FilterExtras>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    x.as_deref().unwrap_or(&NO_EXTRAS).serialize(s)
}

/// What is known of one candidate endpoint of a decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CandidateObs {
    /// Endpoint id normalised to `namespace/name` (`name` when no namespace
    /// was logged; `ip:port` when only that is known). A `-rank-N` suffix is
    /// kept: it names a distinct endpoint.
    pub endpoint: Name,
    /// `tokenLoad` of this decision's `TokenLoadScorer scoring` line: in-flight
    /// tokens plus the current request's uncached tokens, capped at
    /// `queueThresholdTokens`.
    pub token_load: Option<f64>,
    /// Raw (unweighted) scores of this decision's `Calculated score` lines,
    /// `(plugin "name/type", score)`, in log order.
    pub scores: Vec<(Name, f64)>,
    /// In-flight tokens, excluding the current request: P2251's
    /// `calculated endpoint TTFT` line or a decisions record.
    pub in_flight_tokens: Option<i64>,
    /// In-flight requests (decisions record).
    pub in_flight_requests: Option<i64>,
    /// `throughput` of P2251's per-endpoint line, tokens/s.
    pub throughput: Option<f64>,
    /// TTFT in ms implied by P2251's per-endpoint line,
    /// `inFlightTokens / throughput * 1000` (when throughput > 0).
    pub ttft_ms: Option<f64>,
    /// Latency-predictor TTFT, ms (decisions record).
    pub predicted_ttft_ms: Option<f64>,
    /// Prefix match in blocks (decisions record).
    pub match_blocks: Option<i64>,
    /// Blocks of the prompt considered (decisions record).
    pub total_blocks: Option<i64>,
    /// Tokens per block (decisions record).
    pub block_size_tokens: Option<i64>,
    /// Whether the endpoint survived this filter instance, when its
    /// `Completed running filter plugin successfully` line listed survivors.
    pub survived: Option<bool>,
}

impl CandidateObs {
    /// A candidate with only its endpoint id.
    pub fn new(endpoint: impl Into<Name>) -> CandidateObs {
        CandidateObs {
            endpoint: endpoint.into(),
            ..CandidateObs::default()
        }
    }

    /// The filter core's view of this candidate (match info, in-flight
    /// tokens and requests, predicted TTFT; `token_load` is not an in-flight
    /// count and is not carried over).
    pub fn to_candidate(&self) -> Candidate {
        Candidate {
            id: self.endpoint.to_string(),
            match_blocks: self.match_blocks,
            total_blocks: self.total_blocks,
            block_size_tokens: self.block_size_tokens,
            in_flight_tokens: self.in_flight_tokens,
            in_flight_requests: self.in_flight_requests,
            predicted_ttft_ms: self.predicted_ttft_ms,
        }
    }
}

/// What the prefix producers logged at `-v=5` (TRACE) for a request, before
/// it was scheduled (every decision of the request carries it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PrefixProducers {
    /// `Found cached servers` lines of the approximate producer: one per
    /// block of the longest prefix some endpoint holds (summed over the
    /// request's prompts).
    pub approx_cached_blocks: u32,
    /// Their `total # blocks` (the largest seen): blocks of the prompt.
    pub approx_total_blocks: Option<f64>,
    /// `blockKeys` of the precise producer's `Produce completed`.
    pub precise_total_blocks: Option<f64>,
    /// The largest of its `scores`: the most match blocks (tier-weighted)
    /// of any endpoint.
    pub precise_max_match_blocks: Option<f64>,
    /// The entry of `scores` for the address the request was handled by
    /// (the first of `Request handled`'s `endpoint`): the match blocks of
    /// the endpoint picked. `None` when either line is missing, the
    /// address is not in `scores`, or the request's decisions picked
    /// different endpoints (a P/D request: which address is whose is not
    /// logged).
    pub precise_handled_match_blocks: Option<f64>,
}

impl PrefixProducers {
    /// Whether no producer line was seen.
    pub fn is_empty(&self) -> bool {
        *self == PrefixProducers::default()
    }
}

/// One scheduling decision of one prefix-cache-affinity-filter instance:
/// one per (request id, profile run, filter instance).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Decision {
    /// The deployment (pool) the decision belongs to; see the crate docs,
    /// "Deployment naming", for the precedence of sources.
    pub deployment: Name,
    /// Epoch seconds of the filter line (its `ts`; the kubelet timestamp when
    /// the line has none). For a decision without a filter line, the time of
    /// the line that created it.
    pub ts: Option<f64>,
    /// The request's `x-request-id`.
    pub request_id: Option<Name>,
    /// The scheduling profile (`decode`, `prefill`, `default`, ...), from the
    /// last `Running scheduler profile` line of this request before the
    /// filter line; inferred at `-v=4` (see [`Decision::profile_inferred`]).
    pub profile: Option<Name>,
    /// True when [`Decision::profile`] was inferred from order (`-v=4` logs
    /// without `Running scheduler profile`: P/D runs decode, then prefill).
    pub profile_inferred: bool,
    /// 0-based index of this profile run within the request.
    pub profile_run: u32,
    /// Filter instance name (the `name` of `name/type` of the next
    /// `Completed running filter plugin successfully` line, or of the
    /// preceding `Running filter plugin` line).
    pub filter: Option<Name>,
    /// Filter plugin type (the `type` of `name/type`).
    pub filter_type: Option<Name>,
    /// The outcome the filter line stands for ([`FilterMsg::outcome`]). A
    /// session-cost line gives `sticky` when `stickyCost <= nonStickyCost`,
    /// else `load_override`. `None` when unknown.
    pub outcome: Option<Outcome>,
    /// The kind of filter line that gave the outcome.
    pub message: FilterMsg,
    /// `bestStickyTTFT` of a `TTFT load gate broken` line, ms (or of a
    /// P2251 `narrowed to sticky` line).
    pub best_sticky_ttft_ms: Option<f64>,
    /// `bestNonStickyTTFT` of a `TTFT load gate broken` line, ms.
    pub best_non_sticky_ttft_ms: Option<f64>,
    /// `penalty` of a gate line: the gate input the EPP logged, with the
    /// unit its message logs it in ([`GatePenalty::of`]: ms for the TTFT
    /// gate, tokens for the V2 tokens gate).
    pub penalty: Option<GatePenalty>,
    /// `maxPenalty` of a gate line, with its unit as [`Decision::penalty`].
    pub max_penalty: Option<GatePenalty>,
    /// `affinityThreshold` (`tau` in G0) of the filter line.
    pub affinity_threshold: Option<f64>,
    /// `sticky` of a `narrowed to sticky` line.
    pub sticky: Option<u32>,
    /// `total` of a line that logs it (candidate count).
    pub total: Option<u32>,
    /// Version-specific values of the filter line, when it had any
    /// ([`Decision::extras`] reads them either way). Boxed: most lines
    /// have none, and a decision waits in memory until its request's
    /// first response chunk.
    #[serde(serialize_with = "extras_or_none")]
    pub extras: Option<Box<FilterExtras>>,
    /// Flags raised by the filter line's numbers.
    pub flags: ValueFlags,
    /// Survivors from the instance's `Completed running filter plugin
    /// successfully` line (`namespace/name`); `Some(vec![])` after
    /// `Filter eliminated all endpoints`.
    pub survivors: Option<Vec<Name>>,
    /// The endpoint chosen for this profile run (picker result, normalised),
    /// else the `endpoint` of `Request handled` (`ip:port[,...]` as logged).
    pub chosen: Option<Name>,
    /// `prompt length (token)` of the PD decider's `Computed hit percentage
    /// for prefix cache` line for this request.
    pub prompt_tokens: Option<f64>,
    /// `absolute hit prefix len (tokens)` of that line.
    pub hit_prefix_tokens: Option<f64>,
    /// The prefix producers' `-v=5` lines of this request.
    #[serde(skip_serializing_if = "PrefixProducers::is_empty")]
    pub producers: PrefixProducers,
    /// `targetModelName` (or `resolvedTargetModel`, `model`) of the filter line.
    pub model: Option<Name>,
    /// The EPP pod, from the kubectl `[pod/NAME/CONTAINER] ` prefix.
    pub epp_pod: Option<Name>,
    /// Where the filter line is (or the line that created the decision).
    pub source: SourceLoc,
    /// The endpoints the filter saw, in the order it saw them when known
    /// (the previous filter's survivors or `Before running filter plugins`),
    /// plus any endpoint named by this decision's scorer or per-endpoint lines.
    pub candidates: Vec<CandidateObs>,
    /// How the decision was closed.
    pub completion: Completion,
    /// `peakPrefillThroughput` of the last `peak prefill throughput
    /// resolved` (V5, any source but `notUsed`) or `calibration skipped,
    /// keeping peakPrefillThroughput default` startup line of the same EPP
    /// pod read before this decision: the peak in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_peak: Option<f64>,
    /// The request's observed time to first token, ms: from its `EPP
    /// received request` line to the first `HandleResponseBody is
    /// triggered` line of its streamed response (`-v=4`, builds from
    /// 2026-03-24). `None` when either line is missing, the response was not
    /// streamed, or it came more than 900 s of log time after the request
    /// was handled (while more than
    /// [`max_open_requests`](crate::ParseOptions::max_open_requests)
    /// requests wait, the oldest goes without). Every decision of one
    /// request carries the same value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_ttft_ms: Option<f64>,
    /// The `ts` of the request's `EPP received request` line (its arrival
    /// at the EPP), when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_ts: Option<f64>,
    /// What a decision record adds, for decisions read from records (of
    /// any version): its version and, from version 2, the gate and config
    /// the analysis takes as given (no reconstruction). `None` for
    /// decisions from logs.
    #[serde(skip)]
    pub recorded: Option<Box<crate::record::Recorded>>,
    /// `llm_d.epp.filter.ttft_penalty_ms` of the decision's trace span: the
    /// exact gate input in ms, set whenever the TTFT gate was evaluated (held
    /// or released). From a trace input, or joined to a log decision from
    /// one.
    pub traced_penalty_ms: Option<f64>,
    /// Whether the decision has a trace span: read from a trace input
    /// ([`Completion::Traced`]), or a log decision joined to its span.
    pub traced: bool,
}

/// A gate line's `penalty` or `maxPenalty` with its unit, which the line's
/// message decides ([`GatePenalty::of`]). The number is read through the
/// accessor of its unit only, so a token count cannot be taken for ms.
/// Serialised as the bare number, as logged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GatePenalty {
    /// Milliseconds of TTFT (`TTFT load gate broken`, and every gate line
    /// but the tokens gate's).
    Ms(f64),
    /// In-flight tokens (`in-flight tokens load gate broken`, V2).
    Tokens(f64),
}

// No larger than the bare `Option<f64>` it replaces: the unit rides in the
// option's tag.
const _: () = assert!(size_of::<Option<GatePenalty>>() == size_of::<Option<f64>>());

impl GatePenalty {
    /// A number logged as `penalty` or `maxPenalty` by a line of `msg`:
    /// tokens on the V2 tokens gate line, ms on every other.
    pub fn of(msg: FilterMsg, v: f64) -> GatePenalty {
        match msg {
            FilterMsg::TokensGateBroken => GatePenalty::Tokens(v),
            _ => GatePenalty::Ms(v),
        }
    }

    /// The milliseconds, for a penalty in ms.
    pub fn ms(self) -> Option<f64> {
        match self {
            GatePenalty::Ms(v) => Some(v),
            GatePenalty::Tokens(_) => None,
        }
    }

    /// The tokens, for a penalty in tokens.
    pub fn tokens(self) -> Option<f64> {
        match self {
            GatePenalty::Tokens(v) => Some(v),
            GatePenalty::Ms(_) => None,
        }
    }
}

impl Serialize for GatePenalty {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            GatePenalty::Ms(v) | GatePenalty::Tokens(v) => s.serialize_f64(v),
        }
    }
}

impl Decision {
    /// The gate input the EPP logged in ms: the `penalty` of a `TTFT load
    /// gate broken` line. `None` for every other message.
    pub fn logged_penalty_ms(&self) -> Option<f64> {
        match self.message {
            FilterMsg::TtftGateBroken => self.penalty.and_then(GatePenalty::ms),
            _ => None,
        }
    }

    /// The filter line's version-specific values (all `None` when it had
    /// none).
    pub fn extras(&self) -> &FilterExtras {
        self.extras.as_deref().unwrap_or(&NO_EXTRAS)
    }

    /// The candidate for an endpoint id, if present.
    pub fn candidate(&self, endpoint: &str) -> Option<&CandidateObs> {
        self.candidates.iter().find(|c| c.endpoint == endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_penalty_is_in_tokens_only_on_the_tokens_gate_line() {
        let ms = GatePenalty::of(FilterMsg::TtftGateBroken, 19_000.0);
        assert_eq!(ms, GatePenalty::Ms(19_000.0));
        assert_eq!((ms.ms(), ms.tokens()), (Some(19_000.0), None));
        assert_eq!(
            GatePenalty::of(FilterMsg::RequestGateBroken, 18_000.0),
            GatePenalty::Ms(18_000.0)
        );
        let tokens = GatePenalty::of(FilterMsg::TokensGateBroken, 19_000.0);
        assert_eq!(tokens, GatePenalty::Tokens(19_000.0));
        assert_eq!((tokens.ms(), tokens.tokens()), (None, Some(19_000.0)));

        let mut d = Decision {
            message: FilterMsg::TtftGateBroken,
            penalty: Some(ms),
            ..Decision::default()
        };
        assert_eq!(d.logged_penalty_ms(), Some(19_000.0));
        // An ms penalty on another message is not the logged gate input.
        d.message = FilterMsg::RequestGateBroken;
        assert_eq!(d.logged_penalty_ms(), None);
        // Nor is a token count on the TTFT gate's message.
        d.message = FilterMsg::TtftGateBroken;
        d.penalty = Some(tokens);
        assert_eq!(d.logged_penalty_ms(), None);
    }

    #[test]
    fn a_penalty_serialises_as_the_number_logged() {
        let json = |p| serde_json::to_string(&p).unwrap();
        assert_eq!(json(GatePenalty::Ms(18709.5)), "18709.5");
        assert_eq!(json(GatePenalty::Tokens(298000.0)), "298000.0");
    }
}
