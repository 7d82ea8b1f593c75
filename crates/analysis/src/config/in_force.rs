//! The config in force of each deployment's filter instances, as both
//! analyses (`gate-dist`'s [`crate::GateDist`] and `recommend`'s
//! [`crate::Recommend`]) replay their decisions under it.
//!
//! The config given ([`ConfigSet`]: flags, `--config`, the filter's
//! defaults, or the config a version-2 decision record carries) takes the
//! values the EPP's own lines show ([`merge_log`]): `maxPenalty` of the
//! `TTFT load gate broken` lines, `affinityThreshold` of the filter lines,
//! `prefillThroughput` of the P2251 lines. Precedence: a flag, then the
//! log, then a file, then the defaults; every value of a file or flag that
//! the log contradicts is kept in [`SourcedConfig::log_disagreements`].
//!
//! The bar shows only on the first gate line that broke, so a deployment's
//! decisions wait ([`InForce::push`]) until the bar in force of each of its
//! filter instances is known, at most [`MAX_PENDING_DECISIONS`] of them
//! over all deployments; then they go on, in order, each with its config
//! in force.

use std::collections::HashMap;

use gatecal_filter::Param;
use gatecal_parser::Name;

use crate::config::source::{ConfigDisagreement, ConfigSet, ParamSource, SourcedConfig};
use crate::input::DecisionInput;

/// Decisions held back, all deployments together, until the log shows the
/// bar of each of their filter instances. Past this many, the deployment
/// with the most waiting decisions is settled with the config known so far
/// (its later values are reported as disagreements). A waiting decision
/// holds its candidates (about 1.5 KiB with 8 endpoints), so this bounds
/// the wait's memory to about 12 MiB whatever the number of deployments.
pub const MAX_PENDING_DECISIONS: usize = 1 << 13;

/// The same bound while following a live log (`--follow`): a waiting
/// decision reaches no report until it is settled, and each costs a few
/// KiB, so the wait is kept short (about 10 s of a log at 100 decisions a
/// second).
pub const MAX_PENDING_DECISIONS_FOLLOWING: usize = 1 << 10;

/// What the log shows of one filter instance's config: the first value of
/// each parameter.
#[derive(Clone, Copy, Debug, Default)]
struct LogSeen {
    bar: Option<f64>,
    peak: Option<f64>,
    threshold: Option<f64>,
}

/// One filter instance of one deployment: its config as given, what the log
/// shows, and its config in force once settled.
struct Instance {
    filter: Option<Name>,
    base: SourcedConfig,
    log: LogSeen,
    effective: Option<SourcedConfig>,
    /// The config came with a version-2 record: it is the one in force.
    recorded: bool,
}

impl Instance {
    /// Learns what this decision's lines show of the config.
    fn learn(&mut self, d: &DecisionInput) {
        let bar = d
            .logged_gate
            .and_then(|g| g.max_penalty_ms)
            .filter(|b| b.is_finite() && *b >= 0.0);
        self.log.bar = self.log.bar.or(bar);
        self.log.peak = self.log.peak.or(d.prefill_throughput);
        self.log.threshold = self.log.threshold.or(d.affinity_threshold);
    }

    /// Whether the bar in force is known: from a flag, or from the log.
    fn bar_known(&self) -> bool {
        self.recorded
            || self.log.bar.is_some()
            || self.base.source_of(Param::MaxTtftPenaltyMs.name()) == ParamSource::Flag
    }

    fn settle(&mut self) -> &SourcedConfig {
        let (base, log) = (&self.base, self.log);
        self.effective
            .get_or_insert_with(|| merge_log(base, log.bar, log.peak, log.threshold))
    }
}

/// One deployment's filter instances, and its decisions waiting for their
/// configs in force (the reconstruction is per deployment, so they wait and
/// go on together, in order).
#[derive(Default)]
struct DepState {
    instances: Vec<Instance>,
    pending: Pending,
    settled: bool,
}

/// Decisions in the order pushed, kept in chunks of [`Pending::CHUNK`]: a
/// list that grows never moves the decisions it holds (a decision is a
/// few hundred bytes, and thousands may wait), and its chunks are
/// allocations of a size the allocator reuses, where one growing vector
/// would be copied into fresh memory at every doubling.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    chunks: Vec<Vec<DecisionInput>>,
    len: usize,
}

impl Pending {
    /// Decisions a chunk holds.
    const CHUNK: usize = 64;

