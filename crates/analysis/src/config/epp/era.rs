//! Configs of the filter's older eras: the keys and defaults of the builds
//! before today's llm-d-router, so such a config is read with the values
//! its EPP ran rather than today's defaults.
//!
//! | era | how it is recognised | defaults |
//! |---|---|---|
//! | gateway-api-inference-extension (before the filter moved to llm-d-router, 2026-04-01) | `tau` or `epsilonExplore` in the parameters, or the entry sits in the `inferencepool` chart's `inferenceExtension.pluginsCustomConfig` | `maxTTFTPenaltyMs` 5000, `explorationProbability` 0.01, TTFT from the latency predictor; `tau` is read as `affinityThreshold`, `epsilonExplore` as `explorationProbability` |
//! | in-flight tokens gate (llm-d-router, 2026-05-20 … 06-01) | `maxTokensInFlightPenalty` in the parameters | as above; `maxTokensInFlightPenalty` is checked (an integer `>= 0`) and not replayed |
//!
//! Today's defaults (`maxTTFTPenaltyMs` 18000, `explorationProbability` 0,
//! `ttftSource: prefillThroughput`) date from 2026-06-11 … 06-15.

use gatecal_filter::{Config, ConfigError, TtftSource};
use serde::Serialize;
use serde_json::{Map, Value};

/// The era of a config older than today's filter, and what reading it
/// that way changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigEra {
    /// `gateway-api-inference-extension` or `in-flight-tokens-gate`.
    pub name: &'static str,
    /// What was applied, in words, for the report.
    pub note: String,
}

impl<'de> serde::Deserialize<'de> for ConfigEra {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            name: String,
            note: String,
        }
        let w = Wire::deserialize(d)?;
        let name = match w.name.as_str() {
            "gateway-api-inference-extension" => "gateway-api-inference-extension",
            "in-flight-tokens-gate" => "in-flight-tokens-gate",
            other => {
                return Err(serde::de::Error::custom(format!(
                    "unknown config era {other:?}"
                )));
            }
        };
        Ok(ConfigEra { name, note: w.note })
    }
}

/// The defaults of the filter before 2026-06-11: `(EPP name, value)`.
const OLD_DEFAULTS: [(&str, &str); 3] = [
    ("maxTTFTPenaltyMs", "5000 ms"),
    ("explorationProbability", "0.01"),
    ("ttftSource", "latencyPredictor"),
];

/// The parameters of an older era's entry made readable by today's
/// decoder: `params` rewritten (old keys renamed or taken out) and the era,
/// or `None` for a config of today's keys outside the old chart. `path` is
/// where the entry was found (`inferenceExtension.pluginsCustomConfig…`).
pub(crate) fn recognise(
    params: &mut Value,
    path: &str,
) -> Result<Option<(ConfigEra, Vec<&'static str>)>, ConfigError> {
    let gaie_chart = path.starts_with("inferenceExtension.");
    let Value::Object(m) = params else {
        return Ok(gaie_chart.then(|| {
            let d = old_defaults(&Map::new());
            (gaie(&d), d)
        }));
    };
    let mut renamed = Vec::new();
    for (old, new) in [
        ("tau", "affinityThreshold"),
        ("epsilonExplore", "explorationProbability"),
    ] {
        if let Some(v) = m.remove(old) {
            if m.contains_key(new) {
                return Err(ConfigError::Unmarshal(format!(
                    "json: both {old:?} and {new:?} are set; {old} is the older name of {new}"
                )));
            }
            m.insert(new.to_string(), v);
            renamed.push(format!("{old} read as {new}"));
        }
    }
    let tokens = match m.remove("maxTokensInFlightPenalty") {
        None => None,
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 => Some(n),
            Some(n) => {
                return Err(ConfigError::Unmarshal(format!(
                    "maxTokensInFlightPenalty must be >= 0, got {n}"
                )));
            }
            None => {
                return Err(ConfigError::Unmarshal(format!(
                    "json: cannot unmarshal {v} into Go struct field .maxTokensInFlightPenalty of type int64"
                )));
            }
        },
    };
    let defaults = old_defaults(m);
    let era = match tokens {
        Some(n) => ConfigEra {
            name: "in-flight-tokens-gate",
            note: format!(
                "maxTokensInFlightPenalty: a config of the filter's in-flight tokens gate (llm-d-router, 2026-05-20 to 06-01); {}; its tokens gate ({}) is not replayed, its releases are read from the log (in-flight tokens load gate broken)",
                applied(&defaults),
                if n == 0 {
                    "0, off".to_string()
                } else {
                    format!("{n} tokens")
                },
            ),
        },
        None if !renamed.is_empty() || gaie_chart => {
            let mut e = gaie(&defaults);
            if !renamed.is_empty() {
                e.note.push_str(&format!("; {}", renamed.join(", ")));
            }
            e
        }
        None => return Ok(None),
    };
    Ok(Some((era, defaults)))
}

