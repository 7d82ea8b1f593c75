//! `gate-dist`'s integration tests in one binary, one module per topic:
//! `cargo test -p gate-dist --test it MODULE` runs one module.

mod accuracy;
mod bounds;
mod cli;
mod compare;
mod docs;
mod duplicates;
mod fail_if;
mod follow;
mod hostile_names;
mod identity;
mod io_safety;
mod kubectl;
mod memory_bounds;
mod metrics;
mod operator;
mod out_of_domain;
mod partial;
mod real_inputs;
mod records;
mod replay;
mod spark;
mod traces;
