//! Rendering in the EPP's log encodings: zap's JSON encoder as configured by
//! the EPP (HEAD since 2026-03-27, and the older controller-runtime default),
//! plus the time formats of zap, kubectl, Go's `time.Time` JSON, klog and
//! vLLM.

use std::fmt::Write as _;

/// Which zap encoder configuration writes the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Encoding {
    /// HEAD: levels `info`/`debug`/`trace`, `ts` an epoch float.
    #[default]
    Head,
    /// Builds of 2026-02-18 … 03-27: `LowercaseLevelEncoder` levels
    /// (`V(1)` → `debug`, `V(n>=2)` → `Level(-n)`) and a second-precision
    /// RFC3339 string `ts`.
    Old,
}

/// The level text for a logr verbosity `v` under an encoding.
pub fn level_text(enc: Encoding, v: u8) -> String {
    match enc {
        Encoding::Head => match v {
            0..=3 => "info".to_string(),
            4 => "debug".to_string(),
            _ => "trace".to_string(),
        },
        Encoding::Old => match v {
            0 => "info".to_string(),
            1 => "debug".to_string(),
            n => format!("Level(-{n})"),
        },
    }
}

/// zap's float rendering: `strconv.AppendFloat(f, 'f', -1, 64)`, with NaN
/// and infinities as strings. Rust's `Display` for `f64` is the same
/// shortest round-trip digits without an exponent.
pub fn zap_float(v: f64) -> String {
    if v.is_nan() {
        "\"NaN\"".to_string()
    } else if v == f64::INFINITY {
        "\"+Inf\"".to_string()
    } else if v == f64::NEG_INFINITY {
        "\"-Inf\"".to_string()
    } else {
        format!("{v}")
    }
}

/// Appends `s` as a JSON string the way zap's encoder escapes it.
pub fn push_json_str(buf: &mut String, s: &str) {
    buf.push('"');
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(buf, "\\u{:04x}", c as u32);
            }
            c => buf.push(c),
        }
    }
    buf.push('"');
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut b = String::with_capacity(s.len() + 2);
    push_json_str(&mut b, s);
    b
}

/// Epoch nanoseconds as zap's `EpochTimeEncoder` float seconds.
pub fn epoch_float(ns: i64) -> f64 {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    secs as f64 + frac as f64 / 1e9
}

/// Broken-down UTC time of epoch nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    /// Year.
    pub year: i64,
    /// Month 1–12.
    pub month: u32,
    /// Day 1–31.
    pub day: u32,
    /// Hour.
    pub hour: u32,
    /// Minute.
    pub minute: u32,
    /// Second.
    pub second: u32,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

impl Civil {
    /// From epoch nanoseconds.
    pub fn from_ns(ns: i64) -> Civil {
        let secs = ns.div_euclid(1_000_000_000);
        let nanos = ns.rem_euclid(1_000_000_000) as u32;
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400) as u32;
        let (year, month, day) = gatecal_parser::civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: sod / 60 % 60,
            second: sod % 60,
            nanos,
        }
    }

    fn date_time(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// RFC3339 at second precision, as controller-runtime's default `ts`.
pub fn rfc3339_secs(ns: i64) -> String {
    format!("{}Z", Civil::from_ns(ns).date_time())
}

/// kubelet's `RFC3339NanoFixed`: always nine fractional digits.
pub fn rfc3339_nano_fixed(ns: i64) -> String {
    let c = Civil::from_ns(ns);
    format!("{}.{:09}Z", c.date_time(), c.nanos)
}

/// Go's `time.Time` JSON (`RFC3339Nano`, trailing zeros trimmed).
pub fn rfc3339_nano_trimmed(ns: i64) -> String {
    let c = Civil::from_ns(ns);
    if c.nanos == 0 {
        return format!("{}Z", c.date_time());
    }
    let frac = format!("{:09}", c.nanos);
    format!("{}.{}Z", c.date_time(), frac.trim_end_matches('0'))
}

/// vLLM's `%m-%d %H:%M:%S` log time.
pub fn vllm_time(ns: i64) -> String {
    let c = Civil::from_ns(ns);
    format!(
        "{:02}-{:02} {:02}:{:02}:{:02}",
        c.month, c.day, c.hour, c.minute, c.second
    )
}

/// klog's header time `MMDD hh:mm:ss.uuuuuu`.
pub fn klog_time(ns: i64) -> String {
    let c = Civil::from_ns(ns);
    format!(
        "{:02}{:02} {:02}:{:02}:{:02}.{:06}",
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        c.nanos / 1000
    )
}

/// The director's `WithValues` context.
#[derive(Clone, Debug)]
pub struct DirectorCtx<'a> {
    /// `objectiveKey`.
    pub objective_key: &'a str,
    /// `incomingModelName`.
    pub incoming_model: &'a str,
    /// `targetModelName`.
    pub target_model: &'a str,
    /// `priority` (`*int`; `None` renders `null`).
    pub priority: Option<i64>,
}

