//! `gatecal-cli`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-cli --test it MODULE` runs one module.

mod allocator;
mod internal_error;
