//! Per-deployment calibration: peak prefill throughput, break-even bar, and
//! the configs to apply, each replayed on the same decisions.
//!
//! # Method
//!
//! * **Peak prefill throughput**: the first available of, in order, the
//!   user's value, vLLM's Prometheus counters while saturated (see
//!   [`crate::prometheus`]), calibration output, vLLM stats while saturated (see
//!   [`crate::throughput`]); a never-saturated deployment gets the vLLM lower
//!   bound, and one with no evidence keeps its configured value. Every
//!   estimate found is listed with its source and sample count.
//! * **Break-even bar** of a decision: `matched tokens / peak * 1000` ms, with
//!   the matched tokens of the best sticky endpoint from the best evidence
//!   available (exact match info of decision records; the PD decider's hit
//!   prefix tokens; the prefix scorer's score times the logged prompt
//!   length). Only decisions with a sticky endpoint and matched tokens > 0
//!   count. Quantiles p10/p50/p90 are nearest rank on the signed histogram
//!   (0.05 % relative precision); the error of the bar is otherwise the
//!   relative error of the peak estimate.
//! * **Static recommendation**: `peakPrefillThroughput` = the estimate,
//!   `maxTTFTPenaltyMs` = the break-even p50 rounded to two significant
//!   digits: the bar at which the static gate agrees with the break-even rule
//!   for the median request. Without matched tokens, the current bar is kept.
//! * **Matched-tokens recommendation**: `penaltyMode: matchedTokens` with the
//!   estimate, and the current `maxTTFTPenaltyMs` kept as the ceiling.
//! * Each config (current, static, matched tokens) is replayed through the
//!   filter core on the same decisions ([`crate::whatif`]); shares are of all
//!   decisions.
//! * **Memory**: each decision is kept until the end, because the static
//!   recommendation's bar is known only then, reduced to what the static and
//!   matched-tokens gates read (the two best endpoints' in-flight tokens and
//!   the sticky one's matched tokens): 40 bytes a decision, plus 16 for its
//!   break-even sample (a day of one million decisions: ~56 MB). gate-dist
//!   has no such cost. The in-flight request gate is not part of these
//!   replays.
//! * **Warnings**: thin evidence (peak from never-saturated engines or from the config
//!   alone, fewer than 30 saturated intervals, fewer than 100 decisions with
//!   matched tokens), a configured peak more than 2x off the estimate, a
//!   break-even p50 that moved more than 2x between windows of at least 30
//!   decisions.

use std::collections::{BTreeMap, HashMap};

use gatecal_filter::{Config, Outcome, PenaltyMode, TtftSource, decide_verdict};
use gatecal_parser::VllmStats;
use serde::Serialize;

use crate::gate_dist::{ConfigSet, InputSummary, SourcedConfig};
use crate::hist::SignedHistogram;
use crate::input::DecisionInput;
use crate::prometheus::{PromEstimator, PromSeries};
use crate::reconstruct::{GateSample, ReconstructOptions, Reconstructor, Replay, two_sided};
use crate::reorder::Reorder;
use crate::stats::StatsAcc;
use crate::throughput::{PeakEstimate, PeakSource, VllmEstimator};
use crate::whatif::WhatIfSpec;

/// The schema id of the JSON report.
pub const SCHEMA: &str = "gatecal.recommend/v2";

/// Fewer saturated intervals than this is thin evidence.
pub const THIN_SATURATED_INTERVALS: u64 = 30;
/// Fewer decisions with matched tokens than this is thin evidence.
pub const THIN_MATCHED_DECISIONS: u64 = 100;
/// Windows with fewer decisions are not compared for drift.
pub const MIN_WINDOW_DECISIONS: u64 = 30;

/// Options of the calibration.
#[derive(Clone, Debug)]
pub struct RecommendOptions {
    /// Reconstruction of the gate input.
    pub reconstruct: ReconstructOptions,
    /// Lower edge of pinned-worse, ms.
    pub pinned_worse_min_ms: f64,
    /// Window length, seconds, for break-even drift.
    pub window_s: Option<f64>,
    /// `--peak-prefill-throughput`: the user's value for every deployment.
    pub user_peak: Option<f64>,
    /// Calibration estimates: per deployment, or under `""` for every one.
    pub calibration: BTreeMap<String, PeakEstimate>,
}

