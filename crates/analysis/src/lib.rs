//! # Brief overview
//!
//! The analysis of gatecal: filter decisions in (from the parser or the
//! decisions JSON lines), reports out. It reconstructs the TTFT load gate's
//! input of every decision with an evidence label
//! ([`reconstruct`]), replays decisions through the filter core under other
//! configs ([`whatif`]), builds distributions on a signed HdrHistogram
//! ([`hist`]), and assembles the `gatecal.gate-dist/v2` report
//! ([`gate_dist`]). Every estimator's method and error bound is written in the
//! docs of the module that computes it.
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
pub mod dedup;
pub mod epp_config;
pub mod from_parser;
pub mod gate_dist;
pub mod hist;
pub mod input;
pub mod pool;
pub mod prometheus;
mod queue;
pub mod recommend;
pub mod reconstruct;
pub mod records;
pub mod reorder;
pub mod stats;
pub mod throughput;
pub mod whatif;
