//! Scenario definitions: deployments, pools, workloads, and the named
//! scenarios.

use std::sync::Arc;

use gatecal_filter::{Config, ConfigError, MissingSignal, TtftSource};

use crate::workload_trace::TraceRequest;

mod failures;
mod sweep;
use failures::{
    active_active, affinity_off, inert_breaks, missing_signal, stale_index, undersized_index,
};
pub use failures::{failure_scenario_names, failure_truth};
use sweep::peak_sweep;

/// A whole simulated run: one or more deployments in one EPP log stream.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Scenario name (`glm-like`, ...).
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Wall-clock start of the run, seconds since the Unix epoch.
    pub start_epoch_s: i64,
    /// Simulated duration in seconds. Rates and drifts are defined over the
    /// run's fraction `t / duration`, so a longer run stretches the same shape.
    pub duration_s: f64,
    /// The deployments, each with its own EPP pod.
    pub deployments: Vec<Deployment>,
    /// Log only the requests arriving within this fraction of the run
    /// (`(from, to)` in `[0, 1]`); the model still runs the whole run, so a
    /// small sample can come from a loaded late phase. `None` logs all.
    /// vLLM logs always cover the whole run.
    pub log_window: Option<(f64, f64)>,
    /// Seed of the routing's random stream (candidate order, missing
    /// signals, predictions, scrape times, exploration, tie-breaks); `None`
    /// uses the run's seed. Two runs that differ only in it have the same
    /// arrivals, prompts, sessions and think times, and differ only in the
    /// routing's draws ([`Scenario::with_routing_seed`]).
    pub routing_seed: Option<u64>,
}

/// vLLM stats-line flavour of an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VllmFlavor {
    /// V1 engine: `Engine 000: ... Prefix cache hit rate: x%`, every 10 s; the
    /// prompt throughput counts full prompts (cached tokens included) in the
    /// interval where the prefill completes.
    V1,
    /// V0 engine: `Avg prompt throughput ... Swapped ... CPU KV cache usage`,
    /// every 5 s; the prompt throughput counts prefill tokens computed in the
    /// interval.
    V0,
}

/// One filter instance in a profile.
#[derive(Clone, Debug)]
pub struct FilterInstance {
    /// Instance name (the `name` of the plugin entry; defaults to the type).
    pub name: String,
    /// Its parameters.
    pub config: Config,
}

impl FilterInstance {
    /// The default-named instance with a config.
    pub fn default_named(config: Config) -> FilterInstance {
        FilterInstance {
            name: "prefix-cache-affinity-filter".to_string(),
            config,
        }
    }
}

/// A set of endpoints one scheduling profile chooses from.
#[derive(Clone, Debug)]
pub struct Pool {
    /// Scheduling profile name (`default`, `decode`, `prefill`).
    pub profile: String,
    /// `llm-d.ai/role` label of its pods.
    pub role: String,
    /// Pods in the pool.
    pub pods: usize,
    /// Engines (target ports) per pod; each is an endpoint `<pod>-rank-<n>`.
    pub ranks_per_pod: usize,
    /// Raw prefill compute rate of each engine, tokens/s: the rate of a
    /// step's tokens, before the per-step and per-request costs (the
    /// effective saturated rate is lower, see [`Pool::prefill_overhead_ms`]).
    pub true_peak_tps: f64,
    /// Per-request cost of a prefill, ms: scheduling and sampling the first
    /// token.
    pub prefill_overhead_ms: f64,
    /// Fixed cost of one engine step, ms.
    pub step_overhead_ms: f64,
    /// `--max-num-batched-tokens`: the token budget of one step, shared by
    /// the decoding requests (one token each) and the prefill chunk.
    pub max_num_batched_tokens: i64,
    /// Prefix cache capacity per engine, tokens (LRU by session).
    pub kv_capacity_tokens: i64,
    /// Filter instances, run in order (each sees the previous survivors).
    pub filters: Vec<FilterInstance>,
    /// vLLM stats flavour.
    pub vllm: VllmFlavor,
    /// Weight of a `prefix-cache-scorer` run after the token-load scorer
    /// (weight 1) in the profile: it scores each survivor by its matched
    /// over total blocks, and the max-score picker takes the highest
    /// weighted sum. 0: no prefix scorer (the token-load scorer alone).
    pub prefix_scorer_weight: f64,
    /// What the approximate prefix producer's index holds per engine, in
    /// tokens (`lruCapacityPerServer` blocks of the deployment's block
    /// size), when it differs from the engine's cache: the candidates'
    /// match (what the filter and scorers see) comes from this index, the
    /// engine's real hits from its cache (`kv_capacity_tokens`). `None`:
    /// the index mirrors the engine's cache.
    pub index_capacity_tokens: Option<i64>,
}

