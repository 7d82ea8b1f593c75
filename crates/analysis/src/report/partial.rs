//! Partial reports: everything a gate-dist report is finished from, written
//! by one run (`--emit-partial`) and merged later (`gate-dist merge`) into
//! the report one run over all the input would give.
//!
//! The format is `gatecal.partial/v1`, documented field by field in
//! `docs/partial-report.md`. A partial holds accumulators, never log lines:
//! counts, HdrHistograms (V2 serialization, base64), what-if tallies, the
//! config in force, the input ledger and the parts it was made of. The
//! report is finished by [`finish_parts`](super::gate_dist::finish_parts),
//! the function a run over logs finishes by, so a merge and a run agree by
//! construction wherever the accumulators merge exactly. What is exact
//! after a merge of shards, and the measured bound on reconstructed gate
//! inputs near a shard's start, are in `docs/scale-out.md`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::in_force::Shown;
use crate::config::source::SourcedConfig;
use crate::input::pool::Pooled;
use crate::report::gate_dist::{
    DepAcc, FinishView, GateDist, GateDistReport, InputSummary, TimeRange, TraceSummary,
    finish_parts,
};
pub use crate::report::parts::PartInfo;
pub(crate) use crate::report::parts::{INPUT_STREAM, KeySample, max_opt, min_opt};

/// The schema id of a partial report.
pub const PARTIAL_SCHEMA: &str = "gatecal.partial/v1";

/// The report a partial finishes into.
const GATE_DIST: &str = "gate-dist";

/// A part and its streams, as a partial records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// What it covers.
    #[serde(flatten)]
    pub info: PartInfo,
    /// Per stream of decisions, `deployment` + `/` + EPP pod (empty when
    /// the decisions do not name one), the first and last decision
    /// counted: two parts counting the same stream over overlapping times
    /// count some decisions twice (checked for streams that name a pod).
    pub streams: BTreeMap<String, [Option<f64>; 2]>,
    /// For the decisions whose lines name no pod: the keys (request id and
    /// time, hashed), every one up to 4,096 of them, else about one in 64,
    /// sorted. Two parts sharing a key count a decision twice.
    #[serde(default)]
    pub sampled: Vec<u64>,
}

/// The options a partial's figures were computed with: partials merge only
/// when these are equal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// What finishing the report reads.
    #[serde(flatten)]
    pub(crate) view: FinishView,
    /// The reconstruction's options.
    pub reconstruct: serde_json::Value,
    /// The what-ifs replayed, in order.
    pub what_if: serde_json::Value,
    /// `--candidate-config` and `--what-if` rows, by label.
    pub candidates: Vec<String>,
    /// The prefix producers' block sizes given.
    pub block_sizes: serde_json::Value,
    /// The deployment cap.
    pub max_deployments: usize,
}

/// A gate-dist partial report (`gatecal.partial/v1`).
#[derive(Serialize, Deserialize)]
pub struct Partial {
    /// `gatecal.partial/v1`.
    pub schema: String,
    /// The report it finishes into: `gate-dist`.
    pub report: String,
    /// The gatecal version that wrote it (`gatecal X.Y.Z`).
    pub producer: String,
    /// The options in force.
    pub settings: Settings,
    /// The runs it holds, in canonical order (one for a run's partial).
    pub parts: Vec<Part>,
    /// The input ledger, summed over the parts.
    pub input: InputSummary,
    /// Deployments past the cap.
    pub pooled: Pooled,
    /// Per deployment (stable name), its accumulators.
    deployments: BTreeMap<String, DepAcc>,
}

/// The version string a partial records.
pub fn producer() -> String {
    format!("gatecal {}", env!("CARGO_PKG_VERSION"))
}

