//! Recommend's partial reports: everything a calibration is finished from,
//! written by one run (`recommend --emit-partial`) and merged later
//! (`recommend merge`) into the report one run over all the input gives.
//!
//! The document is `gatecal.partial/v1` with `"report": "recommend"`
//! (`docs/partial-report.md`). Unlike gate-dist's, whose histograms add up,
//! the calibration reads individual decisions and stats lines (the static
//! bar minimises a sum over every decision at a peak known only at the
//! end; the peak's saturated intervals are found in runs of consecutive
//! stats lines, which a shard may cut), so a recommend partial keeps, per
//! part, what the calibration keeps in memory: per decision the two best
//! endpoints' in-flight tokens and the sticky one's matched tokens, per
//! stats line its time, rate, hit rate and queue, per routed request its
//! time, tokens and match. A merge lists the parts in canonical order and
//! the report is finished by [`Recommend::finish`], the function a run
//! over logs finishes by.

use std::collections::BTreeMap;

use gatecal_filter::{Config, Outcome, PenaltyMode};
use serde::{Deserialize, Serialize};

use super::partial_requests::{self, Carried};
use super::{Dep, Kept, Recommend, RecommendOptions, RecommendReport};
use crate::config::in_force::Shown;
use crate::config::source::{ConfigSet, SourcedConfig};
use crate::gate::reconstruct::ReconstructOptions;
use crate::gate::whatif::{CandidateConfig, CandidateSource};
use crate::input::pool::Pooled;
use crate::input::{MatchedSource, ProducerBlockSizes};
use crate::peak::agreement::LineHitRates;
use crate::peak::throughput::{PeakEstimate, VllmEstimator};
use crate::predict::per_deployment::{Objective, Requests};
use crate::report::gate_dist::InputSummary;
use crate::report::partial::{
    KeySample, MergeError, PARTIAL_SCHEMA, Part, PartInfo, canonical_key, check_config,
    check_part_overlaps, cmp_key, max_opt, merge_input, merge_shown, min_opt, producer,
};

/// The report a recommend partial finishes into.
pub const RECOMMEND: &str = "recommend";

/// Why a merged report has no predicted TTFT: a partial written by an
/// earlier version, without the requests.
pub const NO_PREDICTION_AFTER_MERGE: &str = "no predicted TTFT: the report is merged from partial reports of which one does not carry the requests the replay predicts from (written by an earlier version of gatecal: write it again, or run recommend over the logs themselves); the recommendation is chosen by excess TTFT";

/// The largest magnitude of a token count read from a partial: beyond
/// it a partial is refused (no real count comes near).
const MAX_TOKENS: i64 = 1 << 53;

/// A config of a partial report (the EPP's parameter names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
struct Cfg(#[serde(deserialize_with = "crate::config::source::config_wire::deserialize")] Config);

/// A `--candidate-config` or `--what-if` row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateWire {
    label: String,
    /// The file's filter instances, `[name, config]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<Vec<(String, Cfg)>>,
    /// The parameters set over the deployment's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    params: Option<serde_json::Map<String, serde_json::Value>>,
}

impl CandidateWire {
    fn of(c: &CandidateConfig) -> CandidateWire {
        let (file, params) = match &c.source {
            CandidateSource::File(v) => (
                Some(v.iter().map(|(n, c)| (n.clone(), Cfg(c.clone()))).collect()),
                None,
            ),
            CandidateSource::Params(m) => (None, Some(m.clone())),
        };
        CandidateWire {
            label: c.label.clone(),
            file,
            params,
        }
    }

    fn config(&self) -> Result<CandidateConfig, String> {
        let source = match (&self.file, &self.params) {
            (Some(f), None) => {
                CandidateSource::File(f.iter().map(|(n, c)| (n.clone(), c.0.clone())).collect())
            }
            (None, Some(p)) => CandidateSource::Params(p.clone()),
            _ => {
                return Err(format!(
                    "candidate {:?}: exactly one of \"file\" and \"params\"",
                    self.label
                ));
            }
        };
        Ok(CandidateConfig {
            label: self.label.clone(),
            source,
        })
    }
}

/// The options a recommend partial was computed with: partials merge only
/// when these are equal, and the merged report is finished with them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecommendSettings {
    reconstruct: ReconstructOptions,
    pinned_worse_min_ms: f64,
    window_s: Option<f64>,
    known_peak: Option<f64>,
    calibration: BTreeMap<String, PeakEstimate>,
    candidates: Vec<CandidateWire>,
    block_sizes: BTreeMap<String, ProducerBlockSizes>,
    objective: Objective,
    choose: Option<String>,
    mode: Option<PenaltyMode>,
    max_deployments: usize,
    max_vllm_lines: usize,
}

