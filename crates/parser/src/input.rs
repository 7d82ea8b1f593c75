//! Inputs: files, folders, globs, stdin; gzip by content; pod owners.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::ParseOptions;
use crate::engine::{Opened, Peeked};
use crate::error::ParseError;

mod decode;
pub(crate) use decode::{Decoded, PEEK_BYTES, decode, peek};

/// One input argument: a path (file, folder or glob) or stdin, optionally
/// named `NAME=PATH` to give its deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSpec {
    /// The deployment name given as `NAME=PATH`, if any.
    pub name: Option<String>,
    /// What to read.
    pub source: InputSource,
}

/// What an [`InputSpec`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSource {
    /// A file, a folder (read recursively, in sorted order) or a glob pattern.
    Path(PathBuf),
    /// Standard input (`-`).
    Stdin,
}

impl InputSpec {
    /// Parses a command-line input: `-` is stdin; `NAME=PATH` names the
    /// deployment when `NAME` is not empty, contains no `/`, and the whole
    /// argument is not itself an existing path; anything else is a path,
    /// folder or glob.
    pub fn parse(arg: &str) -> InputSpec {
        if let Some((name, path)) = arg.split_once('=')
            && !name.is_empty()
            && !name.contains('/')
            && !name.contains(std::path::MAIN_SEPARATOR)
            && !path.is_empty()
            && !Path::new(arg).exists()
        {
            let mut spec = InputSpec::parse(path);
            spec.name = Some(name.to_string());
            return spec;
        }
        if arg == "-" {
            InputSpec::stdin()
        } else {
            InputSpec::path(arg)
        }
    }

    /// A path input without a name.
    pub fn path(path: impl Into<PathBuf>) -> InputSpec {
        InputSpec {
            name: None,
            source: InputSource::Path(path.into()),
        }
    }

    /// Standard input without a name.
    pub fn stdin() -> InputSpec {
        InputSpec {
            name: None,
            source: InputSource::Stdin,
        }
    }

    /// Sets the deployment name.
    pub fn named(mut self, name: impl Into<String>) -> InputSpec {
        self.name = Some(name.into());
        self
    }
}

/// The identity of a file: device and inode (through symlinks and hard
/// links, every name of a file has the same), or on other systems its
/// canonical path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
    #[cfg(not(unix))]
    path: PathBuf,
}

impl FileId {
    /// The identity of the file at `path`, following symlinks.
    pub fn of(path: &Path) -> io::Result<FileId> {
        let m = fs::metadata(path)?;
        Ok(FileId::from_meta(path, &m))
    }

    /// The identity of an open file (`path` is its name, used on systems
    /// without inodes).
    pub fn of_file(file: &fs::File, path: &Path) -> io::Result<FileId> {
        let m = file.metadata()?;
        Ok(FileId::from_meta(path, &m))
    }

    #[cfg(unix)]
    fn from_meta(_path: &Path, m: &fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    #[cfg(not(unix))]
    fn from_meta(path: &Path, _m: &fs::Metadata) -> FileId {
        FileId {
            path: path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
        }
    }
}

/// Why a file is not read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
#[non_exhaustive]
pub enum SkipReason {
    /// Found in a folder or by a glob, and not a regular file (a FIFO, a
    /// socket, a device): reading it could block forever.
    NotRegular {
        /// What it is.
        what: &'static str,
    },
    /// A symlink in a folder that cannot be followed (a loop, or its target
    /// is missing).
    BadSymlink {
        /// The system's error.
        error: String,
    },
    /// A folder already walked: a symlink loop, or a second link to it.
    FolderSeen {
        /// The folder's first path.
        first: String,
    },
    /// The same file (device and inode) as an input listed before it.
    Duplicate {
        /// The first name it was read under.
        first: String,
    },
    /// A file this run writes (an output named by `flag`).
    Output {
        /// The flag that names it, e.g. `--emit-decisions`.
        flag: String,
    },
    /// Found in a folder or by a glob, and its first lines are none of
    /// the inputs read (EPP or vLLM logs, decision records).
    NotAnInput,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::NotRegular { what } => write!(f, "not a regular file ({what})"),
            SkipReason::BadSymlink { error } => write!(f, "symlink not followed ({error})"),
            SkipReason::FolderSeen { first } => {
                write!(
                    f,
                    "the same folder as {first} (symlink loop or second link)"
                )
            }
            SkipReason::Duplicate { first } => {
                write!(f, "the same file as {first}, read once")
            }
            SkipReason::Output { flag } => write!(f, "written by this run ({flag})"),
            SkipReason::NotAnInput => f.write_str(&format!(
                "not {} (by its first lines)",
                crate::sniff::kinds_list()
            )),
        }
    }
}

