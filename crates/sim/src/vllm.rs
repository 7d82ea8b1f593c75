//! vLLM engine logs: the periodic stats line of each engine, in the v1 or
//! v0 wording, computed from the jobs the model recorded.

use std::fmt::Write as _;

use crate::model::{DepState, EndpointInfo, Job};
use crate::rng::Rng;
use crate::scenario::{Scenario, VllmFlavor};
use crate::zap::vllm_time;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    /// Full prompts (cached included) of the requests whose first token
    /// came in the interval (v1's count).
    prompt: f64,
    /// Prefill tokens computed in the interval (v0's count).
    computed: f64,
    generated: f64,
    running: i64,
    waiting: i64,
    kv_tokens: f64,
}

/// The most recent requests vLLM v1's `PrefixCachingMetrics` aggregates.
pub const HIT_RATE_WINDOW: usize = 1000;

/// What one engine's stats lines rest on, for the truth.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineTruth {
    /// Uncached tokens of the prefills that started behind a backlog.
    pub backlog_tokens: f64,
    /// Their prefill time, seconds (overheads and shared steps included).
    pub backlog_secs: f64,
    /// Stats lines (logged at INFO) reporting waiting requests.
    pub saturated_lines: u64,
}

/// The rolling prefix-cache hit rate of vLLM v1: queries (full prompt
/// tokens) and hits (cached tokens) are counted when a request is
/// scheduled, and the rate aggregates the most recent
/// [`HIT_RATE_WINDOW`] requests.
struct RollingHits {
    /// Scheduling times, ascending.
    starts: Vec<i64>,
    /// Prefix sums of queries and hits, one longer than `starts`.
    queries: Vec<f64>,
    hits: Vec<f64>,
}

impl RollingHits {
    fn new(jobs: &[Job]) -> RollingHits {
        let mut v: Vec<(i64, f64, f64)> = jobs
            .iter()
            .filter(|j| j.computed_tokens > 0)
            .map(|j| (j.start_ns, j.prompt_tokens as f64, j.cached_tokens as f64))
            .collect();
        v.sort_by_key(|x| x.0);
        let mut queries = vec![0.0];
        let mut hits = vec![0.0];
        for x in &v {
            queries.push(queries.last().unwrap_or(&0.0) + x.1);
            hits.push(hits.last().unwrap_or(&0.0) + x.2);
        }
        RollingHits {
            starts: v.iter().map(|x| x.0).collect(),
            queries,
            hits,
        }
    }

    /// The hit rate at `t`, percent.
    fn at(&self, t: i64) -> f64 {
        let n = self.starts.partition_point(|s| *s <= t);
        let lo = n.saturating_sub(HIT_RATE_WINDOW);
        let q = self.queries[n] - self.queries[lo];
        if q > 0.0 {
            (self.hits[n] - self.hits[lo]) / q * 100.0
        } else {
            0.0
        }
    }
}

