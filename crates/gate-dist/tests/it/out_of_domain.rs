//! Numbers and times outside their domain, through the whole pipeline
//! (parse at every thread count, reconstruct, report): each makes its line
//! malformed with a counted reason, never a panic, a silent 0 or a state
//! reset.

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, GateDistReport, InputSummary,
    ScoredEndpoint,
};
use gatecal_filter::Outcome;
use gatecal_parser::{MalformedReason, ParseOptions, Parsed, parse_slice};
use gatecal_render::{Format, renderer};
use std::io::Read;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}{name}")).unwrap()
}

fn parse(log: &str, threads: usize) -> Parsed {
    let opts = ParseOptions {
        threads,
        block_bytes: 4096,
        keep_malformed: 1000,
        ..ParseOptions::default()
    };
    let p = parse_slice("epp.log", log.as_bytes(), &opts).unwrap();
    assert!(p.ledger.counts.balanced(), "every line accounted for");
    p
}

fn audit(p: &Parsed) -> GateDistReport {
    let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
    for d in p.decisions() {
        g.push(DecisionInput::from(d));
    }
    let c = &p.ledger.counts;
    let report = g.finish(InputSummary {
        lines_total: c.lines_total,
        lines_malformed: c.lines_malformed,
        lines_out_of_range: c.lines_out_of_range,
        ..InputSummary::default()
    });
    for f in [Format::Json, Format::Table, Format::Markdown, Format::Csv] {
        renderer(f).gate_dist(&report, &mut Vec::new()).unwrap();
    }
    report
}

/// `"KEY":VALUE` with every number of `key` in `log` replaced by `value`;
/// how many were replaced.
fn replace_number(log: &str, key: &str, value: &str) -> (String, u64) {
    let pat = format!("\"{key}\":");
    let mut out = String::with_capacity(log.len());
    let mut n = 0;
    let mut rest = log;
    while let Some(i) = rest.find(&pat) {
        let start = i + pat.len();
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
            .unwrap_or(tail.len());
        if end == 0 {
            rest = tail;
            continue;
        }
        out.push_str(value);
        n += 1;
        rest = &tail[end..];
    }
    out.push_str(rest);
    (out, n)
}

const BAD_COUNTS: [&str; 7] = [
    "-1", "-1e9", "\"NaN\"", "\"+Inf\"", "\"-Inf\"", "1e400", "-1e400",
];

/// A negative, NaN, infinite or overflowing `tokenLoad` makes its line
/// malformed (out of range, counted), on every thread count; no decision
/// takes a reconstructed gate input from it.
#[test]
fn bad_token_loads_are_out_of_range_lines() {
    let base = fixture("balanced/epp.log");
    let good = audit(&parse(&base, 1));
    assert!(good.overall.stats.evidence.reconstructed > 0);
    for bad in BAD_COUNTS {
        let (log, n) = replace_number(&base, "tokenLoad", bad);
        assert!(n >= 20, "{n}");
        for threads in [1, 2, 4] {
            let p = parse(&log, threads);
            let c = &p.ledger.counts;
            assert_eq!(c.lines_out_of_range, n, "{bad}, {threads} threads");
            assert_eq!(c.lines_malformed, n, "{bad}, {threads} threads");
            assert!(
                c.first_malformed
                    .iter()
                    .all(|m| m.reason == MalformedReason::OutOfRange("tokenLoad")),
                "{bad}"
            );
            let r = audit(&p);
            assert_eq!(r.input.lines_out_of_range, n);
            assert_eq!(r.overall.stats.evidence.reconstructed, 0, "{bad}");
            assert_eq!(
                r.overall.stats.gate_input_ms.count,
                r.overall.stats.evidence.logged + r.overall.stats.evidence.observed,
                "{bad}: only logged values are in the distribution"
            );
        }
    }
}

/// Out-of-range values of the other counts and of `ts` are counted the
/// same way, named by their key.
#[test]
fn other_bad_numbers_name_their_key() {
    let base = fixture("glm-like/epp.log");
    for key in [
        "total",
        "sticky",
        "prompt length (token)",
        "absolute hit prefix len (tokens)",
    ] {
        for bad in ["-3", "\"NaN\"", "1e400"] {
            let (log, n) = replace_number(&base, key, bad);
            if n == 0 {
                continue;
            }
            let p = parse(&log, 2);
            assert_eq!(p.ledger.counts.lines_out_of_range, n, "{key} {bad}");
            assert_eq!(
                p.ledger.counts.first_malformed[0].reason,
                MalformedReason::OutOfRange(match key {
                    "total" => "total",
                    "sticky" => "sticky",
                    "prompt length (token)" => "prompt length (token)",
                    _ => "absolute hit prefix len (tokens)",
                })
            );
            audit(&p);
        }
    }
    // Every used line (ignored ones are not read past their message); the
    // filter lines still stand for their decisions, each unknown.
    let clean = parse(&base, 1);
    let used = clean.ledger.counts.lines_used;
    for bad in ["-5", "1e400", "253402300799", "9e15", "\"NaN\""] {
        let (log, _) = replace_number(&base, "ts", bad);
        let p = parse(&log, 2);
        assert_eq!(p.ledger.counts.lines_out_of_range, used, "ts {bad}");
        assert_eq!(p.decisions().count(), clean.decisions().count(), "ts {bad}");
        assert!(p.decisions().all(|d| d.outcome.is_none()), "ts {bad}");
    }
}

