//! # Brief overview
//!
//! Renderers for gatecal's reports, one file per format behind one trait,
//! [`Renderer`]: a terminal table ([`table`], comfy-table), Markdown for pull
//! requests ([`markdown`], tables plus an inline histogram), JSON
//! ([`json`], the report structs serialized as they are: they are the schema),
//! CSV ([`csv`], one row per deployment) and an SVG histogram ([`svg`]).
//! The before-and-after report of `gate-dist --compare` has its own
//! writer for every format ([`compare`]).
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

pub mod compare;
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
pub mod ttft_svg;

/// Output formats. Each has one row in [`FORMATS`], the only list of
/// formats: its `--format` spelling, the file names that imply it and its
/// renderer come from there.
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

/// What a renderer may use of the run: the width tables must fit, and the
/// run's identity for the summary block.
#[derive(Clone, Debug, Default)]
pub struct RenderContext {
    /// Columns the tables fit in; `None` for full width.
    pub width: Option<u16>,
    /// The command, outputs and SVGs of the run.
    pub run: markdown::RunInfo,
}

/// One format: how the user names it and how it is rendered.
#[derive(Clone, Copy, Debug)]
pub struct FormatSpec {
    /// The variant.
    pub format: Format,
    /// Its `--format` value.
    pub name: &'static str,
    /// Other `--format` spellings.
    pub aliases: &'static [&'static str],
    /// The `-o` file extensions that imply it (lower case), the first the
    /// one to suggest.
    pub extensions: &'static [&'static str],
    /// One line for `--format`'s help.
    pub help: &'static str,
    /// Its renderer.
    pub make: fn(RenderContext) -> Box<dyn Renderer>,
}

/// Every format, in the order `--help` lists them. Adding a format is a
/// [`Format`] variant, its row here and its renderer's file.
pub const FORMATS: &[FormatSpec] = &[
    FormatSpec {
        format: Format::Table,
        name: "table",
        aliases: &[],
        extensions: &["txt"],
        help: "Aligned text (the default on a terminal)",
        make: |c| {
            Box::new(table::Table {
                width: c.width,
                run: c.run,
            })
        },
    },
    FormatSpec {
        format: Format::Markdown,
        name: "markdown",
        aliases: &["md"],
        extensions: &["md", "markdown"],
        help: "Markdown, with SVG charts beside an -o file",
        make: |c| Box::new(markdown::Markdown { run: c.run }),
    },
    FormatSpec {
        format: Format::Json,
        name: "json",
        aliases: &[],
        extensions: &["json"],
        help: "One JSON document (the default otherwise)",
        make: |_| Box::new(json::Json),
    },
    FormatSpec {
        format: Format::Csv,
        name: "csv",
        aliases: &[],
        extensions: &["csv"],
        help: "Comma-separated values",
        make: |_| Box::new(csv::Csv),
    },
];

impl Format {
    /// Its row of [`FORMATS`].
    pub fn spec(self) -> &'static FormatSpec {
        FORMATS
            .iter()
            .find(|s| s.format == self)
            .expect("every Format has its row in FORMATS")
    }

    /// Its `--format` value.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses a `--format` value or alias (`table`, `markdown` or `md`,
    /// `json`, `csv`).
    pub fn parse(s: &str) -> Option<Format> {
        FORMATS
            .iter()
            .find(|f| f.name == s || f.aliases.contains(&s))
            .map(|f| f.format)
    }

    /// The format a file extension implies (any case), if any.
    pub fn of_extension(ext: &str) -> Option<Format> {
        let ext = ext.to_ascii_lowercase();
        FORMATS
            .iter()
            .find(|f| f.extensions.contains(&ext.as_str()))
            .map(|f| f.format)
    }
}

impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::OnceLock<Vec<Format>> = std::sync::OnceLock::new();
        ALL.get_or_init(|| FORMATS.iter().map(|f| f.format).collect())
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let s = self.spec();
        Some(
            clap::builder::PossibleValue::new(s.name)
                .aliases(s.aliases.iter().copied())
                .help(s.help),
        )
    }
}

/// One output format.
pub trait Renderer {
    /// Writes a gate-dist report.
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()>;
    /// Writes a recommend report.
    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()>;
    /// Writes a before-and-after report (`gate-dist --compare`).
    fn compare(
        &self,
        report: &gatecal_analysis::compare::CompareReport,
        w: &mut dyn Write,
    ) -> io::Result<()>;
}

/// The renderer of a format, tables at full width and no run named.
pub fn renderer(format: Format) -> Box<dyn Renderer> {
    (format.spec().make)(RenderContext::default())
}
