//! The reports' use of the replay, per deployment: the requests its
//! decisions show (at most [`MAX_REPLAY_REQUESTS`]), the TTFT the log
//! observed for them, the engine fitted to those first tokens
//! ([`super::fit_engine`]), and the predicted TTFT of each candidate
//! config ([`super::predict`]).
//!
//! # Memory
//!
//! A request kept for the replay is one [`Seen`] (its arrival, endpoint
//! picked, the token loads of its scorer lines): about 500 bytes with
//! four endpoints. At most [`MAX_REPLAY_REQUESTS`] are kept per
//! deployment, the first ones counted, and [`MAX_REPLAY_REQUESTS_TOTAL`]
//! over all deployments (about 130 MB at most); the others are counted
//! ([`TtftModel::requests_cut`]) and the prediction rests on the ones
//! kept. A deployment's observed TTFT goes to one histogram (0.05 %
//! relative precision, about 130 KB), whatever the count; per endpoint,
//! the first [`MAX_ENDPOINT_SAMPLES`] observed values of the deployment
//! are kept (4 bytes each) for exact quantiles, over at most
//! [`MAX_OBSERVED_ENDPOINTS`] endpoints. Each request is counted once
//! (a request with several scheduling profiles logs several decisions,
//! within milliseconds of each other): the last [`RECENT_IDS`] request ids
//! are remembered as 8-byte fingerprints.

use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;

use gatecal_filter::Config;
use rustc_hash::{FxBuildHasher, FxHashSet};
use serde::Serialize;

mod self_check;

pub use super::edges::RECENT_IDS;
use super::edges::{Edge, Edges};
use super::replay::{EngineModel, Picker};
use super::workload::{Seen, Workload, WorkloadEvidence};
use super::{EngineFit, Prediction, infer_and_fit};
use crate::gate::hist::SignedHistogram;
pub use crate::gate::stats::{PredictedIntervals, PredictedTtft};
use crate::input::DecisionInput;
pub use self_check::{
    LoggedOutcomes, MAX_LOGGED_OUTCOMES_DIFFER, MIN_LOGGED_OUTCOMES, SelfCheck, SelfCheckQuantile,
    self_check,
};

/// Requests kept for the replay per deployment.
pub const MAX_REPLAY_REQUESTS: usize = 131_072;
/// Requests kept for the replay over all deployments.
pub const MAX_REPLAY_REQUESTS_TOTAL: usize = 262_144;
/// Endpoints per deployment whose observed TTFT is shown on its own.
pub const MAX_OBSERVED_ENDPOINTS: usize = 256;
/// The fitted speed's interval, relative to it, from which the replay is
/// run at its ends too.
pub const MIN_REPLAYED_INTERVAL: f64 = 0.01;
/// Observed TTFTs kept per deployment for the per-endpoint quantiles.
pub const MAX_ENDPOINT_SAMPLES: usize = 32_768;

/// What the observed TTFT is, in a sentence.
pub const OBSERVED_SOURCE: &str = "EPP log: from the request's \"EPP received request\" line to its first non-empty \"HandleResponseBody is triggered\" line (-v=4), one per request id";
/// Why there is no observed TTFT.
pub const NO_OBSERVED: &str = "none: the log shows no response body for any request (the EPP logs \"HandleResponseBody is triggered\" at -v=4 from builds of 2026-03-24 on, for streamed responses; a capture split across files loses the responses logged in a later file than their request)";

/// The picker the replay assumes.
pub const PICKER_ASSUMED: &str = "token-load scorer alone, max-score picker (assumed: the scorers and weights of the deployment's config are not read)";

/// Observed TTFT quantiles of one deployment (`observed_ttft_ms`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ObservedTtft {
    /// Nearest-rank median, ms (`null` without observations).
    pub p50: Option<f64>,
    /// 90th percentile, ms.
    pub p90: Option<f64>,
    /// 99th percentile, ms.
    pub p99: Option<f64>,
    /// Requests with an observed first token.
    pub n: u64,
    /// Where the figures come from, or why there are none.
    pub source: String,
}

/// Observed TTFT quantiles of one endpoint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointTtft {
    /// Median, ms.
    pub p50: Option<f64>,
    /// 90th percentile, ms.
    pub p90: Option<f64>,
    /// 99th percentile, ms.
    pub p99: Option<f64>,
    /// Requests sent to the endpoint with an observed first token.
    pub n: u64,
}

