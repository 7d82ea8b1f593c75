//! The inputs read as they grow, each on a thread of its own.

use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gatecal_parser::{
    FileId, InputFiles, InputSource, InputSpec, Item, Ledger, ParseError, ParseOptions, parse_files,
};

/// A file read as it grows: at its end, waits and reads on.
pub struct Tail {
    path: PathBuf,
    file: File,
    id: Option<FileId>,
    pos: u64,
    stop: Arc<AtomicBool>,
    poll: Duration,
}

impl Tail {
    /// Opens `path` to read from its start and then as it grows, until
    /// `stop` is set.
    pub fn open(path: PathBuf, stop: Arc<AtomicBool>) -> io::Result<Tail> {
        let file = File::open(&path)?;
        let id = FileId::of_file(&file, &path).ok();
        Ok(Tail {
            path,
            file,
            id,
            pos: 0,
            stop,
            poll: Duration::from_millis(100),
        })
    }
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 {
                self.pos += n as u64;
                return Ok(n);
            }
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            // At the end: truncated (copytruncate rotation) or replaced
            // by a new file of the same name?
            if let Ok(m) = std::fs::metadata(&self.path) {
                let id = FileId::of(&self.path).ok();
                if id.is_some() && id != self.id {
                    if let Ok(f) = File::open(&self.path) {
                        self.id = FileId::of_file(&f, &self.path).ok();
                        self.file = f;
                        self.pos = 0;
                        continue;
                    }
                } else if m.len() < self.pos {
                    self.file.seek(io::SeekFrom::Start(0))?;
                    self.pos = 0;
                    continue;
                }
            }
            std::thread::sleep(self.poll);
        }
    }
}

