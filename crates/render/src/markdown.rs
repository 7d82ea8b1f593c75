//! Markdown for pull requests. A gate-dist report opens with one summary
//! (deployments, time range, decisions, released and pinned shares, config
//! source, gatecal version and command line) and the SVG histogram when
//! one was written; then the main tables; the long sections (what-ifs,
//! per-window rows, histograms) fold into `<details>`. Text columns are
//! left-aligned, numbers right-aligned.

use std::io::{self, Write};

use gatecal_analysis::{GateDistReport, RecommendReport};

use crate::num::{count, count_pct, utc};
use crate::sections::{Section, gate_dist_sections, recommend_sections, text_histogram};
use crate::{Renderer, escape};

/// GitHub-flavoured Markdown.
#[derive(Clone, Debug, Default)]
pub struct Markdown {
    /// How the report was made, for its summary.
    pub run: RunInfo,
}

/// How a report was made: what its summary names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunInfo {
    /// The gatecal version (with its commit).
    pub version: String,
    /// The command line, as typed.
    pub command: String,
    /// The SVG histogram, as a link relative to the Markdown file.
    pub svg: Option<String>,
}

/// Sections folded into `<details>`: long, and second to the summary.
const FOLDED: [&str; 2] = ["What if", "Per window"];

/// Whether a cell reads as a number (digits, with a sign, unit or share),
/// or is empty or a dash.
fn numeric(c: &str) -> bool {
    let t = c.trim().trim_start_matches(['-', '−', '+', '≥', '<', '>']);
    t.is_empty() || t == "–" || t.starts_with(|ch: char| ch.is_ascii_digit())
}

/// Any text in a cell, title or note: plain text ([`escape::markdown`]).
fn cell(s: &str) -> String {
    escape::markdown(s).into_owned()
}

/// Writes sections as Markdown tables under `###` titles.
pub fn write_sections(sections: &[Section], w: &mut dyn Write) -> io::Result<()> {
    for s in sections {
        let fold = FOLDED.contains(&s.title.as_str());
        if fold {
            writeln!(
                w,
                "<details><summary>{} ({} rows)</summary>\n",
                cell(&s.title),
                s.rows.len()
            )?;
        } else {
            writeln!(w, "### {}\n", cell(&s.title))?;
        }
        writeln!(
            w,
            "| {} |",
            s.headers
                .iter()
                .map(|h| cell(h))
                .collect::<Vec<_>>()
                .join(" | ")
        )?;
        // Numbers right, text left.
        let align: Vec<&str> = (0..s.headers.len())
            .map(|i| {
                if !s.rows.is_empty() && s.rows.iter().all(|r| r.get(i).is_none_or(|c| numeric(c)))
                {
                    "---:"
                } else {
                    ":---"
                }
            })
            .collect();
        writeln!(w, "| {} |", align.join(" | "))?;
        for r in &s.rows {
            writeln!(
                w,
                "| {} |",
                r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
            )?;
        }
        writeln!(w)?;
        for n in &s.notes {
            writeln!(w, "- {}", cell(n))?;
        }
        if !s.notes.is_empty() {
            writeln!(w)?;
        }
        if fold {
            writeln!(w, "</details>\n")?;
        }
    }
    Ok(())
}

/// `2026-08-21T14:00:00Z`.
fn rfc3339(ts: f64) -> String {
    format!("{}Z", utc(ts).replacen(' ', "T", 1))
}

/// The summary that opens a gate-dist report: a two-column table.
fn summary(r: &GateDistReport, run: &RunInfo) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let names: Vec<&str> = r.deployments.iter().map(|d| d.name.as_str()).collect();
    let shown = if names.len() > 6 {
        format!("{} and {} more", names[..6].join(", "), names.len() - 6)
    } else {
        names.join(", ")
    };
    rows.push((
        "Deployments".to_string(),
        format!("{} ({})", count(names.len() as u64), cell(&shown)),
    ));
    let first = r
        .deployments
        .iter()
        .filter_map(|d| d.first_ts)
        .reduce(f64::min);
    let last = r
        .deployments
        .iter()
        .filter_map(|d| d.last_ts)
        .reduce(f64::max);
    if let (Some(a), Some(b)) = (first, last) {
        rows.push((
            "Time range (UTC)".to_string(),
            format!("{} – {}", rfc3339(a), rfc3339(b)),
        ));
    }
    let o = &r.overall.stats;
    rows.push(("Decisions".to_string(), count(o.decisions)));
    rows.push((
        "Released".to_string(),
        count_pct(o.released, o.released_share),
    ));
    rows.push((
        format!(
            "Pinned, gate input in [{} ms, bar)",
            crate::num::group(r.options.pinned_worse_min_ms as i64)
        ),
        count_pct(o.pinned_worse.count, o.pinned_worse.share),
    ));
    let mut sources: Vec<&str> = r
        .deployments
        .iter()
        .map(|d| d.config.source.as_str())
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let config = match sources.as_slice() {
        [] => "–".to_string(),
        [one] => format!("`{}`", escape::markdown_code(one)),
        _ => r
            .deployments
            .iter()
            .map(|d| {
                format!(
                    "{}: `{}`",
                    cell(&d.name),
                    escape::markdown_code(&d.config.source)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    rows.push(("Config".to_string(), config));
    if !run.version.is_empty() {
        rows.push(("gatecal".to_string(), cell(&run.version)));
    }
    if !run.command.is_empty() {
        rows.push((
            "Command".to_string(),
            format!("`{}`", escape::markdown_code(&run.command)),
        ));
    }
    rows
}

impl Renderer for Markdown {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "## gatecal gate-dist report\n")?;
        writeln!(w, "| | |\n|:---|:---|")?;
        for (k, v) in summary(report, &self.run) {
            writeln!(w, "| {k} | {v} |")?;
        }
        writeln!(w)?;
        if let Some(svg) = &self.run.svg {
            writeln!(
                w,
                "![TTFT load gate input histogram, the bar marked]({})\n",
                svg.replace(' ', "%20")
                    .replace('(', "%28")
                    .replace(')', "%29")
            )?;
        }
        write_sections(&gate_dist_sections(report), w)?;
        for d in &report.deployments {
            writeln!(
                w,
                "<details><summary>Gate input histogram: {} (n = {}, ms)</summary>\n",
                cell(&d.name),
                d.stats.gate_input_ms.count
            )?;
            writeln!(w, "```text")?;
            for line in text_histogram(&d.histogram, d.stats.bar_ms, 40) {
                writeln!(w, "{line}")?;
            }
            writeln!(w, "```\n\n</details>\n")?;
        }
        writeln!(
            w,
            "<sub>{} · schema {}</sub>",
            env!("CARGO_PKG_NAME"),
            report.schema
        )?;
        Ok(())
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "## gatecal recommend report\n")?;
        write_sections(&recommend_sections(report), w)?;
        for d in &report.deployments {
            let Some(rec) = &d.paste else { continue };
            writeln!(w, "### EPP plugin parameters: {}\n", cell(&d.name))?;
            let fence = escape::markdown_fence(&rec.yaml);
            writeln!(w, "{fence}yaml\n{}{fence}\n", rec.yaml)?;
        }
        writeln!(w, "<sub>schema {}</sub>", report.schema)
    }
}
