//! Upper bounds on the flags that size the work or the output, each
//! rejected with a message naming the flag and the bound.
//!
//! | flag | bound | why |
//! |---|---|---|
//! | `-j` | 1 to [`MAX_THREADS`] | more threads than blocks in flight buy nothing; each holds buffers |
//! | `--bins` | 2 to [`MAX_BINS`] | a histogram wider than any screen or chart |
//! | `--what-if-bar`, `--what-if-peak` | [`MAX_WHAT_IF`] values each | every value is replayed on every decision and is one row |
//! | `--window` | at least [`MIN_WINDOW_S`], at most [`MAX_WINDOWS`] windows over the decisions' time span | every window holds its own histograms and is one row |
//! | peaks (`--peak-prefill-throughput`, `--current-peak-prefill-throughput`, `--what-if-peak`, `--what-if peakPrefillThroughput=`) | [`MIN_PEAK_TOK_S`] to [`MAX_PEAK_TOK_S`] tok/s | the TTFT is tokens over the peak: below, it overflows to infinity and every gate decision drops out of the row; above, every TTFT is 0 |
//! | bars and times in ms (`--max-ttft-penalty-ms`, `--what-if-bar`, `--what-if maxTTFTPenaltyMs=`, `--pinned-worse-min`) | 0 to [`MAX_BAR_MS`] | a bar longer than a day holds every request |
//! | `--affinity-threshold` | 0 to 1 | the filter's own range |
//! | `--max-in-flight-requests-delta` | a whole number, 0 or more | the filter's own range |

/// Most threads `-j` takes.
pub const MAX_THREADS: usize = 256;
/// Most histogram bins `--bins` takes.
pub const MAX_BINS: usize = 10_000;
/// Most values one what-if list takes.
pub const MAX_WHAT_IF: usize = 64;
/// Shortest `--window`, seconds.
pub const MIN_WINDOW_S: f64 = 1.0;
/// Most time windows a `--window` may cut the decisions into.
pub const MAX_WINDOWS: usize = 1_000;
/// The peak and bar ranges, the same for flags and config files (the
/// filter core's, [`gatecal_filter::outside_range`]).
pub use gatecal_filter::{MAX_BAR_MS, MAX_PEAK_TOK_S, MIN_PEAK_TOK_S};

/// A finite number, or why not.
fn number(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(_) => Err(format!("{s}: not a finite number")),
        Err(_) => Err(format!("{s:?} is not a number")),
    }
}

/// A peak prefill throughput flag (tok/s): [`MIN_PEAK_TOK_S`] to
/// [`MAX_PEAK_TOK_S`].
pub fn parse_peak(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if !(MIN_PEAK_TOK_S..=MAX_PEAK_TOK_S).contains(&x) {
        return Err(format!(
            "{s} tok/s: a peak prefill throughput is from {MIN_PEAK_TOK_S} to {MAX_PEAK_TOK_S} tok/s"
        ));
    }
    Ok(x)
}

/// A bar or TTFT flag in ms: 0 to [`MAX_BAR_MS`]; a bare number is ms,
/// or a number with a unit (`500ms`, `5s`, `1.5m`, `1h`).
pub fn parse_bar_ms(s: &str) -> Result<f64, String> {
    let x = crate::duration::parse_ms(s)?;
    if !(0.0..=MAX_BAR_MS).contains(&x) {
        return Err(format!("{s} ms: give 0 to {MAX_BAR_MS} ms (one day)"));
    }
    Ok(x)
}

/// A request-count flag (`--max-in-flight-requests-delta`): a whole
/// number, 0 or more (the filter's own range).
pub fn parse_delta(s: &str) -> Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(format!("{s}: give a whole number of requests, 0 or more")),
    }
}

/// A fraction flag: 0 to 1.
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if !(0.0..=1.0).contains(&x) {
        return Err(format!("{s}: give a fraction from 0 to 1"));
    }
    Ok(x)
}

/// `-j N`: a thread count from 1 to [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a thread count"))?;
    if n == 0 || n > MAX_THREADS {
        return Err(format!("{n} threads: give 1 to {MAX_THREADS}"));
    }
    Ok(n)
}

/// `--window DURATION`: at least [`MIN_WINDOW_S`].
pub fn parse_window(s: &str) -> Result<f64, String> {
    let w = crate::duration::parse_seconds(s)?;
    if w.is_nan() || w < MIN_WINDOW_S {
        return Err(format!("{s}: a window is at least {MIN_WINDOW_S} s"));
    }
    Ok(w)
}

