//! Matched tokens from the prefix producers' `-v=5` lines, against the
//! simulator's truth: the break-even in tokens from the EPP log alone equals
//! the one from the decision records (exact match info) on every deployment,
//! those with 64-token blocks through the approximate producer's lines and
//! the prefix scorer's scores, the others through the precise producer's.

use gatecal_analysis::{
    ConfigSet, DecisionInput, InputSummary, Recommend, RecommendOptions, RecommendReport,
};
use gatecal_parser::{Item, ParseOptions, parse_slice};
use gatecal_sim::{Variant, run, scenario};

fn report(name: &str, bytes: &[u8]) -> RecommendReport {
    let mut rec = Recommend::new(RecommendOptions::default(), ConfigSet::default());
    let parsed = parse_slice(name, bytes, &ParseOptions::default()).expect("parse");
    for item in parsed.items {
        if let Item::Decision(d) = item {
            rec.push_decision(DecisionInput::from(*d));
        }
    }
    rec.finish(InputSummary::default())
}

#[test]
fn producer_lines_give_the_true_break_even_in_tokens() {
    let s = scenario("eight-deployments").unwrap().with_requests(2500);
    let variant = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let out = run(&s, 1, &variant);
    let mut records = Vec::new();
    for t in &out.truth {
        serde_json::to_writer(&mut records, t).unwrap();
        records.push(b'\n');
    }
    let from_log = report("epp.log", &out.epp_log);
    let truth = report("truth.jsonl", &records);
    let block_size = |name: &str| {
        s.deployments
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.block_size)
            .unwrap()
    };
    let mut compared = 0;
    for d in &from_log.deployments {
        let t = truth.deployments.iter().find(|x| x.name == d.name).unwrap();
        if t.break_even_tokens.count == 0 {
            continue;
        }
        compared += 1;
        assert_eq!(d.break_even_tokens, t.break_even_tokens, "{}", d.name);
        let label = if block_size(&d.name) >= 64 {
            "approximate_producer"
        } else {
            "precise_producer"
        };
        let sources: Vec<&str> = d
            .matched_tokens
            .sources
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(sources, [label], "{}", d.name);
    }
    assert!(compared >= 6, "{compared} deployments compared");
    // Without the -v=5 lines the same log has none.
    let plain = run(&s, 1, &Variant::default());
    let r = report("epp.log", &plain.epp_log);
    assert!(r.deployments.iter().all(|d| d.break_even_tokens.count == 0));
}

use gatecal_test_support::report::ok_json;

/// The recommend binary on files, with more arguments.
fn recommend_json(files: &[&std::path::Path], more: &[&std::path::Path]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(files)
        .args(more)
        .args(["--format", "json"])
        .output()
        .expect("run recommend");
    ok_json(&out, "recommend: ")
}

/// `(value, [low, high], method)` of a deployment's peak.
fn peak(v: &serde_json::Value, deployment: &str) -> (f64, [f64; 2], String) {
    let d = v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == deployment)
        .unwrap_or_else(|| panic!("{deployment} in the report"));
    let p = &d["peak_prefill_throughput"];
    let i = p["interval"].as_array().expect("an interval");
    (
        p["value"].as_f64().unwrap(),
        [i[0].as_f64().unwrap(), i[1].as_f64().unwrap()],
        p["method"].as_str().unwrap().to_string(),
    )
}

#[test]
fn v5_log_gives_the_peak_each_request_s_uncached_tokens_and_records_keep_them() {
    // Enough requests that both deployments saturate their engines for
    // many stats lines (asserted below): the queue model needs requests
    // that waited.
    let s = scenario("peak-sweep").unwrap().with_requests(12000);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, variant: &Variant| {
        let out = run(&s, 1, variant);
        let log = dir.path().join(format!("{name}.log"));
        std::fs::write(&log, &out.epp_log).unwrap();
        let vllm = dir.path().join(format!("{name}.vllm"));
        std::fs::create_dir(&vllm).unwrap();
        for (pod, bytes) in &out.vllm_logs {
            std::fs::write(vllm.join(format!("{pod}.log")), bytes).unwrap();
        }
        let truth = |dep: &str| {
            let d = out
                .summary
                .deployments
                .iter()
                .find(|d| d.deployment == dep)
                .unwrap();
            let saturated = d.saturated_intervals.unwrap_or(0);
            assert!(saturated >= 8, "{dep}: {saturated} saturated intervals");
            d.effective_peak_prefill_tps.unwrap()
        };
        (log, vllm, truth("agent-drift"), truth("rag-hi-short"))
    };
    let v5 = Variant {
        producers_v5: true,
        ..Variant::default()
    };
    let (log5, vllm5, agent_truth, rag_truth) = write("v5", &v5);
    let (log4, vllm4, _, _) = write("v4", &Variant::default());
    let records = dir.path().join("decisions.jsonl");
    let emit = std::path::Path::new("--emit-decisions");
    let from_log = recommend_json(&[&log5, &vllm5], &[emit, &records]);
    let read_back = recommend_json(&[&records, &vllm5], &[]);
    let routing_only = recommend_json(&[&log4, &vllm4], &[]);
    for (dep, truth) in [("agent-drift", agent_truth), ("rag-hi-short", rag_truth)] {
        let (value, interval, method) = peak(&from_log, dep);
        // Measured from the requests themselves: the queue model, on
        // matches the method says came from the producers' lines.
        assert!(
            method.contains("first-come-first-served queue")
                && method.contains("matched from the prefix producers' -v=5 lines"),
            "{dep}: {method}"
        );
        assert!(
            (value - truth).abs() <= 0.05 * truth && interval[0] <= truth && truth <= interval[1],
            "{dep}: {value} {interval:?} against {truth}"
        );
        // The records written keep what the log gave.
        assert_eq!(peak(&read_back, dep), (value, interval, method), "{dep}");
        // At -v=4 (the endpoint picked, no match) the interval is wider.
        let (_, wide, method4) = peak(&routing_only, dep);
        assert!(!method4.contains("queue"), "{dep}: {method4}");
        assert!(
            wide[1] - wide[0] > 2.0 * (interval[1] - interval[0]),
            "{dep}: {wide:?} at -v=4 against {interval:?}"
        );
    }
    let written = std::fs::read_to_string(&records).unwrap();
    assert!(written.contains(r#""picked_match":{"match_blocks":"#));
}
