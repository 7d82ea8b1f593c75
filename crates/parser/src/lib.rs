//! # Brief overview
//!
//! gatecal-parser turns what an operator captured from the llm-d EPP and
//! vLLM (`kubectl logs`, with or without `--timestamps`/`--prefix`, several
//! pods, rotated and gzipped files, stdin) into one [`Decision`] per call of a
//! prefix-cache-affinity-filter instance, plus the vLLM stats records, and
//! accounts for every input line in a [`Ledger`].
//!
//! bytes → lines ([`ParseOptions::max_line_bytes`] cap) → framing (kubectl
//! prefix, kubelet timestamp) → a typed [`Event`] per used line → the
//! [`Assembler`] → [`Item`]s in log order.
//!
//! ```
//! use gatecal_parser::{parse_slice, Item, ParseOptions};
//! use gatecal_filter::Outcome;
//!
//! let log = br#"{"level":"info","ts":1755786974.1,"msg":"EPP received request","x-request-id":"r1"}
//! {"level":"debug","ts":1755786974.12,"msg":"PrefixCacheAffinityFilter: TTFT load gate broken","x-request-id":"r1","bestStickyTTFT":18834.75,"bestNonStickyTTFT":125.56,"penalty":18709.19,"maxPenalty":18000}
//! {"level":"debug","ts":1755786974.13,"msg":"Completed running filter plugin successfully","x-request-id":"r1","plugin":"loose-affinity-filter/prefix-cache-affinity-filter","endpoints":[{"name":"p-0","namespace":"llm"},{"name":"p-1","namespace":"llm"}]}
//! {"level":"info","ts":1755786974.2,"msg":"Request handled","x-request-id":"r1","endpoint":"10.0.0.2:8000"}
//! "#;
//! let parsed = parse_slice("epp.log", log, &ParseOptions::default()).unwrap();
//! let d = parsed.decisions().next().unwrap();
//! assert_eq!(d.request_id.as_deref(), Some("r1"));
//! assert_eq!(d.filter.as_deref(), Some("loose-affinity-filter"));
//! assert_eq!(d.outcome, Some(Outcome::LoadOverride));
//! assert_eq!(d.logged_penalty_ms(), Some(18709.19));
//! assert_eq!(d.survivors.as_ref().unwrap().len(), 2);
//! assert!(parsed.ledger.counts.balanced());
//! assert_eq!(parsed.ledger.counts.lines_used, 4);
//! ```
//!
//! # Inputs
//!
//! [`parse_inputs`] reads [`InputSpec`]s ([`InputSpec::parse`] reads a
//! command-line argument): files; folders, recursively, in sorted order,
//! skipping hidden entries; glob patterns (`logs/*/epp*.log*`), in sorted
//! order; `-` for stdin. Compression is detected by content: a stream that
//! starts with the gzip magic bytes `1f 8b` is decompressed (concatenated
//! members too), whatever its name. A file that cannot be opened or read is
//! a [`ParseError::Io`] naming the path; a path or glob that matches nothing
//! is [`ParseError::NotFound`].
//!
//! Every input is read once. Stdin, `/dev/stdin`, a FIFO, process
//! substitution or a device is opened once: its first 4 KiB are read (to
//! tell gzip, traces and what [`InputFiles::take_files`] looks for) and
//! kept before the rest, never read again. A regular file is read from
//! its start once to tell what it holds, then opened again to be parsed,
//! which must find the same file (device and inode). What a message
//! needs about the lines is counted as they are read
//! ([`Counts::pod_lines`]).
//!
//! Lines end at `\n`; a trailing `\r` (CRLF) and trailing blanks are dropped;
//! invalid UTF-8 is tolerated (replaced where a value is read). A line longer
//! than [`ParseOptions::max_line_bytes`] (default
//! [`DEFAULT_MAX_LINE_BYTES`], 4 MiB) is counted as malformed and skipped up
//! to the next newline without being buffered: memory never grows with a
//! line beyond the cap. A last line without a newline (a truncated capture)
//! is read like any other.
//!
//! The format of each input is detected from its first non-blank line: a
//! JSON object with `"v":1`, `"v":2` or `"v":3` and `candidates` is the
//! decisions JSON-lines format ([`DecisionRecord`]); anything else is logs.
//! [`ParseOptions::format`] forces either.
//!
//! # Deployment naming
//!
//! A deployment is one EPP and the pool of endpoints it routes to. Each
//! decision's [`Decision::deployment`] is, in order of precedence:
//!
//! 1. `NAME` of a `NAME=PATH` input;
//! 2. the EPP pod from the kubectl `[pod/NAME/CONTAINER] ` prefix: its owner
//!    (see [`pod_owner`]) without the chart's role suffix ([`pod_deployment`]:
//!    `glm-5-2-epp-6f7c9d8b5-xk2lp` gives `glm-5-2`); stable across restarts
//!    and replicas;
//! 3. the endpoint pool ([`PoolNames`]): a connected set of endpoints, named
//!    after its endpoint pods the same way (`llm/glm-5-2-decode-6d9f7c8b9-abcde-rank-0`
//!    gives `glm-5-2`): two pools in one namespace that never share an
//!    endpoint are two deployments;
//! 4. the namespace of the decision's candidates (endpoints that name no
//!    pod, such as `ip:port`), else the `targetModelName` (or
//!    `resolvedTargetModel`, `model`);
//! 5. `default` ([`DEFAULT_DEPLOYMENT`]).
//!
//! A folder or file name never names a deployment. vLLM stats records use 1,
//! then their pod (prefix, or the file stem when it looks like a pod name)
//! named the same way ([`pod_deployment`]), else 5: EPP logs with or without
//! the prefix, and vLLM logs, give one deployment the same name.
//!
//! # Line shapes
//!
//! Every line may start with the kubectl `--prefix` `[pod/NAME/CONTAINER] `
//! (gives [`Decision::epp_pod`]) and then the kubelet `--timestamps`
//! RFC3339Nano timestamp and a space (used when the line has no time of its
//! own). After that, one of:
//!
//! | shape | example | counted |
//! |---|---|---|
//! | zap JSON (HEAD) | `{"level":"debug","ts":1755786974.1234567,"caller":"prefixcacheaffinity/plugin.go:208","msg":"PrefixCacheAffinityFilter: narrowed to sticky","x-request-id":"r1","affinityThreshold":0.8,"sticky":1,"total":4}` | used if the message is known, else ignored |
//! | zap JSON (Feb–Mar 2026) | `{"level":"Level(-4)","ts":"2026-03-10T08:15:02Z","msg":"PrefixCacheAffinityFilter: no sticky endpoints","x-request-id":"r1","affinityThreshold":0.8,"total":4}` | as above |
//! | console encoder (before Feb 12 2026) | `2026-02-10T08:15:02Z⇥DEBUG⇥prefixcacheaffinity/plugin.go:208⇥PrefixCacheAffinityFilter: narrowed to sticky⇥{"x-request-id": "r1", "sticky": 1, "total": 4}` (⇥ = tab) | as above |
//! | klog | `I0821 14:36:14.123456       1 leaderelection.go:257] attempting to acquire leader lease` | ignored |
//! | vLLM stats v0 | `INFO 08-21 14:36:14 metrics.py:351] Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 56.7 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 12.3%, CPU KV cache usage: 0.0%.` | used |
//! | vLLM stats v1 | `(APIServer pid=1) INFO 08-21 14:36:14 [loggers.py:123] Engine 000: Avg prompt throughput: 8192.0 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 5 reqs, GPU KV cache usage: 40.1%, Prefix cache hit rate: 45.6%` | used |
//! | other vLLM records | `INFO 08-21 14:36:14 [api_server.py:1] Started server process` | ignored |
//! | kubectl error | `error: unexpected EOF` | ignored |
//! | Go panic | `panic: runtime error: ...`, `goroutine 1 [running]:`, tab-indented frames | ignored |
//! | blank | `` | ignored |
//! | JSON fragment | `r-17","plugin":"x"}` (a line cut at its start) | malformed |
//! | broken JSON | `{"level":"debug","msg":"Request handled","x-req` | malformed |
//! | too long | a line over the cap | malformed |
//! | anything else | `hello` | ignored |
//!
//! A JSON line whose message is not one the parser reads is counted as
//! ignored after checking only that it ends with `}` (cheap detection of
//! truncation), without parsing the rest: that is the hot path.
//!
//! # Messages read
//!
//! Each with one example (context keys such as `x-request-id`,
//! `objectiveKey`, `incomingModelName`, `targetModelName`, `priority` or
//! `criticality` may precede the call-site keys; any key may be missing;
//! unknown keys are ignored; duplicate keys are allowed, the last wins).
//!
//! | message | example call-site keys | event |
//! |---|---|---|
//! | `PrefixCacheAffinityFilter: exploration skip, keeping all` | `"affinityThreshold":0.8,"total":4` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: epsilon skip, keeping all` (G0) | `"tau":0.8,"total":4` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: no sticky endpoints` | `"affinityThreshold":0.8,"total":4` (MF: `"minCachedTokensFraction":0.5,"minCachedTokens":7964`) | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: TTFT load gate broken` | `"bestStickyTTFT":18834.75,"bestNonStickyTTFT":125.56,"penalty":18709.19,"maxPenalty":18000` (P2251: `"prefillThroughput":15928`) | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: TTFT load gate skipped, missing signal` (V5, V6) | `"stickyObserved":true,"nonStickyObserved":false` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: in-flight tokens load gate broken` (V2) | `"bestStickyTokens":300000,"bestNonStickyTokens":2000,"penalty":298000,"maxPenalty":100000` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: in-flight request gate broken` (V6a) | `"stickyRequests":9,"nonStickyRequests":1,"maxDelta":4,"stickyRequestTTFT":900.5,"nonStickyRequestTTFT":300.2,"maxPenalty":18000` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: in-flight request gate broken` (V6b) | `"stickyRequests":9,"nonStickyRequests":1,"maxDelta":4,"added":2` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: narrowed to sticky` | `"affinityThreshold":0.8,"sticky":1,"total":4` (P2251: `"bestStickyTTFT":120.5,"prefillThroughput":15928`) | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: session cost gate` (SC) | `"stickyCost":1.5,"nonStickyCost":2.5,"remainingTurns":3` | [`Event::Filter`] |
//! | `PrefixCacheAffinityFilter: calculated endpoint TTFT` (P2251) | `"endpoint":{"name":"p-0","namespace":"llm"},"throughput":15928,"inFlightTokens":41000` | [`Event::EndpointTtft`] |
//! | `PrefixCacheAffinityFilter: peak prefill throughput resolved` (V5) | `"peakPrefillThroughput":15928,"source":"calibrated"` | [`Event::PeakPrefillResolved`] |
//! | `PrefixCacheAffinityFilter: calibration skipped, keeping peakPrefillThroughput default` (V5) | `"peakPrefillThroughput":15928,"reason":"no file"` | [`Event::CalibrationSkipped`] |
//! | `EPP received request` | (context only) | [`Event::ReceivedRequest`] |
//! | `Running scheduler profile` | `"profile":"decode"` | [`Event::SchedulerProfile`] |
//! | `Before running filter plugins` | `"endpoints":[{…,"ID":{"Namespace":"llm","Name":"p-0"},…}]` | [`Event::BeforeFilters`] |
//! | `Running filter plugin` | `"plugin":"loose-affinity-filter/prefix-cache-affinity-filter"` | [`Event::RunningFilter`] |
//! | `Completed running filter plugin successfully` | `"plugin":"…","endpoints":[…]` | [`Event::FilterCompleted`] |
//! | `Filter eliminated all endpoints` | `"plugin":"…","endpointsBefore":4` | [`Event::FilterEliminatedAll`] |
//! | `Completed running filter plugins` / `Completed running filter plugins successfully` | `"remainingEndpoints":2` | [`Event::FiltersCompleted`] |
//! | `Calculated score` | `"plugin":"token-load-scorer/token-load-scorer","endpoint":{"name":"p-0","namespace":"llm"},"score":0.997` | [`Event::Score`] |
//! | `TokenLoadScorer scoring` | `"endpoint":"llm/p-0","tokenLoad":12288,"score":0.997` | [`Event::TokenLoad`] |
//! | `Computed hit percentage for prefix cache` | `"absolute hit prefix len (tokens)":1408,"prompt length (token)":1600` | [`Event::HitPercentage`] |
//! | `Found cached servers` (approximate prefix producer, V5) | `"cachedServersError":"json: unsupported type: …","total # blocks":10` | [`Event::CachedServers`] |
//! | `Produce completed` (precise prefix producer, V5) | `"blockKeys":50,"scores":{"10.0.0.1:8000":45.5}` | [`Event::PreciseProduced`] |
//! | `Completed running picker plugin successfully` | `"result":{"TargetEndpoints":[…],"ScoredCandidates":null}` | [`Event::PickerCompleted`] |
//! | `Request handled` | `"endpoint":"10.0.0.2:8000"` | [`Event::RequestHandled`] |
//! | `HandleResponseBody is triggered` (one per response body chunk) | `"len(responseBytes)":179,"endOfStream":false` | [`Event::ResponseBody`] |
//!
//! Levels are read in every spelling (`debug`, `info`, `trace`, `error`,
//! `dpanic`, `Level(-4)`, `LEVEL(-4)`, `DEBUG`); `ts` as an epoch float or an
//! RFC3339 string. Numbers are read as `f64` whether written as integers,
//! floats, 309-digit integers (`math.MaxFloat64`, flagged
//! [`ValueFlags::huge`]) or the strings `"NaN"`, `"+Inf"`, `"-Inf"`
//! (flagged [`ValueFlags::non_finite`]). Endpoint ids are normalised to
//! `namespace/name` from `{"name","namespace"}`, `{"Name","Namespace"}`,
//! `"ns/name"`, reflected dumps (`"ID":{"Namespace","Name"}`); `"ip:port"`
//! and bare names are kept as they are, and so is a `-rank-N` suffix (a
//! distinct endpoint).
//!
//! # Assembly
//!
//! See [`Assembler`] for the rules (grouping, replay in `ts` order within a
//! request, profile runs, instances, retries, bounds). Defaults:
//! [`DEFAULT_MAX_OPEN_REQUESTS`] open requests, [`DEFAULT_MAX_OPEN_AGE_SECS`]
//! seconds of log time. `docs/log-formats.md` in the repository is the long
//! form of these docs.
//!
//! # Parallel reading
//!
//! With [`ParseOptions::threads`] above 1, [`parse_inputs`] and
//! [`parse_slice`] classify lines on that many threads (the calling thread
//! and `threads - 1` workers, at most `4 × threads` blocks in flight, 16 at
//! most) and
//! assemble them in input order on the calling thread: the output is the
//! same as with one thread. A regular file that is not gzip (and bytes in
//! memory) is read at offsets: each thread reads the block it takes (about
//! 1 MiB at a fixed offset) by itself, with no lock around the read; a line
//! belongs to the block it starts in, and the block reads its last line on
//! to its newline. The file is read up to its size when the parallel read
//! starts. Other inputs (stdin, pipes, gzip) are cut into blocks of whole
//! lines in order, under a lock.
//!
//! # Lower-level use
//!
//! [`parse_reader`] reads any `Read` (gzip detected); [`parse_slice`] parses
//! bytes in memory (tests). [`Assembler`] can be fed [`Event`]s directly.
//! [`DecisionRecord`], [`DecisionWriter`] and [`looks_like_record`] implement
//! the decisions JSON-lines format.
//!
//! # Errors and panics
//!
//! No input bytes make the parser panic (a property test feeds arbitrary and
//! mutated lines). Should a panic happen anyway (or the sink panic), on any
//! thread of a parallel read, the call ends with that panic: the other
//! threads stop taking blocks and stop waiting for buffers. (A worker
//! blocked reading a stream that has not ended, such as stdin, is joined
//! when its read returns.) Malformed lines are counted, and the first
//! [`ParseOptions::keep_malformed`] kept with `file:line` and the reason;
//! with [`ParseOptions::strict`] the first one is a [`ParseError::Malformed`].
//!
//! # Unsafe code
//!
//! The crate denies `unsafe` but in three places, all in one file
//! (`src/json/search.rs`), each with its reason beside it: two calls of
//! SSE2 functions (part of every x86-64 CPU) that search 16 bytes at a time
//! for quotes and backslashes, and `str::from_utf8_unchecked` on bytes just
//! checked to be ASCII.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod arena;
mod assemble;
mod classify;
mod decision;
pub mod domain;
mod engine;
mod error;
mod event;
mod fields;
mod frame;
mod input;
mod json;
mod ledger;
mod lines;
mod messages;
mod name;
mod progress;
mod record;
mod reframe;
mod sniff;
mod time;
mod trace;
pub mod trace_reference;
mod vllm;

