//! docs/usage.md and docs/json-schema.md against the binary: every flag of
//! `--help` is documented and no documented flag is gone; every key of the
//! JSON report is in the schema and the schema lists no key the reports
//! never hold (unless it says when they are absent).

use gatecal_test_support::docs;
use gatecal_test_support::report;

use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .output()
        .expect("run gate-dist")
}

#[test]
fn usage_documents_every_flag_of_help() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    docs::check_flags("gate-dist", &String::from_utf8_lossy(&out.stdout));
}

/// Reports that between them hold every optional part: traces, windows,
/// `--since`/`--until`, candidates and what-ifs, a flag against the log.
#[test]
fn json_schema_documents_every_key_of_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let candidate = dir.path().join("candidate.yaml");
    std::fs::write(
        &candidate,
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\n\
         kind: EndpointPickerConfig\n\
         plugins:\n\
         - type: prefix-cache-affinity-filter\n  \
           parameters:\n    \
             maxTTFTPenaltyMs: 2500\n",
    )
    .unwrap();
    let traced = report::ok_json(
        &run(&[
            &docs::fixture("eight-deployments/epp.log"),
            &docs::fixture("eight-deployments/traces.jsonl"),
            &docs::fixture("eight-deployments/vllm"),
            "--window",
            "1h",
            "--since",
            "2020-01-01",
            "--until",
            "2100-01-01",
            "--candidate-config",
            candidate.to_str().unwrap(),
            "--what-if",
            "peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500",
            "--what-if-peak",
            "3000",
            "--format",
            "json",
            "-q",
        ]),
        "traced run: ",
    );
    assert!(traced["input"]["traces"].is_object(), "{}", traced["input"]);
    let flagged = report::ok_json(
        &run(&[
            &docs::fixture("glm-like-v1/epp.log"),
            "--max-ttft-penalty-ms",
            "18000",
            "--format",
            "json",
            "-q",
        ]),
        "flag against the log: ",
    );
    assert_eq!(
        flagged["deployments"][0]["config"]["log_disagreements"][0]["parameter"],
        "maxTTFTPenaltyMs"
    );
    // Another filter instance against the log: `instance` named.
    let instances = report::ok_json(
        &run(&[
            &docs::fixture("edge/two_filter_instances.log"),
            "--config",
            &docs::fixture("edge/two_filter_instances.yaml"),
            "--format",
            "json",
            "-q",
        ]),
        "two instances: ",
    );
    assert_eq!(
        instances["deployments"][0]["config"]["log_disagreements"][0]["instance"],
        "loose-affinity-filter"
    );
    // A merge of partial reports: `merged` listed.
    let part = dir.path().join("a.part");
    let wrote = run(&[
        &docs::fixture("glm-like-v1/epp.log"),
        "--emit-partial",
        part.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]);
    assert!(wrote.status.success(), "{wrote:?}");
    let merged = report::ok_json(
        &run(&["merge", part.to_str().unwrap(), "--format", "json"]),
        "merge: ",
    );
    assert_eq!(merged["merged"][0]["decisions"], 9);
    // A log with first tokens: the what-if rows' predicted TTFT.
    let predicted = report::ok_json(
        &run(&[
            &docs::fixture("demo/glm-like.log.gz"),
            "--what-if",
            "maxTTFTPenaltyMs=5000",
            "--format",
            "json",
            "-q",
        ]),
        "what-if on the demo: ",
    );
    assert!(
        predicted["deployments"][0]["candidates"][0]["predicted_ttft_ms"].is_object(),
        "{}",
        predicted["deployments"][0]
    );
    docs::check_schema(
        "gatecal.gate-dist/v3",
        &[traced, flagged, instances, merged, predicted],
    );
}

/// The files CONTRIBUTING.md and README.md name (in backticks or as
/// links, from the repository's root) exist; `NEW`, `NAME` stand for a
/// file to add.
#[test]
fn contributing_and_readme_name_files_that_exist() {
    for (page, at_least) in [("CONTRIBUTING.md", 25), ("README.md", 8)] {
        let text = std::fs::read_to_string(docs::root().join(page)).unwrap();
        let ticked = text.split('`').skip(1).step_by(2);
        let linked = text.split("](").skip(1).filter_map(|s| s.split(')').next());
        let named: Vec<&str> = ticked
            .chain(linked)
            .map(|s| s.split('#').next().unwrap())
            .filter(|s| {
                ["crates/", "docs/", "fuzz/", "fixtures/", ".ci/", "bench/"]
                    .iter()
                    .any(|p| s.starts_with(p))
                    && !s.contains(' ')
                    && !s.contains("NEW")
                    && !s.contains("NAME")
            })
            .collect();
        assert!(named.len() >= at_least, "{page}: {named:?}");
        let missing: Vec<&&str> = named
            .iter()
            .filter(|p| !docs::root().join(p).exists())
            .collect();
        assert!(
            missing.is_empty(),
            "{page} names files that do not exist: {missing:?}"
        );
    }
}
