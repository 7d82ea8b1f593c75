//! `--compare` and `--compare-at`: before and after a change, as a user
//! runs them.

use gatecal_test_support::docs;

use std::path::Path;
use std::process::{Command, Output};

use gatecal_sim::{Variant, run, scenario};
use serde_json::Value;

fn gate_dist(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .output()
        .expect("run gate-dist")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(o));
    serde_json::from_slice(&o.stdout).expect("one JSON document")
}

fn demo() -> String {
    docs::fixture("demo/glm-like.log.gz")
}

/// The row of `figure` among a deployment's `shares` or `quantiles`.
fn row<'a>(d: &'a Value, kind: &str, figure: &str) -> &'a Value {
    d[kind]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["figure"] == figure)
        .unwrap_or_else(|| panic!("no {kind} row {figure}: {d}"))
}

fn rows(d: &Value) -> impl Iterator<Item = &Value> {
    d["shares"]
        .as_array()
        .unwrap()
        .iter()
        .chain(d["quantiles"].as_array().unwrap())
}

/// The fields of a CSV line (RFC 4180 quoting, no newline in a field).
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

#[test]
fn the_demo_split_in_two_halves_in_every_format() {
    // The demo's decisions run 14:00:00 to 14:29:56 UTC.
    let at = "2026-08-21T14:15:00Z";
    let v = json(&gate_dist(&[
        &demo(),
        "--compare-at",
        at,
        "--format",
        "json",
        "-q",
    ]));
    assert_eq!(v["schema"], "gatecal.compare/v1");
    let (a, b) = (&v["baseline"], &v["candidate"]);
    assert_eq!(a["until"].as_f64(), Some(1_787_321_700.0));
    assert_eq!(b["since"].as_f64(), Some(1_787_321_700.0));
    assert!(a["last_ts"].as_f64().unwrap() < 1_787_321_700.0);
    assert!(b["first_ts"].as_f64().unwrap() >= 1_787_321_700.0);
    assert!(
        a["label"]
            .as_str()
            .unwrap()
            .ends_with("before 2026-08-21T14:15:00Z")
    );
    assert!(
        b["label"]
            .as_str()
            .unwrap()
            .ends_with("from 2026-08-21T14:15:00Z")
    );
    // The halves share out the demo's 1,168 decisions.
    let (na, nb) = (
        a["decisions"].as_u64().unwrap(),
        b["decisions"].as_u64().unwrap(),
    );
    assert_eq!(na + nb, 1168);
    assert!(na > 300 && nb > 300, "{na} {nb}");
    let d = &v["deployments"][0];
    assert_eq!(d["name"], "glm-5-2");
    assert_eq!(d["presence"], "both");
    // The load grows over the demo: the second half is pinned far more
    // often, a difference the test finds.
    let p = row(d, "shares", "pinned_worse.share");
    let (pa, pb) = (
        p["baseline"]["share"].as_f64().unwrap(),
        p["candidate"]["share"].as_f64().unwrap(),
    );
    assert!((p["delta"].as_f64().unwrap() - (pb - pa)).abs() < 1e-12);
    assert!(pb > pa + 0.1, "{p}");
    assert!(p["p_value"].as_f64().unwrap() < 0.001, "{p}");
    assert_eq!(p["significant"], true);
    let [lo, hi] = [0, 1].map(|i| p["interval"][i].as_f64().unwrap());
    assert!(lo > 0.0 && lo < pb - pa && pb - pa < hi, "{p}");
    let q = row(d, "quantiles", "gate_input_ms.p90");
    assert!(
        q["delta"].as_f64().unwrap() > 0.0 && q["significant"] == true,
        "{q}"
    );
    let [lo, hi] = [0, 1].map(|i| q["interval"][i].as_f64().unwrap());
    assert!(lo > 0.0 && lo < hi, "{q}");
    // The counts are the side's own decisions.
    assert_eq!(p["baseline"]["n"].as_u64(), Some(na));
    assert_eq!(p["candidate"]["n"].as_u64(), Some(nb));
    // Deterministic: the same run gives the same document.
    let again = json(&gate_dist(&[
        &demo(),
        "--compare-at",
        at,
        "--format",
        "json",
        "-q",
    ]));
    assert_eq!(v, again);

    // The other formats say the same.
    let table = stdout(&gate_dist(&[
        &demo(),
        "--compare-at",
        at,
        "--format",
        "table",
        "--wide",
        "-q",
    ]));
    for s in [
        "Baseline",
        "Candidate",
        "Before and after, glm-5-2",
        "pinned ≥5,000 ms",
        "gate input p90",
        "observed TTFT p50",
        "p < 0.001",
        "bootstrap",
        "Glossary",
        "significant:",
    ] {
        assert!(table.contains(s), "table lacks {s:?}:\n{table}");
    }
    let md = stdout(&gate_dist(&[
        &demo(),
        "--compare-at",
        at,
        "--format",
        "markdown",
        "-q",
    ]));
    assert!(md.starts_with("## gatecal gate-dist comparison"), "{md}");
    assert!(md.contains("### Before and after, glm-5-2"), "{md}");
    assert!(md.contains("| figure | baseline | candidate | Δ |"), "{md}");
    let csv = stdout(&gate_dist(&[
        &demo(),
        "--compare-at",
        at,
        "--format",
        "csv",
        "-q",
    ]));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[0], "deployment");
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let pinned = fields(
        lines
            .clone()
            .find(|l| l.contains(",pinned_worse.share,"))
            .unwrap(),
    );
    assert_eq!(pinned.len(), header.len());
    assert_eq!(pinned[col("label")], "pinned ≥5,000 ms");
    assert_eq!(pinned[col("kind")], "share");
    assert_eq!(pinned[col("significant")], "true");
    let delta: f64 = pinned[col("delta")].parse().unwrap();
    assert!((delta - (pb - pa)).abs() < 1e-12);
    // One row per figure: 3 shares, 8 what-ifs, 6 quantiles.
    assert_eq!(lines.count(), 17, "{csv}");

    // Relative times count from the input's decisions.
    let rel = json(&gate_dist(&[
        &demo(),
        "--compare-at",
        "end-10m",
        "--format",
        "json",
        "-q",
    ]));
    let (ra, rb) = (
        rel["baseline"]["decisions"].as_u64().unwrap(),
        rel["candidate"]["decisions"].as_u64().unwrap(),
    );
    assert_eq!(ra + rb, 1168);
    assert!(rb < ra, "{ra} {rb}");
}

