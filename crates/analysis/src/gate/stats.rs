//! Accumulating samples into the figures of a report.

use std::collections::BTreeMap;

use gatecal_filter::{Config, Outcome, PenaltyMode};
use serde::{Deserialize, Serialize};

pub use crate::gate::hist::{Distribution, MIN_QUANTILE_SAMPLE};
use crate::gate::hist::{Recorded, SignedHistogram};
use crate::gate::sample::{Evidence, GateSample};
use crate::gate::traced::{TracedAcc, TracedStats};
use crate::gate::whatif::{WhatIfSpec, pinned_worse_bar, replay};

/// How many disagreeing request ids a self-check lists.
pub const MAX_LISTED_DISAGREEMENTS: usize = 20;

/// Decisions by evidence label (only decisions where the gate was evaluated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceCounts {
    /// From a `TTFT load gate broken` line.
    pub logged: u64,
    /// From the decision's trace span (`llm_d.epp.filter.ttft_penalty_ms`).
    pub traced: u64,
    /// Every candidate's load seen in the decision's own data.
    pub observed: u64,
    /// Some loads carried forward.
    pub reconstructed: u64,
    /// Not enough evidence; not in the distribution.
    pub unknown: u64,
}

/// Decisions that stayed pinned while the gate input was in `[min_ms, max_ms]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PinnedWorse {
    /// Lower edge (ms), `--pinned-worse-min`.
    pub min_ms: f64,
    /// Upper edge (ms): the bar in force; `null` when there is none or it
    /// differs between the deployments aggregated.
    pub max_ms: Option<f64>,
    /// Decisions.
    pub count: u64,
    /// Of all decisions.
    pub share: f64,
}

/// Replay of the decisions with exact evidence under the deployment's config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SelfCheck {
    /// Decisions with `logged` or `observed` evidence and a logged outcome.
    pub replayed: u64,
    /// Of those, how many the filter core reproduces.
    pub agreed: u64,
    /// Request ids of the first disagreements.
    pub disagreements: Vec<String>,
    /// Decisions whose logged `maxPenalty` differs from the config's bar.
    pub bar_mismatches: u64,
}

/// The log's held outcomes as constraints on the reconstruction: a decision
/// logged as held had a gate input at most the bar, so a carried-forward
/// estimate above it is censored to the largest input the config holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Censoring {
    /// Reconstructed gate inputs the logged hold had to move.
    pub moved: u64,
    /// Of the `reconstructed` decisions (the ones that could be moved).
    pub reconstructed: u64,
    /// Median move, ms (downwards).
    pub move_p50_ms: Option<f64>,
    /// 90th percentile of the moves, ms.
    pub move_p90_ms: Option<f64>,
    /// Largest move, ms.
    pub move_max_ms: Option<f64>,
}

/// Every decision with a logged outcome and a known gate input, replayed
/// under the config in force: does it reproduce what the EPP did?
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayAgreement {
    /// Decisions with a logged outcome and a `logged`, `observed` or
    /// `reconstructed` gate input.
    pub decisions: u64,
    /// Of those, how many the config in force reproduces.
    pub agreed: u64,
    /// Releases the log shows (all decisions).
    pub logged_released: u64,
    /// Releases when every decision is replayed under the config in force
    /// (decisions with an unknown gate input count as not released, as in
    /// the what-ifs).
    pub replayed_released: u64,
    /// Request ids of the first disagreements.
    pub disagreements: Vec<String>,
    /// The `maxPenalty` the log's gate lines show, when it differs from the
    /// replayed bar (`null` when they agree or the log shows none).
    pub log_bar_ms: Option<f64>,
    /// The `prefillThroughput` the log's filter lines show, when it differs
    /// from the replayed peak.
    pub log_peak_prefill_throughput: Option<f64>,
    /// Why some disagree and what to do; `null` when all agree.
    pub cause: Option<String>,
}

