//! The EPP config reader (EndpointPickerConfig YAML, or a ConfigMap
//! holding it) on arbitrary text.
#![no_main]

use gatecal_analysis::filters_from_yaml;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(filters) = filters_from_yaml(text) {
        for (name, config) in filters {
            let _ = (name.len(), config.to_parameters());
        }
    }
});
