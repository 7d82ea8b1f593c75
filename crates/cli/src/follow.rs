//! `--follow`: the inputs read as they grow, and a report every
//! `--every` over the last `--window` of log time.
//!
//! Each input is read on a thread of its own ([`start`]): a file from its
//! start and then as it grows (after a truncation from its start again; a
//! file renamed away and replaced by a new one of the same name is read to
//! its end, then the new one from its start), stdin until it closes; a file
//! created later in a folder given is read from its start. The
//! decisions they give are kept in a [`Window`]: the decision records
//! ([`gatecal_parser::DecisionRecord`], the `--emit-decisions` format)
//! as gzip blocks, dropped once the whole block is older than the window.
//! Memory is bounded by the window's decisions, whatever the run's length.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gatecal_parser::{
    Decision, DecisionRecord, FileId, InputFiles, InputSource, InputSpec, Item, Ledger, ParseError,
    ParseOptions, SourceLoc, VllmStats, parse_files,
};

/// Decisions per gzip block of the window.
const BLOCK: usize = 512;

/// One sealed block of the window.
struct Block {
    gz: Vec<u8>,
    /// Latest decision time in the block.
    max_ts: f64,
    n: usize,
}

/// The decisions of the last `window_s` seconds of log time (up to the
/// latest decision read), as gzip-compressed decision records (version 2:
/// with the gate as analysed and the config in force, so that read back
/// they give the report they would have given read from the log).
pub struct Window {
    window_s: f64,
    blocks: VecDeque<Block>,
    open: Vec<u8>,
    open_n: usize,
    open_max: f64,
    /// Latest decision time read.
    latest: f64,
    /// Decisions read in all.
    read: u64,
}

impl Window {
    /// An empty window `window_s` seconds long.
    pub fn new(window_s: f64) -> Window {
        Window {
            window_s,
            blocks: VecDeque::new(),
            open: Vec::new(),
            open_n: 0,
            open_max: f64::NEG_INFINITY,
            latest: f64::NEG_INFINITY,
            read: 0,
        }
    }

    /// Adds a decision record (one without a time takes the latest time
    /// read).
    pub fn push(&mut self, mut r: DecisionRecord) {
        self.read += 1;
        let ts = match r.ts.filter(|t| t.is_finite()) {
            Some(t) => t,
            None if self.latest.is_finite() => {
                r.ts = Some(self.latest);
                self.latest
            }
            None => 0.0,
        };
        if serde_json::to_writer(&mut self.open, &r).is_err() {
            return;
        }
        self.open.push(b'\n');
        self.open_n += 1;
        self.open_max = self.open_max.max(ts);
        self.latest = self.latest.max(ts);
        if self.open_n >= BLOCK {
            self.seal();
        }
        self.expire();
    }

    fn seal(&mut self) {
        if self.open_n == 0 {
            return;
        }
        // zlib's default level: a quarter smaller than its fastest on
        // decision records (62 bytes a record against 82), at a cost that
        // does not matter at a live log's pace.
        let mut e = flate2::write::GzEncoder::new(
            Vec::with_capacity(self.open.len() / 8),
            flate2::Compression::default(),
        );
        let mut gz = e
            .write_all(&self.open)
            .and_then(|()| e.finish())
            .unwrap_or_default();
        // Held for the whole window: no room left over.
        gz.shrink_to_fit();
        self.blocks.push_back(Block {
            gz,
            max_ts: self.open_max,
            n: self.open_n,
        });
        self.open.clear();
        self.open.shrink_to(BLOCK * 2048);
        self.open_n = 0;
        self.open_max = f64::NEG_INFINITY;
    }

    /// Drops the blocks wholly before the window.
    fn expire(&mut self) {
        let cut = self.start();
        while self.blocks.front().is_some_and(|b| b.max_ts < cut) {
            self.blocks.pop_front();
        }
    }

    /// The window's start: `window_s` before the latest decision.
    pub fn start(&self) -> f64 {
        self.latest - self.window_s
    }

    /// The latest decision's time, if any was read.
    pub fn latest(&self) -> Option<f64> {
        self.latest.is_finite().then_some(self.latest)
    }