/// The requests a deployment receives.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Poisson arrival rate (requests/s) at run fractions, linearly
    /// interpolated; `(fraction, rate)` with fractions ascending in `[0, 1]`.
    pub rate: Vec<(f64, f64)>,
    /// Mean tokens of a new session's first prompt beyond the system prompt,
    /// at run fractions, geometrically interpolated.
    pub context_mean: Vec<(f64, f64)>,
    /// Log-space sigma of the new-session context length.
    pub context_sigma: f64,
    /// Shared system prompt tokens (every prompt starts with it).
    pub system_prompt_tokens: i64,
    /// Mean turns per session (geometric).
    pub turns_mean: f64,
    /// Mean tokens of a follow-up user message (fixed part).
    pub user_msg_mean: f64,
    /// Follow-up messages also carry this fraction of the current context
    /// mean (tool results, pasted files: agentic turns grow with the drift).
    pub user_msg_frac: f64,
    /// Mean output tokens per request.
    pub output_mean: f64,
    /// Decode speed of one request, tokens/s.
    pub decode_tps: f64,
    /// Mean think time between a response and the session's next turn, s.
    pub think_s: f64,
    /// A request trace replayed instead of the synthetic sessions (open
    /// loop; see [`Scenario::with_workload_trace`]). Only `decode_tps` of
    /// the fields above still applies.
    pub trace: Option<Arc<[TraceRequest]>>,
    /// Users wait for their answers: new sessions arrive at `rate /
    /// turns_mean` (open loop) and every session sends all its turns, each
    /// `think_s` (drawn) after the previous answer ends, however long that
    /// takes. Off (the default), arrival slots come at `rate`, and a slot
    /// meant to continue a session whose picks are all still waiting is
    /// dropped, so a slower config sends fewer requests. On, two runs that
    /// differ only in config send the same requests, later or sooner (see
    /// [`Scenario::with_users`]).
    pub users: bool,
}

/// The P/D decider (`prefix-based-pd-decider`).
#[derive(Clone, Debug)]
pub struct PdDecider {
    /// `nonCachedTokens`: run the prefill profile only when at least this many
    /// prompt tokens are not cached on the chosen decode endpoint.
    pub non_cached_tokens: i64,
}

/// One llm-d deployment: an InferencePool with its EPP.
#[derive(Clone, Debug)]
pub struct Deployment {
    /// Deployment name (the `deployment` of the truth records).
    pub name: String,
    /// Kubernetes namespace of the pool's pods.
    pub namespace: String,
    /// Served model (`incomingModelName` = `targetModelName`).
    pub model: String,
    /// `objectiveKey`.
    pub objective_key: String,
    /// `priority` (`None` logs `null`).
    pub priority: Option<i64>,
    /// EPP pod name (for `--prefix` framing and the truth's `epp_pod`).
    pub epp_pod: String,
    /// Tokens per prefix-cache block.
    pub block_size: i64,
    /// Endpoint IDs carry the `-rank-<n>` suffix (HEAD); false for the
    /// older plain pod names.
    pub rank_suffix: bool,
    /// Pools: one (`default`), or `decode` then `prefill` with a P/D decider.
    pub pools: Vec<Pool>,
    /// The P/D decider, for disaggregated deployments.
    pub pd: Option<PdDecider>,
    /// Workload.
    pub workload: Workload,
    /// Probability that a candidate lacks the in-flight load attribute at a
    /// decision (exercises `missing signal`).
    pub missing_signal_prob: f64,
    /// Probability that a candidate lacks a latency prediction (predictor
    /// path). Under v0.9/v0.10 semantics a sticky side without predictions
    /// counts as `math.MaxFloat64` ms and breaks the gate with a 309-digit
    /// penalty.
    pub missing_prediction_prob: f64,
    /// Probability of a client-chosen request id `req-<n>` instead of a UUID.
    pub plain_request_ids_prob: f64,
    /// Active EPP replicas of the pool (1 normally). With more, each
    /// request is decided by one of them at random, and each replica
    /// counts only the in-flight tokens of the requests it scheduled
    /// itself; its lines carry its own pod name ([`Deployment::epp_pods`]).
    pub epp_replicas: usize,
}