use std::io::Read;

pub use assemble::{
    Assembler, AssemblerLimits, DEFAULT_MAX_EVENTS_PER_REQUEST, DEFAULT_MAX_OPEN_BYTES,
    DeploymentNaming, PoolNames, endpoint_pod, pod_deployment, strip_rank,
};
pub use decision::{
    CandidateObs, Completion, Decision, FilterExtras, FilterMsg, GatePenalty, PrefixProducers,
    SourceLoc, ValueFlags,
};
pub use error::ParseError;
pub use event::{Event, FilterLine, LineMeta};
pub use input::{
    FileId, InputFiles, InputSource, InputSpec, SkipReason, SkippedFile, TakenFile,
    looks_like_input, pod_owner,
};
pub use ledger::{
    Counts, InputFormat, InputLedger, KUBECTL_SELECTOR_TAIL, Ledger, LineShape, MalformedLine,
    MalformedReason, PodLines, ShapeCounts,
};
pub use name::{Interner, Name};
pub use progress::Progress;
pub use record::{
    CandidateRecord, ConfigRecord, DecisionRecord, DecisionWriter, GateRecord, PickedMatchRecord,
    RECORD_VERSION, RECORD_VERSION_MIN, Recorded, ReplayRecord, looks_like_record,
};
pub use time::{civil_from_days, days_from_civil, epoch_of, year_month_of};
pub use trace::{
    DEFAULT_MAX_TRACE_DOCUMENT_BYTES, MAX_PENDING as MAX_PENDING_TRACE_DECISIONS, json_cut_short,
    looks_like_traces,
};
pub use vllm::{VllmStats, VllmStatsVersion};

