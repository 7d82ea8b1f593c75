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
//!   [`types::HIT_RATE_WINDOW_REQUESTS`], vLLM's window holds every request since
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
//!   [`queue::QUEUE_RESOLUTION`] the 90 % interval. It is used for a deployment
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
//!   in quadrature, given at least [`types::QUADRATURE_MIN_INTERVALS`]
//!   intervals; otherwise (the rolling hit rate's range is a bound on a
//!   bias; a short saturation is known only at a few snapshots, between
//!   which the engine may have idled) every term is added in full.
//! * *Error.* Measured across seeds 1–4 of every scenario with saturated
//!   engines, checked on seeds 5–8 held out and, once at the end, on seeds
//!   9–12 (`cargo test --profile accuracy -p gatecal-recommend --test it
//!   peak_sweep -- --ignored --nocapture`, `PEAK_SWEEP_SEEDS`; tables in docs/methodology.md §6),
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

mod bootstrap;
mod calibration;
mod hit;
mod queue;
mod saturated;
mod sliding;
mod types;

pub(crate) use bootstrap::from_spans;
pub use calibration::from_calibration_lines;
use queue::QUEUE_MIN_WAITED;

use bootstrap::from_queues;
use queue::{Queue, queue_model};
use saturated::{counted_tokens, spans};

pub(crate) use types::Span;
pub use types::{PeakEstimate, PeakSource};

use types::{Line, MIN_RUN, MIN_SATURATED_INTERVALS, Routed, hit_method, quantile_sorted};

/// Accumulates vLLM stats lines, per deployment and engine.
///
/// A recommend partial report holds it as is: every stats line reduced to
/// the few numbers the saturated intervals, their hit rates and the
/// bootstrap are computed from, and the requests routed to each engine.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct VllmEstimator {
    engines: BTreeMap<String, BTreeMap<String, Vec<Line>>>,
    /// Requests routed to each engine, keyed `pod#rank`.
    routed: BTreeMap<String, Vec<Routed>>,
    /// Every request a decision sent to each engine, prefix match known or
    /// not: `(time, request id hash)`, keyed `pod#rank`.
    arrivals: BTreeMap<String, Vec<(f64, u64)>>,
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

    /// Adds another estimator's lines, routed requests and arrivals (a
    /// partial report's). [`VllmEstimator::canonical`] then orders them.
    pub fn absorb(&mut self, o: VllmEstimator) {
        for (dep, engines) in o.engines {
            let to = self.engines.entry(dep).or_default();
            for (engine, lines) in engines {
                to.entry(engine).or_default().extend(lines);
            }
        }
        for (engine, routed) in o.routed {
            self.routed.entry(engine).or_default().extend(routed);
        }
        for (engine, arrivals) in o.arrivals {
            self.arrivals.entry(engine).or_default().extend(arrivals);
        }
    }

    /// Puts every engine's lines, routed requests and arrivals in one
    /// order whatever the order they were added in, and counts an
    /// identical one once: a stats line or a request read by two shards
    /// (a warm-up, or vLLM logs given to every shard) is one line or one
    /// request, as in one run over the whole input.
    pub fn canonical(&mut self) {
        for lines in self.engines.values_mut().flat_map(|e| e.values_mut()) {
            lines.sort_by(Line::total_cmp);
            lines.dedup_by(|b, a| a.total_cmp(b).is_eq());
        }
        for routed in self.routed.values_mut() {
            routed.sort_by(Routed::total_cmp);
            routed.dedup_by(|b, a| a.total_cmp(b).is_eq());
        }
        for arrivals in self.arrivals.values_mut() {
            arrivals.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            arrivals.dedup_by(|b, a| a.0.total_cmp(&b.0).is_eq() && a.1 == b.1);
        }
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
        self.estimates_on(1)
    }

    /// [`VllmEstimator::estimates`], the engines shared out between up to
    /// `threads` threads (each engine's spans and queue are its own; a
    /// deployment's estimate combines them in engine order, the same on
    /// any number). By engine rather than by deployment: the engines'
    /// spans are nearly all of the work, and one deployment's few
    /// saturated engines can be most of it.
    pub fn estimates_on(&self, threads: usize) -> BTreeMap<String, PeakEstimate> {
        let engines: Vec<(&String, &Vec<Line>)> =
            self.engines.values().flat_map(|e| e.iter()).collect();
        let mut parts = crate::par::map(
            engines,
            threads,
            |(_, lines)| lines.len(),
            |(key, lines)| self.engine_part(key, lines),
        )
        .into_iter();
        self.engines
            .iter()
            .map(|(dep, engines)| {
                let mine: Vec<EnginePart> = parts.by_ref().take(engines.len()).collect();
                (dep.clone(), Self::combine(mine))
            })
            .collect()
    }

    /// One engine's share of its deployment's estimate: its saturated
    /// spans, its queue model, the counts.
    fn engine_part(&self, key: &str, lines: &[Line]) -> EnginePart {
        let mut lines = lines.to_vec();
        lines.sort_by(|a, b| {
            a.ts.unwrap_or(f64::NAN)
                .total_cmp(&b.ts.unwrap_or(f64::NAN))
        });
        let mut highest: f64 = 0.0;
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
        let n_routed = routed.len();
        let n_from_lines = routed.iter().filter(|r| r.from_lines).count();
        // Every request routed to the engine, once each.
        let mut arrivals = match self.arrivals.get(key) {
            Some(a) if !a.is_empty() => a.clone(),
            _ => routed.iter().map(|r| (r.ts, r.request)).collect(),
        };
        arrivals.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.total_cmp(&b.0)));
        arrivals.dedup_by(|b, a| a.1 != 0 && a.1 == b.1);
        let mut arrivals: Vec<f64> = arrivals.into_iter().map(|a| a.0).collect();
        arrivals.sort_by(f64::total_cmp);
        let spans = spans(&lines, &routed, &arrivals);
        let queue = if routed.is_empty() {
            None
        } else {
            let (cadence, counted) = counted_tokens(&lines);
            queue_model(&lines, &counted, cadence, &routed)
        };
        EnginePart {
            highest,
            n_routed,
            n_from_lines,
            spans,
            queue,
        }
    }

    /// A deployment's estimate from its engines' parts, in engine order.
    fn combine(parts: Vec<EnginePart>) -> PeakEstimate {
        let n = parts.len();
        let mut all = Vec::new();
        let mut n_engines = 0;
        let mut highest: f64 = 0.0;
        let mut rates = Vec::new();
        let mut queues: Vec<Queue> = Vec::new();
        let mut unqueued = 0usize;
        // Routed requests, and those whose match came from the lines.
        let (mut n_routed, mut n_from_lines) = (0usize, 0usize);
        for part in parts {
            highest = highest.max(part.highest);
            n_routed += part.n_routed;
            n_from_lines += part.n_from_lines;
            let sp = part.spans;
            match part.queue {
                Some(q) => queues.push(q),
                None => unqueued += usize::from(!sp.is_empty()),
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
        match found {
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
                    estimates: Vec::new(),
                }
            }
            None => PeakEstimate {
                value: highest,
                source: PeakSource::VllmStatsUnsaturated,
                samples: intervals,
                spread_low: None,
                spread_high: None,
                interval: None,
                engines: n as u64,
                method: format!(
                    "never saturated (no run of {MIN_RUN} lines with requests waiting on any engine): the highest corrected per-interval rate, thin evidence"
                ),
                estimates: Vec::new(),
            },
        }
    }
}