/// Counts the lines and bytes read, for the reports while inputs are read.
struct Counted<R> {
    inner: R,
    lines: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let lines = buf[..n].iter().filter(|&&b| b == b'\n').count();
        self.lines.fetch_add(lines as u64, Ordering::Relaxed);
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Decisions queued between the inputs' threads and the analysis at most.
const CHANNEL: usize = 64;

/// What an input's thread sends.
pub enum Msg {
    /// A decision or a vLLM stats line, as read.
    Item(Item),
    /// The input ended (stdin closed, or `stop` was set): its ledger, or
    /// the error that ended it.
    Ended(String, Box<Result<Ledger, ParseError>>),
    /// A file created in a folder given is read from now on.
    Started(String),
}

/// The inputs being read.
pub struct Inputs {
    /// Decisions and ends, from every input's thread.
    pub rx: mpsc::Receiver<Msg>,
    /// The inputs' names, in the order given.
    pub names: Vec<String>,
    /// Lines read so far, all inputs.
    pub lines: Arc<AtomicU64>,
    /// Bytes read so far (as read: compressed for gzip), all inputs.
    pub bytes: Arc<AtomicU64>,
    /// Set to make the files' threads end at their files' ends.
    pub stop: Arc<AtomicBool>,
}

/// Starts the reading threads of one input each.
#[derive(Clone)]
struct Spawner {
    tx: mpsc::SyncSender<Msg>,
    opts: ParseOptions,
    vllm: bool,
    stop: Arc<AtomicBool>,
    lines: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl Spawner {
    /// Reads `path` (a regular file as it grows), or stdin without one,
    /// on a thread of its own.
    fn spawn(
        &self,
        display: String,
        name: Option<String>,
        path: Option<&Path>,
    ) -> anyhow::Result<()> {
        let reader: Box<dyn Read + Send> = match path {
            Some(p) => {
                let meta = std::fs::metadata(p)
                    .map_err(|e| anyhow::anyhow!("{display}: cannot read: {e}"))?;
                if meta.is_file() {
                    Box::new(
                        Tail::open(p.to_path_buf(), self.stop.clone())
                            .map_err(|e| anyhow::anyhow!("{display}: cannot read: {e}"))?,
                    )
                } else {
                    Box::new(
                        File::open(p)
                            .map_err(|e| anyhow::anyhow!("{display}: cannot read: {e}"))?,
                    )
                }
            }
            None => Box::new(io::stdin()),
        };
        let reader = Counted {
            inner: reader,
            lines: self.lines.clone(),
            bytes: self.bytes.clone(),
        };
        let tx = self.tx.clone();
        let opts = self.opts.clone();
        let vllm = self.vllm;
        std::thread::Builder::new()
            .name(format!("follow {display}"))
            .spawn(move || {
                let mut files = InputFiles::default();
                files.push_stream(display.clone(), name, Box::new(reader), &opts);
                let r = parse_files(files, &opts, |item| {
                    if vllm || matches!(item, Item::Decision(_)) {
                        let _ = tx.send(Msg::Item(item));
                    }
                });
                let _ = tx.send(Msg::Ended(display, Box::new(r)));
            })?;
        Ok(())
    }
}

/// The line buffer a followed input starts with (it grows for a longer
/// line): a file followed is read as it grows, a few lines at a time.
const FOLLOW_LINE_BUFFER: usize = 16 * 1024;

/// How often a folder given is looked at for files created in it.
const RESCAN: Duration = Duration::from_secs(1);

/// Starts a thread per input: every file of `specs` (folders and globs
/// expanded now) and stdin; and for each folder given, a thread that looks
/// for files created in it every second and reads each from its start.
/// The vLLM stats lines are passed on when `vllm` asks for them.
pub fn start(specs: &[InputSpec], opts: &ParseOptions, vllm: bool) -> anyhow::Result<Inputs> {
    // Bounded: inputs read faster than the decisions are analysed wait,
    // rather than queue without limit.
    let (tx, rx) = mpsc::sync_channel(CHANNEL);
    let mut opts = opts.clone();
    // One thread an input: lines are parsed as they come, each input's
    // line buffer no larger than its lines need (vLLM logs followed by
    // the dozen).
    opts.threads = 1;
    opts.line_buffer_bytes = FOLLOW_LINE_BUFFER;
    opts.progress = None;
    let spawner = Spawner {
        tx,
        opts,
        vllm,
        stop: Arc::new(AtomicBool::new(false)),
        lines: Arc::new(AtomicU64::new(0)),
        bytes: Arc::new(AtomicU64::new(0)),
    };
    let mut names = Vec::new();
    for spec in specs {
        let found = files_of(spec)?;
        let mut seen = std::collections::HashSet::new();
        for (display, path) in found {
            spawner.spawn(display.clone(), spec.name.clone(), path.as_deref())?;
            seen.extend(path);
            names.push(display);
        }
        if let InputSource::Path(dir) = &spec.source
            && dir.is_dir()
        {
            let (spawner, spec) = (spawner.clone(), spec.clone());
            std::thread::Builder::new()
                .name(format!("follow {}", dir.display()))
                .spawn(move || watch(&spawner, &spec, seen))?;
        }
    }
    Ok(Inputs {
        rx,
        names,
        lines: spawner.lines.clone(),
        bytes: spawner.bytes.clone(),
        stop: spawner.stop.clone(),
    })
}

/// The files of `spec`, with their paths (none for stdin).
fn files_of(spec: &InputSpec) -> anyhow::Result<Vec<(String, Option<PathBuf>)>> {
    let expanded = InputFiles::expand(std::slice::from_ref(spec))?;
    Ok(expanded
        .files()
        .map(|(name, path, _, _)| (name.to_string(), path.map(PathBuf::from)))
        .collect())
}

/// Every [`RESCAN`] until `stop`: the files of the folder `spec` not
/// `seen` yet are read from their start (one that cannot be opened is
/// tried again at the next look). A file already read under another name
/// (a log rotated by renaming it in the folder: its reader read it to its
/// end before going on with the new file of its name) is not read again.
fn watch(spawner: &Spawner, spec: &InputSpec, mut seen: std::collections::HashSet<PathBuf>) {
    let mut ids: std::collections::HashSet<FileId> =
        seen.iter().filter_map(|p| FileId::of(p).ok()).collect();
    loop {
        let until = Instant::now() + RESCAN;
        while Instant::now() < until {
            if spawner.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let Ok(found) = files_of(spec) else {
            continue;
        };
        for (display, path) in found {
            let Some(path) = path else { continue };
            if seen.contains(&path) {
                continue;
            }
            let id = FileId::of(&path).ok();
            if let Some(id) = &id
                && !ids.insert(id.clone())
            {
                seen.insert(path);
                continue;
            }
            // Counted as open before its thread can end.
            if spawner.tx.send(Msg::Started(display.clone())).is_err() {
                return;
            }
            match spawner.spawn(display.clone(), spec.name.clone(), Some(&path)) {
                Ok(()) => {
                    seen.insert(path);
                }
                Err(e) => {
                    // Not read: closed again at once, with the reason.
                    let _ = spawner.tx.send(Msg::Ended(
                        display,
                        Box::new(Err(ParseError::Io {
                            path: path.clone(),
                            source: io::Error::other(format!("{e:#}")),
                        })),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_tail_reads_what_is_appended_and_a_truncated_file_again() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        std::fs::write(&p, "one\n").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut t = Tail::open(p.clone(), stop.clone()).unwrap();
        t.poll = Duration::from_millis(5);
        let mut buf = [0u8; 64];
        let n = t.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"one\n");
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
                f.write_all(b"two\n").unwrap();
            })
        };
        let n = t.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"two\n");
        writer.join().unwrap();
        std::fs::write(&p, "3\n").unwrap();
        let n = t.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"3\n");
        stop.store(true, Ordering::Relaxed);
        assert_eq!(t.read(&mut buf).unwrap(), 0);
    }
}
