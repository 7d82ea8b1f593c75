//! Markdown for pull requests: the tables, and a histogram per deployment.

use std::io::{self, Write};

use gatecal_analysis::gate_dist::GateDistReport;
use gatecal_analysis::recommend::RecommendReport;

use crate::Renderer;
use crate::sections::{Section, gate_dist_sections, recommend_sections, text_histogram};

/// GitHub-flavoured Markdown.
#[derive(Clone, Copy, Debug, Default)]
pub struct Markdown;

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Writes sections as Markdown tables under `###` titles.
pub fn write_sections(sections: &[Section], w: &mut dyn Write) -> io::Result<()> {
    for s in sections {
        writeln!(w, "### {}\n", s.title)?;
        writeln!(
            w,
            "| {} |",
            s.headers
                .iter()
                .map(|h| cell(h))
                .collect::<Vec<_>>()
                .join(" | ")
        )?;
        let align: Vec<&str> = (0..s.headers.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
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
            writeln!(w, "- {n}")?;
        }
        if !s.notes.is_empty() {
            writeln!(w)?;
        }
    }
    Ok(())
}

impl Renderer for Markdown {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "## gatecal gate-dist report\n")?;
        write_sections(&gate_dist_sections(report), w)?;
        for d in &report.deployments {
            writeln!(
                w,
                "### Gate input histogram: {} (n = {}, ms)\n",
                d.name, d.stats.gate_input_ms.count
            )?;
            writeln!(w, "```text")?;
            for line in text_histogram(&d.histogram, d.stats.bar_ms, 40) {
                writeln!(w, "{line}")?;
            }
            writeln!(w, "```\n")?;
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
            writeln!(w, "### EPP plugin parameters: {}\n", d.name)?;
            writeln!(w, "```yaml\n{}```\n", d.recommended.yaml)?;
        }
        writeln!(w, "<sub>schema {}</sub>", report.schema)
    }
}
