//! The saturated spans of one engine's lines: the tokens each line counts,
//! the runs of saturated lines, and each v1 run's prefix hit rate.

use super::hit::{Share, own_window, routed_hit, span_hit, whole_history_hit};
use super::sliding::Sliding;
use super::types::{BLOCK, HitFrom, Line, MIN_RUN, Routed, Span, median};

/// The cadence of one engine's lines (sorted by time) and the tokens each
/// line counts.
pub(super) fn counted_tokens(lines: &[Line]) -> (f64, Vec<f64>) {
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
pub(super) fn spans(lines: &[Line], routed: &[Routed], arrivals: &[f64]) -> Vec<Span> {
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