impl RecommendSettings {
    fn options(&self) -> Result<RecommendOptions, String> {
        Ok(RecommendOptions {
            reconstruct: self.reconstruct,
            pinned_worse_min_ms: self.pinned_worse_min_ms,
            window_s: self.window_s,
            user_peak: self.known_peak,
            calibration: self.calibration.clone(),
            candidates: self
                .candidates
                .iter()
                .map(CandidateWire::config)
                .collect::<Result<_, _>>()?,
            time_range: Default::default(),
            block_sizes: self.block_sizes.clone(),
            objective: self.objective,
            choose: self.choose.clone(),
            mode: self.mode,
        })
    }
}

/// A decision as a partial keeps it: `[sticky, non_sticky, matched,
/// config]` (in-flight tokens of the two best endpoints, the sticky one's
/// matched tokens, the index of its config in force), `[sticky ms,
/// non-sticky ms, config]` (predicted TTFTs), `[outcome, config]` (an
/// outcome the gate's parameters do not change) or `[config]` (gate input
/// unknown).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum KeptWire {
    Gate(i64, i64, i64, u16),
    Predicted(f64, f64, u16),
    Fixed(Outcome, u16),
    Unknown(u16),
}

mod kept_wire {
    use super::{Kept, KeptWire, MAX_TOKENS};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[(Kept, u16)], s: S) -> Result<S::Ok, S::Error> {
        let w: Vec<KeptWire> = v
            .iter()
            .map(|&(k, c)| match k {
                Kept::Gate {
                    sticky,
                    non_sticky,
                    matched,
                } => KeptWire::Gate(sticky, non_sticky, matched, c),
                Kept::Predicted { sticky, non_sticky } => {
                    KeptWire::Predicted(sticky, non_sticky, c)
                }
                Kept::Fixed(o) => KeptWire::Fixed(o, c),
                Kept::Unknown => KeptWire::Unknown(c),
            })
            .collect();
        w.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(Kept, u16)>, D::Error> {
        let w = Vec::<KeptWire>::deserialize(d)?;
        w.into_iter()
            .map(|k| {
                Ok(match k {
                    KeptWire::Gate(s, n, m, c) => {
                        if [s, n, m]
                            .iter()
                            .any(|x| x.unsigned_abs() > MAX_TOKENS as u64)
                        {
                            return Err(serde::de::Error::custom(format!(
                                "a decision's tokens out of range: {s}, {n}, {m}"
                            )));
                        }
                        (
                            Kept::Gate {
                                sticky: s,
                                non_sticky: n,
                                matched: m,
                            },
                            c,
                        )
                    }
                    KeptWire::Predicted(s, n, c) => (
                        Kept::Predicted {
                            sticky: s,
                            non_sticky: n,
                        },
                        c,
                    ),
                    KeptWire::Fixed(o, c) => (Kept::Fixed(o), c),
                    KeptWire::Unknown(c) => (Kept::Unknown, c),
                })
            })
            .collect()
    }
}

/// A deployment's calibration state, as a partial keeps it.
#[derive(Serialize, Deserialize)]
pub(super) struct DepWire {
    shown: Shown,
    configs: Vec<Cfg>,
    #[serde(with = "kept_wire")]
    kept: Vec<(Kept, u16)>,
    /// `[time, matched tokens]` of the decisions with a sticky endpoint
    /// and matched tokens.
    matched: Vec<(Option<f64>, i64)>,
    logged_released: u64,
    with_sticky: u64,
    sources: BTreeMap<MatchedSource, u64>,
    signals: crate::findings::SignalsAcc,
    /// The observed TTFT.
    observed: Requests,
    /// The requests kept for the replay (absent from partials of earlier
    /// versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replay: Option<Carried>,
    first_ts: Option<f64>,
    last_ts: Option<f64>,
}

impl DepWire {
    fn of(mut d: Dep) -> DepWire {
        let replay = Some(Carried::take(&mut d.requests));
        DepWire {
            shown: d.shown,
            configs: d.configs.into_iter().map(Cfg).collect(),
            kept: d.kept,
            matched: d.matched,
            logged_released: d.logged_released,
            with_sticky: d.with_sticky,
            sources: d.sources,
            signals: d.signals,
            observed: d.requests,
            replay,
            first_ts: d.first_ts,
            last_ts: d.last_ts,
        }
    }

