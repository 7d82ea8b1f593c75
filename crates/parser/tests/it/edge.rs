//! Hand-made edge cases in `fixtures/edge/`, one test per fixture, each
//! asserting the decisions and the ledger.

use std::path::PathBuf;

use gatecal_filter::Outcome;
use gatecal_parser::{
    Completion, Decision, FilterMsg, GatePenalty, InputFormat, InputLedger, InputSpec, Item,
    LineShape, MalformedReason, ParseError, ParseOptions, VllmStats, VllmStatsVersion,
    parse_inputs, parse_slice,
};

fn edge(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/edge")
        .join(name)
}

struct Out {
    decisions: Vec<Decision>,
    stats: Vec<VllmStats>,
    ledger: InputLedger,
}

fn parse_with(name: &str, opts: &ParseOptions) -> Out {
    let mut decisions = Vec::new();
    let mut stats = Vec::new();
    let ledger = parse_inputs(&[InputSpec::path(edge(name))], opts, |i| match i {
        Item::Decision(d) => decisions.push(*d),
        Item::VllmStats(s) => stats.push(*s),
    })
    .unwrap();
    assert_eq!(ledger.inputs.len(), 1);
    assert!(ledger.total.balanced(), "{name}: {:?}", ledger.total);
    let ledger = ledger.inputs.into_iter().next().unwrap();
    assert!(ledger.counts.balanced());
    assert_eq!(ledger.counts.decisions as usize, decisions.len());
    Out {
        decisions,
        stats,
        ledger,
    }
}

fn parse(name: &str) -> Out {
    parse_with(name, &ParseOptions::default())
}

/// (total, used, ignored, malformed)
fn lines(o: &Out) -> (u64, u64, u64, u64) {
    let c = &o.ledger.counts;
    (
        c.lines_total,
        c.lines_used,
        c.lines_ignored,
        c.lines_malformed,
    )
}

fn ids(o: &Out) -> Vec<(&str, &str, &str, Option<Outcome>)> {
    o.decisions
        .iter()
        .map(|d| {
            (
                d.request_id.as_deref().unwrap_or(""),
                d.profile.as_deref().unwrap_or(""),
                d.filter.as_deref().unwrap_or(""),
                d.outcome,
            )
        })
        .collect()
}

