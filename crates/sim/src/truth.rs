//! Ground truth: one [`TruthRecord`] per filter decision (the decisions-jsonl
//! v1 fields plus the simulator's truth) and the run's [`Summary`].

use std::collections::BTreeMap;

use gatecal_filter::{Candidate, Config, Outcome, PenaltyMode, TtftSource, decide};
use serde::{Deserialize, Serialize};

/// One candidate as the filter saw it (decisions-jsonl v1 candidate).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthCandidate {
    /// `namespace/name`.
    pub endpoint: String,
    /// Prefix cache match, in blocks.
    pub match_blocks: Option<i64>,
    /// Blocks of the prompt considered for matching.
    pub total_blocks: Option<i64>,
    /// Tokens per block.
    pub block_size_tokens: Option<i64>,
    /// In-flight tokens, excluding the current request (`null` when the
    /// EPP's attribute was missing at this decision).
    pub in_flight_tokens: Option<i64>,
    /// In-flight requests.
    pub in_flight_requests: Option<i64>,
    /// Latency-predictor TTFT, when that source is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ttft_ms: Option<f64>,
}

impl TruthCandidate {
    /// From the filter core's candidate.
    pub fn from_candidate(c: &Candidate) -> TruthCandidate {
        TruthCandidate {
            endpoint: c.id.clone(),
            match_blocks: c.match_blocks,
            total_blocks: c.total_blocks,
            block_size_tokens: c.block_size_tokens,
            in_flight_tokens: c.in_flight_tokens,
            in_flight_requests: c.in_flight_requests,
            predicted_ttft_ms: c.predicted_ttft_ms,
        }
    }

    /// Back to the filter core's candidate (for replays).
    pub fn to_candidate(&self) -> Candidate {
        Candidate {
            id: self.endpoint.clone(),
            match_blocks: self.match_blocks,
            total_blocks: self.total_blocks,
            block_size_tokens: self.block_size_tokens,
            in_flight_tokens: self.in_flight_tokens,
            in_flight_requests: self.in_flight_requests,
            predicted_ttft_ms: self.predicted_ttft_ms,
        }
    }
}

/// One decision of one filter instance, with the truth behind it.
///
/// The first nine fields are the decisions-jsonl v1 format (so a truth file
/// is also a valid decisions file); the rest are the simulator's truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthRecord {
    /// Format version, 1.
    pub v: u32,
    /// Decision time (the filter's own log line), epoch seconds.
    pub ts: f64,
    /// Deployment name.
    pub deployment: String,
    /// `x-request-id`.
    pub request_id: String,
    /// Scheduling profile (`default`, `decode`, `prefill`).
    pub profile: String,
    /// Filter instance name.
    pub filter: String,
    /// Outcome (metric label).
    pub outcome: String,
    /// The `penalty` of the `TTFT load gate broken` line, when logged.
    pub logged_penalty_ms: Option<f64>,
    /// Candidates in the order the filter saw them.
    pub candidates: Vec<TruthCandidate>,
    /// The gate input `bestStickyTTFT - bestNonStickyTTFT` in ms as the filter
    /// computed it; `null` when the gate was not evaluated.
    pub truth_gate_input_ms: Option<f64>,
    /// True in-flight tokens of the best sticky endpoint (the gate's winner
    /// when it ran, else the sticky endpoint with the fewest in-flight
    /// tokens); `null` without a sticky endpoint or when not applicable.
    pub truth_best_sticky_in_flight: Option<i64>,
    /// Same for the non-sticky side; `null` without both sides.
    pub truth_best_non_sticky_in_flight: Option<i64>,
    /// `MatchBlocks * BlockSizeTokens` of that best sticky endpoint.
    pub truth_matched_tokens: Option<i64>,
    /// Prompt tokens of the request.
    pub prompt_tokens: i64,
    /// EPP pod that logged the decision.
    pub epp_pod: String,
    /// `namespace/name` of the endpoint the profile picked.
    pub chosen_endpoint: String,
    /// The request's time to first token in ms: from its arrival at the EPP
    /// (the `EPP received request` line) to its first token at the EPP (the
    /// first `HandleResponseBody is triggered` line). Every record of one
    /// request carries the same value.
    pub ttft_ms: f64,
    /// The request's arrival at the EPP, epoch seconds.
    pub arrival_ts: f64,
    /// Output tokens of the request.
    pub output_tokens: i64,
    /// Session id (with a replayed trace: the request's line in the trace).
    pub session_id: u64,
    /// Turn within the session, from 0.
    pub session_turn: u32,
    /// Think time after this answer before the session's next turn may
    /// arrive, ms; `null` with a replayed trace.
    pub think_time_ms: Option<f64>,
}