/// Stats lines of one engine, as (time, text) pairs, and the truth behind them.
fn engine_lines(
    jobs: &[Job],
    flavor: VllmFlavor,
    engine: usize,
    api_prefix: bool,
    first_ns: i64,
    end_ns: i64,
    kv_capacity: i64,
) -> (Vec<(i64, String)>, EngineTruth) {
    let mut truth = EngineTruth::default();
    for j in jobs {
        if j.computed_tokens > 0 && j.start_ns > j.arrive_ns {
            truth.backlog_tokens += j.computed_tokens as f64;
            truth.backlog_secs += (j.first_token_ns - j.start_ns) as f64 / 1e9;
        }
    }
    let dt: i64 = match flavor {
        VllmFlavor::V1 => 10_000_000_000,
        VllmFlavor::V0 => 5_000_000_000,
    };
    if end_ns <= first_ns {
        return (Vec::new(), truth);
    }
    let k_max = ((end_ns - first_ns) / dt) as usize;
    let mut b = vec![Bucket::default(); k_max + 1];
    // Bucket k covers (first + (k-1)dt, first + k dt].
    let idx = |x: i64| -> i64 { (x - first_ns + dt - 1).div_euclid(dt) };
    let t_of = |k: i64| first_ns + k * dt;
    let spread = |b: &mut Vec<Bucket>, a: i64, z: i64, amount: f64, f: fn(&mut Bucket, f64)| {
        if z <= a {
            let k = idx(z);
            if (1..=k_max as i64).contains(&k) {
                f(&mut b[k as usize], amount);
            }
            return;
        }
        let (k0, k1) = (idx(a).max(1), idx(z).min(k_max as i64));
        for k in k0..=k1 {
            let lo = a.max(t_of(k - 1));
            let hi = z.min(t_of(k));
            if hi > lo {
                f(
                    &mut b[k as usize],
                    amount * (hi - lo) as f64 / (z - a) as f64,
                );
            }
        }
    };
    for j in jobs {
        let k = idx(j.first_token_ns);
        if (1..=k_max as i64).contains(&k) {
            b[k as usize].prompt += j.prompt_tokens as f64;
        }
        spread(
            &mut b,
            j.start_ns,
            j.first_token_ns,
            j.computed_tokens as f64,
            |b, v| b.computed += v,
        );
        spread(
            &mut b,
            j.first_token_ns,
            j.done_ns,
            j.output_tokens as f64,
            |b, v| b.generated += v,
        );
        // The scheduler's counts at the line (the last step before it is
        // taken as the line's instant): waiting = arrived, not scheduled;
        // running = scheduled, not finished.
        let kw0 = idx(j.arrive_ns).max(1);
        let ks = idx(j.start_ns);
        let kd = idx(j.done_ns);
        for k in kw0..ks.min(k_max as i64 + 1) {
            if t_of(k) >= j.arrive_ns && t_of(k) < j.start_ns {
                b[k as usize].waiting += 1;
            }
        }
        for k in ks.max(1)..=kd.min(k_max as i64) {
            let t = t_of(k);
            if t >= j.start_ns && t < j.done_ns {
                let bk = &mut b[k as usize];
                bk.running += 1;
                let generated = if t > j.first_token_ns && j.done_ns > j.first_token_ns {
                    j.output_tokens as f64 * (t - j.first_token_ns) as f64
                        / (j.done_ns - j.first_token_ns) as f64
                } else {
                    0.0
                };
                bk.kv_tokens += j.prompt_tokens as f64 + generated;
            }
        }
    }
    let hits = RollingHits::new(jobs);
    let secs = dt as f64 / 1e9;
    let mut out = Vec::new();
    // v1 logs every interval, at DEBUG when this and the previous interval
    // had no throughput (not shown at the default level); v0 logs at the
    // first engine step after its interval elapsed, so an idle engine logs
    // nothing and the next line covers the idle time too.
    let mut last = (0.0, 0.0);
    let mut last_line = t_of(0);
    for (k, bk) in b.iter().enumerate().skip(1) {
        let t = t_of(k as i64);
        let kv = (bk.kv_tokens / kv_capacity.max(1) as f64 * 100.0).min(100.0);
        let mut line = String::new();
        match flavor {
            VllmFlavor::V1 => {
                let now = (bk.prompt / secs, bk.generated / secs);
                let info = now.0 > 0.0 || now.1 > 0.0 || last.0 > 0.0 || last.1 > 0.0;
                last = now;
                if !info {
                    continue;
                }
                if api_prefix {
                    line.push_str("(APIServer pid=1) ");
                }
                let _ = write!(
                    line,
                    "INFO {} [loggers.py:123] Engine {:03}: Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {} reqs, Waiting: {} reqs, GPU KV cache usage: {:.1}%, Prefix cache hit rate: {:.1}%",
                    vllm_time(t),
                    engine,
                    now.0,
                    now.1,
                    bk.running,
                    bk.waiting,
                    kv,
                    hits.at(t)
                );
            }
            VllmFlavor::V0 => {
                let busy =
                    bk.computed > 0.0 || bk.generated > 0.0 || bk.running > 0 || bk.waiting > 0;
                if !busy {
                    continue;
                }
                let span = (t - last_line) as f64 / 1e9;
                last_line = t;
                let _ = write!(
                    line,
                    "INFO {} metrics.py:351] Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {} reqs, Swapped: 0 reqs, Pending: {} reqs, GPU KV cache usage: {:.1}%, CPU KV cache usage: 0.0%.",
                    vllm_time(t),
                    bk.computed / span,
                    bk.generated / span,
                    bk.running,
                    bk.waiting,
                    kv
                );
            }
        }
        if bk.waiting > 0 {
            truth.saturated_lines += 1;
        }
        out.push((t, line));
    }
    (out, truth)
}

