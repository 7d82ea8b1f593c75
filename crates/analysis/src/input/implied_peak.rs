//! The peak prefill throughput a decision's logged gate line implies,
//! where the log does not state the peak in force.

use super::{DecisionInput, MatchedSource};

/// `queueThresholdTokens`: the token-load scorer's cap (upstream default).
pub const QUEUE_THRESHOLD_TOKENS: f64 = 4_194_304.0;

/// The peak a decision's logged gate line implies, `tokens / TTFT`: the
/// gate's TTFTs were computed from the in-flight tokens its exact
/// candidates carry. With both best TTFTs logged, each side gives the peak
/// and the two must agree within 0.5 %; with the penalty alone (decision
/// records), `(sticky − non-sticky tokens) / penalty`. Without exact
/// candidates, from the approximate producer's `-v=5` lines: every
/// candidate's `tokenLoad` less its uncached blocks is its in-flight
/// tokens plus one constant, so the two sides' difference over the two
/// logged TTFTs' is the peak. `None` otherwise.
pub(crate) fn implied_peak(d: &DecisionInput, threshold: f64) -> Option<f64> {
    let g = d.logged_gate?;
    let Some(c) = d.exact.as_ref() else {
        return implied_peak_from_scores(d, threshold);
    };
    let side = |sticky: bool| {
        c.iter()
            .filter(|c| c.total_blocks.is_some_and(|t| t > 0))
            .filter(|c| (c.prefix_score() >= threshold) == sticky)
            .filter_map(|c| c.in_flight_tokens)
            .min()
    };
    let (ks, kn) = (side(true)?, side(false)?);
    let ok = |ms: f64| ms.is_finite() && ms > 1e-6 && ms < 1e12;
    if let (Some(ts), Some(tn)) = (g.best_sticky_ttft_ms, g.best_non_sticky_ttft_ms) {
        if !ok(ts) || !ok(tn) || ks <= 0 || kn <= 0 {
            return None;
        }
        let (ps, pn) = (ks as f64 / ts * 1000.0, kn as f64 / tn * 1000.0);
        return ((ps - pn).abs() <= 0.005 * ps.max(pn) && ps.is_finite())
            .then_some((ps + pn) / 2.0);
    }
    let p = g.penalty_ms;
    if !ok(p) || ks <= kn {
        return None;
    }
    let peak = (ks - kn) as f64 / p * 1000.0;
    (peak.is_finite() && peak > 0.0).then_some(peak)
}

/// The peak a released decision's gate line implies at `-v=5` with the
/// approximate prefix producer, where no line logs the in-flight tokens:
/// every candidate survives a release and is scored, its `tokenLoad`
/// being its in-flight tokens plus the request's uncached blocks there,
/// and its prefix score its match over the prompt's `total # blocks`. So
/// `tokenLoad − (total − match) × block size` is each candidate's
/// in-flight tokens plus one constant shared by all (the prompt's tokens
/// past its whole blocks, `[0, block size)`): the side minima are the
/// gate's best sticky and non-sticky endpoints, their difference is exact,
/// and over the difference of the two logged TTFTs it gives the peak. The
/// constant it then implies must lie within `[0, block size]` (±1 token),
/// or nothing is inferred; so must every score be a whole number of blocks
/// over the total, and every load be under the scorer's cap.
fn implied_peak_from_scores(d: &DecisionInput, threshold: f64) -> Option<f64> {
    let g = d.logged_gate?;
    let (ts, tn) = (g.best_sticky_ttft_ms?, g.best_non_sticky_ttft_ms?);
    let pm = d
        .picked_match
        .filter(|p| p.source == MatchedSource::ApproximateProducer)?;
    let (t, bs) = (pm.total_blocks, pm.block_size);
    if t <= 0 || bs <= 0 || d.scored.len() < 2 {
        return None;
    }
    let cap = QUEUE_THRESHOLD_TOKENS - 0.5;
    // Least in-flight (plus the shared constant) of [non-sticky, sticky].
    let mut best: [Option<f64>; 2] = [None, None];
    for e in &d.scored {
        let (l, s) = (e.token_load?, e.prefix_score?);
        if !l.is_finite() || !(0.0..cap).contains(&l) || !(0.0..=1.0).contains(&s) {
            return None;
        }
        let m = s * t as f64;
        if (m - m.round()).abs() > 1e-6 {
            return None;
        }
        let x = l - (t - m.round() as i64) as f64 * bs as f64;
        let side = usize::from(s >= threshold);
        best[side] = Some(best[side].map_or(x, |b: f64| b.min(x)));
    }
    let (xs, xn) = (best[1]?, best[0]?);
    let ok = |ms: f64| ms.is_finite() && ms > 1e-6 && ms < 1e12;
    if !ok(ts) || !ok(tn) || ts <= tn || xs <= xn {
        return None;
    }
    let peak = (xs - xn) / (ts - tn) * 1000.0;
    let rest = xs - ts * peak / 1000.0;
    (peak.is_finite() && peak > 0.0 && (-1.0..=bs as f64 + 1.0).contains(&rest)).then_some(peak)
}
