//! `--serve-metrics ADDR` (with `--follow`): the decisions read so far as
//! Prometheus series, in the text exposition format (version 0.0.4),
//! served at `/metrics` by a small HTTP server on a thread of its own.
//!
//! Per deployment and EPP pod: the gate input as a classic histogram
//! (`gatecal_gate_input_seconds`), decisions by outcome, decisions pinned
//! worse, the gate input's evidence, the observed TTFT as a histogram,
//! and the current findings as a gauge ([`Metrics::set_findings`]: those
//! of the latest follow report). Counters
//! count every decision since the start, each once, when the audit that
//! runs for the whole run has analysed it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use gatecal_filter::Outcome;
use gatecal_parser::DecisionRecord;

/// Upper bounds of the gate input histogram's buckets, seconds (the gate
/// input is negative when the sticky side is the less loaded).
pub const GATE_BUCKETS_S: [f64; 15] = [
    -10.0, -5.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 18.0, 30.0, 60.0, 120.0, 300.0,
];

/// Upper bounds of the observed TTFT histogram's buckets, seconds.
pub const TTFT_BUCKETS_S: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];

/// A current finding, as a gauge: `gatecal_findings{deployment, finding,
/// severity} 1` while it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The deployment it is about.
    pub deployment: String,
    /// Its short name (snake case).
    pub finding: String,
    /// `info`, `warning` or `critical`.
    pub severity: String,
}

impl From<&gatecal_analysis::findings::Finding> for Finding {
    fn from(f: &gatecal_analysis::findings::Finding) -> Finding {
        Finding {
            deployment: f.deployment.clone(),
            finding: f.id.to_string(),
            severity: f.severity.as_str().to_string(),
        }
    }
}

/// A classic histogram: cumulative counts per upper bound, `+Inf`, sum.
#[derive(Clone, Debug, Default)]
struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; bounds.len()];
        }
        for (c, b) in self.counts.iter_mut().zip(bounds) {
            if v <= *b {
                *c += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }
}

/// The series of one deployment and EPP pod.
#[derive(Clone, Debug, Default)]
struct Series {
    gate: Histogram,
    outcomes: BTreeMap<&'static str, u64>,
    pinned_worse: u64,
    evidence: BTreeMap<String, u64>,
    ttft: Histogram,
}

/// Every decision counted so far.
#[derive(Debug, Default)]
pub struct Metrics {
    series: BTreeMap<(String, String), Series>,
    /// Lower edge of "pinned worse", ms.
    pinned_min_ms: f64,
    /// The findings of the latest report.
    findings: Vec<Finding>,
}

fn outcome_label(o: Option<Outcome>) -> &'static str {
    match o {
        Some(Outcome::NotApplicable) => "not_applicable",
        Some(Outcome::Exploration) => "exploration",
        Some(Outcome::NoMatch) => "no_match",
        Some(Outcome::Sticky) => "sticky",
        Some(Outcome::LoadOverride) => "load_override",
        Some(Outcome::MissingSignal) => "missing_signal",
        Some(Outcome::RequestLoadOverride) => "request_load_override",
        None => "unknown",
    }
}

impl Metrics {
    /// No decision yet; "pinned worse" from `pinned_min_ms` to the bar.
    pub fn new(pinned_min_ms: f64) -> Metrics {
        Metrics {
            series: BTreeMap::new(),
            pinned_min_ms,
            findings: Vec::new(),
        }
    }

    /// The findings that hold now: those of the latest report, which
    /// replace the previous report's.
    pub fn set_findings(&mut self, findings: &[gatecal_analysis::findings::Finding]) {
        self.findings = findings.iter().map(Finding::from).collect();
    }

