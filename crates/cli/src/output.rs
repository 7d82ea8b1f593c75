//! Where output goes, which format by default, and how errors become exit codes.
//!
//! Every output file is checked and opened by [`Outputs::open`] before any
//! input is read: a missing folder or a folder that takes no new file
//! fails at once, and an output that is a file the run reads (the same
//! device and inode: the same path, a symlink or a hard link to it; an
//! input named by path, a file of an input folder whose content is an
//! input, a `--config`) is an error naming both, so no input is ever
//! replaced. A file of an input folder that is no input (an earlier
//! report) is not read (see [`gatecal_parser::InputFiles::exclude_output`]).
//! A regular file is written whole or not at all, through a temporary file
//! renamed onto it ([`crate::atomic`]); a special file (`/dev/null`,
//! `/dev/stdout`, a FIFO) is written in place.
//!
//! Exit codes: 0 on success and when the reader closed the pipe
//! (`gate-dist … | head`), 1 when `--strict` found malformed lines, 2 on
//! usage or I/O errors (the message names the path), 3 when the input held
//! no filter decision (the message gives the likely cause:
//! [`crate::pipeline::no_decisions`]), 101 on an internal error (a panic:
//! [`crate::internal_error`]), 130, 143 and 129 after SIGINT, SIGTERM and
//! SIGHUP ([`crate::atomic::clean_up_on_signals`]).

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use gatecal_parser::{FileId, InputFiles};
use gatecal_render::Format;
use gatecal_render::markdown::RunInfo;

/// The input held no filter decision: exit 3, with the likely cause.
#[derive(Debug)]
pub struct NoDecisions(pub String);

impl fmt::Display for NoDecisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoDecisions {}

/// The exit code of an input without decisions (distinct from usage and I/O
/// errors, 2, and from `--strict`, 1).
pub const EXIT_NO_DECISIONS: u8 = 3;

/// `--strict` found malformed lines: exit 1.
#[derive(Debug)]
pub struct StrictFailure(pub String);

impl fmt::Display for StrictFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StrictFailure {}

/// Whether an error is, somewhere in its chain, a closed pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Maps a binary's result to its exit code, printing the error on stderr.
pub fn exit(bin: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<NoDecisions>().is_some() => {
            crate::term::eprint(bin, crate::term::Level::Error, &format!("{e:#}"));
            ExitCode::from(EXIT_NO_DECISIONS)
        }
        Err(e) if e.downcast_ref::<crate::fail_if::GatesHeld>().is_some() => {
            // One line per gate that held.
            for line in format!("{e:#}").lines() {
                eprintln!("{bin}: {}", gatecal_render::escape::terminal(line));
            }
            ExitCode::from(crate::fail_if::EXIT_GATES_HELD)
        }
        Err(e) if e.downcast_ref::<StrictFailure>().is_some() => {
            eprintln!(
                "{bin}: {}",
                gatecal_render::escape::terminal(&format!("{e:#}"))
            );
            ExitCode::from(1)
        }
        Err(e) => {
            crate::term::eprint(bin, crate::term::Level::Error, &format!("{e:#}"));
            ExitCode::from(2)
        }
    }
}

/// `--format`'s values: the report formats ([`gatecal_render::FORMATS`]).
pub type FormatArg = Format;

/// The format asked for, or the default: a table on a terminal, JSON otherwise.
pub fn resolve_format(asked: Option<FormatArg>, output_is_terminal: bool) -> Format {
    match asked {
        Some(f) => f,
        None if output_is_terminal => Format::Table,
        None => Format::Json,
    }
}

/// The format a report file's name implies: `.md`/`.markdown`, `.json`,
/// `.csv`, `.txt` (a table), as [`gatecal_render::FORMATS`] lists them.
pub fn format_of_path(path: &Path) -> Option<Format> {
    Format::of_extension(path.extension()?.to_str()?)
}

