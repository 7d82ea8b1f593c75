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

/// serde_json (default features) rejects zap's 309-digit rendering of
/// `math.MaxFloat64` as "number out of range"; for parsing into a `Value`,
/// digit runs of more than 300 characters are replaced by `1e308` (the raw
/// text keeps the exact number for [`raw_number`]).
pub fn tame_huge_numbers(line: &str) -> std::borrow::Cow<'_, str> {
    let b = line.as_bytes();
    let mut out = String::new();
    let mut last = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i - start > 300 {
                out.push_str(&line[last..start]);
                out.push_str("1e308");
                last = i;
            }
        } else {
            i += 1;
        }
    }
    if last == 0 {
        return std::borrow::Cow::Borrowed(line);
    }
    out.push_str(&line[last..]);
    std::borrow::Cow::Owned(out)
}

/// The raw number text of `"key":` in a JSON line, parsed with Rust's
/// correctly rounded `f64` parser (serde_json's default float parsing can be
/// one ulp off).
pub fn raw_number(line: &str, key: &str) -> Option<f64> {
    let pat = format!("\"{key}\":");
    let i = line.find(&pat)? + pat.len();
    let rest = &line[i..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Checks that the log's own filter lines agree with the truth: one filter
/// line per applicable record, same request id and order, same outcome,
/// every logged penalty equal to the truth's gate input (exactly). `objs`
/// pairs each parsed line with its raw text. Returns the number of filter
/// lines.
pub fn check_log_against_truth(objs: &[(Value, String)], truth: &[TruthRecord]) -> usize {
    let mut lines: HashMap<String, Vec<&(Value, String)>> = HashMap::new();
    for pair in objs {
        let o = &pair.0;
        let msg = o["msg"].as_str().unwrap_or("");
        if msg.starts_with("PrefixCacheAffinityFilter: ") {
            let id = o["x-request-id"]
                .as_str()
                .expect("filter line without id")
                .to_string();
            lines.entry(id).or_default().push(pair);
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
        for ((l, raw), r) in ls.iter().map(|p| (&p.0, &p.1)).zip(rs) {
            let msg = l["msg"].as_str().unwrap_or("");
            assert_eq!(outcome_of(msg), Some(r.outcome.as_str()), "{id}: {msg}");
            if r.outcome == "load_override" {
                let p = raw_number(raw, "penalty").expect("penalty");
                assert_eq!(Some(p), r.truth_gate_input_ms, "{id}");
                assert_eq!(Some(p), r.logged_penalty_ms, "{id}");
            }
            n += 1;
        }
    }
    n
}

/// Parses every line of a plain log as JSON (panics on any failure), with
/// its raw text.
pub fn parse_plain(log: &[u8]) -> Vec<(Value, String)> {
    let text = std::str::from_utf8(log).expect("plain log is UTF-8");
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let v = serde_json::from_str(&tame_huge_numbers(l))
                .unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1));
            (v, l.to_string())
        })
        .collect()
}

/// Parses the JSON lines of a possibly framed, possibly noisy log; returns
/// them with their raw (unframed) text, and the lines that are not JSON.
pub fn parse_lenient(log: &[u8]) -> (Vec<(Value, String)>, Vec<Vec<u8>>) {
    let mut objs = Vec::new();
    let mut other = Vec::new();
    for raw in log.split(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(raw);
        let body = unframe(&text);
        match serde_json::from_str::<Value>(&tame_huge_numbers(body)) {
            Ok(v) => objs.push((v, body.to_string())),
            Err(_) => other.push(raw.to_vec()),
        }
    }
    (objs, other)
}
