//! The counterfactual replay: a deployment's logged arrivals routed again
//! through the filter core and a picker under one config, served by an engine
//! model, each request's TTFT read off the model.
//!
//! # The engine model
//!
//! Every endpoint prefills first come, first served (vLLM's scheduler
//! finishes the running chunked prefill before it admits the next waiting
//! request, so whole requests leave the prefill queue in arrival order). A
//! request of `u` uncached tokens occupies its endpoint for
//! `u / peak + overhead` seconds; its first token comes at the end of that
//! service plus a fixed `latency` that occupies nothing (the EPP, the
//! network, the engine's first decode step). The EPP releases the request's
//! in-flight tokens at that first token, as the router's in-flight load
//! producer does; the request stays in flight (requests) until its response
//! ends, the request's `decode_s` after the first token.
//!
//! With the engine's `decode_s` set (fitted, [`super::fit_engine`]), each
//! request decodes on its endpoint for that long after its first token, and
//! a prefill shares every step with the requests decoding when it starts,
//! as vLLM v1's scheduler runs them: one token per decoding request comes
//! out of each step's budget ([`STEP_TOKENS`]) before the prefill's chunk,
//! and the prefill computes those tokens too ([`step_tokens`]). A short
//! prompt on a busy endpoint then takes longer than on an idle one.
//!
//! # The prefix cache
//!
//! Every endpoint holds the prefix every prompt shares: a request has
//! `cold_tokens` uncached anywhere its session is not cached, and
//! `warm_tokens` where it is. A request of a session leaves its prompt
//! cached on the endpoint that served it, for the session's later turns
//! (the EPP's approximate index does the same at scheduling time). Each
//! endpoint holds at most `cache_capacity_tokens`; beyond it the session
//! used least recently is evicted whole.
//!
//! A workload inferred from a log has no session ids: its sessions are the
//! chains of `prefix_parent` links, and a chain holds its last request's
//! `cold_tokens` (what it adds to the shared prefix) on the endpoint that
//! served it. A holder the log shows counts unless the replay evicted the
//! request's chain there: eviction in the logged run already shows in the
//! log (the next turn finds no holder), so the replay only adds the
//! evictions another routing causes.
//!
//! # Routing
//!
//! At its arrival a request is offered every endpoint of the deployment with
//! the attributes the EPP would see: in-flight tokens and requests, the
//! prefix match in blocks, and under `ttftSource: latencyPredictor` the
//! request's predicted TTFT there ([`predicted_ttft_ms`]: the engine model's
//! own time to prefill the endpoint's in-flight tokens and the request's
//! uncached tokens, plus its overhead, as the latency predictor estimates
//! it from the same state). The filter core decides what survives
//! ([`gatecal_filter::decide`], with the request's own exploration draw), and
//! the picker takes the survivor with the highest score. The scorers are
//! the token-load scorer (`1 − tokenLoad / queueThresholdTokens`, where
//! `tokenLoad` is the in-flight tokens plus the request's uncached tokens
//! there) and, with a weight, the prefix-cache scorer (the match fraction).
//! Ties go to the endpoint the log shows the request was sent to when it is
//! among them (the EPP's random draw, kept for every config, so that
//! the replay of the config in force routes as the log did), else to the
//! lowest of a per-request hash of the endpoint index, the same under every
//! config.
//!
//! **Anchored to the log** ([`replay_anchored`], what the prediction uses):
//! a request goes where the log sent it for as long as the config replayed
//! keeps the same endpoints as the config in force, both decided on the
//! replay's state; from the first request where they differ on, the replay
//! routes by itself. Up to that departure the logged run *is* the run under
//! the candidate (the same arrivals, the same decisions), so the replay
//! keeps the log's routing exactly where it is known instead of deciding it
//! again from its own, slightly different, loads: a saturated closed loop
//! is chaotic, and one decision taken otherwise at a near tie (a load 0.5 %
//! off, on the wrong side of the bar) reroutes a sixth of the requests after
//! it. The config in force never departs, so its replay serves the logged
//! routing throughout and the self-check tests the engine model and the
//! workload, not a second draw of the routing. Where the two configs keep
//! the same endpoints on the replay's state but the log's own state would
//! have told them apart (a near tie of the candidate's bar), the departure
//! comes a little later than in a paired run.
//!
//! # Closed loops
//!
//! A request that continues a session after the previous turn's answer
//! (`think_s` set) arrives `think_s` after its parent's response ends in the
//! replay, not at its logged time: a config that answers sooner brings the
//! next turn sooner.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use gatecal_filter::{Candidate, Config, Outcome, TtftSource, decide};
use rustc_hash::FxHashMap;

/// The bit that keeps an inferred chain's key apart from session ids.
const CHAIN_KEY: u64 = 1 << 63;

pub use crate::input::QUEUE_THRESHOLD_TOKENS;

mod endpoint;
mod engine;
mod request;
mod trace;

use endpoint::{Endpoint, set_attributes};
pub use engine::{
    EngineModel, STEP_TOKENS, predicted_ttft_ms, prefill_tokens, service_s, step_tokens,
};
pub use request::Request;
pub(crate) use trace::{MAX_TRACE_CANDIDATES, Trace};

/// The picker stage after the filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Picker {
    /// Weight of the token-load scorer.
    pub token_load_weight: f64,
    /// Weight of the prefix-cache scorer (0 when the config has none).
    pub prefix_weight: f64,
}