/// One what-if's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WhatIfResult {
    /// `static` or `matchedTokens`.
    pub mode: PenaltyMode,
    /// The bar (static) or ceiling (matched tokens; 0 = none); `null` when it
    /// differs between aggregated deployments.
    pub max_ttft_penalty_ms: Option<f64>,
    /// The peak used; `null` when it differs between aggregated deployments.
    pub peak_prefill_throughput: Option<f64>,
    /// Decisions released (`load_override` or `request_load_override`).
    pub released: u64,
    /// `released` over all decisions.
    pub released_share: f64,
    /// Decisions held under this config with the gate input at the
    /// reference peak (the config in force's) at least the pinned-worse
    /// minimum.
    pub pinned_worse: u64,
    /// `pinned_worse` over all decisions.
    pub pinned_worse_share: f64,
    /// Decisions whose gate input is unknown (in neither count).
    pub unknown: u64,
    /// Matched tokens: decisions whose best sticky endpoint had no match
    /// info, so the break-even test was skipped (held).
    pub no_match_info: u64,
}

/// The config in force replayed: the `current` row beside the what-ifs and
/// candidates, with the releases the log shows beside the replayed ones.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CurrentResult {
    /// The config in force replayed on every decision (`mode`,
    /// `max_ttft_penalty_ms`, `peak_prefill_throughput`, counts as a
    /// what-if's).
    #[serde(flatten)]
    pub replayed: WhatIfResult,
    /// Releases as logged (the decisions' own outcomes; equals `released`
    /// of the stats).
    pub logged_released: u64,
    /// `logged_released` over all decisions.
    pub logged_released_share: f64,
    /// The predicted TTFT of the config in force, beside which the
    /// observed TTFT is its self-check: on a deployment's row when
    /// `--candidate-config` or `--what-if` is given (`null` when it
    /// cannot be predicted), absent otherwise ([`crate::predict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ttft_ms: Option<Option<PredictedTtft>>,
    /// The replay's cached share of prompt tokens under the config in
    /// force; present when `predicted_ttft_ms` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_prefix_hit_share: Option<Option<f64>>,
}

/// A `--candidate-config` or `--what-if` config replayed on every decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateResult {
    /// `file:PATH` or `what-if KEY=VALUE,...`.
    pub label: String,
    /// The counts, as a what-if's (over the decisions of the deployments
    /// for which the candidate is valid; its values are `null` when they
    /// differ between aggregated deployments).
    #[serde(flatten)]
    pub result: WhatIfResult,
    /// Decisions not replayed because the candidate is not valid for their
    /// deployment's config.
    pub invalid: u64,
    /// The EPP's validation message when the candidate is not valid for a
    /// deployment (the first one met); `null` when valid for all.
    pub error: Option<String>,
    /// The predicted TTFT under this config: on a deployment's rows
    /// (`null` when it cannot be predicted, the deployment's `warnings`
    /// saying why), absent in windows and overall ([`crate::predict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ttft_ms: Option<Option<PredictedTtft>>,
    /// The replay's cached share of prompt tokens under this config;
    /// present when `predicted_ttft_ms` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_prefix_hit_share: Option<Option<f64>>,
}

/// The figures of one set of decisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    /// Decisions.
    pub decisions: u64,
    /// Decisions by outcome (every outcome name, plus `unknown`).
    pub outcomes: BTreeMap<String, u64>,
    /// Evidence mix of the decisions where the gate was evaluated.
    pub evidence: EvidenceCounts,
    /// Gate input distribution over the decisions where it is known.
    pub gate_input_ms: Distribution,
    /// The bar in force (`maxTTFTPenaltyMs`); `null` if it differs between
    /// aggregated deployments.
    pub bar_ms: Option<f64>,
    /// Decisions released.
    pub released: u64,
    /// `released` over all decisions.
    pub released_share: f64,
    /// Pinned-worse decisions.
    pub pinned_worse: PinnedWorse,
    /// The self-check.
    pub self_check: SelfCheck,
    /// Replay of every decision with a known gate input under the config in
    /// force.
    pub replay: ReplayAgreement,
    /// How far the logged holds moved the reconstruction.
    pub censoring: Censoring,
    /// What-ifs, in the order asked.
    pub what_if: Vec<WhatIfResult>,
    /// The config in force replayed, with the logged releases beside.
    pub current: CurrentResult,
    /// `--candidate-config` files, then `--what-if` lists, in the order given.
    pub candidates: Vec<CandidateResult>,
    /// The decisions with a trace span and the reconstruction's measured
    /// error; absent when no decision has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traced: Option<TracedStats>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct WhatIfAcc {
    mode: Option<PenaltyMode>,
    #[serde(with = "agree_serde")]
    max: Option<Option<f64>>,
    #[serde(with = "agree_serde")]
    peak: Option<Option<f64>>,
    released: u64,
    pinned_worse: u64,
    unknown: u64,
    no_match_info: u64,
}

