//! Assembly: events to decisions, one per (request id, profile run, filter
//! instance).
//!
//! See [`Assembler`] for the rules.

use std::collections::VecDeque;

use crate::arena::{Arena, Spans};
use crate::decision::{CandidateObs, Completion, Decision, FilterMsg, SourceLoc};
use crate::event::{ArenaEvent, Event, FilterLine, LineMeta};
use crate::input::pod_owner;

/// Request ids are hashed with FxHash (fast; the keys are not adversarial).
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// How the deployment of a decision is named, most specific first.
///
/// A deployment is one EPP and its pool. It is named, in order:
///
/// 1. `NAME` of a `NAME=PATH` input ([`DeploymentNaming::explicit`]);
/// 2. the EPP pod from the kubectl `--prefix` ([`pod_deployment`]:
///    `glm-5-2-epp-6f7c9d8b5-xk2lp` gives `glm-5-2`);
/// 3. its endpoint pool ([`PoolNames`]), named after the pods it routes to
///    (`llm/glm-5-2-decode-6d9f7c8b9-abcde-rank-0` gives `glm-5-2`), which is
///    also the name the EPP pod and the vLLM logs of those pods give;
/// 4. the namespace of the candidates (endpoints that are not pod names);
/// 5. the model;
/// 6. [`DeploymentNaming::fallback`] (`default`).
///
/// A folder or file name never names a deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentNaming {
    /// `NAME=PATH`: always wins.
    pub explicit: Option<String>,
    /// The last resort.
    pub fallback: String,
}

impl DeploymentNaming {
    /// A naming with only a fallback name.
    pub fn fallback(name: impl Into<String>) -> DeploymentNaming {
        DeploymentNaming {
            fallback: name.into(),
            ..DeploymentNaming::default()
        }
    }

    /// A naming with an explicit name.
    pub fn explicit(name: impl Into<String>) -> DeploymentNaming {
        let name = name.into();
        DeploymentNaming {
            fallback: name.clone(),
            explicit: Some(name),
        }
    }

    /// The deployment for a line from `pod` (kubectl prefix), with the
    /// endpoint `pool`'s name, the candidates' `namespace` and the `model`
    /// as later choices (see [`DeploymentNaming`] for the order).
    pub fn resolve(
        &self,
        pod: Option<&str>,
        pool: Option<&str>,
        namespace: Option<&str>,
        model: Option<&str>,
    ) -> String {
        if let Some(e) = &self.explicit {
            return e.clone();
        }
        if let Some(p) = pod {
            return pod_deployment(p).to_string();
        }
        pool.or(namespace)
            .or(model)
            .unwrap_or(&self.fallback)
            .to_string()
    }

    /// The deployment of a trace span from its resource attributes (as the
    /// Collector's `k8sattributes` processor adds them), by the rules of
    /// [`DeploymentNaming::resolve`]: explicit `NAME=`; `k8s.deployment.name`
    /// (without a trailing `-epp`), else `k8s.pod.name` ([`pod_deployment`]);
    /// `service.name`; then the pool keys (`k8s.namespace.name`, else the
    /// model) and the fallback.
    pub fn resolve_traced(
        &self,
        deployment: Option<&str>,
        pod: Option<&str>,
        service: Option<&str>,
        pool: Option<&str>,
    ) -> String {
        if self.explicit.is_none()
            && let Some(d) = deployment
        {
            return d
                .strip_suffix("-epp")
                .filter(|o| !o.is_empty())
                .unwrap_or(d)
                .to_string();
        }
        if self.explicit.is_none()
            && pod.is_none()
            && let Some(s) = service
        {
            return s.to_string();
        }
        self.resolve(pod, None, pool, None)
    }
}

