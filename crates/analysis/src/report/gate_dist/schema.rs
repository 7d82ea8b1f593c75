//! The report of the audit: the structs of the JSON schema
//! `gatecal.gate-dist/v3`, documented field by field here and in
//! `docs/json-schema.md`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::source::SourcedConfig;
use crate::gate::reconstruct::ReconstructOptions;
use crate::gate::stats::Stats;
use crate::gate::whatif::{CandidateConfig, WhatIfSpec};

/// The schema id of the JSON report.
pub const SCHEMA: &str = "gatecal.gate-dist/v3";

/// Options of the audit.
#[derive(Clone, Debug)]
pub struct GateDistOptions {
    /// Reconstruction options (staleness).
    pub reconstruct: ReconstructOptions,
    /// Lower edge of pinned-worse, ms. Default 5000.
    pub pinned_worse_min_ms: f64,
    /// What-ifs to replay.
    pub what_if: Vec<WhatIfSpec>,
    /// `--candidate-config` and `--what-if` configs to replay beside the
    /// config in force.
    pub candidates: Vec<CandidateConfig>,
    /// Window length in seconds, for drift.
    pub window_s: Option<f64>,
    /// Bins of the report histogram.
    pub histogram_bins: usize,
    /// The decisions counted (`--since`, `--until`).
    pub time_range: TimeRange,
    /// The prefix producers' block sizes: per deployment, or under `""`
    /// for every other one (the upstream defaults when absent); see
    /// [`crate::RecommendOptions::block_sizes`].
    pub block_sizes: BTreeMap<String, crate::input::ProducerBlockSizes>,
}

/// The decisions a report counts: those logged in `[since, until)`
/// (seconds since the epoch). The decisions outside still pass through the
/// reconstruction, so the first counted ones are reconstructed from the
/// endpoint loads the earlier lines showed. With a bound set, a decision
/// without a time is not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimeRange {
    /// First time counted.
    pub since: Option<f64>,
    /// First time no longer counted.
    pub until: Option<f64>,
}

impl TimeRange {
    /// Whether a decision at `ts` is counted.
    pub fn contains(&self, ts: Option<f64>) -> bool {
        if self.since.is_none() && self.until.is_none() {
            return true;
        }
        let Some(t) = ts.filter(|t| t.is_finite()) else {
            return false;
        };
        self.since.is_none_or(|s| t >= s) && self.until.is_none_or(|u| t < u)
    }
}

impl Default for GateDistOptions {
    fn default() -> Self {
        GateDistOptions {
            reconstruct: ReconstructOptions::default(),
            pinned_worse_min_ms: 5000.0,
            what_if: WhatIfSpec::defaults(),
            candidates: Vec::new(),
            window_s: None,
            histogram_bins: 40,
            time_range: TimeRange::default(),
            block_sizes: BTreeMap::new(),
        }
    }
}

/// The input ledger, as reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct InputSummary {
    /// Input names, in the order read.
    pub inputs: Vec<String>,
    /// Lines read.
    pub lines_total: u64,
    /// Lines that fed a decision or an estimate.
    pub lines_used: u64,
    /// Lines recognised and not needed (other messages, startup lines, ...).
    pub lines_ignored: u64,
    /// Lines that could not be read as any known shape.
    pub lines_malformed: u64,
    /// Of the malformed lines, those with a number or time outside its
    /// domain (a negative or non-finite `tokenLoad`, a `ts` in year 9999).
    pub lines_out_of_range: u64,
    /// Bytes read (decompressed).
    pub bytes: u64,
    /// Decisions assembled.
    pub decisions_assembled: u64,
    /// Decisions with a filter line but missing lines (log cut, id reuse).
    pub decisions_incomplete: u64,
    /// Decisions closed early because the open-decision cap or age was hit.
    pub decisions_evicted: u64,
    /// Requests evicted because the open requests held more than the
    /// assembler's byte budget (64 MiB; one request at most 8 MiB).
    pub requests_evicted_for_memory: u64,
    /// Decisions seen twice (the same log given twice, overlapping
    /// captures), counted once ([`crate::DuplicateCheck`]).
    pub duplicates: crate::input::dedup::Duplicates,
    /// Prometheus samples dropped (recommend): a time or value outside
    /// its domain (NaN, an infinity, a negative value, past 2^53).
    pub prometheus_samples_dropped: u64,
    /// The first malformed lines, `file:line: why`.
    pub first_malformed: Vec<String>,
    /// Trace inputs and the join of their decisions with the logs' (absent
    /// when no input holds traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces: Option<TraceSummary>,
}

