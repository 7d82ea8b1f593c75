//! Decision records round-trip the report: `gate-dist --emit-decisions d.jsonl
//! LOG` then `gate-dist d.jsonl` gives the same report (deployments,
//! outcomes, evidence, quantiles, pinned share, self-check, what-ifs,
//! windows), on every fixture.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every fixture a user could run: each scenario's and variant's EPP log and
/// truth records, the demo, and every edge-case file.
fn fixtures() -> Vec<PathBuf> {
    let f = root().join("fixtures");
    let mut out = vec![
        f.join("demo/glm-like.log.gz"),
        f.join("demo/glm-like.truth.jsonl.gz"),
    ];
    for dir in [f.clone(), f.join("variants")] {
        let mut subs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("epp.log").is_file())
            .collect();
        subs.sort();
        for s in subs {
            out.push(s.join("epp.log"));
            out.push(s.join("truth.jsonl"));
        }
    }
    let mut edge: Vec<PathBuf> = std::fs::read_dir(f.join("edge"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "jsonl"))
        .collect();
    edge.sort();
    out.extend(edge);
    out
}

fn report(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .args(["--format", "json", "--quiet"])
        .output()
        .unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    // Exit 3: no decision (a vLLM-only file), with its empty report.
    let empty = v["deployments"].as_array().is_some_and(|d| d.is_empty());
    assert!(
        out.status.success() || (empty && out.status.code() == Some(3)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The ledger describes the input read (lines, bytes, names): a records
    // file is not the log it came from.
    v.as_object_mut().unwrap().remove("input");
    v
}

/// Emits records from `input` with `extra` flags, reads them back with
/// `back` flags, and returns both reports (without their ledgers).
fn round_trip(
    input: &Path,
    extra: &[&str],
    back: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("d.jsonl");
    let mut a_args = vec![
        input.to_str().unwrap(),
        "--emit-decisions",
        rec.to_str().unwrap(),
    ];
    a_args.extend_from_slice(extra);
    let a = report(&a_args);
    let mut b_args = vec![rec.to_str().unwrap()];
    b_args.extend_from_slice(back);
    let b = report(&b_args);
    (a, b)
}

#[test]
fn every_fixture_round_trips_exactly() {
    let all = fixtures();
    assert!(all.len() >= 30, "{} fixtures", all.len());
    // Four at a time: each is two runs of the binary.
    std::thread::scope(|s| {
        for chunk in all.chunks(all.len().div_ceil(4)) {
            s.spawn(move || {
                for f in chunk {
                    let (a, b) = round_trip(f, &["--window", "10m"], &["--window", "10m"]);
                    assert_eq!(a, b, "{}", f.display());
                }
            });
        }
    });
}

#[test]
fn the_demo_keeps_its_evidence_and_what_ifs() {
    let demo = root().join("fixtures/demo/glm-like.log.gz");
    let (a, b) = round_trip(&demo, &[], &[]);
    assert_eq!(a, b);
    let d = &b["deployments"][0];
    // The figures the version-1 records lost: the gate input of the 825
    // reconstructed decisions, the self-check, and the what-if releases.
    assert_eq!(d["gate_input_ms"]["count"], 826);
    assert_eq!(d["evidence"]["reconstructed"], 825);
    assert_eq!(d["self_check"]["replayed"], 1);
    assert_eq!(d["self_check"]["agreed"], 1);
    assert!(d["what_if"][0]["released"].as_u64().unwrap() > 100);
}

/// The demo's records carry what the predicted TTFT's workload inference
/// reads (each request's arrival, each candidate's token load), and
/// written again from themselves they are the same bytes.
#[test]
fn the_demos_records_carry_the_workload_and_write_again_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (first, again) = (dir.path().join("d.jsonl"), dir.path().join("again.jsonl"));
    let demo = root().join("fixtures/demo/glm-like.log.gz");
    report(&[
        demo.to_str().unwrap(),
        "--emit-decisions",
        first.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&first).unwrap();
    assert_eq!(text.lines().count(), 1168);
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["v"], 3);
        assert!(r["arrival_ts"].as_f64() <= r["ts"].as_f64(), "{line}");
        assert!(r["arrival_ts"].as_f64().is_some(), "{line}");
        let cands = r["candidates"].as_array().unwrap();
        assert!(
            cands.iter().all(|c| c["token_load"].as_f64().is_some()),
            "{line}"
        );
    }
    report(&[
        first.to_str().unwrap(),
        "--emit-decisions",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&again).unwrap(), text.as_bytes());
}

#[test]
fn a_config_file_and_flags_travel_with_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("epp.yaml");
    std::fs::write(
        &yaml,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    maxTTFTPenaltyMs: 5000\n",
    )
    .unwrap();
    let log = root().join("fixtures/glm-like/epp.log");
    let (a, b) = round_trip(
        &log,
        &[
            "--config",
            yaml.to_str().unwrap(),
            "--peak-prefill-throughput",
            "9000",
            "--what-if-peak",
            "4000",
        ],
        &["--what-if-peak", "4000"],
    );
    assert_eq!(a, b);
    let d = &b["deployments"][0];
    assert_eq!(d["bar_ms"], 5000.0);
    assert_eq!(d["config"]["parameters"]["peakPrefillThroughput"], 9000.0);
    assert!(
        d["config"]["source"]
            .as_str()
            .unwrap()
            .ends_with("epp.yaml+flags+log")
    );
}