impl PredictedTtft {
    fn of(p: &Prediction) -> PredictedTtft {
        PredictedTtft {
            p50: p.quantiles_ms[0],
            p90: p.quantiles_ms[1],
            p99: p.quantiles_ms[2],
            mean: p.mean_ms,
            interval: PredictedIntervals {
                p50: p.intervals_ms[0],
                p90: p.intervals_ms[1],
                p99: p.intervals_ms[2],
                mean: p.mean_interval_ms,
            },
            n: p.n,
            logged_outcomes: p.logged_outcomes,
        }
    }

    /// The value and interval of `objective`.
    pub fn at(&self, objective: Objective) -> (f64, [f64; 2]) {
        match objective {
            Objective::P50 => (self.p50, self.interval.p50),
            Objective::P90 => (self.p90, self.interval.p90),
            Objective::P99 => (self.p99, self.interval.p99),
            Objective::Mean => (self.mean, self.interval.mean),
        }
    }
}

/// Which figure of the predicted TTFT the recommendation minimises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// The median.
    P50,
    /// The 90th percentile (the default).
    #[default]
    P90,
    /// The 99th percentile.
    P99,
    /// The mean.
    Mean,
}

impl Objective {
    /// The name, as `--objective` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Objective::P50 => "p50",
            Objective::P90 => "p90",
            Objective::P99 => "p99",
            Objective::Mean => "mean",
        }
    }
}

/// The workload counts shown with the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadCounts {
    /// Requests replayed.
    pub requests: usize,
    /// Whose uncached tokens came from exact candidates.
    pub exact: usize,
    /// From token-load scorer lines.
    pub from_loads: usize,
    /// Neither (the deployment's median so far).
    pub assumed: usize,
    /// Linked to an earlier request of their session.
    pub continued: usize,
    /// Of those, closed loops (think time known).
    pub closed_loops: usize,
    /// With an observed first token.
    pub observed_ttft: usize,
    /// The prefix every prompt shares (a system prompt), tokens, read off
    /// the uncached counts of endpoints that had served nothing yet
    /// against those that had; `null` when the log does not show one.
    pub shared_prefix_tokens: Option<u64>,
    /// Requests it was read from.
    pub shared_prefix_requests: usize,
}

impl From<&WorkloadEvidence> for WorkloadCounts {
    fn from(e: &WorkloadEvidence) -> Self {
        WorkloadCounts {
            requests: e.requests,
            exact: e.exact,
            from_loads: e.from_loads,
            assumed: e.assumed,
            continued: e.continued,
            closed_loops: e.closed_loops,
            observed_ttft: e.observed_ttft,
            shared_prefix_tokens: e.shared_prefix_tokens,
            shared_prefix_requests: e.shared_prefix_requests,
        }
    }
}

/// The engine model of a deployment and what it rests on (`ttft_model`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TtftModel {
    /// Uncached tokens one endpoint prefills per second, fitted (`null`
    /// without a fit): the prompt tokens of the fitted requests over their
    /// prefill time less the overhead, the decode share of the steps
    /// counted in that time.
    pub tokens_per_s: Option<f64>,
    /// Its 90 % interval.
    pub tokens_per_s_interval: Option<[f64; 2]>,
    /// Time each request takes beyond its tokens, ms.
    pub overhead_ms: Option<f64>,
    /// How long each request decodes on its endpoint after its first
    /// token, ms, fitted from the prefill times (each step of a prefill
    /// carries one token per request decoding): 0 when the fit is best
    /// without a decode share (`null` without a fit).
    pub decode_ms: Option<f64>,
    /// Requests the fit rests on (an observed first token, and the one
    /// before it on the same endpoint).
    pub fitted_requests: usize,
    /// Median relative error of the fitted service times.
    pub median_error: Option<f64>,
    /// How the parameters were found, or why there are none.
    pub source: String,
    /// The picker assumed after the filter.
    pub picker: String,
    /// The workload replayed.
    pub workload: WorkloadCounts,
    /// Requests not replayed, past the caps.
    pub requests_cut: u64,
    /// Under P/D (the log shows `prefill` profile decisions): the prefill
    /// pool the replay routes those requests to. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_pool: Option<PrefillPoolModel>,
}