    /// Decisions read in all.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Decisions held (some of the oldest block may be before the window).
    pub fn held(&self) -> usize {
        self.blocks.iter().map(|b| b.n).sum::<usize>() + self.open_n
    }

    /// Bytes held: the compressed blocks and the open one.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.gz.capacity()).sum::<usize>() + self.open.capacity()
    }

    /// The decisions in the window (time at or after [`Window::start`]),
    /// in the order read, each located at `NAME:N` (its rank).
    pub fn decisions(&self, name: &str) -> Vec<Decision> {
        let mut out = Vec::new();
        self.for_each(name, |d| out.push(d));
        out
    }

    /// Calls `f` with each decision of the window, in the order read,
    /// one block decompressed at a time (the window's decisions are never
    /// all held decoded at once).
    pub fn for_each(&self, name: &str, mut f: impl FnMut(Decision)) {
        let cut = self.start();
        let mut rank = 0u64;
        self.each_line(|line| {
            let Ok(r) = DecisionRecord::parse_line(line) else {
                return;
            };
            if r.ts.is_some_and(|t| t < cut) {
                return;
            }
            rank += 1;
            f(r.into_decision(SourceLoc {
                file: name.into(),
                line: rank,
            }));
        });
    }
}

impl Window {
    /// Calls `f` with each decision of the window in the order a reorder
    /// buffer of `reorder_s` seconds would release them
    /// ([`gatecal_analysis::release_order`]), each located at `NAME:N`
    /// (its rank in the order read): the decisions of [`Window::for_each`]
    /// as an analysis given them one by one takes them. The order is
    /// worked out from the decisions' times alone, and the window is then
    /// read again, so that only the decisions read before their turn are
    /// held decoded (none while the window is in time order), not the
    /// buffer's `reorder_s` seconds of them.
    pub fn for_each_released(&self, reorder_s: f64, name: &str, mut f: impl FnMut(Decision)) {
        let cut = self.start();
        // The lines taken (as [`Window::for_each`] takes them), by their
        // time: `NaN` for none (a buffer releases both at once).
        let time = |line: &[u8]| -> Option<f64> {
            let ts = record_time(line)?;
            (!ts.is_some_and(|t| t < cut)).then(|| ts.unwrap_or(f64::NAN))
        };
        let mut times = Vec::new();
        self.each_line(|line| times.extend(time(line)));
        let order = gatecal_analysis::release_order(times.iter().map(|t| Some(*t)), reorder_s);
        drop(times);
        let mut next = 0usize;
        // Records read before their turn, by their rank among the lines
        // taken: as read (a line is smaller than the decision made of it),
        // with their rank among the records; `None` for a line that is not
        // a record after all (skipped when its turn comes).
        let mut early: std::collections::HashMap<u32, Option<(Vec<u8>, u64)>> =
            std::collections::HashMap::new();
        let decision = |line: &[u8], rank: u64| {
            DecisionRecord::parse_line(line).ok().map(|r| {
                r.into_decision(SourceLoc {
                    file: name.into(),
                    line: rank,
                })
            })
        };
        let mut rank = 0u64;
        let mut taken = 0u32;
        self.each_line(|line| {
            if time(line).is_none() {
                return;
            }
            let here = taken;
            taken += 1;
            match decision(line, rank + 1) {
                None => {
                    early.insert(here, None);
                }
                Some(d) => {
                    rank += 1;
                    if order.get(next) == Some(&here) {
                        next += 1;
                        f(d);
                    } else {
                        early.insert(here, Some((line.to_vec(), rank)));
                    }
                }
            }
            // Every record read whose turn has come, in turn.
            while let Some(k) = order.get(next) {
                let Some(held) = early.remove(k) else {
                    break;
                };
                next += 1;
                if let Some(d) = held.and_then(|(line, rank)| decision(&line, rank)) {
                    f(d);
                }
            }
        });
    }

