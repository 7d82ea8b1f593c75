//! Before and after: two gate-dist reports of the same analysis side by
//! side, per deployment, with the deltas and whether each is significant.
//!
//! The structs are the JSON schema `gatecal.compare/v1` (documented in
//! `docs/json-schema.md`).
//!
//! # Method
//!
//! *Shares* (released, held, pinned worse, each what-if's and candidate
//! config's release share) are compared with a two-sided two-proportion
//! z-test on the pooled share: `z = (p₂ − p₁) / √(p(1 − p)(1/n₁ + 1/n₂))`,
//! `p = (x₁ + x₂)/(n₁ + n₂)`, p-value `erfc(|z|/√2)`; a difference is
//! significant when the p-value is below α = 0.05. The 95 % interval of the
//! difference is Wald's (unpooled). When an expected count under the pooled
//! share is below 5 the normal approximation is poor: the row says so
//! (`small_counts`).
//!
//! *Quantiles* (gate input and observed TTFT p50, p90, p99) are compared
//! with a percentile bootstrap of the difference (candidate − baseline),
//! [`BOOTSTRAP_RESAMPLES`] resamples from a fixed seed, so a report is
//! reproducible. Each side is resampled from its histogram (HdrHistogram
//! buckets, 3 significant digits), not from the values: memory is bounded
//! by the buckets, whatever the number of decisions. The nearest-rank
//! quantile of a resample of `n` values is its `k`-th smallest value,
//! `k = ⌈qn⌉`, and the `k`-th smallest of `n` draws from a distribution
//! `F` is `F⁻¹(U)` with `U ~ Beta(k, n + 1 − k)` (the `k`-th order
//! statistic of `n` uniforms): one Beta draw per resample gives the
//! resampled quantile exactly, without drawing the `n` values. The
//! interval is the 2.5th to 97.5th percentile of the resampled
//! differences; a difference is significant when the interval excludes
//! zero. Where fewer than 5 values of either side lie beyond the quantile
//! (`n(1 − q) < 5`), the bootstrap of that quantile is unreliable: the row
//! says so (`small_sample`).
//!
//! Both tests treat decisions as independent. Decisions close in time
//! share the endpoints' load, so they are not: the p-values and intervals
//! are optimistic, and a difference near the edge of significance is weak
//! evidence (the report's notes say so).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::findings::Finding;
use crate::report::gate_dist::{DeploymentReport, GateDistReport};

/// The schema id of the JSON document.
pub const SCHEMA: &str = "gatecal.compare/v1";

/// The significance level of every test.
pub const ALPHA: f64 = 0.05;

/// Resamples of each quantile's bootstrap.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The bootstrap's seed (each row's stream is derived from it and the
/// row's deployment and figure, so a row does not depend on the others).
pub const BOOTSTRAP_SEED: u64 = 0x5eed_c0de;

/// Below this expected count (shares) or tail count (quantiles), a test's
/// approximation is poor and its row is flagged.
pub const MIN_EXPECTED: f64 = 5.0;

pub use super::Buckets;

/// The methods, as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Method {
    /// The significance level.
    pub alpha: f64,
    /// How shares are compared.
    pub share_test: &'static str,
    /// How quantiles are compared.
    pub quantile_interval: &'static str,
    /// Resamples of each bootstrap.
    pub bootstrap_resamples: usize,
    /// The bootstrap's seed.
    pub bootstrap_seed: u64,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            alpha: ALPHA,
            share_test: "two-sided two-proportion z-test on the pooled share; 95 % Wald interval of the difference",
            quantile_interval: "95 % percentile bootstrap of the difference (candidate − baseline), each side resampled from its histogram",
            bootstrap_resamples: BOOTSTRAP_RESAMPLES,
            bootstrap_seed: BOOTSTRAP_SEED,
        }
    }
}

