//! Byte searches of the JSON readers: the first quote or backslash, the
//! quotes and backslashes of 64 bytes as bit masks, a run of digits, and
//! the UTF-8 check of a value. Every `unsafe` block of the crate is here,
//! each with its reason beside it; each search has a portable twin for
//! other targets, which the `portable-search` feature forces on x86-64 too
//! (so that CI compiles and tests it there).

/// `b` as a string if it is valid UTF-8. The values of zap lines are
/// short and ASCII, and `std::str::from_utf8` costs about five instructions
/// a byte on them; an ASCII check a word at a time is several times cheaper.
#[inline]
pub(crate) fn utf8(b: &[u8]) -> Option<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        #[allow(unsafe_code)]
        return Some(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).ok()
}

/// The first `"` or `\\` at or after `from`. Most strings of a zap line
/// (keys, ids, model and plugin names) end within 64 bytes, so those are
/// searched inline, 16 bytes at a time with SSE2 on x86-64 (8 at a time
/// elsewhere); longer ones go on with `memchr2`.
#[inline(always)]
pub(crate) fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    let inline_end = b.len().min(from.saturating_add(64));
    #[cfg(all(target_arch = "x86_64", not(feature = "portable-search")))]
    // SAFETY: `inline_search` only needs SSE2, which is part of the x86-64
    // baseline: every x86-64 CPU has it (the compiler assumes it already).
    #[allow(unsafe_code)]
    let (j, found) = unsafe { inline_search(b, from, inline_end) };
    #[cfg(any(not(target_arch = "x86_64"), feature = "portable-search"))]
    let (j, found) = inline_search(b, from, inline_end);
    if found.is_some() {
        return found;
    }
    if j >= b.len() {
        return None;
    }
    if inline_end == b.len() {
        return b[j..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\')
            .map(|o| j + o);
    }
    memchr::memchr2(b'"', b'\\', &b[j..]).map(|o| j + o)
}

/// Searches `b[from..end]` in whole 16-byte steps: the match, or where the
/// steps stopped (fewer than 16 bytes before `end`).
#[cfg(all(target_arch = "x86_64", not(feature = "portable-search")))]
#[target_feature(enable = "sse2")]
#[inline]
fn inline_search(b: &[u8], from: usize, end: usize) -> (usize, Option<usize>) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x, _mm_set1_epi8,
    };
    // Safe to call here: this function enables SSE2.
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let mut j = from;
    while j + 16 <= end {
        let Some(w) = b.get(j..j + 16).and_then(|c| <[u8; 16]>::try_from(c).ok()) else {
            break;
        };
        let w = u128::from_le_bytes(w);
        let v = _mm_set_epi64x((w >> 64) as u64 as i64, w as u64 as i64);
        let m = _mm_movemask_epi8(_mm_or_si128(
            _mm_cmpeq_epi8(v, quote),
            _mm_cmpeq_epi8(v, backslash),
        )) as u32;
        if m != 0 {
            return (j, Some(j + m.trailing_zeros() as usize));
        }
        j += 16;
    }
    (j, None)
}

/// Searches `b[from..end]` in whole 8-byte words (SWAR): the match, or
/// where the words stopped (fewer than 8 bytes before `end`).
#[cfg(any(not(target_arch = "x86_64"), feature = "portable-search"))]
#[inline(always)]
fn inline_search(b: &[u8], from: usize, end: usize) -> (usize, Option<usize>) {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const QUOTE: u64 = LO * b'"' as u64;
    const BACKSLASH: u64 = LO * b'\\' as u64;
    let mut j = from;
    while j + 8 <= end {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[j..j + 8]);
        let w = u64::from_le_bytes(w);
        let q = w ^ QUOTE;
        let s = w ^ BACKSLASH;
        // A zero byte of q or s is a match; the lowest flagged byte is
        // always a true match (borrows only propagate upwards).
        let m = (q.wrapping_sub(LO) & !q | s.wrapping_sub(LO) & !s) & HI;
        if m != 0 {
            return (j, Some(j + (m.trailing_zeros() / 8) as usize));
        }
        j += 8;
    }
    (j, None)
}

