//! The recommend binary as a user runs it.

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

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(args)
        .output()
        .expect("run recommend")
}

use gatecal_test_support::report::ok_json;

#[test]
fn demo_with_vllm_logs() {
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        &fixture("demo/glm-like.vllm"),
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    assert_eq!(v["schema"], "gatecal.recommend/v3");
    assert_eq!(v["deployments"].as_array().unwrap().len(), 1);
    let d = &v["deployments"][0];
    let p = &d["peak_prefill_throughput"];
    assert_eq!(p["source"], "vllm_stats");
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("demo/glm-like.summary.json")).unwrap(),
    )
    .unwrap();
    let want = truth["deployments"][0]["true_peak_prefill_tps"]
        .as_f64()
        .unwrap();
    let got = p["value"].as_f64().unwrap();
    assert!((got - want).abs() / want < 0.10, "{got} vs {want}");
    assert!(d["current"].is_object());
    // The demo's EPP log at -v=4 carries no matched tokens (the report says
    // which log level would give them), but its first tokens: the observed
    // TTFT, an engine fitted to it whose replay of the config in force
    // reproduces it, and a choice by the lowest predicted p90.
    let o = &d["observed_ttft_ms"];
    assert_eq!(o["n"], 1168);
    assert!(o["p50"].as_f64().unwrap() < o["p90"].as_f64().unwrap());
    assert_eq!(
        d["observed_ttft_by_endpoint_ms"].as_object().unwrap().len(),
        4
    );
    let fitted = d["ttft_model"]["tokens_per_s"].as_f64().unwrap();
    assert!((fitted / want - 1.0).abs() < 0.05, "{fitted} vs {want}");
    assert_eq!(d["ttft_self_check"]["passed"], true);
    let rows = d["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["kind"] == "corrected_peak"));
    assert_eq!(
        rows.iter().filter(|r| r["kind"] == "static_sweep").count(),
        5
    );
    let p90 = |r: &serde_json::Value| r["predicted_ttft_ms"]["p90"].as_f64().unwrap();
    let best = rows.iter().map(p90).fold(f64::INFINITY, f64::min);
    let rec = &d["recommended"];
    assert_eq!(rec["objective"], "p90");
    let chosen = rows.iter().find(|r| r["label"] == rec["row"]).unwrap();
    let current = p90(&rows[0]);
    // The lowest p90, or the current config when the lowest is inside its
    // interval.
    let [lo, hi] = [0, 1].map(|k| {
        rows[0]["predicted_ttft_ms"]["interval"]["p90"][k]
            .as_f64()
            .unwrap()
    });
    if rec["row"] == "current" {
        // The lowest p90's interval reaches into the current one's.
        let low = rows
            .iter()
            .filter(|r| p90(r) == best)
            .map(|r| {
                r["predicted_ttft_ms"]["interval"]["p90"][0]
                    .as_f64()
                    .unwrap()
            })
            .fold(f64::INFINITY, f64::min);
        assert!(low <= hi, "{best} [{low}..] vs [{lo}, {hi}]");
    } else {
        assert_eq!(p90(chosen), best);
    }
    let gain = rec["gain_ms"]["value"].as_f64().unwrap();
    assert!((gain - (current - p90(chosen))).abs() < 1e-6);
    assert_eq!(d["paste"]["row"], rec["row"]);
    assert!(
        d["matched_tokens"]["missing"]
            .as_str()
            .unwrap()
            .contains("-v=5")
    );
    assert_eq!(d["rows"][0]["kind"], "current");
    assert!(d["rows"][0]["logged_released_share"].is_number());
    assert!(d["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str()
            .unwrap()
            .contains("configured peakPrefillThroughput")
    }));
}

