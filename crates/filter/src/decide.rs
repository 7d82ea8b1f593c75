//! `decide`: one call of the filter's `Filter()`, as a pure function.

use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::config::{Config, MissingSignal, PenaltyMode, TtftSource};

/// The filter's outcome, named as the EPP's
/// `llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome}` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// At most one candidate, or `affinityThreshold <= 0`: all kept, nothing logged.
    NotApplicable,
    /// The exploration draw fell under `explorationProbability`: all kept.
    Exploration,
    /// No endpoint reached the threshold: all kept.
    NoMatch,
    /// Narrowed to the sticky endpoints: the pin held.
    Sticky,
    /// The TTFT load gate broke: all kept (the pin was released).
    LoadOverride,
    /// A side had no load signal (newer upstream): all kept.
    MissingSignal,
    /// The in-flight request gate added non-sticky endpoints to the sticky set.
    RequestLoadOverride,
}

impl Outcome {
    /// Every outcome, in the order reports list them.
    pub const ALL: [Outcome; 7] = [
        Outcome::NotApplicable,
        Outcome::Exploration,
        Outcome::NoMatch,
        Outcome::Sticky,
        Outcome::LoadOverride,
        Outcome::MissingSignal,
        Outcome::RequestLoadOverride,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NotApplicable => "not_applicable",
            Outcome::Exploration => "exploration",
            Outcome::NoMatch => "no_match",
            Outcome::Sticky => "sticky",
            Outcome::LoadOverride => "load_override",
            Outcome::MissingSignal => "missing_signal",
            Outcome::RequestLoadOverride => "request_load_override",
        }
    }

    /// Parses a metric label.
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Whether the pin was released: the TTFT gate or the request gate let
    /// non-sticky endpoints through although a sticky one existed.
    pub fn is_release(self) -> bool {
        matches!(self, Outcome::LoadOverride | Outcome::RequestLoadOverride)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which rule released the pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Static mode: `gate input > maxTTFTPenaltyMs`.
    StaticBar,
    /// Matched-tokens mode: `inFlight(sticky) - inFlight(nonSticky) > matched tokens`.
    BreakEven,
    /// Matched-tokens mode: the static bar, kept as a ceiling, fired while
    /// the break-even test alone would have held.
    Ceiling,
}

/// The winner of one side of the gate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// Index into the candidates passed to [`decide`].
    pub index: usize,
    /// The endpoint's TTFT in ms as the gate saw it.
    pub ttft_ms: f64,
    /// Its in-flight tokens as the gate read them (`None` on the predictor
    /// path or when absent).
    pub in_flight_tokens: Option<i64>,
}

/// The TTFT load gate's evaluation, when it ran with a signal on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateEval {
    /// Lowest-TTFT sticky endpoint (ties: first in input order).
    pub best_sticky: Best,
    /// Lowest-TTFT non-sticky endpoint (ties: first in input order).
    pub best_non_sticky: Best,
    /// `best_sticky.ttft_ms - best_non_sticky.ttft_ms`: the gate input.
    pub gate_input_ms: f64,
    /// `maxTTFTPenaltyMs`: the static bar, or the ceiling in matched-tokens
    /// mode (0 = no ceiling there).
    pub bar_ms: f64,
    /// Matched-tokens mode: `MatchBlocks * BlockSizeTokens` of the best
    /// sticky endpoint (0 = no match info, test skipped). `None` in static mode,
    /// which never reads it.
    pub matched_tokens: Option<i64>,
    /// Matched-tokens mode: in-flight tokens of the best sticky minus the best
    /// non-sticky endpoint. `None` in static mode.
    pub token_gap: Option<i64>,
    /// The rule that released the pin, if one did.
    pub fired: Option<Rule>,
}

/// The in-flight request gate's evaluation, when it compared two sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestGateEval {
    /// Fewest in-flight requests among sticky endpoints.
    pub sticky_requests: i64,
    /// Fewest in-flight requests among the non-sticky endpoints within the penalty.
    pub within_requests: i64,
    /// Indices of the non-sticky endpoints within the penalty.
    pub within: Vec<usize>,
    /// Whether it fired.
    pub fired: bool,
}

/// Which sides had a load signal, for a `missing_signal` outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideSignal {
    /// Some sticky endpoint carried the signal.
    pub sticky_observed: bool,
    /// Some non-sticky endpoint carried the signal.
    pub non_sticky_observed: bool,
}