impl Default for RecommendOptions {
    fn default() -> Self {
        RecommendOptions {
            reconstruct: ReconstructOptions::default(),
            pinned_worse_min_ms: 5000.0,
            window_s: None,
            user_peak: None,
            calibration: BTreeMap::new(),
        }
    }
}

/// The chosen peak and every estimate found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeakReport {
    /// Tokens per second.
    pub value: f64,
    /// Where the chosen value comes from.
    pub source: PeakSource,
    /// Samples behind the chosen value.
    pub samples: u64,
    /// Spread of the chosen estimate, low end.
    pub spread_low: Option<f64>,
    /// Spread of the chosen estimate, high end.
    pub spread_high: Option<f64>,
    /// 90 % interval `[low, high]` of the chosen estimate, tokens/s; `null`
    /// when its source gives none (user value, config, never saturated).
    pub interval: Option<[f64; 2]>,
    /// How the chosen value was computed.
    pub method: String,
    /// Every estimate found, best first.
    pub estimates: Vec<PeakEstimate>,
}

/// Break-even bar quantiles in one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BreakEvenWindow {
    /// Window start, epoch seconds.
    pub start_ts: f64,
    /// Decisions with matched tokens in the window.
    pub count: u64,
    /// 10th percentile, ms.
    pub p10: Option<f64>,
    /// Median, ms.
    pub p50: Option<f64>,
    /// 90th percentile, ms.
    pub p90: Option<f64>,
}

/// Break-even bar quantiles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BreakEven {
    /// Decisions with matched tokens.
    pub count: u64,
    /// 10th percentile, ms.
    pub p10: Option<f64>,
    /// Median, ms.
    pub p50: Option<f64>,
    /// 90th percentile, ms.
    pub p90: Option<f64>,
    /// Per window, when `--window` is set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<BreakEvenWindow>,
}

/// The config in force and what it did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Current {
    /// The config and its source.
    pub config: SourcedConfig,
    /// Decisions.
    pub decisions: u64,
    /// Released (replayed), over all decisions.
    pub released_share: f64,
    /// Pinned-worse (replayed), over all decisions.
    pub pinned_worse_share: f64,
    /// Decisions whose gate input is unknown.
    pub unknown: u64,
}

/// The static recommendation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StaticRec {
    /// `peakPrefillThroughput`.
    #[serde(rename = "peakPrefillThroughput")]
    pub peak_prefill_throughput: f64,
    /// `maxTTFTPenaltyMs`.
    #[serde(rename = "maxTTFTPenaltyMs")]
    pub max_ttft_penalty_ms: f64,
    /// Released share it would have produced.
    pub released_share: f64,
    /// Pinned-worse share it would have produced.
    pub pinned_worse_share: f64,
}

/// The matched-tokens recommendation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatchedRec {
    /// Always `matchedTokens`.
    #[serde(rename = "penaltyMode")]
    pub penalty_mode: PenaltyMode,
    /// `peakPrefillThroughput` (used by the ceiling).
    #[serde(rename = "peakPrefillThroughput")]
    pub peak_prefill_throughput: f64,
    /// `maxTTFTPenaltyMs`, the ceiling (0 = none).
    #[serde(rename = "maxTTFTPenaltyMs")]
    pub max_ttft_penalty_ms: f64,
    /// Released share it would have produced.
    pub released_share: f64,
    /// Pinned-worse share it would have produced.
    pub pinned_worse_share: f64,
    /// Decisions whose best sticky endpoint had no match info (held).
    pub no_match_info: u64,
}

/// The recommendations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recommended {
    /// Static mode.
    #[serde(rename = "static")]
    pub static_mode: StaticRec,
    /// Matched-tokens mode.
    pub matched_tokens: MatchedRec,
    /// Both as ready-to-paste EPP plugin entries (YAML).
    pub yaml: String,
}

/// One deployment's calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeploymentRec {
    /// Deployment name.
    pub name: String,
    /// Peak prefill throughput.
    pub peak_prefill_throughput: PeakReport,
    /// Break-even bar.
    pub break_even_ms: BreakEven,
    /// The config in force.
    pub current: Current,
    /// The recommendations.
    pub recommended: Recommended,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// The whole report: `gatecal.recommend/v2`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecommendReport {
    /// `gatecal.recommend/v2`.
    pub schema: &'static str,
    /// The input ledger.
    pub input: InputSummary,
    /// Per deployment, sorted by name.
    pub deployments: Vec<DeploymentRec>,
    /// Deployments past the cap, pooled into one ([`crate::pool`]).
    pub pooled: crate::pool::Pooled,
}

