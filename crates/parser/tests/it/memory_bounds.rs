//! What open requests may hold is bounded by bytes, not by the input: the
//! open requests together at most `max_open_bytes` (the least recently
//! active are evicted beyond), one request at most an eighth of it; each
//! eviction is counted.

use gatecal_parser::{
    Assembler, AssemblerLimits, DEFAULT_MAX_EVENTS_PER_REQUEST, DeploymentNaming, Event, LineMeta,
    ParseOptions, parse_slice,
};

fn limits(max_open_bytes: usize) -> AssemblerLimits {
    AssemblerLimits {
        max_open_requests: 10_000,
        max_open_age_secs: 1e9,
        infer_not_applicable: true,
        max_events_per_request: DEFAULT_MAX_EVENTS_PER_REQUEST,
        max_open_bytes,
    }
}

fn meta(id: &str, ts: f64) -> LineMeta {
    LineMeta {
        ts: Some(ts),
        request_id: Some(id.to_string()),
        ..LineMeta::default()
    }
}

fn dump(n: usize) -> Event {
    Event::BeforeFilters {
        endpoints: (0..n)
            .map(|i| format!("llm-d/pool-decode-{i:06}-rank-0"))
            .collect(),
    }
}

/// Open requests with endpoint dumps that never complete: the bytes held
/// stay under the budget (plus the request being fed), and the requests
/// pushed out are counted as evicted for memory.
#[test]
fn open_requests_are_held_within_the_byte_budget() {
    let budget = 256 << 10;
    let mut a = Assembler::new("t.log", DeploymentNaming::fallback("t"), limits(budget));
    let mut closed = 0;
    let mut most = 0;
    for r in 0..400 {
        let id = format!("r{r}");
        a.feed(
            2 * r,
            &meta(&id, f64::from(r as u32)),
            Event::ReceivedRequest,
            &mut |_| closed += 1,
        );
        a.feed(
            2 * r + 1,
            &meta(&id, f64::from(r as u32)),
            dump(60),
            &mut |_| closed += 1,
        );
        most = most.max(a.open_bytes());
    }
    // One request with 60 ids holds a few KiB.
    assert!(most <= budget + (16 << 10), "{most}");
    assert!(
        a.requests_evicted_for_memory() > 300,
        "{}",
        a.requests_evicted_for_memory()
    );
    assert_eq!(a.requests_evicted(), a.requests_evicted_for_memory());
    assert!(a.open_requests() < 100, "{}", a.open_requests());
}

/// One request whose dumps exceed an eighth of the budget is closed as
/// evicted at once, and counted.
#[test]
fn one_request_is_held_within_an_eighth_of_the_budget() {
    let budget = 256 << 10;
    let mut a = Assembler::new("t.log", DeploymentNaming::fallback("t"), limits(budget));
    a.feed(1, &meta("big", 1.0), Event::ReceivedRequest, &mut |_| {});
    for k in 0..40 {
        a.feed(2 + k, &meta("big", 1.0), dump(100), &mut |_| {});
        assert!(
            a.open_bytes() <= budget / 8 + (16 << 10),
            "{}",
            a.open_bytes()
        );
    }
    assert!(a.requests_evicted_for_memory() >= 1);
    assert_eq!(a.requests_evicted(), a.requests_evicted_for_memory());
}

/// Through the parser: the ledger counts the requests evicted for memory
/// (a log of open requests with large endpoint dumps, as a reflected dump
/// is written), on one and several threads alike.
#[test]
fn the_ledger_counts_requests_evicted_for_memory() {
    let mut log = String::new();
    for r in 0..300 {
        let ts = 1_787_320_800.0 + f64::from(r) * 0.001;
        log.push_str(&format!(
            "{{\"level\":\"info\",\"ts\":{ts},\"msg\":\"EPP received request\",\"x-request-id\":\"r{r}\"}}\n"
        ));
        let eps: Vec<String> = (0..50)
            .map(|i| format!("{{\"ID\":{{\"Namespace\":\"llm-d\",\"Name\":\"pool-{r}-{i}\"}},\"Port\":\"8000\"}}"))
            .collect();
        log.push_str(&format!(
            "{{\"level\":\"debug\",\"ts\":{ts},\"msg\":\"Before running filter plugins\",\"x-request-id\":\"r{r}\",\"endpoints\":[{}]}}\n",
            eps.join(",")
        ));
    }
    let mut want = None;
    for threads in [1, 2, 4] {
        let opts = ParseOptions {
            threads,
            block_bytes: 4096,
            max_open_bytes: 128 << 10,
            ..ParseOptions::default()
        };
        let p = parse_slice("t.log", log.as_bytes(), &opts).unwrap();
        let c = &p.ledger.counts;
        assert!(c.balanced());
        assert!(c.requests_evicted_for_memory > 200, "{c:?}");
        assert_eq!(c.requests_evicted, c.requests_evicted_for_memory);
        let got = format!("{:?}", p.ledger);
        match &want {
            None => want = Some(got),
            Some(w) => assert_eq!(*w, got, "{threads} threads"),
        }
    }
    // The default budget holds them all.
    let p = parse_slice("t.log", log.as_bytes(), &ParseOptions::default()).unwrap();
    assert_eq!(p.ledger.counts.requests_evicted, 0);
}
