//! Log text reaches every output of recommend as plain text for its
//! reader: hostile namespace and pod names (see the shared support
//! module), read from a real log, through the binary, in every format, in
//! `--list-deployments` and in its errors on stderr.

use gatecal_test_support::hostile_names as hostile;

use hostile::{hostile_log, run};

fn recommend(args: &[&str]) -> (String, String) {
    let out = run(env!("CARGO_BIN_EXE_recommend"), args);
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn json_keeps_the_name_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let (json, _) = recommend(&[log.to_str().unwrap(), "--format", "json"]);
    hostile::json_keeps_the_name(&json);
}

#[test]
fn table_output_has_no_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let (t, _) = recommend(&[log.to_str().unwrap(), "--format", "table"]);
    hostile::table_is_plain("table", &t);
}

#[test]
fn errors_and_the_deployment_list_are_plain() {
    let dir = tempfile::tempdir().unwrap();
    hostile::unknown_config_error_is_plain(env!("CARGO_BIN_EXE_recommend"), dir.path());
    hostile::list_is_plain(env!("CARGO_BIN_EXE_recommend"), dir.path());
}

#[test]
fn markdown_output_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let (md, _) = recommend(&[log.to_str().unwrap(), "--format", "markdown"]);
    hostile::markdown_is_plain(&md);
}

#[test]
fn csv_guards_the_formula_and_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let (csv, _) = recommend(&[log.to_str().unwrap(), "--format", "csv"]);
    hostile::csv_is_guarded(&csv);
}