impl WhatIfAcc {
    /// Counts one replay of a sample under `c`. Pinned-worse is measured
    /// at the reference peak, the config in force's: `reference_ms` is the
    /// sample's gate input there, so every row's pinned share counts the
    /// same gate inputs (a row at another peak holds or releases at its
    /// own, but what holding costs is the deployment's).
    fn count(
        &mut self,
        c: &Config,
        r: &crate::gate::whatif::Replayed,
        reference_ms: Option<f64>,
        pinned_min_ms: f64,
    ) {
        self.mode = Some(c.penalty_mode);
        agree(&mut self.max, c.max_ttft_penalty_ms);
        agree(&mut self.peak, c.peak_prefill_throughput);
        match r.outcome {
            None => self.unknown += 1,
            Some(o) => {
                if o.is_release() {
                    self.released += 1;
                }
                if o == Outcome::Sticky && reference_ms.is_some_and(|g| g >= pinned_min_ms) {
                    self.pinned_worse += 1;
                }
            }
        }
        if r.no_match_info {
            self.no_match_info += 1;
        }
    }

    fn merge(&mut self, b: &WhatIfAcc) {
        self.mode = self.mode.or(b.mode);
        agree_merge(&mut self.max, b.max);
        agree_merge(&mut self.peak, b.peak);
        self.released += b.released;
        self.pinned_worse += b.pinned_worse;
        self.unknown += b.unknown;
        self.no_match_info += b.no_match_info;
    }

    fn result(&self, share: impl Fn(u64) -> f64) -> WhatIfResult {
        WhatIfResult {
            mode: self.mode.unwrap_or_default(),
            max_ttft_penalty_ms: self.max.flatten(),
            peak_prefill_throughput: self.peak.flatten(),
            released: self.released,
            released_share: share(self.released),
            pinned_worse: self.pinned_worse,
            pinned_worse_share: share(self.pinned_worse),
            unknown: self.unknown,
            no_match_info: self.no_match_info,
        }
    }
}

/// A candidate config resolved for one deployment: its label, and the
/// config or the EPP's message when it is not valid there.
pub type ResolvedCandidate = (String, Result<Config, String>);

/// One candidate's counts, and why it was not replayed where it was not.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct CandidateAcc {
    label: String,
    acc: WhatIfAcc,
    invalid: u64,
    error: Option<String>,
}

/// A value that must agree across a set, in a partial report: `null`
/// (nothing yet), the value, or `"differs"`.
mod agree_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Value(f64),
        Differs(Differs),
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Differs {
        Differs,
    }

    pub(super) fn serialize<S: Serializer>(
        v: &Option<Option<f64>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(Some(x)) => Wire::Value(*x).serialize(s),
            Some(None) => Wire::Differs(Differs::Differs).serialize(s),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<f64>>, D::Error> {
        Ok(match Option::<Wire>::deserialize(d)? {
            None => None,
            Some(Wire::Value(x)) => Some(Some(x)),
            Some(Wire::Differs(_)) => Some(None),
        })
    }
}

/// Merges a value that must agree across a set: `None` = nothing yet,
/// `Some(None)` = disagreement.
fn agree(slot: &mut Option<Option<f64>>, v: f64) {
    match slot {
        None => *slot = Some(Some(v)),
        Some(Some(x)) if *x != v => *slot = Some(None),
        _ => {}
    }
}

