//! The parallel pipeline: workers classify blocks of lines into recycled
//! buffers from a shared [`Pool`], and the applying thread applies their
//! results in input order.

use std::io::Read;

use super::blocks::{Blocks, Chunker, Done, OutMsg, Shared, Spare, Stream};
use super::{Engine, How, Pre};
use crate::Item;
use crate::error::ParseError;
use crate::lines::LineReader;

/// Most blocks in flight, whatever the thread count.
pub(super) const MAX_INFLIGHT: usize = 16;

/// The spare block buffers, shared by the threads: the workers wait for
/// one; the applying thread only takes one when it is there.
pub(super) struct Pool {
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

/// The parallel pipeline on `threads` threads: this one and `threads - 1`
/// workers. A worker takes the next block of whole lines from the stream
/// ([`Chunker`], under a lock, into one of the recycled buffers) and runs
/// [`pre_line`](super::pre_line) on its lines while the block is still in its core's cache.
/// This thread applies the results in input order (assembly, ledger, sink)
/// and hands each block's buffers back; when no result is ready to apply it
/// reads and classifies a block itself (one thread per core: no third
/// thread taking turns with the workers, and the blocks it classifies are
/// applied from its own cache). At most `4 * threads` blocks are in flight
/// (there are that many buffers; at most [`MAX_INFLIGHT`]), so memory stays
/// bounded. Returns the bytes
/// read.
pub(super) fn parallel_stream<R: Read + Send>(
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
pub(super) fn parallel<B: Blocks>(
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
pub(super) struct Stop<'a, B: Blocks>(&'a B, &'a Pool);

impl<B: Blocks> Drop for Stop<'_, B> {
    fn drop(&mut self) {
        self.0.stop();
        self.1.close();
    }
}

/// [`Stop`], only when the thread unwinds (a worker's panic).
pub(super) struct StopOnUnwind<'a, B: Blocks>(&'a B, &'a Pool);

impl<B: Blocks> Drop for StopOnUnwind<'_, B> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
            self.1.close();
        }
    }
}
