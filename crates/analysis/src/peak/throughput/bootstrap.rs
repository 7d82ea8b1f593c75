//! The peak and its 90 % interval from the saturated spans (a block
//! bootstrap) and from the engines' queue models.

use super::queue::{QUEUE_RESOLUTION, Queue};
use super::types::{HitFrom, QUADRATURE_MIN_INTERVALS, REPLICATES, Span, quantile_sorted};

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
    // Seeded by the inputs (the blocks and their tokens as the lines
    // count them, before the hit-rate correction), not by the computed
    // tokens: a solved hit rate that moves in its last bits (the
    // iterations' tolerance) leaves the replicates drawn the same.
    let counted: f64 = spans
        .iter()
        .flat_map(|s| s.blocks.iter().map(|b| b.0))
        .sum();
    let mut rng = crate::rng::SplitMix(n as u64 ^ counted.to_bits());
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
pub(super) fn from_queues(queues: &[Queue]) -> Option<(f64, [f64; 2], u64)> {
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
