//! Partial reports: `--emit-partial` leaves the report as it was, `merge`
//! of time shards gives the single run's figures, in any order and
//! grouping, and bad partials are refused naming the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> String {
    root().join("fixtures").join(rel).display().to_string()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .output()
        .expect("run gate-dist")
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

/// The RFC 3339 text of whole seconds since the epoch.
fn rfc3339(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let rem = t.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The log's lines with their `ts`.
fn timed_lines(path: &str) -> Vec<(f64, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["ts"].as_f64()?, format!("{l}\n")))
        })
        .collect()
}

/// Seconds of lines read past a shard's end: the first responses of its
/// last requests (their observed TTFT), not counted.
const TAIL: i64 = 300;

/// Cuts `log` into shards `[cuts[i], cuts[i+1])`, each holding the lines
/// from `warm_up` seconds before its start, runs each with `--since`,
/// `--until` and `--emit-partial`, and returns the partial files.
fn shards(dir: &Path, log: &str, cuts: &[i64], warm_up: i64, extra: &[&str]) -> Vec<String> {
    let lines = timed_lines(log);
    let mut out = Vec::new();
    for (i, w) in cuts.windows(2).enumerate() {
        let (since, until) = (w[0], w[1]);
        let from = (since - warm_up) as f64;
        let text: String = lines
            .iter()
            .filter(|(t, _)| *t >= from && *t < (until + TAIL) as f64)
            .map(|(_, l)| l.as_str())
            .collect();
        let shard = dir.join(format!("shard{i}.log"));
        std::fs::write(&shard, text).unwrap();
        let part = dir.join(format!("shard{i}.part"));
        let mut args = vec![
            shard.to_str().unwrap().to_string(),
            "--since".into(),
            rfc3339(since),
            "--until".into(),
            rfc3339(until),
            "--emit-partial".into(),
            part.to_str().unwrap().to_string(),
            "-q".into(),
            "--format".into(),
            "json".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(run(&refs), "shard run");
        out.push(part.to_str().unwrap().to_string());
    }
    out
}

/// Whole-second cut points over the log's time span: `k` shards.
fn cuts(log: &str, k: i64) -> Vec<i64> {
    let lines = timed_lines(log);
    let first = lines
        .iter()
        .map(|l| l.0)
        .fold(f64::INFINITY, f64::min)
        .floor() as i64;
    let last = lines.iter().map(|l| l.0).fold(0.0, f64::max).floor() as i64 + 1;
    (0..=k).map(|i| first + (last - first) * i / k).collect()
}

#[test]
fn emit_partial_leaves_the_report_unchanged_and_reads_back() {
    for f in [
        "glm-like-v1/epp.log",
        "eight-deployments/epp.log",
        "balanced/epp.log",
    ] {
        let log = fixture(f);
        let plain = ok(run(&[&log, "--format", "json", "-q"]), f);
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("p.part");
        let with = ok(
            run(&[
                &log,
                "--format",
                "json",
                "-q",
                "--emit-partial",
                part.to_str().unwrap(),
            ]),
            f,
        );
        assert_eq!(plain, with, "{f}: --emit-partial changed the report");
        let text = std::fs::read_to_string(&part).unwrap();
        assert!(
            text.ends_with('\n') && text.matches('\n').count() == 1,
            "{f}: one line"
        );
        assert!(
            text.starts_with("{\"schema\":\"gatecal.partial/v1\""),
            "{f}"
        );
        // `-`: the partial alone on stdout, the same bytes.
        let stdout = ok(run(&[&log, "-q", "--emit-partial", "-"]), f);
        assert_eq!(stdout, text, "{f}: --emit-partial - differs from the file");
        // Merged alone, the report is the run's, with `merged` added.
        let mut m = json(&ok(
            run(&["merge", part.to_str().unwrap(), "--format", "json"]),
            f,
        ));
        assert_eq!(m["merged"][0]["source"], part.to_str().unwrap());
        m.as_object_mut().unwrap().remove("merged");
        assert_eq!(
            m,
            json(&plain),
            "{f}: merge of one partial differs from the run"
        );
    }
}

#[test]
fn time_shards_merge_into_the_single_run() {
    let log = fixture("glm-like/epp.log");
    let c = cuts(&log, 3);
    let (since, until) = (rfc3339(c[0]), rfc3339(c[3]));
    let single = json(&ok(
        run(&[
            &log, "--since", &since, "--until", &until, "--format", "json", "-q",
        ]),
        "single",
    ));
    let dir = tempfile::tempdir().unwrap();
    // A warm-up covering the whole history: every figure is exact.
    let parts = shards(dir.path(), &log, &c, 1_000_000, &[]);
    let merged = json(&ok(
        run(&["merge", &parts[2], &parts[0], &parts[1], "--format", "json"]),
        "merge",
    ));
    for k in ["deployments", "overall", "findings", "options"] {
        assert!(
            merged[k] == single[k],
            "{k} differs:\n{}\n{}",
            merged[k],
            single[k]
        );
    }
    assert_eq!(merged["merged"].as_array().unwrap().len(), 3);
    let decisions: u64 = merged["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["decisions"].as_u64().unwrap())
        .sum();
    assert_eq!(decisions, single["overall"]["decisions"].as_u64().unwrap());

    // A short warm-up: counts exact, reconstructed inputs within a bound.
    let dir = tempfile::tempdir().unwrap();
    let parts = shards(dir.path(), &log, &c, 30, &[]);
    let short = json(&ok(
        run(&["merge", dir.path().to_str().unwrap(), "--format", "json"]),
        "merge",
    ));
    for (a, b) in short["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .zip(single["deployments"].as_array().unwrap())
    {
        for k in [
            "decisions",
            "outcomes",
            "evidence",
            "released",
            "self_check",
        ] {
            assert_eq!(a[k], b[k], "{k}");
        }
        assert_eq!(a["gate_input_ms"]["count"], b["gate_input_ms"]["count"]);
    }
    assert_eq!(parts.len(), 3);
}

#[test]
fn any_order_and_grouping_gives_the_same_bytes() {
    let log = fixture("glm-like/epp.log");
    let c = cuts(&log, 3);
    let dir = tempfile::tempdir().unwrap();
    let p = shards(dir.path(), &log, &c, 120, &[]);
    let abc = ok(
        run(&["merge", &p[0], &p[1], &p[2], "--format", "md"]),
        "abc",
    );
    let cba = ok(
        run(&["merge", &p[2], &p[1], &p[0], "--format", "md"]),
        "cba",
    );
    assert_eq!(
        abc.replace(&format!("{} {} {}", p[0], p[1], p[2]), ""),
        cba.replace(&format!("{} {} {}", p[2], p[1], p[0]), "")
    );
    let j1 = ok(
        run(&["merge", &p[0], &p[1], &p[2], "--format", "json"]),
        "abc",
    );
    let j2 = ok(
        run(&["merge", &p[1], &p[2], &p[0], "--format", "json"]),
        "bca",
    );
    assert!(j1 == j2, "the order changed the report");
    // (c + a) + b: a merged partial merges again.
    let ca = dir.path().join("ca.json");
    ok(
        run(&[
            "merge",
            &p[2],
            &p[0],
            "--emit-partial",
            ca.to_str().unwrap(),
            "--format",
            "json",
        ]),
        "ca",
    );
    let j3 = ok(
        run(&["merge", &p[1], ca.to_str().unwrap(), "--format", "json"]),
        "ca+b",
    );
    assert!(j1 == j3, "the grouping changed the report");
    // Standard input, one partial a line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(["merge", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut all = String::new();
    for f in [&p[1], &p[0], &p[2]] {
        all.push_str(&std::fs::read_to_string(f).unwrap());
    }
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), all.as_bytes()).unwrap();
    drop(child.stdin.take());
    let s = json(&ok(child.wait_with_output().unwrap(), "stdin"));
    let f = json(&j1);
    assert!(s["deployments"] == f["deployments"], "stdin");
    let sources: Vec<&str> = s["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources,
        ["-:2", "-:1", "-:3"],
        "sorted by time, named by line"
    );
}

fn err(out: Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_partials_are_refused_naming_the_file() {
    let log = fixture("glm-like/epp.log");
    let c = cuts(&log, 2);
    let dir = tempfile::tempdir().unwrap();
    let p = shards(dir.path(), &log, &c, 60, &[]);
    let text = std::fs::read_to_string(&p[0]).unwrap();

    let cut = dir.path().join("cut.part");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let e = err(run(&["merge", &p[1], cut.to_str().unwrap()]));
    assert!(e.contains("cut.part") && e.contains("cut short"), "{e}");

    let other = dir.path().join("v9.part");
    std::fs::write(
        &other,
        text.replace("gatecal.partial/v1", "gatecal.partial/v9"),
    )
    .unwrap();
    let e = err(run(&["merge", &p[1], other.to_str().unwrap()]));
    assert!(
        e.contains("v9.part") && e.contains("gatecal.partial/v9"),
        "{e}"
    );

    let e = err(run(&["merge", &p[0], &p[1], &p[0]]));
    assert!(
        e.contains("counted twice") && e.contains("shard0.part"),
        "{e}"
    );

    // The second shard run with another bar: another config in force.
    let sub = dir.path().join("bar");
    std::fs::create_dir(&sub).unwrap();
    let q = shards(&sub, &log, &c, 60, &["--max-ttft-penalty-ms", "5000"]);
    let e = err(run(&["merge", &p[0], &q[1]]));
    assert!(
        e.contains("another config") && e.contains("maxTTFTPenaltyMs"),
        "{e}"
    );

    // Other options: refused, naming the option.
    let sub = dir.path().join("pin");
    std::fs::create_dir(&sub).unwrap();
    let r = shards(&sub, &log, &c, 60, &["--pinned-worse-min", "2000"]);
    let e = err(run(&["merge", &p[0], &r[1]]));
    assert!(
        e.contains("pinned_worse_min_ms") && e.contains("other options"),
        "{e}"
    );

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = err(run(&["merge", empty.to_str().unwrap()]));
    assert!(e.contains("without partial reports"), "{e}");
    let e = err(run(&["merge", log.as_str()]));
    assert!(e.contains("epp.log") && e.contains("not"), "{e}");
}

#[test]
fn plan_prints_aligned_shards_with_their_warm_up() {
    let log = fixture("glm-like/epp.log");
    let out = ok(
        run(&["plan", "--window", "10m", "--warm-up", "2m", &log]),
        "plan",
    );
    let rows: Vec<serde_json::Value> = out.lines().map(json).collect();
    assert!(!rows.is_empty());
    for r in &rows {
        let since = r["since"].as_str().unwrap();
        assert!(since.ends_with("0:00Z"), "{since}");
        assert_eq!(r["input"], log.as_str());
        assert!(r["read_from"].as_str().unwrap() < since);
    }
    for w in rows.windows(2) {
        assert_eq!(w[0]["until"], w[1]["since"], "consecutive windows");
    }
    let e = err(run(&["plan", "--window", "1.5s", &log]));
    assert!(e.contains("whole seconds"), "{e}");
}

fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gate-dist");
    let mut stdin = child.stdin.take().unwrap();
    let bytes = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().ok();
    out
}

/// The streams of a partial's only part.
fn streams(partial: &str) -> Vec<String> {
    let v = json(partial);
    v["parts"][0]["streams"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// A kubelet (CRI) log read from its file names its EPP pod from the
/// path; piped on stdin the path is lost, and `--source-path` gives it
/// back. Lines that name no pod are one stream per input: two files over
/// the same time merge, the same file twice is refused naming it.
#[test]
fn source_path_names_stdin_and_unnamed_inputs_are_their_own_streams() {
    let dir = std::env::temp_dir().join(format!("gatecal-source-path-{}", std::process::id()));
    let pod_dir = dir.join("llm_glm-epp-7c9d8-xk2lp_0b1c7e/epp");
    std::fs::create_dir_all(&pod_dir).unwrap();
    let plain = std::fs::read_to_string(fixture("glm-like/epp.log")).unwrap();
    let mut cri = String::new();
    for l in plain.lines() {
        cri.push_str("2026-08-21T14:00:00.000000000Z stdout F ");
        cri.push_str(l);
        cri.push('\n');
    }
    let cri_path = pod_dir.join("0.log");
    std::fs::write(&cri_path, &cri).unwrap();
    let cri_path = cri_path.to_str().unwrap();

    let from_file = ok(run(&["--emit-partial", "-", cri_path]), "CRI file");
    let file_streams = streams(&from_file);
    assert_eq!(file_streams.len(), 1);
    assert!(
        file_streams[0].ends_with("/glm-epp-7c9d8-xk2lp"),
        "{file_streams:?}"
    );
    let piped = ok(
        with_stdin(&["--emit-partial", "-", "-"], cri.as_bytes()),
        "CRI on stdin",
    );
    let piped_streams = streams(&piped);
    assert_eq!(piped_streams.len(), 1);
    assert!(piped_streams[0].ends_with('/'), "{piped_streams:?}");
    let named = ok(
        with_stdin(
            &["--emit-partial", "-", "--source-path", cri_path, "-"],
            cri.as_bytes(),
        ),
        "CRI on stdin with --source-path",
    );
    assert_eq!(streams(&named), file_streams);
    assert_eq!(
        json(&named)["parts"][0]["inputs"],
        json(&from_file)["parts"][0]["inputs"]
    );
    // The report is the file's.
    let report = |o: Output| {
        let mut v = json(&ok(o, "report"));
        v.as_object_mut().unwrap().remove("input");
        v
    };
    assert_eq!(
        report(with_stdin(
            &["--format", "json", "--source-path", cri_path, "-"],
            cri.as_bytes()
        )),
        report(run(&["--format", "json", cri_path]))
    );
    // --source-path without stdin among the inputs is an error.
    let out = run(&["--source-path", cri_path, cri_path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--source-path"));

    // Plain captures: a stream per input.
    let parts = dir.join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    for pod in ["a", "b"] {
        // Another pod's requests: other ids.
        let lines = plain.replace("\"x-request-id\":\"", &format!("\"x-request-id\":\"{pod}"));
        let p = parts.join(format!("{pod}.part"));
        let out = with_stdin(
            &[
                "--emit-partial",
                p.to_str().unwrap(),
                "-o",
                "/dev/null",
                "--source-path",
                &format!("captures/epp-{pod}.log"),
                "-",
            ],
            lines.as_bytes(),
        );
        ok(out, "plain capture");
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            streams(&text),
            [format!("glm-5-2/input:captures/epp-{pod}.log")]
        );
    }
    let merged = json(&ok(
        run(&["merge", parts.to_str().unwrap(), "--format", "json"]),
        "two inputs",
    ));
    let single = json(&ok(
        run(&["--format", "json", &fixture("glm-like/epp.log")]),
        "single",
    ));
    assert_eq!(
        merged["deployments"][0]["decisions"].as_u64().unwrap(),
        2 * single["deployments"][0]["decisions"].as_u64().unwrap()
    );
    let a = parts.join("a.part");
    let a = a.to_str().unwrap();
    let out = run(&["merge", a, a]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("read from captures/epp-a.log"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