    fn push(&mut self, d: DecisionInput) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => c.push(d),
            _ => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(d);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// Decisions held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn first(&self) -> Option<&DecisionInput> {
        self.chunks.first().and_then(|c| c.first())
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl IntoIterator for Pending {
    type Item = DecisionInput;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<DecisionInput>>>;

    /// The decisions in the order pushed.
    fn into_iter(self) -> Self::IntoIter {
        self.chunks.into_iter().flatten()
    }
}

/// A deployment settled at the end of the input ([`InForce::take_waiting`]).
pub(crate) struct Waiting {
    /// The deployment.
    pub(crate) name: String,
    /// Each of its filter instances, with its config in force.
    configs: Vec<(Option<Name>, SourcedConfig)>,
    /// Its decisions, in the order pushed.
    pub(crate) decisions: Pending,
}

impl Waiting {
    /// The config in force of a decision's filter instance.
    pub(crate) fn config_of(&self, d: &DecisionInput) -> Option<&SourcedConfig> {
        self.configs
            .iter()
            .find(|(f, _)| *f == d.filter)
            .map(|(_, c)| c)
    }
}

/// The config in force: `base` with the values the log shows. A flag wins
/// over the log (it is a what-if the user asked for); the log wins over a
/// file and the defaults (it shows what was in force). Every difference
/// between the log and a file or flag is kept with both values.
pub fn merge_log(
    base: &SourcedConfig,
    bar: Option<f64>,
    peak: Option<f64>,
    threshold: Option<f64>,
) -> SourcedConfig {
    let mut out = base.clone();
    let mut from_log = false;
    let params = [
        (Param::MaxTtftPenaltyMs, bar),
        (Param::PeakPrefillThroughput, peak),
        (Param::AffinityThreshold, threshold),
    ];
    for (param, log) in params {
        let Some(v) = log else { continue };
        let name = param.name();
        let slot = match param {
            Param::MaxTtftPenaltyMs => &mut out.parameters.max_ttft_penalty_ms,
            Param::PeakPrefillThroughput => &mut out.parameters.peak_prefill_throughput,
            _ => &mut out.parameters.affinity_threshold,
        };
        let given = *slot;
        let src = base.source_of(name);
        let used = if src == ParamSource::Flag {
            ParamSource::Flag
        } else {
            *slot = v;
            from_log |= src != ParamSource::Log;
            out.parameter_sources
                .insert(name.to_string(), ParamSource::Log);
            ParamSource::Log
        };
        if given != v && matches!(src, ParamSource::File | ParamSource::Flag) {
            out.log_disagreements.push(ConfigDisagreement {
                parameter: name.to_string(),
                log: v,
                given,
                given_source: src,
                used,
                instance: None,
            });
        }
    }
    if from_log {
        out.source = match out.source.as_str() {
            "default" => "log".to_string(),
            s => format!("{s}+log"),
        };
    }
    out
}

/// The configs in force, per deployment and filter instance, and the
/// decisions waiting for them.
pub(crate) struct InForce {
    configs: ConfigSet,
    /// Per deployment, its filter instances and waiting decisions.
    states: HashMap<String, DepState>,
    /// Decisions waiting in `states`, all deployments together.
    pending: usize,
    /// Most decisions waiting before one deployment is settled.
    max_pending: usize,
}

impl InForce {
    /// No decision seen yet; `configs` as given.
    pub(crate) fn new(configs: ConfigSet) -> InForce {
        InForce {
            configs,
            states: HashMap::new(),
            pending: 0,
            max_pending: MAX_PENDING_DECISIONS,
        }
    }

    /// Lets at most `max` decisions wait (at least one), all deployments
    /// together, instead of [`MAX_PENDING_DECISIONS`].
    pub(crate) fn set_max_pending(&mut self, max: usize) {
        self.max_pending = max.max(1);
    }

    /// The configs as given (without the log's values).
    pub(crate) fn configs(&self) -> &ConfigSet {
        &self.configs
    }

    /// Readies a decision for [`InForce::push`], as both reports do: its
    /// producer matches at the deployment's block sizes, its deployment
    /// admitted under `cap` (or pooled), and, where no file or flag gives
    /// the peak, the peak the log's gate lines imply.
    pub(crate) fn prepare(
        &self,
        d: &mut DecisionInput,
        block_sizes: &std::collections::BTreeMap<String, crate::input::ProducerBlockSizes>,
        cap: &mut crate::input::pool::DeploymentCap,
    ) {
        d.apply_block_sizes(block_sizes);
        cap.admit(&mut d.deployment);
        let given = self.configs.lookup(&d.deployment, d.filter.as_deref());
        if given.source_of(Param::PeakPrefillThroughput.name()) == ParamSource::Default {
            d.infer_peak(given.parameters.affinity_threshold);
        }
    }