fn agree_merge(slot: &mut Option<Option<f64>>, other: Option<Option<f64>>) {
    match other {
        None => {}
        Some(None) => *slot = Some(None),
        Some(Some(v)) => agree(slot, v),
    }
}

/// Accumulates samples; `finish` gives the [`Stats`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatsAcc {
    decisions: u64,
    outcomes: BTreeMap<Outcome, u64>,
    unknown_outcome: u64,
    evidence: EvidenceCounts,
    hist: SignedHistogram,
    #[serde(with = "agree_serde")]
    bar: Option<Option<f64>>,
    released: u64,
    pinned_worse: u64,
    pinned_min_ms: f64,
    self_check: SelfCheck,
    replay: ReplayAgreement,
    /// Logged `maxPenalty` values against the config's bar.
    #[serde(with = "agree_serde")]
    log_bar: Option<Option<f64>>,
    #[serde(with = "agree_serde")]
    config_bar: Option<Option<f64>>,
    #[serde(with = "agree_serde")]
    log_peak: Option<Option<f64>>,
    #[serde(with = "agree_serde")]
    config_peak: Option<Option<f64>>,
    censored: SignedHistogram,
    what_if: Vec<WhatIfAcc>,
    /// The config in force replayed.
    current: WhatIfAcc,
    /// `--candidate-config` and `--what-if` rows (empty until the first
    /// [`StatsAcc::add_candidates`]).
    candidates: Vec<CandidateAcc>,
    traced: TracedAcc,
    /// The gate input of the sample last added at the reference peak (the
    /// config in force's), for its candidates' pinned-worse.
    #[serde(skip)]
    reference_ms: Option<f64>,
}

impl StatsAcc {
    /// An empty accumulator for `n_what_if` what-ifs.
    pub fn new(pinned_min_ms: f64, n_what_if: usize) -> StatsAcc {
        StatsAcc {
            decisions: 0,
            outcomes: BTreeMap::new(),
            unknown_outcome: 0,
            evidence: EvidenceCounts::default(),
            hist: SignedHistogram::new(),
            bar: None,
            released: 0,
            pinned_worse: 0,
            pinned_min_ms,
            self_check: SelfCheck::default(),
            replay: ReplayAgreement::default(),
            log_bar: None,
            config_bar: None,
            log_peak: None,
            config_peak: None,
            censored: SignedHistogram::new(),
            what_if: vec![WhatIfAcc::default(); n_what_if],
            current: WhatIfAcc::default(),
            candidates: Vec::new(),
            traced: TracedAcc::default(),
            reference_ms: None,
        }
    }

    /// Decisions added.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// The gate input histogram so far.
    pub fn histogram(&self) -> &SignedHistogram {
        &self.hist
    }

