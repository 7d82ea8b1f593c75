//! One open request: its buffered events, and their replay, in `ts` order
//! when it closes, into the decisions of its profile runs.

use super::{Ctx, split_slash};
use crate::arena::{Arena, Spans};
use crate::decision::{CandidateObs, Decision, FilterMsg, SourceLoc};
use crate::event::{ArenaEvent, Event, FilterLine};

/// An open request (the events of one `x-request-id`, and of one kubectl
/// pod), and the decisions assembled from them so far.
pub(super) struct Req {
    pub(super) serial: u64,
    pub(super) request_id: Option<String>,
    pub(super) pod: Option<String>,
    pub(super) model: Option<String>,
    pub(super) last_ts: f64,
    pub(super) first_line: u64,
    pub(super) saw_profile_line: bool,
    pub(super) decider_run: Option<u32>,
    pub(super) profile: Option<String>,
    pub(super) run: u32,
    pub(super) run_active: bool,
    /// In [`Req::text`].
    pub(super) run_candidates: Option<Spans>,
    /// The survivors of the run's last filter call, which the next filter
    /// of the run starts from.
    pub(super) last_survivors: LastSurvivors,
    pub(super) running_filter: Option<String>,
    pub(super) instances: Vec<String>,
    // Decisions are boxed while assembled: a decision is several hundred
    // bytes, and it moves from `pending` to `run_decisions` to `done`.
    pub(super) pending: Option<Box<Decision>>,
    pub(super) pending_has_outcome: bool,
    #[allow(clippy::vec_box)] // Moved between the two lists and `pending`.
    pub(super) run_decisions: Vec<Box<Decision>>,
    #[allow(clippy::vec_box)]
    pub(super) done: Vec<Box<Decision>>,
    pub(super) prompt_tokens: Option<f64>,
    pub(super) hit_prefix_tokens: Option<f64>,
    pub(super) producers: crate::decision::PrefixProducers,
    pub(super) handled_endpoint: Option<String>,
    /// The last decision of the run is a `not_applicable` inferred from a
    /// completion line, with no filter activity since.
    pub(super) last_na: bool,
    pub(super) events: Vec<Buffered>,
    /// Heap bytes of `events` and `text`, as last counted in the
    /// assembler's `open_bytes`.
    pub(super) bytes: usize,
    /// The strings of the buffered events (and of `run_candidates`): one
    /// buffer per request instead of an allocation per string.
    pub(super) text: Arena,
}

/// Bytes of a line as an owned string (lossily if not UTF-8).
fn owned(b: &[u8]) -> String {
    crate::json::lossy(b).into_owned()
}

/// Where the survivors of a run's last filter call are: none yet (the next
/// filter starts from the run's candidates), owned by the request (a call
/// whose decision is not the run's), or those of the run's decision `k`
/// (kept there, not copied).
#[derive(Debug, Default)]
pub(super) enum LastSurvivors {
    #[default]
    None,
    Owned(Vec<String>),
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
    pub(super) fn push(
        &mut self,
        ev: Buffered,
        from: &Arena,
        touch: f64,
        ctx: &Ctx<'_>,
        cap: usize,
    ) -> bool {
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
    pub(super) fn heap_bytes(&self) -> usize {
        self.events.capacity() * std::mem::size_of::<Buffered>() + self.text.heap_bytes()
    }

    pub(super) fn new(serial: u64, ctx: &Ctx<'_>, line: u64, ts: f64) -> Req {
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
            last_survivors: LastSurvivors::None,
            running_filter: None,
            instances: Vec::new(),
            pending: None,
            pending_has_outcome: false,
            run_decisions: Vec::new(),
            done: Vec::new(),
            prompt_tokens: None,
            hit_prefix_tokens: None,
            producers: crate::decision::PrefixProducers::default(),
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
    pub(super) fn new_decision(
        &self,
        text: &Arena,
        file: &str,
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

    pub(super) fn finalize_pending(&mut self) {
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

    pub(super) fn end_run(&mut self) {
        self.finalize_pending();
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

    pub(super) fn new_run(&mut self) {
        self.last_na = false;
        self.end_run();
        if self.run_active {
            self.run += 1;
        }
        self.run_active = false;
    }

    /// Decisions that scorer and picker lines apply to.
    pub(super) fn scored(&mut self) -> impl Iterator<Item = &mut Decision> {
        self.run_decisions
            .iter_mut()
            .chain(self.pending.iter_mut())
            .map(|d| &mut **d)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_filter(
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
                self.last_survivors = LastSurvivors::Of(self.run_decisions.len() - 1);
            }
        }
        self.pending_has_outcome = false;
        self.instances.push(name.to_string());
        if let Some(s) = survivors {
            self.last_survivors = LastSurvivors::Owned(s);
        }
        self.running_filter = None;
        self.run_active = true;
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
    d.extras = l.extras;
    d.flags = d.flags.union(l.flags);
}

impl Req {
    /// Applies one event (its strings in `text`), in program order.
    pub(super) fn apply(&mut self, ev: Buffered, text: &Arena, file: &str, infer: bool) {
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
                r.last_survivors = LastSurvivors::None;
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
                ..
            } => {
                r.producers.precise_total_blocks = Some(total_blocks);
                r.producers.precise_max_match_blocks = Some(max_match_blocks);
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
                        (Some(t), Some(p)) if p > 0.0 => Some(gatecal_filter::ttft_ms(t, p)),
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
                    r.last_survivors = LastSurvivors::Owned(Vec::new());
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
