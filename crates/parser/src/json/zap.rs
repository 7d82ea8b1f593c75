//! The fast road for zap's usual lines: its line head, and the members of
//! a line written without whitespace or escapes, quotes found 64 bytes at a
//! time. It hands out what the [`Scanner`](super::Scanner) would, and leaves every other
//! line to it.

use super::search::{chunk_masks, digit_run, quote_or_backslash};
use super::{Brackets, Val};

/// The end of a number without exponent at `$at` in `$b`,
/// `[-]digits[.digits]` (the scanner's number up to any exponent); returns
/// `None` from the enclosing function when no digit comes where one must.
/// A macro, not a function: the two hot callers measured 1–2 % more
/// instructions in all when it was a function (inlining decisions).
macro_rules! plain_number_end {
    ($b:expr, $at:expr) => {{
        let b: &[u8] = $b;
        let mut j = $at + usize::from(b.get($at) == Some(&b'-'));
        let int = digit_run(b, j);
        if int == 0 {
            return None;
        }
        j += int;
        if b.get(j) == Some(&b'.') {
            let frac = digit_run(b, j + 1);
            if frac == 0 {
                return None;
            }
            j += 1 + frac;
        }
        j
    }};
}

/// zap's usual line head: the bodies of `level`, `ts`, `caller` and `msg`,
/// and the offset after the message's closing quote.
pub(crate) type ZapHead<'a> = ([&'a [u8]; 4], usize);

/// Reads zap's usual head at the start of a line, `{"level":"L","ts":N,
/// "caller":"C","msg":"M"` with no escapes and no whitespace; `None` for
/// any other start (older builds' string `ts`, a `logger` key, escapes, an
/// exponent). The first `"msg":"` of such a line is its message: the
/// strings before it hold no quote.
pub(crate) fn zap_head(b: &[u8]) -> Option<ZapHead<'_>> {
    if !b.starts_with(b"{\"level\":\"") {
        return None;
    }
    // A string body from `at` to its closing quote (none with escapes).
    let string_at = |at: usize| -> Option<(&[u8], usize)> {
        let q = quote_or_backslash(b, at)?;
        (b[q] == b'"').then(|| (&b[at..q], q + 1))
    };
    let (level, i) = string_at(10)?;
    let i = i + b.get(i..)?.starts_with(b",\"ts\":").then_some(6)?;
    let j = plain_number_end!(b, i);
    let ts = &b[i..j];
    let j = j + b.get(j..)?.starts_with(b",\"caller\":\"").then_some(11)?;
    let (caller, j) = string_at(j)?;
    let j = j + b.get(j..)?.starts_with(b",\"msg\":\"").then_some(8)?;
    let (msg, j) = string_at(j)?;
    Some(([level, ts, caller, msg], j))
}

/// Hands the four head members to `f` as the scanner would; returns the
/// offset after them.
pub(super) fn hand_out_head<'a>(
    head: ZapHead<'a>,
    f: &mut impl FnMut(&'a [u8], bool, Val<'a>),
) -> usize {
    let ([level, ts, caller, msg], end) = head;
    f(b"level", false, Val::Str(level, false));
    f(b"ts", false, Val::Num(ts));
    f(b"caller", false, Val::Str(caller, false));
    f(b"msg", false, Val::Str(msg, false));
    end
}

/// The quotes of a line that has no backslash, found 64 bytes at a time:
/// each 64-byte chunk is compared once, and its quotes are then read from a
/// bit mask. A chunk with a backslash stops the search (`None`): escapes are
/// left to the [`Scanner`](super::Scanner).
struct Quotes<'a> {
    b: &'a [u8],
    /// The index of the chunk in `mask` (`usize::MAX`: none yet).
    chunk: usize,
    mask: u64,
}

impl<'a> Quotes<'a> {
    fn new(b: &'a [u8]) -> Self {
        Quotes {
            b,
            chunk: usize::MAX,
            mask: 0,
        }
    }

