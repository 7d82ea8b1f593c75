//! An SVG histogram of the gate input, with the bar and the pinned-worse
//! lower edge marked. Self-contained (no fonts or scripts fetched), so it
//! can be attached to a pull request as is.

use std::fmt::Write as _;

use gatecal_analysis::gate_dist::HistogramBins;

use crate::num::{count, ms};

/// What to draw.
#[derive(Clone, Debug)]
pub struct SvgHistogram<'a> {
    /// Title, e.g. the deployment.
    pub title: &'a str,
    /// The bins.
    pub bins: &'a HistogramBins,
    /// The bar (ms), marked in red when inside the range.
    pub bar_ms: Option<f64>,
    /// The pinned-worse lower edge (ms), marked dashed.
    pub pinned_min_ms: Option<f64>,
    /// Decisions in the distribution, for the caption.
    pub n: u64,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders one histogram as an SVG document.
pub fn histogram_svg(h: &SvgHistogram<'_>) -> String {
    let (w, ht) = (760.0, 360.0);
    let (ml, mr, mt, mb) = (64.0, 20.0, 44.0, 56.0);
    let pw = w - ml - mr;
    let ph = ht - mt - mb;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{ht}" viewBox="0 0 {w} {ht}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{ht}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{ml}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        esc(&format!(
            "TTFT load gate input: {} (n = {}{})",
            h.title,
            count(h.n),
            if h.n > 0 && h.n < gatecal_analysis::stats::MIN_QUANTILE_SAMPLE {
                ", fewer than 20: indicative only"
            } else {
                ""
            }
        ))
    );
    let b = h.bins;
    if b.counts.is_empty() || b.edges.len() != b.counts.len() + 1 {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">no gate input recorded</text>"#,
            w / 2.0,
            ht / 2.0
        );
        s.push_str("</svg>\n");
        return s;
    }
    let lo = b.edges[0];
    let hi = b.edges[b.edges.len() - 1];
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let x = |v: f64| ml + (v - lo) / span * pw;
    let maxc = b.counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let y = |c: f64| mt + ph - c / maxc * ph;
    // Axes.
    let _ = writeln!(
        s,
        r##"<line x1="{ml}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
        mt + ph,
        ml + pw,
        mt + ph
    );
    let _ = writeln!(
        s,
        r##"<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{}" stroke="#333"/>"##,
        mt + ph
    );
    // Bars.
    for (i, &c) in b.counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let x0 = x(b.edges[i]);
        let x1 = x(b.edges[i + 1]);
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#4c78a8"><title>{} … {} ms: {}</title></rect>"##,
            x0 + 0.5,
            y(c as f64),
            (x1 - x0 - 1.0).max(0.5),
            mt + ph - y(c as f64),
            ms(Some(b.edges[i])),
            ms(Some(b.edges[i + 1])),
            count(c)
        );
    }
    // X ticks: round values, about six of them.
    let step = tick_step((hi - lo) / 6.0);
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#333"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"##,
            x(v),
            mt + ph,
            mt + ph + 5.0,
            mt + ph + 18.0,
            esc(&ms(Some(v)))
        );
        v += step;
    }
    // Y ticks: 0 and max.
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="end">{}</text><text x="{}" y="{}" text-anchor="end">0</text>"#,
        ml - 6.0,
        mt + 4.0,
        count(maxc as u64),
        ml - 6.0,
        mt + ph
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">bestStickyTTFT − bestNonStickyTTFT (ms)</text>"#,
        ml + pw / 2.0,
        ht - 14.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">decisions</text>"#,
        mt + ph / 2.0
    );
    let mut mark = |v: f64, colour: &str, dash: &str, label: &str| {
        if v >= lo && v <= hi {
            // Labels near the right edge go on the line's left.
            let (lx, anchor) = if x(v) > ml + 0.8 * pw {
                (x(v) - 4.0, "end")
            } else {
                (x(v) + 4.0, "start")
            };
            let _ = writeln!(
                s,
                r#"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="{3}" stroke-width="2" {4}/><text x="{5:.1}" y="{6}" fill="{3}" text-anchor="{8}">{7}</text>"#,
                x(v),
                mt,
                mt + ph,
                colour,
                dash,
                lx,
                mt + 12.0,
                esc(label),
                anchor
            );
        }
    };
    if let Some(p) = h.pinned_min_ms {
        mark(
            p,
            "#e68a00",
            r#"stroke-dasharray="5 4""#,
            &format!("{} ms", ms(Some(p))),
        );
    }
    if let Some(bar) = h.bar_ms.filter(|b| *b > 0.0) {
        mark(bar, "#c0392b", "", &format!("bar {} ms", ms(Some(bar))));
    }
    if b.below > 0 || b.above > 0 {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#666">outside the axis: {} below, {} above</text>"##,
            ml + pw,
            mt - 6.0,
            count(b.below),
            count(b.above)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least `x`.
fn tick_step(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|v| *v >= x)
        .unwrap_or(10.0 * p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_bars_and_the_bar_line() {
        let bins = HistogramBins {
            edges: vec![0.0, 5000.0, 10000.0, 15000.0, 20000.0],
            counts: vec![10, 3, 0, 1],
            below: 2,
            above: 0,
        };
        let svg = histogram_svg(&SvgHistogram {
            title: "glm<5>",
            bins: &bins,
            bar_ms: Some(18000.0),
            pinned_min_ms: Some(5000.0),
            n: 16,
        });
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<rect x=").count(),
            3,
            "one rect per non-empty bin"
        );
        assert!(svg.contains("bar 18,000 ms"));
        assert!(svg.contains("glm&lt;5&gt;"));
        assert!(svg.contains("2 below"));
    }

    #[test]
    fn empty_histogram_says_so() {
        let svg = histogram_svg(&SvgHistogram {
            title: "x",
            bins: &HistogramBins::default(),
            bar_ms: None,
            pinned_min_ms: None,
            n: 0,
        });
        assert!(svg.contains("no gate input recorded"));
    }
}