    /// The findings of the latest report (none before the first).
    pub fn current_findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Counts one decision, as its record (version 2: with its gate as
    /// analysed and the config in force) gives it.
    pub fn observe(&mut self, r: &DecisionRecord) {
        let key = (r.deployment.clone(), r.epp_pod.clone().unwrap_or_default());
        let s = self.series.entry(key).or_insert_with(|| {
            // The usual labels from the start, at 0: a share or a rate of
            // an outcome not seen yet is then 0, not absent.
            let mut s = Series::default();
            for o in ["sticky", "load_override", "no_match", "exploration"] {
                s.outcomes.insert(o, 0);
            }
            for e in ["logged", "observed", "reconstructed", "unknown"] {
                s.evidence.insert(e.to_string(), 0);
            }
            s
        });
        let gate = r.gate.as_ref();
        let outcome = gate.and_then(|g| g.outcome).or(r.outcome);
        *s.outcomes.entry(outcome_label(outcome)).or_default() += 1;
        let evidence = gate
            .and_then(|g| g.evidence.clone())
            .unwrap_or_else(|| "not_evaluated".into());
        *s.evidence.entry(evidence).or_default() += 1;
        if let Some(ms) = gate.and_then(|g| g.input_ms).filter(|v| !v.is_nan()) {
            s.gate.observe(&GATE_BUCKETS_S, ms / 1000.0);
            let bar = r
                .config
                .as_ref()
                .and_then(|c| {
                    c.parameters
                        .get(gatecal_filter::Param::MaxTtftPenaltyMs.name())
                })
                .and_then(serde_json::Value::as_f64);
            if outcome == Some(Outcome::Sticky)
                && ms >= self.pinned_min_ms
                && bar.is_some_and(|b| ms < b)
            {
                s.pinned_worse += 1;
            }
        }
        if let Some(t) = r.observed_ttft_ms.filter(|t| t.is_finite()) {
            s.ttft.observe(&TTFT_BUCKETS_S, t / 1000.0);
        }
    }

    /// The text exposition of every series, and of `findings`.
    pub fn exposition(&self, findings: &[Finding]) -> String {
        let mut o = String::new();
        let labels = |d: &str, p: &str| {
            format!(
                "deployment=\"{}\",epp_pod=\"{}\"",
                escape_label(d),
                escape_label(p)
            )
        };
        let head = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} {kind}");
        };
        let hist = |o: &mut String, name: &str, l: &str, h: &Histogram, bounds: &[f64]| {
            for (i, b) in bounds.iter().enumerate() {
                let c = h.counts.get(i).copied().unwrap_or(0);
                let _ = writeln!(o, "{name}_bucket{{{l},le=\"{}\"}} {c}", float(*b));
            }
            let _ = writeln!(o, "{name}_bucket{{{l},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(o, "{name}_sum{{{l}}} {}", float(h.sum));
            let _ = writeln!(o, "{name}_count{{{l}}} {}", h.count);
        };
        head(
            &mut o,
            "gatecal_gate_input_seconds",
            "histogram",
            "The TTFT load gate's input (bestStickyTTFT - bestNonStickyTTFT) at each decision whose input is known, seconds.",
        );
        for ((d, p), s) in &self.series {
            hist(
                &mut o,
                "gatecal_gate_input_seconds",
                &labels(d, p),
                &s.gate,
                &GATE_BUCKETS_S,
            );
        }
        head(
            &mut o,
            "gatecal_decisions_total",
            "counter",
            "Decisions of the prefix-cache-affinity-filter, by outcome (sticky: the pin held; load_override: the TTFT gate released it).",
        );
        for ((d, p), s) in &self.series {
            for (outcome, n) in &s.outcomes {
                let _ = writeln!(
                    o,
                    "gatecal_decisions_total{{{},outcome=\"{outcome}\"}} {n}",
                    labels(d, p)
                );
            }
        }
        head(
            &mut o,
            "gatecal_pinned_worse_total",
            "counter",
            "Decisions that stayed pinned while the gate input was in [--pinned-worse-min, bar).",
        );
        for ((d, p), s) in &self.series {
            let _ = writeln!(
                o,
                "gatecal_pinned_worse_total{{{}}} {}",
                labels(d, p),
                s.pinned_worse
            );
        }
        head(
            &mut o,
            "gatecal_gate_input_evidence_total",
            "counter",
            "Decisions by how their gate input is known: logged, observed, reconstructed, traced, unknown, or not_evaluated.",
        );
        for ((d, p), s) in &self.series {
            for (e, n) in &s.evidence {
                let _ = writeln!(
                    o,
                    "gatecal_gate_input_evidence_total{{{},evidence=\"{}\"}} {n}",
                    labels(d, p),
                    escape_label(e)
                );
            }
        }
        head(
            &mut o,
            "gatecal_observed_ttft_seconds",
            "histogram",
            "Observed time to first token of the decisions' requests (EPP received request to first response chunk), seconds.",
        );
        for ((d, p), s) in &self.series {
            hist(
                &mut o,
                "gatecal_observed_ttft_seconds",
                &labels(d, p),
                &s.ttft,
                &TTFT_BUCKETS_S,
            );
        }
        head(
            &mut o,
            "gatecal_findings",
            "gauge",
            "Findings that hold now (1 while it holds), per deployment.",
        );
        for f in findings {
            let _ = writeln!(
                o,
                "gatecal_findings{{deployment=\"{}\",finding=\"{}\",severity=\"{}\"}} 1",
                escape_label(&f.deployment),
                escape_label(&f.finding),
                escape_label(&f.severity)
            );
        }
        o
    }
}

