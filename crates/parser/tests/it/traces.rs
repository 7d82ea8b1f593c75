//! Trace inputs: OTLP/JSON lines, Tempo and Jaeger responses give the same
//! decisions; detection by content (also gzip); parents exported on a later
//! line; bad documents counted with their line.

use std::io::Write;

use gatecal_filter::Outcome;
use gatecal_parser::{
    Completion, Decision, InputFormat, MalformedReason, ParseOptions, parse_slice,
};
use gatecal_sim::{Variant, is_sampled, run, scenario, to_jaeger, to_tempo, write_traces};

fn fixture(p: &str) -> Vec<u8> {
    let path = format!("{}/../../fixtures/{p}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn decisions(name: &str, bytes: &[u8]) -> Vec<Decision> {
    let p = parse_slice(name, bytes, &ParseOptions::default()).expect("parse");
    assert!(
        p.ledger.counts.balanced(),
        "{name}: every line accounted for"
    );
    assert_eq!(
        p.ledger.counts.lines_malformed, 0,
        "{name}: no malformed line"
    );
    assert_eq!(p.ledger.format, InputFormat::Traces, "{name}: detected");
    assert_eq!(p.ledger.counts.trace_decisions_without_profile, 0, "{name}");
    let mut v: Vec<Decision> = p.decisions().cloned().collect();
    v.sort_by(|a, b| {
        (&a.request_id, &a.profile, a.ts.map(f64::to_bits)).cmp(&(
            &b.request_id,
            &b.profile,
            b.ts.map(f64::to_bits),
        ))
    });
    v
}

/// The fields a span gives but its time (see [`same`]).
fn view(d: &Decision) -> impl PartialEq + std::fmt::Debug {
    (
        (
            d.deployment.clone(),
            d.request_id.clone(),
            d.profile.clone(),
        ),
        d.outcome,
        d.traced_penalty_ms.map(f64::to_bits),
        d.sticky,
        d.total,
        d.affinity_threshold.map(f64::to_bits),
        d.model.clone(),
        d.epp_pod.clone(),
        d.completion,
        d.traced,
    )
}

fn same(a: &[Decision], b: &[Decision], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: decisions");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(view(x), view(y), "{what}");
        // Jaeger writes microseconds.
        let (tx, ty) = (x.ts.unwrap(), y.ts.unwrap());
        assert!((tx - ty).abs() < 2e-6, "{what}: {tx} vs {ty}");
    }
}

