//! The engine fit: each endpoint's prefill time regressed on the tokens
//! its steps computed, with the decode share of each step and the latency
//! a queued request does not pay again ([`fit_engine`]).

use super::Z90;
use super::replay::{EngineModel, step_tokens};
use super::workload::Workload;

/// Largest per-request overhead the fit accepts, seconds.
pub const MAX_OVERHEAD_S: f64 = 2.0;

/// Requests with an observed first token needed to fit the engine.
pub const MIN_FIT_REQUESTS: usize = 20;

/// The engine fitted to the observed first tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineFit {
    /// Uncached tokens prefilled per second (the slope).
    pub tokens_per_s: f64,
    /// Seconds per request beyond its tokens (the intercept).
    pub overhead_s: f64,
    /// Seconds a request that finds its endpoint idle takes beyond its
    /// service (the way to the engine and back), which a request queued
    /// behind another does not pay again: the replay's
    /// [`EngineModel::latency_s`]. 0 when the log cannot tell it (no
    /// request found its endpoint idle, or none queued).
    pub latency_s: f64,
    /// 90 % interval of `tokens_per_s`, from the standard error of the
    /// refitted slope (`None` with fewer than 3 points kept).
    pub tokens_per_s_interval: Option<[f64; 2]>,
    /// Seconds each request decodes on its endpoint after its first token,
    /// as the prefill steps' decode share shows it: the replay's
    /// [`EngineModel::decode_s`]. 0 when the fit is best without a decode
    /// share.
    pub decode_s: f64,
    /// The uncached tokens of the fitted requests over their prefill time
    /// (decode share and overhead left out): the rate the queue drains
    /// prompt tokens at, which the gate's `peakPrefillThroughput` stands
    /// for. Equal to `tokens_per_s` without a decode share.
    pub effective_tokens_per_s: f64,
    /// Requests it rests on.
    pub n: usize,
    /// Median absolute relative error of the fitted service times.
    pub median_error: f64,
}

impl EngineFit {
    /// The engine model of this fit: its speed, overhead and latency, the
    /// cache and block size of `base`.
    pub fn model(&self, base: &EngineModel) -> EngineModel {
        EngineModel {
            peak_tps: self.tokens_per_s,
            overhead_s: self.overhead_s,
            latency_s: self.latency_s,
            decode_s: self.decode_s,
            ..*base
        }
    }
}

/// Fits the engine's speed and per-request overhead to the observed first
/// tokens of `w` (a workload inferred from a log that shows them).
///
/// Each endpoint prefills first come, first served, so a request's prefill
/// starts when it arrives or when the request before it on the same
/// endpoint has its first token, whichever is later, and ends at its own
/// first token: its service time is `first − max(arrival, previous first)`,
/// measured for every request whose first token and whose predecessor's
/// are observed. The service times are regressed on the uncached tokens
/// and on whether the request found its endpoint idle
/// (`service = overhead + tokens / speed + latency · idle`) by least
/// squares, twice, the second time without the 10 % of requests the first
/// fit misses most (a request whose predecessor's first token is not
/// observed, or a preempted one, would pull the line). `latency` is the
/// time to the engine and back that a request queued behind another does
/// not pay again (its first token comes one service after its
/// predecessor's); folded into the overhead, it would be charged to every
/// request of a backlog, and the replay's first tokens would drift late by
/// that much per queued request. When the log has no idle or no queued
/// requests, or the term comes out negative, it is 0 and the fit is the
/// two-term one. `None` with fewer than
/// [`MIN_FIT_REQUESTS`] usable requests or a fit that makes no physical
/// sense (a speed that is not positive).
pub fn fit_engine(w: &Workload) -> Option<EngineFit> {
    fit_engine_with(w, true)
}

/// The decode durations [`fit_engine`] tries, seconds (0: no decode share).
fn decode_grid() -> impl Iterator<Item = f64> {
    std::iter::once(0.0).chain((0..=24).map(|k| 0.5 * 1.25f64.powi(k)))
}

/// How many of the sorted `f` are at most `bound`: the search goes on
/// from `last` (the previous bound and its count) when `bound` is not
/// below it, and `last` becomes this bound's.
pub(super) fn count_upto(f: &[f64], bound: f64, last: &mut (f64, usize)) -> usize {
    let (prev, from) = *last;
    let n = if bound >= prev && from <= f.len() {
        from + f[from..].iter().take_while(|&&x| x <= bound).count()
    } else {
        f.partition_point(|&x| x <= bound)
    };
    *last = (bound, n);
    n
}