fn check_two_filter_instances(o: &Out) {
    assert_eq!(lines(o), (15, 14, 1, 0));
    assert_eq!(
        ids(o),
        vec![
            (
                "r1",
                "default",
                "strict-affinity-filter",
                Some(Outcome::NoMatch)
            ),
            (
                "r1",
                "default",
                "loose-affinity-filter",
                Some(Outcome::Sticky)
            ),
        ]
    );
    let (strict, loose) = (&o.decisions[0], &o.decisions[1]);
    assert_eq!(
        strict.filter_type.as_deref(),
        Some("prefix-cache-affinity-filter")
    );
    assert_eq!(strict.affinity_threshold, Some(0.99));
    assert_eq!(strict.total, Some(3));
    // The strict instance saw the `Before running filter plugins` endpoints;
    // the loose one saw the strict one's survivors.
    let eps = |d: &Decision| {
        d.candidates
            .iter()
            .map(|c| c.endpoint.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(eps(strict), ["llm/p-0", "llm/p-1", "llm/p-2"]);
    assert_eq!(eps(loose), ["llm/p-0", "llm/p-1", "llm/p-2"]);
    assert_eq!(loose.sticky, Some(1));
    assert_eq!(loose.survivors.as_deref(), Some(&["llm/p-0".into()][..]));
    assert_eq!(loose.candidates[0].survived, Some(true));
    assert_eq!(loose.candidates[1].survived, Some(false));
    // Scorer lines after the filter lines belong to both decisions of the run.
    for d in [strict, loose] {
        let c = d.candidate("llm/p-0").unwrap();
        assert_eq!(c.token_load, Some(12288.0));
        assert_eq!(
            c.scores,
            vec![("token-load-scorer/token-load-scorer".into(), 0.9970703125)]
        );
        assert_eq!(d.chosen.as_deref(), Some("llm/p-0"));
        assert_eq!(d.completion, Completion::Handled);
        // The pool of `llm/p-0`..`p-2`: the owner of the pods (a
        // StatefulSet's `p-N`), not the namespace or the file.
        assert_eq!(d.deployment, "p");
        assert_eq!(d.model.as_deref(), Some("Qwen/Qwen3-32B"));
    }
    assert_eq!(strict.source.line, 6);
    assert_eq!(loose.source.line, 9);
    assert_eq!(loose.ts, Some(1787322974.000899));
    assert_eq!(o.ledger.counts.decisions_complete, 2);
}

#[test]
fn two_filter_instances() {
    let o = parse("two_filter_instances.log");
    check_two_filter_instances(&o);
    assert!(!o.ledger.gzip);
    assert!(
        o.decisions[0]
            .source
            .file
            .ends_with("two_filter_instances.log")
    );
}

#[test]
fn gzip_by_content() {
    // Named `.log`, but gzip: detected from the magic bytes.
    let o = parse("gzip_by_content.log");
    assert!(o.ledger.gzip);
    check_two_filter_instances(&o);
    assert!(o.ledger.counts.bytes_compressed < o.ledger.counts.bytes);
}

#[test]
fn crlf() {
    let o = parse("crlf.log");
    check_two_filter_instances(&o);
    assert!(
        o.decisions
            .iter()
            .all(|d| !d.request_id.as_deref().unwrap().contains('\r'))
    );
}

#[test]
fn pd_two_profiles() {
    let o = parse("pd_two_profiles.log");
    assert_eq!(lines(&o), (14, 14, 0, 0));
    assert_eq!(
        ids(&o),
        vec![
            (
                "pd-1",
                "decode",
                "prefix-cache-affinity-filter",
                Some(Outcome::Sticky)
            ),
            (
                "pd-1",
                "prefill",
                "prefix-cache-affinity-filter",
                Some(Outcome::LoadOverride)
            ),
        ]
    );
    let (dec, pre) = (&o.decisions[0], &o.decisions[1]);
    assert!(!dec.profile_inferred && !pre.profile_inferred);
    assert_eq!((dec.profile_run, pre.profile_run), (0, 1));
    assert_eq!(dec.candidates.len(), 2);
    assert_eq!(pre.candidates.len(), 3);
    assert_eq!(dec.candidate("llm/d-1").unwrap().token_load, Some(4096.0));
    assert_eq!(pre.logged_penalty_ms(), Some(19000.0));
    for d in &o.decisions {
        assert_eq!(d.prompt_tokens, Some(9600.0));
        assert_eq!(d.hit_prefix_tokens, Some(1408.0));
        assert_eq!(d.chosen.as_deref(), Some("10.0.1.1:8000,10.0.2.2:8000"));
    }
}

#[test]
fn pd_v4_only_infers_profiles_from_order() {
    let o = parse("pd_v4_only.log");
    assert_eq!(lines(&o), (10, 10, 0, 0));
    assert_eq!(
        ids(&o),
        vec![
            (
                "pd-1",
                "decode",
                "prefix-cache-affinity-filter",
                Some(Outcome::Sticky)
            ),
            (
                "pd-1",
                "prefill",
                "prefix-cache-affinity-filter",
                Some(Outcome::LoadOverride)
            ),
        ]
    );
    assert!(o.decisions.iter().all(|d| d.profile_inferred));
    assert_eq!(o.decisions[1].candidates.len(), 3);
}

#[test]
fn id_reuse_retry() {
    let o = parse("id_reuse_retry.log");
    assert_eq!(lines(&o), (15, 13, 2, 0));
    assert_eq!(
        ids(&o),
        vec![
            (
                "r1",
                "default",
                "prefix-cache-affinity-filter",
                Some(Outcome::Sticky)
            ),
            (
                "r1",
                "default",
                "prefix-cache-affinity-filter",
                Some(Outcome::LoadOverride)
            ),
        ]
    );
    assert_eq!(o.decisions[0].completion, Completion::Superseded);
    assert_eq!(o.decisions[0].chosen, None);
    assert_eq!(o.decisions[1].completion, Completion::Handled);
    let c = &o.ledger.counts;
    assert_eq!(
        (
            c.decisions_complete,
            c.decisions_incomplete,
            c.decisions_evicted
        ),
        (1, 1, 0)
    );
}

#[test]
fn truncated_last_line() {
    let o = parse("truncated_last_line.log");
    assert_eq!(lines(&o), (10, 7, 1, 2));
    assert_eq!(
        ids(&o),
        vec![(
            "r1",
            "default",
            "prefix-cache-affinity-filter",
            Some(Outcome::Sticky)
        )]
    );
    let m = &o.ledger.counts.first_malformed;
    assert_eq!(m.len(), 2);
    assert_eq!(
        (m[0].at.line, &m[0].reason),
        (1, &MalformedReason::JsonFragment)
    );
    assert_eq!(m[1].at.line, 10);
    assert!(matches!(m[1].reason, MalformedReason::BadJson { .. }));
    assert!(m[1].to_string().contains("truncated_last_line.log:10"));
}

#[test]
fn non_utf8() {
    let o = parse("non_utf8.log");
    assert_eq!(lines(&o), (9, 7, 2, 0));
    assert_eq!(o.ledger.counts.shapes.other, 1);
    assert_eq!(
        ids(&o),
        vec![(
            "r1",
            "default",
            "prefix-cache-affinity-filter",
            Some(Outcome::Sticky)
        )]
    );
}

#[test]
fn duplicate_keys() {
    let o = parse("duplicate_keys.log");
    assert_eq!(lines(&o), (8, 7, 1, 0));
    // zap does not dedupe: the last `penalty` wins, and `Request handled`
    // repeats its context keys without harm.
    assert_eq!(o.decisions[0].logged_penalty_ms(), Some(29000.0));
    assert_eq!(o.decisions[0].completion, Completion::Handled);
}

#[test]
fn maxfloat_penalty() {
    let o = parse("maxfloat_penalty.log");
    assert_eq!(lines(&o), (8, 7, 1, 0));
    let d = &o.decisions[0];
    assert_eq!(d.outcome, Some(Outcome::LoadOverride));
    assert_eq!(d.penalty, Some(GatePenalty::Ms(f64::MAX)));
    assert_eq!(d.best_sticky_ttft_ms, Some(f64::MAX));
    assert_eq!(d.best_non_sticky_ttft_ms, Some(125.5));
    assert!(d.flags.huge && !d.flags.non_finite);
    assert_eq!(o.ledger.counts.values_huge, 1);
}

#[test]
fn nan_inf_strings() {
    let o = parse("nan_inf_strings.log");
    assert_eq!(lines(&o), (8, 7, 1, 0));
    let d = &o.decisions[0];
    assert!(d.penalty.and_then(GatePenalty::ms).unwrap().is_nan());
    assert_eq!(d.best_sticky_ttft_ms, Some(f64::INFINITY));
    assert_eq!(d.best_non_sticky_ttft_ms, Some(f64::NEG_INFINITY));
    assert!(d.flags.non_finite);
    assert_eq!(o.ledger.counts.values_non_finite, 1);
}

#[test]
fn old_level_and_ts() {
    let o = parse("old_level_and_ts.log");
    assert_eq!(lines(&o), (11, 9, 2, 0));
    let d = &o.decisions[0];
    assert_eq!(d.outcome, Some(Outcome::Sticky));
    // "2026-03-10T08:15:02Z"
    assert_eq!(d.ts, Some(1_773_130_502.0));
    // TokenLoadScorer at V(1) printed as "debug" in those builds.
    assert_eq!(d.candidate("llm/p-0").unwrap().token_load, Some(512.0));
}

#[test]
fn console_encoder() {
    let o = parse("console_encoder.log");
    assert_eq!(lines(&o), (11, 7, 4, 0));
    assert_eq!(o.ledger.counts.shapes.console, 9);
    let d = &o.decisions[0];
    assert_eq!(d.request_id.as_deref(), Some("r1"));
    assert_eq!(d.outcome, Some(Outcome::LoadOverride));
    assert_eq!(d.logged_penalty_ms(), Some(8000.0));
    assert_eq!(d.filter.as_deref(), Some("prefix-cache-affinity-filter"));
    // "2026-02-10T08:15:02Z"
    assert_eq!(d.ts, Some(1_770_711_302.0));
    assert_eq!(d.model.as_deref(), Some("Qwen/Qwen3-32B"));
    assert_eq!(d.survivors.as_ref().map(Vec::len), Some(2));
}

#[test]
fn kubectl_prefix_timestamps() {
    let o = parse("kubectl_prefix_timestamps.log");
    assert_eq!(lines(&o), (20, 16, 4, 0));
    assert_eq!(o.ledger.counts.shapes.kubectl_error, 1);
    // The same id on two pods gives two requests.
    let mut got: Vec<_> = o
        .decisions
        .iter()
        .map(|d| {
            (
                d.epp_pod.clone().unwrap().to_string(),
                d.request_id.clone().unwrap().to_string(),
                d.outcome,
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "glm-epp-7c9d8-q8n4m".to_string(),
                "r1".to_string(),
                Some(Outcome::LoadOverride)
            ),
            (
                "glm-epp-7c9d8-xk2lp".to_string(),
                "r1".to_string(),
                Some(Outcome::Sticky)
            ),
            (
                "glm-epp-7c9d8-xk2lp".to_string(),
                "r9".to_string(),
                Some(Outcome::NoMatch)
            ),
        ]
    );
    // Deployment from the pod's owner, without the chart's `-epp`.
    assert!(o.decisions.iter().all(|d| d.deployment == "glm"));
    // A line without its own ts takes the kubelet's.
    let r9 = o
        .decisions
        .iter()
        .find(|d| d.request_id.as_deref() == Some("r9"))
        .unwrap();
    assert!((r9.ts.unwrap() - 1_787_322_973.000_1).abs() < 1e-6);
    assert_eq!(r9.completion, Completion::EndOfInput);
    assert_eq!(r9.filter, None);
    assert_eq!(o.ledger.counts.decisions_without_instance, 1);
}

#[test]
fn interleaved_unordered_ts() {
    let o = parse("interleaved_unordered_ts.log");
    assert_eq!(lines(&o), (22, 20, 2, 0));
    let mut got = ids(&o);
    got.sort_by_key(|x| x.0);
    assert_eq!(
        got,
        vec![
            (
                "ra",
                "default",
                "prefix-cache-affinity-filter",
                Some(Outcome::Sticky)
            ),
            (
                "rb",
                "default",
                "prefix-cache-affinity-filter",
                Some(Outcome::NoMatch)
            ),
        ]
    );
    let rb = o
        .decisions
        .iter()
        .find(|d| d.request_id.as_deref() == Some("rb"))
        .unwrap();
    assert_eq!(rb.candidate("llm/p-1").unwrap().token_load, Some(200.0));
    assert_eq!(rb.candidate("llm/p-0").unwrap().token_load, None);
    let ra = o
        .decisions
        .iter()
        .find(|d| d.request_id.as_deref() == Some("ra"))
        .unwrap();
    assert_eq!(ra.candidate("llm/p-0").unwrap().token_load, Some(100.0));
    assert!(ra.candidate("llm/p-1").is_none(), "not a candidate of ra");
}

#[test]
fn mid_request_start_end() {
    let o = parse("mid_request_start_end.log");
    assert_eq!(lines(&o), (17, 15, 2, 0));
    assert_eq!(
        ids(&o),
        vec![
            (
                "r1",
                "default",
                "prefix-cache-affinity-filter",
                Some(Outcome::Sticky)
            ),
            (
                "r9",
                "default",
                "prefix-cache-affinity-filter",
                Some(Outcome::LoadOverride)
            ),
        ]
    );
    assert_eq!(o.decisions[1].completion, Completion::EndOfInput);
    let c = &o.ledger.counts;
    assert_eq!((c.decisions_complete, c.decisions_incomplete), (1, 1));
}

#[test]
fn all_filter_versions() {
    let o = parse("all_filter_versions.log");
    assert_eq!(lines(&o), (77, 67, 10, 0));
    let by = |rid: &str| {
        o.decisions
            .iter()
            .find(|d| d.request_id.as_deref() == Some(rid))
            .unwrap()
    };
    assert_eq!(o.decisions.len(), 9);
    let g0 = by("g0");
    assert_eq!(
        (g0.message, g0.outcome),
        (FilterMsg::EpsilonSkip, Some(Outcome::Exploration))
    );
    assert_eq!(g0.affinity_threshold, Some(0.8));
    assert_eq!(g0.total, Some(4));
    assert_eq!(by("v1x").outcome, Some(Outcome::Exploration));
    let v2 = by("v2");
    assert_eq!(
        (v2.message, v2.outcome),
        (FilterMsg::TokensGateBroken, Some(Outcome::LoadOverride))
    );
    assert_eq!(v2.penalty, Some(GatePenalty::Tokens(298000.0)));
    assert_eq!(v2.logged_penalty_ms(), None, "tokens, not ms");
    assert_eq!(v2.extras().best_sticky_tokens, Some(300000.0));
    let v5 = by("v5");
    assert_eq!(v5.outcome, Some(Outcome::MissingSignal));
    assert_eq!(
        (v5.extras().sticky_observed, v5.extras().non_sticky_observed),
        (Some(true), Some(false))
    );
    let v6a = by("v6a");
    assert_eq!(v6a.outcome, Some(Outcome::RequestLoadOverride));
    assert_eq!(v6a.extras().non_sticky_request_ttft_ms, Some(300.25));
    assert_eq!(v6a.max_penalty, Some(GatePenalty::Ms(18000.0)));
    assert_eq!(by("v6b").extras().added, Some(2.0));
    let mf = by("mf");
    assert_eq!(mf.outcome, Some(Outcome::NoMatch));
    assert_eq!(mf.extras().min_cached_tokens, Some(7964.0));
    let sc = by("sc");
    assert_eq!(sc.message, FilterMsg::SessionCostGate);
    // stickyCost 2.5 > nonStickyCost 1.5: the non-sticky set was cheaper.
    assert_eq!(sc.outcome, Some(Outcome::LoadOverride));
    assert_eq!(sc.extras().penalty_source.as_deref(), Some("sessionCost"));
    let p = by("p2251");
    assert_eq!(p.outcome, Some(Outcome::Sticky));
    assert_eq!(p.best_sticky_ttft_ms, Some(125.5));
    assert_eq!(p.extras().prefill_throughput, Some(16000.0));
    let c1 = p.candidate("llm/p-1").unwrap();
    assert_eq!(
        (c1.in_flight_tokens, c1.throughput, c1.ttft_ms),
        (Some(64000), Some(16000.0), Some(4000.0))
    );
    assert_eq!(c1.survived, Some(false));
    assert!(
        o.decisions
            .iter()
            .all(|d| d.completion == Completion::Handled)
    );
}

#[test]
fn startup_events_are_used_lines() {
    let bytes = std::fs::read(edge("all_filter_versions.log")).unwrap();
    let first_two: Vec<&[u8]> = bytes.split(|&b| b == b'\n').take(2).collect();
    let p = parse_slice(
        "startup.log",
        &first_two.join(&b'\n'),
        &ParseOptions::default(),
    )
    .unwrap();
    assert_eq!(p.ledger.counts.lines_used, 2);
    assert_eq!(p.items.len(), 0);
}

#[test]
fn vllm_stats() {
    let o = parse_with(
        "vllm_stats.log",
        &ParseOptions {
            year: Some(2026),
            ..ParseOptions::default()
        },
    );
    assert_eq!(lines(&o), (9, 6, 2, 1));
    assert_eq!(o.ledger.counts.shapes.vllm, 9);
    assert_eq!(o.stats.len(), 6);
    assert_eq!(o.ledger.counts.vllm_stats, 6);
    let s = &o.stats;
    assert_eq!(s[0].version, VllmStatsVersion::V0);
    assert_eq!(
        (s[0].prompt_throughput, s[0].waiting, s[0].swapped),
        (1234.5, Some(1), Some(0))
    );
    assert_eq!(s[0].ts, Some(1_787_322_974.0));
    assert_eq!(s[1].version, VllmStatsVersion::V1);
    assert_eq!(s[1].engine.as_deref(), Some("000"));
    assert_eq!(s[1].prefix_cache_hit_rate_pct, Some(45.6));
    assert_eq!(s[2].engine.as_deref(), Some("001"));
    assert_eq!(s[2].mm_cache_hit_rate_pct, Some(0.0));
    assert_eq!(s[3].level, "DEBUG");
    assert_eq!(s[4].engine.as_deref(), Some("2 Engines Aggregated"));
    assert_eq!(s[4].deferred, Some(1));
    // The kubelet timestamp is exact; the pod comes from the prefix.
    assert_eq!(s[5].ts, Some(1_787_323_024.5));
    assert_eq!(s[5].pod.as_deref(), Some("qwen-decode-6d9f7c8b9-abcde"));
    // Named as its pool is: the owner without the chart's `-decode`.
    assert_eq!(s[5].deployment, "qwen");
    assert_eq!(s[0].pod.as_deref(), Some("vllm_stats"));
    assert_eq!(o.ledger.counts.first_malformed[0].at.line, 8);
    // Without a year and any absolute time the records stay relative.
    let rel = parse("vllm_stats.log");
    assert_eq!(rel.stats[0].ts, None);
    assert_eq!(
        (
            rel.stats[0].month,
            rel.stats[0].day,
            rel.stats[0].seconds_of_day
        ),
        (8, 21, 52_574)
    );
    assert_eq!(rel.stats[5].ts, Some(1_787_323_024.5));
}

#[test]
fn endpoint_shapes() {
    let o = parse("endpoint_shapes.log");
    assert_eq!(lines(&o), (10, 9, 1, 0));
    let d = &o.decisions[0];
    assert_eq!(
        d.survivors.as_deref().unwrap(),
        [
            "llm/p-0",
            "llm/p-1",
            "llm/p-2-rank-1",
            "10.0.0.9:8000",
            "p-3"
        ]
    );
    assert_eq!(
        d.candidate("llm/p-0").unwrap().scores,
        vec![(
            "kv-cache-utilization-scorer/kv-cache-utilization-scorer".into(),
            0.5
        )]
    );
    assert_eq!(
        d.candidate("llm/p-2-rank-1").unwrap().token_load,
        Some(4_194_304.0)
    );
}

#[test]
fn klog_panic_noise() {
    let o = parse("klog_panic_noise.log");
    assert_eq!(lines(&o), (20, 7, 13, 0));
    let sh = &o.ledger.counts.shapes;
    assert_eq!((sh.klog, sh.go_panic, sh.blank, sh.other), (2, 6, 3, 1));
    assert_eq!(
        ids(&o),
        vec![(
            "r1",
            "default",
            "prefix-cache-affinity-filter",
            Some(Outcome::Sticky)
        )]
    );
}

#[test]
fn decisions_jsonl() {
    let o = parse("decisions.jsonl");
    assert_eq!(o.ledger.format, InputFormat::Decisions);
    assert_eq!(lines(&o), (6, 3, 1, 2));
    assert_eq!(o.ledger.counts.shapes.decision_record, 5);
    let m = &o.ledger.counts.first_malformed;
    assert_eq!((m[0].at.line, m[1].at.line), (3, 5));
    assert!(matches!(m[0].reason, MalformedReason::BadRecord(_)));
    let d = &o.decisions;
    assert_eq!(d[0].request_id.as_deref(), Some("r-17"));
    assert_eq!(d[0].candidates[0].match_blocks, Some(22));
    assert_eq!(d[0].candidates[0].to_candidate().matched_tokens(), 22 * 64);
    assert_eq!(d[1].logged_penalty_ms(), Some(19000.5));
    assert_eq!(d[1].candidates[0].predicted_ttft_ms, Some(12.5));
    assert_eq!(d[2].outcome, None);
    assert!(
        d.iter()
            .all(|d| d.completion == Completion::Record && d.deployment == "glm-5-2")
    );
    // Forcing logs reads the same lines as (ignored) JSON.
    let logs = parse_with(
        "decisions.jsonl",
        &ParseOptions {
            format: InputFormat::Logs,
            ..ParseOptions::default()
        },
    );
    assert_eq!(logs.decisions.len(), 0);
}

#[test]
fn decisions_roundtrip_through_writer() {
    let o = parse("two_filter_instances.log");
    let mut w = gatecal_parser::DecisionWriter::new(Vec::new());
    for d in &o.decisions {
        w.write(d).unwrap();
    }
    assert_eq!(w.written(), 2);
    let bytes = w.into_inner().unwrap();
    let back = parse_slice("back.jsonl", &bytes, &ParseOptions::default()).unwrap();
    assert_eq!(back.ledger.format, InputFormat::Decisions);
    let got: Vec<_> = back
        .decisions()
        .map(|d| {
            (
                d.request_id.clone(),
                d.filter.clone(),
                d.outcome,
                d.candidates.len(),
            )
        })
        .collect();
    let want: Vec<_> = o
        .decisions
        .iter()
        .map(|d| {
            (
                d.request_id.clone(),
                d.filter.clone(),
                d.outcome,
                d.candidates.len(),
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn huge_line_is_malformed_and_skipped() {
    let mut bytes =
        b"{\"level\":\"info\",\"ts\":1,\"msg\":\"EPP received request\",\"x-request-id\":\"r1\"}\n"
            .to_vec();
    bytes.extend_from_slice(
        b"{\"level\":\"debug\",\"msg\":\"Before running filter plugins\",\"endpoints\":[",
    );
    while bytes.len() < 6 << 20 {
        bytes.extend_from_slice(b"{\"ID\":{\"Namespace\":\"llm\",\"Name\":\"p\"}},");
    }
    bytes.extend_from_slice(b"{}]}\n");
    bytes.extend(std::fs::read(edge("two_filter_instances.log")).unwrap());
    let p = parse_slice("huge.log", &bytes, &ParseOptions::default()).unwrap();
    let c = &p.ledger.counts;
    assert_eq!(
        (
            c.lines_total,
            c.lines_used,
            c.lines_ignored,
            c.lines_malformed
        ),
        (17, 15, 1, 1)
    );
    assert!(
        matches!(c.first_malformed[0].reason, MalformedReason::TooLong { bytes } if bytes > 4 << 20)
    );
    assert_eq!(p.decisions().count(), 2);
    // Under a raised cap the same line is read (and gives candidates).
    let big = ParseOptions {
        max_line_bytes: 16 << 20,
        ..ParseOptions::default()
    };
    let p = parse_slice("huge.log", &bytes, &big).unwrap();
    assert_eq!(p.ledger.counts.lines_malformed, 0);
}

#[test]
fn strict_mode_names_the_line() {
    let opts = ParseOptions {
        strict: true,
        ..ParseOptions::default()
    };
    let err = parse_inputs(
        &[InputSpec::path(edge("truncated_last_line.log"))],
        &opts,
        |_| {},
    )
    .unwrap_err();
    match &err {
        ParseError::Malformed(m) => {
            assert_eq!(m.at.line, 1);
            assert!(m.at.file.ends_with("truncated_last_line.log"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("truncated_last_line.log:1"));
    // A clean file passes strict mode.
    assert!(
        parse_inputs(
            &[InputSpec::path(edge("two_filter_instances.log"))],
            &opts,
            |_| {}
        )
        .is_ok()
    );
}

#[test]
fn unreadable_inputs_are_typed_errors_naming_the_path() {
    let missing = edge("no_such_file.log");
    let err = parse_inputs(
        &[InputSpec::path(&missing)],
        &ParseOptions::default(),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::NotFound { .. }));
    assert_eq!(err.path(), Some(missing.as_path()));
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("dangling.log");
    std::os::unix::fs::symlink(dir.path().join("gone"), &link).unwrap();
    // In a folder, a link that cannot be followed is skipped and listed;
    // named by path, it is a file that does not exist.
    let ledger = parse_inputs(
        &[InputSpec::path(dir.path())],
        &ParseOptions::default(),
        |_| {},
    )
    .unwrap();
    assert!(ledger.inputs.is_empty());
    assert_eq!(ledger.skipped.len(), 1, "{:?}", ledger.skipped);
    assert!(ledger.skipped[0].path.ends_with("dangling.log"));
    assert!(matches!(
        ledger.skipped[0].reason,
        gatecal_parser::SkipReason::BadSymlink { .. }
    ));
    let err =
        parse_inputs(&[InputSpec::path(&link)], &ParseOptions::default(), |_| {}).unwrap_err();
    assert!(matches!(err, ParseError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("dangling.log"));
    let err = parse_inputs(
        &[InputSpec::path(dir.path().join("*.nothing"))],
        &ParseOptions::default(),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::NotFound { .. }));
}

#[test]
fn folders_globs_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let two = std::fs::read(edge("two_filter_instances.log")).unwrap();
    let gz = std::fs::read(edge("gzip_by_content.log")).unwrap();
    std::fs::create_dir_all(dir.path().join("glm-5-2")).unwrap();
    std::fs::create_dir_all(dir.path().join("qwen/deep")).unwrap();
    std::fs::write(dir.path().join("glm-5-2/b.log"), &two).unwrap();
    std::fs::write(dir.path().join("glm-5-2/a.log.gz"), &gz).unwrap();
    std::fs::write(dir.path().join("qwen/deep/c.log"), &two).unwrap();
    std::fs::write(dir.path().join(".hidden.log"), b"x\n").unwrap();
    let mut deps = Vec::new();
    let ledger = parse_inputs(
        &[InputSpec::path(dir.path())],
        &ParseOptions::default(),
        |i| {
            if let Item::Decision(d) = i {
                deps.push(d.deployment.clone());
            }
        },
    )
    .unwrap();
    // Recursive, sorted, hidden entries skipped.
    let names: Vec<_> = ledger
        .inputs
        .iter()
        .map(|i| i.name.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a.log.gz", "b.log", "c.log"]);
    // Folders never name a deployment: the pool of `llm/p-N` does.
    assert_eq!(deps, ["p"; 6]);
    assert_eq!(ledger.total.decisions, 6);
    assert_eq!(ledger.total.lines_total, 45);
    assert!(ledger.total.balanced());
    // A glob, and NAME=PATH naming.
    let arg = format!("mine={}/glm-5-2/*.log*", dir.path().display());
    let spec = InputSpec::parse(&arg);
    assert_eq!(spec.name.as_deref(), Some("mine"));
    let mut deps = Vec::new();
    let ledger = parse_inputs(&[spec], &ParseOptions::default(), |i| {
        if let Item::Decision(d) = i {
            deps.push(d.deployment.clone());
        }
    })
    .unwrap();
    assert_eq!(ledger.inputs.len(), 2);
    assert!(deps.iter().all(|d| d == "mine"));
    assert_eq!(ledger.inputs[0].deployment.as_deref(), Some("mine"));
}

#[test]
fn shapes_are_counted() {
    let p = parse_slice(
        "s.log",
        b"{\"level\":\"info\",\"ts\":1,\"msg\":\"x\"}\n\nI0821 14:36:14.123456       1 x.go:1] y\nerror: z\n",
        &ParseOptions::default(),
    )
    .unwrap();
    let s = p.ledger.counts.shapes;
    assert_eq!((s.zap_json, s.blank, s.klog, s.kubectl_error), (1, 1, 1, 1));
    let _ = LineShape::Other;
}

#[test]
fn dump_cut_inside_is_malformed_not_short() {
    let text = std::fs::read_to_string(edge("two_filter_instances.log")).unwrap();
    let before = text
        .lines()
        .find(|l| l.contains("Before running filter plugins"))
        .unwrap();
    // Cut right after the first endpoint's closing brace (a CRI split).
    let cut = before.find("},{\"ID\"").unwrap() + 1;
    let p = parse_slice(
        "cut.log",
        &before.as_bytes()[..cut],
        &ParseOptions::default(),
    )
    .unwrap();
    assert_eq!(p.ledger.counts.lines_malformed, 1);
    // Whole, the same line gives the three candidates.
    let p = parse_slice("whole.log", before.as_bytes(), &ParseOptions::default()).unwrap();
    assert_eq!(p.ledger.counts.lines_used, 1);
}

#[test]
fn prefix_producers_at_v5() {
    let o = parse("producers_v5.log");
    // Used: 8 + 6 `Found cached servers`, the precise `Produce completed`;
    // ignored: the P2P producer's `Produce completed` and the indexer's
    // state line, besides the usual ones.
    assert_eq!(lines(&o), (51, 46, 5, 0));
    let by_id = |id: &str| {
        o.decisions
            .iter()
            .find(|d| d.request_id.as_deref() == Some(id))
            .unwrap()
            .producers
    };
    let a1 = by_id("approx-1");
    assert_eq!(a1.approx_cached_blocks, 8);
    assert_eq!(a1.approx_total_blocks, Some(10.0));
    assert_eq!(a1.precise_max_match_blocks, None);
    let a2 = by_id("approx-2");
    assert_eq!(
        (a2.approx_cached_blocks, a2.approx_total_blocks),
        (6, Some(7.0))
    );
    let p = by_id("precise-1");
    assert_eq!(p.approx_cached_blocks, 0);
    assert_eq!(p.precise_total_blocks, Some(50.0));
    assert_eq!(p.precise_max_match_blocks, Some(45.5));
    // The endpoint it was handled by (10.0.0.1:8000) is the one with 45.5;
    // the approximate producer's requests have no such entry.
    assert_eq!(p.precise_handled_match_blocks, Some(45.5));
    assert_eq!(a1.precise_handled_match_blocks, None);
    // The prefix scorer's scores are the candidates' own.
    let d = o
        .decisions
        .iter()
        .find(|d| d.request_id.as_deref() == Some("approx-1"))
        .unwrap();
    let c = d.candidate("llm/p-0").unwrap();
    assert!(
        c.scores
            .contains(&("prefix-cache-scorer/prefix-cache-scorer".into(), 0.8))
    );

    // Values out of their domain are malformed lines, named.
    let bad = [
        r#"{"level":"trace","ts":1787322974.1,"caller":"approximateprefix/plugin.go:326","msg":"Found cached servers","x-request-id":"b","total # blocks":-3}"#,
        r#"{"level":"trace","ts":1787322974.2,"logger":"precise-prefix-cache-producer/p","caller":"preciseprefixcache/producer.go:411","msg":"Produce completed","x-request-id":"b","blockKeys":5,"scores":{"10.0.0.1:8000":"x"}}"#,
        r#"{"level":"trace","ts":1787322974.3,"logger":"precise-prefix-cache-producer/p","caller":"preciseprefixcache/producer.go:411","msg":"Produce completed","x-request-id":"b","blockKeys":-1,"scores":{}}"#,
    ];
    let p = parse_slice(
        "bad.log",
        bad.join("\n").as_bytes(),
        &ParseOptions::default(),
    )
    .unwrap();
    let m = &p.ledger.counts.first_malformed;
    let reasons: Vec<String> = m.iter().map(|x| x.reason.to_string()).collect();
    assert_eq!(p.ledger.counts.lines_malformed, 3, "{reasons:?}");
    assert!(reasons[0].contains("total # blocks"), "{reasons:?}");
    assert!(reasons[1].contains("scores"), "{reasons:?}");
    assert!(reasons[2].contains("blockKeys"), "{reasons:?}");
}

#[test]
fn precise_match_of_the_handled_address_only_when_one_endpoint_was_picked() {
    let text = std::fs::read_to_string(edge("producers_v5.log")).unwrap();
    let request: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(r#""x-request-id":"precise-1""#))
        .collect();
    let picker = |name: &str, ts: &str| {
        format!(
            r#"{{"level":"debug","ts":{ts},"caller":"scheduling/scheduler_profile.go:388","msg":"Completed running picker plugin successfully","x-request-id":"precise-1","plugin":"max-score-picker/max-score-picker","result":{{"TargetEndpoints":[{{"ID":{{"Namespace":"llm","Name":"{name}"}},"Name":"{name}","Address":"10.0.0.9","Port":"8000"}}],"ScoredCandidates":null}}}}"#
        )
    };
    let handled = request.len() - 1;
    let request: Vec<String> = request.iter().map(|l| l.to_string()).collect();
    let decisions = |pickers: &[String]| {
        let mut lines: Vec<String> = request[..handled].to_vec();
        lines.extend(pickers.iter().cloned());
        lines.push(request[handled].clone());
        let o = parse_slice(
            "p.log",
            lines.join("\n").as_bytes(),
            &ParseOptions::default(),
        )
        .unwrap();
        o.items
            .into_iter()
            .filter_map(|i| match i {
                gatecal_parser::Item::Decision(d) => Some(d.producers.precise_handled_match_blocks),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // One endpoint picked: the handled address's entry of `scores`.
    assert_eq!(decisions(&[picker("p-0", "1787322974.0049")]), [Some(45.5)]);
    // A second run (a P/D request's prefill profile) picking another
    // endpoint: which address is whose is not logged, none is read.
    let start = request
        .iter()
        .position(|l| l.contains("Running scheduler profile"))
        .unwrap();
    let mut pickers = vec![picker("p-0", "1787322974.0049")];
    for l in &request[start..handled] {
        // The same run 10 ms later, as the prefill profile.
        let ts: f64 = l
            .split(r#""ts":"#)
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        pickers.push(
            l.replacen(
                &format!(r#""ts":{ts}"#),
                &format!(r#""ts":{:.7}"#, ts + 0.01),
                1,
            )
            .replace(r#""profile":"default""#, r#""profile":"prefill""#),
        );
    }
    pickers.push(picker("p-1", "1787322974.0149"));
    let got = decisions(&pickers);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(Option::is_none), "{got:?}");
}