impl Deployment {
    /// The pool whose engines do the prefill work (the `prefill` pool under
    /// P/D, else the only pool).
    pub fn prefill_pool(&self) -> &Pool {
        self.pools
            .iter()
            .find(|p| p.profile == "prefill")
            .unwrap_or(&self.pools[0])
    }

    /// True peak prefill throughput of one prefill engine, tokens/s.
    pub fn true_peak_tps(&self) -> f64 {
        self.prefill_pool().true_peak_tps
    }

    /// The EPP pod of each replica: [`Deployment::epp_pod`] first, then pods
    /// of the same ReplicaSet (its hash, another 5-character suffix).
    pub fn epp_pods(&self) -> Vec<String> {
        let n = self.epp_replicas.max(1);
        let mut pods = vec![self.epp_pod.clone()];
        let stem = match self.epp_pod.rfind('-') {
            Some(i) => &self.epp_pod[..i],
            None => self.epp_pod.as_str(),
        };
        let mut rng = crate::rng::Rng::derive(
            self.name
                .bytes()
                .fold(0x5eed_u64, |h, b| h.wrapping_mul(31) ^ u64::from(b)),
            5000,
        );
        while pods.len() < n {
            let p = format!("{stem}-{}", rng.token(5, b"bcdfghjklmnpqrstvwxz2456789"));
            if !pods.contains(&p) {
                pods.push(p);
            }
        }
        pods
    }

    /// The last filter instance's config of the first pool (the
    /// deployment's filter parameters reported in summaries).
    pub fn primary_config(&self) -> Config {
        self.pools
            .first()
            .and_then(|p| p.filters.last())
            .map(|f| f.config.clone())
            .unwrap_or_default()
    }
}

impl Scenario {
    /// Expected number of requests (integral of the arrival rates).
    pub fn expected_requests(&self) -> f64 {
        self.deployments
            .iter()
            .map(|d| mean_of_piecewise(&d.workload.rate) * self.duration_s)
            .sum()
    }

    /// The same scenario stretched (or shrunk) to about `n` requests.
    pub fn with_requests(mut self, n: u64) -> Scenario {
        let e = self.expected_requests();
        if e > 0.0 {
            self.duration_s *= n as f64 / e;
        }
        self
    }

    /// The same scenario logging only arrivals within `(from, to)` of the run.
    pub fn with_log_window(mut self, from: f64, to: f64) -> Scenario {
        self.log_window = Some((from, to));
        self
    }

    /// The same scenario with another duration in seconds.
    pub fn with_duration(mut self, seconds: f64) -> Scenario {
        self.duration_s = seconds;
        self
    }

    /// The same scenario with the routing's random stream drawn from
    /// `seed` instead of the run's seed: the workload (arrival slots,
    /// sessions, prompts, outputs, think times) stays that of the run's
    /// seed, so two runs that differ only in it measure how much the result
    /// moves with the routing's randomness alone.
    pub fn with_routing_seed(mut self, seed: u64) -> Scenario {
        self.routing_seed = Some(seed);
        self
    }

    /// The same scenario with users that wait for their answers
    /// ([`Workload::users`]) on every deployment: every session sends all
    /// its turns, so paired runs under two configs carry the same requests.
    pub fn with_users(mut self) -> Scenario {
        for d in &mut self.deployments {
            d.workload.users = true;
        }
        self
    }