/// One side of the comparison, as a whole.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Side {
    /// What the side is, as given (`--compare`'s argument, or the half of
    /// `--compare-at`'s split).
    pub label: String,
    /// Decisions counted from this time on (seconds since the epoch;
    /// absent when not bounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    /// Decisions counted before this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
    /// First decision counted.
    pub first_ts: Option<f64>,
    /// Last decision counted.
    pub last_ts: Option<f64>,
    /// Decisions counted, over every deployment.
    pub decisions: u64,
    /// The inputs, as read.
    pub inputs: Vec<String>,
    /// Lines read.
    pub lines_total: u64,
    /// Of those, lines that could not be read.
    pub lines_malformed: u64,
    /// The side's findings, most severe first.
    pub findings: Vec<Finding>,
}

/// Where a deployment was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// On both sides.
    Both,
    /// In the baseline only.
    BaselineOnly,
    /// In the candidate only.
    CandidateOnly,
}

impl Presence {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Presence::Both => "both",
            Presence::BaselineOnly => "baseline only",
            Presence::CandidateOnly => "candidate only",
        }
    }
}

/// One deployment on one side: what the figures were computed under.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeploymentSide {
    /// Decisions.
    pub decisions: u64,
    /// First decision time.
    pub first_ts: Option<f64>,
    /// Last decision time.
    pub last_ts: Option<f64>,
    /// Where the config came from (`config.source` of the report).
    pub config_source: String,
    /// `maxTTFTPenaltyMs` in force.
    pub max_ttft_penalty_ms: f64,
    /// `peakPrefillThroughput` in force.
    pub peak_prefill_throughput: f64,
    /// `penaltyMode` in force.
    pub penalty_mode: gatecal_filter::PenaltyMode,
}

/// A share on one side.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Proportion {
    /// Decisions counted.
    pub count: u64,
    /// Of this many.
    pub n: u64,
    /// `count / n` (`null` when `n` is 0).
    pub share: Option<f64>,
}

impl Proportion {
    fn new(count: u64, n: u64) -> Proportion {
        Proportion {
            count,
            n,
            share: (n > 0).then(|| count as f64 / n as f64),
        }
    }
}

/// A share compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareDelta {
    /// The figure, named as in the gate-dist JSON (`released_share`,
    /// `sticky_share`, `pinned_worse.share`, `what_if[i].released_share`,
    /// `candidates[i].released_share`).
    pub figure: String,
    /// As printed.
    pub label: String,
    /// The baseline's (`null` when the deployment is not there).
    pub baseline: Option<Proportion>,
    /// The candidate's.
    pub candidate: Option<Proportion>,
    /// `candidate − baseline` (`null` unless both shares exist).
    pub delta: Option<f64>,
    /// The 95 % Wald interval of the difference.
    pub interval: Option<[f64; 2]>,
    /// The z statistic.
    pub z: Option<f64>,
    /// The two-sided p-value.
    pub p_value: Option<f64>,
    /// `p_value < alpha`.
    pub significant: bool,
    /// An expected count under the pooled share is below 5: the z-test's
    /// normal approximation is poor.
    pub small_counts: bool,
}

/// A quantile on one side.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct QuantileSide {
    /// The quantile, ms (`null` without values).
    pub value: Option<f64>,
    /// Values in the distribution.
    pub n: u64,
}

/// A quantile compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuantileDelta {
    /// The figure, named as in the gate-dist JSON (`gate_input_ms.p50`,
    /// `observed_ttft_ms.p90`, ...).
    pub figure: String,
    /// As printed.
    pub label: String,
    /// The baseline's (`null` when the deployment is not there).
    pub baseline: Option<QuantileSide>,
    /// The candidate's.
    pub candidate: Option<QuantileSide>,
    /// `candidate − baseline`, ms.
    pub delta: Option<f64>,
    /// The bootstrap's 95 % interval of the difference, ms.
    pub interval: Option<[f64; 2]>,
    /// The interval excludes zero.
    pub significant: bool,
    /// Fewer than 5 values of a side lie beyond the quantile: its
    /// bootstrap is unreliable.
    pub small_sample: bool,
}

