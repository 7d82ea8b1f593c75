//! The filter's parameters, with the EPP's own JSON names, defaults,
//! strict decoding and validation texts.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where the load gate reads each endpoint's TTFT from (`ttftSource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum TtftSource {
    /// `prefillThroughput` (default): `TTFT_ms = inFlightTokens / peakPrefillThroughput * 1000`.
    #[default]
    #[serde(rename = "prefillThroughput")]
    PrefillThroughput,
    /// `latencyPredictor`: the latency predictor's TTFT in milliseconds.
    #[serde(rename = "latencyPredictor")]
    LatencyPredictor,
}

impl TtftSource {
    /// The EPP's spelling of the value.
    pub fn as_str(self) -> &'static str {
        match self {
            TtftSource::PrefillThroughput => "prefillThroughput",
            TtftSource::LatencyPredictor => "latencyPredictor",
        }
    }
}

/// How the load gate sets its bar (`penaltyMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PenaltyMode {
    /// `static` (default): release iff `bestStickyTTFT - bestNonStickyTTFT > maxTTFTPenaltyMs`.
    #[default]
    #[serde(rename = "static")]
    Static,
    /// `matchedTokens`: release iff the best sticky endpoint's in-flight token
    /// excess over the best non-sticky endpoint exceeds the tokens the request
    /// has cached there (`MatchBlocks * BlockSizeTokens`), or the static bar
    /// (kept as a ceiling, 0 disables it) fires.
    #[serde(rename = "matchedTokens")]
    MatchedTokens,
}

impl PenaltyMode {
    /// The spelling used in the plugin parameters.
    pub fn as_str(self) -> &'static str {
        match self {
            PenaltyMode::Static => "static",
            PenaltyMode::MatchedTokens => "matchedTokens",
        }
    }
}

/// What the gate does when an endpoint carries no load signal.
///
/// This is not an EPP parameter: it selects which upstream build's semantics
/// to reproduce. It is never read from or written to the plugin parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MissingSignal {
    /// Newer upstream (default): endpoints without the attribute are skipped;
    /// if a whole side (sticky or non-sticky) has no signal the filter logs
    /// `TTFT load gate skipped, missing signal` and keeps every endpoint
    /// (outcome `missing_signal`).
    #[default]
    KeepAll,
    /// Releases v0.9.0 and v0.10.0: absent in-flight tokens count as 0 on the
    /// throughput path; an absent prediction counts as `f64::MAX` ms on the
    /// predictor path.
    AsZero,
}

/// The filter's parameters.
///
/// Field names in JSON are the EPP's (`affinityThreshold`, `maxTTFTPenaltyMs`,
/// ...). Decoding is strict, as the EPP's is since 2026-05-24: an unknown key
/// is an error. The producer-name and calibration keys are accepted and kept
/// only so that a real plugin entry decodes; they do not change decisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// Endpoints whose prefix score `MatchBlocks / TotalBlocks` is `>=` this
    /// are sticky. Default 0.80.
    pub affinity_threshold: f64,
    /// Probability of skipping the gate and keeping all endpoints. Default 0.
    pub exploration_probability: f64,
    /// The static bar in ms (static mode) or the absolute ceiling
    /// (matched-tokens mode). 0 means always stick in static mode and no
    /// ceiling in matched-tokens mode. Default 18000.
    #[serde(rename = "maxTTFTPenaltyMs")]
    pub max_ttft_penalty_ms: f64,
    /// Where per-endpoint TTFT comes from. Default `prefillThroughput`.
    #[serde(rename = "ttftSource")]
    pub ttft_source: TtftSource,
    /// Tokens per second used to turn in-flight tokens into TTFT. Default 15928.
    pub peak_prefill_throughput: f64,
    /// Static bar or matched-tokens break-even. Default `static`.
    pub penalty_mode: PenaltyMode,
    /// In-flight request gate threshold; 0 disables it. Default 0.
    pub max_in_flight_requests_delta: i64,
    /// Which upstream missing-signal semantics to reproduce (not an EPP key).
    #[serde(skip)]
    pub missing_signal: MissingSignal,
}

/// The defaults of the filter at upstream main (tags v0.9.0/v0.10.0 onward),
/// plus `penaltyMode: static`.
pub const DEFAULT_CONFIG: Config = Config {
    affinity_threshold: 0.80,
    exploration_probability: 0.0,
    max_ttft_penalty_ms: 18000.0,
    ttft_source: TtftSource::PrefillThroughput,
    peak_prefill_throughput: 15928.0,
    penalty_mode: PenaltyMode::Static,
    max_in_flight_requests_delta: 0,
    missing_signal: MissingSignal::KeepAll,
};

impl Default for Config {
    fn default() -> Self {
        DEFAULT_CONFIG
    }
}