/// A file not read, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Its path as found.
    pub path: String,
    /// Why it was not read.
    #[serde(flatten)]
    pub reason: SkipReason,
}

impl std::fmt::Display for SkippedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// One file to read after expanding folders and globs.
#[derive(Debug)]
pub(crate) struct Expanded {
    /// `None` for stdin.
    pub path: Option<PathBuf>,
    /// Display name (`-` for stdin).
    pub display: String,
    /// `NAME=` of the spec.
    pub explicit: Option<String>,
    /// Its identity (`None` for stdin).
    pub id: Option<FileId>,
    /// Found in a folder or by a glob (not named by path): read only when
    /// its first lines are an input ([`crate::sniff`]).
    pub found: bool,
    /// What its first bytes showed, once looked at ([`InputFiles::probe`]).
    pub probe: Option<Probe>,
}

/// A stream opened once and kept open, its start peeked: stdin, a FIFO,
/// process substitution, a device.
pub(crate) type Held = Opened<Peeked<Decoded<Box<dyn Read + Send>>>>;

/// What a file's first bytes showed, read once before the parse.
pub(crate) enum Probe {
    /// A regular file, closed again: whether it holds traces, and whether
    /// its first lines are an input ([`crate::sniff`]; looked at only for
    /// a file found in a folder or by a glob). It is opened again to be
    /// parsed, and must then be the same file (device and inode).
    Regular {
        /// Its start is a trace document.
        traces: bool,
        /// Its first lines are of an input kind.
        input: bool,
    },
    /// Not a regular file: never opened twice, so kept open with its start
    /// read, to be parsed from there.
    Held(Box<Held>),
    /// It could not be opened or its start read: the error, reported when
    /// it is parsed.
    Failed(Option<io::Error>),
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Probe::Regular { traces, input } => f
                .debug_struct("Regular")
                .field("traces", traces)
                .field("input", input)
                .finish(),
            Probe::Held(h) => f
                .debug_struct("Held")
                .field("traces", &h.traces)
                .field("gzip", &h.gzip)
                .finish(),
            Probe::Failed(e) => f.debug_tuple("Failed").field(e).finish(),
        }
    }
}

impl Probe {
    /// Whether the file holds traces (a file that failed does not).
    pub(crate) fn traces(&self) -> bool {
        match self {
            Probe::Regular { traces, .. } => *traces,
            Probe::Held(h) => h.traces,
            Probe::Failed(_) => false,
        }
    }
}

/// Reads up to `want` bytes of a (decoded) stream's start: as much as it
/// gives (a cut or corrupt gzip stream is read as far as it goes; the
/// parse reports the error).
fn read_head(r: impl Read, want: usize) -> Vec<u8> {
    let mut head = Vec::with_capacity(want.min(PEEK_BYTES));
    let _ = r.take(want as u64).read_to_end(&mut head);
    head
}

/// The file `f` opened for reading: a regular file must be the one
/// expanded (its device and inode), or it was replaced meanwhile.
pub(crate) fn open_checked(f: &Expanded, path: &Path) -> io::Result<(fs::File, fs::Metadata)> {
    let file = fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file()
        && let Some(id) = &f.id
        && FileId::from_meta(path, &meta) != *id
    {
        return Err(io::Error::other(
            "replaced by another file while this run read its inputs",
        ));
    }
    Ok((file, meta))
}