/// The deployment a pod belongs to: its owner ([`pod_owner`]) without the
/// role suffix the llm-d charts add to a release's name (`-epp` for the
/// EPP, `-decode` and `-prefill` for the model servers). So the EPP pod
/// `glm-5-2-epp-6f7c9d8b5-xk2lp` and the vLLM pods
/// `glm-5-2-decode-6d9f7c8b9-abcde` and `glm-5-2-prefill-5c8e6b7a8-fghij`
/// all give `glm-5-2`.
pub fn pod_deployment(pod: &str) -> &str {
    let owner = pod_owner(pod);
    ["-epp", "-decode", "-prefill"]
        .iter()
        .find_map(|s| owner.strip_suffix(s).filter(|o| !o.is_empty()))
        .unwrap_or(owner)
}

/// The pod behind an endpoint id, when the id names one:
/// `namespace/pod[-rank-N]` or `pod[-rank-N]` gives `pod`; an `ip:port`
/// (or any id with `:`) or a bare IP names none.
pub fn endpoint_pod(endpoint: &str) -> Option<&str> {
    let name = endpoint.rsplit('/').next().unwrap_or(endpoint);
    if name.is_empty()
        || name.contains(':')
        || name.bytes().all(|c| c.is_ascii_digit() || c == b'.')
    {
        return None;
    }
    Some(match name.rfind("-rank-") {
        Some(i) if i + 6 < name.len() && name[i + 6..].bytes().all(|c| c.is_ascii_digit()) => {
            &name[..i]
        }
        _ => name,
    })
}

/// Names endpoint pools: a pool is a connected set of endpoints (two
/// endpoints are connected when they are candidates of the same request).
///
/// A request whose candidates were seen before belongs to their pool; when
/// they belong to several, those are one pool from then on, named after the
/// earliest. Otherwise the pool is named after the deployment of most of its
/// endpoint pods (see [`pod_deployment`]; the smallest name on a tie): the
/// same name in the same namespace is the same pool (a restarted pod joins
/// its Deployment's), the same name in another namespace is `NAME.NAMESPACE`.
/// So pools that share a namespace but no endpoint and no owner keep their
/// own names, and a pool keeps the name it got first (decisions emitted
/// before two pools were found connected keep the name they had).
/// Memory: one entry per endpoint, at most [`PoolNames::MAX_ENDPOINTS`];
/// past that, new endpoints are named but not remembered.
#[derive(Debug, Default)]
pub struct PoolNames {
    pool_of: FxMap<String, u32>,
    /// Each pool's name and namespace.
    pools: Vec<(String, Option<String>)>,
    /// Union-find parent of each pool (a root is its own parent).
    parent: Vec<u32>,
    roots: Vec<u32>,
}

impl PoolNames {
    /// Endpoints remembered at most.
    pub const MAX_ENDPOINTS: usize = 1 << 16;

    fn find(&mut self, mut i: u32) -> u32 {
        while self.parent[i as usize] != i {
            let p = self.parent[i as usize];
            self.parent[i as usize] = self.parent[p as usize];
            i = p;
        }
        i
    }

    fn add(&mut self, name: String, ns: Option<String>) -> u32 {
        self.pools.push((name, ns));
        let i = (self.pools.len() - 1) as u32;
        self.parent.push(i);
        i
    }

