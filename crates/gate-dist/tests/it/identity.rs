//! Deployment identity as a user meets it: one name per deployment whatever
//! is read (EPP logs with or without `--prefix`, vLLM logs, a folder called
//! `logs`), pools in one namespace kept apart, `--list-deployments`, and
//! `--config NAME=FILE` with a NAME that matches no deployment.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(p: &str) -> PathBuf {
    root().join("fixtures").join(p)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .arg("--quiet")
        .output()
        .unwrap()
}

/// `(name, decisions)` of every deployment of the JSON report.
fn deployments(args: &[&str]) -> Vec<(String, u64)> {
    let out = run(&[args, &["--format", "json"]].concat());
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_string(),
                d["decisions"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The decisions of the glm-like fixture, one deployment.
fn glm_like_decisions() -> u64 {
    let d = deployments(&[fixture("glm-like/epp.log").to_str().unwrap()]);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].1 > 0);
    d[0].1
}

/// One file holding two pools of one namespace (`llm-d-glm`), logged without
/// `--prefix`: the glm-like log, and the same log with its pods renamed to
/// `qwen3-decode-…` and its request ids changed.
fn two_pools(dir: &Path) -> PathBuf {
    let glm = std::fs::read_to_string(fixture("glm-like/epp.log")).unwrap();
    let qwen = glm
        .replace("glm-5-2-decode-", "qwen3-decode-")
        .replace("\"x-request-id\":\"", "\"x-request-id\":\"q-");
    assert_ne!(glm, qwen);
    let p = dir.join("epp.log");
    std::fs::write(&p, format!("{glm}{qwen}")).unwrap();
    p
}

fn yaml(dir: &Path, name: &str, bar: u32) -> String {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    maxTTFTPenaltyMs: {bar}\n"
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn two_pools_in_one_namespace_are_two_deployments() {
    let dir = tempfile::tempdir().unwrap();
    let log = two_pools(dir.path());
    let log = log.to_str().unwrap();
    let n = glm_like_decisions();
    let d = deployments(&[log]);
    assert_eq!(d, [("glm-5-2".into(), n), ("qwen3".into(), n)]);
    // Each gets its own config.
    let a = format!("glm-5-2={}", yaml(dir.path(), "a.yaml", 5000));
    let b = format!("qwen3={}", yaml(dir.path(), "b.yaml", 9000));
    let out = run(&[log, "--format", "json", "--config", &a, "--config", &b]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["deployments"][0]["bar_ms"], 5000.0);
    assert_eq!(v["deployments"][1]["bar_ms"], 9000.0);
}

#[test]
fn a_config_for_no_deployment_is_an_error_naming_those_found() {
    let dir = tempfile::tempdir().unwrap();
    let log = two_pools(dir.path());
    let bad = format!("llm-d-glm={}", yaml(dir.path(), "a.yaml", 5000));
    let out = run(&[log.to_str().unwrap(), "--config", &bad]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no report");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--config names no deployment found: llm-d-glm"),
        "{err}"
    );
    assert!(err.contains("glm-5-2, qwen3"), "{err}");
}

#[test]
fn epp_logs_with_or_without_the_prefix_name_deployments_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let with = fixture("variants/prefix/epp.log");
    let text = std::fs::read_to_string(&with).unwrap();
    // The same lines without the kubectl `[pod/NAME/CONTAINER] ` tag.
    let without: String = text
        .lines()
        .map(|l| match l.strip_prefix("[pod/") {
            Some(rest) => &rest[rest.find("] ").unwrap() + 2..],
            None => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!without.contains("[pod/"));
    let plain = dir.path().join("epp.log");
    std::fs::write(&plain, without).unwrap();
    let a = deployments(&[with.to_str().unwrap()]);
    let b = deployments(&[plain.to_str().unwrap()]);
    assert!(a.len() >= 2, "{a:?}");
    assert_eq!(a, b);
}

