//! Every capture framing the parser rewrites (stern, logcli, CRI files,
//! Docker json-file, Fluent Bit, Vector, OpenTelemetry collector records,
//! Loki `query_range` answers) gives the decisions of the same lines
//! captured with `kubectl logs --prefix --timestamps`: the same
//! deployments (named from the pods), request ids, outcomes, gate inputs
//! and times.

use std::io::Write;

use gatecal_parser::{Decision, InputSpec, Item, ParseOptions, parse_inputs, parse_slice};
use gatecal_sim::{Variant, run, scenario};

/// One kubectl line: pod, container, timestamp, body.
struct Line<'a> {
    pod: &'a str,
    container: &'a str,
    ts: &'a str,
    body: &'a str,
}

fn kubectl_lines(log: &str) -> Vec<Line<'_>> {
    log.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("[pod/")?;
            let (inner, rest) = rest.split_once("] ")?;
            let (pod, container) = inner.split_once('/')?;
            let (ts, body) = rest.split_once(' ')?;
            Some(Line {
                pod,
                container,
                ts,
                body,
            })
        })
        .collect()
}

type Key = (String, String, String, Option<u64>, Option<u64>);

fn keys<'a>(ds: impl Iterator<Item = &'a Decision>) -> Vec<Key> {
    let mut v: Vec<Key> = ds
        .map(|d| {
            (
                d.deployment.to_string(),
                d.request_id.clone().unwrap_or_default().to_string(),
                d.outcome
                    .map(|o| o.as_str().to_string())
                    .unwrap_or_default(),
                d.logged_penalty_ms().map(f64::to_bits),
                d.ts.map(|t| (t * 1e6).round() as u64),
            )
        })
        .collect();
    v.sort();
    v
}

