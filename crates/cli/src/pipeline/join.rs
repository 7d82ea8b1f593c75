//! The join of traced decisions with the log decisions of the same
//! request and profile.

use gatecal_analysis::TraceSummary;
use gatecal_parser::{Completion, Decision, InputFormat, Ledger, Name};
use rustc_hash::FxHashMap;

/// The join of traced decisions with log decisions. With no input other
/// than traces, traced decisions pass straight on (streamed). Otherwise
/// (trace inputs are read first) each traced decision is held, keyed by
/// request id and profile, until the logs are read: a log decision with
/// the same key takes the span's exact gate input (spans do not name the
/// filter instance: when a profile runs several instances, the k-th span
/// of the key by start time joins the k-th log decision), and the held
/// decisions no log decision joined are counted and dropped (the logs give
/// every decision; a traced one outside them is of another period). When
/// the other inputs give no decision at all, the held decisions pass on at
/// the end. Memory: the held traced decisions (the sample), never the logs:
/// at most [`MAX_HELD_TRACED_DECISIONS`]; those read past it are counted
/// (`TraceSummary::not_held`, said in the note) and join nothing.
pub(super) struct Join {
    /// Whether inputs other than traces exist.
    pub(super) hold: bool,
    pub(super) held: Vec<Option<Box<Decision>>>,
    /// Traced decisions read while [`MAX_HELD_TRACED_DECISIONS`] were held.
    pub(super) not_held: u64,
    pub(super) keys: FxHashMap<(Name, Option<Name>), std::collections::VecDeque<usize>>,
    pub(super) traced: u64,
    pub(super) joined: u64,
    pub(super) log_decisions: u64,
}

/// Traced decisions held for the join with the logs at most (about 1 KiB
/// each: about 60 MiB).
pub const MAX_HELD_TRACED_DECISIONS: usize = 50_000;

impl Join {
    /// A decision as read; returns it when it goes on now.
    pub(super) fn push(&mut self, mut d: Box<Decision>) -> Option<Box<Decision>> {
        if d.completion == Completion::Traced {
            self.traced += 1;
            if !self.hold || self.log_decisions > 0 {
                return Some(d);
            }
            if self.held.len() >= MAX_HELD_TRACED_DECISIONS {
                self.not_held += 1;
                return None;
            }
            let i = self.held.len();
            if let Some(id) = d.request_id.clone() {
                let q = self.keys.entry((id, d.profile.clone())).or_default();
                // In start-time order (spans are exported by end time).
                let ts = d.ts.unwrap_or(f64::NEG_INFINITY);
                let at = q
                    .iter()
                    .position(|&j| {
                        self.held[j]
                            .as_ref()
                            .and_then(|h| h.ts)
                            .is_some_and(|t| t > ts)
                    })
                    .unwrap_or(q.len());
                q.insert(at, i);
            }
            self.held.push(Some(d));
            return None;
        }
        self.log_decisions += 1;
        if !self.keys.is_empty()
            && let Some(id) = &d.request_id
            && let Some(i) = self.next_held(id, &d.profile)
            && let Some(t) = self.held[i].take()
        {
            self.joined += 1;
            d.traced = true;
            d.traced_penalty_ms = t.traced_penalty_ms;
        }
        Some(d)
    }

    /// The next held decision of a key, if any.
    pub(super) fn next_held(&mut self, id: &Name, profile: &Option<Name>) -> Option<usize> {
        let key = (id.clone(), profile.clone());
        let q = self.keys.get_mut(&key)?;
        let i = q.pop_front();
        if q.is_empty() {
            self.keys.remove(&key);
        }
        i
    }

    /// The held decisions that pass on at the end: all of them when no log
    /// decision was read, else none.
    pub(super) fn finish(&mut self) -> Vec<Decision> {
        self.keys.clear();
        if self.log_decisions == 0 {
            std::mem::take(&mut self.held)
                .into_iter()
                .flatten()
                .map(|d| *d)
                .collect()
        } else {
            Vec::new()
        }
    }

    pub(super) fn summary(&self, ledger: &Ledger) -> TraceSummary {
        let inputs = ledger
            .inputs
            .iter()
            .filter(|i| i.format == InputFormat::Traces)
            .count() as u64;
        let traces_only = self.log_decisions == 0;
        let unmatched = if traces_only {
            0
        } else {
            self.traced - self.joined
        };
        let mut note = if traces_only {
            format!(
                "traces only: every figure describes the {} sampled decision(s) of the traces, not all decisions (head sampling keeps a share of the requests; the spans do not say which)",
                self.traced - self.not_held
            )
        } else {
            format!(
                "logs give all {} decision(s); traces give the exact gate input of the {} sampled one(s) joined by request id and profile ({} traced decision(s) not found in the logs)",
                self.log_decisions, self.joined, unmatched
            )
        };
        if self.not_held > 0 {
            note.push_str(&format!(
                "; {} traced decision(s) read past the first {MAX_HELD_TRACED_DECISIONS} held for the join were not used (give the traces of a shorter period)",
                self.not_held
            ));
        }
        TraceSummary {
            inputs,
            spans: ledger.total.trace_spans,
            decisions: self.traced,
            without_profile: ledger.total.trace_decisions_without_profile,
            traces_only,
            joined: self.joined,
            unmatched,
            not_held: self.not_held,
            note,
        }
    }
}