/// One deployment compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeploymentCompare {
    /// Deployment name (matched between the sides by name).
    pub name: String,
    /// Where it was found.
    pub presence: Presence,
    /// The baseline's config and decisions (`null` when absent there).
    pub baseline: Option<DeploymentSide>,
    /// The candidate's.
    pub candidate: Option<DeploymentSide>,
    /// Shares, in a fixed order.
    pub shares: Vec<ShareDelta>,
    /// Quantiles, in a fixed order.
    pub quantiles: Vec<QuantileDelta>,
    /// What to keep in mind reading this deployment's rows.
    pub notes: Vec<String>,
}

/// The whole comparison: `gatecal.compare/v1`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareReport {
    /// `gatecal.compare/v1`.
    pub schema: &'static str,
    /// The tests.
    pub method: Method,
    /// The first side given.
    pub baseline: Side,
    /// The second.
    pub candidate: Side,
    /// Per deployment, sorted by name.
    pub deployments: Vec<DeploymentCompare>,
    /// What to keep in mind reading any row.
    pub notes: Vec<String>,
}

/// The note every comparison carries.
pub const INDEPENDENCE_NOTE: &str = "the tests treat decisions as independent; decisions close in time share the endpoints' load, so p-values and intervals are optimistic: a difference near the edge of significance is weak evidence";

/// Compares two reports of the same analysis: `baseline` and `candidate`
/// are the sides' reports with their labels (and `--compare-at`'s bounds,
/// when a side is half of a split).
pub fn compare(
    baseline: (&GateDistReport, Side),
    candidate: (&GateDistReport, Side),
) -> CompareReport {
    let (a, sa) = baseline;
    let (b, sb) = candidate;
    let mut names: BTreeMap<&str, (Option<&DeploymentReport>, Option<&DeploymentReport>)> =
        BTreeMap::new();
    for d in &a.deployments {
        names.entry(&d.name).or_default().0 = Some(d);
    }
    for d in &b.deployments {
        names.entry(&d.name).or_default().1 = Some(d);
    }
    let deployments = names
        .into_iter()
        .map(|(name, (x, y))| deployment(name, x, y))
        .collect();
    CompareReport {
        schema: SCHEMA,
        method: Method::default(),
        baseline: sa,
        candidate: sb,
        deployments,
        notes: vec![INDEPENDENCE_NOTE.to_string()],
    }
}

/// A side's summary of a report.
pub fn side(label: String, r: &GateDistReport) -> Side {
    let (first, last) = r.time_range();
    Side {
        label,
        since: r.options.since,
        until: r.options.until,
        first_ts: first,
        last_ts: last,
        decisions: r.deployments.iter().map(|d| d.stats.decisions).sum(),
        inputs: r.input.inputs.clone(),
        lines_total: r.input.lines_total,
        lines_malformed: r.input.lines_malformed,
        findings: r.findings.clone(),
    }
}

fn deployment_side(d: &DeploymentReport) -> DeploymentSide {
    let p = &d.config.parameters;
    DeploymentSide {
        decisions: d.stats.decisions,
        first_ts: d.first_ts,
        last_ts: d.last_ts,
        config_source: d.config.source.clone(),
        max_ttft_penalty_ms: p.max_ttft_penalty_ms,
        peak_prefill_throughput: p.peak_prefill_throughput,
        penalty_mode: p.penalty_mode,
    }
}

/// A share's figure of a deployment: `(figure, label, count, n)`.
type ShareOf = (String, String, u64, u64);