/// The report formats and the file names that imply them, for messages:
/// `--format table (-o NAME.txt), markdown (NAME.md, …), …`.
pub fn formats_help() -> String {
    let list: Vec<String> = gatecal_render::FORMATS
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let ext = f.extensions.first().copied().unwrap_or(f.name);
            let o = if i == 0 { "-o " } else { "" };
            match f.format {
                Format::Markdown => {
                    format!("{} ({o}NAME.{ext}, with SVG charts beside it)", f.name)
                }
                _ => format!("{} ({o}NAME.{ext})", f.name),
            }
        })
        .collect();
    format!("--format {}", list.join(", "))
}

/// kubectl's `-o` output format a bare `-o` value names (`wide`, `yaml`,
/// `jsonpath=…`), if it is one.
fn kubectl_format(name: &str) -> Option<&'static str> {
    let head = name.split_once('=').map_or(name, |(h, _)| h);
    [
        "wide",
        "yaml",
        "name",
        "jsonpath",
        "jsonpath-file",
        "jsonpath-as-json",
        "go-template",
        "go-template-file",
        "template",
        "templatefile",
        "custom-columns",
        "custom-columns-file",
    ]
    .into_iter()
    .find(|k| *k == head)
}

/// The extension of a file name that implies a format gatecal does not
/// write (`.yaml`, `.html`, …), if it has one.
fn foreign_extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    [
        "yaml", "yml", "html", "htm", "xml", "svg", "pdf", "png", "tsv", "xls", "xlsx", "toml",
        "jsonl", "ndjson", "rst", "adoc",
    ]
    .contains(&ext.as_str())
    .then_some(ext)
}

/// The report's format from `--format` and `-o`: the format asked for;
/// else the one the output file's extension implies (`.md`, `.json`,
/// `.csv`, `.txt`); else a table on a terminal and JSON otherwise. A
/// `--format` that contradicts the extension is an error, and so is
/// `-o json` (a bare format name as the file), with a hint.
pub fn report_format(asked: Option<FormatArg>, output: Option<&Path>) -> anyhow::Result<Format> {
    let output = output.filter(|p| p.as_os_str() != "-");
    if let Some(p) = output
        && let Some(name) = p.to_str()
        && let Some(f) = Format::parse(name)
    {
        bail!(
            "-o {name}: writes the report to a file named {name:?}; for the format, \
             use --format {} (or -o report.{}; -o ./{name} for such a file)",
            f.name(),
            f.spec().extensions.first().copied().unwrap_or(f.name())
        );
    }
    if let Some(p) = output
        && let Some(name) = p.to_str()
        && let Some(kind) = kubectl_format(name)
    {
        bail!(
            "-o {name}: kubectl's {kind} output format is not one of gatecal's; -o names the \
             report's file. The formats: {}{}",
            formats_help(),
            if kind == "wide" {
                "; a table never cut to the terminal's width: --format table --wide"
            } else {
                ""
            }
        );
    }
    let implied = output.and_then(format_of_path);
    if asked.is_none()
        && implied.is_none()
        && let Some(p) = output
        && let Some(ext) = foreign_extension(p)
    {
        bail!(
            "-o {}: .{ext} is no report format gatecal writes. The formats: {}; \
             or give --format to write one under this name",
            p.display(),
            formats_help()
        );
    }
    match (asked, implied) {
        (Some(a), Some(i)) => {
            let f = resolve_format(Some(a), false);
            if f != i {
                bail!(
                    "--format {} but -o {} names a {} file: drop --format, or give the file \
                     a name that fits",
                    f.name(),
                    output.map(|p| p.display().to_string()).unwrap_or_default(),
                    i.name()
                );
            }
            Ok(f)
        }
        (None, Some(i)) => Ok(i),
        (a, None) => Ok(resolve_format(a, stdout_is_terminal(output))),
    }
}

/// The format of `--list-deployments`: the one asked for (`--format`, or
/// `-o`'s name, as [`report_format`] resolved it), else text wherever it
/// goes (the list is for people, as `kubectl get`'s is).
pub fn list_format(asked: Option<FormatArg>, output: Option<&Path>, report: Format) -> Format {
    let implied = output
        .filter(|p| p.as_os_str() != "-")
        .and_then(format_of_path);
    if asked.is_some() || implied.is_some() {
        report
    } else {
        Format::Table
    }
}

