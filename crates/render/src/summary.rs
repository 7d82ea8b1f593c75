//! The summary that opens every table and Markdown report of both
//! binaries: deployments, time range, decisions, released and pinned
//! shares, config sources, the gatecal version and the command line.
//! Values are plain text; each renderer escapes them for its format.

use gatecal_analysis::{GateDistReport, RecommendReport};

use crate::markdown::RunInfo;
use crate::num::{count, count_pct, pct, utc};

/// One line of the summary: its label, its value, and whether the value is
/// code (a config source, a command line) to set in backticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryLine {
    /// The label (`Deployments`).
    pub label: String,
    /// The value, plain text.
    pub value: String,
    /// Whether the value is code.
    pub code: bool,
}

fn line(label: impl Into<String>, value: impl Into<String>) -> SummaryLine {
    SummaryLine {
        label: label.into(),
        value: value.into(),
        code: false,
    }
}

fn code(label: impl Into<String>, value: impl Into<String>) -> SummaryLine {
    SummaryLine {
        code: true,
        ..line(label, value)
    }
}

/// `2026-08-21T14:00:00Z`.
pub(crate) fn rfc3339(ts: f64) -> String {
    format!("{}Z", utc(ts).replacen(' ', "T", 1))
}

/// Most deployment names listed (the rest are counted).
const NAMES_SHOWN: usize = 6;

fn deployments<'a>(names: impl Iterator<Item = &'a str>) -> SummaryLine {
    let names: Vec<&str> = names.collect();
    let shown = if names.len() > NAMES_SHOWN {
        format!(
            "{} and {} more",
            names[..NAMES_SHOWN].join(", "),
            names.len() - NAMES_SHOWN
        )
    } else {
        names.join(", ")
    };
    line(
        "Deployments",
        format!("{} ({shown})", count(names.len() as u64)),
    )
}

/// The config sources: one when every deployment shares it, else one per
/// deployment (`glm: file:epp.yaml; other: default`).
fn config<'a>(sources: impl Iterator<Item = (&'a str, &'a str)>) -> SummaryLine {
    let all: Vec<(&str, &str)> = sources.collect();
    let mut distinct: Vec<&str> = all.iter().map(|(_, s)| *s).collect();
    distinct.sort_unstable();
    distinct.dedup();
    match distinct.as_slice() {
        [] => line("Config", "–"),
        [one] => code("Config", *one),
        _ => line(
            "Config",
            all.iter()
                .map(|(n, s)| format!("{n}: {s}"))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

fn run_lines(run: &RunInfo, out: &mut Vec<SummaryLine>) {
    if !run.version.is_empty() {
        out.push(line("gatecal", run.version.clone()));
    }
    if !run.command.is_empty() {
        out.push(code("Command", run.command.clone()));
    }
}

fn range(first: Option<f64>, last: Option<f64>) -> Option<SummaryLine> {
    match (first, last) {
        (Some(a), Some(b)) => Some(line(
            "Time range (UTC)",
            format!("{} – {}", rfc3339(a), rfc3339(b)),
        )),
        _ => None,
    }
}

/// The summary of a gate-dist report.
pub fn gate_dist_summary(r: &GateDistReport, run: &RunInfo) -> Vec<SummaryLine> {
    let mut out = vec![deployments(r.deployments.iter().map(|d| d.name.as_str()))];
    let (first, last) = r.time_range();
    out.extend(range(first, last));
    let o = &r.overall.stats;
    out.push(line("Decisions", count(o.decisions)));
    out.push(line("Released", count_pct(o.released, o.released_share)));
    out.push(line(
        format!(
            "Pinned, gate input in [{} ms, bar]",
            crate::num::group(r.options.pinned_worse_min_ms as i64)
        ),
        count_pct(o.pinned_worse.count, o.pinned_worse.share),
    ));
    out.push(config(
        r.deployments
            .iter()
            .map(|d| (d.name.as_str(), d.config.source.as_str())),
    ));
    run_lines(run, &mut out);
    out
}

/// The summary of a recommend report: its current configs' figures, each
/// measured at the deployment's reference peak.
pub fn recommend_summary(r: &RecommendReport, run: &RunInfo) -> Vec<SummaryLine> {
    let mut out = vec![deployments(r.deployments.iter().map(|d| d.name.as_str()))];
    out.extend(run.span.and_then(|(a, b)| range(Some(a), Some(b))));
    let decisions: u64 = r.deployments.iter().map(|d| d.current.decisions).sum();
    out.push(line("Decisions", count(decisions)));
    let share = |f: fn(&gatecal_analysis::DeploymentRec) -> f64| -> String {
        if decisions == 0 {
            return "–".into();
        }
        let n: f64 = r
            .deployments
            .iter()
            .map(|d| f(d) * d.current.decisions as f64)
            .sum();
        format!(
            "{} ({})",
            count(n.round() as u64),
            pct(n / decisions as f64)
        )
    };
    out.push(line(
        "Released (replayed, current config)",
        share(|d| d.current.released_share),
    ));
    out.push(line(
        "Pinned (current config, at the reference peak)",
        share(|d| d.current.pinned_worse_share),
    ));
    out.push(config(
        r.deployments
            .iter()
            .map(|d| (d.name.as_str(), d.current.config.source.as_str())),
    ));
    run_lines(run, &mut out);
    out
}

/// The summary as terminal lines: `label: value`, a value that does not
/// fit `width` wrapped between words onto lines indented by four spaces.
pub(crate) fn terminal_lines(lines: &[SummaryLine], width: Option<u16>) -> Vec<String> {
    const INDENT: &str = "    ";
    let width = width.map_or(usize::MAX, |w| usize::from(w).max(40));
    let mut out = Vec::new();
    for l in lines {
        let value = crate::escape::terminal(&l.value).into_owned();
        let mut cur = format!("{}:", crate::escape::terminal(&l.label));
        for word in value.split(' ').filter(|w| !w.is_empty()) {
            if cur.chars().count() + 1 + word.chars().count() > width && cur.trim() != "" {
                out.push(std::mem::replace(&mut cur, INDENT.to_string()));
                cur.push_str(word);
                continue;
            }
            if !cur.ends_with(INDENT) || cur.len() != INDENT.len() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_lines_align_and_wrap() {
        let lines = vec![
            line("Decisions", "1,168"),
            code(
                "Command",
                "gate-dist a-very-long-argument another-one and-more",
            ),
        ];
        let out = terminal_lines(&lines, Some(40));
        assert_eq!(out[0], "Decisions: 1,168");
        assert_eq!(out[1], "Command: gate-dist a-very-long-argument");
        assert_eq!(out[2], "    another-one and-more");
        assert!(out.iter().all(|l| l.chars().count() <= 40), "{out:?}");
    }

    #[test]
    fn one_source_or_each_deployments() {
        let one = config([("a", "log"), ("b", "log")].into_iter());
        assert!(one.code && one.value == "log");
        let two = config([("a", "log"), ("b", "default")].into_iter());
        assert_eq!(two.value, "a: log; b: default");
    }
}