/// A float as the exposition format writes it.
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// A label value escaped: backslash, double quote and newline.
fn escape_label(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// The metrics shared between the run and the server.
pub type Shared = Arc<Mutex<Metrics>>;

/// Locks the shared metrics (a panic elsewhere does not stop the server).
pub fn lock(m: &Shared) -> MutexGuard<'_, Metrics> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Listens on `addr` (`HOST:PORT`, `:PORT` for every interface) and serves
/// `metrics` at `/metrics` on a thread of its own. Returns the address
/// bound (a port 0 is chosen by the system). A port in use, or an address
/// that does not resolve, is an error naming it.
pub fn serve(addr: &str, metrics: Shared) -> anyhow::Result<std::net::SocketAddr> {
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_string()
    };
    let listener = TcpListener::bind(&full).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            ": another process listens on that port (give another, e.g. --serve-metrics :9464)"
        } else {
            ""
        };
        anyhow::anyhow!("--serve-metrics {addr}: cannot listen: {e}{hint}")
    })?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = answer(stream, &metrics);
            }
        })?;
    Ok(bound)
}

/// Answers one HTTP request: `GET /metrics` (or `/`), else 404.
fn answer(mut stream: TcpStream, metrics: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The headers, up to the blank line (at most 100).
    for _ in 0..100 {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, kind, body) = if method == "GET" && (path == "/metrics" || path == "/") {
        let m = lock(metrics);
        let text = m.exposition(m.current_findings());
        drop(m);
        ("200 OK", "text/plain; version=0.0.4; charset=utf-8", text)
    } else {
        (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "gatecal serves GET /metrics\n".to_string(),
        )
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_parser::{ConfigRecord, GateRecord};

    fn record(pod: &str, outcome: Outcome, input_ms: f64, evidence: &str) -> DecisionRecord {
        DecisionRecord {
            v: 2,
            ts: Some(1.0),
            deployment: "d\"1".into(),
            epp_pod: Some(pod.into()),
            outcome: Some(outcome),
            observed_ttft_ms: Some(800.0),
            gate: Some(GateRecord {
                outcome: Some(outcome),
                evidence: Some(evidence.into()),
                input_ms: Some(input_ms),
                replay: gatecal_parser::ReplayRecord::Unknown,
                matched_tokens: None,
                logged_bar_ms: None,
                censored_ms: None,
                logged_peak: None,
                matched_source: None,
                picked_match: None,
            }),
            config: Some(ConfigRecord {
                source: "log".into(),
                parameters: serde_json::json!({"maxTTFTPenaltyMs": 18000.0}),
                legacy_missing_signal: false,
                parameter_sources: Default::default(),
                log_disagreements: Vec::new(),
            }),
            ..DecisionRecord::default()
        }
    }

    #[test]
    fn counts_per_deployment_and_pod_in_the_exposition_format() {
        let mut m = Metrics::new(5000.0);
        m.observe(&record("a", Outcome::Sticky, 7000.0, "reconstructed"));
        m.observe(&record("a", Outcome::Sticky, 300.0, "logged"));
        m.observe(&record("a", Outcome::LoadOverride, 20000.0, "logged"));
        m.observe(&record("b", Outcome::Sticky, -1500.0, "observed"));
        let text = m.exposition(&[Finding {
            deployment: "d\"1".into(),
            finding: "pinned_worse".into(),
            severity: "warning".into(),
        }]);
        let l = r#"deployment="d\"1",epp_pod="a""#;
        for want in [
            format!(r#"gatecal_gate_input_seconds_bucket{{{l},le="0.5"}} 1"#),
            format!(r#"gatecal_gate_input_seconds_bucket{{{l},le="10"}} 2"#),
            format!(r#"gatecal_gate_input_seconds_bucket{{{l},le="+Inf"}} 3"#),
            format!(r#"gatecal_gate_input_seconds_sum{{{l}}} 27.3"#),
            format!(r#"gatecal_decisions_total{{{l},outcome="sticky"}} 2"#),
            format!(r#"gatecal_decisions_total{{{l},outcome="load_override"}} 1"#),
            format!(r#"gatecal_pinned_worse_total{{{l}}} 1"#),
            format!(r#"gatecal_gate_input_evidence_total{{{l},evidence="logged"}} 2"#),
            format!(r#"gatecal_observed_ttft_seconds_bucket{{{l},le="1"}} 3"#),
            format!(r#"gatecal_observed_ttft_seconds_bucket{{{l},le="0.5"}} 0"#),
            format!(r#"gatecal_decisions_total{{{l},outcome="no_match"}} 0"#),
            format!(r#"gatecal_gate_input_evidence_total{{{l},evidence="unknown"}} 0"#),
            r#"gatecal_gate_input_seconds_bucket{deployment="d\"1",epp_pod="b",le="-1"} 1"#
                .to_string(),
            r#"gatecal_findings{deployment="d\"1",finding="pinned_worse",severity="warning"} 1"#
                .to_string(),
            "# TYPE gatecal_gate_input_seconds histogram".to_string(),
            "# HELP gatecal_decisions_total Decisions".to_string(),
        ] {
            assert!(text.contains(&want), "{want}\n{text}");
        }
        // None before the first report.
        assert!(m.current_findings().is_empty());
    }

    #[test]
    fn the_gauge_carries_the_latest_reports_findings() {
        use gatecal_analysis::findings::{Finding as Report, FindingEvidence, Severity, ids};
        let report = |id: &'static str, severity| Report {
            id,
            severity,
            deployment: "glm".into(),
            summary: String::new(),
            evidence: FindingEvidence::default(),
            action: String::new(),
        };
        let mut m = Metrics::new(5000.0);
        m.set_findings(&[
            report(ids::GATE_NEVER_FIRES, Severity::Critical),
            report(ids::DEFAULT_PEAK_ASSUMED, Severity::Warning),
        ]);
        let text = m.exposition(m.current_findings());
        for want in [
            r#"gatecal_findings{deployment="glm",finding="gate_never_fires",severity="critical"} 1"#,
            r#"gatecal_findings{deployment="glm",finding="default_peak_assumed",severity="warning"} 1"#,
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
        // The next report replaces them.
        m.set_findings(&[]);
        assert!(
            !m.exposition(m.current_findings())
                .contains("gatecal_findings{")
        );
    }

    #[test]
    fn the_server_answers_metrics_and_a_port_in_use_is_an_error() {
        let m: Shared = Arc::new(Mutex::new(Metrics::new(5000.0)));
        lock(&m).observe(&record("a", Outcome::Sticky, 7000.0, "logged"));
        let addr = serve("127.0.0.1:0", m.clone()).unwrap();
        let get = |path: &str| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut out = String::new();
            std::io::Read::read_to_string(&mut s, &mut out).unwrap();
            out
        };
        let ok = get("/metrics");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(ok.contains("text/plain; version=0.0.4"));
        assert!(ok.contains("gatecal_pinned_worse_total{deployment=\"d\\\"1\",epp_pod=\"a\"} 1"));
        assert!(get("/other").starts_with("HTTP/1.1 404"));
        let e = serve(&addr.to_string(), m).unwrap_err().to_string();
        assert!(
            e.contains(&format!("--serve-metrics {addr}: cannot listen")),
            "{e}"
        );
        assert!(e.contains("another process listens on that port"), "{e}");
    }
}
