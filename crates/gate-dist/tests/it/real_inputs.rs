//! Real inputs that are not EPP logs, or configs of older filter builds:
//! each read correctly or refused naming what was seen and what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn demo() -> String {
    root()
        .join("fixtures/demo/glm-like.log.gz")
        .to_string_lossy()
        .into_owned()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .output()
        .expect("run gate-dist")
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_prometheus_instant_query_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let api = write(
        &dir,
        "waiting.json",
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"vllm:num_requests_waiting","pod":"vllm-0"},"value":[1755786974.123,"3"]}]}}"#,
    );
    let promtool = write(
        &dir,
        "waiting-promtool.json",
        "[\n  {\"metric\": {\"pod\": \"vllm-0\"}, \"value\": [1755786974.1, \"3\"]}\n]\n",
    );
    for f in [api, promtool] {
        let o = run(&[&f, "--format", "json"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(&f), "{e}");
        assert!(e.contains("Prometheus instant-query answer"), "{e}");
        assert!(e.contains("query_range"), "{e}");
        assert!(!e.contains("verbosity"), "{e}");
    }
}

#[test]
fn zipkin_spans_are_refused_naming_the_format() {
    let dir = tempfile::tempdir().unwrap();
    let z = write(
        &dir,
        "spans.json",
        r#"[{"traceId":"239b360b3fd330bd","id":"fee29c40500d8ebe","name":"filter_endpoints","timestamp":1787321395867201,"duration":350,"localEndpoint":{"serviceName":"llm-d-router-epp"}}]"#,
    );
    let o = run(&[&z]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("Zipkin JSON spans"), "{e}");
    assert!(e.contains("OpenTelemetry Collector"), "{e}");
}

