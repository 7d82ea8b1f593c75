//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::HashMap;

use gatecal_sim::TruthRecord;
use serde_json::Value;

/// Strips kubectl `--prefix` and `--timestamps` framing.
pub fn unframe(line: &str) -> &str {
    let mut l = line;
    if l.starts_with("[pod/")
        && let Some(i) = l.find("] ")
    {
        l = &l[i + 2..];
    }
    let b = l.as_bytes();
    if b.len() >= 31 && b[4] == b'-' && b[29] == b'Z' && b[30] == b' ' {
        l = &l[31..];
    }
    l
}

/// The outcome a filter message stands for.
pub fn outcome_of(msg: &str) -> Option<&'static str> {
    Some(match msg {
        "PrefixCacheAffinityFilter: narrowed to sticky" => "sticky",
        "PrefixCacheAffinityFilter: TTFT load gate broken" => "load_override",
        "PrefixCacheAffinityFilter: no sticky endpoints" => "no_match",
        "PrefixCacheAffinityFilter: exploration skip, keeping all" => "exploration",
        "PrefixCacheAffinityFilter: TTFT load gate skipped, missing signal" => "missing_signal",
        _ => return None,
    })
}

/// Checks that the log's own filter lines agree with the truth: one filter
/// line per applicable record, same request id and order, same outcome,
/// every logged penalty equal to the truth's gate input. Returns the number
/// of filter lines.
pub fn check_log_against_truth(objs: &[Value], truth: &[TruthRecord]) -> usize {
    let mut lines: HashMap<String, Vec<&Value>> = HashMap::new();
    for o in objs {
        let msg = o["msg"].as_str().unwrap_or("");
        if msg.starts_with("PrefixCacheAffinityFilter: ") {
            let id = o["x-request-id"]
                .as_str()
                .expect("filter line without id")
                .to_string();
            lines.entry(id).or_default().push(o);
        }
    }
    let mut recs: HashMap<&str, Vec<&TruthRecord>> = HashMap::new();
    for r in truth.iter().filter(|r| r.outcome != "not_applicable") {
        recs.entry(r.request_id.as_str()).or_default().push(r);
    }
    assert_eq!(lines.len(), recs.len(), "request ids with filter lines");
    let mut n = 0;
    for (id, rs) in &recs {
        let ls = lines
            .get(*id)
            .unwrap_or_else(|| panic!("no filter line for {id}"));
        assert_eq!(ls.len(), rs.len(), "filter lines of {id}");
        for (l, r) in ls.iter().zip(rs) {
            let msg = l["msg"].as_str().unwrap_or("");
            assert_eq!(outcome_of(msg), Some(r.outcome.as_str()), "{id}: {msg}");
            if r.outcome == "load_override" {
                let p = l["penalty"].as_f64().expect("penalty");
                assert_eq!(Some(p), r.truth_gate_input_ms, "{id}");
                assert_eq!(Some(p), r.logged_penalty_ms, "{id}");
            }
            n += 1;
        }
    }
    n
}

/// Parses every line of a plain log as JSON (panics on any failure).
pub fn parse_plain(log: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(log).expect("plain log is UTF-8");
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1))
        })
        .collect()
}
