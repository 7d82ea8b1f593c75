//! Peak prefill throughput estimators.
//!
//! # From vLLM stats lines
//!
//! **What is estimated.** The filter turns in-flight uncached tokens into a
//! TTFT by dividing by `peakPrefillThroughput`, so the number it needs is
//! the rate at which an engine *drains a backlog*: uncached tokens over
//! prefill time while requests wait, the per-request cost (scheduling,
//! sampling the first token) and the steps shared with decode included.
//! That *effective saturated rate* is below the engine's raw compute rate
//! by `overhead / (overhead + uncached tokens / raw rate)` per request: a
//! few percent for long prompts, about half for the short uncached
//! suffixes of high prefix-hit traffic. It is what a saturated interval's
//! computed tokens per second measure, and what this estimator targets.
//!
//! **What the lines say.** v1 (`loggers.py`, every 10 s): `Avg prompt
//! throughput` counts each request's *full* prompt, cached tokens
//! included, in the interval its prefill completes; `Prefix cache hit
//! rate` is not the interval's but aggregates the queries and hits (tokens,
//! counted when a request is scheduled) of the most recent 1000 requests;
//! `Running` / `Waiting` are the scheduler's counts at the last step, a
//! snapshot. An interval with no throughput after one with none is logged
//! at DEBUG (absent from INFO logs). v0 (`metrics.py`, every 5 s, at the
//! first engine step after the interval) counts the prefill tokens
//! computed in the interval, cached ones excluded, over the time since the
//! previous line (idle time included: an idle engine logs nothing).
//!
//! **Method.**
//!
//! * *Saturated spans.* Per engine, runs of at least [`MIN_RUN`]
//!   consecutive lines with requests waiting (`Waiting`/`Pending` > 0);
//!   for v1 a gap of up to 3.5 intervals inside a run is DEBUG lines with
//!   no completion and counts as saturated time with no tokens. Each run's
//!   first line is left out (its interval holds the backlog's start,
//!   possibly idle time). A span's tokens are its lines' rate times their
//!   own interval (v1: the cadence, the median gap; v0: the gap). A
//!   line's time is its epoch time, else (year unknown) its month, day
//!   and time of day, which keep the gaps. A run with a completion-to-
//!   completion window (below) is measured over it instead.
//! * *The span's own hit rate (v1).* The rolling rate at line `k` of a
//!   span whose window still holds `W` tokens from before it is
//!   `H_k = (h0 W + h S_k) / (W + S_k)` (`h0` the rate at the span's start,
//!   `S_k` the tokens counted since, shifted by the prompt in progress since
//!   a query is counted at scheduling): linear in `(W, h)`, fitted by least
//!   squares over the span's lines with `W` at most the span's own tokens.
//!   `W = 0` gives the span's last rate; `W` = all tokens since the
//!   engine's first line (no request left the window yet) the farthest
//!   rate; the span's rate lies between (widened by the rates of its last
//!   third). When the window holds the whole history (fewer than 1000
//!   requests, the usual case for engines serving long prompts) the fit is
//!   exact up to the prompt straddling each line; when the window slides,
//!   the request-counted window is not token-linear and the cap on `W`
//!   keeps the estimate near the last rate.
//! * *The whole history (v1, with the EPP's routing).* Decisions that name
//!   the endpoint picked (an EPP log's picker lines; no prefix match
//!   needed) tell how many requests each engine scheduled by a line
//!   (routed before it, less its `Waiting`). While at most
//!   [`HIT_RATE_WINDOW_REQUESTS`], vLLM's window holds every request since
//!   the engine started (the decisions starting before its first logged
//!   completion), the rolling rate is the cumulative one and the span's
//!   own rate is exact (`whole_history_hit`), bounded by the prompt in
//!   progress at each end and the printed rate's rounding. Past that the
//!   window slides, and the routing says which requests each line's
//!   window holds, so each scheduling interval's hit rate is solved from
//!   all of the engine's lines at once (`Sliding`: constrained least
//!   squares with a light smoothing penalty); a span's own rate is its
//!   intervals' weighted by their queries, bounded by the envelope of the
//!   solves with the prompt in progress counted in full or not at all and
//!   the penalty ten times lighter or heavier, widened by 1.645 standard
//!   deviations of the solve (its residuals propagated through it). These
//!   bounds are added in full, as the rolling fit's.
//! * *The span's own requests (v1, with the EPP's decisions).* When the
//!   decisions name the endpoint each request was sent to and its prefix
//!   match there (decision records with `chosen_endpoint`, or an EPP log
//!   at `-v=5` whose prefix producers give the picked endpoint's match in
//!   whole blocks, the prompt then its blocks and half a block; see
//!   [`VllmEstimator::push_decision`]), the span is measured from
//!   completion to completion instead (`own_window`, `routed_hit`):
//!   vLLM schedules first come, first served and `Waiting` are the latest
//!   arrivals, so the requests scheduled between the run's first and last
//!   lines are known; from the completion of the prefill in progress at
//!   the first line to that of the one in progress at the last, the engine
//!   computed exactly their uncached tokens (`Σ prompt − matched`), with no
//!   prompt straddling either end and no lagged hit rate. The alignment is
//!   checked against the tokens the lines counted; a span that fails it
//!   falls back to the rolling fit. A run with no completion inside (one
//!   prompt straddling it) says nothing of the rate and is left out. Lines
//!   without a year take the decisions' year.
//! * *A queue model (v1, with the EPP's decisions).* The windows above
//!   assume the engine busy from one snapshot to the next; a queue that
//!   empties between two snapshots reporting waiting requests (short
//!   bursts) breaks that, and the idle seconds count as prefill time.
//!   With the decisions each request's arrival (its decision time), its
//!   uncached tokens `u_n` and its engine are known, and vLLM schedules
//!   first come, first served, so a prefill completes at
//!   `f_n = max(a_n, f_{n-1}) + o + u_n / r` (a per-request overhead `o`,
//!   a rate `r`): the engine idles exactly when every request that arrived
//!   has completed. Each `(o, r)` and sub-second phase of the lines (vLLM
//!   prints whole seconds) predicts every line's completed prompt tokens;
//!   a grid search keeps the fits with the fewest lines off by more than
//!   half the smallest prompt and 1 % (one more allowed). Their effective
//!   rate over the requests that waited (`a_n < f_{n-1}`),
//!   `Σ u_n / Σ (o + u_n / r)`, counts busy time only; the central fit
//!   (median of the best) is the estimate, the fits' range widened by
//!   [`QUEUE_RESOLUTION`] the 90 % interval. It is used for a deployment
//!   when every engine with saturated runs fits (at most one line in ten
//!   mismatched: else requests are missing from the decisions, another
//!   client shares the engine, the clocks are apart, or the engine's rate
//!   varies with its load, as when long prompts share steps with many
//!   decodes) and at least [`QUEUE_MIN_WAITED`] requests waited; otherwise
//!   the windows above give the estimate. The model serves one prefill at
//!   a time; an engine that batches several requests' prefill chunks in
//!   a step completes them in the same order, so the model holds where
//!   the fit does.
//! * *Estimate.* Computed tokens (`× (1 − h)` per span for v1) summed over
//!   all spans of the deployment's engines, divided by their seconds: a
//!   ratio of sums, because v1 lands a long prompt in one interval.
//! * *90 % interval.* A moving-block bootstrap over saturated intervals
//!   (600 replicates, 5th–95th percentile, half-widths scaled by `1 + 2/n`
//!   with `n` the blocks; v1 lands each prompt whole in one interval, so a
//!   span's intervals are drawn in blocks of its largest interval's tokens
//!   over its mean interval's, at most half the span), widened by the
//!   prompt straddling each end of a span (half its largest interval's
//!   tokens each way; half an interval's mean tokens for a
//!   completion-to-completion span, whose ends are instants inside an
//!   interval) and the computed share's error, each weighted by its
//!   span's share of tokens. Separate v1 spans straddle separate prompts:
//!   their straddle bounds add in quadrature across spans (v0 spans and
//!   exact counts add in full). With every span measured from its own
//!   requests, the terms are independent errors (interval sampling, the
//!   end instants, one request of misalignment either way) and are added
//!   in quadrature, given at least [`QUADRATURE_MIN_INTERVALS`]
//!   intervals; otherwise (the rolling hit rate's range is a bound on a
//!   bias; a short saturation is known only at a few snapshots, between
//!   which the engine may have idled) every term is added in full.
//! * *Error.* Measured across seeds 1–4 of every scenario with saturated
//!   engines, checked on seeds 5–8 held out and, once at the end, on seeds
//!   9–12 (`cargo test -p gatecal-recommend --test peak_sweep --
//!   --nocapture`, `PEAK_SWEEP_SEEDS`; tables in docs/methodology.md §6),
//!   over 60 runs per seed set with at least 8 saturated intervals, as
//!   (seeds 1–4 / 5–8 / 9–12). With the decision records: median error
//!   0.3 / 0.2 / 0.1 %, within 10 % in 60 / 60 / 60, the interval holding
//!   the truth in 60 / 60 / 59, no wider than 40 % of the estimate in
//!   60 / 60 / 60; the bursty deployment the windows missed
//!   (`mistral-small`, 9–22 % low) is within 6 % with the queue model.
//!   With the EPP's log at `-v=5` the same but a median error of 0.3 % on
//!   9–12. With the EPP's routing only: median 0.5 / 0.6 / 0.3 %, within
//!   10 % in 58 / 57 / 58, holding the truth in 60 / 60 / 58, no wider than
//!   40 % in 56 / 56 / 55; the sliding window's solve took the shifting
//!   hit rate over more than 1000 requests per engine (`rag-hi-shift`)
//!   from 55–56 % wide (one held-out run 21 % high) to 12–14 % wide and
//!   within 2 %. The stats lines alone: median 0.9 / 1.2 / 0.9 %, within
//!   10 % in 58 / 55 / 53, holding the truth in 60 / 58 / 57, no wider than
//!   40 % in 45 / 44 / 45. The misses: without the decisions' matches, the
//!   bursty deployment (its queue empties between snapshots) and wide
//!   intervals where few long prompts make each span (`glm-like`), and
//!   from the stats lines alone a shifting hit rate over more than 1000
//!   requests per engine leaves the rolling rate's lag only bounded
//!   (`rag-hi-shift`); from them, long prompts with drifting hit rates are
//!   7–10 % low (`glm-like`, `agent-drift`; 1–4 % with the routing).
//! * A deployment never saturated has no estimate from this source: its
//!   highest per-interval rate is given, flagged as thin evidence (it is
//!   neither a bound nor an estimate).
//!
//! # From calibration output
//!
//! `PEAK_PREFILL_THROUGHPUT=<n>` and `Measured peakPrefillThroughput = <n>
//! tokens/sec` lines (the llm-d calibration job): the median of the values.
//! TTFT samples of cold prompts (CSV or JSON lines with prompt tokens and
//! TTFT): fitted as `TTFT = overhead + tokens / peak` by the Theil–Sen
//! estimator (median of pairwise slopes over pairs with different token
//! counts; robust to 29 % outliers); with a single prompt size the slope is
//! not identifiable and the job's own rule `tokens / median(TTFT)` is used,
//! which includes the overhead and so is a lower bound.

use std::collections::BTreeMap;

use gatecal_parser::{VllmStats, VllmStatsVersion, epoch_of, year_month_of};
use serde::Serialize;