#[test]
fn traces_without_a_filter_span_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let doc = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"k8s.pod.name","value":{"stringValue":"epp-1"}}]},"scopeSpans":[{"scope":{"name":"llm-d-router/pkg/epp/scheduling"},"spans":[{"traceId":"239b360b3fd330bd85d0308aa20539b6","spanId":"fee29c40500d8ebe","name":"filter_endpoints","kind":1,"startTimeUnixNano":"1787321395867201280","endTimeUnixNano":"1787321395867551232","attributes":[]}]}]}]}"#;
    let t = write(&dir, "traces.jsonl", &format!("{doc}\n"));
    let o = run(&[&t, "-o", dir.path().join("r.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("no filter_prefix_cache_affinity span"), "{e}");
    assert!(!e.contains("EPP container's log"), "{e}");
}

#[test]
fn vllm_lines_in_real_shapes_are_read_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = "Engine 000: Avg prompt throughput: 8192.0 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 40.1%, Prefix cache hit rate: 45.6%";
    let text = format!(
        "[INFO 08-21 14:36:14 loggers.py:123] {v1}\n\
         INFO 08-21 14:36:24 [loggers.py:123] {}\n\
         INFO 08-20 02:39:37 metrics.py:427] Prefix cache hit rate: GPU: 52.22%, CPU: 0.00%\n",
        &v1[..v1.len() - 3]
    );
    let f = write(&dir, "vllm.log", &text);
    let out = dir.path().join("r.json");
    let o = run(&[&demo(), &f, "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("Prefix cache hit rate: GPU: x%, CPU: y%"), "{e}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["input"]["lines_malformed"], 1);
    let m = v["input"]["first_malformed"][0].as_str().unwrap();
    assert!(
        m.ends_with(":2: vLLM stats line cut short (its last field is incomplete)"),
        "{m}"
    );
}

#[test]
fn configs_of_older_filter_eras_get_their_defaults_and_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = write(
        &dir,
        "v2.yaml",
        "kind: EndpointPickerConfig\nplugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    affinityThreshold: 0.8\n    maxTokensInFlightPenalty: 0\n",
    );
    let gaie = write(
        &dir,
        "values.yaml",
        "inferenceExtension:\n  pluginsCustomConfig:\n    custom-plugins.yaml: |\n      plugins:\n      - type: prefix-cache-affinity-filter\n",
    );
    for (f, era) in [
        (&v2, "in-flight-tokens-gate"),
        (&gaie, "gateway-api-inference-extension"),
    ] {
        let out = dir.path().join("r.json");
        let o = run(&[&demo(), "--config", f, "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let c = &v["deployments"][0]["config"];
        assert_eq!(c["era"]["name"], era, "{c}");
        assert_eq!(c["parameters"]["explorationProbability"], 0.01, "{c}");
        assert_eq!(c["parameters"]["ttftSource"], "latencyPredictor", "{c}");
        let t = run(&[&demo(), "--config", f, "--format", "table", "--wide"]);
        let table = String::from_utf8_lossy(&t.stdout);
        assert!(table.contains("that era's defaults apply"), "{table}");
    }
}

#[test]
fn a_helm_template_is_told_to_be_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        &dir,
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  c.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters:\n        maxTTFTPenaltyMs: {{ .Values.penalty }}\n",
    );
    let o = run(&[&demo(), "--config", &t]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("render it first (helm template"), "{e}");
    assert!(e.contains("or pass the ConfigMap"), "{e}");
}

#[test]
fn kubectl_reflexes_get_a_useful_answer() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    // Output names of formats gatecal does not write, and kubectl's -o.
    for o in [at("r.yaml"), at("r.html"), "wide".to_string()] {
        let out = run(&[&demo(), "-o", &o]);
        assert_eq!(out.status.code(), Some(2), "{o}");
        let e = stderr(&out);
        assert!(
            e.contains("json (NAME.json)") && e.contains("csv (NAME.csv)"),
            "{e}"
        );
        assert!(!Path::new(&o).exists(), "{o}");
    }
    // --list-deployments in the format asked.
    let out = run(&[&demo(), "--list-deployments", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["deployments"][0]["name"], "glm-5-2");
    assert_eq!(v["deployments"][0]["decisions"], 1168);
    let out = run(&[&demo(), "--list-deployments", "--format", "csv"]);
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.starts_with("deployment,decisions,first_utc"), "{csv}");
    // Times with units: 5s is 5000 ms.
    let j = |extra: &[&str]| {
        let mut args = vec![demo(), "--format".into(), "json".into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&a);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let a = j(&["--what-if-bar", "5s,18s"]);
    let b = j(&["--what-if-bar", "5000,18000"]);
    assert_eq!(
        a["deployments"][0]["what_if"],
        b["deployments"][0]["what_if"]
    );
    assert_eq!(
        a["deployments"][0]["what_if"][0]["max_ttft_penalty_ms"],
        5000.0
    );
    // --color: always colours even into a pipe; never never does.
    let out = run(&["/no/such.log", "--color", "always"]);
    assert!(
        stderr(&out).contains("\x1b[1;31merror:"),
        "{}",
        stderr(&out)
    );
    let out = run(&["/no/such.log", "--color", "never"]);
    assert!(!stderr(&out).contains('\x1b'));
    // Special files are outputs.
    let out = run(&[&demo(), "-o", "/dev/null"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn time_filters_count_from_the_inputs_end_or_say_what_they_missed() {
    let json = |extra: &[&str]| {
        let mut args = vec![demo(), "--format".into(), "json".into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&a);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // The demo runs 14:00:00 to 14:29:56 UTC on 2026-08-21.
    let last10 = json(&["--since", "end-10m"]);
    let abs = json(&["--since", "2026-08-21T14:19:56Z"]);
    assert_eq!(
        last10["deployments"][0]["decisions"],
        abs["deployments"][0]["decisions"]
    );
    let n = last10["deployments"][0]["decisions"].as_u64().unwrap();
    assert!(n > 0 && n < 1168, "{n}");
    let first10 = json(&["--until", "start+10m"]);
    let abs = json(&["--until", "2026-08-21T14:10:00Z"]);
    assert_eq!(
        first10["deployments"][0]["decisions"],
        abs["deployments"][0]["decisions"]
    );
    // A duration before now selects nothing of an old capture: said so,
    // with both ranges, not blamed on the EPP's verbosity.
    let out = run(&[&demo(), "--since", "1h", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(3));
    let e = stderr(&out);
    assert!(
        e.contains("select none of the 1168 decision(s) read"),
        "{e}"
    );
    assert!(
        e.contains("from 2026-08-21 14:00:00 to 2026-08-21 14:29:56 UTC"),
        "{e}"
    );
    assert!(e.contains("--since end-1h"), "{e}");
    assert!(!e.contains("verbosity"), "{e}");
}

/// The recommend binary beside this one, built when it is not there yet.
fn recommend_bin() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_gate-dist"))
        .with_file_name(format!("recommend{}", std::env::consts::EXE_SUFFIX));
    if !p.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args([
                "build",
                "--locked",
                "-p",
                "gatecal-recommend",
                "--bin",
                "recommend",
            ])
            .current_dir(root())
            .status()
            .expect("build recommend");
        assert!(st.success());
    }
    p
}

#[test]
fn one_config_has_one_pinned_figure_in_both_binaries() {
    let out = run(&[&demo(), "--format", "json", "--what-if-peak", "8000,30000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["deployments"][0];
    let decisions = d["decisions"].as_f64().unwrap();
    let bar = d["config"]["parameters"]["maxTTFTPenaltyMs"]
        .as_f64()
        .unwrap();
    let peak = d["config"]["parameters"]["peakPrefillThroughput"]
        .as_f64()
        .unwrap();
    // The summary, the current row and the what-if row of the same config.
    let summary = d["pinned_worse"]["count"].as_u64().unwrap();
    assert!(summary > 0);
    assert_eq!(d["current"]["pinned_worse"], summary);
    let same = d["what_if"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| {
            w["mode"] == "static"
                && w["max_ttft_penalty_ms"] == bar
                && w["peak_prefill_throughput"] == peak
        })
        .expect("a what-if row at the config in force");
    assert_eq!(same["pinned_worse"], summary);
    // A row at a higher peak holds more, and at the reference peak every
    // decision it holds that the current config holds still counts.
    let at = |p: f64| {
        d["what_if"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["peak_prefill_throughput"] == p)
            .unwrap()["pinned_worse"]
            .as_u64()
            .unwrap()
    };
    assert!(at(30000.0) >= summary, "{} < {summary}", at(30000.0));
    assert!(at(8000.0) <= summary, "{} > {summary}", at(8000.0));
    // recommend's current row, at its reference peak (the config's on the
    // demo: no vLLM lines), gives the same share.
    let out = Command::new(recommend_bin())
        .args([&demo(), "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rd = &r["deployments"][0];
    assert_eq!(rd["reference_peak"], peak, "{}", rd["reference_peak"]);
    let share = rd["current"]["pinned_worse_share"].as_f64().unwrap();
    assert!(
        (share - summary as f64 / decisions).abs() < 1e-12,
        "recommend {share}, gate-dist {summary}/{decisions}"
    );
}

#[test]
fn every_report_opens_with_its_summary_and_links_each_chart() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let glm = root().join("fixtures/glm-like/epp.log");
    let two = root().join("fixtures/edge/two_filter_instances.log");
    // Two deployments whose names share no ASCII character.
    let out = run(&[
        &format!("日本={}", glm.display()),
        &format!("中文={}", two.display()),
        "-o",
        &at("r.md"),
        "--svg",
        &at("r.svg"),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let md = std::fs::read_to_string(at("r.md")).unwrap();
    let mut svgs: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg") && n != "r.svg")
        .collect();
    svgs.sort();
    assert_eq!(svgs.len(), 2, "{svgs:?}");
    for f in &svgs {
        assert!(f.is_ascii(), "{f}");
        assert!(md.contains(&format!("]({f})")), "{f} not linked:\n{md}");
    }
    assert!(md.contains("![日本](") && md.contains("![中文]("), "{md}");
    // The table opens with the same summary as the Markdown.
    let out = run(&[&demo(), "--format", "table"]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.starts_with("Summary\n  Deployments: 1 (glm-5-2)\n"),
        "{t}"
    );
    for label in [
        "Time range (UTC):",
        "Decisions: 1,168",
        "Released:",
        "Pinned",
        "Config: log",
        "gatecal: ",
        "Command: gate-dist",
    ] {
        assert!(t.contains(label), "{label}: {t}");
    }
    // recommend's Markdown opens with its summary too.
    let out = Command::new(recommend_bin())
        .args([&demo(), "--format", "markdown"])
        .output()
        .unwrap();
    let m = String::from_utf8_lossy(&out.stdout);
    assert!(
        m.starts_with("## gatecal recommend report\n\n| | |\n"),
        "{m}"
    );
    for label in [
        "| Deployments | 1 (glm-5-2) |",
        "| Time range (UTC) |",
        "| Decisions | 1,168 |",
        "| gatecal |",
        "| Command | `recommend ",
    ] {
        assert!(m.contains(label), "{label}: {m}");
    }
    // An SVG into a missing folder says which, and what to do.
    let out = run(&[&demo(), "--svg", &at("no/such/r.svg"), "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("does not exist: create it first (mkdir -p"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tables_and_footnotes_fit_80_and_100_columns() {
    let multi = root()
        .join("fixtures/eight-deployments/epp.log")
        .to_string_lossy()
        .into_owned();
    let widest = |bin: &Path, input: &str, cols: Option<&str>, wide: bool| {
        let mut c = Command::new(bin);
        c.args([input, "--format", "table"]);
        if wide {
            c.arg("--wide");
        }
        match cols {
            Some(w) => c.env("COLUMNS", w),
            None => c.env_remove("COLUMNS"),
        };
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        let w = text.lines().map(|l| l.chars().count()).max().unwrap();
        (w, text)
    };
    let gd = PathBuf::from(env!("CARGO_BIN_EXE_gate-dist"));
    let rec = recommend_bin();
    for bin in [&gd, &rec] {
        for input in [demo(), multi.clone()] {
            for cols in [80, 100] {
                let (w, text) = widest(bin, &input, Some(&cols.to_string()), false);
                assert!(
                    w <= cols,
                    "{} {input} at {cols}: a line of {w}\n{text}",
                    bin.display()
                );
            }
        }
    }
    // --wide keeps every table whole.
    let (w, _) = widest(&gd, &multi, Some("80"), true);
    assert!(w > 100, "{w}");
    // A split table repeats its key columns in every part.
    let (_, text) = widest(&gd, &multi, Some("80"), false);
    let what_if = text.split("What if\n").nth(1).unwrap();
    let what_if = &what_if[..what_if.find("\n\n").unwrap()];
    let headers: Vec<&str> = what_if
        .lines()
        .filter(|l| l.contains(" deployment "))
        .collect();
    assert!(headers.len() >= 2, "{what_if}");
    for h in headers {
        assert!(h.contains(" config ") && h.contains(" rule "), "{h}");
    }
}

#[test]
fn every_term_printed_is_explained_in_the_same_output() {
    // (as printed, its glossary entry)
    let jargon = [
        ("L/O/R/U", "evidence L/O/R/U"),
        ("self-check", "self-check"),
        ("replay", "replay"),
        ("censored", "censored"),
        ("load_override", "load_override"),
        ("not_applicable", "not_applicable"),
        ("no match info", "no match info"),
        ("matchedTokens", "matchedTokens"),
        ("spread", "spread p10–p90"),
        ("90 % interval", "90 % interval"),
        ("p99.9", "p50, p90, p99, p99.9"),
        ("tok/s", "tok/s"),
        ("gate n", "gate n"),
        ("reference peak", "reference peak"),
        ("break-even", "break-even"),
        ("excess TTFT", "excess TTFT"),
    ];
    let vllm = root()
        .join("fixtures/demo/glm-like.vllm")
        .to_string_lossy()
        .into_owned();
    let truth = root()
        .join("fixtures/demo/glm-like.truth.jsonl.gz")
        .to_string_lossy()
        .into_owned();
    let gd = PathBuf::from(env!("CARGO_BIN_EXE_gate-dist"));
    let rec = recommend_bin();
    let runs: [(&Path, Vec<&str>); 2] = [
        (&gd, vec![demo_path(), "--what-if-peak", "8000"]),
        (&rec, vec![&truth, &vllm]),
    ];
    for (bin, args) in runs {
        for format in ["table", "markdown"] {
            let out = Command::new(bin)
                .args(&args)
                .args(["--format", format, "-q", "--wide"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            let text = String::from_utf8(out.stdout).unwrap();
            let at = text
                .rfind("Glossary")
                .unwrap_or_else(|| panic!("{} {format}: no glossary\n{text}", bin.display()));
            let (body, glossary) = text.split_at(at);
            for (printed, term) in jargon {
                if body.contains(printed) {
                    let entry = if format == "table" {
                        format!("\n  {term}: ")
                    } else {
                        format!("- **{term}**: ")
                    };
                    assert!(
                        glossary.contains(&entry),
                        "{} {format}: {printed:?} printed, {term:?} not explained:\n{glossary}",
                        bin.display()
                    );
                }
            }
        }
    }
}

fn demo_path() -> &'static str {
    static P: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    P.get_or_init(demo)
}