#[test]
fn a_config_given_when_reading_replays_the_records_under_it() {
    let log = root().join("fixtures/glm-like/epp.log");
    let (_, from_records) = round_trip(&log, &[], &["--peak-prefill-throughput", "8000"]);
    let from_log = report(&[log.to_str().unwrap(), "--peak-prefill-throughput", "8000"]);
    let (r, l) = (&from_records["deployments"][0], &from_log["deployments"][0]);
    assert_eq!(r["config"]["source"], "flags");
    // The records' loads are in tokens: the gate input follows the peak.
    assert_eq!(r["gate_input_ms"]["count"], l["gate_input_ms"]["count"]);
    assert_eq!(r["what_if"], l["what_if"]);
    assert_eq!(r["gate_input_ms"]["p50"], l["gate_input_ms"]["p50"]);
}

#[test]
fn a_decision_without_a_gate_input_is_counted_unknown() {
    // Version 1, no match info: the gate input cannot be known, and the
    // decision is still counted (outcome sticky, evidence unknown).
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("v1.jsonl");
    std::fs::write(
        &rec,
        concat!(
            r#"{"v":1,"ts":10,"deployment":"d","request_id":"a","outcome":"sticky","candidates":[{"endpoint":"ns/a"},{"endpoint":"ns/b"}]}"#,
            "\n",
            r#"{"v":1,"ts":11,"deployment":"d","request_id":"b","outcome":"load_override","logged_penalty_ms":20000,"candidates":[{"endpoint":"ns/a"},{"endpoint":"ns/b"}]}"#,
            "\n",
        ),
    )
    .unwrap();
    let v = report(&[rec.to_str().unwrap()]);
    let d = &v["deployments"][0];
    assert_eq!(d["decisions"], 2);
    assert_eq!(d["outcomes"]["sticky"], 1);
    assert_eq!(d["evidence"]["unknown"], 1);
    assert_eq!(d["evidence"]["logged"], 1);
    assert_eq!(d["gate_input_ms"]["count"], 1);
    // The what-ifs do not guess it: unknown, in neither count.
    assert_eq!(d["what_if"][0]["unknown"], 1);
}

#[test]
fn records_name_where_their_matched_tokens_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(root().join("fixtures/pd-disagg/epp.log"))
        .args(["-q", "-o"])
        .arg(dir.path().join("r.json"))
        .arg("--emit-decisions")
        .arg(&d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&d).unwrap();
    let mut with_tokens = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let g = &v["gate"];
        if g["matched_tokens"].is_i64() {
            with_tokens += 1;
            assert_eq!(g["matched_source"], "pd_decider", "{line}");
        } else {
            assert!(g.get("matched_source").is_none(), "{line}");
        }
    }
    assert!(with_tokens > 0);
}

/// The prefix producers' matched tokens use the block sizes of the config
/// in force (`--config`), or of `--prefix-block-size` over it, as
/// recommend's do: the records carry them.
#[test]
fn producer_matched_tokens_use_the_block_sizes_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let log = root().join("fixtures/edge/producers_v5.log");
    let config = dir.path().join("epp.yaml");
    std::fs::write(
        &config,
        "plugins:\n- type: approx-prefix-cache-producer\n  parameters: {autoTune: false, blockSizeTokens: 128}\n- type: prefix-cache-affinity-filter\n",
    )
    .unwrap();
    // Matched tokens per request id, from the records.
    let matched = |extra: &[&str]| {
        let records = dir.path().join("d.jsonl");
        let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
            .arg(&log)
            .args(["-q", "--format", "json", "--emit-decisions"])
            .arg(&records)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&records).unwrap();
        let mut m: Vec<(String, i64)> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|r| {
                (
                    r["request_id"].as_str().unwrap().to_string(),
                    r["gate"]["matched_tokens"].as_i64().unwrap(),
                )
            })
            .collect();
        m.sort();
        m
    };
    let pairs = |v: &[(&str, i64)]| -> Vec<(String, i64)> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    // Upstream defaults: 8 and 6 blocks of 64, 45 precise blocks of 16.
    assert_eq!(
        matched(&[]),
        pairs(&[("approx-1", 512), ("approx-2", 384), ("precise-1", 720)])
    );
    let config = config.to_str().unwrap();
    assert_eq!(
        matched(&["--config", config]),
        pairs(&[("approx-1", 1024), ("approx-2", 768), ("precise-1", 720)])
    );
    assert_eq!(
        matched(&["--config", config, "--prefix-block-size", "precise=32"]),
        pairs(&[("approx-1", 1024), ("approx-2", 768), ("precise-1", 1440)])
    );
}