/// What a decision keeps for the replays at the end of the input (the
/// static recommendation's bar is known only then): the two best
/// endpoints, which is all the static and matched-tokens gates read.
#[derive(Clone, Copy, Debug)]
enum Kept {
    /// The outcome does not depend on the gate's parameters.
    Fixed(Outcome),
    /// The gate input is unknown.
    Unknown,
    /// In-flight tokens of the best sticky and best non-sticky endpoints,
    /// and the sticky one's matched tokens (0: unknown).
    Gate {
        sticky: i64,
        non_sticky: i64,
        matched: i64,
    },
    /// Predictor path: the two best predicted TTFTs, ms.
    Predicted { sticky: f64, non_sticky: f64 },
}

impl Kept {
    /// Reduces a sample to what the replays read, with the filter core.
    fn of(s: &GateSample, config: &Config) -> Kept {
        let c = match &s.replay {
            Replay::Fixed(o) => return Kept::Fixed(*o),
            Replay::Unknown => return Kept::Unknown,
            Replay::Candidates(c) => c,
        };
        // The gate always evaluated, never firing: its two winners.
        let probe = Config {
            penalty_mode: PenaltyMode::Static,
            max_ttft_penalty_ms: f64::MAX,
            max_in_flight_requests_delta: 0,
            exploration_probability: 0.0,
            ..config.clone()
        };
        let d = decide_verdict(&probe, c, 1.0);
        match d.gate {
            None => Kept::Fixed(d.outcome),
            Some(g) if config.ttft_source == TtftSource::LatencyPredictor => Kept::Predicted {
                sticky: g.best_sticky.ttft_ms,
                non_sticky: g.best_non_sticky.ttft_ms,
            },
            Some(g) => Kept::Gate {
                sticky: g.best_sticky.in_flight_tokens.unwrap_or(0),
                non_sticky: g.best_non_sticky.in_flight_tokens.unwrap_or(0),
                matched: c[g.best_sticky.index].matched_tokens(),
            },
        }
    }

    /// The sample to replay.
    fn sample(self) -> GateSample {
        let replay = match self {
            Kept::Fixed(o) => Replay::Fixed(o),
            Kept::Unknown => Replay::Unknown,
            Kept::Gate {
                sticky,
                non_sticky,
                matched,
            } => Replay::Candidates(two_sided(sticky, non_sticky, Some(matched))),
            Kept::Predicted { sticky, non_sticky } => {
                let mut c = two_sided(0, 0, None);
                c[0].predicted_ttft_ms = Some(sticky);
                c[1].predicted_ttft_ms = Some(non_sticky);
                Replay::Candidates(c)
            }
        };
        GateSample {
            ts: None,
            request_id: None,
            outcome: None,
            outcome_logged: false,
            evidence: None,
            gate_input_ms: None,
            replay,
            matched_tokens: None,
            logged_bar_ms: None,
            censored_ms: None,
            logged_peak: None,
            traced: false,
            traced_joined: false,
            reconstructed: None,
        }
    }
}

struct Dep {
    config: SourcedConfig,
    /// The distinct configs of the deployment's filter instances.
    configs: Vec<Config>,
    /// Per decision: what the replays read, and its config's index.
    kept: Vec<(Kept, u16)>,
    matched: Vec<(Option<f64>, i64)>,
}

/// The calibration in progress.
pub struct Recommend {
    opts: RecommendOptions,
    configs: ConfigSet,
    recon: Reconstructor,
    reorder: Reorder,
    deps: BTreeMap<String, Dep>,
    vllm: Vec<VllmStats>,
    prometheus: PromEstimator,
    /// Endpoint pod name (namespace and `-rank-N` removed) -> deployment,
    /// from the endpoints the EPP decisions name.
    pods: HashMap<String, String>,
    sink: Option<crate::records::RecordSink>,
    cap: crate::pool::DeploymentCap,
}

