//! The gate audit: decisions in, [`GateDistReport`] out.
//!
//! The report structs (`schema.rs`) are the JSON schema
//! `gatecal.gate-dist/v3` (documented field by field there and in
//! `docs/json-schema.md`).

use std::collections::BTreeMap;

use crate::gate::hist::Recorded;
use crate::gate::reconstruct::Reconstructor;
use crate::gate::reorder::{InOrder, Reorder};
use crate::gate::stats::{ResolvedCandidate, Stats, StatsAcc};
use crate::input::DecisionInput;
use crate::report::intake::Intake;
use crate::report::records::RecordSink;

use crate::config::source::{ConfigSet, SourcedConfig};
use crate::predict::per_deployment::{
    MAX_REPLAY_REQUESTS_TOTAL, Objective, Requests, SelfCheck, TtftModel, self_check,
};

mod schema;

pub use schema::{
    DeploymentReport, GateDistOptions, GateDistReport, HistogramBins, InputSummary, OverallReport,
    ReportOptions, SCHEMA, TimeRange, TraceSummary, WindowReport,
};

/// One deployment's accumulators: what a partial report holds of it
/// (`docs/partial-report.md`).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct DepAcc {
    /// The config reported, with every filter instance's disagreements.
    pub(crate) shown: crate::config::in_force::Shown,
    pub(crate) acc: StatsAcc,
    pub(crate) windows: BTreeMap<i64, StatsAcc>,
    pub(crate) first_ts: Option<f64>,
    pub(crate) last_ts: Option<f64>,
    /// Per filter instance, the candidates resolved over its config in
    /// force (fixed once the deployment's configs are settled).
    #[serde(skip)]
    candidates: Vec<(Option<String>, Vec<ResolvedCandidate>)>,
    /// What the findings read, and the per-replica view.
    pub(crate) signals: crate::findings::SignalsAcc,
    /// The observed TTFT of its requests, and, with candidates, the
    /// requests kept for the predicted TTFT (a partial report keeps the
    /// observed TTFT alone).
    pub(crate) requests: Requests,
    /// A sample of the counted decisions whose lines name no EPP pod
    /// ([`crate::report::partial::sampled_key`]), for the double-counting
    /// check of a merge.
    #[serde(skip)]
    pub(crate) unnamed_keys: crate::report::parts::KeySample,
}

impl DepAcc {
    /// Adds another part's decisions of the same deployment (read after
    /// `self`'s).
    pub(crate) fn merge(&mut self, o: &DepAcc) {
        self.acc.merge(&o.acc);
        for (i, w) in &o.windows {
            match self.windows.get_mut(i) {
                Some(mine) => mine.merge(w),
                None => {
                    self.windows.insert(*i, w.clone());
                }
            }
        }
        for t in [o.first_ts, o.last_ts].into_iter().flatten() {
            self.first_ts = Some(self.first_ts.map_or(t, |f| f.min(t)));
            self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
        }
        self.signals.merge(&o.signals);
        self.requests.merge(&o.requests);
    }
}

/// What finishing a report needs beyond the accumulators: the options
/// that shape its figures, as a partial report records them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FinishView {
    /// `--bins`.
    pub(crate) histogram_bins: usize,
    /// `--pinned-worse-min`, ms.
    pub(crate) pinned_worse_min_ms: f64,
    /// What-ifs replayed.
    pub(crate) what_ifs: usize,
    /// `--window`, seconds.
    pub(crate) window_s: Option<f64>,
    /// `--max-staleness`, seconds.
    pub(crate) max_staleness_s: f64,
}

impl FinishView {
    pub(crate) fn of(opts: &GateDistOptions) -> FinishView {
        FinishView {
            histogram_bins: opts.histogram_bins,
            pinned_worse_min_ms: opts.pinned_worse_min_ms,
            what_ifs: opts.what_if.len(),
            window_s: opts.window_s,
            max_staleness_s: opts.reconstruct.max_staleness_s,
        }
    }
}

impl InOrder for GateDist {
    fn buffer(&mut self) -> &mut Reorder {
        &mut self.reorder
    }

    fn take(&mut self, d: DecisionInput) {
        self.process(d);
    }
}

impl Intake for GateDist {
    fn intake(&mut self) -> crate::report::intake::Parts<'_> {
        (&self.in_force, &self.opts.block_sizes, &mut self.cap)
    }

    fn process(&mut self, d: DecisionInput) {
        GateDist::process(self, d);
    }
}

/// The audit in progress: push decisions in input order, then finish.
pub struct GateDist {
    opts: GateDistOptions,
    /// The configs in force, and the decisions waiting for them.
    in_force: crate::config::in_force::InForce,
    recon: Reconstructor,
    reorder: Reorder,
    deps: BTreeMap<String, DepAcc>,
    sink: Option<RecordSink>,
    /// Only the records are made ([`GateDist::records_only`]).
    records_only: bool,
    cap: crate::input::pool::DeploymentCap,
    /// Requests the replay may still keep, all deployments together.
    room: usize,
    /// Threads that may settle the decisions still waiting at the end
    /// ([`GateDist::with_threads`]).
    threads: usize,
}

