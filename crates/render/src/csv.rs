//! CSV: one row per deployment (and `overall`), raw numbers, for spreadsheets.
//!
//! Columns: `deployment,decisions,released,released_share,pinned_worse,
//! pinned_worse_share,gate_n,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,bar_ms,
//! evidence_logged,evidence_observed,evidence_reconstructed,evidence_unknown,
//! self_check_replayed,self_check_agreed`, then per outcome `outcome_<name>`,
//! then per what-if `whatif<i>_<mode>_<bar>_released_share` and
//! `…_pinned_worse_share`, then `small_sample` (`true` when the quantiles are
//! over fewer than 20 gate inputs), `replay_decisions`, `replay_agreed`,
//! `replay_logged_released`, `replay_replayed_released`, `censored`,
//! `censored_p50_ms`, `censored_p90_ms`, `censored_max_ms`. Empty cells are
//! unknown values.

use std::io::{self, Write};

use gatecal_analysis::gate_dist::GateDistReport;
use gatecal_analysis::recommend::RecommendReport;
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
        h.extend(
            [
                "small_sample",
                "replay_decisions",
                "replay_agreed",
                "replay_logged_released",
                "replay_replayed_released",
                "censored",
                "censored_p50_ms",
                "censored_p90_ms",
                "censored_max_ms",
            ]
            .map(String::from),
        );
        writeln!(w, "{}", h.join(","))?;
        for d in &report.deployments {
            writeln!(w, "{}", row(&d.name, &d.stats).join(","))?;
        }
        writeln!(w, "{}", row("overall", &report.overall.stats).join(","))
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "deployment,peak_tps,peak_source,peak_samples,break_even_n,break_even_p10_ms,break_even_p50_ms,break_even_p90_ms,current_released_share,current_pinned_worse_share,static_peak_tps,static_max_ttft_penalty_ms,static_released_share,static_pinned_worse_share,matched_peak_tps,matched_ceiling_ms,matched_released_share,matched_pinned_worse_share,warnings"
        )?;
        for d in &report.deployments {
            let p = &d.peak_prefill_throughput;
            let b = &d.break_even_ms;
            let st = &d.recommended.static_mode;
            let m = &d.recommended.matched_tokens;
            let source = p.source.as_str().to_string();
            let row = [
                field(&d.name),
                p.value.to_string(),
                source,
                p.samples.to_string(),
                b.count.to_string(),
                opt(b.p10),
                opt(b.p50),
                opt(b.p90),
                d.current.released_share.to_string(),
                d.current.pinned_worse_share.to_string(),
                st.peak_prefill_throughput.to_string(),
                st.max_ttft_penalty_ms.to_string(),
                st.released_share.to_string(),
                st.pinned_worse_share.to_string(),
                m.peak_prefill_throughput.to_string(),
                m.max_ttft_penalty_ms.to_string(),
                m.released_share.to_string(),
                m.pinned_worse_share.to_string(),
                d.warnings.len().to_string(),
            ];
            writeln!(w, "{}", row.join(","))?;
        }
        Ok(())
    }
}
