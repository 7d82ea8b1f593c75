//! Assembly: events to decisions, one per (request id, profile run, filter
//! instance).
//!
//! See [`Assembler`] for the rules.

mod naming;
mod request;

pub use naming::{DeploymentNaming, PoolNames, endpoint_pod, pod_deployment, strip_rank};
use request::{Buffered, FirstBody, Req};

use std::collections::VecDeque;

use crate::arena::Arena;
use crate::decision::{Completion, Decision};
use crate::event::{ArenaEvent, Event, LineMeta, Scope};
use crate::name::{Interner, Name};

/// Request ids are hashed with FxHash (fast; the keys are not adversarial).
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// An open request's key (its id, and its kubectl pod): made once when the
/// request opens, shared by the open requests' map, their queue and the
/// closed requests that wait for their first response chunk.
type ReqKey = std::sync::Arc<[u8]>;

/// Where the assembler hands its decisions, each in the box it was
/// assembled in (moved on as a pointer, not copied out and boxed again).
pub(crate) type Emit<'a> = dyn FnMut(Box<Decision>) + 'a;

/// `s.split_once('/')`, by a plain byte scan (the ids are short: the
/// general character searcher costs more than the scan).
fn split_slash(s: &str) -> Option<(&str, &str)> {
    let i = s.bytes().position(|b| b == b'/')?;
    Some((&s[..i], &s[i + 1..]))
}

/// Limits of the assembler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AssemblerLimits {
    /// Open requests at most; the least recently active is evicted beyond.
    pub max_open_requests: usize,
    /// Log-time seconds a request may stay idle before it is evicted.
    pub max_open_age_secs: f64,
    /// Emit a `not_applicable` decision for an affinity filter instance whose
    /// completion line has no filter line before it.
    pub infer_not_applicable: bool,
    /// Buffered events per request at most; a request that reaches it (a
    /// build that logs no `x-request-id`, say) is closed as evicted.
    pub max_events_per_request: usize,
    /// Bytes the open requests may hold together (their buffered events
    /// and strings, endpoint dumps included); beyond, the least recently
    /// active are evicted (counted in
    /// [`Assembler::requests_evicted_for_memory`]). One request may hold at
    /// most an eighth of it: past that it is closed as evicted.
    pub max_open_bytes: usize,
}

/// Default of [`AssemblerLimits::max_open_bytes`]: 64 MiB.
pub const DEFAULT_MAX_OPEN_BYTES: usize = 64 << 20;

/// Log-time seconds a handled request's decisions wait for its first
/// response chunk (for their observed TTFT) before they are emitted
/// without it. At most [`AssemblerLimits::max_open_requests`] requests
/// wait; beyond, the oldest is emitted.
pub(crate) const RESPONSE_WAIT_SECS: f64 = 900.0;

/// Default of [`AssemblerLimits::max_events_per_request`].
pub const DEFAULT_MAX_EVENTS_PER_REQUEST: usize = 100_000;

/// The context of one line as the assembler reads it, borrowed.
pub(crate) struct Ctx<'a> {
    /// The line's time, else its kubelet time.
    pub ts: Option<f64>,
    /// `x-request-id`, as written (converted to a string, lossily if it
    /// is not UTF-8, once per request).
    pub request_id: Option<&'a [u8]>,
    /// The kubectl prefix's pod.
    pub pod: Option<&'a [u8]>,
    /// The model keys.
    pub model: Option<&'a [u8]>,
}

struct QEntry {
    serial: u64,
    enq_ts: f64,
    key: ReqKey,
}

/// A closed request's decisions, held until its first response body
/// chunk is read (for their observed TTFT), in the order they closed.
struct Waiting {
    /// Position in the order of closing.
    seq: u64,
    key: ReqKey,
    arrival: Option<f64>,
    /// Log time when it closed (the wait is measured from here).
    since: f64,
    /// No more waiting: the first chunk was read, or will not be.
    settled: bool,
    first_body: Option<FirstBody>,
    // Boxed as assembled, and handed on in their boxes.
    #[allow(clippy::vec_box)]
    decisions: Vec<Box<Decision>>,
}

