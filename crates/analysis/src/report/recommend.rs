//! Per-deployment calibration: peak prefill throughput, break-even bar, and
//! the configs to apply, each replayed on the same decisions.
//!
//! # Method
//!
//! * **Config in force** per deployment and filter instance: gate-dist's,
//!   built by the same code (flags, then the values the log shows, then
//!   `--config`, then the defaults, see [`crate::merge_log`]),
//!   with the same `parameter_sources` and `log_disagreements`; a
//!   deployment's decisions wait for the bar its log shows as gate-dist's
//!   do. The `current` row replays it.
//! * **Peak prefill throughput**: the first available of, in order, the
//!   user's value, vLLM's Prometheus counters while saturated (see
//!   [`crate::peak::prometheus`]), calibration output, vLLM stats while saturated (see
//!   [`crate::peak::throughput`]); a never-saturated deployment gets the vLLM lower
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
//! * **Reference peak**: every row is measured at the estimate `P`: gate
//!   input `g = (sticky − nonSticky tokens) / P × 1000`, break-even
//!   `b = matched / P × 1000`.
//! * **Excess TTFT** of a decision under a config: `g − b` when it holds and
//!   `g > b`, `b − g` when it releases and `g < b`, else 0; the mean over the
//!   decisions with a known gate input and matched tokens ([`bar::excess_ms`]).
//! * **Static recommendation**: `peakPrefillThroughput` = the estimate, and
//!   the bar minimising the summed excess TTFT, exactly
//!   ([`bar::derive_static_bar`]). Without matched tokens there is none.
//! * **Matched-tokens rows**: `penaltyMode: matchedTokens` with the estimate,
//!   the current bar kept as the ceiling, and without ceiling.
//! * **One recommendation**: matchedTokens when its excess is below the
//!   static bar's, else static; static for `ttftSource: latencyPredictor`.
//! * Each config (current, static, matched tokens, candidates) is replayed
//!   through the filter core on the same decisions ([`crate::gate::whatif`]);
//!   shares are of all decisions; pinned is held with `g` at least the
//!   pinned-worse minimum.
//! * **Memory**: each decision is kept until the end, because the static
//!   recommendation's bar is known only then, reduced to what the static and
//!   matched-tokens gates read (the two best endpoints' in-flight tokens and
//!   the sticky one's matched tokens): 40 bytes a decision, plus 16 for its
//!   break-even sample (a day of one million decisions: ~56 MB). gate-dist
//!   has no such cost (both hold the decisions waiting for a bar, at most
//!   [`crate::config::in_force::MAX_PENDING_DECISIONS`]). The in-flight request
//!   gate is not part of these replays.
//! * **Warnings**: thin evidence (peak from never-saturated engines or from the config
//!   alone, fewer than 30 saturated intervals, a peak's 90 % interval wider
//!   than 40 % of the estimate with what would narrow it, fewer than 100
//!   decisions with matched tokens), a configured peak more than 2x off the estimate, a
//!   break-even p50 that moved more than 2x between windows of at least 30
//!   decisions, a flag or file value the log contradicts (each of the
//!   config's `log_disagreements`).

use std::collections::{BTreeMap, HashMap};

use gatecal_filter::{Config, Outcome, PenaltyMode, TtftSource, decide_verdict};
use gatecal_parser::VllmStats;

use crate::config::source::{ConfigSet, SourcedConfig};
use crate::gate::reconstruct::{GateSample, ReconstructOptions, Reconstructor, Replay, two_sided};
use crate::gate::reorder::{InOrder, Reorder};
use crate::gate::whatif::CandidateConfig;
use crate::input::{DecisionInput, MatchedSource, ProducerBlockSizes};
use crate::peak::agreement::LineHitRates;
use crate::peak::prometheus::{PromEstimator, PromSeries};
use crate::peak::throughput::{PeakEstimate, PeakSource, VllmEstimator};
use crate::predict::per_deployment::{MAX_REPLAY_REQUESTS_TOTAL, Objective, Requests};
use crate::report::gate_dist::InputSummary;
use crate::report::intake::Intake;

mod bar;
mod deployment;
mod finish;
mod partial;
mod partial_requests;
mod schema;

