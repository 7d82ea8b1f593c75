//! What the analysis needs of one filter decision, whatever its source.
//!
//! The input stage around it: decisions from the parser's assembled
//! `Decision` (`from_parser`), decisions and vLLM stats lines seen twice
//! counted once ([`dedup`]), and the bound on the deployments tracked
//! ([`pool`]).

pub mod dedup;
mod from_parser;
mod implied_peak;
pub mod pool;

pub use implied_peak::QUEUE_THRESHOLD_TOKENS;

use gatecal_filter::{Candidate, Outcome};
use gatecal_parser::{DecisionRecord, Name, Recorded};

/// The values of a `PrefixCacheAffinityFilter: TTFT load gate broken` line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoggedGate {
    /// `bestStickyTTFT`, ms.
    pub best_sticky_ttft_ms: Option<f64>,
    /// `bestNonStickyTTFT`, ms.
    pub best_non_sticky_ttft_ms: Option<f64>,
    /// `penalty` = sticky - non-sticky, ms: the exact gate input.
    pub penalty_ms: f64,
    /// `maxPenalty`: the bar in force, ms.
    pub max_penalty_ms: Option<f64>,
}

/// One endpoint's load as seen in the lines of one decision.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoredEndpoint {
    /// `namespace/name`.
    pub endpoint: Name,
    /// `TokenLoadScorer scoring` `tokenLoad`: in-flight tokens plus this
    /// request's uncached tokens on the endpoint, capped.
    pub token_load: Option<f64>,
    /// The prefix cache scorer's score (match fraction), when logged.
    pub prefix_score: Option<f64>,
    /// In-flight tokens excluding the request, when a build logs them.
    pub in_flight_tokens: Option<i64>,
}

/// One decision of one filter instance, as the analysis consumes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DecisionInput {
    /// Deployment (pool) name.
    pub deployment: Name,
    /// Seconds since the Unix epoch.
    pub ts: Option<f64>,
    /// `x-request-id`.
    pub request_id: Option<Name>,
    /// Scheduling profile.
    pub profile: Option<Name>,
    /// Filter instance name.
    pub filter: Option<Name>,
    /// The outcome the EPP logged or recorded.
    pub outcome: Option<Outcome>,
    /// The gate line, when the gate broke.
    pub logged_gate: Option<LoggedGate>,
    /// `sticky` of a `narrowed to sticky` line.
    pub sticky_count: Option<u32>,
    /// `total` of the filter line.
    pub total: Option<u32>,
    /// Endpoints the filter returned (`Completed running filter plugin
    /// successfully`), when logged.
    pub survivors: Option<Vec<Name>>,
    /// Loads seen in this decision's own scorer lines.
    pub scored: Vec<ScoredEndpoint>,
    /// Every candidate with exact attributes (decisions JSON lines, or a
    /// build that logs them): the decision can be replayed exactly.
    pub exact: Option<Vec<Candidate>>,
    /// The endpoint the request was sent to (`namespace/name`), when logged.
    pub chosen: Option<Name>,
    /// Prompt length in tokens, when logged (PD decider).
    pub prompt_tokens: Option<i64>,
    /// Cached prefix tokens of the request on its best sticky endpoint,
    /// when some line gives them; [`DecisionInput::matched_source`] says which.
    pub hit_prefix_tokens: Option<i64>,
    /// A version-2 decisions record's gate and config: the gate input, its
    /// evidence and replay are taken as given, never reconstructed again.
    pub recorded: Option<Box<Recorded>>,
    /// The decision as a record, to be completed with the analysis' gate and
    /// config and written out (`--emit-decisions`); `None` when not asked.
    pub record: Option<Box<DecisionRecord>>,
    /// `affinityThreshold` of the filter line: the instance's config in force.
    pub affinity_threshold: Option<f64>,
    /// `prefillThroughput` of the filter line (P2251 builds): the peak in force.
    pub prefill_throughput: Option<f64>,
    /// Where `hit_prefix_tokens` come from.
    pub matched_source: Option<MatchedSource>,
    /// When the matched tokens come from a prefix producer's lines
    /// (`MatchedSource::ApproximateProducer`,
    /// `MatchedSource::PreciseProducer`): the matched blocks.
    /// `hit_prefix_tokens` is that times the producer's upstream default
    /// block size until [`DecisionInput::set_producer_block_sizes`] sets
    /// the one in force.
    pub producer_match_blocks: Option<i64>,
    /// The prefix match of the endpoint the request was sent to, as the
    /// prefix producers' `-v=5` lines give it (in blocks): what the peak
    /// estimator needs of a request when no record gives it exactly.
    pub picked_match: Option<PickedMatch>,
    /// The decision's trace span, when it has one (a decision of a trace
    /// input, or a log decision joined to its span).
    pub traced: Option<TracedGate>,
    /// The request's arrival at the EPP (its `EPP received request` line),
    /// seconds since the Unix epoch, when read.
    pub arrival_ts: Option<f64>,
    /// The request's observed time to first token, ms (arrival to its
    /// first response body chunk), when the log shows it.
    pub observed_ttft_ms: Option<f64>,
    /// The EPP replica (pod) that logged the decision, when the capture
    /// names it (kubectl `--prefix`, a record's `epp_pod`).
    pub epp_pod: Option<Name>,
    /// The input the decision was read from, when its lines name no EPP
    /// pod (`None` for stdin without `--source-path`): the stream a
    /// partial report counts it in.
    pub unnamed_source: Option<Name>,
    /// `prefill_throughput` was not logged but inferred from the gate
    /// line's TTFTs beside the in-flight tokens they were computed from
    /// ([`DecisionInput::infer_peak`]).
    pub peak_inferred: bool,
}