/// Where an estimate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// `--peak-prefill-throughput`.
    User,
    /// vLLM's Prometheus counters (computed prompt tokens) while requests
    /// waited.
    Prometheus,
    /// Calibration output.
    Calibration,
    /// vLLM stats lines while saturated.
    VllmStats,
    /// vLLM stats lines, never saturated: the highest interval rate seen,
    /// thin evidence (v1's counting can push one interval above the peak).
    VllmStatsUnsaturated,
    /// The filter config in force (no evidence).
    Config,
}

impl PeakSource {
    /// The name used in reports (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            PeakSource::User => "user",
            PeakSource::Prometheus => "prometheus",
            PeakSource::Calibration => "calibration",
            PeakSource::VllmStats => "vllm_stats",
            PeakSource::VllmStatsUnsaturated => "vllm_stats_unsaturated",
            PeakSource::Config => "config",
        }
    }
}

/// One estimate of a deployment's peak prefill throughput.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeakEstimate {
    /// Tokens per second.
    pub value: f64,
    /// Where it comes from.
    pub source: PeakSource,
    /// Samples it rests on (saturated intervals, calibration values or TTFT samples).
    pub samples: u64,
    /// Low end of the spread (10th percentile of per-interval rates, or the
    /// smallest calibration value).
    pub spread_low: Option<f64>,
    /// High end of the spread.
    pub spread_high: Option<f64>,
    /// 90 % interval `[low, high]` for the peak, where the method gives one.
    pub interval: Option<[f64; 2]>,
    /// Engines (pods) behind a vLLM estimate.
    pub engines: u64,
    /// How it was computed, in a sentence.
    pub method: String,
}

/// One stats line as the estimator keeps it.
#[derive(Clone, Copy, Debug)]
struct Line {
    ts: Option<f64>,
    /// `Avg prompt throughput`, tokens/s.
    rate: f64,
    /// `Prefix cache hit rate`, a fraction (v1).
    hit: Option<f64>,
    waiting: bool,
    /// Requests waiting at the line (`Waiting`/`Pending`).
    queued: u32,
    v1: bool,
    /// Whether `ts` is epoch time (the year known), comparable with the
    /// EPP's decisions.
    absolute: bool,
}

/// One request the EPP sent to an engine: `(time, prompt tokens, tokens
/// of the prompt in the engine's prefix cache)`, from a decision that
/// names the endpoint it picked and that endpoint's prefix match.
#[derive(Clone, Copy, Debug)]
struct Routed {
    ts: f64,
    prompt: f64,
    matched: f64,
    /// A hash of the request id (`0` when unknown): one request decided by
    /// several filter instances counts once.
    request: u64,
    /// Its match came from the prefix producers' `-v=5` lines (whole
    /// blocks, the prompt to half a block), not from an exact record.
    from_lines: bool,
}

/// A stretch of saturated intervals of one engine, reduced to blocks of
/// [`BLOCK`] consecutive intervals: `(tokens counted, seconds)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Span {
    /// Full prompt tokens (v1) or computed tokens (v0) per block, and the
    /// block's seconds.
    blocks: Vec<(f64, f64)>,
    /// The span's own prefix hit rate (v1; see [`span_hit`]) and the
    /// bounds it lies within.
    hit: Option<f64>,
    hit_lo: f64,
    hit_hi: f64,
    /// Largest tokens of one interval (a proxy of the largest prompt).
    max_interval_tokens: f64,
    /// Where the span's hit rate comes from (the report's method names
    /// each): [`HitFrom::Own`] when it is the span's own requests' (from
    /// the EPP's routed requests, [`routed_hit`]).
    hit_from: HitFrom,
}

/// Where a v1 span's prefix hit rate comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum HitFrom {
    /// No correction (v0, or exact counts).
    #[default]
    None,
    /// The span's own requests, routed with their prefix match.
    Own,
    /// The engine's cumulative rate, while the EPP's routing says it had
    /// scheduled at most 1000 requests ([`whole_history_hit`]).
    Cumulative,
    /// Solved from vLLM's sliding window with the EPP's routing
    /// ([`Sliding`]).
    Sliding,
    /// Fitted to the rolling rate from the lines alone ([`span_hit`]).
    Rolling,
    /// A v1 span with no hit rate known: its full prompts count.
    Missing,
}

impl Span {
    /// A span of exact counts (no hit-rate correction): `(tokens, seconds)`
    /// per interval.
    pub(crate) fn exact(intervals: Vec<(f64, f64)>) -> Span {
        let max = intervals.iter().map(|i| i.0).fold(0.0, f64::max);
        Span {
            blocks: intervals,
            max_interval_tokens: max,
            ..Span::default()
        }
    }

    /// Whether the hit rate is the span's own requests' rather than
    /// vLLM's rolling rate's.
    fn routed(&self) -> bool {
        self.hit_from == HitFrom::Own
    }

    fn tokens(&self) -> f64 {
        self.blocks.iter().map(|b| b.0).sum()
    }
    fn intervals(&self) -> usize {
        self.blocks.len()
    }
    /// `1 - hit rate` applied to the span's counted tokens (1 for v0).
    fn keep(&self) -> f64 {
        1.0 - self.hit.unwrap_or(0.0)
    }
}

/// The method of v1 spans' computed share, by where each span's hit rate
/// comes from ([`HitFrom`]).
fn hit_method(spans: &[Span]) -> String {
    let n = |f: HitFrom| spans.iter().filter(|s| s.hit_from == f).count();
    let (own, cumulative, sliding, rolling, counted) = (
        n(HitFrom::Own),
        n(HitFrom::Cumulative),
        n(HitFrom::Sliding),
        n(HitFrom::Rolling),
        n(HitFrom::None),
    );
    let missing = n(HitFrom::Missing);
    if counted == spans.len() {
        return "v0: the prefill tokens the lines count as computed, cached ones excluded; no hit-rate correction".to_string();
    }
    if own + cumulative + sliding + counted + missing == 0 {
        return "v1: full prompts × (1 − each saturated run's own prefix hit rate, fitted to the rolling rate)".to_string();
    }
    let parts: Vec<String> = [
        (counted, "as the lines count computed tokens (v0)"),
        (
            own,
            "measured from completion to completion with the uncached tokens of the requests the decisions routed",
        ),
        (
            cumulative,
            "× (1 − the run's prefix hit rate from the engine's cumulative one, exact while the EPP's routing shows at most 1000 requests scheduled)",
        ),
        (
            sliding,
            "× (1 − the run's prefix hit rate solved from vLLM's window of the last 1000 requests the EPP's routing places)",
        ),
        (
            rolling,
            "× (1 − the run's prefix hit rate fitted to the rolling rate)",
        ),
        (missing, "with their full prompts (no prefix hit rate known)"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, how)| format!("{n} {how}"))
    .collect();
    let v = if counted == 0 { "v1: " } else { "" };
    format!("{v}of {} run(s), {}", spans.len(), parts.join("; "))
}

/// Accumulates vLLM stats lines, per deployment and engine.
#[derive(Clone, Debug, Default)]
pub struct VllmEstimator {
    engines: BTreeMap<String, BTreeMap<String, Vec<Line>>>,
    /// Requests routed to each engine, keyed `pod#rank`.
    routed: BTreeMap<String, Vec<Routed>>,
    /// Every request a decision sent to each engine, prefix match known or
    /// not: `(time, request id hash)`, keyed `pod#rank`.
    arrivals: BTreeMap<String, Vec<(f64, u64)>>,
}

/// The requests vLLM v1's `PrefixCachingMetrics` aggregates
/// (`max_recent_requests`, 1000 by default): the rolling `Prefix cache hit
/// rate` covers the most recent this many requests scheduled.
pub const HIT_RATE_WINDOW_REQUESTS: usize = 1000;

/// Minimum saturated intervals (over a deployment's engines) for an estimate.
pub const MIN_SATURATED_INTERVALS: u64 = 3;
/// Minimum consecutive saturated lines for a run to count.
pub const MIN_RUN: usize = 3;
/// Intervals per bootstrap block.
pub const BLOCK: usize = 1;
/// Saturated intervals below which the interval's terms are added in
/// full even when every span is measured from its own requests: a short
/// saturation is known only at a few snapshots, and the queue may have
/// emptied (the engine idled) between them.
pub const QUADRATURE_MIN_INTERVALS: usize = 8;
/// Bootstrap replicates.
const REPLICATES: usize = 600;

fn quantile_sorted(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let k = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[k - 1])
}

/// The median of a slice (nearest rank, lower middle for even sizes).
pub fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    quantile_sorted(v, 0.5)
}

/// The cadence of one engine's lines (sorted by time) and the tokens each
/// line counts.
fn counted_tokens(lines: &[Line]) -> (f64, Vec<f64>) {
    let mut gaps: Vec<f64> = lines
        .windows(2)
        .filter_map(|w| match (w[0].ts, w[1].ts) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        })
        .collect();
    // v1 logs every interval (idle ones at DEBUG): its cadence is the
    // smallest common gap; v0 logs at the first step after its interval.
    let cadence = median(&mut gaps).unwrap_or(10.0).clamp(1.0, 120.0);
    // Tokens each line counts, and their running sum since the first line.
    let counted: Vec<f64> = lines
        .iter()
        .enumerate()
        .map(|(k, l)| {
            let gap = match (k.checked_sub(1).and_then(|p| lines[p].ts), l.ts) {
                (Some(a), Some(b)) if b > a => b - a,
                _ => cadence,
            };
            let own = if l.v1 { gap.min(cadence) } else { gap };
            l.rate.max(0.0) * own
        })
        .collect();
    (cadence, counted)
}

/// The saturated spans of one engine's lines (sorted by time).
fn spans(lines: &[Line], routed: &[Routed], arrivals: &[f64]) -> Vec<Span> {
    let (cadence, counted) = counted_tokens(lines);
    let mut history = Vec::with_capacity(lines.len());
    let mut sum = 0.0;
    for c in &counted {
        sum += c;
        history.push(sum);
    }
    // The sliding window's solve, once per engine, when a run needs it.
    let sliding = std::cell::OnceCell::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].waiting {
            i += 1;
            continue;
        }
        // A run of saturated lines, adjacent in time (v1: DEBUG lines in
        // between had no throughput; they count as saturated time with
        // no tokens).
        let mut j = i;
        while j + 1 < lines.len() && lines[j + 1].waiting {
            let gap = match (lines[j].ts, lines[j + 1].ts) {
                (Some(a), Some(b)) => b - a,
                _ => cadence,
            };
            if gap <= 0.0 || gap > 3.5 * cadence || gap > 120.0 {
                break;
            }
            j += 1;
        }
        // With routed requests, a v1 run with no prefill completing inside
        // is one prompt straddling it: no measure of the rate.
        let straddled =
            !routed.is_empty() && lines[i].v1 && counted[i + 1..=j].iter().all(|c| *c <= 0.0);
        if j + 1 - i >= MIN_RUN && !straddled {
            // Which lines' tokens count, and the span's own share of them
            // computed: completion to completion when the EPP's routed
            // requests align, else the run less its first line.
            let (k0, k1, own) = match own_window(lines, &counted, i, j, routed) {
                Some(w) => w,
                None => (
                    i + 1,
                    j,
                    routed_hit(&lines[i..=j], &counted[i + 1..=j], routed, 1),
                ),
            };
            let tag = |from: HitFrom| move |h: Share| (h, from);
            let rolling = || {
                whole_history_hit(lines, &counted, &history, i, j, arrivals)
                    .map(tag(HitFrom::Cumulative))
                    .or_else(|| {
                        sliding
                            .get_or_init(|| Sliding::new(lines, &counted, &history, arrivals))
                            .as_ref()
                            .and_then(|s: &Sliding| s.share(i, j))
                            .map(tag(HitFrom::Sliding))
                    })
                    .or_else(|| {
                        span_hit(&lines[i..=j], &counted[i..=j], history[i])
                            .map(tag(HitFrom::Rolling))
                    })
            };
            let (hit, hit_lo, hit_hi, hit_from) = match own.map(tag(HitFrom::Own)).or_else(rolling)
            {
                Some((h, from)) => (Some(h.0), h.1, h.2, from),
                None if lines[i].v1 => (None, 0.0, 0.0, HitFrom::Missing),
                None => (None, 0.0, 0.0, HitFrom::None),
            };
            let mut sp = Span {
                hit,
                hit_lo,
                hit_hi,
                hit_from,
                ..Span::default()
            };
            let mut block = (0.0, 0.0, 0usize);
            for k in k0..=k1 {
                let l = &lines[k];
                let gap = match (lines[k - 1].ts, l.ts) {
                    (Some(a), Some(b)) => b - a,
                    _ => cadence,
                };
                let tokens = counted[k];
                sp.max_interval_tokens = sp.max_interval_tokens.max(tokens);
                block.0 += tokens;
                block.1 += gap;
                block.2 += 1;
                if block.2 == BLOCK {
                    sp.blocks.push((block.0, block.1));
                    block = (0.0, 0.0, 0);
                }
            }
            if block.2 > 0 {
                sp.blocks.push((block.0, block.1));
            }
            if k1 > j {
                // Completion to completion: each end is an instant inside
                // one interval, so it is off by at most an interval's
                // worth of the span's mean rate (half on average).
                let secs: f64 = sp.blocks.iter().map(|b| b.1).sum();
                sp.max_interval_tokens = sp.tokens() / secs.max(1e-9) * cadence;
            }
            out.push(sp);
        }
        i = j + 1;
    }
    out
}

