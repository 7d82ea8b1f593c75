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

thread_local! {
    /// Spare buffers kept between the inputs of one [`Reuse`] scope on
    /// this thread (`None` outside one): the next input's blocks are read
    /// into buffers already grown and paged in, instead of fresh ones.
    static KEPT: std::cell::RefCell<Option<Vec<Spare>>> = const { std::cell::RefCell::new(None) };
}

/// While it lives, the parallel pipelines run on this thread hand their
/// spare buffers on to the next one (at most [`MAX_INFLIGHT`] of them);
/// they are freed when it is dropped. Scopes do not nest: an inner one
/// keeps the outer one's buffers and frees them at its end.
pub(crate) struct Reuse(());

impl Reuse {
    pub(crate) fn new() -> Reuse {
        KEPT.with(|k| {
            k.borrow_mut().get_or_insert_with(Vec::new);
        });
        Reuse(())
    }
}

impl Drop for Reuse {
    fn drop(&mut self) {
        // Taken out before they are dropped: a panic in a drop cannot
        // leave the cell borrowed.
        let kept = KEPT.with(|k| k.borrow_mut().take());
        drop(kept);
    }
}

impl Pool {
    fn new(n: usize) -> Pool {
        let mut spares: Vec<Spare> = KEPT.with(|k| match k.borrow_mut().as_mut() {
            Some(kept) => {
                let from = kept.len().saturating_sub(n);
                kept.drain(from..).collect()
            }
            None => Vec::new(),
        });
        spares.resize_with(n, Spare::default);
        Pool {
            spares: std::sync::Mutex::new((spares, false)),
            ready: std::sync::Condvar::new(),
        }
    }

    /// Hands the spares back to the [`Reuse`] scope, if there is one.
    fn keep(self) {
        let spares = self
            .spares
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
        KEPT.with(|k| {
            if let Some(kept) = k.borrow_mut().as_mut() {
                let room = MAX_INFLIGHT.saturating_sub(kept.len());
                kept.extend(spares.into_iter().take(room));
            }
        });
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
    let result = std::thread::scope(|s| {
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
                    let mut spare = Some(spare);
                    let Some(msg) = blocks.next(&mut spare, how) else {
                        // Kept for the next input (see [`Reuse`]).
                        if let Some(s) = spare {
                            pool.put(s);
                        }
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
                if let Some(spare) = pool.try_take() {
                    let mut spare = Some(spare);
                    if let Some((idx, res)) = blocks.next(&mut spare, how) {
                        pending.insert(idx, res);
                        continue;
                    }
                    if let Some(s) = spare {
                        pool.put(s);
                    }
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
    });
    pool.keep();
    result
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ParseOptions, Parsed, parse_slice};

    fn kept() -> Option<Vec<usize>> {
        KEPT.with(|k| {
            k.borrow()
                .as_ref()
                .map(|v| v.iter().map(|(buf, _)| buf.len()).collect())
        })
    }

    #[test]
    fn spares_pass_to_the_next_input_within_a_reuse_scope_only() {
        let log = include_bytes!("../../../../fixtures/glm-like/epp.log");
        let opts = ParseOptions {
            threads: 2,
            block_bytes: 16 * 1024,
            ..ParseOptions::default()
        };
        let parse = || -> Parsed { parse_slice("epp.log", log, &opts).expect("parses") };
        let alone = parse();
        assert!(alone.ledger.counts.decisions > 0);
        assert_eq!(kept(), None, "nothing kept outside a scope");
        {
            let _reuse = Reuse::new();
            assert_eq!(kept(), Some(Vec::new()));
            let first = parse();
            let bufs = kept().expect("a scope");
            // Every spare of the run is kept, those used grown to a block
            // or more.
            assert_eq!(bufs.len(), 8);
            assert!(bufs.iter().any(|&n| n >= 16 * 1024), "{bufs:?}");
            // The next input takes them and reads the same.
            let second = parse();
            assert_eq!(first, alone);
            assert_eq!(second, alone);
            assert_eq!(kept().map(|b| b.len()), Some(8));
        }
        assert_eq!(kept(), None, "freed with the scope");
    }
}
