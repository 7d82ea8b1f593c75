//! The before-and-after report (`gate-dist --compare`) in every format.
//!
//! Table and Markdown: a summary naming both sides and the tests, each
//! side's findings, a table of the deployments (where each was found, its
//! decisions and config on each side), then one table per deployment:
//! each share and quantile on the baseline and the candidate, the
//! difference (Δ = candidate − baseline), its 95 % interval, the test's
//! p-value and whether it is significant. JSON: the
//! [`CompareReport`] as it is (`gatecal.compare/v1`). CSV: one row per
//! deployment and figure (see [`write_csv`]).

use std::io::{self, Write};

use gatecal_analysis::compare::{
    CompareReport, DeploymentCompare, DeploymentSide, QuantileDelta, ShareDelta, Side,
};

use crate::Format;
use crate::markdown::RunInfo;
use crate::num::{count, group, ms, pct, utc};
use crate::sections::Section;
use crate::summary::SummaryLine;

/// Writes the comparison in `format`; tables fit `width` (`None`: full
/// width); the summary names `run`.
pub fn write(
    format: Format,
    report: &CompareReport,
    width: Option<u16>,
    run: &RunInfo,
    w: &mut dyn Write,
) -> io::Result<()> {
    let ctx = crate::RenderContext {
        width,
        run: run.clone(),
    };
    (format.spec().make)(ctx).compare(report, w)
}

/// The marker of a row whose test's approximation is poor.
pub const WEAK_MARK: &str = "†";

/// `+1.23 pp`: a difference of shares in percentage points.
fn pp(d: f64) -> String {
    let v = d * 100.0;
    if v.abs() < 1.0 && v != 0.0 {
        format!("{v:+.2} pp")
    } else {
        format!("{v:+.1} pp")
    }
}

/// `+1,234 ms`.
fn signed_ms(d: f64) -> String {
    let m = ms(Some(d));
    if d > 0.0 {
        format!("+{m} ms")
    } else {
        format!("{m} ms")
    }
}