pub use partial::{
    NO_PREDICTION_AFTER_MERGE, RecommendPart, RecommendPartial, RecommendSettings,
    merge as merge_recommend_partials,
};

pub use schema::{
    DeploymentRec, Gain, ModeParams, Paste, RecommendReport, Recommended, Row, RowKind, VllmCut,
};
use schema::{MAX_VLLM_LINES, PeakReport};

/// The schema id of the JSON report.
pub const SCHEMA: &str = "gatecal.recommend/v3";

/// Fewer saturated intervals than this is thin evidence.
pub const THIN_SATURATED_INTERVALS: u64 = 30;
/// A peak's 90 % interval wider than this share of the estimate is thin
/// evidence: the width the estimator keeps within when each request's
/// uncached tokens are known (methodology §6).
pub const WIDE_PEAK_INTERVAL: f64 = 0.4;
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
    /// `--known-peak`: the user's value for every deployment.
    pub user_peak: Option<f64>,
    /// Calibration estimates: per deployment, or under `""` for every one.
    pub calibration: BTreeMap<String, PeakEstimate>,
    /// Configs to replay beside the current one.
    pub candidates: Vec<CandidateConfig>,
    /// `--since`/`--until`: decisions outside are not counted (they still
    /// warm the reconstruction up); vLLM stats lines all count.
    pub time_range: crate::report::gate_dist::TimeRange,
    /// The prefix producers' block sizes: per deployment, or under `""`
    /// for every other one (the upstream defaults when absent).
    pub block_sizes: BTreeMap<String, ProducerBlockSizes>,
    /// `--objective`: what the choice by predicted TTFT minimises.
    pub objective: Objective,
    /// `--choose LABEL`: the row to paste instead of the recommendation.
    pub choose: Option<String>,
    /// `--mode`: the family to paste.
    pub mode: Option<PenaltyMode>,
}

impl Default for RecommendOptions {
    fn default() -> Self {
        RecommendOptions {
            reconstruct: ReconstructOptions::default(),
            pinned_worse_min_ms: 5000.0,
            window_s: None,
            user_peak: None,
            calibration: BTreeMap::new(),
            candidates: Vec::new(),
            time_range: crate::report::gate_dist::TimeRange::default(),
            block_sizes: BTreeMap::new(),
            objective: Objective::default(),
            choose: None,
            mode: None,
        }
    }
}

impl RecommendOptions {
    /// The prefix producers' block sizes in force for `deployment`.
    pub fn block_sizes_of(&self, deployment: &str) -> std::borrow::Cow<'_, ProducerBlockSizes> {
        match crate::input::block_sizes_for(&self.block_sizes, deployment) {
            Some(b) => std::borrow::Cow::Borrowed(b),
            None => std::borrow::Cow::Owned(ProducerBlockSizes::default()),
        }
    }
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
    /// The config in force reported (that of the filter instance of the
    /// deployment's first decision), with every instance's disagreements.
    shown: crate::config::in_force::Shown,
    /// The distinct configs of the deployment's filter instances.
    configs: Vec<Config>,
    /// Per decision: what the replays read, and its config's index.
    kept: Vec<(Kept, u16)>,
    matched: Vec<(Option<f64>, i64)>,
    /// Decisions released as logged.
    logged_released: u64,
    /// What the findings read.
    signals: crate::findings::SignalsAcc,
    /// Decisions with a sticky endpoint.
    with_sticky: u64,
    /// Decisions with matched tokens, by source.
    sources: BTreeMap<MatchedSource, u64>,
    /// The requests, for the observed and predicted TTFT.
    requests: Requests,
    /// First and last counted decision.
    first_ts: Option<f64>,
    last_ts: Option<f64>,
    /// The keys of the decisions whose lines name no EPP pod, for a
    /// partial report's double-counting check.
    unnamed_keys: crate::report::parts::KeySample,
}