/// What the filter did with one set of candidates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The outcome.
    pub outcome: Outcome,
    /// Indices of the endpoints the filter returned, in the order it returns
    /// them (input order, or sticky then added non-sticky for the request gate).
    pub kept: Vec<usize>,
    /// Indices of the sticky endpoints (empty when the partition was not made).
    pub sticky: Vec<usize>,
    /// The TTFT load gate's evaluation, when it ran with both sides observed.
    pub gate: Option<GateEval>,
    /// The in-flight request gate's evaluation, when it compared two sides.
    pub request_gate: Option<RequestGateEval>,
    /// For `missing_signal`: which sides were observed.
    pub signal: Option<SideSignal>,
}

impl Decision {
    fn keep_all(outcome: Outcome, n: usize) -> Decision {
        Decision {
            outcome,
            kept: (0..n).collect(),
            sticky: Vec::new(),
            gate: None,
            request_gate: None,
            signal: None,
        }
    }
}

/// One endpoint's TTFT in ms as the gate reads it, or `None` for no signal.
///
/// Throughput path: `tokens / peak * 1000`; absent tokens are no signal
/// (newer upstream) or 0 (v0.9/v0.10). Predictor path: the prediction; absent
/// is no signal (newer) or `f64::MAX` (v0.9/v0.10).
fn endpoint_ttft(config: &Config, c: &Candidate) -> Option<f64> {
    match config.ttft_source {
        TtftSource::LatencyPredictor => match (c.predicted_ttft_ms, config.missing_signal) {
            (Some(v), _) => Some(v),
            (None, MissingSignal::AsZero) => Some(f64::MAX),
            (None, MissingSignal::KeepAll) => None,
        },
        TtftSource::PrefillThroughput => {
            let tokens = match (c.in_flight_tokens, config.missing_signal) {
                (Some(t), _) => t,
                (None, MissingSignal::AsZero) => 0,
                (None, MissingSignal::KeepAll) => return None,
            };
            Some(crate::ttft_ms(
                tokens as f64,
                config.peak_prefill_throughput,
            ))
        }
    }
}

/// In-flight tokens as the throughput path reads them.
fn tokens_read(config: &Config, c: &Candidate) -> Option<i64> {
    match config.ttft_source {
        TtftSource::LatencyPredictor => c.in_flight_tokens,
        TtftSource::PrefillThroughput => match config.missing_signal {
            MissingSignal::AsZero => Some(c.in_flight_tokens.unwrap_or(0)),
            MissingSignal::KeepAll => c.in_flight_tokens,
        },
    }
}

/// The lowest value of `f` over `side`, with its index. Like the Go loop, it
/// starts from `f64::MAX` and takes a value only if strictly lower, so ties go
/// to the first endpoint in input order and NaN or `f64::MAX` never win.
fn best_by(side: &[usize], mut f: impl FnMut(usize) -> Option<f64>) -> Option<(usize, f64)> {
    let mut best = f64::MAX;
    let mut winner = None;
    for &i in side {
        if let Some(v) = f(i)
            && v < best
        {
            best = v;
            winner = Some(i);
        }
    }
    winner.map(|i| (i, best))
}

/// Best-by-TTFT over one side: the winning endpoint and its TTFT.
///
/// Under v0.9/v0.10 semantics a side always has a value: if no endpoint beats
/// `f64::MAX` (predictor path with no predictions), the Go code's best stays
/// `f64::MAX`, which is reported here against the side's first endpoint.
pub fn best_by_ttft(config: &Config, candidates: &[Candidate], side: &[usize]) -> Option<Best> {
    let found = best_by(side, |i| endpoint_ttft(config, &candidates[i]));
    let (index, ttft_ms) = match (found, config.missing_signal) {
        (Some(w), _) => w,
        (None, MissingSignal::AsZero) => (*side.first()?, f64::MAX),
        (None, MissingSignal::KeepAll) => return None,
    };
    Some(Best {
        index,
        ttft_ms,
        in_flight_tokens: tokens_read(config, &candidates[index]),
    })
}

/// The request's TTFT on an endpoint (in-flight request gate): the endpoint's
/// TTFT plus, on the throughput path, its uncached prompt tokens.
fn request_ttft(config: &Config, c: &Candidate) -> Option<f64> {
    let base = endpoint_ttft(config, c)?;
    match config.ttft_source {
        TtftSource::LatencyPredictor => Some(base),
        TtftSource::PrefillThroughput => {
            let uncached = c.uncached_tokens()?;
            Some(base + crate::ttft_ms(uncached as f64, config.peak_prefill_throughput))
        }
    }
}

