//! `--follow`: the report every `--every` over the last `--window` of log
//! time, while a log grows; SIGINT prints the last report and exits 0.
#![cfg(unix)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gatecal_test_support::follow::{append_and_wait, interrupt, json, stdout_lines};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_gate-dist")
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo/glm-like.log.gz")
}

fn demo_lines() -> Vec<u8> {
    let mut v = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(demo()).unwrap())
        .read_to_end(&mut v)
        .unwrap();
    v
}

#[test]
fn reports_come_every_interval_while_a_log_grows_and_sigint_ends_with_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("epp.log");
    let all = demo_lines();
    let lines: Vec<&[u8]> = all.split_inclusive(|&b| b == b'\n').collect();
    // The first tenth now, the rest while gate-dist reads.
    let first = lines.len() / 10;
    std::fs::write(&log, lines[..first].concat()).unwrap();
    let started = Instant::now();
    let mut child = Command::new(exe())
        .args([
            log.to_str().unwrap(),
            "--follow",
            "--every",
            "1s",
            "--format",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    // The first report: within --every + 1 s of the start.
    let (at, l) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        at - started < Duration::from_secs(2),
        "first report after {:?}",
        at - started
    );
    let v = json(&l);
    assert_eq!(v["follow"]["last"], false);
    let early = v["follow"]["decisions_read"].as_u64().unwrap();
    // The rest of the log, appended in pieces. Reports go on, and read the
    // log: all but its last seconds, which the reorder buffer holds until
    // later lines come (or the run ends).
    let last = append_and_wait(&log, &lines[first..], lines.len() / 10 + 1, &rx, v, 1100);
    assert!(early < 1100, "{early}");
    // The window: the last 15 minutes of log time.
    let f = &last["follow"];
    assert_eq!(f["window_s"], 900.0);
    let end = f["window_end"].as_f64().unwrap();
    assert!((f["window_start"].as_f64().unwrap() - (end - 900.0)).abs() < 1e-6);
    let d = &last["deployments"][0];
    assert!(d["first_ts"].as_f64().unwrap() >= end - 900.0);
    let n = d["decisions"].as_u64().unwrap();
    assert!(n > 300 && n < 1100, "{n}");
    // SIGINT: the last report, exit 0.
    let end = interrupt(child, &rx);
    // Every decision, the held ones too.
    assert_eq!(end["follow"]["decisions_read"], 1168);
    let d = &end["deployments"][0];
    assert!(d["first_ts"].as_f64().unwrap() >= d["last_ts"].as_f64().unwrap() - 900.0);
    assert!(d["decisions"].as_u64().unwrap() >= n);
}

#[test]
fn the_last_report_over_the_whole_log_is_the_report_of_the_log() {
    let mut child = Command::new(exe())
        .args([
            "-", "--follow", "--window", "1h", "--every", "1h", "--format", "json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let all = demo_lines();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&all);
    });
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // Stdin closed: one report, the last.
    assert_eq!(text.lines().count(), 1, "{text}");
    let follow = json(text.lines().next().unwrap());
    assert_eq!(follow["follow"]["last"], true);
    let once = Command::new(exe())
        .args([demo().to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let once: serde_json::Value = serde_json::from_slice(&once.stdout).unwrap();
    assert_eq!(follow["deployments"], once["deployments"]);
    assert_eq!(follow["overall"], once["overall"]);
    assert_eq!(follow["input"]["lines_total"], once["input"]["lines_total"]);
}

#[test]
fn follow_refuses_outputs_it_cannot_keep_up() {
    for (args, want) in [
        (vec!["-o", "r.json"], "-o does not go with --follow"),
        (vec!["--svg", "g.svg"], "--svg does not go with --follow"),
        (
            vec!["--emit-partial", "p.part"],
            "'--follow' cannot be used with '--emit-partial <FILE>'",
        ),
        (
            vec!["--format", "csv"],
            "--follow prints a table or JSON lines",
        ),
        (vec!["--every", "0.01s"], "--every 0.01: give at least 0.1s"),
    ] {
        let out = Command::new(exe())
            .args(["-", "--follow"])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_file_created_later_in_a_folder_given_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.log"), b"").unwrap();
    let mut child = Command::new(exe())
        .arg(dir.path())
        .args(["--follow", "--every", "0.5s", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    // Nothing yet: the folder's one file is empty.
    let v = json(&rx.recv_timeout(Duration::from_secs(10)).unwrap().1);
    assert_eq!(v["follow"]["decisions_read"], 0);
    // A second file, written in place (a rotation's new file).
    let b = dir.path().join("b.log");
    std::fs::write(&b, demo_lines()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = v;
    while last["follow"]["decisions_read"].as_u64().unwrap() < 1100 {
        assert!(Instant::now() < deadline, "{}", last["follow"]);
        last = json(&rx.recv_timeout(Duration::from_secs(10)).unwrap().1);
    }
    // Rotated by renaming it in the folder: not read again.
    std::fs::rename(&b, dir.path().join("b.log.1")).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let read = last["follow"]["decisions_read"].clone();
    // The reports since, and one more.
    while rx.try_recv().is_ok() {}
    last = json(&rx.recv_timeout(Duration::from_secs(10)).unwrap().1);
    assert_eq!(last["follow"]["decisions_read"], read);
    let inputs: Vec<&str> = last["input"]["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert!(inputs[1].ends_with("b.log"), "{inputs:?}");
    interrupt(child, &rx);
}
