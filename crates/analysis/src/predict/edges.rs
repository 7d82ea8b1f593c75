//! The requests at either end of a deployment's part whose observed TTFT
//! a partial report carries by request id, so that a merge counts once a
//! request whose decisions straddle two parts.
//!
//! A run counts each request's observed TTFT once, at its first decision
//! ([`super::per_deployment::Observed`]): a request whose decisions fall
//! both sides of a time shard's end is counted by both shards. Each part
//! keeps, for the requests it counted within [`EDGE_S`] of log time of its
//! first and of its last counted decision, the request id's fingerprint,
//! the decision's time, its place among the part's requests, the observed
//! TTFT and where its per-endpoint sample is. Merging a part after another,
//! a request at the start of the later part that the earlier part counted
//! near its end (the same fingerprint, fewer than [`RECENT_IDS`] requests
//! apart, as a single run remembers them) is taken back from the later
//! part's figures.
//!
//! Exact for a request whose decisions lie less than [`EDGE_S`] apart (a
//! request's decisions are logged in one scheduling cycle, within
//! milliseconds), when counting by request id. Requests without an
//! observed TTFT are not carried: they add nothing to take back (the count
//! of requests apart is then that of requests with one, off only when more
//! than [`RECENT_IDS`] requests come between a request's decisions).

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

/// Request-id fingerprints remembered per deployment (the most recent).
pub const RECENT_IDS: usize = 4096;

/// Seconds of log time at either end of a part within which its requests'
/// observed TTFTs are carried by request id.
pub const EDGE_S: f64 = 10.0;

/// Where a request's observed TTFT sits among the per-endpoint samples:
/// the endpoint, and the index in its samples.
pub type Sample = (Endpoint, u32);

/// An endpoint's name, shared by every [`Edge`] of the endpoint
/// ([`Edges::endpoint`]): noting a request's sample copies no string.
/// Written and read as the name.
pub type Endpoint = gatecal_parser::Name;

/// The endpoint names [`Edges`] hands out, one allocation per endpoint. A
/// cache: two sets of edges compare equal whatever it holds, and a copy
/// starts empty.
#[derive(Debug, Default)]
struct Names(gatecal_parser::Interner);

impl Clone for Names {
    fn clone(&self) -> Names {
        Names::default()
    }
}

impl PartialEq for Names {
    fn eq(&self, _: &Names) -> bool {
        true
    }
}

/// One request counted near an end of a part, with its observed TTFT.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// The request id's fingerprint (64-bit FxHash).
    pub key: u64,
    /// The time of the decision that counted it, epoch seconds.
    pub ts: f64,
    /// Its place among the part's requests counted (0 for the first).
    pub at: u64,
    /// Its observed TTFT, ms.
    pub ttft_ms: f64,
    /// The endpoint whose samples hold its TTFT, and the index there, when
    /// kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<Sample>,
}

/// A part's requests near its ends ([`Edge`]), and what places them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Edges {
    /// Requests counted.
    pub counted: u64,
    /// The first time of a counted request's decision.
    pub first_ts: Option<f64>,
    /// The last time of a counted request's decision.
    pub last_ts: Option<f64>,
    /// Requests counted within [`EDGE_S`] of `first_ts`, among the first
    /// [`RECENT_IDS`], in the order counted.
    pub head: Vec<Edge>,
    /// Requests counted within [`EDGE_S`] of `last_ts`, among the last
    /// [`RECENT_IDS`], in the order counted.
    pub tail: VecDeque<Edge>,
    /// The endpoint names of the samples noted.
    #[serde(skip)]
    names: Names,
}

impl Edges {
    /// Whether no request was counted (a partial without them).
    pub fn is_empty(&self) -> bool {
        self.counted == 0
    }

    /// The endpoint `name`, shared with every sample of it noted before:
    /// its name is copied once, at its first sample.
    pub fn endpoint(&mut self, name: &str) -> Endpoint {
        self.names.0.intern(name)
    }

    /// Counts one request whose decision was at `ts`: its place.
    pub fn count(&mut self, ts: Option<f64>) -> u64 {
        let at = self.counted;
        self.counted += 1;
        if let Some(t) = ts.filter(|t| t.is_finite()) {
            if self.first_ts.is_none_or(|f| t < f) {
                self.first_ts = Some(t);
                self.head.retain(|e| e.ts < t + EDGE_S);
            }
            self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
        }
        at
    }

