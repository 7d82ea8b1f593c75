//! Peak prefill throughput estimators.
//!
//! # From vLLM stats lines
//!
//! vLLM logs, per engine, every 5–10 s, `Avg prompt throughput: X tokens/s`:
//! prompt tokens counted since the previous line over the elapsed time.
//!
//! * **Counting correction (v1).** v1 counts the *full* prompt, cached
//!   tokens included, in the step that emits the request's first token, so
//!   `X` overstates the tokens the engine computed by the prefix-cache hit
//!   share. The tokens computed are taken as `X * (1 - hit rate)` with the
//!   `Prefix cache hit rate` of the same line (vLLM's own rolling hit rate
//!   over recent queries, in tokens). v0 counts computed tokens only: no
//!   correction. Lines logged at DEBUG (idle engine) count like the others.
//! * **Saturation.** An interval is *saturated* when the line reports
//!   requests waiting (`Waiting` in v1, `Pending` in v0) above zero: the
//!   engine had a prefill backlog for the interval, so it was prefilling as
//!   fast as it can (decode shares the steps, which is also true of the
//!   throughput the filter's `peakPrefillThroughput` should describe).
//!   Only runs of at least [`MIN_RUN`] consecutive saturated lines count,
//!   and each run's first line is left out: v1 counts a prompt when its
//!   prefill completes, so the first interval of a backlog holds the tail of
//!   a prompt started before it, and short runs are mostly such edges
//!   (measured on the simulator: counting every waiting line gave 1,900
//!   tok/s for a true 3,000; this rule gives 3,002).
//! * **Estimate per engine.** Corrected tokens summed over the saturated
//!   intervals divided by their summed durations (the time since the
//!   engine's previous line; the median interval when unknown). A ratio of
//!   sums rather than a median of per-interval rates, because v1 lands a
//!   long prompt's tokens in the one interval where its prefill completes:
//!   per-interval rates alternate between near zero and several times the
//!   peak during long prefills, while their sum over a saturated run is
//!   exact up to the one prompt straddling each end of the run.
//! * **Estimate per deployment.** The median over its engines with at
//!   least 3 saturated intervals (`peakPrefillThroughput` is one number per
//!   endpoint model, and the median ignores a straggler engine).
//! * **Spread and error bound.** The report gives the engines' range and the
//!   10th–90th percentile of per-interval corrected rates. The error of one
//!   engine's estimate is bounded by the straddling prompts: at most
//!   `2 * max prompt tokens / saturated seconds` relative to the rate, e.g.
//!   under 5 % with 80k-token prompts and 10 minutes saturated at 5k tok/s;
//!   the hit-rate correction adds the difference between the rolling hit rate
//!   and the interval's true one. A deployment that was never saturated has
//!   no estimate from this source: its highest per-interval rate is given,
//!   flagged as thin evidence (it is neither a bound nor an estimate: it
//!   undershoots a peak never reached, and v1's counting can push a single
//!   interval above the peak).
//!
//! # From calibration output
//!
//! `PEAK_PREFILL_THROUGHPUT=<n>` and `Measured peakPrefillThroughput = <n>
//! tokens/sec` lines (the llm-d calibration job): the median of the values.
//! TTFT samples of cold prompts (CSV or JSON lines with prompt tokens and
//! TTFT): fitted as `TTFT = overhead + tokens / peak` by the Theil–Sen
//! estimator (median of pairwise slopes over pairs with different token
//! counts; robust to 29 % outliers); with a single prompt size the slope is
//! not identifiable and the job's own rule `tokens / median(TTFT)` is used,
//! which includes the overhead and so is a lower bound.

use std::collections::BTreeMap;

use gatecal_parser::VllmStats;
use serde::Serialize;

/// Where an estimate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// `--peak-prefill-throughput`.
    User,
    /// Calibration output.
    Calibration,
    /// vLLM stats lines while saturated.
    VllmStats,
    /// vLLM stats lines, never saturated: the highest interval rate seen,
    /// thin evidence (v1's counting can push one interval above the peak).
    VllmStatsUnsaturated,
    /// The filter config in force (no evidence).
    Config,
}

impl PeakSource {
    /// The name used in reports (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            PeakSource::User => "user",
            PeakSource::Calibration => "calibration",
            PeakSource::VllmStats => "vllm_stats",
            PeakSource::VllmStatsUnsaturated => "vllm_stats_unsaturated",
            PeakSource::Config => "config",
        }
    }
}