    /// The pool of a request whose candidates are `endpoints`; `None` when
    /// none was seen before and none is a pod name.
    pub fn name(&mut self, endpoints: &[&str]) -> Option<&str> {
        let mut roots = std::mem::take(&mut self.roots);
        roots.clear();
        for e in endpoints {
            if let Some(&i) = self.pool_of.get(*e) {
                let r = self.find(i);
                if !roots.contains(&r) {
                    roots.push(r);
                }
            }
        }
        let root = match roots.iter().min() {
            Some(&first) => {
                for &r in &roots {
                    self.parent[r as usize] = first;
                }
                first
            }
            None => {
                let mut owners: Vec<&str> = endpoints
                    .iter()
                    .filter_map(|e| endpoint_pod(e))
                    .map(pod_deployment)
                    .collect();
                if owners.is_empty() {
                    self.roots = roots;
                    return None;
                }
                owners.sort_unstable();
                let mut best = (owners[0], 0usize);
                let mut run = (owners[0], 0usize);
                for o in &owners {
                    if *o == run.0 {
                        run.1 += 1;
                    } else {
                        run = (o, 1);
                    }
                    if run.1 > best.1 {
                        best = run;
                    }
                }
                let owner = best.0;
                let ns = endpoints
                    .iter()
                    .find_map(|e| split_slash(e).map(|(n, _)| n.to_string()));
                let same = |x: &(String, Option<String>), name: &str| x.0 == name && x.1 == ns;
                let name = match self.pools.iter().find(|x| x.0 == owner) {
                    Some(x) if x.1 != ns => match &ns {
                        Some(n) => format!("{owner}.{n}"),
                        None => owner.to_string(),
                    },
                    _ => owner.to_string(),
                };
                match self.pools.iter().position(|x| same(x, &name)) {
                    Some(i) => self.find(i as u32),
                    None => self.add(name, ns),
                }
            }
        };
        self.roots = roots;
        for e in endpoints {
            if self.pool_of.len() >= Self::MAX_ENDPOINTS {
                break;
            }
            if !self.pool_of.contains_key(*e) {
                self.pool_of.insert((*e).to_string(), root);
            }
        }
        Some(&self.pools[root as usize].0)
    }
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

/// Default of [`AssemblerLimits::max_events_per_request`].
pub const DEFAULT_MAX_EVENTS_PER_REQUEST: usize = 100_000;

struct Req {
    serial: u64,
    request_id: Option<String>,
    pod: Option<String>,
    model: Option<String>,
    last_ts: f64,
    first_line: u64,
    saw_profile_line: bool,
    decider_run: Option<u32>,
    profile: Option<String>,
    run: u32,
    run_active: bool,
    /// In [`Req::text`].
    run_candidates: Option<Spans>,
    last_survivors: Option<Vec<String>>,
    /// The last survivors are those of `run_decisions[k]` (kept there, not
    /// copied); exclusive with `last_survivors`.
    last_survivors_in: Option<usize>,
    running_filter: Option<String>,
    instances: Vec<String>,
    // Decisions are boxed while assembled: a decision is several hundred
    // bytes, and it moves from `pending` to `run_decisions` to `done`.
    pending: Option<Box<Decision>>,
    pending_has_outcome: bool,
    #[allow(clippy::vec_box)] // Moved between the two lists and `pending`.
    run_decisions: Vec<Box<Decision>>,
    #[allow(clippy::vec_box)]
    done: Vec<Box<Decision>>,
    prompt_tokens: Option<f64>,
    hit_prefix_tokens: Option<f64>,
    handled_endpoint: Option<String>,
    /// The last decision of the run is a `not_applicable` inferred from a
    /// completion line, with no filter activity since.
    last_na: bool,
    events: Vec<Buffered>,
    /// Heap bytes of `events` and `text`, as last counted in the
    /// assembler's `open_bytes`.
    bytes: usize,
    /// The strings of the buffered events (and of `run_candidates`): one
    /// buffer per request instead of an allocation per string.
    text: Arena,
}

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

/// Bytes of a line as an owned string (lossily if not UTF-8).
fn owned(b: &[u8]) -> String {
    crate::json::lossy(b).into_owned()
}

/// An event waiting in its request's buffer, its strings in the request's
/// [`Req::text`].
struct Buffered {
    ts: Option<f64>,
    line: u64,
    event: ArenaEvent,
}

struct QEntry {
    serial: u64,
    enq_ts: f64,
    key: Vec<u8>,
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
    file: String,
    naming: DeploymentNaming,
    pools: PoolNames,
    limits: AssemblerLimits,
    reqs: FxMap<Vec<u8>, Req>,
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
fn take(reqs: &mut FxMap<Vec<u8>, Req>, open_bytes: &mut usize, key: &[u8]) -> Option<Req> {
    let r = reqs.remove(key)?;
    *open_bytes = open_bytes.saturating_sub(r.bytes);
    Some(r)
}

/// `s.split_once('/')`, by a plain byte scan (the ids are short: the
/// general character searcher costs more than the scan).
fn split_slash(s: &str) -> Option<(&str, &str)> {
    let i = s.bytes().position(|b| b == b'/')?;
    Some((&s[..i], &s[i + 1..]))
}

fn split_plugin(plugin: &str) -> (&str, Option<&str>) {
    match split_slash(plugin) {
        Some((n, t)) => (n, Some(t)),
        None => (plugin, None),
    }
}

fn is_affinity_type(t: Option<&str>, name: &str) -> bool {
    t.unwrap_or(name).contains("prefix-cache-affinity")
}

/// `a == b` for endpoint ids, which in one pool share long prefixes and
/// differ near the end (`…-decode-5t7hwncptc-8s2n7-rank-0`): the lengths and
/// the last 8 bytes first, then the whole.
#[inline]
fn same_endpoint(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.last_chunk::<8>() == b.last_chunk::<8>() && a == b
}

fn candidate_mut<'d>(d: &'d mut Decision, endpoint: &str) -> &'d mut CandidateObs {
    let i = match d
        .candidates
        .iter()
        .position(|c| same_endpoint(&c.endpoint, endpoint))
    {
        Some(i) => i,
        None => {
            d.candidates.push(CandidateObs::new(endpoint));
            d.candidates.len() - 1
        }
    };
    &mut d.candidates[i]
}

