//! Decisions seen twice are counted once: the same log under two names,
//! overlapping captures (as two files or concatenated), decision records
//! and traces given twice give the figures of one copy, with a warning and
//! a count.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run gate-dist");
    assert!(
        out.status.success(),
        "gate-dist {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JSON report and stderr of a run in `dir`.
fn report(dir: &Path, inputs: &[&str]) -> (Value, String) {
    let mut args = inputs.to_vec();
    args.extend(["--format", "json"]);
    let out = run(dir, &args);
    (
        serde_json::from_slice(&out.stdout).expect("JSON report"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the report says of the decisions: every deployment and the
/// overall figures.
/// The deployments' and overall figures, but the observed TTFT: a first
/// token is joined to its request within one file, so a capture split
/// where a response is logged in the next file loses it.
fn figures(v: &Value) -> (Value, Value) {
    let mut deps = v["deployments"].clone();
    for d in deps.as_array_mut().unwrap() {
        let d = d.as_object_mut().unwrap();
        d.remove("observed_ttft_ms");
        d.remove("observed_ttft_by_endpoint_ms");
    }
    (deps, v["overall"].clone())
}

fn duplicates(v: &Value) -> (u64, u64) {
    let d = &v["input"]["duplicates"];
    (
        d["decisions"].as_u64().unwrap(),
        d["unchecked"].as_u64().unwrap(),
    )
}

fn assembled(v: &Value) -> u64 {
    v["input"]["decisions_assembled"].as_u64().unwrap()
}

/// A scratch folder holding `name` copies of a fixture.
fn copies(fixture_path: &str, names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bytes = fs::read(fixture(fixture_path)).unwrap();
    for n in names {
        fs::write(dir.path().join(n), &bytes).unwrap();
    }
    dir
}

#[test]
fn the_same_log_under_two_names_counts_once_with_a_warning() {
    let dir = copies("glm-like/epp.log", &["a.log", "b.log"]);
    let d = dir.path();
    let (once, err1) = report(d, &["a.log"]);
    let (twice, err2) = report(d, &["a.log", "b.log"]);
    assert_eq!(figures(&twice), figures(&once));
    let n = assembled(&once);
    assert!(n > 0);
    assert_eq!(assembled(&twice), 2 * n);
    assert_eq!(duplicates(&once), (0, 0));
    assert_eq!(duplicates(&twice), (n, 0));
    assert!(!err1.contains("seen twice"), "{err1}");
    assert!(
        err2.contains(&format!("warning: {n} decision(s) seen twice")),
        "{err2}"
    );
    // The footnote of the input table, in the table and Markdown formats.
    for format in ["table", "markdown"] {
        let out = run(d, &["a.log", "b.log", "--format", format]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("{n} decision(s) seen twice")) && text.contains("counted once"),
            "{format}:\n{text}"
        );
        let out = run(d, &["a.log", "--format", format]);
        assert!(!String::from_utf8_lossy(&out.stdout).contains("seen twice"));
    }
}

#[test]
fn overlapping_captures_count_the_overlap_once() {
    let log = fs::read_to_string(fixture("glm-like/epp.log")).unwrap();
    let lines: Vec<&str> = log.split_inclusive('\n').collect();
    let (cut, overlap) = (lines.len() * 6 / 10, lines.len() / 5);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = lines[..cut].concat();
    let second = lines[cut - overlap..].concat();
    fs::write(d.join("first.log"), &first).unwrap();
    fs::write(d.join("second.log"), &second).unwrap();
    fs::write(d.join("rest.log"), lines[cut..].concat()).unwrap();
    fs::write(d.join("both.log"), format!("{first}{second}")).unwrap();
    fs::write(d.join("whole.log"), &log).unwrap();
    // The same capture split where the first one ends, with no overlap.
    let (split, _) = report(d, &["first.log", "rest.log"]);
    assert_eq!(duplicates(&split), (0, 0));
    let (whole, _) = report(d, &["whole.log"]);
    for inputs in [&["first.log", "second.log"][..], &["both.log"]] {
        let (v, err) = report(d, inputs);
        let (dups, unchecked) = duplicates(&v);
        assert!(dups > 0, "{inputs:?}: no duplicate found");
        assert_eq!(unchecked, 0);
        assert_eq!(assembled(&v) - dups, assembled(&split), "{inputs:?}");
        assert_eq!(figures(&v), figures(&split), "{inputs:?}");
        assert!(err.contains("seen twice"), "{err}");
        // And the logged outcomes are the whole log's.
        assert_eq!(
            v["deployments"][0]["outcomes"], whole["deployments"][0]["outcomes"],
            "{inputs:?}"
        );
    }
}

#[test]
fn decision_records_given_twice_count_once() {
    let dir = copies("glm-like/epp.log", &["x.log"]);
    let d = dir.path();
    run(d, &["x.log", "--emit-decisions", "a.jsonl", "-q"]);
    fs::copy(d.join("a.jsonl"), d.join("b.jsonl")).unwrap();
    let (once, _) = report(d, &["a.jsonl"]);
    let (twice, err) = report(d, &["a.jsonl", "b.jsonl"]);
    let n = assembled(&once);
    assert!(n > 0);
    assert_eq!(duplicates(&twice), (n, 0));
    assert_eq!(figures(&twice), figures(&once));
    assert!(err.contains("seen twice"), "{err}");
    // A log and the records written from it are one set of decisions.
    let (mixed, _) = report(d, &["x.log", "a.jsonl"]);
    assert_eq!(duplicates(&mixed), (n, 0));
}

#[test]
fn traces_given_twice_count_once_and_join_as_once() {
    let dir = copies("glm-like/traces.jsonl", &["t1.jsonl", "t2.jsonl"]);
    let d = dir.path();
    fs::copy(fixture("glm-like/epp.log"), d.join("a.log")).unwrap();
    fs::copy(fixture("glm-like/epp.log"), d.join("b.log")).unwrap();
    let (once, _) = report(d, &["t1.jsonl"]);
    let (twice, _) = report(d, &["t1.jsonl", "t2.jsonl"]);
    let traced = once["input"]["traces"]["decisions"].as_u64().unwrap();
    assert!(traced > 0);
    assert_eq!(duplicates(&twice), (traced, 0));
    assert_eq!(figures(&twice), figures(&once));
    // With the logs: a traced decision is not a copy of its log decision.
    let (joined, _) = report(d, &["a.log", "t1.jsonl"]);
    assert_eq!(duplicates(&joined), (0, 0));
    let (all_twice, _) = report(d, &["a.log", "b.log", "t1.jsonl", "t2.jsonl"]);
    assert_eq!(
        duplicates(&all_twice),
        (assembled(&joined), 0),
        "every log and traced decision once more"
    );
    assert_eq!(figures(&all_twice), figures(&joined));
    assert_eq!(
        all_twice["input"]["traces"]["joined"],
        joined["input"]["traces"]["joined"]
    );
}