/// Assembles events into decisions. Feed it every event of one input in
/// order with [`Assembler::feed`]; call [`Assembler::finish`] at the end.
///
/// # Rules
///
/// * Lines are grouped by `x-request-id` (and the kubectl pod, when several
///   pods share one file). Other requests interleave freely and their `ts`
///   may regress. Within a request, the buffered events are replayed in `ts`
///   order when the request closes (a stable sort: equal or missing times
///   keep file order): one request's lines come from one goroutine, whose
///   clock only grows, so this is program order.
/// * `EPP received request` starts a new request: an open request under the
///   same id is closed first ([`Completion::Superseded`]), so retries and
///   reused ids give separate decisions.
/// * A profile run starts at `Running scheduler profile` (`-v=3`), or, in
///   `-v=4`-only logs, at `Before running filter plugins` or the PD decider's
///   `Computed hit percentage for prefix cache` line once the current run has
///   filter activity, or when a filter instance repeats within a run.
/// * A `PrefixCacheAffinityFilter: ` outcome line (with any preceding P2251
///   per-endpoint lines) is attached to the next `Completed running filter
///   plugin successfully` (or `Filter eliminated all endpoints`) of the same
///   request: its `plugin` gives the instance `name/type` and its endpoints
///   the survivors. `Running filter plugin` names the instance early, for
///   logs whose completion line is missing.
/// * Scorer lines (`Calculated score`, `TokenLoadScorer scoring`) and the
///   picker result are attached to every decision of the current profile run.
/// * Decisions are emitted when the request closes: at `Request handled`,
///   at a new `EPP received request` for the id, at eviction, or at the end of
///   the input.
/// * Open requests are bounded: at most
///   [`ParseOptions::max_open_requests`](crate::ParseOptions::max_open_requests)
///   (the least recently active is evicted first), and none idle longer than
///   [`ParseOptions::max_open_age_secs`](crate::ParseOptions::max_open_age_secs)
///   of log time (measured against the latest `ts` seen, so a regressing `ts`
///   never evicts early). Evicted requests' decisions are emitted with
///   [`Completion::Evicted`] and counted.
pub struct Assembler {
    file: Name,
    /// The names the input's decisions share (endpoints, plugins,
    /// profiles, deployments, pods).
    names: Interner,
    naming: DeploymentNaming,
    pools: PoolNames,
    limits: AssemblerLimits,
    reqs: FxMap<ReqKey, Req>,
    queue: VecDeque<QEntry>,
    next_serial: u64,
    max_ts: f64,
    /// The peak of each EPP pod's last startup line (key: the pod, empty
    /// without a kubectl prefix).
    startup_peak: FxMap<Vec<u8>, f64>,
    scratch: Vec<u8>,
    /// The strings of an event given to [`Assembler::feed`].
    scratch_text: Arena,
    requests_evicted: u64,
    /// Heap bytes of the open requests (the sum of their `bytes`).
    open_bytes: usize,
    requests_evicted_for_memory: u64,
    /// Closed requests' decisions in closing order, some waiting for their
    /// first response chunk; emitted from the front.
    waiting: VecDeque<Waiting>,
    /// The requests still waiting: key -> their `seq`.
    waiting_keys: FxMap<ReqKey, u64>,
    next_wait_seq: u64,
}

/// Recounts a request's bytes after it buffered an event: whether it is
/// full (by events, `full`, or over `cap` bytes).
fn grown(open_bytes: &mut usize, r: &mut Req, full: bool, cap: usize) -> bool {
    let now = r.heap_bytes();
    *open_bytes = (*open_bytes + now).saturating_sub(r.bytes);
    r.bytes = now;
    full || now > cap
}

/// Removes an open request, uncounting its bytes.
fn take(reqs: &mut FxMap<ReqKey, Req>, open_bytes: &mut usize, key: &[u8]) -> Option<Req> {
    let r = reqs.remove(key)?;
    *open_bytes = open_bytes.saturating_sub(r.bytes);
    Some(r)
}

impl Assembler {
    /// An assembler for one input whose lines are located in `file`.
    pub fn new(
        file: impl Into<Name>,
        naming: DeploymentNaming,
        limits: AssemblerLimits,
    ) -> Assembler {
        Assembler {
            file: file.into(),
            names: Interner::default(),
            naming,
            pools: PoolNames::default(),
            limits,
            reqs: FxMap::default(),
            queue: VecDeque::new(),
            next_serial: 0,
            max_ts: f64::NEG_INFINITY,
            startup_peak: FxMap::default(),
            scratch: Vec::new(),
            scratch_text: Arena::default(),
            requests_evicted: 0,
            open_bytes: 0,
            requests_evicted_for_memory: 0,
            waiting: VecDeque::new(),
            waiting_keys: FxMap::default(),
            next_wait_seq: 0,
        }
    }

    /// Requests evicted so far.
    pub fn requests_evicted(&self) -> u64 {
        self.requests_evicted
    }

    /// Of [`Assembler::requests_evicted`], those evicted by the byte caps
    /// ([`AssemblerLimits::max_open_bytes`]).
    pub fn requests_evicted_for_memory(&self) -> u64 {
        self.requests_evicted_for_memory
    }

    /// Heap bytes the open requests hold (their events and strings).
    pub fn open_bytes(&self) -> usize {
        self.open_bytes
    }

    /// Requests currently open.
    pub fn open_requests(&self) -> usize {
        self.reqs.len()
    }

    /// The naming used for deployments.
    pub fn naming(&self) -> &DeploymentNaming {
        &self.naming
    }

    /// Whether `key` is the key [`Assembler::key_into`] makes of `id` and
    /// `pod`.
    fn key_is(key: &[u8], id: Option<&[u8]>, pod: Option<&[u8]>) -> bool {
        let id = id.unwrap_or_default();
        let Some(rest) = key.strip_prefix(id) else {
            return false;
        };
        match pod {
            Some(p) => rest.first() == Some(&0x1f) && rest[1..] == *p,
            None => rest.is_empty(),
        }
    }

    fn key_into(scratch: &mut Vec<u8>, ctx: &Ctx<'_>) {
        scratch.clear();
        if let Some(id) = ctx.request_id {
            scratch.extend_from_slice(id);
        }
        if let Some(p) = ctx.pod {
            scratch.push(0x1f);
            scratch.extend_from_slice(p);
        }
    }

    /// Feeds one event from line `line`. Decisions that close are passed to `emit`.
    pub fn feed(
        &mut self,
        line: u64,
        meta: &LineMeta,
        event: Event,
        emit: &mut dyn FnMut(Decision),
    ) {
        let ctx = Ctx {
            ts: meta.ts.or(meta.kubelet_ts),
            request_id: meta.request_id.as_deref().map(str::as_bytes),
            pod: meta.pod.as_deref().map(str::as_bytes),
            model: meta.model.as_deref().map(str::as_bytes),
        };
        let mut text = std::mem::take(&mut self.scratch_text);
        text.clear();
        let event = event.intern(&mut text);
        self.feed_ctx(line, &ctx, event, &text, &mut |d| emit(*d));
        self.scratch_text = text;
    }