fn shares_of(d: &DeploymentReport) -> Vec<ShareOf> {
    let st = &d.stats;
    let n = st.decisions;
    let sticky = st.outcomes.get("sticky").copied().unwrap_or(0);
    let mut v = vec![
        ("released_share".into(), "released".into(), st.released, n),
        ("sticky_share".into(), "held (sticky)".into(), sticky, n),
        (
            "pinned_worse.share".into(),
            format!("pinned ≥{} ms", grouped(st.pinned_worse.min_ms)),
            st.pinned_worse.count,
            n,
        ),
    ];
    for (i, w) in st.what_if.iter().enumerate() {
        v.push((
            format!("what_if[{i}].released_share"),
            format!(
                "released, what-if {}",
                rule_label(w, Some(d.config.parameters.peak_prefill_throughput))
            ),
            w.released,
            n,
        ));
    }
    for (i, c) in st.candidates.iter().enumerate() {
        let replayed = n.saturating_sub(c.invalid);
        v.push((
            format!("candidates[{i}].released_share"),
            format!("released, {}", c.label),
            c.result.released,
            replayed,
        ));
    }
    v
}

/// A what-if's rule in words: `static, bar 1,000 ms, peak 8,000 tok/s`
/// (the peak left out when it is `peak_in_force`).
pub fn rule_label(w: &crate::WhatIfResult, peak_in_force: Option<f64>) -> String {
    use gatecal_filter::PenaltyMode;
    let peak = w
        .peak_prefill_throughput
        .filter(|p| Some(*p) != peak_in_force)
        .map(|p| format!(", peak {} tok/s", grouped(p)))
        .unwrap_or_default();
    match w.mode {
        PenaltyMode::Static => match w.max_ttft_penalty_ms {
            Some(b) => format!("static, bar {} ms{peak}", grouped(b)),
            None => format!("static, mixed bars{peak}"),
        },
        PenaltyMode::MatchedTokens => match w.max_ttft_penalty_ms {
            Some(m) if m > 0.0 => format!("matchedTokens, ceiling {} ms{peak}", grouped(m)),
            Some(_) => format!("matchedTokens, no ceiling{peak}"),
            None => format!("matchedTokens, mixed ceilings{peak}"),
        },
    }
}

/// A number rounded to an integer, thousands grouped with commas.
pub fn grouped(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let r = v.round();
    let digits = format!("{}", r.abs() as u128);
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if r < 0.0 { format!("-{out}") } else { out }
}

/// The quantiles compared: `(figure, label, q)`.
const QUANTILES: [(&str, &str, f64); 6] = [
    ("gate_input_ms.p50", "gate input p50", 0.5),
    ("gate_input_ms.p90", "gate input p90", 0.9),
    ("gate_input_ms.p99", "gate input p99", 0.99),
    ("observed_ttft_ms.p50", "observed TTFT p50", 0.5),
    ("observed_ttft_ms.p90", "observed TTFT p90", 0.9),
    ("observed_ttft_ms.p99", "observed TTFT p99", 0.99),
];

/// A quantile of a deployment: its value, count and buckets.
type QuantileOf<'a> = (Option<f64>, u64, &'a [(f64, u64)]);

/// The `i`-th of [`QUANTILES`] of a deployment.
fn quantile_of(d: &DeploymentReport, i: usize) -> QuantileOf<'_> {
    let g = &d.stats.gate_input_ms;
    let o = &d.observed_ttft_ms;
    match i {
        0 => (g.p50, g.count, &d.buckets.gate_input_ms),
        1 => (g.p90, g.count, &d.buckets.gate_input_ms),
        2 => (g.p99, g.count, &d.buckets.gate_input_ms),
        3 => (o.p50, o.n, &d.buckets.observed_ttft_ms),
        4 => (o.p90, o.n, &d.buckets.observed_ttft_ms),
        _ => (o.p99, o.n, &d.buckets.observed_ttft_ms),
    }
}

