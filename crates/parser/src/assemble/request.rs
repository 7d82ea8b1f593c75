//! One open request: its buffered events, and their replay, in `ts` order
//! when it closes, into the decisions of its profile runs.

use super::{Ctx, split_slash};
use crate::arena::{Arena, Span, Spans};
use crate::decision::{CandidateObs, Decision, FilterMsg, SourceLoc};
use crate::event::{ArenaEvent, Event, FilterLine};
use crate::name::{Interner, Name};

/// An open request (the events of one `x-request-id`, and of one kubectl
/// pod), and the decisions assembled from them so far.
pub(super) struct Req {
    pub(super) serial: u64,
    /// The key it is open under.
    pub(super) key: super::ReqKey,
    pub(super) request_id: Option<Name>,
    pub(super) pod: Option<Name>,
    pub(super) model: Option<Name>,
    pub(super) last_ts: f64,
    pub(super) first_line: u64,
    /// Where the profiles of the request's runs come from. Request-wide,
    /// independent of [`Req::state`]: it only grows (no line undoes it).
    pub(super) profiles: Profiles,
    /// The current run's profile, in [`Req::text`].
    pub(super) profile: Option<Span>,
    /// 0-based index of the current profile run.
    pub(super) run: u32,
    /// Where the current run stands, and its open decision.
    pub(super) state: RunState,
    /// In [`Req::text`].
    pub(super) run_candidates: Option<Spans>,
    /// The survivors of the run's last filter call, which the next filter
    /// of the run starts from.
    pub(super) last_survivors: LastSurvivors,
    /// The plugin (`name/type`) of the run's last `Running filter plugin`
    /// line since its last completion, in [`Req::text`].
    pub(super) running_filter: Option<Span>,
    /// The plugins of the run's filter calls completed so far, in
    /// [`Req::text`] (their names are compared).
    pub(super) instances: Vec<Span>,
    // Decisions are boxed while assembled: a decision is several hundred
    // bytes, and it moves from the open one of `state` to `run_decisions`
    // to `done`.
    #[allow(clippy::vec_box)] // Moved between the two lists and `state`.
    pub(super) run_decisions: Vec<Box<Decision>>,
    #[allow(clippy::vec_box)]
    pub(super) done: Vec<Box<Decision>>,
    pub(super) prompt_tokens: Option<f64>,
    pub(super) hit_prefix_tokens: Option<f64>,
    pub(super) producers: crate::decision::PrefixProducers,
    pub(super) handled_endpoint: Option<Name>,
    /// The precise producer's `scores` object, as logged: read for the
    /// handled endpoint when the request's decisions are emitted.
    pub(super) precise_scores: Option<String>,
    pub(super) events: Vec<Buffered>,
    /// Heap bytes of `events` and `text`, as last counted in the
    /// assembler's `open_bytes`.
    pub(super) bytes: usize,
    /// The strings of the buffered events (and of `run_candidates`): one
    /// buffer per request instead of an allocation per string.
    pub(super) text: Arena,
    /// The `ts` of the request's `EPP received request` line: its arrival.
    pub(super) arrival_ts: Option<f64>,
    /// Its first response body chunk, when read before it closed.
    pub(super) first_body: Option<FirstBody>,
}

/// The first chunk of a response body that reached the EPP (its first
/// `HandleResponseBody is triggered` line with a non-empty chunk, or one
/// ending the stream).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct FirstBody {
    /// The line's `ts`.
    pub(super) ts: Option<f64>,
    /// The chunk ended the response: a response that was not streamed (or
    /// came in one chunk), whose first chunk is not its first token.
    pub(super) end_of_stream: bool,
}

impl FirstBody {
    /// The first body chunk a `HandleResponseBody is triggered` line gives,
    /// or `None` for an empty chunk that does not end the stream (it is
    /// not the first token). A missing key counts as a non-empty chunk
    /// that does not end the stream.
    pub(super) fn of(
        ts: Option<f64>,
        bytes: Option<f64>,
        end_of_stream: Option<bool>,
    ) -> Option<FirstBody> {
        let end_of_stream = end_of_stream.unwrap_or(false);
        if bytes.is_some_and(|b| b <= 0.0) && !end_of_stream {
            return None;
        }
        Some(FirstBody { ts, end_of_stream })
    }

