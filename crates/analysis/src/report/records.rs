//! Writing decision records (version 2) that carry what the report needs.
//!
//! A decision is written after the analysis has turned it into a
//! [`GateSample`]: the record keeps the decision's own data (time, ids,
//! outcome logged, candidates) and adds the gate as analysed (counted
//! outcome, evidence label, gate input, replay candidates in tokens,
//! matched tokens, logged bar) and the config in force with its source.
//! Read back, such a record gives the same sample
//! ([`crate::gate::reconstruct::Reconstructor::sample`] takes it as given), so a
//! report made from the records is the report made from the logs.

use gatecal_parser::{
    CandidateRecord, ConfigRecord, DecisionRecord, GateRecord, PickedMatchRecord, ReplayRecord,
};

use crate::config::source::SourcedConfig;
use crate::gate::sample::{GateSample, Replay};
use crate::input::{DecisionInput, MatchedSource};

/// Receives each completed record, in the order the analysis processed the
/// decisions (log-time order within the reorder window).
pub type RecordSink = Box<dyn FnMut(DecisionRecord)>;

/// The gate of a sample, as written. A gate input without bound
/// (`math.MaxFloat64`, or not finite) is written as `f64::MAX` (JSON has no
/// infinity); both count as unbounded.
pub fn gate_record(s: &GateSample) -> GateRecord {
    GateRecord {
        outcome: s.outcome,
        evidence: s.evidence.map(|e| e.as_str().to_string()),
        input_ms: s
            .gate_input_ms
            .map(|g| if g.is_finite() { g } else { f64::MAX }),
        replay: match &s.replay {
            Replay::Unknown => ReplayRecord::Unknown,
            Replay::Fixed(o) => ReplayRecord::Fixed(*o),
            Replay::Candidates(c) => {
                ReplayRecord::Candidates(c.iter().map(CandidateRecord::of).collect())
            }
        },
        matched_tokens: s.matched_tokens,
        logged_bar_ms: s.logged_bar_ms.filter(|b| b.is_finite()),
        censored_ms: s.censored_ms,
        logged_peak: s.logged_peak,
        matched_source: None,
        picked_match: None,
    }
}

/// Completes a decision's record with its sample, the config in force, and
/// where the decision's matched tokens first came from (`d`'s
/// [`DecisionInput::matched_origin`], so that records read back name it).
pub fn complete(
    mut r: DecisionRecord,
    s: &GateSample,
    config: &SourcedConfig,
    d: &DecisionInput,
) -> DecisionRecord {
    r.v = gatecal_parser::RECORD_VERSION;
    let mut g = gate_record(s);
    if g.matched_tokens.is_some() {
        g.matched_source = d
            .matched_origin()
            .and_then(MatchedSource::origin)
            .map(|m| m.as_str().to_string());
    }
    g.picked_match = d.picked_match.map(|p| PickedMatchRecord {
        match_blocks: p.match_blocks,
        total_blocks: p.total_blocks,
        block_size_tokens: p.block_size,
        source: p.source.origin().unwrap_or(p.source).as_str().to_string(),
    });
    r.gate = Some(g);
    let mut c = ConfigRecord::of(&config.source, &config.parameters);
    c.parameter_sources = config
        .parameter_sources
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().to_string()))
        .collect();
    c.log_disagreements = config
        .log_disagreements
        .iter()
        .filter_map(|d| serde_json::to_value(d).ok())
        .collect();
    r.config = Some(c);
    r
}
