//! Flags that size the work or the output have upper bounds, each
//! rejected with a message naming the flag.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(fixture("balanced/epp.log"))
        .args(args)
        .output()
        .expect("run gate-dist")
}

fn rejected(args: &[&str], says: &[&str]) {
    let out = run(args);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
    for s in says {
        assert!(e.contains(s), "{args:?}: {s:?} not in {e}");
    }
    assert!(out.stdout.is_empty(), "{args:?}: no report");
}

#[test]
fn threads_bins_and_what_if_lists_are_bounded() {
    rejected(
        &["-j", "100000"],
        &["--threads", "100000 threads: give 1 to 256"],
    );
    rejected(&["-j", "0"], &["1 to 256"]);
    rejected(
        &["--bins", "100000000"],
        &["--bins 100000000", "2 to 10000"],
    );
    rejected(&["--bins", "1"], &["2 to 10000"]);
    let many: Vec<String> = (1..=65).map(|i| (i * 100).to_string()).collect();
    rejected(
        &["--what-if-bar", &many.join(",")],
        &["--what-if-bar", "65 values, at most 64"],
    );
    rejected(
        &["--what-if-peak", &many.join(",")],
        &["--what-if-peak", "at most 64"],
    );
    // The bounds themselves are accepted.
    for ok in [
        vec!["-j", "256"],
        vec!["--bins", "10000"],
        vec!["--what-if-bar", &many[..64].join(",")],
    ] {
        let mut a = ok.clone();
        a.extend(["--format", "json"]);
        let out = run(&a);
        assert!(
            out.status.success(),
            "{ok:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn windows_are_bounded_in_length_and_count() {
    rejected(&["--window", "0.1s"], &["--window", "at least 1 s"]);
    // The demo log spans 30 minutes: 1 s windows are 1800 of them.
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(fixture("demo/glm-like.log.gz"))
        .args(["--window", "1s", "--format", "json"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--window 1 s") && e.contains("more than 1000 windows"),
        "{e}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(fixture("demo/glm-like.log.gz"))
        .args(["--window", "5s", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = v["deployments"][0]["windows"].as_array().unwrap().len();
    assert!(
        (300..=1000).contains(&n),
        "{n} windows of 5 s over 30 minutes"
    );
}