/// The calibration in progress.
pub struct Recommend {
    opts: RecommendOptions,
    /// The configs in force (gate-dist's), and the decisions waiting for
    /// them.
    in_force: crate::config::in_force::InForce,
    recon: Reconstructor,
    reorder: Reorder,
    deps: BTreeMap<String, Dep>,
    /// The vLLM stats lines, per `(deployment, pod)` as the parser gave
    /// them (the deployment a pod belongs to may be known only from later
    /// EPP decisions), as the estimator keeps them: a few numbers a line.
    vllm: BTreeMap<(String, Option<String>), VllmEstimator>,
    /// Stats lines kept, and cut past [`MAX_VLLM_LINES`].
    vllm_lines: u64,
    vllm_cut: VllmCut,
    /// The requests the decisions routed, for the peak (see
    /// [`VllmEstimator::push_decision`]).
    routed: VllmEstimator,
    /// The v1 lines' prefix cache hit rates, per `(deployment, pod)` as
    /// the parser gave them, for [`crate::peak::agreement`].
    line_hit_rates: BTreeMap<(String, Option<String>), LineHitRates>,
    prometheus: PromEstimator,
    /// Endpoint pod name (namespace and `-rank-N` removed) -> deployment,
    /// from the endpoints the EPP decisions name.
    pods: HashMap<String, String>,
    sink: Option<crate::report::records::RecordSink>,
    /// Only the records are made ([`Recommend::records_only`]).
    records_only: bool,
    cap: crate::input::pool::DeploymentCap,
    /// Requests the replay may still keep, all deployments together.
    room: usize,
    /// The config in force of deployments known from stats lines alone,
    /// as partial reports recorded it.
    fallback_configs: BTreeMap<String, SourcedConfig>,
    /// Finishing partial reports: the parts merged.
    merged: Option<Vec<crate::report::parts::PartInfo>>,
    /// Finishing partial reports of which one did not carry the requests
    /// (written by an earlier version): nothing to predict from.
    merged_without_requests: bool,
    /// Threads the deployments' records are computed on at the end.
    threads: usize,
}

impl InOrder for Recommend {
    fn buffer(&mut self) -> &mut Reorder {
        &mut self.reorder
    }

    fn take(&mut self, d: DecisionInput) {
        self.process(d);
    }
}

impl Intake for Recommend {
    fn intake(&mut self) -> crate::report::intake::Parts<'_> {
        (&self.in_force, &self.opts.block_sizes, &mut self.cap)
    }

    fn process(&mut self, d: DecisionInput) {
        Recommend::process(self, d);
    }
}

/// The pod behind an endpoint id: `namespace/pod[-rank-N]` -> `pod`.
pub fn endpoint_pod(endpoint: &str) -> &str {
    gatecal_parser::strip_rank(endpoint.rsplit('/').next().unwrap_or(endpoint))
}

impl Recommend {
    /// A new calibration.
    pub fn new(opts: RecommendOptions, configs: ConfigSet) -> Recommend {
        Recommend {
            recon: Reconstructor::new(opts.reconstruct),
            reorder: Reorder::new(opts.reconstruct.reorder_window_s),
            opts,
            in_force: crate::config::in_force::InForce::new(configs),
            deps: BTreeMap::new(),
            vllm: BTreeMap::new(),
            vllm_lines: 0,
            vllm_cut: VllmCut {
                lines: 0,
                max_lines: MAX_VLLM_LINES,
            },
            routed: VllmEstimator::default(),
            line_hit_rates: BTreeMap::new(),
            prometheus: PromEstimator::default(),
            pods: HashMap::new(),
            sink: None,
            records_only: false,
            cap: crate::input::pool::DeploymentCap::default(),
            room: MAX_REPLAY_REQUESTS_TOTAL,
            fallback_configs: BTreeMap::new(),
            merged: None,
            merged_without_requests: false,
            threads: 1,
        }
    }

    /// Lets at most `max` decisions wait for their deployment's bar, all
    /// deployments together (default
    /// [`crate::MAX_PENDING_DECISIONS`]; `--follow` uses
    /// [`crate::MAX_PENDING_DECISIONS_FOLLOWING`]).
    pub fn with_max_pending(mut self, max: usize) -> Recommend {
        self.in_force.set_max_pending(max);
        self
    }

    /// Tracks at most `max` deployments (default
    /// [`crate::MAX_DEPLOYMENTS`]); the others are pooled into
    /// [`crate::OTHER_DEPLOYMENT`] and counted in
    /// [`RecommendReport::pooled`].
    pub fn with_max_deployments(mut self, max: usize) -> Recommend {
        self.cap = crate::input::pool::DeploymentCap::new(max);
        self
    }