/// A peak whose 90 % interval is over 40 % of the estimate is thin
/// evidence, said with what would narrow it; a narrower one is not.
#[test]
fn a_wide_peak_interval_is_warned_about() {
    let v = ok_json(
        &run(&[
            &fixture("eight-deployments/epp.log"),
            &fixture("eight-deployments/vllm"),
            "--format",
            "json",
        ]),
        "",
    );
    let dep = |name: &str| {
        let d = v["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .unwrap()
            .clone();
        let p = &d["peak_prefill_throughput"];
        let [lo, hi] = [0, 1].map(|i| p["interval"][i].as_f64().unwrap());
        let value = p["value"].as_f64().unwrap();
        let warned: Vec<String> = d["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w.as_str())
            .filter(|w| w.contains("90 % interval"))
            .map(str::to_string)
            .collect();
        ((hi - lo) / value, format!("{lo:.0}–{hi:.0}"), warned)
    };
    // mistral-small: saturated in bursts, six intervals.
    let (width, range, warned) = dep("mistral-small");
    assert!(width > 0.4, "{width}");
    assert_eq!(warned.len(), 1, "{warned:?}");
    let w = &warned[0];
    assert!(
        w.starts_with(&format!(
            "thin evidence: the peak's 90 % interval {range} is {:.0} % of the estimate",
            width * 100.0
        )) && w.contains("-v=5"),
        "{w}"
    );
    // glm-5-2: narrower than 40 %, no such warning.
    let (width, _, warned) = dep("glm-5-2");
    assert!(width <= 0.4, "{width}");
    assert!(warned.is_empty(), "{warned:?}");
}

#[test]
fn calibration_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("calib.txt");
    std::fs::write(
        &cal,
        "Measured peakPrefillThroughput = 3100 tokens/sec\nPEAK_PREFILL_THROUGHPUT=3100\n",
    )
    .unwrap();
    let out = run(&[
        &fixture("demo/glm-like.truth.jsonl.gz"),
        "--calibration",
        cal.to_str().unwrap(),
        "--format",
        "table",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("calibration"), "{t}");
    assert!(t.contains("penaltyMode: matchedTokens"));
    assert!(t.contains("Break-even: matched tokens"));
    for fmt in ["markdown", "csv"] {
        let out = run(&[&fixture("glm-like/epp.log"), "--format", fmt]);
        assert!(out.status.success());
        assert!(!out.stdout.is_empty());
    }
    let bad = dir.path().join("empty.txt");
    std::fs::write(&bad, "nothing\n").unwrap();
    let out = run(&[
        &fixture("glm-like/epp.log"),
        "--calibration",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty.txt"));
}

#[test]
fn decision_records_give_the_same_recommendation() {
    // Records (the gate as analysed) read back to the report the
    // EPP log gives.
    let dir = tempfile::tempdir().unwrap();
    let log = fixture("eight-deployments/epp.log");
    let strip = |out: Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_object_mut().unwrap().remove("input");
        // Records carry exact candidates where the log shows token loads:
        // the workload inference counts them apart.
        for d in v["deployments"].as_array_mut().unwrap() {
            d["ttft_model"].as_object_mut().unwrap().remove("workload");
        }
        v
    };
    let records = dir.path().join("g.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args([&log, "--format", "json", "--emit-decisions"])
        .arg(&records)
        .output()
        .unwrap();
    let from_log = strip(out);
    assert!(from_log["deployments"].as_array().unwrap().len() > 1);
    let mut back = strip(run(&[records.to_str().unwrap(), "--format", "json"]));
    // The same figures; only the matched tokens' labels (if any) say they
    // were read back from records, and from which source.
    for d in back["deployments"].as_array_mut().unwrap() {
        let sources = d["matched_tokens"]["sources"].as_object_mut().unwrap();
        let labels: Vec<String> = sources.keys().cloned().collect();
        for l in labels {
            let first = l
                .strip_prefix("decision_records_from_")
                .unwrap_or_else(|| panic!("{l}: not labelled as read back"));
            let n = sources.remove(&l).unwrap();
            sources.insert(first.to_string(), n);
        }
    }
    assert_eq!(from_log, back);
    let first = std::fs::read_to_string(&records).unwrap();
    assert!(first.starts_with(r#"{"v":3,"#), "{}", &first[..40]);
}

/// The demo's records, read back with its vLLM logs, give the predicted
/// TTFT the log gives: every row, the engine fitted, the workload
/// inferred, the self-check and the recommendation (the whole report but
/// its input ledger). Records of the version before, which carry no token
/// loads and no arrival times, predict nothing and say why.
#[test]
fn decision_records_give_the_demos_predicted_ttft() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("d.jsonl");
    let (log, vllm) = (
        fixture("demo/glm-like.log.gz"),
        fixture("demo/glm-like.vllm"),
    );
    let report = |args: &[&str]| {
        let mut v = ok_json(&run(&[args, &["--format", "json", "-q"]].concat()), "");
        v.as_object_mut().unwrap().remove("input");
        v
    };
    let from_log = report(&[&log, &vllm, "--emit-decisions", records.to_str().unwrap()]);
    let from_records = report(&[records.to_str().unwrap(), &vllm]);
    let d = &from_log["deployments"][0];
    let w = &d["ttft_model"]["workload"];
    assert_eq!(w["assumed"], 0, "{w}");
    assert!(w["from_loads"].as_u64() > Some(1000), "{w}");
    for r in d["rows"].as_array().unwrap() {
        assert!(r["predicted_ttft_ms"]["p90"].as_f64().is_some(), "{r}");
    }
    assert_eq!(from_log, from_records);

    // The same records as the version before wrote them.
    let text = std::fs::read_to_string(&records).unwrap();
    let old: String = text
        .lines()
        .map(|l| {
            let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
            r["v"] = 2.into();
            r.as_object_mut().unwrap().remove("arrival_ts");
            for c in r["candidates"].as_array_mut().unwrap() {
                c.as_object_mut().unwrap().remove("token_load");
            }
            format!("{r}\n")
        })
        .collect();
    let v2 = dir.path().join("v2.jsonl");
    std::fs::write(&v2, old).unwrap();
    let from_v2 = report(&[v2.to_str().unwrap(), &vllm]);
    let d = &from_v2["deployments"][0];
    assert_eq!(
        d["ttft_model"]["workload"]["assumed"],
        d["ttft_model"]["workload"]["requests"]
    );
    assert!(
        d["rows"][0]["predicted_ttft_ms"].is_null(),
        "{}",
        d["rows"][0]
    );
    let warns_of_old_records = |d: &serde_json::Value| {
        d["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w.as_str())
            .any(|w| {
                w.starts_with("1168 decision(s) read from decision records of a version before 3")
            })
    };
    assert!(warns_of_old_records(d), "{}", d["warnings"]);
    // Version 1 (no gate, no config either): the same warning.
    let v1: String = std::fs::read_to_string(&v2)
        .unwrap()
        .lines()
        .map(|l| {
            let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
            r["v"] = 1.into();
            let o = r.as_object_mut().unwrap();
            o.remove("gate");
            o.remove("config");
            format!("{r}\n")
        })
        .collect();
    let v1_path = dir.path().join("v1.jsonl");
    std::fs::write(&v1_path, v1).unwrap();
    let from_v1 = report(&[v1_path.to_str().unwrap(), &vllm]);
    let warned = warns_of_old_records(&from_v1["deployments"][0]);
    assert!(warned, "{}", from_v1["deployments"][0]["warnings"]);
    // Records of this version get no such warning.
    assert!(!from_records.to_string().contains("version before 3"));
}

#[test]
fn read_back_records_label_their_matched_tokens_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("d.jsonl");
    let sources = |args: &[&str]| -> serde_json::Value {
        let out = run(&[args, &["--format", "json", "-q"]].concat());
        let v = ok_json(&out, "");
        v["deployments"][0]["matched_tokens"]["sources"].clone()
    };
    // From the log: the P/D decider's lines.
    let log = fixture("pd-disagg/epp.log");
    let from_log = sources(&[&log]);
    let n = from_log["pd_decider"].as_u64().unwrap();
    assert!(n > 0, "{from_log}");
    // gate-dist writes the records; each names its matched tokens' source.
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args([&log, "-q", "--format", "json", "--emit-decisions"])
        .arg(&records)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&records).unwrap();
    assert_eq!(
        text.matches(r#""matched_source":"pd_decider""#).count(),
        text.matches(r#""matched_tokens":"#).count()
    );
    let back = sources(&[records.to_str().unwrap()]);
    assert_eq!(
        back,
        serde_json::json!({ "decision_records_from_pd_decider": n })
    );
    // Written again from the records, they keep the first source.
    let again = dir.path().join("again.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args([
            records.to_str().unwrap(),
            "-q",
            "--format",
            "json",
            "--emit-decisions",
        ])
        .arg(&again)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(sources(&[again.to_str().unwrap()]), back);
    // Records that do not name it say so.
    let unnamed = dir.path().join("unnamed.jsonl");
    std::fs::write(
        &unnamed,
        text.replace(r#","matched_source":"pd_decider""#, ""),
    )
    .unwrap();
    assert_eq!(
        sources(&[unnamed.to_str().unwrap()]),
        serde_json::json!({ "decision_records_from_unknown_source": n })
    );
    // Records with exact match info are exact, read back or not.
    assert!(sources(&[&fixture("glm-like/truth.jsonl")])["decision_records"].as_u64() > Some(0));
}

#[test]
fn prefix_producer_lines_at_v5_give_the_break_even_in_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let log = fixture("edge/producers_v5.log");
    let records = dir.path().join("d.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args([&log, "--format", "json", "-q", "--emit-decisions"])
        .arg(&records)
        .output()
        .unwrap();
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    // approx-1: prefix score 0.8 of 10 blocks; approx-2: the longest cached
    // prefix, 6 blocks; both of 64 tokens. precise-1: 45 whole blocks of 16.
    assert_eq!(
        d["matched_tokens"]["sources"],
        serde_json::json!({ "approximate_producer": 2, "precise_producer": 1 })
    );
    assert_eq!(d["matched_tokens"]["missing"], serde_json::Value::Null);
    let t = &d["break_even_tokens"];
    assert_eq!(
        (
            t["count"].as_u64(),
            t["p10"].as_i64(),
            t["p50"].as_i64(),
            t["p90"].as_i64()
        ),
        (Some(3), Some(384), Some(512), Some(720))
    );
    // The labels in the table, and read back from the records.
    let table =
        String::from_utf8(run(&[&log, "--format", "table", "--wide", "-q"]).stdout).unwrap();
    assert!(table.contains("approximate_producer 2"), "{table}");
    assert!(table.contains("precise_producer 1"), "{table}");
    let back = run(&[records.to_str().unwrap(), "--format", "json", "-q"]);
    let back: serde_json::Value = serde_json::from_slice(&back.stdout).unwrap();
    assert_eq!(
        back["deployments"][0]["matched_tokens"]["sources"],
        serde_json::json!({
            "decision_records_from_approximate_producer": 2,
            "decision_records_from_precise_producer": 1
        })
    );
    // Without any source, the report names the lines that would give them.
    let none = run(&[&fixture("glm-like/epp.log"), "--format", "json", "-q"]);
    let none: serde_json::Value = serde_json::from_slice(&none.stdout).unwrap();
    let missing = none["deployments"][0]["matched_tokens"]["missing"]
        .as_str()
        .unwrap();
    for needle in [
        "-v=4",
        "-v=5",
        "Produce completed",
        "Found cached servers",
        "Calculated score",
    ] {
        assert!(missing.contains(needle), "{needle}: {missing}");
    }
}

/// The producers' block sizes come from the config in force, then from
/// `--prefix-block-size`, else the upstream defaults, labelled as assumed;
/// the matched tokens scale with them.
#[test]
fn producer_block_sizes_from_the_config_or_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let log = fixture("edge/producers_v5.log");
    let config = dir.path().join("epp.yaml");
    std::fs::write(
        &config,
        "\
apiVersion: v1
kind: ConfigMap
data:
  epp.yaml: |
    plugins:
    - type: approx-prefix-cache-producer
      parameters: {autoTune: false, blockSizeTokens: 128}
    - type: precise-prefix-cache-producer
      parameters:
        tokenProcessorConfig: {blockSizeTokens: 32}
    - type: prefix-cache-affinity-filter
",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let rec = |extra: &[&str]| {
        let mut args = vec![
            log.as_str(),
            "--format",
            "json",
            "-q",
            "--known-peak",
            "1000",
        ];
        args.extend_from_slice(extra);
        let v = ok_json(&run(&args), &format!("{extra:?}"));
        v["deployments"][0].clone()
    };
    let tokens = |d: &serde_json::Value| {
        let t = &d["break_even_tokens"];
        [&t["p10"], &t["p50"], &t["p90"]].map(|x| x.as_i64().unwrap())
    };
    let sizes = |d: &serde_json::Value| {
        let b = &d["matched_tokens"]["block_sizes"];
        [
            (
                b["approximate_producer"]["tokens"].as_i64().unwrap(),
                b["approximate_producer"]["source"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
            (
                b["precise_producer"]["tokens"].as_i64().unwrap(),
                b["precise_producer"]["source"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
        ]
    };
    // Upstream defaults: 8 and 6 approximate blocks of 64, 45 precise of 16.
    let default = rec(&[]);
    assert_eq!(tokens(&default), [384, 512, 720]);
    assert_eq!(
        sizes(&default),
        [(64, "assumed".to_string()), (16, "assumed".to_string())]
    );
    // The config's sizes double every producer's matched tokens, and the
    // break-even in ms with them (one reference peak).
    let from_config = rec(&["--config", config]);
    assert_eq!(tokens(&from_config), [768, 1024, 1440]);
    assert_eq!(
        sizes(&from_config),
        [(128, "config".to_string()), (32, "config".to_string())]
    );
    let ms = |d: &serde_json::Value| d["break_even_ms"]["p50"].as_f64().unwrap();
    assert!((ms(&from_config) / ms(&default) - 2.0).abs() < 1e-3);
    let detail = from_config["matched_tokens"]["block_sizes"]["approximate_producer"]["detail"]
        .as_str()
        .unwrap();
    assert!(
        detail.contains(config) && detail.contains("blockSizeTokens 128"),
        "{detail}"
    );
    // The flag overrides the config for the producer it names.
    let flagged = rec(&["--config", config, "--prefix-block-size", "approximate=256"]);
    assert_eq!(tokens(&flagged), [1440, 1536, 2048]);
    assert_eq!(
        sizes(&flagged),
        [(256, "flag".to_string()), (32, "config".to_string())]
    );
    // Every format says which block size was used, beside the label.
    let text = |format: &str, extra: &[&str]| {
        let mut args = vec![log.as_str(), "--format", format, "--wide", "-q"];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for format in ["table", "markdown", "csv"] {
        let t = text(format, &[]);
        assert!(
            t.contains("approximate_producer 2 (64-token blocks, assumed)"),
            "{format}: {t}"
        );
        assert!(
            t.contains("precise_producer 1 (16-token blocks, assumed)"),
            "{format}: {t}"
        );
        let t = text(
            format,
            &["--prefix-block-size", "precise=32,approximate=128"],
        );
        assert!(
            t.contains("approximate_producer 2 (128-token blocks, flag)"),
            "{format}: {t}"
        );
    }
    // A bad flag or producer entry is refused, naming it.
    let bad = run(&[&log, "--prefix-block-size", "approximate=0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--prefix-block-size"));
    let bad_cfg = dir.path().join("bad.yaml");
    std::fs::write(
        &bad_cfg,
        "plugins:\n- type: approx-prefix-cache-producer\n  parameters: {autoTune: false, blockSizeTokens: 0}\n- type: prefix-cache-affinity-filter\n",
    )
    .unwrap();
    let bad = run(&[&log, "--config", bad_cfg.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("bad.yaml") && err.contains("blockSizeTokens"),
        "{err}"
    );
}

/// An input without decisions or vLLM stats exits 3, with the likely cause.
#[test]
fn no_decisions_exit_3_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let out = run(&[empty.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the input is empty"), "{err}");
    let notes = dir.path().join("notes.log");
    std::fs::write(&notes, "a\nb\n").unwrap();
    let out = run(&[notes.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no EPP log line"));
}

/// The effective peak the simulator reports per deployment.
fn effective_peaks(summary: &str) -> std::collections::BTreeMap<String, f64> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(summary)).unwrap()).unwrap();
    v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| {
            Some((
                d["deployment"].as_str()?.to_string(),
                d["effective_peak_prefill_tps"].as_f64()?,
            ))
        })
        .collect()
}

/// Whether a deployment's report warns that its peak's 90 % interval is
/// too wide to rest on (the estimator's own check of its evidence).
fn thin_peak(d: &serde_json::Value) -> bool {
    d["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str()
            .unwrap()
            .starts_with("thin evidence: the peak's 90 % interval")
    })
}

/// A Prometheus peak: value, 90 % interval, engines, scrape intervals,
/// and whether the report calls its evidence thin.
type PromPeak = (f64, [f64; 2], u64, u64, bool);

/// The Prometheus peaks of a report, by deployment.
fn prometheus_peaks(v: &serde_json::Value) -> std::collections::BTreeMap<String, PromPeak> {
    v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["peak_prefill_throughput"]["source"] == "prometheus")
        .map(|d| {
            let p = &d["peak_prefill_throughput"];
            let e = &p["estimates"][0];
            assert_eq!(e["source"], "prometheus");
            (
                d["name"].as_str().unwrap().to_string(),
                (
                    p["value"].as_f64().unwrap(),
                    [
                        p["interval"][0].as_f64().unwrap(),
                        p["interval"][1].as_f64().unwrap(),
                    ],
                    e["engines"].as_u64().unwrap(),
                    e["samples"].as_u64().unwrap(),
                    thin_peak(d),
                ),
            )
        })
        .collect()
}

#[test]
fn prometheus_query_range_gives_the_exact_peak() {
    // The responses are found by content in their folder. Without an EPP
    // log each series' namespace (`llm-d-<name>`) names its deployment,
    // so every simulated deployment's engines are read together.
    let folder = fixture("eight-deployments/prometheus");
    let alone = ok_json(&run(&[&folder, "--format", "json"]), "");
    let truth = effective_peaks("eight-deployments/summary.json");
    let whole = prometheus_peaks(&alone);
    let sim_name = |name: &str| name.strip_prefix("llm-d-").unwrap_or(name).to_string();
    let mut exact = 0;
    for (name, &(got, [a, b], _, _, thin)) in &whole {
        let want = truth[&sim_name(name)];
        // The interval holds the truth, narrow or not.
        assert!(a <= want && want <= b, "{name}: {want} not in [{a}, {b}]");
        if thin {
            // Saturated for a few scrapes only: the estimate says its
            // evidence is thin instead of claiming the exact peak.
            assert!((b - a) / got > 0.4, "{name}: [{a}, {b}] for {got}");
            continue;
        }
        exact += 1;
        assert!((got - want).abs() / want < 0.03, "{name}: {got} vs {want}");
    }
    assert!(exact >= 7, "{exact} deployments with a narrow interval");

    // The EPP log ties the pods it names to its deployments; a pod it does
    // not name stays with its namespace. A deployment whose every engine
    // is tied gets the same peak as from its namespace alone; one the log
    // names only some pods of is read in two parts, whose engines add up.
    let out = run(&[
        &fixture("eight-deployments/epp.log"),
        &folder,
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let tied = prometheus_peaks(&v);
    let (mut same, mut split) = (0, 0);
    for (name, &(got, [a, b], engines, n, _)) in &tied {
        let sim = sim_name(name);
        let ns = format!("llm-d-{sim}");
        let (all_value, _, all, all_n, _) = whole[&ns];
        if engines == all {
            same += 1;
            assert_eq!(tied[name], whole[&ns], "{name}");
            continue;
        }
        // A part measures some of the deployment's engines: its interval
        // holds the deployment's rate, and with the other part (the same
        // 15 s scrapes) it gives exactly the whole's peak.
        split += 1;
        let other = if *name == ns { &sim } else { &ns };
        let (other_value, _, other_engines, other_n, _) = tied[other];
        assert_eq!(engines + other_engines, all, "{name} and {other}");
        assert_eq!(n + other_n, all_n, "{name} and {other}");
        let joined = (got * n as f64 + other_value * other_n as f64) / all_n as f64;
        assert!(
            (joined - all_value).abs() <= 1e-9 * all_value,
            "{name} and {other}: {joined} vs {all_value}"
        );
        let want = truth[&sim];
        assert!(a <= want && want <= b, "{name}: {want} not in [{a}, {b}]");
    }
    assert!(same >= 5 && split >= 2, "{same} whole, {split} in parts");
    // Prometheus comes first; the other estimates are listed after it.
    for d in v["deployments"].as_array().unwrap() {
        let p = &d["peak_prefill_throughput"];
        if p["source"] != "prometheus" {
            continue;
        }
        let sources: Vec<&str> = p["estimates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["source"].as_str().unwrap())
            .collect();
        assert_eq!(sources[0], "prometheus");
        assert!(sources.contains(&"config"), "{sources:?}");
    }
}

/// The same `query_range` responses given twice count each sample once:
/// the same peaks and intervals as once, the duplicates counted and
/// warned of; a response with other values for the same series and times
/// is a warning naming them, not merged silently.
#[test]
fn prometheus_responses_given_twice_count_once() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("fixtures/eight-deployments/prometheus");
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let mut samples = 0;
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for s in v["data"]["result"].as_array().unwrap() {
            samples += s["values"].as_array().unwrap().len() as u64;
        }
        std::fs::write(copy.join(p.file_name().unwrap()), text).unwrap();
    }
    assert!(samples > 1000, "{samples}");
    let epp = fixture("eight-deployments/epp.log");
    let prom = src.to_str().unwrap();
    let rec = |extra: &[&str]| {
        let mut args = vec![epp.as_str(), prom, "--format", "json"];
        args.extend_from_slice(extra);
        let out = run(&args);
        let v = ok_json(&out, &format!("{extra:?}"));
        (v, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let peaks = |v: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        v["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["name"].as_str().unwrap().to_string(),
                    d["peak_prefill_throughput"].clone(),
                )
            })
            .collect()
    };
    let (once, err1) = rec(&[]);
    let (twice, err2) = rec(&[copy.to_str().unwrap()]);
    assert!(
        peaks(&once)
            .iter()
            .filter(|(_, p)| p["source"] == "prometheus")
            .count()
            >= 7
    );
    assert_eq!(peaks(&twice), peaks(&once));
    assert_eq!(twice["deployments"], once["deployments"]);
    assert_eq!(once["input"]["duplicates"]["prometheus"], 0);
    assert_eq!(twice["input"]["duplicates"]["prometheus"], samples);
    assert_eq!(twice["input"]["duplicates"]["prometheus_conflicts"], 0);
    assert!(!err1.contains("Prometheus sample"), "{err1}");
    // The count as the warning prints it: thousands grouped.
    let digits = samples.to_string();
    let grouped: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    assert!(
        err2.contains(&format!(
            "warning: {} Prometheus sample(s) seen twice (same series, time and value) are counted once",
            grouped.join(",")
        )),
        "{err2}"
    );
    // Another response for one series at the same times, other values:
    // a series of a pod the EPP log does not name, so that its namespace
    // names its deployment.
    let text = std::fs::read_to_string(src.join("prompt_tokens_local_compute.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let log = std::fs::read_to_string(&epp).unwrap();
    let at = v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| !log.contains(s["metric"]["pod"].as_str().unwrap()))
        .expect("a pod the EPP log does not name");
    let results = v["data"]["result"].as_array_mut().unwrap();
    results.swap(0, at);
    let series = &mut results[0];
    let namespace = series["metric"]["namespace"].as_str().unwrap().to_string();
    let mut changed = 0;
    for x in series["values"].as_array_mut().unwrap() {
        let n: f64 = x[1].as_str().unwrap().parse().unwrap();
        if n > 0.0 {
            changed += 1;
        }
        x[1] = serde_json::Value::String(format!("{}", n * 2.0));
    }
    assert!(changed > 0);
    v["data"]["result"].as_array_mut().unwrap().truncate(1);
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("local.json"), v.to_string()).unwrap();
    let (mixed, err3) = rec(&[other.to_str().unwrap()]);
    assert_eq!(
        mixed["input"]["duplicates"]["prometheus_conflicts"],
        changed
    );
    assert!(err3.contains("seen twice with different values"), "{err3}");
    let d = mixed["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == namespace.as_str())
        .unwrap();
    let w: Vec<&str> = d["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        w.iter().any(|w| w.starts_with(&format!(
            "{changed} Prometheus sample(s) were given twice with different values"
        )) && w.contains("vllm:prompt_tokens_by_source_total{")),
        "{w:?}"
    );
    // The first read is used: the peaks are those of the fixture alone.
    assert_eq!(peaks(&mixed), peaks(&once));
}

#[test]
fn prometheus_files_are_found_by_content_and_bad_ones_named() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    // A gzip copy under a name that says nothing.
    for f in ["prompt_tokens_local_compute", "num_requests_waiting"] {
        let raw = std::fs::read(fixture(&format!("glm-like/prometheus/{f}.json"))).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        std::fs::write(dir.path().join(format!("{f}.dat")), gz.finish().unwrap()).unwrap();
    }
    let a = dir.path().join("prompt_tokens_local_compute.dat");
    let b = dir.path().join("num_requests_waiting.dat");
    let out = run(&[a.to_str().unwrap(), b.to_str().unwrap(), "--format", "json"]);
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    assert_eq!(d["peak_prefill_throughput"]["source"], "prometheus");
    // Without an EPP log, the series' namespace names the deployment.
    assert_eq!(d["name"], "llm-d-glm");
    // Its 80–140k-token prompts take 30–47 s each, two to three 15 s
    // scrapes: the prompt straddling each end of a run weighs more than a
    // scrape interval's tokens, and a run ends at the scrape after which
    // the queue drains, with the prompt then in progress nearly done and
    // not counted. The estimate reads low (a known bias of counters
    // scraped slower than prompts complete) and says its evidence is thin:
    // its interval, which holds the truth, is wider than 40 %.
    let want = effective_peaks("glm-like/summary.json")["glm-5-2"];
    let p = &d["peak_prefill_throughput"];
    let got = p["value"].as_f64().unwrap();
    let (a, b) = (
        p["interval"][0].as_f64().unwrap(),
        p["interval"][1].as_f64().unwrap(),
    );
    assert!(a <= want && want <= b, "{want} not in [{a}, {b}]");
    assert!((b - a) / got > 0.4, "[{a}, {b}] for {got}");
    assert!(thin_peak(d), "{}", d["warnings"]);
    assert!(
        d["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().ends_with("shorter scrape intervals")),
        "{}",
        d["warnings"]
    );
    // Where the interval is narrow (prompts short against the scrapes), the
    // files found by content give the peak within 5 %: the same two
    // series of the eight deployments, gzip, under names that say nothing.
    let eight = dir.path().join("eight");
    std::fs::create_dir(&eight).unwrap();
    let mut files = Vec::new();
    for (i, f) in ["num_requests_waiting", "prompt_tokens_local_compute"]
        .into_iter()
        .enumerate()
    {
        let raw =
            std::fs::read(fixture(&format!("eight-deployments/prometheus/{f}.json"))).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let path = eight.join(format!("q{i}.dat"));
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let out = run(&[&files[0], &files[1], "--format", "json"]);
    let v = ok_json(&out, "");
    let truth = effective_peaks("eight-deployments/summary.json");
    let mut narrow = 0;
    for (name, (got, _, _, _, thin)) in prometheus_peaks(&v) {
        if thin {
            continue;
        }
        narrow += 1;
        let want = truth[name.strip_prefix("llm-d-").unwrap()];
        assert!((got - want).abs() / want < 0.05, "{name}: {got} vs {want}");
    }
    assert!(narrow >= 7, "{narrow}");

    // An error response names the file.
    let bad = dir.path().join("q.json");
    std::fs::write(
        &bad,
        r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"vllm:num_requests_waiting","pod":"p"},"values":[[1,"x"]]}]}}"#,
    )
    .unwrap();
    let out = run(&[bad.to_str().unwrap(), "--format", "json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("q.json") && err.contains("not a number"),
        "{err}"
    );
}

/// Prometheus samples out of range are dropped and counted in the report's
/// input accounting; responses past --max-prometheus-mib (all files
/// together, after decompression) are refused, naming the flag.
#[test]
fn prometheus_samples_out_of_range_are_counted_and_big_responses_refused() {
    let dir = tempfile::tempdir().unwrap();
    let raw =
        std::fs::read_to_string(fixture("glm-like/prometheus/num_requests_waiting.json")).unwrap();
    // Three samples made NaN, +Inf and 1e308.
    let mut bad = raw.clone();
    for v in ["NaN", "+Inf", "1e308"] {
        let at = bad.find(",\"0\"]").expect("a zero sample");
        bad.replace_range(at..at + 5, &format!(",\"{v}\"]"));
    }
    let waiting = dir.path().join("waiting.json");
    std::fs::write(&waiting, &bad).unwrap();
    let local = fixture("glm-like/prometheus/prompt_tokens_local_compute.json");
    let log = fixture("glm-like/epp.log");
    let w = waiting.to_str().unwrap();
    let out = run(&[&log, &local, w, "--format", "json"]);
    let v = ok_json(&out, "");
    assert_eq!(v["input"]["prometheus_samples_dropped"], 3);
    let out = run(&[&log, &local, w, "--format", "table"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("prometheus: 3 sample(s) dropped"), "{table}");
    // Past the bound: a response of a little over 1 MiB.
    let padded = raw.replacen(
        "\"values\":[",
        &format!("\"values\":[{}", "[1787320815.000,\"0\"],".repeat(50_000)),
        1,
    );
    assert!(padded.len() > 1 << 20);
    let big = dir.path().join("big.json");
    std::fs::write(&big, padded).unwrap();
    let b = big.to_str().unwrap();
    let out = run(&[&log, b, "--max-prometheus-mib", "1", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("big.json: more than 1 MiB of Prometheus responses")
            && err.contains("--max-prometheus-mib"),
        "{err}"
    );
    let out = run(&[&log, b, "--max-prometheus-mib", "2", "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The user's own config, with a named instance, other parameters, a
/// producer and a profile that refers to the instance.
const USER_CONFIG: &str = "\
# glm EPP config
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: approx-prefix-cache-producer
- name: affinity
  type: prefix-cache-affinity-filter
  parameters:
    affinityThreshold: 0.8          # the chart's
    prefixMatchInfoProducerName: approx-prefix-cache-producer
    maxTTFTPenaltyMs: 18000
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: affinity
  - pluginRef: max-score-picker
";

#[test]
fn emit_config_round_trips_every_shape() {
    let dir = tempfile::tempdir().unwrap();
    let indented: String = USER_CONFIG.lines().map(|l| format!("    {l}\n")).collect();
    let shapes = [
        ("raw", USER_CONFIG.to_string()),
        (
            "configmap",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: glm-epp\ndata:\n  default-plugins.yaml: |\n{indented}"
            ),
        ),
        (
            "list",
            format!(
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  data:\n    config.yaml: |\n{}",
                USER_CONFIG
                    .lines()
                    .map(|l| format!("      {l}\n"))
                    .collect::<String>()
            ),
        ),
        (
            "helm",
            format!(
                "router:\n  epp:\n    pluginsConfigFile: custom-plugins.yaml\n    pluginsCustomConfig:\n      custom-plugins.yaml: |\n{}",
                USER_CONFIG
                    .lines()
                    .map(|l| format!("        {l}\n"))
                    .collect::<String>()
            ),
        ),
    ];
    for (shape, text) in shapes {
        let cfg = dir.path().join(format!("{shape}.yaml"));
        std::fs::write(&cfg, &text).unwrap();
        let emitted = dir.path().join(format!("{shape}.out.yaml"));
        let out = run(&[
            &fixture("demo/glm-like.truth.jsonl.gz"),
            &fixture("demo/glm-like.vllm"),
            "--config",
            cfg.to_str().unwrap(),
            "--emit-config",
            emitted.to_str().unwrap(),
            "--format",
            "json",
        ]);
        let v = ok_json(&out, &format!("{shape}: "));
        let rec = &v["deployments"][0]["recommended"]["params"];
        let new = std::fs::read_to_string(&emitted).unwrap();
        // Only the parameter lines differ.
        let changed: Vec<&str> = new
            .lines()
            .filter(|l| !text.lines().any(|o| o == *l))
            .collect();
        assert!(
            changed.iter().all(|l| l.contains("penaltyMode:")
                || l.contains("peakPrefillThroughput:")
                || l.contains("maxTTFTPenaltyMs:")),
            "{shape}: {changed:?}"
        );
        for keep in [
            "name: affinity",
            "affinityThreshold: 0.8          # the chart's",
            "prefixMatchInfoProducerName: approx-prefix-cache-producer",
            "pluginRef: affinity",
            "# glm EPP config",
        ] {
            assert!(new.contains(keep), "{shape}: {keep} lost:\n{new}");
        }
        // The emitted file, read back as --config, gives the recommended values.
        let back = run(&[
            &fixture("demo/glm-like.truth.jsonl.gz"),
            "--config",
            emitted.to_str().unwrap(),
            "--format",
            "json",
        ]);
        let b = ok_json(&back, &format!("{shape}: "));
        let p = &b["deployments"][0]["current"]["config"]["parameters"];
        for k in ["penaltyMode", "peakPrefillThroughput", "maxTTFTPenaltyMs"] {
            assert_eq!(p[k], rec[k], "{shape}: {k}");
        }
        assert_eq!(p["affinityThreshold"], 0.8);
    }
    // Without --config: a minimal valid config; without matched tokens: refused.
    let min = dir.path().join("min.yaml");
    let out = run(&[
        &fixture("demo/glm-like.truth.jsonl.gz"),
        "--emit-config",
        min.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read_to_string(&min)
            .unwrap()
            .contains("kind: EndpointPickerConfig")
    );
    // At -v=4 (no matched tokens): the choice by predicted TTFT is written.
    let v4 = dir.path().join("v4.yaml");
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--emit-config",
        v4.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let paste = &v["deployments"][0]["paste"];
    assert_eq!(paste["row"], v["deployments"][0]["recommended"]["row"]);
    let text = std::fs::read_to_string(&v4).unwrap();
    assert!(text.contains("kind: EndpointPickerConfig"), "{text}");
    let peak = paste["params"]["peakPrefillThroughput"].as_f64().unwrap();
    assert!(
        text.contains(&format!("peakPrefillThroughput: {peak}")),
        "{text}"
    );
    // --choose names a row: its parameters are written, and the report says so.
    let chosen = dir.path().join("chosen.yaml");
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--emit-config",
        chosen.to_str().unwrap(),
        "--choose",
        "static 5 s",
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    assert_eq!(d["paste"]["row"], "static 5 s");
    assert!(d["paste"]["why"].as_str().unwrap().contains("--choose"));
    let text = std::fs::read_to_string(&chosen).unwrap();
    assert!(text.contains("maxTTFTPenaltyMs: 5000"), "{text}");
    let fitted = d["ttft_model"]["tokens_per_s"].as_f64().unwrap().round();
    assert!(
        text.contains(&format!("peakPrefillThroughput: {fitted}")),
        "{text}"
    );
    // --mode matchedTokens without match information: the corrected peak
    // with penaltyMode matchedTokens, said so.
    let mt = dir.path().join("mt.yaml");
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--emit-config",
        mt.to_str().unwrap(),
        "--mode",
        "matchedTokens",
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    assert!(
        v["deployments"][0]["paste"]["why"]
            .as_str()
            .unwrap()
            .contains("matchedTokens"),
    );
    assert!(
        std::fs::read_to_string(&mt)
            .unwrap()
            .contains("penaltyMode: matchedTokens")
    );
    // A row that does not exist: refused, nothing written.
    let none = dir.path().join("none.yaml");
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--emit-config",
        none.to_str().unwrap(),
        "--choose",
        "static 7 s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("static 7 s") && err.contains("static 5 s"),
        "{err}"
    );
    assert!(!none.exists());
}

#[test]
fn candidates_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let cand = dir.path().join("cand.yaml");
    std::fs::write(
        &cand,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {peakPrefillThroughput: 3000, maxTTFTPenaltyMs: 2000}\n",
    )
    .unwrap();
    let out = run(&[
        &fixture("demo/glm-like.truth.jsonl.gz"),
        &fixture("demo/glm-like.vllm"),
        "--candidate-config",
        cand.to_str().unwrap(),
        "--what-if",
        "peakPrefillThroughput=3000,maxTTFTPenaltyMs=1000",
        "--what-if",
        "penaltyMode=matchedTokens",
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let rows = v["deployments"][0]["rows"].as_array().unwrap();
    let cands: Vec<&serde_json::Value> = rows.iter().filter(|r| r["kind"] == "candidate").collect();
    assert_eq!(cands.len(), 3);
    assert_eq!(cands[0]["maxTTFTPenaltyMs"], 2000.0);
    assert_eq!(cands[1]["maxTTFTPenaltyMs"], 1000.0);
    assert_eq!(cands[2]["penaltyMode"], "matchedTokens");
    // A lower bar at the same peak releases at least as much.
    assert!(cands[1]["released_share"].as_f64() >= cands[0]["released_share"].as_f64());
    let bad = run(&[
        &fixture("demo/glm-like.truth.jsonl.gz"),
        "--what-if",
        "maxTTFTPenaltyMs=-5",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("maxTTFTPenaltyMs must be >= 0"));
}

#[test]
fn epp_logs_vllm_logs_or_both_name_the_deployment_the_same() {
    let names = |args: &[&str]| -> Vec<String> {
        let out = run(&[args, &["--format", "json", "--quiet"]].concat());
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    let epp = fixture("glm-like/epp.log");
    let vllm = fixture("glm-like/vllm");
    assert_eq!(names(&[&epp]), ["glm-5-2"]);
    assert_eq!(names(&[&vllm]), ["glm-5-2"]);
    assert_eq!(names(&[&epp, &vllm]), ["glm-5-2"]);
    // A P/D pool's prefill and decode pods are one deployment.
    assert_eq!(names(&[&fixture("pd-disagg/epp.log")]), ["deepseek-pd"]);
    assert_eq!(names(&[&fixture("pd-disagg/vllm")]), ["deepseek-pd"]);
}

#[test]
fn list_deployments_shows_vllm_pods_and_unknown_names_fail() {
    let out = run(&[
        &fixture("glm-like/epp.log"),
        &fixture("glm-like/vllm"),
        "--list-deployments",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("glm-5-2\n"), "{text}");
    assert!(text.contains("vLLM pods: glm-5-2-decode-"), "{text}");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("glm-like/summary.json")).unwrap())
            .unwrap();
    let n = &truth["overall"]["decisions"];
    assert!(text.contains(&format!("decisions: {n}\n")), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("cal.txt");
    std::fs::write(&cal, "PEAK_PREFILL_THROUGHPUT=9000\n").unwrap();
    let out = run(&[
        &fixture("glm-like/epp.log"),
        "--calibration",
        &format!("glm={}", cal.display()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--calibration names no deployment found: glm"),
        "{err}"
    );
    assert!(err.contains("found are: glm-5-2"), "{err}");
}

#[test]
fn since_and_until_split_the_decisions_but_not_the_peak() {
    let report = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            fixture("demo/glm-like.log.gz"),
            fixture("demo/glm-like.vllm"),
            "--format".to_string(),
            "json".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let decisions = |v: &serde_json::Value| v["deployments"][0]["current"]["decisions"].as_u64();
    let peak =
        |v: &serde_json::Value| v["deployments"][0]["peak_prefill_throughput"]["value"].as_f64();
    let mid = "2026-08-21T14:15:00Z";
    let all = report(&[]);
    let after = report(&["--since", mid]);
    let before = report(&["--until", mid]);
    let (n, a, b) = (
        decisions(&all).unwrap(),
        decisions(&after).unwrap(),
        decisions(&before).unwrap(),
    );
    assert!(a > 0 && b > 0, "{a} {b}");
    assert_eq!(a + b, n);
    // The peak is the engines' capacity: every stats line counts.
    assert_eq!(peak(&after), peak(&all));
    assert_eq!(peak(&before), peak(&all));
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--since",
        mid,
        "--until",
        "2026-08-21T14:10:00Z",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since must be before --until"));
}

#[test]
fn the_same_log_under_two_names_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::read(fixture("glm-like/epp.log")).unwrap();
    let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    std::fs::write(&a, &log).unwrap();
    std::fs::write(&b, &log).unwrap();
    let vllm = fixture("glm-like/vllm");
    let json = |inputs: &[&str]| {
        let mut args = inputs.to_vec();
        args.extend([vllm.as_str(), "--format", "json"]);
        let out = run(&args);
        let v = ok_json(&out, "");
        (v, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (once, _) = json(&[a]);
    let (twice, err) = json(&[a, b]);
    let n = once["input"]["decisions_assembled"].as_u64().unwrap();
    assert!(n > 0);
    assert_eq!(twice["input"]["duplicates"]["decisions"], n);
    assert_eq!(once["input"]["duplicates"]["decisions"], 0);
    assert_eq!(twice["deployments"], once["deployments"]);
    assert!(
        err.contains(&format!("{n} decision(s) seen twice")),
        "{err}"
    );
}

#[test]
fn the_same_vllm_logs_in_two_folders_count_once() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x"), dir.path().join("y"));
    let mut lines = 0;
    for d in [&x, &y] {
        std::fs::create_dir(d).unwrap();
        for f in std::fs::read_dir(fixture("glm-like/vllm")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
            if d == &x {
                lines += std::fs::read_to_string(&f)
                    .unwrap()
                    .lines()
                    .filter(|l| l.contains("Avg prompt throughput"))
                    .count() as u64;
            }
        }
    }
    assert!(lines > 0);
    let epp = fixture("glm-like/epp.log");
    let report = |inputs: &[&Path], format: &str| {
        let mut args = vec![epp.as_str()];
        args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
        args.extend(["--format", format]);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let json = |inputs: &[&Path]| {
        let (out, err) = report(inputs, "json");
        (
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            err,
        )
    };
    let (once, err1) = json(&[&x]);
    let (twice, err2) = json(&[&x, &y]);
    let peak = &once["deployments"][0]["peak_prefill_throughput"];
    assert_eq!(peak["source"], "vllm_stats");
    assert!(peak["samples"].as_u64().unwrap() > 0);
    // The peak estimates, their intervals and sample counts, and every
    // recommendation, as from one copy.
    assert_eq!(twice["deployments"], once["deployments"]);
    assert_eq!(once["input"]["duplicates"]["vllm_stats"], 0);
    assert_eq!(twice["input"]["duplicates"]["vllm_stats"], lines);
    assert_eq!(twice["input"]["duplicates"]["vllm_unchecked"], 0);
    assert!(!err1.contains("seen twice"), "{err1}");
    assert!(
        err2.contains(&format!("warning: {lines} vLLM stats line(s) seen twice")),
        "{err2}"
    );
    for format in ["table", "markdown"] {
        let (text, _) = report(&[&x, &y], format);
        assert!(
            text.contains(&format!("{lines} vLLM stats line(s) seen twice")),
            "{format}:\n{text}"
        );
        let (text, _) = report(&[&x], format);
        assert!(!text.contains("seen twice"), "{format}:\n{text}");
    }
}

/// The config in force takes the values the EPP log shows, as gate-dist's
/// does: glm-like-v1's EPP ran `maxTTFTPenaltyMs` 5000 (its gate lines'
/// `maxPenalty`), so the current row replays the share the EPP released. A
/// flag that contradicts the log is the what-if replayed, and the
/// contradiction is reported.
#[test]
fn the_config_in_force_takes_the_logs_values() {
    let log = fixture("glm-like-v1/epp.log");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("glm-like-v1/summary.json")).unwrap(),
    )
    .unwrap();
    let logged = summary["deployments"][0]["release_share"].as_f64().unwrap();
    assert!(logged > 0.0);
    let r = ok_json(&run(&[&log, "--format", "json", "-q"]), "glm-like-v1: ");
    let cur = &r["deployments"][0]["current"];
    let config = &cur["config"];
    assert_eq!(config["source"], "log");
    assert_eq!(config["parameters"]["maxTTFTPenaltyMs"], 5000.0);
    assert_eq!(config["parameter_sources"]["maxTTFTPenaltyMs"], "log");
    assert_eq!(config["log_disagreements"], serde_json::json!([]));
    assert_eq!(cur["released_share"].as_f64(), Some(logged));
    assert_eq!(cur["logged_released_share"].as_f64(), Some(logged));
    let row = &r["deployments"][0]["rows"][0];
    assert_eq!(row["kind"], "current");
    assert_eq!(row["maxTTFTPenaltyMs"], 5000.0);
    assert_eq!(row["released_share"].as_f64(), Some(logged));

    let r = ok_json(
        &run(&[
            &log,
            "--max-ttft-penalty-ms",
            "18000",
            "--format",
            "json",
            "-q",
        ]),
        "glm-like-v1 with a flag: ",
    );
    let cur = &r["deployments"][0]["current"];
    assert_eq!(cur["config"]["source"], "flags+log");
    assert_eq!(cur["config"]["parameters"]["maxTTFTPenaltyMs"], 18000.0);
    assert_eq!(
        cur["config"]["log_disagreements"],
        serde_json::json!([{
            "parameter": "maxTTFTPenaltyMs",
            "log": 5000.0,
            "given": 18000.0,
            "given_source": "flag",
            "used": "flag",
        }])
    );
    assert_eq!(cur["released_share"].as_f64(), Some(0.0));
    assert_eq!(cur["logged_released_share"].as_f64(), Some(logged));
    let warnings = r["deployments"][0]["warnings"].to_string();
    assert!(
        warnings.contains("maxTTFTPenaltyMs: the log shows 5000, the flag gives 18000"),
        "{warnings}"
    );
}

/// A deployment's other filter instance that disagrees with the log is
/// warned about, naming the instance.
#[test]
fn another_filter_instance_against_the_log_is_warned_about() {
    let out = run(&[
        &fixture("edge/two_filter_instances.log"),
        "--config",
        &fixture("edge/two_filter_instances.yaml"),
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    let warned = d["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str().unwrap().contains(
            "affinityThreshold of filter instance loose-affinity-filter: the log shows 0.8, the config file gives 0.5; the current row uses the log's",
        )
    });
    assert!(warned, "{}", d["warnings"]);
    assert_eq!(
        d["current"]["config"]["log_disagreements"][0]["instance"],
        "loose-affinity-filter"
    );
}

/// recommend's own numeric flags are refused outside their ranges when
/// the flags are parsed, and a hostile `--config` behind `--emit-config`
/// or `--candidate-config` is refused at once, naming the file, with
/// nothing written.
#[test]
fn numeric_flags_and_hostile_configs_are_refused() {
    let log = fixture("balanced/epp.log");
    let dir = tempfile::tempdir().unwrap();
    let bomb = dir.path().join("bomb.yaml");
    let mut y = String::from("a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        y.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 9].join(",")));
    }
    y.push_str("plugins:\n- type: prefix-cache-affinity-filter\n  parameters: *a9\n");
    std::fs::write(&bomb, y).unwrap();
    let bomb = bomb.to_string_lossy().into_owned();
    let out_yaml = dir.path().join("new.yaml");
    let out_yaml = out_yaml.to_string_lossy().into_owned();
    for (args, says) in [
        (
            vec!["--known-peak", "0.5"],
            vec!["--known-peak", "from 1 to 1000000000 tok/s"],
        ),
        (
            vec!["--current-peak-prefill-throughput", "1e-320"],
            vec!["--current-peak-prefill-throughput", "from 1 to 1000000000"],
        ),
        (
            vec!["--pinned-worse-min", "1e12"],
            vec!["--pinned-worse-min", "0 to 86400000 ms"],
        ),
        (
            vec!["--config", &bomb, "--emit-config", &out_yaml],
            vec![&bomb, "aliases (*name) are expanded"],
        ),
        (
            vec!["--candidate-config", &bomb],
            vec![&bomb, "aliases (*name) are expanded"],
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
            .arg(&log)
            .args(&args)
            .args(["--format", "json", "-q"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        for s in says {
            assert!(e.contains(s), "{args:?}: {s:?} not in {e}");
        }
        assert!(out.stdout.is_empty(), "{args:?}: no report");
    }
    assert!(!Path::new(&out_yaml).exists(), "nothing written");
}

/// A config in force the EPP did not run (here a peak sixteen times too
/// low): replayed anchored to the log its TTFT matches, but it decides a
/// third of the logged outcomes the other way, so the self-check fails,
/// the report warns and recommends nothing, and the paste block and
/// --emit-config fall back to the corrected peak, said so.
#[test]
fn a_failed_self_check_recommends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--current-peak-prefill-throughput",
        "1000",
        "--emit-config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    let check = &d["ttft_self_check"];
    assert_eq!(check["passed"], false);
    let o = &check["logged_outcomes"];
    assert_eq!(o["reproduced"], false, "{o}");
    let differ = o["differ"].as_f64().unwrap();
    assert!(differ > 0.2 * o["compared"].as_f64().unwrap(), "{o}");
    assert!(d["recommended"].is_null());
    assert!(
        d["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("no recommendation: the config in force decides")),
        "{}",
        d["warnings"]
    );
    assert_eq!(d["paste"]["row"], "corrected peak");
    assert!(
        d["paste"]["why"]
            .as_str()
            .unwrap()
            .contains("no recommendation")
    );
    let fitted = d["ttft_model"]["tokens_per_s"].as_f64().unwrap().round();
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.contains(&format!("peakPrefillThroughput: {fitted}")),
        "{text}"
    );
    assert!(text.contains("maxTTFTPenaltyMs: 18000"), "{text}");
}

/// The demo's EPP log alone: no vLLM stats, no config, so the peak in force
/// is the default; the engine fitted to the observed first tokens gives
/// the real speed, and both peak findings name it with its sample size.
#[test]
fn demo_findings_name_the_peak_fitted_to_the_first_tokens() {
    let out = run(&[&fixture("demo/glm-like.log.gz"), "--format", "json"]);
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    let fitted = d["ttft_model"]["tokens_per_s"].as_f64().unwrap();
    let n = d["ttft_model"]["fitted_requests"].as_u64().unwrap();
    assert!((fitted - 2995.0).abs() < 150.0, "{fitted}");
    let finding = |id: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {:#}", v["findings"]))
            .clone()
    };
    let f = finding("default_peak_assumed");
    let s = f["summary"].as_str().unwrap();
    let scale = 15928.0 / fitted;
    assert!(
        s.contains(&format!("fit {fitted:.0} tok/s ({n} requests)")),
        "{s}"
    );
    assert!(
        s.contains(&format!("15928/{fitted:.0} = x{scale:.2}")),
        "{s}"
    );
    assert!(!s.contains("7400"), "{s}");
    let figures = &f["evidence"]["figures"];
    assert_eq!(figures["fitted_peak"].as_f64().unwrap(), fitted);
    assert_eq!(figures["fitted_requests"].as_f64().unwrap(), n as f64);
    assert!((figures["scale"].as_f64().unwrap() - scale).abs() < 1e-9);
    let f = finding("peak_misconfigured");
    assert_eq!(f["severity"], "critical");
    let s = f["summary"].as_str().unwrap();
    assert!(
        s.contains(&format!(
            "fitted to the observed first tokens of {n} requests"
        )),
        "{s}"
    );
    assert_eq!(
        f["evidence"]["figures"]["measured_samples"]
            .as_f64()
            .unwrap(),
        n as f64
    );
}

/// At 80 columns, the paste block's comment lines wrap to the width (each
/// continuation a `#   ` comment) and its YAML keys stay as they are.
#[test]
fn the_paste_block_fits_80_columns() {
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args([
            &fixture("demo/glm-like.log.gz"),
            &fixture("demo/glm-like.vllm"),
            "--format",
            "table",
        ])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("EPP plugin parameters to paste"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(block.len() > 5, "{text}");
    for l in &block {
        assert!(l.chars().count() <= 80, "{} chars: {l}", l.chars().count());
    }
    assert!(
        block.iter().any(|l| l.trim_start().starts_with("#   ")),
        "{block:#?}"
    );
    assert!(block.contains(&"  parameters:"), "{block:#?}");
    assert!(
        block
            .iter()
            .any(|l| l.trim_start().starts_with("maxTTFTPenaltyMs: ")),
        "{block:#?}"
    );
}

/// On the demo the measured peak (the engine fitted to the first tokens)
/// is 5.3x below the configured one, yet the replay predicts the corrected
/// peak slower: the report says the two disagree, and why.
#[test]
fn a_misconfigured_peak_the_replay_advises_against_is_called_out() {
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args([&fixture("demo/glm-like.log.gz"), "--format", "json"])
        .output()
        .unwrap();
    let v = ok_json(&out, "");
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"peak_misconfigured"), "{ids:?}");
    let d = &v["deployments"][0];
    assert_eq!(d["recommended"]["row"], "current", "{}", d["recommended"]);
    let w: Vec<&str> = d["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let said = w
        .iter()
        .find(|w| w.starts_with("peak_misconfigured and the predicted TTFT disagree"))
        .unwrap_or_else(|| panic!("{w:?}"));
    assert!(said.contains("prefix-cache hit share"), "{said}");
}

/// `--svg`: each config row's predicted TTFT beside the observed one, the
/// recommended row named, linked from the Markdown; several deployments
/// get one file each beside the stacked one.
#[test]
fn svg_draws_each_rows_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("ttft.svg");
    let md = dir.path().join("r.md");
    let json = run(&[&fixture("demo/glm-like.log.gz"), "--format", "json"]);
    let v = ok_json(&json, "");
    let d = &v["deployments"][0];
    let rows = d["rows"].as_array().unwrap();
    let predicted = rows
        .iter()
        .filter(|r| !r["predicted_ttft_ms"].is_null())
        .count();
    assert!(predicted >= 2, "{rows:?}");
    let out = run(&[
        &fixture("demo/glm-like.log.gz"),
        "--svg",
        svg.to_str().unwrap(),
        "-o",
        md.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{out:?}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    // One whisker group (with its tooltip) per predicted row.
    assert_eq!(s.matches("<title>").count(), predicted, "{s}");
    let observed = d["observed_ttft_ms"]["n"].as_u64().unwrap();
    assert!(
        s.contains(&format!("(n = {})", gatecal_render::num::count(observed))),
        "{s}"
    );
    let chosen = d["recommended"]["row"].as_str().unwrap();
    assert!(
        s.contains(&format!(">{chosen} (recommended)</text>")),
        "{s}"
    );
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(m.contains("](ttft.svg)"), "{m}");

    // Several deployments: the stacked SVG and one per deployment.
    let many = dir.path().join("many.svg");
    let md = dir.path().join("many.md");
    let out = run(&[
        &fixture("eight-deployments/epp.log"),
        "--svg",
        many.to_str().unwrap(),
        "-o",
        md.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{out:?}");
    let stacked = std::fs::read_to_string(&many).unwrap();
    assert_eq!(stacked.matches("<g transform=").count(), 8);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            (n.starts_with("many-") && n.ends_with(".svg")).then_some(n)
        })
        .collect();
    assert_eq!(files.len(), 8, "{files:?}");
    let m = std::fs::read_to_string(&md).unwrap();
    for f in &files {
        assert!(m.contains(&format!("]({f})")), "{f} not linked: {m}");
    }
}

/// `--emit-partial` over time shards of the demo (each run over the whole
/// log and the vLLM logs, counting its own window) and `recommend merge`:
/// the merged report is the one of a single run's partial and of the
/// plain run, predicted TTFT and recommendation included, in any order,
/// from files, a folder or stdin; bad partials are refused naming the
/// file.
#[test]
fn partials_of_time_shards_merge_into_the_single_run() {
    let dir = tempdir("partials");
    let log = fixture("demo/glm-like.log.gz");
    let vllm = fixture("demo/glm-like.vllm");
    let windows: [&[&str]; 3] = [
        &["--until", "2026-08-21T14:10:00Z"],
        &[
            "--since",
            "2026-08-21T14:10:00Z",
            "--until",
            "2026-08-21T14:20:00Z",
        ],
        &["--since", "2026-08-21T14:20:00Z"],
    ];
    let shards = dir.join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    for (i, w) in windows.iter().enumerate() {
        let part = shards.join(format!("{i}.part"));
        let mut args = vec!["--emit-partial", part.to_str().unwrap(), "-o", "/dev/null"];
        args.extend_from_slice(w);
        args.extend([log.as_str(), vllm.as_str()]);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let all = dir.join("all.part");
    let plain = ok_json(&run(&[&log, &vllm, "--format", "json"]), "");
    let out = run(&[
        "--emit-partial",
        all.to_str().unwrap(),
        &log,
        &vllm,
        "--format",
        "json",
    ]);
    let single = ok_json(&out, "");
    let merged = ok_json(
        &run(&["merge", shards.to_str().unwrap(), "--format", "json"]),
        "",
    );
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        let o = v.as_object_mut().unwrap();
        o.remove("merged");
        o.remove("input");
        v
    };
    assert_eq!(strip(&merged), strip(&single));
    assert_eq!(strip(&merged)["deployments"], strip(&plain)["deployments"]);
    assert_eq!(strip(&merged)["findings"], strip(&plain)["findings"]);
    assert_eq!(merged["merged"].as_array().unwrap().len(), 3);
    let m = &merged["deployments"][0];
    assert_eq!(m["current"]["decisions"], 1168);
    assert!(m["rows"][0]["predicted_ttft_ms"]["p90"].is_number(), "{m}");
    assert!(m["ttft_model"]["tokens_per_s"].is_number(), "{m}");
    assert!(
        !m["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("no predicted TTFT")),
        "{}",
        m["warnings"]
    );
    // Every format: the plain run's lines, but for the command, the time
    // range (the plain run's own) and the input ledger (each shard read
    // the whole log).
    for fmt in ["table", "markdown", "csv"] {
        let a = run(&["merge", shards.to_str().unwrap(), "--format", fmt, "--wide"]);
        let b = run(&[&log, &vllm, "--format", fmt, "--wide"]);
        assert!(a.status.success() && b.status.success(), "{fmt}");
        let (a, b) = (
            String::from_utf8_lossy(&a.stdout).into_owned(),
            String::from_utf8_lossy(&b.stdout).into_owned(),
        );
        assert!(b.contains("predicted") || b.contains("Predicted"), "{b}");
        let missing: Vec<&str> = b.lines().filter(|l| !a.lines().any(|x| x == *l)).collect();
        let ledger = |l: &str| {
            ["Command", "Time range", "35,347", "lines"]
                .iter()
                .any(|w| l.contains(w))
                || l.starts_with(['┌', '╞', '└'])
        };
        assert!(
            missing.len() <= 7 && missing.iter().all(|l| ledger(l)),
            "{fmt}: {missing:#?}"
        );
        // The plain run shows its time range in one more line.
        assert_eq!(
            a.lines().count() + usize::from(fmt != "csv"),
            b.lines().count(),
            "{fmt}"
        );
    }

    // Files in another order, and stdin: the same bytes.
    let f = |i: usize| {
        shards
            .join(format!("{i}.part"))
            .to_string_lossy()
            .into_owned()
    };
    let a = run(&["merge", &f(2), &f(0), &f(1), "--format", "json"]);
    let b = run(&["merge", &f(1), &f(2), &f(0), "--format", "json"]);
    assert!(a.status.success() && b.status.success());
    assert_eq!(a.stdout, b.stdout);
    let text: String = [2, 0, 1]
        .iter()
        .map(|i| std::fs::read_to_string(f(*i)).unwrap())
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(["merge", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let c = child.wait_with_output().unwrap();
    assert!(c.status.success());
    let strip_sources = |b: &[u8]| {
        let mut v: serde_json::Value = serde_json::from_slice(b).unwrap();
        for p in v["merged"].as_array_mut().unwrap() {
            p["source"] = serde_json::Value::Null;
        }
        v
    };
    assert_eq!(strip_sources(&c.stdout), strip_sources(&a.stdout));
    // Every format renders.
    for fmt in ["table", "markdown", "csv"] {
        let out = run(&["merge", shards.to_str().unwrap(), "--format", fmt]);
        assert!(out.status.success(), "{fmt}");
        assert!(!out.stdout.is_empty());
    }

    // Bad partials, named.
    let bad = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let out = run(&["merge", &f(0), p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let e = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(e.contains(p.to_str().unwrap()), "{e}");
        e
    };
    let whole = std::fs::read_to_string(f(1)).unwrap();
    assert!(bad("cut.part", &whole[..whole.len() / 2]).contains("cut short"));
    let v2 = whole.replacen("gatecal.partial/v1", "gatecal.partial/v9", 1);
    assert!(bad("v9.part", &v2).contains("gatecal.partial/v9"));
    let gd = whole.replacen("\"report\":\"recommend\"", "\"report\":\"gate-dist\"", 1);
    assert_ne!(gd, whole);
    let e = bad("gd.part", &gd);
    assert!(e.contains("not of recommend"), "{e}");
    // The same shard twice: double counting.
    let out = run(&["merge", &f(1), &f(1)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("counted twice"));
    std::fs::remove_dir_all(&dir).ok();
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gatecal-recommend-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
