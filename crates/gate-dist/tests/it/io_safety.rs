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
    let out = run_in(
        d,
        &[
            "x.log", "--config", "epp.yaml", "--format", "json", "-o", "epp.yaml",
        ],
    );
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
    // Twice: the second run finds the first run's report and chart in the
    // folder, reads neither, and replaces both (they are no input).
    for round in 0..2 {
        let out = run_in(
            d,
            &[
                "logs/",
                "--svg",
                "logs/h.svg",
                "-o",
                "logs/report.json",
                "--format",
                "json",
            ],
        );
        let e = stderr(&out);
        assert!(out.status.success(), "round {round}: {e}");
        if round == 1 {
            assert!(e.contains("logs/h.svg: written by this run (--svg)"), "{e}");
            assert!(
                e.contains("logs/report.json: written by this run (-o)"),
                "{e}"
            );
        }
        let report = fs::read(logs.join("report.json")).unwrap();
        assert_eq!(decisions(&report), want, "round {round}");
    }
    // Decision records written into the folder are an input of the next
    // run: it refuses to replace them.
    let out = run_in(d, &["logs/", "--emit-decisions", "logs/d.jsonl", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records = fs::read_to_string(logs.join("d.jsonl")).unwrap();
    assert_eq!(records.lines().count() as u64, want);
    let out = run_in(d, &["logs/", "--emit-decisions", "logs/d.jsonl", "-q"]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--emit-decisions logs/d.jsonl is the input logs/d.jsonl"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(logs.join("d.jsonl")).unwrap(), records);
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

/// The exit code, and the decisions and lines of a report on stdout
/// (`--format json`).
fn decisions_of(out: &Output) -> (Option<i32>, u64, u64) {
    let e = stderr(out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("not a JSON report ({err}): {e}"));
    let n = v["input"]["decisions_assembled"].as_u64().unwrap();
    let lines = v["input"]["lines_total"].as_u64().unwrap();
    (out.status.code(), n, lines)
}

/// A log of 60 decisions (859 KB), plain and gzipped.
fn log_and_gzip() -> (Vec<u8>, Vec<u8>) {
    use std::io::Write;
    let log = fs::read(fixture("glm-like/epp.log")).unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&log).unwrap();
    (log, e.finish().unwrap())
}

/// Runs gate-dist in `dir` on a FIFO `name` it creates there, writing
/// `bytes` into it from another thread; fails if the run does not end.
#[cfg(unix)]
fn run_on_fifo(dir: &Path, name: &str, bytes: Vec<u8>, args: &[&str]) -> Output {
    let fifo = dir.join(name);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let child = bin()
        .current_dir(dir)
        .arg(name)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the FIFO waits for the reader; a reader that went away
    // ends the write with an error, not a hang.
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut f = fs::File::options().write(true).open(&fifo).unwrap();
        let _ = f.write_all(&bytes);
    });
    let out = wait_or_fail(child, Duration::from_secs(120));
    let _ = writer.join();
    fs::remove_file(dir.join(name)).unwrap();
    out
}

/// A FIFO (or process substitution, `<(zcat x.gz)`) is opened once and
/// read once from its first byte: gzip is found by its first bytes, none
/// is lost, and the run ends; plain text alike.
#[cfg(unix)]
#[test]
fn a_fifo_is_read_once_gzip_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (plain, gz) = log_and_gzip();
    let direct = decisions_of(&run_in(
        d,
        &[
            fixture("glm-like/epp.log").to_str().unwrap(),
            "--format",
            "json",
            "-q",
        ],
    ));
    assert_eq!(direct, (Some(0), 54, 1584));
    for threads in ["1", "3"] {
        for (what, bytes) in [("gzip", &gz), ("plain", &plain)] {
            let out = run_on_fifo(
                d,
                "in.fifo",
                bytes.clone(),
                &["--format", "json", "-q", "-j", threads],
            );
            assert_eq!(
                decisions_of(&out),
                direct,
                "{what} through a FIFO, -j {threads}: {}",
                stderr(&out)
            );
        }
    }
}

