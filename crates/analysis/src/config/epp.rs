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
//!
//! # Bounds
//!
//! A config file is a few KiB; the reader refuses, before any work grows
//! with them, a text over [`MAX_CONFIG_BYTES`], nesting deeper than
//! [`MAX_NESTING`], more than [`MAX_DOCUMENTS`] YAML documents, and more
//! than [`MAX_NODES`] nodes with every alias counted as the nodes it stands
//! for (a "billion laughs" file of a few hundred bytes stands for billions).
//! An alias shares its anchor's nodes rather than copying them, so memory
//! follows the file's size; every walk over the tree visits each node as
//! often as the count charged for it, so the bound on nodes bounds the
//! walks too. Configs held in strings (ConfigMap data, Helm values) count
//! against the same bounds as the file around them.

use std::collections::HashMap;
use std::sync::Arc;

use gatecal_filter::Config;
use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

pub(crate) mod era;
mod error;
pub(crate) mod producers;
pub(crate) mod writer;

pub use era::ConfigEra;
pub use error::EppConfigError;

/// The filter's plugin type.
pub const PLUGIN_TYPE: &str = "prefix-cache-affinity-filter";

/// Deepest nesting of a config file: flow collections (`[`, `{`) open at
/// once, or the indentation and block-sequence dashes that start a line.
/// Real files nest about 6 levels.
pub const MAX_NESTING: usize = 64;

/// Largest config text read, bytes (4 MiB). A real EndpointPickerConfig
/// is a few KiB, a ConfigMap or Helm values file holding one a few tens.
pub const MAX_CONFIG_BYTES: usize = 4 << 20;

/// Most YAML nodes in one file (scalars, sequences and mappings, those of
/// configs held in strings included), each alias counted as the nodes of
/// what it refers to. A real config has a few hundred, a Helm values file
/// a few thousand.
pub const MAX_NODES: usize = 250_000;

/// Most items in one flow collection (`[…]`, `{…}`, counted by its commas,
/// nested ones included). The YAML parser holds a flow collection that
/// may turn out to be a mapping key whole until it closes (about 350 bytes
/// an item); a real config's flow collections hold a few items.
pub const MAX_FLOW_ITEMS: usize = 100_000;

/// Most YAML documents (`---`) in one file, those of configs held in
/// strings included. `helm template` of a whole chart writes a few dozen.
pub const MAX_DOCUMENTS: usize = 1_000;

/// A YAML node with its place in the text it was parsed from.
#[derive(Clone, Debug)]
enum Node {
    Scalar {
        value: Arc<str>,
        style: ScalarStyle,
        /// Byte range of the scalar as written (quotes included).
        start: usize,
        end: usize,
    },
    Seq(Arc<[Node]>),
    Map {
        entries: Arc<[(Node, Node)]>,
        /// A flow mapping `{…}`: byte offset of its `}`.
        flow_end: Option<usize>,
        /// Byte offset of the mapping's start.
        start: usize,
    },
    /// Reached through an alias (not editable in place); shared with the
    /// anchored node, never copied.
    Alias(Arc<Node>),
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
        matches!(self, Node::Scalar { value, style: ScalarStyle::Plain, .. } if matches!(&**value, "" | "~" | "null" | "Null" | "NULL"))
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
                    return Value::String(value.to_string());
                }
                plain_scalar(value)
            }
            Node::Seq(v) => Value::Array(v.iter().map(Node::to_value).collect()),
            Node::Map { entries, .. } => {
                let mut m = Map::new();
                for (k, v) in entries.iter() {
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
/// level) plus its leading `- ` dashes; and for flow collections of more
/// than [`MAX_FLOW_ITEMS`] items (commas inside brackets: in flow context
/// a plain scalar holds no comma).
fn check_nesting(text: &str) -> Result<(), EppConfigError> {
    let mut flow = 0usize;
    let mut items = 0usize;
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
                (None, b']' | b'}') => {
                    flow = flow.saturating_sub(1);
                    if flow == 0 {
                        items = 0;
                    }
                }
                (None, b',') if flow > 0 => {
                    items += 1;
                    if items >= MAX_FLOW_ITEMS {
                        return Err(EppConfigError::TooManyFlowItems);
                    }
                }
                _ => {}
            }
            prev = b;
        }
    }
    Ok(())
}

