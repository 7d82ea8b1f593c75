//! The report: each deployment's peak, rows, predictions and findings,
//! from what the calibration gathered.

use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::peak::agreement::SourceDisagreement;

impl Recommend {
    /// The report.
    pub fn finish(mut self, mut input: InputSummary) -> RecommendReport {
        input.duplicates.prometheus = self.prometheus.duplicates;
        input.duplicates.prometheus_conflicts = self.prometheus.conflicting_samples();
        input.prometheus_samples_dropped = self.prometheus.dropped;
        self.settle();
        let mut est = std::mem::take(&mut self.routed);
        // The deployment of each pod whose vLLM lines were read: a
        // Prometheus series of that pod goes with them, even when no EPP
        // decision names the pod.
        let mut line_pods: HashMap<String, String> = HashMap::new();
        for ((dep, pod), lines) in std::mem::take(&mut self.vllm) {
            let dep = self.pod_deployment(dep, pod.as_deref());
            if let Some(p) = pod {
                line_pods.entry(p).or_insert_with(|| dep.clone());
            }
            lines.move_into(&mut est, &dep);
        }
        let vllm = est.estimates_on(self.threads);
        let pods = std::mem::take(&mut self.pods);
        let deployment_of = |p: &str| pods.get(p).or_else(|| line_pods.get(p)).cloned();
        let prom = self.prometheus.estimates(deployment_of);
        let prom_hits = self.prometheus.prefix_cache_increments(deployment_of);
        let mut prom_conflicts = self.prometheus.conflicts(deployment_of);
        self.pods = pods;
        let mut line_hits: BTreeMap<String, LineHitRates> = BTreeMap::new();
        for ((dep, pod), h) in std::mem::take(&mut self.line_hit_rates) {
            let dep = self.pod_deployment(dep, pod.as_deref());
            line_hits.entry(dep).or_default().extend(h);
        }
        let mut names: Vec<String> = self.deps.keys().cloned().collect();
        for k in vllm.keys().chain(prom.keys()) {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        names.sort();
        // What each deployment's record starts from, in name order; then
        // the records, each on its own (the fit and the replays are most of
        // a report's time), shared out between the threads.
        let mut jobs = Vec::with_capacity(names.len());
        for name in names {
            let dep = self.deps.get(&name);
            let config = dep
                .map(|d| d.shown.config.clone())
                .or_else(|| self.fallback_configs.get(&name).cloned())
                .unwrap_or_else(|| self.in_force.configs().lookup(&name, None).clone());
            let peak =
                self.choose_peak(&name, vllm.get(&name), prom.get(&name), &config.parameters);
            let mut disagreements = Vec::new();
            if let (Some(v), Some(p)) = (vllm.get(&name), prom.get(&name)) {
                disagreements.extend(crate::peak::agreement::peak(v, p));
            }
            if let (Some(l), Some(p)) = (line_hits.get(&name), prom_hits.get(&name)) {
                disagreements.extend(crate::peak::agreement::hit_rate(l, p));
            }
            let conflict = prom_conflicts.remove(&name);
            jobs.push(Job {
                hits: line_hits.remove(&name),
                name,
                config,
                peak,
                disagreements,
                conflict,
            });
        }
        let mut deps = std::mem::take(&mut self.deps);
        let finish = Finish {
            opts: &self.opts,
            merged_without_requests: self.merged_without_requests,
        };
        let done = finish.records(jobs, &mut deps, self.threads);
        let mut deployments = Vec::with_capacity(done.len());
        let mut findings = Vec::new();
        for (rec, found) in done {
            deployments.push(rec);
            findings.extend(found);
        }
        crate::findings::sort(&mut findings);
        RecommendReport {
            schema: SCHEMA,
            findings,
            input,
            deployments,
            pooled: self.cap.pooled().clone(),
            vllm_cut: self.vllm_cut,
            merged: self.merged.take().unwrap_or_default(),
        }
    }

    /// The deployment of vLLM lines read as `dep`'s: that of their pod
    /// when an EPP decision named it, else `dep`.
    fn pod_deployment(&self, dep: String, pod: Option<&str>) -> String {
        pod.and_then(|p| self.pods.get(p)).cloned().unwrap_or(dep)
    }
}

/// What the deployments' records need of the calibration, shared by the
/// threads that compute them: its options (the rest of the calibration,
/// its record sink among it, stays on the calling thread).
pub(super) struct Finish<'a> {
    pub(super) opts: &'a RecommendOptions,
    merged_without_requests: bool,
}