/// One engine's first-come-first-served queue, fitted to the EPP's routed
/// requests and the engine's v1 lines (see the module docs).
#[derive(Clone, Copy, Debug)]
struct Queue {
    /// Uncached tokens of the requests that waited (central fit).
    tokens: f64,
    /// Their modelled prefill seconds (central fit).
    secs: f64,
    /// The effective rate over every fit as consistent with the lines as
    /// the best one (one mismatched line more allowed).
    lo: f64,
    hi: f64,
    /// Requests that waited (central fit).
    waited: usize,
}

/// Per-request overheads (seconds) the queue model tries.
const QUEUE_OVERHEADS_S: [f64; 7] = [0.0, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16];
/// Sub-second phases of the lines' times the queue model tries (vLLM's
/// log prefix has whole seconds: a line's interval ends up to 1 s after
/// its printed time).
const QUEUE_PHASES: usize = 10;
/// The queue model's 90 % interval is widened by this share each way: the
/// grid's resolution (1 % in rate, 20–40 ms in overhead).
pub const QUEUE_RESOLUTION: f64 = 0.02;
/// Fewest requests that waited, over a deployment's engines, for the
/// queue model to give the estimate.
pub const QUEUE_MIN_WAITED: usize = 20;

/// The queue model of one engine: `None` when the lines are not v1 with
/// their year, the decisions do not cover ten lines, or no fit matches
/// nine lines in ten (requests missing from the decisions, another
/// client, clocks apart).
///
/// vLLM schedules first come, first served; with `a_n` the EPP's decision
/// time of the engine's `n`-th request and `u_n` its uncached tokens
/// (prompt less the match), the prefill of request `n` completes at
/// `f_n = max(a_n, f_{n-1}) + o + u_n / r`: the engine idles exactly when
/// every request that arrived has completed. v1 counts each full prompt
/// in the line whose interval holds its completion, so each `(o, r)` and
/// phase of the lines predicts every line's prompt tokens; a line matches
/// when they agree to within half the smallest prompt and 1 %. The fits
/// with the fewest mismatched lines (one more allowed) give the
/// effective rate of the requests that waited (`a_n < f_{n-1}`),
/// `Σ u_n / Σ (o + u_n / r)`: busy time only, whatever the lines'
/// snapshots say.
fn queue_model(lines: &[Line], counted: &[f64], cadence: f64, routed: &[Routed]) -> Option<Queue> {
    if routed.len() < 10 || lines.iter().any(|l| !l.v1 || !l.absolute) {
        return None;
    }
    let (t0, t1) = (routed[0].ts, routed[routed.len() - 1].ts);
    // Lines whose intervals the decisions cover, the first one a base.
    let idx: Vec<usize> = (0..lines.len())
        .filter(|&k| {
            lines[k]
                .ts
                .is_some_and(|t| t > t0 + 2.0 * cadence && t < t1)
        })
        .collect();
    if idx.len() < 10 {
        return None;
    }
    let times: Vec<f64> = idx.iter().filter_map(|&k| lines[k].ts).collect();
    let obs: Vec<f64> = idx.iter().map(|&k| counted[k]).collect();
    let min_prompt = routed
        .iter()
        .map(|r| r.prompt)
        .fold(f64::INFINITY, f64::min);
    let (prompt, uncached) = routed.iter().fold((0.0, 0.0), |s, r| {
        (s.0 + r.prompt, s.1 + (r.prompt - r.matched).max(1.0))
    });
    let busiest = obs.iter().copied().fold(0.0, f64::max) / cadence;
    let r0 = busiest * uncached / prompt.max(1.0);
    if r0 <= 0.0 {
        return None;
    }
    // (mismatched lines, waited tokens, their seconds, waited requests), or
    // `None` once more than `limit` lines mismatch.
    let eval = |o: f64, r: f64, phi: f64, limit: usize| -> Option<(usize, f64, f64, usize)> {
        let base = times[0] + phi;
        let (mut f, mut k, mut acc, mut bad) = (f64::NEG_INFINITY, 0usize, 0.0, 0usize);
        let (mut wt, mut ws, mut wn) = (0.0, 0.0, 0usize);
        let close = |k: &mut usize, acc: &mut f64, bad: &mut usize| {
            if *k > 0 && (*acc - obs[*k]).abs() > 0.5 * min_prompt + 0.01 * obs[*k] {
                *bad += 1;
            }
            *acc = 0.0;
            *k += 1;
        };
        for q in routed {
            let u = (q.prompt - q.matched).max(1.0);
            let svc = o + u / r;
            let waited = q.ts < f;
            f = f.max(q.ts) + svc;
            if waited && q.ts > base {
                wt += u;
                ws += svc;
                wn += 1;
            }
            while k < times.len() && times[k] + phi < f {
                close(&mut k, &mut acc, &mut bad);
            }
            if bad > limit {
                return None;
            }
            if k < times.len() && f > base {
                acc += q.prompt;
            }
        }
        while k < times.len() {
            close(&mut k, &mut acc, &mut bad);
        }
        (bad <= limit).then_some((bad, wt, ws, wn))
    };
    // Coarse: per overhead, the rate at three phases; then every phase and
    // finer rates around it.
    let allowed = (idx.len() - 1) / 10;
    let mut fits = Vec::new();
    let mut best = usize::MAX - 1;
    for o in QUEUE_OVERHEADS_S {
        // The fewest mismatches and the lowest and highest rates with them.
        let mut coarse = (usize::MAX, r0, r0);
        let mut r = 0.2 * r0;
        while r < 3.0 * r0 {
            for phi in [0.15, 0.5, 0.85] {
                if let Some(e) = eval(o, r, phi, coarse.0) {
                    if e.0 < coarse.0 {
                        coarse = (e.0, r, r);
                    } else {
                        coarse.2 = r;
                    }
                }
            }
            r *= 1.04;
        }
        let mut r = coarse.1 / 1.12;
        while r < coarse.2 * 1.12 {
            for p in 0..QUEUE_PHASES {
                if let Some(e) = eval(o, r, p as f64 / QUEUE_PHASES as f64, best + 1)
                    && e.2 > 0.0
                {
                    best = best.min(e.0);
                    fits.push(e);
                }
            }
            r *= 1.01;
        }
    }
    let best = fits.iter().map(|e| e.0).min()?;
    if best > allowed {
        return None;
    }
    let mut ok: Vec<(f64, f64, f64, usize)> = fits
        .iter()
        .filter(|e| e.0 <= best + 1)
        .map(|e| (e.1 / e.2, e.1, e.2, e.3))
        .collect();
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    let lo = ok.first()?.0;
    let hi = ok.last()?.0;
    // The central fit: the median rate among the best fits.
    let mut central: Vec<&(f64, f64, f64, usize)> = ok.iter().collect();
    central.retain(|e| fits.iter().any(|f| f.0 == best && f.1 == e.1 && f.2 == e.2));
    let c = central
        .get(central.len() / 2)
        .copied()
        .or(ok.get(ok.len() / 2))?;
    Some(Queue {
        tokens: c.1,
        secs: c.2,
        lo,
        hi,
        waited: c.3,
    })
}

/// A span's computed share with its bounds: `(estimate, low, high)`.
type Share = (f64, f64, f64);

/// The window of a saturated run measured from completion to completion,
/// with the EPP's routed requests: `(first line, last line, share)` (see
/// [`routed_hit`]), or `None` when the run is not v1, has no completion
/// inside, ends with the log, or does not align with the routed requests.
///
/// v1 counts a prompt when its prefill completes. The prefill in progress
/// at the run's first line `i` completes inside the first line `f > i`
/// with tokens; the one in progress at its last line `j` (the last request
/// scheduled from the queue) in the first line `l > j` with tokens. From
/// the first completion to the second the engine computed exactly the
/// requests scheduled between lines `i` and `j`, so their computed tokens
/// over the lines `f+1..=l` have no straddling prompt at either end; each
/// end's time is known to within its interval.
fn own_window(
    lines: &[Line],
    counted: &[f64],
    i: usize,
    j: usize,
    routed: &[Routed],
) -> Option<(usize, usize, Option<Share>)> {
    if routed.is_empty() || !lines[i].v1 {
        return None;
    }
    let f = (i + 1..=j).find(|&k| counted[k] > 0.0)?;
    let l = (j + 1..lines.len())
        .take_while(|&k| match (lines[j].ts, lines[k].ts) {
            (Some(a), Some(b)) => b - a <= 120.0,
            _ => false,
        })
        .find(|&k| counted[k] > 0.0)?;
    let own = routed_hit(&lines[i..=j], &counted[f + 1..=l], routed, 0)?;
    Some((f + 1, l, Some(own)))
}