    /// Adds one sample of a deployment with config `config`.
    pub fn add(&mut self, s: &GateSample, config: &Config, specs: &[WhatIfSpec]) {
        self.decisions += 1;
        match s.outcome {
            Some(o) => *self.outcomes.entry(o).or_default() += 1,
            None => self.unknown_outcome += 1,
        }
        match s.evidence {
            Some(Evidence::Logged) => self.evidence.logged += 1,
            Some(Evidence::Traced) => self.evidence.traced += 1,
            Some(Evidence::Observed) => self.evidence.observed += 1,
            Some(Evidence::Reconstructed) => self.evidence.reconstructed += 1,
            Some(Evidence::Unknown) => self.evidence.unknown += 1,
            None => {}
        }
        if let Some(g) = s.gate_input_ms {
            self.hist.record(g);
        }
        agree(&mut self.bar, config.max_ttft_penalty_ms);
        let bar = pinned_worse_bar(config);
        if s.outcome.is_some_and(Outcome::is_release) {
            self.released += 1;
        }
        // Held at a gate input equal to the bar is pinned (the filter
        // releases only strictly above it): `[min, bar]`.
        if s.outcome == Some(Outcome::Sticky)
            && s.gate_input_ms
                .is_some_and(|g| g >= self.pinned_min_ms && g <= bar)
        {
            self.pinned_worse += 1;
        }

        // The sample replayed under the deployment's config: the
        // self-check's replay and the replay agreement's (one replay, the
        // filter core being a pure function of the sample and the config).
        let in_force = replay(s, config);
        // Self-check: exact evidence, replayed under the deployment's config.
        if s.traced {
            self.traced.add(s);
        }
        if matches!(
            s.evidence,
            Some(Evidence::Logged | Evidence::Observed | Evidence::Traced)
        ) && s.outcome_logged
            && let Some(logged) = s.outcome
        {
            self.self_check.replayed += 1;
            if in_force.outcome == Some(logged) {
                self.self_check.agreed += 1;
            } else if self.self_check.disagreements.len() < MAX_LISTED_DISAGREEMENTS {
                self.self_check.disagreements.push(
                    s.request_id
                        .as_deref()
                        .unwrap_or("(no request id)")
                        .to_string(),
                );
            }
        }
        if let Some(b) = s.logged_bar_ms
            && b != config.max_ttft_penalty_ms
        {
            self.self_check.bar_mismatches += 1;
        }

        // Replay agreement: every decision whose gate input is known.
        if s.outcome_logged {
            if s.outcome.is_some_and(Outcome::is_release) {
                self.replay.logged_released += 1;
            }
            if let Some(logged) = s.outcome
                && matches!(
                    s.evidence,
                    Some(Evidence::Logged | Evidence::Observed | Evidence::Reconstructed)
                )
            {
                self.replay.decisions += 1;
                if in_force.outcome == Some(logged) {
                    self.replay.agreed += 1;
                } else if self.replay.disagreements.len() < MAX_LISTED_DISAGREEMENTS {
                    self.replay.disagreements.push(
                        s.request_id
                            .as_deref()
                            .unwrap_or("(no request id)")
                            .to_string(),
                    );
                }
            }
        }
        if in_force.outcome.is_some_and(Outcome::is_release) {
            self.replay.replayed_released += 1;
        }
        if let Some(b) = s.logged_bar_ms {
            agree(&mut self.log_bar, b);
        }
        if let Some(p) = s.logged_peak {
            agree(&mut self.log_peak, p);
        }
        agree(&mut self.config_bar, config.max_ttft_penalty_ms);
        agree(&mut self.config_peak, config.peak_prefill_throughput);
        if s.evidence == Some(Evidence::Reconstructed)
            && let Some(m) = s.censored_ms
        {
            self.censored.record(m);
        }

        let reference = in_force.gate_input_ms;
        self.reference_ms = reference;
        self.current
            .count(config, &in_force, reference, self.pinned_min_ms);

        for (acc, spec) in self.what_if.iter_mut().zip(specs) {
            let c = spec.apply(config);
            // A what-if that is the config in force replays as it does.
            let r = if c == *config {
                in_force
            } else {
                replay(s, &c)
            };
            acc.count(&c, &r, reference, self.pinned_min_ms);
        }
    }

    /// Replays the sample last [`add`](StatsAcc::add)ed under each candidate
    /// config `(label, config)`, as resolved for its deployment (`Err`: the
    /// EPP's message when the candidate is not valid there).
    pub fn add_candidates(&mut self, s: &GateSample, candidates: &[ResolvedCandidate]) {
        for (label, _) in candidates.iter().skip(self.candidates.len()) {
            self.candidates.push(CandidateAcc {
                label: label.clone(),
                ..CandidateAcc::default()
            });
        }
        for (acc, (_, c)) in self.candidates.iter_mut().zip(candidates) {
            match c {
                Ok(c) => acc
                    .acc
                    .count(c, &replay(s, c), self.reference_ms, self.pinned_min_ms),
                Err(e) => {
                    acc.invalid += 1;
                    acc.error.get_or_insert_with(|| e.clone());
                }
            }
        }
    }

