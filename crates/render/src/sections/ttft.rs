//! The observed TTFT table, the same in both reports.

use std::collections::BTreeMap;

use gatecal_analysis::{EndpointTtft, ObservedTtft, PredictedTtft, SelfCheck, TtftModel};

use super::{Section, s};
use crate::notes::{Note, lines};
use crate::num::{count, ms};

/// The observed TTFT of each deployment (`name`, its figures, per
/// endpoint), a row for all its requests then one per endpoint.
pub fn observed_section<'a>(
    deps: impl Iterator<
        Item = (
            &'a str,
            &'a ObservedTtft,
            &'a BTreeMap<String, EndpointTtft>,
        ),
    >,
) -> Section {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (name, o, by) in deps {
        rows.push(vec![
            format!("{name} (all)"),
            count(o.n),
            ms(o.p50),
            ms(o.p90),
            ms(o.p99),
        ]);
        // Endpoints named without their namespace when they share one: the
        // note names it, and the row under its deployment says whose it is.
        let namespace = shared_namespace(by.keys());
        for (e, t) in by {
            let short = namespace
                .and_then(|ns| e.strip_prefix(ns))
                .and_then(|r| r.strip_prefix('/'))
                .unwrap_or(e);
            rows.push(vec![
                format!("·{short}"),
                count(t.n),
                ms(t.p50),
                ms(t.p90),
                ms(t.p99),
            ]);
        }
        let mut source = o.source.clone();
        if let Some(ns) = namespace {
            source.push_str(&format!("; endpoints of namespace {ns}"));
        }
        notes.push(Note::about(name, source));
    }
    Section {
        title: s("Observed TTFT (ms): request received at the EPP to its first response body"),
        headers: vec![
            s("deployment, ·endpoint"),
            s("requests"),
            s("p50"),
            s("p90"),
            s("p99"),
        ],
        rows,
        notes: lines(&notes),
    }
}

/// A predicted TTFT: `p50 / p90 [lo–hi] / p99`, `–` without one.
pub fn predicted_cell(p: Option<&PredictedTtft>) -> String {
    match p {
        Some(p) => format!(
            "{} / {} [{}–{}] / {}",
            ms(Some(p.p50)),
            ms(Some(p.p90)),
            ms(Some(p.interval.p90[0])),
            ms(Some(p.interval.p90[1])),
            ms(Some(p.p99))
        ),
        None => "–".into(),
    }
}

/// The engine model a deployment's predictions replay, as a note (none
/// without a fitted engine).
pub fn model_note(name: &str, m: &TtftModel) -> Option<Note> {
    let (tps, o) = (m.tokens_per_s?, m.overhead_ms?);
    let interval = m
        .tokens_per_s_interval
        .map(|[a, b]| format!(" (90 % interval {}–{})", tps_cell(a), tps_cell(b)))
        .unwrap_or_default();
    Some(Note::about(
        name,
        format!(
            "TTFT model: {} tok/s{interval} and {} ms a request, {}; {} requests replayed ({} closed loops); picker: {}",
            tps_cell(tps),
            ms(Some(o)),
            m.source,
            count(m.workload.requests as u64),
            count(m.workload.closed_loops as u64),
            m.picker
        ),
    ))
}

/// The self-check of the current row, as a note; `failed` says what a
/// failed check means for the report.
pub fn self_check_note(name: &str, c: &SelfCheck, failed: &str) -> Note {
    let mut parts: Vec<String> = c
        .quantiles
        .iter()
        .map(|q| {
            format!(
                "{} predicted {} [{}–{}] against {} observed ({:+.1} %{})",
                q.quantile,
                ms(Some(q.predicted)),
                ms(Some(q.interval[0])),
                ms(Some(q.interval[1])),
                ms(Some(q.observed)),
                q.gap_share * 100.0,
                if q.inside { "" } else { ", outside" }
            )
        })
        .collect();
    parts.extend(c.outcomes_failure());
    Note::about(
        name,
        format!(
            "self-check of the current row: {}; {}",
            parts.join(", "),
            if c.passed {
                "the predictions can be acted on"
            } else {
                failed
            }
        ),
    )
}

fn tps_cell(v: f64) -> String {
    crate::num::group(v.round() as i64)
}

/// The namespace (`NS` of `NS/pod`) every endpoint shares, if any.
fn shared_namespace<'a>(mut names: impl Iterator<Item = &'a String>) -> Option<&'a str> {
    let first = names.next()?.split_once('/')?.0;
    names
        .all(|n| n.split_once('/').is_some_and(|(ns, _)| ns == first))
        .then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_shared_only_when_every_endpoint_has_it() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = names(&["ns/a", "ns/b"]);
        assert_eq!(shared_namespace(a.iter()), Some("ns"));
        let b = names(&["ns/a", "other/b"]);
        assert_eq!(shared_namespace(b.iter()), None);
        let c = names(&["ns/a", "b"]);
        assert_eq!(shared_namespace(c.iter()), None);
        assert_eq!(shared_namespace([].iter()), None);
    }
}