/// The prefix match of the endpoint a request was sent to, from the prefix
/// producers' `-v=5` lines: the approximate producer's `total # blocks`
/// with the prefix scorer's score of the endpoint picked (match blocks over
/// total blocks), or the precise producer's `blockKeys` with its `scores`
/// entry for the address the request was handled by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PickedMatch {
    /// Which producer's blocks ([`MatchedSource::ApproximateProducer`] or
    /// [`MatchedSource::PreciseProducer`]; read back from a record, its
    /// `RecordsFrom…` label, whose block size is the one written).
    pub source: MatchedSource,
    /// Blocks of the prompt's prefix cached on the endpoint picked.
    pub match_blocks: i64,
    /// Whole blocks of the prompt.
    pub total_blocks: i64,
    /// Tokens per block: the producer's upstream default until
    /// [`DecisionInput::set_producer_block_sizes`] sets the one in force.
    pub block_size: i64,
}

impl PickedMatch {
    /// The request's prompt tokens, estimated from its whole blocks: the
    /// producers hash whole blocks only, so the prompt holds `total_blocks`
    /// blocks and a partial one (0 to `block_size − 1` tokens), taken as
    /// half a block (an error of at most half a block either way).
    pub fn prompt_tokens(&self) -> i64 {
        self.total_blocks
            .saturating_mul(self.block_size)
            .saturating_add(self.block_size / 2)
    }

    /// Its cached prefix tokens on the endpoint picked (whole blocks).
    pub fn matched_tokens(&self) -> i64 {
        self.match_blocks.saturating_mul(self.block_size)
    }
}

/// What a decision's `filter_prefix_cache_affinity` span says.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TracedGate {
    /// `llm_d.epp.filter.ttft_penalty_ms`: the exact gate input, ms; `None`
    /// when the gate was not evaluated.
    pub penalty_ms: Option<f64>,
    /// Whether the decision was read from logs and joined to its span (its
    /// other fields come from the logs); `false` for a decision read from
    /// traces alone.
    pub joined: bool,
}

/// Where a decision's matched tokens come from.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum MatchedSource {
    /// Exact match info of decision records (or a build logging every
    /// candidate's match blocks and block size).
    DecisionRecords,
    /// The P/D decider's `Computed hit percentage for prefix cache` (`-v=4`):
    /// `absolute hit prefix len (tokens)`.
    PdDecider,
    /// The prefix scorer's score × the PD decider's prompt length.
    PrefixScorePrompt,
    /// The precise prefix producer's `Produce completed` (`-v=5`): the
    /// largest of its per-endpoint match blocks × its block size.
    PreciseProducer,
    /// The approximate prefix producer's `Found cached servers` (`-v=5`):
    /// the best sticky endpoint's prefix score × `total # blocks` (else the
    /// longest cached prefix, one line per block) × its block size.
    ApproximateProducer,
    /// Decision records written by an earlier analysis (`--emit-decisions`)
    /// and read back: the matched tokens it took from the P/D decider.
    RecordsFromPdDecider,
    /// Read-back records: matched tokens first taken from the prefix
    /// scorer's score × the prompt length.
    RecordsFromPrefixScorePrompt,
    /// Read-back records: matched tokens first taken from the precise
    /// prefix producer.
    RecordsFromPreciseProducer,
    /// Read-back records: matched tokens first taken from the approximate
    /// prefix producer.
    RecordsFromApproximateProducer,
    /// Read-back records that do not say where their matched tokens came
    /// from (written before records named it).
    RecordsFromUnknownSource,
}