/// One engine's share of its deployment's peak estimate
/// ([`VllmEstimator::estimates_on`]).
struct EnginePart {
    /// The highest corrected per-line rate (the unsaturated fallback).
    highest: f64,
    /// Routed requests, and those whose match came from the lines.
    n_routed: usize,
    n_from_lines: usize,
    /// The saturated spans.
    spans: Vec<Span>,
    /// The queue model, when requests were routed here and it fits.
    queue: Option<Queue>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peak::throughput::types::HIT_RATE_WINDOW_REQUESTS;

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
            request_id: Some(format!("r{n}").into()),
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
    fn engines_shared_out_between_threads_give_the_estimates_of_one() {
        // Deployments of 1 to 4 engines, saturated or not, all in one
        // estimator: each thread takes whole engines, and every deployment
        // must get its own engines back, the estimate it has alone.
        let mut all = VllmEstimator::default();
        let mut alone = BTreeMap::new();
        for (d, pods) in [("a", 4), ("b", 1), ("c", 3), ("d", 2)] {
            let own = alone.entry(d).or_insert_with(VllmEstimator::default);
            for p in 0..pods {
                let mut t = 0.0;
                for i in 0..(12 + 7 * p) {
                    let waiting = u64::from(d == "b" || (d != "d" && (i + p) % 5 != 0));
                    let prompt = 1000.0 * (1 + i % 4 + p) as f64;
                    let mut l = line(t, &format!("{d}-{p}"), prompt, waiting, 10.0 * p as f64);
                    l.deployment = d.into();
                    all.push(&l);
                    own.push(&l);
                    t += 10.0;
                }
            }
        }
        let want: Vec<String> = alone
            .iter()
            .map(|(d, e)| format!("{:?}", e.estimates()[*d]))
            .collect();
        assert_eq!(
            want.iter()
                .filter(|w| w.contains("VllmStatsUnsaturated"))
                .count(),
            1
        );
        assert_eq!(
            want.iter()
                .filter(|w| w.contains("source: VllmStats,"))
                .count(),
            3
        );
        for threads in [1, 2, 3, 8] {
            let got: Vec<String> = all
                .estimates_on(threads)
                .values()
                .map(|e| format!("{e:?}"))
                .collect();
            assert_eq!(got, want, "{threads} threads");
        }
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
}