/// One zap JSON line under construction, keys in the encoder's order.
pub struct ZapLine {
    buf: String,
}

impl ZapLine {
    /// Starts a line: `level`, `ts`, `caller`, `msg`.
    pub fn new(enc: Encoding, v: u8, ts_ns: i64, caller: &str, msg: &str) -> ZapLine {
        let mut buf = String::with_capacity(512);
        buf.push_str("{\"level\":");
        push_json_str(&mut buf, &level_text(enc, v));
        buf.push_str(",\"ts\":");
        match enc {
            Encoding::Head => buf.push_str(&zap_float(epoch_float(ts_ns))),
            Encoding::Old => push_json_str(&mut buf, &rfc3339_secs(ts_ns)),
        }
        buf.push_str(",\"caller\":");
        push_json_str(&mut buf, caller);
        buf.push_str(",\"msg\":");
        push_json_str(&mut buf, msg);
        ZapLine { buf }
    }

    fn key(&mut self, k: &str) {
        self.buf.push(',');
        push_json_str(&mut self.buf, k);
        self.buf.push(':');
    }

    /// The request context: `x-request-id`, then the director's keys if set.
    pub fn ctx(mut self, request_id: &str, director: Option<&DirectorCtx<'_>>) -> Self {
        self = self.str("x-request-id", request_id);
        if let Some(d) = director {
            self = self
                .str("objectiveKey", d.objective_key)
                .str("incomingModelName", d.incoming_model)
                .str("targetModelName", d.target_model);
            self = match d.priority {
                Some(p) => self.int("priority", p),
                None => self.raw("priority", "null"),
            };
        }
        self
    }

    /// A string value.
    pub fn str(mut self, k: &str, v: &str) -> Self {
        self.key(k);
        push_json_str(&mut self.buf, v);
        self
    }

    /// An integer value.
    pub fn int(mut self, k: &str, v: i64) -> Self {
        self.key(k);
        let _ = write!(self.buf, "{v}");
        self
    }

    /// A float64 value, zap style.
    pub fn float(mut self, k: &str, v: f64) -> Self {
        self.key(k);
        self.buf.push_str(&zap_float(v));
        self
    }

    /// A bool value.
    pub fn boolean(mut self, k: &str, v: bool) -> Self {
        self.key(k);
        self.buf.push_str(if v { "true" } else { "false" });
        self
    }

    /// A pre-rendered JSON value.
    pub fn raw(mut self, k: &str, json: &str) -> Self {
        self.key(k);
        self.buf.push_str(json);
        self
    }

    /// Closes the object (no newline).
    pub fn finish(mut self) -> String {
        self.buf.push('}');
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_render_like_go() {
        assert_eq!(zap_float(18000.0), "18000");
        assert_eq!(zap_float(0.8), "0.8");
        assert_eq!(zap_float(f64::NAN), "\"NaN\"");
        assert_eq!(zap_float(f64::INFINITY), "\"+Inf\"");
        assert_eq!(zap_float(f64::NEG_INFINITY), "\"-Inf\"");
        let max = zap_float(f64::MAX);
        assert_eq!(max.len(), 309);
        assert!(max.starts_with("17976931348623157"));
        assert!(max[17..].bytes().all(|b| b == b'0'));
        assert_eq!(
            zap_float(epoch_float(1_755_786_974_123_456_700)),
            "1755786974.1234567"
        );
    }

    #[test]
    fn times() {
        // 2026-08-21T14:36:14Z
        let ns = 1_787_322_974_000_000_000 + 123_456_789;
        assert_eq!(rfc3339_nano_fixed(ns), "2026-08-21T14:36:14.123456789Z");
        assert_eq!(rfc3339_secs(ns), "2026-08-21T14:36:14Z");
        assert_eq!(
            rfc3339_nano_trimmed(ns - 89),
            "2026-08-21T14:36:14.1234567Z"
        );
        assert_eq!(vllm_time(ns), "08-21 14:36:14");
        assert_eq!(klog_time(ns), "0821 14:36:14.123456");
    }

    #[test]
    fn line_order() {
        let d = DirectorCtx {
            objective_key: "chat",
            incoming_model: "m",
            target_model: "m",
            priority: Some(0),
        };
        let l = ZapLine::new(Encoding::Head, 4, 1_000_000_000, "a/b.go:1", "x")
            .ctx("r", Some(&d))
            .float("maxPenalty", 18000.0)
            .finish();
        assert_eq!(
            l,
            r#"{"level":"debug","ts":1,"caller":"a/b.go:1","msg":"x","x-request-id":"r","objectiveKey":"chat","incomingModelName":"m","targetModelName":"m","priority":0,"maxPenalty":18000}"#
        );
        let l = ZapLine::new(Encoding::Old, 4, 0, "c", "m").finish();
        assert!(l.starts_with(r#"{"level":"Level(-4)","ts":"1970-01-01T00:00:00Z""#));
    }
}
