//! Each finding against the simulator's scenario for its failure, both
//! ways: it fires there (and only it), with figures that match the
//! scenario's truth, and stays silent on the healthy scenarios (balanced,
//! and glm-like at its true peak with a bar that releases) captured the
//! same way, so that its input is present in the healthy logs too.

use std::collections::{BTreeMap, BTreeSet};

use crate::sim_findings::*;
use gatecal_analysis::findings::{Finding, Severity, ids};
use gatecal_analysis::{ConfigSet, GateDistReport, ParamSource, SourcedConfig};
use gatecal_sim::{Scenario, SimOutput, Variant, failure_truth, run};

/// `glm-like` at its true peak with a bar that releases: healthy.
fn glm_corrected(seconds: f64) -> Scenario {
    let mut s = short("glm-like", seconds);
    s.set_filter_param(None, "peakPrefillThroughput", "3000")
        .unwrap();
    s.set_filter_param(None, "maxTTFTPenaltyMs", "8000")
        .unwrap();
    s
}

fn gate_dist(out: &SimOutput, set: ConfigSet) -> GateDistReport {
    gate_dist_report(out, set)
}

fn recommend(out: &SimOutput, set: ConfigSet) -> Vec<Finding> {
    recommend_report(out, set).findings
}

/// Runs a healthy scenario with `variant` and checks that neither report
/// holds `id`, nor any other finding.
fn silent_on_healthy(variant: &Variant, id: &str) {
    for s in [short("balanced", 150.0), glm_corrected(600.0)] {
        let out = run(&s, 1, variant);
        assert_eq!(out.summary.failure_mode, None);
        let g = gate_dist(&out, config_of(&s)).findings;
        assert!(g.is_empty(), "{} ({id}), gate-dist: {g:#?}", s.name);
        let r = recommend(&out, config_of(&s));
        assert!(r.is_empty(), "{} ({id}), recommend: {r:#?}", s.name);
    }
}

/// active-active: two replicas of one pool, each with its own view. The
/// finding names both pods, its count is every decision, and the
/// per-replica view gives each pod the decisions the truth gives it.
#[test]
fn split_load_view_fires_on_active_active() {
    let s = short("active-active", 150.0);
    let variant = Variant {
        prefix: true,
        ..Variant::default()
    };
    let out = run(&s, 1, &variant);
    assert_eq!(
        out.summary.failure_mode.as_deref(),
        failure_truth("active-active")
    );
    let mut truth_pods: BTreeMap<&str, u64> = BTreeMap::new();
    for t in &out.truth {
        *truth_pods.entry(t.epp_pod.as_str()).or_default() += 1;
    }
    let pods: Vec<String> = s.deployments[0].epp_pods();
    assert_eq!(pods.len(), 2);
    assert_ne!(pods[0], pods[1]);
    assert_eq!(
        truth_pods.keys().copied().collect::<BTreeSet<_>>(),
        pods.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );

    let r = gate_dist(&out, config_of(&s));
    assert_eq!(r.deployments.len(), 1);
    assert_eq!(
        ids_of(&r.findings),
        [ids::SPLIT_LOAD_VIEW],
        "{:#?}",
        r.findings
    );
    let f = &r.findings[0];
    assert_eq!(f.severity, Severity::Warning);
    let mut sorted = pods.clone();
    sorted.sort();
    assert_eq!(f.evidence.pods, sorted);
    assert_eq!(f.evidence.figures["replicas"], 2.0);
    assert!(f.evidence.figures["overlap"] > 0.95, "{f:#?}");
    assert!(f.evidence.figures["alternations"] >= 50.0, "{f:#?}");
    let reps = &r.deployments[0].replicas;
    let by_pod: BTreeMap<&str, u64> = reps
        .iter()
        .map(|x| (x.epp_pod.as_str(), x.decisions))
        .collect();
    assert_eq!(by_pod, truth_pods);

    let rec = recommend(&out, config_of(&s));
    assert_eq!(ids_of(&rec), [ids::SPLIT_LOAD_VIEW], "{rec:#?}");
}

