//! gate-dist on trace input, for every scenario, against simulator truth:
//! from traces alone the figures are the sample's, exactly (to histogram
//! precision); with the logs of the same run, every sampled decision joins
//! its log decision and the self-validation is the reconstruction's error
//! on them, against what the logs alone give (a logs-only run's decision
//! records).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use gatecal_analysis::{Distribution, SignedHistogram};
use gatecal_sim::{TruthRecord, Variant, is_sampled, run, scenario, scenario_names, write_traces};

const SEED: u64 = 1;
const RATIO: f64 = 0.3;

fn gate_dist(args: &[&Path]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .args(["--format", "json", "--quiet"])
        .output()
        .expect("run gate-dist");
    assert!(
        out.status.success(),
        "gate-dist {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn dist(values: impl Iterator<Item = f64>) -> serde_json::Value {
    let mut h = SignedHistogram::new();
    for v in values {
        h.record(v);
    }
    serde_json::to_value(Distribution::of(&h)).unwrap()
}

struct Case {
    truth: Vec<TruthRecord>,
    sampled: Vec<TruthRecord>,
    dir: tempfile::TempDir,
}

fn case(name: &str) -> Case {
    let s = scenario(name).expect("scenario").with_requests(1200);
    let out = run(&s, SEED, &Variant::default());
    let (traces, n) = write_traces(Vec::new(), &s, &out.truth, SEED, RATIO).unwrap();
    let sampled: Vec<TruthRecord> = out
        .truth
        .iter()
        .filter(|r| is_sampled(SEED, RATIO, r))
        .cloned()
        .collect();
    assert_eq!(n as usize, sampled.len(), "{name}: spans written");
    assert!(!sampled.is_empty(), "{name}: a sample");
    assert!(sampled.len() < out.truth.len(), "{name}: a strict sample");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("epp.log"), &out.epp_log).unwrap();
    std::fs::write(dir.path().join("traces.jsonl"), &traces).unwrap();
    Case {
        truth: out.truth,
        sampled,
        dir,
    }
}

fn outcome_counts(recs: &[TruthRecord]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for r in recs {
        *m.entry(r.outcome.clone()).or_default() += 1;
    }
    m
}

fn assert_outcomes(name: &str, report: &serde_json::Value, want: &BTreeMap<String, u64>) {
    let got = &report["overall"]["outcomes"];
    for (k, v) in want {
        assert_eq!(got[k].as_u64(), Some(*v), "{name}: outcome {k}");
    }
    assert_eq!(got["unknown"].as_u64(), Some(0), "{name}: unknown outcomes");
}

#[test]
fn traces_alone_give_the_sample_exactly() {
    for name in scenario_names() {
        let c = case(name);
        let r = gate_dist(&[&c.dir.path().join("traces.jsonl")]);
        let o = &r["overall"];
        assert_eq!(
            o["decisions"].as_u64(),
            Some(c.sampled.len() as u64),
            "{name}"
        );
        assert_outcomes(name, &r, &outcome_counts(&c.sampled));
        let gates = || c.sampled.iter().filter_map(|t| t.truth_gate_input_ms);
        assert_eq!(o["gate_input_ms"], dist(gates()), "{name}: gate input");
        assert_eq!(
            o["evidence"]["traced"].as_u64(),
            Some(gates().count() as u64),
            "{name}: every evaluated gate is traced"
        );
        assert_eq!(o["evidence"]["reconstructed"].as_u64(), Some(0), "{name}");
        assert_eq!(
            o["traced"]["decisions"].as_u64(),
            Some(c.sampled.len() as u64)
        );
        assert_eq!(o["traced"]["joined"].as_u64(), Some(0), "{name}");
        let t = &r["input"]["traces"];
        assert_eq!(t["traces_only"], true, "{name}");
        assert_eq!(t["decisions"].as_u64(), Some(c.sampled.len() as u64));
        assert_eq!(t["without_profile"].as_u64(), Some(0), "{name}: profiles");
        assert!(
            t["note"].as_str().unwrap().contains("sampled decision"),
            "{name}: the report says the figures are the sample's"
        );
        let i = &r["input"];
        assert_eq!(i["lines_malformed"].as_u64(), Some(0), "{name}");
        assert_eq!(
            i["lines_total"].as_u64(),
            Some(i["lines_used"].as_u64().unwrap() + i["lines_ignored"].as_u64().unwrap()),
            "{name}: every line accounted for"
        );
        // The deployments are the truth's, from the resource attributes.
        let mut deps: Vec<&str> = r["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        deps.sort_unstable();
        let mut want: Vec<&str> = c.sampled.iter().map(|t| t.deployment.as_str()).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(deps, want, "{name}: deployments");
    }
}

/// What the logs alone gave per (request id, profile, filter): the
/// evidence and gate input of the decision records a logs-only run emits.
type Key = (String, String, String);

fn reconstructed(records: &[u8]) -> HashMap<Key, (Option<String>, Option<f64>)> {
    let mut out = HashMap::new();
    for line in String::from_utf8_lossy(records).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let g = &v["gate"];
        out.insert(
            (s("request_id"), s("profile"), s("filter")),
            (
                g["evidence"].as_str().map(str::to_string),
                g["input_ms"].as_f64(),
            ),
        );
    }
    out
}