fn nonneg_int(x: f64) -> Option<u32> {
    (x.is_finite() && x >= 0.0 && x <= f64::from(u32::MAX)).then_some(x as u32)
}

impl Req {
    /// Buffers one event of this request (its strings in `from`, copied to
    /// the request's), touched at `touch`; whether the buffer is now full
    /// (`cap` events).
    fn push(&mut self, ev: Buffered, from: &Arena, touch: f64, ctx: &Ctx<'_>, cap: usize) -> bool {
        if touch > self.last_ts || self.last_ts.is_nan() {
            self.last_ts = touch;
        }
        if self.model.is_none()
            && let Some(m) = ctx.model
        {
            self.model = Some(owned(m));
        }
        let event = ev.event.transfer(from, &mut self.text);
        self.events.push(Buffered { event, ..ev });
        self.events.len() >= cap
    }

    /// Heap bytes of the buffered events and their strings.
    fn heap_bytes(&self) -> usize {
        self.events.capacity() * std::mem::size_of::<Buffered>() + self.text.heap_bytes()
    }

    fn new(serial: u64, ctx: &Ctx<'_>, line: u64, ts: f64) -> Req {
        Req {
            serial,
            request_id: ctx.request_id.map(owned),
            pod: ctx.pod.map(owned),
            model: ctx.model.map(owned),
            last_ts: ts,
            first_line: line,
            saw_profile_line: false,
            decider_run: None,
            profile: None,
            run: 0,
            run_active: false,
            run_candidates: None,
            last_survivors: None,
            last_survivors_in: None,
            running_filter: None,
            instances: Vec::new(),
            pending: None,
            pending_has_outcome: false,
            run_decisions: Vec::new(),
            done: Vec::new(),
            prompt_tokens: None,
            hit_prefix_tokens: None,
            handled_endpoint: None,
            last_na: false,
            // A request at -v=4 logs about 15 used lines: no regrowth for most.
            events: Vec::with_capacity(16),
            bytes: 0,
            text: Arena::with_capacity(1024, 16),
        }
    }

    /// A decision of the current run, its candidates the last survivors,
    /// else the run's candidates (in `text`).
    fn new_decision(&self, text: &Arena, file: &str, line: u64, ts: Option<f64>) -> Box<Decision> {
        let survivors = self
            .last_survivors_in
            .and_then(|k| self.run_decisions.get(k))
            .and_then(|d| d.survivors.as_ref())
            .or(self.last_survivors.as_ref());
        let cands = match (survivors, self.run_candidates) {
            (Some(v), _) => v.iter().map(CandidateObs::new).collect(),
            (None, Some(c)) => text
                .list(c)
                .iter()
                .map(|&e| CandidateObs::new(text.string(e)))
                .collect(),
            (None, None) => Vec::new(),
        };
        Box::new(Decision {
            ts,
            profile: self.profile.clone(),
            profile_run: self.run,
            source: SourceLoc {
                file: file.to_string(),
                line,
            },
            candidates: cands,
            ..Decision::default()
        })
    }