impl Default for Picker {
    /// The token-load scorer alone, max-score picker.
    fn default() -> Self {
        Picker {
            token_load_weight: 1.0,
            prefix_weight: 0.0,
        }
    }
}

/// What the replay predicts for one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Served {
    /// Endpoint index.
    pub endpoint: usize,
    /// Arrival in the replay, seconds.
    pub arrival_s: f64,
    /// Time to first token, seconds.
    pub ttft_s: f64,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: f64,
    /// Whether the filter's outcome released a pin (a load override).
    pub released: bool,
    /// The filter's outcome.
    pub outcome: Outcome,
}

/// One replay's result, request by request (same order as the input).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replay {
    /// Per request; `None` for a request that was not served (no endpoint).
    pub served: Vec<Option<Served>>,
    /// Per request, when asked ([`replay_logged`]): the `tokenLoad` the
    /// token-load scorer saw on each endpoint the filter kept, as the EPP
    /// logs it.
    pub loads: Vec<Vec<(usize, f64)>>,
}

impl Replay {
    /// The TTFTs in ms of the requests served.
    pub fn ttfts_ms(&self) -> Vec<f64> {
        self.served
            .iter()
            .flatten()
            .map(|s| s.ttft_s * 1000.0)
            .collect()
    }

    /// Cached share of all prompt tokens.
    pub fn prefix_hit_share(&self, requests: &[Request]) -> Option<f64> {
        let mut cached = 0.0;
        let mut prompt = 0.0;
        for (s, r) in self.served.iter().zip(requests) {
            if let Some(s) = s {
                cached += s.cached_tokens;
                prompt += r.prompt_tokens;
            }
        }
        (prompt > 0.0).then(|| cached / prompt)
    }

    /// Each request's first token in the replay (seconds), by request.
    pub fn first_tokens(&self) -> Vec<Option<f64>> {
        self.served
            .iter()
            .map(|s| s.map(|s| s.arrival_s + s.ttft_s))
            .collect()
    }

    /// `[differ, compared]`: of the requests served whose logged outcome is
    /// known, how many the replayed config decided the other way (released
    /// where the log held, or held where it released), each on the
    /// replay's state. For the config in force replayed anchored to the
    /// log ([`replay_anchored`]) these are the logged decisions it does not
    /// reproduce: a handful at near ties when it is the config the EPP ran,
    /// many when it is not.
    pub fn logged_outcomes(&self, requests: &[Request]) -> [usize; 2] {
        let mut out = [0, 0];
        for (s, r) in self.served.iter().zip(requests) {
            if let (Some(s), Some(logged)) = (s, r.logged_release) {
                out[1] += 1;
                if s.released != logged {
                    out[0] += 1;
                }
            }
        }
        out
    }

    /// Share of the requests whose filter outcome released a pin.
    pub fn release_share(&self) -> Option<f64> {
        let n = self.served.iter().flatten().count();
        let released = self.served.iter().flatten().filter(|s| s.released).count();
        (n > 0).then(|| released as f64 / n as f64)
    }
}

/// A request waiting to arrive, ordered by time then index.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pending {
    t: f64,
    i: usize,
}

impl Eq for Pending {}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on (t, i).
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| other.i.cmp(&self.i))
    }
}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A per-request, per-endpoint tie-break key, the same under every config.
fn tie_key(request: usize, endpoint: usize) -> u64 {
    let mut x = (request as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (endpoint as u64);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    x
}

/// When the closed-loop requests (`parent` and `think_s` set) arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals<'a> {
    /// At their logged times: the replay is open loop.
    Logged,
    /// `think_s` after their parent's response ends in this replay.
    AfterAnswer,
    /// At their logged times, moved by how much later (or sooner) their
    /// parent's first token comes than in a baseline replay (the first
    /// tokens of a [`Arrivals::Logged`] replay of the config in force, by
    /// request): the config in force then replays the log's arrivals as
    /// they are, and another config moves a session's next turn with its
    /// answer. Never before the parent's arrival in this replay; it may
    /// come before the parent's first token there, where the baseline
    /// itself has that first token after the turn's logged arrival (the
    /// replay's error, which the turn is not moved by: otherwise the
    /// config in force would not replay the log's arrivals). A turn moved past
    /// the last logged arrival (the end of the log's window) is not
    /// replayed, nor are the turns that follow it: the logged run never
    /// had them, and a slower config would otherwise be charged for them.
    Shifted(&'a [Option<f64>]),
}

/// Routes and serves `requests` on `endpoints` endpoints under `config`,
/// closed loops after their parent's answer ([`Arrivals::AfterAnswer`]).
///
/// Requests must be in logged arrival order; a closed-loop request's
/// `parent` must come before it. Non-finite or negative times and token
/// counts are the caller's to refuse (the workload builder does).
pub fn replay(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
) -> Replay {
    run(
        requests,
        endpoints,
        config,
        picker,
        model,
        false,
        Arrivals::AfterAnswer,
        None,
        None,
        None,
    )
}

/// [`replay`] with the closed loops' arrivals as `arrivals` says.
pub fn replay_with(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
    arrivals: Arrivals<'_>,
) -> Replay {
    run(
        requests, endpoints, config, picker, model, false, arrivals, None, None, None,
    )
}

/// [`replay`], also keeping what the EPP would have logged of each decision
/// ([`Replay::loads`]): to test the workload inference against a known
/// workload.
pub fn replay_logged(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
) -> Replay {
    run(
        requests,
        endpoints,
        config,
        picker,
        model,
        true,
        Arrivals::AfterAnswer,
        None,
        None,
        None,
    )
}

/// [`replay_logged`] with the closed loops' arrivals as `arrivals` says:
/// the loads the replay of the config in force with the logged arrivals
/// saw, to compare with the log request by request.
pub fn replay_logged_with(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
    arrivals: Arrivals<'_>,
) -> Replay {
    run(
        requests, endpoints, config, picker, model, true, arrivals, None, None, None,
    )
}

/// [`replay_with`] (with the prefill pool `pd` as [`replay_pd`] when
/// given), each request sent where the log sent it for as long as `config`
/// decides as the config in force `current` did: until the first request
/// whose kept endpoints under `config` differ from those under `current`
/// (both decided on the replay's own loads and caches), after which the
/// replay routes by itself. The config in force itself therefore replays
/// the log's routing throughout, and a candidate is the logged run up to
/// its first departure from it: a paired run of the same workload under
/// the candidate is that logged run up to there as well. Requests without
/// a logged endpoint are routed by the replay, anchored or not.
#[allow(clippy::too_many_arguments)]
pub fn replay_anchored(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    current: &Config,
    picker: &Picker,
    model: &EngineModel,
    arrivals: Arrivals<'_>,
    pd: Option<&PrefillPool<'_>>,
) -> Replay {
    run(
        requests,
        endpoints,
        config,
        picker,
        model,
        false,
        arrivals,
        pd,
        Some(current),
        None,
    )
}

/// [`replay_anchored`], each filter decision recorded in `trace` (see
/// [`Trace::replay_as`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay_anchored_traced(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    current: &Config,
    picker: &Picker,
    model: &EngineModel,
    arrivals: Arrivals<'_>,
    pd: Option<&PrefillPool<'_>>,
    trace: &mut Trace,
) -> Replay {
    run(
        requests,
        endpoints,
        config,
        picker,
        model,
        false,
        arrivals,
        pd,
        Some(current),
        Some(trace),
    )
}