impl GateDist {
    /// Hands every decision that carries a record ([`DecisionInput::record`])
    /// to `sink`, completed with its gate and config (`report::records`).
    pub fn with_records(mut self, sink: RecordSink) -> GateDist {
        self.sink = Some(sink);
        self
    }

    /// Makes each decision's record ([`GateDist::with_records`]) and
    /// nothing else: the decisions are reconstructed under their config in
    /// force, and no figure is kept for the report (which counts no
    /// decision). `--follow`'s audit of the whole run, whose records each
    /// report audits again: its memory does not grow with the run.
    pub fn records_only(mut self) -> GateDist {
        self.records_only = true;
        self
    }

    /// A new audit.
    pub fn new(opts: GateDistOptions, configs: ConfigSet) -> GateDist {
        GateDist {
            recon: Reconstructor::new(opts.reconstruct),
            reorder: Reorder::new(opts.reconstruct.reorder_window_s),
            opts,
            in_force: crate::config::in_force::InForce::new(configs),
            deps: BTreeMap::new(),
            sink: None,
            records_only: false,
            cap: crate::input::pool::DeploymentCap::default(),
            room: MAX_REPLAY_REQUESTS_TOTAL,
            threads: 1,
        }
    }

    /// Lets up to `n` threads (this one included) settle, at the end of
    /// the input, the deployments whose log never showed their bar: each
    /// deployment's decisions are reconstructed and counted on their own,
    /// so the deployments are shared out between the threads and their
    /// figures and records come out as with one thread. Default 1; with
    /// `--candidate-config` or `--what-if` configs the settle stays on one
    /// thread (the requests the replay keeps are shared out in order).
    pub fn with_threads(mut self, n: usize) -> GateDist {
        self.threads = n.max(1);
        self
    }

    /// Lets at most `max` decisions wait for their deployment's bar, all
    /// deployments together (default
    /// [`crate::MAX_PENDING_DECISIONS`]; `--follow` uses
    /// [`crate::MAX_PENDING_DECISIONS_FOLLOWING`]).
    pub fn with_max_pending(mut self, max: usize) -> GateDist {
        self.in_force.set_max_pending(max);
        self
    }

    /// Tracks at most `max` deployments (default
    /// [`crate::MAX_DEPLOYMENTS`]); the decisions of the others are
    /// pooled into [`crate::OTHER_DEPLOYMENT`] and counted in
    /// [`GateDistReport::pooled`].
    pub fn with_max_deployments(mut self, max: usize) -> GateDist {
        self.cap = crate::input::pool::DeploymentCap::new(max);
        self
    }

    /// Adds one decision. Decisions may arrive slightly out of time order
    /// (see [`crate::Reorder`]).
    pub fn push(&mut self, d: DecisionInput) {
        self.take_buffered(d);
    }

    /// Adds one decision given in the order this audit's reorder buffer
    /// would release it ([`crate::release_order`] over the times of its
    /// decisions, [`GateDist::reorder_window_s`]): it is handled at once,
    /// not held in the buffer. Not to be mixed with [`GateDist::push`].
    pub fn push_in_order(&mut self, d: DecisionInput) {
        self.take_released(d);
    }

    /// The window of its reorder buffer, seconds of log time.
    pub fn reorder_window_s(&self) -> f64 {
        self.opts.reconstruct.reorder_window_s
    }

    /// Hands the decision to [`crate::config::in_force::InForce`], which holds a
    /// deployment's decisions until the bar in force of each of its filter
    /// instances is known, so that every one is reconstructed and replayed
    /// under the config the EPP ran.
    fn process(&mut self, d: DecisionInput) {
        let (recon, sink, opts, room) =
            (&mut self.recon, &mut self.sink, &self.opts, &mut self.room);
        let (deps, only) = (&mut self.deps, self.records_only);
        self.in_force.push(d, &mut |sc, d| {
            let deps = (!only).then_some(&mut *deps);
            handle(recon, deps, sink, opts, room, sc, d)
        });
    }

    /// The report.
    pub fn finish(self, input: InputSummary) -> GateDistReport {
        let view = FinishView::of(&self.opts);
        let range = self.opts.time_range;
        let opts = self.opts.clone();
        let threads = self.threads;
        let (deps, pooled) = self.settle();
        finish_parts(
            deps,
            pooled,
            &view,
            range,
            input,
            Vec::new(),
            Some(&opts),
            threads,
        )
    }

    /// The options that shape the figures, as a partial report records
    /// them.
    pub(crate) fn options(&self) -> &GateDistOptions {
        &self.opts
    }