    /// [`Assembler::feed`] with the line's context borrowed and the event's
    /// strings in `text` (the engine's path: no copy of the request id, pod or
    /// model per line, no allocation per string).
    pub(crate) fn feed_ctx(
        &mut self,
        line: u64,
        ctx: &Ctx<'_>,
        event: ArenaEvent,
        text: &Arena,
        emit: &mut Emit<'_>,
    ) {
        let peak = match &event {
            Event::PeakPrefillResolved {
                peak_prefill_throughput,
                source,
            } => {
                peak_prefill_throughput.filter(|_| source.is_none_or(|s| text.str(s) != "notUsed"))
            }
            Event::CalibrationSkipped {
                peak_prefill_throughput,
                ..
            } => *peak_prefill_throughput,
            _ => None,
        };
        if let Some(p) = peak.filter(|p| p.is_finite() && *p > 0.0) {
            self.startup_peak
                .insert(ctx.pod.unwrap_or_default().to_vec(), p);
        }
        if event.scope() == Scope::Pod {
            return;
        }
        let ts = ctx.ts;
        let mut advanced = false;
        if let Some(t) = ts
            && t > self.max_ts
        {
            self.max_ts = t;
            advanced = true;
        }
        let touch = ts.unwrap_or(self.max_ts);
        Self::key_into(&mut self.scratch, ctx);
        if matches!(event, Event::ReceivedRequest) {
            if let Some(old) = take(&mut self.reqs, &mut self.open_bytes, &self.scratch) {
                self.close(old, Completion::Superseded, emit);
            }
            // A reused id: the response chunks from here are the new
            // request's.
            if let Some(seq) = self.waiting_keys.remove(self.scratch.as_slice()) {
                self.settle(seq, None);
                self.pump(emit);
            }
        }
        if let Event::ResponseBody {
            bytes,
            end_of_stream,
        } = &event
            && !self.reqs.contains_key(self.scratch.as_slice())
        {
            // A chunk of a closed request: its first settles the wait. The
            // chunks of requests not waiting (started before the log, or
            // already settled) are read and left.
            if let Some(first) = FirstBody::of(ts, *bytes, *end_of_stream)
                && let Some(seq) = self.waiting_keys.remove(self.scratch.as_slice())
            {
                self.settle(seq, Some(first));
                self.pump(emit);
            }
            if advanced {
                self.evict_aged(emit);
            }
            return;
        }
        let handled = matches!(event, Event::RequestHandled { .. });
        let cap = self.limits.max_events_per_request.max(1);
        let ev = Buffered { ts, line, event };
        // One lookup for an open request; a new one is made and inserted.
        let req_cap = self.limits.max_open_bytes / 8;
        let full = if let Some(r) = self.reqs.get_mut(self.scratch.as_slice()) {
            let full = r.push(ev, text, touch, ctx, cap, &mut self.names);
            grown(&mut self.open_bytes, r, full, req_cap)
        } else {
            if handled {
                // Nothing open: a request that started before the log.
                return;
            }
            let serial = self.next_serial;
            self.next_serial += 1;
            let key = ReqKey::from(self.scratch.as_slice());
            self.queue.push_back(QEntry {
                serial,
                enq_ts: touch,
                key: key.clone(),
            });
            self.reqs.insert(
                key.clone(),
                Req::new(serial, key, ctx, line, touch, &mut self.names),
            );
            if self.reqs.len() > self.limits.max_open_requests {
                self.evict_oldest(emit);
            }
            let Some(r) = self.reqs.get_mut(self.scratch.as_slice()) else {
                return;
            };
            let full = r.push(ev, text, touch, ctx, cap, &mut self.names);
            grown(&mut self.open_bytes, r, full, req_cap)
        };
        if handled && let Some(r) = take(&mut self.reqs, &mut self.open_bytes, &self.scratch) {
            self.close(r, Completion::Handled, emit);
        } else if full && let Some(r) = take(&mut self.reqs, &mut self.open_bytes, &self.scratch) {
            self.requests_evicted += 1;
            if r.bytes > req_cap {
                self.requests_evicted_for_memory += 1;
            }
            self.close(r, Completion::Evicted, emit);
        }
        // Over the byte budget: the least recently active go first (not
        // the one being fed).
        while self.open_bytes > self.limits.max_open_bytes && self.reqs.len() > 1 {
            let before = self.requests_evicted;
            self.evict_oldest(emit);
            if self.requests_evicted == before {
                break;
            }
            self.requests_evicted_for_memory += 1;
        }
        if advanced {
            self.evict_aged(emit);
        }
        if self.queue.len() > 2 * self.reqs.len() + 1024 {
            let reqs = &self.reqs;
            self.queue
                .retain(|e| reqs.get(&*e.key).is_some_and(|r| r.serial == e.serial));
        }
    }

    /// Marks the waiting entry `seq` settled, with its first chunk.
    fn settle(&mut self, seq: u64, first: Option<FirstBody>) {
        let front = self.waiting.front().map_or(0, |w| w.seq);
        let at = seq.wrapping_sub(front) as usize;
        if let Some(w) = self.waiting.get_mut(at).filter(|w| w.seq == seq) {
            w.settled = true;
            if w.first_body.is_none() {
                w.first_body = first;
            }
        }
    }