/// Why a configuration was refused. `Display` gives the EPP's own text,
/// including its `failed to unmarshal config: ` / `invalid config: ` wrapper.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The parameters are not a JSON object of known keys with the right
    /// types (the EPP's strict decoder). Holds the decoder's message.
    Unmarshal(String),
    /// `affinityThreshold` outside `[0, 1]`.
    AffinityThreshold(f64),
    /// `explorationProbability` outside `[0, 1]`.
    ExplorationProbability(f64),
    /// `maxTTFTPenaltyMs < 0`.
    MaxTtftPenaltyMs(f64),
    /// `peakPrefillThroughput < 0`.
    PeakPrefillThroughputNegative(f64),
    /// `ttftSource` not one of the two known values.
    TtftSource(String),
    /// `peakPrefillThroughput == 0` while the throughput path needs it.
    PeakPrefillThroughputZero,
    /// `maxInFlightRequestsDelta < 0`.
    MaxInFlightRequestsDelta(i64),
    /// `maxInFlightRequestsDelta > 0` with `maxTTFTPenaltyMs == 0`.
    DeltaNeedsPenalty,
    /// `penaltyMode` not one of the two known values.
    PenaltyMode(String),
    /// `penaltyMode: matchedTokens` with `ttftSource: latencyPredictor`:
    /// milliseconds from a model and token counts are not commensurable.
    MatchedTokensNeedsThroughput,
}

