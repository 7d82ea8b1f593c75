//! The two block readers of the parallel pipeline: a stream cut into blocks
//! of whole lines under a lock ([`Stream`], [`Chunker`]), and a file read
//! at fixed offsets by whichever thread takes a block ([`AtBlocks`]); and
//! the recycled buffers a block is read into and classified in ([`Bufs`]).

use std::io::Read;

use super::{How, Pre, Tally, UsedLine, pre_line};
use crate::arena::Arena;
use crate::classify;
use crate::ledger::MalformedReason;

/// Most lines in one block: bounds a block's results (32 bytes a line, and
/// about 270 more a used line) to about 2.5 MiB, however short its lines
/// are.
pub(super) const MAX_BLOCK_LINES: usize = 8192;

/// The first read past a block's end for the rest of its last line: most
/// lines end within it (about 700 bytes on average at `-v=4`, endpoint dumps
/// a few KiB).
const TAIL_FIRST_STEP: usize = 4 * 1024;
/// The largest such read (the steps double up to it).
const TAIL_MAX_STEP: usize = 64 * 1024;
/// Room a block's buffer is given beyond the block when it first grows:
/// the steps that read its last line on to a newline up to 124 KiB past
/// the block's end (4 + 8 + ... + 64 KiB), so that they do not move the
/// block (a copy of the whole block into fresh memory) to make room.
const TAIL_ROOM: usize = 2 * TAIL_MAX_STEP;

/// A block read by a worker.
pub(super) enum Body {
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
pub(super) struct Bufs {
    pub(super) ends: Vec<usize>,
    pub(super) out: Vec<Pre>,
    pub(super) used: Vec<UsedLine>,
    pub(super) arena: Arena,
    pub(super) tally: Tally,
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
pub(super) type Spare = (Vec<u8>, Bufs);
/// A block's buffer (none for an over-cap line) and its results.
pub(super) type Done = std::io::Result<(Option<Vec<u8>>, Bufs)>;
pub(super) type OutMsg = (u64, Done);

/// Cuts a stream into blocks of whole lines at the last newline of each
/// read, with the same line semantics as [`LineReader`](crate::lines::LineReader): a line over the cap
/// is skipped to its newline and reported by length.
///
/// Blocks are read into recycled buffers (one per block in flight), so the
/// steady state allocates nothing and touches no fresh pages: a buffer is
/// zeroed once, when it first grows, and only the bytes after the last
/// newline of a block are copied (to the start of the next one).
pub(super) struct Chunker<R> {
    pub(super) r: R,
    /// The unfinished line after the last newline of the previous block.
    pub(super) carry: Vec<u8>,
    pub(super) eof: bool,
    pub(super) cap: usize,
    pub(super) block: usize,
    pub(super) bytes: u64,
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
pub(super) fn pre_block(
    data: &[u8],
    ends: impl IntoIterator<Item = usize>,
    how: How,
    r: &mut Bufs,
) {
    let mut start = 0;
    let one = |r: &mut Bufs, line: &[u8]| {
        let p = if line.len() > how.cap {
            Pre::TooLong(line.len() as u64)
        } else {
            r.tally.pods.line(line);
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

/// Where the parallel pipeline's blocks come from: a stream cut where its
/// lines end ([`Stream`]), or a file read at offsets ([`AtBlocks`]).
pub(super) trait Blocks: Sync {
    /// Reads the next block into `spare` (taken from it) and classifies its
    /// lines: its index and results; `None` once there is no block left (or
    /// a read failed), `spare` then left to the caller.
    fn next(&self, spare: &mut Option<Spare>, how: How) -> Option<OutMsg>;
    /// Whether every block there will be is among the first `applied`.
    fn all_applied(&self, applied: u64) -> bool;
    /// Hands out no more blocks.
    fn stop(&self);
    /// The bytes read.
    fn bytes(&self) -> u64;
}

/// A stream, cut into blocks in input order under a lock.
pub(super) struct Stream<R>(pub(super) std::sync::Mutex<Shared<R>>);

/// The stream and the index of its next block, shared by the threads.
pub(super) struct Shared<R> {
    pub(super) chunker: Chunker<R>,
    pub(super) idx: u64,
    pub(super) done: bool,
}

impl<R: Read + Send> Blocks for Stream<R> {
    /// Reads the next block into `spare` (in input order, under the lock)
    /// and classifies its lines.
    fn next(&self, spare: &mut Option<Spare>, how: How) -> Option<OutMsg> {
        let mut g = self.0.lock().ok()?;
        if g.done {
            return None;
        }
        let (buf, mut bufs) = spare.take()?;
        let read = {
            let idx = g.idx;
            match g.chunker.next(buf, &mut bufs.ends) {
                Ok(Ok(body)) => {
                    g.idx += 1;
                    Ok((idx, body))
                }
                Ok(Err(buf)) => {
                    g.done = true;
                    *spare = Some((buf, bufs));
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
        drop(g);
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
pub(super) fn read_at_into<S: ReadAt + ?Sized>(
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
pub(super) struct AtBlocks<'s, S: ?Sized> {
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
    pub(super) fn new(src: &'s S, base: u64, size: u64, block: usize) -> Self {
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
    pub(super) fn read(
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
        let room = (end - at) as usize + TAIL_ROOM;
        if buf.capacity() < room {
            buf.reserve_exact(room - buf.len());
        }
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
            // Read on in steps that double from a few lines' worth: the next
            // block reads these bytes again, so a large first step would
            // copy most of them out of the page cache twice.
            let mut step = TAIL_FIRST_STEP;
            loop {
                if len - last > cap {
                    let (line, bytes) = self.skip_line(buf, last, at + len as u64, len - last)?;
                    self.count_bytes((last - first) as u64 + bytes);
                    return Ok((first, last, Some(line)));
                }
                let got = read_at_into(self.src, buf, len, at + len as u64, step)?;
                step = (step * 2).min(TAIL_MAX_STEP);
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
    fn next(&self, spare: &mut Option<Spare>, how: How) -> Option<OutMsg> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.stopped.load(Relaxed) || spare.is_none() {
            return None;
        }
        let k = self.next.fetch_add(1, Relaxed);
        if k >= self.count {
            return None;
        }
        let (mut buf, mut bufs) = spare.take()?;
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

/// A [`ReadAt`] source read in order, as a stream.
pub(super) struct AtReader<'s, S: ?Sized> {
    pub(super) src: &'s S,
    pub(super) off: u64,
}

impl<S: ReadAt + ?Sized> Read for AtReader<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.src.read_at(buf, self.off)?;
        self.off += n as u64;
        Ok(n)
    }
}
