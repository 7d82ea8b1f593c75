//! Predicted TTFT under a candidate config: the deployment's logged traffic
//! ([`workload`]) replayed through the filter core, a picker and an engine
//! model ([`replay`]).
//!
//! # Method
//!
//! 1. The workload is inferred once per deployment from its decisions
//!    ([`workload::infer`]), with the engine model at the estimated peak.
//! 2. Each candidate config is replayed over that workload
//!    ([`replay::replay`]); the TTFTs of the replay give the predicted
//!    p50, p90 and p99 (nearest rank), the cached share of prompt tokens
//!    and the share of requests whose pin was released.
//! 3. **Interval** (90 %): the replay is run again at both ends of the
//!    peak's 90 % interval (the engine's speed is the largest single
//!    uncertainty of the model), and each quantile's range over those runs
//!    is widened by the quantile's own sampling interval: the ranks
//!    `n·q ± 1.645·√(n·q·(1−q))` of the sorted TTFTs (a binomial interval
//!    for the rank, so a p99 over 300 requests is honestly wide).
//!
//! # Self-check
//!
//! The replay of the config in force predicts what the log observed: beside
//! the observed TTFT it shows whether the engine model and the workload are
//! right before any other config is trusted. Limits of the inference are in
//! [`workload`]'s docs; the engine model's assumptions in [`replay`]'s.

pub mod replay;
pub mod workload;

use gatecal_filter::Config;

use crate::input::DecisionInput;
use replay::{EngineModel, Picker, Replay, replay};
use workload::{Seen, Workload};

/// The quantiles predicted by the replay of one config, with their
/// intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Nearest-rank p50, p90, p99 of the predicted TTFTs, ms.
    pub quantiles_ms: [f64; 3],
    /// 90 % interval of each, ms.
    pub intervals_ms: [[f64; 2]; 3],
    /// Requests replayed.
    pub n: usize,
    /// Cached share of prompt tokens.
    pub prefix_hit_share: Option<f64>,
    /// Share of requests whose pin was released.
    pub release_share: Option<f64>,
}

/// The quantiles this module predicts.
pub const QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// `z` of a two-sided 90 % normal interval.
const Z90: f64 = 1.644_853_626_951_472_2;

fn sorted_ms(r: &Replay) -> Vec<f64> {
    let mut v = r.ttfts_ms();
    v.sort_by(f64::total_cmp);
    v
}

/// The nearest-rank quantile of sorted values (`ceil(q·n)`-th smallest).
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let k = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[k - 1])
}

/// The 90 % interval of the nearest-rank quantile `q` of `sorted`, from
/// the binomial spread of its rank.
pub fn rank_interval(sorted: &[f64], q: f64) -> Option<[f64; 2]> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let half = Z90 * (nf * q * (1.0 - q)).sqrt();
    let lo = ((nf * q - half).floor() as isize).clamp(1, n as isize) as usize;
    let hi = ((nf * q + half).ceil() as isize).clamp(1, n as isize) as usize;
    Some([sorted[lo - 1], sorted[hi - 1]])
}

/// Predicts the TTFT of `config` over `w`, with `model` at the estimated
/// peak and `peak_interval` the peak's 90 % interval (when the estimator
/// gives one).
pub fn predict(
    w: &Workload,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
    peak_interval: Option<[f64; 2]>,
) -> Option<Prediction> {
    let n_ep = w.endpoints.len();
    let main = replay(&w.requests, n_ep, config, picker, model);
    let sorted = sorted_ms(&main);
    if sorted.is_empty() {
        return None;
    }
    let mut runs = vec![sorted];
    for peak in peak_interval.into_iter().flatten() {
        if peak.is_finite() && peak > 0.0 && peak != model.peak_tps {
            let m = EngineModel {
                peak_tps: peak,
                ..*model
            };
            runs.push(sorted_ms(&replay(&w.requests, n_ep, config, picker, &m)));
        }
    }
    let mut quantiles_ms = [0.0; 3];
    let mut intervals_ms = [[0.0; 2]; 3];
    for (k, &q) in QUANTILES.iter().enumerate() {
        quantiles_ms[k] = nearest_rank(&runs[0], q)?;
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for r in &runs {
            let [a, b] = rank_interval(r, q)?;
            lo = lo.min(a);
            hi = hi.max(b);
        }
        intervals_ms[k] = [lo, hi];
    }
    Some(Prediction {
        quantiles_ms,
        intervals_ms,
        n: runs[0].len(),
        prefix_hit_share: main.prefix_hit_share(&w.requests),
        release_share: main.release_share(),
    })
}

/// Largest per-request overhead the fit accepts, seconds.
pub const MAX_OVERHEAD_S: f64 = 2.0;

