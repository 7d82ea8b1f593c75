//! A histogram of signed values (ms) on top of HdrHistogram (see [`SignedHistogram`]).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Units per ms recorded in the integer histograms.
const SCALE: f64 = 100.0;
/// Magnitudes from here on are "unbounded" (MaxFloat64 sentinels).
pub const UNBOUNDED_MS: f64 = 1e300;
/// The largest magnitude recorded (about 3 years in ms); beyond it the value is unbounded.
const MAX_RECORDED_MS: f64 = 1e11;

/// A histogram of signed millisecond values with exact count, min and max.
///
/// # Method
///
/// HdrHistogram records non-negative integers. The gate input is negative
/// whenever the sticky endpoint is the less loaded one, so values are split by
/// sign: `v >= 0` goes to a histogram of `round(v * 100)` (units of 10 µs),
/// `v < 0` to a second histogram of `round(-v * 100)`. Nothing is clamped.
/// Both keep 3 significant digits, so every recorded value is represented
/// within 0.1 % of itself (plus the 5 µs rounding to the unit).
///
/// Quantiles are *nearest rank* over the exact count: for quantile `q` in
/// `[0, 1]` and `n` values the answer is the `k`-th smallest with
/// `k = max(1, ceil(q * n))`. Ranks `k <= n_neg` fall in the negative
/// histogram, counted from its largest magnitude down; the rest in the
/// non-negative one. The value returned is the midpoint of the HdrHistogram
/// bucket holding that rank (`median_equivalent`), so it differs from the
/// exact order statistic by at most half a bucket: 0.05 % relative, plus 5 µs.
///
/// Values that are not finite, or whose magnitude is at least `1e300` (the
/// EPP logs `f64::MAX` as the penalty on the predictor path when a side has
/// no prediction), are not recorded; they are counted in
/// [`SignedHistogram::unbounded`] so that a figure never hides them.
#[derive(Clone, Debug)]
pub struct SignedHistogram {
    /// Each side is made when it is first written to: `None` stands for
    /// an empty histogram as [`new_hist`] makes it, which most sides of
    /// most accumulators stay (negative gate inputs, censored values,
    /// traced decisions), without its 16 KiB of counts.
    neg: Option<Histogram<u64>>,
    pos: Option<Histogram<u64>>,
    min: f64,
    max: f64,
    unbounded: u64,
}

impl Default for SignedHistogram {
    fn default() -> Self {
        SignedHistogram::new()
    }
}

fn new_hist() -> Histogram<u64> {
    // 3 significant digits; auto-resizing covers any recorded magnitude.
    match Histogram::new(3) {
        Ok(h) => h,
        Err(_) => unreachable!("3 significant figures is a valid HdrHistogram setting"),
    }
}

/// A side to write to, made empty ([`new_hist`]) if it was not yet.
fn made(side: &mut Option<Histogram<u64>>) -> &mut Histogram<u64> {
    side.get_or_insert_with(new_hist)
}

impl SignedHistogram {
    /// An empty histogram.
    pub fn new() -> SignedHistogram {
        SignedHistogram {
            neg: None,
            pos: None,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            unbounded: 0,
        }
    }