/// The prefill pool of a P/D deployment (llm-d's `prefill` scheduling
/// profile), as [`replay_pd`] serves it.
#[derive(Clone, Copy, Debug)]
pub struct PrefillPool<'a> {
    /// The requests the log shows prefilled there (their prefill profile's
    /// decisions), inferred as a workload of the pool's endpoints.
    pub requests: &'a [Request],
    /// Endpoints of the pool.
    pub endpoints: usize,
    /// For each request of the deployment, its index in `requests` when
    /// the log shows it prefilled in the pool.
    pub of: &'a [Option<usize>],
    /// The pool's engine; its `latency_s` is the KV transfer to the decode
    /// endpoint.
    pub model: EngineModel,
    /// The P/D decider's threshold (`nonCachedTokens`): a request whose
    /// uncached tokens on its decode endpoint reach it is prefilled in the
    /// pool.
    pub non_cached_tokens: f64,
}

/// [`replay_with`] for a P/D deployment: each request is routed among the
/// decode endpoints (`requests`, `endpoints`, `model`), and the P/D
/// decider sends its prefill to the pool `pd` when its uncached tokens on
/// the decode endpoint picked reach the threshold. There the same filter
/// and picker choose a prefill endpoint, which prefills the request first
/// come, first served with the pool's engine; its first token comes when
/// its KV cache reaches the decode endpoint (`pd.model.latency_s` after
/// the prefill). Its uncached tokens count in flight on both endpoints
/// until then.
#[allow(clippy::too_many_arguments)]
pub fn replay_pd(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
    arrivals: Arrivals<'_>,
    pd: &PrefillPool<'_>,
) -> Replay {
    run(
        requests,
        endpoints,
        config,
        picker,
        model,
        false,
        arrivals,
        Some(pd),
        None,
        None,
    )
}

/// The first token of a request of `u` uncached tokens queued at `t` on
/// `ep` (first come, first served), its prefill sharing each step with the
/// requests decoding there when it starts; it decodes there from its first
/// token for the model's `decode_s`.
fn serve(ep: &mut Endpoint, t: f64, u: f64, m: &EngineModel) -> f64 {
    let start = ep.free_at.max(t);
    // At the previous request's first token (its service end plus the
    // latency), which the fit measured the service from: it decodes.
    let d = if m.decode_s > 0.0 {
        ep.decoding(start + m.latency_s, m.decode_s)
    } else {
        0.0
    };
    let done = start + m.service_s(u, d);
    ep.free_at = done;
    let first = done + m.latency_s;
    if m.decode_s > 0.0 {
        ep.add_decode(first);
    }
    first
}

/// The picker over the endpoints the filter `kept`: the highest weighted
/// score; ties to the `logged` endpoint, else by [`tie_key`]. Records the
/// token loads in `loads` when given.
#[allow(clippy::too_many_arguments)]
fn pick(
    kept: &[usize],
    eps: &[Endpoint],
    uncached: &[f64],
    candidates: &[Candidate],
    picker: &Picker,
    logged: Option<usize>,
    i: usize,
    mut loads: Option<&mut Vec<(usize, f64)>>,
) -> Option<usize> {
    let mut best: Option<(usize, f64, u64)> = None;
    for &k in kept {
        let load = (eps[k].in_flight_tokens() + uncached[k]).min(QUEUE_THRESHOLD_TOKENS);
        let load_score = if load <= 0.0 {
            1.0
        } else {
            1.0 - load / QUEUE_THRESHOLD_TOKENS
        };
        let prefix_score = candidates[k].prefix_score();
        let score = picker.token_load_weight * load_score + picker.prefix_weight * prefix_score;
        if let Some(l) = loads.as_deref_mut() {
            l.push((k, load));
        }
        // Ties go the way the log went when the logged endpoint is among
        // them (the EPP's random draw, kept), else by the hash.
        let key = if logged == Some(k) {
            0
        } else {
            tie_key(i, k).max(1)
        };
        let better = match best {
            None => true,
            Some((_, s, kk)) => score > s || (score == s && key < kk),
        };
        if better {
            best = Some((k, score, key));
        }
    }
    best.map(|b| b.0)
}

