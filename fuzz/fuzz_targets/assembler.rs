//! The assembler fed arbitrary sequences of real lines: each step picks a
//! fixture line and maybe replaces one number by an edge value, changes
//! its request id or cuts it; the sequence is assembled with tight bounds
//! (few open requests, no idle age), so eviction, reuse and retries are
//! all reached.
#![no_main]

use std::sync::OnceLock;

use gatecal_fuzz::{Bytes, mutated_line, parse, seed_lines};
use gatecal_parser::ParseOptions;
use libfuzzer_sys::fuzz_target;

fn seeds() -> &'static [&'static [u8]] {
    static S: OnceLock<Vec<&'static [u8]>> = OnceLock::new();
    S.get_or_init(seed_lines)
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let limits = b.byte();
    let mut log = Vec::new();
    let mut n = 0;
    while b.more() && n < 200 {
        log.extend(mutated_line(seeds(), &mut b));
        log.push(b'\n');
        n += 1;
    }
    let opts = ParseOptions {
        max_open_requests: usize::from(limits % 4) + 1,
        max_open_age_secs: if limits & 4 != 0 { 0.0 } else { 60.0 },
        infer_not_applicable: limits & 8 != 0,
        ..ParseOptions::default()
    };
    if let Some(p) = parse(&log, &opts) {
        assert_eq!(p.ledger.counts.lines_total, n as u64);
    }
});