    /// The observed time to first token, ms: from `arrival` to this chunk,
    /// for a streamed response whose both times are known and in order.
    pub(super) fn ttft_ms(self, arrival: Option<f64>) -> Option<f64> {
        if self.end_of_stream {
            return None;
        }
        let (a, t) = (arrival?, self.ts?);
        let ms = (t - a) * 1000.0;
        (ms.is_finite() && ms >= 0.0).then_some(ms)
    }
}

/// Where the profiles of a request's runs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Profiles {
    /// Neither a `Running scheduler profile` line nor the PD decider's line
    /// yet: the runs have no profile.
    Unknown,
    /// The PD decider's line came first in run `decider_run` and no
    /// profile line was logged (`-v=4`): the runs before it are `decode`,
    /// the others `prefill`.
    Inferred { decider_run: u32 },
    /// A profile line was logged: each run has the profile of its own
    /// line, whatever the decider logs before or after.
    Logged,
}

impl Profiles {
    /// A `Running scheduler profile` line was read.
    pub(super) fn logged(&mut self) {
        *self = Profiles::Logged;
    }

    /// The PD decider's line was read in run `run`: only the first counts.
    pub(super) fn decider_in(&mut self, run: u32) {
        if *self == Profiles::Unknown {
            *self = Profiles::Inferred { decider_run: run };
        }
    }

    /// The inferred profile of run `run`, when the profiles are inferred.
    pub(super) fn inferred(self, run: u32) -> Option<&'static str> {
        match self {
            Profiles::Inferred { decider_run } if run < decider_run => Some("decode"),
            Profiles::Inferred { .. } => Some("prefill"),
            Profiles::Unknown | Profiles::Logged => None,
        }
    }
}

/// Where the current profile run of a request stands. A run is active
/// from its first filter-chain line (filter, per-endpoint, completion,
/// scorer lines) until a line that starts the next run; at most one
/// decision is open, and only in an active run.
#[derive(Debug)]
pub(super) enum RunState {
    /// No activity yet: a new request, or a run just started. A line that
    /// starts a run (a profile line, `Before running filter plugins`)
    /// starts no new one from here: it belongs to this run.
    Idle,
    /// Active, no decision open.
    Active,
    /// Active, no decision open, and the run's last decision is a
    /// `not_applicable` inferred from a completion line with no filter
    /// activity since: an outcome line now belongs to that decision (the
    /// completion line was written first).
    InferredNa,
    /// A decision opened by per-endpoint lines (P2251), its outcome line
    /// not read yet.
    Open(Box<Decision>),
    /// A decision with its outcome line, waiting for its completion line.
    Outcome(Box<Decision>),
}

impl RunState {
    /// Whether the run has had activity (a line that starts a run then
    /// starts a new one).
    pub(super) fn is_active(&self) -> bool {
        !matches!(self, RunState::Idle)
    }

    /// The open decision.
    pub(super) fn open(&self) -> Option<&Decision> {
        match self {
            RunState::Open(d) | RunState::Outcome(d) => Some(d),
            _ => None,
        }
    }

    /// The open decision, mutable.
    pub(super) fn open_mut(&mut self) -> Option<&mut Decision> {
        match self {
            RunState::Open(d) | RunState::Outcome(d) => Some(d),
            _ => None,
        }
    }

    /// Takes the open decision, if any: the run stays active with none
    /// open. Any other state is left as it is.
    pub(super) fn take_open(&mut self) -> Option<Box<Decision>> {
        self.open()?;
        match std::mem::replace(self, RunState::Active) {
            RunState::Open(d) | RunState::Outcome(d) => Some(d),
            _ => None,
        }
    }

    /// A scorer or token-load line: the run is active; an inferred
    /// `not_applicable` stays open to its outcome line (scorers are no
    /// filter activity).
    pub(super) fn scored(&mut self) {
        if let RunState::Idle = self {
            *self = RunState::Active;
        }
    }

    /// A `Running filter plugin` line: the run is active, and an inferred
    /// `not_applicable` is closed to later outcome lines.
    pub(super) fn filter_started(&mut self) {
        if let RunState::Idle | RunState::InferredNa = self {
            *self = RunState::Active;
        }
    }
}

