//! # Brief overview
//!
//! `gatecal-sim` writes synthetic llm-d EPP logs, in the exact format the
//! real EPP writes at `-v=4`, with the ground truth behind every decision of
//! the `prefix-cache-affinity-filter`, plus the vLLM engine logs of the
//! simulated endpoints. It feeds the parser's and the analysis' tests,
//! the committed fixtures, and benchmarks.
//!
//! ```
//! use gatecal_sim::{run, scenario, Variant};
//!
//! let s = scenario("glm-like").unwrap().with_requests(200);
//! let out = run(&s, 1, &Variant::default());
//! // Every line of a plain log is one zap JSON object.
//! let text = String::from_utf8(out.epp_log).unwrap();
//! assert!(text.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
//! // One truth record per filter decision, and a summary over them.
//! assert_eq!(out.summary.overall.decisions as usize, out.truth.len());
//! assert!(!out.vllm_logs.is_empty());
//! ```
//!
//! # The model
//!
//! Each [`Deployment`] has one pool of engines (or a `decode` and a
//! `prefill` pool under P/D). Every engine is:
//!
//! * **a prefill queue**: FIFO, draining the request's *uncached* prompt
//!   tokens at the pool's true peak prefill throughput. A request's first
//!   token comes when its prefill ends; its response ends after its output
//!   tokens at a per-request decode speed.
//! * **a prefix cache**: the shared system prompt plus, per session, the
//!   blocks of the last prompt served there (the EPP's approximate prefix
//!   index is updated at scheduling, so does the model). Capacity is in
//!   tokens; whole sessions are evicted least recently used.
//!
//! The EPP's view of an engine at a decision, as the filter reads it:
//! `in_flight_tokens` is the sum of the uncached tokens of requests whose
//! first token has not come yet (released at the first streamed chunk,
//! excluding the current request); `in_flight_requests` counts requests not
//! yet finished; `match_blocks` is the cached prefix of the prompt in blocks,
//! `total_blocks = prompt_tokens / block_size` (at least 1).
//!
//! **Workload.** Requests arrive as a Poisson process of slots whose rate
//! follows the scenario's piecewise-linear profile over the run. A slot
//! continues a ready session (its previous response done, plus think time) with
//! probability `1 - 1/turns_mean`; if the sessions it tries are all still
//! waiting for a response the arrival is dropped (open sessions send less
//! under a backlog, which keeps overload from feeding itself). Otherwise it
//! opens a new session whose first prompt is the system prompt plus a
//! lognormal context whose mean drifts geometrically over the run (3.5k →
//! 140k tokens in `glm-like`, mean prompt ~7.5k → ~70k). A follow-up
//! prompt is the previous prompt, its output, and a new user message, so
//! the engine that served the previous turn holds most of it. A request
//! trace ([`Scenario::with_workload_trace`]) replaces the sessions with its
//! own open-loop arrivals and 512-token prefix blocks.
//!
//! **Random streams.** Arrival slots, each session's content (its first
//! context, turns, messages, outputs and think times) and routing (candidate
//! order, signals, exploration, tie-breaks) draw from separate streams, so
//! two runs that differ only in the filter's config
//! ([`Scenario::set_filter_param`]) see the same slots and sessions: a paired
//! experiment. The routing stream has its own seed
//! ([`Scenario::with_routing_seed`], the run's seed by default): two runs
//! that differ only in it measure the routing's own noise. Every truth
//! record carries the request's TTFT (`ttft_ms`:
//! arrival at the EPP to first token at the EPP). By default a slot meant to
//! continue a session whose picks are all waiting for an answer is dropped,
//! so a slower config sends fewer requests; with users that wait
//! ([`Scenario::with_users`]) every session sends all its turns, each after
//! its previous answer and think time, and paired runs carry the same
//! requests.
//!
//! **Scheduling.** The candidates (all engines of the profile's pool, in a
//! random order as the datastore returns them) go through each filter
//! instance in turn; every decision is [`gatecal_filter::decide`] with the
//! instance's config, never a re-implementation. The survivors are scored by
//! the token-load scorer (`tokenLoad` = in-flight tokens + the request's own
//! uncached tokens there, capped at 4194304; `score = 1 - tokenLoad/4194304`)
//! and the max-score picker takes the best (ties at random). Under P/D the
//! `decode` profile runs first; the prefix-based decider then runs the
//! `prefill` profile when at least `nonCachedTokens` of the prompt are not
//! cached on the chosen decode engine.
//!
//! **vLLM counting.** The v1 stats line counts the *full* prompt (cached
//! tokens included) in the interval where the prefill completes, and its
//! prefix cache hit rate is taken over those same completions, so
//! `prompt throughput × (1 − hit rate)` is exactly the computed prefill rate
//! of the interval; over intervals where an engine stays busy it averages to
//! the true peak. (Real vLLM v1 takes the hit rate over a window of recent
//! requests; the simulator's choice keeps the estimate exact.) The v0 line
//! counts the prefill tokens computed within the interval.
//!
//! # Output
//!
//! [`TraceWriter`] (or [`write_traces`]) writes the EPP's trace spans of the
//! decisions, head-sampled per request ([`is_sampled`]), as OTLP/JSON lines
//! with the same truth: every span's `llm_d.epp.filter.ttft_penalty_ms` is
//! the record's `truth_gate_input_ms`.
//!
//! [`run`] returns the EPP log, the vLLM logs, the truth records and the
//! [`Summary`]; [`run_streaming`] writes the log and truth to writers, and
//! [`write_epp_log`] streams a log of any size (1 GB in about 8 s, release
//! build) to a writer. [`Scenario::with_requests`],
//! [`Scenario::with_duration`] and [`Scenario::with_log_window`] size a run;
//! a log window simulates the whole run but logs only part of it. The
//! exact line formats are those of `docs/epp-log-format.md`; `docs/sim.md`
//! lists what is simulated and what is not.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod engine;
mod epp;
mod model;
mod otel;
mod request;
mod rng;
mod scenario;
mod stream;
mod truth;
mod vllm;
mod workload_trace;
pub use vllm::{HIT_RATE_WINDOW, PeakTruth};
pub use workload_trace::{TRACE_BLOCK_TOKENS, TraceError, TraceRequest, parse_trace, read_trace};
mod zap;

