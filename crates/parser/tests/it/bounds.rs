//! Bounds and validation shared by every input format: how deep JSON may
//! nest, and one domain per kind of value (counts, thresholds,
//! timestamps), with the same error text whichever format it came in.

use gatecal_parser::{Decision, MalformedReason, ParseOptions, Parsed, parse_slice};

/// A decision record of version 1.
const RECORD: &str = r#"{"v":1,"ts":1764482019.25,"deployment":"glm-5-2","request_id":"r-17","profile":"prefill","outcome":"sticky","candidates":[{"endpoint":"llm/p-0","match_blocks":22,"total_blocks":25,"block_size_tokens":64,"in_flight_tokens":41000}]}"#;

fn parse(name: &str, text: &str) -> Parsed {
    let p = parse_slice(name, text.as_bytes(), &ParseOptions::default()).unwrap();
    assert!(p.ledger.counts.balanced(), "{name}: {:?}", p.ledger.counts);
    p
}

fn reasons(p: &Parsed) -> Vec<String> {
    p.ledger
        .counts
        .first_malformed
        .iter()
        .map(|m| m.reason.to_string())
        .collect()
}

/// A log line, a decision record and a trace document nested deeper than
/// 128 levels are malformed, each saying so; 128 levels are read.
#[test]
fn json_nested_deeper_than_128_levels_says_so() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let log = |n: usize| {
        format!(
            r#"{{"level":"debug","ts":1755786974.5,"msg":"PrefixCacheAffinityFilter: TTFT load gate broken","x-request-id":"r1","extra":{}}}"#,
            deep(n)
        )
    };
    let ok = parse("ok.log", &log(127));
    assert_eq!(ok.ledger.counts.lines_malformed, 0);
    let p = parse("deep.log", &log(200));
    assert_eq!(p.ledger.counts.lines_malformed, 1);
    let r = reasons(&p);
    assert!(
        r[0].starts_with("JSON nested deeper than 128 levels at byte "),
        "{r:?}"
    );
    assert!(matches!(
        p.ledger.counts.first_malformed[0].reason,
        MalformedReason::TooDeep { .. }
    ));
    let rec = format!(
        "{RECORD}\n{{\"v\":1,\"ts\":1755786974.5,\"x\":{}}}\n",
        deep(200)
    );
    let p = parse("deep.jsonl", &rec);
    assert!(
        reasons(&p)[0].contains("JSON nested deeper than 128 levels"),
        "{:?}",
        reasons(&p)
    );
    let trace = format!(r#"{{"resourceSpans":[{{"x":{}}}]}}"#, deep(200));
    let p = parse("deep.otlp.jsonl", &trace);
    assert!(
        reasons(&p)[0].contains("JSON nested deeper than 128 levels"),
        "{:?}",
        reasons(&p)
    );
}

fn decisions(p: &Parsed) -> Vec<&Decision> {
    p.decisions().collect()
}

fn two_filter_instances() -> String {
    let path = format!(
        "{}/../../fixtures/edge/two_filter_instances.log",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

/// A filter line that is malformed (its time out of range or no time, its
/// JSON cut short or broken) still names its decision: the decision's
/// outcome is unknown, never a `not_applicable` inferred from the
/// completion line that follows.
#[test]
fn a_malformed_filter_line_gives_an_unknown_decision() {
    let log = two_filter_instances();
    let first_request: Vec<&str> = log.lines().take(15).collect();
    let filter = first_request
        .iter()
        .position(|l| l.contains("no sticky endpoints"))
        .unwrap();
    let line = first_request[filter];
    let cut = line.find("\"affinityThreshold\"").unwrap();
    for (what, broken) in [
        (
            "ts out of range",
            line.replace("\"ts\":1787322974.0005994", "\"ts\":-5"),
        ),
        (
            "ts year 9999",
            line.replace("\"ts\":1787322974.0005994", "\"ts\":253402300000"),
        ),
        (
            "ts NaN",
            line.replace("\"ts\":1787322974.0005994", "\"ts\":\"NaN\""),
        ),
        (
            "ts not a time",
            line.replace("\"ts\":1787322974.0005994", "\"ts\":\"x\""),
        ),
        ("cut short", line[..cut].to_string()),
        ("broken JSON", line.replace("\"total\":3", "\"total\":3,,")),
    ] {
        let mut text = String::new();
        for (i, l) in first_request.iter().enumerate() {
            text.push_str(if i == filter { &broken } else { l });
            text.push('\n');
        }
        let p = parse("broken.log", &text);
        assert_eq!(p.ledger.counts.lines_malformed, 1, "{what}");
        let d: Vec<(Option<&str>, Option<gatecal_filter::Outcome>)> = p
            .decisions()
            .map(|d| (d.filter.as_deref(), d.outcome))
            .collect();
        assert_eq!(
            d,
            vec![
                (Some("strict-affinity-filter"), None),
                (
                    Some("loose-affinity-filter"),
                    Some(gatecal_filter::Outcome::Sticky)
                )
            ],
            "{what}"
        );
    }
}

/// One OTLP line holding one filter span with `attrs` (and a start time).
fn span_line(start: &str, attrs: &str) -> String {
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"spanId":"a","name":"filter_prefix_cache_affinity","startTimeUnixNano":{start},"attributes":[{{"key":"gen_ai.request.id","value":{{"stringValue":"r1"}}}},{{"key":"llm_d.epp.filter.decision","value":{{"stringValue":"sticky"}}}}{attrs}]}}]}}]}}]}}"#
    )
}