/// Where the survivors of a run's last filter call are: none yet (the next
/// filter starts from the run's candidates), owned by the request (a call
/// whose decision is not the run's), or those of the run's decision `k`
/// (kept there, not copied).
#[derive(Debug, Default)]
pub(super) enum LastSurvivors {
    #[default]
    None,
    Owned(Vec<Name>),
    Of(usize),
}

/// An event waiting in its request's buffer, its strings in the request's
/// [`Req::text`].
pub(super) struct Buffered {
    pub(super) ts: Option<f64>,
    pub(super) line: u64,
    pub(super) event: ArenaEvent,
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

fn candidate_mut<'d>(
    d: &'d mut Decision,
    endpoint: &str,
    names: &mut Interner,
) -> &'d mut CandidateObs {
    let i = match d
        .candidates
        .iter()
        .position(|c| same_endpoint(&c.endpoint, endpoint))
    {
        Some(i) => i,
        None => {
            d.candidates.push(CandidateObs::new(names.intern(endpoint)));
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
    pub(super) fn push(
        &mut self,
        ev: Buffered,
        from: &Arena,
        touch: f64,
        ctx: &Ctx<'_>,
        cap: usize,
        names: &mut Interner,
    ) -> bool {
        if touch > self.last_ts || self.last_ts.is_nan() {
            self.last_ts = touch;
        }
        if self.model.is_none()
            && let Some(m) = ctx.model
        {
            self.model = Some(names.intern_bytes(m));
        }
        let event = ev.event.transfer(from, &mut self.text);
        self.events.push(Buffered { event, ..ev });
        self.events.len() >= cap
    }

    /// Heap bytes of the buffered events and their strings.
    pub(super) fn heap_bytes(&self) -> usize {
        self.events.capacity() * std::mem::size_of::<Buffered>() + self.text.heap_bytes()
    }

    pub(super) fn new(
        serial: u64,
        key: super::ReqKey,
        ctx: &Ctx<'_>,
        line: u64,
        ts: f64,
        names: &mut Interner,
    ) -> Req {
        Req {
            serial,
            key,
            // Shared by the request's decisions; not interned (an id is
            // seldom seen again).
            request_id: ctx.request_id.map(|b| Name::from(crate::json::lossy(b))),
            pod: ctx.pod.map(|b| names.intern_bytes(b)),
            model: ctx.model.map(|b| names.intern_bytes(b)),
            last_ts: ts,
            first_line: line,
            profiles: Profiles::Unknown,
            profile: None,
            run: 0,
            state: RunState::Idle,
            run_candidates: None,
            last_survivors: LastSurvivors::None,
            running_filter: None,
            instances: Vec::new(),
            run_decisions: Vec::new(),
            done: Vec::new(),
            prompt_tokens: None,
            hit_prefix_tokens: None,
            producers: crate::decision::PrefixProducers::default(),
            handled_endpoint: None,
            precise_scores: None,
            // A request at -v=4 logs about 15 used lines: no regrowth for most.
            events: Vec::with_capacity(16),
            bytes: 0,
            text: Arena::with_capacity(1024, 16),
            arrival_ts: None,
            first_body: None,
        }
    }

    /// A decision of the current run, its candidates the last survivors,
    /// else the run's candidates (in `text`).
    pub(super) fn new_decision(
        &self,
        text: &Arena,
        names: &mut Interner,
        file: &Name,
        line: u64,
        ts: Option<f64>,
    ) -> Box<Decision> {
        let survivors = match &self.last_survivors {
            LastSurvivors::None => None,
            LastSurvivors::Owned(v) => Some(v),
            LastSurvivors::Of(k) => self
                .run_decisions
                .get(*k)
                .and_then(|d| d.survivors.as_ref()),
        };
        let cands = match (survivors, self.run_candidates) {
            (Some(v), _) => v.iter().map(CandidateObs::new).collect(),
            (None, Some(c)) => text
                .list(c)
                .iter()
                .map(|&e| CandidateObs::new(names.intern_bytes(text.bytes(e))))
                .collect(),
            (None, None) => Vec::new(),
        };
        Box::new(Decision {
            ts,
            profile: self.profile.map(|p| names.intern_bytes(text.bytes(p))),
            profile_run: self.run,
            source: SourceLoc {
                file: file.clone(),
                line,
            },
            candidates: cands,
            ..Decision::default()
        })
    }

    /// Closes the open decision, if any, into the run's decisions (the
    /// request's strings in `text`).
    pub(super) fn finalize_pending(&mut self, text: &Arena, names: &mut Interner) {
        if let Some(mut d) = self.state.take_open() {
            if d.filter.is_none()
                && let Some(p) = self.running_filter
            {
                let p = text.str(p);
                let (n, t) = split_plugin(&p);
                d.filter = Some(names.intern(n));
                d.filter_type = t.map(|t| names.intern(t));
            }
            self.run_decisions.push(d);
        }
    }

    pub(super) fn end_run(&mut self, text: &Arena, names: &mut Interner) {
        self.finalize_pending(text, names);
        if self.done.is_empty() {
            // The usual case (one run per request): hand the vector over.
            std::mem::swap(&mut self.done, &mut self.run_decisions);
        } else {
            self.done.append(&mut self.run_decisions);
        }
        self.run_candidates = None;
        self.last_survivors = LastSurvivors::None;
        self.running_filter = None;
        self.instances.clear();
    }

    /// Ends the current run and starts the next, idle; it has the next
    /// index when the run ended was active (an idle run is started again).
    pub(super) fn new_run(&mut self, text: &Arena, names: &mut Interner) {
        self.next_run(text, names, self.state.is_active());
    }

    /// Ends the current run and starts the next, idle, with the next index
    /// when `counted`.
    pub(super) fn next_run(&mut self, text: &Arena, names: &mut Interner, counted: bool) {
        self.end_run(text, names);
        if counted {
            self.run += 1;
        }
        self.state = RunState::Idle;
    }

    /// Decisions that scorer and picker lines apply to.
    pub(super) fn scored(&mut self) -> impl Iterator<Item = &mut Decision> {
        self.run_decisions
            .iter_mut()
            .map(|d| &mut **d)
            .chain(self.state.open_mut())
    }

    /// Whether a filter call of instance `name` completed in this run.
    fn called(&self, text: &Arena, name: &str) -> bool {
        self.instances
            .iter()
            .any(|&i| split_plugin(&text.str(i)).0 == name)
    }

    /// Whether the run's last completed filter call is of instance `name`.
    fn last_called(&self, text: &Arena, name: &str) -> bool {
        self.instances
            .last()
            .is_some_and(|&i| split_plugin(&text.str(i)).0 == name)
    }

    /// A filter call of `plugin` (in `text`) completed, with `survivors`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_filter(
        &mut self,
        text: &Arena,
        names: &mut Interner,
        plugin_span: Span,
        mut survivors: Option<Vec<Name>>,
        file: &Name,
        line: u64,
        ts: Option<f64>,
        infer: bool,
    ) {
        let plugin = text.str(plugin_span);
        let (name, ty) = split_plugin(&plugin);
        if self.state.open().is_none() && self.called(text, name) {
            self.new_run(text, names);
        }
        let mut inferred_na = false;
        let d = match self.state.take_open() {
            Some(d) => Some(d),
            None if infer && is_affinity_type(ty, name) => {
                let mut d = self.new_decision(text, names, file, line, ts);
                d.message = FilterMsg::None;
                d.outcome = FilterMsg::None.outcome();
                inferred_na = true;
                Some(d)
            }
            None => None,
        };
        if let Some(mut d) = d {
            d.filter = Some(names.intern(name));
            d.filter_type = ty.map(|t| names.intern(t));
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
                self.last_survivors = LastSurvivors::Of(self.run_decisions.len() - 1);
            }
        }
        self.instances.push(plugin_span);
        if let Some(s) = survivors {
            self.last_survivors = LastSurvivors::Owned(s);
        }
        self.running_filter = None;
        self.state = if inferred_na {
            RunState::InferredNa
        } else {
            RunState::Active
        };
    }
}

