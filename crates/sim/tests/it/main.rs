//! `gatecal-sim`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-sim --test it MODULE` runs one module.

mod cli;
mod common;
mod fixtures;
mod log_truth;
mod paired;
mod scenarios;
mod variants;