/// The pod behind an endpoint id: `namespace/pod[-rank-N]` -> `pod`.
pub fn endpoint_pod(endpoint: &str) -> &str {
    let name = endpoint.rsplit('/').next().unwrap_or(endpoint);
    match name.rfind("-rank-") {
        Some(i) if name[i + 6..].chars().all(|c| c.is_ascii_digit()) && i + 6 < name.len() => {
            &name[..i]
        }
        _ => name,
    }
}

/// Rounds to two significant digits (1234 -> 1200, 87 -> 87).
pub fn round2(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let p = 10f64.powf(v.log10().floor() - 1.0);
    (v / p).round() * p
}

impl Recommend {
    /// A new calibration.
    pub fn new(opts: RecommendOptions, configs: ConfigSet) -> Recommend {
        Recommend {
            recon: Reconstructor::new(opts.reconstruct),
            reorder: Reorder::new(opts.reconstruct.reorder_window_s),
            opts,
            configs,
            deps: BTreeMap::new(),
            vllm: Vec::new(),
            prometheus: PromEstimator::default(),
            pods: HashMap::new(),
            sink: None,
            cap: crate::pool::DeploymentCap::default(),
        }
    }

    /// Tracks at most `max` deployments (default
    /// [`crate::pool::MAX_DEPLOYMENTS`]); the others are pooled into
    /// [`crate::pool::OTHER_DEPLOYMENT`] and counted in
    /// [`RecommendReport::pooled`].
    pub fn with_max_deployments(mut self, max: usize) -> Recommend {
        self.cap = crate::pool::DeploymentCap::new(max);
        self
    }

    /// Hands every decision that carries a record ([`DecisionInput::record`])
    /// to `sink`, completed with its gate and config ([`crate::records`]).
    pub fn with_records(mut self, sink: crate::records::RecordSink) -> Recommend {
        self.sink = Some(sink);
        self
    }

    /// Adds one decision (in roughly log order, see [`crate::reorder`]).
    pub fn push_decision(&mut self, mut d: DecisionInput) {
        self.cap.admit(&mut d.deployment);
        let mut due = Vec::new();
        self.reorder.push(d, &mut |x| due.push(x));
        for x in due {
            self.process(&x);
        }
    }

    fn process(&mut self, d: &DecisionInput) {
        let names = d
            .scored
            .iter()
            .map(|e| e.endpoint.as_str())
            .chain(d.survivors.iter().flatten().map(String::as_str))
            .chain(d.exact.iter().flatten().map(|c| c.id.as_str()))
            .chain(d.chosen.as_deref());
        for n in names {
            let pod = endpoint_pod(n);
            if !self.pods.contains_key(pod) {
                self.pods.insert(pod.to_string(), d.deployment.clone());
            }
        }
        let sc = self.configs.for_decision(d).into_owned();
        let s = self.recon.sample(d, &sc.parameters);
        if let (Some(sink), Some(r)) = (self.sink.as_mut(), d.record.as_ref()) {
            sink(crate::records::complete((**r).clone(), &s, &sc));
        }
        let dep = self
            .deps
            .entry(d.deployment.clone())
            .or_insert_with(|| Dep {
                config: sc.clone(),
                configs: Vec::new(),
                kept: Vec::new(),
                matched: Vec::new(),
            });
        if let Some(m) = s.matched_tokens.filter(|m| *m > 0)
            && s.outcome.is_some_and(|o| {
                matches!(
                    o,
                    Outcome::Sticky
                        | Outcome::LoadOverride
                        | Outcome::MissingSignal
                        | Outcome::RequestLoadOverride
                )
            })
        {
            dep.matched.push((d.ts, m));
        }
        let ci = match dep.configs.iter().position(|c| *c == sc.parameters) {
            Some(i) => i,
            None => {
                dep.configs.push(sc.parameters.clone());
                dep.configs.len() - 1
            }
        };
        let kept = Kept::of(&s, &sc.parameters);
        dep.kept.push((kept, u16::try_from(ci).unwrap_or(u16::MAX)));
    }

    /// Adds one vLLM stats line.
    ///
    /// A stats line belongs to the deployment whose EPP decisions name its
    /// pod as an endpoint; failing that, to the deployment the parser gave it
    /// (`NAME=PATH`, pod owner, folder).
    pub fn push_vllm(&mut self, s: &VllmStats) {
        let mut s = s.clone();
        self.cap.admit(&mut s.deployment);
        self.vllm.push(s);
    }

