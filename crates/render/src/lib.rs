//! # Brief overview
//!
//! Renderers for gatecal's reports, one file per format behind one trait,
//! [`Renderer`]: a terminal table ([`table`], comfy-table), Markdown for pull
//! requests ([`markdown`], tables plus an inline histogram), JSON
//! ([`json`], the report structs serialized as they are: they are the schema),
//! CSV ([`csv`], one row per deployment) and an SVG histogram ([`svg`]).
//! The human-readable formats share one table skeleton ([`sections`]), whose
//! notes say a text shared by several deployments once ([`notes`]).
//!
//! # Example
//!
//! ```
//! use gatecal_analysis::{ConfigSet, GateDist, GateDistOptions, InputSummary};
//! use gatecal_render::{Format, renderer};
//!
//! let report = GateDist::new(GateDistOptions::default(), ConfigSet::default())
//!     .finish(InputSummary::default());
//! let mut out = Vec::new();
//! renderer(Format::Json).gate_dist(&report, &mut out).unwrap();
//! assert!(String::from_utf8(out).unwrap().contains("\"schema\": \"gatecal.gate-dist/v3\""));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::io::{self, Write};

use gatecal_analysis::{GateDistReport, RecommendReport};

pub mod csv;
pub mod escape;
pub mod glossary;
pub mod json;
pub mod markdown;
pub mod notes;
pub mod num;
pub mod sections;
pub mod summary;
pub mod svg;
pub mod table;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Terminal tables.
    Table,
    /// Markdown.
    Markdown,
    /// JSON.
    Json,
    /// CSV.
    Csv,
}

impl Format {
    /// Parses `table`, `markdown` (or `md`), `json`, `csv`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "table" => Some(Format::Table),
            "markdown" | "md" => Some(Format::Markdown),
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    }
}

/// One output format.
pub trait Renderer {
    /// Writes a gate-dist report.
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()>;
    /// Writes a recommend report.
    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()>;
}

/// The renderer of a format.
pub fn renderer(format: Format) -> Box<dyn Renderer> {
    match format {
        Format::Table => Box::new(table::Table::default()),
        Format::Markdown => Box::new(markdown::Markdown::default()),
        Format::Json => Box::new(json::Json),
        Format::Csv => Box::new(csv::Csv),
    }
}
