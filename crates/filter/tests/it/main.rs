//! `gatecal-filter`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-filter --test it MODULE` runs one module.

mod properties;
mod seed;
mod upstream;
