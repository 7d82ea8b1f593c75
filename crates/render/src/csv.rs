//! CSV: one long table, raw numbers, for spreadsheets and data frames.
//!
//! The gate-dist report has a row per deployment, per `--window` of each
//! deployment, and `overall`, each as ran (`rule` = `in_force`) and under
//! each what-if (`rule` = `static` or `matchedTokens`, with its bar or
//! ceiling and its peak): the column names never change with the what-if
//! list or the windows. Columns: `deployment,window_start,window_end,rule,
//! rule_max_ttft_penalty_ms,rule_peak_prefill_throughput` (the key;
//! windows in RFC 3339 UTC, `[start, end)`, empty for the whole input),
//! `decisions,released,released_share,pinned_worse,pinned_worse_share,
//! unknown` (every row), then, on `in_force` rows only, `gate_n,p50_ms,
//! p90_ms,p99_ms,p999_ms,max_ms,bar_ms,evidence_logged,evidence_observed,
//! evidence_reconstructed,evidence_unknown,self_check_replayed,
//! self_check_agreed,small_sample` (`true` when the quantiles are over
//! fewer than 20 gate inputs), `replay_decisions,replay_agreed,
//! replay_logged_released,replay_replayed_released,censored,
//! censored_p50_ms,censored_p90_ms,censored_max_ms`, the trace columns
//! `population` (`trace_sample` when every decision of the row came from
//! traces alone: the figures are the sample's; else `all`),
//! `evidence_traced,traced_decisions,traced_joined,validation_pairs,
//! abs_error_p50_ms,abs_error_p90_ms,reconstructed_p50_ms,
//! reconstructed_p90_ms,traced_p50_ms,traced_p90_ms` (the reconstruction
//! against the traced input; empty without traces), per outcome
//! `outcome_<name>`, `observed_ttft_n,observed_ttft_p50_ms,
//! observed_ttft_p90_ms,observed_ttft_p99_ms` (a deployment's `in_force`
//! row), `predicted_ttft_{p50,p90,p99}_ms` each with `_low_ms` and
//! `_high_ms`, `predicted_ttft_mean_ms,predicted_ttft_n,
//! predicted_prefix_hit_share` (a deployment's `current` and candidate
//! rows, with `--candidate-config` or `--what-if`), then `config`
//! (`current` on the row of the config in
//! force replayed, whose `released` is the replayed count beside the
//! `in_force` row's logged one; the label of a `--candidate-config` or
//! `--what-if` row; empty on the other rows) and `config_error` (why a
//! candidate is not valid for the deployment), then `finding_id,
//! finding_severity,finding_summary,finding_action`, filled only on the
//! `finding` rows that come first (`rule` = `finding`, one per finding,
//! most severe first, the other cells empty). Empty cells are unknown or
//! not applicable.
//!
//! Both reports open with `#` comment lines: what they are, then each
//! column of the header that is not plain English with its meaning
//! ([`crate::glossary::CSV_COLUMNS`]); the header follows.
//!
//! The recommend report has a row per deployment and config row; its
//! findings come first, as rows whose `row` and `row_kind` are `finding`,
//! with the same four finding columns last.

use std::io::{self, Write};

use gatecal_analysis::findings::Finding;
use gatecal_analysis::{GateDistReport, RecommendReport, Stats, WhatIfResult};
use gatecal_filter::Outcome;

use crate::Renderer;

/// Comma-separated values, RFC 4180 quoting.
#[derive(Clone, Copy, Debug, Default)]
pub struct Csv;

