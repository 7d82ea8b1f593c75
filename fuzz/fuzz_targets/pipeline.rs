//! The whole pipeline on arbitrary bytes: the parse on one thread and on
//! two (with tiny blocks; the output must be the same), then both
//! analyses and every renderer. Seeded with whole fixture logs; the
//! dictionary (`fuzz/dict/log.dict`) holds the keys and edge numbers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gatecal_fuzz_entry::pipeline(data);
});
