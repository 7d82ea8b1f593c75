//! The peak from calibration output: `PEAK_PREFILL_THROUGHPUT=` lines, or
//! TTFT samples fitted as `TTFT = overhead + tokens / peak`.

use super::types::{PeakEstimate, PeakSource, median, quantile_sorted};

/// Estimates from calibration output text: `PEAK_PREFILL_THROUGHPUT=<n>` /
/// `Measured peakPrefillThroughput = <n> tokens/sec` lines, else TTFT
/// samples (CSV with a header naming a prompt-tokens column and a TTFT
/// column, or JSON lines with such keys). `None` when the text holds
/// none. [`crate::from_calibration_text`] also reads the router's
/// calibration record.
pub fn from_calibration_lines(text: &str) -> Option<PeakEstimate> {
    let mut values = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let v = if let Some(rest) = l.strip_prefix("PEAK_PREFILL_THROUGHPUT=") {
            rest.trim().parse::<f64>().ok()
        } else if let Some(i) = l.find("Measured peakPrefillThroughput = ") {
            l[i + "Measured peakPrefillThroughput = ".len()..]
                .split_whitespace()
                .next()
                .and_then(|s| s.parse::<f64>().ok())
        } else {
            None
        };
        if let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) {
            values.push(v);
        }
    }
    if !values.is_empty() {
        values.sort_by(f64::total_cmp);
        let n = values.len() as u64;
        return Some(PeakEstimate {
            value: quantile_sorted(&values, 0.5).unwrap_or(values[0]),
            source: PeakSource::Calibration,
            samples: n,
            spread_low: values.first().copied(),
            spread_high: values.last().copied(),
            interval: None,
            engines: 0,
            method: "median of the calibration job's PEAK_PREFILL_THROUGHPUT values".into(),
            estimates: Vec::new(),
        });
    }
    let samples = ttft_samples(text);
    fit_ttft(&samples)
}

/// `(prompt tokens, TTFT seconds)` pairs from CSV or JSON lines.
pub fn ttft_samples(text: &str) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let tok_keys = ["prompt_tokens", "tokens", "input_tokens", "prompt_len"];
    let ttft_keys = [("ttft_ms", 0.001), ("ttft_s", 1.0), ("ttft", 1.0)];
    let mut header: Option<(usize, usize, f64)> = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('{') {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let tok = tok_keys
                .iter()
                .find_map(|k| v.get(k).and_then(|x| x.as_f64()));
            let ttft = ttft_keys
                .iter()
                .find_map(|(k, m)| v.get(k).and_then(|x| x.as_f64()).map(|x| x * m));
            if let (Some(t), Some(s)) = (tok, ttft) {
                out.push((t, s));
            }
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        match header {
            None => {
                let ti = cells.iter().position(|c| tok_keys.contains(c));
                let si = cells.iter().enumerate().find_map(|(i, c)| {
                    ttft_keys.iter().find(|(k, _)| k == c).map(|(_, m)| (i, *m))
                });
                if let (Some(ti), Some((si, m))) = (ti, si) {
                    header = Some((ti, si, m));
                }
            }
            Some((ti, si, m)) => {
                let t = cells.get(ti).and_then(|c| c.parse::<f64>().ok());
                let s = cells.get(si).and_then(|c| c.parse::<f64>().ok());
                if let (Some(t), Some(s)) = (t, s) {
                    out.push((t, s * m));
                }
            }
        }
    }
    out.retain(|(t, s)| t.is_finite() && s.is_finite() && *t > 0.0 && *s > 0.0);
    out
}

/// Fits `TTFT = overhead + tokens / peak` (Theil–Sen), see the module docs.
pub fn fit_ttft(samples: &[(f64, f64)]) -> Option<PeakEstimate> {
    if samples.is_empty() {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, a) in samples.iter().enumerate() {
        for b in &samples[i + 1..] {
            if a.0 != b.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    let n = samples.len() as u64;
    if let Some(slope) = median(&mut slopes).filter(|s| *s > 0.0) {
        let lo = quantile_sorted(&slopes, 0.9).map(|s| 1.0 / s);
        let hi = quantile_sorted(&slopes, 0.1)
            .filter(|s| *s > 0.0)
            .map(|s| 1.0 / s);
        let mut intercepts: Vec<f64> = samples.iter().map(|(t, s)| s - slope * t).collect();
        let overhead = median(&mut intercepts).unwrap_or(0.0);
        return Some(PeakEstimate {
            value: 1.0 / slope,
            source: PeakSource::Calibration,
            samples: n,
            spread_low: lo,
            spread_high: hi,
            interval: None,
            engines: 0,
            method: format!(
                "Theil–Sen fit of TTFT = overhead + tokens / peak over {n} samples (overhead {:.0} ms)",
                overhead * 1000.0
            ),
            estimates: Vec::new(),
        });
    }
    // One prompt size: the calibration job's rule.
    let mut ttfts: Vec<f64> = samples.iter().map(|s| s.1).collect();
    let m = median(&mut ttfts)?;
    let tokens = samples[0].0;
    Some(PeakEstimate {
        value: tokens / m,
        source: PeakSource::Calibration,
        samples: n,
        spread_low: ttfts.last().map(|t| tokens / t),
        spread_high: ttfts.first().map(|t| tokens / t),
        interval: None,
        engines: 0,
        method: format!(
            "{tokens:.0} tokens / median TTFT over {n} samples of one prompt size (includes the overhead: a lower bound)"
        ),
        estimates: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_lines_and_fits() {
        let e = from_calibration_lines(
            "x\nPEAK_PREFILL_THROUGHPUT=15928\nMeasured peakPrefillThroughput = 16000 tokens/sec\n",
        )
        .unwrap();
        assert_eq!(e.samples, 2);
        assert_eq!(e.value, 15928.0);
        // TTFT = 0.05 s + tokens / 8000, with one outlier.
        let mut csv = String::from("prompt_tokens,ttft_ms\n");
        for (i, t) in [1024.0, 2048.0, 4096.0, 8192.0, 16384.0].iter().enumerate() {
            let ms = (0.05 + t / 8000.0) * 1000.0 + if i == 2 { 900.0 } else { 0.0 };
            csv.push_str(&format!("{t},{ms}\n"));
        }
        let f = from_calibration_lines(&csv).unwrap();
        assert!((f.value - 8000.0).abs() / 8000.0 < 0.02, "{}", f.value);
        // One prompt size: tokens / median TTFT.
        let j = "{\"prompt_tokens\":8192,\"ttft_s\":0.5}\n{\"prompt_tokens\":8192,\"ttft_s\":0.52}\n{\"prompt_tokens\":8192,\"ttft_s\":0.55}\n";
        let g = from_calibration_lines(j).unwrap();
        assert!((g.value - 8192.0 / 0.52).abs() < 1e-6);
        assert!(from_calibration_lines("nothing here").is_none());
    }
}