    /// Calls `f` with each line of the window's blocks (those wholly
    /// before the window left out) and of the open block, in the order
    /// read, one block decompressed at a time.
    fn each_line(&self, mut f: impl FnMut(&[u8])) {
        let cut = self.start();
        let mut take = |text: &[u8]| {
            for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                f(line);
            }
        };
        let mut text = Vec::new();
        for b in &self.blocks {
            if b.max_ts < cut {
                continue;
            }
            text.clear();
            if flate2::read::GzDecoder::new(&b.gz[..])
                .read_to_end(&mut text)
                .is_ok()
            {
                take(&text);
            }
        }
        take(&self.open);
    }
}

/// The time of a window's record (`None` inside when it has none), or
/// `None` when the line is not a valid record: read from the start of the
/// line as [`Window::push`] writes it (`{"v":3,"ts":...`), else from the
/// whole record.
fn record_time(line: &[u8]) -> Option<Option<f64>> {
    // The prefix is the version written.
    const _: () = assert!(gatecal_parser::RECORD_VERSION == 3);
    let quick = line.strip_prefix(b"{\"v\":3,\"ts\":").and_then(|rest| {
        let end = rest.iter().position(|&b| b == b',')?;
        let text = std::str::from_utf8(&rest[..end]).ok()?;
        match text {
            "null" => Some(None),
            t => t.parse::<f64>().ok().filter(|t| t.is_finite()).map(Some),
        }
    });
    // A line the quick look takes is checked in full when read again.
    quick.or_else(|| DecisionRecord::parse_line(line).ok().map(|r| r.ts))
}

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

/// What [`run`] tells the binary at each report.
#[derive(Clone, Debug)]
pub struct TickInfo {
    /// Lines read so far, all inputs.
    pub lines: u64,
    /// Bytes read so far (as read: compressed for gzip).
    pub bytes: u64,
    /// The last report: the inputs ended, or SIGINT or SIGTERM came.
    pub last: bool,
    /// The ledger of the inputs that ended.
    pub ledger: Ledger,
    /// Every input read so far, in the order started.
    pub names: Vec<String>,
}

/// Hands every decision (and vLLM stats line) of `inputs` to `on_item` and calls `report`
/// every `every_s` seconds (the first after `every_s`), and once more at
/// the end: when every input ended, or on SIGINT or SIGTERM (then the
/// run ends with the last report, and exit 0). An input that fails is a
/// warning on stderr, and the others are read on.
pub fn run(
    bin: &str,
    inputs: Inputs,
    every_s: f64,
    mut on_item: impl FnMut(Item),
    mut report: impl FnMut(TickInfo) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    crate::atomic::defer_interrupts();
    let every = Duration::from_secs_f64(every_s);
    let mut ledger = Ledger::default();
    let mut open = inputs.names.len();
    let mut names = inputs.names.clone();
    let mut next = Instant::now() + every;
    let info = |ledger: &Ledger, names: &[String], last: bool| TickInfo {
        lines: inputs.lines.load(Ordering::Relaxed),
        bytes: inputs.bytes.load(Ordering::Relaxed),
        last,
        ledger: ledger.clone(),
        names: names.to_vec(),
    };
    loop {
        if Instant::now() >= next {
            report(info(&ledger, &names, false))?;
            next += every;
            if next <= Instant::now() {
                next = Instant::now() + every;
            }
        }
        if crate::atomic::interrupted() {
            // The files read to their ends, and what their readers still
            // held (requests not yet closed) handed on, for a second at
            // most (stdin may not close).
            inputs.stop.store(true, Ordering::Relaxed);
            let until = Instant::now() + Duration::from_secs(1);
            while open > 0 {
                let wait = until.saturating_duration_since(Instant::now());
                match inputs.rx.recv_timeout(wait) {
                    Ok(Msg::Item(item)) => on_item(item),
                    Ok(Msg::Ended(name, r)) => {
                        open -= 1;
                        ended(bin, &mut ledger, name, *r);
                    }
                    Ok(Msg::Started(name)) => {
                        open += 1;
                        names.push(name);
                    }
                    Err(_) => break,
                }
            }
            return report(info(&ledger, &names, true));
        }
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        match inputs.rx.recv_timeout(wait) {
            Ok(Msg::Item(item)) => on_item(item),
            Ok(Msg::Ended(name, r)) => {
                open -= 1;
                ended(bin, &mut ledger, name, *r);
                if open == 0 {
                    return report(info(&ledger, &names, true));
                }
            }
            Ok(Msg::Started(name)) => {
                open += 1;
                names.push(name);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return report(info(&ledger, &names, true));
            }
        }
    }
}