/// The bars the static what-if replays.
pub const WHAT_IF_BARS_MS: [f64; 6] = [1000.0, 2000.0, 5000.0, 10000.0, 18000.0, 30000.0];

/// Release shares of replays under other configurations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    /// Static mode at `maxTTFTPenaltyMs` = key (ms), share of decisions released.
    pub static_bar: BTreeMap<String, f64>,
    /// `penaltyMode: matchedTokens` keeping the deployment's bar as a ceiling.
    pub matched_tokens_with_ceiling: f64,
    /// `penaltyMode: matchedTokens` with the ceiling disabled (`maxTTFTPenaltyMs: 0`).
    pub matched_tokens_no_ceiling: f64,
}

/// Figures for one deployment, or for all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeploymentSummary {
    /// Deployment name, or `*` for all.
    pub deployment: String,
    /// Decisions (truth records).
    pub decisions: u64,
    /// Decisions per outcome label (every label listed, zeros included).
    pub outcomes: BTreeMap<String, u64>,
    /// Decisions where the gate was evaluated (gate input known).
    pub gate_evaluated: u64,
    /// Nearest-rank p50 of the gate input over evaluated decisions, ms.
    pub gate_input_p50_ms: Option<f64>,
    /// Nearest-rank p90, ms.
    pub gate_input_p90_ms: Option<f64>,
    /// Nearest-rank p99, ms.
    pub gate_input_p99_ms: Option<f64>,
    /// Share of decisions released (`load_override` + `request_load_override`).
    pub release_share: f64,
    /// Share of decisions with outcome `sticky` and gate input in
    /// `[5000, 18000)` ms: pinned 5–18 s of prefill behind an alternative.
    pub pinned_5_18s_share: f64,
    /// Replays under other configurations.
    pub what_if: WhatIf,
    /// True peak prefill throughput of one prefill engine, tokens/s (per
    /// deployment only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub true_peak_prefill_tps: Option<f64>,
    /// The effective saturated prefill rate of one prefill engine, tokens/s:
    /// the rate at which it drains a backlog of uncached tokens, per-request
    /// overhead and steps shared with decode included (per deployment only,
    /// when vLLM logs were simulated and some prefill waited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_peak_prefill_tps: Option<f64>,
    /// Median over the prefill engines of their stats lines reporting
    /// waiting requests (per deployment only, with vLLM logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated_intervals: Option<u64>,
    /// The deployment's configured `maxTTFTPenaltyMs` (per deployment only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttft_penalty_ms: Option<f64>,
    /// The deployment's configured `peakPrefillThroughput` (per deployment only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_prefill_throughput: Option<f64>,
}

/// The run's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// How quantiles are taken.
    pub quantile_method: String,
    /// All deployments together.
    pub overall: DeploymentSummary,
    /// Per deployment, in scenario order.
    pub deployments: Vec<DeploymentSummary>,
    /// The failure a failure scenario makes (those of
    /// [`crate::failure_scenario_names`]: the finding that should name it,
    /// and why); absent for the other scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_mode: Option<String>,
}

/// The nearest-rank quantile: the `ceil(q * n)`-th smallest value (1-based,
/// at least the first). `None` for an empty sample.
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

#[derive(Clone, Debug, Default)]
struct Acc {
    decisions: u64,
    outcomes: BTreeMap<String, u64>,
    gate: Vec<f64>,
    released: u64,
    pinned: u64,
    what_static: [u64; 6],
    mt_ceiling: u64,
    mt_none: u64,
}

impl Acc {
    fn finish(mut self, name: &str) -> DeploymentSummary {
        self.gate.sort_by(f64::total_cmp);
        let n = self.decisions.max(1) as f64;
        let mut outcomes: BTreeMap<String, u64> = Outcome::ALL
            .iter()
            .map(|o| (o.as_str().to_string(), 0))
            .collect();
        for (k, v) in self.outcomes {
            *outcomes.entry(k).or_default() += v;
        }
        DeploymentSummary {
            deployment: name.to_string(),
            decisions: self.decisions,
            outcomes,
            gate_evaluated: self.gate.len() as u64,
            gate_input_p50_ms: nearest_rank(&self.gate, 0.50),
            gate_input_p90_ms: nearest_rank(&self.gate, 0.90),
            gate_input_p99_ms: nearest_rank(&self.gate, 0.99),
            release_share: self.released as f64 / n,
            pinned_5_18s_share: self.pinned as f64 / n,
            what_if: WhatIf {
                static_bar: WHAT_IF_BARS_MS
                    .iter()
                    .zip(self.what_static)
                    .map(|(b, c)| (format!("{b}"), c as f64 / n))
                    .collect(),
                matched_tokens_with_ceiling: self.mt_ceiling as f64 / n,
                matched_tokens_no_ceiling: self.mt_none as f64 / n,
            },
            true_peak_prefill_tps: None,
            effective_peak_prefill_tps: None,
            saturated_intervals: None,
            max_ttft_penalty_ms: None,
            peak_prefill_throughput: None,
        }
    }
}

