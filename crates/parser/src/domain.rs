//! The domain of each kind of value, one check per kind shared by every
//! input format: EPP log lines, decision records, trace spans and
//! Prometheus samples. A value outside its domain is refused the same way
//! and with the same words (`value of KEY out of range`) whichever format
//! it came in.
//!
//! | kind | domain | read from |
//! |---|---|---|
//! | count (tokens, requests, endpoints, blocks, tokens/s) | finite, 0 to [`MAX_COUNT`] | log lines' counts, records' candidates and `prompt_tokens`, spans' `sticky_endpoints` and `candidate_endpoints`, Prometheus counters and gauges |
//! | threshold (fractions, scores, costs) | finite | log lines' `affinityThreshold`, `tau`, …, spans' `affinity_threshold` |
//! | timestamp | [`TS_RANGE`]: 1970-01-01 to before 2100-01-01 UTC | log lines' `ts` and kubelet prefix, records' `ts`, spans' start time, Prometheus sample times |
//!
//! TTFTs and penalties are not checked: NaN, infinities and
//! `math.MaxFloat64` are what the EPP writes for a side without a
//! prediction (flagged, see [`crate::ValueFlags`]).

/// Times a value may carry, epoch seconds: from 1970-01-01 to before
/// 2100-01-01 UTC. A later time (year 9999, say) would move the
/// assembler's clock and evict every open request, and the reorder
/// buffer's, and release every decision unordered; an earlier one is no
/// time the EPP, a Collector or Prometheus writes.
pub const TS_RANGE: std::ops::Range<f64> = 0.0..4_102_444_800.0;

/// The largest count: 2^53, the largest integer an `f64` holds exactly. A
/// counter past it (a Prometheus sample of `1e308`) is no count of tokens
/// or requests.
pub const MAX_COUNT: f64 = 9_007_199_254_740_992.0;

/// Whether `x` is a count: finite, from 0 to [`MAX_COUNT`].
pub fn is_count(x: f64) -> bool {
    (0.0..=MAX_COUNT).contains(&x)
}

/// Whether `x` is a threshold (a fraction, a score, a cost): finite.
pub fn is_threshold(x: f64) -> bool {
    x.is_finite()
}

/// Whether `t` (epoch seconds) is a time in [`TS_RANGE`].
pub fn is_timestamp(t: f64) -> bool {
    TS_RANGE.contains(&t)
}

/// The reason a value outside its domain is refused, the same for every
/// format: `value of `KEY` out of range`.
pub fn out_of_range(key: &'static str) -> crate::MalformedReason {
    crate::MalformedReason::OutOfRange(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        assert!(is_count(0.0) && is_count(3.0) && is_count(MAX_COUNT));
        for x in [-1.0, -0.5, f64::NAN, f64::INFINITY, 1e308, MAX_COUNT * 2.0] {
            assert!(!is_count(x), "{x}");
        }
        assert!(is_threshold(0.8) && is_threshold(-3.0));
        assert!(!is_threshold(f64::NAN) && !is_threshold(f64::NEG_INFINITY));
        assert!(is_timestamp(0.0) && is_timestamp(1_764_482_019.25));
        // -1 ns, year 2100, year 9999, NaN.
        for t in [-1e-9, 4_102_444_800.0, 253_402_300_000.0, f64::NAN] {
            assert!(!is_timestamp(t), "{t}");
        }
        assert_eq!(out_of_range("ts").to_string(), "value of `ts` out of range");
    }
}
