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

/// The powers of ten up to `10^18` as integers (`2·10^18 < 2^61`: the
/// remainders of [`nearest_quotient`] fit in `i64`).
const POW10_INT: [u64; 19] = {
    let mut t = [1u64; 19];
    let mut i = 1;
    while i < 19 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// For `k` in `1..=19`, with `b` the bit length of `10^k`
/// (`2^(b-1) < 10^k < 2^b`): `floor(2^(63+b) / 10^k)`, and `1085 - b` (the
/// exponent base of [`product_quotient`]). The quotient lies strictly
/// between `2^63` and `2^64`, and is below the exact `2^(63+b) / 10^k` by
/// less than 1 (never 0: `5^k` divides no power of two). Entry 0 is unused.
const RECIP_POW10: [(u64, u64); 20] = {
    let mut t = [(0u64, 0u64); 20];
    let mut p: u128 = 1;
    let mut k = 1;
    while k < 20 {
        p *= 10;
        let b = 128 - p.leading_zeros();
        t[k] = (((1u128 << (63 + b)) / p) as u64, 1085 - b as u64);
        k += 1;
    }
    t
};

/// For `k` in `0..=19`: the inverse of `5^k` modulo `2^64` (odd, so it has
/// one) and `floor((2^64 - 1) / 5^k)`. `m·inverse` (wrapping) is at most
/// that bound exactly when `5^k` divides `m`, and is then `m / 5^k` (the
/// divisibility test of Granlund and Montgomery).
const INV_POW5: [(u64, u64); 20] = {
    let mut t = [(1u64, u64::MAX); 20];
    let mut d: u64 = 1;
    let mut k = 1;
    while k < 20 {
        d *= 5;
        // Newton's iteration doubles the correct low bits: d·d = 1 mod 8
        // (3 bits), then 6, 12, 24, 48, 96.
        let mut x = d;
        let mut i = 0;
        while i < 5 {
            x = x.wrapping_mul(2u64.wrapping_sub(d.wrapping_mul(x)));
            i += 1;
        }
        t[k] = (x, u64::MAX / d);
        k += 1;
    }
    t
};

/// A JSON number (as the scanner delimited it) as `f64`, correctly
/// rounded, bit for bit what `str::parse` gives. Numbers written
/// `[-]digits[.digits]` with at most 19 digits are read by [`decimal`] into
/// an integer `m` over `10^k` (`k` the digits after the point). When
/// `m <= 2^53` (token counts, scores, most loads) they take Clinger's fast
/// path: `m` and `10^k` are both exact, and one IEEE division rounds
/// correctly. A larger integer (`k = 0`) is one conversion, `m as f64`,
/// which rounds once, correctly. Larger `m` with decimals (the 17-digit
/// `ts` of every line, 16-decimal scores) go to [`product_quotient`]; what
/// its 64-bit product cannot decide goes to [`dyadic_quotient`] when it is
/// an exact binary fraction, else (about one in 500) to
/// [`nearest_quotient`]. Anything else (exponents, 309-digit integers, a
/// leading `+`, the rare quotients `nearest_quotient` declines too, and
/// every text that is not a number) goes to `str::parse`, so a text that
/// is not a number gives `None` exactly when `str::parse` fails.
#[inline]
pub(crate) fn parse_f64(raw: &[u8]) -> Option<f64> {
    let (neg, digits) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    match decimal::<false>(digits) {
        Some((m, k)) => quotient(m, k, neg, raw),
        None => std_parse(raw),
    }
}

/// `m / 10^k` correctly rounded, negated when `neg`, for `raw` (the same
/// number, for `str::parse` in the rare cases left to it).
#[inline(always)]
fn quotient(m: u64, k: usize, neg: bool, raw: &[u8]) -> Option<f64> {
    let x = if m <= 1 << 53 {
        m as f64 / POW10[k]
    } else if k == 0 {
        m as f64
    } else if let Some(x) = product_quotient(m, k) {
        x
    } else {
        return match nearest_quotient(m, k) {
            Some(x) => Some(if neg { -x } else { x }),
            None => std_parse(raw),
        };
    };
    Some(if neg { -x } else { x })
}

/// What `str::parse` makes of `raw` (out of line: rare).
#[cold]
#[inline(never)]
fn std_parse(raw: &[u8]) -> Option<f64> {
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// `b'0'` in every byte: XOR with it turns the ASCII digits into their
/// values 0 to 9, the point into `0x1e`, and every other byte into a value
/// above 9.
const ASCII_ZEROS: u64 = 0x3030_3030_3030_3030;

/// `int[.frac]` (either part may be empty, 1 to 19 digits in all) as
/// `(m, k)`: the digits as one integer `m` (below `10^19`, so in `u64`) and
/// `k` the number of digits after the point; `None` for any other text.
/// With `FRAC`, `d` is what follows `0.`: digits only, all of them decimals.
///
/// The text is read 8 bytes at a time, with no branch per byte (SWAR), in
/// windows counted from its end: `w0` its last 8 bytes, `w1` the 8 before,
/// `w2` the first 1 to 4 of a text longer than 16. Each window is XORed
/// with [`ASCII_ZEROS`] at once, and the places before the start of the text
/// are shifted in as zero bytes, that is leading `0` digits, which change
/// no value. [`non_digits`] marks every byte that is not a digit: the text
/// is accepted when no byte is marked (an integer), or when exactly one is
/// and [`drop_point`] finds the point there. The windows' values
/// ([`eight_digits`]) are then added at the powers of ten of their places,
/// one place less for the windows before the point. All of it is exact
/// integer arithmetic, without overflow (the bounds are written at each
/// step), so `m` is the value of the digits.
///
/// Two shapes of 17 to 20 bytes, most of the numbers read, are taken
/// before the windows: zap's `ts` ([`epoch`]), and `0.` with 15 to 18
/// decimals (scores), read as the integer after the point (`FRAC`), which
/// spares closing the gap of the point.
#[inline(always)]
fn decimal<const FRAC: bool>(d: &[u8]) -> Option<(u64, usize)> {
    let len = d.len();
    // Each length class calls `windows` with its own constants, so what is
    // known to be zero there costs nothing.
    if len > 16 {
        if len > 20 {
            return None;
        }
        if !FRAC {
            if len < 20 && d[10] == b'.' {
                return epoch(d);
            }
            if d[..2] == *b"0." {
                return decimal::<true>(&d[2..]);
            }
        }
        let w0 = le64(&d[len - 8..]) ^ ASCII_ZEROS;
        let w1 = le64(&d[len - 16..len - 8]) ^ ASCII_ZEROS;
        // The first `len - 16` (1 to 4) bytes, in the top of a u32.
        let w2 = (le32(&d[..4]) ^ ASCII_ZEROS as u32) << (8 * (20 - len));
        windows::<FRAC>(w0, w1, w2, len)
    } else if len >= 8 {
        let w0 = le64(&d[len - 8..]) ^ ASCII_ZEROS;
        if len == 16 {
            windows::<FRAC>(w0, le64(&d[..8]) ^ ASCII_ZEROS, 0, len)
        } else if len > 8 {
            // The first `len - 8` bytes, in the top of the window.
            let w1 = (le64(&d[..8]) ^ ASCII_ZEROS) << (8 * (16 - len));
            windows::<FRAC>(w0, w1, 0, len)
        } else {
            windows::<FRAC>(w0, 0, 0, len)
        }
    } else if len == 1 {
        // One digit (the point alone is no number).
        let v = d[0].wrapping_sub(b'0');
        (v < 10).then_some((u64::from(v), usize::from(FRAC)))
    } else if len > 0 {
        // 2 to 7 bytes, gathered by overlapping reads (a byte read twice
        // lands in the same place both times, and OR keeps it).
        let x = if len >= 4 {
            u64::from(le32(&d[..4])) | u64::from(le32(&d[len - 4..])) << (8 * (len - 4))
        } else {
            u64::from(d[0])
                | u64::from(d[len / 2]) << (8 * (len / 2))
                | u64::from(d[len - 1]) << (8 * (len - 1))
        };
        windows::<FRAC>((x ^ ASCII_ZEROS) << (8 * (8 - len)), 0, 0, len)
    } else {
        None
    }
}

/// [`decimal`] for the `ts` zap writes, 10 digits, the point and 6 to 8
/// decimals (17 to 19 bytes, `d[10]` the point): the same windows, placed
/// where the point cannot be, so that none needs closing up: the first 2
/// digits, the 8 before the point, and the last 8 bytes, of which the top
/// `k` (the decimals) are kept and the rest (the point, and for `k = 6` a
/// digit the middle window has read) are cleared to zeros.
#[inline(always)]
fn epoch(d: &[u8]) -> Option<(u64, usize)> {
    let len = d.len();
    let k = len - 11;
    let hi = u64::from(le16(&d[..2]) ^ 0x3030);
    let mid = le64(&d[2..10]) ^ ASCII_ZEROS;
    let lo = (le64(&d[len - 8..]) ^ ASCII_ZEROS) & (u64::MAX << (8 * (8 - k)));
    if non_digits(hi) | non_digits(mid) | non_digits(lo) != 0 {
        return None;
    }
    // The value of 10 + k <= 18 digits: below 10^18.
    let int = ((hi * 10 + (hi >> 8)) & 0xff) * 100_000_000 + eight_digits(mid);
    Some((int * POW10_INT[k] + eight_digits(lo), k))
}

/// The rest of [`decimal`], on its windows of digit values (`w0` the last 8
/// bytes, `w1` the 8 before, `w2` up to 4 before those, zeros before the
/// start of the text), `len` the length of the text.
#[inline(always)]
fn windows<const FRAC: bool>(w0: u64, w1: u64, w2: u32, len: usize) -> Option<(u64, usize)> {
    let (n0, n1, n2) = (non_digits(w0), non_digits(w1), non_digits(u64::from(w2)));
    // Places: the last 8 digits are units, the 8 before them 10^8, the rest
    // 10^16; with the point in a window, the windows before it count one
    // digit less. Each sum is the value of at most 19 digits, below 10^19.
    const E7: u64 = 10_000_000;
    const E8: u64 = 100_000_000;
    const E15: u64 = 1_000_000_000_000_000;
    const E16: u64 = 10_000_000_000_000_000;
    if n0 | n1 | n2 == 0 {
        // An integer; `w2` then holds at most 3 digits.
        if len > 19 {
            return None;
        }
        let m = eight_digits(w0) + eight_digits(w1) * E8 + u64::from(four_digits(w2)) * E16;
        return Some((m, if FRAC { len } else { 0 }));
    }
    if FRAC {
        return None; // a second point
    }
    // One window holds the mark; `k` counts the bytes after it, the
    // windows after its own holding 8 each.
    if n1 | n2 == 0 {
        let (w0, after) = drop_point(w0, n0)?;
        let m = eight_digits(w0) + eight_digits(w1) * E7 + u64::from(four_digits(w2)) * E15;
        Some((m, after))
    } else if n0 | n2 == 0 {
        let (w1, after) = drop_point(w1, n1)?;
        let m = eight_digits(w0) + eight_digits(w1) * E8 + u64::from(four_digits(w2)) * E15;
        Some((m, 8 + after))
    } else if n0 | n1 == 0 {
        // The point among the first 4 bytes of 17 to 20 (the low half of
        // the u64, which it does not leave; 4 fewer bytes after the point).
        let (w2, after) = drop_point(u64::from(w2), n2)?;
        let m = eight_digits(w0) + eight_digits(w1) * E8 + u64::from(four_digits(w2 as u32)) * E16;
        Some((m, 12 + after))
    } else {
        None
    }
}

/// The 8 bytes of `b` (exactly 8 long) as a little-endian `u64`.
#[inline(always)]
fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or_default())
}