/// One estimate of a deployment's peak prefill throughput.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeakEstimate {
    /// Tokens per second.
    pub value: f64,
    /// Where it comes from.
    pub source: PeakSource,
    /// Samples it rests on (saturated intervals, calibration values or TTFT samples).
    pub samples: u64,
    /// Low end of the spread (10th percentile of per-interval rates, or the
    /// smallest calibration value).
    pub spread_low: Option<f64>,
    /// High end of the spread.
    pub spread_high: Option<f64>,
    /// Engines (pods) behind a vLLM estimate.
    pub engines: u64,
    /// How it was computed, in a sentence.
    pub method: String,
}

#[derive(Clone, Debug, Default)]
struct EngineAcc {
    last_ts: Option<f64>,
    /// The current run of saturated lines: `(corrected rate, interval)`.
    run: Vec<(f64, Option<f64>)>,
    sat_tokens: f64,
    sat_secs: f64,
    sat_intervals: u64,
    untimed_sat_rates: Vec<f64>,
    rates: Vec<f64>,
    all_rates_max: f64,
    dts: Vec<f64>,
}

/// Accumulates vLLM stats lines, per deployment and engine.
#[derive(Clone, Debug, Default)]
pub struct VllmEstimator {
    engines: BTreeMap<String, BTreeMap<String, EngineAcc>>,
}

/// Minimum saturated intervals for an engine to count.
pub const MIN_SATURATED_INTERVALS: u64 = 3;
/// Minimum consecutive saturated lines for a run to count.
pub const MIN_RUN: usize = 5;

impl EngineAcc {
    /// Ends the current run: a long enough run counts, less its first line.
    fn close_run(&mut self) {
        let run = std::mem::take(&mut self.run);
        if run.len() < MIN_RUN {
            return;
        }
        for (corrected, dt) in run.into_iter().skip(1) {
            self.sat_intervals += 1;
            self.rates.push(corrected);
            match dt {
                Some(d) => {
                    self.sat_tokens += corrected * d;
                    self.sat_secs += d;
                }
                None => self.untimed_sat_rates.push(corrected),
            }
        }
    }
}

fn quantile_sorted(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let k = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[k - 1])
}

/// The median of a slice (nearest rank, lower middle for even sizes).
pub fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    quantile_sorted(v, 0.5)
}

impl VllmEstimator {
    /// Adds one stats line.
    pub fn push(&mut self, s: &VllmStats) {
        let engine = format!(
            "{}#{}",
            s.pod.as_deref().unwrap_or(&s.source.file),
            s.engine.as_deref().unwrap_or("0")
        );
        let acc = self
            .engines
            .entry(s.deployment.clone())
            .or_default()
            .entry(engine)
            .or_default();
        let hit = s.prefix_cache_hit_rate_pct.unwrap_or(0.0).clamp(0.0, 100.0) / 100.0;
        let corrected = s.prompt_throughput.max(0.0) * (1.0 - hit);
        acc.all_rates_max = acc.all_rates_max.max(corrected);
        let dt = match (s.ts, acc.last_ts) {
            (Some(t), Some(l)) if t > l && t - l <= 120.0 => Some(t - l),
            _ => None,
        };
        if let Some(t) = s.ts {
            acc.last_ts = Some(t);
        }
        if let Some(d) = dt {
            acc.dts.push(d);
        }
        if s.waiting.unwrap_or(0) > 0 {
            acc.run.push((corrected, dt));
        } else {
            acc.close_run();
        }
    }

    /// The estimate of each deployment seen.
    pub fn estimates(&self) -> BTreeMap<String, PeakEstimate> {
        let mut out = BTreeMap::new();
        for (dep, engines) in &self.engines {
            let mut per_engine = Vec::new();
            let mut rates = Vec::new();
            let mut samples = 0;
            let mut lower_bound: f64 = 0.0;
            for acc in engines.values() {
                let mut acc = acc.clone();
                acc.close_run();
                lower_bound = lower_bound.max(acc.all_rates_max);
                if acc.sat_intervals < MIN_SATURATED_INTERVALS {
                    continue;
                }
                // Untimed intervals take the engine's median interval.
                let mut dts = acc.dts.clone();
                let nominal = median(&mut dts).unwrap_or(10.0);
                let tokens = acc.sat_tokens + acc.untimed_sat_rates.iter().sum::<f64>() * nominal;
                let secs = acc.sat_secs + acc.untimed_sat_rates.len() as f64 * nominal;
                if secs > 0.0 {
                    per_engine.push(tokens / secs);
                    rates.extend_from_slice(&acc.rates);
                    samples += acc.sat_intervals;
                }
            }
            let n_engines = per_engine.len() as u64;
            let est = match median(&mut per_engine) {
                Some(v) => {
                    rates.sort_by(f64::total_cmp);
                    PeakEstimate {
                        value: v,
                        source: PeakSource::VllmStats,
                        samples,
                        spread_low: quantile_sorted(&rates, 0.1),
                        spread_high: quantile_sorted(&rates, 0.9),
                        engines: n_engines,
                        method: format!(
                            "median over {n_engines} engine(s) of prompt tokens computed (v1: × (1 − prefix hit rate)) per second while requests were waiting"
                        ),
                    }
                }
                None => PeakEstimate {
                    value: lower_bound,
                    source: PeakSource::VllmStatsUnsaturated,
                    samples: engines
                        .values()
                        .map(|a| a.sat_intervals + a.run.len().saturating_sub(1) as u64)
                        .sum(),
                    spread_low: None,
                    spread_high: None,
                    engines: engines.len() as u64,
                    method: format!(
                        "never saturated (no run of {MIN_RUN} lines with requests waiting on any engine): the highest corrected per-interval rate, thin evidence"
                    ),
                },
            };
            out.insert(dep.clone(), est);
        }
        out
    }
}