/// An input ended: its ledger joins `ledger`, or its error is a warning.
fn ended(bin: &str, ledger: &mut Ledger, name: String, r: Result<Ledger, ParseError>) {
    match r {
        Ok(l) => {
            for i in l.inputs {
                ledger.push(i, 8);
            }
        }
        Err(e) => crate::term::eprint(
            bin,
            crate::term::Level::Warning,
            &format!("{name}: no longer read: {e}"),
        ),
    }
}

/// The vLLM stats lines of the last `window_s` seconds of their log time
/// (up to the latest line read), at most [`VllmWindow::MAX`] of them.
/// Each line is kept as its numbers, its strings (deployment, pod, input,
/// level, engine) as indexes into the window's names: a line holds no
/// allocation of its own, and [`VllmWindow::lines`] gives it back as
/// read.
pub struct VllmWindow {
    window_s: f64,
    /// Each line with its time: its own, else its month, day and time
    /// of day in the year of the decisions read (vLLM's own lines carry
    /// no year), else the latest time read.
    lines: VecDeque<Kept>,
    names: Names,
    latest: f64,
    read: u64,
}

/// The strings of the lines held, each once.
#[derive(Default)]
struct Names {
    ids: std::collections::HashMap<gatecal_parser::Name, u32>,
    names: Vec<gatecal_parser::Name>,
}

/// No string (an absent pod or engine).
const NO_NAME: u32 = u32::MAX;

impl Names {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        let a = gatecal_parser::Name::from(s);
        self.names.push(a.clone());
        self.ids.insert(a, i);
        i
    }

    fn opt(&mut self, s: Option<&str>) -> u32 {
        s.map_or(NO_NAME, |s| self.id(s))
    }

    fn get(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", |a| a)
    }

    fn name(&self, i: u32) -> gatecal_parser::Name {
        self.names.get(i as usize).cloned().unwrap_or_default()
    }

    fn get_opt(&self, i: u32) -> Option<String> {
        (i != NO_NAME).then(|| self.get(i).to_string())
    }
}

/// One stats line of a [`VllmWindow`]: every field of its
/// [`VllmStats`], the optional numbers present where `present` has their
/// bit.
#[derive(Clone, Copy)]
struct Kept {
    /// Its time in the window.
    t: f64,
    deployment: u32,
    pod: u32,
    file: u32,
    level: u32,
    engine: u32,
    line: u64,
    ts: f64,
    prompt_throughput: f64,
    counts: [u64; 5],
    rates: [f64; 5],
    seconds_of_day: u32,
    month: u8,
    day: u8,
    v1: bool,
    /// Bit 0: `ts`; bits 1–5: `counts`; bits 6–10: `rates`.
    present: u16,
}

impl Kept {
    fn new(t: f64, s: &VllmStats, names: &mut Names) -> Kept {
        let counts = [s.running, s.waiting, s.swapped, s.deferred, s.preemptions];
        let rates = [
            s.generation_throughput,
            s.gpu_kv_cache_usage_pct,
            s.cpu_kv_cache_usage_pct,
            s.prefix_cache_hit_rate_pct,
            s.mm_cache_hit_rate_pct,
        ];
        let mut present = u16::from(s.ts.is_some());
        for (i, c) in counts.iter().enumerate() {
            present |= u16::from(c.is_some()) << (1 + i);
        }
        for (i, r) in rates.iter().enumerate() {
            present |= u16::from(r.is_some()) << (6 + i);
        }
        Kept {
            t,
            deployment: names.id(&s.deployment),
            pod: names.opt(s.pod.as_deref()),
            file: names.id(&s.source.file),
            level: names.id(&s.level),
            engine: names.opt(s.engine.as_deref()),
            line: s.source.line,
            ts: s.ts.unwrap_or_default(),
            prompt_throughput: s.prompt_throughput,
            counts: counts.map(Option::unwrap_or_default),
            rates: rates.map(Option::unwrap_or_default),
            seconds_of_day: s.seconds_of_day,
            month: s.month,
            day: s.day,
            v1: s.version == gatecal_parser::VllmStatsVersion::V1,
            present,
        }
    }

