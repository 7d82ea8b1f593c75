//! `--follow --serve-metrics`: a real Prometheus server (Debian's
//! `prometheus` package; `.ci/run` installs it) scrapes gate-dist while it
//! follows a log, and every query of docs/grafana-dashboard.json is asked
//! of it; `promtool check metrics` passes on the exposition. Skipped, with
//! a message, where `prometheus` is not installed.
#![cfg(unix)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_gate-dist")
}

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn installed(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` of `127.0.0.1:port`: the status line and the body.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An instant query's result vector.
fn query(port: u16, q: &str) -> Vec<serde_json::Value> {
    let (status, body) = get(port, &format!("/api/v1/query?query={}", encode(q)))
        .unwrap_or_else(|| panic!("no answer to {q}"));
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {status}: {e}: {body}"));
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn prometheus_scrapes_the_series_the_dashboard_queries() {
    if !installed("prometheus") {
        eprintln!(
            "no `prometheus` binary (Debian package prometheus; .ci/run installs it): \
             the Prometheus test is skipped"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (metrics_port, prom_port) = (free_port(), free_port());
    // gate-dist follows a log that keeps coming on stdin.
    let mut gd = Command::new(exe())
        .args([
            "-",
            "--follow",
            "--every",
            "1s",
            "--format",
            "json",
            "--serve-metrics",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = gd.stdin.take().unwrap();
    let gd = Killed(gd);
    let mut log = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(root().join("fixtures/demo/glm-like.log.gz")).unwrap(),
    )
    .read_to_end(&mut log)
    .unwrap();
    let writer = std::thread::spawn(move || {
        let lines: Vec<&[u8]> = log.split_inclusive(|&b| b == b'\n').collect();
        // The log over about 20 s, then stdin stays open a while.
        for chunk in lines.chunks(lines.len() / 40 + 1) {
            if stdin.write_all(&chunk.concat()).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: gatecal\n    static_configs:\n      \
             - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let _prom = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Until Prometheus holds a few scrapes of a growing count.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped gate-dist"
        );
        std::thread::sleep(Duration::from_secs(1));
        if get(prom_port, "/-/ready").is_none() {
            continue;
        }
        let r = query(
            prom_port,
            "sum(increase(gatecal_decisions_total[1m])) > 100",
        );
        if !r.is_empty() {
            break;
        }
    }
    // Every query of the dashboard, as Grafana would send it.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut asked = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let q = expr
                .replace("$deployment", ".*")
                .replace("$__rate_interval", "30s");
            let r = query(prom_port, &q);
            asked += 1;
            // The router's counter is not here, and findings hold only while
            // the window shows them: their queries must parse and run; the
            // others give series.
            if expr.contains("llm_d_epp_") || expr.contains("gatecal_findings") {
                continue;
            }
            assert!(!r.is_empty(), "{}: no series for {q}", panel["title"]);
            assert!(
                r.iter().any(|s| s["metric"]["deployment"] == "glm-5-2"),
                "{q}: {r:?}"
            );
        }
    }
    assert!(asked >= 10, "{asked}");
    // Prometheus holds what gate-dist counted: pinned-worse decisions, at
    // most as many as gate-dist counts now.
    let pinned = query(prom_port, "sum(gatecal_pinned_worse_total)");
    let pinned: f64 = pinned[0]["value"][1].as_str().unwrap().parse().unwrap();
    // The exposition passes promtool's checks and lints.
    let (status, text) = get(metrics_port, "/metrics").unwrap();
    assert!(status.contains("200"), "{status}");
    let now: f64 = text
        .lines()
        .filter(|l| l.starts_with("gatecal_pinned_worse_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(pinned > 10.0 && pinned <= now, "{pinned} of {now}");
    if installed("promtool") {
        let mut check = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        check
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = check.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(gd);
    drop(writer);
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(exe())
        .args(["-", "--follow", "--serve-metrics", &addr])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--serve-metrics {addr}: cannot listen")),
        "{err}"
    );
    assert!(
        err.contains("another process listens on that port"),
        "{err}"
    );
    // Only with --follow.
    let out = Command::new(exe())
        .args(["-", "--serve-metrics", ":9464"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--follow"));
}

/// The findings gauge carries the latest follow report's findings: on the
/// demo (default config), the bar that never fires and the assumed peak.
#[test]
fn the_findings_gauge_carries_the_latest_reports_findings() {
    let port = free_port();
    let mut gd = Command::new(exe())
        .args([
            "-",
            "--follow",
            "--every",
            "0.5s",
            "--window",
            "1h",
            "--format",
            "json",
            "--serve-metrics",
            &format!("127.0.0.1:{port}"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = gd.stdin.take().unwrap();
    let _gd = Killed(gd);
    let mut log = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(root().join("fixtures/demo/glm-like.log.gz")).unwrap(),
    )
    .read_to_end(&mut log)
    .unwrap();
    // The whole log, stdin left open: the run follows on.
    stdin.write_all(&log).unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        assert!(
            Instant::now() < deadline,
            "no findings in the gauge after 120 s"
        );
        std::thread::sleep(Duration::from_millis(500));
        let Some((status, text)) = get(port, "/metrics") else {
            continue;
        };
        assert!(status.contains("200"), "{status}");
        if text.contains("finding=\"gate_never_fires\"") {
            break text;
        }
    };
    for want in [
        r#"gatecal_findings{deployment="glm-5-2",finding="gate_never_fires",severity="#,
        r#"gatecal_findings{deployment="glm-5-2",finding="default_peak_assumed",severity="warning"} 1"#,
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    drop(stdin);
}