    /// Emits the waiting entries from the front while they are settled,
    /// have waited longer than [`RESPONSE_WAIT_SECS`] of log time, or are
    /// more than the open-request cap.
    fn pump(&mut self, emit: &mut Emit<'_>) {
        let threshold = self.max_ts - RESPONSE_WAIT_SECS;
        while let Some(front) = self.waiting.front() {
            let go = front.settled
                || front.since < threshold
                || self.waiting.len() > self.limits.max_open_requests.max(1);
            if !go {
                break;
            }
            let Some(w) = self.waiting.pop_front() else {
                break;
            };
            if self.waiting_keys.get(&*w.key) == Some(&w.seq) {
                self.waiting_keys.remove(&*w.key);
            }
            Self::emit_waiting(w, emit);
        }
    }

    fn emit_waiting(w: Waiting, emit: &mut Emit<'_>) {
        let ttft = w.first_body.and_then(|f| f.ttft_ms(w.arrival));
        for mut d in w.decisions {
            d.observed_ttft_ms = ttft;
            d.arrival_ts = w.arrival;
            emit(d);
        }
    }

    fn evict_aged(&mut self, emit: &mut Emit<'_>) {
        self.pump(emit);
        let threshold = self.max_ts - self.limits.max_open_age_secs;
        while let Some(front) = self.queue.front() {
            if front.enq_ts >= threshold || front.enq_ts.is_nan() {
                break;
            }
            let Some(e) = self.queue.pop_front() else {
                break;
            };
            let live = self
                .reqs
                .get(&*e.key)
                .filter(|r| r.serial == e.serial)
                .map(|r| r.last_ts);
            match live {
                Some(last) if last < threshold => {
                    if let Some(r) = take(&mut self.reqs, &mut self.open_bytes, &e.key) {
                        self.requests_evicted += 1;
                        self.close(r, Completion::Evicted, emit);
                    }
                }
                Some(last) => self.queue.push_back(QEntry { enq_ts: last, ..e }),
                None => {}
            }
        }
    }

    fn evict_oldest(&mut self, emit: &mut Emit<'_>) {
        let mut budget = self.queue.len() + 1;
        while budget > 0
            && let Some(e) = self.queue.pop_front()
        {
            budget -= 1;
            let live = self.reqs.get(&*e.key).is_some_and(|r| r.serial == e.serial);
            if live && *e.key != *self.scratch {
                if let Some(r) = take(&mut self.reqs, &mut self.open_bytes, &e.key) {
                    self.requests_evicted += 1;
                    self.close(r, Completion::Evicted, emit);
                }
                return;
            }
            if live {
                // The request being fed: keep it.
                self.queue.push_back(e);
                if self.reqs.len() <= 1 {
                    return;
                }
            }
        }
    }