/// Deepest nesting of objects and arrays read in any JSON input (log
/// lines, decision records, trace documents): a deeper line or document is
/// malformed, "JSON nested deeper than 128 levels". EPP lines nest a few
/// levels, OTLP documents about ten.
pub const MAX_JSON_DEPTH: usize = 128;

/// Default line-length cap, bytes: 4 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 << 20;
/// Default [`ParseOptions::block_bytes`]: 1 MiB.
pub const DEFAULT_BLOCK_BYTES: usize = 1 << 20;
/// Default cap on open (unfinished) requests.
pub const DEFAULT_MAX_OPEN_REQUESTS: usize = 10_000;
/// Default age limit of an idle open request, seconds of log time.
pub const DEFAULT_MAX_OPEN_AGE_SECS: f64 = 60.0;

/// Options of a parse.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseOptions {
    /// Input format; [`InputFormat::Auto`] detects it per input.
    pub format: InputFormat,
    /// Longest line read, bytes; longer lines are malformed and skipped.
    pub max_line_bytes: usize,
    /// Open requests at most (the least recently active is evicted beyond).
    pub max_open_requests: usize,
    /// Seconds of log time an open request may stay idle before eviction.
    pub max_open_age_secs: f64,
    /// Bytes the open requests may hold together (default
    /// [`DEFAULT_MAX_OPEN_BYTES`], 64 MiB; see
    /// [`AssemblerLimits::max_open_bytes`]).
    pub max_open_bytes: usize,
    /// Make the first malformed line an error.
    pub strict: bool,
    /// How many malformed lines to keep per input for the report.
    pub keep_malformed: usize,
    /// The year of vLLM records (their prefix has none); see [`VllmStats`].
    pub year: Option<i32>,
    /// Emit a `not_applicable` decision ([`FilterMsg::None`]) for a
    /// prefix-cache-affinity instance whose `Completed running filter plugin
    /// successfully` line has no filter line before it (at `-v=4` the filter
    /// logs nothing only for at most one candidate or a threshold `<= 0`).
    pub infer_not_applicable: bool,
    /// Threads that read lines ([`parse_inputs`], [`parse_slice`]). 1 reads
    /// on the calling thread. With N > 1, N - 1 workers and the calling
    /// thread take turns reading the next block (about 1 MiB; see "Parallel
    /// reading" in the crate docs) of a log input and classify it; the calling thread also
    /// assembles the results in input order (it classifies a block only
    /// when no result is ready to apply), so the output is the same as
    /// with 1; at most 4N blocks (16 at most) are in flight. Decision-record inputs are
    /// read on the calling thread.
    pub threads: usize,
    /// Bytes per block a thread reads when [`ParseOptions::threads`] is
    /// more than 1 (default [`DEFAULT_BLOCK_BYTES`], 1 MiB): whole lines of
    /// a stream, or a file's bytes at a fixed offset (at least 64).
    pub block_bytes: usize,
    /// Where [`parse_inputs`] counts the bytes it reads, and the inputs'
    /// total, for a progress display on another thread.
    pub progress: Option<Progress>,
    /// Longest trace document read, bytes (default
    /// [`DEFAULT_MAX_TRACE_DOCUMENT_BYTES`], 32 MiB): one line of the
    /// Collector's `file` exporter, or one whole Jaeger or Tempo response.
    /// A longer one is malformed (`TraceTooLong`) and skipped to its end
    /// without being held.
    pub max_trace_document_bytes: usize,
    /// Bytes of the line buffer an input read on one thread starts with
    /// (default [`DEFAULT_LINE_BUFFER_BYTES`], 256 KiB); it grows to
    /// [`ParseOptions::max_line_bytes`] only for a longer line. Many inputs
    /// read at once, each on a thread of its own (`--follow`), take less.
    pub line_buffer_bytes: usize,
}

