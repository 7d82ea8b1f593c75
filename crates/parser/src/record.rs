//! The decisions JSON-lines interchange format (`docs/decisions-jsonl.md`):
//! one decision of one filter instance per line. Version 3 is written;
//! versions 1 to 3 are read.

use std::io::{self, Write};

use gatecal_filter::{Config, MissingSignal, Outcome};
use serde::{Deserialize, Serialize};

use crate::decision::{CandidateObs, Completion, Decision, FilterMsg, GatePenalty, SourceLoc};
use crate::name::Name;

/// The format version written.
pub const RECORD_VERSION: u32 = 3;

/// The oldest format version read.
pub const RECORD_VERSION_MIN: u32 = 1;

/// How the decision can be replayed under another config (version 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayRecord {
    /// The gate ran but its input is unknown: no replay.
    Unknown,
    /// The outcome does not depend on the gate's parameters.
    Fixed(Outcome),
    /// Candidates to pass to the filter core (the reconstructed best sticky
    /// and best non-sticky endpoints, in tokens, or every candidate when
    /// each one's load and match are known).
    Candidates(Vec<CandidateRecord>),
}

/// The gate as the analysis saw it (version 2): what the report needs,
/// taken as given when read back (never reconstructed again).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateRecord {
    /// The outcome counted: the logged one, or the replayed one when none
    /// was logged; `null` when unknown.
    #[serde(default)]
    pub outcome: Option<Outcome>,
    /// How the gate input is known (`logged`, `observed`, `reconstructed`,
    /// `unknown`, or any later label); `null` when the gate was not
    /// evaluated.
    #[serde(default)]
    pub evidence: Option<String>,
    /// The gate input in ms under the record's config; `null` when unknown.
    /// A gate input without bound (`math.MaxFloat64`, a non-finite value)
    /// is written as `1.7976931348623157e308`.
    #[serde(default)]
    pub input_ms: Option<f64>,
    /// How to replay the decision under another config.
    pub replay: ReplayRecord,
    /// Matched tokens of the best sticky endpoint, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_tokens: Option<i64>,
    /// The bar the EPP logged (`maxPenalty`), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logged_bar_ms: Option<f64>,
    /// How far the logged hold moved the reconstructed gate input (ms), when
    /// it had to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub censored_ms: Option<f64>,
    /// The peak the EPP logged (`prefillThroughput`), tokens/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logged_peak: Option<f64>,
    /// Where `matched_tokens` were first read (`decision_records`,
    /// `pd_decider`, `prefix_score_x_prompt`, or any later label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_source: Option<String>,
    /// The prefix match of the endpoint the request was sent to, as the
    /// prefix producers' `-v=5` lines gave it, when the candidates do not
    /// carry it (the peak estimator's uncached tokens of the request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picked_match: Option<PickedMatchRecord>,
}

/// The prefix match of the endpoint a request was sent to, in whole blocks
/// (a [`GateRecord`]'s `picked_match`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PickedMatchRecord {
    /// Blocks of the prompt's prefix cached on the endpoint picked.
    pub match_blocks: i64,
    /// Whole blocks of the prompt.
    pub total_blocks: i64,
    /// Tokens per block, as in force when the record was written.
    pub block_size_tokens: i64,
    /// The lines it was read from (`approximate_producer`,
    /// `precise_producer`, or any later label).
    pub source: String,
}

/// The filter config in force for the decision, and where it came from
/// (version 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// Where the config came from when the record was written (`default`,
    /// `flags`, `file:PATH`, ...).
    pub source: String,
    /// The filter's parameters, EPP names.
    pub parameters: serde_json::Value,
    /// The v0.9.0/v0.10.0 missing-signal semantics were replayed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy_missing_signal: bool,
    /// Per parameter, where its value came from (`log`, `file`, `flag`,
    /// `default`), as the report gives it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub parameter_sources: std::collections::BTreeMap<String, String>,
    /// Parameters whose logged value differs from a file's or flag's, as
    /// the report gives them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_disagreements: Vec<serde_json::Value>,
}