    /// Keeps a request counted (its place from [`Edges::count`]) with its
    /// observed TTFT, when near an end.
    pub fn note(&mut self, e: Edge) {
        let (Some(first), Some(last)) = (self.first_ts, self.last_ts) else {
            return;
        };
        if !e.ts.is_finite() {
            return;
        }
        if e.ts < first + EDGE_S && e.at < RECENT_IDS as u64 {
            self.head.push(e.clone());
        }
        self.tail.push_back(e);
        let counted = self.counted;
        while self
            .tail
            .front()
            .is_some_and(|f| f.ts <= last - EDGE_S || counted - 1 - f.at >= RECENT_IDS as u64)
        {
            self.tail.pop_front();
        }
    }

    /// As a partial carries them: the entries out of reach dropped (times
    /// seen out of order leave some behind).
    pub fn trimmed(&self) -> Edges {
        let mut e = self.clone();
        e.trim();
        e
    }

    fn trim(&mut self) {
        let (first, last, counted) = (self.first_ts, self.last_ts, self.counted);
        self.head
            .retain(|e| first.is_some_and(|f| e.ts < f + EDGE_S) && e.at < RECENT_IDS as u64);
        self.tail.retain(|e| {
            last.is_some_and(|l| e.ts > l - EDGE_S)
                && e.at < counted
                && counted - 1 - e.at < RECENT_IDS as u64
        });
    }

    /// The entries of `later.head` (indexes, ascending) that this part
    /// counted already: a run over both would not count them again.
    pub fn doubles(&self, later: &Edges) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, e) in later.head.iter().enumerate() {
            let Some(f) = self.tail.iter().find(|f| f.key == e.key) else {
                continue;
            };
            // Requests counted between the two: after it here, and before
            // it there but for those taken back.
            let after = self.counted.saturating_sub(1).saturating_sub(f.at);
            let before = e.at.saturating_sub(out.len() as u64);
            if after.saturating_add(before) < RECENT_IDS as u64 {
                out.push(i);
            }
        }
        out
    }

    /// The edges of this part followed by `later`, whose `dropped` head
    /// entries were taken back; `place` gives a later entry's sample its
    /// place in the merged samples (`None`: not kept there).
    pub fn then(
        &self,
        later: &Edges,
        dropped: &[usize],
        place: &dyn Fn(&Sample) -> Option<Sample>,
    ) -> Edges {
        let gone: BTreeSet<u64> = dropped.iter().map(|&i| later.head[i].at).collect();
        let base = self.counted;
        let moved = |e: &Edge| -> Option<Edge> {
            if gone.contains(&e.at) {
                return None;
            }
            let before = gone.range(..e.at).count() as u64;
            Some(Edge {
                at: base.saturating_add(e.at).saturating_sub(before),
                sample: e.sample.as_ref().and_then(place),
                ..e.clone()
            })
        };
        let min = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        let mut e = Edges {
            counted: base
                .saturating_add(later.counted)
                .saturating_sub(gone.len() as u64),
            first_ts: min(self.first_ts, later.first_ts),
            last_ts: max(self.last_ts, later.last_ts),
            head: self
                .head
                .iter()
                .cloned()
                .chain(later.head.iter().filter_map(&moved))
                .collect(),
            tail: self
                .tail
                .iter()
                .cloned()
                .chain(later.tail.iter().filter_map(&moved))
                .collect(),
            names: self.names.clone(),
        };
        e.trim();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(key: u64, ts: f64, at: u64) -> Edge {
        Edge {
            key,
            ts,
            at,
            ttft_ms: 100.0,
            sample: None,
        }
    }

    fn part(requests: &[(u64, f64)]) -> Edges {
        let mut e = Edges::default();
        for &(key, ts) in requests {
            let at = e.count(Some(ts));
            e.note(edge(key, ts, at));
        }
        e
    }

    #[test]
    fn a_request_counted_at_both_sides_of_a_cut_is_found_once() {
        let a = part(&[(1, 0.0), (2, 50.0), (3, 99.9)]);
        // Only the requests near each end are kept.
        assert_eq!(a.head.iter().map(|e| e.key).collect::<Vec<_>>(), [1]);
        assert_eq!(a.tail.iter().map(|e| e.key).collect::<Vec<_>>(), [3]);
        let b = part(&[(3, 100.0), (4, 100.5), (5, 180.0)]);
        assert_eq!(a.doubles(&b), [0]);
        let m = a.then(&b, &[0], &|s| Some(s.clone()));
        assert_eq!(m.counted, 5);
        assert_eq!(
            m.tail.iter().map(|e| (e.key, e.at)).collect::<Vec<_>>(),
            [(5, 4)]
        );
        // A request seen again more than the ids remembered later is
        // counted again, as a single run counts it.
        let mut far = a.clone();
        far.counted += RECENT_IDS as u64;
        assert!(far.doubles(&b).is_empty());
        // Another request: nothing taken back.
        assert!(a.doubles(&part(&[(9, 100.0)])).is_empty());
    }
}
