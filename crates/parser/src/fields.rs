//! The keys the parser reads, number and endpoint conventions.

use crate::arena::{Arena, Span, Spans};
use crate::decision::ValueFlags;
use crate::json::{Val, arr_elems, obj_members, unescape};

macro_rules! keys {
    ($($var:ident = $lit:literal,)*) => {
        /// A key the parser reads.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub(crate) enum Key { $($var,)* }

        /// Number of keys.
        pub(crate) const NKEYS: usize = [$(Key::$var,)*].len();

        /// Every key, in declaration order (`ALL[k as usize] == k`).
        const ALL: [Key; NKEYS] = [$(Key::$var,)*];

        /// The spelling of every key, in declaration order.
        const NAMES: [&[u8]; NKEYS] = [$($lit,)*];

        impl Key {
            /// The key spelled `b`: one hash-table probe and one comparison
            /// (most keys of a line are not read, and this runs for every
            /// member of every used line).
            #[inline(always)]
            pub(crate) fn of(b: &[u8]) -> Option<Key> {
                let t = &KEY_TABLE;
                let k = t.slots[slot(b, t.seed)];
                if k == u8::MAX {
                    return None;
                }
                let k = usize::from(k);
                short_eq(NAMES[k], b).then(|| ALL[k])
            }
        }
    };
}

keys! {
    Level = b"level",
    Ts = b"ts",
    Msg = b"msg",
    RequestId = b"x-request-id",
    TargetModelName = b"targetModelName",
    ResolvedTargetModel = b"resolvedTargetModel",
    Model = b"model",
    Plugin = b"plugin",
    Profile = b"profile",
    Endpoint = b"endpoint",
    Endpoints = b"endpoints",
    Score = b"score",
    TokenLoad = b"tokenLoad",
    AffinityThreshold = b"affinityThreshold",
    Tau = b"tau",
    Total = b"total",
    Sticky = b"sticky",
    BestStickyTtft = b"bestStickyTTFT",
    BestNonStickyTtft = b"bestNonStickyTTFT",
    Penalty = b"penalty",
    MaxPenalty = b"maxPenalty",
    PrefillThroughput = b"prefillThroughput",
    StickyObserved = b"stickyObserved",
    NonStickyObserved = b"nonStickyObserved",
    BestStickyTokens = b"bestStickyTokens",
    BestNonStickyTokens = b"bestNonStickyTokens",
    StickyRequests = b"stickyRequests",
    NonStickyRequests = b"nonStickyRequests",
    MaxDelta = b"maxDelta",
    StickyRequestTtft = b"stickyRequestTTFT",
    NonStickyRequestTtft = b"nonStickyRequestTTFT",
    Added = b"added",
    MinCachedTokensFraction = b"minCachedTokensFraction",
    MinCachedTokens = b"minCachedTokens",
    Throughput = b"throughput",
    InFlightTokens = b"inFlightTokens",
    StickyCost = b"stickyCost",
    NonStickyCost = b"nonStickyCost",
    RemainingTurns = b"remainingTurns",
    PenaltySource = b"penaltySource",
    PeakPrefillThroughput = b"peakPrefillThroughput",
    Source = b"source",
    Reason = b"reason",
    RemainingEndpoints = b"remainingEndpoints",
    HitPrefixTokens = b"absolute hit prefix len (tokens)",
    PromptLength = b"prompt length (token)",
    Result = b"result",
}

/// `a == b` without a call to `memcmp` for the lengths of most keys
/// (up to 16 bytes: two overlapping 8-byte words, or bytes).
#[inline(always)]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    match n {
        0..8 => a.iter().zip(b).all(|(x, y)| x == y),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// Slots of the key table (a power of two, several times [`NKEYS`]).
const SLOTS: usize = 512;

/// A collision-free table of the keys: `slots[slot(name, seed)]` is the
/// index of the key spelled `name`, `u8::MAX` for an empty slot.
struct KeyTable {
    seed: u32,
    slots: [u8; SLOTS],
}

/// The slot of a key spelling: its length and first, second and last bytes,
/// mixed with `seed`.
#[inline(always)]
const fn slot(b: &[u8], seed: u32) -> usize {
    let n = b.len();
    let first = if n > 0 { b[0] } else { 0 };
    let second = if n > 1 { b[1] } else { 0 };
    let last = if n > 0 { b[n - 1] } else { 0 };
    let x = (n as u32) ^ ((first as u32) << 8) ^ ((second as u32) << 16) ^ ((last as u32) << 24);
    (x.wrapping_mul(seed) >> 23) as usize % SLOTS
}

