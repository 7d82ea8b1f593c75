//! Line splitting with a length cap and no unbounded buffering.

use std::io::{self, Read};

/// One line from [`LineReader::next_line`].
pub(crate) enum Line<'a> {
    /// A line without its `\n` (a `\r` is left for the caller).
    Text(&'a [u8]),
    /// A line longer than the cap: its length in bytes. It was skipped up to
    /// the next newline without being buffered.
    TooLong(u64),
}

/// Splits a reader into lines, reusing one buffer that grows up to the cap.
pub(crate) struct LineReader<R> {
    r: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    scanned: usize,
    cap: usize,
    eof: bool,
    /// Bytes read so far.
    pub bytes: u64,
}

impl<R: Read> LineReader<R> {
    /// A reader whose lines may be at most `cap` bytes (without the newline).
    pub(crate) fn new(r: R, cap: usize) -> Self {
        Self::with_buffer(r, cap, crate::DEFAULT_LINE_BUFFER_BYTES)
    }

    /// [`LineReader::new`] with a buffer of `initial` bytes to start with
    /// (at least 4 KiB), grown only for a longer line.
    pub(crate) fn with_buffer(r: R, cap: usize, initial: usize) -> Self {
        let cap = cap.max(1);
        LineReader {
            r,
            buf: vec![0; initial.min(cap + 1).max(4096)],
            start: 0,
            end: 0,
            scanned: 0,
            cap,
            eof: false,
            bytes: 0,
        }
    }

    fn fill(&mut self, at: usize) -> io::Result<usize> {
        loop {
            match self.r.read(&mut self.buf[at..]) {
                Ok(n) => {
                    self.bytes += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next line, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        loop {
            if let Some(off) = memchr::memchr(b'\n', &self.buf[self.scanned..self.end]) {
                let s = self.start;
                let e = self.scanned + off;
                self.start = e + 1;
                self.scanned = self.start;
                if e - s > self.cap {
                    return Ok(Some(Line::TooLong((e - s) as u64)));
                }
                return Ok(Some(Line::Text(&self.buf[s..e])));
            }
            self.scanned = self.end;
            if self.eof {
                if self.start < self.end {
                    let s = self.start;
                    let e = self.end;
                    self.start = e;
                    self.scanned = e;
                    if e - s > self.cap {
                        return Ok(Some(Line::TooLong((e - s) as u64)));
                    }
                    return Ok(Some(Line::Text(&self.buf[s..e])));
                }
                return Ok(None);
            }
            if self.end - self.start > self.cap {
                return self.skip_long().map(Some);
            }
            if self.end == self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.scanned = self.end;
                    self.start = 0;
                } else {
                    let want = (self.buf.len() * 2)
                        .min(self.cap + 1)
                        .max(self.buf.len() + 1);
                    self.buf.resize(want, 0);
                }
            }
            let n = self.fill(self.end)?;
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
        }
    }

    /// The bytes read but not yet returned as lines, the inner reader,
    /// whether it reached its end, and the bytes read so far.
    pub(crate) fn into_rest(self) -> (Vec<u8>, R, bool, u64) {
        (
            self.buf[self.start..self.end].to_vec(),
            self.r,
            self.eof,
            self.bytes,
        )
    }

    /// Discards the current over-long line up to and including its newline.
    fn skip_long(&mut self) -> io::Result<Line<'static>> {
        let mut len = (self.end - self.start) as u64;
        self.start = 0;
        self.end = 0;
        self.scanned = 0;
        loop {
            let n = self.fill(0)?;
            if n == 0 {
                self.eof = true;
                return Ok(Line::TooLong(len));
            }
            if let Some(p) = memchr::memchr(b'\n', &self.buf[..n]) {
                len += p as u64;
                self.start = p + 1;
                self.scanned = p + 1;
                self.end = n;
                return Ok(Line::TooLong(len));
            }
            len += n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], cap: usize) -> Vec<Result<Vec<u8>, u64>> {
        let mut r = LineReader::new(input, cap);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push(match l {
                Line::Text(t) => Ok(t.to_vec()),
                Line::TooLong(n) => Err(n),
            });
        }
        out
    }

    #[test]
    fn splits_and_caps() {
        assert_eq!(
            lines(b"a\nbb\n\nc", 10),
            vec![
                Ok(b"a".to_vec()),
                Ok(b"bb".to_vec()),
                Ok(vec![]),
                Ok(b"c".to_vec())
            ]
        );
        assert_eq!(lines(b"", 10), vec![]);
        let long = [b'x'; 10_000];
        let mut input = b"ok\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nafter\n");
        input.extend_from_slice(&long);
        assert_eq!(
            lines(&input, 100),
            vec![
                Ok(b"ok".to_vec()),
                Err(10_000),
                Ok(b"after".to_vec()),
                Err(10_000)
            ]
        );
        // Exactly at the cap is fine.
        assert_eq!(lines(&long, 10_000), vec![Ok(long.to_vec())]);
        assert_eq!(lines(&long, 9_999), vec![Err(10_000)]);
    }

    #[test]
    fn large_input_small_reads() {
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(b.len()).min(7);
                b[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut text = Vec::new();
        for i in 0..100_000 {
            text.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let mut r = LineReader::new(Trickle(&text), 64);
        let mut n = 0;
        while let Some(l) = r.next_line().unwrap() {
            let Line::Text(t) = l else { panic!() };
            assert_eq!(t, format!("line {n}").as_bytes());
            n += 1;
        }
        assert_eq!(n, 100_000);
        assert_eq!(r.bytes, text.len() as u64);
    }
}
