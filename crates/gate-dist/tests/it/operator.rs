//! What an operator meets around the report: the README's demo, output
//! plumbing, time ranges, the installed-CLI niceties.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gate-dist"));
    c.stdin(Stdio::null());
    c
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(p: &str) -> String {
    root()
        .join("fixtures")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run gate-dist")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_readme_demo_is_thirty_minutes_of_traffic() {
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        &fixture("demo/glm-like.log.gz"),
        "--format",
        "json",
    ])))
    .unwrap();
    let d = &v["deployments"][0];
    let span = d["last_ts"].as_f64().unwrap() - d["first_ts"].as_f64().unwrap();
    assert!((1700.0..=1800.0).contains(&span), "{span} s");
    assert_eq!(d["decisions"], 1168);
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("30 minutes of simulated\ntraffic, 1,168 decisions"));
}

/// Every `kubectl logs` capture the docs show keeps whole logs and selects
/// the EPP pods by one label.
#[test]
fn the_documented_captures_keep_whole_logs() {
    let mut selectors = Vec::new();
    for doc in ["README.md", "docs/usage.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let joined = text.replace("\\\n", " ");
        let captures: Vec<&str> = joined
            .lines()
            .filter(|l| l.trim_start().starts_with("kubectl logs -l"))
            .collect();
        assert!(!captures.is_empty(), "{doc}");
        for c in captures {
            assert!(c.contains("--tail=-1"), "{doc}: {c}");
            assert!(
                c.contains("--prefix") && c.contains("--timestamps"),
                "{doc}: {c}"
            );
            let sel = c.split_whitespace().nth(3).unwrap().to_string();
            selectors.push(sel);
        }
        assert!(text.contains("router.epp.flags"), "{doc}");
    }
    selectors.dedup();
    assert_eq!(selectors, ["llm-d-router-gateway=<release>-epp"]);
}

/// Runs `cmd` (a shell command line) under a pseudo-terminal of `cols`
/// columns with `script` (util-linux), typing `input` into it; returns what
/// the terminal showed, or None when `script` is not installed.
fn in_terminal(cmd: &str, cols: u16, input: &[u8]) -> Option<String> {
    use std::io::Write;
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("no `script` (util-linux): terminal checks skipped");
        return None;
    }
    let inner = format!("stty cols {cols} rows 50; {cmd}");
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    // Exit 3: the command ran and found no decision (an empty or
    // decision-less input).
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"))
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_gate-dist")
}

#[test]
fn stdin_on_a_terminal_says_it_is_waiting() {
    // Ctrl-D ends the terminal's input at once.
    let Some(screen) = in_terminal(&format!("{} - --format json", exe()), 100, b"\x04") else {
        return;
    };
    assert!(
        screen.contains("reading logs from stdin, which is this terminal"),
        "{screen}"
    );
    assert!(screen.contains("Ctrl-D"));
    // Coloured on a terminal.
    assert!(screen.contains("\x1b[1;36mnote:\x1b[0m"), "{screen:?}");
    // Not when stdin is piped, nor coloured when NO_COLOR is set.
    let out = bin().arg("-").output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("reading logs from stdin"));
    let Some(plain) = in_terminal(
        &format!("NO_COLOR=1 {} - --format json", exe()),
        100,
        b"\x04",
    ) else {
        return;
    };
    assert!(plain.contains("gate-dist: note: reading logs"), "{plain:?}");
}