#[allow(clippy::too_many_arguments)]
fn run(
    requests: &[Request],
    endpoints: usize,
    config: &Config,
    picker: &Picker,
    model: &EngineModel,
    logged: bool,
    arrivals: Arrivals<'_>,
    pd: Option<&PrefillPool<'_>>,
    anchor: Option<&Config>,
    mut trace: Option<&mut Trace>,
) -> Replay {
    // Routed as the log until the first request `config` decides otherwise
    // than the config in force (`anchor`): see [`replay_anchored`].
    let mut anchored = anchor.is_some();
    let other = anchor.filter(|cur| *cur != config);
    let in_force = |cands: &[Candidate], draw: f64, kept: &[usize]| match other {
        Some(cur) => decide(cur, cands, draw).kept == kept,
        None => true,
    };
    let mut out = Replay {
        served: vec![None; requests.len()],
        loads: if logged {
            vec![Vec::new(); requests.len()]
        } else {
            Vec::new()
        },
    };
    if endpoints == 0 {
        return out;
    }
    let mut eps: Vec<Endpoint> = vec![Endpoint::default(); endpoints];
    let mut heap = BinaryHeap::new();
    // Children waiting for their parent's response end.
    let mut children: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    for (i, r) in requests.iter().enumerate() {
        match (r.parent, r.think_s, arrivals) {
            (Some(p), Some(_), Arrivals::AfterAnswer | Arrivals::Shifted(_)) if p < i => {
                children.entry(p).or_default().push(i)
            }
            _ => heap.push(Pending { t: r.arrival_s, i }),
        }
    }
    // The end of the log's window: no shifted turn arrives after it.
    let window_end = requests
        .iter()
        .map(|r| r.arrival_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let block = model.block_size.max(1);
    // Under `ttftSource: latencyPredictor` the gate reads each endpoint's
    // predicted TTFT: the engine model's own, for this request there.
    let predicts = config.ttft_source == TtftSource::LatencyPredictor;
    // Each endpoint's candidate, its id made once; its attributes are set
    // for each request.
    let mut candidates: Vec<Candidate> = (0..endpoints)
        .map(|e| Candidate::new(e.to_string()))
        .collect();
    let mut uncached = vec![0.0; endpoints];
    let mut cached = vec![0.0; endpoints];
    let mut holders: Vec<usize> = Vec::new();
    // The prefill pool under P/D: its endpoints, and where the replay sent
    // each of its requests.
    let pool_n = pd.map_or(0, |p| p.endpoints);
    let mut peps: Vec<Endpoint> = vec![Endpoint::default(); pool_n];
    let mut pcands: Vec<Candidate> = (0..pool_n).map(|k| Candidate::new(k.to_string())).collect();
    let mut puncached = vec![0.0; pool_n];
    let mut pcached = vec![0.0; pool_n];
    let mut pool_served: Vec<Option<usize>> = vec![None; pd.map_or(0, |p| p.requests.len())];
    // With a bounded cache, the session each request belongs to: its own
    // id, else its chain of `prefix_parent` links (keyed by the chain's
    // first request, apart from the ids).
    let bounded = model.cache_capacity_tokens.is_finite();
    let chain: Vec<u64> = if bounded {
        let mut root: Vec<usize> = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let c = match r.prefix_parent {
                Some(p) if p < i => root[p],
                _ => i,
            };
            root.push(c);
        }
        requests
            .iter()
            .zip(root)
            .map(|(r, c)| r.session.unwrap_or(CHAIN_KEY | c as u64))
            .collect()
    } else {
        Vec::new()
    };
    while let Some(Pending { t, i }) = heap.pop() {
        let r = &requests[i];
        holders.clear();
        let moved = r.prefix_parent.and_then(|p| {
            let from = requests.get(p)?.logged_endpoint?;
            let to = out.served.get(p).copied().flatten()?.endpoint;
            Some((from, to))
        });
        for &h in &r.holders {
            let h = match moved {
                Some((from, to)) if from == h => to,
                _ => h,
            };
            // A holder whose copy the replay evicted holds nothing.
            if bounded && eps.get(h).is_some_and(|ep| ep.evicted.contains(&chain[i])) {
                continue;
            }
            holders.push(h);
        }
        let total_blocks = ((r.prompt_tokens / block as f64).floor() as i64).max(1);
        for (e, (ep, cand)) in eps.iter_mut().zip(&mut candidates).enumerate() {
            ep.prune(t, model.decode_s);
            let c = ep.cached(r, e, holders.contains(&e));
            cached[e] = c;
            uncached[e] = (r.prompt_tokens - c).max(0.0);
            let match_blocks = ((c / block as f64).floor() as i64).min(total_blocks);
            let in_flight = ep.in_flight_tokens();
            set_attributes(cand, ep, (match_blocks, total_blocks, block), in_flight);
            cand.predicted_ttft_ms =
                predicts.then(|| predicted_ttft_ms(model, in_flight, uncached[e]));
        }
        let d = decide(config, &candidates, r.draw);
        if let Some(tr) = trace.as_deref_mut() {
            tr.record(i, false, r.draw, &candidates, &d.kept);
        }
        let follow = match r.logged_endpoint {
            Some(le) if anchored && le < endpoints => {
                anchored = in_force(&candidates, r.draw, &d.kept);
                anchored.then_some(le)
            }
            _ => None,
        };
        let loads = if logged { out.loads.get_mut(i) } else { None };
        let Some(e) = follow.or_else(|| {
            pick(
                &d.kept,
                &eps,
                &uncached,
                &candidates,
                picker,
                r.logged_endpoint,
                i,
                loads,
            )
        }) else {
            continue;
        };
        // Under P/D, a request whose uncached tokens on its decode endpoint
        // reach the decider's threshold is prefilled in the prefill pool,
        // routed there by the same filter and picker; its first token comes
        // when the KV cache reaches the decode endpoint.
        let remote = pd.filter(|p| p.endpoints > 0 && uncached[e] >= p.non_cached_tokens);
        let (first, served_cached) = match remote {
            Some(p) => {
                let pr =
                    p.of.get(i)
                        .copied()
                        .flatten()
                        .and_then(|j| Some((j, p.requests.get(j)?)));
                holders.clear();
                if let Some((_, q)) = pr {
                    let moved = q.prefix_parent.and_then(|pp| {
                        let from = p.requests.get(pp)?.logged_endpoint?;
                        let to = pool_served.get(pp).copied().flatten()?;
                        Some((from, to))
                    });
                    for &h in &q.holders {
                        holders.push(match moved {
                            Some((from, to)) if from == h => to,
                            _ => h,
                        });
                    }
                }
                let prompt = pr.map_or(r.prompt_tokens, |(_, q)| q.prompt_tokens);
                let total_blocks = ((prompt / block as f64).floor() as i64).max(1);
                for (k, (ep, cand)) in peps.iter_mut().zip(&mut pcands).enumerate() {
                    ep.prune(t, 0.0);
                    // A request the log did not disaggregate finds only the
                    // prefix every prompt shares there.
                    let c = match pr {
                        Some((_, q)) => ep.cached(q, k, holders.contains(&k)),
                        None => (r.prompt_tokens - r.cold_tokens).clamp(0.0, prompt),
                    };
                    pcached[k] = c;
                    puncached[k] = (prompt - c).max(0.0);
                    let match_blocks = ((c / block as f64).floor() as i64).min(total_blocks);
                    let in_flight = ep.in_flight_tokens();
                    set_attributes(cand, ep, (match_blocks, total_blocks, block), in_flight);
                    cand.predicted_ttft_ms =
                        predicts.then(|| predicted_ttft_ms(&p.model, in_flight, puncached[k]));
                }
                let draw = pr.map_or(1.0, |(_, q)| q.draw);
                let pd_decision = decide(config, &pcands, draw);
                if let Some(tr) = trace.as_deref_mut() {
                    tr.record(i, true, draw, &pcands, &pd_decision.kept);
                }
                let logged_k = pr.and_then(|(_, q)| q.logged_endpoint);
                let follow = match logged_k {
                    Some(k) if anchored && k < pool_n => {
                        anchored = in_force(&pcands, draw, &pd_decision.kept);
                        anchored.then_some(k)
                    }
                    _ => None,
                };
                match follow.or_else(|| {
                    pick(
                        &pd_decision.kept,
                        &peps,
                        &puncached,
                        &pcands,
                        picker,
                        logged_k,
                        i,
                        None,
                    )
                }) {
                    Some(k) => {
                        let first = serve(&mut peps[k], t, puncached[k], &p.model);
                        // The prefill engine holds the request until its
                        // KV cache is sent.
                        peps[k].add_pending(first, puncached[k]);
                        peps[k].add_open(first);
                        if let Some((j, _)) = pr
                            && let Some(slot) = pool_served.get_mut(j)
                        {
                            *slot = Some(k);
                        }
                        // The decode endpoint counts the request's tokens in
                        // flight until its first token, and decodes it from
                        // then on.
                        eps[e].add_pending(first, uncached[e]);
                        if model.decode_s > 0.0 {
                            eps[e].add_decode(first);
                        }
                        (first, pcached[k])
                    }
                    None => {
                        let first = serve(&mut eps[e], t, uncached[e], model);
                        eps[e].add_pending(first, uncached[e]);
                        (first, cached[e])
                    }
                }
            }
            None => {
                let first = serve(&mut eps[e], t, uncached[e], model);
                eps[e].add_pending(first, uncached[e]);
                (first, cached[e])
            }
        };
        let end = first + r.decode_s.max(0.0);
        let ep = &mut eps[e];
        ep.add_open(end);
        ep.served = true;
        // A session's prompt, or (with a bounded cache) what an inferred
        // chain adds to the prefix every prompt shares.
        if let Some(s) = r.session {
            ep.remember(model, s, r.prompt_tokens);
        } else if bounded {
            ep.remember(model, chain[i], r.cold_tokens);
        }
        out.served[i] = Some(Served {
            endpoint: e,
            arrival_s: t,
            ttft_s: first - t,
            cached_tokens: served_cached,
            released: d.outcome.is_release(),
            outcome: d.outcome,
        });
        if let Some(kids) = children.remove(&i) {
            let parent_arrival = t;
            for k in kids {
                let t = match arrivals {
                    Arrivals::Shifted(base) => {
                        let t = match base.get(i).copied().flatten() {
                            Some(b) => (requests[k].arrival_s + first - b).max(parent_arrival),
                            None => requests[k].arrival_s.max(parent_arrival),
                        };
                        if t > window_end {
                            // Past the window: the run never had this turn.
                            continue;
                        }
                        t
                    }
                    _ => end + requests[k].think_s.unwrap_or(0.0).max(0.0),
                };
                heap.push(Pending { t, i: k });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_filter::{DEFAULT_CONFIG, PenaltyMode};

    fn model() -> EngineModel {
        EngineModel::unfitted(1000.0, 10)
    }

    /// A request with nothing cached anywhere.
    fn req(t: f64, prompt: f64) -> Request {
        Request {
            decode_s: 1.0,
            ..Request::new(t, prompt)
        }
    }

    /// A turn of `session` with `warm` tokens uncached where the session is.
    fn turn(t: f64, prompt: f64, warm: f64, session: u64) -> Request {
        Request {
            warm_tokens: warm,
            session: Some(session),
            ..req(t, prompt)
        }
    }

    fn run(rs: &[Request], endpoints: usize, config: &Config, m: &EngineModel) -> Replay {
        replay(rs, endpoints, config, &Picker::default(), m)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// An endpoint the log shows cold because it had served nothing yet
    /// holds the prefix every prompt shares once the replay has served a
    /// request there.
    #[test]
    fn a_logged_cold_endpoint_warms_once_the_replay_serves_it() {
        let r = Request {
            cold_tokens: 8900.0,
            warm_tokens: 900.0,
            holders: vec![0],
            logged_cold: vec![(1, 8900.0)],
            unserved: vec![1],
            served_cold: Some(900.0),
            ..Request::new(0.0, 8900.0)
        };
        let mut ep = Endpoint::default();
        assert_eq!(ep.cached(&r, 1, false), 0.0);
        ep.served = true;
        assert_eq!(ep.cached(&r, 1, false), 8000.0);
        // Without the prefix's size the log's count stands, and so it does
        // on an endpoint the log had served.
        let unknown = Request {
            served_cold: None,
            ..r.clone()
        };
        assert_eq!(ep.cached(&unknown, 1, false), 0.0);
        let served_in_log = Request {
            unserved: Vec::new(),
            ..r
        };
        assert_eq!(ep.cached(&served_in_log, 1, false), 0.0);
    }

    #[test]
    fn an_idle_endpoint_serves_at_the_peak() {
        let r = run(&[req(0.0, 500.0)], 2, &DEFAULT_CONFIG, &model());
        let s = r.served[0].unwrap();
        assert!(close(s.ttft_s, 0.5));
        assert_eq!(s.cached_tokens, 0.0);
    }

    #[test]
    fn the_queue_drains_first_come_first_served() {
        // One endpoint: the second request waits for the first.
        let rs = [req(0.0, 1000.0), req(0.1, 500.0)];
        let r = run(&rs, 1, &DEFAULT_CONFIG, &model());
        assert!(close(r.served[0].unwrap().ttft_s, 1.0));
        assert!(close(r.served[1].unwrap().ttft_s, 1.4));
        let slower = EngineModel {
            overhead_s: 0.1,
            latency_s: 0.05,
            ..model()
        };
        let r = run(&rs, 1, &DEFAULT_CONFIG, &slower);
        assert!(close(r.served[0].unwrap().ttft_s, 1.15));
        assert!(close(r.served[1].unwrap().ttft_s, 1.65));
    }

    #[test]
    fn the_picker_sends_work_to_the_least_loaded_endpoint() {
        let rs = [req(0.0, 1000.0), req(0.1, 500.0)];
        let r = run(&rs, 2, &DEFAULT_CONFIG, &model());
        assert_ne!(r.served[0].unwrap().endpoint, r.served[1].unwrap().endpoint);
        assert!(close(r.served[1].unwrap().ttft_s, 0.5));
    }

    /// Turn 1 (1000 tokens) lands on an idle endpoint; turn 2 (8000, 7000
    /// uncached where turn 1 is: 1/8 cached, not sticky) goes where less is
    /// uncached, the same endpoint, and queues 7000 tokens there until
    /// 8.5 s; turn 3 (1100, 100 uncached there: sticky) is pinned to it.
    fn three_turns() -> Vec<Request> {
        vec![
            turn(0.0, 1000.0, 1000.0, 7),
            turn(1.5, 8000.0, 7000.0, 7),
            turn(1.6, 1100.0, 100.0, 7),
        ]
    }

    #[test]
    fn the_gate_decides_between_the_cache_and_the_queue() {
        let rs = three_turns();
        let held = run(&rs, 2, &DEFAULT_CONFIG, &model());
        let e0 = held.served[0].unwrap().endpoint;
        assert_eq!(held.served[1].unwrap().endpoint, e0);
        let s = held.served[2].unwrap();
        assert_eq!(s.endpoint, e0);
        assert!(!s.released);
        assert_eq!(s.cached_tokens, 1000.0);
        // Behind turn 2: first token at 8.5 + 0.1 s.
        assert!(close(s.ttft_s, 8.6 - 1.6));
        // The gate input is 7000 tokens at the configured 15928 tok/s, 439
        // ms: held at the default bar, released under a 100 ms bar, to the
        // idle endpoint, where all 1100 tokens are uncached.
        let low = Config {
            max_ttft_penalty_ms: 100.0,
            ..DEFAULT_CONFIG
        };
        let released = run(&rs, 2, &low, &model());
        let s = released.served[2].unwrap();
        assert!(s.released);
        assert_ne!(s.endpoint, e0);
        assert_eq!(s.cached_tokens, 0.0);
        assert!(close(s.ttft_s, 1.1));
        assert_eq!(released.release_share(), Some(1.0 / 3.0));
        // 500 ms: held again.
        let high = Config {
            max_ttft_penalty_ms: 500.0,
            ..DEFAULT_CONFIG
        };
        assert!(!run(&rs, 2, &high, &model()).served[2].unwrap().released);
    }

    /// Anchored, the config in force routes as the log did throughout, and
    /// a candidate as the log did until it first keeps other endpoints than
    /// the config in force, by itself after that.
    #[test]
    fn an_anchored_replay_follows_the_log_until_the_candidate_departs() {
        let mut rs = three_turns();
        rs.push(req(1.7, 500.0));
        for r in &mut rs {
            r.logged_endpoint = Some(1);
        }
        let low = Config {
            max_ttft_penalty_ms: 100.0,
            ..DEFAULT_CONFIG
        };
        let anchored = |rs: &[Request], config: &Config| {
            let r = replay_anchored(
                rs,
                2,
                config,
                &DEFAULT_CONFIG,
                &Picker::default(),
                &model(),
                Arrivals::Logged,
                None,
            );
            r.served
                .iter()
                .map(|s| s.unwrap().endpoint)
                .collect::<Vec<_>>()
        };
        let free = |rs: &[Request]| {
            let r = replay_with(
                rs,
                2,
                &DEFAULT_CONFIG,
                &Picker::default(),
                &model(),
                Arrivals::Logged,
            );
            r.served
                .iter()
                .map(|s| s.unwrap().endpoint)
                .collect::<Vec<_>>()
        };
        // By itself the replay sends the last request away from the
        // backlog on endpoint 1; the log sent every request there.
        assert_eq!(free(&rs), vec![1, 1, 1, 0]);
        assert_eq!(anchored(&rs, &DEFAULT_CONFIG), vec![1, 1, 1, 1]);
        // The 100 ms bar keeps what the config in force keeps for the first
        // two turns, releases the third to the idle endpoint, and routes the
        // last request by itself, away from the backlog on endpoint 1.
        assert_eq!(anchored(&rs, &low), vec![1, 1, 0, 0]);
        // Without a logged endpoint the replay routes by itself.
        for r in &mut rs {
            r.logged_endpoint = None;
        }
        assert_eq!(anchored(&rs, &DEFAULT_CONFIG), free(&rs));
    }

    #[test]
    fn matched_tokens_mode_replays_through_the_filter_core() {
        let mut rs = three_turns();
        rs[1] = turn(1.5, 3000.0, 2000.0, 7);
        let m = Config {
            penalty_mode: PenaltyMode::MatchedTokens,
            max_ttft_penalty_ms: 0.0,
            ..DEFAULT_CONFIG
        };
        // 2000 uncached tokens in flight on the sticky side against 1000
        // cached: the break-even rule releases; static mode holds.
        assert!(run(&rs, 2, &m, &model()).served[2].unwrap().released);
        assert!(
            !run(&rs, 2, &DEFAULT_CONFIG, &model()).served[2]
                .unwrap()
                .released
        );
        // 500 in flight against 1000 cached: held.
        rs[1] = turn(1.5, 1500.0, 500.0, 7);
        assert!(!run(&rs, 2, &m, &model()).served[2].unwrap().released);
    }

    #[test]
    fn a_closed_loop_turn_follows_its_parents_answer() {
        let mut rs = vec![
            turn(0.0, 1000.0, 1000.0, 3),
            turn(10.0, 1200.0, 200.0, 3),
            req(20.0, 100.0),
        ];
        rs[1].parent = Some(0);
        rs[1].think_s = Some(2.0);
        let r = run(&rs, 1, &DEFAULT_CONFIG, &model());
        // Parent: first token at 1 s, response ends at 2 s; child at 4 s.
        assert_eq!(r.served[1].unwrap().arrival_s, 4.0);
        let slow = EngineModel {
            peak_tps: 500.0,
            ..model()
        };
        let r = run(&rs, 1, &DEFAULT_CONFIG, &slow);
        assert_eq!(r.served[1].unwrap().arrival_s, 5.0);
        // Shifted: the logged arrival moved by the parent's first token
        // against a baseline (here 0.5 s later: 10.5 s).
        let base = [Some(0.5), None, None];
        let r = replay_with(
            &rs,
            1,
            &DEFAULT_CONFIG,
            &Picker::default(),
            &model(),
            Arrivals::Shifted(&base),
        );
        assert_eq!(r.served[1].unwrap().arrival_s, 10.5);
        // A baseline whose parent's first token (10.5 s) comes after the
        // turn's logged arrival (10 s): the turn moves by the shift alone
        // (1 − 10.5 s), to 0.5 s, before its parent's first token here
        // (1 s), not after it; never before the parent's arrival (0 s).
        let late_base = [Some(10.5), None, None];
        let r = replay_with(
            &rs,
            1,
            &DEFAULT_CONFIG,
            &Picker::default(),
            &model(),
            Arrivals::Shifted(&late_base),
        );
        assert_eq!(r.served[1].unwrap().arrival_s, 0.5);
        let later_base = [Some(12.0), None, None];
        let r = replay_with(
            &rs,
            1,
            &DEFAULT_CONFIG,
            &Picker::default(),
            &model(),
            Arrivals::Shifted(&later_base),
        );
        assert_eq!(r.served[1].unwrap().arrival_s, 0.0);
        // Moved past the last logged arrival (20 s, the window's end): the
        // logged run never had that turn.
        let late = [Some(-10.0), None, None];
        let r = replay_with(
            &rs,
            1,
            &DEFAULT_CONFIG,
            &Picker::default(),
            &model(),
            Arrivals::Shifted(&late),
        );
        assert_eq!(r.served[1], None);
        assert_eq!(r.ttfts_ms().len(), 2);
        let r = replay_with(
            &rs,
            1,
            &DEFAULT_CONFIG,
            &Picker::default(),
            &model(),
            Arrivals::Logged,
        );
        assert_eq!(r.served[1].unwrap().arrival_s, 10.0);
        // Open loop: the logged arrival.
        rs[1].think_s = None;
        assert_eq!(
            run(&rs, 1, &DEFAULT_CONFIG, &slow).served[1]
                .unwrap()
                .arrival_s,
            10.0
        );
    }

    #[test]
    fn the_least_recently_used_session_is_evicted() {
        let m = EngineModel {
            cache_capacity_tokens: 1500.0,
            ..model()
        };
        let rs = [
            turn(0.0, 1000.0, 1000.0, 1),
            turn(5.0, 1000.0, 1000.0, 2),
            turn(10.0, 1100.0, 100.0, 1),
        ];
        let r = run(&rs, 1, &DEFAULT_CONFIG, &m);
        // Session 2 evicted session 1: its second turn finds nothing.
        assert_eq!(r.served[2].unwrap().cached_tokens, 0.0);
        let r = run(&rs, 1, &DEFAULT_CONFIG, &model());
        assert_eq!(r.served[2].unwrap().cached_tokens, 1000.0);
    }

    #[test]
    fn an_inferred_chain_is_evicted_from_its_holder() {
        // Turn 1 of a chain, an unrelated request, then turn 2 whose log
        // shows turn 1's endpoint holding its prefix.
        let mut rs = vec![req(0.0, 1000.0), req(5.0, 1000.0), req(10.0, 1100.0)];
        rs[0].logged_endpoint = Some(0);
        rs[2].warm_tokens = 100.0;
        rs[2].holders = vec![0];
        rs[2].prefix_parent = Some(0);
        let r = run(&rs, 1, &DEFAULT_CONFIG, &model());
        assert_eq!(r.served[2].unwrap().cached_tokens, 1000.0);
        // 1500 tokens: the unrelated request evicts the chain, and turn 2
        // finds nothing.
        let m = EngineModel {
            cache_capacity_tokens: 1500.0,
            ..model()
        };
        let r = run(&rs, 1, &DEFAULT_CONFIG, &m);
        assert_eq!(r.served[2].unwrap().cached_tokens, 0.0);
        assert!(close(r.served[2].unwrap().ttft_s, 1.1));
        // 2000 tokens hold both.
        let m = EngineModel {
            cache_capacity_tokens: 2000.0,
            ..model()
        };
        let r = run(&rs, 1, &DEFAULT_CONFIG, &m);
        assert_eq!(r.served[2].unwrap().cached_tokens, 1000.0);
    }

    #[test]
    fn the_shared_prefix_counts_as_cached_everywhere() {
        let mut rs = [req(0.0, 1000.0), req(5.0, 1000.0)];
        for r in &mut rs {
            r.cold_tokens = 700.0;
            r.warm_tokens = 700.0;
        }
        let r = run(&rs, 2, &DEFAULT_CONFIG, &model());
        assert_eq!(r.served[1].unwrap().cached_tokens, 300.0);
        assert!(close(r.served[1].unwrap().ttft_s, 0.7));
        assert_eq!(r.prefix_hit_share(&rs), Some(0.3));
    }

    #[test]
    fn logged_holders_follow_the_parent_where_the_replay_sends_it() {
        // Turn 1 held on endpoint 1 in the log; turn 2's holder is where
        // turn 1 was served.
        let mut rs = vec![req(0.0, 5000.0), req(9.0, 5200.0)];
        rs[0].warm_tokens = 100.0;
        rs[0].holders = vec![1];
        rs[0].logged_endpoint = Some(1);
        rs[1].warm_tokens = 200.0;
        rs[1].holders = vec![1];
        rs[1].prefix_parent = Some(0);
        let r = run(&rs, 3, &DEFAULT_CONFIG, &model());
        let s = r.served[0].unwrap();
        assert_eq!(
            (s.endpoint, s.cached_tokens, s.outcome),
            (1, 4900.0, Outcome::Sticky)
        );
        assert_eq!(r.served[1].unwrap().endpoint, 1);
        // Had turn 1 been logged elsewhere, turn 2's holder moves with it.
        rs[0].holders.clear();
        rs[0].warm_tokens = 5000.0;
        let r = run(&rs, 3, &DEFAULT_CONFIG, &model());
        let e = r.served[0].unwrap().endpoint;
        assert_eq!(r.served[0].unwrap().cached_tokens, 0.0);
        let s = r.served[1].unwrap();
        assert_eq!((s.endpoint, s.cached_tokens), (e, 5000.0));
    }
}