/// Go's `%f`: six decimals.
fn go_f(v: f64) -> String {
    format!("{v:.6}")
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ConfigError::*;
        match self {
            Unmarshal(m) => write!(f, "failed to unmarshal config: {m}"),
            AffinityThreshold(v) => write!(
                f,
                "invalid config: affinityThreshold must be in [0, 1], got {}",
                go_f(*v)
            ),
            ExplorationProbability(v) => write!(
                f,
                "invalid config: explorationProbability must be in [0, 1], got {}",
                go_f(*v)
            ),
            MaxTtftPenaltyMs(v) => write!(
                f,
                "invalid config: maxTTFTPenaltyMs must be >= 0, got {}",
                go_f(*v)
            ),
            PeakPrefillThroughputNegative(v) => write!(
                f,
                "invalid config: peakPrefillThroughput must be >= 0, got {}",
                go_f(*v)
            ),
            TtftSource(s) => write!(
                f,
                "invalid config: ttftSource must be \"latencyPredictor\" or \"prefillThroughput\", got {s:?}"
            ),
            PeakPrefillThroughputZero => write!(
                f,
                "invalid config: peakPrefillThroughput must be > 0 when ttftSource is prefillThroughput"
            ),
            MaxInFlightRequestsDelta(v) => write!(
                f,
                "invalid config: maxInFlightRequestsDelta must be >= 0, got {v}"
            ),
            DeltaNeedsPenalty => write!(
                f,
                "invalid config: maxTTFTPenaltyMs must be > 0 when maxInFlightRequestsDelta is set"
            ),
            PenaltyMode(s) => write!(
                f,
                "invalid config: penaltyMode must be \"static\" or \"matchedTokens\", got {s:?}"
            ),
            MatchedTokensNeedsThroughput => write!(
                f,
                "invalid config: penaltyMode \"matchedTokens\" requires ttftSource \"prefillThroughput\", got \"latencyPredictor\""
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The wire shape: every key optional, unknown keys rejected, enums as
/// strings so that a bad value gets the EPP's validation text rather than a
/// decoder error.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    affinity_threshold: Option<f64>,
    exploration_probability: Option<f64>,
    #[serde(rename = "maxTTFTPenaltyMs")]
    max_ttft_penalty_ms: Option<f64>,
    #[serde(rename = "ttftSource")]
    ttft_source: Option<String>,
    peak_prefill_throughput: Option<f64>,
    penalty_mode: Option<String>,
    max_in_flight_requests_delta: Option<i64>,
    // Accepted so that real plugin entries decode; they select producers or
    // a calibration file and do not change the decision rule.
    #[allow(dead_code)]
    prefix_match_info_producer_name: Option<String>,
    #[allow(dead_code)]
    latency_prediction_info_producer_name: Option<String>,
    #[allow(dead_code)]
    in_flight_load_producer_name: Option<String>,
    #[allow(dead_code)]
    prefill_calibration_file: Option<String>,
    #[allow(dead_code)]
    prefill_calibration_fingerprint: Option<String>,
    #[allow(dead_code)]
    prefill_calibration_required: Option<bool>,
}

impl Config {
    /// Decodes the plugin's `parameters` JSON object over the defaults and
    /// validates the result. `null` or an empty object gives the defaults.
    ///
    /// ```
    /// use gatecal_filter::Config;
    /// let c = Config::from_json(r#"{"maxTTFTPenaltyMs": 5000}"#).unwrap();
    /// assert_eq!(c.max_ttft_penalty_ms, 5000.0);
    /// let e = Config::from_json(r#"{"maxTTFTPenaltyMS": 5000}"#).unwrap_err();
    /// assert!(e.to_string().starts_with("failed to unmarshal config: "));
    /// ```
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ConfigError::Unmarshal(e.to_string()))?;
        Config::from_value(&value)
    }

    /// As [`Config::from_json`], from an already parsed value (for example the
    /// `parameters` of an `EndpointPickerConfig` plugin entry).
    pub fn from_value(value: &serde_json::Value) -> Result<Config, ConfigError> {
        let raw: RawConfig = if value.is_null() {
            RawConfig::default()
        } else {
            RawConfig::deserialize(value).map_err(|e| ConfigError::Unmarshal(e.to_string()))?
        };
        let d = DEFAULT_CONFIG;
        let ttft_source = match raw.ttft_source.as_deref() {
            None => d.ttft_source,
            Some("prefillThroughput") => TtftSource::PrefillThroughput,
            Some("latencyPredictor") => TtftSource::LatencyPredictor,
            Some(other) => return Err(ConfigError::TtftSource(other.to_string())),
        };
        let penalty_mode = match raw.penalty_mode.as_deref() {
            None => d.penalty_mode,
            Some("static") => PenaltyMode::Static,
            Some("matchedTokens") => PenaltyMode::MatchedTokens,
            Some(other) => return Err(ConfigError::PenaltyMode(other.to_string())),
        };
        let config = Config {
            affinity_threshold: raw.affinity_threshold.unwrap_or(d.affinity_threshold),
            exploration_probability: raw
                .exploration_probability
                .unwrap_or(d.exploration_probability),
            max_ttft_penalty_ms: raw.max_ttft_penalty_ms.unwrap_or(d.max_ttft_penalty_ms),
            ttft_source,
            peak_prefill_throughput: raw
                .peak_prefill_throughput
                .unwrap_or(d.peak_prefill_throughput),
            penalty_mode,
            max_in_flight_requests_delta: raw
                .max_in_flight_requests_delta
                .unwrap_or(d.max_in_flight_requests_delta),
            missing_signal: d.missing_signal,
        };
        config.validate()?;
        Ok(config)
    }

    /// The EPP's validation rules (newest upstream), in its order, plus the
    /// two `penaltyMode` rules of the matched-tokens change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let c = self;
        // `!(0 <= x <= 1)` also refuses NaN, which the Go comparisons let through;
        // a NaN threshold cannot come from JSON, so only hand-built configs differ.
        if !(0.0..=1.0).contains(&c.affinity_threshold) {
            return Err(ConfigError::AffinityThreshold(c.affinity_threshold));
        }
        if !(0.0..=1.0).contains(&c.exploration_probability) {
            return Err(ConfigError::ExplorationProbability(
                c.exploration_probability,
            ));
        }
        if c.max_ttft_penalty_ms < 0.0 || c.max_ttft_penalty_ms.is_nan() {
            return Err(ConfigError::MaxTtftPenaltyMs(c.max_ttft_penalty_ms));
        }
        if c.max_in_flight_requests_delta < 0 {
            return Err(ConfigError::MaxInFlightRequestsDelta(
                c.max_in_flight_requests_delta,
            ));
        }
        if c.max_in_flight_requests_delta > 0 && c.max_ttft_penalty_ms == 0.0 {
            return Err(ConfigError::DeltaNeedsPenalty);
        }
        if c.peak_prefill_throughput < 0.0 || c.peak_prefill_throughput.is_nan() {
            return Err(ConfigError::PeakPrefillThroughputNegative(
                c.peak_prefill_throughput,
            ));
        }
        if c.penalty_mode == PenaltyMode::MatchedTokens
            && c.ttft_source == TtftSource::LatencyPredictor
        {
            return Err(ConfigError::MatchedTokensNeedsThroughput);
        }
        // The throughput path divides by the peak whenever the gate runs: in
        // static mode when the bar is > 0, in matched-tokens mode always
        // (the best endpoints are chosen by TTFT and the ceiling needs it).
        let gate_runs = c.max_ttft_penalty_ms > 0.0 || c.penalty_mode == PenaltyMode::MatchedTokens;
        if c.ttft_source == TtftSource::PrefillThroughput
            && gate_runs
            && c.peak_prefill_throughput == 0.0
        {
            return Err(ConfigError::PeakPrefillThroughputZero);
        }
        Ok(())
    }

    /// The plugin `parameters` object for this config, with every decision
    /// key written out (for ready-to-paste configs).
    pub fn to_parameters(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}