#[test]
fn a_folder_never_names_a_deployment() {
    // A file in a folder called `logs`, read as a file and as a folder.
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::fs::copy(fixture("glm-like/epp.log"), logs.join("epp.log")).unwrap();
    let n = glm_like_decisions();
    let want = [("glm-5-2".to_string(), n)];
    assert_eq!(deployments(&[logs.join("epp.log").to_str().unwrap()]), want);
    assert_eq!(deployments(&[logs.to_str().unwrap()]), want);
    // NAME=PATH still names it.
    let named = format!("mine={}", logs.display());
    assert_eq!(deployments(&[&named]), [("mine".to_string(), n)]);
}

#[test]
fn list_deployments_prints_pods_decisions_times_and_config() {
    let dir = tempfile::tempdir().unwrap();
    let log = two_pools(dir.path());
    let a = format!("glm-5-2={}", yaml(dir.path(), "a.yaml", 5000));
    let out = run(&[log.to_str().unwrap(), "--list-deployments", "--config", &a]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let blocks: Vec<&str> = text.split("\nqwen3\n").collect();
    assert_eq!(blocks.len(), 2, "{text}");
    assert!(blocks[0].starts_with("glm-5-2\n"), "{text}");
    let n = glm_like_decisions();
    assert!(blocks[0].contains(&format!("decisions: {n}\n")), "{text}");
    assert!(blocks[0].contains("config: file:"), "{text}");
    assert!(
        blocks[0].contains("endpoint pods: glm-5-2-decode-"),
        "{text}"
    );
    assert!(!blocks[0].contains("qwen3-decode-"), "{text}");
    assert!(blocks[0].contains(" UTC"), "{text}");
    assert!(blocks[1].contains("config: "), "{text}");
    assert!(!blocks[1].contains("config: file:"), "{text}");
    assert!(blocks[1].contains("endpoint pods: qwen3-decode-"), "{text}");
    // EPP pods, when the capture has the prefix.
    let out = run(&[
        fixture("variants/prefix/epp.log").to_str().unwrap(),
        "--list-deployments",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("EPP pods: mistral-small-epp-"), "{text}");
}

/// The JSON report without its input ledger (which counts the lines as
/// each capture frames them).
fn report_without_input(path: &Path) -> serde_json::Value {
    let out = run(&[path.to_str().unwrap(), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_object_mut().unwrap().remove("input");
    v
}

/// A kubectl capture reframed as stern, logcli and Fluent Bit would write
/// it gives the same report as the capture itself: the pods (and so the
/// deployments) come from each framing.
#[test]
fn other_capture_tools_give_the_kubectl_report() {
    let kubectl = fixture("variants/prefix-timestamps/epp.log");
    let text = std::fs::read_to_string(&kubectl).unwrap();
    let want = report_without_input(&kubectl);
    assert!(want["deployments"][0]["decisions"].as_u64().unwrap() > 0);
    let dir = tempfile::tempdir().unwrap();
    let json = |s: &str| serde_json::to_string(s).unwrap();
    let reframe = |f: &dyn Fn(&str, &str, &str, &str) -> String| -> String {
        text.lines()
            .map(|l| {
                let (inner, rest) = l.strip_prefix("[pod/").unwrap().split_once("] ").unwrap();
                let (pod, container) = inner.split_once('/').unwrap();
                let (ts, body) = rest.split_once(' ').unwrap();
                f(pod, container, ts, body)
            })
            .collect()
    };
    let framings: [(&str, String); 3] = [
        (
            "stern.log",
            reframe(&|p, c, t, b| format!("{p} {c} {t} {b}\n")),
        ),
        (
            "logcli.log",
            reframe(&|p, c, t, b| format!("{t} {{container=\"{c}\", pod=\"{p}\"}} {b}\n")),
        ),
        (
            "fluent-bit.json",
            reframe(&|p, c, t, b| {
                format!(
                    "{{\"time\":{},\"log\":{},\"kubernetes\":{{\"pod_name\":{},\"container_name\":{}}}}}\n",
                    json(t),
                    json(b),
                    json(p),
                    json(c)
                )
            }),
        ),
    ];
    for (name, body) in framings {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        assert_eq!(report_without_input(&path), want, "{name}");
    }
}
