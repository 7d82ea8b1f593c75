//! The per-input driver: lines to classes to events to items, with the ledger.

mod blocks;
mod pipeline;

pub(crate) use blocks::ReadAt;
use blocks::{AtBlocks, AtReader, Blocks};
pub(crate) use pipeline::Reuse;
use pipeline::{parallel, parallel_stream};

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
use crate::name::Name;
use crate::record::{self, DecisionRecord};
use crate::reframe;
use crate::time;
use crate::vllm::VllmStats;
use crate::{Item, ParseOptions};

/// Parses one input stream.
pub(crate) struct Engine<'o> {
    display: Name,
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
            display: Name::from(display),
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
        let m = MalformedLine {
            at: SourceLoc {
                file: self.display.clone(),
                line: self.line,
            },
            reason,
        };
        self.counts.malformed(m, self.opts)
    }

    fn emit_decision(counts: &mut Counts, sink: &mut dyn FnMut(Item), d: Box<Decision>) {
        counts.count_decision(d.completion, d.filter.is_some());
        sink(Item::Decision(d));
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
        self.counts.pod_lines.line(raw);
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
                            d.deployment = Name::from(e);
                        }
                        Self::emit_decision(&mut self.counts, sink, Box::new(d));
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
                match flags.out_of_range {
                    // A malformed filter line (a number out of range, its
                    // time, its JSON): counted malformed, and still its
                    // request's filter line.
                    Some(k) => {
                        let reason = match &event {
                            Event::Filter(l) => l.malformed.clone(),
                            _ => None,
                        };
                        self.malformed(reason.unwrap_or(MalformedReason::OutOfRange(k.name())))?;
                    }
                    None => self.counts.lines_used += 1,
                }
                if flags.huge {
                    self.counts.values_huge += 1;
                }
                if flags.non_finite {
                    self.counts.values_non_finite += 1;
                }
                if let Some(t) = ts {
                    self.last_abs_ts = Some(t);
                }
                if let Event::VllmStats(mut st) = event {
                    self.counts.shapes.add(LineShape::Vllm);
                    let pod = pod.map(|p| arena.string(p));
                    let glued = st.glued.take();
                    let first = self.finish_stats(*st, pod.clone(), kubelet_ts);
                    self.counts.vllm_stats += 1;
                    sink(Item::VllmStats(Box::new(first)));
                    if let Some(next) = glued {
                        // Its own prefix gives its time: the kubelet's is
                        // the line's first record's.
                        let next = self.finish_stats(*next, pod, None);
                        self.counts.vllm_stats += 1;
                        sink(Item::VllmStats(Box::new(next)));
                    }
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
                let mut emit = |d: Box<Decision>| Self::emit_decision(counts, sink, d);
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
        self.counts.pod_lines.merge(&a.pods);
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
        let mut emit = |d: Box<Decision>| Self::emit_decision(counts, sink, d);
        self.asm.finish_boxed(&mut emit);
        self.counts.requests_evicted = self.asm.requests_evicted();
        self.counts.requests_evicted_for_memory = self.asm.requests_evicted_for_memory();
        self.counts.bytes = bytes;
        self.counts.bytes_compressed = compressed;
        InputLedger {
            name: self.display.into(),
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

// A used line is moved from the reader to the assembler whole: its flags
// (three bytes) take no more than the padding of one word.
const _: () = assert!(
    size_of::<UsedLine>()
        <= 2 * size_of::<Option<f64>>()
            + size_of::<ArenaEvent>()
            + 3 * size_of::<Option<Span>>()
            + 8
);

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
    /// The block's lines per pod.
    pods: crate::ledger::PodLines,
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

/// Times a line may carry: [`crate::domain::TS_RANGE`].
pub(crate) const TS_RANGE: std::ops::Range<f64> = crate::domain::TS_RANGE;

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
                mut event,
                mut flags,
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
                let reason = MalformedReason::OutOfRange("ts");
                match &mut event {
                    // Still its request's filter line, with an unknown
                    // outcome (see `FilterLine::malformed`).
                    Event::Filter(l) if request_id.is_some() => {
                        **l = crate::event::FilterLine::malformed(l.msg, fields::Key::Ts, reason);
                        flags = l.flags;
                        meta.ts = None;
                        meta.kubelet_ts = None;
                    }
                    _ => {
                        let shape = match f.body.first() {
                            Some(b'{') => LineShape::ZapJson,
                            _ => LineShape::Console,
                        };
                        return Pre::Malformed(shape, reason);
                    }
                }
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
    let opened = open(reader, opts).map_err(|e| ParseError::io(display, e))?;
    run_opened_here(opened, display, naming, opts, sink)
}

/// A stream opened to be read: decoded (gzip by content), its start
/// peeked and chained before the rest, and what the start showed. A
/// stream that cannot be opened again (stdin, a pipe) is opened once, and
/// its start looked at, before it is parsed.
pub(crate) struct Opened<D> {
    /// The decoded stream, from its start.
    pub(crate) r: D,
    /// Whether it is a trace input (forced by [`InputFormat::Traces`],
    /// detected by content with [`InputFormat::Auto`]).
    pub(crate) traces: bool,
    /// Whether it is gzip.
    pub(crate) gzip: bool,
    /// The raw (compressed) bytes read so far.
    pub(crate) raw: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The framing to rewrite, when the lines are framed by another tool
    /// than kubectl ([`reframe`]).
    pub(crate) framing: Option<reframe::Framing>,
}

impl<R: Read> Opened<Peeked<input::Decoded<R>>> {
    /// The first bytes of the decoded stream (up to [`input::PEEK_BYTES`]).
    pub(crate) fn head(&self) -> &[u8] {
        self.r.head.get_ref()
    }
}

impl<D> Opened<D> {
    /// The same stream, read through `f`.
    pub(crate) fn map<E>(self, f: impl FnOnce(D) -> E) -> Opened<E> {
        Opened {
            r: f(self.r),
            traces: self.traces,
            gzip: self.gzip,
            raw: self.raw,
            framing: self.framing,
        }
    }
}

/// Opens a stream: decodes it and peeks at its start ([`Opened`]).
pub(crate) fn open<R: Read>(
    reader: R,
    opts: &ParseOptions,
) -> std::io::Result<Opened<Peeked<input::Decoded<R>>>> {
    let (r, gzip, raw) = input::decode(reader)?;
    let (r, traces, framing) = sniffed(r, opts)?;
    Ok(Opened {
        r,
        traces,
        gzip,
        raw,
        framing,
    })
}

/// Reads an opened stream through an engine on this thread.
fn run_opened_here<D: Read>(
    opened: Opened<D>,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<InputLedger, ParseError> {
    let Opened {
        r,
        traces,
        gzip,
        raw,
        framing,
    } = opened;
    if traces {
        return run_traces(r, display, naming, opts, sink, gzip, &raw);
    }
    if let Some(f) = framing {
        let from_path = reframe::pod_from_path(std::path::Path::new(display));
        let r = reframe::Reframed::new(r, f, from_path, opts.max_line_bytes);
        return run_lines(r, display, naming, opts, sink, gzip, &raw);
    }
    run_lines(r, display, naming, opts, sink, gzip, &raw)
}

/// Reads a decoded stream of lines through an engine on this thread.
fn run_lines<R: Read>(
    r: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
    gzip: bool,
    raw: &std::sync::atomic::AtomicU64,
) -> Result<InputLedger, ParseError> {
    let mut lines = LineReader::with_buffer(r, opts.max_line_bytes, opts.line_buffer_bytes);
    let mut eng = Engine::new(display, naming, opts);
    sequential(&mut lines, &mut eng, sink, false, display)?;
    let bytes = lines.bytes;
    let compressed = raw.load(std::sync::atomic::Ordering::Relaxed);
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
        if self.head.get_ref().capacity() > 0 {
            // Read: its bytes are not held while the rest is (a followed
            // input is read for as long as it runs).
            self.head = std::io::Cursor::new(Vec::new());
        }
        match &mut self.rest {
            Some(r) => r.read(buf),
            None => Ok(0),
        }
    }
}

/// A decoded stream with its start peeked (up to [`input::PEEK_BYTES`],
/// whatever the format): the stream (the peeked bytes chained before the
/// rest) and whether it is a trace input (forced by
/// [`InputFormat::Traces`], detected by content with
/// [`InputFormat::Auto`]), and the framing to rewrite when its lines are
/// framed by another tool than kubectl ([`reframe`]).
fn sniffed<R: Read>(
    mut r: R,
    opts: &ParseOptions,
) -> std::io::Result<(Peeked<R>, bool, Option<reframe::Framing>)> {
    let (head, looks, ended) = input::peek(&mut r)?;
    let traces = match opts.format {
        InputFormat::Auto => looks,
        f => f == InputFormat::Traces,
    };
    let framing = match opts.format {
        InputFormat::Auto | InputFormat::Logs if !traces => reframe::detect(&head),
        _ => None,
    };
    let peeked = Peeked {
        head: std::io::Cursor::new(head),
        rest: (!ended).then_some(r),
    };
    Ok((peeked, traces, framing))
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
    let opened = open(reader, opts).map_err(|e| ParseError::io(display, e))?;
    run_opened(opened, display, naming, opts, sink)
}

/// [`run_parallel`] for a stream already opened ([`open`]).
pub(crate) fn run_opened<D: Read + Send>(
    opened: Opened<D>,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<InputLedger, ParseError> {
    // Rewritten lines are read on this thread: framed captures are small
    // next to the logs read in parallel.
    if opts.threads <= 1 || opened.traces || opened.framing.is_some() {
        return run_opened_here(opened, display, naming, opts, sink);
    }
    let Opened { r, gzip, raw, .. } = opened;
    let lines = LineReader::new(r, opts.max_line_bytes);
    let eng = Engine::new(display, naming, opts);
    let (eng, bytes) = format_then(lines, eng, sink, display, |lines, eng, sink| {
        parallel_stream(lines, eng, sink, opts.threads, display)
    })?;
    let compressed = raw.load(std::sync::atomic::Ordering::Relaxed);
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
        if crate::trace::looks_like_traces(&head[..got]) || reframe::detect(&head[..got]).is_some()
        {
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

#[cfg(test)]
mod tests {
    use super::blocks::{Bufs, MAX_BLOCK_LINES, pre_block};
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
