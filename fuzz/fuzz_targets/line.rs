//! One line through the line parser (framing, classification, fields),
//! alone and behind the capture prefixes.
#![no_main]

use gatecal_fuzz::parse;
use gatecal_parser::ParseOptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let opts = ParseOptions::default();
    if let Some(p) = parse(line, &opts) {
        assert!(p.ledger.counts.lines_total <= 1);
    }
    let framed = [
        b"[pod/epp-0/epp] 2026-02-10T08:15:02.123456789Z ".as_slice(),
        line,
    ]
    .concat();
    if let Some(p) = parse(&framed, &opts) {
        assert!(p.ledger.counts.lines_total <= 1);
    }
});
