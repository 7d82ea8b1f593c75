//! Matched tokens from the prefix producers' `-v=5` lines, against the
//! simulator's truth: the break-even in tokens from the EPP log alone equals
//! the one from the decision records (exact match info) on every deployment,
//! those with 64-token blocks through the approximate producer's lines and
//! the prefix scorer's scores, the others through the precise producer's.

use gatecal_analysis::gate_dist::{ConfigSet, InputSummary};
use gatecal_analysis::input::DecisionInput;
use gatecal_analysis::recommend::{Recommend, RecommendOptions, RecommendReport};
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