impl MatchedSource {
    /// The label used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchedSource::DecisionRecords => "decision_records",
            MatchedSource::PdDecider => "pd_decider",
            MatchedSource::PrefixScorePrompt => "prefix_score_x_prompt",
            MatchedSource::PreciseProducer => "precise_producer",
            MatchedSource::ApproximateProducer => "approximate_producer",
            MatchedSource::RecordsFromPdDecider => "decision_records_from_pd_decider",
            MatchedSource::RecordsFromPrefixScorePrompt => {
                "decision_records_from_prefix_score_x_prompt"
            }
            MatchedSource::RecordsFromPreciseProducer => "decision_records_from_precise_producer",
            MatchedSource::RecordsFromApproximateProducer => {
                "decision_records_from_approximate_producer"
            }
            MatchedSource::RecordsFromUnknownSource => "decision_records_from_unknown_source",
        }
    }

    /// The source first read, as a record names it (`gate.matched_source`):
    /// a read-back record's origin; `None` when unknown.
    pub fn origin(self) -> Option<MatchedSource> {
        match self {
            MatchedSource::RecordsFromPdDecider => Some(MatchedSource::PdDecider),
            MatchedSource::RecordsFromPrefixScorePrompt => Some(MatchedSource::PrefixScorePrompt),
            MatchedSource::RecordsFromPreciseProducer => Some(MatchedSource::PreciseProducer),
            MatchedSource::RecordsFromApproximateProducer => {
                Some(MatchedSource::ApproximateProducer)
            }
            MatchedSource::RecordsFromUnknownSource => None,
            s => Some(s),
        }
    }

    /// The label of matched tokens read back from a record that names
    /// `origin` as their source (`None`: it names none, or one unknown).
    pub fn read_back(origin: Option<&str>) -> MatchedSource {
        match origin {
            Some("decision_records") => MatchedSource::DecisionRecords,
            Some("pd_decider") => MatchedSource::RecordsFromPdDecider,
            Some("prefix_score_x_prompt") => MatchedSource::RecordsFromPrefixScorePrompt,
            Some("precise_producer") => MatchedSource::RecordsFromPreciseProducer,
            Some("approximate_producer") => MatchedSource::RecordsFromApproximateProducer,
            _ => MatchedSource::RecordsFromUnknownSource,
        }
    }
}

/// Where a prefix producer's block size comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockSizeSource {
    /// The producer's entry in the `--config` file.
    Config,
    /// `--prefix-block-size`.
    Flag,
    /// Not known from the inputs: the upstream default on a default vLLM.
    Assumed,
}

impl BlockSizeSource {
    /// The label used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockSizeSource::Config => "config",
            BlockSizeSource::Flag => "flag",
            BlockSizeSource::Assumed => "assumed",
        }
    }
}

/// The tokens a prefix producer's block holds, and where that comes from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockSize {
    /// Tokens per block.
    pub tokens: i64,
    /// Where the value comes from.
    pub source: BlockSizeSource,
    /// How it was found (the file and entry, or the default's reason).
    pub detail: String,
}

/// The block sizes that turn the prefix producers' matched blocks into
/// matched tokens (the `-v=5` lines log blocks, never tokens).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerBlockSizes {
    /// `approx-prefix-cache-producer` (`Found cached servers`).
    pub approximate_producer: BlockSize,
    /// `precise-prefix-cache-producer` (`Produce completed`).
    pub precise_producer: BlockSize,
}

/// The approximate producer's block size on upstream defaults: `autoTune`
/// takes the engines' block size (vLLM's default, 16) and the producer
/// raises it to its 64-token floor.
pub const DEFAULT_APPROXIMATE_BLOCK_SIZE: i64 = 64;

/// The precise producer's block size on upstream defaults: its
/// `tokenProcessorConfig` default, vLLM's default block size.
pub const DEFAULT_PRECISE_BLOCK_SIZE: i64 = 16;

impl Default for ProducerBlockSizes {
    fn default() -> Self {
        ProducerBlockSizes {
            approximate_producer: BlockSize {
                tokens: DEFAULT_APPROXIMATE_BLOCK_SIZE,
                source: BlockSizeSource::Assumed,
                detail: "upstream default: autoTune takes the engines' block size (vLLM's default 16), raised to the producer's 64-token floor".into(),
            },
            precise_producer: BlockSize {
                tokens: DEFAULT_PRECISE_BLOCK_SIZE,
                source: BlockSizeSource::Assumed,
                detail: "upstream default: tokenProcessorConfig's blockSizeTokens, 16".into(),
            },
        }
    }
}