/// The width tables fit in: the terminal's when the report goes to one
/// (`$COLUMNS` when set, else the real width), `$COLUMNS` when set for a
/// pipe or file, and otherwise (and with `--wide`) none: full width.
pub fn table_width(output: Option<&Path>, wide: bool) -> Option<u16> {
    if wide {
        return None;
    }
    let env = gatecal_render::table::columns_env();
    if stdout_is_terminal(output.filter(|p| p.as_os_str() != "-")) {
        return env
            .or_else(|| terminal_size::terminal_size_of(io::stdout()).map(|(w, _)| w.0.max(40)));
    }
    env
}

/// The renderer of a report: tables fit `width` ([`table_width`]);
/// Markdown names `run` in its summary.
pub fn report_renderer(
    format: Format,
    width: Option<u16>,
    run: RunInfo,
) -> Box<dyn gatecal_render::Renderer> {
    (format.spec().make)(gatecal_render::RenderContext { width, run })
}

/// An argument as a POSIX shell reads it back: bare when safe, else in
/// single quotes.
fn shell_word(a: &str) -> String {
    let safe = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c));
    if safe {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// The command line this process was started with, the binary by its
/// file name.
pub fn command_line() -> String {
    let mut args = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let bin = args
        .next()
        .map(|b| {
            Path::new(&b)
                .file_name()
                .map_or(b.clone(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    std::iter::once(bin)
        .chain(args.map(|a| shell_word(&a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `target` as a link relative to the folder `from` (both exist): `../x.svg`.
pub fn relative_link(target: &Path, from: &Path) -> Option<String> {
    let t = target.canonicalize().ok()?;
    let f = from.canonicalize().ok()?;
    let tc: Vec<_> = t.components().collect();
    let fc: Vec<_> = f.components().collect();
    let common = tc.iter().zip(&fc).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); fc.len() - common];
    parts.extend(
        tc[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Some(parts.join("/"))
}

/// What a report's summary names: the version, the command line, and the
/// SVG as a link from the report's folder (the current folder for stdout).
pub fn run_info(output: Option<&Path>, svg: Option<&Path>) -> RunInfo {
    let from = output
        .filter(|p| p.as_os_str() != "-")
        .and_then(|p| p.parent())
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    RunInfo {
        version: crate::term::VERSION.to_string(),
        command: command_line(),
        svg: svg.and_then(|s| relative_link(s, from)),
        ..RunInfo::default()
    }
}

/// [`run_info`], with each deployment's SVG `(deployment, file)` linked
/// from the report's folder too (those written).
pub fn run_info_with_svgs(
    output: Option<&Path>,
    svg: Option<&Path>,
    deployment_svgs: &[(String, PathBuf)],
) -> RunInfo {
    let from = output
        .filter(|p| p.as_os_str() != "-")
        .and_then(|p| p.parent())
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    RunInfo {
        deployment_svgs: deployment_svgs
            .iter()
            .filter_map(|(n, p)| relative_link(p, from).map(|l| (n.clone(), l)))
            .collect(),
        ..run_info(output, svg)
    }
}

/// Whether the report goes to a terminal (no `-o`, stdout is a tty).
pub fn stdout_is_terminal(output: Option<&Path>) -> bool {
    output.is_none() && io::stdout().is_terminal()
}

/// Writes with `f` to `-o FILE` (or `-` / none for stdout), buffered,
/// flushed; a file is written whole or not at all ([`Outputs::open`]).
pub fn write_output(
    output: Option<&Path>,
    f: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<()> {
    Outputs::default()
        .open("-o", output, &mut InputFiles::default())?
        .write(f)
}

/// How an output file is written.
#[derive(Debug)]
enum How {
    /// To a temporary file beside the target, renamed onto it once
    /// written in full.
    Replace {
        temp: crate::atomic::Temp,
        target: PathBuf,
    },
    /// In place: a special file (`/dev/null`, `/dev/stdout`, a FIFO, a
    /// device, process substitution), opened for appending.
    InPlace,
}

/// Writes `--svg`: `overall` to `file`, and with several deployments
/// (`names`) one SVG per deployment beside it, `STEM-DEPLOYMENT.svg`
/// ([`gatecal_render::svg::deployment_file_names`]), drawn by `one(i)`.
/// A single deployment gets `one(0)` in `file` alone, and so does a
/// special file (`/dev/null`, a pipe), which has no folder beside it.
/// Returns each per-deployment file, for the Markdown's links.
pub fn write_svg_set(
    file: OutputFile,
    outputs: &Outputs,
    names: &[&str],
    stem_default: &str,
    overall: impl FnOnce() -> String,
    one: impl Fn(usize) -> String,
) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let path = file.path().to_path_buf();
    if names.len() == 1 {
        let s = one(0);
        file.write(|w| w.write_all(s.as_bytes()))?;
        return Ok(Vec::new());
    }
    let special = file.is_special();
    let s = overall();
    file.write(|w| w.write_all(s.as_bytes()))?;
    if special {
        return Ok(Vec::new());
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| stem_default.into());
    let mut written = Vec::new();
    for (i, f) in gatecal_render::svg::deployment_file_names(&stem, names)
        .into_iter()
        .enumerate()
    {
        let p = path.with_file_name(f);
        let s = one(i);
        outputs
            .open_late("--svg", &p)?
            .write(|w| w.write_all(s.as_bytes()))?;
        written.push((names[i].to_string(), p));
    }
    Ok(written)
}

/// One output file, checked and opened before any input is read: a
/// regular file (or a new one) as a temporary file in its target's folder,
/// renamed onto the target when written in full ([`crate::atomic`]); a
/// special file as itself.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    file: File,
    how: How,
}

impl OutputFile {
    /// Its path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it is a special file written in place (`/dev/null`, a
    /// FIFO, a device), not a regular file.
    pub fn is_special(&self) -> bool {
        matches!(self.how, How::InPlace)
    }

    /// A buffered writer over it; [`FileWriter::finish`] completes it.
    pub fn into_writer(self) -> FileWriter {
        FileWriter {
            w: BufWriter::new(self.file),
            how: self.how,
            path: self.path,
        }
    }

    /// Writes the file with `f`, buffered, and completes it.
    pub fn write(self, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
        let path = self.path.clone();
        let mut w = self.into_writer();
        f(&mut w).with_context(|| format!("cannot write {}", path.display()))?;
        w.finish()
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// A buffered writer over an [`OutputFile`]. Dropped without
/// [`FileWriter::finish`] (an error), the file's target is left as it was.
#[derive(Debug)]
pub struct FileWriter {
    w: BufWriter<File>,
    how: How,
    path: PathBuf,
}

impl Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.w.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

impl FileWriter {
    /// Its path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes the file and, for a regular file, renames it onto its
    /// target: the output is then complete.
    pub fn finish(self) -> io::Result<()> {
        let FileWriter { w, how, .. } = self;
        let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        drop(file);
        match how {
            How::Replace { temp, target } => temp.commit(&target),
            How::InPlace => Ok(()),
        }
    }
}

/// A writer over a [`Destination`].
#[derive(Debug)]
pub enum Writer {
    /// Standard output, buffered.
    Stdout(BufWriter<io::Stdout>),
    /// A file.
    File(FileWriter),
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Writer::Stdout(w) => w.write(buf),
            Writer::File(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Writer::Stdout(w) => w.write_all(buf),
            Writer::File(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Writer::Stdout(w) => w.flush(),
            Writer::File(w) => w.flush(),
        }
    }
}

impl Writer {
    /// Flushes, and completes a file ([`FileWriter::finish`]).
    pub fn finish(self) -> io::Result<()> {
        match self {
            Writer::Stdout(mut w) => w.flush(),
            Writer::File(w) => w.finish(),
        }
    }
}

/// Where a report goes: stdout or an opened file.
#[derive(Debug)]
pub enum Destination {
    /// Standard output.
    Stdout,
    /// A file.
    File(OutputFile),
}

impl Destination {
    /// A buffered writer; [`Writer::finish`] completes it.
    pub fn into_writer(self) -> Writer {
        match self {
            Destination::File(o) => Writer::File(o.into_writer()),
            Destination::Stdout => Writer::Stdout(BufWriter::new(io::stdout())),
        }
    }

    /// Writes with `f`, buffered, and completes the output.
    pub fn write(self, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
        match self {
            Destination::File(o) => o.write(f),
            Destination::Stdout => {
                let stdout = io::stdout();
                let mut w = BufWriter::new(stdout.lock());
                f(&mut w).context("cannot write to stdout")?;
                w.flush().context("cannot write to stdout")
            }
        }
    }
}

/// One output opened: its flag, its path as given, where it ends up, and
/// the identity of the file there, if one existed.
#[derive(Debug)]
struct Opened {
    flag: String,
    path: PathBuf,
    target: PathBuf,
    id: Option<FileId>,
}

/// Whether an open file is a character device (`/dev/null`, a terminal).
fn is_char_device(file: &File) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        file.metadata()
            .is_ok_and(|m| m.file_type().is_char_device())
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        false
    }
}

/// Whether a folder (canonical) holds files that are no place for a
/// temporary file: `/dev` (`/dev/stdout`, `/dev/null`) and `/proc`
/// (`/dev/fd/N`, `/proc/self/fd/N`, whatever they point to).
fn is_special_folder(dir: &Path) -> bool {
    cfg!(unix) && (dir == Path::new("/dev") || dir.starts_with("/proc"))
}

/// The outputs of a run, checked against its inputs.
#[derive(Debug, Default)]
pub struct Outputs {
    /// The name and identity of every input named by path, and of the
    /// other files read.
    inputs: Vec<(String, FileId)>,
    /// The files found in input folders or by globs: name, path, identity.
    found: Vec<(String, PathBuf, FileId)>,
    /// Outputs opened so far.
    opened: Vec<Opened>,
    /// The flag whose output goes to stdout, if any.
    stdout: Option<String>,
}

impl Outputs {
    /// Outputs checked against `inputs` (the log and record files) and
    /// `others` (other files the run reads, e.g. `--config`, with the flag
    /// that names them).
    pub fn new(inputs: &InputFiles, others: &[(&str, &Path)]) -> Outputs {
        let mut all = Vec::new();
        let mut found = Vec::new();
        for (name, path, id, named) in inputs.files() {
            let Some(id) = id else { continue };
            if named {
                all.push((name.to_string(), id.clone()));
            } else if let Some(p) = path {
                found.push((name.to_string(), p.to_path_buf(), id.clone()));
            }
        }
        for (flag, p) in others {
            if let Ok(id) = FileId::of(p) {
                all.push((format!("{flag} {}", p.display()), id));
            }
        }
        Outputs {
            inputs: all,
            found,
            opened: Vec::new(),
            stdout: None,
        }
    }

    /// Opens the output `path` of `flag` (stdout for none or `-`), before
    /// any input is read: its folder must exist and take a new file, it
    /// must not be a folder, nor a file the run reads (an input named by
    /// path, a file of an input folder whose content is an input, a
    /// `--config`: by device and inode, so through symlinks and hard links
    /// too), nor another output of the run. A regular file (or a new one)
    /// is written to a temporary file in its target's folder, renamed onto
    /// the target when complete; a special file (`/dev/null`,
    /// `/dev/stdout`, a FIFO, a device) is opened as itself. A file of an
    /// input folder that is no input (an earlier report) is taken out of
    /// `inputs`.
    pub fn open(
        &mut self,
        flag: &str,
        path: Option<&Path>,
        inputs: &mut InputFiles,
    ) -> anyhow::Result<Destination> {
        let Some(path) = path.filter(|p| p.as_os_str() != "-") else {
            if let Some(other) = &self.stdout {
                bail!("{other} and {flag} both write to stdout: give one of them a file");
            }
            self.check_stdout(flag)?;
            self.stdout = Some(flag.to_string());
            return Ok(Destination::Stdout);
        };
        let (file, opened) = self.prepare(flag, path, Some(inputs))?;
        self.opened.push(opened);
        Ok(Destination::File(file))
    }

    /// Opens a file written after the inputs were read (e.g. one SVG per
    /// deployment beside `--svg`), checked as [`Outputs::open`] checks
    /// (a file of an input folder by its content).
    pub fn open_late(&self, flag: &str, path: &Path) -> anyhow::Result<OutputFile> {
        self.prepare(flag, path, None).map(|(f, _)| f)
    }

    /// The checks of [`Outputs::open`], and the file opened.
    fn prepare(
        &self,
        flag: &str,
        path: &Path,
        inputs: Option<&mut InputFiles>,
    ) -> anyhow::Result<(OutputFile, Opened)> {
        let p = path.display();
        let existing = fs::metadata(path).ok();
        if existing.as_ref().is_some_and(fs::Metadata::is_dir) {
            bail!("{flag} {p}: is a folder, not a file");
        }
        let parent = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            bail!(
                "{flag} {p}: folder {} does not exist: create it first (mkdir -p {})",
                parent.display(),
                parent.display()
            );
        }
        let dir = parent
            .canonicalize()
            .with_context(|| format!("{flag} {p}: cannot find folder {}", parent.display()))?;
        let special = existing.as_ref().is_some_and(|m| !m.is_file()) || is_special_folder(&dir);
        if special {
            let file = File::options()
                .append(true)
                .open(path)
                .with_context(|| format!("{flag}: cannot open {p}"))?;
            let id =
                FileId::of_file(&file, path).with_context(|| format!("{flag}: cannot open {p}"))?;
            if is_char_device(&file) {
                // `/dev/null` for two outputs, say: nothing is mixed.
                self.check_inputs(flag, path, &id)?;
            } else {
                self.check(flag, path, Some(&id), path)?;
            }
            let opened = Opened {
                flag: flag.to_string(),
                path: path.to_path_buf(),
                target: path.to_path_buf(),
                id: Some(id),
            };
            let file = OutputFile {
                path: path.to_path_buf(),
                file,
                how: How::InPlace,
            };
            return Ok((file, opened));
        }
        let Some(name) = path.file_name() else {
            bail!("{flag} {p}: not a file name");
        };
        // A symlink is followed: its target is replaced, the link kept.
        let target = match &existing {
            Some(_) => path
                .canonicalize()
                .with_context(|| format!("{flag}: cannot open {p}"))?,
            None => dir.join(name),
        };
        let id = match &existing {
            Some(_) => {
                Some(FileId::of(&target).with_context(|| format!("{flag}: cannot open {p}"))?)
            }
            None => None,
        };
        self.check(flag, path, id.as_ref(), &target)?;
        if let Some(id) = &id {
            self.check_found(flag, path, id, inputs)?;
        }
        let (Some(tdir), Some(tname)) = (target.parent(), target.file_name()) else {
            bail!("{flag} {p}: not a file name");
        };
        let (temp, file) = crate::atomic::Temp::create(tdir, tname, existing.as_ref())
            .with_context(|| {
                format!(
                    "{flag} {p}: cannot create a file in folder {}",
                    tdir.display()
                )
            })?;
        let opened = Opened {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            target: target.clone(),
            id,
        };
        let file = OutputFile {
            path: path.to_path_buf(),
            file,
            how: How::Replace { temp, target },
        };
        Ok((file, opened))
    }

    /// Not a file the run reads by name.
    fn check_inputs(&self, flag: &str, path: &Path, id: &FileId) -> anyhow::Result<()> {
        if let Some((input, _)) = self.inputs.iter().find(|(_, i)| i == id) {
            bail!(
                "{flag} {} is the input {input} (the same file): it would be overwritten",
                path.display()
            );
        }
        Ok(())
    }

    /// Not a file the run reads by name, nor another output.
    fn check(
        &self,
        flag: &str,
        path: &Path,
        id: Option<&FileId>,
        target: &Path,
    ) -> anyhow::Result<()> {
        let p = path.display();
        if let Some(id) = id {
            self.check_inputs(flag, path, id)?;
        }
        let same = |o: &Opened| match (id, &o.id) {
            (Some(a), Some(b)) => a == b,
            _ => o.target == target,
        };
        if let Some(o) = self.opened.iter().find(|o| same(o) && o.path != path) {
            bail!(
                "{flag} {p} and {} {} are the same file",
                o.flag,
                o.path.display()
            );
        }
        if let Some(o) = self.opened.iter().find(|o| same(o) && o.path == path) {
            if o.flag == flag {
                bail!("{flag} {p} is given twice");
            }
            bail!("{flag} and {} both write {p}", o.flag);
        }
        Ok(())
    }

    /// A file found in an input folder (or by a glob): an error when the
    /// run reads it (its content is an input), else it is not read.
    fn check_found(
        &self,
        flag: &str,
        path: &Path,
        id: &FileId,
        inputs: Option<&mut InputFiles>,
    ) -> anyhow::Result<()> {
        let p = path.display();
        match inputs {
            Some(inputs) => {
                if let Err(input) = inputs.exclude_output(id, flag) {
                    bail!(
                        "{flag} {p} is the input {input} (the same file): it would be overwritten"
                    );
                }
            }
            None => {
                if let Some((input, _, _)) = self.found.iter().find(|(_, q, i)| {
                    i == id && gatecal_parser::looks_like_input(q).unwrap_or(true)
                }) {
                    bail!(
                        "{flag} {p} is the input {input} (the same file): it would be overwritten"
                    );
                }
            }
        }
        Ok(())
    }

    /// Standard output redirected to an input (`gate-dist x.log >> x.log`)
    /// would read its own output.
    fn check_stdout(&self, flag: &str) -> anyhow::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsFd;
            let Ok(fd) = io::stdout().as_fd().try_clone_to_owned() else {
                return Ok(());
            };
            let f = File::from(fd);
            if f.metadata().is_ok_and(|m| m.is_file())
                && let Ok(id) = FileId::of_file(&f, Path::new("-"))
                && let Some((input, _)) = self.inputs.iter().find(|(_, i)| *i == id)
            {
                let what = if flag == "-o" { "stdout" } else { flag };
                bail!("{what} is the input {input} (the same file): it would be overwritten");
            }
        }
        let _ = flag;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipe_is_found_in_the_chain() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }

    #[test]
    fn formats_from_the_output_name() {
        let p = |s: &str| Some(Path::new(s).to_path_buf());
        let f = |a: Option<&str>, o: Option<PathBuf>| {
            let a =
                a.map(|a| <FormatArg as clap::ValueEnum>::from_str(a, false).expect("a format"));
            report_format(a, o.as_deref())
        };
        assert_eq!(f(None, p("r.md")).unwrap(), Format::Markdown);
        assert_eq!(f(None, p("r.JSON")).unwrap(), Format::Json);
        assert_eq!(f(None, p("out/r.csv")).unwrap(), Format::Csv);
        assert_eq!(f(None, p("r.txt")).unwrap(), Format::Table);
        assert_eq!(f(Some("md"), p("r.md")).unwrap(), Format::Markdown);
        assert_eq!(f(Some("csv"), p("r.dat")).unwrap(), Format::Csv);
        assert_eq!(f(None, p("r.dat")).unwrap(), Format::Json);
        let e = f(Some("json"), p("r.md")).unwrap_err().to_string();
        assert!(
            e.contains("--format json") && e.contains("markdown file"),
            "{e}"
        );
        let e = f(None, p("json")).unwrap_err().to_string();
        assert!(e.contains("--format json"), "{e}");
        assert!(f(None, p("./json")).is_ok());
        // kubectl's reflexes: its formats, and names of formats gatecal
        // does not write, are errors listing the formats.
        for (o, says) in [
            ("wide", "--format table --wide"),
            ("yaml", "kubectl's yaml output format"),
            ("jsonpath={.items}", "kubectl's jsonpath output format"),
            ("r.yaml", ".yaml is no report format"),
            ("out/r.HTML", ".html is no report format"),
        ] {
            let e = f(None, p(o)).unwrap_err().to_string();
            assert!(e.contains(says), "{o}: {e}");
            assert!(e.contains("markdown (NAME.md"), "{o}: {e}");
        }
        assert_eq!(f(Some("json"), p("r.yaml")).unwrap(), Format::Json);
        assert_eq!(f(None, p("r.log")).unwrap(), Format::Json);
        let e = f(None, p("md")).unwrap_err().to_string();
        assert!(
            e.contains("--format markdown") && e.contains("report.md"),
            "{e}"
        );
    }

    #[test]
    fn links_and_words() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::create_dir_all(d.join("img")).unwrap();
        std::fs::write(d.join("img/g.svg"), "").unwrap();
        std::fs::write(d.join("a/b/g.svg"), "").unwrap();
        assert_eq!(
            relative_link(&d.join("img/g.svg"), &d.join("a/b")).as_deref(),
            Some("../../img/g.svg")
        );
        assert_eq!(
            relative_link(&d.join("a/b/g.svg"), &d.join("a/b")).as_deref(),
            Some("g.svg")
        );
        assert_eq!(relative_link(&d.join("none.svg"), d), None);
        assert_eq!(shell_word("epp.log"), "epp.log");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    #[test]
    fn formats() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[arg(long, value_enum)]
            format: Option<FormatArg>,
        }
        let asked = |args: &[&str]| {
            Cli::try_parse_from(args)
                .map(|c| c.format)
                .map_err(|e| e.to_string())
        };
        assert_eq!(resolve_format(None, true), Format::Table);
        assert_eq!(resolve_format(None, false), Format::Json);
        for (name, f) in [
            ("table", Format::Table),
            ("markdown", Format::Markdown),
            ("md", Format::Markdown),
            ("json", Format::Json),
            ("csv", Format::Csv),
        ] {
            let a = asked(&["x", "--format", name]).expect(name);
            assert_eq!(resolve_format(a, true), f, "{name}");
        }
        let e = asked(&["x", "--format", "xml"]).unwrap_err();
        assert!(
            e.contains("invalid value 'xml' for '--format <FORMAT>'"),
            "{e}"
        );
        assert!(
            e.contains("[possible values: table, markdown, json, csv]"),
            "{e}"
        );
    }

    #[test]
    fn writes_files_and_names_bad_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        write_output(Some(&p), |w| w.write_all(b"hi")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "hi");
        let bad = dir.path().join("no/such/dir/r.txt");
        let e = write_output(Some(&bad), |w| w.write_all(b"x")).unwrap_err();
        assert!(format!("{e:#}").contains("no/such/dir/r.txt"));
    }

    /// A write that fails leaves the file as it was and no temporary
    /// file; one that succeeds replaces it whole, through a symlink too.
    #[test]
    fn a_file_is_replaced_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        std::fs::write(&p, "old").unwrap();
        let e = write_output(Some(&p), |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert!(format!("{e:#}").contains("disk on fire"), "{e:#}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        let names = || -> Vec<_> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect()
        };
        assert_eq!(names().len(), 1);
        #[cfg(unix)]
        {
            let link = dir.path().join("link.txt");
            std::os::unix::fs::symlink("r.txt", &link).unwrap();
            write_output(Some(&link), |w| w.write_all(b"new")).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
            assert!(
                std::fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
            assert_eq!(names().len(), 2);
        }
    }
}
