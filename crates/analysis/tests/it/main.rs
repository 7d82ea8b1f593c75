//! `gatecal-analysis`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-analysis --test it MODULE` runs one module.

mod layout;
mod partial_merge;
mod records_only;