/// The same log captured without `--prefix` names no pod: the replicas
/// cannot be told apart, and no finding claims they can.
#[test]
fn active_active_without_pod_names_says_nothing_of_replicas() {
    let s = short("active-active", 150.0);
    let out = run(&s, 1, &Variant::default());
    let r = gate_dist(&out, config_of(&s));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert!(r.deployments[0].replicas.is_empty());
}

#[test]
fn split_load_view_silent_on_healthy_scenarios() {
    silent_on_healthy(
        &Variant {
            prefix: true,
            ..Variant::default()
        },
        ids::SPLIT_LOAD_VIEW,
    );
}

/// Releases whose chosen endpoint was sticky, from the truth: the
/// decision released and the endpoint picked met the threshold.
fn truth_inert(out: &SimOutput, threshold: f64) -> (u64, u64) {
    let (mut released, mut inert) = (0, 0);
    for t in &out.truth {
        if t.outcome != "load_override" {
            continue;
        }
        released += 1;
        let sticky = t.candidates.iter().any(|c| {
            c.endpoint == t.chosen_endpoint
                && matches!((c.match_blocks, c.total_blocks), (Some(m), Some(n)) if n > 0 && m as f64 / n as f64 >= threshold)
        });
        if sticky {
            inert += 1;
        }
    }
    (released, inert)
}

/// inert-breaks: the prefix scorer after the filter sends the released
/// requests back to a sticky endpoint; the finding counts exactly the
/// truth's inert releases.
#[test]
fn inert_breaks_fires_on_inert_breaks() {
    let s = short("inert-breaks", 600.0);
    let out = run(&s, 1, &Variant::default());
    assert_eq!(
        out.summary.failure_mode.as_deref(),
        failure_truth("inert-breaks")
    );
    let threshold = s.deployments[0].primary_config().affinity_threshold;
    let (released, inert) = truth_inert(&out, threshold);
    assert!(released >= 20, "{released} releases");
    let g = gate_dist(&out, config_of(&s)).findings;
    assert_eq!(ids_of(&g), [ids::INERT_BREAKS], "{g:#?}");
    let f = &g[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence.decisions, released);
    assert_eq!(f.evidence.count, inert);
    assert!(f.evidence.figures["inert_share"] >= 0.5, "{f:#?}");
    assert!(!f.evidence.endpoints.is_empty());
    let r = recommend(&out, config_of(&s));
    let f = find(&r, ids::INERT_BREAKS);
    assert_eq!(f.evidence.count, inert);
    assert_eq!(ids_of(&r), [ids::INERT_BREAKS], "{r:#?}");
}

/// Healthy glm-like at `-v=5`: the approximate producer's prefix scorer
/// lines give every candidate's score, so each release is checked, and
/// the token-load picker sends them elsewhere.
#[test]
fn inert_breaks_silent_on_healthy_scenarios() {
    let variant = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let s = glm_corrected(600.0);
    let out = run(&s, 1, &variant);
    let threshold = s.deployments[0].primary_config().affinity_threshold;
    let (released, inert) = truth_inert(&out, threshold);
    assert!(released >= 20, "{released} releases");
    assert!(inert * 2 < released, "{inert} of {released}");
    silent_on_healthy(&variant, ids::INERT_BREAKS);
}

/// undersized-index: the filter finds no sticky endpoint (its index
/// forgot the sessions), while vLLM's caches, which kept them, hit.
#[test]
fn affinity_disengaged_fires_on_undersized_index() {
    let s = short("undersized-index", 150.0);
    let out = run(&s, 1, &Variant::default());
    assert_eq!(
        out.summary.failure_mode.as_deref(),
        failure_truth("undersized-index")
    );
    let no_match = out.summary.overall.outcomes["no_match"];
    let g = gate_dist(&out, config_of(&s)).findings;
    assert_eq!(ids_of(&g), [ids::AFFINITY_DISENGAGED], "{g:#?}");
    assert_eq!(g[0].severity, Severity::Warning);
    assert_eq!(g[0].evidence.count, no_match);
    assert!(g[0].evidence.figures["no_match_share"] > 0.9);
    let r = recommend(&out, config_of(&s));
    assert_eq!(ids_of(&r), [ids::AFFINITY_DISENGAGED], "{r:#?}");
    let f = &r[0];
    assert_eq!(f.severity, Severity::Critical, "{f:#?}");
    let hit = f.evidence.figures["vllm_prefix_cache_hit_rate"];
    assert!(hit >= 0.3, "{hit}");
    assert!(f.action.contains("lruCapacityPerServer"), "{}", f.action);
}

