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

#[cfg(test)]
mod tests {
    use super::*;

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
