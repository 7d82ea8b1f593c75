//! The fast path: one OTLP/JSON line of the Collector's `file` exporter
//! (`{"resourceSpans": [...]}`), read in one pass over its bytes.
//!
//! The reader checks the JSON grammar as it walks (strings, escapes,
//! numbers, literals, nesting), keeps the ids of every span as slices of
//! the line, and reads attributes only for the filter and profile spans,
//! into the [`SpanAttrs`] and [`ResourceIds`] the general reader fills, so
//! the decision of a span is built by the same code either way.
//!
//! It gives up (`None`) on anything the general reader might read
//! differently or reject: a top-level member other than `resourceSpans`
//! and members it does not know, `instrumentationLibrarySpans`, a
//! `resource` after the `scopeSpans` of its resource, a duplicate member
//! where a value is read, a value of another type than expected, an escape
//! in a key or in a string that is read, a control character in a string,
//! a document that is not valid UTF-8, a number outside the forms below, nesting deeper than
//! [`MAX_DEPTH`], or any syntax error. The caller then reads the document
//! with the general reader, which counts it as it always did (malformed or
//! not).
//!
//! Numbers read as values: an unsigned integer of at most 19 digits is the
//! integer; any other number is the nearest `f64` (as serde_json reads it,
//! with its `float_roundtrip` feature), unless that is infinite or a zero
//! from nonzero digits (out of range, left to the general reader).

use std::borrow::Cow;

use super::values::{Num, ResourceIds, Scalar, SpanAttrs, ns_to_secs, num_of_str};
use super::{FILTER_SPAN, Filters, PROFILE_SPAN, SpanRef, TraceReader};

/// Nesting read at most (serde_json stops at 128).
const MAX_DEPTH: u32 = 100;

/// `None`: not a document of the fast path's shape.
type Fast<T> = Option<T>;

/// The index of the first byte of `b` that ends a run of plain string
/// bytes: a quote, a backslash or a control character (non-ASCII bytes are
/// plain: the document is valid UTF-8). Eight bytes at a time: per word, the
/// lowest byte equal to `"` or `\\`, or below 0x20, sets the lowest flag (a
/// borrow only ever flags bytes above a true match).
#[inline]
pub(super) fn string_end(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut i = 0;
    while let Some(w) = b.get(i..i + 8) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let x = u64::from_le_bytes(a);
        let m = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|k| i + k)
}

/// Sets a member's value once; a second value of the same member gives up.
fn once<T>(slot: &mut Option<T>, v: T) -> Fast<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(v);
    Some(())
}

/// A number written as a string, as [`num_of_str`] reads it (digits
/// first, without the general parse).
#[inline]
fn num_of_text(s: &str) -> Fast<Num> {
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 19 && b.iter().all(u8::is_ascii_digit) {
        return Some(Num::U(
            b.iter().fold(0, |n, &c| n * 10 + u64::from(c - b'0')),
        ));
    }
    num_of_str(s)
}

/// A number token (its grammar checked) as a value.
fn num_token(t: &[u8]) -> Fast<Num> {
    let s = std::str::from_utf8(t).ok()?;
    if t.iter().all(u8::is_ascii_digit) {
        return if t.len() <= 19 {
            s.parse::<u64>().ok().map(Num::U)
        } else {
            None
        };
    }
    let f: f64 = s.parse().ok()?;
    let mantissa_nonzero = t
        .iter()
        .take_while(|c| !matches!(c, b'e' | b'E'))
        .any(|c| (b'1'..=b'9').contains(c));
    (f.is_finite() && (f != 0.0 || !mantissa_nonzero)).then_some(Num::F(f))
}

/// A cursor over a document's bytes (`b`, valid UTF-8: also `s`).
struct Cur<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
    depth: u32,
}

