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
    /// Nested deeper than [`MAX_NESTING`] levels (checked before the YAML
    /// is parsed, so a hostile file is refused at once).
    TooDeep,
    /// A number the EPP's JSON decoder cannot hold (`.nan`, `.inf`), at the
    /// path given (`plugins[0].parameters.maxTTFTPenaltyMs`).
    NonFinite(String),
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
            EppConfigError::TooDeep => write!(
                f,
                "not a valid EndpointPickerConfig YAML: nested deeper than {MAX_NESTING} levels"
            ),
            EppConfigError::NonFinite(path) => write!(
                f,
                "{path}: not a finite number (.nan and .inf are no values the EPP accepts)"
            ),
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
    let doc = yaml_value(text)?;
    let mut out = Vec::new();
    collect(&doc, &mut out)?;
    if out.is_empty() {
        return Err(EppConfigError::NoFilter);
    }
    Ok(out)
}

/// Deepest nesting of a config file: flow collections (`[`, `{`) open at
/// once, or the indentation and block-sequence dashes that start a line.
/// Real files nest about 6 levels.
pub const MAX_NESTING: usize = 64;

/// `text` as a JSON value, refusing deep nesting before parsing and
/// non-finite numbers (which JSON cannot hold) after.
fn yaml_value(text: &str) -> Result<Value, EppConfigError> {
    check_nesting(text)?;
    let doc: serde_norway::Value =
        serde_norway::from_str(text).map_err(|e| EppConfigError::Yaml(e.to_string()))?;
    check_finite(&doc, &mut String::new())?;
    serde_json::to_value(&doc).map_err(|e| EppConfigError::Yaml(e.to_string()))
}

/// A linear scan for nesting deeper than [`MAX_NESTING`]: flow brackets
/// outside quotes and comments, and each line's indentation (two columns a
/// level) plus its leading `- ` dashes.
fn check_nesting(text: &str) -> Result<(), EppConfigError> {
    let mut flow = 0usize;
    for line in text.lines() {
        let lead = line
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'-' | b'\t'))
            .filter(|&b| b == b'-')
            .count()
            + line.bytes().take_while(|&b| b == b' ').count() / 2;
        if lead > MAX_NESTING {
            return Err(EppConfigError::TooDeep);
        }
        let mut quote = None;
        let mut prev = b' ';
        for b in line.bytes() {
            match (quote, b) {
                (Some(q), _) if b == q => quote = None,
                (Some(_), _) => {}
                (None, b'"' | b'\'') => quote = Some(b),
                (None, b'#') if prev == b' ' || prev == b'\t' => break,
                (None, b'[' | b'{') => {
                    flow += 1;
                    if flow > MAX_NESTING {
                        return Err(EppConfigError::TooDeep);
                    }
                }
                (None, b']' | b'}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            prev = b;
        }
    }
    Ok(())
}

/// Refuses a non-finite number anywhere in `v`, naming its path.
fn check_finite(v: &serde_norway::Value, path: &mut String) -> Result<(), EppConfigError> {
    use serde_norway::Value as Y;
    let len = path.len();
    match v {
        Y::Number(n) if n.as_f64().is_some_and(|x| !x.is_finite()) => {
            return Err(EppConfigError::NonFinite(if path.is_empty() {
                "(document)".into()
            } else {
                path.clone()
            }));
        }
        Y::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                check_finite(item, path)?;
                path.truncate(len);
            }
        }
        Y::Mapping(m) => {
            for (k, item) in m {
                if !path.is_empty() {
                    path.push('.');
                }
                match k.as_str() {
                    Some(k) => path.push_str(k),
                    None => path.push('?'),
                }
                check_finite(item, path)?;
                path.truncate(len);
            }
        }
        Y::Tagged(t) => check_finite(&t.value, path)?,
        _ => {}
    }
    Ok(())
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
                let inner = yaml_value(s)?;
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

    /// `.nan` and `.inf` are refused, naming the parameter, in a file and
    /// in a ConfigMap; they used to become `null`, that is the default.
    #[test]
    fn non_finite_numbers_are_errors_naming_the_parameter() {
        for v in [".nan", ".NaN", ".inf", "-.inf", "+.Inf"] {
            let y = format!(
                "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    affinityThreshold: 0.5\n    maxTTFTPenaltyMs: {v}\n"
            );
            assert_eq!(
                filters_from_yaml(&y).unwrap_err().to_string(),
                "plugins[0].parameters.maxTTFTPenaltyMs: not a finite number (.nan and .inf are no values the EPP accepts)",
                "{v}"
            );
            let cm = format!(
                "kind: ConfigMap\ndata:\n  c.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters: {{peakPrefillThroughput: {v}}}\n"
            );
            assert_eq!(
                filters_from_yaml(&cm).unwrap_err(),
                EppConfigError::NonFinite("plugins[0].parameters.peakPrefillThroughput".into()),
                "{v}"
            );
        }
    }

    /// Deep nesting is refused by a linear scan before parsing: 100,000
    /// levels in flow style or of dashes, 100 indented levels, and one
    /// level past the limit; the
    /// limit itself and brackets inside quotes and comments pass the scan.
    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let flow = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let braces = "{a: ".repeat(100_000);
        let dashes = format!("{}x\n", "- ".repeat(100_000));
        let mut block = String::new();
        for i in 0..100 {
            block.push_str(&" ".repeat(2 * i));
            block.push_str("a:\n");
        }
        let over = format!("x: {}{}", "[".repeat(65), "]".repeat(65));
        for y in [&flow, &braces, &dashes, &block, &over] {
            assert_eq!(check_nesting(y), Err(EppConfigError::TooDeep));
            assert_eq!(filters_from_yaml(y), Err(EppConfigError::TooDeep));
        }
        let at_limit = format!("x: {}{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(check_nesting(&at_limit), Ok(()));
        let quoted = format!(
            "x: \"{}\" # {}\ny: '{}'",
            "[".repeat(100),
            "{".repeat(100),
            "[".repeat(100)
        );
        assert_eq!(check_nesting(&quoted), Ok(()));
    }
}