/// The share of a saturated span's counted prompt tokens that the engine
/// did not compute (its prefix hits, in effect), from the requests the EPP
/// routed to the engine: `(estimate, low, high)`, or `None` when the span
/// cannot be aligned with them.
///
/// vLLM schedules an engine's requests first come, first served, and a
/// line's `Waiting` are the latest arrivals not yet scheduled: the
/// requests scheduled by a line at `t` are those routed to the engine
/// before `t` less the last `Waiting`. The span's counted prompts are the
/// requests scheduled between its first and last lines, shifted `back` by
/// one when the window runs from line to line (v1 counts a prompt one
/// request after it is scheduled). The share is
/// `1 − Σ (prompt − matched) / counted`; the same over the sets shifted by
/// one request each way bounds it (a request counted in a neighbouring
/// interval). The alignment is checked: the set's prompt tokens must match
/// the tokens the lines counted to within the largest prompt and a
/// quarter, else (requests missing from the EPP's logs, another client,
/// clocks apart) `None`.
fn routed_hit(
    lines: &[Line],
    counted: &[f64],
    routed: &[Routed],
    back: usize,
) -> Option<(f64, f64, f64)> {
    if routed.is_empty() || lines.iter().any(|l| !l.v1 || !l.absolute) {
        return None;
    }
    let (first, last) = (lines.first()?, lines.last()?);
    let scheduled = |l: &Line| -> Option<usize> {
        let t = l.ts?;
        let arrived = routed.partition_point(|r| r.ts <= t);
        // The EPP's decisions must cover the span, before and after.
        if arrived == 0 || arrived == routed.len() {
            return None;
        }
        usize::try_from(l.queued)
            .ok()
            .map(|q| arrived.saturating_sub(q))
    };
    let (a, b) = (scheduled(first)?, scheduled(last)?);
    let sums = |a: usize, b: usize| -> (f64, f64) {
        let b = b.min(routed.len());
        routed[a.min(b)..b]
            .iter()
            .fold((0.0, 0.0), |s, r| (s.0 + r.prompt, s.1 + r.matched))
    };
    let (a, b) = (a.saturating_sub(back), b.saturating_sub(back));
    let (prompt, matched) = sums(a, b);
    let tokens: f64 = counted.iter().sum();
    let largest = routed[a.min(b)..b]
        .iter()
        .map(|r| r.prompt)
        .fold(0.0, f64::max);
    if prompt <= 0.0 || tokens <= 0.0 || (prompt - tokens).abs() > largest + 0.25 * tokens {
        return None;
    }
    let share = |p: f64, m: f64| (1.0 - (p - m) / tokens).clamp(0.0, 1.0);
    let h = share(prompt, matched);
    let (mut lo, mut hi) = (h, h);
    for (x, y) in [(a.saturating_sub(1), b.saturating_sub(1)), (a + 1, b + 1)] {
        let (p, m) = sums(x, y);
        if p > 0.0 {
            lo = lo.min(share(p, m));
            hi = hi.max(share(p, m));
        }
    }
    Some((h, lo, hi))
}