#[test]
fn warnings_are_coloured_only_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "no decisions here\n").unwrap();
    let out = run(&[empty.to_str().unwrap(), "--format", "json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        err.contains("gate-dist: error: no filter decisions"),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "{err:?}");
    let Some(screen) = in_terminal(
        &format!("{} {} --format json", exe(), empty.display()),
        100,
        b"",
    ) else {
        return;
    };
    assert!(screen.contains("\x1b[1;31merror:\x1b[0m"), "{screen:?}");
    // A warning: a flag that disagrees with the bar the log shows.
    let log = fixture("glm-like-v1/epp.log");
    let args = [
        log.as_str(),
        "--format",
        "json",
        "--max-ttft-penalty-ms",
        "18000",
    ];
    let err = String::from_utf8_lossy(&run(&args).stderr).into_owned();
    assert!(err.contains("gate-dist: warning: "), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    let Some(screen) = in_terminal(&format!("{} {}", exe(), args.join(" ")), 100, b"") else {
        return;
    };
    assert!(screen.contains("\x1b[1;33mwarning:\x1b[0m"), "{screen:?}");
}

#[test]
fn generate_completions_and_man_page() {
    for (kind, want) in [
        ("complete-bash", "--what-if-bar"),
        ("complete-zsh", "#compdef gate-dist"),
        ("complete-fish", "complete -c gate-dist -l what-if-bar"),
        ("man", ".TH gate-dist 1"),
    ] {
        let text = ok(&run(&["--generate", kind]));
        assert!(text.contains(want), "{kind}: {text}");
    }
    let out = run(&["--generate", "complete-powershell"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn short_and_long_help_and_version() {
    let short = ok(&run(&["-h"]));
    let long = ok(&run(&["--help"]));
    assert!(short.len() < long.len());
    assert!(!short.contains("Examples:") && short.contains("gate-dist --help"));
    assert!(long.contains("Examples:") && long.contains("--tail=-1"));
    assert!(long.contains("--generate") && !short.contains("--generate"));
    let v = ok(&run(&["--version"]));
    assert!(
        v.starts_with(&format!("gate-dist {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // Built from a git checkout: the commit is named.
    if let Ok(o) = Command::new("git")
        .args(["rev-parse", "--short=9", "HEAD"])
        .current_dir(root())
        .output()
        && o.status.success()
    {
        let commit = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(v.contains(&format!("({commit})")), "{v} vs {commit}");
    }
}

#[test]
fn progress_on_a_terminal_for_long_inputs_only() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.log");
    // 9.6 MB of lines that are not EPP lines: above the bar's threshold.
    std::fs::write(&big, "not an EPP line\n".repeat(600_000)).unwrap();
    let Some(screen) = in_terminal(
        &format!("{} {} -j1 --format csv", exe(), big.display()),
        100,
        b"",
    ) else {
        return;
    };
    assert!(screen.contains("/9.16 MiB ("), "{screen:?}");
    assert!(
        screen.contains("%), ") && screen.contains("ETA"),
        "{screen:?}"
    );
    // Cleared (erase line) before the report.
    let bar_at = screen.find("MiB (").unwrap();
    let report_at = screen.find("deployment,").unwrap();
    assert!(screen[bar_at..report_at].contains("\x1b[2K"), "{screen:?}");
    // A small input: no bar.
    let small = dir.path().join("small.log");
    std::fs::write(&small, "not an EPP line\n".repeat(1000)).unwrap();
    let Some(screen) = in_terminal(
        &format!("{} {} --format csv", exe(), small.display()),
        100,
        b"",
    ) else {
        return;
    };
    assert!(
        !screen.contains("KiB") && !screen.contains("ETA"),
        "{screen:?}"
    );
    // Not in a pipe, nor with --quiet.
    let out = run(&[big.to_str().unwrap(), "--format", "csv"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("MiB"));
    let Some(screen) = in_terminal(
        &format!("{} {} -q -j1 --format csv", exe(), big.display()),
        100,
        b"",
    ) else {
        return;
    };
    assert!(!screen.contains("MiB"), "{screen:?}");
}

fn width(line: &str) -> usize {
    line.chars().count()
}

#[test]
fn tables_fit_a_100_column_terminal() {
    let demo = fixture("glm-like/epp.log");
    let Some(screen) = in_terminal(&format!("{} {demo}", exe()), 100, b"") else {
        return;
    };
    assert!(screen.contains("Gate input and releases"), "{screen}");
    for line in screen.lines() {
        assert!(
            width(line) <= 100,
            "{} columns: {line}\n{screen}",
            width(line)
        );
    }
    // Words whole: the deployment, the pinned header and a share.
    for word in ["glm-5-2", "≥5,000", "request_load_override", "self-check"] {
        assert!(screen.contains(word), "{word}\n{screen}");
    }
    // --wide: the full table, wider than the terminal.
    let Some(wide) = in_terminal(&format!("{} {demo} --wide", exe()), 100, b"") else {
        return;
    };
    assert!(wide.lines().any(|l| width(l) > 100), "{wide}");
    // A pipe gets the full width too.
    let piped = ok(&run(&[&demo, "--format", "table"]));
    let widest = piped.lines().map(width).max().unwrap();
    assert!(widest > 100, "{widest}");
    assert_eq!(
        piped.lines().filter(|l| l.contains("glm-5-2 ")).count(),
        wide.lines().filter(|l| l.contains("glm-5-2 ")).count()
    );
}

#[test]
fn the_output_name_picks_the_format() {
    let dir = tempfile::tempdir().unwrap();
    let demo = fixture("glm-like/epp.log");
    let o = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    for (name, starts) in [
        ("r.md", "## gatecal gate-dist report"),
        ("r.csv", "# gatecal gate-dist report."),
        ("r.json", "{"),
        ("r.txt", "Summary\n  Deployments: 1 (glm-5-2)\n"),
    ] {
        ok(&run(&[&demo, "-o", &o(name)]));
        let text = std::fs::read_to_string(o(name)).unwrap();
        assert!(text.starts_with(starts), "{name}: {}", &text[..80]);
    }
    // --format agrees with the name: fine; contradicts it: an error, no file.
    ok(&run(&[&demo, "--format", "md", "-o", &o("a.md")]));
    let out = run(&[&demo, "--format", "json", "-o", &o("b.md")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--format json") && err.contains("markdown file"),
        "{err}"
    );
    assert!(!dir.path().join("b.md").exists());
    // A bare format name as the file: a hint.
    let out = bin()
        .current_dir(dir.path())
        .args([&demo, "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use --format json"), "{err}");
    assert!(!dir.path().join("json").exists());
}

/// Runs gate-dist with stdout read up to its first line, then closed.
fn closed_after_one_line(args: &[&str]) -> Output {
    use std::io::{BufRead, BufReader};
    let mut child = bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty());
    child.wait_with_output().unwrap()
}

#[test]
fn decisions_to_stdout_and_closed_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let r = report.to_str().unwrap();
    // Several samples: their records are more than a pipe holds.
    let logs: Vec<String> = [
        "glm-like",
        "glm-like-v1",
        "balanced",
        "eight-deployments",
        "pd-disagg",
        "latency-predictor",
    ]
    .iter()
    .map(|s| fixture(&format!("{s}/epp.log")))
    .collect();
    let with = |extra: &[&str]| -> Vec<String> {
        logs.iter()
            .cloned()
            .chain(extra.iter().map(|s| s.to_string()))
            .collect()
    };
    // Decisions on stdout, the report to its file.
    let args = with(&["--emit-decisions", "-", "-o", r]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let records = ok(&run(&args));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let decisions = v["overall"]["decisions"].as_u64().unwrap();
    assert_eq!(records.lines().count() as u64, decisions);
    assert!(records.len() > 128 * 1024, "{}", records.len());
    assert!(records.lines().all(|l| l.starts_with('{')));
    // Both to stdout: an error that says what to do.
    let out = run(&[&logs[0], "--emit-decisions", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give one of them a file"));
    // A reader that stops after one line: exit 0, nothing on stderr, on
    // every output; the report file is still written in full.
    std::fs::remove_file(&report).unwrap();
    let emit = with(&["--emit-decisions", "-", "-o", r]);
    let csv = with(&["--format", "csv", "--window", "5m"]);
    let table = with(&["--format", "table"]);
    let owned = [emit, csv, table];
    let mut cases: Vec<Vec<&str>> = owned
        .iter()
        .map(|v| v.iter().map(String::as_str).collect())
        .collect();
    cases.push(vec!["--generate", "man"]);
    cases.push(vec!["--generate", "complete-bash"]);
    cases.push(vec!["--help"]);
    for args in cases {
        let out = closed_after_one_line(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(again["overall"], v["overall"]);
}

fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines().skip_while(|l| l.starts_with('#'));
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    // The findings' rows come first (their texts quoted).
    let rows: Vec<Vec<String>> = lines
        .skip_while(|l| l.split(',').nth(3) == Some("finding"))
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{r:?}");
    }
    (header, rows)
}

#[test]
fn csv_is_one_long_table_with_windows_and_what_ifs() {
    let log = fixture("glm-like/epp.log");
    let (h1, rows) = csv_rows(&ok(&run(&[&log, "--format", "csv", "--window", "30s"])));
    // The columns do not depend on the what-if list or the windows.
    let (h2, _) = csv_rows(&ok(&run(&[
        &log,
        "--format",
        "csv",
        "--what-if-bar",
        "7000",
        "--what-if-peak",
        "3000,9000",
    ])));
    assert_eq!(h1, h2);
    let col = |name: &str| h1.iter().position(|h| h == name).unwrap();
    let (dep, ws, rule, bar, dec) = (
        col("deployment"),
        col("window_start"),
        col("rule"),
        col("rule_max_ttft_penalty_ms"),
        col("decisions"),
    );
    // Whole-input rows, then window rows (RFC 3339 starts), then overall.
    let whole: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[dep] == "glm-5-2" && r[ws].is_empty() && r[rule] == "in_force")
        .collect();
    assert_eq!(whole.len(), 1);
    let windows: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[dep] == "glm-5-2" && !r[ws].is_empty() && r[rule] == "in_force")
        .collect();
    assert!(windows.len() >= 2, "{}", windows.len());
    for w in &windows {
        assert!(w[ws].len() == 20 && w[ws].ends_with('Z'), "{}", w[ws]);
    }
    // The windows' decisions add up to the whole.
    let sum: u64 = windows.iter().map(|w| w[dec].parse::<u64>().unwrap()).sum();
    assert_eq!(sum, whole[0][dec].parse::<u64>().unwrap());
    // One row per what-if, for the whole input and each window.
    let static_5s = rows
        .iter()
        .filter(|r| r[dep] == "glm-5-2" && r[rule] == "static" && r[bar] == "5000")
        .count();
    assert_eq!(static_5s, 1 + windows.len());
    assert!(
        rows.iter()
            .any(|r| r[dep] == "overall" && r[rule] == "matchedTokens")
    );
}

fn records(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn since_and_until_count_a_time_range_after_a_warm_up() {
    let log = fixture("glm-like/epp.log");
    let report = |extra: &[&str]| -> (serde_json::Value, Vec<serde_json::Value>) {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("r.json");
        let mut args = vec![log.as_str(), "--emit-decisions", "-", "-o"];
        args.push(r.to_str().unwrap());
        args.extend(extra);
        let out = run(&args);
        // (No decision in range may be reported as such by the exit code.)
        let recs = records(&String::from_utf8_lossy(&out.stdout));
        let v = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
        (v, recs)
    };
    let (all, all_recs) = report(&[]);
    assert_eq!(
        all_recs.len() as u64,
        all["overall"]["decisions"].as_u64().unwrap()
    );
    let cut = "2026-08-21T14:27:30Z";
    let cut_ts = 1_787_322_450.0;
    let (late, late_recs) = report(&["--since", cut]);
    let (early, _) = report(&["--until", cut]);
    let n = |v: &serde_json::Value| v["overall"]["decisions"].as_u64().unwrap();
    assert!(n(&late) > 0 && n(&early) > 0);
    assert_eq!(n(&late) + n(&early), n(&all));
    assert!(late["deployments"][0]["first_ts"].as_f64().unwrap() >= cut_ts);
    assert!(early["deployments"][0]["last_ts"].as_f64().unwrap() < cut_ts);
    assert_eq!(late["options"]["since"].as_f64(), Some(cut_ts));
    // The decisions counted are analysed exactly as in the whole run: the
    // earlier lines warmed the reconstruction up.
    let tail: Vec<&serde_json::Value> = all_recs
        .iter()
        .filter(|r| r["ts"].as_f64().unwrap() >= cut_ts)
        .collect();
    assert_eq!(tail.len(), late_recs.len());
    for (a, b) in tail.iter().zip(&late_recs) {
        assert_eq!(*a, b);
    }
    // Durations count back from now: the capture is older than an hour.
    let (none, _) = report(&["--since", "1h"]);
    assert_eq!(n(&none), 0);
    let (every, _) = report(&["--since", "100000h"]);
    assert_eq!(n(&every), n(&all));
    // Bad times and an empty range are usage errors.
    for bad in [
        vec!["--since", "yesterday"],
        vec!["--since", cut, "--until", cut],
    ] {
        let mut args = vec![log.as_str()];
        args.extend(bad.iter().copied());
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn markdown_opens_with_a_summary_and_embeds_the_svg() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::create_dir_all(dir.path().join("img")).unwrap();
    let log = fixture("glm-like/epp.log");
    let out = bin()
        .current_dir(dir.path())
        .args([
            log.as_str(),
            "--window",
            "30s",
            "-o",
            "docs/report.md",
            "--svg",
            "img/gate.svg",
        ])
        .output()
        .unwrap();
    ok(&out);
    let md = std::fs::read_to_string(dir.path().join("docs/report.md")).unwrap();
    let head: Vec<&str> = md.lines().take(14).collect();
    let version = ok(&run(&["--version"]));
    let version = version.trim().trim_start_matches("gate-dist ");
    for want in [
        "| Deployments | 1 (glm-5-2) |",
        "| Time range (UTC) | 2026-08-21T",
        "| Decisions | ",
        "| Released | ",
        "| Pinned, gate input in [5,000 ms, bar] | ",
        "| Config | ",
        &format!("| gatecal | {version} |"),
        "| Command | `gate-dist ",
    ] {
        assert!(head.iter().any(|l| l.starts_with(want)), "{want}\n{md}");
    }
    assert!(md.contains("-o docs/report.md --svg img/gate.svg`"), "{md}");
    // The SVG, linked from the report's folder.
    assert!(md.contains("](../img/gate.svg)"), "{md}");
    assert!(dir.path().join("img/gate.svg").exists());
    // Long sections folded; the main tables not.
    for s in ["What if", "Per window", "Gate input histogram: glm-5-2"] {
        assert!(md.contains(&format!("<details><summary>{s}")), "{s}\n{md}");
    }
    assert!(md.contains("### Gate input and releases"));
    assert_eq!(
        md.matches("<details>").count(),
        md.matches("</details>").count()
    );
    // Text left, numbers right.
    let table = md
        .lines()
        .skip_while(|l| !l.starts_with("| deployment | decisions | released"))
        .nth(1)
        .unwrap();
    assert!(table.starts_with("| :--- | ---: | ---: |"), "{table}");
    let rules = md
        .lines()
        .skip_while(|l| !l.starts_with("| deployment | config | rule |"))
        .nth(1)
        .unwrap();
    assert!(
        rules.starts_with("| :--- | :--- | :--- | ---: |"),
        "{rules}"
    );
}

#[test]
fn svgs_have_a_legend_and_say_when_bars_differ() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("a.yaml");
    std::fs::write(
        &cfg,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 5000}\n",
    )
    .unwrap();
    let a = format!("a={}", fixture("glm-like/epp.log"));
    let b = format!("b={}", fixture("balanced/epp.log"));
    let svg = dir.path().join("g.svg");
    let r = dir.path().join("r.json");
    ok(&run(&[
        &a,
        &b,
        "--config",
        &format!("a={}", cfg.display()),
        "--svg",
        svg.to_str().unwrap(),
        "--svg-scale",
        "log",
        "-o",
        r.to_str().unwrap(),
    ]));
    let all = std::fs::read_to_string(&svg).unwrap();
    assert!(all.contains("bars differ (a 5,000, b 18,000 ms)"), "{all}");
    assert!(
        !all.contains("maxTTFTPenaltyMs"),
        "no bar line in the overall SVG"
    );
    assert!(all.contains("decisions (log scale)"));
    let one = std::fs::read_to_string(dir.path().join("g-a.svg")).unwrap();
    // Bar at the pinned edge: both named in the legend, once each.
    assert_eq!(one.matches("bar (maxTTFTPenaltyMs) 5,000 ms").count(), 1);
    assert_eq!(one.matches("pinned-worse edge 5,000 ms").count(), 1);
    // The same bins as the text histogram of the table report.
    let table = ok(&run(&[
        &a,
        "--config",
        &format!("a={}", cfg.display()),
        "--format",
        "table",
    ]));
    let text_bins = table
        .lines()
        .skip_while(|l| !l.starts_with("Gate input histogram"))
        .skip(1)
        .take_while(|l| l.contains('…'))
        .count();
    assert!(text_bins > 0);
    assert_eq!(
        one.matches("<title>").count(),
        text_bins - empty_bins(&table)
    );
}

/// Text-histogram lines of the first histogram with no decisions (no bar
/// is drawn for them in the SVG).
fn empty_bins(table: &str) -> usize {
    table
        .lines()
        .skip_while(|l| !l.starts_with("Gate input histogram"))
        .skip(1)
        .take_while(|l| l.contains('…'))
        .filter(|l| !l.contains('█'))
        .count()
}
