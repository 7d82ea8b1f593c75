//! `--kubectl`: gate-dist runs `kubectl get pods` and `kubectl logs` itself.
//! A stand-in kubectl (a shell script the test writes) checks the
//! arguments it is given and plays a capture.
#![cfg(unix)]

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gatecal_sim::{Variant, run, scenario};

fn gate_dist(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run gate-dist")
}

/// A `kubectl --prefix --timestamps` capture of simulated deployments
/// with several EPP pods, and the pods' names.
fn capture() -> (Vec<u8>, Vec<String>) {
    let s = scenario("eight-deployments").unwrap().with_requests(600);
    let out = run(
        &s,
        3,
        &Variant {
            prefix: true,
            timestamps: true,
            ..Variant::default()
        },
    );
    let pods: BTreeSet<String> = out
        .epp_log
        .split(|&b| b == b'\n')
        .filter_map(|l| {
            let l = std::str::from_utf8(l).ok()?.strip_prefix("[pod/")?;
            Some(l.split('/').next()?.to_string())
        })
        .collect();
    (out.epp_log, pods.into_iter().collect())
}

/// Writes the stand-in kubectl into `dir`: `get` prints a pod list of
/// `pods` (one container each); `logs` checks that every argument of
/// `want` is given (else exits 64, naming it), then plays `play` and
/// exits `code` (after `fail` on stderr when not 0). Every call's
/// arguments are appended to `dir/calls`.
fn stand_in(dir: &Path, pods: &[String], want: &[&str], play: &Path, code: i32) -> PathBuf {
    let items: Vec<String> = pods
        .iter()
        .map(|p| {
            format!(r#"{{"metadata":{{"name":"{p}"}},"spec":{{"containers":[{{"name":"epp"}}]}}}}"#)
        })
        .collect();
    let list = format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(","));
    std::fs::write(dir.join("pods.json"), list).unwrap();
    let checks: String = want
        .iter()
        .map(|w| {
            format!(
                "  case \" $* \" in *\" {w} \"*) ;; *) echo \"stand-in: no {w} in: $*\" >&2; exit 64;; esac\n"
            )
        })
        .collect();
    let tail = if code == 0 {
        String::new()
    } else {
        format!("  echo 'error: container \"epp\" in pod is waiting to start' >&2\n  exit {code}\n")
    };
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{calls}'\ncase \"$1\" in\nget)\n  cat '{pods}';;\nlogs)\n{checks}  cat '{play}'\n{tail};;\n*) exit 65;;\nesac\n",
        calls = dir.join("calls").display(),
        pods = dir.join("pods.json").display(),
        play = play.display(),
    );
    let bin = dir.join("kubectl");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn kubectl_logs_runs_with_the_flags_the_analysis_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (log, pods) = capture();
    assert!(pods.len() >= 2, "{pods:?}");
    let file = dir.path().join("epp.log");
    std::fs::write(&file, &log).unwrap();
    let max = format!("--max-log-requests={}", pods.len());
    let want = [
        "--selector=app=epp",
        "-n prod",
        "--prefix",
        "--timestamps",
        "--tail=-1",
        "--all-containers",
        &max,
        "--since-time=2026-08-21T00:00:00Z",
    ];
    let bin = stand_in(dir.path(), &pods, &want, &file, 0);
    let out = gate_dist(&[
        "--format",
        "json",
        "--since",
        "2026-08-21",
        "--kubectl-bin",
        bin.to_str().unwrap(),
        "--kubectl",
        "-n",
        "prod",
        "-l",
        "app=epp",
    ]);
    let via = json(&out);
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0],
        "get pods --selector=app=epp -n prod --output=json"
    );
    assert!(calls[1].starts_with("logs "), "{calls:?}");
    // The same report as the capture read from a file.
    let direct = json(&gate_dist(&[
        file.to_str().unwrap(),
        "--format",
        "json",
        "--since",
        "2026-08-21",
    ]));
    assert!(decisions(&via) > 100, "{}", decisions(&via));
    assert!(via["deployments"].as_array().unwrap().len() >= 2);
    assert_eq!(via["deployments"], direct["deployments"]);
    assert_eq!(via["input"]["inputs"][0], "kubectl logs -l app=epp");
    assert_eq!(via["input"]["lines_total"], direct["input"]["lines_total"]);
    // Each pod read, with its lines.
    let err = String::from_utf8_lossy(&out.stderr);
    let lines = log.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
    assert!(
        err.contains(&format!(
            "kubectl logs -l app=epp: {} pod(s), {} line(s)",
            pods.len(),
            group(lines)
        )),
        "{err}"
    );
    for p in &pods {
        let n = log
            .split(|&b| b == b'\n')
            .filter(|l| l.starts_with(format!("[pod/{p}/epp] ").as_bytes()))
            .count();
        assert!(
            err.contains(&format!("  {p}/epp: {} line(s)", group(n))),
            "{p}: {err}"
        );
    }
}

/// Decisions of every deployment of a report.
fn decisions(v: &serde_json::Value) -> u64 {
    v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["decisions"].as_u64().unwrap())
        .sum()
}

fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn a_failing_kubectl_is_an_error_and_what_it_gave_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (log, pods) = capture();
    // Half the capture, then kubectl fails.
    let half = &log[..log.len() / 2];
    let file = dir.path().join("half.log");
    std::fs::write(&file, half).unwrap();
    let bin = stand_in(dir.path(), &pods, &["--tail=-1"], &file, 1);
    let report = dir.path().join("report.json");
    let out = gate_dist(&[
        "-o",
        report.to_str().unwrap(),
        "--kubectl-bin",
        bin.to_str().unwrap(),
        "--kubectl",
        "-l",
        "app=epp",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("logs --selector=app=epp"), "{err}");
    assert!(
        err.contains("failed (exit status: 1): error: container"),
        "{err}"
    );
    assert!(err.contains("is waiting to start"), "{err}");
    assert!(
        err.contains("the report covers the lines read before"),
        "{err}"
    );
    // Nothing read is lost: the report of the lines kubectl gave.
    let via: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let direct = json(&gate_dist(&[file.to_str().unwrap(), "--format", "json"]));
    assert!(decisions(&via) > 30, "{}", decisions(&via));
    assert_eq!(via["deployments"], direct["deployments"]);
}

#[test]
fn kubectl_failing_at_once_missing_or_without_pods_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let bin = stand_in(dir.path(), &["epp-a".into()], &[], &empty, 1);
    let out = gate_dist(&[
        "--kubectl-bin",
        bin.to_str().unwrap(),
        "--kubectl",
        "-l",
        "app=epp",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("failed (exit status: 1): error: container"),
        "{err}"
    );
    assert!(err.contains("is waiting to start"), "{err}");
    // No kubectl at that path.
    let out = gate_dist(&[
        "--kubectl-bin",
        dir.path().join("nope").to_str().unwrap(),
        "--kubectl",
        "-l",
        "app=epp",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot run"), "{err}");
    assert!(err.contains("--kubectl-bin"), "{err}");
    // A selector that matches no pod.
    let bin = stand_in(dir.path(), &[], &[], &empty, 0);
    let out = gate_dist(&[
        "--kubectl-bin",
        bin.to_str().unwrap(),
        "--kubectl",
        "-l",
        "app=typo",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no pod matches -l app=typo"), "{err}");
    // A flag gatecal sets.
    let out = gate_dist(&["--kubectl", "-l", "app=epp", "--tail=10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tail is set by gatecal"));
}