    /// The deployment, and whether its requests were carried.
    fn into_dep(self) -> (Dep, bool) {
        let mut requests = self.observed;
        let carried = self.replay.is_some();
        if let Some(c) = self.replay {
            requests.set_kept(c.seen, c.keys, c.cut);
        }
        let dep = Dep {
            shown: self.shown,
            configs: self.configs.into_iter().map(|c| c.0).collect(),
            kept: self.kept,
            matched: self.matched,
            logged_released: self.logged_released,
            signals: self.signals,
            with_sticky: self.with_sticky,
            sources: self.sources,
            requests,
            first_ts: self.first_ts,
            last_ts: self.last_ts,
            unnamed_keys: KeySample::default(),
        };
        (dep, carried)
    }
}

impl Dep {
    /// Adds another part's decisions of the deployment, after this one's
    /// (the requests kept are settled by [`partial_requests::settle`]
    /// once every part is in).
    fn absorb(&mut self, mut o: Dep) {
        let index: Vec<u16> = o
            .configs
            .into_iter()
            .map(|c| {
                let i = match self.configs.iter().position(|x| *x == c) {
                    Some(i) => i,
                    None => {
                        self.configs.push(c);
                        self.configs.len() - 1
                    }
                };
                u16::try_from(i).unwrap_or(u16::MAX)
            })
            .collect();
        self.kept.extend(
            o.kept
                .into_iter()
                .map(|(k, i)| (k, index.get(usize::from(i)).copied().unwrap_or(u16::MAX))),
        );
        self.matched.extend(o.matched);
        // Saturating: a damaged partial's counts never overflow.
        self.logged_released = self.logged_released.saturating_add(o.logged_released);
        self.with_sticky = self.with_sticky.saturating_add(o.with_sticky);
        for (s, n) in o.sources {
            let c = self.sources.entry(s).or_default();
            *c = c.saturating_add(n);
        }
        self.signals.merge(&o.signals);
        self.requests.merge(&o.requests);
        let (mut seen, mut keys, cut) = self.requests.take_kept();
        let (s, k, c) = o.requests.take_kept();
        seen.extend(s);
        keys.extend(k);
        self.requests.set_kept(seen, keys, cut.saturating_add(c));
        self.first_ts = min_opt(self.first_ts, o.first_ts);
        self.last_ts = max_opt(self.last_ts, o.last_ts);
    }
}

/// One run's calibration state.
#[derive(Serialize, Deserialize)]
pub struct RecommendPart {
    /// What it covers, and its streams of decisions.
    part: Part,
    /// The input ledger.
    input: InputSummary,
    /// Deployments past the cap.
    pooled: Pooled,
    /// Stats lines past the cap, not kept.
    vllm_cut_lines: u64,
    /// Per deployment (stable name).
    deployments: BTreeMap<String, DepWire>,
    /// The stats lines, per `[deployment, pod]` as the parser gave them.
    vllm: Vec<(String, Option<String>, VllmEstimator)>,
    /// The requests the decisions routed to each engine.
    routed: VllmEstimator,
    /// The v1 lines' prefix-cache hit rates, per `[deployment, pod]`.
    line_hit_rates: Vec<(String, Option<String>, LineHitRates)>,
    /// Endpoint pod -> deployment, from the decisions.
    pods: BTreeMap<String, String>,
    /// The config in force of each deployment known from stats lines alone.
    configs: BTreeMap<String, SourcedConfig>,
}

/// A recommend partial report (`gatecal.partial/v1`, `"report":
/// "recommend"`).
#[derive(Serialize, Deserialize)]
pub struct RecommendPartial {
    /// `gatecal.partial/v1`.
    pub schema: String,
    /// `recommend`.
    pub report: String,
    /// The gatecal version that wrote (or merged) it.
    pub producer: String,
    /// The options in force.
    pub settings: RecommendSettings,
    /// The runs it holds, in canonical order (one for a run's partial).
    pub parts: Vec<RecommendPart>,
}

