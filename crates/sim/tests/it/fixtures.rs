//! The committed fixtures are what `epp-sim gen-fixtures` writes today, and
//! each agrees with its own truth.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{check_log_against_truth, parse_lenient};
use gatecal_sim::TruthRecord;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Sample directories: every `<scenario>/` and `variants/<name>/`.
fn sample_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut push_children = |p: &Path| {
        if let Ok(rd) = fs::read_dir(p) {
            for e in rd.flatten() {
                if e.path().join("truth.jsonl").exists() {
                    dirs.push(e.path());
                }
            }
        }
    };
    push_children(root);
    push_children(&root.join("variants"));
    dirs.sort();
    dirs
}

fn read_truth(p: &Path) -> Vec<TruthRecord> {
    let text = fs::read_to_string(p.join("truth.jsonl")).expect("truth.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("truth record"))
        .collect()
}

#[test]
fn committed_fixtures_agree_with_their_truth() {
    let dirs = sample_dirs(&fixtures_dir());
    assert!(dirs.len() >= 10, "{dirs:?}");
    for d in dirs {
        let log = fs::read(d.join("epp.log")).expect("epp.log");
        let truth = read_truth(&d);
        let (objs, _) = parse_lenient(&log);
        let n = check_log_against_truth(&objs, &truth);
        assert!(n > 0, "{}", d.display());
    }
}

#[test]
fn committed_fixtures_are_regenerated_bytes() {
    let out = std::env::temp_dir().join(format!("gatecal-sim-fixtures-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_epp-sim"))
        .arg("gen-fixtures")
        .arg(&out)
        .status()
        .expect("run epp-sim");
    assert!(status.success());
    let root = fixtures_dir();
    for d in sample_dirs(&out) {
        let rel = d.strip_prefix(&out).expect("prefix");
        for f in ["epp.log", "truth.jsonl", "summary.json"] {
            let fresh = fs::read(d.join(f)).expect("fresh");
            let committed = fs::read(root.join(rel).join(f)).unwrap_or_default();
            assert!(
                fresh == committed,
                "fixtures/{}/{f} is stale: run `cargo run -p gatecal-sim -- gen-fixtures fixtures`",
                rel.display()
            );
        }
        // The engines' Prometheus series, one file per query.
        if let Ok(entries) = fs::read_dir(d.join("prometheus")) {
            for e in entries {
                let p = e.expect("entry").path();
                let name = p.file_name().expect("name");
                let fresh = fs::read(&p).expect("fresh");
                let committed =
                    fs::read(root.join(rel).join("prometheus").join(name)).unwrap_or_default();
                assert!(
                    fresh == committed,
                    "fixtures/{}/prometheus/{} is stale",
                    rel.display(),
                    name.to_string_lossy()
                );
            }
        }
    }
    let _ = fs::remove_dir_all(&out);
}
