//! The EPP config reader (EndpointPickerConfig YAML, or a ConfigMap
//! holding it) on arbitrary text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gatecal_fuzz_entry::config(data);
});
