//! The Spark job of `contrib/spark`: its shard cutting (Python's unit
//! tests, which need only `python3`), and the whole job in Spark's local
//! mode over the demo cut into 8 shards, against a single run. The Spark
//! test needs a Python with `pyspark` (`GATECAL_PYSPARK_PYTHON`, else
//! `python3` when it imports `pyspark`) and Java; without them it says it
//! skipped, and passes. `.ci/run` installs `pyspark` in a virtual
//! environment and sets `GATECAL_PYSPARK_PYTHON`, so CI runs it.
#![cfg(unix)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap()
}

fn contrib() -> PathBuf {
    root().join("contrib/spark")
}

/// Whether `python -c CODE` runs and exits 0.
fn python_runs(python: &str, code: &str) -> bool {
    Command::new(python)
        .args(["-c", code])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn shard_cutting_unit_tests() {
    let python = std::env::var("GATECAL_PYSPARK_PYTHON").unwrap_or_else(|_| "python3".into());
    if !python_runs(&python, "import sys; assert sys.version_info >= (3, 9)") {
        eprintln!(
            "no Python 3.9 or later ({python}): the unit tests of contrib/spark \
             are skipped"
        );
        return;
    }
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-s"])
        .arg(contrib())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // unittest prints "Ran N tests" on stderr: every test ran.
    let ran: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no test count in:\n{err}"));
    assert!(ran >= 10, "only {ran} tests ran:\n{err}");
}

/// The Python to run the job with, or why the Spark test is skipped.
/// `GATECAL_PYSPARK_PYTHON` asks for the test: then a Python without
/// `pyspark`, or no Java, is a failure, not a skip.
fn spark_python() -> Result<String, String> {
    let asked = std::env::var("GATECAL_PYSPARK_PYTHON").ok();
    let python = asked.clone().unwrap_or_else(|| "python3".into());
    let why = if !python_runs(&python, "import pyspark") {
        format!("{python} does not import pyspark")
    } else if !java_runs() {
        "no Java (`java -version` fails; Spark needs Java 17)".to_string()
    } else {
        return Ok(python);
    };
    match asked {
        Some(_) => panic!("GATECAL_PYSPARK_PYTHON is set, but {why}"),
        None => Err(why),
    }
}

fn java_runs() -> bool {
    let java = std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .unwrap_or_else(|| "java".into());
    Command::new(java)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd` to its end, killing it after `limit`.
fn run_with_limit(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain both pipes on threads, so a chatty Spark never blocks on them.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        out.read_to_end(&mut b).map(|_| b)
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        err.read_to_end(&mut b).map(|_| b)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = t_err.join().unwrap().unwrap_or_default();
            panic!(
                "the Spark job ran over {limit:?}; its stderr:\n{}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    Output {
        status,
        stdout: t_out.join().unwrap().unwrap(),
        stderr: t_err.join().unwrap().unwrap(),
    }
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}):\n{}",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// The demo cut into 8 windows of 4 minutes, each with a warm-up of 30
/// minutes (all the log before it, so that the reconstruction starts where
/// a single run's is: contrib/spark/README.md measures shorter ones) and a
/// tail of 5 minutes (every observed first token), run by Spark in local
/// mode and merged: the single run's report, but for the input ledger.
#[test]
fn spark_local_mode_over_8_shards_matches_a_single_run() {
    let python = match spark_python() {
        Ok(p) => p,
        Err(why) => {
            eprintln!(
                "{why}: the Spark test is skipped (set GATECAL_PYSPARK_PYTHON to a \
                 Python with pyspark; .ci/run does)"
            );
            return;
        }
    };
    let demo = root().join("fixtures/demo/glm-like.log.gz");
    let single = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(&demo)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(single.status.success());
    let single = json(&single.stdout);

    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&python);
    cmd.arg(contrib().join("gatecal_spark.py"))
        .args(["--master", "local[2]", "--binary"])
        .arg(env!("CARGO_BIN_EXE_gate-dist"))
        .args(["--window", "4m", "--warm-up", "30m", "--tail", "5m"])
        .arg(&demo)
        .args(["--", "--format", "json"])
        .current_dir(work.path())
        .env("PYSPARK_PYTHON", &python)
        .env("PYSPARK_DRIVER_PYTHON", &python)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .env("SPARK_LOCAL_DIRS", work.path());
    let out = run_with_limit(cmd, Duration::from_secs(900));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Spark job failed:\n{err}");
    // The job's summary: the demo's 30 minutes in 8 windows of 4 minutes,
    // and how many lines the shards hold between them.
    let summary = err
        .lines()
        .find_map(|l| l.split("gatecal-spark: 1 file, 8 shards of ").nth(1))
        .unwrap_or_else(|| panic!("no summary of 1 file in 8 shards:\n{err}"));
    let (lines, rest) = summary.split_once(" lines ").unwrap();
    assert!(
        rest.starts_with("(window 240 s, warm-up 1800 s, tail 300 s)"),
        "{summary}"
    );
    let lines: u64 = lines.parse().unwrap();
    let merged = json(&out.stdout);
    same_but_the_ledger(&single, merged, lines);
}

/// `merged` is `single`, but for what only a merge has: the input ledger
/// sums the shards' (each read on stdin, named by the file it was cut
/// from with `--source-path`, and the lines of a warm-up or a tail are
/// read by two shards or more), and the partials merged are listed.
fn same_but_the_ledger(single: &Value, mut merged: Value, lines_cut: u64) {
    let m = merged.as_object_mut().unwrap();
    let parts = m
        .remove("merged")
        .expect("a merged report lists its partials");
    let input = m.remove("input").unwrap();
    let mut single = single.clone();
    let single_input = single.as_object_mut().unwrap().remove("input").unwrap();

    // The ledger: 8 runs over stdin, each named by the file (the URI
    // Spark read), every line the job cut read, each line of the log read
    // at least once, none malformed.
    let inputs = input["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 8, "{inputs:?}");
    assert!(
        inputs.iter().all(|i| i == &inputs[0]
            && i.as_str()
                .unwrap()
                .ends_with("/fixtures/demo/glm-like.log.gz")),
        "{inputs:?}"
    );
    assert_eq!(input["lines_total"], lines_cut);
    assert!(lines_cut > single_input["lines_total"].as_u64().unwrap());
    assert_eq!(input["lines_malformed"], 0);
    assert_eq!(input["lines_out_of_range"], 0);

    // The partials: 8 windows of 240 s one after the other, the first
    // open at its start and the last at its end, counting every decision.
    let parts = parts.as_array().unwrap();
    assert_eq!(parts.len(), 8, "{parts:?}");
    assert!(parts[0]["since"].is_null() && parts[7]["until"].is_null());
    for w in parts.windows(2) {
        assert_eq!(w[0]["until"], w[1]["since"], "{w:?}");
    }
    for p in &parts[1..7] {
        assert_eq!(
            p["until"].as_f64().unwrap() - p["since"].as_f64().unwrap(),
            240.0
        );
    }
    let decisions: u64 = parts.iter().map(|p| p["decisions"].as_u64().unwrap()).sum();
    assert_eq!(decisions, 1168);

    // Everything else, byte for byte.
    let mut diffs = Vec::new();
    differences("", &single, &merged, &mut diffs);
    assert!(
        diffs.is_empty(),
        "the merged report differs from the single run's at {} places:\n{}",
        diffs.len(),
        diffs[..diffs.len().min(30)].join("\n")
    );
}

/// The paths at which two JSON values differ, with both values.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(&p, u, v, out),
                    (u, v) => out.push(format!("{p}: {u:?} | {v:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), u, v, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} | {b}")),
        _ => {}
    }
}
