//! The gate audit: decisions in, [`GateDistReport`] out.
//!
//! The report structs are the JSON schema `gatecal.gate-dist/v1`
//! (documented field by field here and in `docs/json-schema.md`).

use std::collections::{BTreeMap, HashMap};

use gatecal_filter::Config;
use serde::Serialize;

use crate::hist::Recorded;
use crate::input::DecisionInput;
use crate::reconstruct::{ReconstructOptions, Reconstructor};
use crate::records::RecordSink;
use crate::reorder::Reorder;
use crate::stats::{Stats, StatsAcc};
use crate::whatif::WhatIfSpec;

/// The schema id of the JSON report.
pub const SCHEMA: &str = "gatecal.gate-dist/v1";

/// A filter config and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourcedConfig {
    /// `default`, `flags`, or `file:PATH` (with `#instance` when the file
    /// has several filter instances).
    pub source: String,
    /// The parameters, EPP names.
    pub parameters: Config,
}

/// The filter's defaults, for a deployment no config names.
static DEFAULT_SOURCED: std::sync::LazyLock<SourcedConfig> =
    std::sync::LazyLock::new(|| SourcedConfig {
        source: "default".into(),
        parameters: Config::default(),
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
            default: vec![(
                String::new(),
                SourcedConfig {
                    source: "default".into(),
                    parameters: Config::default(),
                },
            )],
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
                std::borrow::Cow::Owned(SourcedConfig {
                    source: source.clone(),
                    parameters: parameters.clone(),
                })
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

/// Options of the audit.
#[derive(Clone, Debug)]
pub struct GateDistOptions {
    /// Reconstruction options (staleness).
    pub reconstruct: ReconstructOptions,
    /// Lower edge of pinned-worse, ms. Default 5000.
    pub pinned_worse_min_ms: f64,
    /// What-ifs to replay.
    pub what_if: Vec<WhatIfSpec>,
    /// Window length in seconds, for drift.
    pub window_s: Option<f64>,
    /// Bins of the report histogram.
    pub histogram_bins: usize,
}

impl Default for GateDistOptions {
    fn default() -> Self {
        GateDistOptions {
            reconstruct: ReconstructOptions::default(),
            pinned_worse_min_ms: 5000.0,
            what_if: WhatIfSpec::defaults(),
            window_s: None,
            histogram_bins: 40,
        }
    }
}

/// The input ledger, as reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputSummary {
    /// Input names, in the order read.
    pub inputs: Vec<String>,
    /// Lines read.
    pub lines_total: u64,
    /// Lines that fed a decision or an estimate.
    pub lines_used: u64,
    /// Lines recognised and not needed (other messages, startup lines, ...).
    pub lines_ignored: u64,
    /// Lines that could not be read as any known shape.
    pub lines_malformed: u64,
    /// Of the malformed lines, those with a number or time outside its
    /// domain (a negative or non-finite `tokenLoad`, a `ts` in year 9999).
    pub lines_out_of_range: u64,
    /// Bytes read (decompressed).
    pub bytes: u64,
    /// Decisions assembled.
    pub decisions_assembled: u64,
    /// Decisions with a filter line but missing lines (log cut, id reuse).
    pub decisions_incomplete: u64,
    /// Decisions closed early because the open-decision cap or age was hit.
    pub decisions_evicted: u64,
    /// The first malformed lines, `file:line: why`.
    pub first_malformed: Vec<String>,
}

/// The histogram of a report (for Markdown and SVG).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HistogramBins {
    /// Bin edges in ms, ascending.
    pub edges: Vec<f64>,
    /// Counts per bin.
    pub counts: Vec<u64>,
    /// Values below the first edge.
    pub below: u64,
    /// Values above the last edge.
    pub above: u64,
}

/// One time window's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowReport {
    /// Window start, seconds since the epoch.
    pub start_ts: f64,
    /// Window end (exclusive).
    pub end_ts: f64,
    /// The figures.
    #[serde(flatten)]
    pub stats: Stats,
}

