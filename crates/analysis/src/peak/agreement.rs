//! vLLM's log lines against its Prometheus counters, for the same
//! deployment: where both give a figure, a difference beyond what either
//! source's uncertainty allows is reported with both figures.
//!
//! # Figures compared
//!
//! * **Peak prefill throughput**: the estimate from the stats lines
//!   ([`crate::peak::throughput`]) against the one from the counters
//!   ([`crate::parse_query_range`]), each with its 90 % interval. They disagree
//!   when the two intervals do not overlap (an estimate without an interval
//!   counts as its value alone). Both measure the same capacity while
//!   requests wait, so disjoint intervals mean at least one source is not
//!   what it claims to be (engines of another deployment tied to this one,
//!   a counter or line format read wrongly, a config change between the
//!   two captures).
//! * **Prefix cache hit rate** (v1 lines): the lines' `Prefix cache hit
//!   rate` against the counters' `vllm:prefix_cache_hits_total /
//!   vllm:prefix_cache_queries_total`, over the time both cover. A line's
//!   rate aggregates the last ~1000 requests, so the lines move within a
//!   band: their 10th–90th percentile over the common span. The counters'
//!   ratio over that span is exact (sums of increments, a drop being a
//!   restart). They disagree when the counters' ratio lies outside the
//!   lines' band widened by [`HIT_RATE_SLACK`] each side: a rolling rate
//!   over windows inside the span cannot stay on one side of the span's
//!   own rate, except by the lag of its window at the span's start, which
//!   the band's 10 % tails absorb. A line without a year (vLLM's own
//!   prefix) is placed in the year of the counters' samples (the one of
//!   the previous or next year when that is closer).
//!
//! Each side needs [`MIN_SAMPLES`] samples in the common span (lines with a
//! hit rate; scrape intervals with queries) to be compared.

use gatecal_parser::{VllmStats, epoch_of, year_month_of};
use serde::Serialize;

use crate::peak::throughput::PeakEstimate;

/// Absolute slack on each side of the lines' hit-rate band (a fraction).
pub const HIT_RATE_SLACK: f64 = 0.02;

/// Samples each side needs in the common span for the hit rates to be
/// compared.
pub const MIN_SAMPLES: u64 = 10;

/// One source's figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceFigure {
    /// `vllm_stats` (the log lines) or `prometheus`.
    pub source: &'static str,
    /// The figure (tokens/s, or a fraction for a hit rate).
    pub value: f64,
    /// Its interval: the 90 % interval of a peak, the p10–p90 band of the
    /// lines' hit rates; `null` when the source gives none (the counters'
    /// hit rate is exact).
    pub interval: Option<[f64; 2]>,
    /// Samples behind it.
    pub samples: u64,
    /// What a sample is: `saturated intervals`, `stats lines`, `scrape
    /// intervals`.
    pub unit: &'static str,
}

/// A figure on which the log lines and the Prometheus counters disagree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceDisagreement {
    /// `peak_prefill_throughput` or `prefix_cache_hit_rate`.
    pub figure: &'static str,
    /// From the vLLM log lines.
    pub log: SourceFigure,
    /// From the Prometheus counters.
    pub prometheus: SourceFigure,
    /// The warning, in words, with both figures.
    pub message: String,
}

fn interval_of(e: &PeakEstimate) -> [f64; 2] {
    e.interval.unwrap_or([e.value, e.value])
}

/// The peak estimates of the stats lines and of the counters, when their
/// intervals are disjoint.
pub fn peak(vllm: &PeakEstimate, prom: &PeakEstimate) -> Option<SourceDisagreement> {
    let ok = |e: &PeakEstimate| e.value.is_finite() && e.value > 0.0;
    // A never-saturated engine's highest rate is no estimate to compare.
    if !ok(vllm) || !ok(prom) || vllm.source != crate::peak::throughput::PeakSource::VllmStats {
        return None;
    }
    let (a, b) = (interval_of(vllm), interval_of(prom));
    if a[0] <= b[1] && b[0] <= a[1] {
        return None;
    }
    let fig = |source, e: &PeakEstimate, unit| SourceFigure {
        source,
        value: e.value,
        interval: e.interval,
        samples: e.samples,
        unit,
    };
    let range = |e: &PeakEstimate| match e.interval {
        Some([l, h]) => format!(", 90 % interval {l:.0}–{h:.0}"),
        None => String::new(),
    };
    Some(SourceDisagreement {
        figure: "peak_prefill_throughput",
        log: fig("vllm_stats", vllm, "saturated intervals"),
        prometheus: fig("prometheus", prom, "scrape intervals"),
        message: format!(
            "logs and Prometheus disagree on the peak prefill throughput: {:.0} tok/s from the vLLM stats lines ({} saturated intervals{}) against {:.0} tok/s from the Prometheus counters ({} scrape intervals{}); the intervals do not overlap, so one source does not describe these engines as it should (check that the Prometheus series' pods are this deployment's)",
            vllm.value,
            vllm.samples,
            range(vllm),
            prom.value,
            prom.samples,
            range(prom),
        ),
    })
}

