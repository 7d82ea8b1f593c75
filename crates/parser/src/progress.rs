//! Bytes read so far, for a progress display: [`crate::parse_inputs`]
//! counts every byte it takes from an input (compressed bytes for gzip)
//! into a [`Progress`] that another thread reads.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ParseOptions;
use crate::engine::ReadAt;
use crate::input::Expanded;

/// Bytes read so far and the inputs' total size, shared between the
/// parsing thread and a display.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    read: Arc<AtomicU64>,
    /// 0: not known yet; `u64::MAX`: an input has no size (stdin, a pipe);
    /// else the total plus one.
    total: Arc<AtomicU64>,
}

/// Two handles are equal when they share their counters.
impl PartialEq for Progress {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.read, &other.read)
    }
}

impl Progress {
    /// A fresh counter.
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Bytes read so far (a few bytes may be read twice while the format
    /// of an input is detected: clamp to the total).
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// The inputs' total size in bytes: `None` until the inputs are listed,
    /// `Some(None)` when one of them has no size (stdin, a pipe).
    pub fn total(&self) -> Option<Option<u64>> {
        match self.total.load(Ordering::Relaxed) {
            0 => None,
            u64::MAX => Some(None),
            t => Some(Some(t - 1)),
        }
    }

    /// Counts a file that is not read as read.
    pub(crate) fn skipped(&self, path: &std::path::Path) {
        if let Ok(m) = std::fs::metadata(path) {
            self.read.fetch_add(m.len(), Ordering::Relaxed);
        }
    }

    pub(crate) fn set_total(&self, files: &[Expanded]) {
        let mut total = 0u64;
        for f in files {
            let size = f
                .path
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .filter(|m| m.is_file())
                .map(|m| m.len());
            match size {
                Some(n) => total = total.saturating_add(n),
                None => {
                    self.total.store(u64::MAX, Ordering::Relaxed);
                    return;
                }
            }
        }
        self.total
            .store(total.saturating_add(1).min(u64::MAX - 1), Ordering::Relaxed);
    }
}

/// A source whose reads are counted into [`ParseOptions::progress`]. Read
/// at offsets, it counts how far into the source reading has reached
/// (blocks overlap a little where a line crosses their edge).
pub(crate) struct Tally<R> {
    inner: R,
    read: Option<Arc<AtomicU64>>,
    furthest: AtomicU64,
}

impl<R> Tally<R> {
    pub(crate) fn new(inner: R, opts: &ParseOptions) -> Tally<R> {
        Tally {
            inner,
            read: opts.progress.as_ref().map(|p| p.read.clone()),
            furthest: AtomicU64::new(0),
        }
    }

    fn count(&self, n: usize) {
        if let Some(r) = &self.read {
            r.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

impl<R: Read> Read for Tally<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count(n);
        Ok(n)
    }
}

/// A decoded stream opened before the parse (and so before a progress
/// display could count it): as it is read, the raw bytes its source has
/// given so far (`raw`, counted by the decoder's source, from the first
/// byte) are added to [`ParseOptions::progress`].
pub(crate) struct Bridge<R> {
    inner: R,
    raw: Arc<AtomicU64>,
    counted: u64,
    read: Option<Arc<AtomicU64>>,
}

impl<R> Bridge<R> {
    pub(crate) fn new(inner: R, raw: &Arc<AtomicU64>, opts: &ParseOptions) -> Bridge<R> {
        Bridge {
            inner,
            raw: raw.clone(),
            counted: 0,
            read: opts.progress.as_ref().map(|p| p.read.clone()),
        }
    }
}

impl<R: Read> Read for Bridge<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(r) = &self.read {
            let now = self.raw.load(Ordering::Relaxed);
            r.fetch_add(now.saturating_sub(self.counted), Ordering::Relaxed);
            self.counted = now;
        }
        Ok(n)
    }
}

impl<R: ReadAt> ReadAt for Tally<R> {
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
        let n = self.inner.read_at(buf, off)?;
        let end = off.saturating_add(n as u64);
        let before = self.furthest.fetch_max(end, Ordering::Relaxed);
        if end > before {
            self.count((end - before) as usize);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use crate::{InputSpec, ParseOptions, parse_inputs};

    use super::*;

    #[test]
    fn counts_every_byte_of_the_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let text = "not a log line\n".repeat(5000);
        std::fs::write(&a, &text).unwrap();
        for threads in [1, 3] {
            let p = Progress::new();
            assert_eq!(p.total(), None);
            let opts = ParseOptions {
                threads,
                block_bytes: 4096,
                progress: Some(p.clone()),
                ..ParseOptions::default()
            };
            parse_inputs(&[InputSpec::path(&a)], &opts, |_| {}).unwrap();
            assert_eq!(p.total(), Some(Some(text.len() as u64)));
            let read = p.read();
            assert!(
                read == text.len() as u64,
                "{threads} threads: {read} of {}",
                text.len()
            );
        }
    }
}