impl Recommend {
    /// The partial report of the input read so far, with its ledger
    /// `input`. Refused when Prometheus series were read: a partial does
    /// not carry them.
    pub fn into_partial(mut self, input: InputSummary) -> Result<RecommendPartial, String> {
        if self.prometheus.read > 0 {
            return Err(
                "a partial report does not carry Prometheus series: run recommend with the query_range responses over the whole input, or merge partials written without them"
                    .into(),
            );
        }
        self.settle();
        let settings = RecommendSettings {
            reconstruct: self.opts.reconstruct,
            pinned_worse_min_ms: self.opts.pinned_worse_min_ms,
            window_s: self.opts.window_s,
            known_peak: self.opts.user_peak,
            calibration: self.opts.calibration.clone(),
            candidates: self.opts.candidates.iter().map(CandidateWire::of).collect(),
            block_sizes: self.opts.block_sizes.clone(),
            objective: self.opts.objective,
            choose: self.opts.choose.clone(),
            mode: self.opts.mode,
            max_deployments: self.cap.pooled().max_deployments,
            max_vllm_lines: self.vllm_cut.max_lines,
        };
        let range = self.opts.time_range;
        let mut streams = BTreeMap::new();
        let mut decisions = 0;
        let (mut first, mut last) = (None, None);
        let mut keys = Vec::new();
        for (name, d) in &mut self.deps {
            decisions += d.kept.len() as u64;
            first = min_opt(first, d.first_ts);
            last = max_opt(last, d.last_ts);
            let (pods, _) = d.signals.pod_spans();
            for (pod, f, l) in pods {
                streams.insert(format!("{name}/{pod}"), [f, l]);
            }
            streams.extend(d.unnamed_keys.streams(name));
            keys.push(std::mem::take(&mut d.unnamed_keys));
        }
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
            sampled: KeySample::combine(keys),
        };
        let mut configs = BTreeMap::new();
        let names = self
            .vllm
            .keys()
            .map(|k| &k.0)
            .chain(self.line_hit_rates.keys().map(|k| &k.0))
            .chain(self.pods.values());
        for name in names {
            if !self.deps.contains_key(name) && !configs.contains_key(name) {
                let c = self.in_force.configs().lookup(name, None).clone();
                configs.insert(name.clone(), c);
            }
        }
        let part = RecommendPart {
            part,
            input,
            pooled: self.cap.pooled().clone(),
            vllm_cut_lines: self.vllm_cut.lines,
            deployments: std::mem::take(&mut self.deps)
                .into_iter()
                .map(|(k, d)| (k, DepWire::of(d)))
                .collect(),
            vllm: std::mem::take(&mut self.vllm)
                .into_iter()
                .map(|((d, p), e)| (d, p, e))
                .collect(),
            routed: std::mem::take(&mut self.routed),
            line_hit_rates: std::mem::take(&mut self.line_hit_rates)
                .into_iter()
                .map(|((d, p), e)| (d, p, e))
                .collect(),
            pods: self.pods.drain().collect(),
            configs,
        };
        Ok(RecommendPartial {
            schema: PARTIAL_SCHEMA.into(),
            report: RECOMMEND.into(),
            producer: producer(),
            settings,
            parts: vec![part],
        })
    }
}

impl RecommendPartial {
    /// The partial as one line of JSON, newline-terminated.
    pub fn to_line(&self) -> String {
        crate::report::partial::json_line(self)
    }

    /// Reads one recommend partial (one line of JSON). The error says what
    /// is wrong: not JSON (or cut short), another schema, a partial of
    /// gate-dist, a field missing or of the wrong type.
    pub fn from_json(text: &str) -> Result<RecommendPartial, String> {
        let p = crate::report::partial::parse_partial(
            text,
            RECOMMEND,
            "gate-dist merge",
            |p: &RecommendPartial| p.parts.len(),
        )?;
        p.settings.options()?;
        Ok(p)
    }

    /// Decisions counted.
    pub fn decisions(&self) -> u64 {
        self.parts.iter().map(|p| p.part.info.decisions).sum()
    }