/// The hit rates of one deployment's v1 stats lines: `(time, rate)`, the
/// time in epoch seconds when the line has a year, else seconds into its
/// year (placed at the end, against the counters' year).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LineHitRates {
    with_year: Vec<(f64, f64)>,
    /// `(month, day, seconds of day, rate)`.
    yearless: Vec<(u8, u8, u32, f64)>,
}

impl LineHitRates {
    /// Keeps the hit rate of a v1 stats line.
    pub fn push(&mut self, s: &VllmStats) {
        let Some(h) = s.prefix_cache_hit_rate_pct.filter(|h| h.is_finite()) else {
            return;
        };
        let h = h / 100.0;
        match s.ts {
            Some(t) if t.is_finite() => self.with_year.push((t, h)),
            _ if s.month >= 1 && s.day >= 1 => {
                self.yearless.push((s.month, s.day, s.seconds_of_day, h))
            }
            _ => {}
        }
    }

    /// The mean hit rate over the lines (in [0, 1]) and their count;
    /// `None` without lines.
    pub fn mean(&self) -> Option<(f64, u64)> {
        let rates = self
            .with_year
            .iter()
            .map(|(_, h)| *h)
            .chain(self.yearless.iter().map(|x| x.3));
        let (sum, n) = rates.fold((0.0, 0u64), |(s, n), h| (s + h, n + 1));
        (n > 0).then(|| (sum / n as f64, n))
    }

    /// Adds another's lines.
    pub fn extend(&mut self, o: LineHitRates) {
        self.with_year.extend(o.with_year);
        self.yearless.extend(o.yearless);
    }

    /// The lines in one order whatever the order they were added in, an
    /// identical line counted once (see [`crate::peak::throughput::VllmEstimator::canonical`]).
    pub fn canonical(&mut self) {
        self.with_year
            .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        self.with_year
            .dedup_by(|b, a| a.0.total_cmp(&b.0).is_eq() && a.1.total_cmp(&b.1).is_eq());
        self.yearless.sort_by(|a, b| {
            (a.0, a.1, a.2)
                .cmp(&(b.0, b.1, b.2))
                .then(a.3.total_cmp(&b.3))
        });
        self.yearless
            .dedup_by(|b, a| (a.0, a.1, a.2) == (b.0, b.1, b.2) && a.3.total_cmp(&b.3).is_eq());
    }

    /// The lines' times and rates, the yearless ones placed near `near`.
    fn placed(&self, near: f64) -> Vec<(f64, f64)> {
        let y = year_month_of(near).0;
        let mut out: Vec<(f64, f64)> = self.with_year.clone();
        for &(m, d, sod, h) in &self.yearless {
            let best = [y - 1, y, y + 1]
                .into_iter()
                .map(|yy| epoch_of(yy, m, d, sod))
                .min_by(|a, b| (a - near).abs().total_cmp(&(b - near).abs()));
            if let Some(t) = best {
                out.push((t, h));
            }
        }
        out
    }
}

/// The prefix-cache counters of one engine: `(time, queries increment,
/// hits increment)` per scrape interval, the time at its end.
pub type CounterIncrements = Vec<(f64, f64, f64)>;

