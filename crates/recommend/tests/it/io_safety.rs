//! recommend never harms its inputs: outputs that are inputs (logs,
//! `--config`, `--calibration`) are errors naming both, a folder input
//! does not read back what the run writes, a bad output fails before any
//! input is read; and its flags are bounded.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recommend"))
}

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    bin()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recommend")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let log = fs::read(fixture("balanced/epp.log")).unwrap();
    fs::write(dir.path().join("x.log"), &log).unwrap();
    (dir, log)
}

#[test]
fn an_output_that_is_an_input_is_an_error_and_the_input_is_untouched() {
    let (dir, log) = scratch();
    let d = dir.path();
    fs::hard_link(d.join("x.log"), d.join("hard.log")).unwrap();
    let cal = "PEAK_PREFILL_THROUGHPUT=16000\n";
    fs::write(d.join("cal.txt"), cal).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("cal.txt", d.join("cal-link.txt")).unwrap();
    let mut cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["-o", "x.log"], "is the input x.log"),
        (vec!["--emit-decisions", "x.log"], "is the input x.log"),
        (vec!["-o", "hard.log"], "is the input x.log"),
        (
            vec!["--calibration", "cal.txt", "-o", "cal.txt"],
            "is the input --calibration cal.txt",
        ),
    ];
    if cfg!(unix) {
        cases.push((
            vec!["--calibration", "cal.txt", "-o", "cal-link.txt"],
            "is the input --calibration cal.txt",
        ));
    }
    for (flags, says) in cases {
        let mut args = vec!["x.log"];
        args.extend(&flags);
        let out = run_in(d, &args);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {e}");
        assert!(e.contains(says), "{flags:?}: {e}");
        assert_eq!(fs::read(d.join("x.log")).unwrap(), log, "{flags:?}");
        assert_eq!(fs::read_to_string(d.join("cal.txt")).unwrap(), cal);
    }
}

#[test]
fn a_folder_input_never_reads_back_what_the_run_writes() {
    let (dir, _) = scratch();
    let d = dir.path();
    fs::create_dir(d.join("logs")).unwrap();
    fs::rename(d.join("x.log"), d.join("logs/x.log")).unwrap();
    let lines = |out: &Output| -> u64 {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        v["input"]["lines_total"].as_u64().unwrap()
    };
    let want = lines(&run_in(d, &["logs/x.log", "--format", "json"]));
    // Twice: the second run finds the first run's report in the folder,
    // and neither reads it nor refuses to replace it (it is no input).
    for round in 0..2 {
        let out = run_in(d, &["logs", "-o", "logs/r.json", "--format", "json"]);
        assert!(out.status.success(), "round {round}: {}", stderr(&out));
        let report = Output {
            stdout: fs::read(d.join("logs/r.json")).unwrap(),
            ..out
        };
        assert_eq!(lines(&report), want, "round {round}: {}", stderr(&report));
    }
    // Decision records in the folder are an input: not replaced.
    let out = run_in(
        d,
        &[
            "logs",
            "--emit-decisions",
            "logs/d.jsonl",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let records = fs::read(d.join("logs/d.jsonl")).unwrap();
    let out = run_in(d, &["logs", "--emit-decisions", "logs/d.jsonl"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--emit-decisions logs/d.jsonl is the input logs/d.jsonl"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read(d.join("logs/d.jsonl")).unwrap(), records);
}

/// `--emit-config` onto a file the run reads (a log of an input folder,
/// the `--config` itself) is refused before any input is read, and checked
/// with the other outputs (a missing folder fails at once too).
#[test]
fn emit_config_is_checked_before_any_input_is_read() {
    let (dir, log) = scratch();
    let d = dir.path();
    fs::create_dir(d.join("logs")).unwrap();
    fs::rename(d.join("x.log"), d.join("logs/epp.log")).unwrap();
    let yaml =
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 5000}\n";
    fs::write(d.join("epp.yaml"), yaml).unwrap();
    for (flags, says) in [
        (
            vec!["--emit-config", "logs/epp.log"],
            "--emit-config logs/epp.log is the input logs/epp.log",
        ),
        (
            vec!["--config", "epp.yaml", "--emit-config", "epp.yaml"],
            "--emit-config epp.yaml is the input --config epp.yaml",
        ),
        (
            vec!["--emit-config", "no/such/dir/epp.yaml"],
            "--emit-config no/such/dir/epp.yaml: folder no/such/dir does not exist",
        ),
    ] {
        // Stdin stays open and empty: reading it would block.
        let mut child = bin()
            .current_dir(d)
            .args(["-", "logs"])
            .args(&flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{flags:?}: recommend read its input before checking --emit-config");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {e}");
        assert!(e.contains(says), "{flags:?}: {e}");
        assert_eq!(fs::read(d.join("logs/epp.log")).unwrap(), log);
        assert_eq!(fs::read_to_string(d.join("epp.yaml")).unwrap(), yaml);
    }
}

#[test]
fn a_bad_output_fails_before_any_input_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = bin()
        .current_dir(dir.path())
        .args(["-", "-o", "no/such/dir/r.json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stdin stays open: reading it first would block.
    let stdin = child.stdin.take();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("recommend read its input before checking -o");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("-o no/such/dir/r.json: folder no/such/dir does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn flags_are_bounded() {
    let (dir, _) = scratch();
    for (args, says) in [
        (vec!["-j", "100000"], "give 1 to 256"),
        (vec!["--window", "0.5s"], "at least 1 s"),
    ] {
        let mut a = vec!["x.log"];
        a.extend(&args);
        let out = run_in(dir.path(), &a);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let out = run_in(
        dir.path(),
        &[
            fixture("demo/glm-like.log.gz").to_str().unwrap(),
            "--window",
            "1s",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("more than 1000 windows"),
        "{}",
        stderr(&out)
    );
}
