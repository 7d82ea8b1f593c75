//! Non-finite parameters from flags or a config file are errors naming the
//! parameter (exit 2); they used to become the defaults while the report
//! said "config from flags/file".

const LOG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/balanced/epp.log"
);

#[test]
fn non_finite_parameters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("epp.yaml");
    std::fs::write(
        &yaml,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    peakPrefillThroughput: .nan\n",
    )
    .unwrap();
    let yaml = yaml.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--known-peak", "1e400"], "--known-peak"),
        (
            &["--current-peak-prefill-throughput", "NaN"],
            "--current-peak-prefill-throughput",
        ),
        (&["--affinity-threshold=-inf"], "--affinity-threshold"),
        (&["--max-ttft-penalty-ms", "nan"], "--max-ttft-penalty-ms"),
        (
            &["--config", yaml],
            "peakPrefillThroughput: not a finite number",
        ),
    ];
    for (args, want) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_recommend"))
            .arg(LOG)
            .args(args)
            .args(["--format", "json", "-q"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: no report");
    }
}