/// The lines' hit rates against the counters' ratio over the time both
/// cover, when the ratio lies outside the lines' band.
pub fn hit_rate(lines: &LineHitRates, engines: &[CounterIncrements]) -> Option<SourceDisagreement> {
    let (mut p_lo, mut p_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for e in engines {
        for &(t, _, _) in e {
            p_lo = p_lo.min(t);
            p_hi = p_hi.max(t);
        }
    }
    if !(p_lo.is_finite() && p_hi.is_finite()) {
        return None;
    }
    let placed = lines.placed((p_lo + p_hi) / 2.0);
    let (l_lo, l_hi) = placed
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (t, _)| {
            (a.min(*t), b.max(*t))
        });
    let (lo, hi) = (p_lo.max(l_lo), p_hi.min(l_hi));
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    let mut rates: Vec<f64> = placed
        .iter()
        .filter(|(t, _)| (lo..=hi).contains(t))
        .map(|(_, h)| *h)
        .collect();
    let (mut q, mut h, mut n) = (0.0, 0.0, 0u64);
    for e in engines {
        for &(t, dq, dh) in e {
            if (lo..=hi).contains(&t) && dq > 0.0 {
                q += dq;
                h += dh.min(dq);
                n += 1;
            }
        }
    }
    if (rates.len() as u64) < MIN_SAMPLES || n < MIN_SAMPLES || q <= 0.0 {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    let rank = |p: f64| rates[((p * rates.len() as f64).ceil() as usize).clamp(1, rates.len()) - 1];
    let (b_lo, b_mid, b_hi) = (rank(0.1), rank(0.5), rank(0.9));
    let ratio = h / q;
    if ratio >= b_lo - HIT_RATE_SLACK && ratio <= b_hi + HIT_RATE_SLACK {
        return None;
    }
    let pct = |x: f64| format!("{:.1} %", x * 100.0);
    Some(SourceDisagreement {
        figure: "prefix_cache_hit_rate",
        log: SourceFigure {
            source: "vllm_stats",
            value: b_mid,
            interval: Some([b_lo, b_hi]),
            samples: rates.len() as u64,
            unit: "stats lines",
        },
        prometheus: SourceFigure {
            source: "prometheus",
            value: ratio,
            interval: None,
            samples: n,
            unit: "scrape intervals",
        },
        message: format!(
            "logs and Prometheus disagree on the prefix cache hit rate over the time both cover: {} (median; p10–p90 {}–{}) from {} vLLM stats lines against {} from the Prometheus counters (hits / queries over {} scrape intervals); the peak and break-even rest on the hit rate, so find which source is not this deployment's",
            pct(b_mid),
            pct(b_lo),
            pct(b_hi),
            rates.len(),
            pct(ratio),
            n,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peak::throughput::PeakSource;

    fn est(value: f64, interval: Option<[f64; 2]>, source: PeakSource) -> PeakEstimate {
        PeakEstimate {
            value,
            source,
            samples: 40,
            spread_low: None,
            spread_high: None,
            interval,
            engines: 1,
            method: String::new(),
            estimates: Vec::new(),
        }
    }

    #[test]
    fn peaks_disagree_only_when_their_intervals_are_disjoint() {
        let v = est(3000.0, Some([2800.0, 3200.0]), PeakSource::VllmStats);
        let close = est(3300.0, Some([3150.0, 3450.0]), PeakSource::Prometheus);
        assert!(peak(&v, &close).is_none());
        let far = est(3600.0, Some([3300.0, 3900.0]), PeakSource::Prometheus);
        let d = peak(&v, &far).unwrap();
        assert_eq!(d.log.value, 3000.0);
        assert_eq!(d.prometheus.interval, Some([3300.0, 3900.0]));
        assert!(d.message.contains("3000 tok/s"), "{}", d.message);
        assert!(d.message.contains("3600 tok/s"), "{}", d.message);
        // Without an interval, the value alone.
        let point = est(3250.0, None, PeakSource::Prometheus);
        assert!(peak(&v, &point).is_some());
        let inside = est(3100.0, None, PeakSource::Prometheus);
        assert!(peak(&v, &inside).is_none());
    }

    fn line(month: u8, day: u8, sod: u32, pct: f64) -> VllmStats {
        VllmStats {
            month,
            day,
            seconds_of_day: sod,
            prefix_cache_hit_rate_pct: Some(pct),
            ..VllmStats::default()
        }
    }

    #[test]
    fn yearless_lines_meet_the_counters_in_their_year() {
        // 2026-08-21 14:00:00 UTC.
        let t0 = epoch_of(2026, 8, 21, 14 * 3600);
        let mut lines = LineHitRates::default();
        for k in 0..30u32 {
            lines.push(&line(8, 21, 14 * 3600 + 10 * k, 80.0 + f64::from(k % 3)));
        }
        // 15 s scrapes over the same 5 minutes, at 81 %: agrees.
        let agree: CounterIncrements = (1..=20)
            .map(|k| (t0 + 15.0 * f64::from(k), 1000.0, 810.0))
            .collect();
        assert!(hit_rate(&lines, &[agree]).is_none());
        // At 60 %: disagrees, with both figures.
        let off: CounterIncrements = (1..=20)
            .map(|k| (t0 + 15.0 * f64::from(k), 1000.0, 600.0))
            .collect();
        let d = hit_rate(&lines, std::slice::from_ref(&off)).unwrap();
        assert!((d.prometheus.value - 0.6).abs() < 1e-9);
        // The lines in the common span: the first two are before the first
        // increment.
        assert_eq!(d.log.samples, 28);
        assert!(d.message.contains("60.0 %"), "{}", d.message);
        // A day later: no common time, nothing compared.
        let later: CounterIncrements = off.iter().map(|&(t, q, h)| (t + 86_400.0, q, h)).collect();
        assert!(hit_rate(&lines, &[later]).is_none());
        // Too few scrape intervals in common.
        assert!(hit_rate(&lines, &[off[..5].to_vec()]).is_none());
    }
}
