//! Log text reaches every output of gate-dist as plain text for its reader:
//! hostile namespace and pod names (see the shared support module), read
//! from a real log, through the binary, in every format, in
//! `--list-deployments` and in its errors on stderr.

use gatecal_test_support::hostile_names as hostile;

use hostile::{hostile_log, run};

fn gate_dist(args: &[&str]) -> String {
    String::from_utf8(run(env!("CARGO_BIN_EXE_gate-dist"), args).stdout).unwrap()
}

#[test]
fn the_deployment_is_named_by_the_hostile_pods() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    hostile::json_keeps_the_name(&gate_dist(&[log.to_str().unwrap(), "--format", "json"]));
}

#[test]
fn table_output_has_no_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let t = gate_dist(&[log.to_str().unwrap(), "--format", "table"]);
    hostile::table_is_plain("table", &t);
}

#[test]
fn errors_and_the_deployment_list_are_plain() {
    let dir = tempfile::tempdir().unwrap();
    hostile::unknown_config_error_is_plain(env!("CARGO_BIN_EXE_gate-dist"), dir.path());
    hostile::list_is_plain(env!("CARGO_BIN_EXE_gate-dist"), dir.path());
}

#[test]
fn markdown_output_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    hostile::markdown_is_plain(&gate_dist(&[log.to_str().unwrap(), "--format", "markdown"]));
}

#[test]
fn csv_guards_the_formula_and_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    hostile::csv_is_guarded(&gate_dist(&[log.to_str().unwrap(), "--format", "csv"]));
}

#[test]
fn svg_is_well_formed_xml() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let svg = dir.path().join("g.svg");
    gate_dist(&[
        log.to_str().unwrap(),
        "--format",
        "json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let all: String = doc
        .descendants()
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        all.contains("<img src=x onerror=alert(1)>"),
        "kept as text: {all}"
    );
    assert_eq!(
        doc.descendants().filter(|n| n.has_tag_name("img")).count(),
        0
    );
}
