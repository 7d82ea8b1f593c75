//! vLLM stats lines in the shapes real captures hold: cut mid-field,
//! two records glued on one line, pasted in brackets, and vLLM V0's own
//! prefix cache line.

use gatecal_parser::{Item, LineShape, MalformedReason, ParseOptions, VllmStats, parse_slice};

const V1: &str = "Engine 000: Avg prompt throughput: 8192.0 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 5 reqs, GPU KV cache usage: 40.1%, Prefix cache hit rate: 45.6%";

fn record(time: &str, body: &str) -> String {
    format!("(APIServer pid=1) INFO 08-21 {time} [loggers.py:123] {body}")
}

fn parse(text: &str) -> (Vec<VllmStats>, gatecal_parser::InputLedger) {
    let p = parse_slice("vllm.log", text.as_bytes(), &ParseOptions::default()).unwrap();
    let stats = p
        .items
        .into_iter()
        .filter_map(|i| match i {
            Item::VllmStats(s) => Some(*s),
            Item::Decision(_) => None,
        })
        .collect();
    assert!(p.ledger.counts.balanced());
    (stats, p.ledger)
}

#[test]
fn a_line_cut_mid_field_is_malformed_and_names_why() {
    let cut = &V1[..V1.find("Waiting: 5 reqs").unwrap() + "Waiting: 5 re".len()];
    let text = format!("{}\n{}\n", record("14:36:14", V1), record("14:36:24", cut));
    let (stats, l) = parse(&text);
    assert_eq!(stats.len(), 1);
    assert_eq!(l.counts.lines_malformed, 1);
    let m = &l.counts.first_malformed[0];
    assert_eq!(m.at.line, 2);
    assert_eq!(m.reason, MalformedReason::CutVllmStats);
    assert!(m.to_string().contains("cut short"), "{m}");
}

#[test]
fn two_glued_records_are_both_read() {
    let second = V1.replace("8192.0", "100.0");
    let text = format!(
        "{}{}\n",
        record("14:36:14", V1),
        record("14:36:24", &second)
    );
    let (stats, l) = parse(&text);
    assert_eq!(l.counts.lines_total, 1);
    assert_eq!(l.counts.lines_used, 1);
    assert_eq!(l.counts.vllm_stats, 2);
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[0].prompt_throughput, 8192.0);
    assert_eq!(stats[0].prefix_cache_hit_rate_pct, Some(45.6));
    assert_eq!(stats[1].prompt_throughput, 100.0);
    assert_eq!(stats[1].seconds_of_day, 14 * 3600 + 36 * 60 + 24);
    assert_eq!(stats[0].source.line, stats[1].source.line);
}

#[test]
fn a_record_pasted_in_brackets_is_read() {
    let text = format!("[INFO 08-21 14:36:14 loggers.py:123] {V1}\n");
    let (stats, l) = parse(&text);
    assert_eq!(l.counts.lines_used, 1, "{:?}", l.counts);
    assert_eq!(stats[0].engine.as_deref(), Some("000"));
    assert_eq!(stats[0].waiting, Some(5));
}

#[test]
fn the_v0_prefix_cache_line_is_counted_apart() {
    let text = "INFO 08-20 02:39:37 metrics.py:411] Avg prompt throughput: 871.4 tokens/s, Avg generation throughput: 88.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.2%, CPU KV cache usage: 0.0%.\n\
                INFO 08-20 02:39:37 metrics.py:427] Prefix cache hit rate: GPU: 52.22%, CPU: 0.00%\n";
    let (stats, l) = parse(text);
    assert_eq!(stats.len(), 1);
    assert_eq!(l.counts.shapes.vllm, 2);
    assert_eq!(l.counts.shapes.vllm_v0_hit_rate, 1);
    assert_eq!(l.counts.lines_ignored, 1);
    let mut c = gatecal_parser::ShapeCounts::default();
    c.add(LineShape::VllmV0HitRate);
    assert_eq!((c.vllm, c.vllm_v0_hit_rate), (1, 1));
}