fn deployment(
    name: &str,
    a: Option<&DeploymentReport>,
    b: Option<&DeploymentReport>,
) -> DeploymentCompare {
    let presence = match (a, b) {
        (Some(_), None) => Presence::BaselineOnly,
        (None, Some(_)) => Presence::CandidateOnly,
        _ => Presence::Both,
    };
    // Shares: the baseline's rows in order, then the candidate's rows the
    // baseline lacks (a candidate config given on one side only cannot
    // happen: both sides run the same flags).
    let sa = a.map(shares_of).unwrap_or_default();
    let sb = b.map(shares_of).unwrap_or_default();
    let mut figures: Vec<(String, String)> =
        sa.iter().map(|(f, l, ..)| (f.clone(), l.clone())).collect();
    for (f, l, ..) in &sb {
        if !figures.iter().any(|(g, _)| g == f) {
            figures.push((f.clone(), l.clone()));
        }
    }
    let find = |v: &[ShareOf], f: &str| {
        v.iter()
            .find(|(g, ..)| g == f)
            .map(|(_, _, c, n)| Proportion::new(*c, *n))
    };
    let shares = figures
        .into_iter()
        .map(|(f, l)| {
            let (x, y) = (find(&sa, &f), find(&sb, &f));
            share_delta(f, l, x, y)
        })
        .collect();
    let quantiles = QUANTILES
        .iter()
        .enumerate()
        .map(|(i, (figure, label, q))| {
            let x = a.map(|d| quantile_of(d, i));
            let y = b.map(|d| quantile_of(d, i));
            let side = |v: &Option<QuantileOf>| {
                v.as_ref().map(|(value, n, _)| QuantileSide {
                    value: *value,
                    n: *n,
                })
            };
            let mut row = QuantileDelta {
                figure: figure.to_string(),
                label: label.to_string(),
                baseline: side(&x),
                candidate: side(&y),
                delta: None,
                interval: None,
                significant: false,
                small_sample: false,
            };
            if let (Some((Some(va), na, ba)), Some((Some(vb), nb, bb))) = (x, y) {
                row.delta = Some(vb - va);
                row.small_sample = (na.min(nb) as f64) * (1.0 - q) < MIN_EXPECTED;
                let seed = BOOTSTRAP_SEED ^ fnv(name) ^ fnv(figure).rotate_left(17);
                if let Some(iv) = bootstrap_difference(ba, bb, *q, BOOTSTRAP_RESAMPLES, seed) {
                    row.significant = iv[0] > 0.0 || iv[1] < 0.0;
                    row.interval = Some(iv);
                }
            }
            row
        })
        .collect();
    let mut notes = Vec::new();
    if let (Some(x), Some(y)) = (a, b) {
        let (pa, pb) = (
            x.config.parameters.peak_prefill_throughput,
            y.config.parameters.peak_prefill_throughput,
        );
        if pa != pb {
            notes.push(format!(
                "the peak differs between the sides ({} and {} tok/s): each side's gate input is in ms at its own peak, so its delta mixes the change of load with the change of peak",
                grouped(pa),
                grouped(pb)
            ));
        }
    }
    DeploymentCompare {
        name: name.to_string(),
        presence,
        baseline: a.map(deployment_side),
        candidate: b.map(deployment_side),
        shares,
        quantiles,
        notes,
    }
}