/// The 2 bytes of `b` (exactly 2 long) as a little-endian `u16`.
#[inline(always)]
fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes(b.try_into().unwrap_or_default())
}

/// The 4 bytes of `b` (exactly 4 long) as a little-endian `u32`.
#[inline(always)]
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap_or_default())
}

/// `0x80` in every byte of `w` (digit values, [`ASCII_ZEROS`] XORed away)
/// above 9, that is every byte that was not a digit; `0` in the digits.
///
/// A byte `x <= 0x7f` gets its top bit from `x + 0x76`, which is
/// `>= 0x80` exactly when `x >= 10` and never carries; a byte `x >= 0x80`
/// has the bit itself. A carry into the next byte comes from `x >= 0x8a`
/// only: that byte is marked and is not the point, so the text is refused
/// whatever the carry marks besides, and no mark is ever lost (a carry adds
/// 1 to a byte of `x + 0x76 <= 0xf5` or to a marked one).
#[inline(always)]
fn non_digits(w: u64) -> u64 {
    (w | w.wrapping_add(0x7676_7676_7676_7676)) & 0x8080_8080_8080_8080
}

/// `w` without its one marked byte (`mark` from [`non_digits`], not 0),
/// when that byte is the point, and the number of bytes after it: the
/// bytes before it (the lower ones) move up by one, and a leading zero
/// comes in at the bottom. `None` when more than one byte is marked or the
/// marked one is not the point.
#[inline(always)]
fn drop_point(w: u64, mark: u64) -> Option<(u64, usize)> {
    if mark & (mark - 1) != 0 {
        return None;
    }
    let at = mark.trailing_zeros() - 7; // 8 × the marked byte's place
    if (w >> at) as u8 != b'.' ^ b'0' {
        return None;
    }
    let below = (1 << at) - 1;
    Some((((w & below) << 8) | (w & !below << 8), 7 - at as usize / 8))
}

