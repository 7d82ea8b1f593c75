//! Times on the command line (`--since`, `--until`): an RFC 3339 time, a
//! date, a kubectl-style duration before now, or a time relative to the
//! input's first or last decision (`end-1h`, `start+10m`).

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

/// The first and last decision times of the inputs, epoch seconds.
pub type Span = (f64, f64);

/// Whether `--since`/`--until`'s value is relative to the input
/// (`start`, `end`, `start+10m`, `end-1h`): it needs the input's span.
pub fn is_relative(s: &str) -> bool {
    let t = s.trim();
    t.starts_with("start") || t.starts_with("end")
}

/// `start[+D]` or `end[-D]` (also `start-D`, `end+D`) over `span`.
fn relative(t: &str, span: Option<Span>) -> Option<Result<f64, String>> {
    let (anchor, rest) = if let Some(r) = t.strip_prefix("start") {
        ("start", r)
    } else if let Some(r) = t.strip_prefix("end") {
        ("end", r)
    } else {
        return None;
    };
    let offset = match rest.trim() {
        "" => Some(0.0),
        r => {
            let (sign, d) = match r.as_bytes()[0] {
                b'+' => (1.0, &r[1..]),
                b'-' => (-1.0, &r[1..]),
                _ => {
                    return Some(Err(format!(
                        "invalid time {t:?}: expected {anchor}, {anchor}+DURATION or {anchor}-DURATION (end-1h, start+10m)"
                    )));
                }
            };
            parse_compound(d.trim()).map(|d| sign * d)
        }
    };
    let Some(offset) = offset else {
        return Some(Err(format!(
            "invalid time {t:?}: the duration after {anchor} is not one (use 30s, 10m, 1h30m)"
        )));
    };
    Some(match span {
        Some((first, last)) => Ok(if anchor == "start" { first } else { last } + offset),
        None => Err(format!(
            "{t}: the input holds no decision with a time, so there is no {anchor} to count from"
        )),
    })
}

/// Parses `--since`/`--until`: an RFC 3339 time (`2026-08-21T14:27:00Z`,
/// `2026-08-21T16:27:00+02:00`), a date (`2026-08-21`, midnight UTC), a
/// duration before `now` (`30m`, `2h`, `1h30m`, as `kubectl logs --since`),
/// or a time relative to the input's first or last decision (`start+10m`,
/// `end-1h`), `span`. Returns seconds since the epoch.
pub fn parse_time(s: &str, now: f64) -> Result<f64, String> {
    parse_time_in(s, now, None)
}

/// [`parse_time`], with the inputs' decision times for `start`/`end`.
pub fn parse_time_in(s: &str, now: f64, span: Option<Span>) -> Result<f64, String> {
    let t = s.trim();
    if let Some(r) = relative(t, span) {
        return r;
    }
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
         (2026-08-21), a duration before now (30m, 2h, 1h30m), or a time from the input's \
         first or last decision (start+10m, end-1h)"
    ))
}

/// The time range of `--since`/`--until` (either may be absent); an error
/// names the flag, and a range whose start is not before its end is refused.
pub fn time_range(
    since: Option<&str>,
    until: Option<&str>,
) -> anyhow::Result<gatecal_analysis::TimeRange> {
    time_range_in(since, until, None)
}

/// [`time_range`], with the inputs' decision times for `start`/`end`.
pub fn time_range_in(
    since: Option<&str>,
    until: Option<&str>,
    span: Option<Span>,
) -> anyhow::Result<gatecal_analysis::TimeRange> {
    let now = now();
    let time = |flag: &str, v: Option<&str>| -> anyhow::Result<Option<f64>> {
        v.map(|s| parse_time_in(s, now, span))
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
        assert!(e.contains("end-1h"), "{e}");
    }

    #[test]
    fn times_from_the_inputs_start_and_end() {
        let span = Some((1000.0, 9000.0));
        let t = |s: &str| parse_time_in(s, 0.0, span);
        assert_eq!(t("end-1h"), Ok(5400.0));
        assert_eq!(t("end"), Ok(9000.0));
        assert_eq!(t("start+10m"), Ok(1600.0));
        assert_eq!(t(" start + 1h30m "), Ok(6400.0));
        assert!(t("end*2").unwrap_err().contains("end-DURATION"));
        assert!(t("end-soon").unwrap_err().contains("not one"));
        assert!(is_relative("end-1h") && !is_relative("1h"));
        let e = parse_time_in("end-1h", 0.0, None).unwrap_err();
        assert!(e.contains("no decision with a time"), "{e}");
        let r = time_range_in(Some("end-1h"), Some("end"), span).unwrap();
        assert_eq!((r.since, r.until), (Some(5400.0), Some(9000.0)));
    }
}
