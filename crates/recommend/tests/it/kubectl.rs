//! `recommend --kubectl`: the EPP pods and the vLLM pods read with
//! `kubectl logs`, one selector each. A stand-in kubectl (a shell script
//! the test writes) checks its arguments and plays the captures.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

use gatecal_sim::{Variant, run, scenario};

fn recommend(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recommend")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A vLLM pod's log as `kubectl logs --prefix --timestamps` shows it: the
/// kubelet's time (from the line's own `MM-DD hh:mm:ss`, in `year`).
fn framed_vllm(pod: &str, log: &[u8], year: i32) -> String {
    let mut out = String::new();
    let mut ts = format!("{year}-01-01T00:00:00.000000000Z");
    for line in String::from_utf8_lossy(log).lines() {
        let mut w = line.split_whitespace();
        if let (Some(_level), Some(md), Some(hms)) = (w.next(), w.next(), w.next())
            && md.len() == 5
            && hms.len() == 8
            && md.as_bytes()[2] == b'-'
        {
            ts = format!("{year}-{md}T{hms}.000000000Z");
        }
        out.push_str(&format!("[pod/{pod}/vllm] {ts} {line}\n"));
    }
    out
}

#[test]
fn the_epp_and_vllm_pods_each_by_their_selector() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = scenario("glm-like").unwrap().with_requests(600);
    let out = run(
        &s,
        2,
        &Variant {
            prefix: true,
            timestamps: true,
            ..Variant::default()
        },
    );
    std::fs::write(d.join("epp.log"), &out.epp_log).unwrap();
    let mut vllm = String::new();
    let mut vllm_pods = Vec::new();
    for (pod, log) in &out.vllm_logs {
        vllm.push_str(&framed_vllm(pod, log, 2026));
        vllm_pods.push(pod.clone());
    }
    std::fs::write(d.join("vllm.log"), &vllm).unwrap();
    let pod_list = |pods: &[String], container: &str| {
        let items: Vec<String> = pods
            .iter()
            .map(|p| {
                format!(
                    r#"{{"metadata":{{"name":"{p}"}},"spec":{{"containers":[{{"name":"{container}"}}]}}}}"#
                )
            })
            .collect();
        format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(","))
    };
    std::fs::write(
        d.join("epp.json"),
        pod_list(&["glm-5-2-epp-6f7c9d8b5-xk2lp".to_string()], "epp"),
    )
    .unwrap();
    std::fs::write(d.join("vllm.json"), pod_list(&vllm_pods, "vllm")).unwrap();
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> '{d}/calls'
case " $* " in
  *" logs "*) case " $* " in *" --prefix --timestamps --tail=-1 --all-containers "*) ;; *) echo "stand-in: flags missing: $*" >&2; exit 64;; esac;;
esac
case "$1 $*" in
  "get "*selector=app=epp*) cat '{d}/epp.json';;
  "get "*selector=app=vllm*) cat '{d}/vllm.json';;
  "logs "*selector=app=epp*) cat '{d}/epp.log';;
  "logs "*selector=app=vllm*--max-log-requests={n}*) cat '{d}/vllm.log';;
  *) echo "stand-in: unexpected: $*" >&2; exit 65;;
esac
"#,
        d = d.display(),
        n = vllm_pods.len()
    );
    let bin = d.join("kubectl");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let via_out = recommend(&[
        "--format",
        "json",
        "--kubectl-bin",
        bin.to_str().unwrap(),
        "--kubectl",
        "-l",
        "app=epp",
        "--selector=app=vllm",
    ]);
    let via = json(&via_out);
    let calls = std::fs::read_to_string(d.join("calls")).unwrap();
    assert_eq!(calls.lines().count(), 4, "{calls}");
    let direct = json(&recommend(&[
        d.join("epp.log").to_str().unwrap(),
        d.join("vllm.log").to_str().unwrap(),
        "--format",
        "json",
    ]));
    let p = &via["deployments"][0]["peak_prefill_throughput"];
    assert!(p["value"].as_f64().unwrap() > 0.0, "{p}");
    // Measured from the vLLM pods' stats lines that kubectl gave.
    let method = p["estimates"][0]["method"].as_str().unwrap();
    assert!(method.contains("saturated interval(s)"), "{method}");
    assert_eq!(via["deployments"], direct["deployments"]);
    assert_eq!(
        via["input"]["inputs"],
        serde_json::json!(["kubectl logs -l app=epp", "kubectl logs -l app=vllm"])
    );
    let err = String::from_utf8_lossy(&via_out.stderr);
    assert!(
        err.contains(&format!(
            "kubectl logs -l app=vllm: {} pod(s)",
            vllm_pods.len()
        )),
        "{err}"
    );
}