#[test]
fn fixture_shapes_give_the_same_decisions() {
    let otlp = decisions("traces.jsonl", &fixture("glm-like/traces.jsonl"));
    let jaeger = decisions(
        "traces.jaeger.json",
        &fixture("glm-like/traces.jaeger.json"),
    );
    let tempo = decisions("traces.tempo.json", &fixture("glm-like/traces.tempo.json"));
    assert!(jaeger.len() >= 10, "a dozen traces' decisions");
    same(&jaeger, &tempo, "jaeger vs tempo");
    let ids: Vec<&Option<gatecal_parser::Name>> = jaeger.iter().map(|d| &d.request_id).collect();
    let otlp: Vec<Decision> = otlp
        .into_iter()
        .filter(|d| ids.contains(&&d.request_id))
        .collect();
    same(&otlp, &jaeger, "otlp vs jaeger");
    // The fixture's spans against its truth.
    let truth: Vec<serde_json::Value> = String::from_utf8(fixture("glm-like/truth.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for d in &jaeger {
        let t = truth
            .iter()
            .find(|t| {
                t["request_id"].as_str() == d.request_id.as_deref()
                    && t["profile"].as_str() == d.profile.as_deref()
            })
            .expect("a truth record");
        assert_eq!(d.outcome.map(|o| o.as_str()), t["outcome"].as_str());
        assert_eq!(d.traced_penalty_ms, t["truth_gate_input_ms"].as_f64());
        assert_eq!(Some(d.deployment.as_str()), t["deployment"].as_str());
        assert_eq!(d.completion, Completion::Traced);
    }
}

#[test]
fn every_trace_of_a_larger_run_in_every_shape() {
    let s = scenario("pd-disagg").unwrap().with_requests(900);
    let out = run(&s, 3, &Variant::default());
    let (bytes, n) = write_traces(Vec::new(), &s, &out.truth, 3, 0.5).unwrap();
    let otlp_text = String::from_utf8(bytes.clone()).unwrap();
    assert!(otlp_text.lines().count() > 2, "several export batches");
    let otlp = decisions("t.jsonl", &bytes);
    assert_eq!(otlp.len() as u64, n);
    let sampled = out.truth.iter().filter(|r| is_sampled(3, 0.5, r)).count();
    assert_eq!(otlp.len(), sampled);
    // Profile spans exported on the line after their filter spans are found.
    assert!(otlp.iter().all(|d| d.profile.is_some()));
    let traces = otlp_text.len();
    let jaeger = decisions("t.jaeger.json", to_jaeger(&otlp_text, traces).as_bytes());
    let tempo = decisions("t.tempo.json", to_tempo(&otlp_text, traces).as_bytes());
    same(&otlp, &jaeger, "otlp vs jaeger");
    same(&otlp, &tempo, "otlp vs tempo");
    // Both profiles of P/D, and the gate input whenever the gate ran.
    assert!(otlp.iter().any(|d| d.profile.as_deref() == Some("prefill")));
    assert!(otlp.iter().any(|d| d.profile.as_deref() == Some("decode")));
    for d in &otlp {
        if d.outcome == Some(Outcome::LoadOverride) {
            assert!(d.traced_penalty_ms.is_some(), "a release has its input");
        }
        if matches!(d.outcome, Some(Outcome::NoMatch | Outcome::NotApplicable)) {
            assert!(d.traced_penalty_ms.is_none(), "no gate, no input");
        }
    }
}

#[test]
fn gzip_traces_are_detected_by_content() {
    let plain = fixture("glm-like/traces.jsonl");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&plain).unwrap();
    let gz = enc.finish().unwrap();
    let a = decisions("plain", &plain);
    let p = parse_slice("x.log", &gz, &ParseOptions::default()).unwrap();
    assert!(p.ledger.gzip);
    assert_eq!(p.ledger.format, InputFormat::Traces);
    let b: Vec<Decision> = p.decisions().cloned().collect();
    assert_eq!(a.len(), b.len());
}