impl ProducerBlockSizes {
    /// The block size applied to a matched-token source, if it is a
    /// producer's lines (records read back carry the tokens they were
    /// written with).
    pub fn of(&self, source: MatchedSource) -> Option<&BlockSize> {
        match source {
            MatchedSource::ApproximateProducer => Some(&self.approximate_producer),
            MatchedSource::PreciseProducer => Some(&self.precise_producer),
            _ => None,
        }
    }
}

/// The block sizes in force for `deployment` in a per-deployment map: its
/// own, else the entry for every deployment (`""`); `None` means the
/// upstream defaults ([`ProducerBlockSizes::default`]), which the
/// decisions' matched tokens are read at.
pub fn block_sizes_for<'a>(
    by_deployment: &'a std::collections::BTreeMap<String, ProducerBlockSizes>,
    deployment: &str,
) -> Option<&'a ProducerBlockSizes> {
    by_deployment
        .get(deployment)
        .or_else(|| by_deployment.get(""))
}

impl DecisionInput {
    /// When the log does not state the peak in force but the decision's
    /// gate line logs its TTFTs beside the exact in-flight tokens they were
    /// computed from (or, at `-v=5`, the approximate producer's scores and
    /// the scorer's loads that give them; see
    /// `implied_peak::implied_peak`), sets [`DecisionInput::prefill_throughput`] to the
    /// peak they imply (`tokens / TTFT`, both sides agreeing within 0.5 %)
    /// and marks it inferred. `threshold` is the `affinityThreshold` to
    /// tell the sides apart when the decision does not log it.
    pub fn infer_peak(&mut self, threshold: f64) {
        if self.prefill_throughput.is_some() {
            return;
        }
        let t = self.affinity_threshold.unwrap_or(threshold);
        if let Some(p) = implied_peak::implied_peak(self, t) {
            self.prefill_throughput = Some(p);
            self.peak_inferred = true;
        }
    }

    /// Sets a producer-matched decision's tokens at its deployment's block
    /// sizes in `by_deployment` (`block_sizes_for`); with none given they
    /// stay at the upstream defaults.
    pub fn apply_block_sizes(
        &mut self,
        by_deployment: &std::collections::BTreeMap<String, ProducerBlockSizes>,
    ) {
        if self.producer_match_blocks.is_none() && self.picked_match.is_none() {
            return;
        }
        if let Some(sizes) = block_sizes_for(by_deployment, &self.deployment) {
            self.set_producer_block_sizes(sizes);
        }
    }

    /// Sets the matched tokens of a decision whose matched tokens come from
    /// a prefix producer's lines to its matched blocks times `sizes`'
    /// block size of that producer, and the picked endpoint's match
    /// ([`DecisionInput::picked_match`]) likewise; other decisions are left
    /// as they are.
    pub fn set_producer_block_sizes(&mut self, sizes: &ProducerBlockSizes) {
        if let Some(p) = self.picked_match.as_mut()
            && let Some(b) = sizes.of(p.source)
        {
            p.block_size = b.tokens;
        }
        let Some(blocks) = self.producer_match_blocks else {
            return;
        };
        let size = match self.matched_source {
            Some(MatchedSource::ApproximateProducer) => sizes.approximate_producer.tokens,
            Some(MatchedSource::PreciseProducer) => sizes.precise_producer.tokens,
            _ => return,
        };
        self.hit_prefix_tokens = Some(blocks.saturating_mul(size));
    }

    /// Where the matched tokens of this decision's sample come from, in the
    /// reconstruction's order: a version-2 record's gate (read back, with
    /// the source it names), the exact candidates' match info, the logged
    /// hit ([`DecisionInput::matched_source`]).
    pub fn matched_origin(&self) -> Option<MatchedSource> {
        let traced_only = self.traced.is_some_and(|t| !t.joined);
        if traced_only {
            return self.matched_source;
        }
        if let Some(g) = self.recorded.as_ref().and_then(|r| r.gate.as_ref()) {
            return Some(MatchedSource::read_back(g.matched_source.as_deref()));
        }
        if self.exact.is_some() {
            return Some(MatchedSource::DecisionRecords);
        }
        self.matched_source
    }
}
