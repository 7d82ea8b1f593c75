//! One simulated engine: its prefill queue (first come, first served, the
//! cost of a prefill from its uncached tokens) and its prefix cache.

use std::collections::{BTreeSet, HashMap};

use crate::model::NS;
use crate::scenario::Pool;
use crate::workload_trace::TRACE_BLOCK_TOKENS;

#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlight {
    pub(crate) release_ns: i64,
    pub(crate) tokens: i64,
    pub(crate) done_ns: i64,
    /// The EPP replica that scheduled it.
    pub(crate) replica: usize,
}

/// One request's life on one engine, for the vLLM stats lines.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    /// Arrival at the engine.
    pub arrive_ns: i64,
    /// Prefill start.
    pub start_ns: i64,
    /// First token (prefill done, or KV received under P/D).
    pub first_token_ns: i64,
    /// Last token.
    pub done_ns: i64,
    /// Full prompt tokens.
    pub prompt_tokens: i64,
    /// Prompt tokens found in this engine's prefix cache.
    pub cached_tokens: i64,
    /// Prompt tokens this engine computed.
    pub computed_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
}

/// What a request's prompt is made of, for the prefix caches: a session's
/// prompt (the shared system prompt, then the session's own blocks), or a
/// trace request's 512-token blocks by id.
#[derive(Clone, Debug)]
pub enum Prefix {
    /// A synthetic session's prompt.
    Session {
        /// Blocks of the shared system prompt.
        sys_blocks: i64,
        /// Session id.
        session: u64,
    },
    /// A trace request: one id per [`TRACE_BLOCK_TOKENS`]-token block.
    Trace {
        /// The trace's `hash_ids`.
        hash_ids: Vec<u64>,
    },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixCache {
    pub(crate) sys: bool,
    pub(crate) sessions: HashMap<u64, (i64, u64)>,
    pub(crate) used_blocks: i64,
    pub(crate) cap_blocks: i64,
    pub(crate) tick: u64,
    /// Trace blocks held: id -> last use, and the same ordered by last use.
    pub(crate) trace_blocks: HashMap<u64, u64>,
    pub(crate) trace_lru: BTreeSet<(u64, u64)>,
    /// Capacity in trace blocks.
    pub(crate) trace_cap: usize,
}

impl PrefixCache {
    /// Cached blocks (of `block_size` tokens) of a prompt of
    /// `prompt_tokens`, at most `prompt_blocks`.
    pub(crate) fn matched(
        &self,
        prefix: &Prefix,
        prompt_tokens: i64,
        bs: i64,
        prompt_blocks: i64,
    ) -> i64 {
        match prefix {
            Prefix::Session {
                sys_blocks,
                session,
            } => {
                let sys_blocks = *sys_blocks;
                if !self.sys && sys_blocks > 0 {
                    return 0;
                }
                let sess = self.sessions.get(session).map(|e| e.0).unwrap_or(0);
                (sys_blocks + sess.min(prompt_blocks - sys_blocks)).clamp(0, prompt_blocks)
            }
            Prefix::Trace { hash_ids } => {
                let held = hash_ids
                    .iter()
                    .take_while(|h| self.trace_blocks.contains_key(h))
                    .count() as i64;
                let tokens = (held * TRACE_BLOCK_TOKENS).min(prompt_tokens);
                (tokens / bs.max(1)).clamp(0, prompt_blocks)
            }
        }
    }

    pub(crate) fn insert(&mut self, prefix: &Prefix, prompt_blocks: i64) {
        match prefix {
            Prefix::Session {
                sys_blocks,
                session,
            } => self.insert_session(*sys_blocks, *session, prompt_blocks - *sys_blocks),
            Prefix::Trace { hash_ids } => {
                for &h in hash_ids {
                    self.tick += 1;
                    if let Some(old) = self.trace_blocks.insert(h, self.tick) {
                        self.trace_lru.remove(&(old, h));
                    }
                    self.trace_lru.insert((self.tick, h));
                }
                while self.trace_blocks.len() > self.trace_cap {
                    let Some((_, h)) = self.trace_lru.pop_first() else {
                        break;
                    };
                    self.trace_blocks.remove(&h);
                }
            }
        }
    }