impl<'a> Cur<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i)
            && matches!(c, b' ' | b'\t' | b'\n' | b'\r')
        {
            self.i += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    #[inline]
    fn peek(&mut self) -> Fast<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Fast<()> {
        if self.peek()? != c {
            return None;
        }
        self.i += 1;
        Some(())
    }

    fn lit(&mut self, word: &[u8]) -> Fast<()> {
        if self.b.get(self.i..self.i + word.len())? != word {
            return None;
        }
        self.i += word.len();
        Some(())
    }

    /// Whether the next value is `null` (then consumed).
    #[inline]
    fn null(&mut self) -> Fast<bool> {
        if self.peek()? == b'n' {
            self.lit(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// A string's bytes between the quotes, and whether it has an escape.
    #[inline]
    fn string(&mut self) -> Fast<(&'a [u8], bool)> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i += string_end(self.b.get(self.i..)?)?;
            match self.b[self.i] {
                b'"' => {
                    let s = &self.b[start..self.i];
                    self.i += 1;
                    return Some((s, escaped));
                }
                b'\\' => {
                    escaped = true;
                    match *self.b.get(self.i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                        b'u' => {
                            let hex = self.b.get(self.i + 2..self.i + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 6;
                        }
                        _ => return None,
                    }
                }
                // A control character.
                _ => return None,
            }
        }
    }

    /// A string without escapes, as text.
    #[inline]
    fn plain(&mut self) -> Fast<&'a str> {
        self.ws();
        let start = self.i + 1;
        match self.string()? {
            (_, false) => self.s.get(start..self.i - 1),
            _ => None,
        }
    }

    /// A string without escapes, or `null`.
    fn opt_plain(&mut self) -> Fast<Option<&'a str>> {
        if self.null()? {
            return Some(None);
        }
        self.plain().map(Some)
    }

    /// A number as a JSON number or a string ([`num_of_str`]), or `null`.
    fn opt_num(&mut self) -> Fast<Option<Num>> {
        match self.peek()? {
            b'n' => self.lit(b"null").map(|()| None),
            b'"' => num_of_text(self.plain()?).map(Some),
            _ => num_token(self.number()?).map(Some),
        }
    }

    /// `true`, `false` or `null`.
    fn opt_bool(&mut self) -> Fast<Option<bool>> {
        match self.peek()? {
            b'n' => self.lit(b"null").map(|()| None),
            b't' => self.lit(b"true").map(|()| Some(true)),
            b'f' => self.lit(b"false").map(|()| Some(false)),
            _ => None,
        }
    }

    /// A number token: `-`? (`0` | [1-9][0-9]*) (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?
    fn number(&mut self) -> Fast<&'a [u8]> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let digits = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match *b.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => i = digits(i + 1),
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            if !b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                return None;
            }
            i = digits(i + 1);
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !b.get(i).is_some_and(u8::is_ascii_digit) {
                return None;
            }
            i = digits(i);
        }
        self.i = i;
        Some(&b[start..i])
    }

    fn enter(&mut self) -> Fast<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// An object: `member` is called with each key (escape-free), the
    /// cursor at the member's value, which it must read.
    #[inline]
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Fast<()>) -> Fast<()> {
        self.eat(b'{')?;
        self.enter()?;
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                let key = match self.string()? {
                    (k, false) => k,
                    _ => return None,
                };
                self.eat(b':')?;
                member(self, key)?;
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// An array: `elem` reads each element.
    #[inline]
    fn array(&mut self, mut elem: impl FnMut(&mut Self) -> Fast<()>) -> Fast<()> {
        self.eat(b'[')?;
        self.enter()?;
        if self.peek()? == b']' {
            self.i += 1;
        } else {
            loop {
                elem(self)?;
                match self.peek()? {
                    b',' => self.i += 1,
                    b']' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// Any value, read for its grammar only.
    fn skip(&mut self) -> Fast<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|c, _| c.skip()),
            b'[' => self.array(Cur::skip),
            b't' => self.lit(b"true"),
            b'f' => self.lit(b"false"),
            b'n' => self.lit(b"null"),
            _ => self.number().map(|_| ()),
        }
    }

    /// An OTLP `AnyValue` object (or `null`) as a scalar.
    fn any_value(&mut self) -> Fast<Scalar<'a>> {
        if self.null()? {
            return Some(Scalar::Other);
        }
        let (mut s, mut int, mut double, mut boolean) = (None, None, None, None);
        self.object(|c, k| match k {
            b"stringValue" => once(&mut s, c.opt_plain()?),
            b"intValue" => once(&mut int, c.opt_num()?),
            b"doubleValue" => once(&mut double, c.opt_num()?),
            b"boolValue" => once(&mut boolean, c.opt_bool()?),
            _ => c.skip(),
        })?;
        Some(Scalar::of_any_value(
            s.flatten().map(Cow::Borrowed),
            int.flatten(),
            double.flatten(),
            boolean.flatten(),
        ))
    }

    /// An OTLP attribute list: `f` gets each key and value in order.
    fn attributes(&mut self, mut f: impl FnMut(&'a str, Scalar<'a>)) -> Fast<()> {
        self.array(|c| {
            let at = c.i;
            if let Some((k, v)) = c.exporter_attribute() {
                f(k, v);
                return Some(());
            }
            c.i = at;
            let (mut key, mut value) = (None, None);
            c.object(|c, k| match k {
                b"key" => once(&mut key, c.plain()?),
                b"value" => once(&mut value, c.any_value()?),
                _ => c.skip(),
            })?;
            f(key?, value.unwrap_or(Scalar::Other));
            Some(())
        })
    }

    /// An attribute as exporters write it, compact with one typed member:
    /// `{"key":"K","value":{"stringValue":"V"}}` (or `intValue`,
    /// `doubleValue`, `boolValue`), matched byte for byte. `None` (the
    /// cursor moved) for any other form, which [`Cur::object`] reads.
    #[inline]
    fn exporter_attribute(&mut self) -> Fast<(&'a str, Scalar<'a>)> {
        if self.depth + 2 > MAX_DEPTH {
            return None;
        }
        self.lit(br#"{"key":"#)?;
        let key = self.plain()?;
        self.lit(br#","value":{""#)?;
        let rest = self.b.get(self.i..)?;
        let v = if rest.starts_with(br#"stringValue":"#) {
            self.i += 13;
            Scalar::Str(Cow::Borrowed(self.plain()?))
        } else if rest.starts_with(br#"intValue":"#) {
            self.i += 10;
            self.opt_num()?.map_or(Scalar::Other, Scalar::Num)
        } else if rest.starts_with(br#"doubleValue":"#) {
            self.i += 13;
            self.opt_num()?.map_or(Scalar::Other, Scalar::Num)
        } else if rest.starts_with(br#"boolValue":"#) {
            self.i += 11;
            self.opt_bool()?.map_or(Scalar::Other, Scalar::Bool)
        } else {
            return None;
        };
        self.lit(b"}}")?;
        Some((key, v))
    }
}

/// Where a document's spans and decisions go.
struct Out<'r, 'o, 'a, 's> {
    tr: &'r TraceReader<'o>,
    line: u64,
    spans: &'s mut Vec<SpanRef<'a>>,
    filters: &'s mut Filters<'a>,
}

/// A span's attributes as far as the walk has read them.
enum Attrs<'a> {
    /// Read into slots (the span's name was known first).
    Read(SpanAttrs<'a>),
    /// Checked and left for later: the byte range and its nesting depth.
    Later(usize, usize, u32),
    /// `null`.
    Null,
}

/// Reads one document into `spans` and `filters` as [`super::general::read`]
/// would, or gives up.
pub(super) fn read<'a>(
    tr: &TraceReader<'_>,
    bytes: &'a [u8],
    line: u64,
    spans: &mut Vec<SpanRef<'a>>,
    filters: &mut Filters<'a>,
) -> Fast<()> {
    let mut out = Out {
        tr,
        line,
        spans,
        filters,
    };
    let mut c = Cur {
        b: bytes,
        s: std::str::from_utf8(bytes).ok()?,
        i: 0,
        depth: 0,
    };
    let mut seen = None;
    c.object(|c, k| match k {
        b"resourceSpans" => {
            once(&mut seen, ())?;
            c.array(|c| resource_spans(c, &mut out))
        }
        b"batches" | b"trace" | b"result" | b"data" => None,
        _ => c.skip(),
    })?;
    c.ws();
    (c.i == bytes.len()).then_some(())
}

fn resource_spans<'a>(c: &mut Cur<'a>, out: &mut Out<'_, '_, 'a, '_>) -> Fast<()> {
    let mut ids = ResourceIds::default();
    let (mut resource, mut scopes) = (None, None);
    c.object(|c, k| match k {
        b"resource" => {
            if scopes.is_some() {
                return None;
            }
            once(&mut resource, ())?;
            if c.null()? {
                return Some(());
            }
            let mut attrs = None;
            c.object(|c, k| match k {
                b"attributes" => {
                    once(&mut attrs, ())?;
                    if c.null()? {
                        return Some(());
                    }
                    c.attributes(|k, v| ids.set(k, v))
                }
                _ => c.skip(),
            })
        }
        b"scopeSpans" => {
            once(&mut scopes, ())?;
            if c.null()? {
                return Some(());
            }
            c.array(|c| {
                let mut list = None;
                c.object(|c, k| match k {
                    b"spans" => {
                        once(&mut list, ())?;
                        if c.null()? {
                            return Some(());
                        }
                        c.array(|c| span(c, &ids, out))
                    }
                    _ => c.skip(),
                })
            })
        }
        b"instrumentationLibrarySpans" => None,
        _ => c.skip(),
    })
}