use std::io::{self, Write};

pub use model::QUEUE_THRESHOLD_TOKENS;
pub use otel::{BATCH_REQUESTS, TraceWriter, is_sampled, to_jaeger, to_tempo, write_traces};
pub use rng::Rng;
pub use scenario::{
    Deployment, FilterInstance, PdDecider, Pool, Scenario, VllmFlavor, Workload,
    failure_scenario_names, failure_truth, scenario, scenario_names,
};
pub use truth::{
    DeploymentSummary, Summary, SummaryBuilder, TruthCandidate, TruthRecord, WHAT_IF_BARS_MS,
    WhatIf, nearest_rank,
};
pub use zap::{epoch_float, rfc3339_nano_fixed, zap_float};

/// How the EPP log is captured and encoded. `Default` is the plain HEAD
/// format, one JSON object per line, nothing else.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// `kubectl logs --timestamps`: each line starts with the kubelet's
    /// RFC3339Nano time (nine digits) and a space.
    pub timestamps: bool,
    /// `kubectl logs --prefix`: each line starts with `[pod/<epp-pod>/epp] `.
    pub prefix: bool,
    /// Noise: klog lines, a Go panic with its goroutine stack, empty lines,
    /// invalid UTF-8, and a truncated last line.
    pub noise: bool,
    /// The 2026-02-18 … 03-27 encoding: `Level(-N)` levels and a
    /// second-precision RFC3339 string `ts`.
    pub old_encoding: bool,
    /// Also write the `Before running filter plugins` / `Before running
    /// scorer plugins` endpoint dumps (real at `-v=4`, but large).
    pub full_dumps: bool,
    /// Also write what the prefix producers log at `-v=5` (TRACE): a
    /// deployment with 64-token blocks runs the approximate producer (its
    /// `Found cached servers`, one line per block of the longest cached
    /// prefix, and the prefix scorer's `Calculated score` per candidate);
    /// one with smaller blocks the precise producer (its `Produce
    /// completed`, match blocks per endpoint address). Real at `-v=5`, and
    /// long: a line per cached block.
    pub producers_v5: bool,
}

/// Everything one run produces.
#[derive(Clone, Debug)]
pub struct SimOutput {
    /// The EPP log (all deployments' EPP pods in one stream).
    pub epp_log: Vec<u8>,
    /// The vLLM log of each engine pod: `(pod name, bytes)`.
    pub vllm_logs: Vec<(String, Vec<u8>)>,
    /// The engines' `vllm:*` Prometheus series as `query_range` responses,
    /// one per query: `(file name, bytes)`.
    pub prometheus: Vec<(String, Vec<u8>)>,
    /// One record per filter decision, in log order of the filter lines'
    /// requests.
    pub truth: Vec<TruthRecord>,
    /// The summary of `truth`.
    pub summary: Summary,
}

