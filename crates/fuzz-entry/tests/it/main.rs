//! `gatecal-fuzz-entry`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-fuzz-entry --test it MODULE` runs one module.

mod corpus;
