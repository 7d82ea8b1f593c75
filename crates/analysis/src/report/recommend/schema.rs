//! The report of the calibration: the structs of the JSON schema
//! `gatecal.recommend/v3`, documented field by field here and in
//! `docs/json-schema.md`.

use std::collections::BTreeMap;

use gatecal_filter::PenaltyMode;
use serde::Serialize;

use crate::config::source::SourcedConfig;
use crate::input::ProducerBlockSizes;
use crate::peak::agreement::SourceDisagreement;
use crate::peak::throughput::PeakEstimate;
use crate::predict::per_deployment::{
    EndpointTtft, ObservedTtft, PredictedTtft, SelfCheck, TtftModel,
};
use crate::report::gate_dist::InputSummary;

/// The chosen peak, with every estimate found in its `estimates`: one
/// type with the estimates ([`PeakEstimate`]).
pub type PeakReport = PeakEstimate;

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

/// Where the matched tokens came from, and what is missing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatchedTokens {
    /// Decisions with a sticky endpoint (the break-even applies to them).
    pub decisions: u64,
    /// Of those, decisions with matched tokens.
    pub with_matched: u64,
    /// Decisions with matched tokens, by source label.
    pub sources: BTreeMap<String, u64>,
    /// Decisions with a known gate input and matched tokens: the ones the
    /// rows' excess TTFT is measured on.
    pub scored: u64,
    /// When no source gave matched tokens: which log level or producer would.
    pub missing: Option<String>,
    /// The block sizes that turned the prefix producers' matched blocks
    /// into tokens (`approximate_producer`, `precise_producer`), and where
    /// each comes from.
    pub block_sizes: ProducerBlockSizes,
}

/// Break-even in tokens: the best sticky endpoint's matched tokens (exact
/// nearest-rank quantiles, independent of the peak).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BreakEvenTokens {
    /// Decisions with matched tokens.
    pub count: u64,
    /// 10th percentile.
    pub p10: Option<i64>,
    /// Median.
    pub p50: Option<i64>,
    /// 90th percentile.
    pub p90: Option<i64>,
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
    /// Released as logged (the decisions' own outcomes), over all decisions.
    pub logged_released_share: f64,
    /// Pinned-worse (replayed, at the reference peak), over all decisions.
    pub pinned_worse_share: f64,
    /// Decisions whose gate input is unknown.
    pub unknown: u64,
}

/// What a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// The config in force.
    Current,
    /// Static mode at the peak estimate, with the derived bar.
    Static,
    /// `matchedTokens` at the peak estimate, the current bar as ceiling.
    MatchedTokens,
    /// `matchedTokens` at the peak estimate, no ceiling.
    MatchedTokensNoCeiling,
    /// A `--candidate-config` or `--what-if`.
    Candidate,
    /// The config in force with `peakPrefillThroughput` corrected to the
    /// engine fitted to the observed first tokens (else the peak estimate).
    CorrectedPeak,
    /// Static mode at the corrected peak, one of the swept bars.
    StaticSweep,
}

impl RowKind {
    /// The name, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RowKind::Current => "current",
            RowKind::Static => "static",
            RowKind::MatchedTokens => "matched_tokens",
            RowKind::MatchedTokensNoCeiling => "matched_tokens_no_ceiling",
            RowKind::Candidate => "candidate",
            RowKind::CorrectedPeak => "corrected_peak",
            RowKind::StaticSweep => "static_sweep",
        }
    }
}

/// One config replayed on the deployment's decisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `current`, `static`, `matchedTokens`, `matchedTokens, no ceiling`, or
    /// the candidate's label.
    pub label: String,
    /// What the row is.
    pub kind: RowKind,
    /// `penaltyMode`.
    #[serde(rename = "penaltyMode")]
    pub penalty_mode: PenaltyMode,
    /// `peakPrefillThroughput`.
    #[serde(rename = "peakPrefillThroughput")]
    pub peak_prefill_throughput: f64,
    /// `maxTTFTPenaltyMs` (the ceiling in matchedTokens mode; 0 = none).
    #[serde(rename = "maxTTFTPenaltyMs")]
    pub max_ttft_penalty_ms: f64,
    /// Released (replayed), over all decisions.
    pub released_share: f64,
    /// The current row only: released as logged, over all decisions.
    pub logged_released_share: Option<f64>,
    /// Held with the gate input at the reference peak >= the pinned-worse
    /// minimum, over all decisions.
    pub pinned_worse_share: f64,
    /// Expected excess TTFT per scored decision, ms, against the break-even
    /// rule at the reference peak (`null` without scored decisions).
    pub excess_ttft_ms: Option<f64>,
    /// Decisions whose gate input is unknown (in neither share).
    pub unknown: u64,
    /// matchedTokens: decisions without match info (held).
    pub no_match_info: u64,
    /// A candidate that is not valid for this deployment: the EPP's message.
    pub error: Option<String>,
    /// The TTFT the replay predicts under this config (`null` when it
    /// cannot: the deployment's `warnings` say why).
    pub predicted_ttft_ms: Option<PredictedTtft>,
    /// The replay's cached share of prompt tokens under this config.
    pub predicted_prefix_hit_share: Option<f64>,
}

