//! `--emit-calibration`: the router's peak calibration record, written from
//! the passive estimate, checked against the rules the router's loader
//! applies, and read back by `--calibration`.
//!
//! Rules of the router's loader (llm-d-router, `prefixcacheaffinity`
//! `calibration.go`), read from its source:
//!
//! 1. The file is decoded with Go's `json.Unmarshal` into a struct, so it
//!    must be one valid JSON object (no `NaN` literal, no truncation), each
//!    known key of its Go type (`schema_version`, `valid_samples`,
//!    `chunk_tokens`: integers; `status`, `fingerprint`, `model_revision`,
//!    `engine_image_digest`: strings; `median_ttft_seconds`,
//!    `peak_prefill_tokens_per_second`: numbers; `applied`: bool), and
//!    unknown keys are ignored (no strict decoding of the record).
//! 2. `schema_version` must be 1.
//! 3. `status` must be `"OK"`; any other status carries no value.
//! 4. `peak_prefill_tokens_per_second` must be present, finite and > 0.
//! 5. `chunk_tokens` must be present and > 0.
//! 6. `valid_samples` must be at least 10.
//! 7. `median_ttft_seconds` must be present, finite and > 0.
//! 8. `fingerprint` must be non-empty and equal to the filter's
//!    `prefillCalibrationFingerprint` (which must be set).
//! 9. An explicit `peakPrefillThroughput` in the plugin parameters wins over
//!    any record, so the record is only applied when that key is absent.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recommend")
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Checks `rec` against rules 1 to 8 for a filter configured with `want`;
/// the reason of the first rule broken, as the loader would report it.
fn upstream_rejects(rec: &Value, want: &str) -> Option<String> {
    let o = rec.as_object()?;
    let int = |k: &str| o.get(k).and_then(Value::as_i64);
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    for k in [
        "status",
        "fingerprint",
        "model_revision",
        "engine_image_digest",
    ] {
        if o.get(k).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Some(format!("{k} is not a string"));
        }
    }
    for k in ["schema_version", "valid_samples", "chunk_tokens"] {
        if o.get(k).is_some_and(|v| !v.is_i64() && !v.is_null()) {
            return Some(format!("{k} is not an integer"));
        }
    }
    for k in ["median_ttft_seconds", "peak_prefill_tokens_per_second"] {
        if o.get(k).is_some_and(|v| !v.is_number() && !v.is_null()) {
            return Some(format!("{k} is not a number"));
        }
    }
    if o.get("applied")
        .is_some_and(|v| !v.is_boolean() && !v.is_null())
    {
        return Some("applied is not a bool".into());
    }
    if int("schema_version") != Some(1) {
        return Some("schema_version".into());
    }
    if o.get("status").and_then(Value::as_str) != Some("OK") {
        return Some("status".into());
    }
    if !num("peak_prefill_tokens_per_second").is_some_and(|v| v.is_finite() && v > 0.0) {
        return Some("peak_prefill_tokens_per_second".into());
    }
    if int("chunk_tokens").is_none_or(|v| v <= 0) {
        return Some("chunk_tokens".into());
    }
    if int("valid_samples").unwrap_or(0) < 10 {
        return Some("valid_samples".into());
    }
    if !num("median_ttft_seconds").is_some_and(|v| v.is_finite() && v > 0.0) {
        return Some("median_ttft_seconds".into());
    }
    let fp = o.get("fingerprint").and_then(Value::as_str).unwrap_or("");
    if fp.is_empty() || want.is_empty() || fp != want {
        return Some("fingerprint".into());
    }
    None
}

