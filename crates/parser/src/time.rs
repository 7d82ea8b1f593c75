//! Civil time without a clock: RFC3339 to epoch seconds and back to a year.

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month) of an epoch time (UTC); a non-finite time reads as
/// 1970-01.
pub fn year_month_of(epoch: f64) -> (i64, u32) {
    let epoch = if epoch.is_finite() {
        epoch.clamp(-1e13, 1e13)
    } else {
        0.0
    };
    let (y, m, _) = civil_from_days((epoch / 86_400.0).floor() as i64);
    (y, m)
}

/// The proleptic Gregorian (year, month, day) of a day count since
/// 1970-01-01: the inverse of [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m as u32, d as u32)
}

fn num(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v = 0u32;
    for &c in b {
        v = v.checked_mul(10)?.checked_add(u32::from(c - b'0'))?;
    }
    Some(v)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM|±HHMM)` (also with a space or
/// lowercase `t` for the `T`, and a lowercase `z`) to epoch seconds.
pub(crate) fn parse_rfc3339(b: &[u8]) -> Option<f64> {
    if b.len() < 20 {
        return None;
    }
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let y = num(&b[0..4])?;
    let mo = num(&b[5..7])?;
    let d = num(&b[8..10])?;
    let h = num(&b[11..13])?;
    let mi = num(&b[14..16])?;
    let s = num(&b[17..19])?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0.0;
    if b.get(i) == Some(&b'.') {
        let fs = i + 1;
        let mut j = fs;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if j == fs {
            return None;
        }
        // Up to nanoseconds matter; more digits are ignored.
        let digits = &b[fs..j.min(fs + 9)];
        frac = f64::from(num(digits)?) / 10f64.powi(digits.len() as i32);
        i = j;
    }
    let off: i64 = match b.get(i) {
        Some(b'Z' | b'z') => {
            i += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            let oh = num(b.get(i + 1..i + 3)?)?;
            let (om, len) = if b.get(i + 3) == Some(&b':') {
                (num(b.get(i + 4..i + 6)?)?, 6)
            } else {
                (num(b.get(i + 3..i + 5)?)?, 5)
            };
            i += len;
            let o = i64::from(oh * 3600 + om * 60);
            if sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    if i != b.len() {
        return None;
    }
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + s) - off;
    Some(secs as f64 + frac)
}

/// Epoch seconds of a month-day-time in a year, read as UTC.
pub fn epoch_of(year: i64, month: u8, day: u8, secs_of_day: u32) -> f64 {
    (days_from_civil(year, u32::from(month), u32::from(day)) * 86_400 + i64::from(secs_of_day))
        as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_round_trip() {
        for days in [-800_000, -1, 0, 1, 59, 60, 11_016, 20_686, 47_482] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_686), (2026, 8, 21));
    }

    #[test]
    fn rfc3339_forms() {
        assert_eq!(parse_rfc3339(b"1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            parse_rfc3339(b"2026-03-10T08:15:02Z"),
            Some(1_773_130_502.0)
        );
        let ns = parse_rfc3339(b"2026-08-21T14:36:14.123456789Z").unwrap();
        assert!((ns - 1_787_322_974.123_456_7).abs() < 1e-5, "{ns}");
        assert_eq!(
            parse_rfc3339(b"2026-03-10T09:15:02+01:00"),
            parse_rfc3339(b"2026-03-10T08:15:02Z")
        );
        assert_eq!(
            parse_rfc3339(b"2026-03-10T08:15:02.000-0000"),
            parse_rfc3339(b"2026-03-10T08:15:02Z")
        );
        assert_eq!(parse_rfc3339(b"2026-13-10T08:15:02Z"), None);
        assert_eq!(parse_rfc3339(b"2026-03-10T08:15:02"), None);
        assert_eq!(parse_rfc3339(b"2026-03-10T08:15:02Zx"), None);
    }

    #[test]
    fn year_month_roundtrip() {
        for &(y, m, d) in &[(1970, 1, 1), (2026, 2, 28), (2024, 2, 29), (2026, 12, 31)] {
            let e = epoch_of(y, m, d, 3600);
            assert_eq!(year_month_of(e), (y, u32::from(m)));
        }
    }
}