impl Expanded {
    /// Looks at the file's start: a regular file is read from its start
    /// and closed (at most 64 KiB, after gzip decompression, for a file
    /// found in a folder; 4 KiB otherwise); anything else is opened once
    /// and kept open ([`Probe::Held`]).
    fn probe(&self, opts: &ParseOptions) -> Probe {
        let hold = |r: Box<dyn Read + Send>| match crate::engine::open(r, opts) {
            Ok(h) => Probe::Held(Box::new(h)),
            Err(e) => Probe::Failed(Some(e)),
        };
        let Some(path) = &self.path else {
            return hold(Box::new(io::stdin()));
        };
        let (file, meta) = match open_checked(self, path) {
            Ok(f) => f,
            Err(e) => return Probe::Failed(Some(e)),
        };
        if !meta.is_file() {
            return hold(Box::new(file));
        }
        let want = if self.found {
            crate::sniff::SNIFF_BYTES
        } else {
            PEEK_BYTES
        };
        let head = match decode(file) {
            Ok((r, _, _)) => read_head(r, want),
            Err(e) => return Probe::Failed(Some(e)),
        };
        let traces = match opts.format {
            crate::InputFormat::Auto => {
                crate::trace::looks_like_traces(&head[..head.len().min(PEEK_BYTES)])
            }
            f => f == crate::InputFormat::Traces,
        };
        Probe::Regular {
            traces,
            input: !self.found || crate::sniff::sniff(&head).is_some(),
        }
    }
}

/// Whether the regular file at `path` would be read if found in a folder:
/// its first lines (64 lines or 64 KiB, after gzip decompression) are of
/// an input kind (EPP or vLLM log lines, decision records, OpenTelemetry
/// traces). `false` for a file that is not regular.
pub fn looks_like_input(path: &Path) -> io::Result<bool> {
    let file = fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(false);
    }
    let (r, _, _) = decode(file)?;
    Ok(crate::sniff::sniff(&read_head(r, crate::sniff::SNIFF_BYTES)).is_some())
}

/// A file taken out of the inputs by [`InputFiles::take_files`].
pub struct TakenFile {
    /// Its name as given or found.
    pub display: String,
    source: Taken,
}

enum Taken {
    /// A regular file, opened again to be read.
    Path(Expanded),
    /// A stream kept open since its start was read.
    Held(Box<Held>),
}

impl TakenFile {
    /// The whole file, decompressed when it is gzip, from its start (read
    /// once for a stream: its start comes from what was peeked).
    pub fn reader(self) -> io::Result<Box<dyn Read + Send>> {
        match self.source {
            Taken::Held(h) => Ok(Box::new(h.r)),
            Taken::Path(f) => {
                let Some(p) = &f.path else {
                    return Err(io::Error::other("standard input taken as a file"));
                };
                let (file, _) = open_checked(&f, p)?;
                let (r, _, _) = decode(file)?;
                Ok(Box::new(r))
            }
        }
    }
}

/// The files a parse reads: the inputs with folders and globs expanded,
/// each file once, and the files skipped on the way.
///
/// A file given by path is read whatever it is (a FIFO, process
/// substitution, any content). Under a folder (walked recursively, in
/// sorted order, hidden entries skipped) or matched by a glob, only regular
/// files are read, and only those whose first lines are EPP or vLLM log
/// lines or decision records (see [`InputFiles::skipped`]); a symlink that
/// cannot be followed (a loop, a missing target) and a folder met twice are
/// skipped. A file met twice (by device and inode: through a symlink, a
/// hard link, a glob and a folder) is read once.
#[derive(Debug, Default)]
pub struct InputFiles {
    pub(crate) files: Vec<Expanded>,
    pub(crate) skipped: Vec<SkippedFile>,
}

impl InputFiles {
    /// Expands the inputs (without reading any file).
    pub fn expand(specs: &[InputSpec]) -> Result<InputFiles, ParseError> {
        let mut out = InputFiles::default();
        let mut seen_dirs = std::collections::HashMap::new();
        for spec in specs {
            expand_one(spec, &mut out, &mut seen_dirs)?;
        }
        // Each file once.
        let mut first: std::collections::HashMap<FileId, String> = Default::default();
        let mut stdin_seen = false;
        let files = std::mem::take(&mut out.files);
        for f in files {
            // Stdin (a terminal, say) given twice.
            if f.path.is_none() {
                if stdin_seen {
                    out.skipped.push(SkippedFile {
                        path: f.display.clone(),
                        reason: SkipReason::Duplicate {
                            first: "-".to_string(),
                        },
                    });
                    continue;
                }
                stdin_seen = true;
            }
            if let Some(id) = &f.id {
                if let Some(d) = first.get(id) {
                    out.skipped.push(SkippedFile {
                        path: f.display.clone(),
                        reason: SkipReason::Duplicate { first: d.clone() },
                    });
                    continue;
                }
                first.insert(id.clone(), f.display.clone());
            }
            out.files.push(f);
        }
        Ok(out)
    }

