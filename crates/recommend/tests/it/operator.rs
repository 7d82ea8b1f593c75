//! The recommend binary as an installed tool: completions, man page, help.

use std::process::{Command, Stdio};

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recommend");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn generate_help_and_version() {
    assert!(run(&["--generate", "complete-bash"]).contains("--calibration"));
    assert!(run(&["--generate", "complete-zsh"]).contains("#compdef recommend"));
    assert!(run(&["--generate", "complete-fish"]).contains("complete -c recommend -l calibration"));
    assert!(run(&["--generate", "man"]).contains(".TH recommend 1"));
    let long = run(&["--help"]);
    assert!(long.contains("Examples:") && long.contains("--calibration calib.txt"));
    assert!(!run(&["-h"]).contains("Examples:"));
    assert!(run(&["--version"]).starts_with(&format!("recommend {}", env!("CARGO_PKG_VERSION"))));
}

/// `--follow`: the EPP and vLLM logs read as they grow.
#[cfg(unix)]
mod follow {
    use std::io::{Read, Write};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use gatecal_test_support::follow::{append_and_wait, interrupt, json, stdout_lines};

    fn exe() -> &'static str {
        env!("CARGO_BIN_EXE_recommend")
    }

    fn demo(p: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/demo")
            .join(p)
    }

    fn demo_lines() -> Vec<u8> {
        let mut v = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(demo("glm-like.log.gz")).unwrap())
            .read_to_end(&mut v)
            .unwrap();
        v
    }

    #[test]
    fn reports_come_every_interval_while_the_logs_grow_and_sigint_ends_with_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("epp.log");
        let all = demo_lines();
        let lines_: Vec<&[u8]> = all.split_inclusive(|&b| b == b'\n').collect();
        let first = lines_.len() / 10;
        std::fs::write(&log, lines_[..first].concat()).unwrap();
        let started = Instant::now();
        let mut child = Command::new(exe())
            .arg(&log)
            .arg(demo("glm-like.vllm"))
            .args(["--follow", "--every", "1s", "--format", "json"])
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
        assert_eq!(v["schema"], "gatecal.recommend/v3");
        assert_eq!(v["follow"]["last"], false);
        assert!(v["follow"]["decisions_read"].as_u64().unwrap() < 1100);
        // The rest of the EPP log, appended in pieces.
        let last = append_and_wait(&log, &lines_[first..], lines_.len() / 10 + 1, &rx, v, 1100);
        // Both logs are read: the vLLM stats lines give the peak.
        let f = &last["follow"];
        assert_eq!(f["vllm_lines_read"], 577);
        assert_eq!(f["window_s"], 900.0);
        let d = &last["deployments"][0];
        assert_eq!(d["peak_prefill_throughput"]["source"], "vllm_stats");
        let n = d["current"]["decisions"].as_u64().unwrap();
        assert!(n > 300 && n < 1100, "{n}");
        let end = interrupt(child, &rx);
        assert_eq!(end["follow"]["decisions_read"], 1168);
    }

    #[test]
    fn a_window_over_the_whole_logs_is_the_report_of_their_records() {
        let mut child = Command::new(exe())
            .arg("-")
            .arg(demo("glm-like.vllm"))
            .args(["--follow", "--window", "10h", "--every", "0.5s"])
            .args(["--format", "json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rx = stdout_lines(&mut child);
        let all = demo_lines();
        let mut stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&all);
        });
        // Everything read (stdin closed, the vLLM files at their ends) but
        // the last seconds of decisions, which the reorder buffer holds
        // until the run ends.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = json(&rx.recv_timeout(Duration::from_secs(10)).unwrap().1);
            let f = &v["follow"];
            if f["decisions_read"].as_u64().unwrap() > 1100 && f["vllm_lines_read"] == 577 {
                break;
            }
            assert!(Instant::now() < deadline, "{f}");
        }
        let mut end = interrupt(child, &rx);
        assert_eq!(end["follow"]["decisions_read"], 1168);
        // The same report as the decision records read back with the vLLM
        // logs, the input ledger apart.
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("d.jsonl");
        let out = Command::new(exe())
            .arg(demo("glm-like.log.gz"))
            .arg(demo("glm-like.vllm"))
            .args(["--format", "json", "-q", "--emit-decisions"])
            .arg(&records)
            .output()
            .unwrap();
        assert!(out.status.success());
        let out = Command::new(exe())
            .arg(&records)
            .arg(demo("glm-like.vllm"))
            .args(["--format", "json"])
            .output()
            .unwrap();
        let mut back: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for v in [&mut end, &mut back] {
            let o = v.as_object_mut().unwrap();
            o.remove("input");
            o.remove("follow");
        }
        assert!(
            end["deployments"][0]["peak_prefill_throughput"]["value"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        assert_eq!(end, back);
    }

    #[test]
    fn follow_refuses_what_it_cannot_write() {
        for (args, want) in [
            (vec!["-o", "r.json"], "-o does not go with --follow"),
            (
                vec!["--emit-partial", "p.part"],
                "--emit-partial does not go with --follow",
            ),
            (
                vec!["--emit-config", "c.yaml"],
                "--emit-config does not go with --follow",
            ),
            (
                vec!["--fail-if", "decisions > 1"],
                "--fail-if does not go with --follow",
            ),
            (
                vec!["--since", "1h"],
                "--since/--until do not go with --follow",
            ),
            (
                vec!["--format", "markdown"],
                "--follow prints a table or JSON lines",
            ),
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
}
