//! The keys the parser reads, number and endpoint conventions: the values
//! of one line by key ([`Fields`]), and how a value becomes a number, a
//! string, a level or a time. The key table ([`keys`]), the number parser
//! ([`number`](mod@number)) and the endpoint ids ([`endpoint`](mod@endpoint)) are
//! submodules.

mod endpoint;
mod keys;
mod number;

pub(crate) use endpoint::{dump_ids, endpoint, endpoint_list, picker_targets};
pub(crate) use keys::{Key, NKEYS};
pub(crate) use number::parse_f64;

use crate::arena::{Arena, Span};
use crate::decision::ValueFlags;
use crate::json::{Val, unescape};

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

/// The members of an object of counts (the precise prefix producer's
/// `scores`, `{"ip:port": match blocks}`): how many, and the largest value
/// (0 for an empty object). `None` when it is not such an object (a value
/// that is not a finite number at least 0).
pub(crate) fn max_member(v: Val<'_>) -> Option<(u32, f64)> {
    let Val::Obj(raw) = v else { return None };
    let (mut n, mut max, mut ok) = (0u32, 0.0f64, true);
    let walked = crate::json::obj_members(raw, |_, _, v| {
        let mut flags = ValueFlags::default();
        match number(v, &mut flags) {
            Some(x) if x.is_finite() && x >= 0.0 => {
                n = n.saturating_add(1);
                max = max.max(x);
            }
            _ => ok = false,
        }
    });
    (walked && ok).then_some((n, max))
}

/// The number under `key` in a JSON object's raw bytes (the last one when
/// the key repeats); `None` when the object cannot be read, the key is
/// missing or its value is not a finite number `>= 0`.
pub(crate) fn member_count(raw: &[u8], key: &str) -> Option<f64> {
    let mut found = None;
    let walked = crate::json::obj_members(raw, |k, esc, v| {
        let same = if esc {
            crate::json::unescape(k, esc) == key
        } else {
            k == key.as_bytes()
        };
        if same {
            let mut flags = ValueFlags::default();
            found = number(v, &mut flags).filter(|x| x.is_finite() && *x >= 0.0);
        }
    });
    if walked { found } else { None }
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
    use crate::json::Scanner;

    #[test]
    fn member_count_reads_one_address() {
        let o =
            br#"{"10.0.0.1:8000":45.5,"10.0.0.2:8000":3,"10.0.0.3:8000":-1,"10.0.0.4:8000":"x"}"#;
        assert_eq!(member_count(o, "10.0.0.2:8000"), Some(3.0));
        assert_eq!(member_count(o, "10.0.0.1:8000"), Some(45.5));
        // Out of domain, not a number, absent, an unreadable object.
        assert_eq!(member_count(o, "10.0.0.3:8000"), None);
        assert_eq!(member_count(o, "10.0.0.4:8000"), None);
        assert_eq!(member_count(o, "10.0.0.9:8000"), None);
        assert_eq!(
            member_count(br#"{"10.0.0.1:8000":4"#, "10.0.0.1:8000"),
            None
        );
        // An escaped key is compared unescaped.
        assert_eq!(
            member_count(br#"{"10.0.0.1:8000":7}"#, "10.0.0.1:8000"),
            Some(7.0)
        );
    }

    fn val(s: &str) -> Val<'_> {
        Scanner::new(s.as_bytes()).value().unwrap()
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
    fn levels() {
        assert_eq!(level(b"debug"), Some(4));
        assert_eq!(level(b"Level(-4)"), Some(4));
        assert_eq!(level(b"LEVEL(-5)"), Some(5));
        assert_eq!(level(b"DEBUG"), Some(4));
        assert_eq!(level(b"dpanic"), Some(-3));
        assert_eq!(level(b"Level(x)"), None);
    }
}