    /// The files to read: display name, path (`None` for stdin), identity,
    /// and whether it was named by path (`false`: found in a folder or by
    /// a glob).
    pub fn files(&self) -> impl Iterator<Item = (&str, Option<&Path>, Option<&FileId>, bool)> {
        self.files.iter().map(|f| {
            (
                f.display.as_str(),
                f.path.as_deref(),
                f.id.as_ref(),
                !f.found,
            )
        })
    }

    /// Takes the file `id` out of the files to read, as written by this run
    /// (`flag` names the output): a file found in a folder or by a glob
    /// that is no input by its content (a report, a chart) is skipped
    /// ([`SkipReason::Output`]). `Err` with its name when the run reads it
    /// (an error for the caller: the output would overwrite an input): it
    /// was named by path, or found and its first lines are an input (or
    /// cannot be read to tell).
    pub fn exclude_output(&mut self, id: &FileId, flag: &str) -> Result<(), String> {
        if let Some(f) = self.files.iter().find(|f| {
            f.id.as_ref() == Some(id)
                && (!f.found
                    || f.path
                        .as_deref()
                        .is_none_or(|p| looks_like_input(p).unwrap_or(true)))
        }) {
            return Err(f.display.clone());
        }
        let skipped = &mut self.skipped;
        self.files.retain(|f| {
            if f.id.as_ref() == Some(id) {
                skipped.push(SkippedFile {
                    path: f.display.clone(),
                    reason: SkipReason::Output {
                        flag: flag.to_string(),
                    },
                });
                false
            } else {
                true
            }
        });
        Ok(())
    }

    /// Looks once at the start of every file not yet looked at
    /// ([`Probe`]): a regular file is read from its start and closed; stdin,
    /// a FIFO, process substitution or a device is opened here, once, and
    /// kept open with its start read, to be parsed from there (such a
    /// stream is never opened or read again). An error is kept for the
    /// parse to report.
    pub(crate) fn probe(&mut self, opts: &ParseOptions) {
        for f in &mut self.files {
            if f.probe.is_none() {
                f.probe = Some(f.probe(opts));
            }
        }
    }

    /// Takes out of the files to read those whose start `take` claims (for
    /// another reader, by their content: the first 4 KiB, decompressed
    /// when gzip), in order. Looks at every file's start first
    /// (as [`crate::parse_files`] does): a stream (stdin, a pipe) taken is read on
    /// from there, never opened again; a regular file is opened again.
    pub fn take_files(
        &mut self,
        opts: &ParseOptions,
        mut take: impl FnMut(&[u8]) -> bool,
    ) -> Vec<TakenFile> {
        self.probe(opts);
        let mut out = Vec::new();
        let mut kept = Vec::with_capacity(self.files.len());
        for mut f in std::mem::take(&mut self.files) {
            let taken = match &f.probe {
                Some(Probe::Held(h)) => take(h.head()),
                Some(Probe::Regular { .. }) => f.path.as_deref().is_some_and(|p| {
                    open_checked(&f, p)
                        .and_then(|(file, _)| decode(file))
                        .is_ok_and(|(r, _, _)| take(&read_head(r, PEEK_BYTES)))
                }),
                _ => false,
            };
            if !taken {
                kept.push(f);
                continue;
            }
            let display = f.display.clone();
            let source = match f.probe.take() {
                Some(Probe::Held(h)) => Taken::Held(h),
                _ => Taken::Path(f),
            };
            out.push(TakenFile { display, source });
        }
        self.files = kept;
        out
    }

    /// Adds a stream to read, after the files: the output of a process,
    /// say, read once, as stdin is. `display` names it in the ledger and
    /// in messages, `name` is its deployment's name when given (as
    /// `NAME=PATH`). Its start is read here (gzip, traces and the framing
    /// are detected by content, as for any input); an error doing so is
    /// reported when it is parsed.
    pub fn push_stream(
        &mut self,
        display: impl Into<String>,
        name: Option<String>,
        r: Box<dyn Read + Send>,
        opts: &ParseOptions,
    ) {
        let probe = match crate::engine::open(r, opts) {
            Ok(h) => Probe::Held(Box::new(h)),
            Err(e) => Probe::Failed(Some(e)),
        };
        self.files.push(Expanded {
            path: None,
            display: display.into(),
            explicit: name,
            id: None,
            found: false,
            probe: Some(probe),
        });
    }