/// The value of 8 digit values, the first (most significant) in the low
/// byte, as `u64::from_le_bytes` reads a text: three multiplications,
/// each joining neighbouring groups (pairs, then fours, then the eight).
/// Exact: a pair is at most 99 in its byte, a four at most 9999 in its 16
/// bits, the eight at most 99_999_999 in 32 bits, so no lane carries into
/// the next one; what the wrapping multiplications lose lies above the lanes
/// kept.
#[inline(always)]
fn eight_digits(w: u64) -> u64 {
    let w = (w.wrapping_mul(10 << 8 | 1) >> 8) & 0x00ff_00ff_00ff_00ff;
    let w = (w.wrapping_mul(100 << 16 | 1) >> 16) & 0x0000_ffff_0000_ffff;
    w.wrapping_mul(10_000 << 32 | 1) >> 32
}

/// [`eight_digits`] for 4 digit values in a `u32`.
#[inline(always)]
fn four_digits(w: u32) -> u32 {
    let w = (w.wrapping_mul(10 << 8 | 1) >> 8) & 0x00ff_00ff;
    w.wrapping_mul(100 << 16 | 1) >> 16
}

/// `m / 10^k` correctly rounded, for `m > 2^53` and `1 <= k <= 19` (the
/// 17-digit `ts` of every line, `1787320800.3303745`), by one 64×64-bit
/// product with a truncated reciprocal of `10^k` (the method of Eisel and
/// Lemire, reduced to one table word). When those 64 bits cannot decide
/// the rounding (about one quotient in 500, and every exact double or tie:
/// those are binary fractions), [`dyadic_quotient`] answers for binary
/// fractions, and `None` is left for the rest (the caller then asks
/// [`nearest_quotient`]).
///
/// With `m' = m·2^c < 2^64` normalised (`c` its leading zeros) and
/// `t = RECIP_POW10[k].0 = floor(2^(63+b) / 10^k)`, the exact
/// `X = m'·2^(63+b) / 10^k` is `P + m'·δ` where `P = m'·t` is the product
/// and `0 < δ < 1`, so `P < X < P + 2^64`; `P >= 2^126`. Let `H` be the
/// high word of `P` (`2^62 <= H < 2^64`, top bit `62 + u`). Rounded to 53
/// bits, `X` needs its bits from `64 + 10 + u` up, and one more for the
/// rounding; `X` differs from `H·2^64` by less than `2^65`, which changes
/// those bits only when the 9 bits of `H` below them are all ones (`H + 1`
/// a multiple of 512: refused). Otherwise they are `H >> (9 + u)`, and as
/// `X` is then not the exact midpoint of two doubles (that too would show
/// as nine ones), adding the rounding bit rounds to nearest.
/// `v = X·2^-(63+b+c)`, so the 53-bit mantissa `M` stands for
/// `M·2^(11+u-b-c)`: biased exponent `1086 + u - b - c`, one less
/// (`RECIP_POW10[k].1 + u - c`) added to `M` with its hidden bit (a
/// rounding up to `2^53` then carries into the exponent, as it should).
/// `2^-11 < v < 2^64`: always a normal double.
#[inline(always)]
fn product_quotient(m: u64, k: usize) -> Option<f64> {
    let (t, base) = RECIP_POW10[k];
    let c = m.leading_zeros();
    let h = ((u128::from(m << c) * u128::from(t)) >> 64) as u64;
    if h.wrapping_add(1) & 0x1ff == 0 {
        return dyadic_quotient(m, k);
    }
    let u = h >> 63;
    let mant = ((h >> (9 + u)) + 1) >> 1;
    let exp = base + u - u64::from(c);
    Some(f64::from_bits((exp << 52) + mant))
}

