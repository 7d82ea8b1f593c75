//! An SVG of recommend's predicted TTFT: one line per config row, the
//! predicted p50 (open circle) and p90 (dot) with the p90's 90 % interval
//! as a whisker, beside the observed p50 and p90 of the log as vertical
//! lines. The recommended row is named in bold. Self-contained, like the
//! histogram ([`crate::svg`]), so it can be attached to a pull request.

use std::fmt::Write as _;

use gatecal_analysis::DeploymentRec;

use crate::num::{count, ms};
use crate::svg::tick_step;

fn esc(s: &str) -> String {
    crate::escape::xml(s).into_owned()
}

const PREDICTED: &str = "#4c78a8";
const OBSERVED: &str = "#c0392b";
const MUTED: &str = "#777777";

/// At most `n` characters of `s`, with an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n - 1).collect();
        c.push('…');
        c
    }
}

/// Renders one deployment's predicted TTFT per config row as an SVG
/// document.
pub fn predicted_ttft_svg(d: &DeploymentRec) -> String {
    stacked_svg(std::slice::from_ref(d))
}

/// Renders several deployments' panels, one under the other, as one SVG
/// document.
pub fn stacked_svg(ds: &[DeploymentRec]) -> String {
    let w = 760.0;
    let mut body = String::new();
    let mut y = 0.0;
    for d in ds {
        let (panel, h) = panel(d);
        let _ = writeln!(body, r#"<g transform="translate(0,{y})">"#);
        body.push_str(&panel);
        body.push_str("</g>\n");
        y += h;
    }
    let ht = y.max(1.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{ht}" viewBox="0 0 {w} {ht}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{ht}" fill="white"/>"#);
    s.push_str(&body);
    s.push_str("</svg>\n");
    s
}

/// One deployment's panel and its height.
fn panel(d: &DeploymentRec) -> (String, f64) {
    let w = 760.0;
    let rows = &d.rows;
    let recommended = d.recommended.as_ref().map(|r| r.row.as_str());
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            let l = clip(&r.label, 34);
            if Some(r.label.as_str()) == recommended {
                format!("{l} (recommended)")
            } else {
                l
            }
        })
        .collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(8);
    let ml = (20.0 + 8.0 * longest as f64).clamp(90.0, 320.0);
    let (mt, mr, mb, step) = (78.0, 44.0, 52.0, 22.0);
    let ht = mt + step * rows.len().max(1) as f64 + mb;
    let pw = w - ml - mr;
    let o = &d.observed_ttft_ms;
    // The axis spans every drawn value: each row's p90 interval, p50, and
    // the observed quantiles.
    let top = rows
        .iter()
        .filter_map(|r| r.predicted_ttft_ms.as_ref())
        .flat_map(|p| [p.p50, p.p90, p.interval.p90[1]])
        .chain(o.p50)
        .chain(o.p90)
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let tick = tick_step(top.max(1.0) / 6.0);
    let xmax = (top / tick).ceil().max(1.0) * tick;
    let x = |v: f64| ml + pw * (v / xmax).clamp(0.0, 1.0);
    let n = rows
        .iter()
        .filter_map(|r| r.predicted_ttft_ms.as_ref().map(|p| p.n))
        .max()
        .unwrap_or(0);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<text x="16" y="22" font-size="15" font-weight="bold">{}</text>"#,
        esc(&format!(
            "Predicted TTFT per config: {} (n = {} requests replayed)",
            d.name,
            count(n as u64)
        ))
    );
    // Legend: what each mark is, with the observed values.
    let observed = match (o.p50, o.p90) {
        (Some(a), Some(b)) => format!(
            "observed p50 {} / p90 {} ms (n = {})",
            ms(Some(a)),
            ms(Some(b)),
            count(o.n)
        ),
        _ => format!("no observed TTFT ({})", o.source),
    };
    let _ = writeln!(
        s,
        r##"<circle cx="22" cy="42" r="4" fill="white" stroke="{PREDICTED}" stroke-width="2"/><text x="32" y="46">predicted p50</text>
<line x1="130" y1="42" x2="150" y2="42" stroke="{PREDICTED}" stroke-width="2"/><circle cx="140" cy="42" r="4" fill="{PREDICTED}"/><text x="158" y="46">predicted p90, 90 % interval</text>
<line x1="340" y1="42" x2="356" y2="42" stroke="{OBSERVED}" stroke-width="2" stroke-dasharray="5 4"/><text x="362" y="46">{}</text>"##,
        esc(&observed)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="64" fill="{MUTED}">observed p90 dashed, p50 dotted; rows without a prediction say why in the report</text>"#
    );
    // Grid and axis.
    let bottom = ht - mb;
    let mut t = 0.0;
    while t <= xmax + tick * 0.01 {
        let xt = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xt:.1}" y1="{mt}" x2="{xt:.1}" y2="{bottom}" stroke="#e5e5e5"/><text x="{xt:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            bottom + 16.0,
            esc(&ms(Some(t)))
        );
        t += tick;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time to first token (ms)</text>"#,
        ml + pw / 2.0,
        bottom + 36.0
    );
    for (v, dash) in [(o.p90, "5 4"), (o.p50, "2 3")] {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            let xv = x(v);
            let _ = writeln!(
                s,
                r#"<line x1="{xv:.1}" y1="{mt}" x2="{xv:.1}" y2="{bottom}" stroke="{OBSERVED}" stroke-width="1.5" stroke-dasharray="{dash}"/>"#
            );
        }
    }
    for (i, (r, label)) in rows.iter().zip(&labels).enumerate() {
        let y = mt + step * (i as f64 + 0.5);
        let bold = if Some(r.label.as_str()) == recommended {
            r#" font-weight="bold""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end"{bold}>{}</text>"#,
            ml - 8.0,
            y + 4.0,
            esc(label)
        );
        match &r.predicted_ttft_ms {
            Some(p) => {
                let [lo, hi] = p.interval.p90;
                let _ = writeln!(
                    s,
                    r#"<g><title>{}</title><line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{PREDICTED}" stroke-width="2"/><circle cx="{:.1}" cy="{y:.1}" r="4" fill="{PREDICTED}"/><circle cx="{:.1}" cy="{y:.1}" r="4" fill="white" stroke="{PREDICTED}" stroke-width="2"/></g>"#,
                    esc(&format!(
                        "{}: p50 {} ms, p90 {} ms [{}, {}], p99 {} ms",
                        r.label,
                        ms(Some(p.p50)),
                        ms(Some(p.p90)),
                        ms(Some(lo)),
                        ms(Some(hi)),
                        ms(Some(p.p99))
                    )),
                    x(lo),
                    x(hi),
                    x(p.p90),
                    x(p.p50),
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" fill="{MUTED}">no prediction</text>"#,
                    ml + 4.0,
                    y + 4.0
                );
            }
        }
    }
    (s, ht)
}
