//! The simulated deployment: sessions, arrivals, per-engine prefill queues
//! and prefix caches, and the scheduling of each request through the filter
//! core, a token-load scorer and a max-score picker.

use std::sync::Arc;

use gatecal_filter::{Candidate, TtftSource, decide};

pub use crate::engine::{Engine, Job, PrefillCost, Prefix};
use crate::engine::{InFlight, PrefixCache};
pub use crate::request::{FilterRun, PdEval, ProfileRun, Request, Snapshot};
use crate::rng::Rng;
use crate::scenario::{Deployment, Pool, interp, interp_geo};
use crate::workload_trace::{TRACE_BLOCK_TOKENS, TraceRequest};

/// The scorer's `queueThresholdTokens` default: tokenLoad is capped here.
pub const QUEUE_THRESHOLD_TOKENS: f64 = 4_194_304.0;

pub(crate) const NS: f64 = 1e9;
/// Longest prompt a session may grow to before it is abandoned.
const MAX_PROMPT_TOKENS: i64 = 200_000;

/// Mixed into the session seed for the request ids of a session's turns
/// when users wait ([`crate::Workload::users`]).
const TURN_ID_LABEL: u64 = 0x7475_726e_5f69_6473;

/// Static identity of one endpoint (one engine, one target port).
#[derive(Clone, Debug)]
pub struct EndpointInfo {
    /// Endpoint id name (`<pod>-rank-<n>` or the pod name).
    pub name: String,
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Pod IP.
    pub ip: String,
    /// Node IP.
    pub node_ip: String,
    /// Target port.
    pub port: u16,
    /// Rank index within the pod.
    pub rank: usize,
    /// Pod labels, sorted by key.
    pub labels: Vec<(String, String)>,
}