impl ConfigRecord {
    /// The record of a config.
    pub fn of(source: &str, config: &Config) -> ConfigRecord {
        ConfigRecord {
            source: source.to_string(),
            parameters: config.to_parameters(),
            legacy_missing_signal: config.missing_signal == MissingSignal::AsZero,
            parameter_sources: std::collections::BTreeMap::new(),
            log_disagreements: Vec::new(),
        }
    }

    /// The config, validated as the EPP validates it.
    pub fn config(&self) -> Result<Config, String> {
        let mut c = Config::from_value(&self.parameters).map_err(|e| format!("config: {e}"))?;
        if self.legacy_missing_signal {
            c.missing_signal = MissingSignal::AsZero;
        }
        Ok(c)
    }
}

/// What a record adds to a decision: its version, and from version 2 the
/// gate as analysed and the config it was analysed with.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// The gate (version 2 on; `None` when the record has none).
    pub gate: Option<GateRecord>,
    /// The config in force and its source.
    pub config: Option<(String, Config)>,
    /// The config's record as written (per-parameter sources, disagreements
    /// with the log).
    pub config_record: Option<ConfigRecord>,
    /// The record's format version: before 3, its candidates carry no
    /// token loads and it no arrival time, which the predicted TTFT's
    /// workload inference reads.
    pub version: u32,
}

/// One candidate of a [`DecisionRecord`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    /// `namespace/name` (or `name` when no namespace).
    pub endpoint: String,
    /// Prefix cache match, in blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_blocks: Option<i64>,
    /// Blocks of the prompt considered for matching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_blocks: Option<i64>,
    /// Tokens per block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size_tokens: Option<i64>,
    /// In-flight tokens on the endpoint, excluding the current request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_tokens: Option<i64>,
    /// In-flight requests on the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_requests: Option<i64>,
    /// Latency-predictor TTFT, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ttft_ms: Option<f64>,
    /// `tokenLoad` of the token-load scorer's line (version 3): in-flight
    /// tokens plus the request's uncached tokens on the endpoint, capped at
    /// the scorer's `queueThresholdTokens`, as logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_load: Option<f64>,
}

/// One line of the decisions JSON-lines format. Unknown fields are ignored
/// on reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// Format version, `3` (`1` and `2` are read too).
    pub v: u32,
    /// Decision time, epoch seconds (required in version 1; `null` when
    /// unknown in version 2).
    pub ts: Option<f64>,
    /// The deployment (pool).
    pub deployment: String,
    /// The EPP pod that logged the decision (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epp_pod: Option<String>,
    /// `x-request-id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Scheduling profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Filter instance name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Outcome; `null` when unknown.
    #[serde(default)]
    pub outcome: Option<Outcome>,
    /// `penalty` of a `TTFT load gate broken` line, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logged_penalty_ms: Option<f64>,
    /// The endpoints the filter saw, in order.
    pub candidates: Vec<CandidateRecord>,
    /// The endpoint (`namespace/name`) the request was sent to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_endpoint: Option<String>,
    /// The request's prompt tokens, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<i64>,
    /// The request's observed time to first token, ms (its `EPP received
    /// request` line to its first response body chunk), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_ttft_ms: Option<f64>,
    /// The request's arrival at the EPP (its `EPP received request` line),
    /// epoch seconds, when known (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_ts: Option<f64>,
    /// The gate as analysed (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateRecord>,
    /// The config in force (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigRecord>,
}

impl CandidateRecord {
    /// The record of a filter-core candidate.
    pub fn of(c: &gatecal_filter::Candidate) -> CandidateRecord {
        CandidateRecord {
            endpoint: c.id.clone(),
            match_blocks: c.match_blocks,
            total_blocks: c.total_blocks,
            block_size_tokens: c.block_size_tokens,
            in_flight_tokens: c.in_flight_tokens,
            in_flight_requests: c.in_flight_requests,
            predicted_ttft_ms: c.predicted_ttft_ms.filter(|p| p.is_finite()),
            token_load: None,
        }
    }