/// `m / 10^k` correctly rounded when it is a dyadic rational, that is when
/// `5^k` divides `m` (scores such as `0.9975433349609375`, exact doubles
/// that [`product_quotient`] cannot tell from their neighbours): then
/// `m / 10^k = (m / 5^k)·2^-k`, `(m / 5^k) as f64` rounds once (to
/// nearest, ties to even), and the product by `2^-k` is exact (no
/// underflow here). `None` when `5^k` does not divide `m`.
#[inline(always)]
fn dyadic_quotient(m: u64, k: usize) -> Option<f64> {
    let (inverse, bound) = INV_POW5[k];
    let q = m.wrapping_mul(inverse);
    (q <= bound).then(|| q as f64 * f64::from_bits((1023 - k as u64) << 52))
}

/// `m / 10^k` correctly rounded (to nearest, ties to even), for `m > 2^53`
/// and `1 <= k <= 19`, when [`product_quotient`] cannot tell and the
/// quotient is no binary fraction (so no tie either); `None` in the rare
/// cases the check below does not cover (the caller then uses
/// `str::parse`).
///
/// A candidate, then an exact check in integers (a bounded form of
/// Clinger's AlgorithmR). `m as f64 / 10^k` rounds twice, each time by a
/// relative `2^-53` at most, so it is within `2.000000000000001` ulps of the
/// exact quotient `v`: write it `c = M·2^-s` (`2^52 <= M < 2^53`). Then
/// `r = m·2^s - M·10^k = (v - c)·10^k·2^s` is an integer with
/// `|r| < 2.000000000000001·10^k <= 2^61` for `k <= 18`, so it is exact in
/// wrapping `u64` arithmetic read as `i64`, and `r / 10^k` is `v - c` in
/// ulps. `c` is the nearest double when `|r| < 10^k / 2`, a tie at `±10^k/2`
/// (`10^k` is even); otherwise at most two steps of one ulp (`r` moves by
/// `10^k`) reach it. Within the binade of `c` the neighbours are one ulp
/// away; below `M = 2^52` the next double is half an ulp away, so the
/// answer is left to `str::parse` when it would be there or in another
/// binade. `m > 2^53` and `k <= 19` give `v > 2^-11`, so `s <= 63`; `s < 0`
/// (`v >= 2^53`) and `k = 19` are left to `str::parse` too.
#[cold]
#[inline(never)]
fn nearest_quotient(m: u64, k: usize) -> Option<f64> {
    if !(1..=18).contains(&k) {
        return None;
    }
    let p10 = POW10_INT[k];
    let approx = m as f64 / POW10[k];
    let bits = approx.to_bits();
    let exp = bits >> 52; // positive: no sign bit
    let s = 1075u64.wrapping_sub(exp);
    if s > 63 {
        return None;
    }
    const FRACTION: u64 = (1 << 52) - 1;
    let mant = (bits & FRACTION) | (1 << 52);
    let mut r = (m << s).wrapping_sub(mant.wrapping_mul(p10)) as i64;
    let half = (p10 / 2) as i64;
    let mut best = bits;
    if r.unsigned_abs() >= half as u64 {
        // Towards `v` while past the midpoint (ties to even).
        let p = p10 as i64;
        while r > half || (r == half && best & 1 == 1) {
            best += 1;
            r -= p;
        }
        while r < -half || (r == -half && best & 1 == 1) {
            best -= 1;
            r += p;
        }
    }
    if best >> 52 != exp || (best & FRACTION == 0 && r < 0) {
        return None;
    }
    Some(f64::from_bits(best))
}