    pub(crate) fn insert_session(&mut self, sys_blocks: i64, session: u64, session_blocks: i64) {
        self.tick += 1;
        if !self.sys {
            self.sys = true;
            self.used_blocks += sys_blocks;
        }
        let old = self
            .sessions
            .insert(session, (session_blocks, self.tick))
            .map(|e| e.0)
            .unwrap_or(0);
        self.used_blocks += session_blocks - old;
        while self.used_blocks > self.cap_blocks && self.sessions.len() > 1 {
            let victim = self
                .sessions
                .iter()
                .filter(|(k, _)| **k != session)
                .min_by_key(|(k, v)| (v.1, **k))
                .map(|(k, v)| (*k, v.0));
            match victim {
                Some((k, blocks)) => {
                    self.sessions.remove(&k);
                    self.used_blocks -= blocks;
                }
                None => break,
            }
        }
    }
}

/// What a prefill costs on an engine of a pool (see [`Pool`]).
#[derive(Clone, Copy, Debug)]
pub struct PrefillCost {
    /// Raw compute rate, tokens/s.
    pub raw_tps: f64,
    /// Per-request cost, ns.
    pub overhead_ns: f64,
    /// Fixed cost of one step, ns.
    pub step_ns: f64,
    /// Token budget of one step.
    pub budget: i64,
}

impl PrefillCost {
    /// The pool's costs.
    pub fn of(p: &Pool) -> PrefillCost {
        PrefillCost {
            raw_tps: p.true_peak_tps.max(1.0),
            overhead_ns: p.prefill_overhead_ms.max(0.0) * 1e6,
            step_ns: p.step_overhead_ms.max(0.0) * 1e6,
            budget: p.max_num_batched_tokens.max(2),
        }
    }

    /// Time to prefill `uncached` tokens while `decoding` requests share
    /// every step: each step carries one token per decoding request and a
    /// chunk of the prompt up to the budget, and costs the fixed step time
    /// plus its tokens at the raw rate; the request adds its own overhead.
    pub fn prefill_ns(&self, uncached: i64, decoding: i64) -> i64 {
        let d = decoding.clamp(0, self.budget / 2);
        let chunk = (self.budget - d).max(1);
        let steps = (uncached.max(1) + chunk - 1) / chunk;
        let tokens = uncached.max(1) + steps * d;
        (self.overhead_ns + steps as f64 * self.step_ns + tokens as f64 / self.raw_tps * NS).ceil()
            as i64
    }
}

/// Dynamic state of one engine.
#[derive(Clone, Debug, Default)]
pub struct Engine {
    pub(crate) busy_until_ns: i64,
    pub(crate) inflight: Vec<InFlight>,
    pub(crate) cache: PrefixCache,
    /// The approximate prefix producer's index, when its capacity differs
    /// from the cache's ([`Pool::index_capacity_tokens`]).
    pub(crate) index: Option<PrefixCache>,
    /// Jobs, when collected for vLLM logs.
    pub jobs: Vec<Job>,
}

impl Engine {
    /// Records a prompt served here: in the cache, and in the index when
    /// there is one.
    pub(crate) fn insert(&mut self, prefix: &Prefix, prompt_blocks: i64) {
        self.cache.insert(prefix, prompt_blocks);
        if let Some(i) = self.index.as_mut() {
            i.insert(prefix, prompt_blocks);
        }
    }

    pub(crate) fn prune(&mut self, t: i64) {
        self.inflight.retain(|f| f.done_ns > t);
    }

    pub(crate) fn in_flight_tokens(&self, t: i64) -> i64 {
        self.inflight
            .iter()
            .filter(|f| f.release_ns > t)
            .map(|f| f.tokens)
            .sum()
    }

    /// In-flight tokens as one EPP replica counts them: only the requests
    /// it scheduled itself.
    pub(crate) fn in_flight_tokens_of(&self, t: i64, replica: usize) -> i64 {
        self.inflight
            .iter()
            .filter(|f| f.release_ns > t && f.replica == replica)
            .map(|f| f.tokens)
            .sum()
    }

    pub(crate) fn in_flight_requests(&self, t: i64) -> i64 {
        self.inflight.iter().filter(|f| f.done_ns > t).count() as i64
    }

    pub(crate) fn decoding(&self, t: i64) -> i64 {
        self.inflight
            .iter()
            .filter(|f| f.release_ns <= t && f.done_ns > t)
            .count() as i64
    }

    pub(crate) fn waiting(&self, t: i64) -> i64 {
        let prefilling = self.inflight.iter().filter(|f| f.release_ns > t).count() as i64;
        (prefilling - 1).max(0)
    }
}