    /// The filter-core candidate of this record.
    pub fn to_candidate(&self) -> gatecal_filter::Candidate {
        gatecal_filter::Candidate {
            id: self.endpoint.clone(),
            match_blocks: self.match_blocks,
            total_blocks: self.total_blocks,
            block_size_tokens: self.block_size_tokens,
            in_flight_tokens: self.in_flight_tokens,
            in_flight_requests: self.in_flight_requests,
            predicted_ttft_ms: self.predicted_ttft_ms,
        }
    }
}

impl From<&Decision> for DecisionRecord {
    /// Converts a decision, with the gate and config it was read with (a
    /// version-2 record's), if any: the analysis sets them with what it
    /// found ([`DecisionRecord::gate`], [`DecisionRecord::config`]).
    /// Non-finite values are left out (JSON has no NaN or infinity).
    fn from(d: &Decision) -> DecisionRecord {
        DecisionRecord {
            v: RECORD_VERSION,
            ts: d.ts.filter(|t| t.is_finite()),
            deployment: d.deployment.to_string(),
            epp_pod: d.epp_pod.as_deref().map(str::to_owned),
            request_id: d.request_id.as_deref().map(str::to_owned),
            profile: d.profile.as_deref().map(str::to_owned),
            filter: d.filter.as_deref().map(str::to_owned),
            outcome: d.outcome,
            logged_penalty_ms: d.logged_penalty_ms().filter(|p| p.is_finite()),
            candidates: d
                .candidates
                .iter()
                .map(|c| CandidateRecord {
                    endpoint: c.endpoint.to_string(),
                    match_blocks: c.match_blocks,
                    total_blocks: c.total_blocks,
                    block_size_tokens: c.block_size_tokens,
                    in_flight_tokens: c.in_flight_tokens,
                    in_flight_requests: c.in_flight_requests,
                    predicted_ttft_ms: c.predicted_ttft_ms.filter(|p| p.is_finite()),
                    token_load: c.token_load.filter(|l| crate::domain::is_count(*l)),
                })
                .collect(),
            chosen_endpoint: d.chosen.as_deref().map(str::to_owned),
            prompt_tokens: d
                .prompt_tokens
                .filter(|p| p.is_finite() && *p >= 0.0)
                .map(|p| p.round() as i64),
            observed_ttft_ms: d.observed_ttft_ms.filter(|t| t.is_finite() && *t >= 0.0),
            arrival_ts: d.arrival_ts.filter(|t| crate::domain::is_timestamp(*t)),
            gate: d.recorded.as_ref().and_then(|r| r.gate.clone()),
            config: d.recorded.as_ref().and_then(|r| {
                r.config_record
                    .clone()
                    .or_else(|| r.config.as_ref().map(|(s, c)| ConfigRecord::of(s, c)))
            }),
        }
    }
}

