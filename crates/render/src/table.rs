//! Terminal tables (comfy-table), with a compact text histogram.

use std::io::{self, Write};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement};
use gatecal_analysis::gate_dist::GateDistReport;
use gatecal_analysis::recommend::RecommendReport;

use crate::Renderer;
use crate::sections::{Section, gate_dist_sections, recommend_sections, text_histogram};

/// Terminal tables. No colour: output is the same on a terminal and in a pipe.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// Maximum width in columns (tables wrap to fit).
    pub width: u16,
}

impl Default for Table {
    /// `$COLUMNS` when set (between 60 and 400), else 160.
    fn default() -> Self {
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<u16>().ok())
            .map(|c| c.clamp(60, 400))
            .unwrap_or(160);
        Table { width }
    }
}

/// Writes sections as tables, with titles and notes.
pub fn write_sections(sections: &[Section], width: u16, w: &mut dyn Write) -> io::Result<()> {
    for s in sections {
        writeln!(w, "{}", s.title)?;
        let mut t = comfy_table::Table::new();
        t.load_style(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width)
            .set_header(s.headers.clone());
        for r in &s.rows {
            t.add_row(r.clone());
        }
        for i in 1..s.headers.len() {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        writeln!(w, "{t}")?;
        for n in &s.notes {
            writeln!(w, "  {n}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

impl Renderer for Table {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        write_sections(&gate_dist_sections(report), self.width, w)?;
        for d in &report.deployments {
            writeln!(
                w,
                "Gate input histogram, {} (n = {}, ms)",
                d.name, d.stats.gate_input_ms.count
            )?;
            for line in text_histogram(&d.histogram, d.stats.bar_ms, 40) {
                writeln!(w, "  {line}")?;
            }
            writeln!(w)?;
        }
        Ok(())
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        write_sections(&recommend_sections(report), self.width, w)?;
        for d in &report.deployments {
            writeln!(w, "EPP plugin parameters to paste, {}:", d.name)?;
            for line in d.recommended.yaml.lines() {
                writeln!(w, "  {line}")?;
            }
            writeln!(w)?;
        }
        Ok(())
    }
}
