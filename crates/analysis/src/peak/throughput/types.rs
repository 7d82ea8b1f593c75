//! The estimators' shared types: an estimate and where it comes from, a
//! stats line and a routed request as the estimators keep them, a
//! saturated span, where a span's hit rate comes from and the method
//! sentence naming it, and the constants and quantiles the estimators
//! share.

use serde::{Deserialize, Serialize};

/// Where an estimate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// `--known-peak`.
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// On the peak a report chose: every estimate found, best first (the
    /// chosen one among them); empty, and absent from JSON, on each of
    /// those.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<PeakEstimate>,
}

/// One stats line as the estimator keeps it (in a partial report, a
/// tuple: `[ts, rate, hit, queued, flags]`, flags bit 0 `waiting`, bit 1
/// `v1`, bit 2 `absolute`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "LineWire", from = "LineWire")]
pub(super) struct Line {
    pub(super) ts: Option<f64>,
    /// `Avg prompt throughput`, tokens/s.
    pub(super) rate: f64,
    /// `Prefix cache hit rate`, a fraction (v1).
    pub(super) hit: Option<f64>,
    pub(super) waiting: bool,
    /// Requests waiting at the line (`Waiting`/`Pending`).
    pub(super) queued: u32,
    pub(super) v1: bool,
    /// Whether `ts` is epoch time (the year known), comparable with the
    /// EPP's decisions.
    pub(super) absolute: bool,
}

/// [`Line`] as a partial report writes it.
#[derive(Serialize, Deserialize)]
pub(super) struct LineWire(Option<f64>, f64, Option<f64>, u32, u8);

impl From<Line> for LineWire {
    fn from(l: Line) -> Self {
        let flags = u8::from(l.waiting) | u8::from(l.v1) << 1 | u8::from(l.absolute) << 2;
        LineWire(l.ts, l.rate, l.hit, l.queued, flags)
    }
}

impl From<LineWire> for Line {
    fn from(w: LineWire) -> Self {
        Line {
            ts: w.0,
            rate: w.1,
            hit: w.2,
            waiting: w.4 & 1 != 0,
            queued: w.3,
            v1: w.4 & 2 != 0,
            absolute: w.4 & 4 != 0,
        }
    }
}

impl Line {
    /// A total order over every field, for a canonical order of lines
    /// read from several partial reports.
    pub(super) fn total_cmp(&self, o: &Line) -> std::cmp::Ordering {
        let opt = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (a, b) => a.is_some().cmp(&b.is_some()),
        };
        opt(self.ts, o.ts)
            .then(self.rate.total_cmp(&o.rate))
            .then(opt(self.hit, o.hit))
            .then(self.queued.cmp(&o.queued))
            .then(LineWire::from(*self).4.cmp(&LineWire::from(*o).4))
    }
}

/// One request the EPP sent to an engine: `(time, prompt tokens, tokens
/// of the prompt in the engine's prefix cache)`, from a decision that
/// names the endpoint it picked and that endpoint's prefix match.
///
/// In a partial report, a tuple `[ts, prompt, matched, request,
/// from_lines]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "RoutedWire", from = "RoutedWire")]
pub(super) struct Routed {
    pub(super) ts: f64,
    pub(super) prompt: f64,
    pub(super) matched: f64,
    /// A hash of the request id (`0` when unknown): one request decided by
    /// several filter instances counts once.
    pub(super) request: u64,
    /// Its match came from the prefix producers' `-v=5` lines (whole
    /// blocks, the prompt to half a block), not from an exact record.
    pub(super) from_lines: bool,
}

/// [`Routed`] as a partial report writes it.
#[derive(Serialize, Deserialize)]
pub(super) struct RoutedWire(f64, f64, f64, u64, bool);

impl From<Routed> for RoutedWire {
    fn from(r: Routed) -> Self {
        RoutedWire(r.ts, r.prompt, r.matched, r.request, r.from_lines)
    }
}

impl From<RoutedWire> for Routed {
    fn from(w: RoutedWire) -> Self {
        Routed {
            ts: w.0,
            prompt: w.1,
            matched: w.2,
            request: w.3,
            from_lines: w.4,
        }
    }
}

impl Routed {
    /// A total order over every field (see [`Line::total_cmp`]).
    pub(super) fn total_cmp(&self, o: &Routed) -> std::cmp::Ordering {
        self.ts
            .total_cmp(&o.ts)
            .then(self.request.cmp(&o.request))
            .then(self.prompt.total_cmp(&o.prompt))
            .then(self.matched.total_cmp(&o.matched))
            .then(self.from_lines.cmp(&o.from_lines))
    }
}

/// A stretch of saturated intervals of one engine, reduced to blocks of
/// [`BLOCK`] consecutive intervals: `(tokens counted, seconds)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Span {
    /// Full prompt tokens (v1) or computed tokens (v0) per block, and the
    /// block's seconds.
    pub(super) blocks: Vec<(f64, f64)>,
    /// The span's own prefix hit rate (v1; see `hit::span_hit`) and the
    /// bounds it lies within.
    pub(super) hit: Option<f64>,
    pub(super) hit_lo: f64,
    pub(super) hit_hi: f64,
    /// Largest tokens of one interval (a proxy of the largest prompt).
    pub(super) max_interval_tokens: f64,
    /// Where the span's hit rate comes from (the report's method names
    /// each): [`HitFrom::Own`] when it is the span's own requests' (from
    /// the EPP's routed requests, `hit::routed_hit`).
    pub(super) hit_from: HitFrom,
}

/// Where a v1 span's prefix hit rate comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum HitFrom {
    /// No correction (v0, or exact counts).
    #[default]
    None,
    /// The span's own requests, routed with their prefix match.
    Own,
    /// The engine's cumulative rate, while the EPP's routing says it had
    /// scheduled at most 1000 requests (`hit::whole_history_hit`).
    Cumulative,
    /// Solved from vLLM's sliding window with the EPP's routing
    /// (`sliding::Sliding`).
    Sliding,
    /// Fitted to the rolling rate from the lines alone (`hit::span_hit`).
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
    pub(super) fn routed(&self) -> bool {
        self.hit_from == HitFrom::Own
    }

    pub(super) fn tokens(&self) -> f64 {
        self.blocks.iter().map(|b| b.0).sum()
    }
    pub(super) fn intervals(&self) -> usize {
        self.blocks.len()
    }
    /// `1 - hit rate` applied to the span's counted tokens (1 for v0).
    pub(super) fn keep(&self) -> f64 {
        1.0 - self.hit.unwrap_or(0.0)
    }
}

/// The method of v1 spans' computed share, by where each span's hit rate
/// comes from ([`HitFrom`]).
pub(super) fn hit_method(spans: &[Span]) -> String {
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
pub(super) const REPLICATES: usize = 600;

pub(super) fn quantile_sorted(v: &[f64], q: f64) -> Option<f64> {
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
}