#[test]
fn bad_documents_are_counted_with_their_line() {
    let good = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"k8s.deployment.name","value":{"stringValue":"qwen-epp"}}]},"scopeSpans":[{"spans":[{"traceId":"t","spanId":"a","parentSpanId":"b","name":"filter_prefix_cache_affinity","startTimeUnixNano":"1764482019250000000","attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"r1"}},{"key":"llm_d.epp.filter.ttft_penalty_ms","value":{"doubleValue":"NaN"}},{"key":"llm_d.epp.filter.decision","value":{"stringValue":"sticky"}}]}]}]}]}"#;
    let parent = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"t","spanId":"b","name":"run_scheduler_profile","attributes":[{"key":"llm_d.epp.scheduling.profile.name","value":{"stringValue":"decode"}}]}]}]}]}"#;
    let input = format!(
        "{good}\n\n{{\"resourceSpans\": [ oops ]}}\n{parent}\n{{\"resourceSpans\":[\n{{\"scopeSpans\":[]}}\n"
    );
    let p = parse_slice("bad.jsonl", input.as_bytes(), &ParseOptions::default()).unwrap();
    let c = &p.ledger.counts;
    assert!(c.balanced());
    assert_eq!(c.lines_total, 6);
    assert_eq!(c.lines_used, 2);
    assert_eq!(
        c.lines_ignored, 2,
        "the blank line, and the object without spans after the cut line"
    );
    assert_eq!(
        c.lines_malformed, 2,
        "the broken line and the cut one (the next line is read on its own)"
    );
    assert_eq!(c.first_malformed[0].at.line, 3);
    assert!(matches!(
        c.first_malformed[0].reason,
        MalformedReason::BadTrace(_)
    ));
    assert_eq!(c.first_malformed[1].at.line, 5, "a cut line");
    let d: Vec<&Decision> = p.decisions().collect();
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].profile.as_deref(),
        Some("decode"),
        "parent on a later line"
    );
    assert_eq!(d[0].deployment, "qwen");
    assert!(d[0].traced_penalty_ms.is_some_and(f64::is_nan));
    assert_eq!(d[0].ts, Some(1_764_482_019.25));
    // Strict mode stops at the first bad document, naming its line.
    let strict = ParseOptions {
        strict: true,
        ..ParseOptions::default()
    };
    let e = parse_slice("bad.jsonl", input.as_bytes(), &strict).unwrap_err();
    assert!(e.to_string().contains("bad.jsonl:3"), "{e}");
    // A document over the cap is skipped and counted.
    let small = ParseOptions {
        max_trace_document_bytes: 64,
        ..ParseOptions::default()
    };
    let p = parse_slice("big.jsonl", input.as_bytes(), &small).unwrap();
    assert!(p.ledger.counts.balanced());
    assert!(
        p.ledger
            .counts
            .first_malformed
            .iter()
            .any(|m| matches!(m.reason, MalformedReason::TraceTooLong { .. }))
    );
}

/// A pretty-printed document over the cap is skipped up to its end, never
/// held, counted with its real length; the document after it is read.
#[test]
fn a_document_over_the_cap_is_skipped_to_its_end() {
    let one = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"a","name":"filter_prefix_cache_affinity","attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"r1"}}]}]}]}]}"#;
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(one).unwrap())
            .unwrap();
    let big = pretty.replace("\"r1\"", &format!("\"{}\"", "x".repeat(5000)));
    let text = format!("{pretty}\n{big}\n{pretty}\n");
    let opts = ParseOptions {
        max_trace_document_bytes: 4096,
        ..ParseOptions::default()
    };
    let p = parse_slice("p.json", text.as_bytes(), &opts).unwrap();
    let c = &p.ledger.counts;
    assert!(c.balanced());
    assert_eq!(p.decisions().count(), 2, "the documents around it");
    assert_eq!(c.lines_malformed as usize, big.lines().count());
    let first = pretty.lines().count() as u64 + 1;
    assert_eq!(c.first_malformed[0].at.line, first);
    assert_eq!(
        c.first_malformed[0].reason.to_string(),
        format!(
            "trace document of {} bytes is over the cap of 4096 bytes (raise it with --max-trace-document-mib, or query a shorter period)",
            big.len() + 1
        )
    );
}

/// Counts the decisions of each line of an OTLP/JSON file on its own.
fn per_line_decisions(text: &str) -> Vec<usize> {
    text.lines()
        .map(|l| {
            parse_slice("one.jsonl", l.as_bytes(), &ParseOptions::default())
                .unwrap()
                .decisions()
                .count()
        })
        .collect()
}