/// Default [`ParseOptions::line_buffer_bytes`].
pub const DEFAULT_LINE_BUFFER_BYTES: usize = 256 * 1024;

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            format: InputFormat::Auto,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_open_requests: DEFAULT_MAX_OPEN_REQUESTS,
            max_open_age_secs: DEFAULT_MAX_OPEN_AGE_SECS,
            max_open_bytes: DEFAULT_MAX_OPEN_BYTES,
            strict: false,
            keep_malformed: 10,
            year: None,
            infer_not_applicable: true,
            threads: 1,
            block_bytes: DEFAULT_BLOCK_BYTES,
            progress: None,
            max_trace_document_bytes: DEFAULT_MAX_TRACE_DOCUMENT_BYTES,
            line_buffer_bytes: DEFAULT_LINE_BUFFER_BYTES,
        }
    }
}

/// One output item, in log order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An assembled (or read) decision.
    Decision(Box<Decision>),
    /// A vLLM stats record.
    VllmStats(Box<VllmStats>),
}

/// The result of [`parse_slice`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// Decisions and vLLM stats, in log order.
    pub items: Vec<Item>,
    /// The input's ledger.
    pub ledger: InputLedger,
}

impl Parsed {
    /// The decisions.
    pub fn decisions(&self) -> impl Iterator<Item = &Decision> {
        self.items.iter().filter_map(|i| match i {
            Item::Decision(d) => Some(&**d),
            Item::VllmStats(_) => None,
        })
    }