/// Prometheus scrape interval of the simulated `query_range` responses, s.
pub const SCRAPE_INTERVAL_S: i64 = 15;

/// The `vllm:*` series an engine exports, one per query file, in file order:
/// `(file stem, metric name, extra label)`.
/// A series: file stem, metric name, and an extra label.
type PromSeries = (
    &'static str,
    &'static str,
    Option<(&'static str, &'static str)>,
);

/// One engine's labels and its samples at each scrape.
type EngineSeries = (String, Vec<(i64, [f64; 6])>);

const PROM_SERIES: [PromSeries; 6] = [
    (
        "prefix_cache_queries",
        "vllm:prefix_cache_queries_total",
        None,
    ),
    ("prefix_cache_hits", "vllm:prefix_cache_hits_total", None),
    ("prompt_tokens", "vllm:prompt_tokens_total", None),
    (
        "prompt_tokens_local_compute",
        "vllm:prompt_tokens_by_source_total",
        Some(("source", "local_compute")),
    ),
    (
        "prompt_tokens_cached",
        "vllm:prompt_tokens_cached_total",
        None,
    ),
    ("num_requests_waiting", "vllm:num_requests_waiting", None),
];

/// One engine's samples of the [`PROM_SERIES`] at each scrape: counters as
/// vLLM v1 keeps them (queries and hits at scheduling; prompt tokens, by
/// source and cached at prefill completion) and the waiting gauge.
fn engine_series(jobs: &[Job], start_ns: i64, end_ns: i64) -> Vec<(i64, [f64; 6])> {
    let mut out = Vec::new();
    let step = SCRAPE_INTERVAL_S * 1_000_000_000;
    let mut t = start_ns - start_ns.rem_euclid(step) + step;
    while t <= end_ns {
        let mut v = [0.0; 6];
        for j in jobs {
            if j.computed_tokens > 0 && j.start_ns <= t {
                v[0] += j.prompt_tokens as f64;
                v[1] += j.cached_tokens as f64;
            }
            if j.first_token_ns <= t {
                v[2] += j.prompt_tokens as f64;
                v[3] += j.computed_tokens as f64;
                v[4] += (j.prompt_tokens - j.computed_tokens) as f64;
            }
            if j.arrive_ns <= t && t < j.start_ns {
                v[5] += 1.0;
            }
        }
        out.push((t, v));
        t += step;
    }
    out
}

/// Labels of one engine's series: what a Kubernetes scrape of vLLM adds.
fn engine_labels(e: &EndpointInfo, model: &str) -> String {
    format!(
        "\"engine\":\"{}\",\"instance\":\"{}\",\"job\":\"vllm\",\"model_name\":\"{}\",\"namespace\":\"{}\",\"pod\":\"{}\"",
        e.rank,
        e.host_port(),
        model,
        e.namespace,
        e.pod
    )
}

/// The Prometheus HTTP API `query_range` responses (one per query, as
/// `curl .../api/v1/query_range?query=<metric>` prints them) for every
/// engine of the scenario: `(file name, bytes)`.
fn prometheus_files(per_engine: &[EngineSeries]) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for (i, (stem, name, extra)) in PROM_SERIES.iter().enumerate() {
        let mut b = String::from(
            "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[",
        );
        for (k, (labels, samples)) in per_engine.iter().enumerate() {
            if k > 0 {
                b.push(',');
            }
            let _ = write!(b, "{{\"metric\":{{\"__name__\":\"{name}\",{labels}");
            if let Some((lk, lv)) = extra {
                let _ = write!(b, ",\"{lk}\":\"{lv}\"");
            }
            b.push_str("},\"values\":[");
            for (n, (t, v)) in samples.iter().enumerate() {
                if n > 0 {
                    b.push(',');
                }
                let _ = write!(b, "[{:.3},\"{}\"]", *t as f64 / 1e9, v[i]);
            }
            b.push_str("]}");
        }
        b.push_str("]}}\n");
        files.push((format!("{stem}.json"), b.into_bytes()));
    }
    files
}

/// The truth of a deployment's peak prefill throughput, from its prefill
/// engines.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PeakTruth {
    /// The effective saturated prefill rate of one engine, tokens/s: the
    /// uncached tokens of the prefills that started behind a backlog over
    /// their prefill time (per-request overhead and the steps shared with
    /// decode included), summed over the engines. `None` when no prefill
    /// ever waited.
    pub effective_tps: Option<f64>,
    /// The median over the engines of their stats lines reporting waiting
    /// requests.
    pub saturated_intervals: u64,
}

