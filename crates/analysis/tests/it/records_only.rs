//! An analysis that makes the records alone (`records_only`, the audit
//! that runs for the whole of a `--follow` run) hands on the same records
//! as the full analysis, and keeps no figure of its own.

use std::cell::RefCell;
use std::rc::Rc;

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary, Recommend, RecommendOptions,
};
use gatecal_parser::{DecisionRecord, ParseOptions, parse_slice};

/// The decisions of a fixture log (and of a simulator run, whose gate
/// breaks), each with its record to complete, as `--follow` reads them.
fn decisions() -> Vec<DecisionInput> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut logs = vec![std::fs::read(root.join("eight-deployments/epp.log")).unwrap()];
    let s = gatecal_sim::scenario("peak-sweep")
        .unwrap()
        .with_requests(400);
    logs.push(gatecal_sim::run(&s, 3, &gatecal_sim::Variant::default()).epp_log);
    let mut out = Vec::new();
    for log in logs {
        let parsed = parse_slice("epp.log", &log, &ParseOptions::default()).unwrap();
        for d in parsed.decisions() {
            let record = Box::new(DecisionRecord::from(d));
            let mut input = DecisionInput::from(d.clone());
            input.record = Some(record);
            out.push(input);
        }
    }
    out
}

/// The records written, as JSON lines.
fn sink() -> (Rc<RefCell<Vec<String>>>, gatecal_analysis::RecordSink) {
    let lines = Rc::new(RefCell::new(Vec::new()));
    let to = lines.clone();
    (
        lines,
        Box::new(move |r: DecisionRecord| to.borrow_mut().push(serde_json::to_string(&r).unwrap())),
    )
}

#[test]
fn gate_dist_records_only_writes_the_same_records_and_counts_nothing() {
    let ds = decisions();
    let (full, to_full) = sink();
    let (only, to_only) = sink();
    let new = || {
        GateDist::new(GateDistOptions::default(), ConfigSet::default())
            .with_max_pending(gatecal_analysis::MAX_PENDING_DECISIONS_FOLLOWING)
    };
    let mut a = new().with_records(to_full);
    let mut b = new().records_only().with_records(to_only);
    for d in &ds {
        a.push(d.clone());
        b.push(d.clone());
    }
    let ra = a.finish(InputSummary::default());
    let rb = b.finish(InputSummary::default());
    assert!(
        ra.overall.stats.decisions > 100,
        "{}",
        ra.overall.stats.decisions
    );
    assert_eq!(full.borrow().len(), ds.len());
    assert_eq!(*full.borrow(), *only.borrow());
    assert_eq!(rb.overall.stats.decisions, 0);
    assert!(rb.deployments.is_empty());
}

#[test]
fn recommend_records_only_writes_the_same_records_and_keeps_nothing() {
    let ds = decisions();
    let (full, to_full) = sink();
    let (only, to_only) = sink();
    let new = || {
        Recommend::new(RecommendOptions::default(), ConfigSet::default())
            .with_max_pending(gatecal_analysis::MAX_PENDING_DECISIONS_FOLLOWING)
    };
    let mut a = new().with_records(to_full);
    let mut b = new().records_only().with_records(to_only);
    for d in &ds {
        a.push_decision(d.clone());
        b.push_decision(d.clone());
    }
    let ra = a.finish(InputSummary::default());
    let rb = b.finish(InputSummary::default());
    assert!(!ra.deployments.is_empty());
    assert_eq!(full.borrow().len(), ds.len());
    assert_eq!(*full.borrow(), *only.borrow());
    assert!(rb.deployments.is_empty());
}
