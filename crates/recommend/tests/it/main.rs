//! `gatecal-recommend`'s integration tests in one binary, one module per topic:
//! `cargo test -p gatecal-recommend --test it MODULE` runs one module.

mod agreement;
mod calibration_record;
mod cli;
mod docs;
mod fail_if;
mod findings;
mod hostile_names;
mod io_safety;
mod kubectl;
mod operator;
mod parameters;
mod peak_sweep;
mod producers;
mod scenario_findings;
mod sim;
mod sim_findings;
