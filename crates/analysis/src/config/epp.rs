//! Reading the filter's parameters from the EPP's own `EndpointPickerConfig`,
//! and writing them back.
//!
//! # Shapes read
//!
//! * a raw `EndpointPickerConfig` (the file the EPP loads with
//!   `--config-file`): any mapping with a `plugins` sequence;
//! * a Kubernetes ConfigMap holding one as a string under a `data` key
//!   (`data: {default-plugins.yaml: |…}`);
//! * a `kind: List` of such objects (`kubectl get cm -o yaml` of several);
//! * a Helm values file holding one as a string: the llm-d-router charts'
//!   `router.epp.pluginsCustomConfig.<file>` and the inference-extension
//!   `inferencepool` chart's `inferenceExtension.pluginsCustomConfig.<file>`.
//!
//! The search is generic: every mapping with a `plugins` sequence is a config,
//! and every string value that parses as one is searched in turn, wherever it
//! sits. [`FoundFilter::path`] names where each filter instance was found
//! (`router.epp.pluginsCustomConfig["custom-plugins.yaml"].plugins[3]`).
//!
//! Every plugin entry of `type: prefix-cache-affinity-filter` is decoded with
//! the filter core's strict decoder, so a bad entry fails here with the EPP's
//! own message. An entry without `name` is named after its type, as the EPP
//! does.
//!
//! # Writing back ([`crate::emit`])
//!
//! The file is edited as text: only the scalars of the changed parameters are
//! replaced, and a parameter the entry does not have yet is inserted on a new
//! line after the entry's last parameter (or, in a flow mapping `{…}`, before
//! its `}`). Every other byte (comments, key order, quoting, other plugins,
//! producers, scheduling profiles) is kept. A config held in a literal block
//! scalar (`|`, the ConfigMap and Helm shapes) is edited in place the same way,
//! each inserted line indented like the block. A config held in a quoted or
//! folded string, or reached through a YAML alias, cannot be edited in place
//! and is refused with a message saying so. The result is parsed again and
//! must give exactly the parameters asked for, else nothing is written.

use std::fmt;

use gatecal_filter::{Config, ConfigError};
use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

pub(crate) mod producers;
pub(crate) mod writer;

/// The filter's plugin type.
pub const PLUGIN_TYPE: &str = "prefix-cache-affinity-filter";

/// Deepest nesting of a config file: flow collections (`[`, `{`) open at
/// once, or the indentation and block-sequence dashes that start a line.
/// Real files nest about 6 levels.
pub const MAX_NESTING: usize = 64;

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
            EppConfigError::NonFinite(path) => write!(
                f,
                "{path}: not a finite number (.nan and .inf are no values the EPP accepts)"
            ),
            EppConfigError::NoFilter => write!(
                f,
                "no plugin of type {PLUGIN_TYPE} in this file (read: an EndpointPickerConfig, a ConfigMap holding one under data, a kind: List of those, or Helm values holding one, e.g. under router.epp.pluginsCustomConfig)"
            ),
            EppConfigError::Config { plugin, error } => write!(f, "plugin {plugin}: {error}"),
            EppConfigError::Emit(m) => write!(f, "cannot write the config back: {m}"),
            EppConfigError::Producer { plugin, message } => write!(f, "plugin {plugin}: {message}"),
        }
    }
}

impl std::error::Error for EppConfigError {}

/// A YAML node with its place in the text it was parsed from.
#[derive(Clone, Debug)]
enum Node {
    Scalar {
        value: String,
        style: ScalarStyle,
        /// Byte range of the scalar as written (quotes included).
        start: usize,
        end: usize,
    },
    Seq(Vec<Node>),
    Map {
        entries: Vec<(Node, Node)>,
        /// A flow mapping `{…}`: byte offset of its `}`.
        flow_end: Option<usize>,
        /// Byte offset of the mapping's start.
        start: usize,
    },
    /// Reached through an alias (not editable in place).
    Alias(Box<Node>),
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map { entries, .. } => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            Node::Alias(n) => n.get(key),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar { value, .. } => Some(value),
            Node::Alias(n) => n.as_str(),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { value, style: ScalarStyle::Plain, .. } if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The end of the last scalar in this node, bytes.
    fn last_end(&self) -> Option<usize> {
        match self {
            Node::Scalar { end, .. } => Some(*end),
            Node::Seq(v) => v.iter().rev().find_map(Node::last_end),
            Node::Map { entries, .. } => entries
                .iter()
                .rev()
                .find_map(|(k, v)| v.last_end().or_else(|| k.last_end())),
            Node::Alias(_) => None,
        }
    }

