//! One line through the line parser (framing, classification, fields),
//! alone and behind the capture prefixes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gatecal_fuzz_entry::line(data);
});
