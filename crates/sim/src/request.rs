//! What the simulation records of one scheduled request: each profile's
//! run, each filter instance's decision, the P/D decider's evaluation, and
//! the endpoint metrics the EPP last scraped.

use gatecal_filter::{Candidate, Decision};

/// An endpoint's metrics as the EPP last scraped them (for the reflected
/// endpoint dumps).
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    /// `RunningRequestsSize`.
    pub running: i64,
    /// `WaitingQueueSize`.
    pub waiting: i64,
    /// `KVCacheUsagePercent` (a 0..1 fraction, as the EPP stores it).
    pub kv_usage: f64,
    /// `UpdateTime`.
    pub scraped_ns: i64,
}

/// One filter instance's run.
#[derive(Clone, Debug)]
pub struct FilterRun {
    /// Index into the pool's filters.
    pub instance: usize,
    /// Positions (into the profile's candidates) the filter saw, in order.
    pub input: Vec<usize>,
    /// The filter core's decision over `input`.
    pub decision: Decision,
    /// Positions it kept.
    pub kept: Vec<usize>,
}

/// One scheduling profile's run.
#[derive(Clone, Debug)]
pub struct ProfileRun {
    /// Pool index in the deployment.
    pub pool: usize,
    /// Endpoint index (into the pool) of each candidate position.
    pub order: Vec<usize>,
    /// The candidates as the filter sees them, in order.
    pub cands: Vec<Candidate>,
    /// True in-flight tokens per candidate position (even when the EPP's
    /// attribute is missing).
    pub true_in_flight: Vec<i64>,
    /// Scraped metrics per candidate position.
    pub snapshots: Vec<Snapshot>,
    /// The filter instances' runs, in order.
    pub filters: Vec<FilterRun>,
    /// Scored positions: (position, tokenLoad, score), in survivor order.
    pub scored: Vec<(usize, f64, f64)>,
    /// The picker's weighted score of each scored position (same order):
    /// the token-load score, plus the prefix scorer's weighted one when the
    /// pool has it.
    pub weighted: Vec<f64>,
    /// The picked position.
    pub chosen: usize,
}

/// The P/D decider's evaluation.
#[derive(Clone, Copy, Debug)]
pub struct PdEval {
    /// Prompt tokens cached on the chosen decode endpoint.
    pub hit_tokens: i64,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Whether the prefill profile ran.
    pub disaggregate: bool,
}

/// One request as scheduled.
#[derive(Clone, Debug)]
pub struct Request {
    /// Deployment index in the scenario.
    pub dep: usize,
    /// `x-request-id`.
    pub request_id: String,
    /// Arrival at the EPP.
    pub arrival_ns: i64,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Profile runs in order.
    pub runs: Vec<ProfileRun>,
    /// P/D decider evaluation, under P/D.
    pub pd: Option<PdEval>,
    /// Completion of the response.
    pub done_ns: i64,
    /// First token at the EPP: the end of the prefill on the engine that
    /// streams the answer (under P/D, the decode engine once the KV cache
    /// has arrived). The model has no return latency.
    pub first_token_ns: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// The EPP replica that decided it (0 with one replica).
    pub replica: usize,
    /// Session id (a trace request's line number in the trace).
    pub session: u64,
    /// Turn within the session, from 0.
    pub turn: u32,
    /// The think time the session waits after this answer before its next
    /// turn may arrive; `None` for trace requests.
    pub think_ns: Option<i64>,
}