#[test]
fn logs_and_traces_join_and_validate_the_reconstruction() {
    for name in scenario_names() {
        let c = case(name);
        let records = c.dir.path().join("records.jsonl");
        let logs_only = gate_dist(&[
            &c.dir.path().join("epp.log"),
            Path::new("--emit-decisions"),
            &records,
        ]);
        let r = gate_dist(&[
            &c.dir.path().join("epp.log"),
            &c.dir.path().join("traces.jsonl"),
        ]);
        let o = &r["overall"];
        // The population is the logs'.
        assert_eq!(o["decisions"], logs_only["overall"]["decisions"], "{name}");
        assert_eq!(o["outcomes"], logs_only["overall"]["outcomes"], "{name}");
        assert_eq!(
            o["decisions"].as_u64(),
            Some(c.truth.len() as u64),
            "{name}: every decision of the logs"
        );
        let t = &r["input"]["traces"];
        assert_eq!(t["traces_only"], false, "{name}");
        assert_eq!(
            t["joined"].as_u64(),
            Some(c.sampled.len() as u64),
            "{name}: joined"
        );
        assert_eq!(t["unmatched"].as_u64(), Some(0), "{name}");
        let tr = &o["traced"];
        assert_eq!(tr["decisions"].as_u64(), Some(c.sampled.len() as u64));
        assert_eq!(tr["joined"].as_u64(), Some(c.sampled.len() as u64));
        let gates = || c.sampled.iter().filter_map(|t| t.truth_gate_input_ms);
        assert_eq!(tr["gate_input_ms"], dist(gates()), "{name}: traced input");

        // The self-validation, measured here from the logs alone and the truth.
        let rec = reconstructed(&std::fs::read(&records).unwrap());
        let mut pairs = Vec::new();
        let (mut logged, mut observed, mut unknown) = (0u64, 0u64, 0u64);
        for s in &c.sampled {
            let Some(truth) = s.truth_gate_input_ms else {
                continue;
            };
            let key = (s.request_id.clone(), s.profile.clone(), s.filter.clone());
            match rec.get(&key) {
                Some((Some(e), Some(v))) if e == "reconstructed" => pairs.push((*v, truth)),
                Some((Some(e), _)) if e == "logged" => logged += 1,
                Some((Some(e), _)) if e == "observed" => observed += 1,
                _ => unknown += 1,
            }
        }
        let v = &tr["validation"];
        assert_eq!(v["traced_inputs"].as_u64(), Some(gates().count() as u64));
        assert_eq!(
            v["pairs"].as_u64(),
            Some(pairs.len() as u64),
            "{name}: pairs"
        );
        assert_eq!(v["logged"].as_u64(), Some(logged), "{name}: logged");
        assert_eq!(v["observed"].as_u64(), Some(observed), "{name}: observed");
        assert_eq!(
            v["reconstruction_unknown"].as_u64(),
            Some(unknown),
            "{name}"
        );
        let abs = dist(pairs.iter().map(|(r, t)| (r - t).abs()));
        assert_eq!(v["abs_error_ms"], abs, "{name}: |reconstructed - traced|");
        assert_eq!(
            v["error_ms"],
            dist(pairs.iter().map(|(r, t)| r - t)),
            "{name}: signed error"
        );
        assert_eq!(
            v["reconstructed_ms"],
            dist(pairs.iter().map(|(r, _)| *r)),
            "{name}"
        );
        assert_eq!(
            v["traced_ms"],
            dist(pairs.iter().map(|(_, t)| *t)),
            "{name}"
        );
        // Traced decisions replace the reconstruction's value in the audit.
        assert_eq!(
            o["evidence"]["traced"].as_u64(),
            Some(gates().count() as u64),
            "{name}"
        );
    }
}

/// With logs, at most 50,000 traced decisions are held for the join: those
/// read past it are counted (`not_held`) and said in the note, never held.
#[test]
fn traced_decisions_held_for_the_join_are_bounded() {
    const HELD: usize = 50_000;
    let n = HELD + 7;
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("t.jsonl");
    let mut text = String::with_capacity(n * 200);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        text.push_str(r#"{"resourceSpans":[{"scopeSpans":[{"spans":["#);
        for (k, i) in chunk.iter().enumerate() {
            if k > 0 {
                text.push(',');
            }
            text.push_str(&format!(
                r#"{{"spanId":"s{i}","name":"filter_prefix_cache_affinity","startTimeUnixNano":"{}","attributes":[{{"key":"gen_ai.request.id","value":{{"stringValue":"t-{i}"}}}}]}}"#,
                1_787_320_815_000_000_000u64 + *i as u64 * 1_000_000
            ));
        }
        text.push_str("]}]}]}\n");
    }
    std::fs::write(&traces, text).unwrap();
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/glm-like/epp.log");
    let r = gate_dist(&[&traces, &log]);
    let t = &r["input"]["traces"];
    assert_eq!(t["decisions"], n as u64);
    assert_eq!(t["not_held"], 7);
    assert!(
        t["note"]
            .as_str()
            .unwrap()
            .contains("7 traced decision(s) read past the first 50000"),
        "{t}"
    );
}

/// A trace document over --max-trace-document-mib is skipped, and when it
/// was the only input the error says why, naming the flag.
#[test]
fn a_trace_document_over_the_cap_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let pad = format!(
        "{{\n  \"data\": [\n    {{\"traceID\": \"{}\", \"spans\": []}}\n  ]\n}}\n",
        "a".repeat(1_200_000)
    );
    std::fs::write(&big, &pad).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(&big)
        .args(["--max-trace-document-mib", "1", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "big.json:1: trace document of {} bytes is over the cap of 1 MiB (raise it with --max-trace-document-mib",
            pad.len()
        )),
        "{err}"
    );
    // Under a higher cap it is read (and holds no decision: exit 3, other cause).
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(&big)
        .args(["--max-trace-document-mib", "2", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no filter_prefix_cache_affinity span"),
        "{err}"
    );
}