fn span<'a>(c: &mut Cur<'a>, ids: &ResourceIds, out: &mut Out<'_, '_, 'a, '_>) -> Fast<()> {
    let (mut id, mut parent, mut name, mut start, mut attrs) = (None, None, None, None, None);
    c.object(|c, k| match k {
        b"spanId" => once(&mut id, c.opt_plain()?),
        b"parentSpanId" => once(&mut parent, c.opt_plain()?),
        b"name" => once(&mut name, c.opt_plain()?),
        b"startTimeUnixNano" => once(&mut start, c.opt_num()?),
        b"attributes" => {
            let a = if c.null()? {
                Attrs::Null
            } else if matches!(name, Some(Some(FILTER_SPAN | PROFILE_SPAN))) {
                let mut a = SpanAttrs::default();
                c.attributes(|k, v| a.set(k, v))?;
                Attrs::Read(a)
            } else {
                c.ws();
                let (from, depth) = (c.i, c.depth);
                c.skip()?;
                Attrs::Later(from, c.i, depth)
            };
            once(&mut attrs, a)
        }
        _ => c.skip(),
    })?;
    // A span without an id is not read (its attributes are not either).
    let Some(Some(id)) = id else { return Some(()) };
    let name = name.flatten();
    let attrs = || -> Fast<SpanAttrs<'a>> {
        Some(match attrs {
            Some(Attrs::Read(a)) => a,
            Some(Attrs::Later(from, to, depth)) => {
                let mut sub = Cur {
                    b: c.b.get(..to)?,
                    s: c.s.get(..to)?,
                    i: from,
                    depth,
                };
                let mut a = SpanAttrs::default();
                sub.attributes(|k, v| a.set(k, v))?;
                a
            }
            Some(Attrs::Null) | None => SpanAttrs::default(),
        })
    };
    let parent = parent.flatten().filter(|p| !p.is_empty());
    let profile = match name {
        Some(FILTER_SPAN) => {
            let ts = start.flatten().map(ns_to_secs);
            let d = out
                .tr
                .decision(ids, attrs()?, ts, "startTimeUnixNano", out.line);
            out.filters.push((d, parent.map(Cow::Borrowed)));
            None
        }
        Some(PROFILE_SPAN) => Some(attrs()?.profile()),
        _ => None,
    };
    out.spans.push(SpanRef {
        id: Cow::Borrowed(id),
        parent: parent.map(Cow::Borrowed),
        profile,
    });
    Some(())
}