impl GateDist {
    /// The partial report of the decisions pushed so far, with the inputs'
    /// ledger `input`.
    pub fn into_partial(self, input: InputSummary) -> Partial {
        let o = self.options();
        let settings = Settings {
            view: FinishView::of(o),
            reconstruct: serde_json::to_value(o.reconstruct).unwrap_or_default(),
            what_if: serde_json::to_value(&o.what_if).unwrap_or_default(),
            candidates: o.candidates.iter().map(|c| c.label.clone()).collect(),
            block_sizes: serde_json::to_value(&o.block_sizes).unwrap_or_default(),
            max_deployments: 0,
        };
        let range = o.time_range;
        let (mut deps, pooled) = self.settle();
        let mut streams = BTreeMap::new();
        let mut decisions = 0;
        let (mut first, mut last) = (None, None);
        for (name, d) in &deps {
            decisions += d.acc.decisions();
            first = min_opt(first, d.first_ts);
            last = max_opt(last, d.last_ts);
            let (pods, _) = d.signals.pod_spans();
            for (pod, f, l) in pods {
                streams.insert(format!("{name}/{pod}"), [f, l]);
            }
            streams.extend(d.unnamed_keys.streams(name));
        }
        let sampled = KeySample::combine(
            deps.values_mut()
                .map(|d| std::mem::take(&mut d.unnamed_keys))
                .collect(),
        );
        let part = Part {
            info: PartInfo {
                source: None,
                inputs: input.inputs.clone(),
                since: range.since,
                until: range.until,
                first_ts: first,
                last_ts: last,
                decisions,
                producer: producer(),
            },
            streams,
            sampled,
        };
        Partial {
            schema: PARTIAL_SCHEMA.into(),
            report: GATE_DIST.into(),
            producer: producer(),
            settings: Settings {
                max_deployments: pooled.max_deployments,
                ..settings
            },
            parts: vec![part],
            input,
            pooled,
            deployments: deps,
        }
    }
}

#[derive(Deserialize)]
struct Head {
    schema: Option<String>,
    report: Option<String>,
}

/// Checks a partial document's head: JSON (not cut short), this schema,
/// and a partial of `report` (`other_merge` names the command that merges
/// the other kind). The body is read after.
pub(crate) fn check_head(text: &str, report: &str, other_merge: &str) -> Result<(), String> {
    let head: Head = serde_json::from_str(text).map_err(|e| {
        if gatecal_parser::json_cut_short(text.as_bytes(), &e) {
            format!("cut short (truncated document): {e}")
        } else {
            format!("not a partial report: {e}")
        }
    })?;
    match head.schema.as_deref() {
        Some(PARTIAL_SCHEMA) => {}
        Some(other) => {
            return Err(format!(
                "schema {other:?}, this version reads {PARTIAL_SCHEMA:?} (write the partials again with this version)"
            ));
        }
        None => return Err(format!("no \"schema\": not a {PARTIAL_SCHEMA} document")),
    }
    if head.report.as_deref() != Some(report) {
        return Err(format!(
            "a partial of {:?}, not of {report} (merge it with {other_merge})",
            head.report.unwrap_or_default()
        ));
    }
    Ok(())
}

/// A partial as one line of JSON, newline-terminated.
pub(crate) fn json_line(p: &impl Serialize) -> String {
    let mut s = serde_json::to_string(p).unwrap_or_default();
    s.push('\n');
    s
}

/// Reads one partial of `report` (one line of JSON): its head checked
/// ([`check_head`]), then its body, which must have parts.
pub(crate) fn parse_partial<T: serde::de::DeserializeOwned>(
    text: &str,
    report: &str,
    other_merge: &str,
    parts: impl Fn(&T) -> usize,
) -> Result<T, String> {
    check_head(text, report, other_merge)?;
    let p: T = serde_json::from_str(text).map_err(|e| format!("malformed partial report: {e}"))?;
    if parts(&p) == 0 {
        return Err("a partial report without parts".into());
    }
    Ok(p)
}

impl Partial {
    /// The partial as one line of JSON, newline-terminated.
    pub fn to_line(&self) -> String {
        json_line(self)
    }

    /// Reads one partial document (one line of JSON). The error says what
    /// is wrong: not JSON (or cut short), another schema or report, a
    /// field missing or of the wrong type.
    pub fn from_json(text: &str) -> Result<Partial, String> {
        parse_partial(text, GATE_DIST, "recommend merge", |p: &Partial| {
            p.parts.len()
        })
    }