/// One line stamped in year 9999 (or before 1970) in the middle of a log
/// is counted out of range and changes nothing else: no open request is
/// evicted, the decisions and their percentiles are those of the log
/// without it.
#[test]
fn a_far_future_or_far_past_line_changes_nothing() {
    // The demo's first lines in time order (as the EPP writes them: the
    // simulator writes each request's lines together): many requests are
    // open at once.
    let mut all = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(format!("{ROOT}demo/glm-like.log.gz")).unwrap(),
    )
    .read_to_string(&mut all)
    .unwrap();
    let ts = |l: &str| -> f64 {
        let t = &l[l.find("\"ts\":").map_or(0, |i| i + 5)..];
        t[..t.find(',').unwrap_or(0)].parse().unwrap_or(0.0)
    };
    let mut lines: Vec<&str> = all.lines().take(3000).collect();
    lines.sort_by(|a, b| ts(a).total_cmp(&ts(b)));
    let base = lines.join("\n") + "\n";
    let want = audit(&parse(&base, 1));
    // A used line (a scorer line) in the middle, its `ts` replaced.
    let mid = lines.len() / 2;
    let at = mid
        + lines[mid..]
            .iter()
            .position(|l| l.contains("TokenLoadScorer scoring"))
            .unwrap();
    for ts in ["253402300000", "4102444800", "-86400", "253402300799.5"] {
        let (odd, n) = replace_number(lines[at], "ts", ts);
        assert_eq!(n, 1);
        // The odd line is an extra copy: the original stays.
        let mut log: Vec<&str> = lines.clone();
        log.insert(at, &odd);
        let log = log.join("\n") + "\n";
        for threads in [1, 3] {
            let p = parse(&log, threads);
            assert_eq!(
                p.ledger.counts.requests_evicted, 0,
                "{ts}, {threads} threads"
            );
            let got = audit(&p);
            assert_eq!(got.deployments, want.deployments, "{ts}, {threads} threads");
            assert_eq!(got.overall, want.overall, "{ts}, {threads} threads");
            assert_eq!(p.ledger.counts.lines_out_of_range, 1, "{ts}");
        }
    }
}

/// Decisions built by a library user with values no parsed line can have
/// (negative, NaN and infinite loads, prompt tokens below the hit) are
/// reconstructed without a panic, and NaN reaches no reported quantile.
#[test]
fn decisions_with_odd_values_do_not_panic_the_reconstruction() {
    let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
    let loads = [
        -5.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1e300,
        0.0,
        1e300,
    ];
    for (i, &a) in loads.iter().enumerate() {
        for (j, &b) in loads.iter().enumerate() {
            for outcome in [Outcome::Sticky, Outcome::NoMatch, Outcome::LoadOverride] {
                g.push(DecisionInput {
                    deployment: "d".into(),
                    ts: Some(1000.0 + (i * 10 + j) as f64),
                    request_id: Some(format!("r{i}-{j}").into()),
                    outcome: Some(outcome),
                    sticky_count: Some(1),
                    total: Some(2),
                    survivors: Some(vec!["ns/a".into()]),
                    scored: vec![
                        ScoredEndpoint {
                            endpoint: "ns/a".into(),
                            token_load: Some(a),
                            prefix_score: None,
                            in_flight_tokens: None,
                        },
                        ScoredEndpoint {
                            endpoint: "ns/b".into(),
                            token_load: Some(b),
                            prefix_score: None,
                            in_flight_tokens: None,
                        },
                    ],
                    chosen: Some("ns/a".into()),
                    prompt_tokens: Some(i64::MIN + i as i64),
                    hit_prefix_tokens: Some(i64::MAX - j as i64),
                    ..DecisionInput::default()
                });
            }
        }
    }
    let r = g.finish(InputSummary::default());
    let s = &r.overall.stats.gate_input_ms;
    for q in [s.p50, s.p90, s.p99].into_iter().flatten() {
        assert!(!q.is_nan());
    }
}