impl EndpointInfo {
    /// `namespace/name`.
    pub fn ns_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// `ip:port`.
    pub fn host_port(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// The endpoints of one pool with their state.
#[derive(Clone, Debug)]
pub struct PoolState {
    /// Identities.
    pub endpoints: Vec<EndpointInfo>,
    /// States, same order.
    pub engines: Vec<Engine>,
}

/// An open session. Its content (first context, turns, every follow-up
/// message, output and think time) comes from its own random stream,
/// derived from the seed and its id, so it is the same whatever the
/// routing; only when its turns arrive depends on when their answers end.
#[derive(Clone, Debug)]
struct Session {
    id: u64,
    rng: Rng,
    /// Run fraction at which the session opened (sets its message sizes).
    start_frac: f64,
    /// The previous turn's prompt (the first prompt before turn 0).
    last_prompt: i64,
    last_output: i64,
    turns_left: u64,
    /// Turns sent so far.
    turn: u32,
    ready_ns: i64,
}

/// A deployment's simulation state.
pub struct DepState {
    /// Index in the scenario.
    pub index: usize,
    /// Pools, same order as the spec's.
    pub pools: Vec<PoolState>,
    /// Arrival slots: gaps, session-or-new, which sessions to try, request ids.
    arrivals: Rng,
    /// Routing: candidate order, missing signals, predictions, scrape
    /// times, exploration draws, tie-breaks.
    routing: Rng,
    /// Seed of the sessions' own streams.
    session_seed: u64,
    sessions: Vec<Session>,
    next_session: u64,
    next_slot: u64,
    /// A replayed trace and the index of its next request.
    trace: Option<(Arc<[TraceRequest]>, usize)>,
    /// Next arrival time.
    pub next_arrival_ns: i64,
    /// Next new session, with users that wait ([`Workload::users`]).
    ///
    /// [`Workload::users`]: crate::Workload::users
    next_session_ns: i64,
    start_ns: i64,
    end_ns: i64,
    collect_jobs: bool,
    /// The EPP replica deciding the request being scheduled.
    replica: usize,
}

fn pod_hash(rng: &mut Rng) -> String {
    rng.token(10, b"bcdfghjklmnpqrstvwxz2456789")
}

fn pod_suffix(rng: &mut Rng) -> String {
    rng.token(5, b"bcdfghjklmnpqrstvwxz2456789")
}

impl DepState {
    /// Builds the endpoints and the first arrival. `routing_seed` seeds
    /// the routing's stream alone (the run's seed unless
    /// [`Scenario::routing_seed`] says otherwise).
    ///
    /// [`Scenario::routing_seed`]: crate::Scenario::routing_seed
    pub fn new(
        dep: &Deployment,
        index: usize,
        seed: u64,
        routing_seed: u64,
        start_ns: i64,
        end_ns: i64,
        collect_jobs: bool,
    ) -> DepState {
        // The deployment's name enters the stream so that pod names differ
        // between scenarios.
        let name_hash = dep.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        // Streams by purpose, so that routing never consumes a draw of the
        // workload: two runs differing only in the filter's config see the
        // same arrival slots, request ids and sessions.
        let mut rng = Rng::derive(seed ^ name_hash, 1000 + index as u64);
        let arrivals = Rng::derive(seed ^ name_hash, 2000 + index as u64);
        let routing = Rng::derive(routing_seed ^ name_hash, 3000 + index as u64);
        let session_seed = Rng::derive(seed ^ name_hash, 4000 + index as u64).next_u64();
        let mut pools = Vec::new();
        for (pi, p) in dep.pools.iter().enumerate() {
            let rs_hash = pod_hash(&mut rng);
            let mut endpoints = Vec::new();
            let mut engines = Vec::new();
            for podi in 0..p.pods {
                let pod = format!(
                    "{}-{}-{}-{}",
                    dep.name,
                    p.role,
                    rs_hash,
                    pod_suffix(&mut rng)
                );
                let ip = format!(
                    "10.{}.{}.{}",
                    64 + index * 4 + pi,
                    rng.below(250) + 1,
                    rng.below(250) + 2
                );
                let node_ip = format!("10.128.{}.{}", rng.below(16), rng.below(250) + 2);
                let labels = vec![
                    ("app.kubernetes.io/name".to_string(), dep.name.clone()),
                    ("llm-d.ai/inference-serving".to_string(), "true".to_string()),
                    ("llm-d.ai/model".to_string(), dep.name.clone()),
                    ("llm-d.ai/role".to_string(), p.role.clone()),
                    ("pod-template-hash".to_string(), rs_hash.clone()),
                ];
                let _ = podi;
                for rank in 0..p.ranks_per_pod.max(1) {
                    let name = if dep.rank_suffix {
                        format!("{pod}-rank-{rank}")
                    } else {
                        pod.clone()
                    };
                    endpoints.push(EndpointInfo {
                        name,
                        pod: pod.clone(),
                        namespace: dep.namespace.clone(),
                        ip: ip.clone(),
                        node_ip: node_ip.clone(),
                        port: 8000 + rank as u16,
                        rank,
                        labels: labels.clone(),
                    });
                    let cache = |tokens: i64| PrefixCache {
                        cap_blocks: tokens / dep.block_size.max(1),
                        trace_cap: (tokens / TRACE_BLOCK_TOKENS).max(0) as usize,
                        ..PrefixCache::default()
                    };
                    engines.push(Engine {
                        cache: cache(p.kv_capacity_tokens),
                        index: p.index_capacity_tokens.map(cache),
                        ..Engine::default()
                    });
                }
            }
            pools.push(PoolState { endpoints, engines });
        }
        let mut s = DepState {
            index,
            pools,
            arrivals,
            routing,
            session_seed,
            sessions: Vec::new(),
            next_session: 1,
            next_slot: 1,
            trace: dep.workload.trace.clone().map(|t| (t, 0)),
            next_arrival_ns: start_ns,
            next_session_ns: start_ns,
            start_ns,
            end_ns,
            collect_jobs,
            replica: 0,
        };
        s.next_arrival_ns = match &s.trace {
            Some((t, _)) => trace_arrival(t, 0, start_ns),
            None if dep.workload.users => {
                s.next_session_ns = s.draw_next_session(dep, start_ns);
                s.next_session_ns
            }
            None => s.draw_next_arrival(dep, start_ns),
        };
        s
    }

    fn frac(&self, t: i64) -> f64 {
        let span = (self.end_ns - self.start_ns).max(1) as f64;
        ((t - self.start_ns) as f64 / span).clamp(0.0, 1.0)
    }

    fn draw_next_arrival(&mut self, dep: &Deployment, t: i64) -> i64 {
        let rate = interp(&dep.workload.rate, self.frac(t)).max(1e-3);
        let gap = self.arrivals.exp(1.0 / rate);
        t + (gap * NS).max(1.0) as i64
    }

    /// Whether arrivals remain before the end (of the run, or of a
    /// replayed trace).
    pub fn has_next(&self) -> bool {
        self.next_arrival_ns < self.end_ns
    }

    /// Advances the arrival clock and schedules the arrival, or returns
    /// `None` when it was meant to continue a session but none was ready
    /// (its user is still waiting for a response): under a backlog, open
    /// sessions send less, as real users do.
    ///
    /// Every arrival slot makes the same draws from the arrival stream
    /// (gap, session-or-new, three session picks, request id) whatever
    /// happens in it; a session's content comes from its own stream.
    pub fn step(&mut self, dep: &Deployment) -> Option<Request> {
        if self.trace.is_some() {
            return Some(self.step_trace(dep));
        }
        if dep.workload.users {
            return Some(self.step_users(dep));
        }
        let t = self.next_arrival_ns;
        self.next_arrival_ns = self.draw_next_arrival(dep, t);
        let w = &dep.workload;
        let slot = self.next_slot;
        self.next_slot += 1;
        let cont = self.arrivals.chance(1.0 - 1.0 / w.turns_mean.max(1.0));
        let picks = [
            self.arrivals.f64(),
            self.arrivals.f64(),
            self.arrivals.f64(),
        ];
        let rid = self.request_id(dep, slot);

        // Pick a session: continue a ready one, or start a new one.
        let mut chosen = None;
        if cont && !self.sessions.is_empty() {
            let n = self.sessions.len();
            for u in picks {
                let i = ((u * n as f64) as usize).min(n - 1);
                if self.sessions[i].ready_ns <= t {
                    chosen = Some(i);
                    break;
                }
            }
            chosen?;
        }
        let idx = match chosen {
            Some(i) => i,
            None => {
                // Users give up: keep at most a few dozen open sessions per
                // engine, dropping the least recently started.
                let engines: usize = self.pools.iter().map(|p| p.engines.len()).sum();
                self.open_session(dep, t, Some(24 * engines.max(1)))
            }
        };
        Some(self.send_turn(dep, idx, t, rid))
    }

    /// A new session opening at `t`, pushed last; with `cap`, the least
    /// recently started open session is dropped first when `cap` are open.
    fn open_session(&mut self, dep: &Deployment, t: i64, cap: Option<usize>) -> usize {
        let w = &dep.workload;
        let id = self.next_session;
        self.next_session += 1;
        let mut rng = Rng::derive(self.session_seed, id);
        let frac = self.frac(t);
        let mean = interp_geo(&w.context_mean, frac);
        let ctx = rng.lognormal_mean(mean, w.context_sigma).round().max(20.0) as i64;
        let turns = rng.geometric(w.turns_mean);
        if cap.is_some_and(|c| self.sessions.len() >= c) {
            self.sessions.remove(0);
        }
        self.sessions.push(Session {
            id,
            rng,
            start_frac: frac,
            last_prompt: (w.system_prompt_tokens + ctx).min(MAX_PROMPT_TOKENS),
            last_output: 0,
            turns_left: turns,
            turn: 0,
            ready_ns: t,
        });
        self.sessions.len() - 1
    }

    /// Sends the next turn of session `idx` at `t` as request `rid`, and
    /// advances the session (closed when its turns are done or its prompt
    /// is too long to grow).
    fn send_turn(&mut self, dep: &Deployment, idx: usize, t: i64, rid: String) -> Request {
        let w = &dep.workload;
        let s = &mut self.sessions[idx];
        let prompt = if s.turn == 0 {
            s.last_prompt
        } else {
            let mean =
                w.user_msg_mean + w.user_msg_frac * interp_geo(&w.context_mean, s.start_frac);
            let msg = s.rng.lognormal_mean(mean, 0.8).round().max(1.0) as i64;
            s.last_prompt + s.last_output + msg
        };
        let output = s.rng.lognormal_mean(w.output_mean, 0.6).round().max(1.0) as i64;
        let think_ns = (s.rng.exp(w.think_s.max(0.0)) * NS) as i64;
        let (sid, turn) = (s.id, s.turn);
        let bs = dep.block_size.max(1);
        let prompt_blocks = (prompt / bs).max(1);
        let prefix = Prefix::Session {
            sys_blocks: (w.system_prompt_tokens / bs).min(prompt_blocks),
            session: sid,
        };
        let mut req = self.schedule(dep, t, rid, prompt, output, &prefix);
        req.session = sid;
        req.turn = turn;
        req.think_ns = Some(think_ns);

        // Advance the session.
        let s = &mut self.sessions[idx];
        s.last_prompt = prompt;
        s.last_output = output;
        s.turns_left = s.turns_left.saturating_sub(1);
        s.turn += 1;
        s.ready_ns = req.done_ns + think_ns;
        if s.turns_left == 0 || prompt + output + 4 * w.user_msg_mean as i64 > MAX_PROMPT_TOKENS {
            self.sessions.remove(idx);
        }
        req
    }

    /// The next arrival with users that wait ([`Workload::users`]): the
    /// earliest due turn of an open session, else a new session. New
    /// sessions come from the arrival stream alone (gap and request id),
    /// a turn's request id from its session's id and turn, so routing moves
    /// when a turn arrives, never what it is.
    ///
    /// [`Workload::users`]: crate::Workload::users
    fn step_users(&mut self, dep: &Deployment) -> Request {
        let t = self.next_arrival_ns;
        let due = self
            .sessions
            .iter()
            .enumerate()
            .filter(|(_, s)| s.ready_ns <= t && s.turn > 0)
            .min_by_key(|(_, s)| (s.ready_ns, s.id))
            .map(|(i, _)| i);
        let (idx, rid) = match due {
            Some(i) => {
                let (sid, turn) = (self.sessions[i].id, self.sessions[i].turn);
                let mut rng = Rng::derive(
                    self.session_seed ^ TURN_ID_LABEL,
                    (sid << 20) ^ u64::from(turn),
                );
                let plain = rng.chance(dep.plain_request_ids_prob);
                let uuid = rng.uuid();
                let rid = if plain {
                    format!("req-{sid:06}-{turn:03}")
                } else {
                    uuid
                };
                (i, rid)
            }
            None => {
                self.next_session_ns = self.draw_next_session(dep, t);
                let slot = self.next_slot;
                self.next_slot += 1;
                let rid = self.request_id(dep, slot);
                (self.open_session(dep, t, None), rid)
            }
        };
        let req = self.send_turn(dep, idx, t, rid);
        self.next_arrival_ns = self
            .sessions
            .iter()
            .map(|s| s.ready_ns)
            .fold(self.next_session_ns, i64::min);
        req
    }

    /// The next new session's arrival with users that wait: the rate of
    /// arrival slots over the mean turns of a session.
    fn draw_next_session(&mut self, dep: &Deployment, t: i64) -> i64 {
        let w = &dep.workload;
        let rate = (interp(&w.rate, self.frac(t)) / w.turns_mean.max(1.0)).max(1e-3);
        let gap = self.arrivals.exp(1.0 / rate);
        t + (gap * NS).max(1.0) as i64
    }

    /// The slot's request id: both draws are made in every slot.
    fn request_id(&mut self, dep: &Deployment, slot: u64) -> String {
        let plain = self.arrivals.chance(dep.plain_request_ids_prob);
        let uuid = self.arrivals.uuid();
        if plain {
            format!("req-{slot:06}")
        } else {
            uuid
        }
    }

    /// The next request of a replayed trace: open loop, its own prompt
    /// blocks.
    fn step_trace(&mut self, dep: &Deployment) -> Request {
        let t = self.next_arrival_ns;
        let (trace, i) = match &mut self.trace {
            Some((trace, i)) => {
                let cur = *i;
                *i += 1;
                (trace.clone(), cur)
            }
            None => (Arc::from(Vec::new()), 0),
        };
        self.next_arrival_ns = trace_arrival(&trace, i + 1, self.start_ns);
        let slot = self.next_slot;
        self.next_slot += 1;
        let rid = self.request_id(dep, slot);
        let Some(r) = trace.get(i) else {
            // Unreachable: `has_next` is false past the last request.
            return self.schedule(
                dep,
                t,
                rid,
                1,
                1,
                &Prefix::Trace {
                    hash_ids: Vec::new(),
                },
            );
        };
        let prefix = Prefix::Trace {
            hash_ids: r.hash_ids.clone(),
        };
        let mut req = self.schedule(dep, t, rid, r.input_tokens, r.output_tokens.max(1), &prefix);
        req.session = i as u64 + 1;
        req
    }

    /// Routes a request and queues it on the chosen engines.
    fn schedule(
        &mut self,
        dep: &Deployment,
        t: i64,
        rid: String,
        prompt: i64,
        output: i64,
        prefix: &Prefix,
    ) -> Request {
        let w = &dep.workload;
        let bs = dep.block_size.max(1);
        let prompt_blocks = (prompt / bs).max(1);
        self.replica = if dep.epp_replicas > 1 {
            self.routing.index(dep.epp_replicas)
        } else {
            0
        };

        let mut runs = Vec::new();
        let mut pd = None;
        let decode_tps = w.decode_tps.max(1.0);
        let mut remote = None;
        // First (or only) profile.
        let r0 = self.run_profile(dep, 0, t, prefix, prompt, prompt_blocks);
        let e0 = r0.order[r0.chosen];
        let m0 = r0.cands[r0.chosen].match_blocks.unwrap_or(0);
        let c0 = self.cached_blocks(0, e0, prefix, prompt, prompt_blocks, bs, m0);
        runs.push(r0);
        let arrive = t + 2_000_000;
        let decode_ns = (output as f64 / decode_tps * NS) as i64;
        match &dep.pd {
            Some(dec) if dep.pools.len() > 1 => {
                let hit = m0 * bs;
                let disaggregate = prompt - hit >= dec.non_cached_tokens;
                pd = Some(PdEval {
                    hit_tokens: hit,
                    prompt_tokens: prompt,
                    disaggregate,
                });
                if disaggregate {
                    let r1 = self.run_profile(dep, 1, t + 1_500_000, prefix, prompt, prompt_blocks);
                    let e1 = r1.order[r1.chosen];
                    let m1 = r1.cands[r1.chosen].match_blocks.unwrap_or(0);
                    let m1 = self.cached_blocks(1, e1, prefix, prompt, prompt_blocks, bs, m1);
                    runs.push(r1);
                    let cost = PrefillCost::of(&dep.pools[1]);
                    let (first, _) = self.enqueue(
                        1,
                        e1,
                        arrive,
                        prompt,
                        m1 * bs,
                        cost,
                        output,
                        decode_ns,
                        true,
                    );
                    let kv_ready = first + 5_000_000 + (prompt as f64 / 2e6 * NS) as i64;
                    let done_ns = kv_ready + decode_ns;
                    remote = Some((kv_ready, done_ns));
                    self.attach_remote(0, e0, arrive, kv_ready, prompt, c0 * bs, output, done_ns);
                    self.pools[1].engines[e1].insert(prefix, prompt_blocks);
                }
            }
            _ => {}
        }
        // Not disaggregated: the request is served where the first profile sent it.
        let (first_token_ns, done_ns) = match remote {
            Some(r) => r,
            None => {
                let cost = PrefillCost::of(&dep.pools[0]);
                self.enqueue(
                    0,
                    e0,
                    arrive,
                    prompt,
                    c0 * bs,
                    cost,
                    output,
                    decode_ns,
                    false,
                )
            }
        };
        self.pools[0].engines[e0].insert(prefix, prompt_blocks);

        Request {
            dep: self.index,
            request_id: rid,
            arrival_ns: t,
            prompt_tokens: prompt,
            runs,
            pd,
            done_ns,
            first_token_ns,
            output_tokens: output,
            replica: self.replica,
            session: 0,
            turn: 0,
            think_ns: None,
        }
    }

    /// Blocks of the prompt the engine's cache really holds: `seen` (what
    /// the candidate showed) unless the pool has its own index.
    #[allow(clippy::too_many_arguments)]
    fn cached_blocks(
        &self,
        pool: usize,
        e: usize,
        prefix: &Prefix,
        prompt: i64,
        prompt_blocks: i64,
        bs: i64,
        seen: i64,
    ) -> i64 {
        let eng = &self.pools[pool].engines[e];
        match eng.index {
            Some(_) => eng.cache.matched(prefix, prompt, bs, prompt_blocks),
            None => seen,
        }
    }

    /// Queues a prefill on an engine (FIFO, each prefill costing
    /// [`PrefillCost::prefill_ns`] with the requests decoding when it
    /// starts); returns (first token, done).
    #[allow(clippy::too_many_arguments)]
    fn enqueue(
        &mut self,
        pool: usize,
        e: usize,
        arrive: i64,
        prompt: i64,
        cached: i64,
        cost: PrefillCost,
        output: i64,
        decode_ns: i64,
        prefill_only: bool,
    ) -> (i64, i64) {
        let collect = self.collect_jobs;
        let replica = self.replica;
        let eng = &mut self.pools[pool].engines[e];
        let uncached = (prompt - cached).max(1);
        let start = arrive.max(eng.busy_until_ns);
        let first = start + cost.prefill_ns(uncached, eng.decoding(start));
        eng.busy_until_ns = first;
        let done = if prefill_only {
            first + 1_000_000
        } else {
            first + decode_ns
        };
        eng.inflight.push(InFlight {
            release_ns: first,
            tokens: uncached,
            done_ns: done,
            replica,
        });
        if collect {
            eng.jobs.push(Job {
                arrive_ns: arrive,
                start_ns: start,
                first_token_ns: first,
                done_ns: done,
                prompt_tokens: prompt,
                cached_tokens: prompt - uncached,
                computed_tokens: uncached,
                output_tokens: if prefill_only { 1 } else { output },
            });
        }
        (first, done)
    }

    /// A decode engine receiving the KV cache from a prefill engine.
    #[allow(clippy::too_many_arguments)]
    fn attach_remote(
        &mut self,
        pool: usize,
        e: usize,
        arrive: i64,
        kv_ready: i64,
        prompt: i64,
        cached: i64,
        output: i64,
        done: i64,
    ) {
        let collect = self.collect_jobs;
        let replica = self.replica;
        let eng = &mut self.pools[pool].engines[e];
        let uncached = (prompt - cached).max(1);
        eng.inflight.push(InFlight {
            release_ns: kv_ready,
            tokens: uncached,
            done_ns: done,
            replica,
        });
        if collect {
            eng.jobs.push(Job {
                arrive_ns: arrive,
                start_ns: kv_ready,
                first_token_ns: kv_ready,
                done_ns: done,
                prompt_tokens: prompt,
                cached_tokens: prompt - uncached,
                computed_tokens: 0,
                output_tokens: output,
            });
        }
    }

    fn run_profile(
        &mut self,
        dep: &Deployment,
        pool_idx: usize,
        t: i64,
        prefix: &Prefix,
        prompt_tokens: i64,
        prompt_blocks: i64,
    ) -> ProfileRun {
        let spec: &Pool = &dep.pools[pool_idx];
        let bs = dep.block_size.max(1);
        let n = self.pools[pool_idx].engines.len();
        let mut order: Vec<usize> = (0..n).collect();
        self.routing.shuffle(&mut order);
        let uses_predictor = spec
            .filters
            .iter()
            .any(|f| f.config.ttft_source == TtftSource::LatencyPredictor);
        let mut cands = Vec::with_capacity(n);
        let mut true_in_flight = Vec::with_capacity(n);
        let mut snapshots = Vec::with_capacity(n);
        for &e in &order {
            let id = self.pools[pool_idx].endpoints[e].ns_name();
            let eng = &mut self.pools[pool_idx].engines[e];
            eng.prune(t);
            let tokens = eng.in_flight_tokens(t);
            // What this replica counts: all of it with one replica.
            let seen = if dep.epp_replicas > 1 {
                eng.in_flight_tokens_of(t, self.replica)
            } else {
                tokens
            };
            let requests = eng.in_flight_requests(t);
            let matched = eng.index.as_ref().unwrap_or(&eng.cache).matched(
                prefix,
                prompt_tokens,
                bs,
                prompt_blocks,
            );
            let waiting = eng.waiting(t);
            let cache_used = eng.cache.used_blocks as f64 / eng.cache.cap_blocks.max(1) as f64;
            let mut c = Candidate::new(id)
                .with_match(matched, prompt_blocks, bs)
                .with_in_flight_requests(requests);
            if !self.routing.chance(dep.missing_signal_prob) {
                c = c.with_in_flight_tokens(seen);
            }
            if uses_predictor && !self.routing.chance(dep.missing_prediction_prob) {
                let uncached = (prompt_blocks - matched) * bs;
                let base = (seen + uncached) as f64 / spec.true_peak_tps.max(1.0) * 1000.0 + 35.0;
                let noisy = base * self.routing.lognormal_mean(1.0, 0.12);
                c = c.with_predicted_ttft_ms((noisy * 1000.0).round() / 1000.0);
            }
            cands.push(c);
            true_in_flight.push(tokens);
            let kv = (0.05 + 0.9 * cache_used.min(1.0) * 0.6 + 0.01 * requests as f64).min(1.0);
            snapshots.push(Snapshot {
                running: requests - waiting,
                waiting,
                kv_usage: (kv * 10_000.0).round() / 10_000.0,
                scraped_ns: t - self.routing.below(50_000_000) as i64,
            });
        }

        // Filters in order, each over the previous survivors.
        let mut input: Vec<usize> = (0..n).collect();
        let mut filters = Vec::new();
        for (fi, f) in spec.filters.iter().enumerate() {
            let sub: Vec<Candidate> = input.iter().map(|&i| cands[i].clone()).collect();
            let draw = self.routing.f64();
            let decision = decide(&f.config, &sub, draw);
            let kept: Vec<usize> = decision.kept.iter().map(|&k| input[k]).collect();
            filters.push(FilterRun {
                instance: fi,
                input: input.clone(),
                decision,
                kept: kept.clone(),
            });
            input = kept;
            if input.is_empty() {
                break;
            }
        }

        // Token-load scorer over the survivors, then max-score picker.
        let mut scored = Vec::with_capacity(input.len());
        for &i in &input {
            let c = &cands[i];
            let uncached = c.uncached_tokens().unwrap_or(0);
            let load = (c.in_flight_tokens.unwrap_or(0) + uncached) as f64;
            let score = if load <= 0.0 {
                1.0
            } else {
                1.0 - load.min(QUEUE_THRESHOLD_TOKENS) / QUEUE_THRESHOLD_TOKENS
            };
            scored.push((i, load.min(QUEUE_THRESHOLD_TOKENS), score));
        }
        // The picker's weighted sum: each scorer's score clamped to [0, 1]
        // times its weight (token-load 1, prefix scorer as configured).
        let weighted: Vec<f64> = scored
            .iter()
            .map(|&(i, _, score)| {
                let mut w = score.clamp(0.0, 1.0);
                if spec.prefix_scorer_weight > 0.0 {
                    w += cands[i].prefix_score().clamp(0.0, 1.0) * spec.prefix_scorer_weight;
                }
                w
            })
            .collect();
        let best = weighted.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ties: Vec<usize> = scored
            .iter()
            .zip(&weighted)
            .filter(|(_, w)| **w == best)
            .map(|(s, _)| s.0)
            .collect();
        let chosen = if ties.is_empty() {
            0
        } else {
            ties[self.routing.index(ties.len())]
        };
        ProfileRun {
            pool: pool_idx,
            order,
            cands,
            true_in_flight,
            snapshots,
            filters,
            scored,
            weighted,
            chosen,
        }
    }
}

/// Arrival of a trace's `i`-th request, or never past its end.
fn trace_arrival(trace: &[TraceRequest], i: usize, start_ns: i64) -> i64 {
    match trace.get(i) {
        Some(r) => start_ns + (r.timestamp_ms * 1e6).round() as i64,
        None => i64::MAX,
    }
}