/// The prefill pool of a P/D deployment as the replay models it
/// (`ttft_model.prefill_pool`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrefillPoolModel {
    /// Endpoints of the pool seen in the log.
    pub endpoints: usize,
    /// Requests the log shows prefilled there.
    pub requests: usize,
    /// Uncached tokens one prefill endpoint prefills per second, fitted to
    /// those requests' first tokens (`null` without a fit: the replay then
    /// serves every request on its decode endpoint).
    pub tokens_per_s: Option<f64>,
    /// Time each request takes beyond its tokens, ms, the KV transfer to
    /// the decode endpoint included.
    pub overhead_ms: Option<f64>,
    /// Requests the fit rests on.
    pub fitted_requests: usize,
    /// The P/D decider's threshold (`nonCachedTokens`) read off the log:
    /// uncached tokens on the decode endpoint from which a request is
    /// prefilled in the pool.
    pub non_cached_tokens: f64,
    /// Requests whose logged P/D choice that threshold does not reproduce.
    pub threshold_misses: usize,
    /// Requests of known uncached tokens the threshold was read from.
    pub threshold_requests: usize,
    /// What the replay assumes of the pool.
    pub assumed: String,
}

/// What the replay assumes of a P/D deployment's prefill pool.
pub const PREFILL_POOL_ASSUMED: &str = "the decode profile picks the decode endpoint; a request whose uncached tokens there reach the decider's threshold is prefilled in the pool, routed by the same filter and picker as the decode profile, first come first served on the pool's fitted engine; its first token is the prefill's end plus the KV transfer (fitted within the overhead); its uncached tokens count in flight on both endpoints until then";

/// The gate's TTFT the replay assumes under `ttftSource:
/// latencyPredictor`.
pub const PREDICTOR_ASSUMED: &str = "; under ttftSource latencyPredictor the filter's gate reads each endpoint's predicted TTFT as the fitted engine gives it (its in-flight and the request's uncached tokens at the fitted speed, plus the overhead: the predictor's own model and noise are not known)";

/// The observed TTFT of one deployment's requests, as the decisions
/// arrive: each request id once.
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    #[serde(skip)]
    ids: FxHashSet<u64>,
    #[serde(skip)]
    recent: VecDeque<u64>,
    all: Option<SignedHistogram>,
    by_endpoint: BTreeMap<String, Vec<f32>>,
    samples: usize,
    /// The requests near the ends, by request id, for a merge to count
    /// once a request two parts counted (absent from partials written
    /// before they were carried).
    #[serde(
        default,
        skip_serializing_if = "Edges::is_empty",
        serialize_with = "trimmed_edges"
    )]
    edges: Edges,
}

fn trimmed_edges<S: serde::Serializer>(e: &Edges, s: S) -> Result<S::Ok, S::Error> {
    e.trimmed().serialize(s)
}

impl Observed {
    /// Adds the decision of request `id` at `ts`, sent to `chosen`, with
    /// its observed TTFT; `false` (and nothing added) for a request already
    /// seen or a decision without a request id.
    pub fn push(
        &mut self,
        id: Option<&str>,
        ts: Option<f64>,
        chosen: Option<&str>,
        ttft_ms: Option<f64>,
    ) -> bool {
        let Some(rid) = id else {
            return false;
        };
        let f = fingerprint(rid);
        if !self.ids.insert(f) {
            return false;
        }
        self.recent.push_back(f);
        if self.recent.len() > RECENT_IDS
            && let Some(old) = self.recent.pop_front()
        {
            self.ids.remove(&old);
        }
        let at = self.edges.count(ts);
        if let Some(t) = ttft_ms.filter(|t| t.is_finite() && *t >= 0.0) {
            self.all.get_or_insert_with(SignedHistogram::new).record(t);
            let mut sample = None;
            if let Some(ep) = chosen
                && self.samples < MAX_ENDPOINT_SAMPLES
            {
                let n = self.by_endpoint.len();
                let v = match self.by_endpoint.get_mut(ep) {
                    Some(v) => Some(v),
                    None if n < MAX_OBSERVED_ENDPOINTS => {
                        Some(self.by_endpoint.entry(ep.to_string()).or_default())
                    }
                    None => None,
                };
                if let Some(v) = v {
                    v.push(t as f32);
                    self.samples += 1;
                    let at = (v.len() - 1) as u32;
                    sample = Some((self.edges.endpoint(ep), at));
                }
            }
            if let Some(ts) = ts {
                self.edges.note(Edge {
                    key: f,
                    ts,
                    at,
                    ttft_ms: t,
                    sample,
                });
            }
        }
        true
    }