/// Compares two shares (`candidate − baseline`).
pub fn share_delta(
    figure: String,
    label: String,
    a: Option<Proportion>,
    b: Option<Proportion>,
) -> ShareDelta {
    let mut row = ShareDelta {
        figure,
        label,
        baseline: a,
        candidate: b,
        delta: None,
        interval: None,
        z: None,
        p_value: None,
        significant: false,
        small_counts: false,
    };
    let (Some(a), Some(b)) = (a, b) else {
        return row;
    };
    let (Some(p1), Some(p2)) = (a.share, b.share) else {
        return row;
    };
    let (n1, n2) = (a.n as f64, b.n as f64);
    let d = p2 - p1;
    row.delta = Some(d);
    let half = 1.959_963_984_540_054 * (p1 * (1.0 - p1) / n1 + p2 * (1.0 - p2) / n2).sqrt();
    row.interval = Some([d - half, d + half]);
    let p = (a.count + b.count) as f64 / (n1 + n2);
    row.small_counts = [n1 * p, n1 * (1.0 - p), n2 * p, n2 * (1.0 - p)]
        .iter()
        .any(|e| *e < MIN_EXPECTED);
    let se = (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt();
    let z = if se > 0.0 { d / se } else { 0.0 };
    let pv = erfc(z.abs() / std::f64::consts::SQRT_2).clamp(0.0, 1.0);
    row.z = Some(z);
    row.p_value = Some(pv);
    row.significant = pv < ALPHA;
    row
}

/// The complementary error function (Chebyshev fit, relative error below
/// 1.2e-7 everywhere).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// FNV-1a of a string: a row's seed from its names.
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The histogram's values as a distribution to draw from: cumulative
/// counts over the buckets.
struct Cdf<'a> {
    buckets: &'a [(f64, u64)],
    cum: Vec<u64>,
    n: u64,
}

