//! No bytes make the parser panic, and the ledger always balances.
//! Bounded: a few hundred proptest cases over arbitrary bytes and mutated
//! real lines, plus every truncation of every fixture line. On the threaded
//! cases, every parallel path gives what one thread gives: a file read at
//! offsets and a stream (gzip) cut into blocks, at 2 and 3 threads.

use gatecal_parser::{InputFormat, ParseOptions, parse_slice};
use proptest::prelude::*;

fn fixture_lines() -> Vec<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/edge");
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log" || e == "jsonl"))
        .collect();
    names.sort();
    for p in names {
        let bytes = std::fs::read(&p).unwrap();
        if bytes.starts_with(&[0x1f, 0x8b]) {
            continue;
        }
        out.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
    }
    out
}

fn check(bytes: &[u8]) {
    check_with(bytes, false);
}

/// Also with worker threads (slower to set up: used on fewer cases).
fn check_threaded(bytes: &[u8]) {
    check_with(bytes, true);
}

/// `bytes` gzipped (a stream: the parallel reader cuts it into blocks in
/// order, as it does stdin and pipes).
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// The items and ledger of a parse, as compared across paths (a gzip
/// stream differs only in its compressed byte count and flag).
fn outcome(p: &gatecal_parser::Parsed) -> String {
    let mut l = p.ledger.clone();
    l.gzip = false;
    l.counts.bytes_compressed = l.counts.bytes;
    format!("{:?} {l:?}", p.items)
}

fn check_with(bytes: &[u8], threaded: bool) {
    let mut seen: Vec<String> = Vec::new();
    for opts in [
        ParseOptions::default(),
        ParseOptions {
            format: InputFormat::Decisions,
            max_line_bytes: 64,
            max_open_requests: 2,
            max_open_age_secs: 0.0,
            year: Some(2026),
            ..ParseOptions::default()
        },
        ParseOptions {
            max_line_bytes: 200,
            ..ParseOptions::default()
        },
    ] {
        let p = match parse_slice("fuzz.log", bytes, &opts) {
            Ok(p) => p,
            // A stream that starts with the gzip magic bytes but is not gzip
            // is an I/O error naming the input, not a panic.
            Err(gatecal_parser::ParseError::Io { path, .. })
                if bytes.starts_with(&[0x1f, 0x8b]) =>
            {
                assert_eq!(path, std::path::Path::new("fuzz.log"));
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        let c = &p.ledger.counts;
        assert!(c.balanced(), "{c:?}");
        assert_eq!(c.decisions as usize, p.decisions().count());
        seen.push(outcome(&p));
    }
    // Threads give exactly what one thread gives (same line cap), read at
    // offsets or as a stream.
    if threaded && seen.len() == 3 {
        let gz = gzip(bytes);
        for threads in [2, 3] {
            for (path, input) in [("offsets", bytes), ("stream", &gz[..])] {
                let opts = ParseOptions {
                    threads,
                    block_bytes: 64,
                    max_line_bytes: 200,
                    ..ParseOptions::default()
                };
                let p = parse_slice("fuzz.log", input, &opts).unwrap();
                assert!(
                    outcome(&p) == seen[2],
                    "{threads} threads, {path}: output differs from one thread's"
                );
            }
        }
    }
}

#[test]
fn every_truncation_of_every_fixture_line() {
    let lines = fixture_lines();
    assert!(lines.len() > 100);
    for l in &lines {
        // Every cut of short lines; a sample of cuts of long ones.
        let step = (l.len() / 200).max(1);
        for cut in (0..=l.len()).step_by(step) {
            check(&l[..cut]);
            check(&l[cut..]);
        }
    }
}

#[test]
fn whole_fixtures_spliced() {
    let lines = fixture_lines();
    // Every line joined with every other kind of line ending, in one stream.
    let mut all = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        all.extend_from_slice(l);
        all.extend_from_slice(if i % 3 == 0 { b"\r\n" } else { b"\n" });
    }
    check_threaded(&all);
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Dup(usize, usize),
}

fn mutate(mut l: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let n = l.len();
        match *m {
            Mutation::Flip(i, b) if n > 0 => l[i % n] ^= b,
            Mutation::Insert(i, b) => l.insert(i % (n + 1), b),
            Mutation::Delete(i) if n > 0 => {
                l.remove(i % n);
            }
            Mutation::Dup(i, len) if n > 0 => {
                let s = i % n;
                let e = (s + len).min(n);
                let piece = l[s..e].to_vec();
                l.splice(s..s, piece);
            }
            _ => {}
        }
    }
    l
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let special = prop::sample::select(vec![
        b'"', b'{', b'}', b'[', b']', b',', b':', b'\\', b'\n', b'\r', b'\t', b' ', 0xff, 0xc3,
        b'0', b'-', b'e', b'/',
    ]);
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), special.clone()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), 0usize..400).prop_map(|(i, n)| Mutation::Dup(i, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check_threaded(&bytes);
    }

    #[test]
    fn arbitrary_json_like_text(s in "[{}\\[\\]\":,a-z0-9 \\\\.eE+-]{0,300}") {
        check(s.as_bytes());
        let mut framed = b"[pod/a-b-c/epp] 2026-08-21T14:36:14.123456789Z ".to_vec();
        framed.extend_from_slice(s.as_bytes());
        check_threaded(&framed);
    }

    #[test]
    fn mutated_real_lines(
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..12),
        muts in prop::collection::vec(prop::collection::vec(mutation(), 0..6), 12),
    ) {
        let lines = fixture_lines();
        let mut stream = Vec::new();
        for (k, idx) in picks.iter().enumerate() {
            let l = idx.get(&lines).clone();
            stream.extend(mutate(l, &muts[k % muts.len()]));
            stream.push(b'\n');
        }
        check_threaded(&stream);
    }
}

#[test]
fn absurd_times_then_vllm_lines() {
    for ts in [
        "1e300",
        "-1e300",
        "99999999999999999999",
        "0",
        "-62135596801",
    ] {
        let log = format!(
            "{{\"level\":\"debug\",\"ts\":{ts},\"msg\":\"EPP received request\",\"x-request-id\":\"r\"}}\nINFO 12-31 23:59:59 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s\n"
        );
        check(log.as_bytes());
    }
}
