//! A saturated run's own prefix hit rate: measured from completion to
//! completion with the EPP's routed requests, from the engine's cumulative
//! rate, or fitted to the rolling rate from the lines alone.

use super::types::{HIT_RATE_WINDOW_REQUESTS, Line, Routed};

/// A span's computed share with its bounds: `(estimate, low, high)`.
pub(super) type Share = (f64, f64, f64);

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
pub(super) fn own_window(
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
pub(super) fn routed_hit(
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
pub(super) fn whole_history_hit(
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
pub(super) fn span_hit(lines: &[Line], counted: &[f64], history: f64) -> Option<(f64, f64, f64)> {
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
