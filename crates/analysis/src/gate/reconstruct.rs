//! Reconstruction of the gate input of every decision, with its evidence.
//!
//! # What the logs say
//!
//! At `-v=4` the EPP logs the gate input only when the gate breaks
//! (`TTFT load gate broken`, `penalty`): that is `logged` evidence, exact.
//! It never logs per-endpoint in-flight tokens. What it does log, per
//! decision, is `TokenLoadScorer scoring` for the endpoints that survived the
//! filter, whose `tokenLoad` is the endpoint's in-flight tokens **plus this
//! request's uncached tokens on it** (capped at `queueThresholdTokens`).
//! Scorers run after filters, so a decision the filter narrowed shows only its
//! sticky endpoints.
//!
//! # Method
//!
//! Decisions are first put back in log-time order ([`crate::Reorder`]). Per
//! deployment, a tracker then keeps, for every endpoint, a model of its queue:
//! the uncached tokens of each request in flight, oldest first, as of the
//! endpoint's last estimate.
//!
//! * **Measuring an endpoint** from a decision's own lines:
//!   `inFlight = tokenLoad - uncached`, `uncached` being this request's
//!   uncached tokens there:
//!   - a sticky survivor of a narrowed decision: `(1 - prefixScore) * prompt`
//!     when the prefix scorer's score and the prompt length are logged,
//!     `prompt - hitPrefix` from the PD decider's line, else the
//!     deployment's typical value, learned as the median `tokenLoad` of
//!     sticky survivors whose queue model is empty (then `tokenLoad` is all
//!     uncached). Sticky endpoints hold at least `affinityThreshold` of the
//!     prompt, so this part is small;
//!   - an endpoint of a decision that kept all (no sticky endpoint, broken
//!     gate, exploration, missing signal): the request's uncached tokens `U`
//!     are the same on every endpoint without its prefix. `U = prompt - hit`
//!     when logged; for a broken gate `U = min tokenLoad - bestNonSticky` in
//!     tokens (the logged TTFT times the peak); otherwise the largest
//!     `tokenLoad - last estimate` over endpoints seen within the staleness
//!     (an endpoint whose queue did not change shows exactly `U`; one that
//!     drained shows less), bounded by `min tokenLoad`. An endpoint whose
//!     `tokenLoad` exceeds its modelled queue by less than `U/2` holds the
//!     request's prefix, and gets the typical sticky uncached share instead.
//!
//!   A measurement within 2 % + 256 tokens of the model keeps the model (so
//!   a long prefill's progress is kept); otherwise requests that must have
//!   finished are dropped from the front and the rest reconciled.
//! * **Routing.** The chosen endpoint (picker line) receives the request:
//!   its queue grows to this decision's `tokenLoad`.
//! * **Draining.** The EPP releases a request's tokens at its first streamed
//!   chunk, and vLLM prefills waiting requests first come, first served, so a
//!   queue drains front first, one whole request at a time, at the
//!   deployment's drain rate: tokens gone per second between consecutive
//!   measurements of busy endpoints (a ratio of sums over the last 512
//!   pairs; used once 8 pairs exist).
//! * **Narrowed decisions** (`narrowed to sticky` with `sticky < total`): the
//!   best sticky side is the lowest measurement among this decision's
//!   survivors; the best non-sticky side is the lowest drained queue among
//!   the deployment's other endpoints estimated no longer than
//!   `max_staleness` seconds before (carried forward). The evidence is
//!   `reconstructed`; with no fresh non-sticky endpoint it is `unknown`,
//!   counted and never dropped.
//! * **Freshness**, one rule wherever a carried-forward estimate is used
//!   (the non-sticky side above, the keep-all `U`, the sticky share of a
//!   keep-all endpoint, the sticky uncached samples): an estimate is fresh
//!   when it is at most `max_staleness` seconds older than the decision; a
//!   decision or an estimate without a time counts as fresh (nothing says
//!   it is old).
//! * **Unknown outcomes** (a malformed filter line, say): the decision's
//!   own gate stays unknown, but its scorer lines measure the endpoints as
//!   a keep-all decision's do, and its request is routed: later decisions
//!   keep their evidence.
//! * **Latency-predictor configs** (`ttftSource: latencyPredictor`): the
//!   gate compares a model's TTFT predictions, which no line logs; narrowed
//!   decisions are `unknown`, and only logged breaks give the gate input.
//! * **Exact candidates** (decisions JSON lines with in-flight tokens, or a
//!   build that logs them): the filter core replays them, `observed` evidence
//!   (or `logged` when the gate line is there too: its penalty is used).
//! * **Version-2 decision records** carry the gate as it was analysed: its
//!   evidence label, gate input, replay candidates and counted outcome are
//!   taken as given ([`Reconstructor::sample`] does not reconstruct them
//!   again, and they do not feed the carried-forward loads). When the config
//!   in force differs from the record's, the gate input and an unlogged
//!   outcome are replayed from the record's candidates under it (a logged
//!   gate input stays as logged).
//!
//! * **Traced decisions** (a `filter_prefix_cache_affinity` span's
//!   `llm_d.epp.filter.ttft_penalty_ms`, read from traces or joined to the
//!   log decision by request id and profile): the gate input is exact,
//!   `traced` evidence. A log decision joined to its span is reconstructed
//!   first as if it had none; the reconstruction's value is kept beside the
//!   traced one ([`GateSample::reconstructed_ms`]) to measure its error on
//!   real traffic, and the traced value is used. The replay of a traced
//!   decision is two sides whose loads differ by the traced input, as for a
//!   logged break.
//!
//! # Error
//!
//! Measured per decision against simulator truth in `docs/methodology.md`
//! (`cargo run --release -p gate-dist --example reconstruction_error`). The
//! sources are the uncached estimates above, the drain model's timing (a
//! carried-forward queue can be off by one whole request), and staleness.

use rustc_hash::FxHashMap;

use gatecal_filter::{
    Candidate, Config, Outcome, TtftSource, best_by_ttft, decide_verdict, ttft_ms,
};
use serde::Serialize;

use crate::gate::hist::UNBOUNDED_MS;
pub use crate::gate::queue::DrainRate;
use crate::gate::queue::{DepTracker, Obs, is_fresh};
pub use crate::gate::sample::{Evidence, GateSample, Replay};
use crate::input::DecisionInput;

