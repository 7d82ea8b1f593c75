//! The decisions JSON-lines reader: arbitrary lines read as records; the
//! decisions read are written back as records and read again, to the same
//! decisions.
#![no_main]

use gatecal_fuzz::parse;
use gatecal_parser::{DecisionWriter, InputFormat, ParseOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = ParseOptions {
        format: InputFormat::Decisions,
        ..ParseOptions::default()
    };
    let Some(p) = parse(data, &opts) else {
        return;
    };
    let mut w = DecisionWriter::new(Vec::new());
    for d in p.decisions() {
        w.write(d).expect("write to memory");
    }
    let again = w.into_inner().expect("write to memory");
    let q = parse(&again, &opts).expect("records written are read");
    assert_eq!(
        q.ledger.counts.lines_malformed, 0,
        "a written record is malformed"
    );
    assert_eq!(q.decisions().count(), p.decisions().count());
});