/// Non-finite parameters from flags or a config file are errors naming the
/// parameter (exit 2); they used to become the defaults
/// while the report said "config from flags/file".
#[test]
fn non_finite_parameters_are_refused() {
    let log = format!("{ROOT}balanced/epp.log");
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("epp.yaml");
    let deep = dir.path().join("deep.yaml");
    std::fs::write(
        &yaml,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    maxTTFTPenaltyMs: .inf\n",
    )
    .unwrap();
    std::fs::write(&deep, "[".repeat(100_000) + &"]".repeat(100_000)).unwrap();
    let (yaml, deep) = (yaml.to_str().unwrap(), deep.to_str().unwrap());
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "gate-dist",
            vec!["--max-ttft-penalty-ms", "NaN"],
            "--max-ttft-penalty-ms",
        ),
        (
            "gate-dist",
            vec!["--max-ttft-penalty-ms", "inf"],
            "--max-ttft-penalty-ms",
        ),
        (
            "gate-dist",
            vec!["--peak-prefill-throughput", "NaN"],
            "--peak-prefill-throughput",
        ),
        (
            "gate-dist",
            vec!["--affinity-threshold", "NaN"],
            "--affinity-threshold",
        ),
        (
            "gate-dist",
            vec!["--config", yaml],
            "maxTTFTPenaltyMs: not a finite number",
        ),
        (
            "gate-dist",
            vec!["--config", deep],
            "nested deeper than 64 levels",
        ),
    ];
    for (b, args, want) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gate-dist"))
            .arg(&log)
            .args(&args)
            .args(["--format", "json", "-q"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{b} {args:?}: {err}");
        assert!(err.contains(want), "{b} {args:?}: {err}");
        assert!(out.stdout.is_empty(), "{b} {args:?}: no report");
    }
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    /// Numbers a mutation writes in place of a numeric field.
    const ODD: [&str; 12] = [
        "-1",
        "-0.0",
        "\"NaN\"",
        "\"+Inf\"",
        "\"-Inf\"",
        "1e400",
        "-1e400",
        "1e308",
        "253402300799",
        "4102444800",
        "-62135596800",
        "99999999999999999999999999",
    ];

    /// Numeric fields of the used lines.
    const KEYS: [&str; 10] = [
        "ts",
        "tokenLoad",
        "score",
        "total",
        "sticky",
        "penalty",
        "maxPenalty",
        "bestStickyTTFT",
        "affinityThreshold",
        "prompt length (token)",
    ];

    fn lines() -> Vec<String> {
        fixture("glm-like/epp.log")
            .lines()
            .map(str::to_string)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

        /// Numeric fields of real lines replaced by odd numbers, through
        /// the parser (one thread and three), the reconstruction and every
        /// renderer: no panic, every line accounted for, the same result
        /// on any thread count.
        #[test]
        fn odd_numbers_through_the_whole_pipeline(
            muts in prop::collection::vec((any::<prop::sample::Index>(), 0..KEYS.len(), 0..ODD.len()), 1..40),
        ) {
            let mut lines = lines();
            for (at, k, v) in &muts {
                let i = at.index(lines.len());
                let (l, _) = replace_number(&lines[i], KEYS[*k], ODD[*v]);
                lines[i] = l;
            }
            let log = lines.join("\n") + "\n";
            let one = parse(&log, 1);
            let three = parse(&log, 3);
            prop_assert_eq!(format!("{:?}", one.items), format!("{:?}", three.items));
            prop_assert_eq!(&one.ledger, &three.ledger);
            let c = &one.ledger.counts;
            prop_assert_eq!(c.lines_total, lines.len() as u64);
            prop_assert!(c.lines_out_of_range <= c.lines_malformed);
            let r = audit(&one);
            for q in [r.overall.stats.gate_input_ms.p50, r.overall.stats.gate_input_ms.p99].into_iter().flatten() {
                prop_assert!(!q.is_nan());
            }
        }
    }
}

/// A filter line with a number out of range, or no number where one is
/// due, is malformed (counted, named by its key) and still its request's
/// filter line: the decision is counted `unknown`, never lost nor taken
/// for `not_applicable`, at every thread count.
#[test]
fn a_malformed_filter_line_makes_its_decision_unknown() {
    let cases = [
        ("glm-like/epp.log", "sticky", "-1", "sticky"),
        ("glm-like/epp.log", "total", "\"NaN\"", "total"),
        (
            "glm-like/epp.log",
            "affinityThreshold",
            "1e400",
            "affinityThreshold",
        ),
        ("glm-like-v1/epp.log", "penalty", "\"x\"", "penalty"),
        ("glm-like-v1/epp.log", "maxPenalty", "true", "maxPenalty"),
    ];
    for (file, key, bad, named) in cases {
        let base = fixture(file);
        let good = audit(&parse(&base, 1));
        let g = &good.overall.stats;
        let (log, n) = replace_number(&base, key, bad);
        assert!(n > 0, "{file} {key}");
        for threads in [1, 2, 4] {
            let p = parse(&log, threads);
            let c = &p.ledger.counts;
            assert_eq!(c.lines_out_of_range, n, "{key} {bad}, {threads} threads");
            assert_eq!(c.lines_malformed, n, "{key} {bad}");
            assert_eq!(
                c.first_malformed[0].reason,
                MalformedReason::OutOfRange(named)
            );
            let r = audit(&p);
            let s = &r.overall.stats;
            assert_eq!(s.decisions, g.decisions, "{key} {bad}: no decision lost");
            assert_eq!(
                s.outcomes["not_applicable"], g.outcomes["not_applicable"],
                "{key} {bad}"
            );
            assert_eq!(
                s.outcomes["unknown"],
                g.outcomes["unknown"] + n,
                "{key} {bad}: one unknown decision per malformed filter line"
            );
        }
    }
}
