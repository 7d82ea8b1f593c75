//! A note or warning several deployments share is said once in the human
//! formats, naming them all in order; a deployment's own stays its own;
//! JSON keeps every deployment's warnings as they are.

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary, MISSING_MATCHED, Recommend,
    RecommendOptions, RecommendReport,
};
use gatecal_filter::Candidate;
use gatecal_render::{Format, renderer};

/// A decision of `dep` whose sticky endpoint has no matched blocks.
fn decision(dep: &str, ts: f64, id: &str, sticky: i64) -> DecisionInput {
    DecisionInput {
        deployment: dep.into(),
        ts: Some(ts),
        request_id: Some(id.into()),
        exact: Some(vec![
            Candidate::new("ns/a").with_in_flight_tokens(sticky),
            Candidate::new("ns/b").with_in_flight_tokens(2_000),
        ]),
        ..DecisionInput::default()
    }
}

/// A name that would retitle a terminal and fake a Markdown line.
const HOSTILE: &str = "be\x1b]0;pwned\x07ta\n- fake";

/// gamma, alpha and the hostile beta carry no matched tokens, in that
/// order in the report; delta, between them, has only its own warning.
fn report() -> RecommendReport {
    let mut r = Recommend::new(RecommendOptions::default(), ConfigSet::default());
    for (i, dep) in ["gamma", "alpha", "delta", HOSTILE].into_iter().enumerate() {
        for j in 0..3 {
            let ts = (i * 10 + j) as f64;
            r.push_decision(decision(dep, ts, &format!("{i}-{j}"), 41_000));
        }
    }
    let mut report = r.finish(InputSummary::default());
    let order = ["gamma", "alpha", "delta", HOSTILE];
    report
        .deployments
        .sort_by_key(|d| order.iter().position(|n| *n == d.name));
    let delta = &mut report.deployments[2];
    assert_eq!(delta.name, "delta");
    delta.matched_tokens.missing = None;
    delta.warnings = vec![OWN.into()];
    report
}

const OWN: &str = "the configured peakPrefillThroughput 15928 is 21.6x the estimate 737: every TTFT the gate computes is off by that factor";

fn render(f: Format) -> String {
    let mut out = Vec::new();
    renderer(f).recommend(&report(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The lines of `text` that hold `needle`.
fn with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn a_shared_warning_is_said_once_naming_every_deployment_in_order() {
    // As plain text for each format: the hostile name's controls dropped
    // (terminal) or made spaces (Markdown), its list marker mid-line.
    for (f, beta, lead) in [
        (Format::Table, "be]0;pwnedta - fake", "  "),
        (Format::Markdown, "be ]0;pwned ta - fake", "- "),
    ] {
        let t = render(f);
        let shared = format!("no recommendation: {MISSING_MATCHED}");
        let shared = match f {
            Format::Markdown => shared.replace('`', "\\`"),
            _ => shared,
        };
        let lines = with(&t, "no recommendation: no decision carries matched tokens");
        assert_eq!(
            lines,
            [format!("{lead}warning: gamma, alpha, {beta}: {shared}")],
            "{f:?}\n{t}"
        );
        // The break-even note names them too, and points to the warning
        // rather than say it again.
        assert_eq!(
            with(&t, "no decision carries matched tokens ("),
            [format!(
                "{lead}gamma, alpha, {beta}: no decision carries matched tokens (where they come from: the warning under the configs table)"
            )],
            "{f:?}\n{t}"
        );
        assert_eq!(
            t.matches("they come from decision records").count(),
            1,
            "{f:?}\n{t}"
        );
        // The shared "thin evidence" warning: once, the same three.
        assert_eq!(
            with(&t, "thin evidence"),
            [format!(
                "{lead}warning: gamma, alpha, {beta}: thin evidence: no vLLM stats, calibration or --known-peak; the peak is the configured value"
            )],
            "{f:?}\n{t}"
        );
        // delta's own warning keeps its own line, after the shared ones.
        let own = with(&t, "21.6x");
        assert_eq!(own, [format!("{lead}warning: delta: {OWN}")], "{f:?}\n{t}");
        let at = |needle: &str| t.find(needle).unwrap();
        assert!(at("warning: gamma, alpha") < at("warning: delta"), "{t}");
        // Nothing says "no recommendation" about them a second time.
        assert_eq!(with(&t, "no recommendation").len(), 2, "{f:?}\n{t}");
        assert_eq!(
            with(&t, "delta: no recommendation (no matched tokens"),
            [format!(
                "{lead}delta: no recommendation (no matched tokens to derive a bar from)"
            )],
            "{f:?}\n{t}"
        );
        assert!(!t.contains('\x1b') && !t.contains('\x07'), "{f:?}\n{t}");
    }
}

#[test]
fn json_keeps_every_deployments_warnings() {
    let v: serde_json::Value = serde_json::from_str(&render(Format::Json)).unwrap();
    let deps = v["deployments"].as_array().unwrap();
    let names: Vec<&str> = deps.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gamma", "alpha", "delta", HOSTILE]);
    for d in [&deps[0], &deps[1], &deps[3]] {
        assert_eq!(d["matched_tokens"]["missing"], MISSING_MATCHED);
        let w: Vec<&str> = d["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert!(
            w.contains(&format!("no recommendation: {MISSING_MATCHED}").as_str()),
            "{w:?}"
        );
    }
    assert_eq!(deps[2]["warnings"][0], OWN);
}

#[test]
fn gate_dist_says_a_shared_note_once_and_keeps_a_deployments_own() {
    let order = ["gamma", "alpha", "delta", "beta"];
    let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
    for (i, dep) in order.into_iter().enumerate() {
        g.push(decision(dep, i as f64, &i.to_string(), 41_000));
    }
    let mut r = g.finish(InputSummary::default());
    r.deployments
        .sort_by_key(|d| order.iter().position(|n| *n == d.name));
    r.deployments[2].config.parameters.max_ttft_penalty_ms = 9_000.0;
    for (f, lead) in [(Format::Table, "  "), (Format::Markdown, "- ")] {
        let mut out = Vec::new();
        renderer(f).gate_dist(&r, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert_eq!(
            with(&t, "config from default"),
            [
                format!(
                    "{lead}gamma, alpha, beta: config from default: maxTTFTPenaltyMs 18,000 ms [default], peakPrefillThroughput 15,928 tok/s [default], affinityThreshold 0.8 [default], penaltyMode static [default]"
                ),
                format!(
                    "{lead}delta: config from default: maxTTFTPenaltyMs 9,000 ms [default], peakPrefillThroughput 15,928 tok/s [default], affinityThreshold 0.8 [default], penaltyMode static [default]"
                ),
            ],
            "{f:?}\n{t}"
        );
        assert_eq!(
            with(&t, "the config in force reproduces"),
            [format!(
                "{lead}gamma, alpha, delta, beta: the config in force reproduces 0 of 0 logged outcomes with a known gate input; releases: 0 logged, 0 replayed"
            )],
            "{f:?}\n{t}"
        );
    }
}