impl<'a> Cdf<'a> {
    fn new(buckets: &'a [(f64, u64)]) -> Cdf<'a> {
        let mut cum = Vec::with_capacity(buckets.len());
        let mut n = 0u64;
        for (_, c) in buckets {
            n += c;
            cum.push(n);
        }
        Cdf { buckets, cum, n }
    }

    /// The nearest-rank quantile of a resample of `n` values, drawn:
    /// `F⁻¹(U)`, `U ~ Beta(k, n + 1 − k)`.
    fn resampled(&self, q: f64, rng: &mut crate::rng::SplitMix) -> f64 {
        let n = self.n;
        let k = ((q * n as f64).ceil() as u64).clamp(1, n);
        let u = rng.beta(k as f64, (n + 1 - k) as f64);
        // The smallest bucket whose cumulative count reaches rank ⌈u·n⌉.
        let rank = ((u * n as f64).ceil() as u64).clamp(1, n);
        let i = self.cum.partition_point(|&c| c < rank);
        self.buckets[i.min(self.buckets.len() - 1)].0
    }
}

/// The percentile bootstrap's 95 % interval of `quantile(b) − quantile(a)`
/// over `resamples` resamples of each side's buckets; `None` when a side
/// has no value.
pub fn bootstrap_difference(
    a: &[(f64, u64)],
    b: &[(f64, u64)],
    q: f64,
    resamples: usize,
    seed: u64,
) -> Option<[f64; 2]> {
    let (ca, cb) = (Cdf::new(a), Cdf::new(b));
    if ca.n == 0 || cb.n == 0 || resamples == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let mut rng = crate::rng::SplitMix(seed);
    let mut diffs: Vec<f64> = (0..resamples)
        .map(|_| cb.resampled(q, &mut rng) - ca.resampled(q, &mut rng))
        .collect();
    diffs.sort_by(f64::total_cmp);
    let at = |p: f64| {
        let k = ((p * resamples as f64).ceil() as usize).clamp(1, resamples);
        diffs[k - 1]
    };
    Some([at(0.025), at(0.975)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        // The two-sided p-value at z = 1.96 is 0.05.
        let p = erfc(1.959_963_984_540_054 / std::f64::consts::SQRT_2);
        assert!((p - 0.05).abs() < 1e-6, "{p}");
        assert!((erfc(-1.0) - 1.842_700_792_949_715).abs() < 1e-6);
        assert!(erfc(10.0) < 1e-40);
    }

    fn prop(c: u64, n: u64) -> Option<Proportion> {
        Some(Proportion::new(c, n))
    }

    #[test]
    fn two_proportion_test() {
        // 10 % vs 20 % of 500 each: z ≈ 4.43, clearly significant.
        let r = share_delta("x".into(), "x".into(), prop(50, 500), prop(100, 500));
        assert!((r.delta.unwrap() - 0.1).abs() < 1e-12);
        let z = r.z.unwrap();
        assert!((z - 4.428).abs() < 0.01, "{z}");
        assert!(r.p_value.unwrap() < 1e-4 && r.significant);
        let [lo, hi] = r.interval.unwrap();
        assert!(lo > 0.05 && hi < 0.15, "{lo} {hi}");
        // The same share: z = 0, p = 1.
        let r = share_delta("x".into(), "x".into(), prop(50, 500), prop(40, 400));
        assert_eq!(r.z, Some(0.0));
        assert!((r.p_value.unwrap() - 1.0).abs() < 1e-6 && !r.significant);
        // 0 of both: nothing differs, flagged small.
        let r = share_delta("x".into(), "x".into(), prop(0, 100), prop(0, 100));
        assert_eq!(r.p_value, Some(1.0));
        assert!(!r.significant && r.small_counts);
        // 52 % vs 50 % of 100: not significant.
        let r = share_delta("x".into(), "x".into(), prop(52, 100), prop(50, 100));
        assert!(r.p_value.unwrap() > 0.7 && !r.significant);
        // A side without decisions: no test.
        let r = share_delta("x".into(), "x".into(), prop(0, 0), prop(5, 10));
        assert_eq!((r.delta, r.p_value, r.significant), (None, None, false));
        let r = share_delta("x".into(), "x".into(), None, prop(5, 10));
        assert_eq!((r.delta, r.p_value), (None, None));
    }

    /// Buckets of the values 1..=n ms, each once, shifted by `shift`.
    fn uniform(n: u64, shift: f64) -> Vec<(f64, u64)> {
        (1..=n).map(|v| (v as f64 + shift, 1)).collect()
    }

    #[test]
    fn bootstrap_interval_covers_a_shift_and_excludes_none() {
        let a = uniform(1000, 0.0);
        // The same distribution: the interval holds 0.
        let iv = bootstrap_difference(&a, &a, 0.5, 2000, 7).unwrap();
        assert!(iv[0] <= 0.0 && iv[1] >= 0.0, "{iv:?}");
        // Its width is about that of a median's: 2 × 1.96 × √(n/4) / n of
        // the range each side, √2 for two: about ±44 ms here.
        assert!(iv[1] - iv[0] > 40.0 && iv[1] - iv[0] < 140.0, "{iv:?}");
        // Shifted by 200 ms: the interval holds 200 and excludes 0.
        let b = uniform(1000, 200.0);
        let iv = bootstrap_difference(&a, &b, 0.5, 2000, 7).unwrap();
        assert!(iv[0] > 0.0 && iv[0] < 200.0 && iv[1] > 200.0, "{iv:?}");
        // Deterministic for a seed.
        assert_eq!(
            bootstrap_difference(&a, &b, 0.9, 500, 3),
            bootstrap_difference(&a, &b, 0.9, 500, 3)
        );
        // No value on a side: no interval.
        assert_eq!(bootstrap_difference(&a, &[], 0.5, 100, 1), None);
    }

    #[test]
    fn resampled_quantile_has_the_order_statistics_spread() {
        // One bucket per value 1..=100: the resampled median's mean is
        // near 50.5 and its standard deviation near √(n/4) = 5 values.
        let a = uniform(100, 0.0);
        let cdf = Cdf::new(&a);
        let mut rng = crate::rng::SplitMix(11);
        let v: Vec<f64> = (0..4000).map(|_| cdf.resampled(0.5, &mut rng)).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!((mean - 50.5).abs() < 1.0, "{mean}");
        assert!(sd > 4.0 && sd < 6.5, "{sd}");
        // A one-bucket histogram always gives its value.
        let one = [(42.0, 10)];
        let cdf = Cdf::new(&one);
        assert_eq!(cdf.resampled(0.99, &mut rng), 42.0);
    }

    #[test]
    fn grouped_numbers() {
        assert_eq!(grouped(18000.0), "18,000");
        assert_eq!(grouped(999.4), "999");
        assert_eq!(grouped(-1234567.0), "-1,234,567");
    }
}