    /// Keeps at most `max` vLLM stats lines (default `MAX_VLLM_LINES`);
    /// the rest are counted in [`RecommendReport::vllm_cut`].
    pub fn with_max_vllm_lines(mut self, max: usize) -> Recommend {
        self.vllm_cut.max_lines = max;
        self
    }

    /// Hands every decision that carries a record ([`DecisionInput::record`])
    /// to `sink`, completed with its gate and config (`report::records`).
    pub fn with_records(mut self, sink: crate::report::records::RecordSink) -> Recommend {
        self.sink = Some(sink);
        self
    }

    /// Computes the deployments' records at the end on up to `n` threads
    /// (default 1): each deployment's engine fit, replays and findings are
    /// its own, so the report is the same on any number.
    pub fn with_threads(mut self, n: usize) -> Recommend {
        self.threads = n.max(1);
        self
    }

    /// Makes each decision's record ([`Recommend::with_records`]) and
    /// nothing else: the decisions are reconstructed under their config in
    /// force, and nothing is kept for the report (no decision, pod or
    /// routed request). `--follow`'s calibration of the whole run, whose
    /// records each report reads again: its memory does not grow with the
    /// run.
    pub fn records_only(mut self) -> Recommend {
        self.records_only = true;
        self
    }

    /// Adds one decision (in roughly log order, see [`crate::Reorder`]).
    pub fn push_decision(&mut self, d: DecisionInput) {
        self.take_buffered(d);
    }

    /// Adds one decision given in the order this calibration's reorder
    /// buffer would release it ([`crate::release_order`] over the times of
    /// its decisions, [`Recommend::reorder_window_s`]): it is handled at
    /// once, not held in the buffer. Not to be mixed with
    /// [`Recommend::push_decision`].
    pub fn push_in_order(&mut self, d: DecisionInput) {
        self.take_released(d);
    }

    /// The window of its reorder buffer, seconds of log time.
    pub fn reorder_window_s(&self) -> f64 {
        self.opts.reconstruct.reorder_window_s
    }

    /// The pods and routed requests of every decision at once, in log
    /// order; the rest under its config in force, once known
    /// ([`crate::config::in_force::InForce`], as gate-dist).
    fn process(&mut self, d: DecisionInput) {
        if self.records_only {
            let (recon, sink, opts, room) =
                (&mut self.recon, &mut self.sink, &self.opts, &mut self.room);
            self.in_force
                .push(d, &mut |sc, d| handle(recon, None, sink, opts, room, sc, d));
            return;
        }
        let names = d
            .scored
            .iter()
            .map(|e| e.endpoint.as_str())
            .chain(
                d.survivors
                    .iter()
                    .flatten()
                    .map(gatecal_parser::Name::as_str),
            )
            .chain(d.exact.iter().flatten().map(|c| c.id.as_str()))
            .chain(d.chosen.as_deref());
        for n in names {
            let pod = endpoint_pod(n);
            if !self.pods.contains_key(pod) {
                self.pods.insert(pod.to_string(), d.deployment.to_string());
            }
        }
        self.routed.push_decision(&d);
        let (recon, deps, sink, opts, room) = (
            &mut self.recon,
            &mut self.deps,
            &mut self.sink,
            &self.opts,
            &mut self.room,
        );
        self.in_force.push(d, &mut |sc, d| {
            handle(recon, Some(deps), sink, opts, room, sc, d)
        });
    }

    /// Adds one vLLM stats line.
    ///
    /// A stats line belongs to the deployment whose EPP decisions name its
    /// pod as an endpoint; failing that, to the deployment the parser gave it
    /// (`NAME=PATH`, pod owner, folder).
    ///
    /// Every line counts, whatever `--since`/`--until` say: the peak is a
    /// property of the engines, and vLLM's own lines often carry no year.
    ///
    /// Memory: each line is kept as a few numbers (about 64 bytes, with its
    /// hit rate), `MAX_VLLM_LINES` at most; the lines past that are not
    /// used, and counted in [`RecommendReport::vllm_cut`].
    pub fn push_vllm(&mut self, s: &VllmStats) {
        if self.vllm_lines >= self.vllm_cut.max_lines as u64 {
            self.vllm_cut.lines += 1;
            return;
        }
        self.vllm_lines += 1;
        let mut deployment = s.deployment.clone();
        self.cap.admit_string(&mut deployment);
        let key = (deployment, s.pod.clone());
        if s.prefix_cache_hit_rate_pct.is_some() {
            self.line_hit_rates.entry(key.clone()).or_default().push(s);
        }
        // The estimator keys its lines by the deployment given here; they
        // move to the deployment of their pod at the end.
        self.vllm.entry(key).or_default().push(s);
    }

