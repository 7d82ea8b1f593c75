//! The epp-sim binary as a user runs it.

use std::process::Command;

#[test]
fn out_creates_missing_folders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs/today/x.log");
    let o = Command::new(env!("CARGO_BIN_EXE_epp-sim"))
        .args(["--scenario", "glm-like", "--requests", "30", "--out"])
        .arg(&out)
        .output()
        .expect("run epp-sim");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
    for sib in ["x.truth.jsonl", "x.summary.json", "x.vllm"] {
        assert!(out.with_file_name(sib).exists(), "{sib}");
    }
}

#[test]
fn generate_completions_and_man_page() {
    for (kind, want) in [
        ("complete-bash", "--scenario"),
        ("complete-zsh", "#compdef epp-sim"),
        ("complete-fish", "complete -c epp-sim"),
        ("man", ".TH epp-sim 1"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_epp-sim"))
            .args(["--generate", kind])
            .output()
            .expect("run epp-sim");
        assert!(o.status.success(), "{kind}");
        assert!(String::from_utf8_lossy(&o.stdout).contains(want), "{kind}");
    }
}