    /// Adds another accumulator's decisions (for windows and the overall row).
    pub fn merge(&mut self, o: &StatsAcc) {
        self.decisions += o.decisions;
        for (k, v) in &o.outcomes {
            *self.outcomes.entry(*k).or_default() += v;
        }
        self.unknown_outcome += o.unknown_outcome;
        self.evidence.logged += o.evidence.logged;
        self.evidence.traced += o.evidence.traced;
        self.traced.merge(&o.traced);
        self.evidence.observed += o.evidence.observed;
        self.evidence.reconstructed += o.evidence.reconstructed;
        self.evidence.unknown += o.evidence.unknown;
        self.hist.merge(&o.hist);
        agree_merge(&mut self.bar, o.bar);
        self.released += o.released;
        self.pinned_worse += o.pinned_worse;
        self.self_check.replayed += o.self_check.replayed;
        self.self_check.agreed += o.self_check.agreed;
        self.self_check.bar_mismatches += o.self_check.bar_mismatches;
        for d in &o.self_check.disagreements {
            if self.self_check.disagreements.len() < MAX_LISTED_DISAGREEMENTS {
                self.self_check.disagreements.push(d.clone());
            }
        }
        self.replay.decisions += o.replay.decisions;
        self.replay.agreed += o.replay.agreed;
        self.replay.logged_released += o.replay.logged_released;
        self.replay.replayed_released += o.replay.replayed_released;
        for d in &o.replay.disagreements {
            if self.replay.disagreements.len() < MAX_LISTED_DISAGREEMENTS {
                self.replay.disagreements.push(d.clone());
            }
        }
        agree_merge(&mut self.log_bar, o.log_bar);
        agree_merge(&mut self.config_bar, o.config_bar);
        agree_merge(&mut self.log_peak, o.log_peak);
        agree_merge(&mut self.config_peak, o.config_peak);
        self.censored.merge(&o.censored);
        if self.what_if.len() < o.what_if.len() {
            self.what_if.resize(o.what_if.len(), WhatIfAcc::default());
        }
        for (a, b) in self.what_if.iter_mut().zip(&o.what_if) {
            a.merge(b);
        }
        self.current.merge(&o.current);
        for b in o.candidates.iter().skip(self.candidates.len()) {
            self.candidates.push(CandidateAcc {
                label: b.label.clone(),
                ..CandidateAcc::default()
            });
        }
        for (a, b) in self.candidates.iter_mut().zip(&o.candidates) {
            a.acc.merge(&b.acc);
            a.invalid += b.invalid;
            if a.error.is_none() {
                a.error.clone_from(&b.error);
            }
        }
    }

    /// The replay agreement, with its cause when some decisions disagree:
    /// a bar or peak the log shows and the config replayed does not (and the
    /// flag that fixes it), else a reconstruction defect.
    fn replay_agreement(&self) -> ReplayAgreement {
        let mut r = self.replay.clone();
        let differs = |log: Option<Option<f64>>, cfg: Option<Option<f64>>| match (log, cfg) {
            (Some(Some(l)), Some(Some(c))) if l != c => Some(l),
            // Several values in the log, or configs that differ between
            // the aggregated deployments: nothing one flag can fix.
            _ => None,
        };
        r.log_bar_ms = differs(self.log_bar, self.config_bar);
        r.log_peak_prefill_throughput = differs(self.log_peak, self.config_peak);
        if r.agreed < r.decisions || r.logged_released != r.replayed_released {
            let mut fixes = Vec::new();
            if let Some(b) = r.log_bar_ms {
                fixes.push(format!(
                    "the log's gate lines show maxPenalty {b} ms but the config replayed has {} ms: pass --max-ttft-penalty-ms {b}",
                    self.config_bar.flatten().unwrap_or(f64::NAN)
                ));
            }
            if let Some(p) = r.log_peak_prefill_throughput {
                fixes.push(format!(
                    "the log's filter lines show prefillThroughput {p} tok/s but the config replayed has {}: pass --peak-prefill-throughput {p}",
                    self.config_peak.flatten().unwrap_or(f64::NAN)
                ));
            }
            if matches!(self.log_bar, Some(None)) {
                fixes.push(
                    "the log's gate lines show several maxPenalty values (the config changed during the log): audit each period separately"
                        .to_string(),
                );
            }
            r.cause = Some(if fixes.is_empty() {
                "a reconstruction defect: the config in force does not reproduce these logged outcomes (please report it with the request ids listed)".to_string()
            } else {
                format!("config mismatch: {}", fixes.join("; "))
            });
        }
        r
    }