/// One deployment's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeploymentReport {
    /// Deployment name.
    pub name: String,
    /// The config replayed (first filter instance when there are several).
    pub config: SourcedConfig,
    /// First decision time.
    pub first_ts: Option<f64>,
    /// Last decision time.
    pub last_ts: Option<f64>,
    /// The figures.
    #[serde(flatten)]
    pub stats: Stats,
    /// Histogram of the gate input.
    pub histogram: HistogramBins,
    /// Per window, when `--window` is set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowReport>,
}

/// The overall figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OverallReport {
    /// Always `overall`.
    pub name: String,
    /// The figures.
    #[serde(flatten)]
    pub stats: Stats,
    /// Histogram of the gate input.
    pub histogram: HistogramBins,
}

/// The options as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportOptions {
    /// `--max-staleness`, seconds.
    pub max_staleness_s: f64,
    /// `--pinned-worse-min`, ms.
    pub pinned_worse_min_ms: f64,
    /// `--window`, seconds.
    pub window_s: Option<f64>,
}

/// The whole gate-dist report: `gatecal.gate-dist/v1`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateDistReport {
    /// `gatecal.gate-dist/v1`.
    pub schema: &'static str,
    /// The input ledger.
    pub input: InputSummary,
    /// The options in force.
    pub options: ReportOptions,
    /// Per deployment, sorted by name.
    pub deployments: Vec<DeploymentReport>,
    /// Over all deployments.
    pub overall: OverallReport,
}

struct DepAcc {
    config: SourcedConfig,
    acc: StatsAcc,
    windows: BTreeMap<i64, StatsAcc>,
    first_ts: Option<f64>,
    last_ts: Option<f64>,
}

/// The audit in progress: push decisions in input order, then finish.
pub struct GateDist {
    opts: GateDistOptions,
    configs: ConfigSet,
    recon: Reconstructor,
    reorder: Reorder,
    deps: BTreeMap<String, DepAcc>,
    sink: Option<RecordSink>,
}

impl GateDist {
    /// Hands every decision that carries a record ([`DecisionInput::record`])
    /// to `sink`, completed with its gate and config ([`crate::records`]).
    pub fn with_records(mut self, sink: RecordSink) -> GateDist {
        self.sink = Some(sink);
        self
    }

    /// A new audit.
    pub fn new(opts: GateDistOptions, configs: ConfigSet) -> GateDist {
        GateDist {
            recon: Reconstructor::new(opts.reconstruct),
            reorder: Reorder::new(opts.reconstruct.reorder_window_s),
            opts,
            configs,
            deps: BTreeMap::new(),
            sink: None,
        }
    }

    /// Adds one decision. Decisions may arrive slightly out of time order
    /// (see [`crate::reorder`]).
    pub fn push(&mut self, d: DecisionInput) {
        // The buffer is taken out while it hands the decisions now due
        // straight to `process` (an empty stand-in allocates nothing).
        let mut reorder = std::mem::replace(&mut self.reorder, Reorder::new(0.0));
        reorder.push(d, &mut |x| self.process(x));
        self.reorder = reorder;
    }