/// What one file may still spend: nodes (aliases counted as what they
/// stand for) and documents, shared by the file and every config held in
/// a string in it.
#[derive(Debug)]
struct Budget {
    nodes: usize,
    documents: usize,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            nodes: MAX_NODES,
            documents: MAX_DOCUMENTS,
        }
    }

    fn charge(&mut self, nodes: usize) -> Result<(), EppConfigError> {
        self.nodes = self
            .nodes
            .checked_sub(nodes)
            .ok_or(EppConfigError::TooManyNodes)?;
        Ok(())
    }
}

/// Parses one YAML text into its documents, with byte offsets, charging
/// `budget` for every node (an alias for the nodes it stands for) and
/// document.
fn parse_nodes(text: &str, budget: &mut Budget) -> Result<Vec<Node>, EppConfigError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(EppConfigError::TooLarge(text.len()));
    }
    check_nesting(text)?;
    // saphyr's markers count characters; map them to bytes (the same for
    // ASCII text, the usual case).
    let bytes_at: Vec<usize> = if text.is_ascii() {
        Vec::new()
    } else {
        text.char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()))
            .collect()
    };
    let b = |ci: usize| {
        if bytes_at.is_empty() {
            ci.min(text.len())
        } else {
            bytes_at.get(ci).copied().unwrap_or(text.len())
        }
    };
    /// An open collection: its items, anchor, start and the nodes it
    /// stands for so far (itself included).
    enum Open {
        Seq(Vec<Node>, usize, usize),
        Map(Vec<(Node, Node)>, Option<Node>, usize, usize, usize),
    }
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    // Anchored nodes with the nodes each stands for, by the parser's
    // anchor id (unique per definition), so an alias is found at once.
    let mut anchors: HashMap<usize, (Node, usize)> = HashMap::new();
    let mut parser = Parser::new_from_str(text);
    for ev in &mut parser {
        let (ev, span) = ev.map_err(|e| EppConfigError::Yaml(e.to_string()))?;
        let node = match ev {
            Event::DocumentStart(_) => {
                budget.documents = budget
                    .documents
                    .checked_sub(1)
                    .ok_or(EppConfigError::TooManyDocuments)?;
                None
            }
            Event::Scalar(v, style, anchor, _) => {
                budget.charge(1)?;
                Some((
                    Node::Scalar {
                        value: Arc::from(&*v),
                        style,
                        start: b(span.start.index()),
                        end: b(span.end.index()),
                    },
                    anchor,
                    1,
                ))
            }
            Event::Alias(id) => {
                let (n, size) = anchors
                    .get(&id)
                    .map(|(n, size)| (n.clone(), *size))
                    .ok_or_else(|| EppConfigError::Yaml(format!("unknown alias {id}")))?;
                budget.charge(size)?;
                Some((Node::Alias(Arc::new(n)), 0, size))
            }
            Event::SequenceStart(anchor, _) => {
                if stack.len() >= MAX_NESTING {
                    return Err(EppConfigError::TooDeep);
                }
                budget.charge(1)?;
                stack.push(Open::Seq(Vec::new(), anchor, 1));
                None
            }
            Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_NESTING {
                    return Err(EppConfigError::TooDeep);
                }
                budget.charge(1)?;
                stack.push(Open::Map(
                    Vec::new(),
                    None,
                    anchor,
                    b(span.start.index()),
                    1,
                ));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(v, a, size)) => Some((Node::Seq(v.into()), a, size)),
                _ => return Err(EppConfigError::Yaml("unbalanced sequence".into())),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(entries, _, a, start, size)) => {
                    let s = b(span.start.index());
                    let flow = text.as_bytes().get(s) == Some(&b'}');
                    Some((
                        Node::Map {
                            entries: entries.into(),
                            flow_end: flow.then_some(s),
                            start,
                        },
                        a,
                        size,
                    ))
                }
                _ => return Err(EppConfigError::Yaml("unbalanced mapping".into())),
            },
            _ => None,
        };
        let Some((node, anchor, size)) = node else {
            continue;
        };
        if anchor != 0 {
            // A shallow copy: the node's items are shared.
            anchors.insert(anchor, (node.clone(), size));
        }
        match stack.last_mut() {
            None => docs.push(node),
            Some(Open::Seq(v, _, total)) => {
                v.push(node);
                *total = total.saturating_add(size);
            }
            Some(Open::Map(entries, key, _, _, total)) => {
                *total = total.saturating_add(size);
                match key.take() {
                    None => *key = Some(node),
                    Some(k) => entries.push((k, node)),
                }
            }
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
    /// The filter's older era the entry is of, when it is (its keys, or
    /// the chart it sits in), whose defaults it was read with.
    pub era: Option<ConfigEra>,
    /// Index of the text it was parsed from in the file's texts.
    doc: usize,
    /// The plugin entry.
    entry: Node,
}

