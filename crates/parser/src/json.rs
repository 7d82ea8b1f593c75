//! A small borrowed scanner for the flat JSON objects zap writes.
//!
//! It walks the top-level members of one object, handing out each key and a
//! borrowed view of its value without building a tree or allocating. Nested
//! objects and arrays are skipped over (their raw bytes are handed out).
//! Duplicate keys are allowed (zap does not dedupe). Numbers are kept as raw
//! text and parsed to `f64` on demand, so a 309-digit integer is fine. The
//! scanner is lenient about what JSON forbids inside strings (raw control
//! bytes, invalid UTF-8) and strict about structure, so a truncated line is
//! an error.
//!
//! Most lines take a faster road first: [`zap_head`] reads zap's usual line
//! head, and [`zap_members`] walks the rest of a line written without
//! whitespace or escapes, finding quotes 64 bytes at a time; it hands out
//! what the scanner would, and leaves every other line to the scanner.

mod search;
mod zap;

pub(crate) use search::{digit_run, find2_short, quote_or_backslash, utf8};
use zap::hand_out_head;
pub(crate) use zap::{ZapHead, zap_head, zap_members};

use std::borrow::Cow;

/// A borrowed JSON value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Val<'a> {
    /// A string: the raw bytes between the quotes and whether they contain
    /// a backslash escape.
    Str(&'a [u8], bool),
    /// A number, as written.
    Num(&'a [u8]),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// An object, raw bytes including the braces.
    Obj(&'a [u8]),
    /// An array, raw bytes including the brackets.
    Arr(&'a [u8]),
}

impl<'a> Val<'a> {
    /// The string value, unescaped (lossy for invalid UTF-8 and escapes).
    pub(crate) fn as_str(&self) -> Option<Cow<'a, str>> {
        match *self {
            Val::Str(raw, esc) => Some(unescape(raw, esc)),
            _ => None,
        }
    }
}

/// `b` as a string, invalid UTF-8 replaced by U+FFFD.
#[inline]
pub(crate) fn lossy(b: &[u8]) -> Cow<'_, str> {
    match utf8(b) {
        Some(s) => Cow::Borrowed(s),
        None => String::from_utf8_lossy(b),
    }
}

/// Unescapes a JSON string body.
pub(crate) fn unescape(raw: &[u8], esc: bool) -> Cow<'_, str> {
    if !esc {
        return lossy(raw);
    }
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = raw.get(i + 1) else {
            break;
        };
        i += 2;
        let ch = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(raw.get(i..i + 4));
                i += 4;
                match hi {
                    Some(h) if (0xD800..0xDC00).contains(&h) => {
                        let lo = if raw.get(i..i + 2) == Some(b"\\u") {
                            hex4(raw.get(i + 2..i + 6))
                        } else {
                            None
                        };
                        match lo {
                            Some(l) if (0xDC00..0xE000).contains(&l) => {
                                i += 6;
                                let cp = 0x10000 + ((h - 0xD800) << 10) + (l - 0xDC00);
                                char::from_u32(cp).unwrap_or('\u{FFFD}')
                            }
                            _ => '\u{FFFD}',
                        }
                    }
                    Some(h) => char::from_u32(h).unwrap_or('\u{FFFD}'),
                    None => '\u{FFFD}',
                }
            }
            other => {
                out.push(b'\\');
                out.push(other);
                continue;
            }
        };
        let mut b = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

fn hex4(b: Option<&[u8]>) -> Option<u32> {
    let b = b?;
    let mut v = 0u32;
    for &c in b {
        let d = (c as char).to_digit(16)?;
        v = v * 16 + d;
    }
    Some(v)
}