    /// Decisions waiting, all deployments together.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Takes one decision (in log order). Until the bar in force of each of
    /// a deployment's filter instances is known (a flag, a record's config,
    /// or the `maxPenalty` of the log's first gate line), its decisions
    /// wait; every decision whose config in force is settled goes to `out`
    /// with it, a deployment's in the order pushed.
    pub(crate) fn push<F>(&mut self, d: DecisionInput, out: &mut F)
    where
        F: FnMut(&SourcedConfig, DecisionInput),
    {
        let st = match self.states.get_mut(d.deployment.as_str()) {
            Some(l) => l,
            None => self.states.entry(d.deployment.to_string()).or_default(),
        };
        let i = match st.instances.iter().position(|x| x.filter == d.filter) {
            Some(i) => i,
            None => {
                let base = self.configs.for_decision(&d).into_owned();
                st.instances.push(Instance {
                    filter: d.filter.clone(),
                    base,
                    log: LogSeen::default(),
                    effective: None,
                    recorded: d.recorded.as_ref().is_some_and(|r| r.config.is_some()),
                });
                st.instances.len() - 1
            }
        };
        st.instances[i].learn(&d);
        if !st.settled {
            st.pending.push(d);
            self.pending += 1;
            if st.instances.iter().all(Instance::bar_known) {
                if let Some(dep) = st.pending.first().map(|d| d.deployment.clone()) {
                    self.settle(&dep, out);
                }
            } else if self.pending >= self.max_pending {
                // The most waiting decisions, ties to the first name: the
                // same choice in every run.
                let dep = self
                    .states
                    .iter()
                    .filter(|(_, st)| !st.pending.is_empty())
                    .max_by(|a, b| a.1.pending.len().cmp(&b.1.pending.len()).then(b.0.cmp(a.0)))
                    .map(|(name, _)| name.clone());
                if let Some(dep) = dep {
                    self.settle(&dep, out);
                }
            }
            return;
        }
        let sc = st.instances[i].settle();
        out(sc, d);
    }

    /// Fixes a deployment's configs in force from what is known now, and
    /// hands its waiting decisions to `out` in order.
    fn settle<F>(&mut self, deployment: &str, out: &mut F)
    where
        F: FnMut(&SourcedConfig, DecisionInput),
    {
        let Some(st) = self.states.get_mut(deployment) else {
            return;
        };
        st.settled = true;
        self.pending -= st.pending.len();
        for d in std::mem::take(&mut st.pending) {
            let Some(inst) = st.instances.iter_mut().find(|x| x.filter == d.filter) else {
                continue;
            };
            out(inst.settle(), d);
        }
    }

    /// At the end of the input: the deployments whose log never showed the
    /// bar are settled with the configs known (by name), their decisions
    /// handed to `out`.
    pub(crate) fn finish<F>(&mut self, out: &mut F)
    where
        F: FnMut(&SourcedConfig, DecisionInput),
    {
        let mut waiting: Vec<String> = self
            .states
            .iter()
            .filter(|(_, st)| !st.settled)
            .map(|(d, _)| d.clone())
            .collect();
        waiting.sort();
        for d in waiting {
            self.settle(&d, out);
        }
    }

    /// At the end of the input, as [`InForce::finish`]: the deployments
    /// whose log never showed the bar, by name, settled with the configs
    /// known, each with its waiting decisions in the order pushed, to be
    /// handled apart (each deployment has its own reconstruction).
    pub(crate) fn take_waiting(&mut self) -> Vec<Waiting> {
        let mut names: Vec<String> = self
            .states
            .iter()
            .filter(|(_, st)| !st.settled)
            .map(|(d, _)| d.clone())
            .collect();
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Some(st) = self.states.get_mut(&name) else {
                continue;
            };
            st.settled = true;
            self.pending -= st.pending.len();
            let configs = st
                .instances
                .iter_mut()
                .map(|i| (i.filter.clone(), i.settle().clone()))
                .collect();
            out.push(Waiting {
                name,
                configs,
                decisions: std::mem::take(&mut st.pending),
            });
        }
        out
    }

    /// Adds to `shown`, the config a report gives for `deployment`, the
    /// disagreements of values the log showed only after that config was
    /// fixed (a flag fixed the bar at once, or the wait was cut short): a
    /// disagreement with the config used is still reported. The same for
    /// the deployment's other filter instances, naming the instance.
    pub(crate) fn late_disagreements(&self, deployment: &str, shown: &mut Shown) {
        let Some(st) = self.states.get(deployment) else {
            return;
        };
        let first = std::iter::once((shown.instance.clone(), None));
        let rest = shown.others.iter().map(|o| (o.clone(), Some(o.clone())));
        let instances: Vec<_> = first.chain(rest).collect();
        for (f, tag) in instances {
            let Some(inst) = st
                .instances
                .iter()
                .find(|x| x.filter.as_deref() == f.as_deref())
            else {
                continue;
            };
            let (base, log) = (&inst.base, inst.log);
            let late = merge_log(base, log.bar, log.peak, log.threshold);
            for mut w in late.log_disagreements {
                let used = match tag {
                    None => shown.config.source_of(&w.parameter),
                    Some(_) => inst
                        .effective
                        .as_ref()
                        .unwrap_or(&inst.base)
                        .source_of(&w.parameter),
                };
                w.used = if used == ParamSource::Log {
                    ParamSource::Log
                } else {
                    w.given_source
                };
                w.instance = tag.as_ref().map(|t| t.clone().unwrap_or_default());
                push_disagreement(&mut shown.config, w);
            }
        }
    }
}