/// Options of the reconstruction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ReconstructOptions {
    /// Longest time, in seconds, a carried-forward load is trusted. Default 30.
    pub max_staleness_s: f64,
    /// Decisions are put back in time order within this many seconds of log
    /// time before reconstruction ([`crate::Reorder`]). Default 30.
    pub reorder_window_s: f64,
    /// Whether a censored hold also raises the queue model of the
    /// non-sticky endpoints it bounds (see `hold_floor`). Default false:
    /// measured against simulator truth, the feedback widened the error's
    /// lower tail (`docs/methodology.md` §3), so only the estimate is
    /// censored.
    pub censor_feedback: bool,
}

impl Default for ReconstructOptions {
    fn default() -> Self {
        ReconstructOptions {
            max_staleness_s: 30.0,
            reorder_window_s: crate::gate::reorder::DEFAULT_REORDER_WINDOW_S,
            censor_feedback: false,
        }
    }
}

/// Whether `config` releases the two-sided decision (sticky side `st`,
/// non-sticky side `nt` in-flight tokens).
fn releases(config: &Config, st: i64, nt: i64, matched: Option<i64>) -> bool {
    decide_verdict(config, &two_sided(st, nt, matched), 1.0)
        .outcome
        .is_release()
}

/// The censoring of a held decision: the EPP logged a hold, so its gate
/// input was at most the bar (the filter releases on a strict `>`). Returns
/// the non-sticky load to use: `nt` when `config` holds it, else the least
/// load above `nt` at which it holds (a binary search through the filter
/// core itself, so every mode and rounding agrees with the replay). `None`
/// when no load holds it (a config whose gate cannot hold).
pub fn hold_floor(config: &Config, st: i64, nt: i64, matched: Option<i64>) -> Option<i64> {
    if !releases(config, st, nt, matched) {
        return Some(nt);
    }
    // Equal loads give a zero gate input, which no bar releases.
    let (mut lo, mut hi) = (nt, st.max(nt));
    if releases(config, st, hi, matched) {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if releases(config, st, mid, matched) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// The sticky load of a logged break, raised by the few tokens that rounding
/// to whole tokens can cost, so that `config` (whose bar the logged penalty
/// exceeds) releases it as the EPP did.
fn release_ceiling(config: &Config, st: i64, nt: i64, matched: Option<i64>) -> i64 {
    let mut st = st;
    for _ in 0..4 {
        if releases(config, st, nt, matched) {
            break;
        }
        st += 1;
    }
    st
}

/// Feeds a censored hold back into the queue model: every fresh non-sticky
/// endpoint held at least `floor` in-flight tokens (the best one did, and it
/// is the least loaded), so one modelled below it gets the difference as
/// load this model missed.
fn raise_non_sticky(t: &mut DepTracker, staleness: f64, ts: f64, sticky: &[usize], floor: f64) {
    let rate = t.rate;
    let mut low = Vec::new();
    t.each_fresh(ts, staleness, |i, o| {
        if !sticky.contains(&i) && o.at(ts, rate) < floor {
            low.push(i);
        }
    });
    for i in low {
        t.ep_mut(i, |o| {
            let now = o.at(ts, rate);
            o.add(ts, floor - now, rate);
        });
    }
}

/// Carries endpoint loads forward, per deployment.
#[derive(Debug, Default)]
pub struct Reconstructor {
    opts: ReconstructOptions,
    /// Each deployment's index in `trackers`.
    index: FxHashMap<String, usize>,
    trackers: Vec<DepTracker>,
    /// Per-decision buffers, reused (no allocation per decision).
    scratch: Scratch,
}

/// Buffers of one decision.
#[derive(Debug, Default)]
struct Scratch {
    /// Each scored endpoint's index in the deployment's tracker, when it
    /// has one: looked up once per decision.
    ids: Vec<Option<usize>>,
    /// The tracker indices of a narrowed decision's sticky endpoints.
    sticky: Vec<usize>,
    /// A keep-all decision's estimates, between taking and recording them.
    est: Vec<Option<f64>>,
}

/// Builds the replay candidates for a two-sided gate: the best sticky and the
/// best non-sticky endpoint, with the sticky side's matched tokens when known
/// (`match_blocks = matched`, one token per block, so the prefix score is 1).
/// The candidates have empty ids (no allocation): sticky first.
pub fn two_sided(
    sticky_tokens: i64,
    non_sticky_tokens: i64,
    matched: Option<i64>,
) -> Vec<Candidate> {
    let sticky = match matched {
        Some(m) if m > 0 => Candidate::default().with_match(m, m, 1),
        // No block size: 0 matched tokens, the break-even test is skipped.
        _ => Candidate {
            match_blocks: Some(1),
            total_blocks: Some(1),
            ..Candidate::default()
        },
    };
    vec![
        sticky.with_in_flight_tokens(sticky_tokens),
        Candidate::default()
            .with_match(0, 1, 1)
            .with_in_flight_tokens(non_sticky_tokens),
    ]
}

fn ms_to_tokens(ms: f64, peak: f64) -> i64 {
    (ms * peak / 1000.0).round() as i64
}

/// The replay of a traced gate input `p` (ms): two sides whose TTFTs differ
/// by `p`, as in-flight tokens at the config's peak or as the latency
/// predictor's TTFTs; a MaxFloat64 sentinel (a side without a prediction)
/// or a non-finite input replays as the traced outcome.
fn traced_replay(
    p: f64,
    outcome: Option<Outcome>,
    matched: Option<i64>,
    config: &Config,
) -> Replay {
    if !p.is_finite() || p.abs() >= UNBOUNDED_MS {
        return outcome.map_or(Replay::Unknown, Replay::Fixed);
    }
    if config.ttft_source == TtftSource::LatencyPredictor {
        let mut c = two_sided(0, 0, matched);
        c[0].predicted_ttft_ms = Some(p.max(0.0));
        c[1].predicted_ttft_ms = Some((-p).max(0.0));
        return Replay::Candidates(c);
    }
    let t = ms_to_tokens(p.abs(), config.peak_prefill_throughput);
    Replay::Candidates(if p >= 0.0 {
        two_sided(t, 0, matched)
    } else {
        two_sided(0, t, matched)
    })
}

impl Reconstructor {
    /// A reconstructor with the given options.
    pub fn new(opts: ReconstructOptions) -> Reconstructor {
        Reconstructor {
            opts,
            index: FxHashMap::default(),
            trackers: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Each deployment's drain-rate estimate, when it has enough samples.
    pub fn drain_rates(&self) -> std::collections::BTreeMap<String, DrainRate> {
        self.index
            .iter()
            .filter_map(|(d, &i)| {
                let t = &self.trackers[i];
                t.rate.map(|median| {
                    (
                        d.clone(),
                        DrainRate {
                            median,
                            samples: t.total_samples,
                        },
                    )
                })
            })
            .collect()
    }

    /// Turns one decision into a sample, updating the carried-forward loads.
    /// `config` is the deployment's filter config.
    pub fn sample(&mut self, d: &DecisionInput, config: &Config) -> GateSample {
        let Some(t) = d.traced else {
            return self.sample_logged(d, config);
        };
        let mut s = if t.joined {
            self.sample_logged(d, config)
        } else {
            // A decision of a trace input: no loads to track.
            GateSample {
                ts: d.ts,
                request_id: d.request_id.clone(),
                outcome: d.outcome,
                outcome_logged: d.outcome.is_some(),
                evidence: None,
                gate_input_ms: None,
                replay: d.outcome.map_or(Replay::Unknown, Replay::Fixed),
                matched_tokens: d.hit_prefix_tokens,
                logged_bar_ms: None,
                censored_ms: None,
                logged_peak: None,
                traced: true,
                traced_joined: false,
                reconstructed: None,
            }
        };
        s.traced = true;
        s.traced_joined = t.joined;
        if let Some(p) = t.penalty_ms {
            if t.joined {
                s.reconstructed = Some((s.evidence.unwrap_or(Evidence::Unknown), s.gate_input_ms));
            }
            s.evidence = Some(Evidence::Traced);
            s.gate_input_ms = Some(p);
            // The exact input needs no censoring by the outcome.
            s.censored_ms = None;
            let exact = matches!(s.replay, Replay::Candidates(_))
                && matches!(
                    s.reconstructed,
                    Some((Evidence::Observed | Evidence::Logged, _))
                );
            if !exact {
                s.replay = traced_replay(p, s.outcome, s.matched_tokens, config);
            }
        }
        s
    }

    fn sample_logged(&mut self, d: &DecisionInput, config: &Config) -> GateSample {
        let mut s = GateSample {
            ts: d.ts,
            request_id: d.request_id.clone(),
            outcome: d.outcome,
            outcome_logged: d.outcome.is_some(),
            evidence: None,
            gate_input_ms: None,
            replay: Replay::Unknown,
            matched_tokens: None,
            logged_bar_ms: d.logged_gate.and_then(|g| g.max_penalty_ms),
            censored_ms: None,
            logged_peak: d.prefill_throughput,
            traced: false,
            traced_joined: false,
            reconstructed: None,
        };
        if let Some(r) = d.recorded.as_ref().filter(|r| r.gate.is_some()) {
            given(d, r, config, &mut s);
            return s;
        }
        if let Some(exact) = &d.exact {
            self.exact(d, exact, config, &mut s);
            return s;
        }
        let peak = config.peak_prefill_throughput;
        let ts = d.ts.unwrap_or(f64::NAN);
        // Matched tokens of the best sticky endpoint, when the decider logged them.
        let matched = d.hit_prefix_tokens;
        s.matched_tokens = matched;
        let staleness = self.opts.max_staleness_s;
        let feedback = self.opts.censor_feedback;
        // The deployment's tracker and this decision's endpoints in it,
        // looked up once for the whole decision.
        let t = tracker(&mut self.index, &mut self.trackers, &d.deployment);
        let Scratch { ids, sticky, est } = &mut self.scratch;
        ids.clear();
        ids.extend(d.scored.iter().map(|e| t.id(&e.endpoint)));
        let ids = &ids[..];
        match d.outcome {
            Some(Outcome::Sticky) => {
                let is_sticky = |ep: &str| match &d.survivors {
                    Some(v) => v.iter().any(|x| x == ep),
                    None => d.scored.iter().any(|e| e.endpoint == ep),
                };
                sticky.clear();
                match &d.survivors {
                    Some(v) => sticky.extend(v.iter().filter_map(|x| t.id(x))),
                    None => sticky.extend(ids.iter().flatten()),
                }
                let typical = learn_sticky_uncached(t, staleness, d, ids, ts);
                let has_non_sticky = match (d.sticky_count, d.total) {
                    (Some(st), Some(t)) => st < t,
                    _ => true,
                };
                let gate_ran = has_non_sticky && config.ttft_source != TtftSource::LatencyPredictor;
                // The non-sticky side is the carried-forward state before this
                // decision's own measurements.
                let best_non = if gate_ran {
                    best_fresh_excluding(t, staleness, ts, sticky)
                } else {
                    None
                };
                let mut best_sticky: Option<f64> = None;
                for (e, &id) in d.scored.iter().zip(ids) {
                    let Some(load) = e.token_load else { continue };
                    let uncached = match (d.prompt_tokens, e.prefix_score, d.hit_prefix_tokens) {
                        (Some(p), Some(sc), _) => (1.0 - sc).max(0.0) * p as f64,
                        (Some(p), None, Some(h)) => p.saturating_sub(h).max(0) as f64,
                        _ => typical.unwrap_or(0.0).min(load),
                    };
                    let est = (load - uncached).max(0.0);
                    let is_sticky = match id {
                        Some(i) => sticky.contains(&i),
                        None => is_sticky(&e.endpoint),
                    };
                    if is_sticky {
                        best_sticky = Some(best_sticky.map_or(est, |b: f64| b.min(est)));
                    }
                    update(t, staleness, ts, id, &e.endpoint, est);
                }
                if !has_non_sticky {
                    s.replay = Replay::Fixed(Outcome::Sticky);
                } else if !gate_ran {
                    // The gate compared a model's predictions, which no log
                    // line shows and loads cannot stand in for.
                    s.evidence = Some(Evidence::Unknown);
                    s.replay = Replay::Unknown;
                } else {
                    // The gate ran (the EPP narrowed after evaluating it).
                    match (best_sticky, best_non) {
                        (Some(bs), Some(bn)) => {
                            let (st, nt) = (bs.round() as i64, bn.round() as i64);
                            // The EPP held: the gate input was at most the bar.
                            let held = hold_floor(config, st, nt, matched);
                            let nt = match held {
                                Some(h) if h > nt => {
                                    s.censored_ms = Some(ttft_ms((h - nt) as f64, peak));
                                    if feedback {
                                        raise_non_sticky(t, staleness, ts, sticky, h as f64);
                                    }
                                    h
                                }
                                _ => nt,
                            };
                            s.evidence = Some(Evidence::Reconstructed);
                            s.gate_input_ms = Some(ttft_ms(st.saturating_sub(nt) as f64, peak));
                            s.replay = Replay::Candidates(two_sided(st, nt, matched));
                        }
                        _ => {
                            s.evidence = Some(Evidence::Unknown);
                            s.replay = Replay::Unknown;
                        }
                    }
                }
                route(t, d, ids, ts);
            }
            Some(Outcome::LoadOverride) => {
                let g = d.logged_gate;
                // A NaN penalty (zap's `"NaN"`) says nothing: unknown.
                let penalty = g.map(|g| g.penalty_ms).filter(|p| !p.is_nan());
                let non_tokens = g
                    .and_then(|g| g.best_non_sticky_ttft_ms)
                    .map(|ms| ms_to_tokens(ms, peak));
                match penalty {
                    Some(p) => {
                        s.evidence = Some(Evidence::Logged);
                        s.gate_input_ms = Some(p);
                        if p.abs() < UNBOUNDED_MS
                            && config.ttft_source == TtftSource::LatencyPredictor
                        {
                            // Replay the logged predictions themselves.
                            let n_ms = g.and_then(|g| g.best_non_sticky_ttft_ms).unwrap_or(0.0);
                            let s_ms = g.and_then(|g| g.best_sticky_ttft_ms).unwrap_or(n_ms + p);
                            let mut c = two_sided(0, 0, matched);
                            c[0].predicted_ttft_ms = Some(s_ms);
                            c[1].predicted_ttft_ms = Some(n_ms);
                            s.replay = Replay::Candidates(c);
                        } else if p.abs() < UNBOUNDED_MS {
                            let sticky_tokens = g
                                .and_then(|g| g.best_sticky_ttft_ms)
                                .filter(|v| v.abs() < UNBOUNDED_MS)
                                .map(|ms| ms_to_tokens(ms, peak))
                                .unwrap_or_else(|| {
                                    ms_to_tokens(p, peak).saturating_add(non_tokens.unwrap_or(0))
                                });
                            let nt = non_tokens.unwrap_or(0);
                            // Rounding to tokens must not turn the logged
                            // break into a hold under the bar it broke.
                            let sticky_tokens = if p > config.max_ttft_penalty_ms {
                                release_ceiling(config, sticky_tokens, nt, matched)
                            } else {
                                sticky_tokens
                            };
                            s.replay = Replay::Candidates(two_sided(sticky_tokens, nt, matched));
                        } else {
                            // MaxFloat64 sentinel: the sticky side had no
                            // prediction; any bar releases it.
                            s.replay = Replay::Fixed(Outcome::LoadOverride);
                        }
                    }
                    None => {
                        // A release without its gate line (another build's
                        // gate): nothing to replay.
                        s.evidence = Some(Evidence::Unknown);
                        s.replay = Replay::Fixed(Outcome::LoadOverride);
                    }
                }
                let u = uncached_keep_all(t, staleness, d, ids, non_tokens);
                update_keep_all(t, staleness, d, ids, ts, u, est);
                route(t, d, ids, ts);
            }
            o => {
                // An unknown outcome (a malformed filter line, say) stays
                // unknown, but its scorer lines still measure the queues.
                s.replay = o.map_or(Replay::Unknown, Replay::Fixed);
                let u = uncached_keep_all(t, staleness, d, ids, None);
                update_keep_all(t, staleness, d, ids, ts, u, est);
                route(t, d, ids, ts);
            }
        }
        s
    }

    fn exact(
        &mut self,
        d: &DecisionInput,
        exact: &[Candidate],
        config: &Config,
        s: &mut GateSample,
    ) {
        let replayed = decide_verdict(config, exact, 1.0);
        if s.outcome.is_none() {
            s.outcome = Some(replayed.outcome);
        }
        let sticky: Vec<usize> = (0..exact.len())
            .filter(|&i| exact[i].prefix_score() >= config.affinity_threshold)
            .collect();
        if let Some(b) = best_by_ttft(config, exact, &sticky) {
            let c = &exact[b.index];
            if c.match_blocks.is_some() && c.block_size_tokens.is_some() {
                s.matched_tokens = Some(c.matched_tokens());
            }
        }
        // The gate ran if the replay evaluated it, unless the EPP logged an
        // outcome decided before the gate (an exploration draw, say).
        let before_gate = matches!(
            d.outcome,
            Some(Outcome::Exploration | Outcome::NoMatch | Outcome::NotApplicable)
        );
        if let Some(g) = replayed.gate.filter(|_| !before_gate) {
            s.gate_input_ms = Some(g.gate_input_ms);
            s.evidence = Some(Evidence::Observed);
        }
        if let Some(g) = d.logged_gate {
            s.gate_input_ms = Some(g.penalty_ms);
            s.evidence = Some(Evidence::Logged);
        }
        s.replay = Replay::Candidates(exact.to_vec());
        let ts = d.ts.unwrap_or(f64::NAN);
        let staleness = self.opts.max_staleness_s;
        let t = tracker(&mut self.index, &mut self.trackers, &d.deployment);
        for c in exact {
            if let Some(tokens) = c.in_flight_tokens {
                update(t, staleness, ts, None, &c.id, tokens as f64);
            }
        }
    }
}

/// A version-2 record's gate, as given; replayed under `config` only when
/// the record's config differs.
fn given(d: &DecisionInput, r: &gatecal_parser::Recorded, config: &Config, s: &mut GateSample) {
    use gatecal_parser::ReplayRecord;
    let Some(g) = &r.gate else {
        return;
    };
    s.outcome = g.outcome.or(d.outcome);
    s.evidence = g.evidence.as_deref().map(Evidence::from_label);
    s.gate_input_ms = g.input_ms;
    s.matched_tokens = g.matched_tokens;
    s.logged_bar_ms = g.logged_bar_ms.or(s.logged_bar_ms);
    s.censored_ms = g.censored_ms;
    s.logged_peak = g.logged_peak.or(s.logged_peak);
    s.replay = match &g.replay {
        ReplayRecord::Unknown => Replay::Unknown,
        ReplayRecord::Fixed(o) => Replay::Fixed(*o),
        ReplayRecord::Candidates(c) => {
            Replay::Candidates(c.iter().map(|c| c.to_candidate()).collect())
        }
    };
    let same = r.config.as_ref().is_some_and(|(_, c)| c == config);
    // Under another config the logged hold censors again, from the estimate
    // before the record's censoring.
    if let (false, Some(Evidence::Reconstructed), Some(Outcome::Sticky), Replay::Candidates(c)) = (
        same,
        s.evidence,
        s.outcome.filter(|_| s.outcome_logged),
        &mut s.replay,
    ) && let [st, nt] = c.as_mut_slice()
        && let (Some(st_t), Some(nt_t)) = (st.in_flight_tokens, nt.in_flight_tokens)
    {
        let rec_peak = r.config.as_ref().map(|(_, c)| c.peak_prefill_throughput);
        let nt0 = match (g.censored_ms, rec_peak) {
            (Some(m), Some(p)) => nt_t - ms_to_tokens(m, p),
            _ => nt_t,
        };
        if let Some(h) = hold_floor(config, st_t, nt0, s.matched_tokens) {
            nt.in_flight_tokens = Some(h);
            s.censored_ms =
                (h > nt0).then(|| ttft_ms((h - nt0) as f64, config.peak_prefill_throughput));
        }
    }
    if let (false, Replay::Candidates(c)) = (same, &s.replay) {
        let v = decide_verdict(config, c, 1.0);
        if s.evidence.is_some_and(|e| e != Evidence::Logged)
            && let Some(gate) = v.gate
        {
            s.gate_input_ms = Some(gate.gate_input_ms);
        }
        if !s.outcome_logged {
            s.outcome = Some(v.outcome);
        }
    }
}

/// The deployment's tracker, made on first use (no allocation after; one
/// look-up of the name).
fn tracker<'a>(
    index: &mut FxHashMap<String, usize>,
    trackers: &'a mut Vec<DepTracker>,
    deployment: &str,
) -> &'a mut DepTracker {
    let i = match index.get(deployment) {
        Some(&i) => i,
        None => {
            index.insert(deployment.to_string(), trackers.len());
            trackers.push(DepTracker::default());
            trackers.len() - 1
        }
    };
    &mut trackers[i]
}

/// Learns the typical uncached tokens of a request on its sticky endpoint
/// from survivors whose queue the tracker knows to be empty and fresh (their
/// `tokenLoad` is then all uncached), and returns the deployment's current
/// median. `ids`: the scored endpoints' tracker indices.
fn learn_sticky_uncached(
    t: &mut DepTracker,
    staleness: f64,
    d: &DecisionInput,
    ids: &[Option<usize>],
    ts: f64,
) -> Option<f64> {
    for (e, &id) in d.scored.iter().zip(ids) {
        let (Some(load), Some(i)) = (e.token_load, id) else {
            continue;
        };
        let o = t.ep(i);
        if is_fresh(ts, o.ts, staleness) && t.rate.is_some() && o.at(ts, t.rate) == 0.0 {
            t.add_sticky_uncached(load);
        }
    }
    t.sticky_uncached_est
}

/// The request's uncached tokens on an endpoint without its prefix, for a
/// decision whose scorer lines cover every endpoint.
fn uncached_keep_all(
    t: &DepTracker,
    staleness: f64,
    d: &DecisionInput,
    ids: &[Option<usize>],
    best_non_tokens: Option<i64>,
) -> f64 {
    if let (Some(p), Some(h)) = (d.prompt_tokens, d.hit_prefix_tokens) {
        return p.saturating_sub(h).max(0) as f64;
    }
    let min_load = d
        .scored
        .iter()
        .filter_map(|e| e.token_load)
        .fold(f64::INFINITY, f64::min);
    if !min_load.is_finite() {
        return 0.0;
    }
    if let Some(n) = best_non_tokens {
        return (min_load - n as f64).max(0.0);
    }
    // Against the carried-forward loads: an endpoint whose queue did not
    // change since it was last seen shows exactly `U` more; one that
    // drained shows less. The largest difference is the best guess, and
    // `min tokenLoad` bounds it from above.
    let ts = d.ts.unwrap_or(f64::NAN);
    let best_diff = d
        .scored
        .iter()
        .zip(ids)
        .filter_map(|(e, &id)| {
            let load = e.token_load?;
            let prior = t.ep(id?);
            is_fresh(ts, prior.ts, staleness).then_some(load - prior.total())
        })
        .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))));
    match best_diff {
        // Not `clamp`: it panics on `min_load < 0` (a negative `tokenLoad`
        // from a decision record).
        Some(u) => u.min(min_load).max(0.0),
        None => min_load,
    }
}