    /// The report the partial finishes into: the one a run over its
    /// parts' input gives, the predicted TTFT included (but for partials
    /// of earlier versions, which do not carry the requests: see
    /// [`NO_PREDICTION_AFTER_MERGE`]). The parts are listed in
    /// [`RecommendReport::merged`].
    pub fn finish(self) -> Result<RecommendReport, MergeError> {
        let src = |p: &RecommendPart| p.part.info.source.clone().unwrap_or_default();
        let opts = self.settings.options().map_err(|message| MergeError {
            source: self.parts.first().map(src).unwrap_or_default(),
            message,
        })?;
        let mut r = Recommend::new(opts, ConfigSet::default())
            .with_max_deployments(self.settings.max_deployments)
            .with_max_vllm_lines(self.settings.max_vllm_lines);
        let mut input: Option<InputSummary> = None;
        let mut pooled: Option<Pooled> = None;
        let mut merged = Vec::new();
        for p in self.parts {
            let source = src(&p);
            for (name, d) in p.deployments {
                let (d, carried) = d.into_dep();
                r.merged_without_requests |= !carried;
                match r.deps.get_mut(&name) {
                    Some(mine) => {
                        check_config(&name, &mine.shown, &d.shown, &source)?;
                        merge_shown(&mut mine.shown, &d.shown);
                        mine.absorb(d);
                    }
                    None => {
                        r.deps.insert(name, d);
                    }
                }
            }
            for (d, pod, e) in p.vllm {
                r.vllm.entry((d, pod)).or_default().absorb(e);
            }
            r.routed.absorb(p.routed);
            for (d, pod, h) in p.line_hit_rates {
                r.line_hit_rates.entry((d, pod)).or_default().extend(h);
            }
            for (pod, d) in p.pods {
                r.pods.entry(pod).or_insert(d);
            }
            for (name, c) in p.configs {
                r.fallback_configs.entry(name).or_insert(c);
            }
            r.vllm_cut.lines = r.vllm_cut.lines.saturating_add(p.vllm_cut_lines);
            match &mut input {
                Some(i) => merge_input(i, p.input),
                None => input = Some(p.input),
            }
            match &mut pooled {
                Some(x) => {
                    x.deployments = x.deployments.saturating_add(p.pooled.deployments);
                    x.decisions = x.decisions.saturating_add(p.pooled.decisions);
                    x.at_least |= p.pooled.at_least;
                }
                None => pooled = Some(p.pooled),
            }
            merged.push(p.part.info);
        }
        for e in r.vllm.values_mut() {
            e.canonical();
        }
        r.routed.canonical();
        for h in r.line_hit_rates.values_mut() {
            h.canonical();
        }
        let mut carried: Vec<Carried> = r
            .deps
            .values_mut()
            .map(|d| {
                let mut c = Carried::take(&mut d.requests);
                partial_requests::settle(&mut c);
                c
            })
            .collect();
        partial_requests::cap(&mut carried.iter_mut().collect::<Vec<_>>());
        for (d, c) in r.deps.values_mut().zip(carried) {
            d.requests.set_kept(c.seen, c.keys, c.cut);
        }
        r.merged = Some(merged);
        let mut report = r.finish(input.unwrap_or_default());
        if let Some(p) = pooled {
            report.pooled = p;
        }
        Ok(report)
    }
}

fn source_of(p: &RecommendPartial) -> String {
    p.parts
        .first()
        .and_then(|x| x.part.info.source.clone())
        .unwrap_or_else(|| "(partial)".into())
}

/// Merges recommend partials read from `sources` (the names errors give):
/// checks that they were written with the same options, that no stream
/// of decisions is counted twice and that each deployment ran under one
/// config, then lists their parts in canonical order (by time, inputs and
/// source). Any grouping and order of the same partials gives the same
/// partial, byte for byte.
pub fn merge(partials: Vec<(String, RecommendPartial)>) -> Result<RecommendPartial, MergeError> {
    let mut all: Vec<RecommendPartial> = partials
        .into_iter()
        .map(|(src, mut p)| {
            for part in &mut p.parts {
                if part.part.info.source.is_none() {
                    part.part.info.source = Some(src.clone());
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
    let mut parts: Vec<RecommendPart> = all.iter_mut().flat_map(|p| p.parts.drain(..)).collect();
    parts.sort_by(|a, b| cmp_key(&canonical_key(&a.part), &canonical_key(&b.part)));
    check_part_overlaps(parts.iter().map(|p| &p.part))?;
    // Each deployment under one config, checked now rather than at finish.
    // Each part against all the parts before it: an instance the first
    // part did not see is checked against the part that first saw it.
    let mut shown: BTreeMap<&str, Shown> = BTreeMap::new();
    for p in &parts {
        let src = p.part.info.source.clone().unwrap_or_default();
        for (name, d) in &p.deployments {
            match shown.get_mut(name.as_str()) {
                Some(mine) => {
                    check_config(name, mine, &d.shown, &src)?;
                    merge_shown(mine, &d.shown);
                }
                None => {
                    shown.insert(name, d.shown.clone());
                }
            }
        }
    }
    Ok(RecommendPartial {
        schema: PARTIAL_SCHEMA.into(),
        report: RECOMMEND.into(),
        producer: producer(),
        settings: base,
        parts,
    })
}

fn settings_diff(a: &RecommendSettings, b: &RecommendSettings) -> String {
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