/// The cause of an input without decisions (every pod of a `kubectl logs
/// --prefix` capture with at most 10 lines) is found from what was read,
/// not by opening the input again (a FIFO opened again waits for ever).
#[cfg(unix)]
#[test]
fn the_cause_of_no_decisions_comes_from_the_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for pod in ["a", "b", "c"] {
        for i in 0..4 {
            log.push_str(&format!(
                "[pod/glm-epp-7c9d8-{pod}xk2l/epp] {{\"level\":\"info\",\"ts\":1755786974.{i},\"msg\":\"Starting\"}}\n"
            ));
        }
    }
    let out = run_on_fifo(dir.path(), "short.fifo", log.into_bytes(), &["-q"]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(
        e.contains("every pod holds at most 10 lines (3 pod(s), 4 line(s) at most)"),
        "{e}"
    );
}

/// Standard input, as `-` or as `/dev/stdin`, is read once: gzip found by
/// its first bytes, no byte lost.
#[cfg(unix)]
#[test]
fn stdin_is_read_once_as_dash_or_dev_stdin() {
    let (_, gz) = log_and_gzip();
    for args in [&["-"][..], &["/dev/stdin"], &["-", "/dev/stdin", "-"]] {
        let mut child = bin()
            .args(args)
            .args(["--format", "json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let bytes = gz.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&bytes);
        });
        let out = wait_or_fail(child, Duration::from_secs(120));
        let _ = writer.join();
        let e = stderr(&out);
        assert_eq!(decisions_of(&out), (Some(0), 54, 1584), "{args:?}: {e}");
        if args.len() > 1 {
            assert!(
                e.contains("/dev/stdin: the same file as -, read once"),
                "{e}"
            );
            assert!(e.contains("-: the same file as -, read once"), "{e}");
        }
    }
    // An output onto the file stdin reads is refused.
    let (dir, log) = scratch();
    let d = dir.path();
    let out = bin()
        .current_dir(d)
        .args(["-", "-o", "x.log"])
        .stdin(fs::File::open(d.join("x.log")).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("-o x.log is the input -"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read(d.join("x.log")).unwrap(), log);
}

/// The names in a folder, sorted.
fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Sends `signal` (`STOP`, `CONT`, `INT`, …) to a process.
#[cfg(unix)]
fn kill(signal: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// Two runs that write the same files at once (one stopped while it
/// writes its records, the other run whole meanwhile) leave one run's
/// complete report and records, not parts of both nor zeros where one run
/// emptied what the other was writing, and no temporary file.
#[cfg(unix)]
#[test]
fn concurrent_runs_writing_one_file_leave_one_complete_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |log: &str| {
        bin()
            .current_dir(d)
            .arg(fixture(log))
            .args(["-q", "--format", "json", "-j", "1"])
            .args(["-o", "r.json", "--emit-decisions", "d.jsonl"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // 1,168 decisions: their records are written as the log is read.
    let long = run("demo/glm-like.log.gz");
    let writing = || {
        fs::read_dir(d).unwrap().any(|e| {
            let e = e.unwrap();
            e.file_name().to_string_lossy().contains("d.jsonl")
                && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    };
    let start = Instant::now();
    while !writing() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no record written"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    kill("STOP", long.id());
    // 12 decisions, run whole while the other is stopped.
    let short = wait_or_fail(run("balanced/epp.log"), Duration::from_secs(120));
    kill("CONT", long.id());
    let long = wait_or_fail(long, Duration::from_secs(300));
    for out in [&short, &long] {
        assert!(out.status.success(), "{}", stderr(out));
    }
    let report = fs::read(d.join("r.json")).unwrap();
    assert_eq!(decisions(&report), 1168);
    let records = fs::read_to_string(d.join("d.jsonl")).unwrap();
    assert!(!records.contains('\0'), "NUL bytes in the records");
    for line in records.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("a whole record");
    }
    assert_eq!(records.lines().count(), 1168);
    assert_eq!(names(d), ["d.jsonl", "r.json"]);
}

/// A run interrupted (SIGINT or SIGTERM) while it reads leaves no output
/// under its final name, no temporary file, and an older file as it was;
/// it exits 130 or 143.
#[cfg(unix)]
#[test]
fn an_interrupted_run_leaves_no_partial_output() {
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("in.fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        fs::write(d.join("old.json"), "old").unwrap();
        // Held open for reading and writing: the run's open does not wait,
        // and its read waits for more.
        let mut held = fs::File::options()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let child = bin()
            .current_dir(d)
            .args(["in.fifo", "-q", "--format", "json", "-o", "old.json"])
            .args(["--emit-decisions", "d.jsonl", "--svg", "h.svg"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Some log lines: the run is reading.
        let log = fs::read(fixture("balanced/epp.log")).unwrap();
        std::io::Write::write_all(&mut held, &log[..8192]).unwrap();
        // Wait until its outputs are open (files beside the input).
        let start = Instant::now();
        while names(d).len() < 4 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no output opened: {:?}",
                names(d)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        kill(signal, child.id());
        let out = wait_or_fail(child, Duration::from_secs(60));
        drop(held);
        assert_eq!(
            out.status.code(),
            Some(code),
            "SIG{signal}: {}",
            stderr(&out)
        );
        assert_eq!(names(d), ["in.fifo", "old.json"], "SIG{signal}");
        assert_eq!(fs::read_to_string(d.join("old.json")).unwrap(), "old");
    }
}

/// Special files are written as they are: `/dev/null` takes any output,
/// `/dev/full` is a full disk, said as such.
#[cfg(unix)]
#[test]
fn special_files_are_written_in_place() {
    let (dir, _) = scratch();
    let d = dir.path();
    for flag in ["-o", "--emit-decisions", "--svg"] {
        let mut args = vec!["x.log", "-q", flag, "/dev/null"];
        if flag != "-o" {
            args.extend(["-o", "/dev/null"]);
        }
        let out = run_in(d, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flag} /dev/null: {}",
            stderr(&out)
        );
        let mut args = vec!["x.log", "-q", flag, "/dev/full"];
        if flag != "-o" {
            args.extend(["-o", "/dev/null"]);
        }
        let out = run_in(d, &args);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flag} /dev/full: {e}");
        assert!(
            e.contains("cannot write /dev/full") && e.contains("No space left on device"),
            "{flag} /dev/full: {e}"
        );
    }
    // `/dev/stdout` is the standard output, whatever it is.
    let out = bin()
        .current_dir(d)
        .args(["x.log", "-q", "--format", "json", "-o", "/dev/stdout"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(decisions(&out.stdout) > 0);
    assert_eq!(names(d), ["x.log"]);
}

/// An output that is a file the run reads from an input folder (by name,
/// through a symlink in the folder or outside it) is refused before any
/// input is read, for every output flag; the log is untouched.
#[cfg(unix)]
#[test]
fn an_output_that_is_a_log_of_an_input_folder_is_refused_before_reading() {
    let (dir, log) = scratch();
    let d = dir.path();
    fs::create_dir(d.join("logs")).unwrap();
    fs::rename(d.join("x.log"), d.join("logs/a.log")).unwrap();
    std::os::unix::fs::symlink("a.log", d.join("logs/link.txt")).unwrap();
    std::os::unix::fs::symlink("logs/a.log", d.join("outside.log")).unwrap();
    for flag in ["-o", "--emit-decisions", "--svg"] {
        for path in ["logs/a.log", "logs/link.txt", "outside.log"] {
            // Stdin stays open and empty: reading it would block.
            let mut child = bin()
                .current_dir(d)
                .args(["-", "logs", flag, path])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take();
            let out = wait_or_fail(child, Duration::from_secs(60));
            drop(stdin);
            let e = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{flag} {path}: {e}");
            assert!(
                e.contains(&format!("{flag} {path} is the input logs/a.log")),
                "{flag} {path}: {e}"
            );
            assert_eq!(
                fs::read(d.join("logs/a.log")).unwrap(),
                log,
                "{flag} {path}"
            );
        }
    }
    assert_eq!(names(&d.join("logs")), ["a.log", "link.txt"]);
}
