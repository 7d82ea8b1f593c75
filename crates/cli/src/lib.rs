//! # Brief overview
//!
//! What `gate-dist` and `recommend` share, so that each `main.rs` only wires
//! flags to the library crates: filter parameters from the EPP's own config
//! files and flags ([`filter_args`]), durations ([`duration`]), output
//! destinations, default formats and exit codes ([`output`]), and what a
//! panic does ([`internal_error`]).
//!
//! # Example
//!
//! ```
//! let secs = gatecal_cli::duration::parse_seconds("15m").unwrap();
//! assert_eq!(secs, 900.0);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod duration;
pub mod filter_args;
pub mod internal_error;
pub mod output;
pub mod pipeline;
