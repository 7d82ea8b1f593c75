//! # Brief overview
//!
//! The analysis of gatecal: filter decisions in (from the parser or the
//! decisions JSON lines), reports out. It reconstructs the TTFT load gate's
//! input of every decision with an evidence label ([`Reconstructor`]),
//! replays decisions through the filter core under other configs
//! ([`WhatIfSpec`], [`CandidateConfig`]), builds distributions on a signed
//! HdrHistogram ([`SignedHistogram`]), and assembles the
//! `gatecal.gate-dist/v3` report ([`GateDistReport`]). Every estimator's
//! method and error bound is written in the docs of the module or type that
//! computes it.
//!
//! # Layout
//!
//! The modules are private; what the other crates use is re-exported here.
//! Each folder is one seam, and each depends only on the ones listed before
//! it:
//!
//! - `input/`: a decision as the analysis takes it ([`DecisionInput`], from
//!   the parser's `Decision` or a decision record), duplicates counted once
//!   ([`DuplicateCheck`]) and the cap on deployments ([`Pooled`]);
//! - `config/`: the EPP's config files read and written back
//!   ([`filters_from_yaml`], [`emit`]), each parameter with its source
//!   ([`SourcedConfig`], [`ConfigSet`]), and the config in force that the
//!   log's own values settle ([`merge_log`]);
//! - `gate/`: the reorder buffer ([`Reorder`]), the gate input's
//!   reconstruction and its queue model ([`Reconstructor`]), the replays
//!   and the distributions a report holds ([`Stats`]);
//! - `peak/`: the peak prefill throughput from vLLM stats lines
//!   ([`VllmEstimator`]), calibration output ([`from_calibration_text`])
//!   and Prometheus ([`parse_query_range`]), and where the sources
//!   disagree;
//! - [`predict`]: the TTFT a candidate config would give, from the logged
//!   traffic replayed through the filter core and an engine model fitted
//!   to the deployment's own first tokens (a library API: the reports do
//!   not show it yet);
//! - `report/`: the two analyses, [`GateDist`] (the audit of `gate-dist`:
//!   [`GateDistOptions`], [`GateDistReport`]) and [`Recommend`] (the
//!   calibration of `recommend`: [`RecommendOptions`],
//!   [`RecommendReport`]), and the decision records both write
//!   ([`RecordSink`]).
//!
//! # Example
//!
//! ```
//! use gatecal_analysis::{ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary};
//! use gatecal_filter::Candidate;
//!
//! let mut audit = GateDist::new(GateDistOptions::default(), ConfigSet::default());
//! audit.push(DecisionInput {
//!     deployment: "glm-5-2".into(),
//!     ts: Some(1764482019.25),
//!     request_id: Some("r-17".into()),
//!     exact: Some(vec![
//!         Candidate::new("llm/p-0").with_match(22, 25, 64).with_in_flight_tokens(41_000),
//!         Candidate::new("llm/p-1").with_match(0, 25, 64).with_in_flight_tokens(2_000),
//!     ]),
//!     ..DecisionInput::default()
//! });
//! let report = audit.finish(InputSummary::default());
//! let d = &report.deployments[0];
//! assert_eq!(d.stats.outcomes["sticky"], 1);
//! assert!((d.stats.gate_input_ms.p50.unwrap() - 2448.5).abs() < 2.0);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod config;
pub mod findings;
mod gate;
mod input;
mod par;
mod peak;
pub mod predict;
mod report;
mod rng;

pub use config::epp::producers::producer_block_sizes;
pub use config::epp::writer::{ParamChanges, emit, minimal_config};
pub use config::epp::{
    ConfigEra, EppConfigError, MAX_CONFIG_BYTES, MAX_DOCUMENTS, MAX_FLOW_ITEMS, MAX_NESTING,
    MAX_NODES, filter_entries_from_yaml, filters_from_yaml,
};
pub use config::in_force::{MAX_PENDING_DECISIONS, MAX_PENDING_DECISIONS_FOLLOWING, merge_log};
pub use config::source::{ConfigSet, ParamSource, SourcedConfig};
pub use gate::hist::SignedHistogram;
pub use gate::reconstruct::{ReconstructOptions, Reconstructor};
pub use gate::reorder::{Reorder, Timed, release_order};
pub use gate::sample::Replay;
pub use gate::stats::{Distribution, MIN_QUANTILE_SAMPLE, Stats, WhatIfResult};
pub use gate::whatif::{CandidateConfig, CandidateSource, WhatIfSpec, matched_tokens_specs};
/// `penaltyMode`, as `recommend --mode` takes it.
pub use gatecal_filter::PenaltyMode;
pub use input::dedup::{DecisionKey, DuplicateCheck, Duplicates, MAX_FINGERPRINTS};
pub use input::pool::{MAX_DEPLOYMENTS, MAX_POOLED_NAMES, OTHER_DEPLOYMENT, Pooled};
pub use input::{BlockSize, BlockSizeSource, DecisionInput, ProducerBlockSizes, ScoredEndpoint};
pub use peak::calibration_record::{CalibrationRecord, PassiveInputs, RecordError};
pub use peak::from_calibration_text;
pub use peak::prometheus::{
    DEFAULT_MAX_PROMETHEUS_MIB, PromSeries, looks_like_query_range, parse_query_range,
    read_query_range,
};
pub use peak::throughput::{PeakEstimate, PeakSource, VllmEstimator};
pub use predict::per_deployment::{
    EndpointTtft, Objective, ObservedTtft, PredictedTtft, SelfCheck, TtftModel,
};
pub use report::compare;
pub use report::gate_dist::{
    GateDist, GateDistOptions, GateDistReport, HistogramBins, InputSummary, TimeRange, TraceSummary,
};
pub use report::partial::{
    MergeError, PARTIAL_SCHEMA, Part, PartInfo, Partial, Settings as PartialSettings,
    merge as merge_partials,
};
pub use report::recommend::{
    DeploymentRec, Gain, MISSING_MATCHED, ModeParams, Paste, Recommend, RecommendOptions,
    RecommendReport, Recommended, Row, RowKind, VllmCut,
};
pub use report::recommend::{
    NO_PREDICTION_AFTER_MERGE, RecommendPart, RecommendPartial, RecommendSettings,
    merge_recommend_partials,
};
pub use report::records::RecordSink;
