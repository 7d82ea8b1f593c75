//! Typed events: one per used log line.

use serde::Serialize;

use crate::arena::{Arena, Span, Spans};
use crate::decision::{FilterExtras, FilterMsg, GatePenalty, ValueFlags};
use crate::vllm::VllmStats;

/// The context every EPP line may carry: time, level, request id, model keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LineMeta {
    /// Epoch seconds: the line's `ts` (float, or RFC3339 string of older
    /// builds, or the console encoder's time), else the kubelet timestamp.
    pub ts: Option<f64>,
    /// The kubelet `--timestamps` prefix, epoch seconds, when present and
    /// the line has no time of its own (then it is also [`LineMeta::ts`]).
    pub kubelet_ts: Option<f64>,
    /// The zap verbosity: `debug` = 4, `info` = 0..3 (reported as 0),
    /// `trace` = 5, `Level(-N)`/`LEVEL(-N)` = N, `error` = -2, `dpanic` = -3,
    /// `warn` = -1. `None` when absent or not understood.
    pub v: Option<i8>,
    /// `x-request-id`.
    pub request_id: Option<String>,
    /// `targetModelName` (or `resolvedTargetModel`, or `model` of mid-2025
    /// builds), read from the lines that start or name a decision (filter,
    /// profile and filter-plugin lines).
    pub model: Option<String>,
    /// The pod of the kubectl `[pod/NAME/CONTAINER] ` prefix.
    pub pod: Option<String>,
}

/// A `PrefixCacheAffinityFilter: ` outcome line of any version.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FilterLine {
    /// Which message.
    pub msg: FilterMsg,
    /// `affinityThreshold`, or `tau` (G0).
    pub affinity_threshold: Option<f64>,
    /// `total`.
    pub total: Option<f64>,
    /// `sticky`.
    pub sticky: Option<f64>,
    /// `bestStickyTTFT` (ms).
    pub best_sticky_ttft_ms: Option<f64>,
    /// `bestNonStickyTTFT` (ms).
    pub best_non_sticky_ttft_ms: Option<f64>,
    /// `penalty`, in the unit of [`FilterLine::msg`] ([`GatePenalty::of`]).
    pub penalty: Option<GatePenalty>,
    /// `maxPenalty`, in the unit of [`FilterLine::msg`].
    pub max_penalty: Option<GatePenalty>,
    /// Version-specific keys.
    pub extras: FilterExtras,
    /// Flags raised by the line's numbers.
    pub flags: ValueFlags,
    /// Why the line is malformed, when it is but still names its request
    /// (then every value is unset and the decision's outcome is unknown).
    #[serde(skip)]
    pub malformed: Option<crate::ledger::MalformedReason>,
}

impl FilterLine {
    /// The line, malformed for `reason` (the value of `key`, or its JSON),
    /// as its request's filter line: its message, no value, an unknown
    /// outcome.
    pub(crate) fn malformed(
        msg: FilterMsg,
        key: crate::fields::Key,
        reason: crate::ledger::MalformedReason,
    ) -> FilterLine {
        FilterLine {
            msg,
            flags: ValueFlags {
                out_of_range: Some(key),
                ..ValueFlags::default()
            },
            malformed: Some(reason),
            ..FilterLine::default()
        }
    }
}