    fn finalize_pending(&mut self) {
        if let Some(mut d) = self.pending.take() {
            if d.filter.is_none()
                && let Some(p) = &self.running_filter
            {
                let (n, t) = split_plugin(p);
                d.filter = Some(n.to_string());
                d.filter_type = t.map(str::to_string);
            }
            self.run_decisions.push(d);
        }
        self.pending_has_outcome = false;
    }

    fn end_run(&mut self) {
        self.finalize_pending();
        if self.done.is_empty() {
            // The usual case (one run per request): hand the vector over.
            std::mem::swap(&mut self.done, &mut self.run_decisions);
        } else {
            self.done.append(&mut self.run_decisions);
        }
        self.run_candidates = None;
        self.last_survivors = None;
        self.last_survivors_in = None;
        self.running_filter = None;
        self.instances.clear();
    }

    fn new_run(&mut self) {
        self.last_na = false;
        self.end_run();
        if self.run_active {
            self.run += 1;
        }
        self.run_active = false;
    }

    /// Decisions that scorer and picker lines apply to.
    fn scored(&mut self) -> impl Iterator<Item = &mut Decision> {
        self.run_decisions
            .iter_mut()
            .chain(self.pending.iter_mut())
            .map(|d| &mut **d)
    }

    #[allow(clippy::too_many_arguments)]
    fn complete_filter(
        &mut self,
        text: &Arena,
        plugin: &str,
        mut survivors: Option<Vec<String>>,
        file: &str,
        line: u64,
        ts: Option<f64>,
        infer: bool,
    ) {
        let (name, ty) = split_plugin(plugin);
        if self.pending.is_none() && self.instances.iter().any(|i| i == name) {
            self.new_run();
        }
        self.last_na = false;
        let d = match self.pending.take() {
            Some(d) => Some(d),
            None if infer && is_affinity_type(ty, name) => {
                let mut d = self.new_decision(text, file, line, ts);
                d.message = FilterMsg::None;
                d.outcome = FilterMsg::None.outcome();
                self.last_na = true;
                Some(d)
            }
            None => None,
        };
        if let Some(mut d) = d {
            d.filter = Some(name.to_string());
            d.filter_type = ty.map(str::to_string);
            if let Some(s) = &survivors {
                // Usually the survivors are the first candidates, in order:
                // those are found where they stand, without a search.
                let in_place = s
                    .iter()
                    .zip(&d.candidates)
                    .take_while(|(e, c)| same_endpoint(e, &c.endpoint))
                    .count();
                for (i, c) in d.candidates.iter_mut().enumerate() {
                    c.survived =
                        Some(i < in_place || s.iter().any(|e| same_endpoint(e, &c.endpoint)));
                }
                for e in &s[in_place..] {
                    if !d.candidates.iter().any(|c| same_endpoint(&c.endpoint, e)) {
                        let mut c = CandidateObs::new(e.clone());
                        c.survived = Some(true);
                        d.candidates.push(c);
                    }
                }
            }
            d.survivors = survivors.take();
            let has_survivors = d.survivors.is_some();
            self.run_decisions.push(d);
            if has_survivors {
                self.last_survivors = None;
                self.last_survivors_in = Some(self.run_decisions.len() - 1);
            }
        }
        self.pending_has_outcome = false;
        self.instances.push(name.to_string());
        if let Some(s) = survivors {
            self.last_survivors = Some(s);
            self.last_survivors_in = None;
        }
        self.running_filter = None;
        self.run_active = true;
    }
}