fn decisions(items: &[Item]) -> Vec<Key> {
    keys(items.iter().filter_map(|i| match i {
        Item::Decision(d) => Some(&**d),
        Item::VllmStats(_) => None,
    }))
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn epoch_ns(ts: &str) -> u128 {
    // The sim's kubelet times: 2026-08-21T14:08:30.190430351Z.
    let secs = gatecal_parser::parse_rfc3339(&format!("{}Z", &ts[..19])).unwrap() as u128;
    let frac = format!("{:0<9}", &ts[20..ts.len() - 1]);
    secs * 1_000_000_000 + frac.parse::<u128>().unwrap()
}

#[test]
fn every_framing_gives_the_decisions_of_the_kubectl_capture() {
    let s = scenario("eight-deployments").unwrap().with_requests(900);
    let variant = Variant {
        prefix: true,
        timestamps: true,
        ..Variant::default()
    };
    let out = run(&s, 3, &variant);
    let log = String::from_utf8(out.epp_log).unwrap();
    let opts = ParseOptions::default();
    let plain = parse_slice("kubectl.log", log.as_bytes(), &opts).unwrap();
    let want = decisions(&plain.items);
    assert!(want.len() > 100, "{}", want.len());
    let deployments: std::collections::BTreeSet<&str> = want.iter().map(|k| k.0.as_str()).collect();
    assert!(deployments.len() >= 8, "{deployments:?}");
    let lines = kubectl_lines(&log);
    assert_eq!(lines.len(), log.lines().count());

    let framed: Vec<(&str, String)> = vec![
        (
            "stern --timestamps",
            lines
                .iter()
                .map(|l| format!("{} {} {} {}\n", l.pod, l.container, l.ts, l.body))
                .collect(),
        ),
        (
            "logcli",
            lines
                .iter()
                .map(|l| {
                    format!(
                        "{} {{container=\"{}\", namespace=\"llm\", pod=\"{}\"}} {}\n",
                        l.ts, l.container, l.pod, l.body
                    )
                })
                .collect(),
        ),
        (
            "logcli --output=jsonl",
            lines
                .iter()
                .map(|l| {
                    format!(
                        "{{\"labels\":{{\"pod\":{},\"container\":{}}},\"line\":{},\"timestamp\":{}}}\n",
                        json(l.pod),
                        json(l.container),
                        json(l.body),
                        json(l.ts)
                    )
                })
                .collect(),
        ),
        (
            "fluent bit",
            lines
                .iter()
                .map(|l| {
                    format!(
                        "{{\"time\":{},\"log\":{},\"kubernetes\":{{\"pod_name\":{},\"container_name\":{}}}}}\n",
                        json(l.ts),
                        json(&format!("{}\n", l.body)),
                        json(l.pod),
                        json(l.container)
                    )
                })
                .collect(),
        ),
        (
            "vector",
            lines
                .iter()
                .map(|l| {
                    format!(
                        "{{\"message\":{},\"kubernetes\":{{\"pod_name\":{},\"container_name\":{}}},\"timestamp\":{}}}\n",
                        json(l.body),
                        json(l.pod),
                        json(l.container),
                        json(l.ts)
                    )
                })
                .collect(),
        ),
        (
            "opentelemetry collector",
            lines
                .iter()
                .map(|l| {
                    format!(
                        "{{\"body\":{},\"resource\":{{\"k8s.pod.name\":{},\"k8s.container.name\":{}}},\"timeUnixNano\":\"{}\"}}\n",
                        json(l.body),
                        json(l.pod),
                        json(l.container),
                        epoch_ns(l.ts)
                    )
                })
                .collect(),
        ),
        ("loki query_range", {
            let mut streams: std::collections::BTreeMap<(&str, &str), Vec<serde_json::Value>> =
                Default::default();
            for l in &lines {
                streams
                    .entry((l.pod, l.container))
                    .or_default()
                    .push(serde_json::json!([epoch_ns(l.ts).to_string(), l.body]));
            }
            let result: Vec<serde_json::Value> = streams
                .into_iter()
                .map(|((pod, container), values)| {
                    serde_json::json!({"stream": {"pod": pod, "container": container, "namespace": "llm"}, "values": values})
                })
                .collect();
            serde_json::json!({"status": "success", "data": {"resultType": "streams", "result": result}})
                .to_string()
        }),
    ];
    for (name, text) in &framed {
        let got =
            parse_slice(name, text.as_bytes(), &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = decisions(&got.items);
        if got != want {
            let missing: Vec<_> = want.iter().filter(|k| !got.contains(k)).take(3).collect();
            panic!(
                "{name}: {} decisions, want {}; missing {missing:?}",
                got.len(),
                want.len()
            );
        }
    }
}

/// CRI files under a `/var/log/pods` tree: the pod and container come
/// from the path, and long lines split into `P` parts are joined.
#[test]
fn a_kubelet_log_tree_gives_the_decisions_of_the_kubectl_capture() {
    let s = scenario("eight-deployments").unwrap().with_requests(800);
    let variant = Variant {
        prefix: true,
        timestamps: true,
        ..Variant::default()
    };
    let out = run(&s, 5, &variant);
    let log = String::from_utf8(out.epp_log).unwrap();
    let opts = ParseOptions::default();
    let want = decisions(
        &parse_slice("kubectl.log", log.as_bytes(), &opts)
            .unwrap()
            .items,
    );
    let dir = tempfile::tempdir().unwrap();
    let mut files: std::collections::BTreeMap<(String, String), std::fs::File> = Default::default();
    for l in kubectl_lines(&log) {
        let f = files
            .entry((l.pod.to_string(), l.container.to_string()))
            .or_insert_with(|| {
                let d = dir
                    .path()
                    .join(format!("llm_{}_0b1c-44", l.pod))
                    .join(l.container);
                std::fs::create_dir_all(&d).unwrap();
                std::fs::File::create(d.join("0.log")).unwrap()
            });
        // Split long lines the way the kubelet does (16 KiB there).
        let body = l.body.as_bytes();
        let mut parts = body.chunks(300).peekable();
        while let Some(p) = parts.next() {
            let tag = if parts.peek().is_some() { "P" } else { "F" };
            write!(f, "{} stdout {tag} ", l.ts).unwrap();
            f.write_all(p).unwrap();
            f.write_all(b"\n").unwrap();
        }
    }
    drop(files);
    let mut items = Vec::new();
    let ledger = parse_inputs(&[InputSpec::path(dir.path())], &opts, |i| items.push(i)).unwrap();
    assert!(ledger.inputs.len() >= 8, "{}", ledger.inputs.len());
    assert_eq!(decisions(&items), want);
}

/// The error and its causes, as the binaries print them.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut c = e.source();
    while let Some(e) = c {
        s.push_str(": ");
        s.push_str(&e.to_string());
        c = e.source();
    }
    s
}

/// A Loki answer to a metric query, or a file mixing two framings, is an
/// error naming the file and what was seen.
#[test]
fn unreadable_framings_are_errors_naming_the_file() {
    let opts = ParseOptions::default();
    let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"]]}]}}"#;
    let e = chain(&parse_slice("loki.json", matrix.as_bytes(), &opts).unwrap_err());
    assert!(e.contains("loki.json") && e.contains("resultType"), "{e}");
    let body =
        r#"{"level":"info","ts":1787321310.19,"msg":"EPP received request","x-request-id":"a"}"#;
    let mixed = format!("epp-1 epp {body}\n2026-08-21T14:08:30Z {{pod=\"epp-1\"}} {body}\n");
    let e = chain(&parse_slice("mixed.log", mixed.as_bytes(), &opts).unwrap_err());
    assert!(
        e.contains("mixed.log") && e.contains("stern") && e.contains("logcli"),
        "{e}"
    );
}
