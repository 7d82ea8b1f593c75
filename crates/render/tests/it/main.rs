//! `gatecal-render`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-render --test it MODULE` runs one module.

mod formats;
mod notes;
