//! Capture framing: the kubectl `--prefix` and kubelet `--timestamps` prefixes.

use crate::json::find2_short;
use crate::time::parse_rfc3339;

/// A line with its capture prefixes taken off.
pub(crate) struct Framed<'a> {
    /// `NAME` of `[pod/NAME/CONTAINER] `.
    pub pod: Option<&'a [u8]>,
    /// The kubelet RFC3339Nano timestamp, as written (parsed on demand:
    /// most lines are ignored and never need it).
    pub kubelet_raw: Option<&'a [u8]>,
    /// The rest of the line.
    pub body: &'a [u8],
}

/// Longest `[pod/NAME/CONTAINER] ` prefix accepted (pod names are at most
/// 253 bytes, container names 63).
const MAX_PREFIX: usize = 330;

/// Takes off an optional `[pod/NAME/CONTAINER] ` prefix, then an optional
/// RFC3339(Nano) timestamp followed by a space. `Err` for a `[pod/` prefix
/// that does not close.
pub(crate) fn frame(line: &[u8]) -> Result<Framed<'_>, ()> {
    let mut body = line;
    let mut pod = None;
    if body.starts_with(b"[pod/") {
        let (name, rest) = match pod_prefix(body) {
            Some(p) => p,
            None => pod_prefix_general(body)?,
        };
        pod = Some(name);
        body = rest;
    }
    let mut kubelet_raw = None;
    if body.len() >= 20 && looks_like_time(body) {
        let lim = body.len().min(40);
        // The time's first 19 bytes are digits and separators.
        match find2_short(&body[19..lim], b' ', b'\t').map(|i| 19 + i) {
            Some(sp) if body[sp] == b' ' => {
                kubelet_raw = Some(&body[..sp]);
                body = &body[sp + 1..];
            }
            // A kubelet timestamp alone: an empty log line.
            None if body.len() <= 40 => {
                kubelet_raw = Some(body);
                body = &[];
            }
            _ => {}
        }
    }
    Ok(Framed {
        pod,
        kubelet_raw,
        body,
    })
}

/// The usual `[pod/NAME/CONTAINER] ` prefix of `line` (which starts with
/// `[pod/`), read with two short searches ([`find2_short`]): the pod's name and the rest of
/// the line, as [`pod_prefix_general`] gives them. `None` when the name
/// holds a `]` before its first `/`, or no `] ` closes the prefix: the
/// general reading decides.
#[inline]
fn pod_prefix(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let lim = line.len().min(MAX_PREFIX);
    // The first `/` or `]` after `[pod/`: the end of the name when it is
    // a `/` (no `]` before it, so no close either).
    let slash = 5 + find2_short(line.get(5..lim)?, b'/', b']')?;
    if line[slash] != b'/' || slash == 5 {
        return None;
    }
    // The first `]` followed by a space closes the prefix.
    let mut at = slash + 1;
    loop {
        let close = at + find2_short(line.get(at..lim)?, b']', b']')?;
        if line.get(close + 1) == Some(&b' ') {
            return Some((&line[5..slash], &line[close + 2..]));
        }
        at = close + 1;
    }
}

/// The `[pod/...] ` prefix of `line` (which starts with `[pod/`), any
/// shape: the pod's name (up to its first `/`, or the whole inside of the
/// brackets) and the rest of the line. `Err` for a prefix that does not
/// close, or an empty name.
fn pod_prefix_general(line: &[u8]) -> Result<(&[u8], &[u8]), ()> {
    let lim = line.len().min(MAX_PREFIX);
    let close = memchr::memchr_iter(b']', &line[..lim]).find(|&i| line.get(i + 1) == Some(&b' '));
    let Some(close) = close else {
        // `[pod/x/y]` alone on a line (an empty log line) is fine.
        if line.ends_with(b"]") && line.len() <= MAX_PREFIX {
            let inner = &line[5..line.len() - 1];
            let name = inner.split(|&c| c == b'/').next().unwrap_or(inner);
            return Ok((name, &[]));
        }
        return Err(());
    };
    let inner = &line[5..close];
    let name = inner.split(|&c| c == b'/').next().unwrap_or(inner);
    if name.is_empty() {
        return Err(());
    }
    Ok((name, &line[close + 2..]))
}