    /// Adds the series of one Prometheus `query_range` response.
    pub fn push_prometheus(&mut self, series: Vec<PromSeries>) {
        self.prometheus.push(series);
    }

    /// Every decision counted under its config in force: the reorder
    /// buffer drained, the decisions waiting for a config handled, the
    /// disagreements found late noted.
    fn settle(&mut self) {
        self.drain();
        let (recon, sink, opts, room) =
            (&mut self.recon, &mut self.sink, &self.opts, &mut self.room);
        crate::report::intake::settle_waiting(
            &mut self.in_force,
            &mut self.deps,
            self.records_only,
            |deps, sc, d| handle(recon, deps, sink, opts, room, sc, d),
        );
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
                method: "given with --known-peak".into(),
                estimates: Vec::new(),
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
            estimates: Vec::new(),
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
        PeakReport { estimates, ..best }
    }
}

impl crate::report::intake::Shows for Dep {
    fn shown(&mut self) -> &mut crate::config::in_force::Shown {
        &mut self.shown
    }
}

/// Adds one counted decision of `recommend` under its config in force `sc`.
fn handle(
    recon: &mut Reconstructor,
    deps: Option<&mut BTreeMap<String, Dep>>,
    sink: &mut Option<crate::report::records::RecordSink>,
    opts: &RecommendOptions,
    room: &mut usize,
    sc: &SourcedConfig,
    mut d: DecisionInput,
) {
    let s = recon.sample(&d, &sc.parameters);
    // Outside `--since`/`--until`: it warmed the reconstruction up, and
    // is neither counted nor written.
    if !opts.time_range.contains(d.ts) {
        return;
    }
    if let (Some(sink), Some(r)) = (sink.as_mut(), d.record.take()) {
        sink(crate::report::records::complete(*r, &s, sc, &d));
    }
    // Only the record is made ([`Recommend::records_only`]).
    let Some(deps) = deps else {
        return;
    };
    let dep = deps.entry(d.deployment.to_string()).or_insert_with(|| Dep {
        shown: crate::config::in_force::Shown::new(sc, d.filter.as_deref()),
        configs: Vec::new(),
        kept: Vec::new(),
        matched: Vec::new(),
        logged_released: 0,
        with_sticky: 0,
        sources: BTreeMap::new(),
        signals: crate::findings::SignalsAcc::default(),
        requests: Requests::default(),
        first_ts: None,
        last_ts: None,
        unnamed_keys: Default::default(),
    });
    if let Some(t) = d.ts {
        dep.first_ts = Some(dep.first_ts.map_or(t, |f| f.min(t)));
        dep.last_ts = Some(dep.last_ts.map_or(t, |l| l.max(t)));
    }
    if d.epp_pod.is_none() {
        dep.unnamed_keys
            .add(d.request_id.as_deref(), d.ts, d.unnamed_source.as_deref());
    }
    dep.requests.push(&d, room);
    dep.shown.note(d.filter.as_deref(), sc);
    dep.signals
        .add(&d, &s, &sc.parameters, opts.pinned_worse_min_ms);
    if s.outcome.is_some_and(Outcome::is_release) {
        dep.logged_released += 1;
    }
    let has_sticky = s.outcome.is_some_and(|o| {
        matches!(
            o,
            Outcome::Sticky
                | Outcome::LoadOverride
                | Outcome::MissingSignal
                | Outcome::RequestLoadOverride
        )
    });
    if has_sticky {
        dep.with_sticky += 1;
    }
    if let Some(m) = s.matched_tokens.filter(|m| *m > 0)
        && has_sticky
    {
        dep.matched.push((d.ts, m));
        let src = d
            .matched_origin()
            .unwrap_or(MatchedSource::RecordsFromUnknownSource);
        *dep.sources.entry(src).or_default() += 1;
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

/// The warning for a peak whose 90 % interval is wider than
/// [`WIDE_PEAK_INTERVAL`] of the estimate `p`, with what would narrow it.
fn wide_interval(peak: &PeakReport, p: f64) -> Option<String> {
    let [lo, hi] = peak.interval?;
    let width = (hi - lo) / p;
    // A NaN width (an estimate of 0) is no warning either.
    if width.is_nan() || width <= WIDE_PEAK_INTERVAL {
        return None;
    }
    let narrower = match peak.source {
        PeakSource::VllmStats => {
            "the EPP's log at -v=5 (the prefix producers' lines) or decision records with the endpoint picked and its match, read with these vLLM logs, measure each request's uncached tokens; vLLM's Prometheus counters give the computed tokens exactly"
        }
        PeakSource::Prometheus => {
            "a longer capture with requests waiting, or shorter scrape intervals"
        }
        _ => "more saturated traffic",
    };
    Some(format!(
        "thin evidence: the peak's 90 % interval {lo:.0}–{hi:.0} is {:.0} % of the estimate {p:.0}; narrower with: {narrower}",
        width * 100.0
    ))
}

/// What to do when no decision carries matched tokens.
pub const MISSING_MATCHED: &str = "no decision carries matched tokens; they come from decision records (--emit-decisions of a build that records match info), the P/D decider's `Computed hit percentage for prefix cache` line (-v=4), or at -v=5 (TRACE) the precise prefix producer's `Produce completed` and the approximate one's `Found cached servers` lines (best with the prefix scorer's `Calculated score` lines)";

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
        assert_eq!(endpoint_pod("p-rank-"), "p-rank-");
        assert_eq!(endpoint_pod("p-rank-1-rank-2"), "p-rank-1");
        assert_eq!(endpoint_pod("p-rank--rank-5"), "p-rank-");
        assert_eq!(endpoint_pod("p-rank-1x"), "p-rank-1x");
        assert_eq!(endpoint_pod("-rank-7"), "");
    }

    #[test]
    fn kept_decisions_are_small() {
        assert!(std::mem::size_of::<(Kept, u16)>() <= 40);
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
        assert_eq!(rep.schema, "gatecal.recommend/v3");
        assert_eq!(d.peak_prefill_throughput.source, PeakSource::User);
        assert_eq!(d.break_even_ms.count, 5);
        assert!((d.break_even_ms.p50.unwrap() - 1440.0).abs() < 1.0);
        assert_eq!(d.break_even_tokens.p50, Some(1440));
        assert_eq!(d.matched_tokens.sources["decision_records"], 5);
        assert_eq!(d.matched_tokens.scored, 5);
        let row = |k: RowKind| d.rows.iter().find(|r| r.kind == k).unwrap();
        // Holding gaps 500 and 1000 and releasing the rest is the ideal:
        // any bar in [1000, 2000) does it; the shortest is 1000.
        let st = row(RowKind::Static);
        assert_eq!(st.max_ttft_penalty_ms, 1000.0);
        assert!((st.released_share - 0.6).abs() < 1e-9);
        assert_eq!(st.excess_ttft_ms, Some(0.0));
        // Break-even releases gaps above 1440 tokens: the same three.
        assert!((row(RowKind::MatchedTokens).released_share - 0.6).abs() < 1e-9);
        // The current config (15928 tok/s, 18 s) releases none, and holds
        // 2000, 4000 and 8000 ms gaps against a 1440 ms break-even.
        let cur = row(RowKind::Current);
        assert_eq!(cur.released_share, 0.0);
        assert_eq!(cur.logged_released_share, Some(0.0));
        assert!((cur.excess_ttft_ms.unwrap() - (560.0 + 2560.0 + 6560.0) / 5.0).abs() < 1e-6);
        let rec = d.recommended.as_ref().unwrap();
        assert_eq!(rec.params.penalty_mode, PenaltyMode::Static);
        assert!(
            rec.yaml.contains("#  penaltyMode: matchedTokens"),
            "{}",
            rec.yaml
        );
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
    fn vllm_lines_past_the_cap_are_counted_and_not_used() {
        let push = |r: &mut Recommend, n: u32| {
            for i in 0..n {
                r.push_vllm(&VllmStats {
                    deployment: "d".into(),
                    pod: Some("p".into()),
                    ts: Some(1000.0 + 10.0 * f64::from(i)),
                    engine: Some("0".into()),
                    prompt_throughput: if i < 40 { 9000.0 } else { 30000.0 },
                    running: Some(2),
                    waiting: Some(3),
                    ..VllmStats::default()
                });
            }
        };
        let peak = |max: usize, n: u32| {
            let mut r = Recommend::new(RecommendOptions::default(), ConfigSet::default())
                .with_max_vllm_lines(max);
            push(&mut r, n);
            let rep = r.finish(InputSummary::default());
            (
                rep.deployments[0].peak_prefill_throughput.clone(),
                rep.vllm_cut,
            )
        };
        let (first, cut) = peak(40, 80);
        assert_eq!(
            cut,
            VllmCut {
                lines: 40,
                max_lines: 40
            }
        );
        let (alone, none) = peak(MAX_VLLM_LINES, 40);
        assert_eq!(none.lines, 0);
        assert_eq!(first, alone);
        assert_eq!(first.source, PeakSource::VllmStats);
        let (all, _) = peak(MAX_VLLM_LINES, 80);
        assert!(all.value > first.value, "{} {}", all.value, first.value);
    }

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
        let rec = d.recommended.as_ref().expect("matched tokens are known");
        assert_eq!(rec.params.peak_prefill_throughput, 15928.0);
        // What it recommends passes the EPP's validation.
        let changes = crate::config::epp::writer::ParamChanges {
            peak_prefill_throughput: rec.params.peak_prefill_throughput,
            max_ttft_penalty_ms: rec.params.max_ttft_penalty_ms,
            penalty_mode: rec.params.penalty_mode,
        };
        let pasted = crate::config::epp::filters_from_yaml(
            &crate::config::epp::writer::minimal_config(&changes),
        )
        .unwrap();
        assert_eq!(pasted.len(), 1);
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
                SourcedConfig::new("test", config, crate::config::source::ParamSource::File),
            )],
            ..ConfigSet::default()
        };
        let mut r = Recommend::new(RecommendOptions::default(), set);
        zero_throughput_vllm(&mut r);
        one_decision(&mut r);
        let rep = r.finish(InputSummary::default());
        let d = &rep.deployments[0];
        assert!(d.recommended.is_none());
        assert!(d.rows.iter().all(|r| r.kind == RowKind::Current));
        assert!(
            d.warnings
                .iter()
                .any(|w| w.starts_with("no estimate of peakPrefillThroughput")),
            "{:?}",
            d.warnings
        );
        assert_eq!(d.break_even_ms.count, 0);
    }

    #[test]
    fn no_matched_tokens_no_recommendation() {
        let mut r = Recommend::new(RecommendOptions::default(), ConfigSet::default());
        r.push_decision(DecisionInput {
            deployment: "d".into(),
            ts: Some(1.0),
            exact: Some(vec![
                Candidate::new("s")
                    .with_match(1, 1, 0)
                    .with_in_flight_tokens(9000),
                Candidate::new("n")
                    .with_match(0, 1, 0)
                    .with_in_flight_tokens(1000),
            ]),
            ..DecisionInput::default()
        });
        let rep = r.finish(InputSummary::default());
        let d = &rep.deployments[0];
        assert!(d.recommended.is_none());
        assert!(
            d.matched_tokens
                .missing
                .as_deref()
                .unwrap()
                .contains("-v=5")
        );
        // The static sweep at the configured peak, nothing derived.
        assert!(
            d.rows
                .iter()
                .all(|r| matches!(r.kind, RowKind::Current | RowKind::StaticSweep))
        );
        assert_eq!(d.rows.len(), 6);
        assert!(
            d.warnings
                .iter()
                .any(|w| w.starts_with("no recommendation"))
        );
        // No evidence of the peak and no bar: nothing to paste.
        assert_eq!(d.paste, None);
    }
}