#[test]
fn the_json_document_is_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.log.gz");
    std::fs::copy(demo(), &copy).unwrap();
    let split = json(&gate_dist(&[
        &demo(),
        "--compare-at",
        "2026-08-21T14:15:00Z",
        "--what-if",
        "maxTTFTPenaltyMs=2000",
        "--format",
        "json",
        "-q",
    ]));
    // Named differently on each side: one deployment each, one-sided.
    let one_sided = json(&gate_dist(&[
        "--compare",
        &format!("old={}", demo()),
        &format!("new={}", copy.display()),
        "--format",
        "json",
        "-q",
    ]));
    let ds = one_sided["deployments"].as_array().unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(
        (&ds[0]["name"], &ds[0]["presence"]),
        (&"new".into(), &"candidate_only".into())
    );
    assert_eq!(
        (&ds[1]["name"], &ds[1]["presence"]),
        (&"old".into(), &"baseline_only".into())
    );
    assert!(ds[0]["baseline"].is_null() && ds[0]["candidate"].is_object());
    for r in rows(&ds[0]) {
        assert!(r["delta"].is_null() && r["significant"] == false, "{r}");
    }
    docs::check_schema("gatecal.compare/v1", &[split, one_sided]);
}

#[test]
fn two_identical_inputs_show_no_significant_difference() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.log.gz");
    std::fs::copy(demo(), &copy).unwrap();
    let v = json(&gate_dist(&[
        "--compare",
        &demo(),
        copy.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]));
    assert_eq!(v["baseline"]["label"], demo());
    let d = &v["deployments"][0];
    assert_eq!(d["presence"], "both");
    let mut n = 0;
    for r in rows(d) {
        n += 1;
        assert_eq!(r["delta"].as_f64(), Some(0.0), "{r}");
        assert_eq!(r["significant"], false, "{r}");
        assert!(r["baseline"] == r["candidate"], "{r}");
    }
    // 3 shares, 8 what-ifs, 6 quantiles.
    assert_eq!(n, 17);
    // One side from stdin.
    let o = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(["--compare", &demo(), "-", "--format", "json", "-q"])
        .stdin(std::fs::File::open(demo()).unwrap())
        .output()
        .unwrap();
    let w = json(&o);
    assert_eq!(w["candidate"]["label"], "-");
    assert_eq!(w["deployments"], v["deployments"]);
}

