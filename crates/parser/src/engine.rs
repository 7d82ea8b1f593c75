//! The per-input driver: lines to classes to events to items, with the ledger.

use std::io::Read;
use std::path::Path;

use crate::arena::{Arena, Span};
use crate::assemble::{Assembler, AssemblerLimits, Ctx, DeploymentNaming};
use crate::classify::{self, Class, Used};
use crate::decision::{Decision, SourceLoc, ValueFlags};
use crate::error::ParseError;
use crate::event::{ArenaEvent, Event};
use crate::fields;
use crate::frame;
use crate::input::{self, pod_owner};
use crate::ledger::{Counts, InputFormat, InputLedger, LineShape, MalformedLine, MalformedReason};
use crate::lines::{Line, LineReader};
use crate::record::{self, DecisionRecord};
use crate::time;
use crate::vllm::VllmStats;
use crate::{Item, ParseOptions};

/// Parses one input stream.
pub(crate) struct Engine<'o> {
    display: String,
    naming: DeploymentNaming,
    pod_hint: Option<String>,
    opts: &'o ParseOptions,
    format: InputFormat,
    asm: Assembler,
    counts: Counts,
    line: u64,
    last_abs_ts: Option<f64>,
    /// The used line of the line being read on this thread.
    used: Vec<UsedLine>,
    /// Its strings.
    arena: Arena,
}

impl<'o> Engine<'o> {
    pub(crate) fn new(display: &str, naming: DeploymentNaming, opts: &'o ParseOptions) -> Self {
        let limits = AssemblerLimits {
            max_open_requests: opts.max_open_requests.max(1),
            max_open_age_secs: opts.max_open_age_secs,
            infer_not_applicable: opts.infer_not_applicable,
            max_events_per_request: crate::assemble::DEFAULT_MAX_EVENTS_PER_REQUEST,
            max_open_bytes: opts.max_open_bytes,
        };
        let pod_hint = Path::new(display)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .map(|s| s.strip_suffix(".log").map(str::to_string).unwrap_or(s))
            .filter(|s| !s.is_empty() && s != "-");
        Engine {
            display: display.to_string(),
            asm: Assembler::new(display, naming.clone(), limits),
            naming,
            pod_hint,
            opts,
            format: opts.format,
            counts: Counts::default(),
            line: 0,
            last_abs_ts: None,
            used: Vec::with_capacity(1),
            arena: Arena::default(),
        }
    }

    fn malformed(&mut self, reason: MalformedReason) -> Result<(), ParseError> {
        self.counts.lines_malformed += 1;
        if matches!(reason, MalformedReason::OutOfRange(_)) {
            self.counts.lines_out_of_range += 1;
        }
        let m = MalformedLine {
            at: SourceLoc {
                file: self.display.clone(),
                line: self.line,
            },
            reason,
        };
        if self.opts.strict {
            return Err(ParseError::Malformed(m));
        }
        if self.counts.first_malformed.len() < self.opts.keep_malformed {
            self.counts.first_malformed.push(m);
        }
        Ok(())
    }

    fn emit_decision(counts: &mut Counts, sink: &mut dyn FnMut(Item), d: Decision) {
        counts.count_decision(d.completion, d.filter.is_some());
        sink(Item::Decision(Box::new(d)));
    }

    /// One line over the cap.
    pub(crate) fn too_long(&mut self, bytes: u64) -> Result<(), ParseError> {
        self.apply(Pre::TooLong(bytes), None, &Arena::default(), &mut |_| {})
    }

    /// One line (without its `\n`), read on this thread.
    pub(crate) fn line(
        &mut self,
        raw: &[u8],
        sink: &mut dyn FnMut(Item),
    ) -> Result<(), ParseError> {
        let raw = classify::trim_end(raw);
        if self.format == InputFormat::Auto && !raw.iter().all(u8::is_ascii_whitespace) {
            self.format = if record::looks_like_record(raw) {
                InputFormat::Decisions
            } else {
                InputFormat::Logs
            };
        }
        let mut arena = std::mem::take(&mut self.arena);
        arena.clear();
        let pre = pre_line(raw, self.format, &mut self.used, &mut arena);
        let used = self.used.pop();
        let r = self.apply(pre, used, &arena, sink);
        self.arena = arena;
        r
    }

    /// Accounts for one pre-read line, in input order: `used` is the used
    /// line of a [`Pre::Used`], and `arena` holds its strings.
    pub(crate) fn apply(
        &mut self,
        pre: Pre,
        used: Option<UsedLine>,
        arena: &Arena,
        sink: &mut dyn FnMut(Item),
    ) -> Result<(), ParseError> {
        if let Pre::Skip(n) = pre {
            // Counted with their block ([`Engine::absorb`]).
            self.line += u64::from(n);
            self.counts.lines_total += u64::from(n);
            return Ok(());
        }
        self.line += 1;
        self.counts.lines_total += 1;
        match pre {
            Pre::Skip(_) => Ok(()),
            Pre::TooLong(bytes) => self.malformed(MalformedReason::TooLong { bytes }),
            Pre::Ignored(shape) => {
                self.counts.shapes.add(shape);
                self.counts.lines_ignored += 1;
                Ok(())
            }
            Pre::Malformed(shape, reason) => {
                self.counts.shapes.add(shape);
                self.malformed(reason)
            }
            Pre::Record(r) => {
                self.counts.shapes.add(LineShape::DecisionRecord);
                match *r {
                    Ok(r) => {
                        self.counts.lines_used += 1;
                        let mut d = r.into_decision(SourceLoc {
                            file: self.display.clone(),
                            line: self.line,
                        });
                        if let Some(e) = &self.naming.explicit {
                            d.deployment.clone_from(e);
                        }
                        Self::emit_decision(&mut self.counts, sink, d);
                        Ok(())
                    }
                    Err(why) => self.malformed(MalformedReason::BadRecord(why)),
                }
            }
            Pre::Used(console) => {
                let Some(u) = used else {
                    // Not reached: a used line always comes with its line.
                    self.counts.lines_ignored += 1;
                    return Ok(());
                };
                let UsedLine {
                    ts,
                    kubelet_ts,
                    event,
                    flags,
                    request_id,
                    model,
                    pod,
                } = u;
                self.counts.lines_used += 1;
                if flags.huge {
                    self.counts.values_huge += 1;
                }
                if flags.non_finite {
                    self.counts.values_non_finite += 1;
                }
                if let Some(t) = ts {
                    self.last_abs_ts = Some(t);
                }
                if let Event::VllmStats(st) = event {
                    self.counts.shapes.add(LineShape::Vllm);
                    let pod = pod.map(|p| arena.string(p));
                    let st = self.finish_stats(*st, pod, kubelet_ts);
                    self.counts.vllm_stats += 1;
                    sink(Item::VllmStats(Box::new(st)));
                    return Ok(());
                }
                self.counts.shapes.add(if console {
                    LineShape::Console
                } else {
                    LineShape::ZapJson
                });
                let ctx = Ctx {
                    ts: ts.or(kubelet_ts),
                    request_id: request_id.map(|s| arena.bytes(s)),
                    pod: pod.map(|s| arena.bytes(s)),
                    model: model.map(|s| arena.bytes(s)),
                };
                let counts = &mut self.counts;
                let mut emit = |d: Decision| Self::emit_decision(counts, sink, d);
                self.asm.feed_ctx(self.line, &ctx, event, arena, &mut emit);
                Ok(())
            }
        }
    }

    /// Counts the lines of a block that have no entry of their own.
    fn absorb(&mut self, a: &Tally) {
        self.counts.shapes.merge(&a.shapes);
        self.counts.lines_ignored += a.ignored;
        self.counts.lines_malformed += a.malformed;
        self.counts.lines_out_of_range += a.out_of_range;
    }