    /// Decisions counted.
    pub fn decisions(&self) -> u64 {
        self.parts.iter().map(|p| p.info.decisions).sum()
    }

    /// The report the partial finishes into: the one a run over its input
    /// gives. With several parts the report lists them (`merged`), and its
    /// `--since`/`--until` are the parts' outermost ones when every part
    /// set them.
    pub fn finish(self) -> GateDistReport {
        let range = if self.parts.len() == 1 {
            let i = &self.parts[0].info;
            TimeRange {
                since: i.since,
                until: i.until,
            }
        } else {
            let all = |f: fn(&PartInfo) -> Option<f64>| -> Option<Vec<f64>> {
                self.parts.iter().map(|p| f(&p.info)).collect()
            };
            TimeRange {
                since: all(|i| i.since).and_then(|v| v.into_iter().reduce(f64::min)),
                until: all(|i| i.until).and_then(|v| v.into_iter().reduce(f64::max)),
            }
        };
        let merged = if self.parts.len() > 1 || self.parts.iter().any(|p| p.info.source.is_some()) {
            self.parts.iter().map(|p| p.info.clone()).collect()
        } else {
            Vec::new()
        };
        finish_parts(
            self.deployments,
            self.pooled,
            &self.settings.view,
            range,
            self.input,
            merged,
            None,
            1,
        )
    }
}

/// The order partials are merged in: by their parts' times, inputs and
/// sources, so that any order of the same partials gives the same bytes.
pub(crate) type Key = (f64, f64, f64, f64, Vec<String>, Option<String>);

pub(crate) fn canonical_key(p: &Part) -> Key {
    let i = &p.info;
    let k = |v: Option<f64>| v.unwrap_or(f64::NEG_INFINITY);
    (
        k(i.since),
        k(i.until),
        k(i.first_ts),
        k(i.last_ts),
        i.inputs.clone(),
        i.source.clone(),
    )
}

pub(crate) fn cmp_key(a: &Key, b: &Key) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0)
        .then(a.1.total_cmp(&b.1))
        .then(a.2.total_cmp(&b.2))
        .then(a.3.total_cmp(&b.3))
        .then_with(|| a.4.cmp(&b.4))
        .then_with(|| a.5.cmp(&b.5))
}

/// A merge refused: which partial, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeError {
    /// The partial's source (file, or `-:N`).
    pub source: String,
    /// Why.
    pub message: String,
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.source, self.message)
    }
}

impl std::error::Error for MergeError {}

fn source_of(p: &Partial) -> String {
    p.parts
        .first()
        .and_then(|x| x.info.source.clone())
        .unwrap_or_else(|| "(partial)".into())
}

/// Merges partials read from `sources` (the names errors give): checks
/// that they are compatible (same options, same config in force per
/// deployment, no stream counted twice over overlapping times), then adds
/// them up in canonical order. Associative and commutative: any grouping
/// and order of the same partials gives the same partial.
pub fn merge(partials: Vec<(String, Partial)>) -> Result<Partial, MergeError> {
    let mut all: Vec<Partial> = partials
        .into_iter()
        .map(|(src, mut p)| {
            for part in &mut p.parts {
                if part.info.source.is_none() {
                    part.info.source = Some(src.clone());
                }
            }
            p
        })
        .collect();
    let Some(first) = all.first() else {
        return Err(MergeError {
            source: "(no input)".into(),
            message: "no partial report to merge".into(),
        });
    };
    let base = first.settings.clone();
    let base_src = source_of(first);
    for p in &all {
        if p.settings != base {
            return Err(MergeError {
                source: source_of(p),
                message: format!(
                    "written with other options than {base_src} ({}): partials merge only when run with the same flags",
                    settings_diff(&base, &p.settings)
                ),
            });
        }
    }
    all.sort_by(|a, b| {
        let ka = a.parts.first().map(canonical_key);
        let kb = b.parts.first().map(canonical_key);
        match (ka, kb) {
            (Some(x), Some(y)) => cmp_key(&x, &y),
            (x, y) => x.is_some().cmp(&y.is_some()),
        }
    });
    check_overlaps(&all)?;
    let mut it = all.into_iter();
    let Some(mut acc) = it.next() else {
        unreachable!("checked non-empty above")
    };
    for p in it {
        merge_into(&mut acc, p)?;
    }
    acc.parts
        .sort_by(|a, b| cmp_key(&canonical_key(a), &canonical_key(b)));
    // The ledger's lists in the parts' order, whatever the grouping.
    acc.input.inputs = acc
        .parts
        .iter()
        .flat_map(|p| p.info.inputs.iter().cloned())
        .collect();
    acc.producer = producer();
    Ok(acc)
}