/// Adds `w` to `config`'s disagreements unless the same parameter of the
/// same instance is listed.
fn push_disagreement(config: &mut SourcedConfig, w: ConfigDisagreement) {
    if !config
        .log_disagreements
        .iter()
        .any(|x| x.parameter == w.parameter && x.instance == w.instance)
    {
        config.log_disagreements.push(w);
    }
}

/// The config a report shows for a deployment: that of the filter instance
/// of its first decision, listing the disagreements with the log of every
/// instance of the deployment.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Shown {
    /// The config, with every instance's disagreements.
    pub(crate) config: SourcedConfig,
    /// The filter instance whose config it is.
    pub(crate) instance: Option<String>,
    /// The deployment's other filter instances seen.
    pub(crate) others: Vec<Option<String>>,
    /// Each filter instance's parameters in force, in the order first
    /// seen (the shown instance first): what a merge of partial reports
    /// compares instance by instance. Empty in partials written before it
    /// was carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) instances: Vec<InstanceParams>,
}

/// One filter instance's parameters in force.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct InstanceParams {
    /// The filter instance (`null`: the lines name none).
    pub(crate) instance: Option<String>,
    /// Its parameters, EPP names.
    #[serde(deserialize_with = "crate::config::source::config_wire::deserialize")]
    pub(crate) parameters: gatecal_filter::Config,
}

impl Shown {
    /// The config `sc` of filter instance `filter`, a deployment's first.
    pub(crate) fn new(sc: &SourcedConfig, filter: Option<&str>) -> Shown {
        Shown {
            config: sc.clone(),
            instance: filter.map(str::to_string),
            others: Vec::new(),
            instances: vec![InstanceParams {
                instance: filter.map(str::to_string),
                parameters: sc.parameters.clone(),
            }],
        }
    }

    /// Adds the disagreements with the log of another instance `filter`
    /// of the deployment (its config in force `sc`), naming the instance,
    /// the first time one of its decisions is counted.
    pub(crate) fn note(&mut self, filter: Option<&str>, sc: &SourcedConfig) {
        if filter == self.instance.as_deref() || self.others.iter().any(|o| o.as_deref() == filter)
        {
            return;
        }
        self.others.push(filter.map(str::to_string));
        self.instances.push(InstanceParams {
            instance: filter.map(str::to_string),
            parameters: sc.parameters.clone(),
        });
        for w in &sc.log_disagreements {
            let mut w = w.clone();
            w.instance = Some(filter.unwrap_or_default().to_string());
            push_disagreement(&mut self.config, w);
        }
    }
}

#[cfg(test)]
mod tests {
    use gatecal_filter::Config;

    use super::{Pending, merge_log};
    use crate::config::source::{ParamSource, SourcedConfig};
    use crate::input::DecisionInput;

    /// The waiting decisions come back in the order pushed, across the
    /// chunks they are kept in, and are counted.
    #[test]
    fn waiting_decisions_keep_their_order_across_chunks() {
        for n in [
            0,
            1,
            Pending::CHUNK - 1,
            Pending::CHUNK,
            3 * Pending::CHUNK + 5,
        ] {
            let mut p = Pending::default();
            for i in 0..n {
                p.push(DecisionInput {
                    ts: Some(i as f64),
                    ..DecisionInput::default()
                });
            }
            assert_eq!(p.len(), n);
            assert_eq!(p.is_empty(), n == 0);
            assert_eq!(p.first().map(|d| d.ts), (n > 0).then_some(Some(0.0)));
            let ts: Vec<Option<f64>> = p.into_iter().map(|d| d.ts).collect();
            assert_eq!(ts, (0..n).map(|i| Some(i as f64)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_file_that_disagrees_with_the_log_loses_with_a_warning() {
        let mut base = SourcedConfig::new("file:epp.yaml", Config::default(), ParamSource::File);
        base.parameters.max_ttft_penalty_ms = 9_000.0;
        let sc = merge_log(&base, Some(5_000.0), None, Some(0.8));
        assert_eq!(sc.parameters.max_ttft_penalty_ms, 5_000.0);
        assert_eq!(sc.source, "file:epp.yaml+log");
        assert_eq!(sc.log_disagreements.len(), 1, "0.8 agrees with the file");
        assert_eq!(sc.log_disagreements[0].used, ParamSource::Log);
        assert_eq!(sc.log_disagreements[0].given, 9_000.0);
    }
}