impl DecisionRecord {
    /// The decision this record stands for, located at `source`.
    /// The logged penalty becomes a `TTFT load gate broken` message; the
    /// record's version, and from version 2 its gate and config, become
    /// [`Decision::recorded`] (the config is validated by
    /// [`DecisionRecord::parse_line`]).
    pub fn into_decision(self, source: SourceLoc) -> Decision {
        let config = self
            .config
            .as_ref()
            .and_then(|c| Some((c.source.clone(), c.config().ok()?)));
        let config_record = self.config.clone();
        let version = self.v;
        // Every record, so that one of an older version is known as such
        // (version 1 has no gate).
        let recorded = Some(Box::new(Recorded {
            gate: self.gate,
            config,
            config_record,
            version,
        }));
        let message = match (self.logged_penalty_ms, self.outcome) {
            (Some(_), _) => FilterMsg::TtftGateBroken,
            (None, Some(Outcome::Sticky)) => FilterMsg::NarrowedToSticky,
            (None, Some(Outcome::NoMatch)) => FilterMsg::NoSticky,
            (None, Some(Outcome::Exploration)) => FilterMsg::ExplorationSkip,
            (None, Some(Outcome::MissingSignal)) => FilterMsg::MissingSignal,
            (None, Some(Outcome::RequestLoadOverride)) => FilterMsg::RequestGateBroken,
            (None, Some(Outcome::LoadOverride)) => FilterMsg::TtftGateBroken,
            (None, Some(Outcome::NotApplicable) | None) => FilterMsg::None,
        };
        Decision {
            deployment: self.deployment.into(),
            epp_pod: self.epp_pod.map(Name::from),
            recorded,
            ts: self.ts,
            request_id: self.request_id.map(Name::from),
            profile: self.profile.map(Name::from),
            filter: self.filter.map(Name::from),
            outcome: self.outcome,
            message,
            penalty: self.logged_penalty_ms.map(GatePenalty::Ms),
            source,
            candidates: self
                .candidates
                .into_iter()
                .map(|c| CandidateObs {
                    endpoint: c.endpoint.into(),
                    match_blocks: c.match_blocks,
                    total_blocks: c.total_blocks,
                    block_size_tokens: c.block_size_tokens,
                    in_flight_tokens: c.in_flight_tokens,
                    in_flight_requests: c.in_flight_requests,
                    predicted_ttft_ms: c.predicted_ttft_ms,
                    token_load: c.token_load,
                    ..CandidateObs::default()
                })
                .collect(),
            chosen: self.chosen_endpoint.map(Name::from),
            prompt_tokens: self.prompt_tokens.map(|p| p as f64),
            observed_ttft_ms: self.observed_ttft_ms,
            arrival_ts: self.arrival_ts,
            completion: Completion::Record,
            ..Decision::default()
        }
    }

    /// Parses one line. `Err` explains why the record is invalid: not JSON,
    /// a required field missing, a wrong type, an unknown outcome, a version
    /// other than 1 to 3, a non-finite number, or (version 2 on) a config
    /// the EPP would reject.
    pub fn parse_line(line: &[u8]) -> Result<DecisionRecord, String> {
        if let Some(at) = crate::json::too_deep(line) {
            return Err(format!(
                "JSON nested deeper than {} levels at byte {at}",
                crate::MAX_JSON_DEPTH
            ));
        }
        let r: DecisionRecord = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        if !(RECORD_VERSION_MIN..=RECORD_VERSION).contains(&r.v) {
            return Err(format!("unsupported version {}", r.v));
        }
        let range = |k: &'static str| Err(crate::domain::out_of_range(k).to_string());
        match r.ts {
            Some(t) if !crate::domain::is_timestamp(t) => return range("ts"),
            None if r.v == 1 => return Err("missing field `ts`".to_string()),
            _ => {}
        }
        if r.arrival_ts
            .is_some_and(|t| !crate::domain::is_timestamp(t))
        {
            return range("arrival_ts");
        }
        // Counts: the same domain as a log line's ([`crate::domain`]).
        let count = |x: Option<i64>| x.is_none_or(|x| crate::domain::is_count(x as f64));
        if !count(r.prompt_tokens) {
            return range("prompt_tokens");
        }
        for c in &r.candidates {
            for (k, v) in [
                ("match_blocks", c.match_blocks),
                ("total_blocks", c.total_blocks),
                ("block_size_tokens", c.block_size_tokens),
                ("in_flight_tokens", c.in_flight_tokens),
                ("in_flight_requests", c.in_flight_requests),
            ] {
                if !count(v) {
                    return range(k);
                }
            }
            if c.token_load.is_some_and(|l| !crate::domain::is_count(l)) {
                return range("token_load");
            }
        }
        if r.observed_ttft_ms
            .is_some_and(|t| !(t.is_finite() && t >= 0.0))
        {
            return Err("observed_ttft_ms is negative or not finite".to_string());
        }
        if r.v == 1 && (r.gate.is_some() || r.config.is_some()) {
            // Version 1 had neither: a writer that mixes versions.
            return Err("`gate` and `config` need version 2".to_string());
        }
        if let Some(c) = &r.config {
            c.config()?;
        }
        Ok(r)
    }
}

