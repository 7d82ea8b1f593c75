//! CSV: one row per deployment (and `overall`), raw numbers, for spreadsheets.
//!
//! Columns: `deployment,decisions,released,released_share,pinned_worse,
//! pinned_worse_share,gate_n,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,bar_ms,
//! evidence_logged,evidence_observed,evidence_reconstructed,evidence_unknown,
//! self_check_replayed,self_check_agreed`, then per outcome `outcome_<name>`,
//! then per what-if `whatif<i>_<mode>_<bar>_released_share` and
//! `…_pinned_worse_share`. Empty cells are unknown values.

use std::io::{self, Write};

use gatecal_analysis::gate_dist::GateDistReport;
use gatecal_analysis::stats::Stats;
use gatecal_filter::Outcome;

use crate::Renderer;

/// Comma-separated values, RFC 4180 quoting.
#[derive(Clone, Copy, Debug, Default)]
pub struct Csv;

/// Quotes a field when needed.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn row(name: &str, s: &Stats) -> Vec<String> {
    let g = &s.gate_input_ms;
    let mut r = vec![
        field(name),
        s.decisions.to_string(),
        s.released.to_string(),
        s.released_share.to_string(),
        s.pinned_worse.count.to_string(),
        s.pinned_worse.share.to_string(),
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
    for o in Outcome::ALL {
        r.push(s.outcomes.get(o.as_str()).copied().unwrap_or(0).to_string());
    }
    for w in &s.what_if {
        r.push(w.released_share.to_string());
        r.push(w.pinned_worse_share.to_string());
    }
    r
}

impl Renderer for Csv {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        let mut h: Vec<String> = [
            "deployment",
            "decisions",
            "released",
            "released_share",
            "pinned_worse",
            "pinned_worse_share",
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
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for o in Outcome::ALL {
            h.push(format!("outcome_{}", o.as_str()));
        }
        for (i, wi) in report.overall.stats.what_if.iter().enumerate() {
            let bar = wi
                .max_ttft_penalty_ms
                .map(|b| b.to_string())
                .unwrap_or_else(|| "mixed".into());
            let p = format!("whatif{i}_{}_{bar}", wi.mode.as_str());
            h.push(format!("{p}_released_share"));
            h.push(format!("{p}_pinned_worse_share"));
        }
        writeln!(w, "{}", h.join(","))?;
        for d in &report.deployments {
            writeln!(w, "{}", row(&d.name, &d.stats).join(","))?;
        }
        writeln!(w, "{}", row("overall", &report.overall.stats).join(","))
    }
}
