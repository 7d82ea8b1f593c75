//! Deployments tracked and drawn are bounded: past the cap, the decisions
//! of further deployments are pooled into one, counted and warned about.

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary, MAX_DEPLOYMENTS,
    OTHER_DEPLOYMENT, Pooled, Recommend, RecommendOptions,
};
use gatecal_parser::{ParseOptions, parse_slice};

/// `n` complete decisions, each in its own namespace (its own deployment).
fn namespaces_log(n: usize) -> String {
    let mut log = String::new();
    for r in 0..n {
        let ts = 1_787_320_800.0 + r as f64 * 0.01;
        let h = |msg: &str| {
            format!("{{\"level\":\"debug\",\"ts\":{ts},\"msg\":\"{msg}\",\"x-request-id\":\"r{r}\"")
        };
        let ns = format!("ns-{r:05}");
        log.push_str(&format!(
            "{}}}\n{},\"affinityThreshold\":0.8,\"sticky\":1,\"total\":2}}\n{},\"plugin\":\"f/prefix-cache-affinity-filter\",\"endpoints\":[{{\"name\":\"p-0\",\"namespace\":\"{ns}\"}}]}}\n{},\"endpoint\":\"{ns}/p-0\",\"tokenLoad\":1200,\"score\":0.9}}\n{},\"endpoint\":\"10.0.0.1:8000\"}}\n",
            h("EPP received request"),
            h("PrefixCacheAffinityFilter: narrowed to sticky"),
            h("Completed running filter plugin successfully"),
            h("TokenLoadScorer scoring"),
            h("Request handled"),
        ));
    }
    log
}

#[test]
fn deployments_past_the_cap_are_pooled_and_counted() {
    let log = namespaces_log(50);
    let p = parse_slice("epp.log", log.as_bytes(), &ParseOptions::default()).unwrap();
    assert_eq!(p.decisions().count(), 50);
    let mut g =
        GateDist::new(GateDistOptions::default(), ConfigSet::default()).with_max_deployments(8);
    let mut r =
        Recommend::new(RecommendOptions::default(), ConfigSet::default()).with_max_deployments(8);
    for d in p.decisions() {
        g.push(DecisionInput::from(d));
        r.push_decision(DecisionInput::from(d));
    }
    let want = Pooled {
        deployments: 42,
        decisions: 42,
        max_deployments: 8,
        at_least: false,
    };
    let report = g.finish(InputSummary::default());
    assert_eq!(report.deployments.len(), 9);
    assert_eq!(report.pooled, want);
    let other = report
        .deployments
        .iter()
        .find(|d| d.name == OTHER_DEPLOYMENT)
        .unwrap();
    assert_eq!(other.stats.decisions, 42);
    let rec = r.finish(InputSummary::default());
    assert_eq!(rec.deployments.len(), 9);
    assert_eq!(rec.pooled, want);
}

/// The binary pools past the default cap, warns on stderr, reports the
/// counts, and draws one SVG per tracked deployment (and one overall).
#[test]
fn the_binary_draws_a_bounded_number_of_deployments() {
    let n = MAX_DEPLOYMENTS + 40;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("epp.log");
    std::fs::write(&log, namespaces_log(n)).unwrap();
    let svg = dir.path().join("svg").join("g.svg");
    std::fs::create_dir(svg.parent().unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gate-dist"))
        .arg(&log)
        .args(["--format", "json", "--svg"])
        .arg(&svg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "warning: more than {MAX_DEPLOYMENTS} deployments: 40 more (40 decisions) pooled into \"{OTHER_DEPLOYMENT}\""
        )),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pooled"]["deployments"], 40);
    assert_eq!(
        v["deployments"].as_array().unwrap().len(),
        MAX_DEPLOYMENTS + 1
    );
    let files = std::fs::read_dir(svg.parent().unwrap()).unwrap().count();
    assert_eq!(
        files,
        MAX_DEPLOYMENTS + 2,
        "one per deployment, the pool, and overall"
    );
}
