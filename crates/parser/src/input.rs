//! Inputs: files, folders, globs, stdin; gzip by content; pod owners.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::error::ParseError;

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
#[derive(Clone, Debug, Default)]
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
        let files = std::mem::take(&mut out.files);
        for f in files {
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
    /// (`flag` names the output). `Err` with its name when it was named by
    /// path (an error for the caller: the output would overwrite an input).
    pub fn exclude_output(&mut self, id: &FileId, flag: &str) -> Result<(), String> {
        if let Some(f) = self
            .files
            .iter()
            .find(|f| !f.found && f.id.as_ref() == Some(id))
        {
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

    /// Takes out of the files to read the regular files `take` claims (for
    /// another reader, e.g. by their content): their display names and
    /// paths, in order.
    pub fn take_files(&mut self, mut take: impl FnMut(&Path) -> bool) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        self.files.retain(|f| match &f.path {
            Some(p) if take(p) => {
                out.push((f.display.clone(), p.clone()));
                false
            }
            _ => true,
        });
        out
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
            id: None,
            found: false,
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
                        path: Some(f),
                    });
                }
            } else if p.exists() {
                out.files.push(Expanded {
                    display: p.display().to_string(),
                    explicit: spec.name.clone(),
                    id: Some(id_of(p)?),
                    found: false,
                    path: Some(p.clone()),
                });
            } else {
                return Err(ParseError::NotFound { path: p.clone() });
            }
        }
    }
    Ok(())
}

/// Counts the bytes that pass through.
pub(crate) struct Counting<R> {
    pub inner: R,
    pub count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The raw stream: the peeked magic bytes, then the rest, counted.
pub(crate) type Raw<R> = io::Chain<io::Cursor<Vec<u8>>, Counting<R>>;

/// A stream as read: plain, or gzip-decompressed.
pub(crate) enum Decoded<R> {
    Plain(Raw<R>),
    Gzip(Box<flate2::read::MultiGzDecoder<Raw<R>>>),
}

impl<R: Read> Read for Decoded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoded::Plain(r) => r.read(buf),
            Decoded::Gzip(r) => r.read(buf),
        }
    }
}

/// Wraps a reader, decompressing it when it starts with the gzip magic
/// bytes `1f 8b` (whatever its name). Returns the reader, whether it was
/// gzip, and a counter of the raw bytes read.
pub(crate) fn decode<R: Read>(mut r: R) -> io::Result<(Decoded<R>, bool, Arc<AtomicU64>)> {
    let mut head = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match r.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let count = Arc::new(AtomicU64::new(got as u64));
    let rest = Counting {
        inner: r,
        count: count.clone(),
    };
    let whole = io::Cursor::new(head[..got].to_vec()).chain(rest);
    if got == 2 && head == [0x1f, 0x8b] {
        Ok((
            Decoded::Gzip(Box::new(flate2::read::MultiGzDecoder::new(whole))),
            true,
            count,
        ))
    } else {
        Ok((Decoded::Plain(whole), false, count))
    }
}

/// Bytes [`peek`] reads at most to detect a trace input.
pub(crate) const PEEK_BYTES: usize = 4096;

/// Reads the start of a (decoded) stream, up to [`PEEK_BYTES`] or its end,
/// and returns those bytes, whether they start a trace document
/// ([`crate::looks_like_traces`]), and whether the stream ended; read them
/// again by chaining them before the rest.
pub(crate) fn peek<R: Read>(r: &mut R) -> io::Result<(Vec<u8>, bool, bool)> {
    let mut head = vec![0u8; PEEK_BYTES];
    let mut got = 0;
    let mut ended = false;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(got);
    let traces = crate::trace::looks_like_traces(&head);
    Ok((head, traces, ended))
}

/// Whether a file holds traces, by its content (gzip or not). A file that
/// cannot be read is not (its error is reported when it is read).
pub(crate) fn is_trace_file(path: &Path) -> bool {
    let Ok(f) = fs::File::open(path) else {
        return false;
    };
    let Ok((mut r, _, _)) = decode(f) else {
        return false;
    };
    peek(&mut r).is_ok_and(|(_, t, _)| t)
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
