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

#[allow(dead_code)]
fn decisions(p: &Parsed) -> Vec<&Decision> {
    p.decisions().collect()
}