    fn close(&mut self, mut r: Req, how: Completion, emit: &mut Emit<'_>) {
        // Program order: one request's lines come from one goroutine, whose
        // `ts` only grows; sort by it (stable, so equal or missing times keep
        // file order) to undo interleaving artefacts in the file.
        let events = std::mem::take(&mut r.events);
        let text = std::mem::take(&mut r.text);
        // The sort key of each event: its time, or the last time before it.
        let keys = || {
            let mut key = f64::NEG_INFINITY;
            events.iter().map(move |e| {
                if let Some(t) = e.ts.filter(|t| t.is_finite()) {
                    key = t;
                }
                key
            })
        };
        let mut prev = f64::NEG_INFINITY;
        let sorted = keys().all(|k| {
            let ok = prev <= k;
            prev = k;
            ok
        });
        let infer = self.limits.infer_not_applicable;
        if sorted {
            for e in events {
                r.apply(e, &text, &mut self.names, &self.file, infer);
            }
        } else {
            let mut order: Vec<(f64, u32)> =
                keys().enumerate().map(|(i, k)| (k, i as u32)).collect();
            order.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut slots: Vec<Option<Buffered>> = events.into_iter().map(Some).collect();
            for (_, i) in order {
                if let Some(e) = slots[i as usize].take() {
                    r.apply(e, &text, &mut self.names, &self.file, infer);
                }
            }
        }
        r.end_run(&text, &mut self.names);
        drop(text);
        // The pool, from every candidate of the request's decisions (a P/D
        // request connects its prefill and decode endpoints): needed only when
        // no EPP pod names the deployment.
        let pool: Option<&str> = match (&r.pod, &self.naming.explicit) {
            (None, None) => self.pools.name_of(
                r.done
                    .iter()
                    .flat_map(|d| d.candidates.iter().map(|c| c.endpoint.as_str())),
            ),
            _ => None,
        };
        // The precise producer's match of the endpoint the request was
        // handled by: `scores` is keyed by address, as `Request handled` is.
        // Only when every decision of the request picked that one endpoint
        // (a P/D request's prefill endpoint is another address, not named).
        if let (Some(scores), Some(handled)) = (&r.precise_scores, &r.handled_endpoint) {
            let mut picked = r.done.iter().filter_map(|d| d.chosen.as_deref());
            let first_picked = picked.next();
            if picked.all(|c| Some(c) == first_picked) {
                let address = handled.split(',').next().unwrap_or_default().trim();
                r.producers.precise_handled_match_blocks =
                    crate::fields::member_count(scores.as_bytes(), address);
            }
        }
        // The request's key, for the chunks of its response: the one it was
        // opened under, made again from its id and pod as converted to
        // strings when either was not UTF-8.
        let id = r.request_id.as_deref().map(str::as_bytes);
        let pod = r.pod.as_deref().map(str::as_bytes);
        let key = if Self::key_is(&r.key, id, pod) {
            r.key.clone()
        } else {
            let mut key = Vec::new();
            Self::key_into(
                &mut key,
                &Ctx {
                    ts: None,
                    request_id: id,
                    pod,
                    model: None,
                },
            );
            ReqKey::from(key)
        };
        // Handed on in the request's own list.
        let mut out = std::mem::take(&mut r.done);
        let n = out.len();
        for (i, d) in out.iter_mut().enumerate() {
            // The request's strings are cloned into every decision but the
            // last (usually the only one), which takes them.
            let last = i + 1 == n;
            if d.model.is_none() {
                if last {
                    d.model = r.model.take();
                } else {
                    d.model.clone_from(&r.model);
                }
            }
            if let Some(profile) = r.profiles.inferred(d.profile_run) {
                d.profile = Some(self.names.intern(profile));
                d.profile_inferred = true;
            }
            d.prompt_tokens = r.prompt_tokens;
            d.hit_prefix_tokens = r.hit_prefix_tokens;
            d.producers = r.producers;
            if d.source.line == 0 {
                d.source.line = r.first_line;
            }
            let ns = d
                .candidates
                .iter()
                .find_map(|c| split_slash(&c.endpoint).map(|(n, _)| n));
            d.deployment = self.names.intern(self.naming.resolve_str(
                r.pod.as_deref(),
                pool,
                ns,
                d.model.as_deref(),
            ));
            if last {
                d.request_id = r.request_id.take();
                d.epp_pod = r.pod.take();
                if d.chosen.is_none() {
                    d.chosen = r.handled_endpoint.take();
                }
            } else {
                d.request_id.clone_from(&r.request_id);
                d.epp_pod.clone_from(&r.pod);
                if d.chosen.is_none() {
                    d.chosen.clone_from(&r.handled_endpoint);
                }
            }
            d.completion = how;
            d.startup_peak = self
                .startup_peak
                .get(d.epp_pod.as_deref().unwrap_or_default().as_bytes())
                .copied();
        }
        // A handled request whose arrival is known waits for its first
        // response chunk; the others are settled. Either way they leave in
        // closing order.
        let wait = how == Completion::Handled
            && r.arrival_ts.is_some()
            && r.first_body.is_none()
            && !out.is_empty();
        if !wait && self.waiting.is_empty() {
            let ttft = r.first_body.and_then(|f| f.ttft_ms(r.arrival_ts));
            for mut d in out {
                d.observed_ttft_ms = ttft;
                d.arrival_ts = r.arrival_ts;
                emit(d);
            }
            return;
        }
        let seq = self.next_wait_seq;
        self.next_wait_seq += 1;
        if wait {
            self.waiting_keys.insert(key.clone(), seq);
        }
        self.waiting.push_back(Waiting {
            seq,
            key,
            arrival: r.arrival_ts,
            since: if self.max_ts.is_finite() {
                self.max_ts
            } else {
                r.last_ts
            },
            settled: !wait,
            first_body: r.first_body,
            decisions: out,
        });
        self.pump(emit);
    }

    /// Closes every open request ([`Completion::EndOfInput`]), in the order
    /// they were opened.
    pub fn finish(&mut self, emit: &mut dyn FnMut(Decision)) {
        self.finish_boxed(&mut |d| emit(*d));
    }