fn apply_filter_line(d: &mut Decision, l: FilterLine) {
    d.message = l.msg;
    d.outcome = match l.msg {
        FilterMsg::SessionCostGate => match (l.extras.sticky_cost, l.extras.non_sticky_cost) {
            (Some(s), Some(n)) if s <= n => Some(gatecal_filter::Outcome::Sticky),
            (Some(_), Some(_)) => Some(gatecal_filter::Outcome::LoadOverride),
            _ => None,
        },
        m => m.outcome(),
    };
    d.affinity_threshold = l.affinity_threshold;
    d.total = l.total.and_then(nonneg_int);
    d.sticky = l.sticky.and_then(nonneg_int);
    d.best_sticky_ttft_ms = l.best_sticky_ttft_ms;
    d.best_non_sticky_ttft_ms = l.best_non_sticky_ttft_ms;
    d.penalty = l.penalty;
    d.max_penalty = l.max_penalty;
    d.extras = l.extras;
    d.flags = d.flags.union(l.flags);
}

impl Req {
    /// Applies one event (its strings in `text`), in program order.
    fn apply(&mut self, ev: Buffered, text: &Arena, file: &str, infer: bool) {
        let Buffered { ts, line, event } = ev;
        let r = self;
        match event {
            Event::ReceivedRequest => {}
            Event::SchedulerProfile { profile } => {
                if r.run_active {
                    r.new_run();
                }
                r.profile = Some(text.string(profile));
                r.saw_profile_line = true;
            }
            Event::BeforeFilters { endpoints } => {
                if r.run_active {
                    r.new_run();
                }
                r.run_candidates = Some(endpoints);
                r.last_survivors = None;
                r.last_survivors_in = None;
            }
            Event::HitPercentage {
                prompt_tokens,
                hit_prefix_tokens,
            } => {
                r.prompt_tokens = prompt_tokens.or(r.prompt_tokens);
                r.hit_prefix_tokens = hit_prefix_tokens.or(r.hit_prefix_tokens);
                if r.run_active || r.run_candidates.is_some() {
                    r.run_active = true;
                    r.new_run();
                }
                if r.decider_run.is_none() {
                    r.decider_run = Some(r.run);
                }
            }
            Event::RunningFilter { plugin } => {
                let plugin = text.string(plugin);
                let (name, _) = split_plugin(&plugin);
                if r.instances.iter().any(|i| i == name) {
                    r.new_run();
                }
                // A pending outcome line waits for its completion line.
                r.last_na = false;
                r.running_filter = Some(plugin);
                r.run_active = true;
            }
            Event::Filter(l) => {
                if r.pending.is_none() && r.last_na {
                    // The completion line came first: the filter line belongs
                    // to the decision inferred from it.
                    r.last_na = false;
                    if let Some(d) = r.run_decisions.last_mut() {
                        d.ts = ts;
                        d.source.line = line;
                        apply_filter_line(d, *l);
                        return;
                    }
                }
                if r.pending_has_outcome {
                    r.finalize_pending();
                }
                let mut d = match r.pending.take() {
                    Some(d) => d,
                    None => r.new_decision(text, file, line, ts),
                };
                d.ts = ts;
                d.source.line = line;
                apply_filter_line(&mut d, *l);
                r.pending = Some(d);
                r.pending_has_outcome = true;
                r.run_active = true;
            }
            Event::EndpointTtft {
                endpoint,
                throughput,
                in_flight_tokens,
            } => {
                r.last_na = false;
                if r.pending_has_outcome {
                    r.finalize_pending();
                }
                if r.pending.is_none() {
                    r.pending = Some(r.new_decision(text, file, line, ts));
                }
                if let Some(d) = r.pending.as_mut() {
                    let c = candidate_mut(d, &text.str(endpoint));
                    c.throughput = throughput;
                    c.in_flight_tokens = in_flight_tokens
                        .filter(|x| x.is_finite() && x.abs() < 9.0e18)
                        .map(|x| x as i64);
                    c.ttft_ms = match (in_flight_tokens, throughput) {
                        (Some(t), Some(p)) if p > 0.0 => Some(t / p * 1000.0),
                        _ => None,
                    };
                }
                r.run_active = true;
            }
            Event::FilterCompleted { plugin, survivors } => {
                let survivors = survivors.map(|l| text.strings(l));
                r.complete_filter(text, &text.str(plugin), survivors, file, line, ts, infer);
            }
            Event::FilterEliminatedAll { plugin } => {
                // Logged after the instance's completion line (which then
                // listed no survivors); alone, it completes the call.
                let plugin = text.str(plugin);
                let (name, _) = split_plugin(&plugin);
                if r.pending.is_none() && r.instances.last().is_some_and(|i| i == name) {
                    if let Some(d) = r
                        .run_decisions
                        .last_mut()
                        .filter(|d| d.filter.as_deref() == Some(name))
                    {
                        d.survivors = Some(Vec::new());
                        for c in &mut d.candidates {
                            c.survived = Some(false);
                        }
                    }
                    r.last_survivors = Some(Vec::new());
                    r.last_survivors_in = None;
                } else {
                    r.complete_filter(text, &plugin, Some(Vec::new()), file, line, ts, infer);
                }
            }
            Event::FiltersCompleted { .. } => {
                r.finalize_pending();
            }
            Event::Score {
                plugin,
                endpoint,
                score,
            } => {
                // Cloned for all but the last scored decision (usually
                // there is one), which takes the plugin name.
                let endpoint = text.str(endpoint);
                let mut plugin = Some(text.string(plugin));
                {
                    let mut scored = r.scored().peekable();
                    while let Some(d) = scored.next() {
                        let p = if scored.peek().is_some() {
                            plugin.clone()
                        } else {
                            plugin.take()
                        };
                        if let Some(p) = p {
                            candidate_mut(d, &endpoint).scores.push((p, score));
                        }
                    }
                }
                r.run_active = true;
            }
            Event::TokenLoad {
                endpoint,
                token_load,
                ..
            } => {
                let endpoint = text.str(endpoint);
                for d in r.scored() {
                    candidate_mut(d, &endpoint).token_load = Some(token_load);
                }
                r.run_active = true;
            }
            Event::PickerCompleted { targets } => {
                let targets = text.list(targets);
                if !targets.is_empty() {
                    let mut chosen = String::new();
                    for (i, &t) in targets.iter().enumerate() {
                        if i > 0 {
                            chosen.push(',');
                        }
                        chosen.push_str(&text.str(t));
                    }
                    for d in r.scored() {
                        d.chosen = Some(chosen.clone());
                    }
                }
            }
            Event::RequestHandled { endpoint } => {
                r.handled_endpoint = endpoint.map(|e| text.string(e));
            }
            Event::VllmStats(_)
            | Event::PeakPrefillResolved { .. }
            | Event::CalibrationSkipped { .. } => {}
        }
    }
}

