//! Durations on the command line: `90`, `30s`, `15m`, `1h`, `1.5h`, `500ms`, `2d`.

/// Parses a duration into seconds. A bare number is seconds.
///
/// ```
/// use gatecal_cli::duration::parse_seconds;
/// assert_eq!(parse_seconds("1h"), Ok(3600.0));
/// assert_eq!(parse_seconds("500ms"), Ok(0.5));
/// assert!(parse_seconds("-1s").is_err());
/// ```
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 30s, 15m, 1h"))?;
    let mult = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 0.001,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hrs" => 3600.0,
        "d" => 86400.0,
        u => {
            return Err(format!(
                "invalid duration {s:?}: unknown unit {u:?} (use ms, s, m, h, d)"
            ));
        }
    };
    let secs = v * mult;
    if secs.is_finite() && secs > 0.0 {
        Ok(secs)
    } else {
        Err(format!("invalid duration {s:?}: must be positive"))
    }
}

/// Parses a time in milliseconds: a bare number is ms (`5000`), or a
/// number with a unit (`500ms`, `5s`, `1.5m`, `1h`). Non-finite values
/// and unknown units are errors; the range (a negative time) is the
/// caller's to check, with its own bounds.
///
/// ```
/// use gatecal_cli::duration::parse_ms;
/// assert_eq!(parse_ms("5s"), Ok(5000.0));
/// assert_eq!(parse_ms("18000"), Ok(18000.0));
/// assert_eq!(parse_ms("0"), Ok(0.0));
/// assert!(parse_ms("5 parsecs").is_err());
/// ```
pub fn parse_ms(s: &str) -> Result<f64, String> {
    let t = s.trim();
    // A bare number is ms; `NaN`, `inf` and `1e400` parse, and are refused.
    if let Ok(v) = t.parse::<f64>() {
        return if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("{s}: not a finite number"))
        };
    }
    let sign = usize::from(t.starts_with('-') || t.starts_with('+'));
    let split = t[sign..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+'))
        .map_or(t.len(), |i| i + sign);
    // `1e3` is a number; `5s`, `1.5m`, `500ms` have a unit.
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        format!("{s:?} is not a time: give ms (5000) or a number with a unit (500ms, 5s, 1.5m, 1h)")
    })?;
    let mult = match unit.trim() {
        "" | "ms" => 1.0,
        "s" | "sec" | "secs" => 1000.0,
        "m" | "min" | "mins" => 60_000.0,
        "h" | "hr" | "hrs" => 3_600_000.0,
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?} (use ms, s, m, h; a bare number is ms)"
            ));
        }
    };
    let ms = v * mult;
    if ms.is_finite() {
        Ok(ms)
    } else {
        Err(format!("{s:?}: not a finite time"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_with_or_without_a_unit() {
        assert_eq!(parse_ms("5000"), Ok(5000.0));
        assert_eq!(parse_ms("5s"), Ok(5000.0));
        assert_eq!(parse_ms("500ms"), Ok(500.0));
        assert_eq!(parse_ms("1.5m"), Ok(90_000.0));
        assert_eq!(parse_ms("1e3"), Ok(1000.0));
        assert_eq!(parse_ms(" 2s "), Ok(2000.0));
        assert_eq!(parse_ms("-5s"), Ok(-5000.0));
        for bad in ["", "s", "5 parsecs", "NaN", "1e400", "5d", "-inf"] {
            assert!(parse_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn units() {
        assert_eq!(parse_seconds("90"), Ok(90.0));
        assert_eq!(parse_seconds("15m"), Ok(900.0));
        assert_eq!(parse_seconds("1.5h"), Ok(5400.0));
        assert_eq!(parse_seconds("2d"), Ok(172800.0));
        assert!(parse_seconds("0s").is_err());
        assert!(parse_seconds("5 parsecs").is_err());
        assert!(parse_seconds("").is_err());
    }
}
