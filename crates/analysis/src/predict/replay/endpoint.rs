//! One endpoint's state in the replay: its prefill queue, the requests in
//! flight and decoding there, and the sessions its cache holds.

use gatecal_filter::Candidate;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

use super::{EngineModel, Request};

/// One endpoint's state in the replay.
#[derive(Clone, Debug, Default)]
pub(super) struct Endpoint {
    /// When the prefill queue is free.
    pub(super) free_at: f64,
    /// Uncached tokens of requests before their first token: (first token time, tokens).
    pub(super) pending: Vec<(f64, f64)>,
    /// Response ends of requests in flight, earliest first.
    pub(super) open: Times,
    /// First tokens of the requests still decoding here (the engine
    /// model's `decode_s`), earliest first.
    pub(super) decodes: Times,
    /// The least first token of `pending` (negative infinity after a NaN
    /// one): while the time is below it, pruning `pending` would keep it
    /// all, and is skipped.
    pub(super) least_pending: f64,
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
    /// Drops what has ended by `t`: the first tokens of `pending` and the
    /// response ends of `open` at or before it, and the decodes that ended
    /// by it (`decode_s` after their first token).
    pub(super) fn prune(&mut self, t: f64, decode_s: f64) {
        self.open.keep_from(|end| end > t);
        // Sums round monotonically: the decodes that ended are the
        // earliest.
        self.decodes.keep_from(|first| first + decode_s > t);
        if t < self.least_pending {
            return;
        }
        let n = self.pending.len();
        // What is kept is above `t`, so no NaN.
        let mut least = f64::INFINITY;
        self.pending.retain(|&(first, _)| {
            let keep = first > t;
            if keep && first < least {
                least = first;
            }
            keep
        });
        self.least_pending = least;
        if self.pending.len() != n {
            self.pending_sum = self.pending_total();
        }
    }

    /// Uncached tokens in flight until `first`.
    pub(super) fn add_pending(&mut self, first: f64, tokens: f64) {
        // The sum in order, one more term.
        self.pending_sum = self.in_flight_tokens() + tokens;
        self.pending.push((first, tokens));
        self.least_pending = if first.is_nan() {
            f64::NEG_INFINITY
        } else {
            self.least_pending.min(first)
        };
    }

    /// A response that ends at `end`.
    pub(super) fn add_open(&mut self, end: f64) {
        self.open.push(end);
    }

    /// A request decoding from `first`.
    pub(super) fn add_decode(&mut self, first: f64) {
        self.decodes.push(first);
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

/// Times, the earliest first. A NaN time is not kept: every use of an
/// endpoint's times follows a prune at the time of use, which would drop
/// it (it is not after any time).
#[derive(Clone, Debug, Default)]
pub(super) struct Times(BinaryHeap<Reverse<Time>>);

impl Times {
    pub(super) fn push(&mut self, t: f64) {
        if !t.is_nan() {
            self.0.push(Reverse(Time(t)));
        }
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &f64> {
        self.0.iter().map(|r| &r.0.0)
    }

    /// Drops the earliest times up to the first that `keep` keeps.
    fn keep_from(&mut self, keep: impl Fn(f64) -> bool) {
        while let Some(Reverse(Time(x))) = self.0.peek()
            && !keep(*x)
        {
            self.0.pop();
        }
    }
}

/// A time ordered by `total_cmp` (`Times` holds no NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Time(f64);

impl Eq for Time {}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix;

    /// The queues as plain lists, pruned and summed in full each time.
    #[derive(Default)]
    struct Plain {
        pending: Vec<(f64, f64)>,
        open: Vec<f64>,
        decodes: Vec<f64>,
    }

    impl Plain {
        fn prune(&mut self, t: f64, decode_s: f64) {
            self.pending.retain(|&(first, _)| first > t);
            self.open.retain(|&end| end > t);
            self.decodes.retain(|&first| first + decode_s > t);
        }

        fn decoding(&self, t: f64, decode_s: f64) -> usize {
            self.decodes
                .iter()
                .filter(|&&first| first <= t && first + decode_s > t)
                .count()
        }
    }

    /// Pruning only when something ended, the sum kept as it changes and
    /// the times kept earliest first give, at every read, what the plain
    /// lists give: the same sum to the bit, the same counts; NaN times and
    /// times equal to the prune's included.
    #[test]
    fn kept_queues_read_as_the_plain_lists_do() {
        for seed in 1..40u64 {
            let mut rng = SplitMix(seed);
            let mut ep = Endpoint::default();
            let mut plain = Plain::default();
            let decode_s = [0.0, 0.5, 3.0][(seed % 3) as usize];
            let mut t = 0.0;
            for step in 0..600 {
                let x = t + (rng.uniform() * 8.0 * 4.0).floor() / 4.0;
                let x = if rng.below(97) == 0 { f64::NAN } else { x };
                let u = (rng.uniform() * 3000.0).round() / 7.0;
                match rng.below(4) {
                    0 => {
                        ep.add_pending(x, u);
                        plain.pending.push((x, u));
                    }
                    1 => {
                        ep.add_open(x);
                        plain.open.push(x);
                    }
                    2 => {
                        ep.add_decode(x);
                        plain.decodes.push(x);
                    }
                    _ => {
                        t += (rng.uniform() * 2.0 * 4.0).floor() / 4.0;
                        ep.prune(t, decode_s);
                        plain.prune(t, decode_s);
                        let want: f64 = plain.pending.iter().map(|&(_, u)| u).sum();
                        let got = ep.in_flight_tokens();
                        assert_eq!(got.to_bits(), want.to_bits(), "seed {seed} step {step}");
                        assert_eq!(ep.open.len(), plain.open.len(), "seed {seed} step {step}");
                        assert_eq!(ep.pending.len(), plain.pending.len());
                        let at = t + 0.25;
                        assert_eq!(
                            ep.decoding(at, decode_s) as usize,
                            plain.decoding(at, decode_s),
                            "seed {seed} step {step}"
                        );
                    }
                }
            }
        }
    }
}