fn least_requests(candidates: &[Candidate], side: &[usize]) -> Option<i64> {
    side.iter()
        .filter_map(|&i| candidates[i].in_flight_requests)
        .min()
}

/// The outcomes decided before the candidates are partitioned: at most one
/// candidate or no usable threshold (`not_applicable`), or the exploration
/// draw (`exploration`).
fn before_partition(config: &Config, n: usize, exploration_draw: f64) -> Option<Outcome> {
    // `!(x > 0)` rather than `x <= 0` so that a NaN threshold behaves as Go's
    // `<= 0` test does not: Go would keep going and mark nothing sticky; here
    // NaN can only come from a hand-built config, and "not applicable" is the
    // honest answer.
    if n <= 1 || config.affinity_threshold.is_nan() || config.affinity_threshold <= 0.0 {
        return Some(Outcome::NotApplicable);
    }
    if exploration_draw < config.exploration_probability {
        return Some(Outcome::Exploration);
    }
    None
}

/// Whether a candidate is sticky under `config`.
fn is_sticky(config: &Config, c: &Candidate) -> bool {
    c.prefix_score() >= config.affinity_threshold
}

/// What the gates conclude once the candidates are partitioned.
struct Gated {
    outcome: Outcome,
    gate: Option<GateEval>,
    request_gate: Option<RequestGateEval>,
    signal: Option<SideSignal>,
    /// The non-sticky endpoints the request gate added (when it fired).
    within: Vec<usize>,
}

/// The gates after the partition into `sticky` and `non_sticky` indices
/// (input order): no sticky endpoint, the TTFT load gate, the in-flight
/// request gate. Allocates only for the request gate.
fn after_partition(
    config: &Config,
    candidates: &[Candidate],
    sticky: &[usize],
    non_sticky: &[usize],
) -> Gated {
    let mut g = Gated {
        outcome: Outcome::Sticky,
        gate: None,
        request_gate: None,
        signal: None,
        within: Vec::new(),
    };
    if sticky.is_empty() {
        g.outcome = Outcome::NoMatch;
        return g;
    }

    // TTFT load gate.
    let gate_runs = !non_sticky.is_empty()
        && match config.penalty_mode {
            PenaltyMode::Static => config.max_ttft_penalty_ms > 0.0,
            PenaltyMode::MatchedTokens => true,
        };
    if gate_runs {
        let bs = best_by_ttft(config, candidates, sticky);
        let bn = best_by_ttft(config, candidates, non_sticky);
        let (Some(bs), Some(bn)) = (bs, bn) else {
            g.outcome = Outcome::MissingSignal;
            g.signal = Some(SideSignal {
                sticky_observed: bs.is_some(),
                non_sticky_observed: bn.is_some(),
            });
            return g;
        };
        let gate_input_ms = bs.ttft_ms - bn.ttft_ms;
        let bar_fires =
            config.max_ttft_penalty_ms > 0.0 && gate_input_ms > config.max_ttft_penalty_ms;
        let mut eval = GateEval {
            best_sticky: bs,
            best_non_sticky: bn,
            gate_input_ms,
            bar_ms: config.max_ttft_penalty_ms,
            matched_tokens: None,
            token_gap: None,
            fired: None,
        };
        match config.penalty_mode {
            PenaltyMode::Static => {
                if bar_fires {
                    eval.fired = Some(Rule::StaticBar);
                }
            }
            PenaltyMode::MatchedTokens => {
                let matched = candidates[bs.index].matched_tokens();
                let gap = match (bs.in_flight_tokens, bn.in_flight_tokens) {
                    (Some(s), Some(t)) => Some(s.saturating_sub(t)),
                    _ => None,
                };
                eval.matched_tokens = Some(matched);
                eval.token_gap = gap;
                let break_even = matched > 0 && gap.is_some_and(|g| g > matched);
                if break_even {
                    eval.fired = Some(Rule::BreakEven);
                } else if bar_fires {
                    eval.fired = Some(Rule::Ceiling);
                }
            }
        }
        g.gate = Some(eval);
        if eval.fired.is_some() {
            g.outcome = Outcome::LoadOverride;
            return g;
        }
    }

    // In-flight request gate (newest upstream): add the non-sticky endpoints
    // on which the request's TTFT is within the penalty of its best sticky
    // TTFT, when the sticky side holds more than `delta` requests above them.
    if config.max_in_flight_requests_delta > 0 && !non_sticky.is_empty() {
        let within: Vec<usize> = match best_by(sticky, |i| request_ttft(config, &candidates[i])) {
            None => Vec::new(),
            Some((_, best)) => non_sticky
                .iter()
                .copied()
                .filter(|&i| {
                    request_ttft(config, &candidates[i])
                        .is_some_and(|t| t - best <= config.max_ttft_penalty_ms)
                })
                .collect(),
        };
        if let (Some(s), Some(w)) = (
            least_requests(candidates, sticky),
            least_requests(candidates, &within),
        ) {
            let fired = s.saturating_sub(w) > config.max_in_flight_requests_delta;
            g.request_gate = Some(RequestGateEval {
                sticky_requests: s,
                within_requests: w,
                within: within.clone(),
                fired,
            });
            if fired {
                g.outcome = Outcome::RequestLoadOverride;
                g.within = within;
            }
        }
    }
    g
}