/// The prefix hit rate of a saturated run's own requests (lines `i..=j`)
/// when the EPP's decisions show that vLLM's rolling window still holds
/// every request the engine scheduled: `(estimate, low, high)`, or `None`
/// when it may not (more than [`HIT_RATE_WINDOW_REQUESTS`] scheduled by
/// the run's last line, or decisions starting after the engine's first
/// logged completion, so that earlier requests are unknown).
///
/// The requests scheduled by a line at `T` are those routed to the engine
/// before `T` less the line's `Waiting` (first come, first served). While
/// they number at most 1000 the rolling rate is the engine's cumulative
/// rate: with `Q` the queries (full prompts, counted at scheduling) since
/// the engine's first line, the run's own rate is
/// `(H_j Q_j − H_i Q_i) / (Q_j − Q_i)` exactly. `Q` is the lines' counted
/// prompts plus the prompt in progress (between none and the next
/// completing line's count), and the printed rate has 0.05 points of
/// rounding; the bounds take both.
fn whole_history_hit(
    lines: &[Line],
    counted: &[f64],
    history: &[f64],
    i: usize,
    j: usize,
    arrivals: &[f64],
) -> Option<Share> {
    let (first, last) = (&lines[i], &lines[j]);
    if arrivals.is_empty() || !last.v1 || !last.absolute || !first.absolute {
        return None;
    }
    // The decisions must start before the engine's first logged
    // completion: no request before them.
    let first_count = lines.iter().position(|l| l.rate > 0.0)?;
    if arrivals[0] >= lines[first_count].ts? {
        return None;
    }
    let t = last.ts?;
    let scheduled = arrivals
        .partition_point(|a| *a <= t)
        .saturating_sub(last.queued as usize);
    if scheduled > HIT_RATE_WINDOW_REQUESTS {
        return None;
    }
    let (h0, h1) = (first.hit?, last.hit?);
    let ahead = |k: usize| {
        counted[k + 1..]
            .iter()
            .find(|c| **c > 0.0)
            .copied()
            .unwrap_or(0.0)
    };
    let (a0, a1) = (ahead(i), ahead(j));
    let rate = |s0: f64, s1: f64, e0: f64, e1: f64| -> Option<f64> {
        let q0 = history[i] + s0;
        let q1 = history[j] + s1;
        (q1 - q0 > 0.0).then(|| (((h1 + e1) * q1 - (h0 + e0) * q0) / (q1 - q0)).clamp(0.0, 1.0))
    };
    let h = rate(0.5 * a0, 0.5 * a1, 0.0, 0.0)?;
    let (mut lo, mut hi) = (h, h);
    for s0 in [0.0, a0] {
        for s1 in [0.0, a1] {
            for (e0, e1) in [(-5e-4, 5e-4), (5e-4, -5e-4)] {
                if let Some(x) = rate(s0, s1, e0, e1) {
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
        }
    }
    Some((h, lo, hi))
}

/// Smoothing of the sliding-window solve ([`Sliding`]): the weight of the
/// squared difference between neighbouring intervals' hit rates against
/// the lines' squared residuals (rate units).
const SLIDING_SMOOTH: f64 = 1e-2;
/// Standard deviations of the sliding-window solve's statistical error
/// added to each side of a span's rate (a 90 % two-sided normal bound).
const SLIDING_Z: f64 = 1.645;

/// The hit rates of one engine's scheduling intervals, solved from vLLM's
/// rolling rate once its window slides (more than
/// [`HIT_RATE_WINDOW_REQUESTS`] requests scheduled), with the EPP's
/// routing (which requests each line's window holds).
///
/// The requests scheduled by line `k` number `N_k` (routed before it, less
/// its `Waiting`), and its window holds the requests `N_k − 1000 < n ≤
/// N_k`: all of the scheduling intervals after the one holding request
/// `N_k − 1000`, a known fraction `w_km` (by request count) of that one.
/// With `q_m` the queries of interval `m` (the lines' counted prompts,
/// shifted by the prompt in progress since vLLM counts a query at
/// scheduling) and `h_m` its unknown hit rate, line `k` reads
/// `H_k = Σ w_km q_m h_m / Σ w_km q_m`: linear in `h`. The rates are its
/// least-squares solution with a light penalty on neighbouring
/// differences (the system is square and ill-posed: a line adds one
/// interval and one equation), clamped to `[0, 1]`.
struct Sliding {
    /// Per shift of the prompt in progress (none, half, all of it): the
    /// cumulative queries at each line and each interval's hit rate.
    solved: Vec<(Vec<f64>, Vec<f64>)>,
    /// The central solve's rows (`(first column, coefficients)`), band
    /// Cholesky factor, bandwidth and residual variance, for the
    /// statistical error of a span's rate.
    rows: Vec<(usize, Vec<f64>)>,
    chol: Vec<f64>,
    band: usize,
    sigma2: f64,
}

/// Band Cholesky in place (`m` row-major `n × n`, nonzero within `b` of
/// the diagonal): `false` when not positive definite.
fn band_cholesky(m: &mut [f64], n: usize, b: usize) -> bool {
    for j in 0..n {
        let k0 = j.saturating_sub(b);
        let mut d = m[j * n + j];
        for k in k0..j {
            d -= m[j * n + k] * m[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return false;
        }
        let d = d.sqrt();
        m[j * n + j] = d;
        for i in j + 1..n.min(j + b + 1) {
            let mut s = m[i * n + j];
            for k in i.saturating_sub(b).max(k0)..j {
                s -= m[i * n + k] * m[j * n + k];
            }
            m[i * n + j] = s / d;
        }
    }
    true
}

/// Solves `L Lᵀ x = y` with a band Cholesky factor.
fn band_solve(l: &[f64], n: usize, b: usize, y: &[f64]) -> Vec<f64> {
    let mut x = y.to_vec();
    for i in 0..n {
        let mut s = x[i];
        for k in i.saturating_sub(b)..i {
            s -= l[i * n + k] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = x[i];
        for k in i + 1..n.min(i + b + 1) {
            s -= l[k * n + i] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    x
}

impl Sliding {
    /// The solve for one engine's lines, or `None` when its window never
    /// slides, the lines are not v1 with epoch times, or the decisions
    /// start after the engine's first logged completion.
    fn new(lines: &[Line], counted: &[f64], history: &[f64], arrivals: &[f64]) -> Option<Sliding> {
        if arrivals.is_empty()
            || lines
                .iter()
                .any(|l| !l.v1 || !l.absolute || l.hit.is_none())
        {
            return None;
        }
        let first_count = lines.iter().position(|l| l.rate > 0.0)?;
        if arrivals[0] >= lines[first_count].ts? {
            return None;
        }
        let n = lines.len();
        let mut sched = Vec::with_capacity(n);
        let mut top = 0.0f64;
        for l in lines {
            let s = arrivals
                .partition_point(|a| *a <= l.ts.unwrap_or(f64::NEG_INFINITY))
                .saturating_sub(l.queued as usize) as f64;
            top = top.max(s);
            sched.push(top);
        }
        let window = HIT_RATE_WINDOW_REQUESTS as f64;
        if top <= window {
            return None;
        }
        let ahead: Vec<f64> = (0..n)
            .map(|k| {
                counted[k + 1..]
                    .iter()
                    .find(|c| **c > 0.0)
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect();
        // The window's intervals and fractions per line (by request count).
        let weights: Vec<(usize, Vec<f64>)> = (0..n)
            .map(|k| {
                let lo = sched[k] - window;
                let mut m0 = k;
                while m0 > 0 && sched[m0 - 1] > lo {
                    m0 -= 1;
                }
                let w = (m0..=k)
                    .map(|m| {
                        let prev = if m == 0 { 0.0 } else { sched[m - 1] };
                        let span = sched[m] - prev;
                        if span > 0.0 {
                            ((sched[m] - prev.max(lo)) / span).clamp(0.0, 1.0)
                        } else {
                            1.0
                        }
                    })
                    .collect();
                (m0, w)
            })
            .collect();
        let band = weights
            .iter()
            .enumerate()
            .map(|(k, (m0, _))| k - m0)
            .max()?
            .max(1);
        let mut solved = Vec::new();
        let mut central = None;
        for (shift, smooth) in [(0.5, 1.0), (0.0, 1.0), (1.0, 1.0), (0.5, 0.1), (0.5, 10.0)] {
            let smooth = smooth * SLIDING_SMOOTH;
            let mut qc = Vec::with_capacity(n);
            let mut top = 0.0f64;
            for k in 0..n {
                top = top.max(history[k] + shift * ahead[k]);
                qc.push(top);
            }
            let q: Vec<f64> = (0..n)
                .map(|m| qc[m] - if m == 0 { 0.0 } else { qc[m - 1] })
                .collect();
            let mut rows = Vec::new();
            let mut target = Vec::new();
            for (k, (m0, w)) in weights.iter().enumerate() {
                let a: Vec<f64> = w.iter().enumerate().map(|(x, w)| w * q[m0 + x]).collect();
                let d: f64 = a.iter().sum();
                if d > 0.0 {
                    rows.push((*m0, a.iter().map(|x| x / d).collect::<Vec<f64>>()));
                    target.push(lines[k].hit.unwrap_or(0.0));
                }
            }
            let mut m = vec![0.0; n * n];
            let mut rhs = vec![0.0; n];
            for ((m0, a), y) in rows.iter().zip(&target) {
                for (x, ax) in a.iter().enumerate() {
                    rhs[m0 + x] += ax * y;
                    for (z, az) in a.iter().enumerate() {
                        m[(m0 + x) * n + m0 + z] += ax * az;
                    }
                }
            }
            for k in 0..n {
                m[k * n + k] += 1e-9;
                if k > 0 {
                    m[k * n + k] += smooth;
                    m[(k - 1) * n + k - 1] += smooth;
                    m[k * n + k - 1] -= smooth;
                    m[(k - 1) * n + k] -= smooth;
                }
            }
            if !band_cholesky(&mut m, n, band) {
                return None;
            }
            let h: Vec<f64> = band_solve(&m, n, band, &rhs)
                .into_iter()
                .map(|x| x.clamp(0.0, 1.0))
                .collect();
            if central.is_none() {
                let rss: f64 = rows
                    .iter()
                    .zip(&target)
                    .map(|((m0, a), y)| {
                        let f: f64 = a.iter().enumerate().map(|(x, ax)| ax * h[m0 + x]).sum();
                        (f - y).powi(2)
                    })
                    .sum();
                let sigma2 = rss / (rows.len() as f64 / 2.0).max(1.0);
                central = Some((rows, m, sigma2));
            }
            solved.push((qc, h));
        }
        let (rows, chol, sigma2) = central?;
        Some(Sliding {
            solved,
            rows,
            chol,
            band,
            sigma2,
        })
    }

    /// The hit rate of the queries scheduled between lines `i` and `j`:
    /// `(estimate, low, high)`, the bounds taking the prompt in progress
    /// at each line (none or all of it counted) and [`SLIDING_Z`] standard
    /// deviations of the solve (from its residuals).
    fn share(&self, i: usize, j: usize) -> Option<Share> {
        let rate = |qc: &[f64], h: &[f64]| -> Option<(f64, Vec<f64>)> {
            let total = qc[j] - qc[i];
            if total <= 0.0 {
                return None;
            }
            let mut c = vec![0.0; qc.len()];
            let mut hits = 0.0;
            for m in i + 1..=j {
                let q = qc[m] - qc[m - 1];
                c[m] = q / total;
                hits += q * h[m];
            }
            Some((hits / total, c))
        };
        let (qc, h) = self.solved.first()?;
        let (est, c) = rate(qc, h)?;
        let n = qc.len();
        let x = band_solve(&self.chol, n, self.band, &c);
        let var: f64 = self
            .rows
            .iter()
            .map(|(m0, a)| {
                a.iter()
                    .enumerate()
                    .map(|(z, az)| az * x[m0 + z])
                    .sum::<f64>()
                    .powi(2)
            })
            .sum::<f64>()
            * self.sigma2;
        let sd = SLIDING_Z * var.sqrt();
        let (mut lo, mut hi) = (est - sd, est + sd);
        for (qc, h) in &self.solved[1..] {
            if let Some((r, _)) = rate(qc, h) {
                lo = lo.min(r - sd);
                hi = hi.max(r + sd);
            }
        }
        Some((est, lo.clamp(0.0, 1.0), hi.clamp(0.0, 1.0)))
    }
}

/// The prefix hit rate of a saturated span's own requests, from v1's
/// rolling rate (see the module docs): `(estimate, low, high)`.
///
/// `lines[0]` is the span's first line, its rate `h0`; `counted` the tokens
/// each line counts; `history` the tokens counted from the engine's first
/// line up to `lines[0]`. With `S_k` the tokens counted since `lines[0]`
/// and `W` the window's tokens from before the span, a window that still
/// holds them reads `H_k = (h0 W + h S_k) / (W + S_k)`, i.e.
/// `(H_k - h0) W - h S_k = -H_k S_k`, linear in `(W, h)`: least squares
/// over the span's lines. `W = 0` (the window holds the span only) gives
/// `h = H_end`; `W = history` (no request has left the window yet) the
/// farthest `h`; the truth lies between, the fit is the estimate.
fn span_hit(lines: &[Line], counted: &[f64], history: f64) -> Option<(f64, f64, f64)> {
    let h0 = lines.first()?.hit?;
    let end = lines.last()?.hit?;
    let total: f64 = counted[1..].iter().sum();
    if total <= 0.0 {
        return Some((end, end, end));
    }
    let far = (end + (end - h0) * history / total).clamp(0.0, 1.0);
    // The bounds also take in the rates logged over the span's last third:
    // the span's own rate need not be constant.
    let (mut lo, mut hi) = if far < end { (far, end) } else { (end, far) };
    for l in &lines[lines.len() - lines.len().div_ceil(3)..] {
        if let Some(h) = l.hit {
            lo = lo.min(h);
            hi = hi.max(h);
        }
    }
    if (end - h0).abs() < 0.005 {
        return Some((end, lo, hi));
    }
    // Normal equations for (W, h).
    let (mut a11, mut a12, mut a22, mut b1, mut b2) = (0.0, 0.0, 0.0, 0.0, 0.0);
    // v1 counts a query when the request is scheduled and its prompt when
    // its prefill completes: at line k the window already holds the prompt
    // the next non-empty line will count.
    let mut s = 0.0;
    for (k, l) in lines.iter().enumerate().skip(1) {
        s += counted[k];
        let ahead = counted[k + 1..]
            .iter()
            .find(|c| **c > 0.0)
            .copied()
            .unwrap_or(0.0);
        let s = s + ahead;
        let hk = l.hit.unwrap_or(end);
        let (x1, x2, y) = (hk - h0, -s, -hk * s);
        a11 += x1 * x1;
        a12 += x1 * x2;
        a22 += x2 * x2;
        b1 += x1 * y;
        b2 += x2 * y;
    }
    let det = a11 * a22 - a12 * a12;
    let fit = if det.abs() > 1e-12 * a11 * a22 && det != 0.0 {
        let w = ((b1 * a22 - a12 * b2) / det).clamp(0.0, history.min(MAX_WINDOW_SHARE * total));
        // h given the clamped W.
        Some((end * (w + total) - h0 * w) / total)
    } else {
        None
    };
    let h = fit.unwrap_or(end).clamp(lo, hi);
    Some((h, lo, hi))
}

/// The point estimate assumes the span's requests fill at least this
/// share of... see [`span_hit`]: the window's tokens from before the span
/// are taken as at most this multiple of the span's own.
const MAX_WINDOW_SHARE: f64 = 1.0;

/// A small deterministic generator for the bootstrap (splitmix64).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The peak from saturated spans, with its 90 % interval (see the module
/// docs): `(estimate, [low, high], intervals)`.
pub(crate) fn from_spans(spans: &[Span]) -> Option<(f64, [f64; 2], u64)> {
    // Blocks with the span's hit correction applied.
    let blocks: Vec<(f64, f64)> = spans
        .iter()
        .flat_map(|s| s.blocks.iter().map(move |b| (b.0 * s.keep(), b.1)))
        .collect();
    let n = blocks.len();
    let tokens: f64 = blocks.iter().map(|b| b.0).sum();
    let secs: f64 = blocks.iter().map(|b| b.1).sum();
    if n == 0 || secs <= 0.0 || tokens <= 0.0 {
        return None;
    }
    let est = tokens / secs;
    // Sampling: a moving-block bootstrap. v1 lands a prompt in the one
    // interval its prefill completes, so a span's counts are lumps of
    // whole prompts, not independent per interval: each span's intervals
    // are resampled in runs of its largest interval's tokens over its mean
    // interval's (the intervals one large prompt's prefill covers), at
    // most half the span.
    let mut units: Vec<(f64, f64)> = Vec::new();
    for s in spans {
        let m = s.tokens() / s.intervals().max(1) as f64;
        let len = if m > 0.0 {
            ((s.max_interval_tokens / m).round() as usize).clamp(1, (s.intervals() / 2).max(1))
        } else {
            1
        };
        for c in s.blocks.chunks(len) {
            let (t, d) = c.iter().fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
            units.push((t * s.keep(), d));
        }
    }
    let u = units.len();
    let mut rng = SplitMix(n as u64 ^ tokens.to_bits());
    let mut reps = Vec::with_capacity(REPLICATES);
    for _ in 0..REPLICATES {
        let (mut t, mut d) = (0.0, 0.0);
        for _ in 0..u {
            let b = units[rng.below(u)];
            t += b.0;
            d += b.1;
        }
        if d > 0.0 {
            reps.push(t / d);
        }
    }
    reps.sort_by(f64::total_cmp);
    let lo_s = quantile_sorted(&reps, 0.05).unwrap_or(est).min(est);
    let hi_s = quantile_sorted(&reps, 0.95).unwrap_or(est).max(est);
    // With few blocks the bootstrap understates: scale its half-widths by
    // sqrt(u / (u - 1)) and a t-like factor.
    let small = 1.0 + 2.0 / (u as f64);
    let (mut lo, mut hi) = (est - (est - lo_s) * small, est + (hi_s - est) * small);
    // Relative error terms: the prompt straddling each end of a span (at
    // most its largest interval's tokens, half on average, each way; half
    // an interval of a completion-to-completion span), and the span's
    // computed share: the rolling hit rate's lag (v1, a bounded bias) or
    // the routed requests' alignment (one request either way).
    let (mut edge_sum, mut edge_sq) = (0.0, 0.0);
    let (mut lag_lo, mut lag_hi) = (0.0f64, 0.0f64);
    let (mut align_lo, mut align_hi) = (0.0f64, 0.0f64);
    for s in spans {
        let k = s.keep();
        let e = 0.5 * s.max_interval_tokens * k;
        if s.hit_from == HitFrom::None {
            edge_sum += e;
        } else {
            edge_sq += e * e;
        }
        if s.hit.is_some() {
            let w = s.tokens() * k / tokens;
            let rel = |h: f64| if k > 0.0 { (1.0 - h) / k - 1.0 } else { 0.0 };
            if s.routed() {
                align_lo += (w * rel(s.hit_hi)).powi(2);
                align_hi += (w * rel(s.hit_lo)).powi(2);
            } else {
                lag_lo += w * rel(s.hit_hi);
                lag_hi += w * rel(s.hit_lo);
            }
        }
    }
    // A v1 span's straddles are whole prompts, one at each end, of its own:
    // independent between spans, so their bounds add in quadrature across
    // spans; v0 spans (tokens as computed) and exact counts add in full.
    let edge = (edge_sum + edge_sq.sqrt()) / tokens;
    if n >= QUADRATURE_MIN_INTERVALS && spans.iter().all(Span::routed) {
        // Every span measured from its own routed requests, over enough
        // intervals: the terms are independent errors, added in quadrature
        // to the bootstrap's.
        let (bl, bh) = ((est - lo) / est, (hi - est) / est);
        lo = est * (1.0 - (bl * bl + edge * edge + align_lo).sqrt());
        hi = est * (1.0 + (bh * bh + edge * edge + align_hi).sqrt());
    } else {
        // Bounds on biases: added in full.
        lo *= (1.0 - edge) * (1.0 + lag_lo - align_lo.sqrt());
        hi *= (1.0 + edge) * (1.0 + lag_hi + align_hi.sqrt());
    }
    Some((est, [lo.max(0.0), hi], n as u64))
}

/// The peak from the engines' queue models: `(estimate, [low, high],
/// requests that waited)`. The bounds combine each engine's range (tokens
/// over the seconds at its low or high rate), widened by
/// [`QUEUE_RESOLUTION`].
fn from_queues(queues: &[Queue]) -> Option<(f64, [f64; 2], u64)> {
    let tokens: f64 = queues.iter().map(|q| q.tokens).sum();
    let secs: f64 = queues.iter().map(|q| q.secs).sum();
    if tokens <= 0.0 || secs <= 0.0 {
        return None;
    }
    let est = tokens / secs;
    let at = |f: fn(&Queue) -> f64| -> f64 {
        let s: f64 = queues
            .iter()
            .filter(|q| q.tokens > 0.0)
            .map(|q| q.tokens / f(q).max(1e-9))
            .sum();
        tokens / s
    };
    let lo = at(|q| q.lo).min(est) * (1.0 - QUEUE_RESOLUTION);
    let hi = at(|q| q.hi).max(est) * (1.0 + QUEUE_RESOLUTION);
    let waited: usize = queues.iter().map(|q| q.waited).sum();
    Some((est, [lo, hi], waited as u64))
}

/// Seconds from the start of a (non-leap) year to a stats line's month,
/// day and time, for lines whose year is unknown: the estimator only
/// needs the gaps between an engine's lines, which this keeps (a run
/// across New Year's Eve is cut there).
///
/// With the EPP's decisions (epoch time) the year is the one that puts the
/// lines nearest to them ([`year_start`]).
fn relative_time(s: &VllmStats) -> Option<f64> {
    const DAYS_BEFORE: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let m = usize::from(s.month);
    if !(1..=12).contains(&m) || s.day == 0 {
        return None;
    }
    let day = DAYS_BEFORE[m - 1] + u32::from(s.day) - 1;
    Some(f64::from(day) * 86_400.0 + f64::from(s.seconds_of_day))
}

/// `pod#engine`, the engine's number without leading zeros (`Engine 001`
/// is data-parallel rank 1, the endpoint `<pod>-rank-1`).
fn engine_key(pod: &str, engine: &str) -> String {
    match engine.parse::<u32>() {
        Ok(n) => format!("{pod}#{n}"),
        Err(_) => format!("{pod}#{engine}"),
    }
}

/// The engine key (`pod#rank`) of an endpoint (`namespace/name`, the name
/// a pod's or `<pod>-rank-<n>`).
fn endpoint_engine(endpoint: &str) -> String {
    let name = endpoint.rsplit('/').next().unwrap_or(endpoint);
    let (pod, rank) = match name.rfind("-rank-") {
        Some(i) if i + 6 < name.len() && name[i + 6..].bytes().all(|c| c.is_ascii_digit()) => {
            (&name[..i], &name[i + 6..])
        }
        _ => (name, "0"),
    };
    engine_key(pod, rank)
}

/// A hash of a request id (`0` when unknown): one request decided by
/// several filter instances counts once.
fn request_hash(request_id: Option<&str>) -> u64 {
    request_id.map_or(0, |r| {
        r.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        }) | 1
    })
}

/// Epoch seconds of the 1 January (UTC) of the year that puts a time of
/// year `rel` ([`relative_time`]) nearest to the epoch time `near`.
fn year_start(rel: f64, near: f64) -> f64 {
    let y = year_month_of(near).0;
    // The line may be in the year before or after the decisions'.
    [y - 1, y, y + 1]
        .into_iter()
        .map(|yy| epoch_of(yy, 1, 1, 0))
        .min_by(|a, b| {
            ((a + rel) - near)
                .abs()
                .total_cmp(&((b + rel) - near).abs())
        })
        .unwrap_or(0.0)
}

impl VllmEstimator {
    /// Adds one request the EPP sent to an endpoint (`namespace/name`, the
    /// name a pod's or `<pod>-rank-<n>`) at `ts` (epoch seconds), with its
    /// prompt tokens and the tokens of its prefix found in that endpoint's
    /// cache (a decision record's match for the endpoint it picked). These
    /// give saturated spans their own computed share (see the module docs).
    pub fn push_routed(
        &mut self,
        endpoint: &str,
        ts: f64,
        prompt_tokens: i64,
        matched_tokens: i64,
        request_id: Option<&str>,
    ) {
        self.routed_from(
            endpoint,
            ts,
            (prompt_tokens, matched_tokens),
            request_id,
            false,
        );
    }

    /// [`VllmEstimator::push_routed`], saying whether the match came from
    /// the prefix producers' lines.
    fn routed_from(
        &mut self,
        endpoint: &str,
        ts: f64,
        (prompt_tokens, matched_tokens): (i64, i64),
        request_id: Option<&str>,
        from_lines: bool,
    ) {
        if !ts.is_finite() || prompt_tokens <= 0 {
            return;
        }
        self.routed
            .entry(endpoint_engine(endpoint))
            .or_default()
            .push(Routed {
                ts,
                prompt: prompt_tokens as f64,
                matched: matched_tokens.clamp(0, prompt_tokens) as f64,
                request: request_hash(request_id),
                from_lines,
            });
    }

    /// Adds the request of a decision that names the endpoint it was sent
    /// to and that endpoint's prefix match (a decision record with
    /// `chosen_endpoint`, or a build logging every candidate's match; else
    /// the prefix producers' `-v=5` lines,
    /// [`crate::input::DecisionInput::picked_match`]): see
    /// [`VllmEstimator::push_routed`]. The prompt is the decision's prompt
    /// tokens, else the candidate's `total_blocks × block_size` (the
    /// producers' blocks and half a block). A
    /// decision that names its endpoint (the first a picker lists) without
    /// that endpoint's match still counts as a request routed there (see
    /// the module docs: the whole history); other decisions are ignored.
    pub fn push_decision(&mut self, d: &crate::input::DecisionInput) {
        let (Some(chosen), Some(ts)) = (d.chosen.as_deref(), d.ts) else {
            return;
        };
        // A picker may name fallbacks after the endpoint picked.
        let first = chosen.split(',').next().unwrap_or(chosen).trim();
        if ts.is_finite() && !first.is_empty() {
            self.arrivals
                .entry(endpoint_engine(first))
                .or_default()
                .push((ts, request_hash(d.request_id.as_deref())));
        }
        let exact = d.exact.as_ref().and_then(|e| {
            let c = e.iter().find(|c| c.id == chosen)?;
            let (Some(m), Some(bs)) = (c.match_blocks, c.block_size_tokens) else {
                return None;
            };
            let prompt = d
                .prompt_tokens
                .or_else(|| c.total_blocks.map(|t| t.saturating_mul(bs)))?;
            Some((prompt, m.saturating_mul(bs)))
        });
        // Else the producers' `-v=5` lines: the picked endpoint's match in
        // whole blocks, the prompt from its blocks when no line gives it.
        let logged = || {
            let p = d.picked_match?;
            Some((
                d.prompt_tokens.unwrap_or_else(|| p.prompt_tokens()),
                p.matched_tokens(),
            ))
        };
        let from_lines = exact.is_none();
        if let Some(tokens) = exact.or_else(logged) {
            self.routed_from(chosen, ts, tokens, d.request_id.as_deref(), from_lines);
        }
    }

    /// Adds one stats line.
    pub fn push(&mut self, s: &VllmStats) {
        let engine = engine_key(
            s.pod.as_deref().unwrap_or(&s.source.file),
            s.engine.as_deref().unwrap_or("0"),
        );
        let v1 = s.version == VllmStatsVersion::V1;
        self.engines
            .entry(s.deployment.clone())
            .or_default()
            .entry(engine)
            .or_default()
            .push(Line {
                ts: s.ts.or_else(|| relative_time(s)),
                rate: if s.prompt_throughput.is_finite() {
                    s.prompt_throughput.max(0.0)
                } else {
                    0.0
                },
                hit: if v1 {
                    Some(
                        s.prefix_cache_hit_rate_pct
                            .filter(|h| h.is_finite())
                            .unwrap_or(0.0)
                            .clamp(0.0, 100.0)
                            / 100.0,
                    )
                } else {
                    None
                },
                waiting: s.waiting.unwrap_or(0) > 0,
                queued: u32::try_from(s.waiting.unwrap_or(0)).unwrap_or(u32::MAX),
                v1,
                absolute: s.ts.is_some(),
            });
    }

    /// Stats lines kept.
    pub fn lines(&self) -> usize {
        self.engines
            .values()
            .flat_map(|e| e.values())
            .map(Vec::len)
            .sum()
    }

    /// Moves every engine's lines into `into`, as deployment `deployment`'s
    /// (an engine already there keeps its lines, these after them).
    pub fn move_into(self, into: &mut VllmEstimator, deployment: &str) {
        let to = into.engines.entry(deployment.to_string()).or_default();
        for engines in self.engines.into_values() {
            for (engine, lines) in engines {
                to.entry(engine).or_default().extend(lines);
            }
        }
        for (engine, routed) in self.routed {
            into.routed.entry(engine).or_default().extend(routed);
        }
        for (engine, arrivals) in self.arrivals {
            into.arrivals.entry(engine).or_default().extend(arrivals);
        }
    }

    /// The estimate of each deployment seen.
    pub fn estimates(&self) -> BTreeMap<String, PeakEstimate> {
        let mut out = BTreeMap::new();
        for (dep, engines) in &self.engines {
            let mut all = Vec::new();
            let mut n_engines = 0;
            let mut highest: f64 = 0.0;
            let mut rates = Vec::new();
            let mut queues: Vec<Queue> = Vec::new();
            let mut unqueued = 0usize;
            // Routed requests, and those whose match came from the lines.
            let (mut n_routed, mut n_from_lines) = (0usize, 0usize);
            for (key, lines) in engines {
                let mut lines = lines.clone();
                lines.sort_by(|a, b| {
                    a.ts.unwrap_or(f64::NAN)
                        .total_cmp(&b.ts.unwrap_or(f64::NAN))
                });
                for l in &lines {
                    highest = highest.max(l.rate * (1.0 - l.hit.unwrap_or(0.0)));
                }
                let mut routed = self.routed.get(key).cloned().unwrap_or_default();
                // Lines without a year take the year of the decisions.
                let near = routed.first().map(|r| r.ts).or_else(|| {
                    self.arrivals
                        .get(key)
                        .and_then(|a| a.iter().map(|x| x.0).reduce(f64::min))
                });
                if let Some(near) = near {
                    let start = lines
                        .iter()
                        .find(|l| !l.absolute)
                        .and_then(|l| l.ts)
                        .map(|rel| year_start(rel, near));
                    if let Some(start) = start {
                        for l in lines.iter_mut().filter(|l| !l.absolute) {
                            l.ts = l.ts.map(|rel| start + rel);
                            l.absolute = l.ts.is_some();
                        }
                    }
                }
                routed.sort_by(|a, b| a.request.cmp(&b.request).then(a.ts.total_cmp(&b.ts)));
                routed.dedup_by(|b, a| a.request != 0 && a.request == b.request);
                routed.sort_by(|a, b| a.ts.total_cmp(&b.ts));
                n_routed += routed.len();
                n_from_lines += routed.iter().filter(|r| r.from_lines).count();
                // Every request routed to the engine, once each.
                let mut arrivals = match self.arrivals.get(key) {
                    Some(a) if !a.is_empty() => a.clone(),
                    _ => routed.iter().map(|r| (r.ts, r.request)).collect(),
                };
                arrivals.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.total_cmp(&b.0)));
                arrivals.dedup_by(|b, a| a.1 != 0 && a.1 == b.1);
                let mut arrivals: Vec<f64> = arrivals.into_iter().map(|a| a.0).collect();
                arrivals.sort_by(f64::total_cmp);
                let sp = spans(&lines, &routed, &arrivals);
                if !routed.is_empty() {
                    let (cadence, counted) = counted_tokens(&lines);
                    match queue_model(&lines, &counted, cadence, &routed) {
                        Some(q) => queues.push(q),
                        None => unqueued += usize::from(!sp.is_empty()),
                    }
                } else {
                    unqueued += usize::from(!sp.is_empty());
                }
                if !sp.is_empty() {
                    n_engines += 1;
                }
                for s in &sp {
                    for b in &s.blocks {
                        if b.1 > 0.0 {
                            rates.push(b.0 * s.keep() / b.1);
                        }
                    }
                }
                all.extend(sp);
            }
            let intervals: u64 = all.iter().map(|s| s.intervals() as u64).sum();
            let how = hit_method(&all);
            let waited: usize = queues.iter().map(|q| q.waited).sum();
            let queued = unqueued == 0 && waited >= QUEUE_MIN_WAITED;
            let how = if queued {
                format!(
                    "v1: a first-come-first-served queue of {} engine(s) fitted to the decisions' arrivals and the lines' completed prompts; the uncached tokens of the {waited} request(s) that waited over their modelled prefill time",
                    queues.len()
                )
            } else {
                how
            };
            let uses_routed = queued || all.iter().any(Span::routed);
            let how = if uses_routed && n_from_lines > 0 {
                format!(
                    "{how}; of the {n_routed} routed request(s), {n_from_lines} matched from the prefix producers' -v=5 lines (whole blocks, the prompt to half a block)"
                )
            } else {
                how
            };
            let found = (intervals >= MIN_SATURATED_INTERVALS)
                .then(|| {
                    if queued {
                        from_queues(&queues)
                    } else {
                        from_spans(&all)
                    }
                })
                .flatten();
            let est = match found {
                Some((v, interval, _)) => {
                    rates.sort_by(f64::total_cmp);
                    PeakEstimate {
                        value: v,
                        source: PeakSource::VllmStats,
                        samples: intervals,
                        spread_low: quantile_sorted(&rates, 0.1),
                        spread_high: quantile_sorted(&rates, 0.9),
                        interval: Some(interval),
                        engines: n_engines,
                        method: format!(
                            "prompt tokens computed per second over {intervals} saturated interval(s) of {n_engines} engine(s) ({how}); 90 % interval from a bootstrap over intervals widened by the straddling prompts and the computed share's bounds"
                        ),
                    }
                }
                None => PeakEstimate {
                    value: highest,
                    source: PeakSource::VllmStatsUnsaturated,
                    samples: intervals,
                    spread_low: None,
                    spread_high: None,
                    interval: None,
                    engines: engines.len() as u64,
                    method: format!(
                        "never saturated (no run of {MIN_RUN} lines with requests waiting on any engine): the highest corrected per-interval rate, thin evidence"
                    ),
                },
            };
            out.insert(dep.clone(), est);
        }
        out
    }
}

/// Estimates from calibration output text: `PEAK_PREFILL_THROUGHPUT=<n>` /
/// `Measured peakPrefillThroughput = <n> tokens/sec` lines, else TTFT
/// samples (CSV with a header naming a prompt-tokens column and a TTFT
/// column, or JSON lines with such keys). `None` when the text holds none.
pub fn from_calibration_text(text: &str) -> Option<PeakEstimate> {
    let mut values = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let v = if let Some(rest) = l.strip_prefix("PEAK_PREFILL_THROUGHPUT=") {
            rest.trim().parse::<f64>().ok()
        } else if let Some(i) = l.find("Measured peakPrefillThroughput = ") {
            l[i + "Measured peakPrefillThroughput = ".len()..]
                .split_whitespace()
                .next()
                .and_then(|s| s.parse::<f64>().ok())
        } else {
            None
        };
        if let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) {
            values.push(v);
        }
    }
    if !values.is_empty() {
        values.sort_by(f64::total_cmp);
        let n = values.len() as u64;
        return Some(PeakEstimate {
            value: quantile_sorted(&values, 0.5).unwrap_or(values[0]),
            source: PeakSource::Calibration,
            samples: n,
            spread_low: values.first().copied(),
            spread_high: values.last().copied(),
            interval: None,
            engines: 0,
            method: "median of the calibration job's PEAK_PREFILL_THROUGHPUT values".into(),
        });
    }
    let samples = ttft_samples(text);
    fit_ttft(&samples)
}

/// `(prompt tokens, TTFT seconds)` pairs from CSV or JSON lines.
pub fn ttft_samples(text: &str) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let tok_keys = ["prompt_tokens", "tokens", "input_tokens", "prompt_len"];
    let ttft_keys = [("ttft_ms", 0.001), ("ttft_s", 1.0), ("ttft", 1.0)];
    let mut header: Option<(usize, usize, f64)> = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('{') {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let tok = tok_keys
                .iter()
                .find_map(|k| v.get(k).and_then(|x| x.as_f64()));
            let ttft = ttft_keys
                .iter()
                .find_map(|(k, m)| v.get(k).and_then(|x| x.as_f64()).map(|x| x * m));
            if let (Some(t), Some(s)) = (tok, ttft) {
                out.push((t, s));
            }
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        match header {
            None => {
                let ti = cells.iter().position(|c| tok_keys.contains(c));
                let si = cells.iter().enumerate().find_map(|(i, c)| {
                    ttft_keys.iter().find(|(k, _)| k == c).map(|(_, m)| (i, *m))
                });
                if let (Some(ti), Some((si, m))) = (ti, si) {
                    header = Some((ti, si, m));
                }
            }
            Some((ti, si, m)) => {
                let t = cells.get(ti).and_then(|c| c.parse::<f64>().ok());
                let s = cells.get(si).and_then(|c| c.parse::<f64>().ok());
                if let (Some(t), Some(s)) = (t, s) {
                    out.push((t, s * m));
                }
            }
        }
    }
    out.retain(|(t, s)| t.is_finite() && s.is_finite() && *t > 0.0 && *s > 0.0);
    out
}

/// Fits `TTFT = overhead + tokens / peak` (Theil–Sen), see the module docs.
pub fn fit_ttft(samples: &[(f64, f64)]) -> Option<PeakEstimate> {
    if samples.is_empty() {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, a) in samples.iter().enumerate() {
        for b in &samples[i + 1..] {
            if a.0 != b.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    let n = samples.len() as u64;
    if let Some(slope) = median(&mut slopes).filter(|s| *s > 0.0) {
        let lo = quantile_sorted(&slopes, 0.9).map(|s| 1.0 / s);
        let hi = quantile_sorted(&slopes, 0.1)
            .filter(|s| *s > 0.0)
            .map(|s| 1.0 / s);
        let mut intercepts: Vec<f64> = samples.iter().map(|(t, s)| s - slope * t).collect();
        let overhead = median(&mut intercepts).unwrap_or(0.0);
        return Some(PeakEstimate {
            value: 1.0 / slope,
            source: PeakSource::Calibration,
            samples: n,
            spread_low: lo,
            spread_high: hi,
            interval: None,
            engines: 0,
            method: format!(
                "Theil–Sen fit of TTFT = overhead + tokens / peak over {n} samples (overhead {:.0} ms)",
                overhead * 1000.0
            ),
        });
    }
    // One prompt size: the calibration job's rule.
    let mut ttfts: Vec<f64> = samples.iter().map(|s| s.1).collect();
    let m = median(&mut ttfts)?;
    let tokens = samples[0].0;
    Some(PeakEstimate {
        value: tokens / m,
        source: PeakSource::Calibration,
        samples: n,
        spread_low: ttfts.last().map(|t| tokens / t),
        spread_high: ttfts.first().map(|t| tokens / t),
        interval: None,
        engines: 0,
        method: format!(
            "{tokens:.0} tokens / median TTFT over {n} samples of one prompt size (includes the overhead: a lower bound)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_names_where_each_run_s_hit_rate_comes_from() {
        let span = |f: HitFrom| Span {
            hit_from: f,
            ..Span::default()
        };
        let m = |f: &[HitFrom]| hit_method(&f.iter().map(|f| span(*f)).collect::<Vec<_>>());
        assert!(m(&[HitFrom::None, HitFrom::None]).starts_with("v0: the prefill tokens"));
        assert!(m(&[HitFrom::Rolling]).ends_with("fitted to the rolling rate)"));
        let mixed = m(&[
            HitFrom::Own,
            HitFrom::Cumulative,
            HitFrom::Sliding,
            HitFrom::Sliding,
            HitFrom::Rolling,
        ]);
        assert!(
            mixed.starts_with("v1: of 5 run(s), 1 measured from completion to completion"),
            "{mixed}"
        );
        assert!(
            mixed.contains("; 1 × (1 − the run's prefix hit rate from the engine's cumulative one"),
            "{mixed}"
        );
        assert!(
            mixed.contains("; 2 × (1 − the run's prefix hit rate solved from vLLM's window"),
            "{mixed}"
        );
        assert!(
            mixed.ends_with("; 1 × (1 − the run's prefix hit rate fitted to the rolling rate)"),
            "{mixed}"
        );
        let odd = m(&[HitFrom::None, HitFrom::Missing]);
        assert_eq!(
            odd,
            "of 2 run(s), 1 as the lines count computed tokens (v0); 1 with their full prompts (no prefix hit rate known)"
        );
    }

    fn line(ts: f64, pod: &str, prompt: f64, waiting: u64, hit: f64) -> VllmStats {
        VllmStats {
            deployment: "d".into(),
            pod: Some(pod.into()),
            ts: Some(ts),
            version: VllmStatsVersion::V1,
            engine: Some("000".into()),
            prompt_throughput: prompt,
            waiting: Some(waiting),
            prefix_cache_hit_rate_pct: Some(hit),
            ..VllmStats::default()
        }
    }

    #[test]
    fn saturated_ratio_with_hit_rate_correction() {
        let mut e = VllmEstimator::default();
        // Saturated, lumpy: 0 then 20000 tok/s over 10 s intervals at 50 % hits
        // = 5000 tok/s computed on average.
        let mut t = 0.0;
        for i in 0..20 {
            let p = if i % 2 == 0 { 0.0 } else { 20000.0 };
            e.push(&line(t, "p-0", p, 3, 50.0));
            t += 10.0;
        }
        // Idle lines do not count.
        e.push(&line(t, "p-0", 100.0, 0, 0.0));
        let est = &e.estimates()["d"];
        assert_eq!(est.source, PeakSource::VllmStats);
        // The run's first line (0 tok/s) is left out: 10 lines of 20000 and
        // 9 of 0 at 50 % hits over 19 intervals.
        let want = 10.0 * 10000.0 / 19.0;
        assert!((est.value - want).abs() < 1.0, "{}", est.value);
        assert_eq!(est.samples, 19);
        assert_eq!(est.engines, 1);
    }

    #[test]
    fn lines_without_a_year_keep_their_gaps() {
        // Two saturated runs of 6 lines 10 minutes apart, the year unknown
        // (a vLLM log read alone): the gap ends the first run, so each run
        // loses its first line and the idle time is not counted.
        let mut e = VllmEstimator::default();
        for (start, n) in [(36_000u32, 6), (36_600, 6)] {
            for k in 0..n {
                let mut l = line(0.0, "p-0", 10_000.0, 2, 0.0);
                l.ts = None;
                l.month = 8;
                l.day = 21;
                l.seconds_of_day = start + 10 * k;
                e.push(&l);
            }
        }
        let est = &e.estimates()["d"];
        assert_eq!(est.source, PeakSource::VllmStats);
        assert_eq!(est.samples, 10);
        assert!((est.value - 10_000.0).abs() < 1e-6, "{}", est.value);
    }

    #[test]
    fn a_year_for_lines_without_one() {
        // 2026-08-21 14:00:00 UTC, and the same time of year.
        let t = 1_787_320_800.0;
        let rel = (232.0 * 24.0 + 14.0) * 3600.0;
        assert_eq!(year_start(rel, t) + rel, t);
        // A line of 31 December next to a decision of 1 January 2027.
        let jan = 1_798_761_600.0;
        let dec31 = 364.0 * 86_400.0 + 3600.0;
        assert_eq!(year_start(dec31, jan) + dec31, jan - 23.0 * 3600.0);
    }

    #[test]
    fn routed_requests_need_the_picked_endpoint_and_its_match() {
        use gatecal_filter::Candidate;
        let mut e = VllmEstimator::default();
        let mut d = crate::input::DecisionInput {
            ts: Some(100.0),
            request_id: Some("r1".into()),
            exact: Some(vec![
                Candidate::new("ns/p-0-rank-1").with_match(30, 40, 16),
                Candidate::new("ns/p-1").with_match(0, 40, 16),
            ]),
            ..crate::input::DecisionInput::default()
        };
        // No endpoint picked: nothing routed.
        e.push_decision(&d);
        assert!(e.routed.is_empty());
        d.chosen = Some("ns/p-0-rank-1".into());
        e.push_decision(&d);
        // The same request seen by a second filter instance.
        e.push_decision(&d);
        let r = &e.routed["p-0#1"];
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].prompt, r[0].matched), (640.0, 480.0));
        d.chosen = Some("ns/p-1".into());
        d.prompt_tokens = Some(650);
        e.push_decision(&d);
        assert_eq!(e.routed["p-1#0"][0].prompt, 650.0);
        // Every decision naming its endpoint is an arrival there, matched
        // or not; a picker's fallbacks are not.
        d.exact = None;
        d.chosen = Some("ns/p-2-rank-3,ns/p-1".into());
        e.push_decision(&d);
        assert_eq!(e.arrivals["p-0#1"].len(), 2);
        assert_eq!(e.arrivals["p-1#0"].len(), 1);
        assert_eq!(e.arrivals["p-2#3"].len(), 1);
        assert!(!e.routed.contains_key("p-2#3"));
    }

    /// A synthetic FIFO engine (rate `r`, overhead `o`) fed in bursts: in
    /// every 10 s interval a burst of 3–5 s of work, then three requests
    /// around the line, so most snapshots report a waiting request while
    /// the engine idles half of each interval.
    fn bursty_engine(e: &mut VllmEstimator, with_decisions: bool) -> f64 {
        let (r, o, prompt, uncached) = (20_000.0, 0.04, 10_000.0, 6_000.0);
        let t0 = 1_787_320_800.0;
        let mut arrivals = Vec::new();
        for cycle in 0..40 {
            let start = t0 + 10.0 * f64::from(cycle);
            for n in 0..8 + cycle % 7 {
                arrivals.push(start + 0.5 + 0.25 * f64::from(n));
            }
            let late = start + 9.7 + 0.07 * f64::from(cycle % 8);
            arrivals.extend([late, late + 0.05, late + 0.1]);
        }
        let mut f = f64::NEG_INFINITY;
        let mut jobs = Vec::new();
        for (n, &a) in arrivals.iter().enumerate() {
            let s = a.max(f);
            f = s + o + uncached / r;
            jobs.push((a, s, f));
            if with_decisions {
                e.push_routed(
                    "ns/p-0",
                    a,
                    prompt as i64,
                    (prompt - uncached) as i64,
                    Some(&format!("r{n}")),
                );
            }
        }
        // v1 lines every 10 s, printed at whole seconds 0.4 s before the
        // interval's end.
        let mut k = 1;
        loop {
            let end = t0 + 10.0 * f64::from(k) + 0.4;
            if end > f + 30.0 {
                break;
            }
            let done = jobs
                .iter()
                .filter(|j| j.2 > end - 10.0 && j.2 <= end)
                .count();
            let waiting = jobs.iter().filter(|j| j.0 <= end && j.1 > end).count();
            e.push(&line(
                (end - 0.4).floor(),
                "p-0",
                done as f64 * prompt / 10.0,
                waiting as u64,
                40.0,
            ));
            k += 1;
        }
        uncached / (o + uncached / r)
    }

    #[test]
    fn queue_model_counts_busy_time_only() {
        let mut alone = VllmEstimator::default();
        let truth = bursty_engine(&mut alone, false);
        let mut with = VllmEstimator::default();
        bursty_engine(&mut with, true);
        let a = &alone.estimates()["d"];
        let w = &with.estimates()["d"];
        assert_eq!(w.source, PeakSource::VllmStats);
        assert!(w.method.contains("first-come-first-served"), "{}", w.method);
        // The windows count the idle seconds inside saturated intervals.
        assert!(a.value < 0.6 * truth, "{} against {truth}", a.value);
        assert!(
            (w.value - truth).abs() < 0.1 * truth,
            "{} against {truth}",
            w.value
        );
        let [lo, hi] = w.interval.expect("interval");
        assert!(lo <= truth && truth <= hi, "[{lo}, {hi}] against {truth}");
        assert!(hi - lo < 0.3 * w.value, "[{lo}, {hi}]");
        // Decisions that do not match the lines (another client's requests
        // missing) fall back to the windows.
        let mut half = VllmEstimator::default();
        bursty_engine(&mut half, true);
        let routed = half.routed.get_mut("p-0#0").expect("routed");
        let kept: Vec<Routed> = routed.iter().step_by(2).copied().collect();
        *routed = kept;
        let h = &half.estimates()["d"];
        assert!(
            !h.method.contains("first-come-first-served"),
            "{}",
            h.method
        );
    }

    /// A decision routed at `ts` to engine `p-0` (no prefix match).
    fn routed_to_p0(ts: f64, n: impl std::fmt::Display) -> crate::input::DecisionInput {
        crate::input::DecisionInput {
            ts: Some(ts),
            request_id: Some(format!("r{n}")),
            chosen: Some("ns/p-0".into()),
            ..crate::input::DecisionInput::default()
        }
    }

    #[test]
    fn routing_makes_the_rolling_hit_rate_the_runs_own() {
        // An engine of 10,000-token prompts, one a line: 90 lines at 80 %
        // hits, then 30 saturated lines at 20 %. Fewer than 1000 requests,
        // so vLLM's rolling rate is the cumulative one and lags the run's.
        let t0 = 1_787_320_800.0;
        let (mut hits, mut queries) = (0.0, 0.0);
        let mut lines = Vec::new();
        for k in 1..=120 {
            let own = if k <= 90 { 0.8 } else { 0.2 };
            hits += own * 10_000.0;
            queries += 10_000.0;
            let waiting = if k <= 90 { 0 } else { 2 };
            let t = t0 + 10.0 * f64::from(k);
            lines.push(line(t, "p-0", 1000.0, waiting, 100.0 * hits / queries));
        }
        let mut alone = VllmEstimator::default();
        for l in &lines {
            alone.push(l);
        }
        let mut routed = alone.clone();
        for k in 0..122 {
            routed.push_decision(&routed_to_p0(t0 + 10.0 * f64::from(k) + 1.0, k));
        }
        let truth = 800.0;
        let a = &alone.estimates()["d"];
        let r = &routed.estimates()["d"];
        assert!((r.value - truth).abs() < 0.03 * truth, "{}", r.value);
        let [lo, hi] = r.interval.expect("interval");
        assert!(lo <= truth && truth <= hi, "[{lo}, {hi}]");
        assert!(
            (a.value - truth).abs() > 2.0 * (r.value - truth).abs(),
            "{} alone, {} routed",
            a.value,
            r.value
        );
        assert!(hi - lo < a.interval.map_or(f64::INFINITY, |i| i[1] - i[0]));
    }

    #[test]
    fn routing_solves_the_sliding_window() {
        // 20 prompts of 1000 tokens a line (10 s): 150 lines at 90 % hits,
        // then 30 saturated lines at 60 %. 3,600 requests: vLLM's window
        // (the last 1000 scheduled) slides, and at the run's end still
        // holds 400 requests from before it (rolling rate 72 %).
        let t0 = 1_787_320_800.0;
        let per = 20usize;
        let own = |r: usize| if r < 150 * per { 0.9 } else { 0.6 };
        let mut alone = VllmEstimator::default();
        for k in 1..=180usize {
            let waiting = if k <= 150 { 0 } else { 2 };
            let scheduled = k * per - waiting as usize;
            let from = scheduled.saturating_sub(HIT_RATE_WINDOW_REQUESTS);
            let rate: f64 = (from..scheduled).map(own).sum::<f64>() / (scheduled - from) as f64;
            let pct = (1000.0 * rate).round() / 10.0;
            let t = t0 + 10.0 * k as f64;
            alone.push(&line(t, "p-0", 2000.0, waiting, pct));
        }
        let mut routed = alone.clone();
        for r in 0..(182 * per) {
            let ts = t0 + 10.0 * (r / per) as f64 + 0.4 * (r % per) as f64 + 0.1;
            routed.push_decision(&routed_to_p0(ts, r));
        }
        let truth = 800.0;
        let a = &alone.estimates()["d"];
        let r = &routed.estimates()["d"];
        assert!((r.value - truth).abs() < 0.02 * truth, "{}", r.value);
        let [lo, hi] = r.interval.expect("interval");
        assert!(lo <= truth && truth <= hi, "[{lo}, {hi}]");
        let [alo, ahi] = a.interval.expect("interval");
        assert!(
            hi - lo < 0.5 * (ahi - alo),
            "routed [{lo}, {hi}], alone [{alo}, {ahi}]"
        );
    }

    #[test]
    fn never_saturated_is_thin_evidence() {
        let mut e = VllmEstimator::default();
        e.push(&line(0.0, "p", 800.0, 0, 0.0));
        e.push(&line(10.0, "p", 1200.0, 0, 0.0));
        let est = &e.estimates()["d"];
        assert_eq!(est.source, PeakSource::VllmStatsUnsaturated);
        assert_eq!(est.value, 1200.0);
    }

    #[test]
    fn calibration_lines_and_fits() {
        let e = from_calibration_text(
            "x\nPEAK_PREFILL_THROUGHPUT=15928\nMeasured peakPrefillThroughput = 16000 tokens/sec\n",
        )
        .unwrap();
        assert_eq!(e.samples, 2);
        assert_eq!(e.value, 15928.0);
        // TTFT = 0.05 s + tokens / 8000, with one outlier.
        let mut csv = String::from("prompt_tokens,ttft_ms\n");
        for (i, t) in [1024.0, 2048.0, 4096.0, 8192.0, 16384.0].iter().enumerate() {
            let ms = (0.05 + t / 8000.0) * 1000.0 + if i == 2 { 900.0 } else { 0.0 };
            csv.push_str(&format!("{t},{ms}\n"));
        }
        let f = from_calibration_text(&csv).unwrap();
        assert!((f.value - 8000.0).abs() / 8000.0 < 0.02, "{}", f.value);
        // One prompt size: tokens / median TTFT.
        let j = "{\"prompt_tokens\":8192,\"ttft_s\":0.5}\n{\"prompt_tokens\":8192,\"ttft_s\":0.52}\n{\"prompt_tokens\":8192,\"ttft_s\":0.55}\n";
        let g = from_calibration_text(j).unwrap();
        assert!((g.value - 8192.0 / 0.52).abs() < 1e-6);
        assert!(from_calibration_text("nothing here").is_none());
    }
}