    /// Records one value in ms. Non-finite values and magnitudes of at least
    /// `1e11` ms are counted as unbounded instead.
    pub fn record(&mut self, v: f64) {
        if !v.is_finite() || v.abs() >= MAX_RECORDED_MS {
            self.unbounded += 1;
            return;
        }
        let units = (v.abs() * SCALE).round() as u64;
        let h = made(if v < 0.0 {
            &mut self.neg
        } else {
            &mut self.pos
        });
        // Auto-resize is on and the magnitude is bounded above: cannot fail.
        if h.record(units).is_err() {
            self.unbounded += 1;
            return;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &SignedHistogram) {
        // Both auto-resize, so addition cannot fail; adding an empty
        // histogram changes nothing.
        if let Some(o) = &other.neg {
            let _ = made(&mut self.neg).add(o);
        }
        if let Some(o) = &other.pos {
            let _ = made(&mut self.pos).add(o);
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.unbounded += other.unbounded;
    }

    /// Takes back one value recorded with [`SignedHistogram::record`]:
    /// `false` (and nothing changed) when its bucket holds none. The exact
    /// extremes stay: a value taken back is one another histogram of the
    /// same merge holds too.
    pub fn remove(&mut self, v: f64) -> bool {
        if !v.is_finite() || v.abs() >= MAX_RECORDED_MS {
            let had = self.unbounded > 0;
            self.unbounded = self.unbounded.saturating_sub(1);
            return had;
        }
        let units = (v.abs() * SCALE).round() as u64;
        let Some(h) = (if v < 0.0 {
            &mut self.neg
        } else {
            &mut self.pos
        }) else {
            return false;
        };
        if h.count_at(units) == 0 {
            return false;
        }
        let mut one = new_hist();
        if one.record(units).is_err() {
            return false;
        }
        h.subtract(&one).is_ok()
    }

    /// Values recorded (excluding unbounded ones).
    pub fn count(&self) -> u64 {
        self.count_negative() + self.pos.as_ref().map_or(0, Histogram::len)
    }

    /// Values that were not recorded because they were not finite or too large.
    pub fn unbounded(&self) -> u64 {
        self.unbounded
    }

    /// Values below zero.
    pub fn count_negative(&self) -> u64 {
        self.neg.as_ref().map_or(0, Histogram::len)
    }

    /// Exact smallest recorded value.
    pub fn min(&self) -> Option<f64> {
        (self.count() > 0).then_some(self.min)
    }

    /// Exact largest recorded value.
    pub fn max(&self) -> Option<f64> {
        (self.count() > 0).then_some(self.max)
    }

    /// The nearest-rank quantile `q` in `[0, 1]` (see the module docs), or
    /// `None` when empty or `q` is outside `[0, 1]`. Several quantiles of one
    /// histogram are cheaper through one [`SignedHistogram::recorded`].
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.recorded().quantile(q)
    }

    /// How many values are `<= v` (exact for values recorded exactly at a
    /// bucket's range; otherwise within one bucket).
    pub fn count_at_most(&self, v: f64) -> u64 {
        self.recorded()
            .values
            .iter()
            .filter(|(m, _)| *m <= v)
            .map(|(_, c)| c)
            .sum()
    }

    /// Counts per bin for `edges` (ascending, `len >= 2`): bin `i` holds the
    /// values in `[edges[i], edges[i+1])`, the last bin also its upper edge.
    /// Values outside the edges are returned as `(below, above)`.
    pub fn bins(&self, edges: &[f64]) -> (Vec<u64>, u64, u64) {
        self.recorded().bins(edges)
    }

    /// The recorded buckets, read once (one pass over each HdrHistogram):
    /// quantiles and bins then read the snapshot, not the histograms.
    pub fn recorded(&self) -> Recorded {
        let mut values = Vec::new();
        // Negative values first, largest magnitude first: ascending order.
        let start = values.len();
        if let Some(neg) = &self.neg {
            for it in neg.iter_recorded() {
                let m = -(neg.median_equivalent(it.value_iterated_to()) as f64) / SCALE;
                values.push((m, it.count_at_value()));
            }
        }
        values[start..].reverse();
        if let Some(pos) = &self.pos {
            for it in pos.iter_recorded() {
                let m = pos.median_equivalent(it.value_iterated_to()) as f64 / SCALE;
                values.push((m, it.count_at_value()));
            }
        }
        Recorded {
            values,
            n: self.count(),
            min: self.min,
            max: self.max,
        }
    }
}

/// The buckets of a [`SignedHistogram`] holding values, in ascending order:
/// each bucket's midpoint in ms (`median_equivalent`) and its count.
#[derive(Clone, Debug)]
pub struct Recorded {
    values: Vec<(f64, u64)>,
    n: u64,
    min: f64,
    max: f64,
}

impl Recorded {
    /// The buckets holding values, ascending: each bucket's midpoint in ms
    /// and its count.
    pub fn buckets(&self) -> &[(f64, u64)] {
        &self.values
    }