    fn stats(&self, names: &Names) -> VllmStats {
        let has = |bit: u16| self.present & (1 << bit) != 0;
        let count = |i: usize| has(1 + i as u16).then_some(self.counts[i]);
        let rate = |i: usize| has(6 + i as u16).then_some(self.rates[i]);
        VllmStats {
            deployment: names.get(self.deployment).to_string(),
            pod: names.get_opt(self.pod),
            source: SourceLoc {
                file: names.name(self.file),
                line: self.line,
            },
            ts: has(0).then_some(self.ts),
            month: self.month,
            day: self.day,
            seconds_of_day: self.seconds_of_day,
            level: names.get(self.level).to_string(),
            version: if self.v1 {
                gatecal_parser::VllmStatsVersion::V1
            } else {
                gatecal_parser::VllmStatsVersion::V0
            },
            engine: names.get_opt(self.engine),
            prompt_throughput: self.prompt_throughput,
            generation_throughput: rate(0),
            running: count(0),
            waiting: count(1),
            swapped: count(2),
            deferred: count(3),
            preemptions: count(4),
            gpu_kv_cache_usage_pct: rate(1),
            cpu_kv_cache_usage_pct: rate(2),
            prefix_cache_hit_rate_pct: rate(3),
            mm_cache_hit_rate_pct: rate(4),
            glued: None,
        }
    }
}

impl VllmWindow {
    /// Most lines held: 64 engines logging every 10 s for 4 hours; the
    /// oldest go first.
    pub const MAX: usize = 92_160;

    /// An empty window `window_s` seconds long.
    pub fn new(window_s: f64) -> VllmWindow {
        VllmWindow {
            window_s,
            lines: VecDeque::new(),
            names: Names::default(),
            latest: f64::NEG_INFINITY,
            read: 0,
        }
    }

    /// Adds a line; `decisions` is the latest decision time read, which
    /// gives the year of a line without one.
    pub fn push(&mut self, s: VllmStats, decisions: Option<f64>) {
        self.read += 1;
        let t =
            s.ts.filter(|t| t.is_finite())
                .or_else(|| dated(&s, decisions))
                .or(self.latest())
                .or(decisions)
                .unwrap_or(0.0);
        self.latest = self.latest.max(t);
        self.lines.push_back(Kept::new(t, &s, &mut self.names));
        let cut = self.latest - self.window_s;
        while self.lines.len() > Self::MAX || self.lines.front().is_some_and(|l| l.t < cut) {
            self.lines.pop_front();
        }
        // Names of lines gone (pods replaced, inputs rotated) are dropped
        // once they outnumber the lines held.
        if self.names.names.len() > 4 * self.lines.len() + 1024 {
            let old = std::mem::take(&mut self.names);
            for l in self.lines.iter_mut() {
                let mut move_name = |i: &mut u32| {
                    if *i != NO_NAME {
                        *i = self.names.id(old.get(*i));
                    }
                };
                move_name(&mut l.deployment);
                move_name(&mut l.pod);
                move_name(&mut l.file);
                move_name(&mut l.level);
                move_name(&mut l.engine);
            }
        }
    }

    /// The latest line's time, if any was read.
    pub fn latest(&self) -> Option<f64> {
        self.latest.is_finite().then_some(self.latest)
    }

    /// Lines read in all.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// The lines in the window, in the order read, each as read.
    pub fn lines(&self) -> impl Iterator<Item = VllmStats> + '_ {
        let cut = self.latest - self.window_s;
        self.lines
            .iter()
            .filter(move |l| l.t >= cut)
            .map(|l| l.stats(&self.names))
    }
}

