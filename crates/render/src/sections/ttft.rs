//! The observed TTFT table, the same in both reports.

use std::collections::BTreeMap;

use gatecal_analysis::{EndpointTtft, ObservedTtft};

use super::{Section, s};
use crate::notes::{Note, lines};
use crate::num::{count, ms};

/// The observed TTFT of each deployment (`name`, its figures, per
/// endpoint), a row for all its requests then one per endpoint.
pub fn observed_section<'a>(
    deps: impl Iterator<
        Item = (
            &'a str,
            &'a ObservedTtft,
            &'a BTreeMap<String, EndpointTtft>,
        ),
    >,
) -> Section {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (name, o, by) in deps {
        rows.push(vec![
            name.to_string(),
            s("all"),
            count(o.n),
            ms(o.p50),
            ms(o.p90),
            ms(o.p99),
        ]);
        for (e, t) in by {
            rows.push(vec![
                name.to_string(),
                e.clone(),
                count(t.n),
                ms(t.p50),
                ms(t.p90),
                ms(t.p99),
            ]);
        }
        notes.push(Note::about(name, o.source.clone()));
    }
    Section {
        title: s("Observed TTFT (ms): request received at the EPP to its first response body"),
        headers: vec![
            s("deployment"),
            s("endpoint"),
            s("requests"),
            s("p50"),
            s("p90"),
            s("p99"),
        ],
        rows,
        notes: lines(&notes),
    }
}
