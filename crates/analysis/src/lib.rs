//! # Brief overview
//!
//! The analysis of gatecal: filter decisions in (from the parser or the
//! decisions JSON lines), reports out. It reconstructs the TTFT load gate's
//! input of every decision with an evidence label
//! ([`reconstruct`]), replays decisions through the filter core under other
//! configs ([`whatif`]), builds distributions on a signed HdrHistogram
//! ([`SignedHistogram`]), and assembles the `gatecal.gate-dist/v2` report
//! ([`gate_dist`]). Every estimator's method and error bound is written in the
//! docs of the module or type that computes it.
//!
//! # API
//!
//! The entry points:
//!
//! - [`gate_dist::GateDist`]: the audit of `gate-dist`, its options
//!   ([`gate_dist::GateDistOptions`], [`gate_dist::ConfigSet`]) and report
//!   ([`gate_dist::GateDistReport`]);
//! - [`recommend::Recommend`]: the calibration of `recommend`, its options
//!   ([`recommend::RecommendOptions`]) and report
//!   ([`recommend::RecommendReport`]);
//! - [`input::DecisionInput`]: a decision as both take it (from the parser's
//!   `Decision`, or a decision record of [`records`]);
//! - [`reconstruct`]: the gate input's reconstruction and its options;
//!   [`throughput`]: the peak prefill throughput estimators; [`whatif`]:
//!   candidate configs; [`stats`]: the distributions a report holds;
//!   [`epp_config`]: the EPP's config files, read and written back;
//!   [`prometheus`]: Prometheus `query_range` responses and the peak from
//!   them; [`agreement`]: where the vLLM log lines and Prometheus disagree;
//! - at the crate root, the pieces the binaries' input stage and reports
//!   use: duplicate detection ([`DuplicateCheck`]), the reorder buffer
//!   ([`Reorder`]), the deployment cap ([`Pooled`]) and the histogram
//!   ([`SignedHistogram`]).
//!
//! # Example
//!
//! ```
//! use gatecal_analysis::gate_dist::{ConfigSet, GateDist, GateDistOptions, InputSummary};
//! use gatecal_analysis::input::DecisionInput;
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

pub mod agreement;
pub mod epp_config;
pub mod gate_dist;
pub mod input;
pub mod prometheus;
pub mod recommend;
pub mod reconstruct;
pub mod records;
pub mod stats;
pub mod throughput;
pub mod whatif;

mod dedup;
mod from_parser;
mod hist;
mod in_force;
mod pool;
pub mod predict;
mod queue;
mod reorder;

pub use dedup::{DecisionKey, DuplicateCheck, Duplicates, MAX_FINGERPRINTS, SECOND_COST};
pub use hist::SignedHistogram;
pub use pool::{MAX_DEPLOYMENTS, OTHER_DEPLOYMENT, Pooled};
pub use reorder::{DEFAULT_REORDER_WINDOW_S, Reorder};