/// The parameters of one mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModeParams {
    /// `penaltyMode`.
    #[serde(rename = "penaltyMode")]
    pub penalty_mode: PenaltyMode,
    /// `peakPrefillThroughput`.
    #[serde(rename = "peakPrefillThroughput")]
    pub peak_prefill_throughput: f64,
    /// `maxTTFTPenaltyMs`.
    #[serde(rename = "maxTTFTPenaltyMs")]
    pub max_ttft_penalty_ms: f64,
    /// Its expected excess TTFT per scored decision, ms.
    pub excess_ttft_ms: Option<f64>,
}

/// The recommendation: one mode, and the other as the alternative.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recommended {
    /// The recommended parameters.
    pub params: ModeParams,
    /// The other mode's best parameters, not recommended.
    pub alternative: ModeParams,
    /// Why this mode.
    pub why: String,
    /// The parameters to set, as YAML, the alternative commented out.
    pub yaml: String,
    /// The label of the row recommended.
    pub row: String,
    /// What the choice minimised: `p50`, `p90`, `p99` or `mean` of the
    /// predicted TTFT, or `excess_ttft` when no TTFT could be predicted.
    pub objective: String,
    /// How much lower the recommended row's objective is than the
    /// current row's, ms, with an interval (`null` for `excess_ttft`).
    pub gain_ms: Option<Gain>,
}

/// A predicted gain, ms.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gain {
    /// Current minus recommended.
    pub value: f64,
    /// 90 % interval: from the two predictions' intervals, `[current low −
    /// recommended high, current high − recommended low]`.
    pub interval: [f64; 2],
}

/// The parameters to paste (and `--emit-config`'s), and why these.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Paste {
    /// The row they come from.
    pub row: String,
    /// The parameters.
    pub params: ModeParams,
    /// Why this config, and what it would have done.
    pub why: String,
    /// As YAML.
    pub yaml: String,
}

/// One deployment's calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeploymentRec {
    /// Deployment name.
    pub name: String,
    /// Peak prefill throughput.
    pub peak_prefill_throughput: PeakReport,
    /// The peak every row's excess TTFT and pinned share are measured at
    /// (the estimate), tokens/s.
    pub reference_peak: f64,
    /// Where the matched tokens came from.
    pub matched_tokens: MatchedTokens,
    /// Break-even bar, ms: matched tokens at the reference peak.
    pub break_even_ms: BreakEven,
    /// Break-even in tokens.
    pub break_even_tokens: BreakEvenTokens,
    /// The config in force.
    pub current: Current,
    /// The TTFT the log observed (request received to first response
    /// body), over the deployment's requests.
    pub observed_ttft_ms: ObservedTtft,
    /// The same, per endpoint the requests were sent to.
    pub observed_ttft_by_endpoint_ms: BTreeMap<String, EndpointTtft>,
    /// The engine model the predictions use, and what it rests on.
    pub ttft_model: TtftModel,
    /// The `current` row's prediction beside the observed TTFT (`null`
    /// when either is missing).
    pub ttft_self_check: Option<SelfCheck>,
    /// Every config replayed: current, static, matchedTokens (with and
    /// without ceiling), candidates.
    pub rows: Vec<Row>,
    /// The recommendation; `null` when no config can be chosen (no
    /// prediction and no matched tokens, or a failed self-check).
    pub recommended: Option<Recommended>,
    /// What to paste: the recommendation, or the config `--choose` /
    /// `--mode` name, or else the corrected peak and the static bar the
    /// decisions support; `null` when there is none.
    pub paste: Option<Paste>,
    /// Figures on which the vLLM log lines and the Prometheus counters
    /// disagree beyond their intervals (`peak::agreement`); each is in
    /// `warnings` too.
    pub source_disagreements: Vec<SourceDisagreement>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// The whole report: `gatecal.recommend/v3`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecommendReport {
    /// `gatecal.recommend/v3`.
    pub schema: &'static str,
    /// The findings, most severe first ([`crate::findings`]).
    pub findings: Vec<crate::findings::Finding>,
    /// The input ledger.
    pub input: InputSummary,
    /// Per deployment, sorted by name.
    pub deployments: Vec<DeploymentRec>,
    /// Deployments past the cap, pooled into one ([`crate::Pooled`]).
    pub pooled: crate::input::pool::Pooled,
    /// vLLM stats lines past the cap, not used.
    pub vllm_cut: VllmCut,
    /// The partial reports merged (`recommend merge`), in canonical order;
    /// empty (and absent from JSON) for a run over logs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<crate::report::parts::PartInfo>,
}

/// vLLM stats lines kept at most; the peak estimate and the hit-rate
/// agreement use the first ones read (about 64 MiB of them; at one line
/// per engine each 10 s, 120 engine-days).
pub const MAX_VLLM_LINES: usize = 1 << 20;

/// The vLLM stats lines not used, past `MAX_VLLM_LINES`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct VllmCut {
    /// Lines read past the cap (not used).
    pub lines: u64,
    /// The cap in force.
    pub max_lines: usize,
}