/// Texts a file's configs were parsed from: the file, then strings in it.
struct Texts {
    texts: Vec<(String, Host, Option<usize>)>,
    /// What the file may still spend.
    budget: Budget,
    /// Strings that looked like configs but were not valid YAML: where,
    /// and the YAML error.
    invalid: Vec<(String, String)>,
}

impl Texts {
    fn new(text: &str) -> Texts {
        Texts {
            texts: vec![(text.to_string(), Host::File, None)],
            budget: Budget::new(),
            invalid: Vec::new(),
        }
    }
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
            for (k, v) in entries.iter() {
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
            // Not YAML: kept to explain a file without a filter; a bound
            // is an error of the file.
            let inner = match parse_nodes(value, &mut texts.budget) {
                Ok(inner) => inner,
                Err(EppConfigError::Yaml(m)) => {
                    texts.invalid.push((path.to_string(), m));
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let host = match style {
                ScalarStyle::Literal => literal_host(&texts.texts[doc].0, *start, value),
                ScalarStyle::Folded => Host::Fixed("a folded block scalar (>)"),
                _ => Host::Fixed("a quoted or plain string"),
            };
            let idx = texts.texts.len();
            texts.texts.push((value.to_string(), host, Some(doc)));
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
        let mut params = p.get("parameters").map_or(Value::Null, Node::to_value);
        check_finite(&params, &mut format!("plugins[{i}].parameters"))?;
        let config_error = |error| EppConfigError::Config {
            plugin: name.clone(),
            error,
        };
        let era = era::recognise(&mut params, prefix).map_err(config_error)?;
        let mut config = Config::from_value(&params).map_err(config_error)?;
        if let Some((_, defaults)) = &era {
            era::apply(&mut config, defaults);
        }
        if let Some((parameter, value, range)) = gatecal_filter::outside_range(&config) {
            return Err(EppConfigError::OutOfRange {
                plugin: name,
                parameter,
                value,
                range,
            });
        }
        let keys = params
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        out.push(FoundFilter {
            name,
            config,
            keys,
            era: era.map(|(e, _)| e),
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
/// (`document[i]` when the file holds several) and the file's texts;
/// returns the texts.
fn each_document<F>(text: &str, f: &mut F) -> Result<Texts, EppConfigError>
where
    F: FnMut(&Node, &str, &mut Texts) -> Result<(), EppConfigError>,
{
    let mut texts = Texts::new(text);
    let docs = parse_nodes(text, &mut texts.budget)?;
    let many = docs.len() > 1;
    for (i, d) in docs.iter().enumerate() {
        let path = if many {
            format!("document[{i}]")
        } else {
            String::new()
        };
        f(d, &path, &mut texts)?;
    }
    Ok(texts)
}

/// The error of a file that held no filter: the first string that looked
/// like a config but was not YAML, else [`EppConfigError::NoFilter`].
fn no_filter(texts: &Texts) -> EppConfigError {
    match texts.invalid.first() {
        Some((path, message)) => EppConfigError::EmbeddedYaml {
            path: if path.is_empty() {
                "the file".into()
            } else {
                path.clone()
            },
            message: message.clone(),
        },
        None => EppConfigError::NoFilter,
    }
}

/// A Helm chart template is no YAML until rendered: an error that a
/// template would explain (not YAML, no filter found) becomes
/// [`EppConfigError::HelmTemplate`] when a line holds a `{{ … }}` action.
fn explain_template(text: &str, e: EppConfigError) -> EppConfigError {
    // `key: {{ .Values.x }}` is valid YAML, a mapping, which the filter's
    // decoder then refuses.
    if !matches!(
        e,
        EppConfigError::Yaml(_)
            | EppConfigError::NoFilter
            | EppConfigError::EmbeddedYaml { .. }
            | EppConfigError::Config {
                error: gatecal_filter::ConfigError::Unmarshal(_),
                ..
            }
    ) {
        return e;
    }
    let action = text
        .lines()
        .position(|l| l.find("{{").is_some_and(|i| l[i + 2..].contains("}}")));
    match action {
        Some(i) => EppConfigError::HelmTemplate(i + 1),
        None => e,
    }
}

/// Every filter instance of a file, with where it was found.
pub fn find_filters(text: &str) -> Result<Vec<FoundFilter>, EppConfigError> {
    let mut out = Vec::new();
    let found = each_document(text, &mut |d, path, texts| {
        search(d, path, 0, texts, &mut out, 0)
    })
    .and_then(|texts| {
        if out.is_empty() {
            Err(no_filter(&texts))
        } else {
            Ok(())
        }
    });
    match found {
        Ok(()) => Ok(out),
        Err(e) => Err(explain_template(text, e)),
    }
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
    /// The filter's older era the entry is of, if any.
    pub era: Option<ConfigEra>,
}

/// [`filters_from_yaml`], with the parameter names each entry sets.
pub fn filter_entries_from_yaml(text: &str) -> Result<Vec<FilterEntry>, EppConfigError> {
    Ok(find_filters(text)?
        .into_iter()
        .map(|f| FilterEntry {
            name: f.name,
            config: f.config,
            keys: f.keys,
            era: f.era,
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

    /// The "billion laughs": ten levels of nine aliases, 460 bytes that
    /// stand for more than 9^9 nodes.
    pub(crate) fn alias_bomb() -> String {
        let mut y = String::from("a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            y.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 9].join(",")));
        }
        y
    }

    /// An alias bomb is refused as the parse reaches the bound, by every
    /// reader, in the file and in a ConfigMap's string; before, every alias
    /// was a deep copy and the file grew to gigabytes.
    #[test]
    fn alias_bombs_are_refused() {
        let bomb = alias_bomb();
        assert_eq!(bomb.len(), 460);
        let plugins =
            format!("{bomb}plugins:\n- type: prefix-cache-affinity-filter\n  parameters: *a9\n");
        for y in [&bomb, &plugins] {
            assert_eq!(find_filters(y).unwrap_err(), EppConfigError::TooManyNodes);
            assert_eq!(
                super::producers::producer_block_sizes(y).unwrap_err(),
                EppConfigError::TooManyNodes
            );
            let ch = super::writer::ParamChanges {
                peak_prefill_throughput: 3000.0,
                max_ttft_penalty_ms: 1000.0,
                penalty_mode: gatecal_filter::PenaltyMode::Static,
            };
            let e = super::writer::emit(y, &ch, |_, _| true);
            assert_eq!(e.unwrap_err(), EppConfigError::TooManyNodes);
        }
        let held: String = plugins.lines().map(|l| format!("    {l}\n")).collect();
        let cm = format!("kind: ConfigMap\ndata:\n  config.yaml: |\n{held}");
        assert_eq!(find_filters(&cm).unwrap_err(), EppConfigError::TooManyNodes);
        assert!(
            EppConfigError::TooManyNodes
                .to_string()
                .contains("aliases (*name) are expanded")
        );
    }

    /// Aliases are still read through (shared, not copied), and count as
    /// what they stand for.
    #[test]
    fn aliases_are_shared_and_read() {
        let y = "p: &p {maxTTFTPenaltyMs: 5000}\nplugins:\n- type: prefix-cache-affinity-filter\n  parameters: *p\n- type: prefix-cache-affinity-filter\n  name: b\n  parameters: *p\n";
        let f = filters_from_yaml(y).unwrap();
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|(_, c)| c.max_ttft_penalty_ms == 5000.0));
        // An anchor defined again: later aliases refer to the new one.
        let again = "p: &p {maxTTFTPenaltyMs: 5000}\nq: &p {maxTTFTPenaltyMs: 7000}\nplugins:\n- type: prefix-cache-affinity-filter\n  parameters: *p\n";
        assert_eq!(
            filters_from_yaml(again).unwrap()[0].1.max_ttft_penalty_ms,
            7000.0
        );
        let mut budget = Budget::new();
        parse_nodes(y, &mut budget).unwrap();
        // Root map 1; p, its map and one key and value 4; plugins and its
        // list 2; the entries' maps with their keys and values, each *p
        // counted as 3: 7 and 9.
        assert_eq!(MAX_NODES - budget.nodes, 1 + 4 + 2 + 7 + 9);
    }

    /// [`MAX_NODES`] nodes pass, one more is refused: an anchored list
    /// of 1,000 nodes, aliases of it and plain scalars to the count.
    #[test]
    fn node_bound_just_below_and_above() {
        let aliases = (MAX_NODES - 2000) / 1000;
        let nodes = |extra: usize| {
            let list = vec!["x"; 999].join(",");
            let aliases = vec!["*a"; aliases].join(",");
            let plain = vec!["y"; extra].join(",");
            format!("[&a [{list}], {aliases}, {plain}]")
        };
        // The outer list, the anchored one of 1,000 and the aliases.
        let fixed = 1 + 1000 + 1000 * aliases;
        let at = nodes(MAX_NODES - fixed);
        assert_eq!(parse_nodes(&at, &mut Budget::new()).unwrap().len(), 1);
        assert_eq!(
            parse_nodes(&nodes(MAX_NODES - fixed + 1), &mut Budget::new()).unwrap_err(),
            EppConfigError::TooManyNodes
        );
    }

    /// A flow collection of [`MAX_FLOW_ITEMS`] items passes the scan, one
    /// more is refused; separate collections count apart, and commas in
    /// quotes or outside brackets do not count.
    #[test]
    fn flow_item_bound_just_below_and_above() {
        let list = |n: usize| format!("[{}]\n", vec!["a"; n].join(","));
        assert_eq!(check_nesting(&list(MAX_FLOW_ITEMS)), Ok(()));
        assert_eq!(
            check_nesting(&list(MAX_FLOW_ITEMS + 1)),
            Err(EppConfigError::TooManyFlowItems)
        );
        let nested = format!("{{k: [{}], j: b}}", vec!["a"; MAX_FLOW_ITEMS].join(","));
        assert_eq!(
            check_nesting(&nested),
            Err(EppConfigError::TooManyFlowItems)
        );
        assert_eq!(
            filters_from_yaml(&list(MAX_FLOW_ITEMS + 1)),
            Err(EppConfigError::TooManyFlowItems)
        );
        let apart = format!("a: {}b: {}", list(60_000), list(60_000));
        assert_eq!(check_nesting(&apart), Ok(()));
        let commas = format!(
            "a: \"{}\"\nb: {}\n",
            ",".repeat(200_000),
            ",".repeat(200_000)
        );
        assert_eq!(check_nesting(&commas), Ok(()));
    }

    /// [`MAX_DOCUMENTS`] documents pass, one more is refused.
    #[test]
    fn document_bound_just_below_and_above() {
        let docs = |n: usize| "---\nx: 1\n".repeat(n);
        assert_eq!(
            parse_nodes(&docs(MAX_DOCUMENTS), &mut Budget::new())
                .unwrap()
                .len(),
            MAX_DOCUMENTS
        );
        assert_eq!(
            filters_from_yaml(&docs(MAX_DOCUMENTS + 1)).unwrap_err(),
            EppConfigError::TooManyDocuments
        );
        assert_eq!(
            filters_from_yaml(&docs(MAX_DOCUMENTS)).unwrap_err(),
            EppConfigError::NoFilter
        );
    }

    /// A text of [`MAX_CONFIG_BYTES`] is read, one byte more is refused
    /// before it is parsed.
    #[test]
    fn size_bound_just_below_and_above() {
        let line = format!("#{}\n", "x".repeat(1022));
        let at = line.repeat(MAX_CONFIG_BYTES / 1024);
        assert_eq!(at.len(), MAX_CONFIG_BYTES);
        assert_eq!(
            filters_from_yaml(&at).unwrap_err(),
            EppConfigError::NoFilter
        );
        let over = format!("{at} ");
        assert_eq!(
            filters_from_yaml(&over).unwrap_err(),
            EppConfigError::TooLarge(MAX_CONFIG_BYTES + 1)
        );
        let e = EppConfigError::TooLarge(MAX_CONFIG_BYTES + 1).to_string();
        assert!(e.contains("4194305 bytes") && e.contains("4194304"), "{e}");
    }

    /// A ConfigMap whose config string is not YAML names the key and the
    /// YAML error, rather than "no plugin"; a string that is not a config
    /// does not stop a filter found elsewhere.
    #[test]
    fn invalid_yaml_in_a_configmap_names_the_key() {
        let cm = "kind: ConfigMap\ndata:\n  default-plugins.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters: {maxTTFTPenaltyMs: [1000}\n";
        let e = filters_from_yaml(cm).unwrap_err();
        let EppConfigError::EmbeddedYaml { path, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(path, "data[\"default-plugins.yaml\"]");
        let m = e.to_string();
        assert!(
            m.contains("data[\"default-plugins.yaml\"]") && m.contains("not valid YAML"),
            "{m}"
        );
        let both = format!(
            "{cm}  other.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n"
        );
        assert_eq!(filters_from_yaml(&both).unwrap().len(), 1);
    }

    /// A Helm chart template is told to be rendered first, whether its
    /// actions break the YAML or hide the filter.
    #[test]
    fn helm_templates_are_named() {
        let broken = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ include \"epp.fullname\" . }}\ndata:\n{{- toYaml .Values.epp.config | nindent 2 }}\n";
        let valid = "kind: ConfigMap\ndata:\n  config.yaml: |\n    {{ .Values.pluginsConfig }}\n";
        // An action as a parameter's value is a YAML mapping the filter's
        // decoder refuses.
        let value = "kind: ConfigMap\ndata:\n  c.yaml: |\n    plugins:\n    - type: prefix-cache-affinity-filter\n      parameters:\n        maxTTFTPenaltyMs: {{ .Values.penalty }}\n";
        for (y, line) in [(broken, 4), (valid, 4), (value, 7)] {
            let e = filters_from_yaml(y).unwrap_err();
            assert_eq!(e, EppConfigError::HelmTemplate(line), "{y}");
            let m = e.to_string();
            assert!(m.contains("render it first (helm template"), "{m}");
            assert!(m.contains("or pass the ConfigMap"), "{m}");
        }
        // A rendered file that mentions braces in a value is read as it is.
        let fine = "plugins:\n- type: prefix-cache-affinity-filter\n  name: \"{{x}}\"\n";
        assert_eq!(filters_from_yaml(fine).unwrap()[0].0, "{{x}}");
    }

    /// A value the filter accepts but no report can use (a peak of 1e-320
    /// tok/s makes every TTFT infinite) is refused from a file as from a
    /// flag, naming the parameter and the range.
    #[test]
    fn config_values_outside_gatecals_ranges_are_refused() {
        let y = |p: &str| {
            format!(
                "plugins:\n- type: prefix-cache-affinity-filter\n  name: f\n  parameters: {{{p}}}\n"
            )
        };
        let e = filters_from_yaml(&y("peakPrefillThroughput: 1e-320")).unwrap_err();
        assert!(
            matches!(
                e,
                EppConfigError::OutOfRange {
                    parameter: "peakPrefillThroughput",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("1 to 1000000000 tok/s"), "{e}");
        let e = filters_from_yaml(&y("maxTTFTPenaltyMs: 1e12")).unwrap_err();
        assert!(
            matches!(
                e,
                EppConfigError::OutOfRange {
                    parameter: "maxTTFTPenaltyMs",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            filters_from_yaml(&y("peakPrefillThroughput: 3000, maxTTFTPenaltyMs: 5000")).is_ok()
        );
    }
}