fn attr(key: &str, value: &str) -> String {
    format!(r#",{{"key":"llm_d.epp.filter.{key}","value":{value}}}"#)
}

/// A trace span's counts, threshold and start time are held to the same
/// domains as a log line's: out of range, the decision is unknown (made
/// with none of its values) and the line malformed with the same words.
#[test]
fn trace_values_share_the_log_domains() {
    let good_ts = r#""1764482019250000000""#;
    let ok = parse(
        "ok.jsonl",
        &span_line(good_ts, &attr("sticky_endpoints", r#"{"intValue":"2"}"#)),
    );
    assert_eq!(ok.ledger.counts.lines_malformed, 0);
    let d = decisions(&ok);
    assert_eq!(
        (d[0].outcome, d[0].sticky),
        (Some(gatecal_filter::Outcome::Sticky), Some(2))
    );
    for (what, line, key) in [
        (
            "negative count",
            span_line(good_ts, &attr("sticky_endpoints", r#"{"intValue":"-3"}"#)),
            "llm_d.epp.filter.sticky_endpoints",
        ),
        (
            "huge count",
            span_line(
                good_ts,
                &attr("candidate_endpoints", r#"{"doubleValue":1e300}"#),
            ),
            "llm_d.epp.filter.candidate_endpoints",
        ),
        (
            "NaN threshold",
            span_line(
                good_ts,
                &attr("affinity_threshold", r#"{"doubleValue":"NaN"}"#),
            ),
            "llm_d.epp.filter.affinity_threshold",
        ),
        ("start at -1 ns", span_line("-1", ""), "startTimeUnixNano"),
        (
            "start in year 9999",
            span_line(r#""253402300000000000000""#, ""),
            "startTimeUnixNano",
        ),
    ] {
        let p = parse("bad.jsonl", &line);
        let c = &p.ledger.counts;
        assert_eq!(c.lines_malformed, 1, "{what}");
        assert_eq!(c.lines_out_of_range, 1, "{what}");
        assert_eq!(
            c.first_malformed[0].reason.to_string(),
            format!("value of `{key}` out of range"),
            "{what}"
        );
        let d = decisions(&p);
        assert_eq!(d.len(), 1, "{what}: the decision is still there");
        assert_eq!(d[0].outcome, None, "{what}: its outcome unknown");
        assert_eq!((d[0].sticky, d[0].total), (None, None), "{what}");
        assert_eq!(d[0].request_id.as_deref(), Some("r1"));
    }
}

/// A decision record's time and counts have the log lines' domains, and
/// the same words; a log line's `ts` that is no time is refused as well.
#[test]
fn record_and_log_values_share_the_domains() {
    for (what, from, to, key) in [
        (
            "ts -1 ns",
            "\"ts\":1764482019.25",
            "\"ts\":-0.000000001",
            "ts",
        ),
        (
            "ts year 9999",
            "\"ts\":1764482019.25",
            "\"ts\":253402300000",
            "ts",
        ),
        (
            "negative count",
            "\"in_flight_tokens\":41000",
            "\"in_flight_tokens\":-5",
            "in_flight_tokens",
        ),
    ] {
        let bad = RECORD.replace(from, to);
        assert_ne!(bad, RECORD);
        let p = parse("r.jsonl", &format!("{RECORD}\n{bad}\n"));
        assert_eq!(p.ledger.counts.lines_malformed, 1, "{what}");
        assert_eq!(
            reasons(&p)[0],
            format!("invalid decision record: value of `{key}` out of range"),
            "{what}"
        );
    }
    // A scorer line at `"ts":"NaN"` is no time: refused, not read as a
    // line without a time.
    let log = two_filter_instances();
    let scorer = log.lines().find(|l| l.contains("TokenLoadScorer")).unwrap();
    let nan = scorer.replace("\"ts\":1787322974.0011988", "\"ts\":\"NaN\"");
    assert_ne!(nan, scorer);
    let p = parse("nan.log", &nan);
    assert_eq!(reasons(&p), vec!["value of `ts` out of range".to_string()]);
}
