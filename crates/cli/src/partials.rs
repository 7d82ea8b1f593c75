//! Reading partial reports for `gate-dist merge` and `recommend merge`:
//! files, folders and standard input, each document named in errors by
//! its file, or `FILE:N` / `-:N` for the `N`-th line.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::output::{
    Destination, FormatArg, Outputs, report_format, report_renderer, run_info_with_svgs,
    table_width,
};

/// What `gate-dist merge` and `recommend merge` both take; each adds its
/// own `--fail-if`.
#[derive(clap::Args, Debug)]
pub struct MergeCommon {
    /// Partial reports: files, folders (every *.part and *.json file in
    /// them), or - (stdin: any number of partials, one per line).
    #[arg(required = true, value_name = "PARTIAL")]
    pub partials: Vec<String>,

    /// Output format [default: from -o's extension, else table on a
    /// terminal, json otherwise].
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub format: Option<FormatArg>,

    /// Write the report to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Draw tables at their full width, even on a narrower terminal.
    #[arg(long)]
    pub wide: bool,

    /// Also write the merged partial report to FILE (- for stdout, the
    /// report then written only with -o), to merge again later.
    #[arg(long, value_name = "FILE")]
    pub emit_partial: Option<PathBuf>,
}

/// Runs a `merge` subcommand: opens its outputs, reads every partial with
/// `parse`, merges them with `merge`, writes the merged partial
/// (`to_line`) when asked, finishes the report and renders it; returns
/// the report for `--fail-if`.
pub fn run_merge<T, M, R>(
    args: &MergeCommon,
    parse: impl Fn(&str) -> Result<T, String>,
    merge: impl FnOnce(Vec<(String, T)>) -> anyhow::Result<M>,
    to_line: impl FnOnce(&M) -> String,
    finish: impl FnOnce(M) -> anyhow::Result<R>,
    render: impl FnOnce(&dyn gatecal_render::Renderer, &R, &mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<R> {
    let output = args.output.as_deref();
    let format = report_format(args.format, output)?;
    let width = table_width(output, args.wide);
    let (partial_out, out) = merge_outputs(&args.partials, args.emit_partial.as_deref(), output)?;
    let merged = merge(read_all(&args.partials, parse)?)?;
    if let Some(dest) = partial_out {
        let line = to_line(&merged);
        dest.write(|w| w.write_all(line.as_bytes()))?;
    }
    let report = finish(merged)?;
    if let Some(out) = out {
        let renderer = report_renderer(format, width, run_info_with_svgs(output, None, &[]));
        out.write(|w| render(renderer.as_ref(), &report, w))?;
    }
    Ok(report)
}

/// The most bytes of partial reports read from one file or from stdin.
pub const MAX_PARTIAL_BYTES: u64 = 1 << 30;

/// The outputs of a `merge` subcommand, checked against the partials it
/// reads and opened before any is read: the merged partial
/// (`--emit-partial`), then the report (`-o`; none when the partial goes
/// to stdout and no `-o` is given).
pub fn merge_outputs(
    partials: &[String],
    emit_partial: Option<&Path>,
    output: Option<&Path>,
) -> anyhow::Result<(Option<Destination>, Option<Destination>)> {
    let mut none = InputFiles::default();
    let others: Vec<(&str, &Path)> = partials
        .iter()
        .filter(|p| *p != "-")
        .map(|p| ("a partial", Path::new(p.as_str())))
        .collect();
    let mut outputs = Outputs::new(&none, &others);
    let partial_out = match emit_partial {
        Some(p) => Some(outputs.open("--emit-partial", Some(p), &mut none)?),
        None => None,
    };
    let out = match (&partial_out, output) {
        (Some(Destination::Stdout), None) => None,
        _ => Some(outputs.open("-o", output, &mut none)?),
    };
    Ok((partial_out, out))
}

/// Every partial document in `args` (files, folders of `*.part` and
/// `*.json` files, `-` for stdin, one partial per line), read by `parse`,
/// with the name errors give it.
pub fn read_all<T>(
    args: &[String],
    parse: impl Fn(&str) -> Result<T, String>,
) -> anyhow::Result<Vec<(String, T)>> {
    let mut out = Vec::new();
    let mut stdin_read = false;
    for a in args {
        if a == "-" {
            anyhow::ensure!(!stdin_read, "-: standard input given twice");
            stdin_read = true;
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_PARTIAL_BYTES)
                .read_to_string(&mut text)
                .map_err(|e| anyhow::anyhow!("-: cannot read standard input: {e}"))?;
            read_lines("-", &text, true, &parse, &mut out)?;
            continue;
        }
        let path = Path::new(a);
        let meta = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("{a}: {e}"))?;
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| anyhow::anyhow!("{a}: {e}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file() && p.extension().is_some_and(|x| x == "part" || x == "json")
                })
                .collect();
            files.sort();
            anyhow::ensure!(
                !files.is_empty(),
                "{a}: a folder without partial reports (*.part or *.json files)"
            );
            for f in files {
                read_file(&f, &parse, &mut out)?;
            }
        } else {
            read_file(path, &parse, &mut out)?;
        }
    }
    Ok(out)
}

fn read_file<T>(
    path: &Path,
    parse: &impl Fn(&str) -> Result<T, String>,
    out: &mut Vec<(String, T)>,
) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PARTIAL_BYTES).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{name}: not a partial report (not UTF-8 text: {e})"))?;
    read_lines(&name, &text, false, parse, out)
}

/// Every non-empty line of `text` a partial; named `name` (a file of one
/// partial) or `name:N` (the `N`-th line).
fn read_lines<T>(
    name: &str,
    text: &str,
    always_number: bool,
    parse: &impl Fn(&str) -> Result<T, String>,
    out: &mut Vec<(String, T)>,
) -> anyhow::Result<()> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    anyhow::ensure!(!lines.is_empty(), "{name}: empty: no partial report in it");
    let numbered = always_number || lines.len() > 1;
    for (i, line) in lines {
        let src = if numbered {
            format!("{name}:{}", i + 1)
        } else {
            name.to_string()
        };
        let p = parse(line).map_err(|e| anyhow::anyhow!("{src}: {e}"))?;
        out.push((src, p));
    }
    Ok(())
}

/// The parser's types a partial run names.
pub use gatecal_parser::{InputFiles, VllmStats};