/// Decides hold or release for one set of candidates, exactly as the
/// production filter's `Filter()` does.
///
/// `exploration_draw` stands for the filter's `rand.Float64()`: the filter
/// explores iff `exploration_draw < explorationProbability`. Pass `1.0` to
/// replay a decision that did not explore.
///
/// The config is used as given; call [`Config::validate`] first (configs
/// decoded with [`Config::from_json`] are validated).
pub fn decide(config: &Config, candidates: &[Candidate], exploration_draw: f64) -> Decision {
    let n = candidates.len();
    if let Some(o) = before_partition(config, n, exploration_draw) {
        return Decision::keep_all(o, n);
    }
    let mut sticky = Vec::with_capacity(n);
    let mut non_sticky = Vec::with_capacity(n);
    for (i, c) in candidates.iter().enumerate() {
        if is_sticky(config, c) {
            sticky.push(i);
        } else {
            non_sticky.push(i);
        }
    }
    let g = after_partition(config, candidates, &sticky, &non_sticky);
    let kept = match g.outcome {
        Outcome::NoMatch => return Decision::keep_all(Outcome::NoMatch, n),
        Outcome::Sticky => sticky.clone(),
        Outcome::RequestLoadOverride => sticky.iter().copied().chain(g.within).collect(),
        _ => (0..n).collect(),
    };
    Decision {
        outcome: g.outcome,
        kept,
        sticky,
        gate: g.gate,
        request_gate: g.request_gate,
        signal: g.signal,
    }
}

/// [`decide`]'s outcome and TTFT gate evaluation, the same in every case.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The outcome ([`Decision::outcome`]).
    pub outcome: Outcome,
    /// The TTFT load gate's evaluation ([`Decision::gate`]).
    pub gate: Option<GateEval>,
}

/// Candidates partitioned on the stack by [`decide_verdict`]; more go to
/// the heap.
const STACK_CANDIDATES: usize = 16;

/// [`decide`] without the index lists: its outcome and gate evaluation, by
/// the same code, with no allocation for up to 16 candidates (unless the
/// in-flight request gate is on). For callers that replay many decisions
/// under many configs and read only the outcome and the gate.
pub fn decide_verdict(config: &Config, candidates: &[Candidate], exploration_draw: f64) -> Verdict {
    let n = candidates.len();
    if let Some(outcome) = before_partition(config, n, exploration_draw) {
        return Verdict {
            outcome,
            gate: None,
        };
    }
    let g = if n <= STACK_CANDIDATES {
        let (mut sticky, mut non_sticky) = ([0usize; STACK_CANDIDATES], [0usize; STACK_CANDIDATES]);
        let (mut ns, mut nn) = (0, 0);
        for (i, c) in candidates.iter().enumerate() {
            if is_sticky(config, c) {
                sticky[ns] = i;
                ns += 1;
            } else {
                non_sticky[nn] = i;
                nn += 1;
            }
        }
        after_partition(config, candidates, &sticky[..ns], &non_sticky[..nn])
    } else {
        let (sticky, non_sticky): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| is_sticky(config, &candidates[i]));
        after_partition(config, candidates, &sticky, &non_sticky)
    };
    Verdict {
        outcome: g.outcome,
        gate: g.gate,
    }
}
