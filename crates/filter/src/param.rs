//! The filter's parameters by name: the one place their EPP spellings,
//! gatecal's override flags and their defaults are written.

use serde_json::Value;

use crate::config::{Config, DEFAULT_CONFIG};

/// One parameter of the filter's plugin entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    /// `affinityThreshold`.
    AffinityThreshold,
    /// `explorationProbability`.
    ExplorationProbability,
    /// `maxTTFTPenaltyMs`, the bar.
    MaxTtftPenaltyMs,
    /// `ttftSource`.
    TtftSource,
    /// `peakPrefillThroughput`, the peak.
    PeakPrefillThroughput,
    /// `penaltyMode`.
    PenaltyMode,
    /// `maxInFlightRequestsDelta`.
    MaxInFlightRequestsDelta,
}

impl Param {
    /// Every parameter, in the order the EPP's docs list them.
    pub const ALL: [Param; 7] = [
        Param::AffinityThreshold,
        Param::ExplorationProbability,
        Param::MaxTtftPenaltyMs,
        Param::TtftSource,
        Param::PeakPrefillThroughput,
        Param::PenaltyMode,
        Param::MaxInFlightRequestsDelta,
    ];

    /// The EPP's spelling, the key in the plugin's `parameters`.
    ///
    /// ```
    /// use gatecal_filter::Param;
    /// assert_eq!(Param::MaxTtftPenaltyMs.name(), "maxTTFTPenaltyMs");
    /// assert_eq!(Param::from_name("peakPrefillThroughput"), Some(Param::PeakPrefillThroughput));
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Param::AffinityThreshold => "affinityThreshold",
            Param::ExplorationProbability => "explorationProbability",
            Param::MaxTtftPenaltyMs => "maxTTFTPenaltyMs",
            Param::TtftSource => "ttftSource",
            Param::PeakPrefillThroughput => "peakPrefillThroughput",
            Param::PenaltyMode => "penaltyMode",
            Param::MaxInFlightRequestsDelta => "maxInFlightRequestsDelta",
        }
    }

    /// gatecal's flag that overrides the config's value (both binaries;
    /// recommend's peak override is `--current-peak-prefill-throughput`),
    /// if there is one.
    pub const fn flag(self) -> Option<&'static str> {
        match self {
            Param::AffinityThreshold => Some("--affinity-threshold"),
            Param::ExplorationProbability => None,
            Param::MaxTtftPenaltyMs => Some("--max-ttft-penalty-ms"),
            Param::TtftSource => Some("--ttft-source"),
            Param::PeakPrefillThroughput => Some("--peak-prefill-throughput"),
            Param::PenaltyMode => Some("--penalty-mode"),
            Param::MaxInFlightRequestsDelta => Some("--max-in-flight-requests-delta"),
        }
    }

    /// The parameter an EPP key names.
    pub fn from_name(name: &str) -> Option<Param> {
        Param::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its value in `config`, as the EPP's JSON writes it.
    pub fn value_in(self, config: &Config) -> Value {
        match self {
            Param::AffinityThreshold => config.affinity_threshold.into(),
            Param::ExplorationProbability => config.exploration_probability.into(),
            Param::MaxTtftPenaltyMs => config.max_ttft_penalty_ms.into(),
            Param::TtftSource => config.ttft_source.as_str().into(),
            Param::PeakPrefillThroughput => config.peak_prefill_throughput.into(),
            Param::PenaltyMode => config.penalty_mode.as_str().into(),
            Param::MaxInFlightRequestsDelta => config.max_in_flight_requests_delta.into(),
        }
    }

    /// Its default ([`DEFAULT_CONFIG`]).
    pub fn default_value(self) -> Value {
        self.value_in(&DEFAULT_CONFIG)
    }
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are the keys the config's JSON uses, and every key of the
    /// JSON is a parameter.
    #[test]
    fn names_are_the_configs_keys() {
        let v = serde_json::to_value(DEFAULT_CONFIG).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), Param::ALL.len(), "{keys:?}");
        for p in Param::ALL {
            assert_eq!(v[p.name()], p.default_value(), "{p}");
            assert_eq!(Param::from_name(p.name()), Some(p));
        }
        assert_eq!(Param::from_name("maxTtftPenaltyMs"), None);
    }

    /// A config decoded from one parameter gives it back.
    #[test]
    fn value_in_reads_the_config() {
        let c = Config::from_json(r#"{"maxTTFTPenaltyMs": 5000, "penaltyMode": "matchedTokens"}"#)
            .unwrap();
        assert_eq!(Param::MaxTtftPenaltyMs.value_in(&c), 5000.0);
        assert_eq!(Param::PenaltyMode.value_in(&c), "matchedTokens");
        assert_eq!(Param::PeakPrefillThroughput.value_in(&c), 15928.0);
    }
}
