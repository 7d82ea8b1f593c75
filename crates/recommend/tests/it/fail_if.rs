//! `--fail-if`: CI gates over the report's figures and findings.

use gatecal_test_support::fail_if;

use std::path::Path;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_recommend"))
}

#[test]
fn gates_that_hold_exit_4_and_the_report_is_written() {
    fail_if::gates_that_hold_exit_4_and_the_report_is_written(bin(), "logged_released_share");
}

#[test]
fn a_typo_is_exit_2_naming_the_known_figures() {
    fail_if::a_typo_is_exit_2_naming_the_known_figures(bin());
}
