//! The findings against simulated failures: each fires on the scenario
//! that makes its failure, and none fires on the healthy ones (balanced,
//! and glm-like run with a true peak and a working bar, audited with that
//! config).

use crate::sim_findings::*;
use gatecal_analysis::findings::{Finding, Severity, ids};
use gatecal_analysis::{ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary};
use gatecal_parser::{Item, ParseOptions, parse_slice};
use gatecal_sim::{Scenario, SimOutput, Variant, failure_truth, run};

fn sim(s: &Scenario) -> SimOutput {
    run(s, 1, &Variant::default())
}

fn gate_dist(out: &SimOutput, set: ConfigSet) -> Vec<Finding> {
    gate_dist_report(out, set).findings
}

fn recommend(out: &SimOutput, set: ConfigSet) -> Vec<Finding> {
    recommend_report(out, set).findings
}

#[test]
fn affinity_disengaged_fires_on_affinity_off_only() {
    let s = short("affinity-off", 150.0);
    let out = sim(&s);
    assert!(out.summary.failure_mode.as_deref() == failure_truth("affinity-off"));
    // gate-dist: no prefix score is logged, so the reuse is unknown.
    let g = gate_dist(&out, config_of(&s));
    assert_eq!(ids_of(&g), [ids::AFFINITY_DISENGAGED], "{g:#?}");
    assert_eq!(g[0].severity, Severity::Warning);
    assert!(g[0].evidence.figures["no_match_share"] > 0.95);
    // recommend: vLLM's hit rate shows the prompts share their prefixes.
    let r = recommend(&out, config_of(&s));
    let f = find(&r, ids::AFFINITY_DISENGAGED);
    assert_eq!(f.severity, Severity::Critical, "{f:#?}");
    assert!(f.evidence.figures["vllm_prefix_cache_hit_rate"] >= 0.2);
}

#[test]
fn missing_signal_fires_on_missing_signal_only() {
    let s = short("missing-signal", 150.0);
    let out = sim(&s);
    let g = gate_dist(&out, config_of(&s));
    assert_eq!(ids_of(&g), [ids::MISSING_SIGNAL], "{g:#?}");
    let truth = out.summary.overall.outcomes["missing_signal"];
    assert_eq!(g[0].evidence.count, truth);
    assert!(g[0].severity >= Severity::Warning);
}

/// Healthy: balanced as configured, and glm-like run at its true peak with
/// a bar that releases, each audited with its config: no finding in
/// either analysis.
#[test]
fn no_finding_on_healthy_scenarios() {
    let s = short("balanced", 150.0);
    let out = sim(&s);
    assert_eq!(out.summary.failure_mode, None);
    let g = gate_dist(&out, config_of(&s));
    assert!(g.is_empty(), "balanced, gate-dist: {g:#?}");
    let r = recommend(&out, config_of(&s));
    assert!(r.is_empty(), "balanced, recommend: {r:#?}");

    let mut s = short("glm-like", 900.0);
    s.set_filter_param(None, "peakPrefillThroughput", "3000")
        .unwrap();
    s.set_filter_param(None, "maxTTFTPenaltyMs", "8000")
        .unwrap();
    let out = sim(&s);
    let g = gate_dist(&out, config_of(&s));
    assert!(g.is_empty(), "glm-like corrected, gate-dist: {g:#?}");
    let r = recommend(&out, config_of(&s));
    assert!(r.is_empty(), "glm-like corrected, recommend: {r:#?}");
}

/// The seed's failure: glm-like under the defaults. The bar never fires,
/// the peak is assumed, and (with the vLLM logs) it is 5x off.
#[test]
fn glm_like_under_the_defaults_names_its_failures() {
    let s = short("glm-like", 900.0);
    let out = sim(&s);
    let g = gate_dist(&out, ConfigSet::default());
    assert_eq!(
        ids_of(&g),
        [ids::GATE_NEVER_FIRES, ids::DEFAULT_PEAK_ASSUMED],
        "{g:#?}"
    );
    let r = recommend(&out, ConfigSet::default());
    let f = find(&r, ids::PEAK_MISCONFIGURED);
    assert_eq!(f.severity, Severity::Critical);
    let measured = f.evidence.figures["measured_peak"];
    assert!((measured - 3000.0).abs() < 600.0, "{measured}");
    find(&r, ids::GATE_NEVER_FIRES);
    find(&r, ids::DEFAULT_PEAK_ASSUMED);
}

/// Two EPP replicas of one pool, their decisions interleaved: the
/// balanced log, captured with the kubectl prefix, with every other
/// request's lines under a second pod of the same ReplicaSet. The finding
/// names both pods, and the report gives each replica's own figures.
#[test]
fn split_load_view_fires_on_two_interleaved_replicas() {
    let s = short("balanced", 150.0);
    let variant = Variant {
        prefix: true,
        ..Variant::default()
    };
    let out = run(&s, 1, &variant);
    let a = s.deployments[0].epp_pod.clone();
    let b = format!("{}zt4km", &a[..a.len() - 5]);
    let text = String::from_utf8(out.epp_log.clone()).unwrap();
    let mut log = String::new();
    for line in text.lines() {
        let second = line
            .split("\"x-request-id\":\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .is_some_and(|id| id.bytes().map(u32::from).sum::<u32>() % 2 == 1);
        if second {
            log.push_str(&line.replacen(&a, &b, 1));
        } else {
            log.push_str(line);
        }
        log.push('\n');
    }
    let mut g = GateDist::new(GateDistOptions::default(), config_of(&s));
    let parsed = parse_slice("epp.log", log.as_bytes(), &ParseOptions::default()).unwrap();
    for i in parsed.items {
        if let Item::Decision(d) = i {
            g.push(DecisionInput::from(&*d));
        }
    }
    let r = g.finish(InputSummary::default());
    assert_eq!(
        r.deployments.len(),
        1,
        "one pool: {:?}",
        r.deployments.len()
    );
    assert_eq!(
        ids_of(&r.findings),
        [ids::SPLIT_LOAD_VIEW],
        "{:#?}",
        r.findings
    );
    let mut pods = vec![a, b];
    pods.sort();
    assert_eq!(r.findings[0].evidence.pods, pods);
    let reps = &r.deployments[0].replicas;
    assert_eq!(reps.len(), 2);
    assert_eq!(
        reps.iter().map(|x| x.decisions).sum::<u64>(),
        r.deployments[0].stats.decisions
    );
    assert!(reps.iter().all(|x| x.decisions > 50), "{reps:#?}");
}

/// The eight deployments without a config: none has a peak in its log, so
/// every one says that its ms figures assume the default.
#[test]
fn eight_deployments_without_config_say_the_peak_is_assumed() {
    let s = short("eight-deployments", 120.0);
    let out = sim(&s);
    let g = gate_dist(&out, ConfigSet::default());
    let said: std::collections::BTreeSet<&str> = g
        .iter()
        .filter(|f| f.id == ids::DEFAULT_PEAK_ASSUMED)
        .map(|f| f.deployment.as_str())
        .collect();
    assert_eq!(said.len(), 8, "{g:#?}");
    for f in g.iter().filter(|f| f.id == ids::DEFAULT_PEAK_ASSUMED) {
        assert!(f.summary.contains("15928/P"), "{}", f.summary);
    }
}
