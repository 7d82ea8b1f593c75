//! The whole pipeline on arbitrary bytes: the parse on one thread and on
//! two (with tiny blocks; the output must be the same), then both
//! analyses and every renderer. Seeded with whole fixture logs; the
//! dictionary (`fuzz/dict/log.dict`) holds the keys and edge numbers.
#![no_main]

use gatecal_fuzz::{analyse_and_render, parse};
use gatecal_parser::ParseOptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let one = ParseOptions::default();
    let Some(p) = parse(data, &one) else {
        return;
    };
    let two = ParseOptions {
        threads: 2,
        block_bytes: 64,
        ..ParseOptions::default()
    };
    if let Some(q) = parse(data, &two) {
        // Compared as printed: a NaN the log holds is the same NaN on both
        // sides, though NaN != NaN.
        assert_eq!(
            format!("{:?}", p.items),
            format!("{:?}", q.items),
            "two threads read differently"
        );
        assert_eq!(
            p.ledger.counts, q.ledger.counts,
            "two threads count differently"
        );
    }
    analyse_and_render(&p);
});