    /// YAML 1.2 core schema, as the EPP's YAML-to-JSON step reads it.
    fn to_value(&self) -> Value {
        match self {
            Node::Scalar { value, style, .. } => {
                if *style != ScalarStyle::Plain {
                    return Value::String(value.clone());
                }
                plain_scalar(value)
            }
            Node::Seq(v) => Value::Array(v.iter().map(Node::to_value).collect()),
            Node::Map { entries, .. } => {
                let mut m = Map::new();
                for (k, v) in entries {
                    let key = match k.to_value() {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    m.insert(key, v.to_value());
                }
                Value::Object(m)
            }
            Node::Alias(n) => n.to_value(),
        }
    }
}

/// YAML's non-finite floats, which JSON cannot hold: kept as a marker
/// string that [`check_finite`] refuses.
const NON_FINITE: &str = "\u{0}non-finite";

/// Refuses a non-finite number anywhere in `v`, naming its path.
fn check_finite(v: &Value, path: &mut String) -> Result<(), EppConfigError> {
    let len = path.len();
    match v {
        Value::String(s) if s == NON_FINITE => {
            return Err(EppConfigError::NonFinite(path.clone()));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                check_finite(item, path)?;
                path.truncate(len);
            }
        }
        Value::Object(m) => {
            for (k, item) in m {
                path.push('.');
                path.push_str(k);
                check_finite(item, path)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

fn plain_scalar(s: &str) -> Value {
    if matches!(
        s.trim_start_matches(['+', '-']),
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF"
    ) {
        return Value::String(NON_FINITE.to_string());
    }
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let num = s.strip_prefix('+').unwrap_or(s);
    let looks_numeric = num
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'e' | b'E' | b'+'))
        && num.bytes().any(|b| b.is_ascii_digit());
    if looks_numeric {
        if let Ok(i) = num.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Ok(u) = num.parse::<u64>() {
            return Value::Number(u.into());
        }
        if let Ok(f) = num.parse::<f64>() {
            return match Number::from_f64(f) {
                Some(n) => Value::Number(n),
                None => Value::String(NON_FINITE.to_string()),
            };
        }
    }
    if let Some(h) = num.strip_prefix("0x")
        && let Ok(i) = i64::from_str_radix(h, 16)
    {
        return Value::Number(i.into());
    }
    Value::String(s.to_string())
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

/// Parses one YAML text into its documents, with byte offsets.
fn parse_nodes(text: &str) -> Result<Vec<Node>, EppConfigError> {
    check_nesting(text)?;
    // saphyr's markers count characters; map them to bytes.
    let bytes_at: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    let b = |ci: usize| bytes_at.get(ci).copied().unwrap_or(text.len());
    enum Open {
        Seq(Vec<Node>, usize),
        Map(Vec<(Node, Node)>, Option<Node>, usize, usize),
    }
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: Vec<(usize, Node)> = Vec::new();
    let mut parser = Parser::new_from_str(text);
    for ev in &mut parser {
        let (ev, span) = ev.map_err(|e| EppConfigError::Yaml(e.to_string()))?;
        let node = match ev {
            Event::Scalar(v, style, anchor, _) => Some((
                Node::Scalar {
                    value: v.into_owned(),
                    style,
                    start: b(span.start.index()),
                    end: b(span.end.index()),
                },
                anchor,
            )),
            Event::Alias(id) => {
                let n = anchors
                    .iter()
                    .rev()
                    .find(|(a, _)| *a == id)
                    .map(|(_, n)| n.clone())
                    .ok_or_else(|| EppConfigError::Yaml(format!("unknown alias {id}")))?;
                Some((Node::Alias(Box::new(n)), 0))
            }
            Event::SequenceStart(anchor, _) => {
                if stack.len() >= MAX_NESTING {
                    return Err(EppConfigError::TooDeep);
                }
                stack.push(Open::Seq(Vec::new(), anchor));
                None
            }
            Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_NESTING {
                    return Err(EppConfigError::TooDeep);
                }
                stack.push(Open::Map(Vec::new(), None, anchor, b(span.start.index())));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(v, a)) => Some((Node::Seq(v), a)),
                _ => return Err(EppConfigError::Yaml("unbalanced sequence".into())),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(entries, _, a, start)) => {
                    let s = b(span.start.index());
                    let flow = text.as_bytes().get(s) == Some(&b'}');
                    Some((
                        Node::Map {
                            entries,
                            flow_end: flow.then_some(s),
                            start,
                        },
                        a,
                    ))
                }
                _ => return Err(EppConfigError::Yaml("unbalanced mapping".into())),
            },
            _ => None,
        };
        let Some((node, anchor)) = node else { continue };
        if anchor != 0 {
            anchors.push((anchor, node.clone()));
        }
        match stack.last_mut() {
            None => docs.push(node),
            Some(Open::Seq(v, _)) => v.push(node),
            Some(Open::Map(entries, key, _, _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
    Ok(docs)
}

/// Where a config document's text sits in the file.
#[derive(Clone, Debug)]
enum Host {
    /// The file itself.
    File,
    /// A literal block scalar: its content lines start at `content_start`,
    /// each indented by `indent` spaces.
    Literal { content_start: usize, indent: usize },
    /// A string that cannot be edited in place (why).
    Fixed(&'static str),
}

/// One filter instance found in a file.
#[derive(Clone, Debug)]
pub struct FoundFilter {
    /// The instance name (`name`, else the type).
    pub name: String,
    /// Its decoded parameters.
    pub config: Config,
    /// Where it was found, e.g. `data["config.yaml"].plugins[2]`.
    pub path: String,
    /// The parameter names the entry sets itself (the rest are defaults).
    pub keys: Vec<String>,
    /// Index of the text it was parsed from in the file's texts.
    doc: usize,
    /// The plugin entry.
    entry: Node,
}

/// Texts a file's configs were parsed from: the file, then strings in it.
struct Texts {
    texts: Vec<(String, Host, Option<usize>)>,
}

/// Walks `node` (configs held in strings included, recorded in `texts`)
/// and hands `visit` each entry of a `plugins` list: the entry, its index,
/// the path of the list's owner (`""` or ending in `.`), and the text it is
/// in.
fn walk_plugins<F>(
    node: &Node,
    path: &str,
    doc: usize,
    texts: &mut Texts,
    depth: usize,
    visit: &mut F,
) -> Result<(), EppConfigError>
where
    F: FnMut(&Node, usize, &str, usize) -> Result<(), EppConfigError>,
{
    if depth > MAX_NESTING {
        return Err(EppConfigError::TooDeep);
    }
    match node {
        Node::Map { entries, .. } => {
            if let Some(Node::Seq(plugins)) = node.get("plugins") {
                let prefix = if path.is_empty() {
                    String::new()
                } else {
                    format!("{path}.")
                };
                for (i, p) in plugins.iter().enumerate() {
                    visit(p, i, &prefix, doc)?;
                }
                return Ok(());
            }
            for (k, v) in entries {
                let key = k.as_str().unwrap_or("?");
                let sub = if path.is_empty() {
                    key_path(key, true)
                } else {
                    format!("{path}{}", key_path(key, false))
                };
                walk_plugins(v, &sub, doc, texts, depth + 1, visit)?;
            }
        }
        Node::Seq(items) => {
            for (i, v) in items.iter().enumerate() {
                walk_plugins(v, &format!("{path}[{i}]"), doc, texts, depth + 1, visit)?;
            }
        }
        Node::Scalar {
            value,
            style,
            start,
            ..
        } if value.contains('\n') && value.contains("plugins") => {
            // A config held as a string (ConfigMap data, Helm values).
            let Ok(inner) = parse_nodes(value) else {
                return Ok(());
            };
            let host = match style {
                ScalarStyle::Literal => literal_host(&texts.texts[doc].0, *start, value),
                ScalarStyle::Folded => Host::Fixed("a folded block scalar (>)"),
                _ => Host::Fixed("a quoted or plain string"),
            };
            let idx = texts.texts.len();
            texts.texts.push((value.clone(), host, Some(doc)));
            for n in inner.iter().filter(|n| matches!(n, Node::Map { .. })) {
                walk_plugins(n, path, idx, texts, depth + 1, visit)?;
            }
        }
        Node::Alias(_) | Node::Scalar { .. } => {}
    }
    Ok(())
}

/// Every prefix-cache-affinity-filter entry under `node`.
fn search(
    node: &Node,
    path: &str,
    doc: usize,
    texts: &mut Texts,
    out: &mut Vec<FoundFilter>,
    depth: usize,
) -> Result<(), EppConfigError> {
    walk_plugins(node, path, doc, texts, depth, &mut |p, i, prefix, doc| {
        if p.get("type").and_then(Node::as_str) != Some(PLUGIN_TYPE) {
            return Ok(());
        }
        let name = p
            .get("name")
            .and_then(Node::as_str)
            .unwrap_or(PLUGIN_TYPE)
            .to_string();
        let params = p.get("parameters").map_or(Value::Null, Node::to_value);
        check_finite(&params, &mut format!("plugins[{i}].parameters"))?;
        let config = Config::from_value(&params).map_err(|error| EppConfigError::Config {
            plugin: name.clone(),
            error,
        })?;
        let keys = params
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        out.push(FoundFilter {
            name,
            config,
            keys,
            path: format!("{prefix}plugins[{i}]"),
            doc,
            entry: p.clone(),
        });
        Ok(())
    })
}

fn key_path(key: &str, first: bool) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match (plain, first) {
        (true, true) => key.to_string(),
        (true, false) => format!(".{key}"),
        (false, _) => format!("[{key:?}]"),
    }
}

/// Where a literal block scalar's content lines start, and their indent,
/// when its lines map one to one onto `value`.
fn literal_host(outer: &str, start: usize, value: &str) -> Host {
    // The scalar's span starts at its first content character.
    let header_end = outer[..start].rfind('\n').map_or(0, |i| i + 1);
    let indent = start - header_end;
    let header = outer[..header_end.saturating_sub(1)]
        .rfind('|')
        .map_or("", |b| &outer[b..header_end]);
    if value.starts_with('\n') || !outer[header_end..start].bytes().all(|b| b == b' ') {
        return Host::Fixed("a literal block that does not map onto its lines");
    }
    if header.bytes().any(|b| b.is_ascii_digit()) {
        return Host::Fixed("a literal block with an indentation indicator");
    }
    // Check that every line of the value is the outer line less the indent.
    let mut pos = header_end;
    for line in value.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let Some(outer_line) = outer.get(pos..) else {
            return Host::Fixed("a literal block that does not map onto its lines");
        };
        let outer_line = outer_line.split('\n').next().unwrap_or("");
        let ok = if body.is_empty() {
            outer_line.trim().is_empty()
        } else {
            outer_line.len() >= indent
                && outer_line[..indent].bytes().all(|b| b == b' ')
                && &outer_line[indent..] == body
        };
        if !ok {
            return Host::Fixed("a literal block that does not map onto its lines");
        }
        pos += outer_line.len() + 1;
    }
    Host::Literal {
        content_start: header_end,
        indent,
    }
}

/// Parses a file and hands `f` each of its documents with its path
/// (`document[i]` when the file holds several) and the file's texts.
fn each_document<F>(text: &str, f: &mut F) -> Result<(), EppConfigError>
where
    F: FnMut(&Node, &str, &mut Texts) -> Result<(), EppConfigError>,
{
    let docs = parse_nodes(text)?;
    let mut texts = Texts {
        texts: vec![(text.to_string(), Host::File, None)],
    };
    let many = docs.len() > 1;
    for (i, d) in docs.iter().enumerate() {
        let path = if many {
            format!("document[{i}]")
        } else {
            String::new()
        };
        f(d, &path, &mut texts)?;
    }
    Ok(())
}

/// Every filter instance of a file, with where it was found.
pub fn find_filters(text: &str) -> Result<Vec<FoundFilter>, EppConfigError> {
    let mut out = Vec::new();
    each_document(text, &mut |d, path, texts| {
        search(d, path, 0, texts, &mut out, 0)
    })?;
    if out.is_empty() {
        return Err(EppConfigError::NoFilter);
    }
    Ok(out)
}

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
/// let f = gatecal_analysis::filters_from_yaml(yaml).unwrap();
/// assert_eq!(f[0].0, "prefix-cache-affinity-filter");
/// assert_eq!(f[0].1.max_ttft_penalty_ms, 5000.0);
/// ```
pub fn filters_from_yaml(text: &str) -> Result<Vec<(String, Config)>, EppConfigError> {
    Ok(find_filters(text)?
        .into_iter()
        .map(|f| (f.name, f.config))
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
    Ok(find_filters(text)?
        .into_iter()
        .map(|f| FilterEntry {
            name: f.name,
            config: f.config,
            keys: f.keys,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const RAW: &str = "\
# EPP config of the glm deployment
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: approx-prefix-cache-producer   # match info
  parameters:
    blockSizeTokens: 64
- name: affinity
  type: prefix-cache-affinity-filter
  parameters:
    affinityThreshold: 0.9            # keep
    prefixMatchInfoProducerName: approx-prefix-cache-producer
    maxTTFTPenaltyMs: 18000           # the default
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: affinity
  - pluginRef: max-score-picker
";

    #[test]
    fn configmap_and_errors() {
        let cm = "kind: ConfigMap\ndata:\n  config.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters:\n        maxTTFTPenaltyMs: 1000\n";
        let f = find_filters(cm).unwrap();
        assert_eq!(f[0].config.max_ttft_penalty_ms, 1000.0);
        assert_eq!(f[0].path, "data[\"config.yaml\"].plugins[0]");
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
            filters_from_yaml("a: [b"),
            Err(EppConfigError::Yaml(_))
        ));
        // A quoted number is a string, which the strict decoder refuses.
        let quoted = "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: \"5\"}\n";
        assert!(filters_from_yaml(quoted).is_err());
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert!(matches!(
            filters_from_yaml(&deep),
            Err(EppConfigError::TooDeep)
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