    fn process(&mut self, mut d: DecisionInput) {
        let sc = self.configs.for_decision(&d);
        // The sample takes the request id over (the reconstruction does not
        // read it): no copy of it per decision.
        let request_id = d.request_id.take();
        let mut sample = self.recon.sample(&d, &sc.parameters);
        sample.request_id = request_id;
        if let (Some(sink), Some(r)) = (self.sink.as_mut(), d.record.take()) {
            sink(crate::records::complete(*r, &sample, &sc));
        }
        let n = self.opts.what_if.len();
        let pmin = self.opts.pinned_worse_min_ms;
        let dep = match self.deps.get_mut(&d.deployment) {
            Some(dep) => dep,
            None => self
                .deps
                .entry(d.deployment.clone())
                .or_insert_with(|| DepAcc {
                    config: sc.clone().into_owned(),
                    acc: StatsAcc::new(pmin, n),
                    windows: BTreeMap::new(),
                    first_ts: None,
                    last_ts: None,
                }),
        };
        dep.acc.add(&sample, &sc.parameters, &self.opts.what_if);
        if let Some(ts) = d.ts.filter(|t| t.is_finite()) {
            dep.first_ts = Some(dep.first_ts.map_or(ts, |f| f.min(ts)));
            dep.last_ts = Some(dep.last_ts.map_or(ts, |l| l.max(ts)));
            if let Some(w) = self.opts.window_s.filter(|w| *w > 0.0) {
                let idx = (ts / w).floor() as i64;
                dep.windows
                    .entry(idx)
                    .or_insert_with(|| StatsAcc::new(pmin, n))
                    .add(&sample, &sc.parameters, &self.opts.what_if);
            }
        }
    }

    /// The report.
    pub fn finish(mut self, input: InputSummary) -> GateDistReport {
        let mut due = Vec::new();
        self.reorder.finish(&mut |x| due.push(x));
        for x in due {
            self.process(x);
        }
        let bins = self.opts.histogram_bins;
        let mut overall = StatsAcc::new(self.opts.pinned_worse_min_ms, self.opts.what_if.len());
        let mut deployments = Vec::new();
        for (name, dep) in self.deps {
            overall.merge(&dep.acc);
            let recorded = dep.acc.histogram().recorded();
            let stats = dep.acc.finish_recorded(&recorded);
            let histogram = histogram_bins(&recorded, stats.bar_ms, bins);
            let windows = match self.opts.window_s {
                Some(w) => dep
                    .windows
                    .iter()
                    .map(|(i, a)| WindowReport {
                        start_ts: *i as f64 * w,
                        end_ts: (*i + 1) as f64 * w,
                        stats: a.finish(),
                    })
                    .collect(),
                None => Vec::new(),
            };
            deployments.push(DeploymentReport {
                name,
                config: dep.config,
                first_ts: dep.first_ts,
                last_ts: dep.last_ts,
                stats,
                histogram,
                windows,
            });
        }
        let recorded = overall.histogram().recorded();
        let stats = overall.finish_recorded(&recorded);
        let histogram = histogram_bins(&recorded, stats.bar_ms, bins);
        GateDistReport {
            schema: SCHEMA,
            input,
            options: ReportOptions {
                max_staleness_s: self.opts.reconstruct.max_staleness_s,
                pinned_worse_min_ms: self.opts.pinned_worse_min_ms,
                window_s: self.opts.window_s,
            },
            deployments,
            overall: OverallReport {
                name: "overall".into(),
                stats,
                histogram,
            },
        }
    }
}

/// Linear bins from `min(p0.5, 0)` to `max(p99.9, bar)` (the bar only when
/// within 4x of p99.9, so that a far-away bar does not squash the shape),
/// rounded out to a round step.
fn histogram_bins(h: &Recorded, bar: Option<f64>, n: usize) -> HistogramBins {
    let (Some(lo_q), Some(hi_q)) = (h.quantile(0.005), h.quantile(0.999)) else {
        return HistogramBins::default();
    };
    let n = n.max(2);
    let mut lo = lo_q.min(0.0);
    let mut hi = hi_q.max(0.0);
    if let Some(b) = bar.filter(|b| *b > 0.0 && *b <= 4.0 * hi_q.max(1.0)) {
        hi = hi.max(b * 1.05);
    }
    if hi - lo <= 0.0 {
        hi = lo + 1.0;
    }
    let step = nice_step((hi - lo) / n as f64);
    lo = (lo / step).floor() * step;
    hi = (hi / step).ceil() * step;
    let k = ((hi - lo) / step).round().max(1.0) as usize;
    let edges: Vec<f64> = (0..=k).map(|i| lo + i as f64 * step).collect();
    let (counts, below, above) = h.bins(&edges);
    HistogramBins {
        edges,
        counts,
        below,
        above,
    }
}