    /// Adds the series of one Prometheus `query_range` response.
    pub fn push_prometheus(&mut self, series: Vec<PromSeries>) {
        self.prometheus.push(series);
    }

    /// The report.
    pub fn finish(mut self, input: InputSummary) -> RecommendReport {
        let mut due = Vec::new();
        self.reorder.finish(&mut |x| due.push(x));
        for x in due {
            self.process(&x);
        }
        let mut est = VllmEstimator::default();
        for s in &self.vllm {
            match s.pod.as_deref().and_then(|p| self.pods.get(p)) {
                Some(dep) if *dep != s.deployment => {
                    let mut t = s.clone();
                    t.deployment = dep.clone();
                    est.push(&t);
                }
                _ => est.push(s),
            }
        }
        let vllm = est.estimates();
        let pods = std::mem::take(&mut self.pods);
        let prom = self.prometheus.estimates(|p| pods.get(p).cloned());
        self.pods = pods;
        let mut names: Vec<String> = self.deps.keys().cloned().collect();
        for k in vllm.keys().chain(prom.keys()) {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        names.sort();
        let mut deployments = Vec::new();
        for name in names {
            let dep = self.deps.get(&name);
            let config = dep
                .map(|d| d.config.clone())
                .unwrap_or_else(|| self.configs.lookup(&name, None).clone());
            let peak =
                self.choose_peak(&name, vllm.get(&name), prom.get(&name), &config.parameters);
            deployments.push(self.deployment(name, dep, config, peak));
        }
        RecommendReport {
            schema: SCHEMA,
            input,
            deployments,
            pooled: self.cap.pooled().clone(),
        }
    }

    fn choose_peak(
        &self,
        name: &str,
        vllm: Option<&PeakEstimate>,
        prom: Option<&PeakEstimate>,
        config: &Config,
    ) -> PeakReport {
        let mut estimates = Vec::new();
        if let Some(p) = prom {
            estimates.push(p.clone());
        }
        if let Some(v) = self.opts.user_peak {
            estimates.push(PeakEstimate {
                value: v,
                source: PeakSource::User,
                samples: 0,
                spread_low: None,
                spread_high: None,
                interval: None,
                engines: 0,
                method: "given with --peak-prefill-throughput".into(),
            });
        }
        if let Some(c) = self
            .opts
            .calibration
            .get(name)
            .or_else(|| self.opts.calibration.get(""))
        {
            estimates.push(c.clone());
        }
        if let Some(v) = vllm {
            estimates.push(v.clone());
        }
        estimates.push(PeakEstimate {
            value: config.peak_prefill_throughput,
            source: PeakSource::Config,
            samples: 0,
            spread_low: None,
            spread_high: None,
            interval: None,
            engines: 0,
            method: "the filter config in force (no evidence)".into(),
        });
        estimates.sort_by_key(|e| e.source);
        // An estimate of 0 (vLLM showed no prompt throughput) or a
        // non-finite one is no estimate: the EPP refuses a peak of 0 on the
        // throughput path. It stays listed, and the next source is used.
        let best = estimates
            .iter()
            .find(|e| e.value.is_finite() && e.value > 0.0)
            .unwrap_or(&estimates[0])
            .clone();
        PeakReport {
            value: best.value,
            source: best.source,
            samples: best.samples,
            spread_low: best.spread_low,
            spread_high: best.spread_high,
            interval: best.interval,
            method: best.method,
            estimates,
        }
    }

    fn deployment(
        &self,
        name: String,
        dep: Option<&Dep>,
        config: SourcedConfig,
        peak: PeakReport,
    ) -> DeploymentRec {
        let mut warnings = Vec::new();
        let p = peak.value;
        // No estimate of the peak (every source was 0 or missing): no
        // peakPrefillThroughput is recommended, and nothing is computed
        // from it.
        let has_peak = p.is_finite() && p > 0.0;
        for e in &peak.estimates {
            if !(e.value.is_finite() && e.value > 0.0) && e.source != PeakSource::Config {
                warnings.push(format!(
                    "no peak estimate from {}: {} tok/s ({})",
                    e.source.as_str(),
                    e.value,
                    e.method
                ));
            }
        }
        if !has_peak {
            warnings.push(format!(
                "no estimate of peakPrefillThroughput (every source gives {p} tok/s): none is recommended; measure it (a saturated vLLM, a calibration file) or pass --peak-prefill-throughput"
            ));
        }
        // Break-even bars.
        let mut all = SignedHistogram::new();
        let mut windows: BTreeMap<i64, SignedHistogram> = BTreeMap::new();
        let matched = dep.map(|d| d.matched.as_slice()).filter(|_| has_peak);
        for (ts, m) in matched.unwrap_or(&[]) {
            let be = *m as f64 / p * 1000.0;
            all.record(be);
            if let (Some(w), Some(t)) = (self.opts.window_s, ts) {
                windows
                    .entry((t / w).floor() as i64)
                    .or_default()
                    .record(be);
            }
        }
        let all_r = all.recorded();
        let break_even = BreakEven {
            count: all.count(),
            p10: all_r.quantile(0.1),
            p50: all_r.quantile(0.5),
            p90: all_r.quantile(0.9),
            windows: windows
                .iter()
                .map(|(i, h)| {
                    let r = h.recorded();
                    BreakEvenWindow {
                        start_ts: *i as f64 * self.opts.window_s.unwrap_or(0.0),
                        count: h.count(),
                        p10: r.quantile(0.1),
                        p50: r.quantile(0.5),
                        p90: r.quantile(0.9),
                    }
                })
                .collect(),
        };
        let current_bar = config.parameters.max_ttft_penalty_ms;
        let static_bar = break_even.p50.map(round2).unwrap_or(current_bar);
        let specs = [
            WhatIfSpec {
                mode: config.parameters.penalty_mode,
                max_ttft_penalty_ms: None,
                peak_prefill_throughput: None,
            },
            WhatIfSpec {
                mode: PenaltyMode::Static,
                max_ttft_penalty_ms: Some(static_bar),
                peak_prefill_throughput: Some(p),
            },
            WhatIfSpec {
                mode: PenaltyMode::MatchedTokens,
                max_ttft_penalty_ms: Some(current_bar),
                peak_prefill_throughput: Some(p),
            },
        ];
        let mut acc = StatsAcc::new(self.opts.pinned_worse_min_ms, specs.len());
        if let Some(dep) = dep {
            for (k, ci) in &dep.kept {
                let c = dep
                    .configs
                    .get(usize::from(*ci))
                    .unwrap_or(&dep.config.parameters);
                acc.add(&k.sample(), c, &specs);
            }
        }
        let st = acc.finish();
        let w = &st.what_if;
        let static_rec = StaticRec {
            peak_prefill_throughput: p.round(),
            max_ttft_penalty_ms: static_bar,
            released_share: w[1].released_share,
            pinned_worse_share: w[1].pinned_worse_share,
        };
        let matched_rec = MatchedRec {
            penalty_mode: PenaltyMode::MatchedTokens,
            peak_prefill_throughput: p.round(),
            max_ttft_penalty_ms: current_bar,
            released_share: w[2].released_share,
            pinned_worse_share: w[2].pinned_worse_share,
            no_match_info: w[2].no_match_info,
        };

        // Warnings.
        match peak.source {
            PeakSource::Config => warnings.push(
                "thin evidence: no vLLM stats, calibration or --peak-prefill-throughput; the peak is the configured value".into(),
            ),
            PeakSource::VllmStatsUnsaturated => warnings.push(format!(
                "thin evidence: the engines were never saturated; {:.0} tok/s is only the highest interval rate seen",
                p
            )),
            PeakSource::VllmStats if peak.samples < THIN_SATURATED_INTERVALS => {
                warnings.push(format!(
                    "thin evidence: only {} saturated intervals behind the peak estimate",
                    peak.samples
                ))
            }
            _ => {}
        }
        let configured = config.parameters.peak_prefill_throughput;
        if peak.source != PeakSource::Config
            && configured > 0.0
            && (configured / p > 2.0 || p / configured > 2.0)
        {
            warnings.push(format!(
                "the configured peakPrefillThroughput {configured:.0} is {:.1}x the estimate {p:.0}: every TTFT the gate computes is off by that factor",
                configured / p
            ));
        }
        if break_even.count < THIN_MATCHED_DECISIONS {
            warnings.push(format!(
                "thin evidence: {} decision(s) with matched tokens (the break-even bar needs match info: decision records, PD decider lines, or prefix scores with prompt lengths)",
                break_even.count
            ));
        }
        let p50s: Vec<f64> = break_even
            .windows
            .iter()
            .filter(|w| w.count >= MIN_WINDOW_DECISIONS)
            .filter_map(|w| w.p50)
            .filter(|v| *v > 0.0)
            .collect();
        if let (Some(lo), Some(hi)) = (
            p50s.iter().copied().reduce(f64::min),
            p50s.iter().copied().reduce(f64::max),
        ) && hi / lo > 2.0
        {
            warnings.push(format!(
                "the break-even p50 drifted {:.1}x across windows ({lo:.0} ms to {hi:.0} ms): a static bar cannot follow it; matchedTokens does",
                hi / lo
            ));
        }

        let yaml = if has_peak {
            format!(
                "# {name}: static mode\n- type: prefix-cache-affinity-filter\n  parameters:\n    peakPrefillThroughput: {}\n    maxTTFTPenaltyMs: {}\n# {name}: matched-tokens mode\n- type: prefix-cache-affinity-filter\n  parameters:\n    penaltyMode: matchedTokens\n    peakPrefillThroughput: {}\n    maxTTFTPenaltyMs: {}\n",
                static_rec.peak_prefill_throughput,
                static_rec.max_ttft_penalty_ms,
                matched_rec.peak_prefill_throughput,
                matched_rec.max_ttft_penalty_ms,
            )
        } else {
            format!(
                "# {name}: no estimate of the peak prefill throughput, no config to paste (see the warnings)\n"
            )
        };
        DeploymentRec {
            name,
            peak_prefill_throughput: peak,
            break_even_ms: break_even,
            current: Current {
                config,
                decisions: st.decisions,
                released_share: w[0].released_share,
                pinned_worse_share: w[0].pinned_worse_share,
                unknown: w[0].unknown,
            },
            recommended: Recommended {
                static_mode: static_rec,
                matched_tokens: matched_rec,
                yaml,
            },
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_filter::Candidate;

    #[test]
    fn endpoint_pods() {
        assert_eq!(endpoint_pod("llm/p-0-rank-1"), "p-0");
        assert_eq!(endpoint_pod("llm/p-0"), "p-0");
        assert_eq!(endpoint_pod("p-rank-x"), "p-rank-x");
        assert_eq!(endpoint_pod("10.0.0.1:8000"), "10.0.0.1:8000");
    }

    #[test]
    fn kept_decisions_are_small() {
        assert!(std::mem::size_of::<(Kept, u16)>() <= 40);
    }

    #[test]
    fn rounding() {
        assert_eq!(round2(1234.0), 1200.0);
        assert_eq!(round2(87.4), 87.0);
        assert_eq!(round2(4092.0), 4100.0);
        assert_eq!(round2(0.0), 0.0);
    }

    #[test]
    fn break_even_and_recommendations_from_records() {
        let mut r = Recommend::new(
            RecommendOptions {
                user_peak: Some(1000.0),
                ..RecommendOptions::default()
            },
            ConfigSet::default(),
        );
        // Matched 1440 tokens at 1000 tok/s: break-even 1440 ms for all.
        for (i, gap) in [500i64, 1000, 2000, 4000, 8000].iter().enumerate() {
            r.push_decision(DecisionInput {
                deployment: "d".into(),
                ts: Some(i as f64),
                exact: Some(vec![
                    Candidate::new("s")
                        .with_match(90, 100, 16)
                        .with_in_flight_tokens(1000 + gap),
                    Candidate::new("n")
                        .with_match(0, 100, 16)
                        .with_in_flight_tokens(1000),
                ]),
                ..DecisionInput::default()
            });
        }
        let rep = r.finish(InputSummary::default());
        let d = &rep.deployments[0];
        assert_eq!(d.peak_prefill_throughput.source, PeakSource::User);
        assert_eq!(d.break_even_ms.count, 5);
        assert!((d.break_even_ms.p50.unwrap() - 1440.0).abs() < 1.0);
        assert_eq!(d.recommended.static_mode.max_ttft_penalty_ms, 1400.0);
        // Static 1400 ms at 1000 tok/s releases gaps 2000, 4000, 8000.
        assert!((d.recommended.static_mode.released_share - 0.6).abs() < 1e-9);
        // Break-even releases gaps above 1440 tokens: the same three.
        assert!((d.recommended.matched_tokens.released_share - 0.6).abs() < 1e-9);
        // The current config (15928 tok/s, 18 s) releases none.
        assert_eq!(d.current.released_share, 0.0);
        assert!(d.recommended.yaml.contains("penaltyMode: matchedTokens"));
        assert!(
            d.warnings.iter().any(|w| w.contains("15928 is 15.9x")),
            "{:?}",
            d.warnings
        );
        assert!(
            d.warnings
                .iter()
                .any(|w| w.contains("thin evidence: 5 decision"))
        );
    }

    /// A recommendation's YAML, as the EPP would read it: every entry must
    /// pass the filter's validation.
    fn pasted(yaml: &str) -> Vec<(String, gatecal_filter::Config)> {
        crate::epp_config::filters_from_yaml(&format!("plugins:\n{yaml}")).unwrap()
    }

    fn zero_throughput_vllm(r: &mut Recommend) {
        for i in 0..60u32 {
            r.push_vllm(&VllmStats {
                deployment: "d".into(),
                ts: Some(1000.0 + 10.0 * f64::from(i)),
                engine: Some("0".into()),
                prompt_throughput: 0.0,
                running: Some(2),
                waiting: Some(3),
                ..VllmStats::default()
            });
        }
    }

    fn one_decision(r: &mut Recommend) {
        r.push_decision(DecisionInput {
            deployment: "d".into(),
            ts: Some(1.0),
            exact: Some(vec![
                Candidate::new("s")
                    .with_match(90, 100, 16)
                    .with_in_flight_tokens(3000),
                Candidate::new("n")
                    .with_match(0, 100, 16)
                    .with_in_flight_tokens(1000),
            ]),
            ..DecisionInput::default()
        });
    }

    /// vLLM stats that show no prompt throughput give no estimate: the
    /// peak falls back to the next source, and 0 is never recommended.
    #[test]
    fn a_zero_vllm_estimate_is_no_estimate() {
        let mut r = Recommend::new(RecommendOptions::default(), ConfigSet::default());
        zero_throughput_vllm(&mut r);
        one_decision(&mut r);
        let rep = r.finish(InputSummary::default());
        let d = &rep.deployments[0];
        assert!(
            d.peak_prefill_throughput
                .estimates
                .iter()
                .any(|e| e.value == 0.0 && e.source != PeakSource::Config),
            "{:?}",
            d.peak_prefill_throughput.estimates
        );
        assert_eq!(d.peak_prefill_throughput.source, PeakSource::Config);
        assert_eq!(d.peak_prefill_throughput.value, 15928.0);
        assert!(!d.recommended.yaml.contains("peakPrefillThroughput: 0\n"));
        assert_eq!(pasted(&d.recommended.yaml).len(), 2);
        assert!(
            d.warnings
                .iter()
                .any(|w| w.starts_with("no peak estimate from vllm_stats")),
            "{:?}",
            d.warnings
        );
    }

    /// With no source giving a peak above 0 (a latency-predictor config
    /// with peak 0, and vLLM showing none), no peakPrefillThroughput is
    /// recommended: the report says so and gives nothing to paste.
    #[test]
    fn no_peak_at_all_recommends_none() {
        let config = Config {
            ttft_source: gatecal_filter::TtftSource::LatencyPredictor,
            peak_prefill_throughput: 0.0,
            ..Config::default()
        };
        config.validate().unwrap();
        let set = ConfigSet {
            default: vec![(
                String::new(),
                SourcedConfig::new("test", config, crate::gate_dist::ParamSource::File),
            )],
            ..ConfigSet::default()
        };
        let mut r = Recommend::new(RecommendOptions::default(), set);
        zero_throughput_vllm(&mut r);
        one_decision(&mut r);
        let rep = r.finish(InputSummary::default());
        let d = &rep.deployments[0];
        let yaml = &d.recommended.yaml;
        assert!(!yaml.contains("peakPrefillThroughput:"), "{yaml}");
        assert!(yaml.lines().all(|l| l.starts_with('#')), "{yaml}");
        assert!(
            d.warnings
                .iter()
                .any(|w| w.starts_with("no estimate of peakPrefillThroughput")),
            "{:?}",
            d.warnings
        );
        assert_eq!(d.break_even_ms.count, 0);
    }
}