/// Measures every endpoint of a keep-all decision: all estimates are taken
/// against the state before this decision, then recorded in order (`est`
/// holds them in between, so no allocation per decision).
fn update_keep_all(
    t: &mut DepTracker,
    staleness: f64,
    d: &DecisionInput,
    ids: &[Option<usize>],
    ts: f64,
    uncached: f64,
    est: &mut Vec<Option<f64>>,
) {
    let typical = t.sticky_uncached_est;
    est.clear();
    est.extend(d.scored.iter().zip(ids).map(|(e, &id)| {
        let load = e.token_load;
        Some(match e.in_flight_tokens {
            Some(t) => t as f64,
            None => {
                let load = load?;
                // An endpoint that grew by much less than `U` since its
                // last estimate holds this request's prefix: its uncached
                // share is the sticky kind (its queue is read only when
                // that share is known and smaller).
                let sticky_share = typical.filter(|&u_s| {
                    u_s < uncached
                        && id.is_some_and(|i| {
                            let o = t.ep(i);
                            is_fresh(ts, o.ts, staleness)
                                && load - o.at(ts, t.rate) < 0.5 * uncached
                        })
                });
                match sticky_share {
                    Some(u_s) => (load - u_s).max(0.0),
                    None => (load - uncached).max(0.0),
                }
            }
        })
    }));
    for ((e, &id), est) in d.scored.iter().zip(ids).zip(est.iter()) {
        if let Some(est) = *est {
            update(t, staleness, ts, id, &e.endpoint, est);
        }
    }
}

