//! The gate-dist binary as a user runs it: formats, files, exit codes.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
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

use gatecal_test_support::report::ok_json;

fn json(args: &[&str]) -> serde_json::Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

#[test]
fn demo_json_report() {
    let v = json(&[&fixture("demo/glm-like.log.gz"), "--format", "json"]);
    assert_eq!(v["schema"], "gatecal.gate-dist/v3");
    let i = &v["input"];
    assert_eq!(
        i["lines_total"].as_u64().unwrap(),
        i["lines_used"].as_u64().unwrap()
            + i["lines_ignored"].as_u64().unwrap()
            + i["lines_malformed"].as_u64().unwrap()
    );
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("demo/glm-like.summary.json")).unwrap(),
    )
    .unwrap();
    let d = &v["deployments"][0];
    assert_eq!(d["decisions"], truth["overall"]["decisions"]);
    for (k, n) in truth["overall"]["outcomes"].as_object().unwrap() {
        assert_eq!(&d["outcomes"][k], n, "outcome {k}");
    }
    assert!(d["released_share"].as_f64().unwrap() < 0.01);
    let pinned = d["pinned_worse"]["share"].as_f64().unwrap();
    assert!((0.10..=0.20).contains(&pinned), "{pinned}");
    assert_eq!(d["self_check"]["replayed"], d["self_check"]["agreed"]);
}

#[test]
fn decision_records_are_exact() {
    // The truth records are decisions JSON lines (gzipped): exact figures.
    let v = json(&[&fixture("demo/glm-like.truth.jsonl.gz"), "--format", "json"]);
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("demo/glm-like.summary.json")).unwrap(),
    )
    .unwrap();
    let o = &v["overall"];
    let t = &truth["overall"];
    assert_eq!(o["gate_input_ms"]["count"], t["gate_evaluated"]);
    for (q, k) in [
        ("p50", "gate_input_p50_ms"),
        ("p90", "gate_input_p90_ms"),
        ("p99", "gate_input_p99_ms"),
    ] {
        let got = o["gate_input_ms"][q].as_f64().unwrap();
        let want = t[k].as_f64().unwrap();
        assert!(
            (got - want).abs() <= want.abs() * 0.0006 + 0.01,
            "{q}: {got} vs {want}"
        );
    }
    assert_eq!(o["evidence"]["reconstructed"], 0);
}

#[test]
fn emitted_decisions_read_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("d.jsonl");
    let a = json(&[
        &fixture("glm-like/epp.log"),
        "--format",
        "json",
        "--emit-decisions",
        rec.to_str().unwrap(),
    ]);
    let b = json(&[rec.to_str().unwrap(), "--format", "json"]);
    assert_eq!(a["overall"]["decisions"], b["overall"]["decisions"]);
    assert_eq!(a["overall"]["outcomes"], b["overall"]["outcomes"]);
    assert!(b["overall"]["decisions"].as_u64().unwrap() > 0);
}

#[test]
fn every_format_and_files() {
    let dir = tempfile::tempdir().unwrap();
    for (fmt, needle) in [
        ("table", "Gate input and releases"),
        ("markdown", "## gatecal gate-dist report"),
        ("csv", "deployment,window_start,window_end,rule,"),
        ("json", "\"schema\""),
    ] {
        let out = run(&[&fixture("glm-like/epp.log"), "--format", fmt]);
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(needle),
            "{fmt}"
        );
    }
    let report = dir.path().join("r.md");
    let svg = dir.path().join("h.svg");
    let out = run(&[
        &fixture("glm-like/epp.log"),
        "--format",
        "markdown",
        "-o",
        report.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "-o writes the file, not stdout");
    assert!(
        std::fs::read_to_string(&report)
            .unwrap()
            .contains("| deployment |")
    );
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("bar (maxTTFTPenaltyMs) 18,000 ms"));
}