    /// [`Assembler::finish`], each decision handed over in its box (the
    /// engine's path: boxed where it was assembled, never moved out).
    pub(crate) fn finish_boxed(&mut self, emit: &mut Emit<'_>) {
        let mut all: Vec<Req> = self.reqs.drain().map(|(_, r)| r).collect();
        self.open_bytes = 0;
        all.sort_by_key(|r| r.serial);
        self.queue.clear();
        for r in all {
            self.close(r, Completion::EndOfInput, emit);
        }
        self.waiting_keys.clear();
        while let Some(w) = self.waiting.pop_front() {
            Self::emit_waiting(w, emit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::FilterMsg;
    use crate::event::FilterLine;

    fn meta(id: &str, ts: f64) -> LineMeta {
        LineMeta {
            ts: Some(ts),
            request_id: Some(id.to_string()),
            ..LineMeta::default()
        }
    }

    fn narrowed() -> Event {
        Event::Filter(Box::new(FilterLine {
            msg: FilterMsg::NarrowedToSticky,
            ..FilterLine::default()
        }))
    }

    fn completed() -> Event {
        Event::FilterCompleted {
            plugin: "f/prefix-cache-affinity-filter".to_string(),
            survivors: Some(vec!["ns/a".to_string()]),
        }
    }

    fn chunk(bytes: f64, end_of_stream: bool) -> Event {
        Event::ResponseBody {
            bytes: Some(bytes),
            end_of_stream: Some(end_of_stream),
        }
    }

    /// Feeds a request from its arrival at `t` to `Request handled`.
    fn handled(a: &mut Assembler, id: &str, t: f64, emit: &mut dyn FnMut(Decision)) {
        a.feed(1, &meta(id, t), Event::ReceivedRequest, emit);
        a.feed(2, &meta(id, t + 0.001), narrowed(), emit);
        a.feed(3, &meta(id, t + 0.002), completed(), emit);
        let h = Event::RequestHandled { endpoint: None };
        a.feed(4, &meta(id, t + 0.003), h, emit);
    }

    /// Handled requests wait for their first response chunk; they leave in
    /// the order they closed, each with its observed TTFT, or without one
    /// when the response was not streamed, the id was reused, or the chunk
    /// came too late.
    #[test]
    fn decisions_wait_for_the_first_response_chunk() {
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(100, 60.0));
        let got: std::cell::RefCell<Vec<(String, Option<f64>)>> = Default::default();
        let mut emit = |d: Decision| {
            let id = d.request_id.unwrap_or_default().to_string();
            got.borrow_mut().push((id, d.observed_ttft_ms));
        };
        handled(&mut a, "a", 100.0, &mut emit);
        handled(&mut a, "b", 100.25, &mut emit);
        a.feed(5, &meta("b", 100.5), chunk(100.0, false), &mut emit);
        // An empty chunk is not the first token.
        a.feed(6, &meta("a", 100.75), chunk(0.0, false), &mut emit);
        // Nothing leaves before a's first chunk: b waits behind it.
        assert!(got.borrow().is_empty());
        a.feed(7, &meta("a", 101.0), chunk(50.0, false), &mut emit);
        assert_eq!(got.borrow().len(), 2);
        // A later chunk changes nothing.
        a.feed(8, &meta("a", 102.0), chunk(50.0, true), &mut emit);
        handled(&mut a, "c", 103.0, &mut emit);
        a.feed(9, &meta("c", 104.0), chunk(900.0, true), &mut emit);
        handled(&mut a, "d", 105.0, &mut emit);
        handled(&mut a, "d", 106.0, &mut emit);
        a.feed(10, &meta("d", 106.5), chunk(10.0, false), &mut emit);
        handled(&mut a, "e", 110.0, &mut emit);
        // 900 s of log time later, e leaves without.
        handled(&mut a, "f", 1011.0, &mut emit);
        assert_eq!(got.borrow().len(), 6);
        a.finish(&mut emit);
        let ms = |s: f64| Some(s * 1000.0);
        assert_eq!(
            got.into_inner(),
            vec![
                ("a".to_string(), ms(101.0 - 100.0)),
                ("b".to_string(), ms(100.5 - 100.25)),
                ("c".to_string(), None),
                ("d".to_string(), None),
                ("d".to_string(), ms(0.5)),
                ("e".to_string(), None),
                ("f".to_string(), None),
            ]
        );
    }

    fn limits(max_open_requests: usize, max_open_age_secs: f64) -> AssemblerLimits {
        AssemblerLimits {
            max_open_requests,
            max_open_age_secs,
            infer_not_applicable: true,
            max_events_per_request: DEFAULT_MAX_EVENTS_PER_REQUEST,
            max_open_bytes: DEFAULT_MAX_OPEN_BYTES,
        }
    }

    #[test]
    fn events_per_request_are_bounded() {
        let mut l = limits(10, 1e9);
        l.max_events_per_request = 4;
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), l);
        let mut out = Vec::new();
        let mut emit = |d: Decision| out.push(d.completion);
        for i in 0..10 {
            a.feed(i, &meta("", 1.0), narrowed(), &mut emit);
        }
        a.finish(&mut emit);
        assert_eq!(a.requests_evicted(), 2);
        assert_eq!(out.len(), 10);
        assert_eq!(out.iter().filter(|c| **c == Completion::Evicted).count(), 8);
    }

