//! Number formatting shared by the human-readable renderers.

/// Milliseconds for people: whole numbers with thousands separators
/// (`6,459`); magnitudes under 10 keep one decimal (`4.0`).
pub fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v.abs() < 10.0 && v.fract() != 0.0 => format!("{v:.1}"),
        Some(v) => group(v.round() as i64),
    }
}

/// An integer with thousands separators.
pub fn group(v: i64) -> String {
    let s = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count.
pub fn count(v: u64) -> String {
    group(v.min(i64::MAX as u64) as i64)
}

/// A share in [0, 1] as a percentage with one decimal (two under 1 %).
pub fn pct(share: f64) -> String {
    let p = share * 100.0;
    if p > 0.0 && p < 1.0 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

/// `count (share)`.
pub fn count_pct(c: u64, share: f64) -> String {
    format!("{} ({})", count(c), pct(share))
}

/// A bar in ms, `none` for 0 or absent.
pub fn bar(v: Option<f64>) -> String {
    match v {
        Some(b) if b > 0.0 => format!("{} ms", group(b.round() as i64)),
        Some(_) => "none".into(),
        None => "mixed".into(),
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(ts: f64) -> String {
    if !ts.is_finite() {
        return "–".into();
    }
    let secs = ts.floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = gatecal_parser::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(ms(Some(6459.4)), "6,459");
        assert_eq!(ms(Some(-1234567.0)), "-1,234,567");
        assert_eq!(ms(Some(4.04)), "4.0");
        assert_eq!(ms(None), "–");
        assert_eq!(ms(Some(0.0)), "0");
        assert_eq!(pct(0.006), "0.60%");
        assert_eq!(pct(0.172), "17.2%");
        assert_eq!(pct(0.0), "0.0%");
        assert_eq!(bar(Some(18000.0)), "18,000 ms");
        assert_eq!(bar(Some(0.0)), "none");
        assert_eq!(utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(utc(1764482019.25), "2025-11-30 05:53:39");
    }
}
