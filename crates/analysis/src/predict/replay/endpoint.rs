//! One endpoint's state in the replay: its prefill queue, the requests in
//! flight and decoding there, and the sessions its cache holds.

use gatecal_filter::Candidate;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;

use super::{EngineModel, Request};

/// One endpoint's state in the replay.
#[derive(Clone, Debug, Default)]
pub(super) struct Endpoint {
    /// When the prefill queue is free.
    pub(super) free_at: f64,
    /// Uncached tokens of requests before their first token: (first token time, tokens).
    pub(super) pending: Vec<(f64, f64)>,
    /// Response ends of requests in flight.
    pub(super) open: Vec<f64>,
    /// First tokens of the requests still decoding here (the engine
    /// model's `decode_s`).
    pub(super) decodes: Vec<f64>,
    /// The least first token of `pending`, response end of `open` and
    /// first token of `decodes` (negative infinity after a NaN one): while
    /// the time is below each (with `decode_s` added to the last), a
    /// prune would keep everything, and is skipped.
    pub(super) least: [f64; 3],
    /// [`Endpoint::pending_total`] (when `pending` is not empty).
    pub(super) pending_sum: f64,
    /// Session -> (cached tokens, last use).
    pub(super) sessions: FxHashMap<u64, (u64, f64)>,
    /// The held sessions by last use: (use, session).
    pub(super) lru: BTreeSet<(u64, u64)>,
    /// Sessions evicted here and not served here since.
    pub(super) evicted: FxHashSet<u64>,
    /// Uses so far (the replay serves in time order).
    pub(super) tick: u64,
    /// Sum of the cached session tokens.
    pub(super) cached_total: f64,
    /// Whether the replay has served a request here (its cache holds the
    /// prefix every prompt shares).
    pub(super) served: bool,
}

impl Endpoint {
    pub(super) fn prune(&mut self, t: f64, decode_s: f64) {
        // Sums round monotonically: every `first + decode_s` is at least
        // the least one's.
        let [p, o, d] = self.least;
        if t < p && t < o && d + decode_s > t {
            return;
        }
        let n = self.pending.len();
        // What is kept is above `t`, so no NaN.
        let mut least = [f64::INFINITY; 3];
        self.pending.retain(|&(first, _)| {
            let keep = first > t;
            if keep && first < least[0] {
                least[0] = first;
            }
            keep
        });
        self.open.retain(|&end| {
            let keep = end > t;
            if keep && end < least[1] {
                least[1] = end;
            }
            keep
        });
        self.decodes.retain(|&first| {
            let keep = first + decode_s > t;
            if keep && first < least[2] {
                least[2] = first;
            }
            keep
        });
        self.least = least;
        if self.pending.len() != n {
            self.pending_sum = self.pending_total();
        }
    }

    /// Uncached tokens in flight until `first`.
    pub(super) fn add_pending(&mut self, first: f64, tokens: f64) {
        // The sum in order, one more term.
        self.pending_sum = self.in_flight_tokens() + tokens;
        self.pending.push((first, tokens));
        note_least(&mut self.least[0], first);
    }

    /// A response that ends at `end`.
    pub(super) fn add_open(&mut self, end: f64) {
        self.open.push(end);
        note_least(&mut self.least[1], end);
    }

    /// A request decoding from `first`.
    pub(super) fn add_decode(&mut self, first: f64) {
        self.decodes.push(first);
        note_least(&mut self.least[2], first);
    }

    /// Requests decoding here at `t`: first token at or before it, for
    /// `decode_s` after.
    pub(super) fn decoding(&self, t: f64, decode_s: f64) -> f64 {
        self.decodes
            .iter()
            .filter(|&&first| first <= t && first + decode_s > t)
            .count() as f64
    }

    /// The uncached tokens in flight: the sum of `pending`'s in order, as
    /// [`Endpoint::pending_total`] gives it, kept as it changes.
    pub(super) fn in_flight_tokens(&self) -> f64 {
        if self.pending.is_empty() {
            return self.pending_total();
        }
        self.pending_sum
    }

    fn pending_total(&self) -> f64 {
        self.pending.iter().map(|&(_, u)| u).sum()
    }

    pub(super) fn cached(&self, r: &Request, e: usize, holder: bool) -> f64 {
        let holds = holder || r.session.is_some_and(|s| self.sessions.contains_key(&s));
        let uncached = if holds {
            r.warm_tokens
        } else {
            let logged = r
                .logged_cold
                .iter()
                .find(|&&(k, _)| k == e)
                .map_or(r.cold_tokens, |&(_, u)| u);
            match r.served_cold {
                // Cold in the log because nothing had been served there
                // yet; the replay has, so the shared prefix is cached.
                Some(warmed) if self.served && r.unserved.contains(&e) => logged.min(warmed),
                _ => logged,
            }
        };
        (r.prompt_tokens - uncached).clamp(0.0, r.prompt_tokens)
    }

    pub(super) fn remember(&mut self, m: &EngineModel, session: u64, tokens: f64) {
        self.tick += 1;
        let tokens = tokens.max(0.0);
        let old = match self.sessions.insert(session, (self.tick, tokens)) {
            Some((use_, tok)) => {
                self.lru.remove(&(use_, session));
                tok
            }
            None => 0.0,
        };
        self.lru.insert((self.tick, session));
        self.evicted.remove(&session);
        self.cached_total += tokens - old;
        // Least recently used first, never the session just written.
        while self.cached_total > m.cache_capacity_tokens && self.sessions.len() > 1 {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            if let Some((_, tok)) = self.sessions.remove(&victim) {
                self.cached_total -= tok;
            }
            self.evicted.insert(victim);
        }
    }
}

/// Sets a candidate's prefix match `(matched, total, block size)` and
/// in-flight load from the endpoint's state.
pub(super) fn set_attributes(
    cand: &mut Candidate,
    ep: &Endpoint,
    (m, total, size): (i64, i64, i64),
    in_flight: f64,
) {
    cand.match_blocks = Some(m);
    cand.total_blocks = Some(total);
    cand.block_size_tokens = Some(size);
    cand.in_flight_tokens = Some(in_flight.round() as i64);
    cand.in_flight_requests = Some(ep.open.len() as i64);
}

/// Lowers `least` to `x`; a NaN `x` (which every prune drops) makes the
/// next prune run.
fn note_least(least: &mut f64, x: f64) {
    *least = if x.is_nan() {
        f64::NEG_INFINITY
    } else {
        least.min(x)
    };
}
