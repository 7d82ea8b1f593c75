//! Why an `EndpointPickerConfig` could not be used, in the EPP's words
//! where the EPP has some.

use std::fmt;

use gatecal_filter::ConfigError;

use super::{MAX_CONFIG_BYTES, MAX_DOCUMENTS, MAX_FLOW_ITEMS, MAX_NESTING, MAX_NODES, PLUGIN_TYPE};

/// Why an `EndpointPickerConfig` could not be used.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EppConfigError {
    /// Not YAML.
    Yaml(String),
    /// Nested deeper than [`MAX_NESTING`] levels (checked before the YAML
    /// is parsed, so a hostile file is refused at once).
    TooDeep,
    /// A text longer than [`MAX_CONFIG_BYTES`] (its length, bytes).
    TooLarge(usize),
    /// More than [`MAX_NODES`] nodes, aliases expanded (refused as the
    /// parse reaches the bound, so an alias bomb is refused at once).
    TooManyNodes,
    /// More than [`MAX_DOCUMENTS`] documents.
    TooManyDocuments,
    /// A flow collection of more than [`MAX_FLOW_ITEMS`] items (checked
    /// before the YAML is parsed).
    TooManyFlowItems,
    /// A string that looks like a config (it holds `plugins` on several
    /// lines) is not valid YAML, and the file holds no filter elsewhere.
    EmbeddedYaml {
        /// Where the string sits, e.g. `data["default-plugins.yaml"]`.
        path: String,
        /// The YAML error inside it (lines counted from the string's start).
        message: String,
    },
    /// A Helm chart template (`{{ … }}` actions), which is no YAML until
    /// rendered: the line of the first action.
    HelmTemplate(usize),
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
    /// A parameter the filter accepts but gatecal cannot compute with
    /// ([`gatecal_filter::outside_range`]): a peak below 1 tok/s, say.
    OutOfRange {
        /// The plugin instance name.
        plugin: String,
        /// The parameter's EPP name.
        parameter: &'static str,
        /// Its value.
        value: f64,
        /// The range, in words.
        range: String,
    },
    /// The file cannot be written back as asked.
    Emit(String),
    /// A prefix producer's block size parameters were refused.
    Producer {
        /// The plugin instance name.
        plugin: String,
        /// What is wrong, as the EPP would refuse it.
        message: String,
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
            EppConfigError::TooLarge(n) => write!(
                f,
                "{n} bytes, more than the {MAX_CONFIG_BYTES} bytes a config file may have (an EndpointPickerConfig is a few KiB): is this the EPP's config?"
            ),
            EppConfigError::TooManyNodes => write!(
                f,
                "not a usable EndpointPickerConfig YAML: more than {MAX_NODES} nodes once its aliases (*name) are expanded (an alias bomb?)"
            ),
            EppConfigError::TooManyDocuments => write!(
                f,
                "not a usable EndpointPickerConfig YAML: more than {MAX_DOCUMENTS} documents (---)"
            ),
            EppConfigError::TooManyFlowItems => write!(
                f,
                "not a usable EndpointPickerConfig YAML: a flow collection ([…] or {{…}}) of more than {MAX_FLOW_ITEMS} items"
            ),
            EppConfigError::EmbeddedYaml { path, message } => write!(
                f,
                "{path} holds a config as a string, but the string is not valid YAML: {message} (lines counted from the string's first line); no plugin of type {PLUGIN_TYPE} elsewhere in the file"
            ),
            EppConfigError::HelmTemplate(line) => write!(
                f,
                "line {line} holds a Helm template action ({{{{ … }}}}): this is a chart template, not YAML yet; render it first (helm template RELEASE CHART --show-only templates/FILE) or pass the ConfigMap (kubectl get configmap NAME -o yaml)"
            ),
            EppConfigError::NonFinite(path) => write!(
                f,
                "{path}: not a finite number (.nan and .inf are no values the EPP accepts)"
            ),
            EppConfigError::NoFilter => write!(
                f,
                "no plugin of type {PLUGIN_TYPE} in this file (read: an EndpointPickerConfig, a ConfigMap holding one under data, a kind: List of those, or Helm values holding one, e.g. under router.epp.pluginsCustomConfig)"
            ),
            EppConfigError::Config { plugin, error } => write!(f, "plugin {plugin}: {error}"),
            EppConfigError::OutOfRange {
                plugin,
                parameter,
                value,
                range,
            } => write!(
                f,
                "plugin {plugin}: {parameter} {value:?} is outside what gatecal computes with ({range})"
            ),
            EppConfigError::Emit(m) => write!(f, "cannot write the config back: {m}"),
            EppConfigError::Producer { plugin, message } => write!(f, "plugin {plugin}: {message}"),
        }
    }
}

impl std::error::Error for EppConfigError {}