/// What the trace inputs gave, and how their decisions were joined to the
/// logs' ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TraceSummary {
    /// Inputs holding traces.
    pub inputs: u64,
    /// Spans read (of any name).
    pub spans: u64,
    /// Decisions read from `filter_prefix_cache_affinity` spans: the sample.
    pub decisions: u64,
    /// Of those, decisions whose `run_scheduler_profile` span was not found.
    pub without_profile: u64,
    /// Whether the figures describe the traced decisions alone (no log
    /// decision was read): then they describe the sample, not all decisions.
    pub traces_only: bool,
    /// Traced decisions joined to a log decision (same request id and
    /// profile).
    pub joined: u64,
    /// Traced decisions with no log decision to join (other period, other
    /// deployment, no request id, or a duplicate key).
    pub unmatched: u64,
    /// Traced decisions read while the most the join holds were held
    /// (50,000): not used, counted here and in the note.
    pub not_held: u64,
    /// What the figures describe, in words (printed in every format).
    pub note: String,
}

/// The histogram of a report (for Markdown and SVG).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HistogramBins {
    /// Bin edges in ms, ascending.
    pub edges: Vec<f64>,
    /// Counts per bin.
    pub counts: Vec<u64>,
    /// Values below the first edge.
    pub below: u64,
    /// Values above the last edge.
    pub above: u64,
}

/// One time window's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowReport {
    /// Window start, seconds since the epoch.
    pub start_ts: f64,
    /// Window end (exclusive).
    pub end_ts: f64,
    /// The figures.
    #[serde(flatten)]
    pub stats: Stats,
}

/// One deployment's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeploymentReport {
    /// Deployment name.
    pub name: String,
    /// The config replayed (first filter instance when there are several).
    pub config: SourcedConfig,
    /// First decision time.
    pub first_ts: Option<f64>,
    /// Last decision time.
    pub last_ts: Option<f64>,
    /// The figures.
    #[serde(flatten)]
    pub stats: Stats,
    /// Histogram of the gate input.
    pub histogram: HistogramBins,
    /// The TTFT the log observed (request received to first response
    /// body), one per request.
    pub observed_ttft_ms: crate::predict::per_deployment::ObservedTtft,
    /// The same, per endpoint the requests were sent to.
    pub observed_ttft_by_endpoint_ms:
        BTreeMap<String, crate::predict::per_deployment::EndpointTtft>,
    /// The engine model the predicted TTFT of the `current` and
    /// `candidates` rows replays; only with `--candidate-config` or
    /// `--what-if`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_model: Option<crate::predict::per_deployment::TtftModel>,
    /// The `current` row's predicted TTFT beside the observed TTFT (`null`
    /// when either is missing); only with `--candidate-config` or
    /// `--what-if`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_self_check: Option<Option<crate::predict::per_deployment::SelfCheck>>,
    /// Why a predicted TTFT is missing or not to be trusted; absent when
    /// empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Per window, when `--window` is set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowReport>,
    /// Per EPP replica (pod), when the deployment's decisions come from
    /// several; absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<crate::findings::ReplicaReport>,
    /// The histograms' buckets, for `--compare`'s bootstrap (not in the
    /// JSON).
    #[serde(skip)]
    pub buckets: crate::report::Buckets,
}

/// The overall figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OverallReport {
    /// Always `overall`.
    pub name: String,
    /// The figures.
    #[serde(flatten)]
    pub stats: Stats,
    /// Histogram of the gate input.
    pub histogram: HistogramBins,
}

/// The options as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportOptions {
    /// `--max-staleness`, seconds.
    pub max_staleness_s: f64,
    /// `--pinned-worse-min`, ms.
    pub pinned_worse_min_ms: f64,
    /// `--window`, seconds.
    pub window_s: Option<f64>,
    /// `--since`, seconds since the epoch: decisions before it are not
    /// counted (absent without the flag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    /// `--until`, seconds since the epoch: decisions from it on are not
    /// counted (absent without the flag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<f64>,
}

/// The whole gate-dist report: `gatecal.gate-dist/v3`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateDistReport {
    /// `gatecal.gate-dist/v3`.
    pub schema: &'static str,
    /// The findings, most severe first ([`crate::findings`]).
    pub findings: Vec<crate::findings::Finding>,
    /// The input ledger.
    pub input: InputSummary,
    /// The options in force.
    pub options: ReportOptions,
    /// Per deployment, sorted by name.
    pub deployments: Vec<DeploymentReport>,
    /// Over all deployments.
    pub overall: OverallReport,
    /// Deployments past the cap, pooled into one ([`crate::Pooled`]).
    pub pooled: crate::input::pool::Pooled,
    /// The partial reports merged into this one (`gate-dist merge`), in
    /// canonical order; absent from a run over logs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<crate::report::parts::PartInfo>,
}

impl GateDistReport {
    /// The first and the last decision time over every deployment, epoch
    /// seconds (`None` without decisions).
    pub fn time_range(&self) -> (Option<f64>, Option<f64>) {
        let ds = || self.deployments.iter();
        (
            ds().filter_map(|d| d.first_ts).reduce(f64::min),
            ds().filter_map(|d| d.last_ts).reduce(f64::max),
        )
    }
}