/// [`fit_engine`], the decode duration fitted when `decodes` (a prefill
/// pool's endpoints decode nothing: `false` keeps it at 0).
pub fn fit_engine_with(w: &Workload, decodes: bool) -> Option<EngineFit> {
    let n_ep = w.endpoints.len();
    let mut prev_first: Vec<Option<f64>> = vec![None; n_ep];
    // (uncached tokens, service time, found its endpoint idle, endpoint,
    // service start).
    let mut raw: Vec<(f64, f64, bool, usize, f64)> = Vec::new();
    let mut seen_on: Vec<bool> = vec![false; n_ep];
    // Each endpoint's observed first tokens, sorted: the decodes there.
    let mut firsts: Vec<Vec<f64>> = vec![Vec::new(); n_ep];
    for (i, r) in w.requests.iter().enumerate() {
        let (Some(&e), Some(&first)) = (w.logged_endpoint.get(i), w.observed_first_s.get(i)) else {
            continue;
        };
        if let (Some(f), Some(list)) = (first, firsts.get_mut(e))
            && f.is_finite()
        {
            list.push(f);
        }
        if w.remote.get(i).copied().unwrap_or(false) {
            // Prefilled in the prefill pool: not this endpoint's work.
            continue;
        }
        let start = match (seen_on.get(e), prev_first.get(e)) {
            (Some(true), Some(Some(p))) => Some((r.arrival_s.max(*p), r.arrival_s >= *p)),
            (Some(false), _) => Some((r.arrival_s, true)),
            _ => None,
        };
        if let (Some((start, idle)), Some(first), Some(&u)) =
            (start, first, w.logged_uncached.get(i))
            && first > start
            && u.is_finite()
        {
            raw.push((u, first - start, idle, e, start));
        }
        if let Some(p) = prev_first.get_mut(e) {
            // FCFS: the next request's prefill starts after this one's.
            *p = match (*p, first) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (_, b) => b,
            };
        }
        if let Some(s) = seen_on.get_mut(e) {
            *s = true;
        }
    }
    if raw.len() < MIN_FIT_REQUESTS {
        return None;
    }
    for f in &mut firsts {
        f.sort_by(f64::total_cmp);
    }
    // Each point's first tokens observed on its endpoint by its start: the
    // upper end of its decode count, the same for every decode duration.
    let upto: Vec<usize> = raw
        .iter()
        .map(|&(_, _, _, e, start)| firsts[e].partition_point(|&x| x <= start))
        .collect();
    // The fit with each request decoding `decode` seconds after its first
    // token: the tokens of each point are those its steps computed
    // (`step_tokens`, with the requests decoding on its endpoint when it
    // started); the one whose trimmed fit leaves the least squared error.
    let mut best: Option<(f64, FitAt)> = None;
    let grid: Vec<f64> = if decodes {
        decode_grid().collect()
    } else {
        vec![0.0]
    };
    for decode in grid {
        // Per endpoint, the last bound searched and the count of its first
        // tokens up to it: an endpoint's starts come in order (each is the
        // later of an arrival and the previous first token), so the next
        // count goes on from there; a bound that goes back (or is NaN) is
        // searched from the start.
        let mut last: Vec<(f64, usize)> = vec![(f64::NEG_INFINITY, 0); n_ep];
        let pts: Vec<(f64, f64, bool)> = raw
            .iter()
            .zip(&upto)
            .map(|(&(u, svc, idle, e, start), &hi)| {
                let d = if decode > 0.0 {
                    let lo = count_upto(&firsts[e], start - decode, &mut last[e]);
                    (hi - lo) as f64
                } else {
                    0.0
                };
                let x = if d > 0.0 { step_tokens(u, d) } else { u };
                (x, svc, idle)
            })
            .collect();
        let Some(at) = fit_trimmed(&pts) else {
            if decode == 0.0 {
                // The uncached tokens alone give no fit (they do not vary,
                // or the slope is not positive): the decode counts must
                // not make one up.
                return None;
            }
            continue;
        };
        if best.as_ref().is_none_or(|(_, b)| at.ssr < b.ssr) {
            best = Some((decode, at));
        }
    }
    let (decode_s, at) = best?;
    let FitAt {
        slope,
        icpt,
        latency,
        keep,
        ssr,
        computed,
    } = at;
    let predicted =
        |&(x, _, idle): &(f64, f64, bool)| icpt + slope * x + if idle { latency } else { 0.0 };
    let mut errs: Vec<f64> = keep
        .iter()
        .map(|p| ((predicted(p) - icpt + icpt.max(0.0)) / p.1 - 1.0).abs())
        .collect();
    errs.sort_by(f64::total_cmp);
    // The slope's standard error: sqrt(SSR / (n − k) / Sxx), Sxx of the
    // tokens about their mean within each group (idle or queued) when the
    // latency term is fitted.
    let tokens_per_s_interval = (keep.len() >= 4).then(|| {
        let n = keep.len() as f64;
        let groups: &[bool] = if latency > 0.0 { &[true, false] } else { &[] };
        let sxx: f64 = if groups.is_empty() {
            let mx = keep.iter().map(|p| p.0).sum::<f64>() / n;
            keep.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum()
        } else {
            groups
                .iter()
                .map(|&g| {
                    let xs: Vec<f64> = keep.iter().filter(|p| p.2 == g).map(|p| p.0).collect();
                    let m = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
                    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>()
                })
                .sum()
        };
        let k = if groups.is_empty() { 2.0 } else { 3.0 };
        let se = (ssr / (n - k) / sxx).sqrt();
        let lo_slope = slope + Z90 * se;
        let hi_slope = (slope - Z90 * se).max(slope / 2.0);
        [1.0 / lo_slope, 1.0 / hi_slope]
    });
    let uncached: f64 = raw.iter().map(|p| p.0).sum();
    Some(EngineFit {
        tokens_per_s: 1.0 / slope,
        tokens_per_s_interval,
        overhead_s: icpt.clamp(0.0, MAX_OVERHEAD_S),
        latency_s: latency.clamp(0.0, MAX_OVERHEAD_S),
        decode_s,
        effective_tokens_per_s: if computed > 0.0 {
            uncached / computed / slope
        } else {
            1.0 / slope
        },
        n: raw.len(),
        median_error: errs[errs.len() / 2],
    })
}