/// The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least `x`.
fn nice_step(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= x {
            return m * p;
        }
    }
    10.0 * p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{LoggedGate, ScoredEndpoint};
    use gatecal_filter::{Candidate, Outcome};

    fn exact(ts: f64, id: &str, sticky_tokens: i64, free_tokens: i64) -> DecisionInput {
        DecisionInput {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some(id.into()),
            exact: Some(vec![
                Candidate::new("ns/a")
                    .with_match(22, 25, 64)
                    .with_in_flight_tokens(sticky_tokens),
                Candidate::new("ns/b")
                    .with_match(0, 25, 64)
                    .with_in_flight_tokens(free_tokens),
            ]),
            ..DecisionInput::default()
        }
    }

    #[test]
    fn exact_decisions_replay_and_count() {
        let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        // 2448.5 ms: held; (300000 - 2000) / 15928 s = 18709 ms: released.
        g.push(exact(1.0, "r1", 41_000, 2_000));
        g.push(exact(2.0, "r2", 300_000, 2_000));
        // Pinned 5-18 s: 100000 tokens = 6278 ms.
        g.push(exact(3.0, "r3", 102_000, 2_000));
        let r = g.finish(InputSummary::default());
        let d = &r.deployments[0];
        assert_eq!(d.stats.decisions, 3);
        assert_eq!(d.stats.outcomes["sticky"], 2);
        assert_eq!(d.stats.outcomes["load_override"], 1);
        assert_eq!(d.stats.evidence.observed, 3);
        assert_eq!(d.stats.released, 1);
        assert_eq!(d.stats.pinned_worse.count, 1);
        assert_eq!(d.stats.gate_input_ms.count, 3);
        // Static 1000 ms releases all three; matched tokens (1408 tokens) too.
        let w = &d.stats.what_if;
        assert_eq!(w[0].max_ttft_penalty_ms, Some(1000.0));
        assert_eq!(w[0].released, 3);
        assert_eq!(w[5].released, 0, "30 s holds all");
        assert_eq!(w[6].released, 3);
        assert_eq!(r.overall.stats.decisions, 3);
        assert_eq!(d.stats.self_check.replayed, 0, "no logged outcome to check");
    }

    #[test]
    fn logged_break_is_exact_and_self_checked() {
        let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        g.push(DecisionInput {
            deployment: "d".into(),
            ts: Some(5.0),
            request_id: Some("req-0042".into()),
            outcome: Some(Outcome::LoadOverride),
            logged_gate: Some(LoggedGate {
                best_sticky_ttft_ms: Some(18834.756403817177),
                best_non_sticky_ttft_ms: Some(125.56504269211452),
                penalty_ms: 18709.191361125064,
                max_penalty_ms: Some(18000.0),
            }),
            scored: vec![ScoredEndpoint {
                endpoint: "llm-d/a".into(),
                token_load: Some(302_000.0),
                prefix_score: None,
                in_flight_tokens: None,
            }],
            ..DecisionInput::default()
        });
        let r = g.finish(InputSummary::default());
        let s = &r.deployments[0].stats;
        assert_eq!(s.evidence.logged, 1);
        assert_eq!(s.self_check.replayed, 1);
        assert_eq!(s.self_check.agreed, 1);
        assert_eq!(s.self_check.bar_mismatches, 0);
        assert!((s.gate_input_ms.max.unwrap() - 18709.191361125064).abs() < 1e-9);
    }

    #[test]
    fn an_empty_config_set_falls_back_to_the_defaults() {
        let set = ConfigSet {
            default: Vec::new(),
            per_deployment: HashMap::new(),
        };
        assert_eq!(set.lookup("x", Some("y")).parameters, Config::default());
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(420.0), 500.0);
        assert_eq!(nice_step(1000.0), 1000.0);
        assert_eq!(nice_step(2100.0), 2500.0);
    }
}