    /// The nearest-rank quantile `q` in `[0, 1]` (see the module docs), or
    /// `None` when empty or `q` is outside `[0, 1]`.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.n;
        if n == 0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let k = ((q * n as f64).ceil() as u64).clamp(1, n);
        // A bucket midpoint can lie past the exact extremes: never report
        // a quantile beyond the largest or smallest value seen.
        Some(self.value_at_rank(k).clamp(self.min, self.max))
    }

    /// The `k`-th smallest value (1-based), bucket midpoint: the first
    /// bucket whose running count reaches `k` (ranks `k <= n_neg` fall in the
    /// negative buckets, counted from the largest magnitude).
    fn value_at_rank(&self, k: u64) -> f64 {
        let mut seen = 0u64;
        for &(m, c) in &self.values {
            seen += c;
            if seen >= k {
                return m;
            }
        }
        self.values.last().map_or(0.0, |&(m, _)| m)
    }

    /// Counts per bin for `edges`: see [`SignedHistogram::bins`].
    pub fn bins(&self, edges: &[f64]) -> (Vec<u64>, u64, u64) {
        let nb = edges.len().saturating_sub(1);
        let mut counts = vec![0u64; nb];
        let (mut below, mut above) = (0u64, 0u64);
        for &(v, c) in &self.values {
            if nb == 0 || v < edges[0] {
                below += c;
            } else if v > edges[nb] {
                above += c;
            } else {
                let i = edges
                    .partition_point(|&e| e <= v)
                    .saturating_sub(1)
                    .min(nb - 1);
                counts[i] += c;
            }
        }
        (counts, below, above)
    }
}

/// A [`SignedHistogram`] in a partial report: each side in HdrHistogram's
/// V2 serialization, base64 ([`crate::gate::hdr_v2`]), with the exact
/// extremes and the unbounded count.
#[derive(serde::Serialize, serde::Deserialize)]
struct Wire {
    neg: String,
    pos: String,
    min: Option<f64>,
    max: Option<f64>,
    unbounded: u64,
}

impl serde::Serialize for SignedHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use crate::gate::hdr_v2::{base64, encode};
        let side = |h: &Option<Histogram<u64>>| match h {
            Some(h) => base64(&encode(h)),
            None => base64(&encode(&new_hist())),
        };
        Wire {
            neg: side(&self.neg),
            pos: side(&self.pos),
            min: self.min(),
            max: self.max(),
            unbounded: self.unbounded,
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for SignedHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::gate::hdr_v2::{decode_into, unbase64};
        use serde::de::Error;
        let w = Wire::deserialize(d)?;
        let mut h = SignedHistogram::new();
        for (text, side) in [(&w.neg, &mut h.neg), (&w.pos, &mut h.pos)] {
            let bytes = unbase64(text).map_err(D::Error::custom)?;
            decode_into(&bytes, made(side)).map_err(D::Error::custom)?;
        }
        match (h.count() > 0, w.min, w.max) {
            (false, None, None) => {}
            (true, Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() && lo <= hi => {
                h.min = lo;
                h.max = hi;
            }
            _ => {
                return Err(D::Error::custom(
                    "histogram min/max do not match its counts",
                ));
            }
        }
        h.unbounded = w.unbounded;
        Ok(h)
    }
}

/// Quantiles over fewer values than this are flagged `small_sample`: with
/// under 20 values a p90 is the largest or second-largest value and a p99 the
/// maximum.
pub const MIN_QUANTILE_SAMPLE: u64 = 20;

/// A distribution's size and quantiles (nearest rank, ms; see [`crate::SignedHistogram`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Values in the distribution.
    pub count: u64,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// Largest value (exact).
    pub max: Option<f64>,
    /// Smallest value (exact).
    pub min: Option<f64>,
    /// Values below zero (the sticky endpoint was the less loaded one).
    pub negative: u64,
    /// Values left out because not finite or at least 1e300 (MaxFloat64 sentinels).
    pub unbounded: u64,
    /// Fewer than [`MIN_QUANTILE_SAMPLE`] (20) values: the quantiles are
    /// order statistics of a handful of decisions, not a distribution.
    pub small_sample: bool,
}