    /// The figures.
    pub fn finish(&self) -> Stats {
        self.finish_recorded(&self.hist.recorded())
    }

    /// The figures, with the histogram's buckets `r` already read
    /// (`self.histogram().recorded()`, shared with the report's bins).
    pub fn finish_recorded(&self, r: &Recorded) -> Stats {
        let n = self.decisions;
        let share = |c: u64| if n == 0 { 0.0 } else { c as f64 / n as f64 };
        let mut outcomes: BTreeMap<String, u64> = Outcome::ALL
            .iter()
            .map(|o| {
                (
                    o.as_str().to_string(),
                    self.outcomes.get(o).copied().unwrap_or(0),
                )
            })
            .collect();
        outcomes.insert("unknown".into(), self.unknown_outcome);
        let bar = self.bar.flatten();
        Stats {
            decisions: n,
            outcomes,
            evidence: self.evidence,
            gate_input_ms: Distribution::of_recorded(&self.hist, r),
            bar_ms: bar,
            released: self.released,
            released_share: share(self.released),
            pinned_worse: PinnedWorse {
                min_ms: self.pinned_min_ms,
                max_ms: bar.filter(|b| *b > 0.0),
                count: self.pinned_worse,
                share: share(self.pinned_worse),
            },
            self_check: self.self_check.clone(),
            replay: self.replay_agreement(),
            censoring: {
                let r = self.censored.recorded();
                Censoring {
                    moved: self.censored.count(),
                    reconstructed: self.evidence.reconstructed,
                    move_p50_ms: r.quantile(0.5),
                    move_p90_ms: r.quantile(0.9),
                    move_max_ms: self.censored.max(),
                }
            },
            what_if: self.what_if.iter().map(|a| a.result(share)).collect(),
            current: CurrentResult {
                replayed: self.current.result(share),
                logged_released: self.released,
                logged_released_share: share(self.released),
                predicted_ttft_ms: None,
                predicted_prefix_hit_share: None,
            },
            candidates: self
                .candidates
                .iter()
                .map(|c| CandidateResult {
                    label: c.label.clone(),
                    result: c.acc.result(share),
                    invalid: c.invalid,
                    error: c.error.clone(),
                    predicted_ttft_ms: None,
                    predicted_prefix_hit_share: None,
                })
                .collect(),
            traced: (self.traced.decisions > 0).then(|| self.traced.finish()),
        }
    }
}

/// The 90 % intervals of a prediction, ms.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PredictedIntervals {
    /// Of the median.
    pub p50: [f64; 2],
    /// Of the 90th percentile.
    pub p90: [f64; 2],
    /// Of the 99th percentile.
    pub p99: [f64; 2],
    /// Of the mean.
    pub mean: [f64; 2],
}

/// The predicted TTFT of one config (`predicted_ttft_ms`), as the
/// replay of [`crate::predict`] gives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PredictedTtft {
    /// Median, ms.
    pub p50: f64,
    /// 90th percentile, ms.
    pub p90: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// Mean, ms.
    pub mean: f64,
    /// 90 % intervals.
    pub interval: PredictedIntervals,
    /// Requests replayed.
    pub n: usize,
    /// `[differ, compared]`: the logged decisions the config decided the
    /// other way on the replay's state (`Prediction::logged_outcomes`); read
    /// by the self-check of the config in force, not written out.
    #[serde(skip)]
    pub logged_outcomes: [usize; 2],
}