    fn finish_stats(
        &mut self,
        mut st: VllmStats,
        pod: Option<String>,
        kubelet_ts: Option<f64>,
    ) -> VllmStats {
        st.source = SourceLoc {
            file: self.display.clone(),
            line: self.line,
        };
        st.ts = match kubelet_ts {
            Some(t) => Some(t),
            None => {
                let year = match (self.opts.year, self.last_abs_ts) {
                    (Some(y), _) => Some(i64::from(y)),
                    (None, Some(t)) => {
                        let (y, m) = time::year_month_of(t);
                        // A record month far after the context month is from the year before.
                        Some(if u32::from(st.month) > m + 6 {
                            y - 1
                        } else {
                            y
                        })
                    }
                    _ => None,
                };
                year.filter(|_| st.month > 0)
                    .map(|y| time::epoch_of(y, st.month, st.day, st.seconds_of_day))
            }
        };
        let owner_pod = match &pod {
            Some(p) => Some(p.as_str()),
            None => self.pod_hint.as_deref().filter(|h| pod_owner(h) != *h),
        };
        st.deployment = self.naming.resolve(owner_pod, None, None, None);
        st.pod = pod.or_else(|| self.pod_hint.clone());
        st
    }

    /// Ends the input: closes open requests and returns the ledger.
    pub(crate) fn finish(
        mut self,
        sink: &mut dyn FnMut(Item),
        bytes: u64,
        compressed: u64,
        gzip: bool,
    ) -> InputLedger {
        let counts = &mut self.counts;
        let mut emit = |d: Decision| Self::emit_decision(counts, sink, d);
        self.asm.finish(&mut emit);
        self.counts.requests_evicted = self.asm.requests_evicted();
        self.counts.requests_evicted_for_memory = self.asm.requests_evicted_for_memory();
        self.counts.bytes = bytes;
        self.counts.bytes_compressed = compressed;
        InputLedger {
            name: self.display,
            deployment: self.naming.explicit,
            gzip,
            format: if self.format == InputFormat::Auto {
                InputFormat::Logs
            } else {
                self.format
            },
            counts: self.counts,
        }
    }
}

/// A used line, ready to apply: the event, and its context, their strings
/// in the arena of the line (or of its block).
pub(crate) struct UsedLine {
    /// The line's time (its own, else the kubelet's).
    ts: Option<f64>,
    /// The kubelet timestamp, when it was read (see
    /// [`LineMeta::kubelet_ts`](crate::event::LineMeta::kubelet_ts)).
    kubelet_ts: Option<f64>,
    event: ArenaEvent,
    flags: ValueFlags,
    request_id: Option<Span>,
    model: Option<Span>,
    pod: Option<Span>,
}

/// A line read without the engine's state: what [`Engine::apply`] needs.
/// Computed on any of the reading threads when reading in parallel.
pub(crate) enum Pre {
    /// Over the cap.
    TooLong(u64),
    /// Well formed, not needed.
    Ignored(LineShape),
    /// Unreadable.
    Malformed(LineShape, MalformedReason),
    /// A decisions record (or why it is invalid).
    Record(Box<Result<DecisionRecord, String>>),
    /// A used line, whether it was a console-encoder one; the [`UsedLine`]
    /// itself goes to a separate vector (this enum stays small: it is
    /// moved for every line of a block, the used line only once).
    Used(bool),
    /// `n` lines of a block, ignored or malformed, that take no entry of
    /// their own: their line numbers pass, and their counts are in the
    /// block's [`Tally`].
    Skip(u32),
}

/// The counts of a block's lines that take no result entry: all its
/// ignored lines, and its malformed lines after the first `keep` (which
/// keep their entries: they may be among the input's first malformed lines
/// that the ledger lists). A block's results are then its used lines and
/// at most `keep` other lines (and as many [`Pre::Skip`]s), however short
/// its lines are.
#[derive(Default)]
struct Tally {
    shapes: crate::ledger::ShapeCounts,
    ignored: u64,
    malformed: u64,
    /// Of `malformed`, [`MalformedReason::OutOfRange`] lines.
    out_of_range: u64,
    /// Ignored or malformed lines since the last entry.
    run: u32,
    /// Malformed lines given an entry.
    kept: usize,
}

/// How the lines of a block are classified.
#[derive(Clone, Copy)]
struct How {
    format: InputFormat,
    /// [`ParseOptions::max_line_bytes`].
    cap: usize,
    /// Malformed lines kept as entries per block: the ledger's
    /// [`ParseOptions::keep_malformed`], at least 1 (`strict` fails on the
    /// first).
    keep: usize,
}

/// Times a line may carry, epoch seconds: from 1970-01-01 to before
/// 2100-01-01 UTC. A later `ts` (year 9999, say) would move the assembler's
/// clock and evict every open request, and the reorder buffer's, and
/// release every decision unordered; an earlier one is no time the EPP
/// writes. Such a line is [`MalformedReason::OutOfRange`].
pub(crate) const TS_RANGE: std::ops::Range<f64> = 0.0..4_102_444_800.0;

/// Reads one line (trailing blanks already trimmed) in a known format; a
/// used line is pushed to `used`, its strings to `arena`. A line whose time
/// is outside [`TS_RANGE`] is out of range.
pub(crate) fn pre_line(
    raw: &[u8],
    format: InputFormat,
    used: &mut Vec<UsedLine>,
    arena: &mut Arena,
) -> Pre {
    if raw.iter().all(u8::is_ascii_whitespace) && (raw.is_empty() || format != InputFormat::Logs) {
        return Pre::Ignored(LineShape::Blank);
    }
    if format == InputFormat::Decisions {
        return Pre::Record(Box::new(DecisionRecord::parse_line(raw)));
    }
    let Ok(f) = frame::frame(raw) else {
        return Pre::Malformed(LineShape::Other, MalformedReason::BadFraming);
    };
    match classify::classify(f.body, arena) {
        Class::Ignored(shape) => Pre::Ignored(shape),
        Class::Malformed(shape, reason) => Pre::Malformed(shape, reason),
        Class::Used(u) => {
            let Used {
                mut meta,
                event,
                flags,
                request_id,
                model,
            } = u;
            // Parsed only when needed: the line has no time of its own, or
            // it is a vLLM record (whose prefix has no year).
            if meta.ts.is_none() || matches!(event, Event::VllmStats(_)) {
                meta.kubelet_ts = f.kubelet_ts();
            }
            if meta.ts.is_none() {
                meta.ts = meta.kubelet_ts;
            }
            if let Some(t) = meta.ts
                && !TS_RANGE.contains(&t)
            {
                let shape = match f.body.first() {
                    Some(b'{') => LineShape::ZapJson,
                    _ => LineShape::Console,
                };
                return Pre::Malformed(shape, MalformedReason::OutOfRange("ts"));
            }
            used.push(UsedLine {
                ts: meta.ts,
                kubelet_ts: meta.kubelet_ts,
                event,
                flags,
                request_id: request_id.map(|r| fields::push_json_str(arena, r.bytes, r.esc)),
                model: model.map(|r| fields::push_json_str(arena, r.bytes, r.esc)),
                pod: f.pod.map(|p| arena.push(p)),
            });
            Pre::Used(f.body.first() != Some(&b'{'))
        }
    }
}

