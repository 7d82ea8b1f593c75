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
