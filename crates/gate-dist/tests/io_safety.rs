//! The input is never harmed, and folders are read safely: outputs that are
//! inputs, files this run writes, FIFOs, symlink loops, duplicates, files
//! that are no logs, and error causes printed once.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
}

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

/// Runs in `dir`, with stdin closed.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    bin()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run gate-dist")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Waits for the child at most `limit`; kills it and fails if it is
/// still running (it would have blocked forever).
fn wait_or_fail(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gate-dist still running after {limit:?}: it blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A scratch folder with `x.log` (a small EPP log).
fn scratch() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let log = fs::read(fixture("balanced/epp.log")).unwrap();
    fs::write(dir.path().join("x.log"), &log).unwrap();
    (dir, log)
}

fn decisions(report: &[u8]) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(report).expect("JSON report");
    v["input"]["decisions_assembled"].as_u64().unwrap()
}

#[test]
fn an_output_that_is_the_input_is_an_error_and_the_input_is_untouched() {
    let (dir, log) = scratch();
    let d = dir.path();
    #[cfg(unix)]
    std::os::unix::fs::symlink("x.log", d.join("sym.log")).unwrap();
    fs::hard_link(d.join("x.log"), d.join("hard.log")).unwrap();
    let mut cases = vec![
        vec!["--emit-decisions", "x.log"],
        vec!["-o", "x.log"],
        vec!["--svg", "x.log"],
        vec!["-o", "./x.log"],
        vec!["-o", "hard.log"],
        vec!["--emit-decisions", "hard.log"],
    ];
    if cfg!(unix) {
        cases.push(vec!["--svg", "sym.log"]);
        cases.push(vec!["--emit-decisions", "sym.log"]);
    }
    for flags in cases {
        let mut args = vec!["x.log", "--format", "json"];
        args.extend(&flags);
        let out = run_in(d, &args);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {e}");
        assert!(
            e.contains(flags[0]) && e.contains(flags[1]) && e.contains("is the input x.log"),
            "{flags:?}: {e}"
        );
        assert!(out.stdout.is_empty(), "{flags:?}: no report");
        assert_eq!(fs::read(d.join("x.log")).unwrap(), log, "{flags:?}");
    }
    // The input named through a link is caught the same way.
    let out = run_in(d, &["hard.log", "-o", "x.log"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is the input hard.log"));
    assert_eq!(fs::read(d.join("x.log")).unwrap(), log);
}

#[test]
fn a_config_file_is_an_input_too() {
    let (dir, _) = scratch();
    let d = dir.path();
    let yaml =
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 5000}\n";
    fs::write(d.join("epp.yaml"), yaml).unwrap();
    let out = run_in(d, &["x.log", "--config", "epp.yaml", "-o", "epp.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--config epp.yaml"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read_to_string(d.join("epp.yaml")).unwrap(), yaml);
}

#[test]
fn stdout_appended_to_the_input_is_an_error() {
    let (dir, log) = scratch();
    let d = dir.path();
    let f = fs::File::options()
        .append(true)
        .open(d.join("x.log"))
        .unwrap();
    let out = bin()
        .current_dir(d)
        .args(["x.log", "--format", "json"])
        .stdout(Stdio::from(f))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("stdout is the input x.log"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read(d.join("x.log")).unwrap(), log);
}

#[test]
fn two_outputs_to_the_same_file_or_stdout_are_errors() {
    let (dir, _) = scratch();
    let d = dir.path();
    let out = run_in(d, &["x.log", "--svg", "r.out", "-o", "r.out"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("-o and --svg both write r.out"),
        "{}",
        stderr(&out)
    );
    let out = run_in(d, &["x.log", "--emit-decisions", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("both write to stdout"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_folder_input_never_reads_back_what_the_run_writes() {
    let (dir, _) = scratch();
    let d = dir.path();
    let logs = d.join("logs");
    fs::create_dir(&logs).unwrap();
    fs::rename(d.join("x.log"), logs.join("x.log")).unwrap();
    let alone = run_in(d, &["logs/x.log", "--format", "json"]);
    let want = decisions(&alone.stdout);
    assert!(want > 0);
    // Twice: the second run finds the first run's records and report in
    // the folder, and still reads neither.
    for round in 0..2 {
        let out = run_in(
            d,
            &[
                "logs/",
                "--emit-decisions",
                "logs/d.jsonl",
                "-o",
                "logs/report.json",
                "--format",
                "json",
            ],
        );
        let e = stderr(&out);
        assert!(out.status.success(), "round {round}: {e}");
        if round == 1 {
            assert!(
                e.contains("logs/d.jsonl: written by this run (--emit-decisions)"),
                "{e}"
            );
            assert!(
                e.contains("logs/report.json: written by this run (-o)"),
                "{e}"
            );
        }
        let report = fs::read(logs.join("report.json")).unwrap();
        assert_eq!(decisions(&report), want, "round {round}");
        let records = fs::read_to_string(logs.join("d.jsonl")).unwrap();
        assert_eq!(records.lines().count() as u64, want, "round {round}");
    }
}

#[test]
fn a_bad_output_fails_before_any_input_is_read() {
    let (dir, log) = scratch();
    let d = dir.path();
    fs::create_dir(d.join("out")).unwrap();
    for flags in [
        ["-o", "no/such/dir/r.json"],
        ["--svg", "no/such/dir/h.svg"],
        ["--emit-decisions", "no/such/dir/d.jsonl"],
        ["-o", "out"],
    ] {
        // Stdin stays open and empty: reading it would block.
        let mut child = bin()
            .current_dir(d)
            .args(["-"])
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = wait_or_fail(child, Duration::from_secs(60));
        drop(stdin);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {e}");
        assert!(
            e.contains(flags[0]) && e.contains(flags[1]),
            "{flags:?}: {e}"
        );
    }
    let e = stderr(&run_in(d, &["x.log", "-o", "no/such/dir/r.json"]));
    assert!(e.contains("folder no/such/dir does not exist"), "{e}");
    // A missing -o does not leave a report, and a failed run does not
    // empty an existing one before the input was read.
    fs::write(d.join("old.json"), "old").unwrap();
    let out = run_in(d, &["missing.log", "-o", "old.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(fs::read_to_string(d.join("old.json")).unwrap(), "old");
    assert_eq!(fs::read(d.join("x.log")).unwrap(), log);
}

#[cfg(unix)]
#[test]
fn folders_read_regular_log_files_once_and_skip_the_rest() {
    let (dir, _) = scratch();
    let d = dir.path();
    let one = decisions(&run_in(d, &["x.log", "--format", "json"]).stdout);
    let logs = d.join("logs");
    fs::create_dir(&logs).unwrap();
    fs::copy(d.join("x.log"), logs.join("a.log")).unwrap();
    // A FIFO nobody writes: opening it would block forever.
    let fifo = logs.join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Symlink loops: two links to each other, and a link to the folder itself.
    std::os::unix::fs::symlink("loop2", logs.join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", logs.join("loop2")).unwrap();
    std::os::unix::fs::symlink(".", logs.join("self")).unwrap();
    // The same file again: a symlink and a hard link.
    std::os::unix::fs::symlink("a.log", logs.join("b.log")).unwrap();
    fs::hard_link(logs.join("a.log"), logs.join("c.log")).unwrap();
    // Files that are no logs.
    fs::write(logs.join("notes.txt"), "# notes\nnothing to see\n").unwrap();
    fs::write(logs.join("report.json"), "{\n  \"schema\": \"x\"\n}\n").unwrap();
    fs::write(logs.join("empty.log"), "").unwrap();
    let child = bin()
        .current_dir(d)
        .args(["logs", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_or_fail(child, Duration::from_secs(60));
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    assert_eq!(decisions(&out.stdout), one, "{e}");
    for (file, why) in [
        ("logs/pipe", "not a regular file (FIFO)"),
        ("logs/loop1", "symlink not followed"),
        ("logs/loop2", "symlink not followed"),
        ("logs/self", "the same folder as logs"),
        ("logs/b.log", "the same file as logs/a.log"),
        ("logs/c.log", "the same file as logs/a.log"),
        ("logs/notes.txt", "not EPP log lines"),
        ("logs/report.json", "not EPP log lines"),
        ("logs/empty.log", "not EPP log lines"),
    ] {
        assert!(e.contains(&format!("{file}: {why}")), "{file}: {e}");
    }
    assert!(e.contains("9 file(s) not read"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["input"]["inputs"], serde_json::json!(["logs/a.log"]));
}

#[test]
fn the_same_file_twice_is_read_once() {
    let (dir, _) = scratch();
    let d = dir.path();
    let one = decisions(&run_in(d, &["x.log", "--format", "json"]).stdout);
    fs::create_dir(d.join("logs")).unwrap();
    fs::copy(d.join("x.log"), d.join("logs/y.log")).unwrap();
    let two = decisions(&run_in(d, &["logs/y.log", "--format", "json"]).stdout);
    for (args, want) in [
        (vec!["x.log", "x.log"], one),
        (vec!["x.log", "./x.log"], one),
        (vec!["logs", "logs/y.log", "x.log"], one + two),
        (vec!["logs/*.log", "logs"], two),
    ] {
        let mut a = args.clone();
        a.extend(["--format", "json"]);
        let out = run_in(d, &a);
        let e = stderr(&out);
        assert!(out.status.success(), "{args:?}: {e}");
        assert_eq!(decisions(&out.stdout), want, "{args:?}: {e}");
        assert!(e.contains(", read once"), "{args:?}: {e}");
    }
}

#[test]
fn a_file_named_by_path_is_read_whatever_it_holds() {
    let (dir, _) = scratch();
    let d = dir.path();
    fs::write(d.join("notes.txt"), "hello\nworld\n").unwrap();
    let out = run_in(d, &["notes.txt", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["input"]["lines_total"], 2);
    assert_eq!(v["input"]["lines_ignored"], 2);
    assert!(!stderr(&out).contains("not read"), "{}", stderr(&out));
}

#[test]
fn gzip_logs_in_a_folder_are_sniffed_after_decompression() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gz = fixture("demo/glm-like.log.gz");
    fs::create_dir(d.join("logs")).unwrap();
    // Gzip by content, whatever the name.
    fs::copy(&gz, d.join("logs/rotated.1")).unwrap();
    let out = run_in(d, &["logs", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not read"), "{}", stderr(&out));
    let direct = run_in(d, &[gz.to_str().unwrap(), "--format", "json"]);
    assert_eq!(decisions(&out.stdout), decisions(&direct.stdout));
}

#[test]
fn an_error_states_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let gz = fs::read(fixture("demo/glm-like.log.gz")).unwrap();
    fs::write(dir.path().join("cut.log.gz"), &gz[..gz.len() / 2]).unwrap();
    let out = run_in(dir.path(), &["cut.log.gz", "--format", "json"]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    let line = e
        .lines()
        .find(|l| l.contains("error:"))
        .expect("an error line");
    assert!(line.contains("cut.log.gz"), "{line}");
    // "cannot read cut.log.gz: <cause>", the cause not repeated.
    let cause = line.rsplit(": ").next().unwrap();
    assert_eq!(line.matches(cause).count(), 1, "{line}");
    let out = run_in(dir.path(), &["missing.log"]);
    let e = stderr(&out);
    assert_eq!(e.matches("missing.log").count(), 1, "{e}");
}
