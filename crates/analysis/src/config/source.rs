//! A filter config with where each of its parameters came from
//! ([`SourcedConfig`]), and which config applies to which deployment and
//! filter instance ([`ConfigSet`]).

use std::collections::{BTreeMap, HashMap};

use gatecal_filter::Config;
use serde::Serialize;

use crate::input::DecisionInput;

/// Where one parameter of the config in force came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamSource {
    /// The EPP's own lines: `maxPenalty` of `TTFT load gate broken`,
    /// `affinityThreshold` of the filter lines, `prefillThroughput` (P2251).
    Log,
    /// An `EndpointPickerConfig` given with `--config`.
    File,
    /// A flag (`--max-ttft-penalty-ms`, ...).
    Flag,
    /// The filter's default.
    Default,
}

impl ParamSource {
    /// Its name in reports and records.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamSource::Log => "log",
            ParamSource::File => "file",
            ParamSource::Flag => "flag",
            ParamSource::Default => "default",
        }
    }

    /// The source of that name (`default` for any other).
    pub fn parse(s: &str) -> ParamSource {
        match s {
            "log" => ParamSource::Log,
            "file" => ParamSource::File,
            "flag" => ParamSource::Flag,
            _ => ParamSource::Default,
        }
    }
}

/// A parameter whose value in the log differs from the one a file or flag
/// gave.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ConfigDisagreement {
    /// EPP name (`maxTTFTPenaltyMs`, `peakPrefillThroughput`, `affinityThreshold`).
    pub parameter: String,
    /// The value the log shows.
    pub log: f64,
    /// The value the file or flag gave.
    pub given: f64,
    /// `file` or `flag`.
    pub given_source: ParamSource,
    /// The source whose value was used: `log` (over a file) or `flag` (a
    /// flag is a what-if the user asked for).
    pub used: ParamSource,
    /// The filter instance whose config disagrees, when it is not the one
    /// whose config the report shows (a deployment with several instances
    /// of the filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// A filter config and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SourcedConfig {
    /// `default`, `flags`, or `file:PATH` (with `#instance` when the file
    /// has several filter instances), with `+log` when the log supplied
    /// parameters.
    pub source: String,
    /// The parameters, EPP names.
    #[serde(deserialize_with = "config_wire::deserialize")]
    pub parameters: Config,
    /// Per parameter (EPP names), where its value came from.
    pub parameter_sources: BTreeMap<String, ParamSource>,
    /// Parameters whose logged value differs from a file's or flag's.
    pub log_disagreements: Vec<ConfigDisagreement>,
    /// The filter's older era a config file's entry is of, whose defaults
    /// it was read with (`config.era`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub era: Option<crate::ConfigEra>,
}

impl SourcedConfig {
    /// A config whose every parameter comes from `param_source`.
    pub fn new(source: impl Into<String>, parameters: Config, param_source: ParamSource) -> Self {
        let parameter_sources = match parameters.to_parameters() {
            serde_json::Value::Object(m) => m.keys().map(|k| (k.clone(), param_source)).collect(),
            _ => BTreeMap::new(),
        };
        SourcedConfig {
            source: source.into(),
            parameters,
            parameter_sources,
            log_disagreements: Vec::new(),
            era: None,
        }
    }

    /// Where a parameter came from (`default` when not recorded).
    pub fn source_of(&self, parameter: &str) -> ParamSource {
        self.parameter_sources
            .get(parameter)
            .copied()
            .unwrap_or(ParamSource::Default)
    }
}

/// The filter's defaults, for a deployment no config names.
static DEFAULT_SOURCED: std::sync::LazyLock<SourcedConfig> = std::sync::LazyLock::new(|| {
    SourcedConfig::new("default", Config::default(), ParamSource::Default)
});

/// Which config applies to which deployment and filter instance.
#[derive(Clone, Debug)]
pub struct ConfigSet {
    /// For every deployment not named below.
    pub default: Vec<(String, SourcedConfig)>,
    /// Per deployment: filter instances and their configs (first = fallback).
    pub per_deployment: HashMap<String, Vec<(String, SourcedConfig)>>,
}

