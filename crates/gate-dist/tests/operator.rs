//! What an operator meets around the report: the README's demo, output
//! plumbing, time ranges, the installed-CLI niceties.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gate-dist"));
    c.stdin(Stdio::null());
    c
}

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

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run gate-dist")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_readme_demo_is_thirty_minutes_of_traffic() {
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        &fixture("demo/glm-like.log.gz"),
        "--format",
        "json",
    ])))
    .unwrap();
    let d = &v["deployments"][0];
    let span = d["last_ts"].as_f64().unwrap() - d["first_ts"].as_f64().unwrap();
    assert!((1700.0..=1800.0).contains(&span), "{span} s");
    assert_eq!(d["decisions"], 1030);
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("30 minutes of simulated\ntraffic, 1,030 decisions"));
}

/// Every `kubectl logs` capture the docs show keeps whole logs and selects
/// the EPP pods by one label.
#[test]
fn the_documented_captures_keep_whole_logs() {
    let mut selectors = Vec::new();
    for doc in ["README.md", "docs/usage.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let joined = text.replace("\\\n", " ");
        let captures: Vec<&str> = joined
            .lines()
            .filter(|l| l.trim_start().starts_with("kubectl logs -l"))
            .collect();
        assert!(!captures.is_empty(), "{doc}");
        for c in captures {
            assert!(c.contains("--tail=-1"), "{doc}: {c}");
            assert!(
                c.contains("--prefix") && c.contains("--timestamps"),
                "{doc}: {c}"
            );
            let sel = c.split_whitespace().nth(3).unwrap().to_string();
            selectors.push(sel);
        }
        assert!(text.contains("router.epp.flags"), "{doc}");
    }
    selectors.dedup();
    assert_eq!(selectors, ["llm-d-router-gateway=<release>-epp"]);
}