    /// Adds another deployment part's requests (a partial report's, read
    /// after `self`'s): the histogram in full, the per-endpoint samples up
    /// to the caps, less the requests `self` counted already (their
    /// decisions straddle the two parts: [`super::edges`]). The request
    /// ids are not kept across parts.
    pub fn merge(&mut self, o: &Observed) {
        let dropped = self.edges.doubles(&o.edges);
        let mut all = o.all.clone();
        // Per endpoint, the indexes of its samples taken back (ascending).
        let mut gone: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &i in &dropped {
            let e = &o.edges.head[i];
            if let Some(h) = all.as_mut() {
                h.remove(e.ttft_ms);
            }
            if let Some((ep, k)) = &e.sample {
                gone.entry(ep.as_str()).or_default().push(*k as usize);
            }
        }
        if let Some(h) = &all {
            self.all.get_or_insert_with(SignedHistogram::new).merge(h);
        }
        // Per endpoint: where its later samples start in the merged ones,
        // and how many were taken.
        let mut placed: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (ep, v) in &o.by_endpoint {
            let n = self.by_endpoint.len();
            let mine = match self.by_endpoint.get_mut(ep) {
                Some(m) => m,
                None if n < MAX_OBSERVED_ENDPOINTS => {
                    self.by_endpoint.entry(ep.clone()).or_default()
                }
                None => continue,
            };
            let kept: Vec<f32> = match gone.get_mut(ep.as_str()) {
                Some(g) => {
                    g.sort_unstable();
                    v.iter()
                        .enumerate()
                        .filter(|(k, _)| g.binary_search(k).is_err())
                        .map(|(_, x)| *x)
                        .collect()
                }
                None => v.clone(),
            };
            let room = MAX_ENDPOINT_SAMPLES.saturating_sub(self.samples);
            let take = kept.len().min(room);
            placed.insert(ep.as_str(), (mine.len(), take));
            mine.extend_from_slice(&kept[..take]);
            self.samples += take;
        }
        let place = |(ep, k): &super::edges::Sample| -> Option<super::edges::Sample> {
            let (start, take) = *placed.get(ep.as_str())?;
            let k = *k as usize;
            let before = gone
                .get(ep.as_str())
                .map_or(0, |g| g.partition_point(|&x| x < k));
            let k = k.saturating_sub(before);
            (k < take).then(|| (ep.clone(), (start + k) as u32))
        };
        self.edges = self.edges.then(&o.edges, &dropped, &place);
    }

    /// The buckets of the deployment's observed TTFT histogram, ascending
    /// (empty without observations).
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        self.all
            .as_ref()
            .map(|h| h.recorded().buckets().to_vec())
            .unwrap_or_default()
    }

    /// The deployment's observed TTFT.
    pub fn summary(&self) -> ObservedTtft {
        match &self.all {
            Some(h) if h.count() > 0 => {
                let r = h.recorded();
                ObservedTtft {
                    p50: r.quantile(0.5),
                    p90: r.quantile(0.9),
                    p99: r.quantile(0.99),
                    n: h.count(),
                    source: OBSERVED_SOURCE.into(),
                }
            }
            _ => ObservedTtft {
                p50: None,
                p90: None,
                p99: None,
                n: 0,
                source: NO_OBSERVED.into(),
            },
        }
    }

    /// The observed TTFT of each endpoint with one (over the first
    /// [`MAX_ENDPOINT_SAMPLES`] requests of the deployment with one).
    pub fn by_endpoint(&self) -> BTreeMap<String, EndpointTtft> {
        self.by_endpoint
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(e, v)| {
                let mut v: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
                v.sort_by(f64::total_cmp);
                (
                    e.clone(),
                    EndpointTtft {
                        p50: super::nearest_rank(&v, 0.5),
                        p90: super::nearest_rank(&v, 0.9),
                        p99: super::nearest_rank(&v, 0.99),
                        n: v.len() as u64,
                    },
                )
            })
            .collect()
    }
}

