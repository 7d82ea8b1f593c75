//! Predicted TTFT under a candidate config: the deployment's logged traffic
//! ([`workload`]) replayed through the filter core, a picker and an engine
//! model ([`replay`]).
//!
//! The replay of the config in force is the self-check: on the logged
//! config it reproduces the TTFT the log observed when the workload's
//! uncached tokens and the engine model are right, so a disagreement there
//! shows a wrong peak, overhead or workload before any other config is
//! predicted. Limits of the inference are in [`workload`]'s docs; the
//! engine model's assumptions in [`replay`]'s.

pub mod replay;
pub mod workload;