fn apply_filter_line(d: &mut Decision, l: FilterLine) {
    d.message = l.msg;
    d.outcome = match l.msg {
        // A malformed line: which message, but no value to trust.
        _ if l.flags.out_of_range.is_some() => None,
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
    d.extras = (!l.extras.is_empty()).then(|| Box::new(l.extras));
    d.flags = d.flags.union(l.flags);
}

impl Req {
    /// Applies one event (its strings in `text`), in program order.
    pub(super) fn apply(
        &mut self,
        ev: Buffered,
        text: &Arena,
        names: &mut Interner,
        file: &Name,
        infer: bool,
    ) {
        let Buffered { ts, line, event } = ev;
        let r = self;
        match event {
            Event::ReceivedRequest => {
                if r.arrival_ts.is_none() {
                    r.arrival_ts = ts.filter(|t| t.is_finite());
                }
            }
            Event::ResponseBody {
                bytes,
                end_of_stream,
            } => {
                if r.first_body.is_none() {
                    r.first_body = FirstBody::of(ts, bytes, end_of_stream);
                }
            }
            Event::SchedulerProfile { profile } => {
                if r.state.is_active() {
                    r.new_run(text, names);
                }
                r.profile = Some(profile);
                r.profiles.logged();
            }
            Event::BeforeFilters { endpoints } => {
                if r.state.is_active() {
                    r.new_run(text, names);
                }
                r.run_candidates = Some(endpoints);
                r.last_survivors = LastSurvivors::None;
            }
            Event::HitPercentage {
                prompt_tokens,
                hit_prefix_tokens,
            } => {
                r.prompt_tokens = prompt_tokens.or(r.prompt_tokens);
                r.hit_prefix_tokens = hit_prefix_tokens.or(r.hit_prefix_tokens);
                // The decider runs between profile runs: a run with
                // candidates but no filter line yet ends here too.
                if r.state.is_active() || r.run_candidates.is_some() {
                    r.next_run(text, names, true);
                }
                r.profiles.decider_in(r.run);
            }
            Event::CachedServers { total_blocks } => {
                let p = &mut r.producers;
                p.approx_cached_blocks = p.approx_cached_blocks.saturating_add(1);
                if let Some(t) = total_blocks {
                    p.approx_total_blocks = Some(p.approx_total_blocks.map_or(t, |x| x.max(t)));
                }
            }
            Event::PreciseProduced {
                total_blocks,
                max_match_blocks,
                scores,
                ..
            } => {
                r.producers.precise_total_blocks = Some(total_blocks);
                r.producers.precise_max_match_blocks = Some(max_match_blocks);
                r.precise_scores = Some(text.string(scores));
            }
            Event::RunningFilter { plugin } => {
                let p = text.str(plugin);
                let (name, _) = split_plugin(&p);
                if r.called(text, name) {
                    r.new_run(text, names);
                }
                // An open decision waits for its completion line.
                r.state.filter_started();
                r.running_filter = Some(plugin);
            }
            Event::Filter(l) => {
                if let RunState::InferredNa = r.state {
                    // The completion line came first: the filter line belongs
                    // to the decision inferred from it.
                    r.state = RunState::Active;
                    if let Some(d) = r.run_decisions.last_mut() {
                        d.ts = ts;
                        d.source.line = line;
                        apply_filter_line(d, *l);
                        return;
                    }
                }
                if let RunState::Outcome(_) = r.state {
                    r.finalize_pending(text, names);
                }
                let mut d = match r.state.take_open() {
                    Some(d) => d,
                    None => r.new_decision(text, names, file, line, ts),
                };
                d.ts = ts;
                d.source.line = line;
                apply_filter_line(&mut d, *l);
                r.state = RunState::Outcome(d);
            }
            Event::EndpointTtft {
                endpoint,
                throughput,
                in_flight_tokens,
            } => {
                match r.state {
                    RunState::Outcome(_) => r.finalize_pending(text, names),
                    RunState::InferredNa => r.state = RunState::Active,
                    _ => {}
                }
                if !matches!(r.state, RunState::Open(_)) {
                    r.state = RunState::Open(r.new_decision(text, names, file, line, ts));
                }
                if let RunState::Open(d) = &mut r.state {
                    let c = candidate_mut(d, &text.str(endpoint), names);
                    c.throughput = throughput;
                    c.in_flight_tokens = in_flight_tokens
                        .filter(|x| x.is_finite() && x.abs() < 9.0e18)
                        .map(|x| x as i64);
                    c.ttft_ms = match (in_flight_tokens, throughput) {
                        (Some(t), Some(p)) if p > 0.0 => Some(gatecal_filter::ttft_ms(t, p)),
                        _ => None,
                    };
                }
            }
            Event::FilterCompleted { plugin, survivors } => {
                let survivors = survivors.map(|l| {
                    text.list(l)
                        .iter()
                        .map(|&e| names.intern_bytes(text.bytes(e)))
                        .collect()
                });
                r.complete_filter(text, names, plugin, survivors, file, line, ts, infer);
            }
            Event::FilterEliminatedAll {
                plugin: plugin_span,
            } => {
                // Logged after the instance's completion line (which then
                // listed no survivors); alone, it completes the call.
                let plugin = text.str(plugin_span);
                let (name, _) = split_plugin(&plugin);
                if r.state.open().is_none() && r.last_called(text, name) {
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
                    r.last_survivors = LastSurvivors::Owned(Vec::new());
                } else {
                    r.complete_filter(
                        text,
                        names,
                        plugin_span,
                        Some(Vec::new()),
                        file,
                        line,
                        ts,
                        infer,
                    );
                }
            }
            Event::FiltersCompleted { .. } => {
                r.finalize_pending(text, names);
            }
            Event::Score {
                plugin,
                endpoint,
                score,
            } => {
                // Cloned for all but the last scored decision (usually
                // there is one), which takes the plugin name.
                let endpoint = text.str(endpoint);
                let plugin = names.intern_bytes(text.bytes(plugin));
                for d in r.scored() {
                    candidate_mut(d, &endpoint, names)
                        .scores
                        .push((plugin.clone(), score));
                }
                r.state.scored();
            }
            Event::TokenLoad {
                endpoint,
                token_load,
                ..
            } => {
                let endpoint = text.str(endpoint);
                for d in r.scored() {
                    candidate_mut(d, &endpoint, names).token_load = Some(token_load);
                }
                r.state.scored();
            }
            Event::PickerCompleted { targets } => {
                let targets = text.list(targets);
                if !targets.is_empty() {
                    let chosen = if let [t] = targets {
                        names.intern_bytes(text.bytes(*t))
                    } else {
                        let mut chosen = String::new();
                        for (i, &t) in targets.iter().enumerate() {
                            if i > 0 {
                                chosen.push(',');
                            }
                            chosen.push_str(&text.str(t));
                        }
                        names.intern(&chosen)
                    };
                    for d in r.scored() {
                        d.chosen = Some(chosen.clone());
                    }
                }
            }
            Event::RequestHandled { endpoint } => {
                r.handled_endpoint = endpoint.map(|e| names.intern_bytes(text.bytes(e)));
            }
            Event::VllmStats(_)
            | Event::PeakPrefillResolved { .. }
            | Event::CalibrationSkipped { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_decider_line_sets_the_inferred_profiles_and_a_profile_line_overrides_them() {
        let mut p = Profiles::Unknown;
        assert_eq!(p.inferred(0), None);
        p.decider_in(1);
        // A later decider line (another prompt of the request) moves nothing.
        p.decider_in(3);
        assert_eq!(p, Profiles::Inferred { decider_run: 1 });
        assert_eq!(
            (p.inferred(0), p.inferred(1), p.inferred(2)),
            (Some("decode"), Some("prefill"), Some("prefill"))
        );
        p.logged();
        assert_eq!(p, Profiles::Logged);
        p.decider_in(0);
        assert_eq!((p, p.inferred(0)), (Profiles::Logged, None));
    }

    #[test]
    fn only_an_open_decision_is_taken_and_taking_it_leaves_the_run_active() {
        for mut s in [RunState::Idle, RunState::Active, RunState::InferredNa] {
            let before = format!("{s:?}");
            assert!(s.take_open().is_none());
            assert_eq!(format!("{s:?}"), before, "left as it was");
        }
        let d = || Box::new(Decision::default());
        for mut s in [RunState::Open(d()), RunState::Outcome(d())] {
            assert!(s.open().is_some() && s.take_open().is_some());
            assert!(matches!(s, RunState::Active));
        }
    }

    #[test]
    fn scorer_lines_keep_an_inferred_not_applicable_open_and_a_filter_start_closes_it() {
        let mut s = RunState::Idle;
        assert!(!s.is_active());
        s.scored();
        assert!(matches!(s, RunState::Active));
        let mut s = RunState::InferredNa;
        s.scored();
        assert!(matches!(s, RunState::InferredNa));
        s.filter_started();
        assert!(matches!(s, RunState::Active));
        // An open decision stays open through both.
        let mut s = RunState::Outcome(Box::default());
        s.scored();
        s.filter_started();
        assert!(matches!(s, RunState::Outcome(_)) && s.is_active());
    }
}
