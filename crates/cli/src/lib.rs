//! # Brief overview
//!
//! What `gate-dist` and `recommend` share, so that each `main.rs` only wires
//! flags to the library crates: filter parameters from the EPP's own config
//! files and flags ([`filter_args`], the files read by [`config_file`]), the deployments found and
//! `--list-deployments` ([`deployments`]), durations ([`duration`]), output
//! destinations, default formats and exit codes ([`output`]), what a
//! panic does ([`internal_error`]), messages on the terminal and
//! `--version` ([`term`]), `--generate` ([`generate`]), progress
//! ([`progress`]), `--since`/`--until` times ([`time`]), output files
//! written whole or not at all, and what SIGINT and SIGTERM do
//! ([`atomic`]), the allocator's purge delay in `--follow` ([`allocator`],
//! the crate's one `unsafe` block: a call into mimalloc).
//!
//! # Example
//!
//! ```
//! let secs = gatecal_cli::duration::parse_seconds("15m").unwrap();
//! assert_eq!(secs, 900.0);
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod allocator;
pub mod atomic;
pub mod bounds;
pub mod candidates;
pub mod config_file;
pub mod deployments;
pub mod duration;
pub mod fail_if;
pub mod filter_args;
pub mod follow;
pub mod follow_flags;
pub mod generate;
pub mod internal_error;
pub mod kubectl;
pub mod metrics;
pub mod output;
pub mod partials;
pub mod pipeline;
pub mod progress;
pub mod term;
pub mod time;