#[test]
fn the_record_passes_every_rule_of_the_router_loader() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("prefill-calibration.json");
    let report = dir.path().join("report.json");
    let o = run(&[
        fixture("glm-like/epp.log").to_str().unwrap(),
        fixture("glm-like/vllm").to_str().unwrap(),
        "--chunk-tokens",
        "8192",
        "--calibration-fingerprint",
        "sha256:glm-tp8",
        "--emit-calibration",
        rec.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        report.to_str().unwrap(),
    ]);
    ok(&o);
    let text = std::fs::read_to_string(&rec).unwrap();
    assert!(!text.contains("NaN") && !text.contains("Infinity"));
    let r = read_json(&rec);
    assert_eq!(upstream_rejects(&r, "sha256:glm-tp8"), None, "{r:#}");
    // Another deployment's fingerprint, or none configured, is refused.
    assert!(upstream_rejects(&r, "sha256:other").is_some());
    assert!(upstream_rejects(&r, "").is_some());

    // The figures are the report's, and say what was measured.
    let rep = read_json(&report);
    let dep = &rep["deployments"][0];
    let peak = &dep["peak_prefill_throughput"];
    assert_eq!(peak["source"], "vllm_stats");
    assert_eq!(r["peak_prefill_tokens_per_second"], peak["value"]);
    assert_eq!(r["valid_samples"], peak["samples"]);
    let p50_ms = dep["observed_ttft_ms"]["p50"].as_f64().unwrap();
    let median = r["median_ttft_seconds"].as_f64().unwrap();
    assert!(
        (median - p50_ms / 1000.0).abs() < 1e-9,
        "{median} vs {p50_ms}"
    );
    assert_eq!(r["chunk_tokens"], 8192);
    // What the logs cannot tell is left empty, never made up.
    assert_eq!(r["model_revision"], "");
    assert_eq!(r["engine_image_digest"], "");
    assert_eq!(r["applied"], false);
    assert_eq!(r["provenance"]["kind"], "passive_estimate");
    assert_eq!(r["provenance"]["peak_source"], "vllm_stats");
    assert_eq!(
        r["provenance"]["ttft_requests"],
        dep["observed_ttft_ms"]["n"]
    );
}

#[test]
fn the_record_read_back_by_calibration_gives_the_same_peak() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.json");
    let o = run(&[
        fixture("glm-like/epp.log").to_str().unwrap(),
        fixture("glm-like/vllm").to_str().unwrap(),
        "--chunk-tokens",
        "8192",
        "--emit-calibration",
        rec.to_str().unwrap(),
        "-o",
        dir.path().join("first.md").to_str().unwrap(),
    ]);
    ok(&o);
    let r = read_json(&rec);
    assert_eq!(r["fingerprint"], "gatecal-passive:glm-5-2");
    let back = dir.path().join("back.json");
    let o = run(&[
        fixture("glm-like/epp.log").to_str().unwrap(),
        "--calibration",
        rec.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        back.to_str().unwrap(),
    ]);
    ok(&o);
    let peak = &read_json(&back)["deployments"][0]["peak_prefill_throughput"];
    assert_eq!(peak["source"], "calibration");
    assert_eq!(peak["value"], r["peak_prefill_tokens_per_second"]);
    assert_eq!(peak["samples"], r["valid_samples"]);
}

#[test]
fn a_peak_without_evidence_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.json");
    // The EPP log alone: the peak is the config's.
    let o = run(&[
        fixture("glm-like/epp.log").to_str().unwrap(),
        "--chunk-tokens",
        "8192",
        "--emit-calibration",
        rec.to_str().unwrap(),
        "-o",
        dir.path().join("r.md").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--emit-calibration"), "{err}");
    assert!(
        err.contains("rec.json") && err.contains("no estimate"),
        "{err}"
    );
    assert!(!rec.exists());
    // A value the user typed is not a measurement either.
    let o = run(&[
        fixture("glm-like/epp.log").to_str().unwrap(),
        "--known-peak",
        "5000",
        "--chunk-tokens",
        "8192",
        "--emit-calibration",
        rec.to_str().unwrap(),
        "-o",
        dir.path().join("r.md").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("source user"));
    assert!(!rec.exists());
}

#[test]
fn the_chunk_size_is_required_and_an_input_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("epp.log");
    std::fs::copy(fixture("glm-like/epp.log"), &log).unwrap();
    let before = std::fs::read(&log).unwrap();
    let o = run(&[
        log.to_str().unwrap(),
        "--emit-calibration",
        dir.path().join("rec.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--chunk-tokens"));
    let o = run(&[
        log.to_str().unwrap(),
        fixture("glm-like/vllm").to_str().unwrap(),
        "--chunk-tokens",
        "8192",
        "--emit-calibration",
        log.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("it would be overwritten"));
    assert_eq!(std::fs::read(&log).unwrap(), before);
}
