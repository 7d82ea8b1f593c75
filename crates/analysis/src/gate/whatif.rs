//! Replaying decisions under other filter configs.
//!
//! Every replay goes through the filter core ([`gatecal_filter::decide_verdict`],
//! [`gatecal_filter::decide`]'s outcome and gate): a what-if is the
//! deployment's config with `maxTTFTPenaltyMs`, `peakPrefillThroughput` or
//! `penaltyMode` changed, applied to each decision's (exact or reconstructed)
//! candidates. Decisions whose outcome does not depend on those parameters
//! (no sticky endpoint, exploration, every endpoint sticky) keep their
//! outcome; decisions whose gate input is unknown are counted as `unknown`
//! and are neither released nor pinned in the shares.

use gatecal_filter::{Config, Outcome, PenaltyMode, decide_verdict};
use serde::Serialize;

use crate::gate::sample::{GateSample, Replay};

/// One alternative config, relative to a deployment's own.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WhatIfSpec {
    /// Penalty mode.
    pub mode: PenaltyMode,
    /// `maxTTFTPenaltyMs`; `None` keeps the deployment's.
    pub max_ttft_penalty_ms: Option<f64>,
    /// `peakPrefillThroughput`; `None` keeps the deployment's.
    pub peak_prefill_throughput: Option<f64>,
}

impl WhatIfSpec {
    /// The deployment's config with this what-if applied.
    pub fn apply(&self, base: &Config) -> Config {
        Config {
            penalty_mode: self.mode,
            max_ttft_penalty_ms: self.max_ttft_penalty_ms.unwrap_or(base.max_ttft_penalty_ms),
            peak_prefill_throughput: self
                .peak_prefill_throughput
                .unwrap_or(base.peak_prefill_throughput),
            ..base.clone()
        }
    }

    /// The default list: static at 1, 2, 5, 10, 18 and 30 s, then
    /// matched tokens with the deployment's ceiling and with none.
    pub fn defaults() -> Vec<WhatIfSpec> {
        let mut v: Vec<WhatIfSpec> = [1000.0, 2000.0, 5000.0, 10000.0, 18000.0, 30000.0]
            .into_iter()
            .map(|m| WhatIfSpec {
                mode: PenaltyMode::Static,
                max_ttft_penalty_ms: Some(m),
                peak_prefill_throughput: None,
            })
            .collect();
        v.extend(matched_tokens_specs());
        v
    }
}

/// Matched tokens with the deployment's ceiling, and with no ceiling.
pub fn matched_tokens_specs() -> [WhatIfSpec; 2] {
    [
        WhatIfSpec {
            mode: PenaltyMode::MatchedTokens,
            max_ttft_penalty_ms: None,
            peak_prefill_throughput: None,
        },
        WhatIfSpec {
            mode: PenaltyMode::MatchedTokens,
            max_ttft_penalty_ms: Some(0.0),
            peak_prefill_throughput: None,
        },
    ]
}

/// What one sample does under one config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Replayed {
    /// The outcome, or `None` when the gate input is unknown.
    pub outcome: Option<Outcome>,
    /// The gate input in ms under that config's peak, when evaluated.
    pub gate_input_ms: Option<f64>,
    /// Matched-tokens mode only: the break-even test had no match info.
    pub no_match_info: bool,
}

/// Replays one sample under `config`.
pub fn replay(sample: &GateSample, config: &Config) -> Replayed {
    match &sample.replay {
        Replay::Fixed(o) => Replayed {
            outcome: Some(*o),
            gate_input_ms: None,
            no_match_info: false,
        },
        Replay::Unknown => Replayed {
            outcome: None,
            gate_input_ms: None,
            no_match_info: false,
        },
        Replay::Candidates(c) => {
            let d = decide_verdict(config, c, 1.0);
            Replayed {
                outcome: Some(d.outcome),
                gate_input_ms: d.gate.map(|g| g.gate_input_ms),
                no_match_info: d.gate.and_then(|g| g.matched_tokens) == Some(0),
            }
        }
    }
}

/// The `[min, bar]` range in which a pinned decision counts as pinned-worse
/// under `config`: the static bar, or the ceiling in matched-tokens mode
/// (unbounded when the ceiling is 0).
pub fn pinned_worse_bar(config: &Config) -> f64 {
    // 0 means "always stick" (static) or "no ceiling" (matched tokens):
    // either way nothing bounds the pin from above.
    if config.max_ttft_penalty_ms == 0.0 {
        f64::INFINITY
    } else {
        config.max_ttft_penalty_ms
    }
}

/// A config to compare side by side with the one in force: a whole config
/// file (`--candidate-config`) or parameters set over the deployment's own
/// (`--what-if 'peakPrefillThroughput=…,maxTTFTPenaltyMs=…'`).
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateConfig {
    /// How the row is labelled (`file:PATH` or the `--what-if` text).
    pub label: String,
    /// The config.
    pub source: CandidateSource,
}

/// Where a candidate's parameters come from.
#[derive(Clone, Debug, PartialEq)]
pub enum CandidateSource {
    /// The filter instances of a config file, `(name, config)`.
    File(Vec<(String, Config)>),
    /// Parameters (EPP names) set over the deployment's config.
    Params(serde_json::Map<String, serde_json::Value>),
}

impl CandidateConfig {
    /// The config this candidate gives a deployment whose config is `base`
    /// (of filter instance `instance`): the file's instance of that name, else
    /// its first; or `base` with the parameters set. The EPP's validation
    /// applies.
    pub fn resolve(
        &self,
        base: &Config,
        instance: Option<&str>,
    ) -> Result<Config, gatecal_filter::ConfigError> {
        match &self.source {
            CandidateSource::File(list) => {
                let c = instance
                    .and_then(|n| list.iter().find(|(name, _)| name == n))
                    .or(list.first())
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default();
                Ok(Config {
                    missing_signal: base.missing_signal,
                    ..c
                })
            }
            CandidateSource::Params(over) => {
                let mut params = match base.to_parameters() {
                    serde_json::Value::Object(m) => m,
                    _ => serde_json::Map::new(),
                };
                params.extend(over.clone());
                let c = Config::from_value(&serde_json::Value::Object(params))?;
                Ok(Config {
                    missing_signal: base.missing_signal,
                    ..c
                })
            }
        }
    }
}
