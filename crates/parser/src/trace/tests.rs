//! The trace reader's tests: sniffing, and the fast path held to the
//! general reader on simulated traces of every scenario and on malformed
//! and unusual documents.

use gatecal_sim::{Variant, run, scenario, scenario_names, to_jaeger, to_tempo, write_traces};

use super::*;
use crate::ParseOptions;

#[test]
fn sniffing() {
    assert!(looks_like_traces(br#"{"resourceSpans":[{"resource":{}}]}"#));
    assert!(looks_like_traces(b"\n  {\n  \"data\": [\n"));
    assert!(looks_like_traces(br#"{"batches":[]}"#));
    assert!(looks_like_traces(br#"{"trace":{"resourceSpans":[]}}"#));
    assert!(!looks_like_traces(br#"{"data":"x"}"#));
    assert!(!looks_like_traces(br#"{"level":"debug","msg":"x"}"#));
    assert!(!looks_like_traces(br#"{"v":1,"candidates":[]}"#));
    assert!(!looks_like_traces(b"I0821 14:36:14.123456 1 x.go:1] y"));
    assert!(!looks_like_traces(b""));
}

/// The items and ledger of `bytes` read with the fast path and without it
/// (as printed, so NaN equals NaN), and the documents the fast path read.
fn both_ways(bytes: &[u8]) -> (String, String, u64) {
    let opts = ParseOptions {
        keep_malformed: 100,
        ..ParseOptions::default()
    };
    let read = |fast: bool| {
        let mut items = Vec::new();
        let naming = DeploymentNaming::fallback("default");
        let (ledger, _, fast_docs) = run_with(
            bytes,
            "t.jsonl",
            naming,
            &opts,
            &mut |i| items.push(i),
            fast,
        )
        .expect("read");
        (format!("{items:#?}\n{ledger:#?}"), fast_docs)
    };
    let (fast, fast_docs) = read(true);
    let (general, none) = read(false);
    assert_eq!(none, 0, "the general reader alone takes no fast path");
    (fast, general, fast_docs)
}

fn lines(bytes: &[u8]) -> u64 {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count() as u64
}

#[test]
fn fast_path_reads_every_simulated_trace_as_the_general_reader() {
    for &name in scenario_names() {
        let s = scenario(name).expect("scenario").with_requests(400);
        let out = run(&s, 3, &Variant::default());
        for ratio in [1.0, 0.3, 0.02] {
            let (bytes, written) =
                write_traces(Vec::new(), &s, &out.truth, 3, ratio).expect("traces");
            let (fast, general, fast_docs) = both_ways(&bytes);
            assert_eq!(fast, general, "{name} at {ratio}");
            assert_eq!(
                fast_docs,
                lines(&bytes),
                "{name} at {ratio}: every line fast"
            );
            assert!(
                fast.matches("Decision(").count() as u64 == written,
                "{name} at {ratio}: {written} decisions"
            );
            if ratio == 1.0 {
                assert!(written > 0, "{name}");
                // The same spans as Tempo's and Jaeger's responses: another
                // shape, read by the general reader alone.
                let text = String::from_utf8(bytes).expect("utf-8");
                for doc in [to_tempo(&text, 5), to_jaeger(&text, 5)] {
                    let (fast, general, fast_docs) = both_ways(doc.as_bytes());
                    assert_eq!(fast, general, "{name}");
                    assert_eq!(fast_docs, 0, "{name}");
                }
            }
        }
    }
}

/// A small document of the exporter's shape: a profile span, its stage
/// span and two filter spans (the second's parent comes on another line).
const DOC: &str = concat!(
    r#"{"resourceSpans":[{"resource":{"attributes":["#,
    r#"{"key":"service.name","value":{"stringValue":"llm-d-router-epp"}},"#,
    r#"{"key":"k8s.namespace.name","value":{"stringValue":"ns"}},"#,
    r#"{"key":"k8s.deployment.name","value":{"stringValue":"glm-epp"}},"#,
    r#"{"key":"k8s.pod.name","value":{"stringValue":"glm-epp-6f7c-x"}}]},"#,
    r#""scopeSpans":[{"scope":{"name":"sched"},"spans":["#,
    r#"{"traceId":"t1","spanId":"f1","parentSpanId":"s1","name":"filter_prefix_cache_affinity","kind":1,"startTimeUnixNano":"1787320800250000000","endTimeUnixNano":"1787320800250040000","attributes":["#,
    r#"{"key":"llm_d.epp.filter.candidate_endpoints","value":{"intValue":"4"}},"#,
    r#"{"key":"llm_d.epp.filter.affinity_threshold","value":{"doubleValue":0.8}},"#,
    r#"{"key":"gen_ai.request.model","value":{"stringValue":"glm"}},"#,
    r#"{"key":"gen_ai.request.id","value":{"stringValue":"r-1"}},"#,
    r#"{"key":"llm_d.epp.filter.sticky_endpoints","value":{"intValue":"2"}},"#,
    r#"{"key":"llm_d.epp.filter.ttft_penalty_ms","value":{"doubleValue":1234.5}},"#,
    r#"{"key":"llm_d.epp.filter.decision","value":{"stringValue":"load_override"}}],"status":{}},"#,
    r#"{"traceId":"t1","spanId":"s1","parentSpanId":"p1","name":"filter_endpoints","attributes":[{"key":"x","value":{"intValue":"4"}}]},"#,
    r#"{"traceId":"t1","spanId":"p1","parentSpanId":"root","name":"run_scheduler_profile","startTimeUnixNano":"1787320800249800000","attributes":["#,
    r#"{"key":"llm_d.epp.scheduling.profile.name","value":{"stringValue":"decode"}}]},"#,
    r#"{"traceId":"t2","spanId":"f2","parentSpanId":"s2","name":"filter_prefix_cache_affinity","startTimeUnixNano":1787320801000000000,"attributes":["#,
    r#"{"key":"gen_ai.request.id","value":{"stringValue":"r-2"}},"#,
    r#"{"key":"llm_d.epp.filter.decision","value":{"stringValue":"sticky"}}]}"#,
    r#"]}]}]}"#,
);

/// The line holding the second filter span's profile.
const LATER: &str = concat!(
    r#"{"resourceSpans":[{"scopeSpans":[{"spans":["#,
    r#"{"spanId":"s2","parentSpanId":"p2","name":"filter_endpoints"},"#,
    r#"{"spanId":"p2","name":"run_scheduler_profile","attributes":[{"key":"llm_d.epp.scheduling.profile.name","value":{"stringValue":"prefill"}}]}"#,
    r#"]}]}]}"#,
);

/// Reads `doc` between [`DOC`] and [`LATER`] both ways; returns whether the
/// fast path read all three.
fn agree(doc: &str) -> bool {
    let input = format!("{DOC}\n{doc}\n{LATER}\n");
    let (fast, general, fast_docs) = both_ways(input.as_bytes());
    assert_eq!(fast, general, "{doc}");
    fast_docs == 3
}

#[test]
fn fast_path_reads_the_small_document_as_the_general_reader() {
    let (fast, general, fast_docs) = both_ways(format!("{DOC}\n{LATER}\n").as_bytes());
    assert_eq!(fast, general);
    assert_eq!(fast_docs, 2);
    // Both decisions, with their profiles, the first with its exact input.
    assert!(
        fast.contains("traced_penalty_ms: Some(\n                1234.5"),
        "{fast}"
    );
    assert!(fast.contains("\"decode\""), "{fast}");
    assert!(fast.contains("\"prefill\""), "{fast}");
    assert!(
        fast.contains("trace_decisions_without_profile: 0"),
        "{fast}"
    );
}

#[test]
fn fast_path_reads_unusual_but_plain_documents() {
    let cases: Vec<String> = vec![
        DOC.to_string(),
        // Whitespace everywhere a token may be.
        DOC.replace(',', " ,\t").replace(':', " : ").replace('{', "{ "),
        // Attributes before the name: read after the span.
        DOC.replace(
            r#""name":"filter_prefix_cache_affinity","kind":1,"startTimeUnixNano":"1787320800250000000","endTimeUnixNano":"1787320800250040000","attributes":"#,
            r#""kind":1,"attributes":"#,
        )
        .replace(
            r#"],"status":{}}"#,
            r#"],"status":{},"name":"filter_prefix_cache_affinity","startTimeUnixNano":"1787320800250000000"}"#,
        ),
        // Numbers as JSON numbers, exponents, negative, NaN as a string.
        DOC.replace(r#"{"intValue":"4"}"#, r#"{"intValue":4}"#)
            .replace("1234.5", "-1.2345e3")
            .replace("0.8", r#""NaN""#),
        DOC.replace("1234.5", "0.0").replace("0.8", "-0"),
        // Nulls where an option is read.
        DOC.replace(r#""parentSpanId":"s1""#, r#""parentSpanId":null"#)
            .replace(r#"{"stringValue":"r-1"}"#, "null")
            .replace(r#""status":{}"#, r#""status":null"#),
        DOC.replace(r#""resource":{"attributes":["#, r#""resource":{"attributes":null,"x":["#),
        // Values of other types than the reader uses, members it skips.
        DOC.replace(r#"{"intValue":"2"}"#, r#"{"boolValue":true,"arrayValue":{"values":[1,[],{}]}}"#),
        DOC.replace(r#"{"stringValue":"glm"}"#, r#"{"intValue":"7","doubleValue":2.5}"#),
        // A span without an id, an empty parent id, empty lists.
        DOC.replace(r#""spanId":"f1","#, ""),
        DOC.replace(r#""parentSpanId":"s2""#, r#""parentSpanId":"""#),
        r#"{"resourceSpans":[]}"#.to_string(),
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}],"extra":{"a":[true,false,null]}}"#
            .to_string(),
        // UTF-8 beyond ASCII.
        DOC.replace("r-1", "r-\u{e9}\u{1F600}"),
        // Escapes in strings it does not read.
        DOC.replace(r#""traceId":"t1""#, r#""traceId":"t\"1\u00e9\n""#),
    ];
    for doc in &cases {
        assert!(agree(doc), "read on the fast path: {doc}");
    }
}

#[test]
fn fast_path_gives_malformed_and_other_documents_to_the_general_reader() {
    let deep = format!("{}1{}", "[".repeat(150), "]".repeat(150));
    let cases: Vec<String> = vec![
        // Escapes where a value or key is read.
        DOC.replace(r#""spanId":"f1""#, r#""span\u0049d":"f1""#),
        DOC.replace(r#""stringValue":"r-1""#, r#""stringValue":"r\u002d1""#),
        DOC.replace(r#""spanId":"f1""#, r#""spanId":"f\u0031""#),
        // A control character in a string.
        DOC.replace("r-1", "r-\t1"),
        DOC.replace(r#""traceId":"t1""#, "\"traceId\":\"t\u{1}\""),
        // Duplicate members.
        DOC.replace(r#""spanId":"f1""#, r#""spanId":"f1","spanId":"f9""#),
        DOC.replace(
            r#"{"key":"gen_ai.request.id","#,
            r#"{"key":"x","key":"gen_ai.request.id","#,
        ),
        DOC.replace(
            r#"{"stringValue":"r-1"}"#,
            r#"{"stringValue":"r-1","stringValue":null}"#,
        ),
        format!("{},\"resourceSpans\":[]}}", &DOC[..DOC.len() - 1]),
        // Types the shape does not allow.
        DOC.replace(r#""name":"run_scheduler_profile""#, r#""name":5"#),
        DOC.replace(r#"{"intValue":"4"}"#, r#"{"intValue":"four"}"#),
        DOC.replace(r#"{"intValue":"2"}"#, r#""two""#),
        DOC.replace(r#""spanId":"f2","#, r#""spanId":"f2","attributes":{},"#)
            .replace(
                r#""startTimeUnixNano":1787320801000000000,"attributes":["#,
                r#""startTimeUnixNano":1,"links":["#,
            ),
        DOC.replace(r#""scopeSpans":["#, r#""scopeSpans":{"a":1},"x":["#),
        // Numbers out of range or of a form left to serde.
        DOC.replace("1234.5", "1e400"),
        DOC.replace("1234.5", "1e-400"),
        DOC.replace("1234.5", "01"),
        DOC.replace("1234.5", "1."),
        DOC.replace("1234.5", "-"),
        DOC.replace(
            r#""startTimeUnixNano":1787320801000000000"#,
            r#""startTimeUnixNano":17873208010000000000000"#,
        ),
        // Syntax errors, and documents cut short.
        DOC.replace("}]},", "},]},"),
        DOC.replace(r#""kind":1,"#, r#""kind":1 ,,"#),
        DOC[..DOC.len() / 2].to_string(),
        format!("{DOC} x"),
        format!("{DOC}{DOC}"),
        DOC.replace(r#""x","value""#, r#""x","value":tru"#),
        // Nesting deeper than serde reads.
        DOC.replace(r#""status":{}"#, &format!(r#""status":{deep}"#)),
        // Shapes the fast path does not read.
        DOC.replace(r#""scopeSpans":"#, r#""instrumentationLibrarySpans":"#),
        DOC.replace(r#"{"resourceSpans":"#, r#"{"batches":"#),
        format!(r#"{{"trace":{}}}"#, DOC),
        r#"{"data":[{"spans":[]}]}"#.to_string(),
        // The resource after its spans.
        r#"{"resourceSpans":[{"scopeSpans":[],"resource":{}}]}"#.to_string(),
    ];
    for doc in &cases {
        assert!(!agree(doc), "given to the general reader: {doc}");
    }
}

/// A deterministic stream of small edits of [`DOC`]: every result must be
/// read the same both ways (most are malformed).
#[test]
fn fast_path_and_general_reader_agree_on_mutated_documents() {
    const BYTES: &[u8] = b"{}[]\",:\\ 0123456789.eE+-aflnrstuxyz\t\n\x00\x7f\xc3\xff";
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let doc = DOC.as_bytes();
    let mut fast_read = 0;
    for _ in 0..1500 {
        let mut m = doc.to_vec();
        for _ in 0..1 + next(3) {
            let at = next(m.len());
            match next(4) {
                0 => {
                    m.remove(at);
                }
                1 => m.insert(at, BYTES[next(BYTES.len())]),
                2 => {
                    let len = next(40).min(m.len() - at);
                    let piece = m[at..at + len].to_vec();
                    let to = next(m.len());
                    m.splice(to..to, piece);
                }
                _ => m[at] = BYTES[next(BYTES.len())],
            }
        }
        let mut input = DOC.as_bytes().to_vec();
        input.push(b'\n');
        input.extend_from_slice(&m);
        input.push(b'\n');
        input.extend_from_slice(LATER.as_bytes());
        input.push(b'\n');
        let (fast, general, fast_docs) = both_ways(&input);
        assert_eq!(fast, general, "{}", String::from_utf8_lossy(&m));
        fast_read += u64::from(fast_docs == 3);
    }
    // Some edits leave a document the fast path reads (a changed digit or
    // letter of a value).
    assert!(fast_read > 50, "{fast_read}");
}

#[test]
fn a_strings_end_is_found_word_at_a_time_as_byte_by_byte() {
    let naive = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
    for c in 0..=255u8 {
        for len in [0, 1, 7, 8, 9, 16, 23] {
            for at in 0..len {
                let mut b = vec![b'a'; len];
                b[at] = c;
                // A second stop byte after the first must not hide it.
                if at + 2 < len {
                    b[at + 2] = b'"';
                }
                assert_eq!(fast::string_end(&b), naive(&b), "{c:#x} at {at} of {len}");
            }
            assert_eq!(fast::string_end(&vec![0xc3; len]), None);
        }
    }
}

/// Decisions waiting for their profile span are at most [`MAX_PENDING`]:
/// past it the oldest are emitted without a profile, and counted.
#[test]
fn waiting_decisions_are_bounded() {
    let n = MAX_PENDING + 5;
    let spans: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"spanId":"f{i}","parentSpanId":"p{i}","name":"filter_prefix_cache_affinity","attributes":[]}}"#
            )
        })
        .collect();
    let line = format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    );
    let opts = ParseOptions::default();
    let mut tr = TraceReader::new("t.jsonl", DeploymentNaming::fallback("default"), &opts);
    let mut emitted = 0;
    tr.line(line.as_bytes(), &mut |_| emitted += 1).unwrap();
    assert_eq!(tr.waiting, MAX_PENDING, "the rest emitted");
    assert_eq!(emitted, 5);
    assert_eq!(tr.counts.trace_decisions_without_profile, 5);
    let il = tr.finish(&mut |_| emitted += 1, 0, 0, false).unwrap();
    assert_eq!(emitted, n);
    assert_eq!(il.counts.trace_decisions_without_profile, n as u64);
}
