//! Markdown for pull requests. A gate-dist report opens with one summary
//! (deployments, time range, decisions, released and pinned shares, config
//! source, gatecal version and command line) and the SVG histogram when
//! one was written; then the main tables; the long sections (what-ifs,
//! per-window rows, histograms) fold into `<details>`. Text columns are
//! left-aligned, numbers right-aligned.

use std::io::{self, Write};

use gatecal_analysis::{GateDistReport, RecommendReport};

use crate::sections::{Section, gate_dist_sections, recommend_sections, text_histogram};
use crate::summary::{SummaryLine, gate_dist_summary, recommend_summary};
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
    /// The first and last decision times read, when the report does not
    /// hold them (recommend's).
    pub span: Option<(f64, f64)>,
    /// Each deployment's SVG histogram, `(deployment, link)`, when the
    /// report has several (`svg` is then the overall one).
    pub deployment_svgs: Vec<(String, String)>,
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

/// A file name as a Markdown link target.
fn link(path: &str) -> String {
    path.replace(' ', "%20")
        .replace('(', "%28")
        .replace(')', "%29")
}

/// The summary block: a two-column table.
pub(crate) fn write_summary(lines: &[SummaryLine], w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "| | |\n|:---|:---|")?;
    for l in lines {
        let v = if l.code {
            format!("`{}`", escape::markdown_code(&l.value))
        } else {
            cell(&l.value)
        };
        writeln!(w, "| {} | {v} |", cell(&l.label))?;
    }
    writeln!(w)
}

/// Writes the glossary of the terms `printed` holds, folded.
pub(crate) fn write_glossary(printed: &str, w: &mut dyn Write) -> io::Result<()> {
    let used = crate::glossary::used_in(printed);
    if used.is_empty() {
        return Ok(());
    }
    writeln!(w, "<details><summary>Glossary</summary>\n")?;
    for (term, what) in used {
        writeln!(w, "- **{}**: {}.", cell(term), cell(what))?;
    }
    writeln!(w, "\n</details>\n")
}

/// Writes a report's Markdown `buf` with the glossary of the terms it
/// printed, placed before the closing schema line.
fn with_glossary(buf: &[u8], w: &mut dyn Write) -> io::Result<()> {
    let text = String::from_utf8_lossy(buf);
    let (body, tail) = match text.rfind("<sub>") {
        Some(i) => text.split_at(i),
        None => (&*text, ""),
    };
    w.write_all(body.as_bytes())?;
    write_glossary(body, w)?;
    w.write_all(tail.as_bytes())
}

impl Renderer for Markdown {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        let mut buf = Vec::new();
        self.gate_dist_body(report, &mut buf)?;
        with_glossary(&buf, w)
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        let mut buf = Vec::new();
        self.recommend_body(report, &mut buf)?;
        with_glossary(&buf, w)
    }

    fn compare(
        &self,
        report: &gatecal_analysis::compare::CompareReport,
        w: &mut dyn Write,
    ) -> io::Result<()> {
        crate::compare::write_markdown(report, &self.run, w)
    }
}

impl Markdown {
    /// The `--svg` image, and the per-deployment ones folded under
    /// `summary`, as images linked relative to the report.
    fn write_svg_links(&self, alt: &str, summary: &str, w: &mut dyn Write) -> io::Result<()> {
        if let Some(svg) = &self.run.svg {
            writeln!(w, "![{alt}]({})\n", link(svg))?;
        }
        if !self.run.deployment_svgs.is_empty() {
            writeln!(w, "<details><summary>{summary}</summary>\n")?;
            for (name, svg) in &self.run.deployment_svgs {
                writeln!(w, "![{}]({})\n", cell(name), link(svg))?;
            }
            writeln!(w, "</details>\n")?;
        }
        Ok(())
    }

    fn gate_dist_body(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "## gatecal gate-dist report\n")?;
        write_summary(&gate_dist_summary(report, &self.run), w)?;
        // The findings right under the run's identity, before any figure.
        write_sections(&[crate::sections::findings_section(&report.findings)], w)?;
        self.write_svg_links(
            "TTFT load gate input histogram, the bar marked",
            "Gate input histogram per deployment (SVG)",
            w,
        )?;
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

    fn recommend_body(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "## gatecal recommend report\n")?;
        write_summary(&recommend_summary(report, &self.run), w)?;
        write_sections(&[crate::sections::findings_section(&report.findings)], w)?;
        self.write_svg_links(
            "Predicted TTFT per config, beside the observed TTFT",
            "Predicted TTFT per deployment (SVG)",
            w,
        )?;
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