/// One field: guarded against formula injection and quoted when needed
/// ([`crate::escape::csv`]).
pub fn field(s: &str) -> String {
    crate::escape::csv(s).into_owned()
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// RFC 3339 UTC, to the second.
fn rfc3339(ts: f64) -> String {
    let u = crate::num::utc(ts);
    if ts.is_finite() {
        format!("{}Z", u.replacen(' ', "T", 1))
    } else {
        String::new()
    }
}

/// The columns that name a row: deployment, window, rule.
const KEY: [&str; 6] = [
    "deployment",
    "window_start",
    "window_end",
    "rule",
    "rule_max_ttft_penalty_ms",
    "rule_peak_prefill_throughput",
];

/// The figures every row has (a what-if row fills these only).
const SHARED: [&str; 6] = [
    "decisions",
    "released",
    "released_share",
    "pinned_worse",
    "pinned_worse_share",
    "unknown",
];

/// The figures of `in_force` rows only.
const OBSERVED: [&str; 33] = [
    "gate_n",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
    "bar_ms",
    "evidence_logged",
    "evidence_observed",
    "evidence_reconstructed",
    "evidence_unknown",
    "self_check_replayed",
    "self_check_agreed",
    "small_sample",
    "replay_decisions",
    "replay_agreed",
    "replay_logged_released",
    "replay_replayed_released",
    "censored",
    "censored_p50_ms",
    "censored_p90_ms",
    "censored_max_ms",
    "population",
    "evidence_traced",
    "traced_decisions",
    "traced_joined",
    "validation_pairs",
    "abs_error_p50_ms",
    "abs_error_p90_ms",
    "reconstructed_p50_ms",
    "reconstructed_p90_ms",
    "traced_p50_ms",
    "traced_p90_ms",
];

fn header() -> Vec<String> {
    let mut h: Vec<String> = KEY
        .iter()
        .chain(&SHARED)
        .chain(&OBSERVED)
        .map(|s| s.to_string())
        .collect();
    for o in Outcome::ALL {
        h.push(format!("outcome_{}", o.as_str()));
    }
    h.extend(TTFT.iter().map(|s| s.to_string()));
    h.extend(PREDICTED.iter().map(|s| s.to_string()));
    h.extend(TAIL.iter().map(|s| s.to_string()));
    h.extend(FINDING.iter().map(|s| s.to_string()));
    h
}

/// The observed TTFT of a deployment's `in_force` row (empty on the
/// others).
const TTFT: [&str; 4] = [
    "observed_ttft_n",
    "observed_ttft_p50_ms",
    "observed_ttft_p90_ms",
    "observed_ttft_p99_ms",
];

/// The predicted TTFT of the `current` and candidate rows, with
/// `--candidate-config` or `--what-if` (empty on the others).
const PREDICTED: [&str; 12] = [
    "predicted_ttft_p50_ms",
    "predicted_ttft_p50_low_ms",
    "predicted_ttft_p50_high_ms",
    "predicted_ttft_p90_ms",
    "predicted_ttft_p90_low_ms",
    "predicted_ttft_p90_high_ms",
    "predicted_ttft_p99_ms",
    "predicted_ttft_p99_low_ms",
    "predicted_ttft_p99_high_ms",
    "predicted_ttft_mean_ms",
    "predicted_ttft_n",
    "predicted_prefix_hit_share",
];

/// The [`PREDICTED`] cells of a row.
fn predicted_cells(
    p: Option<&Option<gatecal_analysis::PredictedTtft>>,
    hit: Option<&Option<f64>>,
) -> Vec<String> {
    match p {
        Some(Some(p)) => vec![
            p.p50.to_string(),
            p.interval.p50[0].to_string(),
            p.interval.p50[1].to_string(),
            p.p90.to_string(),
            p.interval.p90[0].to_string(),
            p.interval.p90[1].to_string(),
            p.p99.to_string(),
            p.interval.p99[0].to_string(),
            p.interval.p99[1].to_string(),
            p.mean.to_string(),
            p.n.to_string(),
            opt(hit.copied().flatten()),
        ],
        _ => vec![String::new(); PREDICTED.len()],
    }
}

/// The last columns: which config a replayed row is (`current`, the
/// candidate's label, empty for the what-ifs and `in_force`), and why a
/// candidate was not valid for the deployment.
const TAIL: [&str; 2] = ["config", "config_error"];

/// The finding columns, last: filled on `finding` rows only.
const FINDING: [&str; 4] = [
    "finding_id",
    "finding_severity",
    "finding_summary",
    "finding_action",
];

/// A finding's four columns.
fn finding_cells(f: &Finding) -> [String; 4] {
    [
        f.id.to_string(),
        f.severity.as_str().to_string(),
        field(&f.summary),
        field(&f.action),
    ]
}

/// The rows of one set of decisions: `in_force` (the figures as the
/// deployment ran), then one per what-if.
fn rows(
    name: &str,
    window: Option<(f64, f64)>,
    peak: Option<f64>,
    s: &Stats,
    observed: Option<&gatecal_analysis::ObservedTtft>,
) -> Vec<Vec<String>> {
    let (ws, we) = window.map_or((String::new(), String::new()), |(a, b)| {
        (rfc3339(a), rfc3339(b))
    });
    let g = &s.gate_input_ms;
    let unknown = s.evidence.unknown;
    let mut r = vec![
        field(name),
        ws.clone(),
        we.clone(),
        "in_force".to_string(),
        opt(s.bar_ms),
        opt(peak),
        s.decisions.to_string(),
        s.released.to_string(),
        s.released_share.to_string(),
        s.pinned_worse.count.to_string(),
        s.pinned_worse.share.to_string(),
        unknown.to_string(),
        g.count.to_string(),
        opt(g.p50),
        opt(g.p90),
        opt(g.p99),
        opt(g.p999),
        opt(g.max),
        opt(s.bar_ms),
        s.evidence.logged.to_string(),
        s.evidence.observed.to_string(),
        s.evidence.reconstructed.to_string(),
        s.evidence.unknown.to_string(),
        s.self_check.replayed.to_string(),
        s.self_check.agreed.to_string(),
    ];
    let (p, c) = (&s.replay, &s.censoring);
    r.extend([
        g.small_sample.to_string(),
        p.decisions.to_string(),
        p.agreed.to_string(),
        p.logged_released.to_string(),
        p.replayed_released.to_string(),
        c.moved.to_string(),
        opt(c.move_p50_ms),
        opt(c.move_p90_ms),
        opt(c.move_max_ms),
    ]);
    let t = s.traced.clone().unwrap_or_default();
    let v = &t.validation;
    let sample_only = s.traced.is_some() && t.joined == 0 && t.decisions == s.decisions;
    r.extend([
        if sample_only { "trace_sample" } else { "all" }.to_string(),
        s.evidence.traced.to_string(),
        t.decisions.to_string(),
        t.joined.to_string(),
        v.pairs.to_string(),
        opt(v.abs_error_ms.p50),
        opt(v.abs_error_ms.p90),
        opt(v.reconstructed_ms.p50),
        opt(v.reconstructed_ms.p90),
        opt(v.traced_ms.p50),
        opt(v.traced_ms.p90),
    ]);
    for o in Outcome::ALL {
        r.push(s.outcomes.get(o.as_str()).copied().unwrap_or(0).to_string());
    }
    match observed {
        Some(o) => r.extend([o.n.to_string(), opt(o.p50), opt(o.p90), opt(o.p99)]),
        None => r.extend(TTFT.map(|_| String::new())),
    }
    r.extend(predicted_cells(None, None));
    r.extend([String::new(), String::new()]);
    let width = r.len();
    let mut out = vec![r];
    let what_if = |wi: &WhatIfResult,
                   config: &str,
                   error: Option<&str>,
                   predicted: Option<&Option<gatecal_analysis::PredictedTtft>>,
                   hit: Option<&Option<f64>>| {
        let mut r = vec![
            field(name),
            ws.clone(),
            we.clone(),
            wi.mode.as_str().to_string(),
            opt(wi.max_ttft_penalty_ms),
            opt(wi.peak_prefill_throughput),
            s.decisions.to_string(),
            wi.released.to_string(),
            wi.released_share.to_string(),
            wi.pinned_worse.to_string(),
            wi.pinned_worse_share.to_string(),
            wi.unknown.to_string(),
        ];
        r.resize(width - 2 - PREDICTED.len(), String::new());
        r.extend(predicted_cells(predicted, hit));
        r.push(field(config));
        r.push(error.map(field).unwrap_or_default());
        r
    };
    let cur = &s.current;
    out.push(what_if(
        &cur.replayed,
        "current",
        None,
        cur.predicted_ttft_ms.as_ref(),
        cur.predicted_prefix_hit_share.as_ref(),
    ));
    for wi in &s.what_if {
        out.push(what_if(wi, "", None, None, None));
    }
    for c in &s.candidates {
        out.push(what_if(
            &c.result,
            &c.label,
            c.error.as_deref(),
            c.predicted_ttft_ms.as_ref(),
            c.predicted_prefix_hit_share.as_ref(),
        ));
    }
    out
}

/// The recommend report's columns.
const RECOMMEND_HEADER: &str = "deployment,peak_tps,peak_interval_low_tps,peak_interval_high_tps,peak_source,peak_samples,reference_peak_tps,break_even_n,break_even_tokens_p10,break_even_tokens_p50,break_even_tokens_p90,break_even_p10_ms,break_even_p50_ms,break_even_p90_ms,row,row_kind,recommended,penalty_mode,row_peak_tps,row_max_ttft_penalty_ms,released_share,logged_released_share,pinned_worse_share,excess_ttft_ms,unknown,no_match_info,warnings,source_disagreements,matched_token_sources,predicted_ttft_p50_ms,predicted_ttft_p50_low_ms,predicted_ttft_p50_high_ms,predicted_ttft_p90_ms,predicted_ttft_p90_low_ms,predicted_ttft_p90_high_ms,predicted_ttft_p99_ms,predicted_ttft_p99_low_ms,predicted_ttft_p99_high_ms,predicted_ttft_mean_ms,predicted_ttft_n,predicted_prefix_hit_share,observed_ttft_n,observed_ttft_p50_ms,observed_ttft_p90_ms,observed_ttft_p99_ms,finding_id,finding_severity,finding_summary,finding_action";

impl Renderer for Csv {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        let header = header();
        let names: Vec<&str> = header.iter().map(String::as_str).collect();
        w.write_all(crate::glossary::csv_comment("gate-dist", &names).as_bytes())?;
        writeln!(w, "{}", header.join(","))?;
        // The findings first: the key's `rule` is `finding`.
        for f in &report.findings {
            let mut r = vec![String::new(); header.len() - FINDING.len()];
            r[0] = field(&f.deployment);
            r[3] = "finding".to_string();
            r.extend(finding_cells(f));
            writeln!(w, "{}", r.join(","))?;
        }
        let mut put = |rs: Vec<Vec<String>>| -> io::Result<()> {
            for mut r in rs {
                r.resize(r.len() + FINDING.len(), String::new());
                writeln!(w, "{}", r.join(","))?;
            }
            Ok(())
        };
        for d in &report.deployments {
            let peak = Some(d.config.parameters.peak_prefill_throughput);
            put(rows(
                &d.name,
                None,
                peak,
                &d.stats,
                Some(&d.observed_ttft_ms),
            ))?;
            for win in &d.windows {
                put(rows(
                    &d.name,
                    Some((win.start_ts, win.end_ts)),
                    peak,
                    &win.stats,
                    None,
                ))?;
            }
        }
        put(rows("overall", None, None, &report.overall.stats, None))
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        // One line per deployment and row (current, static, matchedTokens, candidates).
        let header = RECOMMEND_HEADER;
        let names: Vec<&str> = header.split(',').collect();
        w.write_all(crate::glossary::csv_comment("recommend", &names).as_bytes())?;
        writeln!(w, "{header}")?;
        // The findings first: `row` and `row_kind` are `finding`.
        for f in &report.findings {
            let mut r = vec![String::new(); header.split(',').count() - FINDING.len()];
            r[0] = field(&f.deployment);
            r[14] = "finding".to_string();
            r[15] = "finding".to_string();
            r.extend(finding_cells(f));
            writeln!(w, "{}", r.join(","))?;
        }
        for d in &report.deployments {
            let p = &d.peak_prefill_throughput;
            let b = &d.break_even_ms;
            let t = &d.break_even_tokens;
            let oi = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
            let disagreements = d
                .source_disagreements
                .iter()
                .map(|x| x.message.as_str())
                .collect::<Vec<_>>()
                .join(" | ");
            for r in &d.rows {
                let recommended = d.recommended.as_ref().is_some_and(|x| x.row == r.label);
                let pr = r.predicted_ttft_ms.as_ref();
                let pv = |f: fn(&gatecal_analysis::PredictedTtft) -> f64| opt(pr.map(f));
                let o = &d.observed_ttft_ms;
                let kind = serde_json::to_value(r.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let row = [
                    field(&d.name),
                    p.value.to_string(),
                    p.interval.map(|i| i[0].to_string()).unwrap_or_default(),
                    p.interval.map(|i| i[1].to_string()).unwrap_or_default(),
                    p.source.as_str().to_string(),
                    p.samples.to_string(),
                    d.reference_peak.to_string(),
                    b.count.to_string(),
                    oi(t.p10),
                    oi(t.p50),
                    oi(t.p90),
                    opt(b.p10),
                    opt(b.p50),
                    opt(b.p90),
                    field(&r.label),
                    kind,
                    recommended.to_string(),
                    r.penalty_mode.as_str().to_string(),
                    r.peak_prefill_throughput.to_string(),
                    r.max_ttft_penalty_ms.to_string(),
                    r.released_share.to_string(),
                    opt(r.logged_released_share),
                    r.pinned_worse_share.to_string(),
                    opt(r.excess_ttft_ms),
                    r.unknown.to_string(),
                    r.no_match_info.to_string(),
                    d.warnings.len().to_string(),
                    field(&disagreements),
                    field(&crate::sections::matched_sources(d)),
                    pv(|p| p.p50),
                    pv(|p| p.interval.p50[0]),
                    pv(|p| p.interval.p50[1]),
                    pv(|p| p.p90),
                    pv(|p| p.interval.p90[0]),
                    pv(|p| p.interval.p90[1]),
                    pv(|p| p.p99),
                    pv(|p| p.interval.p99[0]),
                    pv(|p| p.interval.p99[1]),
                    pv(|p| p.mean),
                    pr.map(|p| p.n.to_string()).unwrap_or_default(),
                    opt(r.predicted_prefix_hit_share),
                    o.n.to_string(),
                    opt(o.p50),
                    opt(o.p90),
                    opt(o.p99),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ];
                writeln!(w, "{}", row.join(","))?;
            }
        }
        Ok(())
    }

    fn compare(
        &self,
        report: &gatecal_analysis::compare::CompareReport,
        w: &mut dyn Write,
    ) -> io::Result<()> {
        crate::compare::write_csv(report, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::glossary::{CSV_PLAIN, csv_column};

    /// Every column either needs no explanation or is explained in the
    /// CSV's comment lines.
    #[test]
    fn every_column_is_plain_or_explained() {
        let gate_dist = header();
        let columns = gate_dist
            .iter()
            .map(String::as_str)
            .chain(RECOMMEND_HEADER.split(','));
        for c in columns {
            assert!(
                CSV_PLAIN.contains(&c) || csv_column(c).is_some(),
                "CSV column {c} is neither plain nor in glossary::CSV_COLUMNS"
            );
        }
    }

    #[test]
    fn the_comment_explains_each_entry_once() {
        let c =
            crate::glossary::csv_comment("x", &["p50_ms", "p90_ms", "outcome_sticky", "decisions"]);
        assert_eq!(c.lines().count(), 3, "{c}");
        assert!(c.lines().all(|l| l.starts_with("# ")));
        assert!(c.contains("# p50_ms, p90_ms, p99_ms, p999_ms: "));
        assert!(c.contains("# outcome_*: "));
    }
}