/// Whether a line looks like a decisions record: a JSON object with
/// `"v":1`, `"v":2` or `"v":3` and `candidates` (used to detect the input
/// format).
pub fn looks_like_record(line: &[u8]) -> bool {
    let line = crate::classify::trim_end(line);
    if line.first() != Some(&b'{') {
        return false;
    }
    let mut v = false;
    let mut cands = false;
    let ok = crate::json::members(line, |k, _, val| match k {
        b"v" => {
            v = [&b"1"[..], b"2", b"3"]
                .iter()
                .any(|n| val == crate::json::Val::Num(n));
        }
        b"candidates" => cands = true,
        _ => {}
    });
    ok.is_ok() && v && cands
}

/// Writes decisions as JSON lines.
pub struct DecisionWriter<W: Write> {
    w: W,
    written: u64,
}

impl<W: Write> DecisionWriter<W> {
    /// A writer over `w` (wrap files in a `BufWriter`).
    pub fn new(w: W) -> Self {
        DecisionWriter { w, written: 0 }
    }

    /// Writes one decision as one line.
    pub fn write(&mut self, d: &Decision) -> io::Result<()> {
        self.write_record(&DecisionRecord::from(d))
    }

    /// Writes one record as one line.
    pub fn write_record(&mut self, r: &DecisionRecord) -> io::Result<()> {
        serde_json::to_writer(&mut self.w, r).map_err(io::Error::other)?;
        self.w.write_all(b"\n")?;
        self.written += 1;
        Ok(())
    }

    /// Records written.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{"v":1,"ts":1764482019.25,"deployment":"glm-5-2","request_id":"r-17","profile":"prefill","outcome":"sticky","candidates":[{"endpoint":"llm/p-0","match_blocks":22,"total_blocks":25,"block_size_tokens":64,"in_flight_tokens":41000},{"endpoint":"llm/p-1","match_blocks":0,"total_blocks":25,"block_size_tokens":64,"in_flight_tokens":2000}]}"#;

