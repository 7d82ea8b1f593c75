//! JSON numbers as `f64`, correctly rounded: bit for bit what `str::parse`
//! gives, without its cost on the shapes zap writes.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
