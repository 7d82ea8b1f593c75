//! Times on the command line (`--since`, `--until`): an RFC 3339 time, a
//! date, or a kubectl-style duration before now.

/// Parses a compound duration as kubectl and Go write them: `90s`, `30m`,
/// `2h`, `1h30m`, `1d12h`, `500ms` (units ms, s, m, h, d), into seconds.
pub fn parse_compound(s: &str) -> Option<f64> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let v: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..u] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return None,
        };
        rest = &rest[u..];
        total += v * mult;
    }
    (total.is_finite() && total > 0.0).then_some(total)
}

/// Parses `--since`/`--until`: an RFC 3339 time (`2026-08-21T14:27:00Z`,
/// `2026-08-21T16:27:00+02:00`), a date (`2026-08-21`, midnight UTC), or a
/// duration before `now` (`30m`, `2h`, `1h30m`, as `kubectl logs --since`).
/// Returns seconds since the epoch.
pub fn parse_time(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    if let Some(ts) = gatecal_parser::parse_rfc3339(t) {
        return Ok(ts);
    }
    if t.len() == 10
        && let Some(ts) = gatecal_parser::parse_rfc3339(&format!("{t}T00:00:00Z"))
    {
        return Ok(ts);
    }
    if let Some(d) = parse_compound(t) {
        return Ok(now - d);
    }
    Err(format!(
        "invalid time {s:?}: expected an RFC 3339 time (2026-08-21T14:27:00Z), a date \
         (2026-08-21) or a duration before now (30m, 2h, 1h30m)"
    ))
}

/// The time range of `--since`/`--until` (either may be absent); an error
/// names the flag, and a range whose start is not before its end is refused.
pub fn time_range(
    since: Option<&str>,
    until: Option<&str>,
) -> anyhow::Result<gatecal_analysis::TimeRange> {
    let now = now();
    let time = |flag: &str, v: Option<&str>| -> anyhow::Result<Option<f64>> {
        v.map(|s| parse_time(s, now))
            .transpose()
            .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
    };
    let range = gatecal_analysis::TimeRange {
        since: time("--since", since)?,
        until: time("--until", until)?,
    };
    if let (Some(a), Some(b)) = (range.since, range.until) {
        anyhow::ensure!(a < b, "--since must be before --until");
    }
    Ok(range)
}

/// Seconds since the epoch, now.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_compound("30m"), Some(1800.0));
        assert_eq!(parse_compound("1h30m"), Some(5400.0));
        assert_eq!(parse_compound("1d12h"), Some(129_600.0));
        assert_eq!(parse_compound("500ms"), Some(0.5));
        assert_eq!(parse_compound("1.5h"), Some(5400.0));
        for bad in ["", "30", "5x", "h", "0s", "1h-5m"] {
            assert_eq!(parse_compound(bad), None, "{bad}");
        }
    }

    #[test]
    fn times() {
        let now = 1_787_400_000.0;
        assert_eq!(parse_time("2026-08-21T14:27:00Z", now), Ok(1_787_322_420.0));
        assert_eq!(
            parse_time("2026-08-21T16:27:00+02:00", now),
            Ok(1_787_322_420.0)
        );
        assert_eq!(parse_time("2026-08-21", now), Ok(1_787_270_400.0));
        assert_eq!(parse_time("2h", now), Ok(now - 7200.0));
        assert_eq!(parse_time("1h30m", now), Ok(now - 5400.0));
        let e = parse_time("yesterday", now).unwrap_err();
        assert!(e.contains("RFC 3339") && e.contains("1h30m"), "{e}");
    }
}
