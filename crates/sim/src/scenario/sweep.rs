//! `peak-sweep`: deployments that vary what the vLLM stats lines make hard.

use super::*;

/// One deployment of `peak-sweep`.
struct SweepSpec {
    name: &'static str,
    model: &'static str,
    hash: &'static str,
    flavor: VllmFlavor,
    raw_tps: f64,
    pods: usize,
    system_prompt: i64,
    /// New-session context mean outside and inside the burst.
    ctx: (f64, f64),
    /// Context drift factor over the run (1 = none).
    drift: f64,
    turns: f64,
    /// Burst start and length (run fractions) and load over capacity.
    burst: (f64, f64, f64),
}

/// Deployments that vary what the vLLM stats lines make hard: the prefix
/// hit rate (from ~10 % to ~93 %, and shifting during a burst), prompt
/// lengths drifting over the run, v0 and v1 engines, and saturation lasting
/// from about a dozen intervals to most of the run.
pub(super) fn peak_sweep() -> Scenario {
    let specs = [
        SweepSpec {
            name: "rag-hi-short",
            model: "Qwen/Qwen3-32B",
            hash: "6b8d7c9f5-hr2kq",
            flavor: VllmFlavor::V1,
            raw_tps: 12000.0,
            pods: 2,
            system_prompt: 8000,
            ctx: (900.0, 900.0),
            drift: 1.0,
            turns: 1.5,
            burst: (0.30, 0.09, 2.0),
        },
        SweepSpec {
            name: "rag-hi-shift",
            model: "meta-llama/Llama-3.3-70B-Instruct",
            hash: "7d9c8b6f5-sh4zt",
            flavor: VllmFlavor::V1,
            raw_tps: 8000.0,
            pods: 2,
            system_prompt: 6000,
            ctx: (600.0, 2500.0),
            drift: 1.0,
            turns: 1.5,
            burst: (0.40, 0.15, 1.8),
        },
        SweepSpec {
            name: "agent-drift",
            model: "zai-org/GLM-5.2-FP8",
            hash: "5c7b9d8f6-dr7mx",
            flavor: VllmFlavor::V1,
            raw_tps: 3000.0,
            pods: 3,
            system_prompt: 1200,
            ctx: (4000.0, 4000.0),
            drift: 12.0,
            turns: 4.0,
            burst: (0.45, 0.12, 2.5),
        },
        SweepSpec {
            name: "chat-v0-long",
            model: "deepseek-ai/DeepSeek-V3.1",
            hash: "8f6d7c5b9-lv0np",
            flavor: VllmFlavor::V0,
            raw_tps: 6000.0,
            pods: 2,
            system_prompt: 1500,
            ctx: (3000.0, 3000.0),
            drift: 3.0,
            turns: 3.0,
            burst: (0.20, 0.45, 1.6),
        },
        SweepSpec {
            name: "cold-long",
            model: "openai/gpt-oss-120b",
            hash: "9b5c6d8f7-cl3wr",
            flavor: VllmFlavor::V1,
            raw_tps: 20000.0,
            pods: 2,
            system_prompt: 300,
            ctx: (4000.0, 4000.0),
            drift: 1.5,
            turns: 1.2,
            burst: (0.25, 0.40, 1.7),
        },
        SweepSpec {
            name: "rag-hi-v0-short",
            model: "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
            hash: "6f9d8c7b5-vq8ks",
            flavor: VllmFlavor::V0,
            raw_tps: 16000.0,
            pods: 2,
            system_prompt: 10000,
            ctx: (700.0, 700.0),
            drift: 1.0,
            turns: 1.3,
            burst: (0.55, 0.08, 2.2),
        },
    ];
    let mut deployments = Vec::new();
    for (i, sp) in specs.into_iter().enumerate() {
        let mut p = pool("default", "decode", sp.pods, sp.raw_tps, Config::default());
        p.vllm = sp.flavor;
        let mut d = deployment(
            sp.name,
            &format!("llm-d-{}", sp.name),
            sp.model,
            sp.hash,
            vec![p.clone()],
        );
        d.block_size = if i % 2 == 0 { 64 } else { 16 };
        let mut w = workload(vec![(0.0, 1.0)], vec![(0.0, sp.ctx.0)]);
        w.system_prompt_tokens = sp.system_prompt;
        w.turns_mean = sp.turns;
        w.think_s = 3.0;
        // Uncached tokens per request at the burst's context: a new
        // session's context (its system prompt is cached after the first
        // request on an engine), follow-ups their message and the previous
        // output; the request's time adds the per-request and step costs.
        let mid = sp.burst.0 + sp.burst.1 / 2.0;
        let ctx_mid = sp.ctx.1 * sp.drift.powf(mid);
        let follow = 1.0 - 1.0 / sp.turns.max(1.0);
        let per_req = (1.0 - follow) * ctx_mid + follow * (w.user_msg_mean + w.output_mean);
        let secs = (p.prefill_overhead_ms + p.step_overhead_ms) / 1000.0 + per_req / sp.raw_tps;
        let capacity = sp.pods as f64 / secs;
        let (b0, len, over) = sp.burst;
        let base = 0.3 * capacity;
        let burst = over * capacity;
        w.rate = vec![
            (0.0, base),
            (b0, base),
            (b0 + 0.01, burst),
            (b0 + len, burst),
            (b0 + len + 0.01, base),
            (1.0, base),
        ];
        let c = |f: f64, x: f64| x * sp.drift.powf(f);
        w.context_mean = if sp.ctx.0 == sp.ctx.1 {
            vec![(0.0, sp.ctx.0), (1.0, c(1.0, sp.ctx.0))]
        } else {
            vec![
                (0.0, sp.ctx.0),
                (b0, c(b0, sp.ctx.0)),
                (b0 + 0.01, c(b0, sp.ctx.1)),
                (b0 + len, c(b0 + len, sp.ctx.1)),
                (b0 + len + 0.01, c(b0 + len, sp.ctx.0)),
                (1.0, c(1.0, sp.ctx.0)),
            ]
        };
        w.context_sigma = 0.6;
        d.workload = w;
        deployments.push(d);
    }
    Scenario {
        name: "peak-sweep".to_string(),
        description: "6 deployments for the peak estimator: hit rate ~10-93 % (shifting in a burst), prompt drift, v0/v1, saturated ~12 to ~50 intervals"
            .to_string(),
        start_epoch_s: START,
        duration_s: 1200.0,
        deployments,
        log_window: None,
        routing_seed: None,
    }
}
