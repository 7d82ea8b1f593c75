//! An SVG histogram of the gate input, with the bar and the pinned-worse
//! lower edge marked and named in a legend (so that no label can overlap
//! another, even when the bar is at the pinned edge). It draws the bins of
//! the text histogram ([`crate::sections::display_bins`]); a log-scale
//! option keeps the tail readable. Self-contained (no fonts or scripts
//! fetched), so it can be attached to a pull request as is.

use std::fmt::Write as _;

use gatecal_analysis::HistogramBins;

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
    /// A note under the legend (e.g. that deployments' bars differ).
    pub note: Option<&'a str>,
    /// Bar heights on a log scale (`log10(1 + count)`), for the tail.
    pub log_scale: bool,
}

/// Any text in the SVG: well-formed XML text ([`crate::escape::xml`]).
fn esc(s: &str) -> String {
    crate::escape::xml(s).into_owned()
}

const BINS: &str = "#4c78a8";
const BAR: &str = "#c0392b";
const PINNED: &str = "#e68a00";

/// The legend under the title: bins, the bar, the pinned-worse edge (each
/// with its value), laid out left to right so that no two overlap.
fn legend(s: &mut String, h: &SvgHistogram<'_>, x0: f64) {
    let y = 42.0;
    // (colour, dashed line, or a box when None; text)
    let mut items: Vec<(&str, Option<bool>, String)> =
        vec![(BINS, None, "decisions per bin".to_string())];
    if let Some(bar) = h.bar_ms.filter(|b| *b > 0.0) {
        items.push((
            BAR,
            Some(false),
            format!("bar (maxTTFTPenaltyMs) {} ms", ms(Some(bar))),
        ));
    }
    if let Some(p) = h.pinned_min_ms {
        items.push((
            PINNED,
            Some(true),
            format!("pinned-worse edge {} ms", ms(Some(p))),
        ));
    }
    let mut x = x0;
    for (colour, line, text) in items {
        let _ = match line {
            None => writeln!(
                s,
                r#"<rect x="{x:.1}" y="{}" width="16" height="10" fill="{colour}"/>"#,
                y - 5.0
            ),
            Some(dashed) => writeln!(
                s,
                r#"<line x1="{x:.1}" y1="{y}" x2="{:.1}" y2="{y}" stroke="{colour}" stroke-width="2"{}/>"#,
                x + 16.0,
                if dashed {
                    r#" stroke-dasharray="5 4""#
                } else {
                    ""
                }
            ),
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}">{}</text>"#,
            x + 22.0,
            y + 4.0,
            esc(&text)
        );
        // About 6.5 px per character at 12 px sans-serif, then a gap.
        x += 22.0 + 6.5 * text.chars().count() as f64 + 18.0;
    }
}

/// Renders one histogram as an SVG document.
pub fn histogram_svg(h: &SvgHistogram<'_>) -> String {
    let (w, ht) = (760.0, 360.0);
    let b = &crate::sections::display_bins(h.bins);
    let outside = (b.below > 0 || b.above > 0).then(|| {
        format!(
            "outside the axis: {} below, {} above",
            count(b.below),
            count(b.above)
        )
    });
    let notes: Vec<String> = h
        .note
        .map(str::to_string)
        .into_iter()
        .chain(outside)
        .collect();
    // Title, legend, then one line per note above the plot.
    let mt = 62.0 + 15.0 * notes.len() as f64;
    let ht = ht + 15.0 * notes.len() as f64;
    let (ml, mr, mb) = (64.0, 20.0, 56.0);
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
            if h.n > 0 && h.n < gatecal_analysis::MIN_QUANTILE_SAMPLE {
                ", fewer than 20: indicative only"
            } else {
                ""
            }
        ))
    );
    legend(&mut s, h, ml);
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{ml}" y="{}" fill="#555">{}</text>"##,
            62.0 + 15.0 * i as f64,
            esc(n)
        );
    }
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
    let scale = |c: f64| {
        if h.log_scale {
            (1.0 + c).log10() / (1.0 + maxc).log10()
        } else {
            c / maxc
        }
    };
    let y = |c: f64| mt + ph - scale(c) * ph;
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
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{BINS}"><title>{} … {} ms: {}</title></rect>"##,
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
        r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        mt + ph / 2.0,
        if h.log_scale {
            "decisions (log scale)"
        } else {
            "decisions"
        }
    );
    if h.log_scale {
        // Powers of ten between 1 and the tallest bin.
        let mut p = 10.0;
        while p < maxc {
            let _ = writeln!(
                s,
                r##"<line x1="{0}" y1="{1:.1}" x2="{2}" y2="{1:.1}" stroke="#ddd"/><text x="{3}" y="{4:.1}" text-anchor="end">{5}</text>"##,
                ml,
                y(p),
                ml + pw,
                ml - 6.0,
                y(p) + 4.0,
                count(p as u64)
            );
            p *= 10.0;
        }
    }
    // The lines; their values are in the legend.
    let mut mark = |v: f64, colour: &str, dash: &str| {
        if v >= lo && v <= hi {
            let _ = writeln!(
                s,
                r#"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="{3}" stroke-width="2" {4}/>"#,
                x(v),
                mt,
                mt + ph,
                colour,
                dash,
            );
        }
    };
    if let Some(p) = h.pinned_min_ms {
        mark(p, PINNED, r#"stroke-dasharray="5 4""#);
    }
    if let Some(bar) = h.bar_ms.filter(|b| *b > 0.0) {
        mark(bar, BAR, "");
    }
    s.push_str("</svg>\n");
    s
}