    /// The vLLM stats records.
    pub fn vllm_stats(&self) -> impl Iterator<Item = &VllmStats> {
        self.items.iter().filter_map(|i| match i {
            Item::VllmStats(s) => Some(&**s),
            Item::Decision(_) => None,
        })
    }
}

/// Parses an RFC 3339 time (`2026-08-21T14:27:00Z`, `…+02:00`, with
/// fractional seconds) to seconds since the epoch, as the parser reads
/// kubelet timestamps.
pub fn parse_rfc3339(s: &str) -> Option<f64> {
    time::parse_rfc3339(s.trim().as_bytes())
}

/// Parses every input in order, passing decisions and vLLM stats to `sink`
/// in log order, and returns the ledger. Each input file is assembled on
/// its own (a request cut across two files gives incomplete decisions).
/// Folders and globs are expanded as [`InputFiles::expand`] says.
pub fn parse_inputs(
    inputs: &[InputSpec],
    opts: &ParseOptions,
    sink: impl FnMut(Item),
) -> Result<Ledger, ParseError> {
    parse_files(InputFiles::expand(inputs)?, opts, sink)
}

/// [`parse_inputs`] over inputs already expanded (so that a caller can
/// check them first, e.g. against its outputs). A file found in a folder or
/// by a glob is read only when its first lines are an input (EPP or vLLM
/// log lines, decision records); the others go to [`Ledger::skipped`],
/// after the files [`InputFiles`] skipped.
///
/// Each input is read once: the start of every file is looked at first
/// (to read trace files first, and to skip found files that are no
/// input); stdin and every file that is not a regular file (a FIFO,
/// process substitution, `/dev/stdin`, a device) is opened then, once,
/// and parsed on from what was read, never opened again. A regular file
/// is opened again to be parsed, and must then still be the same file
/// (device and inode), else it is an error naming it.
pub fn parse_files(
    files: InputFiles,
    opts: &ParseOptions,
    mut sink: impl FnMut(Item),
) -> Result<Ledger, ParseError> {
    let mut files = files;
    files.probe(opts);
    // Trace files first (a stable sort), so that a log decision can be
    // joined with its traced gate input as it is read.
    files
        .files
        .sort_by_key(|f| !f.probe.as_ref().is_some_and(input::Probe::traces));
    if let Some(p) = &opts.progress {
        p.set_total(&files.files);
    }
    let mut ledger = Ledger {
        skipped: files.skipped,
        ..Ledger::default()
    };
    // One input's block buffers serve the next.
    let _reuse = engine::Reuse::new();
    for mut f in files.files {
        let naming = DeploymentNaming {
            explicit: f.explicit.clone(),
            fallback: DEFAULT_DEPLOYMENT.to_string(),
        };
        let path = f
            .path
            .clone()
            .unwrap_or_else(|| std::path::PathBuf::from(&f.display));
        let il = match f.probe.take() {
            None => unreachable!("every file is probed"),
            Some(input::Probe::Failed(e)) => {
                let e = e.unwrap_or_else(|| std::io::Error::other("not readable"));
                return Err(ParseError::io(path, e));
            }
            Some(input::Probe::Held(h)) => {
                let raw = h.raw.clone();
                let held = (*h).map(|r| progress::Bridge::new(r, &raw, opts));
                engine::run_opened(held, &f.display, naming, opts, &mut sink)?
            }
            Some(input::Probe::Regular { input, .. }) => {
                if !input {
                    if let Some(pr) = &opts.progress {
                        pr.skipped(&path);
                    }
                    ledger.skipped.push(SkippedFile {
                        path: f.display.clone(),
                        reason: SkipReason::NotAnInput,
                    });
                    continue;
                }
                let (file, _) =
                    input::open_checked(&f, &path).map_err(|e| ParseError::io(&path, e))?;
                run_file(file, &f.display, naming, opts, &mut sink)?
            }
        };
        ledger.push(il, opts.keep_malformed);
    }
    Ok(ledger)
}

