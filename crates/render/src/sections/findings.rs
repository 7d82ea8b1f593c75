//! The findings table, first in every human-readable report.

use gatecal_analysis::findings::Finding;

use super::Section;
use crate::num::{count, utc};

/// The findings as one section: severity, id, deployment, summary and
/// action per row, most severe first, each one's evidence in the notes.
/// With none, one row says so.
pub fn findings_section(findings: &[Finding]) -> Section {
    let headers = ["severity", "finding", "deployment", "summary", "action"]
        .map(String::from)
        .to_vec();
    if findings.is_empty() {
        return Section {
            title: "Findings".to_string(),
            headers,
            rows: vec![vec![
                "-".into(),
                "none".into(),
                "all".into(),
                "no finding holds (docs/usage.md, \"Findings\", lists the checks)".into(),
                String::new(),
            ]],
            notes: Vec::new(),
        };
    }
    let rows = findings
        .iter()
        .map(|f| {
            vec![
                f.severity.as_str().to_string(),
                f.id.to_string(),
                f.deployment.clone(),
                f.summary.clone(),
                f.action.clone(),
            ]
        })
        .collect();
    let notes = findings.iter().map(evidence_note).collect();
    Section {
        title: "Findings (most severe first)".to_string(),
        headers,
        rows,
        notes,
    }
}

/// One finding's evidence in a line: sample, count, time range, endpoints
/// or pods.
pub fn evidence_note(f: &Finding) -> String {
    let e = &f.evidence;
    let mut s = format!(
        "{} ({}): {} of {} decisions",
        f.id,
        f.deployment,
        count(e.count),
        count(e.decisions)
    );
    if let (Some(a), Some(b)) = (e.first_ts, e.last_ts) {
        s.push_str(&format!(", {} to {} UTC", utc(a), utc(b)));
    }
    if !e.endpoints.is_empty() {
        s.push_str(&format!("; endpoints {}", e.endpoints.join(", ")));
    }
    if !e.pods.is_empty() {
        s.push_str(&format!("; EPP pods {}", e.pods.join(", ")));
    }
    s
}