/// The older defaults an entry does not set itself.
fn old_defaults(m: &Map<String, Value>) -> Vec<&'static str> {
    OLD_DEFAULTS
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !m.contains_key(*k))
        .collect()
}

fn applied(defaults: &[&str]) -> String {
    if defaults.is_empty() {
        return "the entry sets every parameter whose default changed since".into();
    }
    let list: Vec<String> = OLD_DEFAULTS
        .iter()
        .filter(|(k, _)| defaults.contains(k))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    format!(
        "that era's defaults apply where the entry sets nothing ({}), not today's (18000 ms, 0, prefillThroughput)",
        list.join(", ")
    )
}

fn gaie(defaults: &[&str]) -> ConfigEra {
    ConfigEra {
        name: "gateway-api-inference-extension",
        note: format!(
            "a config of the filter's gateway-api-inference-extension era (before 2026-04-01); {}",
            applied(defaults)
        ),
    }
}

/// `config` with the older defaults set for the parameters in `defaults`.
pub(crate) fn apply(config: &mut Config, defaults: &[&str]) {
    for k in defaults {
        match *k {
            "maxTTFTPenaltyMs" => config.max_ttft_penalty_ms = 5000.0,
            "explorationProbability" => config.exploration_probability = 0.01,
            "ttftSource" => config.ttft_source = TtftSource::LatencyPredictor,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(params: Value, path: &str) -> (Value, Option<ConfigEra>, Vec<&'static str>) {
        let mut p = params;
        let r = recognise(&mut p, path).unwrap();
        let (era, d) = match r {
            Some((e, d)) => (Some(e), d),
            None => (None, Vec::new()),
        };
        (p, era, d)
    }

    #[test]
    fn tokens_gate_era() {
        let (p, era, d) = read(
            serde_json::json!({"maxTokensInFlightPenalty": 40000, "maxTTFTPenaltyMs": 8000}),
            "plugins[0]",
        );
        assert_eq!(p, serde_json::json!({"maxTTFTPenaltyMs": 8000}));
        let era = era.unwrap();
        assert_eq!(era.name, "in-flight-tokens-gate");
        assert!(era.note.contains("40000 tokens"), "{}", era.note);
        assert!(
            era.note.contains("explorationProbability 0.01"),
            "{}",
            era.note
        );
        assert!(
            !era.note.contains("maxTTFTPenaltyMs 5000 ms"),
            "{}",
            era.note
        );
        assert_eq!(d, vec!["explorationProbability", "ttftSource"]);
        let mut c = Config::default();
        apply(&mut c, &d);
        assert_eq!(c.exploration_probability, 0.01);
        assert_eq!(c.ttft_source, TtftSource::LatencyPredictor);
        assert_eq!(c.max_ttft_penalty_ms, 18000.0);
    }

    #[test]
    fn gaie_era_by_keys_and_by_chart() {
        let (p, era, d) = read(serde_json::json!({"tau": 0.9}), "plugins[1]");
        assert_eq!(p, serde_json::json!({"affinityThreshold": 0.9}));
        assert_eq!(era.unwrap().name, "gateway-api-inference-extension");
        assert_eq!(d.len(), 3);
        let (_, era, _) = read(
            Value::Null,
            "inferenceExtension.pluginsCustomConfig[\"x.yaml\"].plugins[0]",
        );
        assert!(era.unwrap().note.contains("maxTTFTPenaltyMs 5000 ms"));
        let (_, era, _) = read(serde_json::json!({"maxTTFTPenaltyMs": 1}), "plugins[0]");
        assert_eq!(era, None);
    }

    #[test]
    fn bad_old_keys_get_the_epps_words() {
        let mut p = serde_json::json!({"maxTokensInFlightPenalty": -1});
        let e = recognise(&mut p, "").unwrap_err().to_string();
        assert!(
            e.contains("maxTokensInFlightPenalty must be >= 0, got -1"),
            "{e}"
        );
        let mut p = serde_json::json!({"tau": 0.5, "affinityThreshold": 0.5});
        assert!(recognise(&mut p, "").is_err());
    }
}