/// A list flag (`--what-if-bar` …) holds at most [`MAX_WHAT_IF`] values.
pub fn check_list(flag: &str, len: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        len <= MAX_WHAT_IF,
        "{flag}: {len} values, at most {MAX_WHAT_IF}"
    );
    Ok(())
}

/// Watches the time span of the decisions a `--window` cuts: once it
/// spans more than [`MAX_WINDOWS`] windows, no decision is admitted any
/// more (so memory stays bounded), and [`WindowBound::finish`] fails.
#[derive(Clone, Debug)]
pub struct WindowBound {
    window_s: Option<f64>,
    first: f64,
    last: f64,
    over: bool,
}

impl WindowBound {
    /// For `--window` (none: no bound).
    pub fn new(window_s: Option<f64>) -> WindowBound {
        WindowBound {
            window_s,
            first: f64::INFINITY,
            last: f64::NEG_INFINITY,
            over: false,
        }
    }

    /// Whether the decision stamped `ts` fits (false once the bound is hit).
    pub fn admit(&mut self, ts: Option<f64>) -> bool {
        if self.over {
            return false;
        }
        let (Some(w), Some(t)) = (self.window_s, ts.filter(|t| t.is_finite())) else {
            return true;
        };
        let first = self.first.min(t);
        let last = self.last.max(t);
        let windows = (last / w).floor() - (first / w).floor() + 1.0;
        if windows > MAX_WINDOWS as f64 {
            self.over = true;
            return false;
        }
        (self.first, self.last) = (first, last);
        true
    }

    /// An error when the decisions spanned more than [`MAX_WINDOWS`] windows.
    pub fn finish(&self) -> anyhow::Result<()> {
        if self.over
            && let Some(w) = self.window_s
        {
            anyhow::bail!(
                "--window {w} s cuts the decisions' time span into more than {MAX_WINDOWS} windows: give a longer window"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads() {
        assert_eq!(parse_threads("8"), Ok(8));
        assert_eq!(parse_threads("256"), Ok(256));
        assert!(parse_threads("0").unwrap_err().contains("1 to 256"));
        assert!(parse_threads("100000").unwrap_err().contains("1 to 256"));
        assert!(parse_threads("x").is_err());
    }

    #[test]
    fn windows() {
        assert_eq!(parse_window("1h"), Ok(3600.0));
        assert!(parse_window("0.5s").is_err());
        let mut b = WindowBound::new(Some(1.0));
        assert!(b.admit(Some(10.0)));
        assert!(b.admit(Some(1009.5)));
        assert!(b.finish().is_ok());
        assert!(!b.admit(Some(1010.0)));
        assert!(!b.admit(Some(11.0)), "nothing after the bound was hit");
        assert!(b.finish().unwrap_err().to_string().contains("1000 windows"));
        let mut none = WindowBound::new(None);
        assert!(none.admit(Some(0.0)) && none.admit(Some(1e9)));
        assert!(none.finish().is_ok());
    }

    /// Each numeric range refuses just outside and takes its ends; a peak
    /// of 1e-320 tok/s (which made every TTFT infinite and dropped every
    /// gate decision from its row) and non-finite values are refused.
    #[test]
    fn numeric_ranges() {
        assert_eq!(parse_peak("1"), Ok(1.0));
        assert_eq!(parse_peak("1e9"), Ok(1e9));
        for bad in [
            "0.999",
            "1e-320",
            "0",
            "-5",
            "1.000001e9",
            "NaN",
            "inf",
            "x",
        ] {
            assert!(parse_peak(bad).is_err(), "{bad}");
        }
        assert!(
            parse_peak("1e-320")
                .unwrap_err()
                .contains("from 1 to 1000000000 tok/s")
        );
        assert_eq!(parse_bar_ms("0"), Ok(0.0));
        assert_eq!(parse_bar_ms("86400000"), Ok(MAX_BAR_MS));
        for bad in ["-1", "86400000.1", "1e308", "NaN", "-inf"] {
            assert!(parse_bar_ms(bad).is_err(), "{bad}");
        }
        assert!(parse_bar_ms("-1").unwrap_err().contains("0 to 86400000 ms"));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        for bad in ["-0.1", "1.01", "NaN"] {
            assert!(parse_fraction(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_delta("0"), Ok(0));
        for bad in ["-1", "1.5", "x"] {
            assert!(parse_delta(bad).unwrap_err().contains("0 or more"), "{bad}");
        }
    }

    #[test]
    fn lists() {
        assert!(check_list("--what-if-bar", 64).is_ok());
        let e = check_list("--what-if-bar", 65).unwrap_err().to_string();
        assert!(
            e.contains("--what-if-bar") && e.contains("at most 64"),
            "{e}"
        );
    }
}