/// The engine's per-request overhead fitted to the observed first tokens:
/// starting from `model`'s, the replay of the config in force (the routing
/// the log shows) is run and the overhead moved by the median of observed
/// minus predicted TTFT over the requests with an observed first token,
/// four times (the overhead also lengthens the queues, so one step is not
/// enough). Returns the fitted model and the requests it rests on; `model`
/// unchanged when no request has an observed first token.
pub fn fit_overhead(
    w: &Workload,
    observed_s: &[Option<f64>],
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
) -> (EngineModel, usize) {
    let mut m = *model;
    let mut n = 0;
    for _ in 0..4 {
        let r = replay(&w.requests, w.endpoints.len(), config, picker, &m);
        let mut diffs: Vec<f64> = r
            .served
            .iter()
            .zip(observed_s)
            .filter_map(|(s, o)| Some(o.filter(|o| o.is_finite())? - s.as_ref()?.ttft_s))
            .collect();
        n = diffs.len();
        if diffs.is_empty() {
            return (*model, 0);
        }
        diffs.sort_by(f64::total_cmp);
        let step = diffs[diffs.len() / 2];
        m.overhead_s = (m.overhead_s + step).clamp(0.0, MAX_OVERHEAD_S);
        if step.abs() < 1e-4 {
            break;
        }
    }
    (m, n)
}

impl Seen {
    /// What the workload inference reads of one decision: its time, the
    /// endpoint picked, the outcome, the token loads of its scorer lines,
    /// and the exact candidates when the decision has them. `None` without
    /// a time or a picked endpoint (nothing to replay).
    pub fn from_decision(d: &DecisionInput) -> Option<Seen> {
        let ts = d.ts.filter(|t| t.is_finite())?;
        let chosen = d.chosen.clone()?;
        let exact = d.exact.as_ref().map(|cands| {
            cands
                .iter()
                .map(|c| {
                    let cached = c.matched_tokens() as f64;
                    (c.id.clone(), c.in_flight_tokens.unwrap_or(0) as f64, cached)
                })
                .collect()
        });
        Some(Seen {
            ts,
            chosen,
            outcome: d.outcome,
            loads: d
                .scored
                .iter()
                .filter_map(|s| Some((s.endpoint.clone(), s.token_load.filter(|l| l.is_finite())?)))
                .collect(),
            exact,
            prompt_tokens: d.prompt_tokens.map(|p| p as f64),
            ttft_s: None,
            end_s: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overhead_is_fitted_to_the_observed_first_tokens() {
        use replay::Request;
        // Two endpoints, light load: TTFT = tokens / peak + overhead.
        let requests: Vec<Request> = (0..200)
            .map(|i| Request {
                arrival_s: f64::from(i),
                prompt_tokens: 1000.0 + f64::from(i % 7) * 100.0,
                cold_tokens: 1000.0 + f64::from(i % 7) * 100.0,
                warm_tokens: 1000.0 + f64::from(i % 7) * 100.0,
                session: None,
                parent: None,
                think_s: None,
                decode_s: 0.5,
                draw: 1.0,
                logged_end_s: None,
                holders: Vec::new(),
                prefix_parent: None,
                logged_endpoint: None,
            })
            .collect();
        let truth_model = EngineModel {
            peak_tps: 2000.0,
            overhead_s: 0.08,
            latency_s: 0.0,
            cache_capacity_tokens: f64::INFINITY,
            block_size: 64,
        };
        let config = gatecal_filter::DEFAULT_CONFIG;
        let picker = Picker::default();
        let truth = replay(&requests, 2, &config, &picker, &truth_model);
        let observed: Vec<Option<f64>> = truth.served.iter().map(|s| s.map(|s| s.ttft_s)).collect();
        let w = Workload {
            requests,
            endpoints: vec!["a".into(), "b".into()],
            ..Workload::default()
        };
        let start = EngineModel {
            overhead_s: 0.0,
            ..truth_model
        };
        let (fitted, n) = fit_overhead(&w, &observed, &config, &picker, &start);
        assert_eq!(n, 200);
        assert!(
            (fitted.overhead_s - 0.08).abs() < 1e-6,
            "{}",
            fitted.overhead_s
        );
        let (same, n) = fit_overhead(&w, &vec![None; 200], &config, &picker, &start);
        assert_eq!((same, n), (start, 0));
    }

    #[test]
    fn the_rank_interval_narrows_with_more_samples() {
        let small: Vec<f64> = (1..=100).map(f64::from).collect();
        let large: Vec<f64> = (1..=10_000).map(|x| f64::from(x) / 100.0).collect();
        let [a, b] = rank_interval(&small, 0.5).unwrap();
        let [c, d] = rank_interval(&large, 0.5).unwrap();
        assert!(a < 50.0 && b > 50.0, "{a} {b}");
        assert!(d - c < (b - a) / 5.0, "{c} {d} vs {a} {b}");
        // A p99 over 100 samples reaches the maximum.
        assert_eq!(rank_interval(&small, 0.99).unwrap()[1], 100.0);
        assert_eq!(nearest_rank(&small, 0.9), Some(90.0));
        assert_eq!(nearest_rank(&[], 0.9), None);
    }
}