/// One trimmed fit of [`fit_engine_with`].
struct FitAt {
    slope: f64,
    icpt: f64,
    latency: f64,
    /// The points kept (90 %).
    keep: Vec<(f64, f64, bool)>,
    /// Squared error over them.
    ssr: f64,
    /// Tokens computed by all the points (their uncached tokens and the
    /// decode tokens of their steps).
    computed: f64,
}

/// [`fit_service`] over `pts`, then again without the 10 % it misses most
/// (a request whose predecessor's first token is not observed, or a
/// preempted one, would pull the line); `None` without a positive slope.
fn fit_trimmed(pts: &[(f64, f64, bool)]) -> Option<FitAt> {
    let (slope, icpt, latency) = fit_service(pts)?;
    let predicted =
        |&(x, _, idle): &(f64, f64, bool)| icpt + slope * x + if idle { latency } else { 0.0 };
    // The points by their miss, the earlier first among equal misses (an
    // unstable sort of (miss, index) gives the stable order, faster). A
    // miss is an absolute value, its sign bit clear (NaN's too), so the
    // order of its bits as an integer is `f64::total_cmp`'s.
    let mut res: Vec<(u64, usize)> = pts
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.1 - predicted(p)).abs().to_bits(), i))
        .collect();
    res.sort_unstable();
    let keep: Vec<(f64, f64, bool)> = res[..res.len() - res.len() / 10]
        .iter()
        .map(|r| pts[r.1])
        .collect();
    let (slope, icpt, latency) = fit_service(&keep)?;
    if !(slope > 0.0 && slope.is_finite()) {
        return None;
    }
    let predicted =
        |&(x, _, idle): &(f64, f64, bool)| icpt + slope * x + if idle { latency } else { 0.0 };
    let ssr: f64 = keep.iter().map(|p| (p.1 - predicted(p)).powi(2)).sum();
    Some(FitAt {
        slope,
        icpt,
        latency,
        keep,
        ssr,
        computed: pts.iter().map(|p| p.0).sum(),
    })
}

/// Least squares of `service = icpt + slope · tokens + latency · idle`
/// over `(tokens, service, idle)`: `(slope, icpt, latency)`. Without both
/// idle and queued points, or with a negative latency, the two-term fit
/// with `latency = 0`. `None` when the tokens do not vary.
fn fit_service(pts: &[(f64, f64, bool)]) -> Option<(f64, f64, f64)> {
    let two = |pts: &[(f64, f64, bool)]| -> Option<(f64, f64, f64)> {
        let n = pts.len() as f64;
        let (sx, sy) = pts
            .iter()
            .fold((0.0, 0.0), |(a, b), &(x, y, _)| (a + x, b + y));
        let (mx, my) = (sx / n, sy / n);
        let (sxx, sxy) = pts.iter().fold((0.0, 0.0), |(a, b), &(x, y, _)| {
            (a + (x - mx) * (x - mx), b + (x - mx) * (y - my))
        });
        (sxx > 0.0).then(|| {
            let slope = sxy / sxx;
            (slope, my - slope * mx, 0.0)
        })
    };
    let idle = pts.iter().filter(|p| p.2).count();
    if idle < 2 || pts.len() - idle < 2 {
        return two(pts);
    }
    // Within each group the tokens are centred on the group's mean: the
    // slope is the pooled within-group slope, each group's intercept its
    // mean less the slope times its mean tokens.
    let mean = |g: bool| {
        let (n, sx, sy) = pts
            .iter()
            .filter(|p| p.2 == g)
            .fold((0.0, 0.0, 0.0), |(n, a, b), p| (n + 1.0, a + p.0, b + p.1));
        (sx / n, sy / n)
    };
    let (mi, mq) = (mean(true), mean(false));
    let (sxx, sxy) = pts.iter().fold((0.0, 0.0), |(a, b), p| {
        let (mx, my) = if p.2 { mi } else { mq };
        (a + (p.0 - mx) * (p.0 - mx), b + (p.0 - mx) * (p.1 - my))
    });
    if sxx <= 0.0 {
        return two(pts);
    }
    let slope = sxy / sxx;
    let icpt = mq.1 - slope * mq.0;
    let latency = (mi.1 - slope * mi.0) - icpt;
    if latency < 0.0 {
        return two(pts);
    }
    Some((slope, icpt, latency))
}