/// Reads a whole stream through an engine on this thread.
pub(crate) fn run<R: Read>(
    reader: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<InputLedger, ParseError> {
    let path = || std::path::PathBuf::from(display);
    let (r, gzip, raw_count) = input::decode(reader).map_err(|e| ParseError::io(path(), e))?;
    let (r, traces) = sniffed(r, opts).map_err(|e| ParseError::io(path(), e))?;
    if traces {
        return run_traces(r, display, naming, opts, sink, gzip, &raw_count);
    }
    let mut lines = LineReader::new(r, opts.max_line_bytes);
    let mut eng = Engine::new(display, naming, opts);
    sequential(&mut lines, &mut eng, sink, false, display)?;
    let bytes = lines.bytes;
    let compressed = raw_count.load(std::sync::atomic::Ordering::Relaxed);
    Ok(eng.finish(sink, bytes, if gzip { compressed } else { bytes }, gzip))
}

/// A stream whose first bytes were read, chained before the rest.
///
/// When the peek reached the end of the stream, the rest is never read
/// again: a terminal gives its end (Ctrl-D) once, and a second read would
/// wait for more input.
pub(crate) struct Peeked<R> {
    head: std::io::Cursor<Vec<u8>>,
    rest: Option<R>,
}

impl<R: Read> Read for Peeked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.head.read(buf)?;
        if n > 0 || buf.is_empty() {
            return Ok(n);
        }
        match &mut self.rest {
            Some(r) => r.read(buf),
            None => Ok(0),
        }
    }
}

/// A decoded stream with its start peeked: the stream (the peeked bytes
/// chained before the rest) and whether it is a trace input (forced by
/// [`InputFormat::Traces`], detected by content with [`InputFormat::Auto`]).
fn sniffed<R: Read>(mut r: R, opts: &ParseOptions) -> std::io::Result<(Peeked<R>, bool)> {
    let (head, looks, ended) = match opts.format {
        InputFormat::Auto => input::peek(&mut r)?,
        f => (Vec::new(), f == InputFormat::Traces, false),
    };
    let peeked = Peeked {
        head: std::io::Cursor::new(head),
        rest: (!ended).then_some(r),
    };
    Ok((peeked, looks))
}

/// Reads a trace input on this thread ([`crate::trace`]).
fn run_traces<R: Read>(
    r: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
    gzip: bool,
    raw_count: &std::sync::atomic::AtomicU64,
) -> Result<InputLedger, ParseError> {
    let (mut il, bytes) = crate::trace::run(r, display, naming, opts, sink)?;
    il.gzip = gzip;
    il.counts.bytes_compressed = if gzip {
        raw_count.load(std::sync::atomic::Ordering::Relaxed)
    } else {
        bytes
    };
    Ok(il)
}

