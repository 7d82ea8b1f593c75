//! `gate-dist merge`: partial reports in, the report one run over all their
//! input would give out (docs/partial-report.md, docs/scale-out.md).

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Parser;
use gatecal_analysis::{Partial, merge_partials};
use gatecal_cli::output::{Outputs, report_format, report_renderer, table_width};
use gatecal_parser::InputFiles;

/// The most bytes of partial reports read from one file or from stdin.
const MAX_PARTIAL_BYTES: u64 = 1 << 30;

/// Merges partial reports (written with --emit-partial) into one report:
/// the report, in every format, one gate-dist run over all their input
/// would print. Over shards of one log (by EPP pod, by time with a warm-up
/// before each shard's --since) the counts and exact gate inputs merge
/// exactly, reconstructed ones within the bound of docs/scale-out.md;
/// partials counting the same decisions twice, run with other options, or
/// under another config are refused, naming the file.
#[derive(Parser, Debug)]
#[command(name = "gate-dist merge", version = gatecal_cli::term::VERSION, max_term_width = 100)]
pub struct MergeArgs {
    /// Partial reports: files, folders (every *.part and *.json file in
    /// them), or - (stdin: any number of partials, one per line).
    #[arg(required = true, value_name = "PARTIAL")]
    pub partials: Vec<String>,

    /// Output format [default: from -o's extension, else table on a
    /// terminal, json otherwise].
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub format: Option<gatecal_cli::output::FormatArg>,

    /// Write the report to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Draw tables at their full width, even on a narrower terminal.
    #[arg(long)]
    pub wide: bool,

    /// Exit 4 when EXPR holds, as gate-dist --fail-if.
    #[arg(long, value_name = "EXPR", value_parser = gatecal_cli::fail_if::parse_gate_dist)]
    pub fail_if: Vec<gatecal_cli::fail_if::Gate>,

    /// Also write the merged partial report to FILE (- for stdout, the
    /// report then written only with -o), to merge again later.
    #[arg(long, value_name = "FILE")]
    pub emit_partial: Option<PathBuf>,
}

/// One partial document read, and where from.
fn read_all(args: &[String]) -> anyhow::Result<Vec<(String, Partial)>> {
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
            read_lines("-", &text, true, &mut out)?;
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
                read_file(&f, &mut out)?;
            }
        } else {
            read_file(path, &mut out)?;
        }
    }
    Ok(out)
}

fn read_file(path: &Path, out: &mut Vec<(String, Partial)>) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PARTIAL_BYTES).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{name}: not a partial report (not UTF-8 text: {e})"))?;
    read_lines(&name, &text, false, out)
}

/// Every non-empty line of `text` a partial; named `name` (a file of one
/// partial) or `name:N` (the `N`-th line).
fn read_lines(
    name: &str,
    text: &str,
    always_number: bool,
    out: &mut Vec<(String, Partial)>,
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
        let p = Partial::from_json(line).map_err(|e| anyhow::anyhow!("{src}: {e}"))?;
        out.push((src, p));
    }
    Ok(())
}

/// Runs `gate-dist merge`.
pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let format = report_format(args.format, args.output.as_deref())?;
    let width = table_width(args.output.as_deref(), args.wide);
    let mut none = InputFiles::default();
    let others: Vec<(&str, &Path)> = args
        .partials
        .iter()
        .filter(|p| *p != "-")
        .map(|p| ("a partial", Path::new(p.as_str())))
        .collect();
    let mut outputs = Outputs::new(&none, &others);
    let partial_out = match &args.emit_partial {
        Some(p) => Some(outputs.open("--emit-partial", Some(p), &mut none)?),
        None => None,
    };
    let out = match (&partial_out, &args.output) {
        (Some(gatecal_cli::output::Destination::Stdout), None) => None,
        _ => Some(outputs.open("-o", args.output.as_deref(), &mut none)?),
    };
    let partials = read_all(&args.partials)?;
    let merged = merge_partials(partials).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(dest) = partial_out {
        let line = merged.to_line();
        dest.write(|w| w.write_all(line.as_bytes()))?;
    }
    let report = merged.finish();
    if let Some(out) = out {
        out.write(|w| {
            report_renderer(
                format,
                width,
                gatecal_cli::output::run_info_with_svgs(args.output.as_deref(), None, &[]),
            )
            .gate_dist(&report, w)
        })?;
    }
    gatecal_cli::fail_if::check_gate_dist(&args.fail_if, &report)
}