/// The same deployment with an index as large as the engines' caches
/// pins its follow-ups: nothing is found.
#[test]
fn affinity_disengaged_silent_when_the_index_fits() {
    let mut s = short("undersized-index", 150.0);
    for p in &mut s.deployments[0].pools {
        p.index_capacity_tokens = None;
    }
    let out = run(&s, 1, &Variant::default());
    let r = recommend(&out, config_of(&s));
    assert!(r.is_empty(), "{r:#?}");
    silent_on_healthy(&Variant::default(), ids::AFFINITY_DISENGAGED);
}

/// stale-index: the index keeps sessions the engines' small caches have
/// evicted. The router's predicted hit (the picked endpoint's match, from
/// the `-v=5` producer lines) is the truth's, and vLLM's delivered one is
/// far below it.
#[test]
fn reuse_shortfall_fires_on_stale_index() {
    let s = short("stale-index", 150.0);
    let variant = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let out = run(&s, 1, &variant);
    assert_eq!(
        out.summary.failure_mode.as_deref(),
        failure_truth("stale-index")
    );
    let (mut matched, mut prompt) = (0i64, 0i64);
    for t in &out.truth {
        let c = t
            .candidates
            .iter()
            .find(|c| c.endpoint == t.chosen_endpoint)
            .expect("chosen among the candidates");
        matched += c.match_blocks.unwrap_or(0) * c.block_size_tokens.unwrap_or(0);
        prompt += t.prompt_tokens;
    }
    let truth_predicted = matched as f64 / prompt as f64;
    // gate-dist has no vLLM hit rate to compare with.
    let g = gate_dist(&out, config_of(&s)).findings;
    assert!(g.is_empty(), "{g:#?}");
    let report = recommend_report(&out, config_of(&s));
    let r = &report.findings;
    assert_eq!(ids_of(r), [ids::REUSE_SHORTFALL], "{r:#?}");
    let f = &r[0];
    let predicted = f.evidence.figures["predicted_hit_rate"];
    let delivered = f.evidence.figures["vllm_hit_rate"];
    assert!(
        (predicted - truth_predicted).abs() < 0.03,
        "{predicted} vs truth {truth_predicted}"
    );
    assert!(predicted - delivered >= 0.25, "{predicted} vs {delivered}");
    // Every request but the last few, whose lines the run's end cut.
    let n = out.truth.len() as u64;
    assert!(f.evidence.count <= n && f.evidence.count + 3 >= n, "{f:#?}");
    // The TTFT fit replays the predicted hits: it is not offered as the
    // peak (no peak_misconfigured from it), and, when the fit reproduces
    // the log (its self-check passes) and so could have been, the summary
    // says why not.
    let d = &report.deployments[0];
    let fit_offered =
        d.ttft_model.tokens_per_s.is_some() && d.ttft_self_check.as_ref().is_some_and(|c| c.passed);
    assert_eq!(
        f.summary.contains("not taken for the peak"),
        fit_offered,
        "{}",
        f.summary
    );
}

/// The same deployment with caches as large as the index: what the
/// router predicts, vLLM delivers.
#[test]
fn reuse_shortfall_silent_when_the_caches_keep_the_prefixes() {
    let mut s = short("stale-index", 150.0);
    for p in &mut s.deployments[0].pools {
        p.kv_capacity_tokens = p.index_capacity_tokens.take().unwrap();
    }
    let variant = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let out = run(&s, 1, &variant);
    let r = recommend(&out, config_of(&s));
    assert!(r.is_empty(), "{r:#?}");
}