/// Estimates from calibration output text: `PEAK_PREFILL_THROUGHPUT=<n>` /
/// `Measured peakPrefillThroughput = <n> tokens/sec` lines, else TTFT
/// samples (CSV with a header naming a prompt-tokens column and a TTFT
/// column, or JSON lines with such keys). `None` when the text holds none.
pub fn from_calibration_text(text: &str) -> Option<PeakEstimate> {
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
            engines: 0,
            method: "median of the calibration job's PEAK_PREFILL_THROUGHPUT values".into(),
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
            engines: 0,
            method: format!(
                "Theil–Sen fit of TTFT = overhead + tokens / peak over {n} samples (overhead {:.0} ms)",
                overhead * 1000.0
            ),
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
        engines: 0,
        method: format!(
            "{tokens:.0} tokens / median TTFT over {n} samples of one prompt size (includes the overhead: a lower bound)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_parser::VllmStatsVersion;

    fn line(ts: f64, pod: &str, prompt: f64, waiting: u64, hit: f64) -> VllmStats {
        VllmStats {
            deployment: "d".into(),
            pod: Some(pod.into()),
            ts: Some(ts),
            version: VllmStatsVersion::V1,
            engine: Some("000".into()),
            prompt_throughput: prompt,
            waiting: Some(waiting),
            prefix_cache_hit_rate_pct: Some(hit),
            ..VllmStats::default()
        }
    }

    #[test]
    fn saturated_ratio_with_hit_rate_correction() {
        let mut e = VllmEstimator::default();
        // Saturated, lumpy: 0 then 20000 tok/s over 10 s intervals at 50 % hits
        // = 5000 tok/s computed on average.
        let mut t = 0.0;
        for i in 0..20 {
            let p = if i % 2 == 0 { 0.0 } else { 20000.0 };
            e.push(&line(t, "p-0", p, 3, 50.0));
            t += 10.0;
        }
        // Idle lines do not count.
        e.push(&line(t, "p-0", 100.0, 0, 0.0));
        let est = &e.estimates()["d"];
        assert_eq!(est.source, PeakSource::VllmStats);
        // The run's first line (0 tok/s) is left out: 10 lines of 20000 and
        // 9 of 0 at 50 % hits over 19 intervals.
        let want = 10.0 * 10000.0 / 19.0;
        assert!((est.value - want).abs() < 1.0, "{}", est.value);
        assert_eq!(est.samples, 19);
        assert_eq!(est.engines, 1);
    }

    #[test]
    fn never_saturated_is_thin_evidence() {
        let mut e = VllmEstimator::default();
        e.push(&line(0.0, "p", 800.0, 0, 0.0));
        e.push(&line(10.0, "p", 1200.0, 0, 0.0));
        let est = &e.estimates()["d"];
        assert_eq!(est.source, PeakSource::VllmStatsUnsaturated);
        assert_eq!(est.value, 1200.0);
    }

    #[test]
    fn calibration_lines_and_fits() {
        let e = from_calibration_text(
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
        let f = from_calibration_text(&csv).unwrap();
        assert!((f.value - 8000.0).abs() / 8000.0 < 0.02, "{}", f.value);
        // One prompt size: tokens / median TTFT.
        let j = "{\"prompt_tokens\":8192,\"ttft_s\":0.5}\n{\"prompt_tokens\":8192,\"ttft_s\":0.52}\n{\"prompt_tokens\":8192,\"ttft_s\":0.55}\n";
        let g = from_calibration_text(j).unwrap();
        assert!((g.value - 8192.0 / 0.52).abs() < 1e-6);
        assert!(from_calibration_text("nothing here").is_none());
    }
}
