//! Decoding a stream by its content: gzip when it starts with the magic
//! bytes, plain otherwise, its raw bytes counted; and peeking at its start.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