    #[test]
    fn roundtrip_example() {
        let r = DecisionRecord::parse_line(EXAMPLE.as_bytes()).unwrap();
        assert_eq!(r.outcome, Some(Outcome::Sticky));
        assert_eq!(r.candidates[0].match_blocks, Some(22));
        let d = r.clone().into_decision(SourceLoc::default());
        assert_eq!(d.message, FilterMsg::NarrowedToSticky);
        // Written back as version 3, with the same content.
        assert_eq!(
            DecisionRecord::from(&d),
            DecisionRecord { v: 3, ..r.clone() }
        );
        let mut w = DecisionWriter::new(Vec::new());
        w.write_record(&r).unwrap();
        let out = w.into_inner().unwrap();
        assert_eq!(DecisionRecord::parse_line(&out).unwrap(), r);
        assert!(looks_like_record(EXAMPLE.as_bytes()));
        assert!(!looks_like_record(br#"{"level":"info","msg":"x"}"#));
    }

    /// The observed TTFT goes from a decision to its record and back, bit
    /// for bit.
    #[test]
    fn observed_ttft_round_trips() {
        for ttft in [1241.333334, 0.1 + 0.2, 451840.447649, 0.0] {
            let d = Decision {
                deployment: "d".into(),
                ts: Some(1787320800.0663826),
                observed_ttft_ms: Some(ttft),
                ..Decision::default()
            };
            let mut w = DecisionWriter::new(Vec::new());
            w.write(&d).unwrap();
            let out = w.into_inner().unwrap();
            let text = String::from_utf8(out.clone()).unwrap();
            assert!(text.contains("\"observed_ttft_ms\":"), "{text}");
            let r = DecisionRecord::parse_line(&out).unwrap();
            assert_eq!(r.observed_ttft_ms.map(f64::to_bits), Some(ttft.to_bits()));
            let back = r.into_decision(SourceLoc::default());
            assert_eq!(
                back.observed_ttft_ms.map(f64::to_bits),
                Some(ttft.to_bits())
            );
        }
        // Absent when unknown; a negative one is refused.
        let mut w = DecisionWriter::new(Vec::new());
        w.write(&Decision::default()).unwrap();
        let out = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert!(!out.contains("observed_ttft_ms"), "{out}");
        let bad = r#"{"v":2,"ts":1,"deployment":"d","candidates":[],"observed_ttft_ms":-1}"#;
        assert!(DecisionRecord::parse_line(bad.as_bytes()).is_err());
    }

    /// What the predicted TTFT's workload inference reads of a request
    /// (its arrival, each candidate's token load) goes from a decision to
    /// its record and back bit for bit, and the record written again from
    /// what was read is byte-identical.
    #[test]
    fn version_3_carries_the_workload() {
        let mut a = CandidateObs::new("llm/p-0");
        a.token_load = Some(41092.0);
        let mut b = CandidateObs::new("llm/p-1");
        b.token_load = Some(0.1 + 0.2);
        let d = Decision {
            deployment: "d".into(),
            ts: Some(1787320802.71),
            arrival_ts: Some(1787320802.7043219),
            request_id: Some("r-17".into()),
            candidates: vec![a, b, CandidateObs::new("llm/p-2")],
            chosen: Some("llm/p-0".into()),
            prompt_tokens: Some(1500.0),
            observed_ttft_ms: Some(1241.333334),
            ..Decision::default()
        };
        let mut w = DecisionWriter::new(Vec::new());
        w.write(&d).unwrap();
        let first = w.into_inner().unwrap();
        let text = String::from_utf8(first.clone()).unwrap();
        assert!(text.starts_with(r#"{"v":3,"#), "{text}");
        assert!(looks_like_record(&first));
        let r = DecisionRecord::parse_line(&first).unwrap();
        let back = r.into_decision(SourceLoc::default());
        assert_eq!(
            back.arrival_ts.map(f64::to_bits),
            Some(1787320802.7043219f64.to_bits())
        );
        let loads: Vec<Option<u64>> = back
            .candidates
            .iter()
            .map(|c| c.token_load.map(f64::to_bits))
            .collect();
        assert_eq!(
            loads,
            [
                Some(41092.0f64.to_bits()),
                Some((0.1f64 + 0.2).to_bits()),
                None
            ]
        );
        let mut w = DecisionWriter::new(Vec::new());
        w.write(&back).unwrap();
        assert_eq!(w.into_inner().unwrap(), first);
        // Unknown: left out. Out of their domain: refused.
        let mut w = DecisionWriter::new(Vec::new());
        w.write(&Decision::default()).unwrap();
        let none = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert!(!none.contains("arrival_ts") && !none.contains("token_load"));
        for bad in [
            r#"{"v":3,"ts":1,"deployment":"d","candidates":[],"arrival_ts":-5}"#,
            r#"{"v":3,"ts":1,"deployment":"d","candidates":[],"arrival_ts":"x"}"#,
            r#"{"v":3,"ts":1,"deployment":"d","candidates":[{"endpoint":"a","token_load":-1}]}"#,
            r#"{"v":3,"ts":1,"deployment":"d","candidates":[{"endpoint":"a","token_load":1e300}]}"#,
        ] {
            assert!(DecisionRecord::parse_line(bad.as_bytes()).is_err(), "{bad}");
        }
        // A record of the version before keeps its version with its gate:
        // the analysis says its workload is assumed.
        let v2 = r#"{"v":2,"ts":1,"deployment":"d","candidates":[],"gate":{"replay":"unknown"}}"#;
        let d = DecisionRecord::parse_line(v2.as_bytes())
            .unwrap()
            .into_decision(SourceLoc::default());
        assert_eq!(d.recorded.map(|r| r.version), Some(2));
    }

    #[test]
    fn invalid_records() {
        for bad in [
            r#"{"v":1,"deployment":"d","candidates":[]}"#,
            r#"{"v":1,"ts":"x","deployment":"d","candidates":[]}"#,
            r#"{"v":4,"ts":1,"deployment":"d","candidates":[]}"#,
            r#"{"v":0,"ts":1,"deployment":"d","candidates":[]}"#,
            // Version 1 needs a time, and has no gate or config.
            r#"{"v":1,"ts":null,"deployment":"d","candidates":[]}"#,
            r#"{"v":1,"ts":1,"deployment":"d","candidates":[],"gate":{"replay":"unknown"}}"#,
            // A config the EPP would reject, an unknown replay.
            r#"{"v":2,"ts":1,"deployment":"d","candidates":[],"config":{"source":"x","parameters":{"maxTTFTPenaltyMs":-1}}}"#,
            r#"{"v":2,"ts":1,"deployment":"d","candidates":[],"gate":{"replay":"maybe"}}"#,
            r#"{"v":1,"ts":1,"deployment":"d","outcome":"bogus","candidates":[]}"#,
            r#"{"v":1,"ts":1,"deployment":"d","candidates":[{"endpoint":"a","match_blocks":1.5}]}"#,
            r#"{"v":1,"ts":NaN,"deployment":"d","candidates":[]}"#,
            "not json",
        ] {
            assert!(DecisionRecord::parse_line(bad.as_bytes()).is_err(), "{bad}");
        }
        let ok = r#"{"v":1,"ts":1,"deployment":"d","outcome":null,"extra":{"x":1},"candidates":[{"endpoint":"a","zzz":1}]}"#;
        assert!(DecisionRecord::parse_line(ok.as_bytes()).is_ok());
    }

    #[test]
    fn version_2_carries_the_gate_and_config() {
        let line = r#"{"v":2,"ts":null,"deployment":"d","epp_pod":"d-epp-6f7c9d8b5-xk2lp","outcome":"sticky","candidates":[{"endpoint":"ns/a"}],"gate":{"outcome":"sticky","evidence":"traced","input_ms":1.7976931348623157e308,"replay":{"candidates":[{"endpoint":"","match_blocks":1,"total_blocks":1,"in_flight_tokens":41000},{"endpoint":"","match_blocks":0,"total_blocks":1,"in_flight_tokens":2000}]},"matched_tokens":1408},"config":{"source":"file:epp.yaml","parameters":{"maxTTFTPenaltyMs":5000},"legacy_missing_signal":true}}"#;
        assert!(looks_like_record(line.as_bytes()));
        let r = DecisionRecord::parse_line(line.as_bytes()).unwrap();
        let d = r.clone().into_decision(SourceLoc::default());
        assert_eq!(d.ts, None);
        assert_eq!(d.epp_pod.as_deref(), Some("d-epp-6f7c9d8b5-xk2lp"));
        let rec = d.recorded.as_ref().expect("the record");
        let gate = rec.gate.as_ref().expect("the gate as given");
        // A label this build does not know is kept as written.
        assert_eq!(gate.evidence.as_deref(), Some("traced"));
        assert_eq!(gate.input_ms, Some(f64::MAX));
        let (source, config) = rec.config.as_ref().unwrap();
        assert_eq!(source, "file:epp.yaml");
        assert_eq!(config.max_ttft_penalty_ms, 5000.0);
        assert_eq!(config.missing_signal, MissingSignal::AsZero);
        match &gate.replay {
            ReplayRecord::Candidates(c) => assert_eq!(c[0].in_flight_tokens, Some(41000)),
            other => panic!("{other:?}"),
        }
        // Written back, the record is the same (the config's parameters in
        // full).
        let back = DecisionRecord::from(&d);
        assert_eq!(back.gate, r.gate);
        assert_eq!(back.config.as_ref().unwrap().source, "file:epp.yaml");
        assert_eq!(
            back.config.as_ref().unwrap().parameters["maxTTFTPenaltyMs"],
            5000.0
        );
        assert_eq!(back.ts, None);
    }
}