    #[test]
    fn cap_evicts_least_recently_active() {
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(2, 1e9));
        let mut out = Vec::new();
        let mut emit = |d: Decision| out.push(d);
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            a.feed(i as u64 + 1, &meta(id, 1.0), narrowed(), &mut emit);
            a.feed(i as u64 + 1, &meta(id, 1.0), completed(), &mut emit);
        }
        assert_eq!(a.open_requests(), 2);
        assert_eq!(a.requests_evicted(), 1);
        a.finish(&mut emit);
        let got: Vec<_> = out
            .iter()
            .map(|d| (d.request_id.clone().unwrap().to_string(), d.completion))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".to_string(), Completion::Evicted),
                ("b".to_string(), Completion::EndOfInput),
                ("c".to_string(), Completion::EndOfInput),
            ]
        );
    }

    #[test]
    fn age_limit_in_log_time_tolerates_regressing_ts() {
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(100, 10.0));
        let out = std::cell::RefCell::new(Vec::new());
        let mut emit = |d: Decision| out.borrow_mut().push(d.request_id.unwrap().to_string());
        a.feed(1, &meta("old", 100.0), narrowed(), &mut emit);
        a.feed(2, &meta("busy", 100.0), narrowed(), &mut emit);
        // A regressing ts does not evict anything.
        a.feed(3, &meta("x", 50.0), narrowed(), &mut emit);
        assert!(out.borrow().is_empty());
        a.feed(4, &meta("busy", 109.0), completed(), &mut emit);
        a.feed(5, &meta("y", 111.0), narrowed(), &mut emit);
        // `old` and `x` idle for more than 10 s of log time; `busy` was active at 109.
        assert_eq!(*out.borrow(), ["old", "x"]);
        assert_eq!(a.requests_evicted(), 2);
        a.finish(&mut emit);
        assert_eq!(*out.borrow(), ["old", "x", "busy", "y"]);
    }

    #[test]
    fn memory_stays_bounded_with_many_requests() {
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(50, 5.0));
        let mut n = 0u64;
        let mut emit = |_: Decision| n += 1;
        for i in 0..20_000u64 {
            let id = format!("r{i}");
            let t = i as f64 * 0.001;
            a.feed(i, &meta(&id, t), narrowed(), &mut emit);
            if i % 3 != 0 {
                a.feed(
                    i,
                    &meta(&id, t),
                    Event::RequestHandled { endpoint: None },
                    &mut emit,
                );
            }
            assert!(a.open_requests() <= 50);
            assert!(a.queue.len() <= 2 * 50 + 1024 + 1);
        }
        a.finish(&mut emit);
        assert_eq!(n, 20_000);
    }

    #[test]
    fn eliminated_all_after_completion_is_one_call() {
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(10, 1e9));
        let mut out = Vec::new();
        let mut emit = |d: Decision| out.push(d);
        let plugin = "f/prefix-cache-affinity-filter".to_string();
        a.feed(1, &meta("r", 1.0), narrowed(), &mut emit);
        a.feed(
            2,
            &meta("r", 1.1),
            Event::FilterCompleted {
                plugin: plugin.clone(),
                survivors: Some(Vec::new()),
            },
            &mut emit,
        );
        a.feed(
            3,
            &meta("r", 1.2),
            Event::FilterEliminatedAll {
                plugin: plugin.clone(),
            },
            &mut emit,
        );
        // Alone (no completion line), it completes the call.
        a.feed(4, &meta("s", 1.3), narrowed(), &mut emit);
        a.feed(
            5,
            &meta("s", 1.4),
            Event::FilterEliminatedAll { plugin },
            &mut emit,
        );
        a.finish(&mut emit);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|d| d.survivors.as_deref() == Some(&[][..])));
        assert!(out.iter().all(|d| d.filter.as_deref() == Some("f")));
    }

    /// Feeds one request's events (one second apart) and returns its
    /// decisions as (profile run, profile, message, inferred profile).
    fn runs(events: Vec<Event>) -> Vec<(u32, Option<String>, FilterMsg, bool)> {
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(10, 1e9));
        let mut out = Vec::new();
        let mut emit = |d: Decision| out.push(d);
        for (i, e) in events.into_iter().enumerate() {
            a.feed(i as u64 + 1, &meta("r", 1.0 + i as f64), e, &mut emit);
        }
        a.finish(&mut emit);
        out.into_iter()
            .map(|d| {
                (
                    d.profile_run,
                    d.profile.map(String::from),
                    d.message,
                    d.profile_inferred,
                )
            })
            .collect()
    }

    fn profile(p: &str) -> Event {
        Event::SchedulerProfile {
            profile: p.to_string(),
        }
    }

    fn decider() -> Event {
        Event::HitPercentage {
            prompt_tokens: Some(100.0),
            hit_prefix_tokens: Some(10.0),
        }
    }

    fn before(endpoints: &[&str]) -> Event {
        Event::BeforeFilters {
            endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
        }
    }

    fn s(p: &str) -> Option<String> {
        Some(p.to_string())
    }

    #[test]
    fn a_profile_line_after_a_run_starts_the_next_and_one_before_any_activity_does_not() {
        let got = runs(vec![
            profile("a"),
            // Nothing ran under `a`: `decode` names the same run.
            profile("decode"),
            narrowed(),
            completed(),
            profile("prefill"),
            before(&["ns/a", "ns/b"]),
            narrowed(),
            completed(),
        ]);
        let (sticky, n) = (FilterMsg::NarrowedToSticky, false);
        assert_eq!(
            got,
            [(0, s("decode"), sticky, n), (1, s("prefill"), sticky, n)]
        );
    }

    #[test]
    fn a_decider_line_ends_the_run_it_interrupts_and_names_the_profiles_at_v4() {
        // At -v=4 (no profile line): the decode run, the decider, the
        // prefill run.
        let sticky = FilterMsg::NarrowedToSticky;
        let got = runs(vec![
            narrowed(),
            completed(),
            decider(),
            narrowed(),
            completed(),
        ]);
        assert_eq!(
            got,
            [
                (0, s("decode"), sticky, true),
                (1, s("prefill"), sticky, true)
            ]
        );
        // A run that has its candidates but no filter line yet ends too.
        let got = runs(vec![before(&["ns/a"]), decider(), narrowed(), completed()]);
        assert_eq!(got, [(1, s("prefill"), sticky, true)]);
        // Before any run: the first run is the decider's, all prefill.
        let got = runs(vec![decider(), narrowed(), completed()]);
        assert_eq!(got, [(0, s("prefill"), sticky, true)]);
        // With profile lines, logged profiles win over the decider's order.
        let got = runs(vec![
            profile("decode"),
            narrowed(),
            completed(),
            decider(),
            profile("prefill"),
            narrowed(),
            completed(),
        ]);
        assert_eq!(
            got,
            [
                (0, s("decode"), sticky, false),
                (1, s("prefill"), sticky, false)
            ]
        );
    }

    #[test]
    fn an_outcome_line_after_its_completion_line_joins_the_decision_inferred_from_it() {
        let score = || Event::Score {
            plugin: "s/prefix-cache-scorer".to_string(),
            endpoint: "ns/a".to_string(),
            score: 1.0,
        };
        // Scorer lines between them do not separate them.
        let got = runs(vec![completed(), score(), narrowed()]);
        assert_eq!(got, [(0, None, FilterMsg::NarrowedToSticky, false)]);
        // A filter started in between does: its outcome line is its own.
        let got = runs(vec![
            completed(),
            Event::RunningFilter {
                plugin: "g/prefix-cache-affinity-filter".to_string(),
            },
            narrowed(),
            Event::FilterCompleted {
                plugin: "g/prefix-cache-affinity-filter".to_string(),
                survivors: None,
            },
        ]);
        assert_eq!(
            got,
            [
                (0, None, FilterMsg::None, false),
                (0, None, FilterMsg::NarrowedToSticky, false)
            ]
        );
    }

    #[test]
    fn a_per_endpoint_line_after_an_outcome_line_opens_the_next_decision() {
        let endpoint = || Event::EndpointTtft {
            endpoint: "ns/a".to_string(),
            throughput: Some(1000.0),
            in_flight_tokens: Some(500.0),
        };
        let mut a = Assembler::new("t", DeploymentNaming::fallback("d"), limits(10, 1e9));
        let mut out = Vec::new();
        let mut emit = |d: Decision| out.push(d);
        let events = [endpoint(), narrowed(), endpoint(), narrowed()];
        for (i, e) in events.into_iter().enumerate() {
            a.feed(i as u64 + 1, &meta("r", 1.0 + i as f64), e, &mut emit);
        }
        a.finish(&mut emit);
        assert_eq!(out.len(), 2);
        for (d, line) in out.iter().zip([2, 4]) {
            assert_eq!(
                (d.message, d.source.line),
                (FilterMsg::NarrowedToSticky, line)
            );
            assert_eq!(d.candidates.len(), 1);
            assert_eq!(d.candidates[0].ttft_ms, Some(500.0));
        }
    }

    #[test]
    fn naming_precedence() {
        let n = DeploymentNaming::fallback("fb");
        assert_eq!(
            n.resolve(
                Some("glm-5-2-epp-6f7c9d8b5-xk2lp"),
                Some("pool"),
                Some("ns"),
                None
            ),
            "glm-5-2"
        );
        assert_eq!(n.resolve(None, Some("pool"), Some("ns"), Some("m")), "pool");
        assert_eq!(n.resolve(None, None, Some("ns"), Some("m")), "ns");
        assert_eq!(n.resolve(None, None, None, Some("m")), "m");
        assert_eq!(n.resolve(None, None, None, None), "fb");
        let n = DeploymentNaming::explicit("x");
        assert_eq!(
            n.resolve(
                Some("glm-epp-7c9d8-xk2lp"),
                Some("p"),
                Some("ns"),
                Some("m")
            ),
            "x"
        );
    }

    #[test]
    fn endpoint_pods() {
        assert_eq!(
            endpoint_pod("llm/glm-decode-6d9f7c8b9-abcde-rank-0"),
            Some("glm-decode-6d9f7c8b9-abcde")
        );
        assert_eq!(endpoint_pod("vllm-0"), Some("vllm-0"));
        assert_eq!(endpoint_pod("10.0.0.5:8000"), None);
        assert_eq!(endpoint_pod("10.0.0.5"), None);
        assert_eq!(endpoint_pod("ns/"), None);
    }

    #[test]
    fn pools_are_connected_sets_of_endpoints() {
        let mut p = PoolNames::default();
        // Two pools in one namespace, never sharing an endpoint.
        let a = [
            "llm/qwen-decode-6d9f7c8b9-aaaaa",
            "llm/qwen-decode-6d9f7c8b9-bbbbb",
        ];
        let b = [
            "llm/glm-decode-5c8e6b7a8-ccccc",
            "llm/glm-decode-5c8e6b7a8-ddddd",
        ];
        assert_eq!(p.name(&a), Some("qwen"));
        assert_eq!(p.name(&b), Some("glm"));
        // A narrowed decision of either keeps its pool.
        assert_eq!(p.name(&a[1..]), Some("qwen"));
        // A pool of two owners keeps the name it got first, whichever
        // owner its later decisions mostly see.
        let mixed = [
            "llm/glm-decode-5c8e6b7a8-ccccc",
            "llm/glm-extra-7f7f7f7f7-eeeee",
            "llm/glm-extra-7f7f7f7f7-fffff",
        ];
        assert_eq!(p.name(&mixed), Some("glm"));
        assert_eq!(p.name(&mixed[1..]), Some("glm"));
        // A pod restarted under a new name joins its Deployment's pool.
        assert_eq!(p.name(&["llm/qwen-decode-6d9f7c8b9-nnnnn"]), Some("qwen"));
        // Two pools found connected later are one, named after the earliest.
        let prefill = ["llm/pd-prefill-6d9f7c8b9-ppppp"];
        let decode = ["llm/pd-decode-6d9f7c8b9-ddddd"];
        assert_eq!(p.name(&prefill), Some("pd"));
        assert_eq!(p.name(&decode), Some("pd"));
        let other = ["llm/other-6d9f7c8b9-ooooo"];
        assert_eq!(p.name(&other), Some("other"));
        assert_eq!(p.name(&[decode[0], other[0]]), Some("pd"));
        assert_eq!(p.name(&other), Some("pd"));
        // The same owner in another namespace is another pool.
        assert_eq!(
            p.name(&["prod/qwen-decode-6d9f7c8b9-zzzzz"]),
            Some("qwen.prod")
        );
        // Endpoints that name no pod: no pool.
        assert_eq!(p.name(&["10.0.0.5:8000", "10.0.0.6:8000"]), None);
    }
}