/// What the engines of a run wrote.
pub struct VllmOut {
    /// The vLLM log of every pod of every deployment, `(pod, bytes)`, in
    /// scenario order.
    pub logs: Vec<(String, Vec<u8>)>,
    /// The peak truth of each deployment.
    pub peaks: Vec<PeakTruth>,
    /// Prometheus `query_range` responses, `(file name, bytes)`.
    pub prometheus: Vec<(String, Vec<u8>)>,
}

/// The vLLM logs, Prometheus series and peak truth of a run.
pub fn vllm_logs(
    s: &Scenario,
    states: &[DepState],
    seed: u64,
    start_ns: i64,
    end_ns: i64,
) -> VllmOut {
    let mut logs = Vec::new();
    let mut truths = Vec::new();
    let mut series = Vec::new();
    for (di, (dep, st)) in s.deployments.iter().zip(states).enumerate() {
        let mut rng = Rng::derive(seed, 5000 + di as u64);
        let prefill_pool = dep
            .pools
            .iter()
            .position(|p| p.profile == "prefill")
            .unwrap_or(0);
        let (mut tokens, mut secs, mut sat) = (0.0, 0.0, Vec::new());
        for (pi, pool) in dep.pools.iter().enumerate() {
            let ps = &st.pools[pi];
            let mut pods: Vec<&str> = Vec::new();
            for e in &ps.endpoints {
                if !pods.contains(&e.pod.as_str()) {
                    pods.push(&e.pod);
                }
            }
            for pod in pods {
                let mut lines: Vec<(i64, String)> = Vec::new();
                let api_prefix = pool.vllm == VllmFlavor::V1 && di % 2 == 1;
                let boot = start_ns - 120_000_000_000 - rng.below(60_000_000_000) as i64;
                let pre = if api_prefix { "(APIServer pid=1) " } else { "" };
                lines.push((
                    boot,
                    format!(
                        "{pre}INFO {} [api_server.py:1805] vLLM API server version 0.10.1.1",
                        vllm_time(boot)
                    ),
                ));
                lines.push((
                    boot + 1_000_000,
                    format!(
                        "{pre}INFO {} [utils.py:326] non-default args: {{'model': '{}', 'max_num_batched_tokens': 8192, 'enable_prefix_caching': True}}",
                        vllm_time(boot + 1_000_000),
                        dep.model
                    ),
                ));
                for (ei, e) in ps.endpoints.iter().enumerate() {
                    if e.pod != pod {
                        continue;
                    }
                    let first = start_ns + rng.below(10_000_000_000) as i64;
                    let (l, t) = engine_lines(
                        &ps.engines[ei].jobs,
                        pool.vllm,
                        e.rank,
                        api_prefix,
                        first,
                        end_ns,
                        pool.kv_capacity_tokens,
                    );
                    lines.extend(l);
                    series.push((
                        engine_labels(e, &dep.model),
                        engine_series(&ps.engines[ei].jobs, start_ns, end_ns),
                    ));
                    if pi == prefill_pool {
                        tokens += t.backlog_tokens;
                        secs += t.backlog_secs;
                        sat.push(t.saturated_lines);
                    }
                }
                lines.sort_by_key(|l| l.0);
                let mut bytes = Vec::new();
                for (_, l) in lines {
                    bytes.extend_from_slice(l.as_bytes());
                    bytes.push(b'\n');
                }
                logs.push((pod.to_string(), bytes));
            }
        }
        sat.sort_unstable();
        truths.push(PeakTruth {
            effective_tps: (secs > 0.0).then(|| tokens / secs),
            saturated_intervals: sat.get(sat.len() / 2).copied().unwrap_or(0),
        });
    }
    VllmOut {
        logs,
        peaks: truths,
        prometheus: prometheus_files(&series),
    }
}

/// Sets each deployment's effective peak and saturated intervals in a summary.
pub fn add_peak_truth(summary: &mut crate::truth::Summary, peaks: &[PeakTruth]) {
    for (d, p) in summary.deployments.iter_mut().zip(peaks) {
        d.effective_peak_prefill_tps = p.effective_tps.map(|v| (v * 10.0).round() / 10.0);
        d.saturated_intervals = Some(p.saturated_intervals);
    }
}
