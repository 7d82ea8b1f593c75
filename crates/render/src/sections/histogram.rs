//! The gate-input histogram as drawn: the bins merged for display (text
//! and SVG alike) and the compact text histogram.

use gatecal_analysis::HistogramBins;

use super::s;
use crate::num::{count, ms, pct};

/// Most bins a histogram is drawn with (text and SVG alike).
pub const DISPLAY_BINS: usize = 20;

/// The bins as drawn, in text and SVG alike: neighbours merged down to at
/// most [`DISPLAY_BINS`].
pub fn display_bins(h: &HistogramBins) -> HistogramBins {
    if h.counts.is_empty() || h.edges.len() != h.counts.len() + 1 {
        return h.clone();
    }
    let group = h.counts.len().div_ceil(DISPLAY_BINS).max(1);
    let counts: Vec<u64> = h.counts.chunks(group).map(|c| c.iter().sum()).collect();
    let edges: Vec<f64> = (0..=counts.len())
        .map(|i| h.edges[(i * group).min(h.edges.len() - 1)])
        .collect();
    HistogramBins {
        edges,
        counts,
        below: h.below,
        above: h.above,
    }
}

/// A compact text histogram: one line per group of bins, `█` bars scaled
/// to `width`, the bin holding the bar marked with `◀ bar`.
pub fn text_histogram(h: &HistogramBins, bar_ms: Option<f64>, width: usize) -> Vec<String> {
    if h.counts.is_empty() {
        return vec!["(no gate input recorded)".into()];
    }
    let m = display_bins(h);
    let mut lines = Vec::new();
    let merged: Vec<(f64, f64, u64)> = m
        .counts
        .iter()
        .enumerate()
        .map(|(i, &c)| (m.edges[i], m.edges[i + 1], c))
        .collect();
    let max = merged.iter().map(|m| m.2).max().unwrap_or(0).max(1);
    let total: u64 = merged.iter().map(|m| m.2).sum::<u64>() + h.below + h.above;
    if h.below > 0 {
        lines.push(format!("{:>22}  {}", "below", count(h.below)));
    }
    for (lo, hi, c) in merged {
        let n = ((c as f64 / max as f64) * width as f64).round() as usize;
        let n = if c > 0 { n.max(1) } else { 0 };
        let mark = match bar_ms {
            Some(b) if b > 0.0 && b >= lo && b < hi => "  ◀ bar",
            _ => "",
        };
        lines.push(format!(
            "{:>10} … {:>9}  {:<w$} {}{}",
            ms(Some(lo)),
            ms(Some(hi)),
            "█".repeat(n),
            if total > 0 {
                pct(c as f64 / total as f64)
            } else {
                s("")
            },
            mark,
            w = width
        ));
    }
    if h.above > 0 {
        lines.push(format!("{:>22}  {}", "above", count(h.above)));
    }
    lines
}