    /// The first `"` at or after `p`; `None` if there is none or a chunk on
    /// the way holds a backslash.
    #[inline(always)]
    fn next(&mut self, mut p: usize) -> Option<usize> {
        loop {
            let c = p / 64;
            if c != self.chunk {
                let start = c.checked_mul(64)?;
                let bytes = self.b.get(start..)?;
                if bytes.is_empty() {
                    return None;
                }
                let (quotes, backslashes) = match bytes.first_chunk::<64>() {
                    Some(w) => chunk_masks(w),
                    None => {
                        // The last, partial chunk: padded with zeros.
                        let mut w = [0u8; 64];
                        w[..bytes.len()].copy_from_slice(bytes);
                        chunk_masks(&w)
                    }
                };
                if backslashes != 0 {
                    return None;
                }
                self.chunk = c;
                self.mask = quotes;
            }
            let m = self.mask & (u64::MAX << (p % 64));
            if m != 0 {
                return Some(c * 64 + m.trailing_zeros() as usize);
            }
            p = (c + 1) * 64;
        }
    }
}

/// The common case of a whole zap line, read quickly: zap's head (see
/// [`zap_head`]; `head` if the caller has read it already), then members
/// written without whitespace or escapes, numbers without exponents, the
/// closing brace last. Hands the
/// members to `f` as [`members`](super::members) does, up to the key `stop` if given
/// (`Some(Some(offset of its value))`; `Some(None)` when the object ends
/// first). `None` when the line is not of that shape: `f` may have been
/// called for some members already, and the caller reads the line again
/// with the [`Scanner`](super::Scanner) (which also finds any error). A line read here is
/// one the [`Scanner`](super::Scanner) reads the same: same members, same values.
pub(crate) fn zap_members<'a>(
    b: &'a [u8],
    head: Option<ZapHead<'a>>,
    stop: Option<&[u8]>,
    mut f: impl FnMut(&'a [u8], bool, Val<'a>),
) -> Option<Option<usize>> {
    let head = match head {
        Some(h) => h,
        None => zap_head(b)?,
    };
    let mut i = hand_out_head(head, &mut f);
    let mut q = Quotes::new(b);
    loop {
        match b.get(i)? {
            b',' => {}
            b'}' => return (i + 1 == b.len()).then_some(None),
            _ => return None,
        }
        if b.get(i + 1) != Some(&b'"') {
            return None;
        }
        let ke = q.next(i + 2)?;
        let key = &b[i + 2..ke];
        if b.get(ke + 1) != Some(&b':') {
            return None;
        }
        let vs = ke + 2;
        if stop == Some(key) {
            return Some(Some(vs));
        }
        let (v, end) = match *b.get(vs)? {
            b'"' => {
                let e = q.next(vs + 1)?;
                (Val::Str(&b[vs + 1..e], false), e + 1)
            }
            b'-' | b'0'..=b'9' => {
                let j = plain_number_end!(b, vs);
                if matches!(b.get(j), Some(b'e' | b'E')) {
                    return None;
                }
                (Val::Num(&b[vs..j]), j)
            }
            b'{' | b'[' => {
                let mut j = vs;
                let mut open = Brackets::default();
                loop {
                    match *b.get(j)? {
                        b'"' => j = q.next(j + 1)?,
                        // (Opened and closed in the guards.)
                        c @ (b'{' | b'[') if !open.open(c) => return None,
                        c @ (b'}' | b']') if open.close(c)? => break,
                        _ => {}
                    }
                    j += 1;
                }
                let raw = &b[vs..=j];
                let v = if b[vs] == b'{' {
                    Val::Obj(raw)
                } else {
                    Val::Arr(raw)
                };
                (v, j + 1)
            }
            b't' if b[vs..].starts_with(b"true") => (Val::Bool(true), vs + 4),
            b'f' if b[vs..].starts_with(b"false") => (Val::Bool(false), vs + 5),
            b'n' if b[vs..].starts_with(b"null") => (Val::Null, vs + 4),
            _ => return None,
        };
        f(key, false, v);
        i = end;
    }
}