    /// Every decision handled: the deployments' accumulators, and the
    /// deployments pooled.
    pub(crate) fn settle(mut self) -> (BTreeMap<String, DepAcc>, crate::input::pool::Pooled) {
        self.drain();
        // Deployments whose log never showed the bar: the configs as given.
        if self.threads > 1 && self.opts.candidates.is_empty() && !self.records_only {
            let waiting = self.in_force.take_waiting();
            if waiting.len() > 1 && waiting.iter().all(|w| !self.deps.contains_key(&w.name)) {
                settle_apart(
                    waiting,
                    self.threads,
                    &self.opts,
                    &mut self.deps,
                    &mut self.sink,
                );
            } else {
                let (recon, sink, opts, room) =
                    (&mut self.recon, &mut self.sink, &self.opts, &mut self.room);
                for mut w in waiting {
                    for d in std::mem::take(&mut w.decisions) {
                        if let Some(sc) = w.config_of(&d) {
                            handle(recon, Some(&mut self.deps), sink, opts, room, sc, d);
                        }
                    }
                }
            }
        }
        let (recon, sink, opts, room) =
            (&mut self.recon, &mut self.sink, &self.opts, &mut self.room);
        crate::report::intake::settle_waiting(
            &mut self.in_force,
            &mut self.deps,
            self.records_only,
            |deps, sc, d| handle(recon, deps, sink, opts, room, sc, d),
        );
        (self.deps, self.cap.pooled().clone())
    }
}