/// Where `b` (JSON, well formed or not) opens its first object or array
/// nested deeper than [`crate::MAX_JSON_DEPTH`], if it does: for the inputs
/// read with serde_json, which skips unknown members at any depth.
pub(crate) fn too_deep(b: &[u8]) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > crate::MAX_JSON_DEPTH {
                    return Some(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// A structural error at a byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JsonError {
    pub at: usize,
    /// Whether the value nests deeper than [`Brackets::MAX_DEPTH`] there.
    pub too_deep: bool,
}

impl JsonError {
    /// The reason a line with this error is malformed.
    pub(crate) fn reason(self) -> crate::ledger::MalformedReason {
        if self.too_deep {
            crate::ledger::MalformedReason::TooDeep { at: self.at }
        } else {
            crate::ledger::MalformedReason::BadJson { at: self.at }
        }
    }
}

/// Cursor over one JSON text.
pub(crate) struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Scanner { b, i: 0 }
    }

    /// The cursor: where the last value read ended.
    pub(crate) fn pos(&self) -> usize {
        self.i
    }

    fn err<T>(&self) -> Result<T, JsonError> {
        Err(JsonError {
            at: self.i,
            too_deep: false,
        })
    }

    #[inline(always)]
    fn ws(&mut self) {
        // zap writes no whitespace between tokens: one test for that.
        if self.b.get(self.i).is_some_and(|&c| c > b' ') {
            return;
        }
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    /// At an opening quote: returns the body and whether it has escapes.
    #[inline(always)]
    fn string(&mut self) -> Result<(&'a [u8], bool), JsonError> {
        debug_assert_eq!(self.b.get(self.i), Some(&b'"'));
        let start = self.i + 1;
        let mut j = start;
        let mut esc = false;
        loop {
            let Some(p) = quote_or_backslash(self.b, j) else {
                self.i = self.b.len();
                return self.err();
            };
            if self.b[p] == b'"' {
                self.i = p + 1;
                return Ok((&self.b[start..p], esc));
            }
            esc = true;
            j = p + 2;
            if j > self.b.len() {
                self.i = self.b.len();
                return self.err();
            }
        }
    }

    fn number(&mut self) -> Result<&'a [u8], JsonError> {
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let n = digit_run(self.b, self.i);
        if n == 0 {
            return self.err();
        }
        self.i += n;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            let n = digit_run(self.b, self.i);
            if n == 0 {
                return self.err();
            }
            self.i += n;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            let es = self.i;
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if self.i == es {
                return self.err();
            }
        }
        Ok(&self.b[start..self.i])
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), JsonError> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            self.err()
        }
    }

    /// Skips a nested object or array starting at the current `{` or `[`,
    /// checking that every bracket closes the one it matches (see
    /// [`Brackets`]).
    fn nested(&mut self) -> Result<&'a [u8], JsonError> {
        let start = self.i;
        let mut open = Brackets::default();
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'"' => {
                    self.string()?;
                    continue;
                }
                // (Opened in the guard; past the cap, an error.)
                b'{' | b'[' if !open.open(c) => {
                    return Err(JsonError {
                        at: self.i,
                        too_deep: true,
                    });
                }
                b'}' | b']' => match open.close(c) {
                    Some(true) => {
                        self.i += 1;
                        return Ok(&self.b[start..self.i]);
                    }
                    Some(false) => {}
                    None => return self.err(),
                },
                _ => {}
            }
            self.i += 1;
        }
        self.err()
    }

    /// Reads one value at the cursor. Inlined into the member loops: a
    /// `Val` returned through memory cost a store-forwarding stall per
    /// member.
    #[inline(always)]
    pub(crate) fn value(&mut self) -> Result<Val<'a>, JsonError> {
        self.ws();
        match self.b.get(self.i) {
            Some(b'"') => {
                let (s, e) = self.string()?;
                Ok(Val::Str(s, e))
            }
            Some(b'{') => Ok(Val::Obj(self.nested()?)),
            Some(b'[') => Ok(Val::Arr(self.nested()?)),
            Some(b't') => self.literal(b"true").map(|_| Val::Bool(true)),
            Some(b'f') => self.literal(b"false").map(|_| Val::Bool(false)),
            Some(b'n') => self.literal(b"null").map(|_| Val::Null),
            Some(b'-' | b'0'..=b'9') => Ok(Val::Num(self.number()?)),
            _ => self.err(),
        }
    }

    /// Walks the members of the object at the cursor, calling `f(key, esc, value)`.
    /// After the closing brace only whitespace may follow when `whole` is set.
    pub(crate) fn object(
        &mut self,
        whole: bool,
        f: impl FnMut(&'a [u8], bool, Val<'a>),
    ) -> Result<(), JsonError> {
        self.object_inner(whole, false, f)
    }

    /// [`Scanner::object`] for a whole zap line: its usual head is read by
    /// [`Scanner::zap_head`] first.
    pub(crate) fn line_object(
        &mut self,
        f: impl FnMut(&'a [u8], bool, Val<'a>),
    ) -> Result<(), JsonError> {
        self.object_inner(true, true, f)
    }

    fn object_inner(
        &mut self,
        whole: bool,
        head: bool,
        mut f: impl FnMut(&'a [u8], bool, Val<'a>),
    ) -> Result<(), JsonError> {
        // A zap head leaves the cursor after its last member.
        if !(head && self.zap_head(&mut f)) {
            self.ws();
            if self.b.get(self.i) != Some(&b'{') {
                return self.err();
            }
            self.i += 1;
            self.ws();
            if self.b.get(self.i) == Some(&b'}') {
                self.i += 1;
                return self.end(whole);
            }
            self.member(&mut f)?;
        }
        loop {
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => {
                    self.i += 1;
                    self.member(&mut f)?;
                }
                Some(b'}') => {
                    self.i += 1;
                    return self.end(whole);
                }
                _ => return self.err(),
            }
        }
    }

    /// After an object's closing brace: only whitespace may follow when
    /// `whole` is set.
    fn end(&mut self, whole: bool) -> Result<(), JsonError> {
        if whole {
            self.ws();
            if self.i != self.b.len() {
                return self.err();
            }
        }
        Ok(())
    }

    /// One member, handed to `f`.
    #[inline(always)]
    fn member(&mut self, f: &mut impl FnMut(&'a [u8], bool, Val<'a>)) -> Result<(), JsonError> {
        let (k, e) = self.member_key()?;
        let v = self.value()?;
        f(k, e, v);
        Ok(())
    }

    /// A member's key and its colon: the key's body and whether it has
    /// escapes; the cursor is left at the value.
    #[inline(always)]
    fn member_key(&mut self) -> Result<(&'a [u8], bool), JsonError> {
        self.ws();
        if self.b.get(self.i) != Some(&b'"') {
            return self.err();
        }
        let key = self.string()?;
        self.ws();
        if self.b.get(self.i) != Some(&b':') {
            return self.err();
        }
        self.i += 1;
        Ok(key)
    }

    /// zap's usual head at the start of a line, `{"level":"L","ts":N,
    /// "caller":"C","msg":"M"` with no escapes and no whitespace: hands the
    /// four members to `f`, as the generic walk would, and leaves the cursor
    /// after the message, inside the object. Any other start (older builds'
    /// string `ts`, a `logger` key, escapes, an exponent) leaves the cursor
    /// where it was and returns `false`: the generic walk reads it.
    fn zap_head(&mut self, f: &mut impl FnMut(&'a [u8], bool, Val<'a>)) -> bool {
        if self.i != 0 {
            return false;
        }
        let Some(head) = zap_head(self.b) else {
            return false;
        };
        self.i = hand_out_head(head, f);
        true
    }

    /// Walks the members of the object at the cursor like [`Scanner::object`]
    /// until the key `stop` (unescaped): returns the offset of its value,
    /// without reading it; `None` when the object ends first.
    pub(crate) fn object_until(
        &mut self,
        stop: &[u8],
        mut f: impl FnMut(&'a [u8], bool, Val<'a>),
    ) -> Result<Option<usize>, JsonError> {
        self.ws();
        if self.b.get(self.i) != Some(&b'{') {
            return self.err();
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            return Ok(None);
        }
        loop {
            let (k, e) = self.member_key()?;
            if !e && k == stop {
                self.ws();
                return Ok(Some(self.i));
            }
            let v = self.value()?;
            f(k, e, v);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => return Ok(None),
                _ => return self.err(),
            }
        }
    }

    /// Walks the elements of the array at the cursor.
    pub(crate) fn array(&mut self, mut f: impl FnMut(Val<'a>)) -> Result<(), JsonError> {
        self.ws();
        if self.b.get(self.i) != Some(&b'[') {
            return self.err();
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let v = self.value()?;
            f(v);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.err(),
            }
        }
    }
}

