//! `gatecal-parser`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-parser --test it MODULE` runs one module.

mod bounds;
mod edge;
mod framings;
mod memory_bounds;
mod never_panics;
mod sim;
mod traces;
mod vllm_shapes;