/// The key table, built at compile time: the first odd multiplier that
/// separates all keys.
static KEY_TABLE: KeyTable = {
    let mut seed: u32 = 0x9E37_79B1;
    loop {
        let mut slots = [u8::MAX; SLOTS];
        let mut i = 0;
        let mut free = true;
        while i < NKEYS {
            let s = slot(NAMES[i], seed);
            if slots[s] != u8::MAX {
                free = false;
                break;
            }
            slots[s] = i as u8;
            i += 1;
        }
        if free {
            break KeyTable { seed, slots };
        }
        seed = seed.wrapping_add(0x6A09_E668) | 1;
    }
};

/// The values of the known keys of one line (the last occurrence wins).
pub(crate) struct Fields<'a> {
    vals: [Option<Val<'a>>; NKEYS],
}

impl<'a> Fields<'a> {
    pub(crate) fn new() -> Self {
        Fields {
            vals: [None; NKEYS],
        }
    }

    #[inline(always)]
    pub(crate) fn put(&mut self, key: &'a [u8], esc: bool, v: Val<'a>) {
        let k = if esc {
            Key::of(unescape(key, true).as_bytes())
        } else {
            Key::of(key)
        };
        if let Some(k) = k {
            self.vals[k as usize] = Some(v);
        }
    }

    #[inline]
    pub(crate) fn get(&self, k: Key) -> Option<Val<'a>> {
        self.vals[k as usize]
    }

    pub(crate) fn string(&self, k: Key) -> Option<String> {
        self.get(k)?.as_str().map(|c| c.into_owned())
    }

    /// A string value, into the arena.
    pub(crate) fn span(&self, k: Key, a: &mut Arena) -> Option<Span> {
        str_span(self.get(k)?, a)
    }

    /// A number, counting flags.
    pub(crate) fn num(&self, k: Key, flags: &mut ValueFlags) -> Option<f64> {
        number(self.get(k)?, flags)
    }

    pub(crate) fn bool(&self, k: Key) -> Option<bool> {
        match self.get(k)? {
            Val::Bool(b) => Some(b),
            _ => None,
        }
    }
}

/// A number as f64: JSON numbers of any length, and the strings zap writes
/// for NaN and infinities. Flags values `>= 1e300` and non-finite strings.
pub(crate) fn number(v: Val<'_>, flags: &mut ValueFlags) -> Option<f64> {
    match v {
        Val::Num(raw) => {
            let x = parse_f64(raw)?;
            if x.abs() >= 1e300 {
                flags.huge = true;
            }
            Some(x)
        }
        Val::Str(raw, false) => {
            let x = match raw {
                b"NaN" => f64::NAN,
                b"+Inf" | b"Inf" => f64::INFINITY,
                b"-Inf" => f64::NEG_INFINITY,
                _ => return None,
            };
            flags.non_finite = true;
            Some(x)
        }
        _ => None,
    }
}

