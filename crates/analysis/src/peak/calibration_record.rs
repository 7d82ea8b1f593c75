//! The router filter's peak prefill calibration record (JSON), as its
//! `prefillCalibrationFile` reads it: written from a passive estimate, and
//! read back as calibration input.
//!
//! The filter applies a record only when `schema_version` is 1, `status` is
//! `"OK"`, `peak_prefill_tokens_per_second` and `median_ttft_seconds` are
//! positive finite numbers, `chunk_tokens` is a positive integer,
//! `valid_samples` is at least 10 and `fingerprint` is non-empty and equal to
//! the filter's `prefillCalibrationFingerprint`. Unknown keys are ignored by
//! its reader, so the record also says how the figure was derived.

use serde::{Deserialize, Serialize};

use super::throughput::{PeakEstimate, PeakSource};

/// The only record schema the filter reads.
pub const SCHEMA_VERSION: i64 = 1;
/// The status the filter requires before it applies a record.
pub const STATUS_OK: &str = "OK";
/// Fewest valid samples the filter accepts.
pub const MIN_SAMPLES: u64 = 10;

/// One calibration record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRecord {
    /// Record schema, 1.
    pub schema_version: i64,
    /// `OK` for a usable estimate.
    pub status: String,
    /// Identity of the deployment the estimate describes; the filter
    /// applies the record only when its `prefillCalibrationFingerprint`
    /// equals it.
    pub fingerprint: String,
    /// Model revision; empty when unknown (logs do not carry it).
    #[serde(default)]
    pub model_revision: String,
    /// Engine image digest; empty when unknown.
    #[serde(default)]
    pub engine_image_digest: String,
    /// The engine's prefill chunk (`max_num_batched_tokens`), as given.
    pub chunk_tokens: Option<i64>,
    /// Samples the peak rests on.
    pub valid_samples: u64,
    /// Median TTFT observed, seconds.
    pub median_ttft_seconds: Option<f64>,
    /// The peak, tokens/s.
    pub peak_prefill_tokens_per_second: Option<f64>,
    /// Whether a rollout applied it; a fresh record is not applied.
    #[serde(default)]
    pub applied: bool,
    /// How the record was made (ignored by the filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// What the record's figures rest on: measured or derived.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `passive_estimate`: derived from production logs, not a probe run.
    pub kind: String,
    /// The estimate's source (`prometheus`, `vllm_stats`, ...).
    pub peak_source: String,
    /// How the peak was computed.
    pub peak_method: String,
    /// 90 % interval of the peak, tokens/s, when the method gives one.
    pub peak_interval: Option<[f64; 2]>,
    /// Requests behind `median_ttft_seconds`.
    pub ttft_requests: u64,
    /// Where `median_ttft_seconds` comes from.
    pub ttft_source: String,
}

/// Why a passive estimate cannot make a record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordError {
    /// The peak is the config's value or the user's, not an estimate.
    NoEvidence(PeakSource),
    /// Not a positive finite peak.
    BadPeak(f64),
    /// No observed TTFT.
    NoTtft,
    /// Chunk size missing or not positive.
    BadChunk,
    /// Empty fingerprint.
    NoFingerprint,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::NoEvidence(s) => write!(
                f,
                "the peak rests on no estimate from the input (source {}): nothing measured to record",
                s.as_str()
            ),
            RecordError::BadPeak(v) => write!(f, "peak {v} is not a positive finite number"),
            RecordError::NoTtft => {
                write!(f, "no observed TTFT in the input for median_ttft_seconds")
            }
            RecordError::BadChunk => write!(f, "chunk_tokens must be a positive integer"),
            RecordError::NoFingerprint => write!(f, "the fingerprint is empty"),
        }
    }
}

impl std::error::Error for RecordError {}

