//! vLLM engine logs: the periodic stats line of each engine, in the v1 or
//! v0 wording, computed from the jobs the model recorded.

use std::fmt::Write as _;

use crate::model::{DepState, Job};
use crate::rng::Rng;
use crate::scenario::{Scenario, VllmFlavor};
use crate::zap::vllm_time;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    prompt: f64,
    cached: f64,
    computed: f64,
    generated: f64,
    running: i64,
    waiting: i64,
    kv_tokens: f64,
}

/// Stats lines of one engine, as (time, text) pairs.
fn engine_lines(
    jobs: &[Job],
    flavor: VllmFlavor,
    engine: usize,
    api_prefix: bool,
    first_ns: i64,
    end_ns: i64,
    kv_capacity: i64,
) -> Vec<(i64, String)> {
    let dt: i64 = match flavor {
        VllmFlavor::V1 => 10_000_000_000,
        VllmFlavor::V0 => 5_000_000_000,
    };
    if end_ns <= first_ns {
        return Vec::new();
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
            b[k as usize].cached += j.cached_tokens as f64;
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
        // Waiting at T_k: arrive <= T_k < start. Running: start <= T_k < done.
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
    let secs = dt as f64 / 1e9;
    let mut out = Vec::new();
    for (k, bk) in b.iter().enumerate().skip(1) {
        let idle = bk.prompt == 0.0
            && bk.computed == 0.0
            && bk.generated == 0.0
            && bk.running == 0
            && bk.waiting == 0;
        if idle {
            continue;
        }
        let t = t_of(k as i64);
        let kv = (bk.kv_tokens / kv_capacity.max(1) as f64 * 100.0).min(100.0);
        let mut line = String::new();
        match flavor {
            VllmFlavor::V1 => {
                if api_prefix {
                    line.push_str("(APIServer pid=1) ");
                }
                let hit = if bk.prompt > 0.0 {
                    bk.cached / bk.prompt * 100.0
                } else {
                    0.0
                };
                let _ = write!(
                    line,
                    "INFO {} [loggers.py:123] Engine {:03}: Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {} reqs, Waiting: {} reqs, GPU KV cache usage: {:.1}%, Prefix cache hit rate: {:.1}%",
                    vllm_time(t),
                    engine,
                    bk.prompt / secs,
                    bk.generated / secs,
                    bk.running,
                    bk.waiting,
                    kv,
                    hit
                );
            }
            VllmFlavor::V0 => {
                let _ = write!(
                    line,
                    "INFO {} metrics.py:351] Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {} reqs, Swapped: 0 reqs, Pending: {} reqs, GPU KV cache usage: {:.1}%, CPU KV cache usage: 0.0%.",
                    vllm_time(t),
                    bk.computed / secs,
                    bk.generated / secs,
                    bk.running,
                    bk.waiting,
                    kv
                );
            }
        }
        out.push((t, line));
    }
    out
}

/// The vLLM log of every pod of every deployment, `(pod, bytes)`, in
/// scenario order.
pub fn vllm_logs(
    s: &Scenario,
    states: &[DepState],
    seed: u64,
    start_ns: i64,
    end_ns: i64,
) -> Vec<(String, Vec<u8>)> {
    let mut logs = Vec::new();
    for (di, (dep, st)) in s.deployments.iter().zip(states).enumerate() {
        let mut rng = Rng::derive(seed, 5000 + di as u64);
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
                    lines.extend(engine_lines(
                        &ps.engines[ei].jobs,
                        pool.vllm,
                        e.rank,
                        api_prefix,
                        first,
                        end_ns,
                        pool.kv_capacity_tokens,
                    ));
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
    }
    logs
}