/// The simulator's glm-like deployment, the same traffic (a paired run)
/// under its own config and under `--set` changes.
fn simulated(dir: &Path, name: &str, set: &[(&str, &str)]) -> String {
    let mut s = scenario("glm-like").unwrap().with_requests(1200);
    for (k, v) in set {
        s.set_filter_param(None, k, v).unwrap();
    }
    let out = run(&s, 5, &Variant::default());
    let p = dir.join(name);
    std::fs::write(&p, &out.epp_log).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn a_lower_bar_in_the_simulator_is_a_significant_change() {
    let dir = tempfile::tempdir().unwrap();
    let before = simulated(dir.path(), "before.log", &[]);
    let after = simulated(dir.path(), "after.log", &[("maxTTFTPenaltyMs", "1000")]);
    let again = simulated(dir.path(), "again.log", &[]);
    let v = json(&gate_dist(&[
        "--compare",
        &before,
        &after,
        "--format",
        "json",
        "-q",
    ]));
    let d = &v["deployments"][0];
    assert_eq!(d["presence"], "both");
    // Each side's config in force is read from its own log.
    assert_eq!(d["baseline"]["max_ttft_penalty_ms"].as_f64(), Some(18000.0));
    assert_eq!(d["candidate"]["max_ttft_penalty_ms"].as_f64(), Some(1000.0));
    let r = row(d, "shares", "released_share");
    let (ra, rb) = (
        r["baseline"]["share"].as_f64().unwrap(),
        r["candidate"]["share"].as_f64().unwrap(),
    );
    assert!(rb > ra + 0.05, "{r}");
    assert_eq!(r["significant"], true, "{r}");
    assert!(r["p_value"].as_f64().unwrap() < 0.001, "{r}");
    assert!(r["z"].as_f64().unwrap() > 3.0, "{r}");
    // Every format shows the released row's delta as significant.
    for (format, row_start, yes) in [
        ("table", "│ released ", "yes"),
        ("markdown", "| released |", "yes"),
        ("csv", ",both,released_share,", ",true,"),
    ] {
        let o = gate_dist(&["--compare", &before, &after, "--format", format, "-q"]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        let text = stdout(&o);
        let line = text
            .lines()
            .find(|l| l.contains(row_start))
            .unwrap_or_else(|| panic!("{format}: no released row:\n{text}"));
        assert!(
            line.contains(yes) && (format == "csv" || line.contains('+')),
            "{format}: {line}"
        );
    }
    // The same traffic under the same config twice: nothing differs.
    let same = json(&gate_dist(&[
        "--compare",
        &before,
        &again,
        "--format",
        "json",
        "-q",
    ]));
    for r in rows(&same["deployments"][0]) {
        assert_eq!(r["significant"], false, "{r}");
        assert_eq!(r["delta"].as_f64(), Some(0.0), "{r}");
    }
    // --fail-if reads the candidate: the report is written, exit 4.
    let o = gate_dist(&[
        "--compare",
        &before,
        &after,
        "--format",
        "json",
        "-q",
        "--fail-if",
        "released_share > 0.05",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("released_share > 0.05"),
        "{}",
        stderr(&o)
    );
    let written: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(written["schema"], "gatecal.compare/v1");
    let o = gate_dist(&[
        "--compare",
        &after,
        &before,
        "--format",
        "json",
        "-q",
        "--fail-if",
        "released_share > 0.05",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let d = demo();
    let cases: [(&[&str], &str); 5] = [
        (&["--compare", "-", "-"], "at most one side is `-`"),
        (
            &["--compare", &d, &d, "--compare-at", "end-1h"],
            "cannot be used with '--compare-at",
        ),
        (
            &[&d, &d, "--compare-at", "end-1h"],
            "--compare-at splits one input",
        ),
        (
            &["--compare", &d, &d, "--window", "1h"],
            "--window cannot be used with --compare",
        ),
        (&["-", "--compare-at", "end-1h"], "standard input cannot be"),
    ];
    for (args, msg) in cases {
        let o = gate_dist(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}