/// The passive inputs of a record.
#[derive(Clone, Debug)]
pub struct PassiveInputs<'a> {
    /// The peak estimate chosen.
    pub peak: &'a PeakEstimate,
    /// Observed median TTFT, ms, and the requests behind it.
    pub median_ttft_ms: Option<f64>,
    /// Requests behind the median.
    pub ttft_requests: u64,
    /// Where the TTFT figures come from.
    pub ttft_source: &'a str,
    /// The engine's prefill chunk, tokens.
    pub chunk_tokens: i64,
    /// The deployment identity.
    pub fingerprint: &'a str,
}

impl CalibrationRecord {
    /// A record from a passive estimate. `status` is `OK` only when the
    /// estimate rests on at least 10 samples (`MIN_SAMPLES`), else
    /// `INSUFFICIENT_SAMPLES` (kept, but the filter will not apply it).
    pub fn from_passive(i: &PassiveInputs<'_>) -> Result<Self, RecordError> {
        let p = i.peak;
        if matches!(p.source, PeakSource::Config | PeakSource::User) {
            return Err(RecordError::NoEvidence(p.source));
        }
        if !(p.value.is_finite() && p.value > 0.0) {
            return Err(RecordError::BadPeak(p.value));
        }
        let ttft = i
            .median_ttft_ms
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or(RecordError::NoTtft)?;
        if i.chunk_tokens <= 0 {
            return Err(RecordError::BadChunk);
        }
        if i.fingerprint.trim().is_empty() {
            return Err(RecordError::NoFingerprint);
        }
        let status = if p.samples >= MIN_SAMPLES {
            STATUS_OK
        } else {
            "INSUFFICIENT_SAMPLES"
        };
        Ok(CalibrationRecord {
            schema_version: SCHEMA_VERSION,
            status: status.into(),
            fingerprint: i.fingerprint.into(),
            model_revision: String::new(),
            engine_image_digest: String::new(),
            chunk_tokens: Some(i.chunk_tokens),
            valid_samples: p.samples,
            median_ttft_seconds: Some(ttft / 1000.0),
            peak_prefill_tokens_per_second: Some(p.value),
            applied: false,
            provenance: Some(Provenance {
                kind: "passive_estimate".into(),
                peak_source: p.source.as_str().into(),
                peak_method: p.method.clone(),
                peak_interval: p.interval,
                ttft_requests: i.ttft_requests,
                ttft_source: i.ttft_source.into(),
            }),
        })
    }

    /// Why the filter would not apply this record for a deployment whose
    /// `prefillCalibrationFingerprint` is `want`, or `None` when it would.
    pub fn unusable_reason(&self, want: &str) -> Option<String> {
        let pos = |v: Option<f64>| v.is_some_and(|v| v.is_finite() && v > 0.0);
        if self.schema_version != SCHEMA_VERSION {
            return Some(format!("schema_version is {}, want 1", self.schema_version));
        }
        if self.status != STATUS_OK {
            return Some(format!("status is {:?}, want \"OK\"", self.status));
        }
        if !pos(self.peak_prefill_tokens_per_second) {
            return Some("peak_prefill_tokens_per_second missing or not positive".into());
        }
        if self.chunk_tokens.is_none_or(|c| c <= 0) {
            return Some("chunk_tokens missing or not positive".into());
        }
        if self.valid_samples < MIN_SAMPLES {
            return Some(format!(
                "valid_samples is {}, want >= 10",
                self.valid_samples
            ));
        }
        if !pos(self.median_ttft_seconds) {
            return Some("median_ttft_seconds missing or not positive".into());
        }
        if self.fingerprint.is_empty() {
            return Some("no fingerprint".into());
        }
        if self.fingerprint != want {
            return Some(format!("fingerprint {:?}, want {want:?}", self.fingerprint));
        }
        None
    }

