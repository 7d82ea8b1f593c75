//! The engine model of the replay: how long an endpoint takes to serve a
//! request's uncached prompt tokens, with the decode share of each step.

/// The engine model of one deployment (see the replay's module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineModel {
    /// Uncached prompt tokens one endpoint prefills per second under a
    /// backlog.
    pub peak_tps: f64,
    /// Seconds each request occupies its endpoint beyond its tokens.
    pub overhead_s: f64,
    /// Seconds from the end of the prefill to the first token at the EPP,
    /// occupying nothing.
    pub latency_s: f64,
    /// Tokens of session prompts one endpoint's prefix cache holds;
    /// `f64::INFINITY` for no eviction.
    pub cache_capacity_tokens: f64,
    /// Tokens per prefix block, as the filter's match information counts.
    pub block_size: i64,
    /// Seconds a request decodes after its first token on its endpoint,
    /// for the decode share of each prefill step (see [`service_s`]); 0:
    /// no decode share (the overhead and speed then average it).
    pub decode_s: f64,
}

impl EngineModel {
    /// The starting point of a fit: `peak_tps`, no overhead or latency, and
    /// a prefix cache that never evicts.
    pub fn unfitted(peak_tps: f64, block_size: i64) -> EngineModel {
        EngineModel {
            peak_tps,
            overhead_s: 0.0,
            latency_s: 0.0,
            cache_capacity_tokens: f64::INFINITY,
            block_size,
            decode_s: 0.0,
        }
    }

    /// Seconds a request of `u` uncached tokens occupies its endpoint while
    /// `decoding` other requests decode there ([`service_s`]).
    pub fn service_s(&self, u: f64, decoding: f64) -> f64 {
        service_s(self.peak_tps, self.overhead_s, u, decoding)
    }
}

/// Token budget of one engine step (vLLM's `max_num_batched_tokens`, its
/// default for the OpenAI server on GPUs of 70 GiB or more): each step
/// carries one token per decoding request and a chunk of the prefill in
/// what is left. The EPP's log does not show it.
pub const STEP_TOKENS: f64 = 8192.0;

/// The tokens an engine computes to prefill `u` uncached tokens while
/// `decoding` requests decode on it: vLLM v1's scheduler gives each running
/// decode one token of every step's budget before it schedules a prefill
/// chunk in the rest, so the prefill takes `ceil(u / (budget − decoding))`
/// steps and computes `decoding` tokens more in each.
pub fn step_tokens(u: f64, decoding: f64) -> f64 {
    let u = u.max(1.0);
    let d = decoding.clamp(0.0, STEP_TOKENS / 2.0);
    let steps = (u / (STEP_TOKENS - d)).ceil();
    u + steps * d
}

/// The inverse of [`step_tokens`]: the uncached tokens of a prefill that
/// computed `x` tokens while `decoding` requests decoded.
pub fn prefill_tokens(x: f64, decoding: f64) -> f64 {
    let d = decoding.clamp(0.0, STEP_TOKENS / 2.0);
    let steps = (x.max(0.0) / STEP_TOKENS).ceil().max(1.0);
    (x - steps * d).max(0.0)
}

/// Seconds a request of `u` uncached tokens occupies an endpoint of speed
/// `peak_tps` and per-request `overhead_s` while `decoding` requests
/// decode there: `step_tokens(u, decoding) / peak + overhead`.
pub fn service_s(peak_tps: f64, overhead_s: f64, u: f64, decoding: f64) -> f64 {
    let x = if decoding > 0.0 {
        step_tokens(u, decoding)
    } else {
        u
    };
    x / peak_tps + overhead_s
}

/// The TTFT a latency predictor gives a request on an endpoint, ms: the
/// engine model's time to prefill the endpoint's in-flight tokens and the
/// request's uncached tokens there, plus its per-request overhead and
/// latency (the predictor's mean; its noise is not modelled).
pub fn predicted_ttft_ms(model: &EngineModel, in_flight: f64, uncached: f64) -> f64 {
    ((in_flight + uncached).max(0.0) / model.peak_tps + model.overhead_s + model.latency_s) * 1000.0
}