/// `YYYY-MM-DDTHH:MM:SS` at the start (a cheap check; the full parse is
/// [`Framed::kubelet_ts`]): its 19 bytes checked a word at a time.
fn looks_like_time(b: &[u8]) -> bool {
    // Each 8-byte part: the shape's bytes (`0` where a digit goes), and
    // which of them are digits.
    const SHAPE: [u64; 3] = [
        u64::from_le_bytes(*b"0000-00-"),
        u64::from_le_bytes(*b"00T00:00"),
        u64::from_le_bytes(*b":00\0\0\0\0\0"),
    ];
    const DIGITS: [u64; 3] = [
        0x00FF_FF00_FFFF_FFFF,
        0xFFFF_00FF_FF00_FFFF,
        0x0000_0000_00FF_FF00,
    ];
    const LO: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    // Most lines are not framed: they fail here, on one byte.
    let Some(h) = b.first_chunk::<19>().filter(|h| h[4] == b'-') else {
        return false;
    };
    let mut w = [0u8; 24];
    w[..19].copy_from_slice(h);
    let mut bad = 0;
    for (i, part) in w.chunks_exact(8).enumerate() {
        let mut x = [0u8; 8];
        x.copy_from_slice(part);
        // A digit's byte of `t` is 0..=9: its high nibble is 0 and its low
        // nibble plus 6 stays below 16 (no carry leaves the byte); every
        // other byte of `t` is 0 where the shape matches.
        let t = u64::from_le_bytes(x) ^ SHAPE[i];
        let digit_bad = (t & !LO) | (((t & LO) + 0x0606_0606_0606_0606) & 0x1010_1010_1010_1010);
        bad |= (t & !DIGITS[i]) | (digit_bad & DIGITS[i]);
    }
    bad == 0
}

impl Framed<'_> {
    /// The kubelet timestamp, epoch seconds.
    pub(crate) fn kubelet_ts(&self) -> Option<f64> {
        self.kubelet_raw.and_then(parse_rfc3339)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let f = frame(b"[pod/ob-epp-7c9d8-xk2lp/epp] 2026-08-21T14:36:14.123456789Z {\"a\":1}")
            .unwrap();
        assert_eq!(f.pod, Some(&b"ob-epp-7c9d8-xk2lp"[..]));
        assert!((f.kubelet_ts().unwrap() - 1_787_322_974.123_456_7).abs() < 1e-5);
        assert_eq!(f.body, b"{\"a\":1}");
        let f = frame(b"2026-08-21T14:36:14.123456789Z {\"a\":1}").unwrap();
        assert!(f.pod.is_none() && f.kubelet_ts().is_some());
        let f = frame(b"2026-02-10T08:15:02Z\tDEBUG\tx").unwrap();
        assert!(f.kubelet_raw.is_none());
        assert!(f.kubelet_ts().is_none());
        assert!(frame(b"[pod/unterminated").is_err());
        let f = frame(b"{\"a\":1}").unwrap();
        assert!(f.pod.is_none() && f.kubelet_ts().is_none());
    }

    /// The word-at-a-time time check is the byte-by-byte one.
    #[test]
    fn time_shape_check_is_the_byte_check() {
        fn bytewise(b: &[u8]) -> bool {
            const DIGITS: [usize; 14] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
            b.len() >= 19
                && b[4] == b'-'
                && b[7] == b'-'
                && b[10] == b'T'
                && b[13] == b':'
                && b[16] == b':'
                && DIGITS.iter().all(|&i| b[i].is_ascii_digit())
        }
        let good = *b"2026-08-21T14:36:14.123456789Z x";
        assert!(looks_like_time(&good));
        let probes = [
            b'0',
            b'9',
            b'/',
            b':',
            b'-',
            b'T',
            b't',
            b' ',
            0,
            0x30 + 10,
            0xb0,
            0xff,
            b'Z',
            b'.',
        ];
        for i in 0..good.len() {
            for &p in &probes {
                let mut x = good;
                x[i] = p;
                for n in 0..=x.len() {
                    let b = &x[..n];
                    assert_eq!(
                        looks_like_time(b),
                        bytewise(b),
                        "{}",
                        String::from_utf8_lossy(b)
                    );
                }
            }
        }
    }

    /// The usual prefix read by the two searches gives what the general
    /// reading gives, on prefixes of every shape near it, cut at every
    /// length.
    #[test]
    fn the_usual_prefix_reads_as_the_general_one() {
        let long = format!("[pod/{}/epp] x", "a".repeat(400));
        let lines: Vec<&[u8]> = vec![
            b"[pod/ob-epp-7c9d8-xk2lp/epp] 2026-08-21T14:36:14.123456789Z {\"a\":1}",
            b"[pod/a/b] ",
            b"[pod/a/b]",
            b"[pod//b] x",
            b"[pod/a] x",
            b"[pod/a]b/c] x",
            b"[pod/a/b]c] x",
            b"[pod/a/b/c] x",
            b"[pod/a/b]]] x",
            b"[pod/a/b]x",
            b"[pod/] x",
            b"[pod/",
            b"[pod/a/b] ] x",
            long.as_bytes(),
        ];
        for &l in &lines {
            for n in 5..=l.len() {
                let cut = &l[..n];
                let general = pod_prefix_general(cut);
                if let Some(fast) = pod_prefix(cut) {
                    assert_eq!(Ok(fast), general, "{}", String::from_utf8_lossy(cut));
                }
                let f = frame(cut);
                match general {
                    Ok((name, rest)) => {
                        let f = f.unwrap_or_else(|()| panic!("{}", String::from_utf8_lossy(cut)));
                        assert_eq!(f.pod, Some(name));
                        assert!(rest.ends_with(f.body));
                    }
                    Err(()) => assert!(f.is_err()),
                }
            }
        }
        // The fast reading takes the usual lines.
        assert!(pod_prefix(lines[0]).is_some());
    }
}