/// One event, the typed content of one used line.
///
/// `S` is the type of its strings and `L` of its lists of strings: owned
/// (`String`, `Vec<String>`: the defaults, what the API takes and gives), or,
/// inside the parser, spans of the buffer that holds the strings of a block
/// of lines (or of a request's buffered events).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event<S = String, L = Vec<String>> {
    /// A `PrefixCacheAffinityFilter: ` outcome line (boxed: it is large and
    /// rare next to scorer lines).
    Filter(Box<FilterLine>),
    /// `PrefixCacheAffinityFilter: calculated endpoint TTFT` (P2251): one per endpoint.
    EndpointTtft {
        /// `endpoint`, normalised.
        endpoint: S,
        /// `throughput`, tokens/s.
        throughput: Option<f64>,
        /// `inFlightTokens`.
        in_flight_tokens: Option<f64>,
    },
    /// `PrefixCacheAffinityFilter: peak prefill throughput resolved` (V5 startup).
    PeakPrefillResolved {
        /// `peakPrefillThroughput`, tokens/s.
        peak_prefill_throughput: Option<f64>,
        /// `source`: `userConfigured`, `calibrated`, `default` or `notUsed`.
        source: Option<S>,
    },
    /// `PrefixCacheAffinityFilter: calibration skipped, keeping
    /// peakPrefillThroughput default` (V5 startup).
    CalibrationSkipped {
        /// `peakPrefillThroughput`, tokens/s.
        peak_prefill_throughput: Option<f64>,
        /// `reason`.
        reason: Option<S>,
    },
    /// `EPP received request`: starts a new request under its id.
    ReceivedRequest,
    /// `HandleResponseBody is triggered` (`-v=4`): a chunk of the
    /// response body reached the EPP (one line per chunk of a streamed
    /// response; one at the end of a response that is not streamed).
    ResponseBody {
        /// `len(responseBytes)`: bytes of the chunk.
        bytes: Option<f64>,
        /// `endOfStream`: the last chunk.
        end_of_stream: Option<bool>,
    },
    /// `Running scheduler profile`.
    SchedulerProfile {
        /// `profile`.
        profile: S,
    },
    /// `Before running filter plugins`: the candidates of a profile run.
    BeforeFilters {
        /// The endpoint ids found in the `endpoints` dump, normalised.
        endpoints: L,
    },
    /// `Running filter plugin`.
    RunningFilter {
        /// `plugin`, `name/type`.
        plugin: S,
    },
    /// `Completed running filter plugin successfully`.
    FilterCompleted {
        /// `plugin`, `name/type`.
        plugin: S,
        /// The survivors (`endpoints`), normalised; `None` when not logged.
        survivors: Option<L>,
    },
    /// `Filter eliminated all endpoints`.
    FilterEliminatedAll {
        /// `plugin`, `name/type`.
        plugin: S,
    },
    /// `Completed running filter plugins` (with or without `successfully`).
    FiltersCompleted {
        /// `remainingEndpoints` (newer builds).
        remaining: Option<f64>,
    },
    /// `Calculated score`.
    Score {
        /// `plugin`, `name/type`.
        plugin: S,
        /// `endpoint`, normalised.
        endpoint: S,
        /// `score` (raw, unweighted).
        score: f64,
    },
    /// `TokenLoadScorer scoring`.
    TokenLoad {
        /// `endpoint`, normalised.
        endpoint: S,
        /// `tokenLoad`.
        token_load: f64,
        /// `score`.
        score: Option<f64>,
    },
    /// `Computed hit percentage for prefix cache` (PD decider).
    HitPercentage {
        /// `prompt length (token)`.
        prompt_tokens: Option<f64>,
        /// `absolute hit prefix len (tokens)`.
        hit_prefix_tokens: Option<f64>,
    },
    /// `Found cached servers` (the approximate prefix producer, `-v=5`): one
    /// line per block of the longest prefix some endpoint holds.
    CachedServers {
        /// `total # blocks` of the prompt.
        total_blocks: Option<f64>,
    },
    /// `Produce completed` of the precise prefix producer (`-v=5`), with
    /// `blockKeys` and `scores` (other producers' lines of that message are
    /// not read).
    PreciseProduced {
        /// `blockKeys`: blocks of the prompt.
        total_blocks: f64,
        /// The largest of `scores` (match blocks per endpoint address,
        /// tier-weighted).
        max_match_blocks: f64,
        /// Endpoints in `scores`.
        endpoints: u32,
        /// `scores` as logged: a JSON object of match blocks by endpoint
        /// address (`ip:port`), read for the endpoint the request was
        /// handled by ([`crate::PrefixProducers::precise_handled_match_blocks`]).
        scores: S,
    },
    /// `Completed running picker plugin successfully`.
    PickerCompleted {
        /// The endpoints of `result.TargetEndpoints`, normalised.
        targets: L,
    },
    /// `Request handled`.
    RequestHandled {
        /// `endpoint` as logged (`ip:port[,...]`).
        endpoint: Option<S>,
    },
    /// A vLLM periodic stats line.
    VllmStats(Box<VllmStats>),
}

/// An event whose strings are in an [`Arena`].
pub(crate) type ArenaEvent = Event<Span, Spans>;

/// Converts the strings and lists of an event ([`Event::map`]).
pub(crate) trait MapStrings<S, L, S2, L2> {
    fn s(&mut self, s: S) -> S2;
    fn l(&mut self, l: L) -> L2;
}

/// What an event belongs to, for the assembler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A request's line: buffered under its request id and replayed, in
    /// `ts` order, when the request closes.
    Request,
    /// A line of the EPP pod as a whole (its startup lines) or of vLLM:
    /// read by the assembler as it comes, never part of a request.
    Pod,
}

impl<S, L> Event<S, L> {
    /// Whether the event belongs to a request or to the pod. Every event
    /// is named here, so that a new one must say.
    pub(crate) fn scope(&self) -> Scope {
        match self {
            Event::PeakPrefillResolved { .. }
            | Event::CalibrationSkipped { .. }
            | Event::VllmStats(_) => Scope::Pod,
            Event::Filter(_)
            | Event::EndpointTtft { .. }
            | Event::ReceivedRequest
            | Event::ResponseBody { .. }
            | Event::SchedulerProfile { .. }
            | Event::BeforeFilters { .. }
            | Event::RunningFilter { .. }
            | Event::FilterCompleted { .. }
            | Event::FilterEliminatedAll { .. }
            | Event::FiltersCompleted { .. }
            | Event::Score { .. }
            | Event::TokenLoad { .. }
            | Event::HitPercentage { .. }
            | Event::CachedServers { .. }
            | Event::PreciseProduced { .. }
            | Event::PickerCompleted { .. }
            | Event::RequestHandled { .. } => Scope::Request,
        }
    }