impl Assembler {
    /// An assembler for one input whose lines are located in `file`.
    pub fn new(
        file: impl Into<String>,
        naming: DeploymentNaming,
        limits: AssemblerLimits,
    ) -> Assembler {
        Assembler {
            file: file.into(),
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
        self.feed_ctx(line, &ctx, event, &text, emit);
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
        emit: &mut dyn FnMut(Decision),
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
        if matches!(
            event,
            Event::VllmStats(_)
                | Event::PeakPrefillResolved { .. }
                | Event::CalibrationSkipped { .. }
        ) {
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
        if matches!(event, Event::ReceivedRequest)
            && let Some(old) = take(&mut self.reqs, &mut self.open_bytes, &self.scratch)
        {
            self.close(old, Completion::Superseded, emit);
        }
        let handled = matches!(event, Event::RequestHandled { .. });
        let cap = self.limits.max_events_per_request.max(1);
        let ev = Buffered { ts, line, event };
        // One lookup for an open request; a new one is made and inserted.
        let req_cap = self.limits.max_open_bytes / 8;
        let full = if let Some(r) = self.reqs.get_mut(self.scratch.as_slice()) {
            let full = r.push(ev, text, touch, ctx, cap);
            grown(&mut self.open_bytes, r, full, req_cap)
        } else {
            if handled {
                // Nothing open: a request that started before the log.
                return;
            }
            let serial = self.next_serial;
            self.next_serial += 1;
            let key = self.scratch.clone();
            self.queue.push_back(QEntry {
                serial,
                enq_ts: touch,
                key: key.clone(),
            });
            self.reqs.insert(key, Req::new(serial, ctx, line, touch));
            if self.reqs.len() > self.limits.max_open_requests {
                self.evict_oldest(emit);
            }
            let Some(r) = self.reqs.get_mut(self.scratch.as_slice()) else {
                return;
            };
            let full = r.push(ev, text, touch, ctx, cap);
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
            self.queue.retain(|e| {
                reqs.get(e.key.as_slice())
                    .is_some_and(|r| r.serial == e.serial)
            });
        }
    }

    fn evict_aged(&mut self, emit: &mut dyn FnMut(Decision)) {
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
                .get(e.key.as_slice())
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

    fn evict_oldest(&mut self, emit: &mut dyn FnMut(Decision)) {
        let mut budget = self.queue.len() + 1;
        while budget > 0
            && let Some(e) = self.queue.pop_front()
        {
            budget -= 1;
            let live = self
                .reqs
                .get(e.key.as_slice())
                .is_some_and(|r| r.serial == e.serial);
            if live && e.key != self.scratch {
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

    fn close(&mut self, mut r: Req, how: Completion, emit: &mut dyn FnMut(Decision)) {
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
                r.apply(e, &text, &self.file, infer);
            }
        } else {
            let mut order: Vec<(f64, u32)> =
                keys().enumerate().map(|(i, k)| (k, i as u32)).collect();
            order.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut slots: Vec<Option<Buffered>> = events.into_iter().map(Some).collect();
            for (_, i) in order {
                if let Some(e) = slots[i as usize].take() {
                    r.apply(e, &text, &self.file, infer);
                }
            }
        }
        r.end_run();
        drop(text);
        let infer_profiles = !r.saw_profile_line && r.decider_run.is_some();
        // The pool, from every candidate of the request's decisions (a P/D
        // request connects its prefill and decode endpoints): needed only when
        // no EPP pod names the deployment.
        let pool: Option<String> = match (&r.pod, &self.naming.explicit) {
            (None, None) => {
                let eps: Vec<&str> = r
                    .done
                    .iter()
                    .flat_map(|d| d.candidates.iter().map(|c| c.endpoint.as_str()))
                    .collect();
                self.pools.name(&eps).map(str::to_string)
            }
            _ => None,
        };
        let n = r.done.len();
        for (i, mut d) in std::mem::take(&mut r.done).into_iter().enumerate() {
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
            if infer_profiles {
                let before = r.decider_run.is_some_and(|k| d.profile_run < k);
                d.profile = Some(if before { "decode" } else { "prefill" }.to_string());
                d.profile_inferred = true;
            }
            d.prompt_tokens = r.prompt_tokens;
            d.hit_prefix_tokens = r.hit_prefix_tokens;
            if d.source.line == 0 {
                d.source.line = r.first_line;
            }
            let ns = d
                .candidates
                .iter()
                .find_map(|c| split_slash(&c.endpoint).map(|(n, _)| n));
            d.deployment =
                self.naming
                    .resolve(r.pod.as_deref(), pool.as_deref(), ns, d.model.as_deref());
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
            emit(*d);
        }
    }

    /// Closes every open request ([`Completion::EndOfInput`]), in the order
    /// they were opened.
    pub fn finish(&mut self, emit: &mut dyn FnMut(Decision)) {
        let mut all: Vec<Req> = self.reqs.drain().map(|(_, r)| r).collect();
        self.open_bytes = 0;
        all.sort_by_key(|r| r.serial);
        self.queue.clear();
        for r in all {
            self.close(r, Completion::EndOfInput, emit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            .map(|d| (d.request_id.clone().unwrap(), d.completion))
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
        let mut emit = |d: Decision| out.borrow_mut().push(d.request_id.unwrap());
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