    /// The scenario reduced to its deployment `deployment` (its pools,
    /// engines, filter config and decode speed), whose arrivals are the
    /// requests of `trace` (open loop, at their timestamps from the run's
    /// start); the run lasts until one second after the last arrival.
    /// `None` when no deployment has that name.
    pub fn with_workload_trace(
        mut self,
        deployment: &str,
        trace: Arc<[TraceRequest]>,
    ) -> Option<Scenario> {
        let i = self.deployments.iter().position(|d| d.name == deployment)?;
        let mut d = self.deployments.swap_remove(i);
        let last_ms = trace.last().map(|r| r.timestamp_ms).unwrap_or(0.0);
        d.workload.trace = Some(trace);
        self.deployments = vec![d];
        self.duration_s = last_ms / 1000.0 + 1.0;
        self.log_window = None;
        Some(self)
    }

    /// Sets a filter parameter, by its EPP name (`maxTTFTPenaltyMs`,
    /// `peakPrefillThroughput`, `penaltyMode`, `affinityThreshold`, ...), on
    /// every filter instance of the deployment `deployment`, or of every
    /// deployment when `None`. `value` is JSON (`5000`, `0.9`), or a bare
    /// string (`matchedTokens`). The result is decoded and validated as the
    /// EPP does ([`Config::from_value`]): a key that is not one of the
    /// decision parameters, a bad value or an unknown deployment is an
    /// error.
    pub fn set_filter_param(
        &mut self,
        deployment: Option<&str>,
        key: &str,
        value: &str,
    ) -> Result<(), String> {
        if let Some(name) = deployment
            && !self.deployments.iter().any(|d| d.name == name)
        {
            let known: Vec<&str> = self.deployments.iter().map(|d| d.name.as_str()).collect();
            return Err(format!(
                "unknown deployment {name:?}; this scenario has: {}",
                known.join(", ")
            ));
        }
        let known = Config::default().to_parameters();
        let known: Vec<&str> = known
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if !known.contains(&key) {
            return Err(format!(
                "unknown filter parameter {key:?}; known: {}",
                known.join(", ")
            ));
        }
        let parsed: serde_json::Value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        for d in &mut self.deployments {
            if deployment.is_some_and(|n| n != d.name) {
                continue;
            }
            for p in &mut d.pools {
                for f in &mut p.filters {
                    let mut params = f.config.to_parameters();
                    if let Some(obj) = params.as_object_mut() {
                        obj.insert(key.to_string(), parsed.clone());
                    }
                    let mut c = Config::from_value(&params).map_err(|e: ConfigError| {
                        format!("deployment {}, filter {}: {e}", d.name, f.name)
                    })?;
                    c.missing_signal = f.config.missing_signal;
                    f.config = c;
                }
            }
        }
        Ok(())
    }
}

/// Linear interpolation on `(x, y)` points (clamped at the ends).
pub fn interp(points: &[(f64, f64)], x: f64) -> f64 {
    match points {
        [] => 0.0,
        [(_, y)] => *y,
        _ => {
            if x <= points[0].0 {
                return points[0].1;
            }
            for w in points.windows(2) {
                let ((x0, y0), (x1, y1)) = (w[0], w[1]);
                if x <= x1 {
                    let f = if x1 > x0 { (x - x0) / (x1 - x0) } else { 1.0 };
                    return y0 + (y1 - y0) * f;
                }
            }
            points[points.len() - 1].1
        }
    }
}

/// Geometric interpolation on `(x, y)` points with positive `y`.
pub fn interp_geo(points: &[(f64, f64)], x: f64) -> f64 {
    let logs: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x, y.max(1e-9).ln())).collect();
    interp(&logs, x).exp()
}

fn mean_of_piecewise(points: &[(f64, f64)]) -> f64 {
    let n = 1000;
    (0..n)
        .map(|i| interp(points, (i as f64 + 0.5) / n as f64))
        .sum::<f64>()
        / n as f64
}

/// The names [`scenario`] knows.
pub fn scenario_names() -> &'static [&'static str] {
    &[
        "glm-like",
        "glm-like-v1",
        "balanced",
        "eight-deployments",
        "pd-disagg",
        "latency-predictor",
        "peak-sweep",
    ]
}

/// A named scenario, or `None`.
pub fn scenario(name: &str) -> Option<Scenario> {
    match name {
        "glm-like" => Some(glm_like()),
        "glm-like-v1" => Some(glm_like_v1()),
        "balanced" => Some(balanced()),
        "eight-deployments" => Some(eight_deployments()),
        "pd-disagg" => Some(pd_disagg()),
        "latency-predictor" => Some(latency_predictor()),
        "peak-sweep" => Some(peak_sweep()),
        "affinity-off" => Some(affinity_off()),
        "missing-signal" => Some(missing_signal()),
        "active-active" => Some(active_active()),
        "inert-breaks" => Some(inert_breaks()),
        "undersized-index" => Some(undersized_index()),
        "stale-index" => Some(stale_index()),
        _ => None,
    }
}