/// The request joins the queue of the endpoint it was sent to: that
/// endpoint's in-flight tokens become its `tokenLoad` of this decision
/// (in-flight plus the request's uncached tokens there).
fn route(t: &mut DepTracker, d: &DecisionInput, ids: &[Option<usize>], ts: f64) {
    let Some(chosen) = &d.chosen else { return };
    let Some((load, id)) = d
        .scored
        .iter()
        .zip(ids)
        .find(|(e, _)| &e.endpoint == chosen)
        .and_then(|(e, &id)| Some((e.token_load?, id)))
    else {
        return;
    };
    let rate = t.rate;
    // An endpoint new to the tracker may have been added by this decision's
    // measurements.
    match id.or_else(|| t.id(chosen)) {
        Some(i) => t.ep_mut(i, |o| {
            let before = o.at(ts, rate);
            o.add(ts, load - before, rate);
        }),
        None => t.insert(chosen, Obs::new(ts, load)),
    }
}

/// Records a new estimate of endpoint `ep` (tracker index `id`, when known).
/// A *measured* estimate of a busy endpoint that was busy at its previous
/// estimate yields a drain-rate sample: tokens gone per second in between
/// (arrivals in between are all routed by this EPP and already added, so the
/// difference is what drained).
fn update(t: &mut DepTracker, staleness: f64, ts: f64, id: Option<usize>, ep: &str, tokens: f64) {
    let rate = t.rate;
    let Some(i) = id.or_else(|| t.id(ep)) else {
        t.insert(ep, Obs::new(ts, tokens));
        return;
    };
    // Lines can be slightly out of order: keep the newest observation.
    if ts < t.ep(i).ts {
        return;
    }
    let (before, dt) = t.ep_mut(i, |o| {
        let (before, dt) = (o.total(), ts - o.ts);
        o.measure(ts, tokens, rate, before);
        (before, dt)
    });
    if before > 0.0 && tokens > 0.0 && dt > 0.2 && dt <= staleness {
        t.add_rate(before - tokens, dt);
    }
}

