//! The decisions JSON-lines reader: arbitrary lines read as records; the
//! decisions read are written back as records and read again, to the same
//! decisions.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gatecal_fuzz_entry::decisions(data);
});