/// 2026-08-21T14:00:00Z.
const START: i64 = 1_787_320_800;

fn pool(profile: &str, role: &str, pods: usize, peak: f64, config: Config) -> Pool {
    Pool {
        profile: profile.to_string(),
        role: role.to_string(),
        pods,
        ranks_per_pod: 1,
        true_peak_tps: peak,
        prefill_overhead_ms: 40.0,
        step_overhead_ms: 4.0,
        max_num_batched_tokens: 8192,
        kv_capacity_tokens: 2_000_000,
        filters: vec![FilterInstance::default_named(config)],
        vllm: VllmFlavor::V1,
        prefix_scorer_weight: 0.0,
        index_capacity_tokens: None,
    }
}

fn workload(rate: Vec<(f64, f64)>, context: Vec<(f64, f64)>) -> Workload {
    Workload {
        rate,
        context_mean: context,
        context_sigma: 0.7,
        system_prompt_tokens: 1200,
        turns_mean: 5.0,
        user_msg_mean: 250.0,
        user_msg_frac: 0.0,
        output_mean: 350.0,
        decode_tps: 40.0,
        think_s: 8.0,
        trace: None,
        users: false,
    }
}

fn deployment(
    name: &str,
    namespace: &str,
    model: &str,
    epp_hash: &str,
    pools: Vec<Pool>,
) -> Deployment {
    Deployment {
        name: name.to_string(),
        namespace: namespace.to_string(),
        model: model.to_string(),
        objective_key: model.to_string(),
        priority: Some(0),
        epp_pod: format!("{name}-epp-{epp_hash}"),
        block_size: 64,
        rank_suffix: true,
        pools,
        pd: None,
        workload: workload(vec![(0.0, 1.0)], vec![(0.0, 5000.0)]),
        missing_signal_prob: 0.0,
        missing_prediction_prob: 0.0,
        plain_request_ids_prob: 0.0,
        epp_replicas: 1,
    }
}

/// The seed's glm-5-2 case: prompts drift from ~5k to ~78k tokens over the
/// run on 4 engines with a true peak of 3000 tokens/s each, default filter
/// (18000 ms bar, 15928 tok/s assumed peak), and a few minutes of backlog
/// a third into the run.
fn glm_like() -> Scenario {
    let mut d = deployment(
        "glm-5-2",
        "llm-d-glm",
        "zai-org/GLM-5.2-FP8",
        "6f7c9d8b5-xk2lp",
        vec![pool("default", "decode", 4, 3000.0, Config::default())],
    );
    d.workload = workload(
        // A backlog burst at 31-38% of the run saturates every engine for a
        // few minutes: the stretch from which vLLM's stats recover the peak.
        vec![
            (0.0, 0.9),
            (0.3, 0.8),
            (0.31, 5.0),
            (0.38, 5.0),
            (0.39, 0.6),
            (0.5, 0.56),
            (1.0, 0.49),
        ],
        vec![(0.0, 3500.0), (0.5, 90000.0), (1.0, 140000.0)],
    );
    d.workload.turns_mean = 6.0;
    d.workload.context_sigma = 0.9;
    d.workload.user_msg_frac = 0.02;
    d.workload.think_s = 4.0;
    Scenario {
        name: "glm-like".to_string(),
        description: "glm-5-2: prompts drift ~5k -> ~78k tokens, 4 engines at 3000 tok/s, default 18000 ms bar"
            .to_string(),
        start_epoch_s: START,
        duration_s: 1800.0,
        deployments: vec![d],
        log_window: None,
        routing_seed: None,
    }
}