/// The lowest drained queue among the endpoints that are not sticky (tracker
/// indices `sticky`) and were estimated no longer than `staleness` seconds
/// before `ts`.
fn best_fresh_excluding(t: &DepTracker, staleness: f64, ts: f64, sticky: &[usize]) -> Option<f64> {
    // Unknown times on either side: trust the carry-forward.
    let mut best: Option<f64> = None;
    t.each_fresh(ts, staleness, |i, o| {
        if !sticky.contains(&i) {
            let v = t.now(o, ts);
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    });
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_filter::PenaltyMode;

    #[test]
    fn hold_floor_is_the_least_load_the_config_holds() {
        let c = Config::default();
        // (400000 - 0) / 15928 s = 25.1 s > 18 s: released as is.
        let h = hold_floor(&c, 400_000, 0, None).unwrap();
        assert!(!releases(&c, 400_000, h, None));
        assert!(releases(&c, 400_000, h - 1, None));
        // Already held: unchanged.
        assert_eq!(hold_floor(&c, 10_000, 0, None), Some(0));
        // Matched tokens: released when the difference exceeds them.
        let m = Config {
            penalty_mode: PenaltyMode::MatchedTokens,
            ..Config::default()
        };
        assert_eq!(hold_floor(&m, 50_000, 0, Some(4_096)), Some(50_000 - 4_096));
    }

    use crate::input::{LoggedGate, ScoredEndpoint};

    /// A peak of 10 000 tokens/s: 10 tokens per ms, so the arithmetic
    /// below stays in round numbers.
    fn config() -> Config {
        Config {
            peak_prefill_throughput: 10_000.0,
            ..Config::default()
        }
    }

    fn scored(endpoint: &str, token_load: f64) -> ScoredEndpoint {
        ScoredEndpoint {
            endpoint: endpoint.into(),
            token_load: Some(token_load),
            prefix_score: None,
            in_flight_tokens: None,
        }
    }

    fn decision(ts: Option<f64>, outcome: Outcome, scored: Vec<ScoredEndpoint>) -> DecisionInput {
        DecisionInput {
            deployment: "d".into(),
            ts,
            outcome: Some(outcome),
            scored,
            ..DecisionInput::default()
        }
    }

    /// The modelled queue of an endpoint of deployment `d`.
    fn queue(r: &Reconstructor, endpoint: &str) -> f64 {
        let t = &r.trackers[r.index["d"]];
        t.ep(t.id(endpoint).expect("endpoint tracked")).total()
    }

    /// Endpoints `a` at 3 000 and `b` at 1 000 in-flight tokens at `ts`,
    /// from a keep-all decision whose uncached tokens the decider logged.
    fn two_endpoints(r: &mut Reconstructor, ts: f64) {
        let mut d = decision(
            Some(ts),
            Outcome::NoMatch,
            vec![scored("a", 5_000.0), scored("b", 3_000.0)],
        );
        // U = prompt - hit = 2 000 - 0.
        d.prompt_tokens = Some(2_000);
        d.hit_prefix_tokens = Some(0);
        let s = r.sample(&d, &config());
        assert_eq!(s.replay, Replay::Fixed(Outcome::NoMatch));
        assert_eq!(s.evidence, None, "the gate was not evaluated");
        // a: 5 000 - 2 000; b: 3 000 - 2 000.
        assert_eq!((queue(r, "a"), queue(r, "b")), (3_000.0, 1_000.0));
    }

    #[test]
    fn keep_all_measures_every_endpoint_less_the_requests_uncached_tokens() {
        let mut r = Reconstructor::new(ReconstructOptions::default());
        two_endpoints(&mut r, 100.0);
        // No prompt logged: U is the largest growth since the last estimate,
        // max(4 600 - 3 000, 2 900 - 1 000) = 1 900, bounded by the least
        // tokenLoad (2 900). a: 4 600 - 1 900 = 2 700, within the noise of
        // its 3 000 (2 % of 3 000 + 256 = 316): kept at 3 000; b: 2 900 -
        // 1 900 = 1 000, as it was.
        let d = decision(
            Some(101.0),
            Outcome::Exploration,
            vec![scored("a", 4_600.0), scored("b", 2_900.0)],
        );
        r.sample(&d, &config());
        assert_eq!((queue(&r, "a"), queue(&r, "b")), (3_000.0, 1_000.0));
        // Growth since the last estimates: a 6 000 - 3 000 = 3 000, b 1 500
        // - 1 000 = 500 (c is new: no estimate to compare), so U = 3 000,
        // bounded by the least tokenLoad: 1 500.
        let d = decision(
            Some(102.0),
            Outcome::Exploration,
            vec![
                scored("a", 6_000.0),
                scored("b", 1_500.0),
                scored("c", 8_000.0),
            ],
        );
        r.sample(&d, &config());
        // a: 6 000 - 1 500 = 4 500, beyond the noise (2 % of 4 500 + 256 =
        // 346) above 3 000: the 1 500 more join as a block this EPP did not
        // route. b: 1 500 - 1 500 = 0: its request must have finished. c:
        // 8 000 - 1 500 = 6 500.
        assert_eq!(queue(&r, "a"), 4_500.0);
        assert_eq!(queue(&r, "b"), 0.0);
        assert_eq!(queue(&r, "c"), 6_500.0);
    }

    #[test]
    fn a_logged_break_gives_the_keep_all_uncached_tokens_from_its_non_sticky_ttft() {
        let mut r = Reconstructor::new(ReconstructOptions::default());
        let mut d = decision(
            Some(100.0),
            Outcome::LoadOverride,
            vec![scored("a", 9_000.0), scored("b", 7_000.0)],
        );
        d.logged_gate = Some(LoggedGate {
            best_sticky_ttft_ms: Some(25_000.0),
            best_non_sticky_ttft_ms: Some(500.0),
            penalty_ms: 24_500.0,
            max_penalty_ms: Some(18_000.0),
        });
        let s = r.sample(&d, &config());
        assert_eq!(s.evidence, Some(Evidence::Logged));
        assert_eq!(s.gate_input_ms, Some(24_500.0));
        // Sides of 25 000 ms and 500 ms at 10 tokens/ms.
        assert_eq!(
            s.replay,
            Replay::Candidates(two_sided(250_000, 5_000, None))
        );
        // bestNonSticky = 500 ms = 5 000 tokens; U = least tokenLoad -
        // 5 000 = 2 000; a: 9 000 - 2 000, b: 7 000 - 2 000.
        assert_eq!((queue(&r, "a"), queue(&r, "b")), (7_000.0, 5_000.0));
    }

    #[test]
    fn routing_sets_the_chosen_endpoints_queue_to_its_token_load() {
        let mut r = Reconstructor::new(ReconstructOptions::default());
        let mut d = decision(
            Some(100.0),
            Outcome::NoMatch,
            vec![scored("a", 5_000.0), scored("b", 3_000.0)],
        );
        d.prompt_tokens = Some(2_000);
        d.hit_prefix_tokens = Some(0);
        d.chosen = Some("b".into());
        r.sample(&d, &config());
        // b measured at 3 000 - 2 000 = 1 000, then the request joins it:
        // in flight 1 000 + its own 2 000 = its tokenLoad, 3 000.
        assert_eq!((queue(&r, "a"), queue(&r, "b")), (3_000.0, 3_000.0));
        let t = &r.trackers[r.index["d"]];
        let b = t.ep(t.id("b").expect("b"));
        assert_eq!(
            b.items.iter().copied().collect::<Vec<_>>(),
            vec![1_000.0, 2_000.0]
        );
    }

    /// A narrowed decision at `ts`: `a` the only sticky survivor, its
    /// tokenLoad 3 400 of which (1 - 0.8) × 2 000 = 400 uncached.
    fn narrowed(ts: Option<f64>) -> DecisionInput {
        let mut d = decision(
            ts,
            Outcome::Sticky,
            vec![ScoredEndpoint {
                prefix_score: Some(0.8),
                ..scored("a", 3_400.0)
            }],
        );
        d.sticky_count = Some(1);
        d.total = Some(2);
        d.survivors = Some(vec!["a".into()]);
        d.prompt_tokens = Some(2_000);
        d
    }

    #[test]
    fn a_narrowed_decision_compares_its_sticky_measurement_with_fresh_non_sticky_loads() {
        let mut r = Reconstructor::new(ReconstructOptions::default());
        two_endpoints(&mut r, 100.0);
        let s = r.sample(&narrowed(Some(105.0)), &config());
        // Sticky side 3 400 - 400 = 3 000; non-sticky side b, carried
        // forward (no drain rate yet): 1 000. Input (3 000 - 1 000) / 10 =
        // 200 ms, under the 18 000 ms bar: held, as logged, no censoring.
        assert_eq!(s.evidence, Some(Evidence::Reconstructed));
        assert_eq!(s.gate_input_ms, Some(200.0));
        assert_eq!(s.censored_ms, None);
        assert_eq!(s.replay, Replay::Candidates(two_sided(3_000, 1_000, None)));
    }

    #[test]
    fn a_narrowed_decision_held_above_the_bar_is_censored_to_the_bar() {
        let mut r = Reconstructor::new(ReconstructOptions::default());
        two_endpoints(&mut r, 100.0);
        let mut d = narrowed(Some(105.0));
        // Sticky side 200 400 - 400 = 200 000 tokens = 20 000 ms against
        // b's 100 ms: 19 900 ms, above the 18 000 ms bar, yet the EPP held.
        d.scored[0].token_load = Some(200_400.0);
        let s = r.sample(&d, &config());
        // The least non-sticky load that holds: 200 000 - 180 000 = 20 000
        // tokens (a penalty of exactly the bar holds), 19 000 more than
        // b's 1 000, i.e. 1 900 ms.
        assert_eq!(s.gate_input_ms, Some(18_000.0));
        assert_eq!(s.censored_ms, Some(1_900.0));
        assert_eq!(
            s.replay,
            Replay::Candidates(two_sided(200_000, 20_000, None))
        );
    }

    #[test]
    fn a_non_sticky_load_older_than_the_staleness_is_not_used() {
        // Estimated at 100; 30 s is the default staleness: fresh at 130,
        // stale at 130.5.
        for (ts, evidence) in [(130.0, Evidence::Reconstructed), (130.5, Evidence::Unknown)] {
            let mut r = Reconstructor::new(ReconstructOptions::default());
            two_endpoints(&mut r, 100.0);
            let s = r.sample(&narrowed(Some(ts)), &config());
            assert_eq!(s.evidence, Some(evidence), "at {ts}");
            assert_eq!(
                s.gate_input_ms.is_some(),
                evidence == Evidence::Reconstructed
            );
        }
        // A shorter staleness drops it sooner.
        let mut r = Reconstructor::new(ReconstructOptions {
            max_staleness_s: 4.0,
            ..ReconstructOptions::default()
        });
        two_endpoints(&mut r, 100.0);
        let s = r.sample(&narrowed(Some(105.0)), &config());
        assert_eq!(s.evidence, Some(Evidence::Unknown));
    }

    #[test]
    fn a_decision_without_a_time_trusts_the_carried_forward_loads() {
        // Unknown time: fresh by the one rule, so b's 1 000 is used as at
        // any time within the staleness.
        let mut r = Reconstructor::new(ReconstructOptions::default());
        two_endpoints(&mut r, 100.0);
        let s = r.sample(&narrowed(None), &config());
        assert_eq!(s.evidence, Some(Evidence::Reconstructed));
        assert_eq!(s.gate_input_ms, Some(200.0));
        // And a keep-all decision without a time takes U from the loads
        // carried forward: max(4 500 - 3 000, 2 500 - 1 000) = 1 500,
        // leaving both queues as they were.
        let mut r = Reconstructor::new(ReconstructOptions::default());
        two_endpoints(&mut r, 100.0);
        let d = decision(
            None,
            Outcome::Exploration,
            vec![scored("a", 4_500.0), scored("b", 2_500.0)],
        );
        r.sample(&d, &config());
        assert_eq!((queue(&r, "a"), queue(&r, "b")), (3_000.0, 1_000.0));
    }

    #[test]
    fn measurements_of_busy_endpoints_give_the_drain_rate() {
        let mut r = Reconstructor::new(ReconstructOptions::default());
        // Endpoint a measured every second, 1 000 tokens fewer each time
        // (more than the noise, 2 % + 256, so each is a new estimate):
        // 10 000, 9 000, ... Each pair after the first measurement is a
        // sample (1 000 gone in 1 s); the rate is used from the eighth.
        for k in 0..9 {
            let ts = 100.0 + f64::from(k);
            let mut d = decision(
                Some(ts),
                Outcome::NoMatch,
                vec![scored("a", 12_000.0 - 1_000.0 * f64::from(k))],
            );
            d.prompt_tokens = Some(2_000);
            d.hit_prefix_tokens = Some(0);
            r.sample(&d, &config());
            assert_eq!(queue(&r, "a"), 10_000.0 - 1_000.0 * f64::from(k));
            let rates = r.drain_rates();
            if k < 8 {
                assert!(rates.is_empty(), "{k} samples");
            } else {
                assert_eq!(rates["d"].median, 1_000.0);
                assert_eq!(rates["d"].samples, 8);
            }
        }
        // Queues now drain at 1 000 tokens/s, front first, one whole
        // request at a time: b's 1 000 (one request) is there until 1 s
        // has passed, then gone.
        two_endpoints(&mut r, 200.0);
        let t = &r.trackers[r.index["d"]];
        let b = t.ep(t.id("b").expect("b"));
        assert_eq!(t.now(b, 200.99), 1_000.0);
        assert_eq!(t.now(b, 201.0), 0.0);
    }

    /// A decision whose outcome is unknown (its filter line malformed)
    /// stays unknown, but its scorer lines still measure the queues: the
    /// next narrowed decision finds its non-sticky side in them.
    #[test]
    fn an_unknown_outcome_still_feeds_the_loads() {
        let c = Config::default();
        let first = DecisionInput {
            deployment: "d".into(),
            ts: Some(100.0),
            request_id: Some("r1".into()),
            outcome: None,
            prompt_tokens: Some(1_000),
            hit_prefix_tokens: Some(0),
            scored: vec![scored("ns/a", 9_000.0), scored("ns/b", 3_000.0)],
            chosen: Some("ns/b".into()),
            ..DecisionInput::default()
        };
        // Narrowed to `a`: only its scorer line, the non-sticky side (`b`)
        // is carried forward.
        let second = DecisionInput {
            deployment: "d".into(),
            ts: Some(101.0),
            request_id: Some("r2".into()),
            outcome: Some(Outcome::Sticky),
            sticky_count: Some(1),
            total: Some(2),
            survivors: Some(vec!["ns/a".into()]),
            prompt_tokens: Some(1_000),
            hit_prefix_tokens: Some(800),
            scored: vec![scored("ns/a", 8_400.0)],
            chosen: Some("ns/a".into()),
            ..DecisionInput::default()
        };
        let mut r = Reconstructor::new(ReconstructOptions::default());
        let s1 = r.sample(&first, &c);
        assert_eq!(s1.outcome, None);
        assert_eq!(s1.evidence, None);
        assert_eq!(s1.replay, Replay::Unknown);
        let s2 = r.sample(&second, &c);
        assert_eq!(s2.evidence, Some(Evidence::Reconstructed));
        // Sticky: 8400 - 200 uncached; non-sticky: `b` routed the first
        // request (its `tokenLoad`, 3000), not drained yet (no rate).
        let want = (8_200.0 - 3_000.0) / c.peak_prefill_throughput * 1000.0;
        let got = s2.gate_input_ms.unwrap();
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        // Without the first decision the non-sticky side is unknown.
        let mut r = Reconstructor::new(ReconstructOptions::default());
        assert_eq!(r.sample(&second, &c).evidence, Some(Evidence::Unknown));
    }
}