    /// The record as JSON text, one object, newline-terminated.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The peak of a calibration record, when `text` is one (a JSON object with
/// `schema_version` and `peak_prefill_tokens_per_second`) and its status is
/// `OK` with a positive finite peak.
pub fn estimate_from_record(text: &str) -> Option<PeakEstimate> {
    let t = text.trim_start();
    if !t.starts_with('{') {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(t).ok()?;
    v.get("schema_version")?;
    let r: CalibrationRecord = serde_json::from_value(v).ok()?;
    let peak = r
        .peak_prefill_tokens_per_second
        .filter(|p| p.is_finite() && *p > 0.0)?;
    if r.status != STATUS_OK || r.schema_version != SCHEMA_VERSION {
        return None;
    }
    Some(PeakEstimate {
        value: peak,
        source: PeakSource::Calibration,
        samples: r.valid_samples,
        spread_low: None,
        spread_high: None,
        interval: r.provenance.as_ref().and_then(|p| p.peak_interval),
        engines: 0,
        method: format!(
            "calibration record (fingerprint {:?}, {} valid samples)",
            r.fingerprint, r.valid_samples
        ),
        estimates: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(source: PeakSource, samples: u64) -> PeakEstimate {
        PeakEstimate {
            value: 12_000.0,
            source,
            samples,
            spread_low: None,
            spread_high: None,
            interval: Some([10_000.0, 14_000.0]),
            engines: 2,
            method: "test".into(),
            estimates: Vec::new(),
        }
    }

    fn inputs(peak: &PeakEstimate) -> PassiveInputs<'_> {
        PassiveInputs {
            peak,
            median_ttft_ms: Some(250.0),
            ttft_requests: 40,
            ttft_source: "EPP log",
            chunk_tokens: 2048,
            fingerprint: "sha256:d",
        }
    }

    #[test]
    fn few_samples_are_written_but_not_applicable() {
        let p = estimate(PeakSource::Prometheus, 9);
        let r = CalibrationRecord::from_passive(&inputs(&p)).unwrap();
        assert_eq!(r.status, "INSUFFICIENT_SAMPLES");
        assert!(r.unusable_reason("sha256:d").unwrap().contains("status"));
        assert!(estimate_from_record(&r.to_json()).is_none());
        let p = estimate(PeakSource::Prometheus, 10);
        let r = CalibrationRecord::from_passive(&inputs(&p)).unwrap();
        assert_eq!(r.unusable_reason("sha256:d"), None);
        assert!(
            r.unusable_reason("sha256:e")
                .unwrap()
                .contains("fingerprint")
        );
        let back = estimate_from_record(&r.to_json()).unwrap();
        assert_eq!(back.value, 12_000.0);
        assert_eq!(back.interval, Some([10_000.0, 14_000.0]));
    }

    #[test]
    fn no_evidence_no_ttft_and_bad_chunks_are_refused() {
        for s in [PeakSource::Config, PeakSource::User] {
            let p = estimate(s, 50);
            assert_eq!(
                CalibrationRecord::from_passive(&inputs(&p)),
                Err(RecordError::NoEvidence(s))
            );
        }
        let p = estimate(PeakSource::VllmStats, 50);
        let mut i = inputs(&p);
        i.median_ttft_ms = None;
        assert_eq!(
            CalibrationRecord::from_passive(&i),
            Err(RecordError::NoTtft)
        );
        let mut i = inputs(&p);
        i.chunk_tokens = 0;
        assert_eq!(
            CalibrationRecord::from_passive(&i),
            Err(RecordError::BadChunk)
        );
        let mut i = inputs(&p);
        i.fingerprint = " ";
        assert_eq!(
            CalibrationRecord::from_passive(&i),
            Err(RecordError::NoFingerprint)
        );
    }

    #[test]
    fn other_json_is_not_a_record() {
        assert!(estimate_from_record("{\"prompt_tokens\": 10, \"ttft_ms\": 5}").is_none());
        assert!(estimate_from_record("{\"schema_version\":1,\"status\":\"OK\",\"peak").is_none());
        assert!(estimate_from_record("PEAK_PREFILL_THROUGHPUT=5").is_none());
    }
}