    /// The files skipped so far (the parse adds those whose content is not
    /// an input).
    pub fn skipped(&self) -> &[SkippedFile] {
        &self.skipped
    }

    /// How many files are to be read.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there is no file to read.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// What a non-regular, non-folder file is.
fn kind_of(m: &fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_socket() {
            return "socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "device";
        }
    }
    let _ = m;
    "special file"
}

/// A folder's entries (as [`walk`] would list them) or a glob's match:
/// regular files are pushed, folders walked, the rest skipped.
fn visit(
    p: PathBuf,
    files: &mut Vec<PathBuf>,
    skipped: &mut Vec<SkippedFile>,
    seen_dirs: &mut std::collections::HashMap<FileId, String>,
) -> Result<(), ParseError> {
    let m = match fs::metadata(&p) {
        Ok(m) => m,
        Err(e) => {
            // A symlink that cannot be followed: a loop or a missing target.
            if fs::symlink_metadata(&p).is_ok_and(|l| l.file_type().is_symlink()) {
                skipped.push(SkippedFile {
                    path: p.display().to_string(),
                    reason: SkipReason::BadSymlink {
                        error: e.to_string(),
                    },
                });
                return Ok(());
            }
            return Err(ParseError::io(p, e));
        }
    };
    if m.is_dir() {
        walk(&p, &m, files, skipped, seen_dirs)
    } else if m.is_file() {
        files.push(p);
        Ok(())
    } else {
        skipped.push(SkippedFile {
            path: p.display().to_string(),
            reason: SkipReason::NotRegular { what: kind_of(&m) },
        });
        Ok(())
    }
}

fn walk(
    dir: &Path,
    meta: &fs::Metadata,
    out: &mut Vec<PathBuf>,
    skipped: &mut Vec<SkippedFile>,
    seen_dirs: &mut std::collections::HashMap<FileId, String>,
) -> Result<(), ParseError> {
    let id = FileId::from_meta(dir, meta);
    if let Some(first) = seen_dirs.get(&id) {
        skipped.push(SkippedFile {
            path: dir.display().to_string(),
            reason: SkipReason::FolderSeen {
                first: first.clone(),
            },
        });
        return Ok(());
    }
    seen_dirs.insert(id, dir.display().to_string());
    let rd = fs::read_dir(dir).map_err(|e| ParseError::io(dir, e))?;
    let mut entries: Vec<PathBuf> = Vec::new();
    for e in rd {
        let e = e.map_err(|e| ParseError::io(dir, e))?;
        entries.push(e.path());
    }
    entries.sort();
    for p in entries {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.as_deref().is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        visit(p, out, skipped, seen_dirs)?;
    }
    Ok(())
}

/// The identity of standard input when it is a file or a pipe (not a
/// terminal or another device): `-` with `/dev/stdin` is read once, and an
/// output onto the file stdin reads is caught.
fn stdin_id() -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileTypeExt;
        let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
        let m = fs::File::from(fd).metadata().ok()?;
        let t = m.file_type();
        if t.is_char_device() || t.is_block_device() {
            return None;
        }
        Some(FileId::from_meta(Path::new("-"), &m))
    }
    #[cfg(not(unix))]
    None
}

