//! The Spark job of `contrib/spark`: its shard cutting (Python's unit
//! tests, which need only `python3`), and the whole job in Spark's local
//! mode over the demo cut into 8 shards, against a single run. The Spark
//! test needs a Python with `pyspark` (`GATECAL_PYSPARK_PYTHON`, else
//! `python3` when it imports `pyspark`) and Java; without them it says it
//! skipped, and passes. `.ci/run` installs `pyspark` in a virtual
//! environment and sets `GATECAL_PYSPARK_PYTHON`, so CI runs it.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