/// The brackets open in a nested value, innermost last: a bit per level
/// (1 for `[`). At most [`Brackets::MAX_DEPTH`] levels: a deeper value is
/// invalid here (zap's lines nest a few levels; the cap keeps the check to
/// two shifts).
#[derive(Default)]
pub(crate) struct Brackets {
    bits: u128,
    depth: u32,
}

impl Brackets {
    /// Deepest nesting of a value.
    pub(crate) const MAX_DEPTH: u32 = crate::MAX_JSON_DEPTH as u32;

    /// Opens `c` (`{` or `[`); `false` past [`Brackets::MAX_DEPTH`].
    #[inline]
    pub(crate) fn open(&mut self, c: u8) -> bool {
        if self.depth == Self::MAX_DEPTH {
            return false;
        }
        self.bits = (self.bits << 1) | u128::from(c == b'[');
        self.depth += 1;
        true
    }

    /// Closes with `c` (`}` or `]`): whether the outermost value is now
    /// closed; `None` if `c` does not match the innermost open bracket
    /// (`{"a":[1,2}}`) or nothing is open.
    #[inline]
    pub(crate) fn close(&mut self, c: u8) -> Option<bool> {
        if self.depth == 0 || (self.bits & 1 == 1) != (c == b']') {
            return None;
        }
        self.bits >>= 1;
        self.depth -= 1;
        Some(self.depth == 0)
    }
}