impl Finish<'_> {
    /// Each job's record and findings, in the jobs' order: on one thread,
    /// or on up to `threads` (`Recommend::with_threads`), the
    /// deployments with the most requests taken first. Each record is
    /// computed from its own deployment alone, so the report is the same
    /// on any number of threads.
    fn records(
        &self,
        jobs: Vec<Job>,
        deps: &mut BTreeMap<String, Dep>,
        threads: usize,
    ) -> Vec<Done> {
        let mut mine: HashMap<&str, &mut Dep> =
            deps.iter_mut().map(|(k, d)| (k.as_str(), d)).collect();
        let work: Vec<(Job, Option<&mut Dep>)> = jobs
            .into_iter()
            .map(|job| {
                let dep = mine.remove(job.name.as_str());
                (job, dep)
            })
            .collect();
        crate::par::map(
            work,
            threads,
            |(_, dep)| dep.as_ref().map_or(0, |d| d.requests.kept().0.len()),
            |(job, dep)| self.record(job, dep),
        )
    }

    /// One deployment's record and findings.
    fn record(&self, job: Job, mut dep: Option<&mut Dep>) -> Done {
        let Job {
            name,
            config,
            peak,
            disagreements,
            conflict,
            hits,
        } = job;
        let block = self.opts.block_sizes_of(&name).approximate_producer.tokens;
        // Merged partials of an earlier version carry no requests:
        // nothing to predict from.
        let engine = dep
            .as_deref_mut()
            .filter(|_| !self.merged_without_requests)
            .map(|d| {
                let mut e =
                    d.requests
                        .engine(peak.value, config.parameters.affinity_threshold, block);
                e.assume_config(&config.parameters);
                e
            });
        let dep = dep.map(|d| &*d);
        let mut rec = self.deployment(name, dep, config, peak, engine.as_ref());
        if self.merged_without_requests && dep.is_some() {
            rec.ttft_model.source = NO_PREDICTION_AFTER_MERGE.into();
            rec.warnings.push(NO_PREDICTION_AFTER_MERGE.into());
        }
        rec.warnings.extend(conflict);
        rec.warnings
            .extend(disagreements.iter().map(|d| d.message.clone()));
        rec.source_disagreements = disagreements;
        let mut found = Vec::new();
        if let Some(dep) = dep {
            found = crate::findings::rules::all(&self.view(&rec, dep, hits.as_ref()));
            let misconfigured = found
                .iter()
                .any(|f| f.id == crate::findings::ids::PEAK_MISCONFIGURED);
            if misconfigured && let Some(w) = corrected_peak_predicted_worse(&rec) {
                rec.warnings.push(w);
            }
        }
        (rec, found)
    }

    /// What the findings read of a deployment's calibration.
    fn view<'a>(
        &self,
        rec: &'a DeploymentRec,
        dep: &'a Dep,
        hits: Option<&LineHitRates>,
    ) -> crate::findings::rules::View<'a> {
        let p = &rec.peak_prefill_throughput;
        let measured = matches!(
            p.source,
            PeakSource::User
                | PeakSource::Prometheus
                | PeakSource::Calibration
                | PeakSource::VllmStats
        )
        .then(|| crate::findings::rules::MeasuredPeak {
            value: p.value,
            source: p.source.as_str().to_string(),
            samples: p.samples,
        });
        let suggested_bar_ms = rec
            .rows
            .iter()
            .find(|r| r.kind == RowKind::Static && r.error.is_none())
            .map(|r| r.max_ttft_penalty_ms);
        crate::findings::rules::View {
            name: &rec.name,
            config: &rec.current.config,
            signals: &dep.signals,
            decisions: rec.current.decisions,
            released_share: rec.current.logged_released_share,
            pinned_worse_share: rec.current.pinned_worse_share,
            pinned_worse_min_ms: self.opts.pinned_worse_min_ms,
            gate_p50_ms: None,
            suggested_bar_ms,
            measured_peak: measured,
            // The fit stands for a peak only when it reproduces the log.
            fitted_peak: rec
                .ttft_model
                .tokens_per_s
                .filter(|_| rec.ttft_self_check.as_ref().is_some_and(|c| c.passed))
                .map(|value| crate::findings::rules::MeasuredPeak {
                    value,
                    source: crate::findings::rules::TTFT_FIT.to_string(),
                    samples: rec.ttft_model.fitted_requests as u64,
                }),
            vllm_hit_rate: hits.and_then(LineHitRates::mean),
        }
    }
}

/// When `peak_misconfigured` holds but the replay predicts the corrected
/// peak's TTFT worse than the config in force's (beyond both intervals),
/// the two figures of one report pull apart: the warning says so, with
/// the release and prefix-hit shares that explain it.
fn corrected_peak_predicted_worse(rec: &DeploymentRec) -> Option<String> {
    let row = |k: RowKind| rec.rows.iter().find(|r| r.kind == k);
    let (cur, fix) = (row(RowKind::Current)?, row(RowKind::CorrectedPeak)?);
    let (pc, pf) = (
        cur.predicted_ttft_ms.as_ref()?,
        fix.predicted_ttft_ms.as_ref()?,
    );
    if pf.interval.p90[0] <= pc.interval.p90[1] {
        return None;
    }
    let share = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{:.1} %", x * 100.0));
    Some(format!(
        "peak_misconfigured and the predicted TTFT disagree: the corrected peak ({:.0} tok/s) is predicted at TTFT p90 {:.0} ms [{:.0}–{:.0}] against {:.0} ms [{:.0}–{:.0}] for the config in force, because it releases {:.1} % of decisions (against {:.1} %) and keeps a prefix-cache hit share of {} (against {}): correcting the peak alone is predicted to cost more than it gains (the static rows show each bar at the corrected peak)",
        fix.peak_prefill_throughput,
        pf.p90,
        pf.interval.p90[0],
        pf.interval.p90[1],
        pc.p90,
        pc.interval.p90[0],
        pc.interval.p90[1],
        fix.released_share * 100.0,
        cur.released_share * 100.0,
        share(fix.predicted_prefix_hit_share),
        share(cur.predicted_prefix_hit_share),
    ))
}

/// What a deployment's record starts from.
struct Job {
    name: String,
    config: SourcedConfig,
    peak: PeakReport,
    disagreements: Vec<SourceDisagreement>,
    conflict: Option<String>,
    hits: Option<LineHitRates>,
}

/// A deployment's record and its findings.
type Done = (DeploymentRec, Vec<crate::findings::Finding>);