/// `glm-like` under the filter's first defaults (V1, before 2026-06-13):
/// `maxTTFTPenaltyMs: 5000` and `explorationProbability: 0.01`. The same
/// load now breaks the gate often, so its logs carry many
/// `TTFT load gate broken` lines with their penalties.
fn glm_like_v1() -> Scenario {
    let mut s = glm_like();
    s.name = "glm-like-v1".to_string();
    s.description = "glm-like under the V1 defaults: 5000 ms bar, 1% exploration".to_string();
    for d in &mut s.deployments {
        for p in &mut d.pools {
            for f in &mut p.filters {
                f.config.max_ttft_penalty_ms = 5000.0;
                f.config.exploration_probability = 0.01;
            }
        }
    }
    s
}

/// A comfortably provisioned deployment with short prompts: the gate rarely
/// matters. Uses two ranks per pod, 16-token blocks, 1% exploration (the
/// pre-June default) and occasional missing load signals.
fn balanced() -> Scenario {
    let config = Config {
        exploration_probability: 0.01,
        ..Config::default()
    };
    let mut p = pool("default", "decode", 3, 16000.0, config);
    p.ranks_per_pod = 2;
    let mut d = deployment(
        "qwen3-32b",
        "llm-d",
        "Qwen/Qwen3-32B",
        "7c9d8f6b5-q8wzt",
        vec![p],
    );
    d.block_size = 16;
    d.objective_key = "chat".to_string();
    d.missing_signal_prob = 0.03;
    d.plain_request_ids_prob = 0.2;
    d.workload = workload(
        vec![(0.0, 4.0), (1.0, 4.0)],
        vec![(0.0, 2500.0), (1.0, 3000.0)],
    );
    Scenario {
        name: "balanced".to_string(),
        description:
            "qwen3-32b: short prompts, 6 engines (3 pods x 2 ranks) at 16000 tok/s, lightly loaded"
                .to_string(),
        start_epoch_s: START,
        duration_s: 600.0,
        deployments: vec![d],
        log_window: None,
        routing_seed: None,
    }
}

/// Eight deployments in one stream, true peaks from 743 to 27261 tok/s,
/// each pushed past saturation by a load burst (except the last).
fn eight_deployments() -> Scenario {
    let specs: [(&str, &str, f64, usize, f64, VllmFlavor); 8] = [
        (
            "glm-5-2",
            "zai-org/GLM-5.2-FP8",
            743.0,
            4,
            1.5,
            VllmFlavor::V1,
        ),
        (
            "kimi-k2",
            "moonshotai/Kimi-K2-Instruct",
            1850.0,
            4,
            1.5,
            VllmFlavor::V1,
        ),
        (
            "deepseek-v3",
            "deepseek-ai/DeepSeek-V3.1",
            3400.0,
            4,
            1.2,
            VllmFlavor::V0,
        ),
        (
            "qwen3-coder",
            "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",
            6100.0,
            3,
            1.0,
            VllmFlavor::V1,
        ),
        (
            "llama-70b",
            "meta-llama/Llama-3.3-70B-Instruct",
            9800.0,
            3,
            0.8,
            VllmFlavor::V0,
        ),
        (
            "qwen3-32b",
            "Qwen/Qwen3-32B",
            15928.0,
            2,
            0.8,
            VllmFlavor::V1,
        ),
        (
            "gpt-oss-120b",
            "openai/gpt-oss-120b",
            21500.0,
            2,
            0.7,
            VllmFlavor::V1,
        ),
        (
            "mistral-small",
            "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
            27261.0,
            2,
            0.6,
            VllmFlavor::V1,
        ),
    ];
    let hashes = [
        "5d8f7b6c9-2xk4q",
        "84c6d9f7b-mz7rt",
        "6b9c8d7f5-hq2wn",
        "7f5d6c8b9-vb9kx",
        "59d7c6b8f-tr4pl",
        "6c8f9b7d5-wn3zs",
        "7b6d5f9c8-kx8mq",
        "8d9c7b6f5-pl2vz",
    ];
    let mut deployments = Vec::new();
    for (i, ((name, model, peak, pods, ctx, flavor), hash)) in
        specs.into_iter().zip(hashes).enumerate()
    {
        let mut p = pool("default", "decode", pods, peak, Config::default());
        p.vllm = flavor;
        let mut d = deployment(name, &format!("llm-d-{name}"), model, hash, vec![p]);
        d.block_size = if i % 2 == 0 { 64 } else { 16 };
        d.rank_suffix = i != 4;
        if i == 5 {
            d.priority = None;
        }
        let capacity = peak * pods as f64;
        // Prompts scale with the deployment's capacity so that every
        // deployment sees a similar request rate.
        let ctx = (capacity * ctx).clamp(3000.0, 60000.0);
        // Mean uncached tokens per request: a new session's context spread
        // over its turns, plus the follow-ups' growth.
        let per_req = ctx / 5.0 + 600.0;
        let base = 0.3 * capacity / per_req;
        let burst = if i == 7 { 0.6 } else { 3.0 } * capacity / per_req;
        let (b0, b1) = (0.1 + 0.1 * i as f64 / 8.0, 0.45 + 0.1 * i as f64 / 8.0);
        d.workload = workload(
            vec![
                (0.0, base),
                (b0, base),
                (b0 + 0.02, burst),
                (b1, burst),
                (b1 + 0.02, base),
                (1.0, base),
            ],
            vec![(0.0, ctx), (1.0, ctx * 1.3)],
        );
        deployments.push(d);
    }
    Scenario {
        name: "eight-deployments".to_string(),
        description: "8 deployments in one stream, true peak 743..27261 tok/s, each saturated by a burst except mistral-small"
            .to_string(),
        start_epoch_s: START,
        duration_s: 600.0,
        deployments,
        log_window: None,
        routing_seed: None,
    }
}

