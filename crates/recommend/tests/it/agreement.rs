//! vLLM's log lines against its Prometheus counters, on the simulator's
//! outputs: the lines and counters of the same engines agree; counters
//! that describe other traffic than the lines (here the same series with
//! their values scaled) are reported in every format, with both figures,
//! their sources and their sample counts.

use std::path::Path;
use std::process::Command;

use gatecal_sim::{SimOutput, Variant, run, scenario};

/// Writes the run as a user would capture it: the EPP log, one file per
/// vLLM pod, one `query_range` response per query. `scale` multiplies the
/// values of the named counters.
fn capture(dir: &Path, out: &SimOutput, scale: &[(&str, f64)]) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("epp.log"), &out.epp_log).unwrap();
    let vllm = dir.join("vllm");
    let prom = dir.join("prometheus");
    std::fs::create_dir_all(&vllm).unwrap();
    std::fs::create_dir_all(&prom).unwrap();
    for (pod, bytes) in &out.vllm_logs {
        std::fs::write(vllm.join(format!("{pod}.log")), bytes).unwrap();
    }
    for (name, bytes) in &out.prometheus {
        let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        for series in v["data"]["result"].as_array_mut().unwrap() {
            let metric = series["metric"]["__name__"].as_str().unwrap().to_string();
            let source = series["metric"]["source"].as_str().map(str::to_string);
            let Some((_, k)) = scale.iter().find(|(m, _)| {
                metric == *m
                    || (source.as_deref() == Some("local_compute") && *m == "local_compute")
            }) else {
                continue;
            };
            for pair in series["values"].as_array_mut().unwrap() {
                let x: f64 = pair[1].as_str().unwrap().parse().unwrap();
                pair[1] = serde_json::Value::String((x * k).to_string());
            }
        }
        std::fs::write(prom.join(name), serde_json::to_vec(&v).unwrap()).unwrap();
    }
    ["epp.log", "vllm", "prometheus"]
        .iter()
        .map(|p| dir.join(p).to_string_lossy().into_owned())
        .collect()
}

fn report(inputs: &[String], format: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(inputs)
        .args(["--format", format, "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn logs_and_prometheus_disagreeing_is_warned_in_every_format() {
    let s = scenario("glm-like").unwrap();
    let out = run(&s, 1, &Variant::default());
    let dir = tempfile::tempdir().unwrap();

    // The same engines' lines and counters: no disagreement.
    let same = capture(&dir.path().join("same"), &out, &[]);
    let v: serde_json::Value = serde_json::from_str(&report(&same, "json")).unwrap();
    let d = &v["deployments"][0];
    assert_eq!(d["source_disagreements"], serde_json::json!([]), "{d}");
    let estimates = d["peak_prefill_throughput"]["estimates"]
        .as_array()
        .unwrap();
    let est = |source: &str| {
        estimates
            .iter()
            .find(|e| e["source"] == source)
            .unwrap_or_else(|| panic!("no {source} estimate: {estimates:?}"))
            .clone()
    };
    let (lines, counters) = (est("vllm_stats"), est("prometheus"));

    // Counters that count twice the computed tokens and half the hits.
    let off = capture(
        &dir.path().join("off"),
        &out,
        &[
            ("local_compute", 2.0),
            ("vllm:prefix_cache_hits_total", 0.5),
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&report(&off, "json")).unwrap();
    let d = &v["deployments"][0];
    let dis = d["source_disagreements"].as_array().unwrap();
    assert_eq!(dis.len(), 2, "{dis:?}");
    let peak = &dis[0];
    assert_eq!(peak["figure"], "peak_prefill_throughput");
    assert_eq!(peak["log"]["source"], "vllm_stats");
    assert_eq!(peak["log"]["value"], lines["value"]);
    assert_eq!(peak["log"]["samples"], lines["samples"]);
    assert_eq!(peak["prometheus"]["source"], "prometheus");
    let doubled =
        peak["prometheus"]["value"].as_f64().unwrap() / counters["value"].as_f64().unwrap();
    assert!((doubled - 2.0).abs() < 1e-6, "{doubled}");
    assert!(peak["prometheus"]["samples"].as_u64().unwrap() > 0);
    let hit = &dis[1];
    assert_eq!(hit["figure"], "prefix_cache_hit_rate");
    let (log_hit, prom_hit) = (
        hit["log"]["value"].as_f64().unwrap(),
        hit["prometheus"]["value"].as_f64().unwrap(),
    );
    // The lines keep their rate; the counters' is half of what agreed.
    let [lo, hi] = [0, 1].map(|i| hit["log"]["interval"][i].as_f64().unwrap());
    assert!(lo <= log_hit && log_hit <= hi);
    assert!(prom_hit < lo - 0.02, "{prom_hit} vs [{lo}, {hi}]");
    assert!(hit["log"]["samples"].as_u64().unwrap() >= 10);
    assert!(hit["prometheus"]["samples"].as_u64().unwrap() >= 10);
    let warnings: Vec<&str> = d["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.starts_with("logs and Prometheus disagree"))
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");

    // Both figures, their sources and sample counts, in every format.
    let peak_log = format!(
        "{:.0} tok/s from the vLLM stats lines ({} saturated intervals",
        lines["value"].as_f64().unwrap(),
        lines["samples"]
    );
    let hit_prom = format!("{:.1} % from the Prometheus counters", prom_hit * 100.0);
    for format in ["table", "markdown", "csv"] {
        let text = report(&off, format);
        assert!(text.contains(&peak_log), "{format}: {text}");
        assert!(text.contains(&hit_prom), "{format}: {text}");
        assert!(text.contains("scrape intervals"), "{format}");
    }
}

#[test]
fn every_simulated_deployment_agrees_with_its_own_counters() {
    // The committed fixtures are the simulator's outputs of every scenario.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut both = 0;
    for scenario in [
        "glm-like",
        "glm-like-v1",
        "balanced",
        "eight-deployments",
        "latency-predictor",
        "pd-disagg",
    ] {
        let inputs: Vec<String> = ["epp.log", "vllm", "prometheus"]
            .iter()
            .map(|p| root.join(scenario).join(p).to_string_lossy().into_owned())
            .collect();
        let v: serde_json::Value = serde_json::from_str(&report(&inputs, "json")).unwrap();
        for d in v["deployments"].as_array().unwrap() {
            assert_eq!(
                d["source_disagreements"],
                serde_json::json!([]),
                "{scenario}: {}",
                d["name"]
            );
            let sources: Vec<&str> = d["peak_prefill_throughput"]["estimates"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|e| e["source"].as_str())
                .collect();
            if sources.contains(&"prometheus") && sources.contains(&"vllm_stats") {
                both += 1;
            }
        }
    }
    assert!(both >= 8, "{both} deployments with both estimates");
}

#[test]
fn a_pods_counters_go_with_its_log_lines() {
    // The sample EPP log names only some of glm-5-2's pods; the counters of
    // the others belong with their vLLM lines, not to a deployment named
    // after the namespace.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/eight-deployments");
    let path = |p: &str| root.join(p).to_string_lossy().into_owned();
    let names = |inputs: &[String]| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&report(inputs, "json")).unwrap();
        v["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    let without = names(&[path("epp.log"), path("vllm")]);
    let with = names(&[path("epp.log"), path("vllm"), path("prometheus")]);
    assert_eq!(with, without);
    assert!(with.iter().any(|n| n == "glm-5-2"), "{with:?}");
}
