//! JSON: the report structs, pretty-printed. They are the documented schema.

use std::io::{self, Write};

use gatecal_analysis::{GateDistReport, RecommendReport};

use crate::Renderer;

/// Pretty JSON, one document, newline-terminated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Json;

/// Writes any report struct as pretty JSON.
pub fn write_json<T: serde::Serialize>(v: &T, w: &mut dyn Write) -> io::Result<()> {
    // Keep the I/O error's kind (a closed pipe must stay a closed pipe).
    serde_json::to_writer_pretty(&mut *w, v).map_err(|e| match e.io_error_kind() {
        Some(kind) => io::Error::new(kind, e),
        None => io::Error::other(e),
    })?;
    writeln!(w)
}

impl Renderer for Json {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        write_json(report, w)
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        write_json(report, w)
    }

    fn compare(
        &self,
        report: &gatecal_analysis::compare::CompareReport,
        w: &mut dyn Write,
    ) -> io::Result<()> {
        write_json(report, w)
    }
}
