//! Reading the filter's parameters from the EPP's own `EndpointPickerConfig`.
//!
//! The file is the YAML the EPP loads (`--config-file`), or a Kubernetes
//! ConfigMap holding it under `data`. Every plugin entry of
//! `type: prefix-cache-affinity-filter` is decoded with the filter core's
//! strict decoder, so a bad entry fails here with the EPP's own message.
//! An entry without `name` is named after its type, as the EPP does.

use std::fmt;

use gatecal_filter::{Config, ConfigError};
use serde_json::Value;

/// The filter's plugin type.
pub const PLUGIN_TYPE: &str = "prefix-cache-affinity-filter";

/// Why an `EndpointPickerConfig` could not be used.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EppConfigError {
    /// Not YAML.
    Yaml(String),
    /// No `prefix-cache-affinity-filter` plugin entry.
    NoFilter,
    /// A filter entry's parameters were refused.
    Config {
        /// The plugin instance name.
        plugin: String,
        /// The filter core's error (the EPP's text).
        error: ConfigError,
    },
}

impl fmt::Display for EppConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EppConfigError::Yaml(m) => write!(f, "not a valid EndpointPickerConfig YAML: {m}"),
            EppConfigError::NoFilter => write!(
                f,
                "no plugin of type {PLUGIN_TYPE} in this EndpointPickerConfig"
            ),
            EppConfigError::Config { plugin, error } => write!(f, "plugin {plugin}: {error}"),
        }
    }
}

impl std::error::Error for EppConfigError {}

/// Every `prefix-cache-affinity-filter` instance of the file, as
/// `(instance name, config)`, in file order.
///
/// ```
/// let yaml = r#"
/// apiVersion: inference.networking.x-k8s.io/v1alpha1
/// kind: EndpointPickerConfig
/// plugins:
/// - type: prefix-cache-affinity-filter
///   parameters:
///     maxTTFTPenaltyMs: 5000
///     peakPrefillThroughput: 8000
/// "#;
/// let f = gatecal_analysis::epp_config::filters_from_yaml(yaml).unwrap();
/// assert_eq!(f[0].0, "prefix-cache-affinity-filter");
/// assert_eq!(f[0].1.max_ttft_penalty_ms, 5000.0);
/// ```
pub fn filters_from_yaml(text: &str) -> Result<Vec<(String, Config)>, EppConfigError> {
    Ok(filter_entries_from_yaml(text)?
        .into_iter()
        .map(|e| (e.name, e.config))
        .collect())
}

/// One `prefix-cache-affinity-filter` entry of an `EndpointPickerConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterEntry {
    /// The instance name.
    pub name: String,
    /// Its parameters, the filter's defaults where the entry omits them.
    pub config: Config,
    /// The parameter names the entry sets itself (the rest are defaults).
    pub keys: Vec<String>,
}

/// [`filters_from_yaml`], with the parameter names each entry sets.
pub fn filter_entries_from_yaml(text: &str) -> Result<Vec<FilterEntry>, EppConfigError> {
    let doc: Value =
        serde_norway::from_str(text).map_err(|e| EppConfigError::Yaml(e.to_string()))?;
    let mut out = Vec::new();
    collect(&doc, &mut out)?;
    if out.is_empty() {
        return Err(EppConfigError::NoFilter);
    }
    Ok(out)
}

fn collect(doc: &Value, out: &mut Vec<FilterEntry>) -> Result<(), EppConfigError> {
    if let Some(plugins) = doc.get("plugins").and_then(Value::as_array) {
        for p in plugins {
            if p.get("type").and_then(Value::as_str) != Some(PLUGIN_TYPE) {
                continue;
            }
            let name = p
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or(PLUGIN_TYPE)
                .to_string();
            let params = p.get("parameters").cloned().unwrap_or(Value::Null);
            let config = Config::from_value(&params).map_err(|error| EppConfigError::Config {
                plugin: name.clone(),
                error,
            })?;
            let keys = params
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            out.push(FilterEntry { name, config, keys });
        }
    }
    // A ConfigMap: the config is a YAML string under `data`.
    if let Some(data) = doc.get("data").and_then(Value::as_object) {
        for v in data.values() {
            if let Some(s) = v.as_str()
                && s.contains("plugins")
            {
                let inner: Value =
                    serde_norway::from_str(s).map_err(|e| EppConfigError::Yaml(e.to_string()))?;
                collect(&inner, out)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_with_two_instances() {
        let yaml = r#"
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- name: strict-affinity-filter
  type: prefix-cache-affinity-filter
  parameters: {affinityThreshold: 0.99, ttftSource: latencyPredictor, maxTTFTPenaltyMs: 5000}
- name: loose-affinity-filter
  type: prefix-cache-affinity-filter
  parameters: {affinityThreshold: 0.80, ttftSource: latencyPredictor, maxTTFTPenaltyMs: 5000}
"#;
        let f = filters_from_yaml(yaml).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].0, "strict-affinity-filter");
        assert_eq!(f[0].1.affinity_threshold, 0.99);
        assert_eq!(f[1].0, "loose-affinity-filter");
    }

    #[test]
    fn configmap_and_errors() {
        let cm = "kind: ConfigMap\ndata:\n  config.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters:\n        maxTTFTPenaltyMs: 1000\n";
        assert_eq!(
            filters_from_yaml(cm).unwrap()[0].1.max_ttft_penalty_ms,
            1000.0
        );
        assert_eq!(
            filters_from_yaml("plugins: []").unwrap_err(),
            EppConfigError::NoFilter
        );
        let bad = "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: -1}\n";
        let e = filters_from_yaml(bad).unwrap_err().to_string();
        assert_eq!(
            e,
            "plugin prefix-cache-affinity-filter: invalid config: maxTTFTPenaltyMs must be >= 0, got -1.000000"
        );
        assert!(matches!(
            filters_from_yaml(": : :"),
            Err(EppConfigError::Yaml(_))
        ));
    }
}