/// Builds a [`Summary`] incrementally from truth records.
#[derive(Clone, Debug)]
pub struct SummaryBuilder {
    names: Vec<String>,
    peaks: Vec<f64>,
    configs: Vec<Config>,
    instance_configs: BTreeMap<(String, String), Config>,
    per: Vec<Acc>,
    all: Acc,
}

impl SummaryBuilder {
    /// For a scenario's deployments.
    pub fn new(s: &crate::Scenario) -> SummaryBuilder {
        let mut instance_configs = BTreeMap::new();
        for d in &s.deployments {
            for p in &d.pools {
                for f in &p.filters {
                    instance_configs.insert((d.name.clone(), f.name.clone()), f.config.clone());
                }
            }
        }
        SummaryBuilder {
            names: s.deployments.iter().map(|d| d.name.clone()).collect(),
            peaks: s.deployments.iter().map(|d| d.true_peak_tps()).collect(),
            configs: s.deployments.iter().map(|d| d.primary_config()).collect(),
            instance_configs,
            per: vec![Acc::default(); s.deployments.len()],
            all: Acc::default(),
        }
    }

    /// Adds one record.
    pub fn add(&mut self, r: &TruthRecord) {
        let Some(di) = self.names.iter().position(|n| *n == r.deployment) else {
            return;
        };
        let base = self
            .instance_configs
            .get(&(r.deployment.clone(), r.filter.clone()))
            .cloned()
            .unwrap_or_else(|| self.configs[di].clone());
        // Replays use the throughput path at the configured peak, without
        // exploration (draw 1.0).
        let replay = Config {
            ttft_source: TtftSource::PrefillThroughput,
            exploration_probability: 0.0,
            ..base.clone()
        };
        let cands: Vec<Candidate> = r
            .candidates
            .iter()
            .map(TruthCandidate::to_candidate)
            .collect();
        let mut what_static = [0u64; 6];
        for (i, bar) in WHAT_IF_BARS_MS.iter().enumerate() {
            let c = Config {
                max_ttft_penalty_ms: *bar,
                ..replay.clone()
            };
            if decide(&c, &cands, 1.0).outcome.is_release() {
                what_static[i] = 1;
            }
        }
        let mt = Config {
            penalty_mode: PenaltyMode::MatchedTokens,
            ..replay.clone()
        };
        let mt_ceiling = decide(&mt, &cands, 1.0).outcome.is_release() as u64;
        let mt0 = Config {
            max_ttft_penalty_ms: 0.0,
            ..mt
        };
        let mt_none = decide(&mt0, &cands, 1.0).outcome.is_release() as u64;
        let released = Outcome::parse(&r.outcome).is_some_and(Outcome::is_release) as u64;
        let pinned = (r.outcome == "sticky"
            && r.truth_gate_input_ms
                .is_some_and(|g| (5000.0..18000.0).contains(&g))) as u64;
        for acc in [&mut self.per[di], &mut self.all] {
            acc.decisions += 1;
            *acc.outcomes.entry(r.outcome.clone()).or_default() += 1;
            if let Some(g) = r.truth_gate_input_ms {
                acc.gate.push(g);
            }
            acc.released += released;
            acc.pinned += pinned;
            for (a, w) in acc.what_static.iter_mut().zip(what_static) {
                *a += w;
            }
            acc.mt_ceiling += mt_ceiling;
            acc.mt_none += mt_none;
        }
    }

    /// The summary.
    pub fn finish(self, scenario: &str, seed: u64) -> Summary {
        let mut deployments = Vec::new();
        for (i, acc) in self.per.into_iter().enumerate() {
            let mut d = acc.finish(&self.names[i]);
            d.true_peak_prefill_tps = Some(self.peaks[i]);
            d.max_ttft_penalty_ms = Some(self.configs[i].max_ttft_penalty_ms);
            d.peak_prefill_throughput = Some(self.configs[i].peak_prefill_throughput);
            deployments.push(d);
        }
        Summary {
            scenario: scenario.to_string(),
            seed,
            quantile_method: "nearest-rank: the ceil(q*n)-th smallest gate input (1-based) over decisions where the gate was evaluated; shares are over all decisions".to_string(),
            overall: self.all.finish("*"),
            deployments,
            failure_mode: crate::scenario::failure_truth(scenario).map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_definition() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(5.0));
        assert_eq!(nearest_rank(&v, 0.9), Some(9.0));
        assert_eq!(nearest_rank(&v, 0.99), Some(10.0));
        assert_eq!(nearest_rank(&v, 0.0), Some(1.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
    }
}