/// Prefill/decode disaggregation: the filter runs in both the `decode` and
/// `prefill` profiles under one request id.
fn pd_disagg() -> Scenario {
    let decode = pool("decode", "decode", 4, 9000.0, Config::default());
    let prefill = pool("prefill", "prefill", 4, 8000.0, Config::default());
    let mut d = deployment(
        "deepseek-pd",
        "llm-d-pd",
        "deepseek-ai/DeepSeek-R1-0528",
        "5f8d9c7b6-rk4vn",
        vec![decode, prefill],
    );
    d.pd = Some(PdDecider {
        non_cached_tokens: 2048,
    });
    d.workload = workload(
        vec![(0.0, 2.0), (0.5, 4.0), (1.0, 2.5)],
        vec![(0.0, 8000.0), (1.0, 20000.0)],
    );
    Scenario {
        name: "pd-disagg".to_string(),
        description: "deepseek-pd: 4 decode + 4 prefill engines, prefix-based P/D decider, filter in both profiles"
            .to_string(),
        start_epoch_s: START,
        duration_s: 600.0,
        deployments: vec![d],
        log_window: None,
        routing_seed: None,
    }
}

/// The Helm chart's latency-predictor setup: two filter instances in one
/// profile, `strict-affinity-filter` (0.99) then `loose-affinity-filter`
/// (0.80), both `ttftSource: latencyPredictor` with a 5000 ms bar, with the
/// v0.9/v0.10 missing-prediction semantics (a side without predictions is
/// `math.MaxFloat64` ms) and an occasional missing prediction.
fn latency_predictor() -> Scenario {
    let lp = |name: &str, threshold: f64| FilterInstance {
        name: name.to_string(),
        config: Config {
            affinity_threshold: threshold,
            max_ttft_penalty_ms: 5000.0,
            ttft_source: TtftSource::LatencyPredictor,
            missing_signal: MissingSignal::AsZero,
            ..Config::default()
        },
    };
    let mut p = pool("default", "decode", 4, 12000.0, Config::default());
    p.filters = vec![
        lp("strict-affinity-filter", 0.99),
        lp("loose-affinity-filter", 0.80),
    ];
    let mut d = deployment(
        "qwen3-coder-lp",
        "llm-d-lp",
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "6d7b8c9f5-zt6mw",
        vec![p],
    );
    d.missing_prediction_prob = 0.004;
    d.workload = workload(
        vec![(0.0, 3.0), (0.5, 6.0), (1.0, 3.0)],
        vec![(0.0, 6000.0), (1.0, 15000.0)],
    );
    Scenario {
        name: "latency-predictor".to_string(),
        description: "qwen3-coder-lp: chart's strict (0.99) + loose (0.80) latency-predictor filters in one profile"
            .to_string(),
        start_epoch_s: START,
        duration_s: 600.0,
        deployments: vec![d],
        log_window: None,
        routing_seed: None,
    }
}