impl Distribution {
    /// The figures of a histogram.
    pub fn of(h: &SignedHistogram) -> Distribution {
        Distribution::of_recorded(h, &h.recorded())
    }

    /// The figures of a histogram whose buckets `r` were already read
    /// (`h.recorded()`).
    pub fn of_recorded(h: &SignedHistogram, r: &Recorded) -> Distribution {
        Distribution {
            count: h.count(),
            p50: r.quantile(0.5),
            p90: r.quantile(0.9),
            p99: r.quantile(0.99),
            p999: r.quantile(0.999),
            max: h.max(),
            min: h.min(),
            negative: h.count_negative(),
            unbounded: h.unbounded(),
            small_sample: h.count() > 0 && h.count() < MIN_QUANTILE_SAMPLE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_nearest_rank(v: &mut [f64], q: f64) -> f64 {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let k = ((q * n as f64).ceil() as usize).clamp(1, n);
        v[k - 1]
    }

    #[test]
    fn negative_values_are_ordered_correctly() {
        let mut h = SignedHistogram::new();
        let vals = [-5000.0, -20.0, -1.5, 0.0, 3.0, 40.0, 6459.0, 15148.0];
        for v in vals {
            h.record(v);
        }
        assert_eq!(h.count(), 8);
        assert_eq!(h.count_negative(), 3);
        assert_eq!(h.min(), Some(-5000.0));
        assert_eq!(h.max(), Some(15148.0));
        // k = ceil(0.1 * 8) = 1: the most negative.
        assert!((h.quantile(0.1).unwrap() - -5000.0).abs() <= 5000.0 * 0.0005);
        // k = ceil(0.25 * 8) = 2: -20.
        assert!((h.quantile(0.25).unwrap() - -20.0).abs() <= 0.02);
        // k = 4: 0.
        assert_eq!(h.quantile(0.5).unwrap(), 0.0);
        assert_eq!(h.quantile(1.0), Some(15148.0), "clamped to the exact max");
        assert_eq!(h.quantile(0.0), Some(-5000.0), "clamped to the exact min");
    }

    #[test]
    fn quantiles_match_exact_order_statistics_within_precision() {
        // A deterministic spread of values across both signs and decades.
        let mut vals: Vec<f64> = (0..5000)
            .map(|i| {
                let x = (i as f64 * 0.7548776662).fract();
                let mag = 10f64.powf(x * 5.0 - 1.0);
                if i % 3 == 0 { -mag } else { mag }
            })
            .collect();
        let mut h = SignedHistogram::new();
        for &v in &vals {
            h.record(v);
        }
        for q in [0.0, 0.01, 0.1, 0.333, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let want = exact_nearest_rank(&mut vals, q);
            let got = h.quantile(q).unwrap();
            assert!(
                (got - want).abs() <= want.abs() * 0.0006 + 0.006,
                "q={q}: got {got}, want {want}"
            );
        }
    }

    #[test]
    fn unbounded_and_non_finite_are_counted_not_recorded() {
        let mut h = SignedHistogram::new();
        h.record(f64::MAX);
        h.record(f64::NAN);
        h.record(f64::NEG_INFINITY);
        h.record(12.0);
        assert_eq!(h.count(), 1);
        assert_eq!(h.unbounded(), 3);
        assert_eq!(h.quantile(0.99), Some(12.0));
    }

    #[test]
    fn empty_has_no_quantiles() {
        let h = SignedHistogram::new();
        assert_eq!(h.quantile(0.5), None);
        assert_eq!(h.min(), None);
    }

    #[test]
    fn merge_and_bins() {
        let mut a = SignedHistogram::new();
        let mut b = SignedHistogram::new();
        for v in [-100.0, -1.0, 5.0] {
            a.record(v);
        }
        for v in [50.0, 5000.0] {
            b.record(v);
        }
        a.merge(&b);
        assert_eq!(a.count(), 5);
        let (bins, below, above) = a.bins(&[-10.0, 0.0, 100.0]);
        assert_eq!(bins, vec![1, 2]);
        assert_eq!((below, above), (1, 1));
        assert_eq!(a.count_at_most(5.0), 3);
    }
}