/// Settles the deployments `waiting` (by name, none of them handled
/// before) on up to `threads` threads, this one included: each thread
/// reconstructs and counts its share of the deployments with a
/// reconstruction of its own, the larger deployments shared out first.
/// Their accumulators join `deps`, and their records reach `sink` in the
/// order one thread would have made them (by deployment name, then in
/// the order pushed). Only without candidates, whose replay shares one
/// budget of requests in order.
fn settle_apart(
    waiting: Vec<crate::config::in_force::Waiting>,
    threads: usize,
    opts: &GateDistOptions,
    deps: &mut BTreeMap<String, DepAcc>,
    sink: &mut Option<RecordSink>,
) {
    let n = threads.min(waiting.len()).max(1);
    // Largest first, each to the least loaded thread.
    let mut order: Vec<usize> = (0..waiting.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(waiting[i].decisions.len()));
    let mut load = vec![0usize; n];
    let mut share = vec![0usize; waiting.len()];
    for i in order {
        let t = (0..n).min_by_key(|&t| load[t]).unwrap_or(0);
        load[t] += waiting[i].decisions.len();
        share[i] = t;
    }
    let mut groups: Vec<Vec<(usize, crate::config::in_force::Waiting)>> =
        (0..n).map(|_| Vec::new()).collect();
    for (i, w) in waiting.into_iter().enumerate() {
        groups[share[i]].push((i, w));
    }
    let keep_records = sink.is_some();
    let mut first = groups.swap_remove(0);
    let done: Vec<Settled> = std::thread::scope(|scope| {
        let others: Vec<_> = groups
            .into_iter()
            .map(|g| scope.spawn(move || settle_group(g, opts, keep_records)))
            .collect();
        let mut done = vec![settle_group(std::mem::take(&mut first), opts, keep_records)];
        for h in others {
            match h.join() {
                Ok(s) => done.push(s),
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        done
    });
    let mut records: Vec<(usize, Vec<gatecal_parser::DecisionRecord>)> = Vec::new();
    for s in done {
        deps.extend(s.deps);
        records.extend(s.records);
    }
    if let Some(sink) = sink.as_mut() {
        records.sort_by_key(|(i, _)| *i);
        for r in records.into_iter().flat_map(|(_, r)| r) {
            sink(r);
        }
    }
}

/// What one thread of [`settle_apart`] gives back: its deployments'
/// accumulators, and each deployment's records (by its index).
struct Settled {
    deps: BTreeMap<String, DepAcc>,
    records: Vec<(usize, Vec<gatecal_parser::DecisionRecord>)>,
}

/// Settles one thread's deployments of [`settle_apart`].
fn settle_group(
    group: Vec<(usize, crate::config::in_force::Waiting)>,
    opts: &GateDistOptions,
    keep_records: bool,
) -> Settled {
    let mut recon = Reconstructor::new(opts.reconstruct);
    let mut deps = BTreeMap::new();
    // Not drawn on without candidates.
    let mut room = MAX_REPLAY_REQUESTS_TOTAL;
    let mut records = Vec::new();
    for (i, mut w) in group {
        let kept = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut sink: Option<RecordSink> = keep_records.then(|| {
            let kept = kept.clone();
            Box::new(move |r| kept.borrow_mut().push(r)) as RecordSink
        });
        for d in std::mem::take(&mut w.decisions) {
            if let Some(sc) = w.config_of(&d) {
                handle(
                    &mut recon,
                    Some(&mut deps),
                    &mut sink,
                    opts,
                    &mut room,
                    sc,
                    d,
                );
            }
        }
        drop(sink);
        if keep_records {
            records.push((i, kept.take()));
        }
    }
    Settled { deps, records }
}

impl crate::report::intake::Shows for DepAcc {
    fn shown(&mut self) -> &mut crate::config::in_force::Shown {
        &mut self.shown
    }
}

/// The report of settled accumulators: the one path a run and a merge of
/// partial reports finish by. The deployments' rows are made on up to
/// `threads` threads (each row reads its own deployment alone) and kept
/// in name order, so the report is the same on any number of threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_parts(
    deps: BTreeMap<String, DepAcc>,
    pooled: crate::input::pool::Pooled,
    view: &FinishView,
    range: TimeRange,
    input: InputSummary,
    merged: Vec<crate::report::parts::PartInfo>,
    opts: Option<&GateDistOptions>,
    threads: usize,
) -> GateDistReport {
    let bins = view.histogram_bins;
    let mut overall = StatsAcc::new(view.pinned_worse_min_ms, view.what_ifs);
    for dep in deps.values() {
        overall.merge(&dep.acc);
    }
    let deps: Vec<(String, DepAcc)> = deps.into_iter().collect();
    let rows: Vec<(DeploymentReport, Vec<crate::findings::Finding>)> = crate::par::map(
        deps,
        threads,
        |_| 0,
        |(name, dep)| deployment_row(name, dep, view, opts),
    );
    let mut deployments = Vec::with_capacity(rows.len());
    let mut findings = Vec::new();
    for (row, found) in rows {
        deployments.push(row);
        findings.extend(found);
    }
    let recorded = overall.histogram().recorded();
    let stats = overall.finish_recorded(&recorded);
    let histogram = histogram_bins(&recorded, stats.bar_ms, bins);
    crate::findings::sort(&mut findings);
    GateDistReport {
        schema: SCHEMA,
        findings,
        input,
        options: ReportOptions {
            max_staleness_s: view.max_staleness_s,
            pinned_worse_min_ms: view.pinned_worse_min_ms,
            window_s: view.window_s,
            since: range.since,
            until: range.until,
        },
        pooled,
        merged,
        deployments,
        overall: OverallReport {
            name: "overall".into(),
            stats,
            histogram,
        },
    }
}

/// One deployment's row of the report, and its findings.
fn deployment_row(
    name: String,
    mut dep: DepAcc,
    view: &FinishView,
    opts: Option<&GateDistOptions>,
) -> (DeploymentReport, Vec<crate::findings::Finding>) {
    let recorded = dep.acc.histogram().recorded();
    let mut stats = dep.acc.finish_recorded(&recorded);
    // Predicted TTFT needs the requests a run keeps; a merge of
    // partial reports has none (`opts` is `None`).
    let predicted = opts
        .filter(|o| !o.candidates.is_empty())
        .map(|o| predict_rows(&name, &mut dep, &mut stats, o));
    let histogram = histogram_bins(&recorded, stats.bar_ms, view.histogram_bins);
    let windows = match view.window_s {
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
    let findings = crate::findings::rules::all(&crate::findings::rules::View {
        name: &name,
        config: &dep.shown.config,
        signals: &dep.signals,
        decisions: stats.decisions,
        released_share: stats.released_share,
        pinned_worse_share: stats.pinned_worse.share,
        pinned_worse_min_ms: view.pinned_worse_min_ms,
        gate_p50_ms: stats.gate_input_ms.p50,
        suggested_bar_ms: None,
        measured_peak: None,
        fitted_peak: None,
        vllm_hit_rate: None,
    });
    let row = DeploymentReport {
        name,
        config: dep.shown.config,
        first_ts: dep.first_ts,
        last_ts: dep.last_ts,
        stats,
        histogram,
        observed_ttft_ms: dep.requests.observed(),
        observed_ttft_by_endpoint_ms: dep.requests.observed_by_endpoint(),
        ttft_model: predicted.as_ref().map(|p| p.model.clone()),
        ttft_self_check: predicted.as_ref().map(|p| p.check.clone()),
        warnings: predicted.map(|p| p.warnings).unwrap_or_default(),
        windows,
        replicas: dep.signals.replicas(),
        buckets: crate::report::Buckets {
            gate_input_ms: recorded.buckets().to_vec(),
            observed_ttft_ms: dep.requests.observed_buckets(),
        },
    };
    (row, findings)
}

/// Adds one decision under its config in force `sc` (to `deps`, unless
/// only its record is made: `None`).
fn handle(
    recon: &mut Reconstructor,
    deps: Option<&mut BTreeMap<String, DepAcc>>,
    sink: &mut Option<RecordSink>,
    opts: &GateDistOptions,
    room: &mut usize,
    sc: &SourcedConfig,
    mut d: DecisionInput,
) {
    // The sample takes the request id over (the reconstruction does not
    // read it): no copy of it per decision.
    let request_id = d.request_id.take();
    let mut sample = recon.sample(&d, &sc.parameters);
    // Outside `--since`/`--until`: it warmed the reconstruction up, and is
    // neither counted nor written.
    if !opts.time_range.contains(d.ts) {
        return;
    }
    sample.request_id = request_id;
    if let (Some(sink), Some(r)) = (sink.as_mut(), d.record.take()) {
        sink(crate::report::records::complete(*r, &sample, sc, &d));
    }
    let Some(deps) = deps else {
        return;
    };
    let n = opts.what_if.len();
    let pmin = opts.pinned_worse_min_ms;
    let dep = match deps.get_mut(d.deployment.as_str()) {
        Some(dep) => dep,
        None => deps
            .entry(d.deployment.to_string())
            .or_insert_with(|| DepAcc {
                shown: crate::config::in_force::Shown::new(sc, d.filter.as_deref()),
                acc: StatsAcc::new(pmin, n),
                windows: BTreeMap::new(),
                first_ts: None,
                last_ts: None,
                candidates: Vec::new(),
                signals: crate::findings::SignalsAcc::default(),
                requests: Requests::default(),
                unnamed_keys: Default::default(),
            }),
    };
    if d.epp_pod.is_none() {
        dep.unnamed_keys.add(
            sample.request_id.as_deref(),
            d.ts,
            d.unnamed_source.as_deref(),
        );
    }
    // The requests are kept for the replay only when a candidate's TTFT is
    // to be predicted.
    if opts.candidates.is_empty() {
        dep.requests.observe(
            sample.request_id.as_deref(),
            d.ts,
            d.chosen.as_deref(),
            d.observed_ttft_ms,
        );
    } else {
        dep.requests
            .push_with_id(sample.request_id.as_deref(), &d, room);
    }
    dep.shown.note(d.filter.as_deref(), sc);
    dep.acc.add(&sample, &sc.parameters, &opts.what_if);
    dep.signals.add(&d, &sample, &sc.parameters, pmin);
    let candidates = if opts.candidates.is_empty() {
        None
    } else {
        let i = match dep
            .candidates
            .iter()
            .position(|(f, _)| f.as_deref() == d.filter.as_deref())
        {
            Some(i) => i,
            None => {
                let resolved = opts
                    .candidates
                    .iter()
                    .map(|c| {
                        let r = c.resolve(&sc.parameters, d.filter.as_deref());
                        (c.label.clone(), r.map_err(|e| e.to_string()))
                    })
                    .collect();
                dep.candidates
                    .push((d.filter.as_deref().map(str::to_owned), resolved));
                dep.candidates.len() - 1
            }
        };
        dep.acc.add_candidates(&sample, &dep.candidates[i].1);
        Some(i)
    };
    if let Some(ts) = d.ts.filter(|t| t.is_finite()) {
        dep.first_ts = Some(dep.first_ts.map_or(ts, |f| f.min(ts)));
        dep.last_ts = Some(dep.last_ts.map_or(ts, |l| l.max(ts)));
        if let Some(w) = opts.window_s.filter(|w| *w > 0.0) {
            let idx = (ts / w).floor() as i64;
            let w = dep
                .windows
                .entry(idx)
                .or_insert_with(|| StatsAcc::new(pmin, n));
            w.add(&sample, &sc.parameters, &opts.what_if);
            if let Some(i) = candidates {
                w.add_candidates(&sample, &dep.candidates[i].1);
            }
        }
    }
}

/// What the predicted TTFT of a deployment's rows rests on.
struct Predicted {
    model: TtftModel,
    check: Option<SelfCheck>,
    warnings: Vec<String>,
}

/// Predicts the TTFT of the `current` row and of every candidate row of
/// `stats` (a deployment's), with the engine fitted to the deployment's
/// own observed first tokens ([`crate::predict`]), and checks the
/// `current` row against the observed TTFT.
fn predict_rows(
    name: &str,
    dep: &mut DepAcc,
    stats: &mut Stats,
    opts: &GateDistOptions,
) -> Predicted {
    let current = dep.shown.config.parameters.clone();
    let block = crate::input::block_sizes_for(&opts.block_sizes, name).map_or_else(
        || {
            crate::input::ProducerBlockSizes::default()
                .approximate_producer
                .tokens
        },
        |b| b.approximate_producer.tokens,
    );
    let mut engine = dep.requests.engine(
        current.peak_prefill_throughput,
        current.affinity_threshold,
        block,
    );
    engine.assume_config(&current);
    let mut warnings = Vec::new();
    warnings.extend(dep.requests.old_records());
    let observed = dep.requests.observed();
    let no_prediction = if engine.model.tokens_per_s.is_none() {
        format!(
            "no engine model ({})",
            engine.model.source.trim_start_matches("none: ")
        )
    } else {
        "no request to replay".to_string()
    };
    let (cur_ttft, cur_hit) = match engine.predict(&current, &current) {
        Some((t, h)) => (Some(t), h),
        None => (None, None),
    };
    stats.current.predicted_ttft_ms = Some(cur_ttft.clone());
    stats.current.predicted_prefix_hit_share = Some(cur_hit);
    // The candidates resolved for the deployment's first filter instance,
    // the one whose config is shown.
    let resolved = dep
        .candidates
        .iter()
        .find(|(f, _)| *f == dep.shown.instance)
        .or(dep.candidates.first())
        .map(|(_, r)| r.as_slice())
        .unwrap_or(&[]);
    for c in stats.candidates.iter_mut() {
        let config = resolved
            .iter()
            .find(|(label, _)| *label == c.label)
            .map(|(_, r)| r.clone());
        let p = match config {
            Some(Ok(config)) => engine.predict(&current, &config),
            Some(Err(e)) => {
                warnings.push(format!(
                    "candidate {}: no predicted TTFT: not valid for this deployment ({e})",
                    c.label
                ));
                None
            }
            None => None,
        };
        match p {
            Some((t, h)) => {
                c.predicted_ttft_ms = Some(Some(t));
                c.predicted_prefix_hit_share = Some(h);
            }
            None => {
                c.predicted_ttft_ms = Some(None);
                c.predicted_prefix_hit_share = Some(None);
            }
        }
    }
    if cur_ttft.is_none() {
        warnings.push(format!("no predicted TTFT: {no_prediction}"));
    }
    if engine.model.requests_cut > 0 {
        warnings.push(format!(
            "the predicted TTFT rests on the first {} requests; {} later one(s) were not replayed (memory cap)",
            engine.model.workload.requests, engine.model.requests_cut
        ));
    }
    if observed.n == 0 {
        warnings.push(format!(
            "no self-check of the predicted TTFT: no observed TTFT ({})",
            observed.source.trim_start_matches("none: ")
        ));
    }
    let check = cur_ttft
        .as_ref()
        .and_then(|c| self_check(c, &observed, Objective::P90));
    if let Some(c) = check.as_ref().filter(|c| !c.passed) {
        let outside: Vec<String> = c
            .quantiles
            .iter()
            .filter(|q| !q.inside && q.quantile != "p99")
            .map(|q| {
                format!(
                    "{} predicted {:.0} ms [{:.0}–{:.0}] against {:.0} ms observed",
                    q.quantile, q.predicted, q.interval[0], q.interval[1], q.observed
                )
            })
            .collect();
        let mut why = outside;
        why.extend(c.outcomes_failure());
        warnings.push(format!(
            "the predicted TTFT fails its self-check ({}): the what-if predictions are not to be acted on",
            why.join(", ")
        ));
    }
    Predicted {
        model: engine.model,
        check,
        warnings,
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
    use crate::config::in_force::MAX_PENDING_DECISIONS;
    use crate::config::source::ParamSource;
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

    fn scored(ep: &str, load: f64) -> ScoredEndpoint {
        ScoredEndpoint {
            endpoint: ep.into(),
            token_load: Some(load),
            prefix_score: None,
            in_flight_tokens: None,
        }
    }

    /// A decision that kept both endpoints (no sticky one): it measures both.
    fn keep_all(ts: f64, a: f64, b: f64) -> DecisionInput {
        DecisionInput {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some(format!("k{ts}").into()),
            outcome: Some(Outcome::NoMatch),
            total: Some(2),
            scored: vec![scored("ns/a", a), scored("ns/b", b)],
            affinity_threshold: Some(0.8),
            ..DecisionInput::default()
        }
    }

    /// A decision narrowed to `ns/a`, whose `tokenLoad` is `a`.
    fn narrowed(ts: f64, id: &str, a: f64) -> DecisionInput {
        DecisionInput {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some(id.into()),
            outcome: Some(Outcome::Sticky),
            sticky_count: Some(1),
            total: Some(2),
            survivors: Some(vec!["ns/a".into()]),
            scored: vec![scored("ns/a", a)],
            affinity_threshold: Some(0.8),
            ..DecisionInput::default()
        }
    }

    fn release(ts: f64, penalty: f64, max_penalty: f64) -> DecisionInput {
        DecisionInput {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some("brk".into()),
            outcome: Some(Outcome::LoadOverride),
            total: Some(2),
            logged_gate: Some(LoggedGate {
                best_sticky_ttft_ms: Some(penalty + 100.0),
                best_non_sticky_ttft_ms: Some(100.0),
                penalty_ms: penalty,
                max_penalty_ms: Some(max_penalty),
            }),
            affinity_threshold: Some(0.8),
            ..DecisionInput::default()
        }
    }

    #[test]
    fn a_logged_hold_censors_the_estimate_to_the_bar() {
        let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        g.push(keep_all(1.0, 1_000.0, 1_000.0));
        // 400,000 tokens over 1,000 at 15,928 tok/s: about 25 s, above the
        // 18 s bar, yet the EPP held.
        g.push(narrowed(2.0, "held", 401_000.0));
        let r = g.finish(InputSummary::default());
        let s = &r.deployments[0].stats;
        assert_eq!(s.evidence.reconstructed, 1);
        assert_eq!(s.censoring.moved, 1);
        let max = s.gate_input_ms.max.unwrap();
        assert!(max <= 18_000.0 && max > 17_999.0, "{max}");
        let moved = s.censoring.move_max_ms.unwrap();
        assert!((moved - 7_040.0).abs() < 200.0, "{moved}");
        assert_eq!((s.replay.agreed, s.replay.decisions), (1, 1));
        assert_eq!(s.replay.replayed_released, 0);
        assert_eq!(s.replay.cause, None);
        let at_bar = s
            .what_if
            .iter()
            .find(|w| w.max_ttft_penalty_ms == Some(18_000.0))
            .unwrap();
        assert_eq!(at_bar.released, 0, "the config in force holds it");
    }

    #[test]
    fn the_log_bar_applies_to_decisions_before_its_first_gate_line() {
        let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        g.push(keep_all(1.0, 1_000.0, 1_000.0));
        // About 10 s: held under the default 18 s bar, but the log's bar is
        // 5 s (shown only by the break below).
        g.push(narrowed(2.0, "held", 160_000.0));
        g.push(release(3.0, 6_000.0, 5_000.0));
        let r = g.finish(InputSummary::default());
        let d = &r.deployments[0];
        assert_eq!(d.config.parameters.max_ttft_penalty_ms, 5_000.0);
        assert_eq!(d.config.source_of("maxTTFTPenaltyMs"), ParamSource::Log);
        assert_eq!(d.config.source_of("affinityThreshold"), ParamSource::Log);
        assert_eq!(
            d.config
                .source_of(gatecal_filter::Param::PeakPrefillThroughput.name()),
            ParamSource::Default
        );
        assert_eq!(d.config.source, "log");
        let s = &d.stats;
        assert_eq!(s.censoring.moved, 1);
        assert!(s.gate_input_ms.min.unwrap() <= 5_000.0);
        assert_eq!((s.replay.agreed, s.replay.decisions), (2, 2));
        assert_eq!(
            (s.replay.logged_released, s.replay.replayed_released),
            (1, 1)
        );
    }

    /// Pushes `n` keep-all decisions over three deployments, none with a
    /// bar in sight; returns the most that ever waited for one.
    fn push_without_a_bar(g: &mut GateDist, n: usize) -> usize {
        let mut most = 0;
        for i in 0..n {
            let mut d = keep_all(i as f64 * 0.01, 1_000.0, 1_000.0);
            d.deployment = ["d1", "d2", "d3"][i % 3].into();
            g.push(d);
            most = most.max(g.in_force.pending());
        }
        most
    }

    #[test]
    fn decisions_waiting_for_a_bar_are_bounded_across_deployments() {
        let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        // No gate line ever shows a bar: without the bound every decision
        // would wait until the end.
        let n = 3 * MAX_PENDING_DECISIONS;
        let most = push_without_a_bar(&mut g, n);
        assert!(most < MAX_PENDING_DECISIONS, "{most}");
        let r = g.finish(InputSummary::default());
        assert_eq!(r.deployments.len(), 3);
        let total: u64 = r.deployments.iter().map(|d| d.stats.decisions).sum();
        assert_eq!(total, n as u64, "every decision is analysed once");
        for d in &r.deployments {
            assert_eq!(d.config.source_of("maxTTFTPenaltyMs"), ParamSource::Default);
        }
    }

    #[test]
    fn a_smaller_bound_on_the_wait_settles_sooner_and_loses_no_decision() {
        let max = crate::MAX_PENDING_DECISIONS_FOLLOWING;
        let mut g =
            GateDist::new(GateDistOptions::default(), ConfigSet::default()).with_max_pending(max);
        let n = 3 * max;
        let most = push_without_a_bar(&mut g, n);
        assert!(most < max, "{most}");
        let r = g.finish(InputSummary::default());
        let total: u64 = r.deployments.iter().map(|d| d.stats.decisions).sum();
        assert_eq!(total, n as u64);
    }

    #[test]
    fn decisions_given_in_release_order_give_the_report_of_the_buffer() {
        // Out of time order by up to 40 s: past the 30 s buffer too.
        let ts: Vec<f64> = (0..400)
            .map(|i| 1_000.0 + i as f64 * 0.5 - [0.0, 3.0, 40.0, 12.0, 0.5][i % 5])
            .collect();
        let decision = |i: usize| {
            let mut d = if i.is_multiple_of(7) {
                release(ts[i], 6_000.0 + i as f64, 5_000.0)
            } else {
                keep_all(ts[i], 1_000.0 + 10.0 * i as f64, 900.0 + i as f64)
            };
            d.deployment = ["d1", "d2"][i % 2].into();
            d.request_id = Some(format!("r{i}").into());
            d
        };
        let mut buffered = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        for i in 0..ts.len() {
            buffered.push(decision(i));
        }
        let mut given = GateDist::new(GateDistOptions::default(), ConfigSet::default());
        let order = crate::release_order(ts.iter().map(|t| Some(*t)), given.reorder_window_s());
        assert_ne!(order, (0..ts.len() as u32).collect::<Vec<_>>());
        for i in order {
            given.push_in_order(decision(i as usize));
        }
        let json = |g: GateDist| serde_json::to_string(&g.finish(InputSummary::default())).unwrap();
        assert_eq!(json(buffered), json(given));
    }

    /// The report and the records of decisions over five deployments,
    /// three never showing their bar (settled at the end) and two showing
    /// it, finished on `threads` threads.
    fn settled_on(threads: usize) -> (String, Vec<String>) {
        let records = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let kept = records.clone();
        let sink: RecordSink = Box::new(move |r| {
            kept.borrow_mut().push(serde_json::to_string(&r).unwrap());
        });
        let opts = GateDistOptions {
            window_s: Some(2.0),
            ..GateDistOptions::default()
        };
        let mut g = GateDist::new(opts, ConfigSet::default())
            .with_records(sink)
            .with_threads(threads);
        for i in 0..300 {
            let ts = i as f64 * 0.05;
            let mut d = match i % 11 {
                0 => release(ts, 6_000.0 + i as f64, 5_000.0),
                3 | 7 => narrowed(ts, "n", 20_000.0 + 500.0 * i as f64),
                _ => keep_all(
                    ts,
                    1_000.0 + 37.0 * i as f64,
                    900.0 + (i % 13) as f64 * 400.0,
                ),
            };
            // Deployments e and c show the bar; a, b and d never do (the
            // releases there lose their bar).
            let dep = ["d", "a", "e", "b", "c", "a", "d", "b"][i % 8];
            if !matches!(dep, "e" | "c") {
                d.logged_gate = None;
            }
            d.deployment = dep.into();
            d.request_id = Some(format!("r{i}").into());
            d.record = Some(Box::new(gatecal_parser::DecisionRecord {
                deployment: dep.to_string(),
                request_id: Some(format!("r{i}")),
                ..gatecal_parser::DecisionRecord::default()
            }));
            g.push(d);
        }
        let report = serde_json::to_string(&g.finish(InputSummary::default())).unwrap();
        let records = records.borrow().clone();
        (report, records)
    }

    #[test]
    fn deployments_settled_on_several_threads_give_the_report_of_one() {
        let (report, records) = settled_on(1);
        assert!(report.contains(r#""name":"a""#) && report.contains(r#""name":"e""#));
        assert_eq!(records.len(), 300);
        for threads in [2, 3, 8] {
            let (r, rec) = settled_on(threads);
            assert_eq!(r, report, "{threads} threads");
            assert_eq!(rec, records, "{threads} threads");
        }
    }

    #[test]
    fn a_flag_that_disagrees_with_the_log_is_used_and_explained() {
        let set = crate::config::source::flag_bar(7_000.0);
        let mut g = GateDist::new(GateDistOptions::default(), set);
        g.push(release(3.0, 6_000.0, 5_000.0));
        let r = g.finish(InputSummary::default());
        let d = &r.deployments[0];
        assert_eq!(d.config.parameters.max_ttft_penalty_ms, 7_000.0);
        let w = &d.config.log_disagreements[0];
        assert_eq!(w.parameter, "maxTTFTPenaltyMs");
        assert_eq!((w.log, w.given), (5_000.0, 7_000.0));
        assert_eq!(
            (w.given_source, w.used),
            (ParamSource::Flag, ParamSource::Flag)
        );
        let s = &d.stats.replay;
        assert_eq!((s.agreed, s.decisions), (0, 1));
        assert_eq!(s.log_bar_ms, Some(5_000.0));
        let cause = s.cause.as_deref().unwrap();
        assert!(cause.contains("--max-ttft-penalty-ms 5000"), "{cause}");
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(420.0), 500.0);
        assert_eq!(nice_step(1000.0), 1000.0);
        assert_eq!(nice_step(2100.0), 2500.0);
    }
}
