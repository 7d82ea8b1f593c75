//! HdrHistogram's V2 serialization (uncompressed, cookie `0x1c849303`),
//! base64-encoded, for the histograms of a partial report.
//!
//! The layout is the one every HdrHistogram implementation reads: a 40-byte
//! big-endian header (cookie, payload length, normalizing index offset,
//! significant digits, lowest discernible value, highest trackable value,
//! integer-to-double ratio) and the counts array, each count a ZigZag
//! LEB128 integer, a run of empty buckets written as its negated length.
//! Decoding restores every bucket's count, so merging two decoded
//! histograms gives the histogram of all their values, bucket for bucket.

use hdrhistogram::Histogram;

const COOKIE: u32 = 0x1c84_9303;
const HEADER: usize = 40;
/// Sub-buckets of a histogram with 3 significant digits: 2048, half 1024.
const HALF_MAGNITUDE: u32 = 10;
const HALF: u64 = 1 << HALF_MAGNITUDE;
const MASK: u64 = (1 << (HALF_MAGNITUDE + 1)) - 1;
/// Decoded counts past this (2^53) are refused: no log holds that many
/// decisions, and sums of them stay exact.
const MAX_COUNT: i64 = 1 << 53;
/// Decoded counts past this index (a value of about 2^62) are refused.
const MAX_INDEX: u64 = 54 << HALF_MAGNITUDE;

/// The counts-array index of `value` (lowest discernible value 1, 3
/// significant digits).
fn index_of(value: u64) -> u64 {
    let bucket = u64::from(63 - (value | MASK).leading_zeros()) - u64::from(HALF_MAGNITUDE);
    let sub = value >> bucket;
    ((bucket + 1) << HALF_MAGNITUDE) + sub - HALF
}

/// The lowest value of the bucket at counts-array `index`.
fn value_of(index: u64) -> u64 {
    let mut bucket = (index >> HALF_MAGNITUDE) as i64 - 1;
    let mut sub = (index & (HALF - 1)) + HALF;
    if bucket < 0 {
        sub -= HALF;
        bucket = 0;
    }
    sub << bucket
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    put_leb128(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends `z` as LEB128: seven bits a byte, low bits first, the high bit
/// set on every byte but the last.
pub fn put_leb128(out: &mut Vec<u8>, mut z: u64) {
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Result<i64, String> {
    let mut z: u64 = 0;
    for shift in (0..64).step_by(7) {
        let Some(&b) = bytes.get(*pos) else {
            return Err("histogram payload cut in a count".into());
        };
        *pos += 1;
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    Err("histogram count longer than 9 bytes".into())
}

/// The V2 bytes of `h` (recorded with 3 significant digits, lowest
/// discernible value 1).
pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut payload = Vec::new();
    let mut next = 0u64;
    for v in h.iter_recorded() {
        let i = index_of(v.value_iterated_to());
        if i > next {
            put_varint(&mut payload, -((i - next) as i64));
        }
        put_varint(&mut payload, v.count_at_value() as i64);
        next = i + 1;
    }
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&COOKIE.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&u32::from(h.sigfig()).to_be_bytes());
    out.extend_from_slice(&1u64.to_be_bytes());
    out.extend_from_slice(&h.high().to_be_bytes());
    out.extend_from_slice(&1f64.to_bits().to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Adds the counts of the V2 bytes `b` to `into` (an auto-resizing
/// histogram with 3 significant digits).
pub fn decode_into(b: &[u8], into: &mut Histogram<u64>) -> Result<(), String> {
    if b.len() < HEADER {
        return Err(format!(
            "histogram of {} bytes, shorter than its header",
            b.len()
        ));
    }
    if be_u32(b, 0) != COOKIE {
        return Err(format!(
            "histogram cookie {:#010x} is not the V2 one (0x1c849303)",
            be_u32(b, 0)
        ));
    }
    let len = be_u32(b, 4) as usize;
    if b.len() != HEADER + len {
        return Err(format!(
            "histogram payload of {} bytes where the header says {len}",
            b.len() - HEADER
        ));
    }
    if be_u32(b, 8) != 0 || be_u32(b, 12) != 3 || be_u64(b, 16) != 1 {
        return Err("histogram not recorded with 3 significant digits from 1".into());
    }
    let payload = &b[HEADER..];
    let (mut pos, mut index) = (0usize, 0u64);
    while pos < payload.len() {
        let c = get_varint(payload, &mut pos)?;
        if c < 0 {
            index = index.saturating_add(c.unsigned_abs());
            continue;
        }
        if index > MAX_INDEX {
            return Err("histogram bucket out of range".into());
        }
        if c > MAX_COUNT {
            return Err(format!("histogram count {c} past 2^53"));
        }
        if c > 0 {
            into.record_n(value_of(index), c as u64)
                .map_err(|e| format!("histogram count not recordable: {e:?}"))?;
        }
        index += 1;
    }
    Ok(())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                s.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Decodes standard base64 (padding optional).
pub fn unbase64(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for ch in s.bytes() {
        let v = match ch {
            b'A'..=b'Z' => ch - b'A',
            b'a'..=b'z' => ch - b'a' + 26,
            b'0'..=b'9' => ch - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("{:?} is not a base64 character", ch as char)),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_value_round_trip_the_crate_buckets() {
        let h = Histogram::<u64>::new(3).unwrap();
        for v in [
            0u64,
            1,
            2047,
            2048,
            2049,
            4095,
            4096,
            123_456,
            987_654_321,
            1 << 40,
        ] {
            let i = index_of(v);
            assert!(
                h.equivalent(value_of(i), v),
                "{v} -> {i} -> {}",
                value_of(i)
            );
        }
    }

    #[test]
    fn encode_decode_keeps_every_bucket() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [0u64, 5, 5, 2500, 77_777, 77_778, 10_000_000_000] {
            h.record(v).unwrap();
        }
        let b = encode(&h);
        assert_eq!(&b[..4], &[0x1c, 0x84, 0x93, 0x03]);
        let mut back = Histogram::<u64>::new(3).unwrap();
        decode_into(&unbase64(&base64(&b)).unwrap(), &mut back).unwrap();
        assert_eq!(back, h);
        let mut cut = b.clone();
        cut.pop();
        assert!(decode_into(&cut, &mut back).is_err());
    }

    #[test]
    fn base64_round_trips() {
        for n in 0..8 {
            let b: Vec<u8> = (0..n).map(|i| (i * 37 + 200) as u8).collect();
            assert_eq!(unbase64(&base64(&b)).unwrap(), b);
        }
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert!(unbase64("a$").is_err());
    }
}