/// The first `x` or `y` in `b`, for short texts (a line's capture prefix,
/// its kubelet timestamp): 16 bytes a step with SSE2 on x86-64, the rest
/// (and every byte elsewhere) one at a time. On a few dozen bytes this is
/// cheaper than `memchr2`, whose call and set-up cost more than the search.
#[inline(always)]
pub(crate) fn find2_short(b: &[u8], x: u8, y: u8) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", not(feature = "portable-search")))]
    // SAFETY: as for `inline_search`: SSE2 is part of the x86-64 baseline.
    #[allow(unsafe_code)]
    let (j, found) = unsafe { find2_sse2(b, x, y) };
    #[cfg(any(not(target_arch = "x86_64"), feature = "portable-search"))]
    let (j, found) = (0, None);
    if found.is_some() {
        return found;
    }
    b.get(j..)?
        .iter()
        .position(|&c| c == x || c == y)
        .map(|o| j + o)
}

/// [`find2_short`] in whole 16-byte steps: the match, or where the steps
/// stopped (fewer than 16 bytes before the end).
#[cfg(all(target_arch = "x86_64", not(feature = "portable-search")))]
#[target_feature(enable = "sse2")]
#[inline]
fn find2_sse2(b: &[u8], x: u8, y: u8) -> (usize, Option<usize>) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x, _mm_set1_epi8,
    };
    let vx = _mm_set1_epi8(x as i8);
    let vy = _mm_set1_epi8(y as i8);
    let mut j = 0;
    while let Some(w) = b.get(j..j + 16).and_then(|c| <[u8; 16]>::try_from(c).ok()) {
        let w = u128::from_le_bytes(w);
        let v = _mm_set_epi64x((w >> 64) as u64 as i64, w as u64 as i64);
        let m =
            _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, vx), _mm_cmpeq_epi8(v, vy))) as u32;
        if m != 0 {
            return (j, Some(j + m.trailing_zeros() as usize));
        }
        j += 16;
    }
    (j, None)
}