/// A p-value: `p = 0.012`, `p < 0.001`.
fn p_value(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

fn yes_no(significant: bool, weak: bool) -> String {
    let s = if significant { "yes" } else { "no" };
    if weak {
        format!("{s} {WEAK_MARK}")
    } else {
        s.to_string()
    }
}

fn range(first: Option<f64>, last: Option<f64>) -> String {
    match (first, last) {
        (Some(a), Some(b)) => format!("{} to {} UTC", utc(a), utc(b)),
        _ => "no decision".into(),
    }
}

fn side_line(s: &Side) -> String {
    let mut v = format!(
        "{}: {} decisions, {}",
        s.label,
        count(s.decisions),
        range(s.first_ts, s.last_ts)
    );
    if s.lines_malformed > 0 {
        v.push_str(&format!(
            "; {} of {} lines malformed",
            count(s.lines_malformed),
            count(s.lines_total)
        ));
    }
    v
}

/// The summary's lines (the command line as code).
fn summary(r: &CompareReport, run: &RunInfo) -> Vec<SummaryLine> {
    let m = &r.method;
    let line = |label: &str, value: String| SummaryLine {
        label: label.to_string(),
        value,
        code: false,
    };
    let both = r
        .deployments
        .iter()
        .filter(|d| d.baseline.is_some() && d.candidate.is_some())
        .count();
    let mut out = vec![
        line("Baseline", side_line(&r.baseline)),
        line("Candidate", side_line(&r.candidate)),
        line(
            "Deployments",
            format!(
                "{} ({} on both sides)",
                count(r.deployments.len() as u64),
                count(both as u64)
            ),
        ),
        line(
            "Tests",
            format!(
                "shares: two-proportion z-test, significant when p < {}; quantiles: bootstrap 95 % interval of Δ (B = {}, seed {}), significant when it excludes 0",
                m.alpha,
                group(m.bootstrap_resamples as i64),
                m.bootstrap_seed
            ),
        ),
    ];
    if !run.version.is_empty() {
        out.push(line("gatecal", run.version.clone()));
    }
    if !run.command.is_empty() {
        out.push(SummaryLine {
            code: true,
            ..line("Command", run.command.clone())
        });
    }
    out
}

fn config_cell(s: &Option<DeploymentSide>) -> String {
    match s {
        Some(s) => format!(
            "bar {} ms, peak {} tok/s, {} ({})",
            group(s.max_ttft_penalty_ms.round() as i64),
            group(s.peak_prefill_throughput.round() as i64),
            s.penalty_mode.as_str(),
            s.config_source
        ),
        None => "–".into(),
    }
}

fn decisions_cell(s: &Option<DeploymentSide>) -> String {
    s.as_ref()
        .map(|s| count(s.decisions))
        .unwrap_or_else(|| "–".into())
}

fn share_cell(p: &Option<gatecal_analysis::compare::Proportion>) -> String {
    match p {
        Some(p) => match p.share {
            Some(s) => format!("{} ({})", count(p.count), pct(s)),
            None => format!("{} of 0", count(p.count)),
        },
        None => "–".into(),
    }
}

fn share_row(r: &ShareDelta) -> Vec<String> {
    vec![
        r.label.clone(),
        share_cell(&r.baseline),
        share_cell(&r.candidate),
        r.delta.map(pp).unwrap_or_else(|| "–".into()),
        r.interval
            .map(|[a, b]| format!("{} to {}", pp(a), pp(b)))
            .unwrap_or_else(|| "–".into()),
        r.p_value.map(p_value).unwrap_or_else(|| "–".into()),
        if r.delta.is_some() {
            yes_no(r.significant, r.small_counts)
        } else {
            "–".into()
        },
    ]
}

fn quantile_cell(q: &Option<gatecal_analysis::compare::QuantileSide>) -> String {
    match q {
        Some(q) => match q.value {
            Some(v) => format!("{} ms (n {})", ms(Some(v)), count(q.n)),
            None => "– (n 0)".into(),
        },
        None => "–".into(),
    }
}

fn quantile_row(r: &QuantileDelta) -> Vec<String> {
    vec![
        r.label.clone(),
        quantile_cell(&r.baseline),
        quantile_cell(&r.candidate),
        r.delta.map(signed_ms).unwrap_or_else(|| "–".into()),
        r.interval
            .map(|[a, b]| format!("{} to {}", signed_ms(a), signed_ms(b)))
            .unwrap_or_else(|| "–".into()),
        if r.interval.is_some() {
            "bootstrap".into()
        } else {
            "–".into()
        },
        if r.interval.is_some() {
            yes_no(r.significant, r.small_sample)
        } else {
            "–".into()
        },
    ]
}

/// The table of one deployment.
fn deployment_section(d: &DeploymentCompare) -> Section {
    let mut rows: Vec<Vec<String>> = d.shares.iter().map(share_row).collect();
    rows.extend(d.quantiles.iter().map(quantile_row));
    let mut notes = d.notes.clone();
    match d.presence {
        gatecal_analysis::compare::Presence::Both => {}
        p => notes.insert(
            0,
            format!(
                "found in the {} only: nothing to compare",
                p.as_str().trim_end_matches(" only")
            ),
        ),
    }
    if d.shares.iter().any(|s| s.delta.is_some() && s.small_counts) {
        notes.push(format!(
            "{WEAK_MARK} on a share: an expected count under the pooled share is under 5, the z-test's normal approximation is poor"
        ));
    }
    if d.quantiles
        .iter()
        .any(|q| q.interval.is_some() && q.small_sample)
    {
        notes.push(format!(
            "{WEAK_MARK} on a quantile: fewer than 5 values of a side lie beyond it, its bootstrap interval is unreliable"
        ));
    }
    Section {
        title: format!("Before and after, {}", d.name),
        headers: [
            "figure",
            "baseline",
            "candidate",
            "Δ",
            "95 % interval of Δ",
            "test",
            "significant",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes,
    }
}

/// Every table of the report, in order.
pub fn sections(r: &CompareReport) -> Vec<Section> {
    let mut out = Vec::new();
    for (which, s) in [("baseline", &r.baseline), ("candidate", &r.candidate)] {
        let mut f = crate::sections::findings_section(&s.findings);
        f.title = format!("Findings, {which}");
        out.push(f);
    }
    out.push(Section {
        title: "Deployments".into(),
        headers: [
            "deployment",
            "found",
            "baseline decisions",
            "candidate decisions",
            "baseline config",
            "candidate config",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .deployments
            .iter()
            .map(|d| {
                vec![
                    d.name.clone(),
                    d.presence.as_str().to_string(),
                    decisions_cell(&d.baseline),
                    decisions_cell(&d.candidate),
                    config_cell(&d.baseline),
                    config_cell(&d.candidate),
                ]
            })
            .collect(),
        notes: r.notes.clone(),
    });
    out.extend(r.deployments.iter().map(deployment_section));
    out
}

pub(crate) fn write_table(
    r: &CompareReport,
    width: Option<u16>,
    run: &RunInfo,
    w: &mut dyn Write,
) -> io::Result<()> {
    let lines = summary(r, run);
    let sections = sections(r);
    crate::table::write_summary(&lines, width, w)?;
    crate::table::write_sections(&sections, width, w)?;
    // The terms are looked for in the unwrapped text (a header split over
    // lines still names its term).
    let mut whole = Vec::new();
    crate::table::write_summary(&lines, None, &mut whole)?;
    crate::table::write_sections(&sections, None, &mut whole)?;
    crate::table::write_glossary(&String::from_utf8_lossy(&whole), width, w)
}

pub(crate) fn write_markdown(
    r: &CompareReport,
    run: &RunInfo,
    w: &mut dyn Write,
) -> io::Result<()> {
    let mut body = Vec::new();
    writeln!(body, "## gatecal gate-dist comparison\n")?;
    crate::markdown::write_summary(&summary(r, run), &mut body)?;
    crate::markdown::write_sections(&sections(r), &mut body)?;
    w.write_all(&body)?;
    crate::markdown::write_glossary(&String::from_utf8_lossy(&body), w)
}

/// The CSV's columns.
pub const CSV_COLUMNS: [&str; 18] = [
    "deployment",
    "presence",
    "figure",
    "kind",
    "label",
    "baseline",
    "baseline_count",
    "baseline_n",
    "candidate",
    "candidate_count",
    "candidate_n",
    "delta",
    "ci_low",
    "ci_high",
    "z",
    "p_value",
    "significant",
    "weak",
];

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// A p-value for CSV: plain decimals down to 0.0001, scientific notation
/// below (`1.2e-40`, not forty zeros), which every CSV reader parses.
fn p_csv(v: Option<f64>) -> String {
    match v {
        Some(p) if p != 0.0 && p.abs() < 1e-4 => format!("{p:.3e}"),
        _ => opt(v),
    }
}

/// CSV: one row per deployment and figure, the columns of
/// [`CSV_COLUMNS`]: `kind` is `share` (values are shares in [0, 1],
/// `*_count` the decisions counted of `*_n`, `delta` in share units, `z`
/// and `p_value` the z-test's) or `quantile` (values in ms, `*_count`
/// empty, `*_n` the values in the distribution, `ci_low`/`ci_high` the
/// bootstrap interval). `significant` is `true`/`false` (empty when
/// nothing was tested); `weak` is `true` when the test's approximation is
/// poor (small expected counts, or few values beyond the quantile).
pub fn write_csv(r: &CompareReport, w: &mut dyn Write) -> io::Result<()> {
    let f = crate::csv::field;
    writeln!(w, "{}", CSV_COLUMNS.join(","))?;
    for d in &r.deployments {
        let presence = match d.presence {
            gatecal_analysis::compare::Presence::Both => "both",
            gatecal_analysis::compare::Presence::BaselineOnly => "baseline_only",
            gatecal_analysis::compare::Presence::CandidateOnly => "candidate_only",
        };
        for s in &d.shares {
            let side = |p: &Option<gatecal_analysis::compare::Proportion>| match p {
                Some(p) => (opt(p.share), p.count.to_string(), p.n.to_string()),
                None => Default::default(),
            };
            let (a, ac, an) = side(&s.baseline);
            let (b, bc, bn) = side(&s.candidate);
            let tested = s.p_value.is_some();
            let row = [
                f(&d.name),
                presence.into(),
                f(&s.figure),
                "share".into(),
                f(&s.label),
                a,
                ac,
                an,
                b,
                bc,
                bn,
                opt(s.delta),
                opt(s.interval.map(|i| i[0])),
                opt(s.interval.map(|i| i[1])),
                opt(s.z),
                p_csv(s.p_value),
                if tested {
                    s.significant.to_string()
                } else {
                    String::new()
                },
                if tested {
                    s.small_counts.to_string()
                } else {
                    String::new()
                },
            ];
            writeln!(w, "{}", row.join(","))?;
        }
        for q in &d.quantiles {
            let side = |v: &Option<gatecal_analysis::compare::QuantileSide>| match v {
                Some(v) => (opt(v.value), v.n.to_string()),
                None => Default::default(),
            };
            let (a, an) = side(&q.baseline);
            let (b, bn) = side(&q.candidate);
            let tested = q.interval.is_some();
            let row = [
                f(&d.name),
                presence.into(),
                f(&q.figure),
                "quantile".into(),
                f(&q.label),
                a,
                String::new(),
                an,
                b,
                String::new(),
                bn,
                opt(q.delta),
                opt(q.interval.map(|i| i[0])),
                opt(q.interval.map(|i| i[1])),
                String::new(),
                String::new(),
                if tested {
                    q.significant.to_string()
                } else {
                    String::new()
                },
                if tested {
                    q.small_sample.to_string()
                } else {
                    String::new()
                },
            ];
            writeln!(w, "{}", row.join(","))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_read_with_sign_and_unit() {
        assert_eq!(pp(0.015), "+1.5 pp");
        assert_eq!(pp(-0.0042), "-0.42 pp");
        assert_eq!(pp(0.0), "+0.0 pp");
        assert_eq!(signed_ms(1234.4), "+1,234 ms");
        assert_eq!(signed_ms(-80.0), "-80 ms");
        assert_eq!(p_value(0.0004), "p < 0.001");
        assert_eq!(p_value(0.0312), "p = 0.031");
        assert_eq!(p_csv(Some(1.234_567e-40)), "1.235e-40");
        assert_eq!(p_csv(Some(0.0312)), "0.0312");
        assert_eq!(p_csv(Some(0.0)), "0");
        assert_eq!(p_csv(None), "");
        assert_eq!(yes_no(true, true), format!("yes {WEAK_MARK}"));
    }
}
