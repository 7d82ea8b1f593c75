//! Inputs: files, folders, globs, stdin; gzip by content; deployment names.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// One file to read after expanding folders and globs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Expanded {
    /// `None` for stdin.
    pub path: Option<PathBuf>,
    /// Display name (`-` for stdin).
    pub display: String,
    /// `NAME=` of the spec.
    pub explicit: Option<String>,
    /// The first folder below a folder or glob input that holds the file,
    /// used as the deployment when there is no better name.
    pub folder: Option<String>,
    /// The file's parent folder name (or the file stem for a file in the
    /// current folder), the last resort.
    pub fallback: String,
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ParseError> {
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
        // Follows symlinks; a dangling link is reported when opened.
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

fn fallback_name(p: &Path) -> String {
    let parent = p
        .parent()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    match parent {
        Some(n) if !n.is_empty() && n != "." && n != ".." => n,
        _ => p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "default".to_string()),
    }
}

/// The first component of `file` below `root`, when the file is in a subfolder.
fn folder_below(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).ok()?;
    let mut comps = rel.components();
    let first = comps.next()?;
    comps.next()?;
    Some(first.as_os_str().to_string_lossy().into_owned())
}

/// Expands specs into files: folders recursively in sorted order (hidden
/// entries skipped), globs in sorted order.
pub(crate) fn expand(specs: &[InputSpec]) -> Result<Vec<Expanded>, ParseError> {
    let mut out = Vec::new();
    for spec in specs {
        match &spec.source {
            InputSource::Stdin => out.push(Expanded {
                path: None,
                display: "-".to_string(),
                explicit: spec.name.clone(),
                folder: None,
                fallback: "stdin".to_string(),
            }),
            InputSource::Path(p) => {
                let s = p.to_string_lossy();
                if !p.exists() && is_glob(&s) {
                    let paths = glob::glob(&s).map_err(|e| ParseError::BadGlob {
                        pattern: s.to_string(),
                        message: e.msg.to_string(),
                    })?;
                    let mut files = Vec::new();
                    for entry in paths {
                        let f = entry.map_err(|e| {
                            let path = e.path().to_path_buf();
                            ParseError::io(path, e.into())
                        })?;
                        if f.is_dir() {
                            walk(&f, &mut files)?;
                        } else {
                            files.push(f);
                        }
                    }
                    if files.is_empty() {
                        return Err(ParseError::NotFound { path: p.clone() });
                    }
                    files.sort();
                    files.dedup();
                    for f in files {
                        out.push(Expanded {
                            display: f.display().to_string(),
                            explicit: spec.name.clone(),
                            folder: None,
                            fallback: fallback_name(&f),
                            path: Some(f),
                        });
                    }
                } else if p.is_dir() {
                    let mut files = Vec::new();
                    walk(p, &mut files)?;
                    if files.is_empty() {
                        return Err(ParseError::NotFound { path: p.clone() });
                    }
                    let own = p
                        .canonicalize()
                        .ok()
                        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()));
                    for f in files {
                        out.push(Expanded {
                            display: f.display().to_string(),
                            explicit: spec.name.clone(),
                            folder: folder_below(p, &f).or_else(|| own.clone()),
                            fallback: fallback_name(&f),
                            path: Some(f),
                        });
                    }
                } else if p.exists() {
                    out.push(Expanded {
                        display: p.display().to_string(),
                        explicit: spec.name.clone(),
                        folder: None,
                        fallback: fallback_name(p),
                        path: Some(p.clone()),
                    });
                } else {
                    return Err(ParseError::NotFound { path: p.clone() });
                }
            }
        }
    }
    Ok(out)
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