/// Expands one spec into files: folders recursively in sorted order
/// (hidden entries skipped), globs in sorted order.
fn expand_one(
    spec: &InputSpec,
    out: &mut InputFiles,
    seen_dirs: &mut std::collections::HashMap<FileId, String>,
) -> Result<(), ParseError> {
    let id_of = |f: &Path| FileId::of(f).map_err(|e| ParseError::io(f, e));
    match &spec.source {
        InputSource::Stdin => out.files.push(Expanded {
            path: None,
            display: "-".to_string(),
            explicit: spec.name.clone(),
            id: stdin_id(),
            found: false,
            probe: None,
        }),
        InputSource::Path(p) => {
            let s = p.to_string_lossy();
            if !p.exists() && is_glob(&s) {
                let paths = glob::glob(&s).map_err(|e| ParseError::BadGlob {
                    pattern: s.to_string(),
                    message: e.msg.to_string(),
                })?;
                let mut files = Vec::new();
                let mut any = false;
                for entry in paths {
                    let f = entry.map_err(|e| {
                        let path = e.path().to_path_buf();
                        ParseError::io(path, e.into())
                    })?;
                    any = true;
                    visit(f, &mut files, &mut out.skipped, seen_dirs)?;
                }
                if !any {
                    return Err(ParseError::NotFound { path: p.clone() });
                }
                files.sort();
                files.dedup();
                for f in files {
                    out.files.push(Expanded {
                        display: f.display().to_string(),
                        explicit: spec.name.clone(),
                        id: Some(id_of(&f)?),
                        found: true,
                        probe: None,
                        path: Some(f),
                    });
                }
            } else if p.is_dir() {
                let mut files = Vec::new();
                let before = out.skipped.len();
                let m = fs::metadata(p).map_err(|e| ParseError::io(p, e))?;
                walk(p, &m, &mut files, &mut out.skipped, seen_dirs)?;
                if files.is_empty() && out.skipped.len() == before {
                    return Err(ParseError::NotFound { path: p.clone() });
                }
                for f in files {
                    out.files.push(Expanded {
                        display: f.display().to_string(),
                        explicit: spec.name.clone(),
                        id: Some(id_of(&f)?),
                        found: true,
                        probe: None,
                        path: Some(f),
                    });
                }
            } else if p.exists() {
                out.files.push(Expanded {
                    display: p.display().to_string(),
                    explicit: spec.name.clone(),
                    id: Some(id_of(p)?),
                    found: false,
                    probe: None,
                    path: Some(p.clone()),
                });
            } else {
                return Err(ParseError::NotFound { path: p.clone() });
            }
        }
    }
    Ok(())
}

/// The owner of a pod from its name: a Deployment's pod
/// `NAME-<replicaset hash>-<5 chars>` gives `NAME`; a StatefulSet's
/// `NAME-<ordinal>` gives `NAME`; a DaemonSet's or Job's `NAME-<5 chars>`
/// gives `NAME`. Stable across restarts of the same Deployment revision
/// and across replicas.
pub fn pod_owner(pod: &str) -> &str {
    let alnum = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    };
    let parts: Vec<&str> = pod.rsplitn(3, '-').collect();
    // parts = [suffix, hash, rest] (reversed)
    match parts.as_slice() {
        [suffix, hash, rest]
            if suffix.len() == 5
                && alnum(suffix)
                && (5..=10).contains(&hash.len())
                && alnum(hash)
                && !rest.is_empty() =>
        {
            rest
        }
        [ordinal, ..] if !ordinal.is_empty() && ordinal.bytes().all(|c| c.is_ascii_digit()) => {
            &pod[..pod.len() - ordinal.len() - 1]
        }
        [suffix, _, ..] if suffix.len() == 5 && alnum(suffix) => {
            &pod[..pod.len() - suffix.len() - 1]
        }
        _ => pod,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        assert_eq!(InputSpec::parse("-"), InputSpec::stdin());
        assert_eq!(
            InputSpec::parse("glm=logs/a.log"),
            InputSpec::path("logs/a.log").named("glm")
        );
        assert_eq!(InputSpec::parse("glm=-"), InputSpec::stdin().named("glm"));
        assert_eq!(InputSpec::parse("a/b=c.log"), InputSpec::path("a/b=c.log"));
        assert_eq!(InputSpec::parse("x.log"), InputSpec::path("x.log"));
    }

    #[test]
    fn owners() {
        assert_eq!(pod_owner("glm-epp-7c9d8-xk2lp"), "glm-epp");
        assert_eq!(pod_owner("qwen-decode-6d9f7c8b9-abcde"), "qwen-decode");
        assert_eq!(pod_owner("vllm-0"), "vllm");
        assert_eq!(pod_owner("ds-xk2lp"), "ds");
        assert_eq!(pod_owner("epp"), "epp");
        assert_eq!(pod_owner("my-epp"), "my-epp");
    }

    #[test]
    fn gzip_by_content() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"hello\n").unwrap();
        let gz = enc.finish().unwrap();
        let (mut r, is_gz, _) = decode(&gz[..]).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert!(is_gz);
        assert_eq!(s, "hello\n");
        let (mut r, is_gz, _) = decode(&b"x"[..]).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert!(!is_gz);
        assert_eq!(s, "x");
    }
}