/// Exact powers of ten as `f64` (every one up to 1e22 is representable).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The same powers of ten as integers.
const POW10_INT: [u128; 23] = {
    let mut t = [1u128; 23];
    let mut i = 1;
    while i < 23 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// A JSON number (as the scanner delimited it) as `f64`, correctly
/// rounded, bit for bit what `str::parse` gives. Numbers written
/// `[-]digits[.digits]` with at most 19 digits make an integer `m` over
/// `10^k` (`k` the digits after the point). When `m <= 2^53` (token counts,
/// scores, most loads) they take Clinger's fast path: `m` and `10^k` are
/// both exact, and one IEEE division rounds correctly. Larger `m` (the
/// 17-digit `ts` of every line) go through [`nearest_quotient`]. Anything
/// else (exponents, 309-digit integers) goes to `str::parse`.
#[inline]
pub(crate) fn parse_f64(raw: &[u8]) -> Option<f64> {
    let (neg, digits) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    // `int[.frac]`, at most 19 digits in all (so the integer fits in u64),
    // read in one pass: the digits' value and where the point is.
    if digits.len() <= 20 {
        let mut m = 0u64;
        let mut point = None;
        let mut ok = true;
        for (i, &c) in digits.iter().enumerate() {
            let d = c.wrapping_sub(b'0');
            if d < 10 {
                m = m.wrapping_mul(10).wrapping_add(u64::from(d));
            } else if c == b'.' && point.is_none() {
                point = Some(i);
            } else {
                ok = false;
                break;
            }
        }
        let frac = point.map_or(0, |p| digits.len() - p - 1);
        let n = digits.len() - usize::from(point.is_some());
        if ok && (1..=19).contains(&n) {
            let x = if m <= 1 << 53 {
                Some(m as f64 / POW10[frac])
            } else {
                nearest_quotient(m, frac)
            };
            if let Some(x) = x {
                return Some(if neg { -x } else { x });
            }
        }
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// `m / 10^k` correctly rounded (to nearest, ties to even), for the
/// 17-to-19-digit numbers zap writes for `ts` (`1787320800.3303745`); `None`
/// outside the range where the check below is exact (the caller then uses
/// `str::parse`).
///
/// `m as f64 / 10^k` rounds twice, so it is within 2 ulps of the exact
/// quotient `v`, and so is the double nearest to `v`. Doubles `c = M·2^e`
/// of the same binade are compared with `v` exactly in integers:
/// `|c - v|·10^k·2^-e = |M·10^k - m·2^-e|`, which fits in `u128` while
/// `M < 2^53`, `10^k <= 10^22` and `0 < -e <= 63`; from the approximation,
/// at most two steps towards `v` reach the nearest.
fn nearest_quotient(m: u64, k: usize) -> Option<f64> {
    let approx = m as f64 / POW10[k];
    if !approx.is_normal() {
        return None;
    }
    let bits = approx.to_bits();
    let exp = bits >> 52;
    let e = exp as i64 - 1075;
    if !(-63..0).contains(&e) {
        return None;
    }
    let p10 = POW10_INT[k];
    let target = u128::from(m) << (-e) as u32;
    // A candidate (its bits) times 10^k·2^-e; `None` in another binade
    // (another scale: left to `str::parse`).
    let scaled = |c: u64| -> Option<u128> {
        let mant = (c & ((1 << 52) - 1)) | (1 << 52);
        (c >> 52 == exp).then(|| u128::from(mant) * p10)
    };
    let dist = |c: u64| scaled(c).map(|x| x.abs_diff(target));
    // Walk from the approximation towards the quotient while the distance
    // shrinks; ties go to the even mantissa.
    let above = scaled(bits)? > target;
    let mut best = bits;
    let mut best_d = dist(bits)?;
    for _ in 0..2 {
        let next = if above {
            best.checked_sub(1)?
        } else {
            best + 1
        };
        let d = dist(next)?;
        if d < best_d || (d == best_d && next % 2 == 0) {
            best = next;
            best_d = d;
        } else {
            break;
        }
    }
    Some(f64::from_bits(best))
}

/// A string value, unescaped, into the arena (as written when it has no
/// escape: converted lossily, if it is not UTF-8, when read from there).
pub(crate) fn str_span(v: Val<'_>, a: &mut Arena) -> Option<Span> {
    match v {
        Val::Str(raw, false) => Some(a.push(raw)),
        Val::Str(raw, true) => Some(a.push(unescape(raw, true).as_bytes())),
        _ => None,
    }
}

/// Normalises an endpoint id given as a string: `ns/name`, `name`, `ip:port`
/// are kept as they are (trimmed).
fn endpoint_str(s: &str, a: &mut Arena) -> Option<Span> {
    let t = trim(s);
    if t.is_empty() {
        None
    } else {
        Some(a.push(t.as_bytes()))
    }
}

/// `s` without leading and trailing whitespace, as `str::trim`; ids
/// usually start and end with an ASCII letter or digit, which is checked
/// first (`str::trim` decodes a character at each end).
#[inline]
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() => s,
        _ => s.trim(),
    }
}

/// Joins a namespace and a name into `namespace/name` (or `name`).
fn join_id(ns: Option<&str>, name: Option<&str>, a: &mut Arena) -> Option<Span> {
    let name = trim(name?);
    if name.is_empty() {
        return None;
    }
    match ns.map(trim) {
        Some(n) if !n.is_empty() => Some(a.push_join(n, name)),
        _ => Some(a.push(name.as_bytes())),
    }
}

/// An endpoint id in any logged shape: `{"name","namespace"}`,
/// `{"Name","Namespace"}`, `"ns/name"`, `"name"`, `"ip:port"`; inside a
/// reflected dump, the `ID` (or `NamespacedName`, ...) member, searched
/// before the dump's own `Name` (which is the pod's).
pub(crate) fn endpoint(v: Val<'_>, a: &mut Arena) -> Option<Span> {
    match v {
        Val::Str(..) => endpoint_str(&v.as_str()?, a),
        Val::Obj(raw) => endpoint_deep(raw, 0, a),
        _ => None,
    }
}

const ID_KEYS: [&str; 8] = [
    "ID",
    "NamespacedName",
    "Endpoint",
    "EndpointMetadata",
    "Metadata",
    "Pod",
    "metadata",
    "endpoint",
];

/// The usual id object, `{"name":"N","namespace":"S"}` or
/// `{"Namespace":"S","Name":"N"}` (two string members, any order and
/// spelling, no escapes or whitespace, valid UTF-8), read without the
/// scanner: the id as [`endpoint_deep`] makes it (`Some(None)` where that is
/// none) and the offset after the closing brace. `None` for any other
/// object or text: the caller walks it.
fn id_pair(b: &[u8], a: &mut Arena) -> Option<(Option<Span>, usize)> {
    if let Some((ns, name, end)) = id_literal(b) {
        return Some((Some(a.push_join_bytes(ns, name)), end));
    }
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut i = 1;
    let mut name = None;
    let mut ns = None;
    for sep in [b',', b'}'] {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let ke = crate::json::quote_or_backslash(b, i + 1)?;
        if b[ke] != b'"' || b.get(ke + 1..ke + 3) != Some(b":\"") {
            return None;
        }
        let ve = crate::json::quote_or_backslash(b, ke + 3)?;
        if b[ve] != b'"' || b.get(ve + 1) != Some(&sep) {
            return None;
        }
        let v = crate::json::utf8(&b[ke + 3..ve])?;
        match &b[i + 1..ke] {
            b"name" | b"Name" => name = Some(v),
            b"namespace" | b"Namespace" => ns = Some(v),
            _ => {}
        }
        i = ve + 2;
    }
    Some((join_id(ns, name, a), i))
}

/// The two id objects zap writes (the reflected `{"Namespace":"S","Name":"N"}`
/// of endpoint dumps, the scorers' `{"name":"N","namespace":"S"}`), matched
/// literally: the namespace, the name and the offset after the closing
/// brace. Only for values that need no trimming (first and last bytes ASCII
/// letters or digits) and no unescaping; their bytes go to the arena as
/// written (a string read from there is converted lossily, which keeps `/`
/// as it is, so joining before or after the conversion is the same).
/// `None` for anything else: [`id_pair`] reads it the general way.
#[inline]
fn id_literal(b: &[u8]) -> Option<(&[u8], &[u8], usize)> {
    const NS_FIRST: &[u8] = b"{\"Namespace\":\"";
    const NAME_FIRST: &[u8] = b"{\"name\":\"";
    let (ns_first, second_key): (bool, &[u8]) = if b.starts_with(NS_FIRST) {
        (true, b"\",\"Name\":\"")
    } else if b.starts_with(NAME_FIRST) {
        (false, b"\",\"namespace\":\"")
    } else {
        return None;
    };
    let v1 = if ns_first {
        NS_FIRST.len()
    } else {
        NAME_FIRST.len()
    };
    let q1 = crate::json::quote_or_backslash(b, v1)?;
    if !b[q1..].starts_with(second_key) {
        return None;
    }
    let v2 = q1 + second_key.len();
    let q2 = crate::json::quote_or_backslash(b, v2)?;
    if b.get(q2..q2 + 2) != Some(b"\"}") {
        return None;
    }
    let (x, y) = (&b[v1..q1], &b[v2..q2]);
    let plain = |v: &[u8]| match (v.first(), v.last()) {
        (Some(f), Some(l)) => f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric(),
        _ => false,
    };
    if !plain(x) || !plain(y) {
        return None;
    }
    Some(if ns_first {
        (x, y, q2 + 2)
    } else {
        (y, x, q2 + 2)
    })
}

fn endpoint_deep(raw: &[u8], depth: u32, a: &mut Arena) -> Option<Span> {
    // An id read by `id_pair` from an object with more after it stays in
    // the arena unused (the arena is the block's, emptied with it).
    if let Some((id, end)) = id_pair(raw, a)
        && end == raw.len()
    {
        return id;
    }
    endpoint_walk(raw, depth, a)
}

/// [`endpoint_deep`] by the scanner: any object shape.
fn endpoint_walk(raw: &[u8], depth: u32, a: &mut Arena) -> Option<Span> {
    let mut found: [Option<&[u8]>; ID_KEYS.len()] = [None; ID_KEYS.len()];
    let mut name = None;
    let mut ns = None;
    let ok = obj_members(raw, |k, e, v| {
        let owned;
        let k: &[u8] = if e {
            owned = unescape(k, true).into_owned();
            owned.as_bytes()
        } else {
            k
        };
        match (k, v) {
            (b"name" | b"Name", Val::Str(..)) => name = v.as_str(),
            (b"namespace" | b"Namespace", Val::Str(..)) => ns = v.as_str(),
            (k, Val::Obj(o)) => {
                if let Some(i) = ID_KEYS.iter().position(|x| x.as_bytes() == k) {
                    found[i] = Some(o);
                }
            }
            _ => {}
        }
    });
    if !ok {
        return None;
    }
    if depth < 4 {
        for o in found.into_iter().flatten() {
            if let Some(e) = endpoint_deep(o, depth + 1, a) {
                return Some(e);
            }
        }
    }
    join_id(ns.as_deref(), name.as_deref(), a)
}

/// The endpoint ids of an array of endpoints (any element shape), or of a
/// single endpoint value, as a list in the arena.
pub(crate) fn endpoint_list(v: Val<'_>, a: &mut Arena) -> Option<Spans> {
    let start = a.list_start();
    match v {
        Val::Arr(raw) => {
            let ok = arr_elems(raw, |e| {
                if let Some(id) = endpoint(e, a) {
                    a.push_item(id);
                }
            });
            if !ok {
                return None;
            }
        }
        Val::Null => {}
        Val::Str(..) => {
            // `"ip:port,ip:port"` or a single id.
            let s = v.as_str()?;
            for part in s.split(',') {
                if let Some(id) = endpoint_str(part, a) {
                    a.push_item(id);
                }
            }
        }
        Val::Obj(_) => {
            let id = endpoint(v, a)?;
            a.push_item(id);
        }
        _ => return None,
    }
    Some(a.list_from(start))
}

/// The offset of the next `"ID":{` at or after `from`. A capital `I` is
/// rare in a dump (the `ID` key, `RankIndex`), so the search is for that
/// byte (`memchr`, cheaper to start than a substring search), each hit
/// checked in place.
fn find_id_key(raw: &[u8], from: usize) -> Option<usize> {
    // The `I` of a match at or after `from` is at `from + 1` or later.
    let mut at = from.checked_add(1)?;
    loop {
        let i = at + memchr::memchr(b'I', raw.get(at..)?)?;
        if raw.get(i - 1..i + 5) == Some(b"\"ID\":{") {
            return Some(i - 1);
        }
        at = i + 1;
    }
}

/// The endpoint ids of a reflected endpoint dump, found by a literal search
/// for `"ID":{` objects with a `Name` (the dump's per-endpoint id), in order,
/// as a list in the arena. `None` when there is none (another shape: the
/// caller walks the value).
pub(crate) fn dump_ids(raw: &[u8], a: &mut Arena) -> Option<Spans> {
    let first = a.list_start();
    let mut at = 0;
    while let Some(p) = find_id_key(raw, at) {
        let start = p + 5;
        if let Some((id, end)) = id_pair(&raw[start..], a) {
            if let Some(id) = id {
                a.push_item(id);
            }
            at = start + end;
            continue;
        }
        // One pass over the `ID` object: its members, then where it ends.
        let mut sc = crate::json::Scanner::new(&raw[start..]);
        let mut name = None;
        let mut ns = None;
        let read = sc.object(false, |k, _, v| match k {
            b"Name" | b"name" => name = Some(v),
            b"Namespace" | b"namespace" => ns = Some(v),
            _ => {}
        });
        if read.is_ok() {
            let name = name.and_then(|v| v.as_str());
            let ns = ns.and_then(|v| v.as_str());
            if let Some(id) = join_id(ns.as_deref(), name.as_deref(), a) {
                a.push_item(id);
            }
            at = start + sc.pos();
        } else {
            at = start;
        }
    }
    let ids = a.list_from(first);
    if Arena::is_empty_list(ids) {
        None
    } else {
        Some(ids)
    }
}

/// `result.TargetEndpoints` of a picker result object, as a list in the
/// arena.
pub(crate) fn picker_targets(v: Val<'_>, a: &mut Arena) -> Option<Spans> {
    let Val::Obj(raw) = v else { return None };
    let mut out = None;
    obj_members(raw, |k, e, v| {
        if (!e && k == b"TargetEndpoints") || (e && unescape(k, e) == "TargetEndpoints") {
            out = endpoint_list(v, a);
        }
    });
    out
}

/// The verbosity of a zap level spelling: `debug` 4, `info` 0, `trace` 5,
/// `Level(-N)` / `LEVEL(-N)` N, `warn` -1, `error` -2, `dpanic` -3, `panic`
/// -4, `fatal` -5.
pub(crate) fn level(b: &[u8]) -> Option<i8> {
    let lower = |w: &[u8]| b.eq_ignore_ascii_case(w);
    if lower(b"debug") {
        Some(4)
    } else if lower(b"info") {
        Some(0)
    } else if lower(b"trace") {
        Some(5)
    } else if lower(b"warn") || lower(b"warning") {
        Some(-1)
    } else if lower(b"error") {
        Some(-2)
    } else if lower(b"dpanic") {
        Some(-3)
    } else if lower(b"panic") {
        Some(-4)
    } else if lower(b"fatal") {
        Some(-5)
    } else if b.len() > 7 && b[..6].eq_ignore_ascii_case(b"level(") && b.ends_with(b")") {
        let n = std::str::from_utf8(&b[6..b.len() - 1]).ok()?;
        let n: i32 = n.parse().ok()?;
        i8::try_from(-n).ok()
    } else {
        None
    }
}

/// An epoch time within years 1 to 9999 (as RFC3339 allows), else `None`.
pub(crate) fn plausible_epoch(x: f64) -> Option<f64> {
    (-62_135_596_800.0..=253_402_300_799.0)
        .contains(&x)
        .then_some(x)
}

/// A `ts` value: epoch float (HEAD) or RFC3339 string (older builds).
pub(crate) fn ts(v: Val<'_>) -> Option<f64> {
    match v {
        Val::Num(raw) => plausible_epoch(parse_f64(raw)?),
        Val::Str(raw, false) => crate::time::parse_rfc3339(raw),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The id readers, with their strings read back from an arena.
    fn endpoint(v: Val<'_>) -> Option<String> {
        let mut a = Arena::default();
        super::endpoint(v, &mut a).map(|s| a.string(s))
    }

    fn endpoint_list(v: Val<'_>) -> Option<Vec<String>> {
        let mut a = Arena::default();
        super::endpoint_list(v, &mut a).map(|l| a.strings(l))
    }

    fn id_pair(b: &[u8]) -> Option<(Option<String>, usize)> {
        let mut a = Arena::default();
        super::id_pair(b, &mut a).map(|(id, end)| (id.map(|s| a.string(s)), end))
    }

    fn endpoint_walk(raw: &[u8], depth: u32) -> Option<String> {
        let mut a = Arena::default();
        super::endpoint_walk(raw, depth, &mut a).map(|s| a.string(s))
    }

    fn endpoint_deep(raw: &[u8], depth: u32) -> Option<String> {
        let mut a = Arena::default();
        super::endpoint_deep(raw, depth, &mut a).map(|s| a.string(s))
    }
    use crate::json::Scanner;

    #[test]
    fn id_key_search_matches_a_substring_search() {
        let texts: [&[u8]; 6] = [
            br#"[{"ID":{"Name":"a"},"RankIndex":0},{"ID":{"Name":"b"}}]"#,
            br#"I"ID":{"#,
            br#"{"RankIndex":1,"ID":1,"xID":{"#,
            br#""ID":"#,
            b"",
            br#"IIII"ID"ID":{"#,
        ];
        for t in texts {
            let mut want = Vec::new();
            let mut from = 0;
            while let Some(p) = memchr::memmem::find(&t[from..], br#""ID":{"#) {
                want.push(from + p);
                from += p + 1;
            }
            let mut got = Vec::new();
            let mut from = 0;
            while let Some(p) = find_id_key(t, from) {
                got.push(p);
                from = p + 1;
            }
            assert_eq!(got, want, "{}", String::from_utf8_lossy(t));
        }
    }

    /// The literal shapes give what the scanner's walk gives, bytes that
    /// are not UTF-8 included; anything near them is left to the general
    /// reader.
    #[test]
    fn literal_ids_match_the_walk() {
        let literal: [&[u8]; 5] = [
            br#"{"Namespace":"llm-d","Name":"p-0-rank-0"}"#,
            br#"{"name":"p-0-rank-0","namespace":"llm-d"}"#,
            b"{\"Namespace\":\"ns\",\"Name\":\"a\xffb\"}",
            br#"{"Namespace":"n","Name":"p"},"Name":"pod"}"#,
            br#"{"name":"1","namespace":"2"}"#,
        ];
        for o in literal {
            let (ns, name, end) = id_literal(o).expect("the literal shape");
            assert!(!ns.is_empty() && !name.is_empty());
            let (id, end2) = id_pair(o).unwrap();
            assert_eq!(end, end2);
            assert_eq!(
                id,
                endpoint_walk(&o[..end], 0),
                "{}",
                String::from_utf8_lossy(o)
            );
        }
        let general: [&[u8]; 7] = [
            br#"{"Namespace":" ns","Name":"p"}"#,
            br#"{"Namespace":"ns","Name":"p "}"#,
            br#"{"Namespace":"","Name":"p"}"#,
            br#"{"Namespace":"n\"s","Name":"p"}"#,
            br#"{"Name":"p","Namespace":"ns"}"#,
            br#"{"namespace":"ns","name":"p"}"#,
            br#"{"Namespace":"ns","Name":"p","X":1}"#,
        ];
        for o in general {
            assert!(id_literal(o).is_none(), "{}", String::from_utf8_lossy(o));
        }
        assert_eq!(id_pair(general[4]).unwrap().0.as_deref(), Some("ns/p"));
        assert_eq!(id_pair(general[0]).unwrap().0.as_deref(), Some("ns/p"));
    }

    #[test]
    fn trim_is_str_trim() {
        for s in [
            "a",
            " a",
            "a ",
            "\u{a0}a",
            "a\u{2003}",
            "",
            " ",
            "ns/n-0",
            "\tx\n",
            "é",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
    }

    /// The usual id objects read without the scanner give what the scanner
    /// gives; the others are left to it.
    #[test]
    fn id_pair_matches_the_walk() {
        let taken: [&[u8]; 6] = [
            br#"{"name":"n-0","namespace":"ns"}"#,
            br#"{"Namespace":"ns","Name":"n-0"}"#,
            br#"{"name":"n-0","other":"x"}"#,
            br#"{"namespace":"ns","name":" "}"#,
            br#"{"name":"a","name":"b"}"#,
            br#"{"Namespace":"ns","Name":"n-0"},"Name":"pod"}"#,
        ];
        for o in taken {
            let (id, end) = id_pair(o).expect("read without the scanner");
            assert_eq!(
                id,
                endpoint_walk(&o[..end], 0),
                "{}",
                String::from_utf8_lossy(o)
            );
        }
        assert_eq!(id_pair(taken[1]).unwrap().0.as_deref(), Some("ns/n-0"));
        let left: [&[u8]; 8] = [
            br#"{"name":"n\u0030","namespace":"ns"}"#,
            br#"{"name": "n","namespace":"ns"}"#,
            br#"{"name":"n","namespace":"ns","x":1}"#,
            br#"{"name":"n"}"#,
            br#"{"name":1,"namespace":"ns"}"#,
            br#"{"ID":{"name":"n","namespace":"ns"},"Name":"p"}"#,
            b"{\"name\":\"n\xff\",\"namespace\":\"ns\"}",
            br#"{"name":"n","namespace":"ns""#,
        ];
        for o in left {
            assert!(id_pair(o).is_none(), "{}", String::from_utf8_lossy(o));
        }
        // What the walk makes of those, endpoint_deep still does.
        assert_eq!(endpoint_deep(left[0], 0).as_deref(), Some("ns/n0"));
        assert_eq!(endpoint_deep(left[5], 0).as_deref(), Some("ns/n"));
    }

    /// The fast path gives the bits `str::parse` gives, on both sides of
    /// its limits (2^53, 19 digits, 22 decimals) and on the shapes zap writes.
    #[test]
    fn parse_f64_matches_std() {
        let mut cases: Vec<String> = [
            "0",
            "-0",
            "1",
            "-1",
            "0.5",
            "1.",
            "13440",
            "0.996795654296875",
            "18709.191361125064",
            "1787320800.3303745",
            "9007199254740992",
            "9007199254740993",
            "9007199254740991.5",
            "1e5",
            "-2.5E-3",
            "0.0000000000000000000001",
            "0.00000000000000000000001",
            "1234567890123456789",
            "12345678901234567890",
            "179769313486231570000000000000000000000",
            "3.14159",
            "-18000",
            "00012.5000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 10_000_000_000_000_000_000) >> (x % 40);
            let point = (x >> 50) % 24;
            let mut t = digits.to_string();
            if (point as usize) < t.len() {
                t.insert((t.len() - point as usize).max(1), '.');
            }
            if x & 1 == 1 {
                t.insert(0, '-');
            }
            cases.push(t);
        }
        // `ts` as zap writes it: 10 digits, a point, 1 to 9 decimals.
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let secs = 1_500_000_000 + x % 500_000_000;
            let decimals = 1 + (x >> 40) % 9;
            let frac = (x >> 20) % 10u64.pow(decimals as u32);
            cases.push(format!("{secs}.{frac:0width$}", width = decimals as usize));
        }
        // Halfway cases and neighbours: doubles printed with extra digits.
        for i in 0..2_000u64 {
            let d = f64::from_bits(0x41DA_0000_0000_0000 + i * 7919);
            cases.push(format!("{d:.7}"));
            cases.push(format!("{d:.9}"));
        }
        assert_eq!(
            nearest_quotient(17_873_208_003_303_745, 7),
            Some(1787320800.3303745)
        );
        for c in cases {
            let want: f64 = c.parse().unwrap();
            let got = parse_f64(c.as_bytes()).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{c}");
        }
    }

    fn val(s: &str) -> Val<'_> {
        Scanner::new(s.as_bytes()).value().unwrap()
    }

    #[test]
    fn endpoint_shapes() {
        assert_eq!(
            endpoint(val(r#"{"name":"p-0","namespace":"llm"}"#)).unwrap(),
            "llm/p-0"
        );
        assert_eq!(
            endpoint(val(r#"{"Namespace":"llm","Name":"p-0"}"#)).unwrap(),
            "llm/p-0"
        );
        assert_eq!(endpoint(val(r#"{"name":"p-0"}"#)).unwrap(), "p-0");
        assert_eq!(
            endpoint(val(r#""llm/p-0-rank-1""#)).unwrap(),
            "llm/p-0-rank-1"
        );
        assert_eq!(
            endpoint(val(r#""10.0.0.1:8000""#)).unwrap(),
            "10.0.0.1:8000"
        );
        let dump = r#"{"Metadata":{"ID":{"Namespace":"llm","Name":"p-1"},"Address":"10.0.0.1"},"Metrics":{"x":1}}"#;
        let flat =
            r#"{"ID":{"Namespace":"llm","Name":"p-1-rank-1"},"Name":"p-1","Labels":{"Name":"x"}}"#;
        assert_eq!(endpoint(val(flat)).unwrap(), "llm/p-1-rank-1");
        assert_eq!(endpoint(val(dump)).unwrap(), "llm/p-1");
        let list = format!("[{dump},{}]", r#"{"ID":{"Namespace":"llm","Name":"p-2"}}"#);
        assert_eq!(
            endpoint_list(val(&list)).unwrap(),
            vec!["llm/p-1", "llm/p-2"]
        );
        assert_eq!(endpoint(val("3")), None);
    }

    #[test]
    fn numbers_and_flags() {
        let mut f = ValueFlags::default();
        assert_eq!(number(val("18000"), &mut f), Some(18000.0));
        assert!(!f.huge);
        let max = format!("17976931348623157{}", "0".repeat(292));
        assert_eq!(number(val(&max), &mut f), Some(f64::MAX));
        assert!(f.huge);
        let mut g = ValueFlags::default();
        assert!(number(val(r#""NaN""#), &mut g).unwrap().is_nan());
        assert_eq!(number(val(r#""-Inf""#), &mut g), Some(f64::NEG_INFINITY));
        assert!(g.non_finite);
        assert_eq!(number(val(r#""12""#), &mut g), None);
    }

    #[test]
    fn key_lookup() {
        for (i, name) in NAMES.iter().enumerate() {
            assert_eq!(Key::of(name), Some(ALL[i]));
            assert_eq!(ALL[i] as usize, i);
        }
        for other in [
            &b""[..],
            b"x",
            b"caller",
            b"objectiveKey",
            b"Msg",
            b"msgs",
            b"tokenload",
        ] {
            assert_eq!(Key::of(other), None);
        }
    }

    #[test]
    fn levels() {
        assert_eq!(level(b"debug"), Some(4));
        assert_eq!(level(b"Level(-4)"), Some(4));
        assert_eq!(level(b"LEVEL(-5)"), Some(5));
        assert_eq!(level(b"DEBUG"), Some(4));
        assert_eq!(level(b"dpanic"), Some(-3));
        assert_eq!(level(b"Level(x)"), None);
    }
}