/// The 8 bytes at `b[i..i + 8]` as a little-endian word, if there are 8.
#[inline(always)]
fn word8(b: &[u8], i: usize) -> Option<u64> {
    let w: [u8; 8] = b.get(i..i.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

/// The number of ASCII digits at the start of `b[from..]`, 8 bytes a step.
/// A byte is a digit when its high nibble is 3 and its low nibble plus 6
/// does not reach 16; both tests stay within the byte (no carry crosses
/// into the next one), so the mask is exact.
#[inline(always)]
pub(crate) fn digit_run(b: &[u8], from: usize) -> usize {
    const HI: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const LO: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    let mut i = from;
    while let Some(w) = word8(b, i) {
        let t = w ^ 0x3030_3030_3030_3030;
        let not_digit = (t & HI) | (((t & LO) + 0x0606_0606_0606_0606) & 0x1010_1010_1010_1010);
        if not_digit != 0 {
            return i - from + (not_digit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i - from
}

/// The quote and backslash bit masks of 64 bytes (bit `i` for byte `i`).
#[inline(always)]
pub(super) fn chunk_masks(w: &[u8; 64]) -> (u64, u64) {
    #[cfg(all(target_arch = "x86_64", not(feature = "portable-search")))]
    // SAFETY: as for `inline_search`: SSE2 is part of the x86-64 baseline.
    #[allow(unsafe_code)]
    let m = unsafe { chunk_masks_sse2(w) };
    #[cfg(any(not(target_arch = "x86_64"), feature = "portable-search"))]
    let m = {
        let (mut q, mut s) = (0u64, 0u64);
        for (i, &c) in w.iter().enumerate() {
            q |= u64::from(c == b'"') << i;
            s |= u64::from(c == b'\\') << i;
        }
        (q, s)
    };
    m
}

#[cfg(all(target_arch = "x86_64", not(feature = "portable-search")))]
#[target_feature(enable = "sse2")]
#[inline]
fn chunk_masks_sse2(w: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set_epi64x, _mm_set1_epi8};
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let (mut q, mut s) = (0u64, 0u64);
    for (i, part) in w.chunks_exact(16).enumerate() {
        let mut x = [0u8; 16];
        x.copy_from_slice(part);
        let x = u128::from_le_bytes(x);
        let v = _mm_set_epi64x((x >> 64) as u64 as i64, x as u64 as i64);
        q |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) as u16) << (16 * i);
        s |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash)) as u16) << (16 * i);
    }
    (q, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The masks of 64 bytes are those of a byte-by-byte comparison,
    /// whichever twin is compiled.
    #[test]
    fn chunk_masks_match_a_byte_loop() {
        let mut w = [0u8; 64];
        for round in 0..512u32 {
            for (i, b) in w.iter_mut().enumerate() {
                let x = (i as u32)
                    .wrapping_mul(2_654_435_761)
                    .wrapping_add(round * 97)
                    >> 7;
                *b = match x % 11 {
                    0 => b'"',
                    1 => b'\\',
                    2 => 0x80 | (x as u8),
                    _ => b'a' + (x % 26) as u8,
                };
            }
            let (mut q, mut s) = (0u64, 0u64);
            for (i, &c) in w.iter().enumerate() {
                q |= u64::from(c == b'"') << i;
                s |= u64::from(c == b'\\') << i;
            }
            assert_eq!(chunk_masks(&w), (q, s), "round {round}");
        }
    }

    /// The digit run is the count of leading ASCII digits, at every
    /// offset and length.
    #[test]
    fn digit_run_counts_leading_digits() {
        let text = b"1234567890123456789x0/9:a12345678901234567 89";
        for from in 0..text.len() {
            for end in from..=text.len() {
                let b = &text[..end];
                let want = b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
                assert_eq!(digit_run(b, from), want, "{from} {end}");
            }
        }
    }

    /// The short search finds what `memchr2` finds, at every offset and
    /// length, for two bytes and for one given twice.
    #[test]
    fn short_search_matches_memchr() {
        let text: Vec<u8> = (0..120u32)
            .map(|i| match i % 23 {
                0 => b']',
                7 if i % 2 == 0 => b'/',
                n => b'a' + (n % 26) as u8 + if i % 5 == 0 { 0x80 } else { 0 },
            })
            .collect();
        for from in 0..text.len() {
            for end in from..=text.len() {
                let b = &text[from..end];
                assert_eq!(find2_short(b, b'/', b']'), memchr::memchr2(b'/', b']', b));
                assert_eq!(find2_short(b, b']', b']'), memchr::memchr(b']', b));
                assert_eq!(find2_short(b, b' ', b'\t'), None);
            }
        }
    }

    #[test]
    fn quote_search_matches_memchr() {
        // Matches every 37 bytes (found inline), and every 151 (found past
        // the inline 64 bytes, or not at all before the end).
        for period in [37u32, 151] {
            let mut text = Vec::new();
            for i in 0..400u32 {
                text.push(match i % period {
                    0 => b'"',
                    5 => b'\\',
                    n => b'a' + (n % 26) as u8 + if i % 3 == 0 { 0x80 } else { 0 },
                });
            }
            for from in 0..text.len() {
                for end in from..text.len().min(from + 200) {
                    let b = &text[..end];
                    let want = memchr::memchr2(b'"', b'\\', &b[from..]).map(|o| from + o);
                    assert_eq!(quote_or_backslash(b, from), want, "{period} {from} {end}");
                }
            }
        }
    }
}