/// A JSON string's body (`esc`: it holds a backslash escape) into the
/// arena, unescaped: as written when it has no escape (converted lossily,
/// if it is not UTF-8, when read from there).
pub(crate) fn push_json_str(a: &mut Arena, raw: &[u8], esc: bool) -> Span {
    if esc {
        a.push(unescape(raw, true).as_bytes())
    } else {
        a.push(raw)
    }
}

/// A string value into the arena ([`push_json_str`]).
pub(crate) fn str_span(v: Val<'_>, a: &mut Arena) -> Option<Span> {
    match v {
        Val::Str(raw, esc) => Some(push_json_str(a, raw, esc)),
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
        // Every length up to 20, the point at every place (or none), so every
        // split of the text across the 8-byte windows; digits all 9, all 0
        // but the first, and random.
        for len in 1..=20usize {
            for point in 0..=len {
                for fill in 0..6 {
                    let mut t: Vec<u8> = (0..len)
                        .map(|i| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            match fill {
                                0 => b'9',
                                1 if i == 0 => b'1',
                                1 => b'0',
                                _ => b'0' + (x % 10) as u8,
                            }
                        })
                        .collect();
                    if point < len {
                        t[point] = b'.';
                    }
                    if len == 1 && point == 0 {
                        continue; // a lone point: not a number
                    }
                    cases.push(String::from_utf8(t).unwrap());
                }
            }
        }
        // Around 2^53 (the end of the fast path), with the point anywhere.
        for m in (1u64 << 53) - 3..=(1 << 53) + 3 {
            let t = m.to_string();
            for point in 0..=t.len() {
                let mut t = t.clone();
                t.insert(point, '.');
                cases.push(t);
            }
        }
        // Exact ties, which 19 digits can write only for ulps 2^-2 to 1 (in
        // [2^50, 2^55)): (2M + 1)·2^(e-1), and the numbers a last digit away.
        for i in 0..3_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mant = (1u64 << 52) | (x >> 12);
            let e = i % 3; // ulp 2^-e
            let num = u128::from(2 * mant + 1) * 5u128.pow(e as u32 + 1);
            let digits = num.to_string();
            let (int, frac) = digits.split_at(digits.len() - (e as usize + 1));
            cases.push(format!("{int}.{frac}"));
            let below = (num - 1).to_string();
            let above = (num + 1).to_string();
            for d in [below, above] {
                let (int, frac) = d.split_at(d.len() - (e as usize + 1));
                cases.push(format!("{int}.{frac}"));
            }
        }
        // `ts`-shaped numbers near the midpoints of doubles in [2^30, 2^31)
        // (ulp 2^-22): the midpoint's 23 decimals cut to 1 to 9, and a last
        // digit more.
        for _ in 0..3_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // midpoint = n / 2^23 = n·5^23 / 10^23, n odd.
            let n = u128::from((1u64 << 53) | (x >> 11)) | 1;
            let exact = n * 5u128.pow(23);
            let int = exact / 10u128.pow(23);
            let frac = format!("{:023}", exact % 10u128.pow(23));
            for d in 1..=9 {
                let cut: u128 = frac[..d].parse().unwrap();
                cases.push(format!("{int}.{:0d$}", cut));
                if cut + 1 < 10u128.pow(d as u32) {
                    cases.push(format!("{int}.{:0d$}", cut + 1));
                }
            }
        }
        // Powers of two and just below them (the mantissa-0 edge), and
        // 17 to 19 digits at 2^53 and above (quotients >= 2^53).
        for j in 40..=62 {
            let p = 1u64 << j;
            for (int, frac) in [
                (p, "0"),
                (p - 1, "9"),
                (p - 1, "99"),
                (p - 1, "999"),
                (p, "001"),
            ] {
                let t = format!("{int}.{frac}");
                if t.len() <= 20 {
                    cases.push(t);
                }
            }
        }
        // `0.` and 0 to 19 digits (the scores' shape from 17 bytes on):
        // random, all 9, leading zeros.
        for n in 0..=19u32 {
            for fill in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let digits = match fill {
                    0 => "9".repeat(n as usize),
                    1 => format!("{:0w$}", x % 10u64.pow(n.min(9)), w = n as usize),
                    _ => format!("{:0w$}", x % 10u64.pow(n), w = n as usize),
                };
                cases.push(format!("0.{digits}"));
            }
        }
        // Exact binary fractions as zap writes them: f32 scores widened to
        // f64 (shortest round trip), and n/2^j written out in full.
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let score = f32::from_bits(0x3f00_0000 | (x as u32 & 0x7f_ffff));
            cases.push(format!("{}", f64::from(score)));
            cases.push(format!("{}", f64::from(score) / 2.0));
            let j = 1 + (x >> 32) % 40;
            let n = ((x >> 8) >> (x % 64)) | 1;
            // n/2^j = n·5^j / 10^j, when it fits 19 digits.
            if let Some(num) = u128::from(n).checked_mul(5u128.pow(j as u32)) {
                let t = format!("{num:0w$}", w = j as usize + 1);
                let (int, frac) = t.split_at(t.len() - j as usize);
                if int.len() + frac.len() <= 20 {
                    cases.push(format!("{int}.{frac}"));
                }
            }
        }
        // The `ts` shape at its edges: leading zeros, all nines, 6 to 8
        // decimals ending in zeros.
        for t in [
            "0000000000.0000001",
            "0000000000.000000",
            "9999999999.999999",
            "9999999999.9999999",
            "9999999999.99999999",
            "1787320800.000000",
            "1787320800.3300000",
            "1787320800.33000000",
            "0123456789.0123456",
        ] {
            cases.push(t.to_string());
        }
        // Each method on its own, where it answers: the same bits.
        let mut answered = [0usize; 3];
        for c in &cases {
            let digits: String = c.chars().filter(char::is_ascii_digit).collect();
            let (Some(point), Ok(m)) = (c.find('.'), digits.parse::<u64>()) else {
                continue;
            };
            let k = c.len() - point - 1;
            if digits.len() > 19 || m <= 1 << 53 || k == 0 || c.contains(['e', 'E', '-']) {
                continue;
            }
            let want = c.parse::<f64>().unwrap().to_bits();
            let methods = [
                product_quotient(m, k),
                dyadic_quotient(m, k),
                nearest_quotient(m, k),
            ];
            for (i, got) in methods.into_iter().enumerate() {
                if let Some(got) = got {
                    assert_eq!(got.to_bits(), want, "method {i}: {c}");
                    answered[i] += 1;
                }
            }
        }
        assert!(answered.iter().all(|&n| n > 1_000), "{answered:?}");
        for c in cases {
            let want: f64 = c.parse().unwrap();
            let got = parse_f64(c.as_bytes()).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{c}");
            if !c.starts_with('-') {
                let neg = format!("-{c}");
                let got = parse_f64(neg.as_bytes()).unwrap();
                assert_eq!(got.to_bits(), (-want).to_bits(), "{neg}");
            }
        }
    }

    /// What `str::parse` gives for any bytes (`None` where it refuses).
    fn std_f64(b: &[u8]) -> Option<u64> {
        let x: f64 = std::str::from_utf8(b).ok()?.parse().ok()?;
        Some(x.to_bits())
    }

    /// Texts that are not plain decimals, or not numbers at all, get what
    /// `str::parse` gives too: `None` or the same number.
    #[test]
    fn parse_f64_refuses_what_std_refuses() {
        let fixed: [&[u8]; 40] = [
            b"",
            b"-",
            b".",
            b"-.",
            b"..",
            b".5",
            b"-.5",
            b"5.",
            b"+1",
            b"+.5",
            b"--1",
            b"-+1",
            b"1e5",
            b"1E5",
            b"1.5e-3",
            b"1.2.3",
            b"1..2",
            b" 1",
            b"1 ",
            b"0x10",
            b"1_000",
            b"inf",
            b"-inf",
            b"NaN",
            b"infinity",
            b"1.5x",
            b"12345678x",
            b"1787320800.3303745 ",
            b"1787320800.3303745.",
            b"1787320800:3303745",
            b"1787320800.330374\xff",
            b"\xff",
            b"1\x8a2",
            b"\x8a\x8a\x8a\x8a\x8a\x8a\x8a\x8a1",
            b"99999999999999999999",
            b"99999999999999999999.",
            b"12345678901234567890.5",
            b"0.12345678901234567890",
            b"123456789012345678901",
            "١٢".as_bytes(),
        ];
        for b in fixed {
            assert_eq!(
                parse_f64(b).map(f64::to_bits),
                std_f64(b),
                "{}",
                String::from_utf8_lossy(b)
            );
        }
        // Each byte of `ts`-shaped and shorter numbers replaced by bytes
        // that are not digits (a carry from 0x8a and up, the neighbours of
        // '0' and '9', a second point), at every place.
        let bad = [
            b'.', b'-', b'+', b'e', b' ', b'/', b':', 0, 0x7f, 0x80, 0x89, 0x8a, 0xbe, 0xff,
        ];
        for base in [
            &b"1787320800.3303745"[..],
            b"1787320800.330374512",
            b"0.996795654296875",
            b"13440",
            b"1234567.8",
            b"12345678901234567",
        ] {
            for i in 0..base.len() {
                for &c in &bad {
                    let mut t = base.to_vec();
                    t[i] = c;
                    assert_eq!(
                        parse_f64(&t).map(f64::to_bits),
                        std_f64(&t),
                        "{}",
                        String::from_utf8_lossy(&t)
                    );
                }
            }
        }
        // Every text of 1 or 2 bytes, and of 3 over a smaller alphabet.
        let mut short: Vec<Vec<u8>> = Vec::new();
        for a in 0..=255u8 {
            short.push(vec![a]);
            for b in 0..=255u8 {
                short.push(vec![a, b]);
            }
        }
        let few = b"0159.-+eE:/ \x00\x8a\xff";
        for &a in few {
            for &b in few {
                for &c in few {
                    short.push(vec![a, b, c]);
                }
            }
        }
        for t in short {
            assert_eq!(
                parse_f64(&t).map(f64::to_bits),
                std_f64(&t),
                "{}",
                String::from_utf8_lossy(&t)
            );
        }
        // Random texts over digits, points, signs and a few other bytes.
        let alphabet = b"0123456789012345678901234567890123456789..-+eE x\x8a\xff";
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 23) as usize;
            let mut y = x;
            let t: Vec<u8> = (0..len)
                .map(|_| {
                    y ^= y << 13;
                    y ^= y >> 7;
                    y ^= y << 17;
                    alphabet[(y % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(
                parse_f64(&t).map(f64::to_bits),
                std_f64(&t),
                "{}",
                String::from_utf8_lossy(&t)
            );
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