/// Walks the members of a whole-line object.
pub(crate) fn members<'a>(
    b: &'a [u8],
    f: impl FnMut(&'a [u8], bool, Val<'a>),
) -> Result<(), JsonError> {
    Scanner::new(b).line_object(f)
}

/// Walks the members of an object value (raw bytes of a [`Val::Obj`]).
pub(crate) fn obj_members<'a>(b: &'a [u8], f: impl FnMut(&'a [u8], bool, Val<'a>)) -> bool {
    Scanner::new(b).object(true, f).is_ok()
}

/// Walks the elements of an array value (raw bytes of a [`Val::Arr`]).
pub(crate) fn arr_elems<'a>(b: &'a [u8], f: impl FnMut(Val<'a>)) -> bool {
    let mut s = Scanner::new(b);
    s.array(f).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(b: &[u8]) -> Result<Vec<(String, Val<'_>)>, JsonError> {
        let mut v = Vec::new();
        members(b, |k, e, val| v.push((unescape(k, e).into_owned(), val)))?;
        Ok(v)
    }

    #[test]
    fn flat_object_with_duplicates_and_nesting() {
        let l = br#"{"a":1,"b":"x\"y","a":2.5e3,"c":{"d":[1,{"e":"}"}]},"f":null,"g":true}"#;
        let m = collect(l).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[0], ("a".into(), Val::Num(b"1")));
        assert_eq!(m[1].1.as_str().unwrap(), "x\"y");
        assert_eq!(m[2], ("a".into(), Val::Num(b"2.5e3")));
        assert!(matches!(m[3].1, Val::Obj(o) if o == br#"{"d":[1,{"e":"}"}]}"#));
        assert_eq!(m[4].1, Val::Null);
        assert_eq!(m[5].1, Val::Bool(true));
    }

    /// The zap-head shortcut hands out what the generic walk does, and
    /// fails where it fails, on heads it takes and heads it leaves alone.
    #[test]
    fn zap_head_matches_the_generic_walk() {
        let lines: [&[u8]; 14] = [
            br#"{"level":"debug","ts":1787320800.3303745,"caller":"a/b.go:1","msg":"Calculated score","x":1}"#,
            br#"{"level":"info","ts":-12,"caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":1.5e3,"caller":"c","msg":"m","y":[1]}"#,
            br#"{"level":"info","ts":"2026-03-10T08:15:02Z","caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":1,"logger":"l","caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":1,"caller":"c"d","msg":"m","z":null}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"a\b"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m"} trailing"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m""#,
            br#"{"level":"info","ts":1.,"caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":,"caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","msg":"n"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m"}"#,
        ];
        for l in lines {
            let mut fast = Vec::new();
            let a = Scanner::new(l).line_object(|k, e, v| fast.push((k, e, v)));
            let mut slow = Vec::new();
            let b = Scanner::new(l).object(true, |k, e, v| slow.push((k, e, v)));
            assert_eq!(a, b, "{}", String::from_utf8_lossy(l));
            if a.is_ok() {
                assert_eq!(fast, slow, "{}", String::from_utf8_lossy(l));
            }
        }
        // The shortcut is taken on the usual head.
        let mut s = Scanner::new(lines[0]);
        assert!(s.zap_head(&mut |_, _, _| {}));
        assert_eq!(&lines[0][s.pos()..], br#","x":1}"#);
    }

    /// Members as handed out: key, escaped, value.
    type Members<'a> = Vec<(&'a [u8], bool, Val<'a>)>;

    /// What the scanner makes of a line, for the fast walk to match: the
    /// members up to `stop`, and where `stop`'s value starts.
    fn scanned<'a>(
        l: &'a [u8],
        stop: Option<&[u8]>,
    ) -> Result<(Members<'a>, Option<usize>), JsonError> {
        let mut v = Vec::new();
        let at = match stop {
            Some(stop) => Scanner::new(l).object_until(stop, |k, e, x| v.push((k, e, x)))?,
            None => {
                Scanner::new(l).line_object(|k, e, x| v.push((k, e, x)))?;
                None
            }
        };
        Ok((v, at))
    }

    /// Checks the fast walk against the scanner on one line: where the
    /// fast walk reads a line, the scanner reads it without error and hands
    /// out the same members (and the same offset for a stop key).
    fn fast_agrees(l: &[u8], stop: Option<&[u8]>) -> bool {
        let mut fast = Vec::new();
        let Some(at) = zap_members(l, None, stop, |k, e, x| fast.push((k, e, x))) else {
            return false;
        };
        let slow = scanned(l, stop);
        assert_eq!(
            slow,
            Ok((fast, at)),
            "{:?} {}",
            stop.map(String::from_utf8_lossy),
            String::from_utf8_lossy(l)
        );
        true
    }

    #[test]
    fn fast_walk_reads_what_the_scanner_reads() {
        let taken: [&[u8]; 7] = [
            br#"{"level":"debug","ts":1787320800.3303745,"caller":"a/b.go:1","msg":"Calculated score","x-request-id":"r1","priority":0,"plugin":"p/q","endpoint":{"name":"n-0","namespace":"ns"},"score":0.99}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","a":[1,{"b":"}]{["},[]],"t":true,"f":false,"z":null,"n":-2.5,"s":""}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","msg":"n","msg":"o"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":"a very long value that crosses the first sixty-four byte chunk and then some more","e":{}}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","endpoints":[{"ID":{"Name":"x"}}]}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","result":{"TargetEndpoints":[]}}"#,
        ];
        for l in taken {
            assert!(fast_agrees(l, None), "{}", String::from_utf8_lossy(l));
        }
        assert!(fast_agrees(taken[5], Some(b"endpoints")));
        assert!(fast_agrees(taken[6], Some(b"result")));
        assert!(fast_agrees(taken[0], Some(b"nothing")));
        // Left to the scanner: escapes (also far from the start), an
        // exponent, whitespace, trailing bytes, other heads, a cut line.
        let left: [&[u8]; 8] = [
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":"a\"b"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":"......................................................................","j":"\\"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":1e5}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m", "k":1}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":1} "#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":1}}"#,
            br#"{"ts":1,"level":"info","caller":"c","msg":"m"}"#,
            br#"{"level":"info","ts":1,"caller":"c","msg":"m","k":{"a":"b"}"#,
        ];
        for l in left {
            assert!(!fast_agrees(l, None), "{}", String::from_utf8_lossy(l));
        }
    }

    /// The fast walk against the scanner on every line of the zap fixtures,
    /// on each line cut short at every length, and with single bytes
    /// replaced by JSON's structural characters.
    #[test]
    fn fast_walk_matches_the_scanner_on_fixture_lines() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut files = Vec::new();
        let mut dirs = vec![root];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).expect("fixtures").flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "log") {
                    files.push(p);
                }
            }
        }
        let mut lines = Vec::new();
        for f in files {
            let text = std::fs::read(&f).expect("fixture");
            lines.extend(
                text.split(|&c| c == b'\n')
                    .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                    .filter(|l| l.starts_with(b"{"))
                    .map(<[u8]>::to_vec),
            );
        }
        assert!(lines.len() > 3000, "{} zap lines", lines.len());
        let mut taken = 0;
        for l in &lines {
            for stop in [None, Some(&b"endpoints"[..]), Some(b"result")] {
                taken += usize::from(fast_agrees(l, stop));
            }
        }
        assert!(
            taken > lines.len(),
            "the fast walk reads most lines ({taken})"
        );
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for l in lines.iter().step_by(37) {
            for cut in 0..l.len() {
                fast_agrees(&l[..cut], None);
            }
            for _ in 0..40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut m = l.clone();
                let at = (x as usize) % m.len();
                m[at] = b"\"\\{}[],: e-.0"[(x >> 40) as usize % 13];
                fast_agrees(&m, None);
                fast_agrees(&m, Some(b"endpoints"));
            }
        }
    }

    #[test]
    fn truncated_and_trailing_garbage_fail() {
        assert!(collect(br#"{"a":1,"b":"x"#).is_err());
        assert!(collect(br#"{"a":1"#).is_err());
        assert!(collect(br#"{"a":1} x"#).is_err());
        assert!(collect(br#"{"a":}"#).is_err());
        assert!(collect(br#"{"a":[1,2}"#).is_err());
        assert!(collect(b"{\"a\":\"\\").is_err());
        assert!(collect(br#"{}"#).unwrap().is_empty());
        assert!(collect(br#" { "a" : 1 } "#).is_ok());
    }

    #[test]
    fn utf8_checks_like_std() {
        let cases: [&[u8]; 7] = [
            b"",
            b"llm-d-deepseek-v3/deepseek-v3-decode-5t7hwncptc-8s2n7-rank-0",
            "caf\u{e9} \u{1F600}".as_bytes(),
            b"ab\xff",
            b"\xc3",
            b"0123456789abcdef0123456789abcdef\x80",
            b"\x7f\x00",
        ];
        for b in cases {
            assert_eq!(utf8(b), std::str::from_utf8(b).ok());
            assert_eq!(lossy(b), String::from_utf8_lossy(b));
        }
    }

    #[test]
    fn unescapes() {
        assert_eq!(
            unescape(br"a\u00e9\n\ud83d\ude00", true),
            "a\u{e9}\n\u{1F600}"
        );
        assert_eq!(unescape(br"\ud83d", true), "\u{FFFD}");
        assert_eq!(unescape(b"\xff", false), "\u{FFFD}");
    }

    const HEAD: &[u8] = br#"{"level":"debug","ts":1.5,"caller":"x.go:1","msg":"m","#;

    /// A bracket that closes another kind than it opened is an error, in
    /// the scanner and in the quick zap path (which gives up, so the
    /// scanner finds the error); matched nesting reads as before.
    #[test]
    fn mismatched_brackets_are_errors() {
        for bad in [
            &br#"{"a":[1,2}}"#[..],
            br#"{"a":[1,2}"#,
            br#"{"a":{"b":1]}"#,
            br#"{"a":[{"b":1]]}"#,
            br#"{"a":[[1],[2}]}"#,
            br#"{"a":{"b":[1}}}"#,
        ] {
            assert!(collect(bad).is_err(), "{}", String::from_utf8_lossy(bad));
            let line = [HEAD, &bad[1..]].concat();
            assert!(members(&line, |_, _, _| {}).is_err());
            assert!(zap_members(&line, None, None, |_, _, _| {}).is_none());
        }
        let good = br#"{"a":[1,{"b":[2,{"c":[]}]},[[]]],"d":{"e":{}}}"#;
        let got = collect(good).unwrap();
        assert_eq!(got.len(), 2);
        // The quick path reads the same line with the head (so it is the
        // path the bad lines above took).
        let line = [HEAD, &good[1..]].concat();
        let mut n = 0;
        assert_eq!(zap_members(&line, None, None, |_, _, _| n += 1), Some(None));
        assert_eq!(n, 6);
        // Nesting up to the cap reads; one level more is an error.
        for (depth, ok) in [
            (Brackets::MAX_DEPTH as usize, true),
            (Brackets::MAX_DEPTH as usize + 1, false),
        ] {
            let v = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
            assert_eq!(collect(v.as_bytes()).is_ok(), ok, "{depth}");
        }
    }
}
