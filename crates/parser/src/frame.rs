//! Capture framing: the kubectl `--prefix` and kubelet `--timestamps` prefixes.

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
        let lim = body.len().min(MAX_PREFIX);
        let close =
            memchr::memchr_iter(b']', &body[..lim]).find(|&i| body.get(i + 1) == Some(&b' '));
        let Some(close) = close else {
            // `[pod/x/y]` alone on a line (an empty log line) is fine.
            if body.ends_with(b"]") && body.len() <= MAX_PREFIX {
                let inner = &body[5..body.len() - 1];
                let name = inner.split(|&c| c == b'/').next().unwrap_or(inner);
                return Ok(Framed {
                    pod: Some(name),
                    kubelet_raw: None,
                    body: &[],
                });
            }
            return Err(());
        };
        let inner = &body[5..close];
        let name = inner.split(|&c| c == b'/').next().unwrap_or(inner);
        if name.is_empty() {
            return Err(());
        }
        pod = Some(name);
        body = &body[close + 2..];
    }
    let mut kubelet_raw = None;
    if body.len() >= 20 && looks_like_time(body) {
        let lim = body.len().min(40);
        match memchr::memchr2(b' ', b'\t', &body[..lim]) {
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

/// `YYYY-MM-DDTHH:MM:SS` at the start (a cheap check; the full parse is
/// [`Framed::kubelet_ts`]).
fn looks_like_time(b: &[u8]) -> bool {
    const DIGITS: [usize; 14] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
    b.len() >= 19
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && DIGITS.iter().all(|&i| b[i].is_ascii_digit())
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
}
