//! `--fail-if`: CI gates over the report's figures and findings, the same
//! checks for both binaries (each names its released-share figure).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(p: &str) -> String {
    root()
        .join("fixtures")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

fn run(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .output()
        .expect("run the binary")
}

/// On glm-like (the bar never fires, a third of the requests pinned
/// worse), the gates that hold exit 4 with the report written in full and
/// each gate that held listed with its value; one that does not hold is
/// not listed.
pub fn gates_that_hold_exit_4_and_the_report_is_written(bin: &Path, released: &str) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let log = fixture("glm-like/epp.log");
    let out = run(
        bin,
        &[
            &log,
            "-o",
            report.to_str().unwrap(),
            "--fail-if",
            "pinned_share > 0.10",
            "--fail-if",
            &format!("{released} < 0.01"),
            "--fail-if",
            "finding:gate_never_fires",
            "--fail-if",
            "finding:affinity_disengaged",
            "--fail-if",
            "severity >= warning",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("4 of 5 --fail-if gates held"), "{err}");
    assert!(
        err.contains("gate held: pinned_share > 0.10: glm-5-2 "),
        "{err}"
    );
    assert!(
        err.contains(&format!("gate held: {released} < 0.01: glm-5-2 ")),
        "{err}"
    );
    assert!(
        err.contains("gate held: finding:gate_never_fires: glm-5-2"),
        "{err}"
    );
    assert!(
        err.contains("gate held: severity >= warning: glm-5-2"),
        "{err}"
    );
    assert!(
        !err.contains("gate held: finding:affinity_disengaged"),
        "{err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["deployments"][0]["name"], "glm-5-2");
    assert!(v["findings"].as_array().is_some_and(|f| !f.is_empty()));
    // No gate holds: exit 0.
    let out = run(
        bin,
        &[
            &log,
            "-o",
            report.to_str().unwrap(),
            "--fail-if",
            "severity > critical",
            "--fail-if",
            "decisions > 1000000",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A typo is a usage error (exit 2) that names the known figures, and
/// nothing is written.
pub fn a_typo_is_exit_2_naming_the_known_figures(bin: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let log = fixture("glm-like/epp.log");
    for (expr, want) in [
        ("pinned_shar > 0.1", "pinned_share, "),
        ("finding:affinity", "affinity_disengaged, "),
        ("severity >= loud", "info, warning, critical"),
        ("pinned_share 0.1", "expected FIGURE OP NUMBER"),
    ] {
        let out = run(
            bin,
            &[&log, "-o", report.to_str().unwrap(), "--fail-if", expr],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expr}: {err}");
        assert!(err.contains(want), "{expr}: {err}");
        assert!(!report.exists(), "{expr}");
    }
}