/// The requests of one deployment, as the decisions arrive. Its serde
/// form (a partial report's) is the observed TTFT alone; the requests kept
/// for the replay travel in their own compact block
/// ([`Requests::kept`], [`Requests::set_kept`]).
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Requests {
    observed: Observed,
    #[serde(skip)]
    seen: Vec<Seen>,
    /// The request-id fingerprint of each of `seen`.
    #[serde(skip)]
    keys: Vec<u64>,
    #[serde(skip)]
    cut: u64,
    /// The last requests kept (id fingerprint, index in `seen`), for their
    /// prefill profile's decision under P/D.
    #[serde(skip)]
    recent: VecDeque<(u64, usize)>,
    /// Prefill profile decisions logged before their request's other
    /// decision (id fingerprint), at most [`RECENT_PREFILL`].
    #[serde(skip)]
    early_prefill: VecDeque<(u64, Seen)>,
    /// Decisions read from decision records of a version before 3, which
    /// carry no token loads and no arrival times
    /// ([`Requests::old_records`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    old_records: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The decision records before version 3 carry neither the candidates'
/// token loads nor the request's arrival.
const OLD_RECORD_VERSION: u32 = 3;

/// Requests remembered for their prefill profile's decision.
const RECENT_PREFILL: usize = 64;

fn fingerprint(id: &str) -> u64 {
    FxBuildHasher.hash_one(id)
}

impl Requests {
    /// Adds one counted decision; `room` is what is left of
    /// [`MAX_REPLAY_REQUESTS_TOTAL`]. A decision without a request id, or
    /// of a request already seen, adds nothing.
    pub fn push(&mut self, d: &DecisionInput, room: &mut usize) {
        self.push_with_id(d.request_id.as_deref(), d, room);
    }

    /// [`Requests::push`] of a decision whose request id `id` was taken out
    /// of it.
    pub fn push_with_id(&mut self, id: Option<&str>, d: &DecisionInput, room: &mut usize) {
        if d.recorded
            .as_ref()
            .is_some_and(|r| r.version < OLD_RECORD_VERSION)
        {
            self.old_records = self.old_records.saturating_add(1);
        }
        if super::is_prefill_profile(d) {
            // Under P/D: the prefill pool's decision goes with its
            // request's decode decision (counted there).
            let (Some(rid), Some(seen)) = (id, Seen::from_decision(d)) else {
                return;
            };
            let f = fingerprint(rid);
            match self.recent.iter().rev().find(|r| r.0 == f) {
                Some(&(_, k)) => {
                    if let Some(s) = self.seen.get_mut(k)
                        && s.prefill.is_none()
                    {
                        s.prefill = Some(Box::new(seen));
                    }
                }
                None => {
                    self.early_prefill.push_back((f, seen));
                    if self.early_prefill.len() > RECENT_PREFILL {
                        self.early_prefill.pop_front();
                    }
                }
            }
            return;
        }
        if !self
            .observed
            .push(id, d.ts, d.chosen.as_deref(), d.observed_ttft_ms)
        {
            // Another filter's decision of a request kept: the last one
            // that decided is the picker's input.
            if let Some(rid) = id
                && let Some(seen) = Seen::from_decision(d)
            {
                let f = fingerprint(rid);
                if let Some(&(_, k)) = self.recent.iter().rev().find(|r| r.0 == f)
                    && let Some(s) = self.seen.get_mut(k)
                {
                    s.refine(seen);
                }
            }
            return;
        }
        let Some(mut seen) = Seen::from_decision(d) else {
            return;
        };
        if self.seen.len() < MAX_REPLAY_REQUESTS && *room > 0 {
            *room -= 1;
            if let Some(rid) = id {
                let f = fingerprint(rid);
                if let Some(k) = self.early_prefill.iter().position(|e| e.0 == f) {
                    seen.prefill = self.early_prefill.remove(k).map(|e| Box::new(e.1));
                }
                self.recent.push_back((f, self.seen.len()));
                if self.recent.len() > RECENT_PREFILL {
                    self.recent.pop_front();
                }
                self.keys.push(f);
            }
            self.seen.push(seen);
        } else {
            self.cut += 1;
        }
    }

    /// Adds one counted decision to the observed TTFT alone (nothing kept
    /// for the replay): request `id` at `ts`, sent to `chosen`.
    pub fn observe(
        &mut self,
        id: Option<&str>,
        ts: Option<f64>,
        chosen: Option<&str>,
        ttft_ms: Option<f64>,
    ) {
        self.observed.push(id, ts, chosen, ttft_ms);
    }

    /// Adds another part's observed TTFT ([`Observed::merge`]); the
    /// requests kept for the replay are not merged (see
    /// [`Requests::take_kept`] and [`Requests::set_kept`]).
    pub fn merge(&mut self, o: &Requests) {
        self.observed.merge(&o.observed);
        self.old_records = self.old_records.saturating_add(o.old_records);
    }

    /// Why the workload of decisions read from records of an earlier
    /// version is assumed, when some were: they carry neither the
    /// candidates' token loads nor the request's arrival, which the
    /// workload inference reads.
    pub fn old_records(&self) -> Option<String> {
        (self.old_records > 0).then(|| {
            format!(
                "{} decision(s) read from decision records of a version before {OLD_RECORD_VERSION}, which carry neither the candidates' token loads nor the request's arrival: the predicted TTFT assumes their requests' uncached tokens (write the records again from the logs with this version)",
                self.old_records
            )
        })
    }

    /// Puts the requests kept in arrival order (stable: requests of the
    /// same arrival stay in the order they were counted), as the replay
    /// reads them.
    pub fn sort_kept(&mut self) {
        if self.keys.len() == self.seen.len() {
            let mut both: Vec<(Seen, u64)> = std::mem::take(&mut self.seen)
                .into_iter()
                .zip(std::mem::take(&mut self.keys))
                .collect();
            both.sort_by(|a, b| a.0.ts.total_cmp(&b.0.ts));
            (self.seen, self.keys) = both.into_iter().unzip();
        } else {
            self.seen.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        }
    }

    /// The requests kept for the replay, each with its request id's
    /// fingerprint (64-bit FxHash), and the count of those cut past the
    /// caps: what a partial report carries.
    pub fn kept(&self) -> (&[Seen], &[u64], u64) {
        (&self.seen, &self.keys, self.cut)
    }

    /// Takes the requests kept out ([`Requests::kept`]).
    pub fn take_kept(&mut self) -> (Vec<Seen>, Vec<u64>, u64) {
        (
            std::mem::take(&mut self.seen),
            std::mem::take(&mut self.keys),
            std::mem::take(&mut self.cut),
        )
    }

    /// Sets the requests kept, their fingerprints (one each) and the count
    /// cut: a partial report's, read back.
    pub fn set_kept(&mut self, seen: Vec<Seen>, keys: Vec<u64>, cut: u64) {
        debug_assert_eq!(seen.len(), keys.len());
        self.seen = seen;
        self.keys = keys;
        self.cut = cut;
    }

    /// The buckets of the observed TTFT histogram ([`Observed::buckets`]).
    pub fn observed_buckets(&self) -> Vec<(f64, u64)> {
        self.observed.buckets()
    }

    /// The observed TTFT of the deployment.
    pub fn observed(&self) -> ObservedTtft {
        self.observed.summary()
    }

    /// The observed TTFT of each endpoint with one.
    pub fn observed_by_endpoint(&self) -> BTreeMap<String, EndpointTtft> {
        self.observed.by_endpoint()
    }

    /// The engine fitted to the requests kept, ready to predict. `peak` is
    /// the deployment's peak estimate (used for the first tokens the log
    /// does not show), `threshold` the `affinityThreshold` in force,
    /// `block_size` the tokens per prefix block.
    pub fn engine(&mut self, peak: f64, threshold: f64, block_size: i64) -> Engine {
        // In arrival order (the decisions came in log order).
        self.sort_kept();
        let start = EngineModel {
            peak_tps: if peak.is_finite() && peak > 0.0 {
                peak
            } else {
                gatecal_filter::DEFAULT_CONFIG.peak_prefill_throughput
            },
            overhead_s: 0.0,
            latency_s: 0.0,
            cache_capacity_tokens: f64::INFINITY,
            block_size: block_size.max(1),
            decode_s: 0.0,
        };
        let (w, fit) = infer_and_fit(&self.seen, &[], threshold, &start);
        let source = match &fit {
            Some(f) => format!(
                "fitted to the observed first tokens of {} requests: each request's prefill time (its first token less the later of its arrival and the previous first token on its endpoint) regressed on the tokens its steps computed (its uncached tokens, and one per request decoding on its endpoint in each step of {:.0} tokens, each request decoding {:.1} s after its first token: the decode time of least error, assumed the same for every request) and on whether it found its endpoint idle (a latency of {:.1} ms, paid by such a request only); the prompt tokens drain at {:.0} tok/s; median error {:.1} %",
                f.n,
                super::replay::STEP_TOKENS,
                f.decode_s,
                f.latency_s * 1000.0,
                f.effective_tokens_per_s,
                f.median_error * 100.0
            ),
            None if w.evidence.observed_ttft == 0 => {
                "none: no request has an observed first token to fit the engine to".into()
            }
            None => format!(
                "none: {} request(s) with an observed first token and its endpoint's previous one; the fit needs {} and a positive speed",
                w.evidence.observed_ttft,
                super::MIN_FIT_REQUESTS
            ),
        };
        let model = TtftModel {
            // The rate prompt tokens drain at (what the gate's peak stands
            // for), its interval the speed's scaled alike.
            tokens_per_s: fit.map(|f| f.effective_tokens_per_s),
            tokens_per_s_interval: fit.and_then(|f| {
                let r = f.effective_tokens_per_s / f.tokens_per_s;
                f.tokens_per_s_interval.map(|[lo, hi]| [lo * r, hi * r])
            }),
            overhead_ms: fit.map(|f| f.overhead_s * 1000.0),
            decode_ms: fit.map(|f| f.decode_s * 1000.0),
            fitted_requests: fit.map_or(0, |f| f.n),
            median_error: fit.map(|f| f.median_error),
            source,
            picker: PICKER_ASSUMED.into(),
            workload: WorkloadCounts::from(&w.evidence),
            requests_cut: self.cut,
            prefill_pool: w.pd.as_deref().map(|pd| PrefillPoolModel {
                endpoints: pd.pool.endpoints.len(),
                requests: pd.pool.requests.len(),
                tokens_per_s: pd.fit.map(|f| f.tokens_per_s),
                overhead_ms: pd.fit.map(|f| f.overhead_s * 1000.0),
                fitted_requests: pd.fit.map_or(0, |f| f.n),
                non_cached_tokens: pd.non_cached_tokens,
                threshold_misses: pd.threshold_misses,
                threshold_requests: pd.decided,
                assumed: PREFILL_POOL_ASSUMED.into(),
            }),
        };
        Engine {
            engine: fit.map(|f| f.model(&start)),
            fit,
            w,
            model,
            bases: super::Baselines::default(),
        }
    }
}

/// A deployment's workload and fitted engine.
pub struct Engine {
    w: Workload,
    fit: Option<EngineFit>,
    engine: Option<EngineModel>,
    /// What is shown of it.
    pub model: TtftModel,
    /// The baselines of its predictions, kept from one config's to the
    /// next.
    bases: super::Baselines,
}

impl Engine {
    /// Names in `model.picker` what the replay assumes of the config in
    /// force's gate (its TTFT source).
    pub fn assume_config(&mut self, current: &Config) {
        if current.ttft_source == gatecal_filter::TtftSource::LatencyPredictor
            && !self.model.picker.ends_with(PREDICTOR_ASSUMED)
        {
            self.model.picker.push_str(PREDICTOR_ASSUMED);
        }
    }

    /// The rate the fitted engine drains prompt tokens at, tokens/s (its
    /// speed less the decode share of its steps,
    /// [`super::EngineFit::effective_tokens_per_s`]).
    pub fn fitted_peak(&self) -> Option<f64> {
        self.fit.map(|f| f.effective_tokens_per_s)
    }

    /// The predicted TTFT of `config`, `current` being the config in
    /// force, and the predicted prefix-cache hit share of prompt tokens;
    /// `None` without a fitted engine or a request to replay.
    pub fn predict(
        &self,
        current: &Config,
        config: &Config,
    ) -> Option<(PredictedTtft, Option<f64>)> {
        let m = self.engine.as_ref()?;
        // The speed's interval moves every TTFT by its relative width at
        // most; under 1 % that is inside the rank interval, and the two
        // replays at its ends are not run.
        let interval = self
            .fit
            .and_then(|f| f.tokens_per_s_interval.map(|i| (i, f.tokens_per_s)))
            .filter(|&([lo, hi], v)| (hi - lo) / v > MIN_REPLAYED_INTERVAL)
            .map(|(i, _)| i);
        let p = super::predict_replay_with(
            &self.w,
            current,
            config,
            &Picker::default(),
            m,
            interval,
            &self.bases,
        )
        .map(|p| super::with_model_error(&p, &super::MODEL_ERROR_LN90))?;
        Some((PredictedTtft::of(&p), p.prefix_hit_share))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(id: &str, ts: f64, ep: &str, ttft: Option<f64>) -> DecisionInput {
        DecisionInput {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some(id.into()),
            chosen: Some(ep.into()),
            observed_ttft_ms: ttft,
            ..DecisionInput::default()
        }
    }

    /// A request's prefill profile decision (P/D) goes with its decode
    /// decision, whichever comes first, and is not counted again; a later
    /// filter's decision of the same profile replaces the outcome.
    #[test]
    fn a_prefill_decision_goes_with_its_request() {
        let mut r = Requests::default();
        let mut room = 10;
        let prefill = |id: &str, ts: f64| DecisionInput {
            profile: Some("prefill".into()),
            ..decision(id, ts, "p0", Some(50.0))
        };
        r.push(&decision("r1", 1.0, "d0", Some(50.0)), &mut room);
        r.push(&prefill("r1", 1.0), &mut room);
        r.push(&prefill("r2", 2.0), &mut room);
        r.push(&decision("r2", 2.0, "d1", Some(70.0)), &mut room);
        r.push(&decision("r3", 3.0, "d1", None), &mut room);
        let later = DecisionInput {
            outcome: Some(gatecal_filter::Outcome::Sticky),
            ..decision("r3", 3.0, "d1", None)
        };
        r.push(&later, &mut room);
        assert_eq!(r.seen.len(), 3);
        assert_eq!(r.observed().n, 2);
        assert_eq!(
            r.observed_by_endpoint().keys().collect::<Vec<_>>(),
            ["d0", "d1"]
        );
        let p: Vec<Option<&str>> = r
            .seen
            .iter()
            .map(|s| s.prefill.as_deref().map(|p| p.chosen.as_str()))
            .collect();
        assert_eq!(p, [Some("p0"), Some("p0"), None]);
        assert_eq!(r.seen[2].outcome, Some(gatecal_filter::Outcome::Sticky));
    }

    #[test]
    fn observed_ttft_counts_each_request_once_per_endpoint() {
        let mut r = Requests::default();
        let mut room = 3;
        for i in 0..10 {
            let ep = if i % 2 == 0 { "a" } else { "b" };
            let d = decision(
                &format!("r{i}"),
                f64::from(i),
                ep,
                Some(f64::from(i + 1) * 10.0),
            );
            r.push(&d, &mut room);
            // A second profile's decision of the same request.
            r.push(&d, &mut room);
        }
        r.push(&decision("x", 20.0, "a", None), &mut room);
        let o = r.observed();
        assert_eq!(o.n, 10);
        assert!((o.p50.unwrap() - 50.0).abs() < 0.1, "{o:?}");
        assert!((o.p90.unwrap() - 90.0).abs() < 0.1, "{o:?}");
        let by = r.observed_by_endpoint();
        assert_eq!(by["a"].n, 5);
        assert_eq!(by["b"].n, 5);
        assert!((by["b"].p50.unwrap() - 60.0).abs() < 0.1);
        // Three kept for the replay, the other eight counted.
        assert_eq!(room, 0);
        assert_eq!(r.seen.len(), 3);
        assert_eq!(r.cut, 8);
        let none = Requests::default().observed();
        assert_eq!((none.n, none.p50), (0, None));
        assert!(none.source.starts_with("none"));
    }

    #[test]
    fn the_self_check_fails_outside_the_interval() {
        let p = PredictedTtft {
            p50: 100.0,
            p90: 200.0,
            p99: 400.0,
            mean: 120.0,
            interval: PredictedIntervals {
                p50: [90.0, 110.0],
                p90: [180.0, 220.0],
                p99: [300.0, 500.0],
                mean: [110.0, 130.0],
            },
            n: 1000,
            logged_outcomes: [0, 1000],
        };
        let mut o = ObservedTtft {
            p50: Some(105.0),
            p90: Some(210.0),
            p99: Some(900.0),
            n: 1000,
            source: String::new(),
        };
        let c = self_check(&p, &o, Objective::P90).unwrap();
        assert!(c.passed);
        assert!(!c.quantiles[2].inside);
        assert!((c.quantiles[1].gap_ms + 10.0).abs() < 1e-9);
        assert!(!self_check(&p, &o, Objective::P99).unwrap().passed);
        // A config that decides more than 5 % of the logged outcomes the
        // other way fails, however close its TTFT.
        let other = PredictedTtft {
            logged_outcomes: [51, 1000],
            ..p.clone()
        };
        let c = self_check(&other, &o, Objective::P90).unwrap();
        assert!(!c.passed && !c.logged_outcomes.reproduced);
        assert!(c.outcomes_failure().unwrap().contains("51 of 1000"));
        let near = PredictedTtft {
            logged_outcomes: [50, 1000],
            ..p.clone()
        };
        assert!(self_check(&near, &o, Objective::P90).unwrap().passed);
        let few = PredictedTtft {
            logged_outcomes: [5, 19],
            ..p.clone()
        };
        assert!(self_check(&few, &o, Objective::P90).unwrap().passed);
        o.p90 = Some(260.0);
        assert!(!self_check(&p, &o, Objective::P90).unwrap().passed);
        o.p50 = None;
        assert_eq!(self_check(&p, &o, Objective::P90), None);
    }
}