#[test]
fn several_deployments_write_one_svg_each() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("h.svg");
    let out = run(&[
        &fixture("eight-deployments/epp.log"),
        "--format",
        "json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let n = std::fs::read_dir(dir.path()).unwrap().count();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(n, 1 + v["deployments"].as_array().unwrap().len());
}

#[test]
fn config_file_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("epp.yaml");
    std::fs::write(
        &yaml,
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    maxTTFTPenaltyMs: 5000\n",
    )
    .unwrap();
    let v = json(&[
        &fixture("glm-like/epp.log"),
        "--format",
        "json",
        "--config",
        yaml.to_str().unwrap(),
    ]);
    let d = &v["deployments"][0];
    assert_eq!(d["bar_ms"], 5000.0);
    assert!(d["config"]["source"].as_str().unwrap().starts_with("file:"));
    let v = json(&[
        &fixture("glm-like/epp.log"),
        "--format",
        "json",
        "--max-ttft-penalty-ms",
        "2000",
        "--what-if-bar",
        "100,200",
        "--window",
        "1m",
    ]);
    let d = &v["deployments"][0];
    assert_eq!(d["bar_ms"], 2000.0);
    assert_eq!(d["config"]["source"], "flags+log");
    assert_eq!(d["config"]["parameter_sources"]["maxTTFTPenaltyMs"], "flag");
    assert_eq!(d["config"]["parameter_sources"]["affinityThreshold"], "log");
    assert_eq!(d["what_if"][0]["max_ttft_penalty_ms"], 100.0);
    assert!(!d["windows"].as_array().unwrap().is_empty());
    // A bad parameter is refused with its range and exit 2 (the EPP's own
    // text for a combination the flags' ranges allow).
    let out = run(&[&fixture("glm-like/epp.log"), "--max-ttft-penalty-ms=-1"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--max-ttft-penalty-ms") && e.contains("0 to 86400000 ms"),
        "{e}"
    );
    let out = run(&[
        &fixture("glm-like/epp.log"),
        "--penalty-mode",
        "matchedTokens",
        "--ttft-source",
        "latencyPredictor",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("requires ttftSource"), "{e}");
}

#[test]
fn errors_name_the_path_and_exit_2() {
    let out = run(&["/no/such/epp.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/epp.log"));
    let out = run(&["--no-such-flag", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn strict_fails_on_malformed_lines_and_names_them() {
    let noisy = fixture("variants/noise/epp.log");
    let v = json(&[&noisy, "--format", "json"]);
    assert!(v["input"]["lines_malformed"].as_u64().unwrap() > 0);
    assert!(
        v["input"]["first_malformed"][0]
            .as_str()
            .unwrap()
            .contains("epp.log:")
    );
    let out = run(&[&noisy, "--format", "json", "--strict"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("epp.log:"));
}

#[test]
fn a_closed_pipe_is_success() {
    // A report larger than a pipe's buffer (the widest histogram and
    // what-if lists), read for one byte then closed.
    let bars: Vec<String> = (1..=64).map(|i| (i * 10).to_string()).collect();
    let mut child = bin()
        .args([
            &fixture("glm-like/epp.log"),
            "--format",
            "json",
            "--bins",
            "10000",
            "--what-if-bar",
            &bars.join(","),
            "--what-if-peak",
            &bars.join(","),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn gzip_on_stdin_with_a_name() {
    use std::io::Write;
    let bytes = std::fs::read(fixture("demo/glm-like.log.gz")).unwrap();
    let mut child = bin()
        .args(["glm-5-2=-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let v = ok_json(&out, "");
    assert_eq!(v["deployments"][0]["name"], "glm-5-2");
    assert_eq!(v["deployments"][0]["decisions"], 1168);
}

/// An input without decisions exits 3, with the likely cause.
#[test]
fn no_decisions_exit_3_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let epp = std::fs::read_to_string(fixture("variants/prefix/epp.log")).unwrap();
    // The EPP lines without the filter's: a log below -v=4.
    let no_filter: String = epp
        .lines()
        .filter(|l| !l.contains("PrefixCacheAffinityFilter") && !l.contains("affinity-filter"))
        .map(|l| format!("{l}\n"))
        .collect();
    // At most 10 lines per pod: `kubectl logs -l` without --tail=-1.
    let mut per_pod: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for l in no_filter.lines() {
        let pod = &l[..l.find("] ").unwrap()];
        per_pod.entry(pod).or_default().push(l);
    }
    assert!(per_pod.len() > 1);
    let tail: String = per_pod
        .values()
        .flat_map(|v| v[v.len() - 10..].iter())
        .map(|l| format!("{l}\n"))
        .collect();
    let vllm = std::fs::read_dir(fixture("glm-like/vllm"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let cases = [
        (write("empty.log", ""), "the input is empty"),
        (write("notes.log", "hello\nworld\n"), "no EPP log line"),
        (vllm.to_string_lossy().into_owned(), "only vLLM lines"),
        (write("v2.log", &no_filter), "verbosity below 4"),
        (write("tail.log", &tail), "--tail=-1"),
    ];
    for (input, cause) in &cases {
        let out = run(&[input, "--format", "json"]);
        assert_eq!(out.status.code(), Some(3), "{input}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no filter decisions") && err.contains(cause),
            "{input}: {err}"
        );
        // The (empty) report is still written.
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["deployments"].as_array().unwrap().len(), 0);
    }
}

/// The bar in force is read from the log's gate lines; every format says how
/// many logged outcomes the config in force reproduces, and how far the
/// logged holds moved the reconstruction.
#[test]
fn the_log_shows_the_config_and_the_replay_agrees() {
    let log = fixture("glm-like-v1/epp.log");
    let v = json(&[&log, "--format", "json"]);
    let d = &v["deployments"][0];
    assert_eq!(d["bar_ms"], 5000.0);
    let src = &d["config"]["parameter_sources"];
    assert_eq!(src["maxTTFTPenaltyMs"], "log");
    assert_eq!(src["affinityThreshold"], "log");
    assert_eq!(src["peakPrefillThroughput"], "default");
    let r = &d["replay"];
    assert_eq!(r["agreed"], r["decisions"]);
    assert!(r["decisions"].as_u64().unwrap() > d["released"].as_u64().unwrap());
    assert_eq!(r["logged_released"], d["released"]);
    assert_eq!(r["replayed_released"], d["released"]);
    assert!(r["cause"].is_null());
    assert!(d["censoring"]["moved"].is_u64());
    let at_bar = d["what_if"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["mode"] == "static" && w["max_ttft_penalty_ms"] == 5000.0)
        .unwrap();
    assert_eq!(at_bar["released"], d["released"]);
    for format in ["table", "markdown"] {
        let out = run(&[&log, "--format", format]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("the config in force reproduces"), "{format}");
        assert!(
            text.contains("maxTTFTPenaltyMs 5,000 ms [log]"),
            "{format}: {text}"
        );
    }
    let out = run(&[&log, "--format", "csv"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().skip_while(|l| l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut lines = lines.skip_while(|l| l.split(',').nth(3) == Some("finding"));
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| row[header.iter().position(|h| *h == k).unwrap()];
    assert_eq!(col("replay_agreed"), col("replay_decisions"));
    assert_eq!(col("replay_replayed_released"), col("released"));
}

/// A flag that disagrees with the log is used (a what-if) and reported with
/// both values, with the flag that replays what the EPP ran.
#[test]
fn a_flag_against_the_log_is_warned_about() {
    let log = fixture("glm-like-v1/epp.log");
    let out = run(&[&log, "--format", "json", "--max-ttft-penalty-ms", "18000"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("maxTTFTPenaltyMs: the log shows 5000"),
        "{err}"
    );
    assert!(err.contains("--max-ttft-penalty-ms 5000"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["deployments"][0];
    assert_eq!(d["bar_ms"], 18000.0);
    let w = &d["config"]["log_disagreements"][0];
    assert_eq!(w["parameter"], "maxTTFTPenaltyMs");
    assert_eq!(
        (w["log"].as_f64(), w["given"].as_f64()),
        (Some(5000.0), Some(18000.0))
    );
    assert_eq!(
        (&w["given_source"], &w["used"]),
        (&"flag".into(), &"flag".into())
    );
    let r = &d["replay"];
    assert!(r["agreed"].as_u64() < r["decisions"].as_u64());
    assert_eq!(r["log_bar_ms"], 5000.0);
    assert!(r["cause"].as_str().unwrap().contains("config mismatch"));
}

/// Quantiles over fewer than 20 gate inputs are flagged in every format.
#[test]
fn small_samples_are_flagged_everywhere() {
    let log = fixture("glm-like-v1/epp.log");
    let v = json(&[&log, "--format", "json"]);
    let g = &v["deployments"][0]["gate_input_ms"];
    assert!(g["count"].as_u64().unwrap() < 20);
    assert_eq!(g["small_sample"], true);
    let big = json(&[&fixture("demo/glm-like.log.gz"), "--format", "json"]);
    assert_eq!(
        big["deployments"][0]["gate_input_ms"]["small_sample"],
        false
    );
    for format in ["table", "markdown"] {
        let out = run(&[&log, "--format", format]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("* fewer than 20 gate inputs"), "{format}");
    }
    let out = run(&[&log, "--format", "csv"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().skip_while(|l| l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut lines = lines.skip_while(|l| l.split(',').nth(3) == Some("finding"));
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        row[header.iter().position(|h| *h == "small_sample").unwrap()],
        "true"
    );
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("g.svg");
    let out = run(&[&log, "--format", "json", "--svg", svg.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("fewer than 20")
    );
}

/// The peak the EPP resolved at startup (V5) is the peak in force; a flag
/// that gives another is used and reported with both values.
#[test]
fn the_startup_peak_is_the_peak_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("epp.log");
    let startup = r#"{"level":"debug","ts":1787320000.5,"logger":"setup","caller":"prefixcacheaffinity/plugin.go:120","msg":"PrefixCacheAffinityFilter: peak prefill throughput resolved","peakPrefillThroughput":8000,"source":"calibrated"}"#;
    let body = std::fs::read_to_string(fixture("glm-like-v1/epp.log")).unwrap();
    std::fs::write(&log, format!("{startup}\n{body}")).unwrap();
    let v = json(&[log.to_str().unwrap(), "--format", "json"]);
    let c = &v["deployments"][0]["config"];
    assert_eq!(c["parameters"]["peakPrefillThroughput"], 8000.0);
    assert_eq!(c["parameter_sources"]["peakPrefillThroughput"], "log");
    assert_eq!(c["parameter_sources"]["maxTTFTPenaltyMs"], "log");
    let r = &v["deployments"][0]["replay"];
    assert_eq!(r["agreed"], r["decisions"]);
    let out = run(&[
        log.to_str().unwrap(),
        "--format",
        "json",
        "--peak-prefill-throughput",
        "9000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("peakPrefillThroughput: the log shows 8000, the flag gives 9000"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["deployments"][0]["config"];
    assert_eq!(c["parameters"]["peakPrefillThroughput"], 9000.0);
    assert_eq!(c["parameter_sources"]["peakPrefillThroughput"], "flag");
}

#[test]
fn candidates_sit_beside_the_current_row_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let cand = dir.path().join("cand.yaml");
    std::fs::write(
        &cand,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {peakPrefillThroughput: 3000, maxTTFTPenaltyMs: 700}\n",
    )
    .unwrap();
    let cand = cand.to_str().unwrap();
    let log = fixture("demo/glm-like.log.gz");
    let args = [
        log.as_str(),
        "--candidate-config",
        cand,
        "--what-if",
        "maxTTFTPenaltyMs=5000",
        "--what-if",
        "peakPrefillThroughput=3000,maxTTFTPenaltyMs=5000",
    ];
    let v = json(&[&args[..], &["--format", "json", "--window", "10m"]].concat());
    let d = &v["deployments"][0];
    // The current row: the config in force replayed, the logged releases beside.
    let cur = &d["current"];
    assert_eq!(cur["max_ttft_penalty_ms"], d["bar_ms"]);
    assert_eq!(cur["released"], d["replay"]["replayed_released"]);
    assert_eq!(cur["logged_released"], d["released"]);
    assert_eq!(cur["logged_released_share"], d["released_share"]);
    let c = d["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c[0]["label"], format!("file:{cand}"));
    assert_eq!(
        (
            c[0]["max_ttft_penalty_ms"].as_f64(),
            c[0]["peak_prefill_throughput"].as_f64()
        ),
        (Some(700.0), Some(3000.0))
    );
    assert_eq!(c[1]["label"], "what-if maxTTFTPenaltyMs=5000");
    assert_eq!(c[0]["error"], serde_json::Value::Null);
    // The what-if over the config in force is the built-in 5 s replay.
    let at_5s = d["what_if"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["mode"] == "static" && w["max_ttft_penalty_ms"] == 5000.0)
        .unwrap();
    for k in [
        "released",
        "pinned_worse",
        "unknown",
        "peak_prefill_throughput",
    ] {
        assert_eq!(c[1][k], at_5s[k], "{k}");
    }
    // A fifth of the peak at the same bar: every gate input five times
    // larger, so at least as many releases.
    assert_eq!(c[2]["peak_prefill_throughput"], 3000.0);
    assert!(c[2]["released"].as_u64() > c[1]["released"].as_u64());
    // Windows carry the rows too, and add up to the whole.
    let windows = d["windows"].as_array().unwrap();
    assert!(windows.len() > 1);
    let sum: u64 = windows
        .iter()
        .map(|w| w["candidates"][2]["released"].as_u64().unwrap())
        .sum();
    assert_eq!(Some(sum), c[2]["released"].as_u64());
    assert_eq!(v["overall"]["candidates"][2]["released"], c[2]["released"]);

    let text = |format: &str| {
        let out = run(&[&args[..], &["--format", format, "--wide"]].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let released = c[2]["released"].as_u64().unwrap();
    for format in ["table", "markdown"] {
        let t = text(format);
        let row = t
            .lines()
            .find(|l| {
                l.contains("what-if peakPrefillThroughput=3000,maxTTFTPenaltyMs=5000")
                    && !l.contains("--what-if")
            })
            .unwrap_or_else(|| panic!("{format}: {t}"));
        assert!(row.contains(&format!("{released} (")), "{format}: {row}");
        let cur = t
            .lines()
            .find(|l| l.contains("current") && l.contains("static, bar"))
            .unwrap();
        assert!(cur.contains("logged"), "{format}: {cur}");
        assert!(t.contains(&format!("file:{cand}")), "{format}");
    }
    let csv = text("csv");
    // The comment lines that explain the columns come first.
    let csv: String = csv
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (config, rel, rule_peak) = (
        col("config"),
        col("released"),
        col("rule_peak_prefill_throughput"),
    );
    let mut rdr = csv.lines().skip(1).map(|l| {
        // The labels hold commas: read the quoted field as one.
        let mut fields = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        for ch in l.chars() {
            match ch {
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut cur)),
                _ => cur.push(ch),
            }
        }
        fields.push(cur);
        fields
    });
    let row = rdr
        .find(|f| f[config] == "what-if peakPrefillThroughput=3000,maxTTFTPenaltyMs=5000")
        .expect("the what-if's CSV row");
    assert_eq!(row.len(), header.len());
    assert_eq!(row[rel], released.to_string());
    assert_eq!(row[rule_peak], "3000");
    assert!(csv.lines().any(|l| l.ends_with(",current,,,,,")), "{csv}");
}

#[test]
fn a_candidate_invalid_for_the_config_in_force_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("epp.yaml");
    std::fs::write(
        &yaml,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 5000, maxInFlightRequestsDelta: 2}\n",
    )
    .unwrap();
    let out = run(&[
        &fixture("glm-like/epp.log"),
        "--config",
        yaml.to_str().unwrap(),
        "--what-if",
        "maxTTFTPenaltyMs=0",
        "--format",
        "json",
    ]);
    let v = ok_json(&out, "");
    let d = &v["deployments"][0];
    let c = &d["candidates"][0];
    let e = c["error"].as_str().unwrap();
    assert!(
        e.contains("maxTTFTPenaltyMs must be > 0 when maxInFlightRequestsDelta"),
        "{e}"
    );
    assert_eq!(c["invalid"], d["decisions"]);
    assert_eq!(c["released"], 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("candidate what-if maxTTFTPenaltyMs=0"),
        "{stderr}"
    );
    // The candidate file is an input: -o may not overwrite it.
    let out = run(&[
        &fixture("glm-like/epp.log"),
        "--candidate-config",
        yaml.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        yaml.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--candidate-config"));
}

/// Every filter instance of a deployment has its disagreements with the log
/// reported, not only the instance whose config the report shows.
#[test]
fn another_filter_instance_against_the_log_is_warned_about() {
    let out = run(&[
        &fixture("edge/two_filter_instances.log"),
        "--config",
        &fixture("edge/two_filter_instances.yaml"),
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("affinityThreshold of filter instance loose-affinity-filter: the log shows 0.8, the config file gives 0.5"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["deployments"][0]["config"];
    assert!(
        c["source"]
            .as_str()
            .unwrap()
            .contains("#strict-affinity-filter")
    );
    assert_eq!(
        c["log_disagreements"],
        serde_json::json!([{
            "parameter": "affinityThreshold",
            "log": 0.8,
            "given": 0.5,
            "given_source": "file",
            "used": "log",
            "instance": "loose-affinity-filter"
        }])
    );
}

/// The TTFT the log observed, per deployment and endpoint, the same in
/// both binaries; a log without response lines says so and shows none.
#[test]
fn observed_ttft_from_the_response_lines() {
    let v = json(&[&fixture("demo/glm-like.log.gz"), "--format", "json"]);
    let d = &v["deployments"][0];
    let o = &d["observed_ttft_ms"];
    assert_eq!(o["n"], 1168);
    let q = |k: &str| o[k].as_f64().unwrap();
    assert!(q("p50") < q("p90") && q("p90") < q("p99"), "{o}");
    let by = d["observed_ttft_by_endpoint_ms"].as_object().unwrap();
    assert_eq!(
        by.values().map(|e| e["n"].as_u64().unwrap()).sum::<u64>(),
        1168
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args([&fixture("demo/glm-like.log.gz"), "--format", "csv"])
        .output()
        .unwrap();
    let csv = String::from_utf8(out.stdout).unwrap();
    let header: Vec<&str> = csv
        .lines()
        .find(|l| !l.starts_with('#'))
        .unwrap()
        .split(',')
        .collect();
    let col = header
        .iter()
        .position(|h| *h == "observed_ttft_p90_ms")
        .unwrap();
    // The deployment's own row, after its findings.
    let row: Vec<&str> = csv
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r.get(3) == Some(&"in_force"))
        .unwrap();
    assert_eq!(row[col].parse::<f64>().unwrap(), q("p90"));
    // Decision records without first tokens: none, and why.
    let v = json(&[&fixture("demo/glm-like.truth.jsonl.gz"), "--format", "json"]);
    let o = &v["deployments"][0]["observed_ttft_ms"];
    assert_eq!(o["n"], 0);
    assert!(o["p50"].is_null());
    assert!(o["source"].as_str().unwrap().starts_with("none"));
}

/// A `--what-if` row carries its predicted TTFT, and the `current` row's
/// prediction holds the observed TTFT within its intervals (the
/// self-check); without a candidate nothing is predicted.
#[test]
fn what_if_rows_carry_a_predicted_ttft_checked_against_the_observed() {
    let demo = fixture("demo/glm-like.log.gz");
    let v = json(&[
        &demo,
        "--what-if",
        "maxTTFTPenaltyMs=5000",
        "--what-if",
        "peakPrefillThroughput=3000,maxTTFTPenaltyMs=5000",
        "--format",
        "json",
        "-q",
    ]);
    let d = &v["deployments"][0];
    let observed = &d["observed_ttft_ms"];
    assert!(observed["n"].as_u64().unwrap() > 1000, "{observed}");
    let cur = &d["current"]["predicted_ttft_ms"];
    for q in ["p50", "p90"] {
        let o = observed[q].as_f64().unwrap();
        let p = cur[q].as_f64().unwrap();
        let lo = cur["interval"][q][0].as_f64().unwrap();
        let hi = cur["interval"][q][1].as_f64().unwrap();
        assert!(lo <= o && o <= hi, "{q}: observed {o} outside [{lo}, {hi}]");
        assert!(
            (p / o - 1.0).abs() < 0.10,
            "{q}: predicted {p} observed {o}"
        );
    }
    let check = &d["ttft_self_check"];
    assert_eq!(check["passed"], true, "{check}");
    assert_eq!(check["quantiles"][1]["quantile"], "p90");
    assert!(d["ttft_model"]["tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(d.get("warnings").is_none(), "{d}");
    let rows = d["candidates"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for c in rows {
        let p = &c["predicted_ttft_ms"];
        let n = p["n"].as_u64().unwrap();
        let kept = d["ttft_model"]["workload"]["requests"].as_u64().unwrap();
        // Turns a slower config pushes past the log's window are not
        // replayed: most requests are, never more than were kept.
        assert!(n * 10 > kept * 8 && n <= kept, "{n} of {kept}");
        let (p50, p90, p99) = (
            p["p50"].as_f64().unwrap(),
            p["p90"].as_f64().unwrap(),
            p["p99"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p90 && p90 <= p99, "{p}");
        let [lo, hi] = [0, 1].map(|k| p["interval"]["p90"][k].as_f64().unwrap());
        assert!(lo <= p90 && p90 <= hi, "{p}");
        assert!(c["predicted_prefix_hit_share"].as_f64().is_some(), "{c}");
    }
    // The filter's peak read as a fifth of the engine's releases more
    // pins, each to a cold endpoint: predicted slower than the bar alone.
    let bar = rows[0]["predicted_ttft_ms"]["p50"].as_f64().unwrap();
    let slow = rows[1]["predicted_ttft_ms"]["p50"].as_f64().unwrap();
    assert!(slow > bar, "{slow} vs {bar}");
    // Windows and overall carry no prediction.
    assert!(v["overall"]["current"].get("predicted_ttft_ms").is_none());
    // The table shows it beside the rows, with the self-check.
    let out = run(&[
        &demo,
        "--what-if",
        "maxTTFTPenaltyMs=5000",
        "-q",
        "--format",
        "markdown",
    ]);
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(
        md.contains("predicted TTFT p50 / p90 [interval] / p99 ms"),
        "{md}"
    );
    assert!(
        md.contains("self-check of the current row: p50 predicted"),
        "{md}"
    );
    // The CSV: on the current and candidate rows.
    let out = run(&[
        &demo,
        "--what-if",
        "maxTTFTPenaltyMs=5000",
        "-q",
        "--format",
        "csv",
    ]);
    let csv = String::from_utf8(out.stdout).unwrap();
    // The comment lines that explain the columns come first.
    let mut lines = csv.lines().skip_while(|l| l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (p90, config) = (col("predicted_ttft_p90_ms"), col("config"));
    let filled: Vec<String> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r.len() == header.len() && !r[p90].is_empty())
        .map(|r| r[config].to_string())
        .collect();
    assert_eq!(filled.len(), 2, "{csv}");
    assert_eq!(filled[0], "current");
    // Without a candidate, nothing is predicted (nor kept for it).
    let plain = json(&[&demo, "--format", "json", "-q"]);
    let d = &plain["deployments"][0];
    assert!(d["current"].get("predicted_ttft_ms").is_none());
    assert!(d.get("ttft_model").is_none());
    assert!(d["observed_ttft_ms"]["n"].as_u64().unwrap() > 1000);
}