/// A line of a one-document-per-line file cut short (a Collector killed
/// mid-write) is one malformed line: the next line starts afresh, on any
/// line of the file, the first included.
#[test]
fn a_cut_line_is_one_malformed_line() {
    let s = scenario("pd-disagg").unwrap().with_requests(900);
    let out = run(&s, 3, &Variant::default());
    let (bytes, n) = write_traces(Vec::new(), &s, &out.truth, 3, 0.5).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 4, "several export batches");
    let per_line = per_line_decisions(&text);
    assert_eq!(per_line.iter().sum::<usize>() as u64, n);
    for cut in [0, 1, lines.len() / 2] {
        let mut cut_text = String::new();
        for (i, l) in lines.iter().enumerate() {
            if i == cut {
                cut_text.push_str(&l[..l.len() / 2]);
            } else {
                cut_text.push_str(l);
            }
            cut_text.push('\n');
        }
        let p = parse_slice("cut.jsonl", cut_text.as_bytes(), &ParseOptions::default()).unwrap();
        let c = &p.ledger.counts;
        assert!(c.balanced(), "cut {cut}");
        assert_eq!(c.lines_malformed, 1, "cut {cut}: the cut line alone");
        assert_eq!(c.lines_used as usize, lines.len() - 1, "cut {cut}");
        assert_eq!(c.first_malformed[0].at.line, cut as u64 + 1, "cut {cut}");
        let why = c.first_malformed[0].reason.to_string();
        let half = lines[cut].len() / 2;
        assert!(
            why.contains(&format!("cut short after {half} bytes")),
            "cut {cut}: {why}"
        );
        // The decisions of a span whose parent was on the cut line keep
        // their own line's figures (a profile may be missing).
        assert_eq!(
            p.decisions().count(),
            per_line.iter().sum::<usize>() - per_line[cut],
            "cut {cut}"
        );
    }
}

/// A line cut just after a number's decimal point (`…1787321142.`, which
/// serde_json reports as an invalid number rather than an early end) is
/// cut short too, on the first line as on any other.
#[test]
fn a_line_cut_inside_a_number_is_cut_short() {
    let s = scenario("pd-disagg").unwrap().with_requests(300);
    let out = run(&s, 3, &Variant::default());
    let (bytes, _) = write_traces(Vec::new(), &s, &out.truth, 3, 0.5).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "several export batches");
    for cut in [0, lines.len() / 2] {
        // After the decimal point of the line's last fractional number.
        let l = lines[cut];
        let b = l.as_bytes();
        let at = (1..b.len() - 1)
            .rev()
            .find(|&i| b[i] == b'.' && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit())
            .expect("a number with a fraction");
        let kept = &l[..=at];
        let mut cut_text = String::new();
        for (i, l) in lines.iter().enumerate() {
            cut_text.push_str(if i == cut { kept } else { l });
            cut_text.push('\n');
        }
        let p = parse_slice("cut.jsonl", cut_text.as_bytes(), &ParseOptions::default()).unwrap();
        let c = &p.ledger.counts;
        assert_eq!(c.lines_malformed, 1, "cut {cut}: the cut line alone");
        assert_eq!(c.lines_used as usize, lines.len() - 1, "cut {cut}");
        let why = c.first_malformed[0].reason.to_string();
        assert!(
            why.contains(&format!("cut short after {} bytes", kept.len())),
            "cut {cut}: {why}"
        );
    }
}

/// A pretty-printed document is still read when the file starts as one,
/// and a file that does not is read line by line.
#[test]
fn pretty_printed_only_when_the_file_starts_as_one() {
    let one = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"a","name":"filter_prefix_cache_affinity","attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"r1"}}]}]}]}]}"#;
    let pretty: String =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(one).unwrap())
            .unwrap();
    // Two pretty-printed documents: both read.
    let two = format!("{pretty}\n{pretty}\n");
    let p = parse_slice("p.json", two.as_bytes(), &ParseOptions::default()).unwrap();
    assert_eq!(p.decisions().count(), 2);
    assert_eq!(p.ledger.counts.lines_malformed, 0);
    // Lines, then a pretty-printed document: its lines are malformed one by
    // one (each line is a document of its own), the lines after it read.
    let mixed = format!("{one}\n{pretty}\n{one}\n");
    let p = parse_slice("m.jsonl", mixed.as_bytes(), &ParseOptions::default()).unwrap();
    assert_eq!(p.decisions().count(), 2);
    assert!(p.ledger.counts.balanced());
    assert_eq!(
        p.ledger.counts.lines_malformed as usize,
        pretty.lines().filter(|l| !l.trim().is_empty()).count()
    );
}