/// How many of `files` hold traces, and how many do not (detected by
/// content, as [`parse_files`] does, or as [`ParseOptions::format`] says).
/// Looks at the start of every file that was not looked at yet (see
/// [`parse_files`]: a stream is opened then, once).
pub fn count_trace_files(files: &mut InputFiles, opts: &ParseOptions) -> (usize, usize) {
    files.probe(opts);
    let traces = files
        .files
        .iter()
        .filter(|f| f.probe.as_ref().is_some_and(input::Probe::traces))
        .count();
    (traces, files.files.len() - traces)
}

/// A regular file is read at offsets, in parallel (see
/// [`ParseOptions::threads`]), up to its size now; anything else (a pipe, a
/// device, a file that reports no size, as `/proc` files do) as a stream,
/// to its end.
fn run_file(
    file: std::fs::File,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<InputLedger, ParseError> {
    #[cfg(unix)]
    if let Ok(m) = file.metadata()
        && m.is_file()
        && m.len() > 0
    {
        let src = progress::Tally::new(file, opts);
        return engine::run_at(&src, m.len(), display, naming, opts, sink);
    }
    engine::run_parallel(
        progress::Tally::new(file, opts),
        display,
        naming,
        opts,
        sink,
    )
}

/// Parses one stream (plain or gzip, detected by content) on the calling
/// thread. `name` locates its lines in [`SourceLoc`]s and errors.
pub fn parse_reader<R: Read>(
    reader: R,
    name: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    mut sink: impl FnMut(Item),
) -> Result<InputLedger, ParseError> {
    engine::run(reader, name, naming, opts, &mut sink)
}

/// The deployment of a decision nothing names (no `NAME=`, EPP pod, pool,
/// namespace or model).
pub const DEFAULT_DEPLOYMENT: &str = "default";

/// Parses bytes in memory (plain or gzip) and collects the items.
pub fn parse_slice(name: &str, bytes: &[u8], opts: &ParseOptions) -> Result<Parsed, ParseError> {
    let fallback = DEFAULT_DEPLOYMENT;
    let mut items = Vec::new();
    let ledger = engine::run_at(
        bytes,
        bytes.len() as u64,
        name,
        DeploymentNaming::fallback(fallback),
        opts,
        &mut |i| items.push(i),
    )?;
    Ok(Parsed { items, ledger })
}