/// A yearless vLLM line's time in the year of `near` (the year before
/// when that puts it more than half a year after `near`).
fn dated(s: &VllmStats, near: Option<f64>) -> Option<f64> {
    let near = near?;
    if s.month == 0 || s.day == 0 {
        return None;
    }
    let (year, _) = gatecal_parser::year_month_of(near);
    let t = gatecal_parser::epoch_of(year, s.month, s.day, s.seconds_of_day);
    Some(if t > near + 183.0 * 86_400.0 {
        gatecal_parser::epoch_of(year - 1, s.month, s.day, s.seconds_of_day)
    } else {
        t
    })
}

/// What a report is made from: the window's decisions and vLLM stats
/// lines.
pub struct Windows {
    /// The decision records.
    pub decisions: Window,
    /// The vLLM stats lines (only when the analysis reads them).
    pub vllm: VllmWindow,
}

impl Windows {
    /// The latest time read, decisions and vLLM stats lines together.
    pub fn latest(&self) -> Option<f64> {
        match (self.decisions.latest(), self.vllm.latest()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Follows `inputs` for `A`'s report: every decision goes through `live`,
/// an analysis run for the whole run, which gives each decision's record
/// with its gate as analysed and the config in force (and hands it to
/// `on_record` too); the records of the last `window_s` seconds are kept,
/// and so are the vLLM stats lines when `A` reads them. `report` is called
/// every `every_s` seconds and at the end, as [`run`] says, with the
/// windows; [`audit`] gives the report over them.
pub fn follow<A: crate::pipeline::Analysis>(
    bin: &str,
    inputs: Inputs,
    every_s: f64,
    window_s: f64,
    live: A,
    mut on_record: impl FnMut(&DecisionRecord) + 'static,
    mut report: impl FnMut(&TickInfo, &Windows) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let windows = std::rc::Rc::new(std::cell::RefCell::new(Windows {
        decisions: Window::new(window_s),
        vllm: VllmWindow::new(window_s),
    }));
    let sink = windows.clone();
    let live = std::cell::RefCell::new(Some(live.with_records(Box::new(move |r| {
        on_record(&r);
        sink.borrow_mut().decisions.push(r);
    }))));
    run(
        bin,
        inputs,
        every_s,
        |item| match item {
            Item::Decision(d) => {
                if let Some(a) = live.borrow_mut().as_mut() {
                    a.push_decision(crate::pipeline::decision_input(*d, true));
                }
            }
            Item::VllmStats(s) => {
                if A::READS_VLLM {
                    let w = &mut *windows.borrow_mut();
                    let fallback = w.decisions.latest();
                    w.vllm.push(*s, fallback);
                }
            }
        },
        |info| {
            if info.last
                && let Some(a) = live.borrow_mut().take()
            {
                // Its decisions still held (reordered, or waiting for the
                // bar in force) reach the window.
                a.finish(gatecal_analysis::InputSummary::default());
            }
            report(&info, &windows.borrow())
        },
    )
}

/// The report over the windows: `fresh` (a new analysis, without records)
/// given the window's decisions and vLLM stats lines, and the inputs'
/// ledger so far, with every input read.
pub fn audit<A: crate::pipeline::Analysis>(
    mut fresh: A,
    windows: &Windows,
    info: &TickInfo,
) -> A::Report {
    // In the order the analysis' reorder buffer would give them, handed
    // on one by one: its buffer would hold its window of them decoded.
    match fresh.reorder_window_s() {
        Some(w) => windows.decisions.for_each_released(w, "window", |d| {
            fresh.push_in_order(crate::pipeline::decision_input(d, false))
        }),
        None => windows.decisions.for_each("window", |d| {
            fresh.push_decision(crate::pipeline::decision_input(d, false))
        }),
    }
    if A::READS_VLLM {
        for s in windows.vllm.lines() {
            fresh.push_vllm(&s);
        }
    }
    let mut input = crate::pipeline::summary(&crate::pipeline::Inputs {
        ledger: info.ledger.clone(),
        ..crate::pipeline::Inputs::default()
    });
    input.inputs = info.names.clone();
    input.lines_total = input.lines_total.max(info.lines);
    input.bytes = input.bytes.max(info.bytes);
    input.decisions_assembled = input.decisions_assembled.max(windows.decisions.read());
    fresh.finish(input)
}

/// Writes one rendered report (`text`): JSON on one line, with the
/// window it covers (`follow`); else a header naming `bin` and the span,
/// and the table, the screen cleared first when `redraw`.
pub fn write_report(
    out: &mut dyn Write,
    bin: &str,
    text: &[u8],
    info: &TickInfo,
    windows: &Windows,
    json: bool,
    redraw: bool,
) -> anyhow::Result<()> {
    let window = &windows.decisions;
    let window_s = window.window_s;
    let latest = windows.latest();
    if json {
        out.write_all(&json_line(text, windows, info.last)?)?;
        return Ok(());
    }
    if redraw {
        // Home, clear the screen.
        out.write_all(b"\x1b[H\x1b[2J")?;
    }
    let span = match latest {
        Some(b) => format!(
            "{} to {} UTC",
            gatecal_render::num::utc(b - window_s),
            gatecal_render::num::utc(b)
        ),
        None => "no decision read yet".into(),
    };
    let vllm = if windows.vllm.read() > 0 {
        format!(
            ", {} vLLM stats line(s)",
            gatecal_render::num::group(windows.vllm.read() as i64)
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "{bin} --follow: the last {} of log time ({span}); {} decision(s){vllm} read in all{}\n",
        span_text(window_s),
        gatecal_render::num::group(window.read() as i64),
        if info.last { "; last report" } else { "" }
    )?;
    out.write_all(text)?;
    if !redraw {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A rendered JSON report as one line, with the window it covers added
/// as `follow` (docs/json-schema.md).
pub fn json_line(report: &[u8], windows: &Windows, last: bool) -> anyhow::Result<Vec<u8>> {
    let window_s = windows.decisions.window_s;
    let mut v: serde_json::Value = serde_json::from_slice(report)?;
    if let Some(o) = v.as_object_mut() {
        let mut f = serde_json::json!({
            "window_s": window_s,
            "window_start": windows.latest().map(|l| l - window_s),
            "window_end": windows.latest(),
            "decisions_read": windows.decisions.read(),
            "last": last,
        });
        if windows.vllm.read() > 0 {
            f["vllm_lines_read"] = windows.vllm.read().into();
        }
        o.insert("follow".into(), f);
    }
    let mut out = serde_json::to_vec(&v)?;
    out.push(b'\n');
    Ok(out)
}

/// A span of seconds for people: `15m`, `1h`, `90s`.
pub fn span_text(s: f64) -> String {
    if s >= 3600.0 && (s / 3600.0).fract() == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && (s / 60.0).fract() == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(ts: f64, id: u64) -> DecisionRecord {
        DecisionRecord::from(&Decision {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some(format!("r{id}").into()),
            ..Decision::default()
        })
    }

    #[test]
    fn the_window_keeps_the_last_span_and_drops_older_blocks() {
        let mut w = Window::new(60.0);
        // One hour at 10 decisions a second.
        for i in 0..36_000u64 {
            w.push(decision(1_000.0 + i as f64 / 10.0, i));
        }
        let ds = w.decisions("w");
        // Decisions at or after latest - 60 s: 601 of them.
        assert_eq!(ds.len(), 601);
        assert_eq!(ds[0].request_id.as_deref(), Some("r35399"));
        assert_eq!(ds.last().unwrap().request_id.as_deref(), Some("r35999"));
        // Held: the window and at most one block before it.
        assert!(w.held() <= 601 + 2 * BLOCK, "{}", w.held());
        assert_eq!(w.read(), 36_000);
        assert!(w.bytes() < 2 << 20, "{}", w.bytes());
    }

    #[test]
    fn the_window_read_in_release_order_is_the_buffers_order() {
        let mut w = Window::new(600.0);
        // Two hours, every decision 0 to 45 s late, some more than the
        // 30 s buffer: the window starts mid-block.
        for i in 0..4_000u64 {
            let late = [0.0, 2.0, 45.0, 31.0, 7.0][i as usize % 5];
            w.push(decision(1_000.0 + i as f64 * 1.8 - late, i));
        }
        let read = w.decisions("w");
        let want: Vec<_> = gatecal_analysis::release_order(read.iter().map(|d| d.ts), 30.0)
            .into_iter()
            .map(|k| read[k as usize].clone())
            .collect();
        let mut got = Vec::new();
        w.for_each_released(30.0, "w", |d| got.push(d));
        assert!(want.len() > 300 && want.len() < 4_000, "{}", want.len());
        assert_eq!(got, want);
        assert_ne!(got, read);
    }

    /// Kept as numbers and names, every line comes back as read: the
    /// demo's vLLM logs (v1 lines with every field), and lines with
    /// optional numbers absent and odd names; names of lines gone are
    /// dropped.
    #[test]
    fn vllm_lines_come_back_as_read() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/demo/glm-like.vllm");
        let mut read = Vec::new();
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let name = path.to_string_lossy().to_string();
            let p = gatecal_parser::parse_slice(&name, &bytes, &ParseOptions::default()).unwrap();
            read.extend(p.vllm_stats().cloned());
        }
        assert!(read.len() > 500, "{}", read.len());
        read.push(VllmStats {
            deployment: "d\u{e9}".into(),
            pod: None,
            engine: Some(String::new()),
            ts: Some(1.5e9),
            running: Some(u64::MAX),
            waiting: Some(0),
            cpu_kv_cache_usage_pct: Some(-0.0),
            ..VllmStats::default()
        });
        // No larger than docs/performance.md says.
        assert!(std::mem::size_of::<Kept>() <= 144);
        let mut w = VllmWindow::new(f64::INFINITY);
        for s in &read {
            w.push(s.clone(), Some(1_787_320_800.0));
        }
        let back: Vec<VllmStats> = w.lines().collect();
        assert_eq!(back.len(), read.len());
        for (a, b) in back.iter().zip(&read) {
            assert_eq!(a, b);
            assert_eq!(
                a.cpu_kv_cache_usage_pct.map(f64::to_bits),
                b.cpu_kv_cache_usage_pct.map(f64::to_bits)
            );
        }
        // A window of 10 s over lines of ever new pods: the names held stay
        // about those of the lines held.
        let mut w = VllmWindow::new(10.0);
        for i in 0..20_000u32 {
            w.push(
                VllmStats {
                    pod: Some(format!("pod-{i}")),
                    ts: Some(f64::from(i)),
                    ..VllmStats::default()
                },
                None,
            );
        }
        assert!(
            w.names.names.len() < 4 * 11 + 1024 + 8,
            "{}",
            w.names.names.len()
        );
        let last: Vec<VllmStats> = w.lines().collect();
        assert_eq!(last.len(), 11);
        assert_eq!(last[10].pod.as_deref(), Some("pod-19999"));
    }

    #[test]
    fn vllm_lines_without_a_year_take_the_decisions_year_and_expire() {
        let line = |month, day, secs| VllmStats {
            month,
            day,
            seconds_of_day: secs,
            ..VllmStats::default()
        };
        // 2026-08-21 14:00:00 UTC.
        let near = Some(1_787_320_800.0);
        let mut w = VllmWindow::new(600.0);
        w.push(line(8, 21, 14 * 3600), near);
        assert_eq!(w.latest(), near);
        // Twenty minutes later: the first is out of the window.
        w.push(line(8, 21, 14 * 3600 + 1200), near);
        assert_eq!(w.lines().count(), 1);
        assert_eq!(w.read(), 2);
        // New Year's Eve read in January: the year before.
        let jan = gatecal_parser::epoch_of(2027, 1, 1, 60);
        assert_eq!(
            dated(&line(12, 31, 86_000), Some(jan)),
            Some(gatecal_parser::epoch_of(2026, 12, 31, 86_000))
        );
        assert_eq!(dated(&line(0, 0, 5), Some(jan)), None);
    }

    #[test]
    fn a_decision_without_time_takes_the_latest() {
        let mut w = Window::new(10.0);
        w.push(decision(100.0, 1));
        let mut d = decision(0.0, 2);
        d.ts = None;
        w.push(d);
        let ds = w.decisions("w");
        assert_eq!(ds.len(), 2);
        assert_eq!(ds[1].ts, Some(100.0));
    }

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
