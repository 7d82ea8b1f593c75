//! Flags that size the work or the output have upper bounds, each
//! rejected with a message naming the flag.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(fixture("balanced/epp.log"))
        .args(args)
        .output()
        .expect("run gate-dist")
}

fn rejected(args: &[&str], says: &[&str]) {
    let out = run(args);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
    for s in says {
        assert!(e.contains(s), "{args:?}: {s:?} not in {e}");
    }
    assert!(out.stdout.is_empty(), "{args:?}: no report");
}

#[test]
fn threads_bins_and_what_if_lists_are_bounded() {
    rejected(
        &["-j", "100000"],
        &["--threads", "100000 threads: give 1 to 256"],
    );
    rejected(&["-j", "0"], &["1 to 256"]);
    rejected(
        &["--bins", "100000000"],
        &["--bins 100000000", "2 to 10000"],
    );
    rejected(&["--bins", "1"], &["2 to 10000"]);
    let many: Vec<String> = (1..=65).map(|i| (i * 100).to_string()).collect();
    rejected(
        &["--what-if-bar", &many.join(",")],
        &["--what-if-bar", "65 values, at most 64"],
    );
    rejected(
        &["--what-if-peak", &many.join(",")],
        &["--what-if-peak", "at most 64"],
    );
    // The bounds themselves are accepted.
    for ok in [
        vec!["-j", "256"],
        vec!["--bins", "10000"],
        vec!["--what-if-bar", &many[..64].join(",")],
    ] {
        let mut a = ok.clone();
        a.extend(["--format", "json"]);
        let out = run(&a);
        assert!(
            out.status.success(),
            "{ok:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn windows_are_bounded_in_length_and_count() {
    rejected(&["--window", "0.1s"], &["--window", "at least 1 s"]);
    // The demo log spans 30 minutes: 1 s windows are 1800 of them.
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(fixture("demo/glm-like.log.gz"))
        .args(["--window", "1s", "--format", "json"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--window 1 s") && e.contains("more than 1000 windows"),
        "{e}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(fixture("demo/glm-like.log.gz"))
        .args(["--window", "5s", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = v["deployments"][0]["windows"].as_array().unwrap().len();
    assert!(
        (300..=1000).contains(&n),
        "{n} windows of 5 s over 30 minutes"
    );
}

/// Numbers that would make a row meaningless are refused when the flags
/// are parsed, with the valid range: `--what-if-peak 1e-320` made every
/// TTFT infinite and dropped every gate decision from its row.
#[test]
fn numeric_flags_are_refused_outside_their_range() {
    for (args, says) in [
        (
            &["--what-if-peak", "4000,1e-320"][..],
            &["--what-if-peak", "from 1 to 1000000000 tok/s"][..],
        ),
        (
            &["--peak-prefill-throughput", "0.5"],
            &["--peak-prefill-throughput", "from 1 to 1000000000"],
        ),
        (
            &["--what-if-bar", "1000,1e300"],
            &["--what-if-bar", "0 to 86400000 ms"],
        ),
        (
            &["--max-ttft-penalty-ms=-1"],
            &["--max-ttft-penalty-ms", "0 to 86400000 ms"],
        ),
        (
            &["--pinned-worse-min", "NaN"],
            &["--pinned-worse-min", "not a finite number"],
        ),
        (
            &["--affinity-threshold", "1.5"],
            &["--affinity-threshold", "from 0 to 1"],
        ),
        (
            &["--max-in-flight-requests-delta=-1"],
            &["--max-in-flight-requests-delta", "0 or more"],
        ),
        (
            &["--what-if", "peakPrefillThroughput=1e-320"],
            &[
                "--what-if peakPrefillThroughput=1e-320",
                "from 1 to 1000000000",
            ],
        ),
    ] {
        rejected(args, says);
    }
    // The ends of the ranges are taken.
    let out = run(&[
        "--what-if-peak",
        "1,1e9",
        "--what-if-bar",
        "0,86400000",
        "--format",
        "json",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Config files are bounded and sniffed before any YAML parse, every
/// refusal naming the file: an alias bomb (which grew to gigabytes), a
/// file one byte over the size bound (sparse: no bytes are written), the
/// demo log (gzip) and a JSON-lines log given as `--config`, a ConfigMap
/// whose config string is not YAML, and a Helm chart template.
#[test]
fn hostile_config_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let mut bomb = String::from("a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 9].join(",")));
    }
    std::fs::write(path("bomb.yaml"), &bomb).unwrap();
    let big = std::fs::File::create(path("big.yaml")).unwrap();
    big.set_len(4 * 1024 * 1024 + 1).unwrap();
    let log = std::fs::read_to_string(fixture("balanced/epp.log")).unwrap();
    std::fs::write(path("epp.log"), log).unwrap();
    std::fs::write(
        path("cm.yaml"),
        "kind: ConfigMap\ndata:\n  default-plugins.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters: {maxTTFTPenaltyMs: [1}\n",
    )
    .unwrap();
    std::fs::write(
        path("chart.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ include \"epp.fullname\" . }}\n",
    )
    .unwrap();
    std::fs::write(
        path("tiny-peak.yaml"),
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {peakPrefillThroughput: 1e-320}\n",
    )
    .unwrap();
    let demo = fixture("demo/glm-like.log.gz")
        .to_string_lossy()
        .into_owned();
    for (file, says) in [
        (
            path("tiny-peak.yaml"),
            "peakPrefillThroughput 1e-320 is outside what gatecal computes with (1 to 1000000000 tok/s)",
        ),
        (path("bomb.yaml"), "aliases (*name) are expanded"),
        (
            path("big.yaml"),
            "4194305 bytes, more than the 4194304 bytes",
        ),
        (demo, "gzip-compressed"),
        (path("epp.log"), "one JSON object per line"),
        (
            path("cm.yaml"),
            "data[\"default-plugins.yaml\"] holds a config as a string, but the string is not valid YAML",
        ),
        (path("chart.yaml"), "render it first (helm template"),
    ] {
        rejected(&["--config", &file], &[&file, says]);
        rejected(&["--candidate-config", &file], &[&file, says]);
    }
}