/// With the prefix scorer's scores in the log (`-v=5`), the two causes of
/// a disengaged filter are told apart: on undersized-index vLLM's caches
/// hit more than the index's best score, so the index is named; on
/// affinity-off (the same 64-token blocks) the index holds the prompts and
/// the threshold is above them, so the threshold is named.
#[test]
fn affinity_disengaged_names_the_index_or_the_threshold() {
    let variant = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let s = short("undersized-index", 150.0);
    let out = run(&s, 1, &variant);
    let r = recommend(&out, config_of(&s));
    assert_eq!(ids_of(&r), [ids::AFFINITY_DISENGAGED], "{r:#?}");
    let f = &r[0];
    let (p50, hit) = (
        f.evidence.figures["best_prefix_score_p50"],
        f.evidence.figures["vllm_prefix_cache_hit_rate"],
    );
    assert!(hit >= p50 + 0.1, "{p50} {hit}");
    assert!(f.action.starts_with("a larger index"), "{}", f.action);

    let mut s = short("affinity-off", 150.0);
    s.deployments[0].block_size = 64;
    let out = run(&s, 1, &variant);
    let r = recommend(&out, config_of(&s));
    assert_eq!(ids_of(&r), [ids::AFFINITY_DISENGAGED], "{r:#?}");
    let f = &r[0];
    let (p50, hit) = (
        f.evidence.figures["best_prefix_score_p50"],
        f.evidence.figures["vllm_prefix_cache_hit_rate"],
    );
    assert!(p50 >= 0.5 && hit < p50, "{p50} {hit}");
    assert!(f.action.starts_with("affinityThreshold: "), "{}", f.action);
}

/// eight-deployments with each filter running its deployment's true peak
/// (not the default), captured at `-v=5`, audited without a config: where
/// the approximate producer's lines give every candidate's load and score
/// beside a released gate's TTFTs, the peak in force is inferred exactly
/// and every ms figure matches the audit given the true config; where they
/// do not, the finding says the figures assume the default, and by what
/// factor they scale.
#[test]
fn the_peak_in_force_is_inferred_from_v5_lines_or_said_to_be_assumed() {
    let mut s = short("eight-deployments", 120.0);
    let peaks: BTreeMap<String, f64> = s
        .deployments
        .iter()
        .map(|d| (d.name.clone(), d.true_peak_tps().round()))
        .collect();
    for (name, p) in &peaks {
        s.set_filter_param(Some(name), "peakPrefillThroughput", &format!("{p}"))
            .unwrap();
    }
    // A bar that releases now and then, so that gate lines are logged.
    s.set_filter_param(None, "maxTTFTPenaltyMs", "4000")
        .unwrap();
    let variant = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let out = run(&s, 1, &variant);
    let without = gate_dist(&out, ConfigSet::default());
    let mut given = ConfigSet::default();
    for d in &s.deployments {
        given.per_deployment.insert(
            d.name.clone(),
            vec![(
                String::new(),
                SourcedConfig::new("file:epp.yaml", d.primary_config(), ParamSource::File),
            )],
        );
    }
    let with = gate_dist(&out, given);
    let mut inferred = 0;
    for d in &s.deployments {
        let f = without
            .findings
            .iter()
            .find(|f| f.id == ids::DEFAULT_PEAK_ASSUMED && f.deployment == d.name)
            .unwrap_or_else(|| panic!("{}: {:#?}", d.name, without.findings));
        let p = peaks[&d.name];
        if f.severity == Severity::Info {
            inferred += 1;
            let got = f.evidence.figures["inferred_peak"];
            assert!((got - p).abs() <= 1e-3 * p, "{}: {got} vs {p}", d.name);
            let a = &without
                .deployments
                .iter()
                .find(|x| x.name == d.name)
                .unwrap()
                .stats;
            let b = &with
                .deployments
                .iter()
                .find(|x| x.name == d.name)
                .unwrap()
                .stats;
            for (x, y) in [
                (a.gate_input_ms.p50, b.gate_input_ms.p50),
                (a.gate_input_ms.p90, b.gate_input_ms.p90),
            ] {
                let (x, y) = (x.unwrap(), y.unwrap());
                assert!(
                    (x - y).abs() <= 0.05 * y.abs().max(1.0),
                    "{}: {x} vs {y}",
                    d.name
                );
            }
            assert_eq!(a.released, b.released, "{}", d.name);
        } else {
            assert_eq!(f.severity, Severity::Warning);
            assert!(f.summary.contains("15928/P"), "{}", f.summary);
        }
    }
    assert!(
        inferred >= 3,
        "{inferred} inferred: {:#?}",
        without.findings
    );
}