/// Runs a scenario: the EPP log, the vLLM logs, the truth and the summary.
/// Deterministic for a seed; the variant changes only the log's framing,
/// encoding and noise (and, with `full_dumps`, the lines' timestamps).
pub fn run(s: &Scenario, seed: u64, variant: &Variant) -> SimOutput {
    let mut log = Vec::new();
    let mut truth = Vec::new();
    let mut builder = SummaryBuilder::new(s);
    let driven = stream::drive(s, seed, variant, None, true, &mut log, &mut |t| {
        builder.add(t);
        truth.push(t.clone());
        Ok(())
    });
    // Writing to a Vec cannot fail.
    let (states, start_ns, end_ns) = match driven {
        Ok(d) => (d.states, d.start_ns, d.end_ns),
        Err(_) => (Vec::new(), 0, 0),
    };
    let v = vllm::vllm_logs(s, &states, seed, start_ns, end_ns);
    let mut summary = builder.finish(&s.name, seed);
    vllm::add_peak_truth(&mut summary, &v.peaks);
    SimOutput {
        epp_log: log,
        vllm_logs: v.logs,
        prometheus: v.prometheus,
        truth,
        summary,
    }
}

/// What [`run_streaming`] wrote.
#[derive(Clone, Debug)]
pub struct StreamReport {
    /// Bytes of EPP log written.
    pub epp_bytes: u64,
    /// Truth records produced.
    pub records: u64,
    /// The summary over them.
    pub summary: Summary,
    /// vLLM logs (empty unless requested).
    pub vllm_logs: Vec<(String, Vec<u8>)>,
    /// Prometheus `query_range` responses (empty unless vLLM logs were
    /// requested).
    pub prometheus: Vec<(String, Vec<u8>)>,
}

/// Runs a scenario writing the EPP log and, optionally, the truth (one JSON
/// line per record) to writers, keeping only the summary's samples in
/// memory. With `target_bytes`, the scenario repeats (with derived seeds and
/// later start times) until the log has at least that many bytes. vLLM logs
/// are computed only if `vllm` is set (they keep every request's timings).
pub fn run_streaming(
    s: &Scenario,
    seed: u64,
    variant: &Variant,
    target_bytes: Option<u64>,
    vllm: bool,
    epp_log: &mut dyn Write,
    mut truth: Option<&mut dyn Write>,
) -> io::Result<StreamReport> {
    let mut builder = SummaryBuilder::new(s);
    let mut records = 0u64;
    let driven = stream::drive(s, seed, variant, target_bytes, vllm, epp_log, &mut |t| {
        builder.add(t);
        records += 1;
        if let Some(w) = truth.as_mut() {
            serde_json::to_writer(&mut **w, t).map_err(io::Error::other)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    let mut summary = builder.finish(&s.name, seed);
    let (vllm_logs, prometheus) = if vllm {
        let v = vllm::vllm_logs(s, &driven.states, seed, driven.start_ns, driven.end_ns);
        vllm::add_peak_truth(&mut summary, &v.peaks);
        (v.logs, v.prometheus)
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(StreamReport {
        epp_bytes: driven.bytes,
        records,
        summary,
        vllm_logs,
        prometheus,
    })
}

/// Streams an EPP log of at least `target_bytes` (or one run of the
/// scenario when `None`) to `w`, without holding it in memory; for
/// benchmarks of any size. Returns the bytes written.
///
/// ```
/// use gatecal_sim::{scenario, write_epp_log, Variant};
/// let s = scenario("balanced").unwrap().with_requests(20);
/// let mut sink = std::io::sink();
/// let n = write_epp_log(&s, 7, &Variant::default(), Some(200_000), &mut sink).unwrap();
/// assert!(n >= 200_000);
/// ```
pub fn write_epp_log(
    s: &Scenario,
    seed: u64,
    variant: &Variant,
    target_bytes: Option<u64>,
    w: &mut dyn Write,
) -> io::Result<u64> {
    let r = run_streaming(s, seed, variant, target_bytes, false, w, None)?;
    Ok(r.epp_bytes)
}