/// The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least `x`.
pub(crate) fn tick_step(x: f64) -> f64 {
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
            note: None,
            log_scale: false,
        });
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<title>").count(),
            3,
            "one rect per non-empty bin"
        );
        assert!(svg.contains("bar (maxTTFTPenaltyMs) 18,000 ms"));
        assert!(svg.contains("pinned-worse edge 5,000 ms"));
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
            note: None,
            log_scale: false,
        });
        assert!(svg.contains("no gate input recorded"));
    }

    fn legend_texts(svg: &str) -> Vec<(f64, String)> {
        // (x, text) of the legend row's texts.
        svg.lines()
            .filter(|l| l.starts_with("<text x=") && l.contains(r#" y="46""#))
            .map(|l| {
                let x: f64 = l[9..].split('"').next().unwrap().parse().unwrap();
                let t = l.split('>').nth(1).unwrap().split('<').next().unwrap();
                (x, t.to_string())
            })
            .collect()
    }

    #[test]
    fn the_legend_names_both_lines_without_overlap_when_the_bar_is_at_the_edge() {
        let bins = HistogramBins {
            edges: (0..=40).map(|i| i as f64 * 500.0).collect(),
            counts: (0..40).map(|i| 1000 / (i + 1)).collect(),
            below: 0,
            above: 3,
        };
        let svg = histogram_svg(&SvgHistogram {
            title: "d",
            bins: &bins,
            bar_ms: Some(5000.0),
            pinned_min_ms: Some(5000.0),
            n: 5000,
            note: Some("bars differ between deployments"),
            log_scale: true,
        });
        let items = legend_texts(&svg);
        assert_eq!(items.len(), 3, "{svg}");
        for w in items.windows(2) {
            let (x0, t0) = &w[0];
            // Each text ends (6.5 px a character) before the next swatch.
            assert!(
                x0 + 6.5 * t0.chars().count() as f64 <= w[1].0 - 22.0,
                "{items:?}"
            );
        }
        assert!(items[1].1.contains("5,000") && items[2].1.contains("5,000"));
        // No text drawn at the lines themselves.
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert!(svg.contains("bars differ between deployments"));
        assert!(svg.contains("3 above"));
        assert!(svg.contains("decisions (log scale)"));
        // The bins of the text histogram: 40 merged down to 20.
        assert_eq!(svg.matches("<title>").count(), 20);
    }
}

/// The file name of each deployment's SVG beside `STEM.svg`:
/// `STEM-NAME.svg`, the name's characters other than ASCII letters,
/// digits, `-` and `_` made `_`. A name that this changes, or whose safe
/// form another name shares, also gets 8 hex digits of a hash of the whole
/// name (`STEM-___-1a2b3c4d.svg`), so names that differ only in other
/// characters (two non-ASCII names) never share a file; in the unlikely
/// case two still collide, a counter follows.
pub fn deployment_file_names(stem: &str, names: &[&str]) -> Vec<String> {
    let safe: Vec<String> = names
        .iter()
        .map(|n| {
            n.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .collect();
    // FNV-1a, 64 bits: stable across builds and platforms.
    let hash = |s: &str| {
        s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    let mut used = std::collections::HashSet::new();
    names
        .iter()
        .zip(&safe)
        .map(|(name, s)| {
            let shared = safe.iter().filter(|o| *o == s).count() > 1;
            let base = if *s == **name && !shared && !s.is_empty() {
                format!("{stem}-{s}")
            } else {
                format!("{stem}-{s}-{:08x}", hash(name) as u32)
            };
            let mut file = format!("{base}.svg");
            let mut i = 2;
            while !used.insert(file.to_ascii_lowercase()) {
                file = format!("{base}-{i}.svg");
                i += 1;
            }
            file
        })
        .collect()
}

#[cfg(test)]
mod file_name_tests {
    use super::deployment_file_names;

    #[test]
    fn names_are_safe_and_unique() {
        let f = deployment_file_names("r", &["glm-5-2", "日本", "中文", "a/b", "a_b", "A_B"]);
        assert_eq!(f[0], "r-glm-5-2.svg");
        assert!(
            f[1].starts_with("r-__-") && f[2].starts_with("r-__-"),
            "{f:?}"
        );
        let mut seen: Vec<String> = f.iter().map(|s| s.to_ascii_lowercase()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), f.len(), "{f:?}");
        assert!(
            f.iter().all(|n| n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))),
            "{f:?}"
        );
        // Stable: the same name gives the same file.
        assert_eq!(deployment_file_names("r", &["日本"])[0], f[1]);
    }
}
