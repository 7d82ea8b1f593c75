//! The break-even bar's arithmetic: quantiles, the excess TTFT of a
//! decision, the static bar derived from the scored decisions, and the
//! recommendation's YAML.

use gatecal_filter::PenaltyMode;

use super::schema::ModeParams;

/// Exact nearest-rank quantile (`k = ceil(q n)`) of sorted values.
pub(super) fn nearest_rank(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let k = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[k - 1])
}

/// The excess TTFT of one decision, ms: holding when the gate input `g`
/// exceeds the break-even `b` costs `g - b`; releasing when it does not costs
/// `b - g`.
pub fn excess_ms(g: f64, b: f64, released: bool) -> f64 {
    if released {
        (b - g).max(0.0)
    } else {
        (g - b).max(0.0)
    }
}

/// A milliseconds value as the reports print it.
pub fn fmt_ms(v: f64) -> String {
    crate::config::epp::writer::yaml_number(v)
}

/// The static bar minimising the summed excess TTFT of `scored` (gate
/// input, break-even) pairs, ms: the static gate holds iff `g <= bar`.
///
/// With the pairs sorted by `g`, holding the first `k` costs
/// `sum_{i<k} max(0, g_i - b_i) + sum_{i>=k} max(0, b_i - g_i)`; every bar
/// in `[g_{k-1}, g_k)` gives that cost. The cheapest `k` (the largest on a
/// tie: fewer releases) is taken, and within its interval the bar with the
/// fewest significant digits nearest the break-even p50. A bar must be > 0
/// (0 means "always stick"). `None` without pairs.
pub fn derive_static_bar(scored: &[(f64, f64)], p50: Option<f64>) -> Option<f64> {
    if scored.is_empty() {
        return None;
    }
    let mut v: Vec<(f64, f64)> = scored
        .iter()
        .copied()
        .filter(|(g, b)| g.is_finite() && b.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = v.len();
    // release cost of i..n
    let mut rel = vec![0.0f64; n + 1];
    for i in (0..n).rev() {
        rel[i] = rel[i + 1] + (v[i].1 - v[i].0).max(0.0);
    }
    let mut best: Option<(f64, usize)> = None;
    let mut held = 0.0f64;
    for k in 0..=n {
        if k > 0 {
            held += (v[k - 1].0 - v[k - 1].1).max(0.0);
        }
        // k must sit at a boundary between distinct gate inputs, and the
        // interval must hold a positive bar.
        if k > 0 && k < n && v[k - 1].0 == v[k].0 {
            continue;
        }
        if k < n && v[k].0 <= 0.0 {
            continue;
        }
        let cost = held + rel[k];
        if best.is_none_or(|(c, _)| cost <= c) {
            best = Some((cost, k));
        }
    }
    let (_, k) = best?;
    let lo = if k == 0 { 0.0 } else { v[k - 1].0.max(0.0) };
    let hi = if k == n { f64::INFINITY } else { v[k].0 };
    let target = p50
        .unwrap_or(lo)
        .clamp(lo, if hi.is_finite() { hi } else { f64::MAX });
    Some(nice_in(lo, hi, target))
}

/// The number in `[lo, hi)`, `> 0`, with the fewest significant digits,
/// nearest `target`.
fn nice_in(lo: f64, hi: f64, target: f64) -> f64 {
    for digits in 1..=12 {
        let t = target.max(f64::MIN_POSITIVE);
        let p = 10f64.powf(t.log10().floor() - (digits as f64 - 1.0));
        let mut cands = [(t / p).round() * p, (t / p).floor() * p, (t / p).ceil() * p];
        cands.sort_by(|a, b| (a - target).abs().total_cmp(&(b - target).abs()));
        for c in cands {
            if c >= lo && c < hi && c > 0.0 {
                return c;
            }
        }
    }
    if lo > 0.0 { lo } else { (hi / 2.0).min(1.0) }
}

/// The parameters to set, YAML: the recommended mode, the other commented out.
pub(super) fn recommendation_yaml(
    name: &str,
    rec: &ModeParams,
    alt: &ModeParams,
    why: &str,
) -> String {
    let line = |m: &ModeParams, prefix: &str| {
        let mut s = String::new();
        s.push_str(&format!(
            "{prefix}  penaltyMode: {}\n",
            m.penalty_mode.as_str()
        ));
        s.push_str(&format!(
            "{prefix}  peakPrefillThroughput: {}\n",
            crate::config::epp::writer::yaml_number(m.peak_prefill_throughput)
        ));
        let note = match (m.penalty_mode, m.max_ttft_penalty_ms == 0.0) {
            (PenaltyMode::MatchedTokens, true) => "   # no ceiling",
            (PenaltyMode::MatchedTokens, false) => "   # ceiling",
            _ => "",
        };
        s.push_str(&format!(
            "{prefix}  maxTTFTPenaltyMs: {}{note}\n",
            crate::config::epp::writer::yaml_number(m.max_ttft_penalty_ms)
        ));
        s
    };
    let mut out = format!(
        "# {name}: set on your prefix-cache-affinity-filter entry (its name and other parameters unchanged), or write your config back with --emit-config\n# why: {why}\nparameters:\n"
    );
    out.push_str(&line(rec, ""));
    out.push_str(&format!(
        "# alternative, not recommended ({}):\n",
        alt.penalty_mode.as_str()
    ));
    out.push_str(&line(alt, "#"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_bar_minimises_excess() {
        // (gate input, break-even) ms: the ideal holds 100 and 900 and
        // releases 700 and 3000, which no single bar does.
        let pairs = [
            (100.0, 500.0),
            (700.0, 500.0),
            (900.0, 2000.0),
            (3000.0, 2000.0),
        ];
        let cost = |bar: f64| -> f64 { pairs.iter().map(|&(g, b)| excess_ms(g, b, g > bar)).sum() };
        let bar = derive_static_bar(&pairs, Some(1000.0)).unwrap();
        let best = [
            50.0, 100.0, 400.0, 700.0, 800.0, 900.0, 1000.0, 2000.0, 3000.0, 5000.0,
        ]
        .into_iter()
        .map(cost)
        .fold(f64::INFINITY, f64::min);
        assert_eq!(cost(bar), best);
        // Holding up to 900 (700 costs 200) beats releasing 700 and 900
        // (900 costs 1100).
        assert!((900.0..3000.0).contains(&bar), "{bar}");
        assert_eq!(derive_static_bar(&[], None), None);
        assert!(derive_static_bar(&[(-5.0, 10.0)], None).unwrap() > 0.0);
    }

    #[test]
    fn quantiles_are_exact() {
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(nearest_rank(&v, 0.1), Some(1));
        assert_eq!(nearest_rank(&v, 0.5), Some(5));
        assert_eq!(nearest_rank(&v, 0.9), Some(9));
        assert_eq!(nearest_rank(&[], 0.5), None);
    }
}