/// Reads a whole stream, classifying lines on [`ParseOptions::threads`]
/// threads (this one and `threads - 1` workers) when that is more than 1
/// and the input is logs.
pub(crate) fn run_parallel<R: Read + Send>(
    reader: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<InputLedger, ParseError> {
    if opts.threads <= 1 {
        return run(reader, display, naming, opts, sink);
    }
    let path = || std::path::PathBuf::from(display);
    let (r, gzip, raw_count) = input::decode(reader).map_err(|e| ParseError::io(path(), e))?;
    let (r, traces) = sniffed(r, opts).map_err(|e| ParseError::io(path(), e))?;
    if traces {
        return run_traces(r, display, naming, opts, sink, gzip, &raw_count);
    }
    let lines = LineReader::new(r, opts.max_line_bytes);
    let eng = Engine::new(display, naming, opts);
    let (eng, bytes) = format_then(lines, eng, sink, display, |lines, eng, sink| {
        parallel_stream(lines, eng, sink, opts.threads, display)
    })?;
    let compressed = raw_count.load(std::sync::atomic::Ordering::Relaxed);
    Ok(eng.finish(sink, bytes, if gzip { compressed } else { bytes }, gzip))
}

/// Reads `lines` on this thread until the input's format is known (the first
/// non-blank line), then the rest: logs with `rest` (in parallel), other
/// formats on this thread. Returns the engine and the bytes read.
fn format_then<'o, R: Read>(
    mut lines: LineReader<R>,
    mut eng: Engine<'o>,
    sink: &mut dyn FnMut(Item),
    display: &str,
    rest: impl FnOnce(LineReader<R>, &mut Engine<'o>, &mut dyn FnMut(Item)) -> Result<u64, ParseError>,
) -> Result<(Engine<'o>, u64), ParseError> {
    let ended = sequential(&mut lines, &mut eng, sink, true, display)?;
    let bytes = if ended || eng.format != InputFormat::Logs {
        sequential(&mut lines, &mut eng, sink, false, display)?;
        lines.bytes
    } else {
        rest(lines, &mut eng, sink)?
    };
    Ok((eng, bytes))
}

/// Feeds lines to the engine on this thread, to the end (or, with
/// `until_format`, until the input's format is known). Returns whether the
/// input ended.
fn sequential<R: Read>(
    lines: &mut LineReader<R>,
    eng: &mut Engine<'_>,
    sink: &mut dyn FnMut(Item),
    until_format: bool,
    display: &str,
) -> Result<bool, ParseError> {
    while !(until_format && eng.format != InputFormat::Auto) {
        match lines.next_line() {
            Ok(Some(Line::Text(t))) => eng.line(t, sink)?,
            Ok(Some(Line::TooLong(n))) => eng.too_long(n)?,
            Ok(None) => return Ok(true),
            Err(e) => return Err(ParseError::io(display, e)),
        }
    }
    Ok(false)
}

/// Most blocks in flight, whatever the thread count.
const MAX_INFLIGHT: usize = 16;

/// Most lines in one block: bounds a block's results (32 bytes a line, and
/// about 270 more a used line) to about 2.5 MiB, however short its lines
/// are.
const MAX_BLOCK_LINES: usize = 8192;

/// A block read by a worker.
enum Body {
    /// Whole lines, `\n`-separated, in `buf[..len]` (the last one may lack
    /// its `\n` at the end of the input); the block's [`Bufs::ends`] hold
    /// the offsets of the newlines. The buffer is recycled.
    Lines { buf: Vec<u8>, len: usize },
    /// A line over the cap, skipped without being buffered: its length.
    TooLong(u64),
}

/// The recycled vectors of a block: newline offsets, results, used lines
/// and their strings, and the tally of the lines without an entry.
#[derive(Default)]
struct Bufs {
    ends: Vec<usize>,
    out: Vec<Pre>,
    used: Vec<UsedLine>,
    arena: Arena,
    tally: Tally,
}

impl Bufs {
    /// Empties the results (not `ends`) for a new block.
    fn reset(&mut self) {
        self.out.clear();
        self.used.clear();
        self.arena.clear();
        self.tally = Tally::default();
    }

    /// Adds a line's result: an entry, or to the tally.
    fn add(&mut self, p: Pre, keep: usize) {
        let t = &mut self.tally;
        let malformed = matches!(p, Pre::Malformed(..) | Pre::TooLong(_));
        match p {
            Pre::Ignored(shape) => {
                t.shapes.add(shape);
                t.ignored += 1;
            }
            Pre::Malformed(shape, reason) if t.kept >= keep => {
                t.shapes.add(shape);
                t.malformed += 1;
                t.out_of_range += u64::from(matches!(reason, MalformedReason::OutOfRange(_)));
            }
            Pre::TooLong(_) if t.kept >= keep => t.malformed += 1,
            p => {
                t.kept += usize::from(malformed);
                self.end_run();
                self.out.push(p);
                return;
            }
        }
        t.run += 1;
        if t.run == u32::MAX {
            self.end_run();
        }
    }

    /// Ends a run of lines without entries.
    fn end_run(&mut self) {
        if self.tally.run > 0 {
            self.out.push(Pre::Skip(self.tally.run));
            self.tally.run = 0;
        }
    }
}

/// Buffers going back from the applying thread to the readers: a block's
/// bytes, its results and its newline offsets, emptied. One per block in
/// flight.
type Spare = (Vec<u8>, Bufs);
/// A block's buffer (none for an over-cap line) and its results.
type Done = std::io::Result<(Option<Vec<u8>>, Bufs)>;
type OutMsg = (u64, Done);

/// Cuts a stream into blocks of whole lines at the last newline of each
/// read, with the same line semantics as [`LineReader`]: a line over the cap
/// is skipped to its newline and reported by length.
///
/// Blocks are read into recycled buffers (one per block in flight), so the
/// steady state allocates nothing and touches no fresh pages: a buffer is
/// zeroed once, when it first grows, and only the bytes after the last
/// newline of a block are copied (to the start of the next one).
struct Chunker<R> {
    r: R,
    /// The unfinished line after the last newline of the previous block.
    carry: Vec<u8>,
    eof: bool,
    cap: usize,
    block: usize,
    bytes: u64,
}

impl<R: Read> Chunker<R> {
    /// Reads up to `want` bytes into `buf[*len..]`, growing `buf` if needed.
    fn read_into(
        &mut self,
        buf: &mut Vec<u8>,
        len: &mut usize,
        want: usize,
    ) -> std::io::Result<usize> {
        if buf.len() < *len + want {
            buf.resize(*len + want, 0);
        }
        let n = loop {
            match self.r.read(&mut buf[*len..*len + want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        *len += n;
        self.bytes += n as u64;
        Ok(n)
    }

    /// The next block, read into `buf` (a spare buffer: its contents are
    /// overwritten), with the offsets of its newlines in `ends` (cleared
    /// first): at most [`MAX_BLOCK_LINES`] lines, so a block's results are
    /// bounded whatever its lines' lengths. `Err(buf)` hands the buffer back
    /// when the input ended.
    fn next(
        &mut self,
        mut buf: Vec<u8>,
        ends: &mut Vec<usize>,
    ) -> std::io::Result<Result<Body, Vec<u8>>> {
        ends.clear();
        let mut len = self.carry.len();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf[..len].copy_from_slice(&self.carry);
        self.carry.clear();
        let mut scanned = 0;
        loop {
            for p in memchr::memchr_iter(b'\n', &buf[scanned..len]) {
                ends.push(scanned + p);
                if ends.len() == MAX_BLOCK_LINES {
                    break;
                }
            }
            scanned = len;
            if ends.len() == MAX_BLOCK_LINES
                || ((len >= self.block || self.eof) && !ends.is_empty())
            {
                let end = ends.last().map_or(len, |&p| p + 1);
                self.carry.extend_from_slice(&buf[end..len]);
                return Ok(Ok(Body::Lines { buf, len: end }));
            }
            if self.eof {
                if len == 0 {
                    return Ok(Err(buf));
                }
                return Ok(Ok(Body::Lines { buf, len }));
            }
            if len > self.cap && ends.is_empty() {
                // A line over the cap: skip to its newline, reading into
                // the same buffer (its bytes are not kept).
                let mut skipped = len as u64;
                loop {
                    let mut n = 0;
                    let got = self.read_into(&mut buf, &mut n, 64 * 1024)?;
                    if got == 0 {
                        self.eof = true;
                        self.carry.clear();
                        return Ok(Ok(Body::TooLong(skipped)));
                    }
                    if let Some(p) = memchr::memchr(b'\n', &buf[..n]) {
                        skipped += p as u64;
                        self.carry.extend_from_slice(&buf[p + 1..n]);
                        return Ok(Ok(Body::TooLong(skipped)));
                    }
                    skipped += n as u64;
                }
            }
            let want = self.block.clamp(4096, 1 << 22);
            if self.read_into(&mut buf, &mut len, want)? == 0 {
                self.eof = true;
            }
        }
    }
}

/// The lines of a block (`ends`: the offsets of its newlines, in order),
/// read by a worker, into the results (empty).
fn pre_block(data: &[u8], ends: impl IntoIterator<Item = usize>, how: How, r: &mut Bufs) {
    let mut start = 0;
    let one = |r: &mut Bufs, line: &[u8]| {
        let p = if line.len() > how.cap {
            Pre::TooLong(line.len() as u64)
        } else {
            pre_line(
                classify::trim_end(line),
                how.format,
                &mut r.used,
                &mut r.arena,
            )
        };
        r.add(p, how.keep);
    };
    for p in ends {
        one(r, &data[start..p]);
        start = p + 1;
    }
    if start < data.len() {
        one(r, &data[start..]);
    }
    r.end_run();
}

/// The spare block buffers, shared by the threads: the workers wait for
/// one; the applying thread only takes one when it is there.
struct Pool {
    spares: std::sync::Mutex<(Vec<Spare>, bool)>,
    ready: std::sync::Condvar,
}

impl Pool {
    fn new(n: usize) -> Pool {
        Pool {
            spares: std::sync::Mutex::new(((0..n).map(|_| Spare::default()).collect(), false)),
            ready: std::sync::Condvar::new(),
        }
    }

    /// A spare, waiting for one; `None` once the pool is closed.
    fn take(&self) -> Option<Spare> {
        let g = self.spares.lock().ok()?;
        let mut g = self
            .ready
            .wait_while(g, |(spares, closed)| spares.is_empty() && !*closed)
            .ok()?;
        if g.1 { None } else { g.0.pop() }
    }

    /// A spare if one is free now.
    fn try_take(&self) -> Option<Spare> {
        let mut g = self.spares.lock().ok()?;
        if g.1 { None } else { g.0.pop() }
    }

    fn put(&self, s: Spare) {
        if let Ok(mut g) = self.spares.lock() {
            g.0.push(s);
            self.ready.notify_one();
        }
    }

    /// Wakes and stops the waiting workers (also after a panic poisoned
    /// the lock: a closed pool is what ends their wait).
    fn close(&self) {
        let mut g = self
            .spares
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.1 = true;
        self.ready.notify_all();
    }
}

/// Where the parallel pipeline's blocks come from: a stream cut where its
/// lines end ([`Stream`]), or a file read at offsets ([`AtBlocks`]).
trait Blocks: Sync {
    /// Reads the next block into `spare` and classifies its lines: its index
    /// and results; `None` once there is no block left (or a read failed).
    fn next(&self, spare: Spare, how: How) -> Option<OutMsg>;
    /// Whether every block there will be is among the first `applied`.
    fn all_applied(&self, applied: u64) -> bool;
    /// Hands out no more blocks.
    fn stop(&self);
    /// The bytes read.
    fn bytes(&self) -> u64;
}

/// A stream, cut into blocks in input order under a lock.
struct Stream<R>(std::sync::Mutex<Shared<R>>);

/// The stream and the index of its next block, shared by the threads.
struct Shared<R> {
    chunker: Chunker<R>,
    idx: u64,
    done: bool,
}

impl<R: Read + Send> Blocks for Stream<R> {
    /// Reads the next block into `spare` (in input order, under the lock)
    /// and classifies its lines.
    fn next(&self, spare: Spare, how: How) -> Option<OutMsg> {
        let (buf, mut bufs) = spare;
        let read = {
            let mut g = self.0.lock().ok()?;
            if g.done {
                return None;
            }
            let idx = g.idx;
            match g.chunker.next(buf, &mut bufs.ends) {
                Ok(Ok(body)) => {
                    g.idx += 1;
                    Ok((idx, body))
                }
                Ok(Err(_)) => {
                    g.done = true;
                    return None;
                }
                Err(e) => {
                    // The failed block still takes an index, so the applying
                    // thread reaches its error in input order.
                    g.idx += 1;
                    g.done = true;
                    Err((idx, e))
                }
            }
        };
        Some(match read {
            Ok((idx, body)) => {
                bufs.reset();
                let buf = match body {
                    Body::TooLong(n) => {
                        bufs.add(Pre::TooLong(n), how.keep);
                        None
                    }
                    Body::Lines { buf, len } => {
                        let ends = std::mem::take(&mut bufs.ends);
                        pre_block(&buf[..len], ends.iter().copied(), how, &mut bufs);
                        bufs.ends = ends;
                        Some(buf)
                    }
                };
                (idx, Ok((buf, bufs)))
            }
            Err((idx, e)) => (idx, Err(e)),
        })
    }

    fn all_applied(&self, applied: u64) -> bool {
        self.0.lock().map_or(true, |g| g.done && applied >= g.idx)
    }

    fn stop(&self) {
        if let Ok(mut g) = self.0.lock() {
            g.done = true;
        }
    }

    fn bytes(&self) -> u64 {
        self.0.lock().map_or(0, |g| g.chunker.bytes)
    }
}

/// Bytes that can be read at any offset: a regular file, or bytes in memory.
pub(crate) trait ReadAt: Sync {
    /// Reads into `buf` from `off`, as [`std::os::unix::fs::FileExt::read_at`]:
    /// the bytes read, 0 at the end.
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize>;
}

#[cfg(unix)]
impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, off)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
        let rest = usize::try_from(off)
            .ok()
            .and_then(|o| self.get(o..))
            .unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
}

/// Reads up to `want` bytes at `off` into `buf[from..]`, growing `buf` if
/// it is shorter (a recycled buffer is zeroed only where it grows, once);
/// the bytes read (fewer only at the end of the source).
fn read_at_into<S: ReadAt + ?Sized>(
    src: &S,
    buf: &mut Vec<u8>,
    from: usize,
    off: u64,
    want: usize,
) -> std::io::Result<usize> {
    if buf.len() < from + want {
        buf.resize(from + want, 0);
    }
    let mut got = 0;
    while got < want {
        match src.read_at(&mut buf[from + got..from + want], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A file read in blocks of `block` bytes at fixed offsets from `base` to
/// `size` (its size when the parallel read started), each block by
/// whichever thread takes it, with no lock around the reads: the threads
/// read and copy in parallel. A line belongs to the block it starts in: a
/// block's lines start after the first newline at or after the byte before
/// it (block 0 starts on a line), and its last line is read on past the
/// block's end to its newline (or, over the line cap, skipped to it and
/// reported by length). Every byte is read by the block it belongs to and
/// at most looked at by the one before, so the lines, their order and their
/// numbers are the stream's.
struct AtBlocks<'s, S: ?Sized> {
    src: &'s S,
    base: u64,
    size: u64,
    block: u64,
    /// Blocks in all.
    count: u64,
    next: std::sync::atomic::AtomicU64,
    stopped: std::sync::atomic::AtomicBool,
    /// Bytes of the lines read, each line counted by the block it starts in
    /// (with its newline).
    bytes: std::sync::atomic::AtomicU64,
}

impl<'s, S: ReadAt + ?Sized> AtBlocks<'s, S> {
    fn new(src: &'s S, base: u64, size: u64, block: usize) -> Self {
        let block = block.clamp(64, 1 << 26) as u64;
        AtBlocks {
            src,
            base,
            size,
            block,
            count: size.saturating_sub(base).div_ceil(block),
            next: std::sync::atomic::AtomicU64::new(0),
            stopped: std::sync::atomic::AtomicBool::new(false),
            bytes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Reads block `k` into `buf`: the lines that start in it are
    /// `buf[first..end]` (all ending with a newline but perhaps the last one
    /// of the input), followed by an over-cap line of the given length.
    fn read(
        &self,
        k: u64,
        buf: &mut Vec<u8>,
        cap: usize,
    ) -> std::io::Result<(usize, usize, Option<u64>)> {
        let start = self.base + k * self.block;
        let end = (start + self.block).min(self.size);
        // Block k > 0 also reads the byte before it: a newline there means a
        // line starts right at `start`.
        let back = u64::from(k > 0);
        let at = start - back;
        let n = read_at_into(self.src, buf, 0, at, (end - at) as usize)?;
        let first = if k == 0 {
            0
        } else {
            memchr::memchr(b'\n', &buf[..n]).map_or(n, |i| i + 1)
        };
        if first >= n {
            // No line starts here (inside a line longer than a block).
            return Ok((n, n, None));
        }
        let mut len = n;
        if buf[n - 1] != b'\n' && n as u64 == end - at {
            // The last line goes on past the block: read it to its newline.
            let last = memchr::memrchr(b'\n', &buf[first..n]).map_or(first, |i| first + i + 1);
            loop {
                if len - last > cap {
                    let (line, bytes) = self.skip_line(buf, last, at + len as u64, len - last)?;
                    self.count_bytes((last - first) as u64 + bytes);
                    return Ok((first, last, Some(line)));
                }
                let got = read_at_into(self.src, buf, len, at + len as u64, 64 * 1024)?;
                if got == 0 {
                    break;
                }
                if let Some(i) = memchr::memchr(b'\n', &buf[len..len + got]) {
                    len += i + 1;
                    break;
                }
                len += got;
            }
        }
        self.count_bytes((len - first) as u64);
        Ok((first, len, None))
    }

    /// Skips the rest of an over-cap line (`read` bytes of it read so far,
    /// the rest from `off` in the file) to its newline, reading through
    /// `buf[from..]` without keeping its bytes: its length without the
    /// newline, and its bytes with it.
    fn skip_line(
        &self,
        buf: &mut Vec<u8>,
        from: usize,
        mut off: u64,
        read: usize,
    ) -> std::io::Result<(u64, u64)> {
        let mut len = read as u64;
        loop {
            let got = read_at_into(self.src, buf, from, off, 64 * 1024)?;
            if got == 0 {
                return Ok((len, len));
            }
            if let Some(i) = memchr::memchr(b'\n', &buf[from..from + got]) {
                return Ok((len + i as u64, len + i as u64 + 1));
            }
            len += got as u64;
            off += got as u64;
        }
    }

    fn count_bytes(&self, n: u64) {
        self.bytes
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<S: ReadAt + ?Sized> Blocks for AtBlocks<'_, S> {
    fn next(&self, spare: Spare, how: How) -> Option<OutMsg> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.stopped.load(Relaxed) {
            return None;
        }
        let k = self.next.fetch_add(1, Relaxed);
        if k >= self.count {
            return None;
        }
        let (mut buf, mut bufs) = spare;
        let read = self.read(k, &mut buf, how.cap);
        Some(match read {
            Ok((first, end, over)) => {
                let data = &buf[first..end];
                bufs.reset();
                pre_block(data, memchr::memchr_iter(b'\n', data), how, &mut bufs);
                if let Some(n) = over {
                    bufs.add(Pre::TooLong(n), how.keep);
                    bufs.end_run();
                }
                (k, Ok((Some(buf), bufs)))
            }
            Err(e) => {
                self.stopped.store(true, Relaxed);
                (k, Err(e))
            }
        })
    }

    fn all_applied(&self, applied: u64) -> bool {
        applied >= self.count
    }

    fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// [`run_parallel`] for a source that can be read at offsets (a regular
/// file): plain text is read in parallel by [`AtBlocks`], from the end of
/// the lines read while the format was not known to the source's `size`
/// (its length now; what is appended later is not read). A gzip source,
/// one thread, or an input of decision records take [`run_parallel`]'s
/// way.
pub(crate) fn run_at<S: ReadAt + ?Sized>(
    src: &S,
    size: u64,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<InputLedger, ParseError> {
    let reader = AtReader { src, off: 0 };
    let mut magic = [0u8; 2];
    let n = src
        .read_at(&mut magic, 0)
        .map_err(|e| ParseError::io(display, e))?;
    if opts.threads <= 1 || (n == 2 && magic == [0x1f, 0x8b]) || opts.format == InputFormat::Traces
    {
        return run_parallel(reader, display, naming, opts, sink);
    }
    if opts.format == InputFormat::Auto {
        let mut head = vec![0u8; input::PEEK_BYTES.min(size as usize)];
        let mut got = 0;
        while got < head.len() {
            match src.read_at(&mut head[got..], got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ParseError::io(display, e)),
            }
        }
        if crate::trace::looks_like_traces(&head[..got]) {
            return run_parallel(reader, display, naming, opts, sink);
        }
    }
    let lines = LineReader::new(reader, opts.max_line_bytes);
    let eng = Engine::new(display, naming, opts);
    let (eng, bytes) = format_then(lines, eng, sink, display, |lines, eng, sink| {
        let (carry, _, _, read) = lines.into_rest();
        // Where the lines not yet read start.
        let base = read - carry.len() as u64;
        let blocks = AtBlocks::new(src, base, size.max(base), opts.block_bytes);
        parallel(&blocks, eng, sink, opts.threads, display)?;
        Ok(base + blocks.bytes())
    })?;
    Ok(eng.finish(sink, bytes, bytes, false))
}

/// A [`ReadAt`] source read in order, as a stream.
struct AtReader<'s, S: ?Sized> {
    src: &'s S,
    off: u64,
}

impl<S: ReadAt + ?Sized> Read for AtReader<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.src.read_at(buf, self.off)?;
        self.off += n as u64;
        Ok(n)
    }
}

/// The parallel pipeline on `threads` threads: this one and `threads - 1`
/// workers. A worker takes the next block of whole lines from the stream
/// ([`Chunker`], under a lock, into one of the recycled buffers) and runs
/// [`pre_line`] on its lines while the block is still in its core's cache.
/// This thread applies the results in input order (assembly, ledger, sink)
/// and hands each block's buffers back; when no result is ready to apply it
/// reads and classifies a block itself (one thread per core: no third
/// thread taking turns with the workers, and the blocks it classifies are
/// applied from its own cache). At most `4 * threads` blocks are in flight
/// (there are that many buffers; at most [`MAX_INFLIGHT`]), so memory stays
/// bounded. Returns the bytes
/// read.
fn parallel_stream<R: Read + Send>(
    lines: LineReader<R>,
    eng: &mut Engine<'_>,
    sink: &mut dyn FnMut(Item),
    threads: usize,
    display: &str,
) -> Result<u64, ParseError> {
    let (carry, r, eof, bytes_before) = lines.into_rest();
    let stream = Stream(std::sync::Mutex::new(Shared {
        chunker: Chunker {
            r,
            carry,
            eof,
            cap: eng.opts.max_line_bytes.max(1),
            block: eng.opts.block_bytes.max(1),
            bytes: 0,
        },
        idx: 0,
        done: false,
    }));
    parallel(&stream, eng, sink, threads, display).map(|()| bytes_before + stream.bytes())
}

/// The parallel pipeline on `threads` threads over the blocks of `blocks`
/// (see [`parallel_stream`]).
fn parallel<B: Blocks>(
    blocks: &B,
    eng: &mut Engine<'_>,
    sink: &mut dyn FnMut(Item),
    threads: usize,
    display: &str,
) -> Result<(), ParseError> {
    use std::collections::BTreeMap;
    use std::sync::mpsc;

    let how = How {
        format: eng.format,
        cap: eng.opts.max_line_bytes.max(1),
        keep: eng.opts.keep_malformed.max(1),
    };
    // Blocks in flight, each up to a few MiB with its results: 4 a
    // thread, at most 16 in all (so -j8 holds no more than -j4).
    let inflight = threads.saturating_mul(4).clamp(2, MAX_INFLIGHT);
    let pool = Pool::new(inflight);
    std::thread::scope(|s| {
        let (out_tx, out_rx) = mpsc::sync_channel::<OutMsg>(inflight);
        let mut workers = Vec::with_capacity(threads.max(2) - 1);
        for _ in 1..threads.max(2) {
            let tx = out_tx.clone();
            let pool = &pool;
            workers.push(s.spawn(move || {
                // A panic here closes the pool and stops the blocks: the
                // other workers end, the applying thread's wait for this
                // worker's block ends when they have, and the panic is
                // resumed below.
                let _stop = StopOnUnwind(blocks, pool);
                while let Some(spare) = pool.take() {
                    let Some(msg) = blocks.next(spare, how) else {
                        break;
                    };
                    if tx.send(msg).is_err() {
                        break;
                    }
                }
            }));
        }
        drop(out_tx);
        // Whether this thread returns or unwinds (a panic in the sink or
        // the assembly), the workers are woken and stopped: no more spare
        // buffers, no more blocks (and once `out_rx` is dropped, no more
        // sends).
        let stop = Stop(blocks, &pool);
        let mut apply = || -> Result<(), ParseError> {
            let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
            let mut next = 0u64;
            loop {
                while let Some(res) = pending.remove(&next) {
                    let (buf, mut bufs) = res.map_err(|e| ParseError::io(display, e))?;
                    let mut used = bufs.used.drain(..);
                    for p in bufs.out.drain(..) {
                        let u = if matches!(p, Pre::Used(_)) {
                            used.next()
                        } else {
                            None
                        };
                        eng.apply(p, u, &bufs.arena, sink)?;
                    }
                    eng.absorb(&bufs.tally);
                    drop(used);
                    next += 1;
                    pool.put((buf.unwrap_or_default(), bufs));
                }
                // A worker's result, if one is ready.
                if let Ok((idx, res)) = out_rx.try_recv() {
                    pending.insert(idx, res);
                    continue;
                }
                // Nothing to apply: classify the next block here.
                if let Some(spare) = pool.try_take()
                    && let Some((idx, res)) = blocks.next(spare, how)
                {
                    pending.insert(idx, res);
                    continue;
                }
                // The input has ended and every block read was applied.
                if blocks.all_applied(next) {
                    return Ok(());
                }
                // Wait for a worker's block; every worker gone (one
                // panicked, see below) ends the wait.
                match out_rx.recv() {
                    Ok((idx, res)) => {
                        pending.insert(idx, res);
                    }
                    Err(_) => return Ok(()),
                }
            }
        };
        let result = apply();
        drop(stop);
        drop(out_rx);
        // A worker's panic is this call's panic, with its own message (not
        // the scope's generic one), before any result of an input it cut
        // short.
        for w in workers {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
        result
    })
}

/// Stops the parallel pipeline when dropped: the blocks hand out no more,
/// the pool hands out no more spares and wakes the workers waiting for one.
struct Stop<'a, B: Blocks>(&'a B, &'a Pool);

impl<B: Blocks> Drop for Stop<'_, B> {
    fn drop(&mut self) {
        self.0.stop();
        self.1.close();
    }
}

/// [`Stop`], only when the thread unwinds (a worker's panic).
struct StopOnUnwind<'a, B: Blocks>(&'a B, &'a Pool);

impl<B: Blocks> Drop for StopOnUnwind<'_, B> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
            self.1.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that gives `ok` bytes of `data`, then fails.
    struct FailAfter {
        data: Vec<u8>,
        at: usize,
        ok: usize,
    }

    impl Read for FailAfter {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.at >= self.ok {
                return Err(std::io::Error::other("disk on fire"));
            }
            let n = buf.len().min(self.ok - self.at).min(3000);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// A read error in the middle of an input stops the parse with that
    /// error, naming the input, on one thread and on several (where the
    /// failing block may be read by any thread), read as a stream or at
    /// offsets.
    #[test]
    fn read_error_mid_input_is_reported_on_every_thread_count() {
        let data = mixed_log();
        let ok = data.len() / 2;
        for threads in [1, 2, 3, 4] {
            let opts = ParseOptions {
                threads,
                block_bytes: 4096,
                ..ParseOptions::default()
            };
            for at in [false, true] {
                let naming = DeploymentNaming::fallback("x");
                let err = if at {
                    let src = FailAt {
                        ok,
                        data: data.clone(),
                    };
                    run_at(&src, data.len() as u64, "x.log", naming, &opts, &mut |_| {})
                } else {
                    let r = FailAfter {
                        ok,
                        data: data.clone(),
                        at: 0,
                    };
                    run_parallel(r, "x.log", naming, &opts, &mut |_| {})
                }
                .expect_err("the read error is reported");
                assert!(err.to_string().contains("x.log"), "{err}");
                // The cause is the source, not repeated in the message.
                let cause = std::error::Error::source(&err).map(|c| c.to_string());
                assert!(cause.is_some_and(|c| c.contains("disk on fire")), "{err:?}");
                assert!(!err.to_string().contains("disk on fire"), "{err}");
                assert_eq!(err.path(), Some(std::path::Path::new("x.log")));
            }
        }
    }

    /// Runs `f` on its own thread and returns its panic message, or `None`
    /// if it returned; fails if it has done neither after a minute (a hang:
    /// the runs take milliseconds).
    fn panic_of(f: impl FnOnce() + Send + 'static) -> Option<String> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r.err().map(|p| {
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            }));
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("the parse neither returned nor panicked within 60 s: it hangs")
    }

    /// How a test feeds a log to the pipeline.
    #[derive(Clone, Copy, Debug)]
    enum Path {
        /// Read at offsets.
        At,
        /// As a stream.
        Stream,
        /// Gzipped (a stream, whichever way it is given).
        Gzip,
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// A panic in the sink (the applying thread) ends the parse with that
    /// panic on every path and thread count, however many blocks the
    /// workers hold or wait for, instead of leaving them waiting for
    /// buffers that are never handed back.
    #[test]
    fn a_panic_in_the_sink_ends_the_parse() {
        let log = std::sync::Arc::new(mixed_log().repeat(4));
        let gz = std::sync::Arc::new(gzip(&log));
        for threads in [2, 4] {
            for path in [Path::At, Path::Stream, Path::Gzip] {
                for after in [0, 5, 60] {
                    let (log, gz) = (log.clone(), gz.clone());
                    let msg = panic_of(move || {
                        let opts = ParseOptions {
                            threads,
                            block_bytes: 4096,
                            ..ParseOptions::default()
                        };
                        let mut n = 0;
                        let mut sink = |_| {
                            n += 1;
                            if n > after {
                                panic!("injected sink panic");
                            }
                        };
                        let naming = DeploymentNaming::fallback("t");
                        let _ = match path {
                            Path::At => {
                                run_at(&log[..], log.len() as u64, "t", naming, &opts, &mut sink)
                            }
                            Path::Stream => run_parallel(&log[..], "t", naming, &opts, &mut sink),
                            Path::Gzip => {
                                run_at(&gz[..], gz.len() as u64, "t", naming, &opts, &mut sink)
                            }
                        };
                    });
                    assert_eq!(
                        msg.as_deref(),
                        Some("injected sink panic"),
                        "{threads} threads, {path:?}, panic after {after} items"
                    );
                }
            }
        }
    }

    /// Bytes whose first read that covers an offset panics (on one
    /// thread: the others go on reading).
    struct PanicAt(Vec<u8>, usize, std::sync::atomic::AtomicBool);

    impl ReadAt for PanicAt {
        fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
            let off = (off as usize).min(self.0.len());
            let n = buf.len().min(self.0.len() - off);
            if (off..off + n).contains(&self.1)
                && !self.2.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                panic!("injected read panic");
            }
            buf[..n].copy_from_slice(&self.0[off..off + n]);
            Ok(n)
        }
    }

    /// A panic while a block is read and classified, on a worker or on the
    /// applying thread, ends the parse with that panic (not a hang, not a
    /// result cut short) on every path and thread count.
    #[test]
    fn a_panic_while_reading_ends_the_parse() {
        let log = mixed_log().repeat(4);
        for threads in [2, 4] {
            for path in [Path::At, Path::Stream, Path::Gzip] {
                for cut in [log.len() / 7, log.len() / 2] {
                    let data = match path {
                        Path::Gzip => gzip(&log),
                        _ => log.clone(),
                    };
                    let cut = match path {
                        Path::Gzip => cut * data.len() / log.len(),
                        _ => cut,
                    };
                    let msg = panic_of(move || {
                        let opts = ParseOptions {
                            threads,
                            block_bytes: 4096,
                            ..ParseOptions::default()
                        };
                        let src = PanicAt(data, cut, Default::default());
                        let naming = DeploymentNaming::fallback("t");
                        let size = src.0.len() as u64;
                        let _ = match path {
                            Path::At | Path::Gzip => {
                                run_at(&src, size, "t", naming, &opts, &mut |_| {})
                            }
                            Path::Stream => {
                                let r = AtReader { src: &src, off: 0 };
                                run_parallel(r, "t", naming, &opts, &mut |_| {})
                            }
                        };
                    });
                    assert_eq!(
                        msg.as_deref(),
                        Some("injected read panic"),
                        "{threads} threads, {path:?}, cut at {cut}"
                    );
                }
            }
        }
    }

    /// `log` read at offsets (`at`) or as a stream: its items and ledger.
    fn read_log(log: &[u8], opts: &ParseOptions, at: bool) -> (Vec<Item>, InputLedger) {
        let mut items = Vec::new();
        let naming = DeploymentNaming::fallback("t");
        let ledger = if at {
            run_at(log, log.len() as u64, "t.log", naming, opts, &mut |i| {
                items.push(i)
            })
        } else {
            run_parallel(log, "t.log", naming, opts, &mut |i| items.push(i))
        }
        .unwrap();
        (items, ledger)
    }

    /// Recycled block buffers hold stale bytes of earlier blocks; lines over
    /// the cap, lines longer than a block, more short lines than a stream's
    /// block holds and a last line without newline must read the same as on
    /// one thread, read as a stream or at offsets.
    #[test]
    fn recycled_blocks_read_like_one_thread() {
        let mut log = Vec::new();
        for i in 0..400 {
            let pad = "x".repeat((i * 37) % 300);
            log.extend_from_slice(
                format!(
                    "{{\"level\":\"debug\",\"ts\":1.{i},\"msg\":\"Request handled\",\"x-request-id\":\"r{i}\",\"endpoint\":\"10.0.0.{}:8000\",\"pad\":\"{pad}\"}}\n",
                    i % 7
                )
                .as_bytes(),
            );
            if i % 50 == 0 {
                log.extend_from_slice(&[b'y'; 5000]);
                log.push(b'\n');
            }
        }
        // More short lines than a block holds.
        for i in 0..(3 * MAX_BLOCK_LINES) {
            log.extend_from_slice(if i % 1000 == 0 { b"{\n" } else { b"\n" });
        }
        log.extend_from_slice(b"{\"msg\":\"Request handled\",\"x-request-id\":\"last\"}");
        let mut want = None;
        for (threads, block_bytes) in [(1, 1), (2, 64), (2, 1000), (3, 4096), (2, 1 << 20)] {
            let opts = ParseOptions {
                threads,
                block_bytes,
                max_line_bytes: 400,
                ..ParseOptions::default()
            };
            for at in [true, false] {
                let (items, ledger) = read_log(&log, &opts, at);
                assert!(ledger.counts.lines_malformed > 8);
                let got = format!("{items:?} {ledger:?}");
                match &want {
                    None => want = Some(got),
                    Some(w) => assert!(
                        *w == got,
                        "{threads} threads, {block_bytes} B, at offsets: {at}"
                    ),
                }
            }
        }
    }

    /// A log with real decisions and every kind of line a block boundary
    /// can fall into: lines longer than a block, lines over the cap, CRLF
    /// endings, runs of blank and malformed lines, and no newline at the end.
    fn mixed_log() -> Vec<u8> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");
        let mut log = Vec::new();
        for f in [
            "edge/all_filter_versions.log",
            "edge/crlf.log",
            "edge/klog_panic_noise.log",
            "edge/kubectl_prefix_timestamps.log",
            "edge/non_utf8.log",
            "balanced/epp.log",
            "edge/interleaved_unordered_ts.log",
        ] {
            log.extend(std::fs::read(format!("{root}{f}")).unwrap());
            log.extend_from_slice(&[b'y'; 5000]);
            log.push(b'\n');
            log.extend_from_slice(&[b'z'; 9000]);
            log.extend_from_slice(b"\r\n");
            for i in 0..60 {
                log.extend_from_slice(if i % 20 < 10 { b"\n" } else { b"{\n" });
            }
            for i in 0..40 {
                log.extend_from_slice(if i % 2 == 0 { b"{\n" } else { b"x\n" });
            }
        }
        log.extend_from_slice(&[b'w'; 9000]);
        log.push(b'\n');
        log.extend_from_slice(b"{\"msg\":\"Request handled\",\"x-request-id\":\"last\"}");
        log
    }

    /// Reading at offsets, in blocks of any size on any number of threads,
    /// gives what one thread reading the stream gives (decisions, their line
    /// numbers, the ledger), and so does the parallel stream.
    #[test]
    fn blocks_at_offsets_read_like_a_stream() {
        let log = mixed_log();
        let run_with = |threads: usize, block_bytes: usize, at: bool| {
            let opts = ParseOptions {
                threads,
                block_bytes,
                max_line_bytes: 8192,
                ..ParseOptions::default()
            };
            read_log(&log, &opts, at)
        };
        let (items, ledger) = run_with(1, 1 << 20, false);
        assert!(items.len() > 20, "{}", items.len());
        assert!(ledger.counts.lines_malformed > 100);
        let want = format!("{items:?} {ledger:?}");
        for threads in [2, 3] {
            for block in [64, 97, 1000, 4096, 5001, 65536, 1 << 20] {
                for at in [true, false] {
                    let (items, ledger) = run_with(threads, block, at);
                    let got = format!("{items:?} {ledger:?}");
                    assert!(
                        got == want,
                        "{threads} threads, {block} B blocks, at offsets: {at}"
                    );
                }
            }
        }
    }

    /// Bytes that fail to read past an offset.
    struct FailAt {
        data: Vec<u8>,
        ok: usize,
    }

    impl ReadAt for FailAt {
        fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
            let off = off as usize;
            if off + buf.len() > self.ok {
                return Err(std::io::Error::other("disk on fire"));
            }
            buf.copy_from_slice(&self.data[off..off + buf.len()]);
            Ok(buf.len())
        }
    }

    /// A block's ignored lines, and its malformed ones after the first
    /// few, take no entry of their own, and are counted and numbered as
    /// lines one by one.
    #[test]
    fn lines_without_entries_are_counted_and_numbered() {
        let mut data = Vec::new();
        data.extend_from_slice(&b"\n".repeat(1000));
        data.extend_from_slice(&b"{\n".repeat(1000));
        data.extend_from_slice(b"x\n{\"msg\":\"Request handled\",\"x-request-id\":\"r\"}\n\n");
        let how = How {
            format: InputFormat::Logs,
            cap: 100,
            keep: 3,
        };
        let mut r = Bufs::default();
        pre_block(&data, memchr::memchr_iter(b'\n', &data), how, &mut r);
        assert_eq!(r.out.len(), 7, "skip, 3 malformed, skip, used, skip");
        assert!(matches!(r.out[0], Pre::Skip(1000)));
        assert!(matches!(r.out[4], Pre::Skip(998)));
        assert!(matches!(r.out[5], Pre::Used(false)));
        assert!(matches!(r.out[6], Pre::Skip(1)));
        assert_eq!((r.tally.ignored, r.tally.malformed), (1002, 997));
        for (threads, keep) in [(1, 3), (2, 3), (2, 0), (3, 1500)] {
            let opts = ParseOptions {
                threads,
                block_bytes: 1 << 20,
                keep_malformed: keep,
                ..ParseOptions::default()
            };
            let p = crate::parse_slice("r.log", &data, &opts).unwrap();
            let c = &p.ledger.counts;
            assert_eq!(
                (
                    c.lines_total,
                    c.lines_ignored,
                    c.lines_malformed,
                    c.lines_used
                ),
                (2003, 1002, 1000, 1)
            );
            assert_eq!(
                (c.shapes.blank, c.shapes.zap_json, c.shapes.other),
                (1001, 1001, 1)
            );
            let lines: Vec<u64> = c.first_malformed.iter().map(|m| m.at.line).collect();
            let want: Vec<u64> = (1001..1001 + keep.min(1000) as u64).collect();
            assert_eq!(lines, want, "{threads} threads, keep {keep}");
        }
        let strict = ParseOptions {
            threads: 2,
            strict: true,
            keep_malformed: 0,
            ..ParseOptions::default()
        };
        let err = crate::parse_slice("r.log", &data, &strict).expect_err("strict");
        assert!(err.to_string().contains("r.log:1001"), "{err}");
    }

    /// A block whose last line is over the cap reports its length without
    /// buffering it, and the next block starts after it.
    #[test]
    fn over_cap_line_at_a_block_end_is_skipped_unbuffered() {
        let mut data = b"a\n".repeat(50);
        data.extend(std::iter::repeat_n(b'q', 1_000_000));
        data.extend_from_slice(b"\nb\n");
        let blocks = AtBlocks::new(&data[..], 0, data.len() as u64, 4096);
        let mut buf = Vec::new();
        let (first, end, over) = blocks.read(0, &mut buf, 8192).unwrap();
        assert_eq!((first, end, over), (0, 100, Some(1_000_000)));
        assert!(buf.capacity() < 200_000, "{}", buf.capacity());
        // The blocks inside the long line hold no line; the one holding its
        // newline starts after it.
        let (first, end, _) = blocks.read(1, &mut buf, 8192).unwrap();
        assert_eq!(first, end);
        let last = (data.len() as u64 - 1) / 4096;
        let (first, end, over) = blocks.read(last, &mut buf, 8192).unwrap();
        assert_eq!((&buf[first..end], over), (&b"b\n"[..], None));
        assert_eq!(blocks.bytes(), data.len() as u64);
    }

    /// A file that is shorter than its size said when read (truncated
    /// while read) gives the lines it still has, as one thread reading
    /// those bytes would, and counts only the bytes read.
    #[test]
    fn a_file_cut_while_read_gives_the_lines_it_has() {
        let log = mixed_log();
        let cut = &log[..log.len() * 2 / 3];
        let opts = |threads| ParseOptions {
            threads,
            block_bytes: 4096,
            ..ParseOptions::default()
        };
        let mut want = Vec::new();
        let one = run(
            cut,
            "t.log",
            DeploymentNaming::fallback("t"),
            &opts(1),
            &mut |i| want.push(i),
        )
        .unwrap();
        for threads in [2, 3] {
            let mut got = Vec::new();
            let naming = DeploymentNaming::fallback("t");
            let l = run_at(
                cut,
                log.len() as u64,
                "t.log",
                naming,
                &opts(threads),
                &mut |i| got.push(i),
            )
            .unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
            assert_eq!(l, one, "{threads} threads");
            assert_eq!(l.counts.bytes, cut.len() as u64);
        }
    }
}