impl Default for ConfigSet {
    fn default() -> Self {
        ConfigSet {
            default: vec![(String::new(), DEFAULT_SOURCED.clone())],
            per_deployment: HashMap::new(),
        }
    }
}

impl ConfigSet {
    /// The config of a decision: [`ConfigSet::lookup`], unless that is the
    /// filter's defaults (no `--config` or flag names the deployment) and the
    /// decision is a version-2 record carrying its config: then the
    /// record's, with the source it was written with.
    pub fn for_decision(&self, d: &DecisionInput) -> std::borrow::Cow<'_, SourcedConfig> {
        let looked = self.lookup(&d.deployment, d.filter.as_deref());
        match d.recorded.as_ref().and_then(|r| r.config.as_ref()) {
            Some((source, parameters)) if looked.source == "default" => {
                let mut sc =
                    SourcedConfig::new(source.clone(), parameters.clone(), ParamSource::Default);
                if let Some(c) = d.recorded.as_ref().and_then(|r| r.config_record.as_ref()) {
                    for (k, v) in &c.parameter_sources {
                        sc.parameter_sources
                            .insert(k.clone(), ParamSource::parse(v));
                    }
                    sc.log_disagreements = c
                        .log_disagreements
                        .iter()
                        .filter_map(|v| serde_json::from_value(v.clone()).ok())
                        .collect();
                }
                std::borrow::Cow::Owned(sc)
            }
            _ => std::borrow::Cow::Borrowed(looked),
        }
    }

    /// The config of a deployment's filter instance: the instance of that
    /// name if the file has one, else the first (the filter's defaults when
    /// the set is empty).
    pub fn lookup(&self, deployment: &str, filter: Option<&str>) -> &SourcedConfig {
        let list = self
            .per_deployment
            .get(deployment)
            .filter(|l| !l.is_empty())
            .unwrap_or(&self.default);
        if let Some(f) = filter
            && let Some((_, c)) = list.iter().find(|(n, _)| n == f)
        {
            return c;
        }
        list.first().map_or(&DEFAULT_SOURCED, |(_, c)| c)
    }
}

/// A config set of `maxTTFTPenaltyMs` given by flag (`--max-ttft-penalty-ms
/// bar`), every other parameter the filter's default.
#[cfg(test)]
pub(crate) fn flag_bar(bar: f64) -> ConfigSet {
    let mut base = SourcedConfig::new(
        "flags",
        gatecal_filter::Config {
            max_ttft_penalty_ms: bar,
            ..gatecal_filter::Config::default()
        },
        ParamSource::Default,
    );
    base.parameter_sources.insert(
        gatecal_filter::Param::MaxTtftPenaltyMs.name().into(),
        ParamSource::Flag,
    );
    ConfigSet {
        default: vec![(String::new(), base)],
        per_deployment: HashMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_config_set_falls_back_to_the_defaults() {
        let set = ConfigSet {
            default: Vec::new(),
            per_deployment: HashMap::new(),
        };
        assert_eq!(set.lookup("x", Some("y")).parameters, Config::default());
    }
}

/// A [`Config`] read back from its serialized form (a partial report):
/// every key as written, without the EPP's validation (the values were
/// in force when written).
pub(crate) mod config_wire {
    use gatecal_filter::{Config, PenaltyMode, TtftSource};
    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Wire {
        affinity_threshold: f64,
        exploration_probability: f64,
        #[serde(rename = "maxTTFTPenaltyMs")]
        max_ttft_penalty_ms: f64,
        #[serde(rename = "ttftSource")]
        ttft_source: TtftSource,
        peak_prefill_throughput: f64,
        penalty_mode: PenaltyMode,
        max_in_flight_requests_delta: i64,
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Config, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(Config {
            affinity_threshold: w.affinity_threshold,
            exploration_probability: w.exploration_probability,
            max_ttft_penalty_ms: w.max_ttft_penalty_ms,
            ttft_source: w.ttft_source,
            peak_prefill_throughput: w.peak_prefill_throughput,
            penalty_mode: w.penalty_mode,
            max_in_flight_requests_delta: w.max_in_flight_requests_delta,
            ..Config::default()
        })
    }
}