fn settings_diff(a: &Settings, b: &Settings) -> String {
    let (Ok(serde_json::Value::Object(x)), Ok(serde_json::Value::Object(y))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return "options differ".into();
    };
    let differ: Vec<String> = x
        .iter()
        .filter(|(k, v)| y.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k} {v} vs {}",
                y.get(k).unwrap_or(&serde_json::Value::Null)
            )
        })
        .collect();
    differ.join("; ")
}

/// Two parts counting one EPP pod's decisions over overlapping times, or
/// sharing a sampled decision: double counting. A part's warm-up (read
/// before its `--since`) is not counted, so shards that overlap only there
/// pass.
fn check_overlaps(all: &[Partial]) -> Result<(), MergeError> {
    check_part_overlaps(all.iter().flat_map(|p| p.parts.iter()))
}

/// [`check_overlaps`] over the parts of any partial reports.
pub(crate) fn check_part_overlaps<'a>(
    parts: impl Iterator<Item = &'a Part>,
) -> Result<(), MergeError> {
    let parts: Vec<&Part> = parts.collect();
    let source = |p: &Part| p.info.source.clone().unwrap_or_default();
    // The streams first: a pod's, or an input's when its lines name no
    // pod, checked exactly by time.
    let mut seen: BTreeMap<&str, Vec<(f64, f64, String)>> = BTreeMap::new();
    for part in &parts {
        for (stream, [f, l]) in &part.streams {
            // Without a pod name or an input's name (stdin), two pods'
            // logs share the stream: the sampled keys below decide.
            if stream.ends_with('/') {
                continue;
            }
            let f = f.unwrap_or(f64::NEG_INFINITY);
            let l = l.unwrap_or(f64::INFINITY);
            let v = seen.entry(stream.as_str()).or_default();
            if let Some((of, ol, osrc)) = v.iter().find(|(of, ol, _)| f <= *ol && *of <= l) {
                let what = match stream.split_once(&format!("/{INPUT_STREAM}")) {
                    Some((dep, input)) => {
                        format!("{dep} (lines naming no EPP pod, read from {input})")
                    }
                    None => {
                        let (dep, pod) = stream.rsplit_once('/').unwrap_or((stream, ""));
                        format!("{dep} (EPP pod {pod})")
                    }
                };
                return Err(MergeError {
                    source: source(part),
                    message: format!(
                        "counts decisions of deployment {what} from {} to {}, which {osrc} counts too ({} to {}): the same decisions would be counted twice (shards may overlap only in their warm-up, before --since)",
                        time(f),
                        time(l),
                        time(*of),
                        time(*ol),
                    ),
                });
            }
            v.push((f, l, source(part)));
        }
    }
    // Then the sampled keys of the decisions that name no pod.
    let mut keys: std::collections::HashMap<u64, (usize, String)> =
        std::collections::HashMap::new();
    for (id, part) in parts.iter().enumerate() {
        let src = source(part);
        for k in &part.sampled {
            if let Some((other_id, other)) = keys.insert(*k, (id, src.clone()))
                && other_id != id
            {
                return Err(MergeError {
                    source: src,
                    message: format!(
                        "counts decisions {other} counts too (the same request ids at the same times): the same decisions would be counted twice (shards may overlap only in their warm-up, before --since)"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A time in seconds since the epoch, as an error shows it.
pub(crate) fn time(t: f64) -> String {
    if t.is_finite() {
        format!("{t:.3}")
    } else {
        "(unbounded)".into()
    }
}

fn merge_into(acc: &mut Partial, p: Partial) -> Result<(), MergeError> {
    let src = source_of(&p);
    for (name, dep) in &p.deployments {
        if let Some(mine) = acc.deployments.get(name) {
            check_config(name, &mine.shown, &dep.shown, &src)?;
        }
    }
    for (name, dep) in p.deployments {
        match acc.deployments.get_mut(&name) {
            Some(mine) => {
                merge_shown(&mut mine.shown, &dep.shown);
                mine.merge(&dep);
            }
            None => {
                acc.deployments.insert(name, dep);
            }
        }
    }
    merge_input(&mut acc.input, p.input);
    acc.pooled.deployments += p.pooled.deployments;
    acc.pooled.decisions += p.pooled.decisions;
    acc.pooled.at_least |= p.pooled.at_least;
    acc.parts.extend(p.parts);
    Ok(())
}

/// A deployment's config in force in another part (`dep`, read from
/// `src`) must be the one of the parts merged so far (`mine`), filter
/// instance by filter instance: a part may start with any of a
/// deployment's instances (a cut inside a filter chain), so the config it
/// shows first need not be the others' first.
pub(crate) fn check_config(
    name: &str,
    mine: &Shown,
    dep: &Shown,
    src: &str,
) -> Result<(), MergeError> {
    let refuse = |diff: String| MergeError {
        source: src.to_string(),
        message: format!(
            "deployment {name} ran under another config ({diff}): give every shard the EPP's config (--config or the parameter flags), so that a shard whose lines never show the bar does not assume the default",
        ),
    };
    if mine.instances.is_empty() || dep.instances.is_empty() {
        // A partial written before the instances were carried: its first
        // instance's config is all it holds.
        let (a, b) = (&mine.config, &dep.config);
        if a.parameters != b.parameters {
            return Err(refuse(config_diff(
                &b.parameters,
                &a.parameters,
                Some((b, a)),
            )));
        }
        return Ok(());
    }
    for theirs in &dep.instances {
        let Some(ours) = mine
            .instances
            .iter()
            .find(|i| i.instance == theirs.instance)
        else {
            continue;
        };
        if ours.parameters == theirs.parameters {
            continue;
        }
        // Where each value came from is known for the instance both show.
        let sourced = (dep.instance == theirs.instance && mine.instance == theirs.instance)
            .then_some((&dep.config, &mine.config));
        let diff = config_diff(&theirs.parameters, &ours.parameters, sourced);
        let several = mine.instances.len() > 1 || dep.instances.len() > 1;
        return Err(refuse(match (&theirs.instance, several) {
            (Some(i), true) => format!("filter instance {i}: {diff}"),
            (None, true) => format!("the filter instance the lines name no name of: {diff}"),
            _ => diff,
        }));
    }
    Ok(())
}

/// The parameters of `here` that differ from `others`, each with both
/// values (and where each came from, when `sourced` gives the configs).
fn config_diff(
    here: &gatecal_filter::Config,
    others: &gatecal_filter::Config,
    sourced: Option<(&SourcedConfig, &SourcedConfig)>,
) -> String {
    let (Ok(serde_json::Value::Object(x)), Ok(serde_json::Value::Object(y))) =
        (serde_json::to_value(here), serde_json::to_value(others))
    else {
        return "parameters differ".into();
    };
    let from = |c: &SourcedConfig, k: &str| {
        format!(" ({})", format!("{:?}", c.source_of(k)).to_lowercase())
    };
    let mut diff = Vec::new();
    for (k, v) in &x {
        if y.get(k) == Some(v) {
            continue;
        }
        let (h, o) = sourced.map_or((String::new(), String::new()), |(h, o)| {
            (from(h, k), from(o, k))
        });
        diff.push(format!(
            "{k} {v}{h} here, {}{o} in the others",
            y.get(k).unwrap_or(&serde_json::Value::Null),
        ));
    }
    diff.join(", ")
}

/// Adds what another part's log showed of a deployment's config (`dep`)
/// to the parts merged so far (`mine`): a value the log showed in one part
/// was shown by the log of the whole, and an instance seen in one part
/// was seen by the whole. A part that starts with another instance than
/// `mine`'s shows that instance's config: its sources are not `mine`'s,
/// and its disagreements are that instance's.
pub(crate) fn merge_shown(mine: &mut Shown, dep: &Shown) {
    let legacy = mine.instances.is_empty() || dep.instances.is_empty();
    if legacy || dep.instance == mine.instance {
        let (a, b) = (&mut mine.config, &dep.config);
        for (k, src) in &b.parameter_sources {
            if *src == crate::config::source::ParamSource::Log {
                a.parameter_sources.insert(k.clone(), *src);
            }
        }
        if b.source.ends_with("+log") && !a.source.ends_with("+log") || b.source == "log" {
            a.source.clone_from(&b.source);
        }
    }
    // A disagreement's instance as `mine` names it: none for `mine`'s
    // shown instance, the instance's name (or "") for the others.
    let name = |i: &Option<String>| i.clone().unwrap_or_default();
    let retag = |w: &Option<String>| -> Option<String> {
        if legacy {
            return w.clone();
        }
        let owner = match w {
            None => name(&dep.instance),
            Some(x) => x.clone(),
        };
        (owner != name(&mine.instance)).then_some(owner)
    };
    for w in &dep.config.log_disagreements {
        let instance = retag(&w.instance);
        if !mine
            .config
            .log_disagreements
            .iter()
            .any(|x| x.parameter == w.parameter && x.instance == instance)
        {
            let mut w = w.clone();
            w.instance = instance;
            mine.config.log_disagreements.push(w);
        }
    }
    let seen = std::iter::once(&dep.instance).chain(&dep.others);
    for i in seen {
        if *i != mine.instance && !mine.others.contains(i) {
            mine.others.push(i.clone());
        }
    }
    if !mine.instances.is_empty() {
        for ip in &dep.instances {
            if !mine.instances.iter().any(|x| x.instance == ip.instance) {
                mine.instances.push(ip.clone());
            }
        }
    }
}

pub(crate) fn merge_input(a: &mut InputSummary, b: InputSummary) {
    a.inputs.extend(b.inputs);
    a.lines_total += b.lines_total;
    a.lines_used += b.lines_used;
    a.lines_ignored += b.lines_ignored;
    a.lines_malformed += b.lines_malformed;
    a.lines_out_of_range += b.lines_out_of_range;
    a.bytes += b.bytes;
    a.decisions_assembled += b.decisions_assembled;
    a.decisions_incomplete += b.decisions_incomplete;
    a.decisions_evicted += b.decisions_evicted;
    a.requests_evicted_for_memory += b.requests_evicted_for_memory;
    let (x, y) = (&mut a.duplicates, b.duplicates);
    x.decisions += y.decisions;
    x.unchecked += y.unchecked;
    x.vllm_stats += y.vllm_stats;
    x.vllm_unchecked += y.vllm_unchecked;
    x.prometheus += y.prometheus;
    x.prometheus_conflicts += y.prometheus_conflicts;
    a.prometheus_samples_dropped += b.prometheus_samples_dropped;
    // The first malformed lines of each part, sorted: the same list
    // whatever the grouping.
    let keep = a.first_malformed.len().max(b.first_malformed.len());
    a.first_malformed.extend(b.first_malformed);
    a.first_malformed.sort();
    a.first_malformed.truncate(keep);
    a.traces = match (a.traces.take(), b.traces) {
        (Some(x), Some(y)) => Some(merge_traces(x, y)),
        (x, y) => x.or(y),
    };
}

fn merge_traces(mut a: TraceSummary, b: TraceSummary) -> TraceSummary {
    a.inputs += b.inputs;
    a.spans += b.spans;
    a.decisions += b.decisions;
    a.without_profile += b.without_profile;
    a.traces_only &= b.traces_only;
    a.joined += b.joined;
    a.unmatched += b.unmatched;
    a.not_held += b.not_held;
    a
}