    /// The same event with its strings and lists converted by `m`.
    pub(crate) fn map<S2, L2>(self, m: &mut impl MapStrings<S, L, S2, L2>) -> Event<S2, L2> {
        match self {
            Event::Filter(f) => Event::Filter(f),
            Event::EndpointTtft {
                endpoint,
                throughput,
                in_flight_tokens,
            } => Event::EndpointTtft {
                endpoint: m.s(endpoint),
                throughput,
                in_flight_tokens,
            },
            Event::PeakPrefillResolved {
                peak_prefill_throughput,
                source,
            } => Event::PeakPrefillResolved {
                peak_prefill_throughput,
                source: source.map(|x| m.s(x)),
            },
            Event::CalibrationSkipped {
                peak_prefill_throughput,
                reason,
            } => Event::CalibrationSkipped {
                peak_prefill_throughput,
                reason: reason.map(|x| m.s(x)),
            },
            Event::ReceivedRequest => Event::ReceivedRequest,
            Event::ResponseBody {
                bytes,
                end_of_stream,
            } => Event::ResponseBody {
                bytes,
                end_of_stream,
            },
            Event::SchedulerProfile { profile } => Event::SchedulerProfile {
                profile: m.s(profile),
            },
            Event::BeforeFilters { endpoints } => Event::BeforeFilters {
                endpoints: m.l(endpoints),
            },
            Event::RunningFilter { plugin } => Event::RunningFilter {
                plugin: m.s(plugin),
            },
            Event::FilterCompleted { plugin, survivors } => Event::FilterCompleted {
                plugin: m.s(plugin),
                survivors: survivors.map(|x| m.l(x)),
            },
            Event::FilterEliminatedAll { plugin } => Event::FilterEliminatedAll {
                plugin: m.s(plugin),
            },
            Event::FiltersCompleted { remaining } => Event::FiltersCompleted { remaining },
            Event::Score {
                plugin,
                endpoint,
                score,
            } => Event::Score {
                plugin: m.s(plugin),
                endpoint: m.s(endpoint),
                score,
            },
            Event::TokenLoad {
                endpoint,
                token_load,
                score,
            } => Event::TokenLoad {
                endpoint: m.s(endpoint),
                token_load,
                score,
            },
            Event::HitPercentage {
                prompt_tokens,
                hit_prefix_tokens,
            } => Event::HitPercentage {
                prompt_tokens,
                hit_prefix_tokens,
            },
            Event::CachedServers { total_blocks } => Event::CachedServers { total_blocks },
            Event::PreciseProduced {
                total_blocks,
                max_match_blocks,
                endpoints,
                scores,
            } => Event::PreciseProduced {
                total_blocks,
                max_match_blocks,
                endpoints,
                scores: m.s(scores),
            },
            Event::PickerCompleted { targets } => Event::PickerCompleted {
                targets: m.l(targets),
            },
            Event::RequestHandled { endpoint } => Event::RequestHandled {
                endpoint: endpoint.map(|x| m.s(x)),
            },
            Event::VllmStats(v) => Event::VllmStats(v),
        }
    }
}

/// Strings copied from one arena to another.
struct Transfer<'a> {
    from: &'a Arena,
    to: &'a mut Arena,
}

impl MapStrings<Span, Spans, Span, Spans> for Transfer<'_> {
    fn s(&mut self, s: Span) -> Span {
        self.to.push(self.from.bytes(s))
    }
    fn l(&mut self, l: Spans) -> Spans {
        let start = self.to.list_start();
        for &s in self.from.list(l) {
            let t = self.to.push(self.from.bytes(s));
            self.to.push_item(t);
        }
        self.to.list_from(start)
    }
}

/// Owned strings into an arena.
struct Intern<'a>(&'a mut Arena);

impl MapStrings<String, Vec<String>, Span, Spans> for Intern<'_> {
    fn s(&mut self, s: String) -> Span {
        self.0.push(s.as_bytes())
    }
    fn l(&mut self, l: Vec<String>) -> Spans {
        let start = self.0.list_start();
        for s in l {
            let t = self.0.push(s.as_bytes());
            self.0.push_item(t);
        }
        self.0.list_from(start)
    }
}

impl ArenaEvent {
    /// The event with its strings copied from `from` to `to`.
    pub(crate) fn transfer(self, from: &Arena, to: &mut Arena) -> ArenaEvent {
        self.map(&mut Transfer { from, to })
    }
}

impl Event {
    /// The event with its strings in `a`.
    pub(crate) fn intern(self, a: &mut Arena) -> ArenaEvent {
        self.map(&mut Intern(a))
    }
}
