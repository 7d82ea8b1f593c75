//! The decisions JSON-lines interchange format, version 1
//! (`docs/decisions-jsonl.md`): one decision of one filter instance per line.

use std::io::{self, Write};

use gatecal_filter::Outcome;
use serde::{Deserialize, Serialize};

use crate::decision::{CandidateObs, Completion, Decision, FilterMsg, SourceLoc};

/// The format version written and read.
pub const RECORD_VERSION: u32 = 1;

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
}

/// One line of the decisions JSON-lines format. Unknown fields are ignored
/// on reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// Format version, `1`.
    pub v: u32,
    /// Decision time, epoch seconds.
    pub ts: f64,
    /// The deployment (pool).
    pub deployment: String,
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
}

impl From<&Decision> for DecisionRecord {
    /// Converts a decision. A decision without a time is written with `ts`
    /// 0; non-finite penalties are left out (JSON has no NaN or infinity).
    fn from(d: &Decision) -> DecisionRecord {
        DecisionRecord {
            v: RECORD_VERSION,
            ts: d.ts.filter(|t| t.is_finite()).unwrap_or(0.0),
            deployment: d.deployment.clone(),
            request_id: d.request_id.clone(),
            profile: d.profile.clone(),
            filter: d.filter.clone(),
            outcome: d.outcome,
            logged_penalty_ms: d.logged_penalty_ms().filter(|p| p.is_finite()),
            candidates: d
                .candidates
                .iter()
                .map(|c| CandidateRecord {
                    endpoint: c.endpoint.clone(),
                    match_blocks: c.match_blocks,
                    total_blocks: c.total_blocks,
                    block_size_tokens: c.block_size_tokens,
                    in_flight_tokens: c.in_flight_tokens,
                    in_flight_requests: c.in_flight_requests,
                    predicted_ttft_ms: c.predicted_ttft_ms.filter(|p| p.is_finite()),
                })
                .collect(),
        }
    }
}

impl DecisionRecord {
    /// The decision this record stands for, located at `source`.
    /// The logged penalty becomes a `TTFT load gate broken` message.
    pub fn into_decision(self, source: SourceLoc) -> Decision {
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
            deployment: self.deployment,
            ts: Some(self.ts),
            request_id: self.request_id,
            profile: self.profile,
            filter: self.filter,
            outcome: self.outcome,
            message,
            penalty: self.logged_penalty_ms,
            source,
            candidates: self
                .candidates
                .into_iter()
                .map(|c| CandidateObs {
                    endpoint: c.endpoint,
                    match_blocks: c.match_blocks,
                    total_blocks: c.total_blocks,
                    block_size_tokens: c.block_size_tokens,
                    in_flight_tokens: c.in_flight_tokens,
                    in_flight_requests: c.in_flight_requests,
                    predicted_ttft_ms: c.predicted_ttft_ms,
                    ..CandidateObs::default()
                })
                .collect(),
            completion: Completion::Record,
            ..Decision::default()
        }
    }

    /// Parses one line. `Err` explains why the record is invalid: not JSON,
    /// a required field missing, a wrong type, an unknown outcome, a version
    /// other than 1, or a non-finite number.
    pub fn parse_line(line: &[u8]) -> Result<DecisionRecord, String> {
        let r: DecisionRecord = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        if r.v != RECORD_VERSION {
            return Err(format!("unsupported version {}", r.v));
        }
        if !r.ts.is_finite() {
            return Err("ts is not finite".to_string());
        }
        Ok(r)
    }
}

/// Whether a line looks like a decisions record: a JSON object with
/// `"v":1` and `candidates` (used to detect the input format).
pub fn looks_like_record(line: &[u8]) -> bool {
    let line = crate::classify::trim_end(line);
    if line.first() != Some(&b'{') {
        return false;
    }
    let mut v = false;
    let mut cands = false;
    let ok = crate::json::members(line, |k, _, val| match k {
        b"v" => v = val == crate::json::Val::Num(b"1"),
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
        assert_eq!(DecisionRecord::from(&d), r);
        let mut w = DecisionWriter::new(Vec::new());
        w.write_record(&r).unwrap();
        let out = w.into_inner().unwrap();
        assert_eq!(DecisionRecord::parse_line(&out).unwrap(), r);
        assert!(looks_like_record(EXAMPLE.as_bytes()));
        assert!(!looks_like_record(br#"{"level":"info","msg":"x"}"#));
    }

    #[test]
    fn invalid_records() {
        for bad in [
            r#"{"v":1,"deployment":"d","candidates":[]}"#,
            r#"{"v":1,"ts":"x","deployment":"d","candidates":[]}"#,
            r#"{"v":2,"ts":1,"deployment":"d","candidates":[]}"#,
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
}
