//! Findings: the conclusions a report leads with, each with its numbers,
//! its evidence and the action to take.
//!
//! Every finding has a stable id ([`ids`]), a [`Severity`], a one-line
//! summary with its figures, its [`FindingEvidence`] (sample size, count,
//! time range, endpoints or pods, named figures) and an action (a config
//! key and value, or a flag). The rules are in [`rules`]; what they read
//! of every decision is gathered by [`SignalsAcc`], per deployment, beside
//! the report's own figures. The per-replica view ([`ReplicaReport`]) is
//! gathered there too. `docs/usage.md` ("Findings") documents each rule,
//! its false-positive risk and its action.

use std::collections::BTreeMap;

use gatecal_filter::{Config, Outcome};
use serde::{Deserialize, Serialize};

use crate::gate::hist::Distribution;
use crate::gate::hist::SignedHistogram;
use crate::gate::sample::GateSample;
use crate::input::DecisionInput;

pub mod rules;

/// The finding ids, stable across versions.
pub mod ids {
    /// No endpoint reaches `affinityThreshold`: the filter never pins.
    pub const AFFINITY_DISENGAGED: &str = "affinity_disengaged";
    /// The gate released, and the request went to a sticky endpoint anyway.
    pub const INERT_BREAKS: &str = "inert_breaks";
    /// The router's predicted prefix hit against vLLM's delivered one.
    pub const REUSE_SHORTFALL: &str = "reuse_shortfall";
    /// Decisions where a side lacked its load signal.
    pub const MISSING_SIGNAL: &str = "missing_signal";
    /// Several EPP replicas decided for one pool at the same time.
    pub const SPLIT_LOAD_VIEW: &str = "split_load_view";
    /// The peak in force is the filter's default, never shown by the log.
    pub const DEFAULT_PEAK_ASSUMED: &str = "default_peak_assumed";
    /// The peak in force is far from the measured one.
    pub const PEAK_MISCONFIGURED: &str = "peak_misconfigured";
    /// The bar almost never releases while many requests stay pinned worse.
    pub const GATE_NEVER_FIRES: &str = "gate_never_fires";
    /// Every id, in the order reports list findings of equal severity.
    pub const ALL: [&str; 8] = [
        AFFINITY_DISENGAGED,
        GATE_NEVER_FIRES,
        SPLIT_LOAD_VIEW,
        PEAK_MISCONFIGURED,
        DEFAULT_PEAK_ASSUMED,
        INERT_BREAKS,
        REUSE_SHORTFALL,
        MISSING_SIGNAL,
    ];
}

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; the figures hold.
    Info,
    /// The figures or the config are doubtful; act when convenient.
    Warning,
    /// The filter does not do what it is configured for.
    Critical,
}

impl Severity {
    /// The label, as written in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    /// The severity of a label (`info`, `warning`, `critical`).
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "critical" => Some(Severity::Critical),
            _ => None,
        }
    }
}

/// What a finding rests on.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FindingEvidence {
    /// Decisions the rule looked at (its sample).
    pub decisions: u64,
    /// Of those, the decisions that show the finding.
    pub count: u64,
    /// First decision showing it, seconds since the epoch.
    pub first_ts: Option<f64>,
    /// Last decision showing it.
    pub last_ts: Option<f64>,
    /// Endpoints concerned, most frequent first (at most 8).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// EPP pods concerned (at most 8).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<String>,
    /// The rule's figures, by name (shares in [0, 1], ms, tokens/s).
    pub figures: BTreeMap<String, f64>,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Stable id ([`ids`]).
    pub id: &'static str,
    /// Severity.
    pub severity: Severity,
    /// The deployment it is about.
    pub deployment: String,
    /// One line, with its numbers.
    pub summary: String,
    /// What it rests on.
    pub evidence: FindingEvidence,
    /// What to do: the config key and value, or the flag.
    pub action: String,
}

/// Sorts findings most severe first, then by id order ([`ids::ALL`]), then
/// by deployment.
pub fn sort(findings: &mut [Finding]) {
    let rank = |id: &str| ids::ALL.iter().position(|i| *i == id).unwrap_or(usize::MAX);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(rank(a.id).cmp(&rank(b.id)))
            .then(a.deployment.cmp(&b.deployment))
    });
}

/// Most endpoints or pods an accumulator keeps counts of (the rest are
/// counted, not named).
const MAX_NAMES: usize = 64;
/// Most implied peaks kept for the median.
const MAX_PEAK_SAMPLES: usize = 4096;

/// One EPP replica's decisions, as reported ([`crate::GateDistReport`]'s
/// `replicas` of a deployment with several).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplicaReport {
    /// The EPP pod.
    pub epp_pod: String,
    /// Its decisions.
    pub decisions: u64,
    /// First decision, seconds since the epoch.
    pub first_ts: Option<f64>,
    /// Last decision.
    pub last_ts: Option<f64>,
    /// Decisions by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Decisions released.
    pub released: u64,
    /// `released` over its decisions.
    pub released_share: f64,
    /// Held with the gate input in `[pinned-worse min, bar)`.
    pub pinned_worse: u64,
    /// `pinned_worse` over its decisions.
    pub pinned_worse_share: f64,
    /// The gate input it saw, ms (its own in-flight tokens only).
    pub gate_input_ms: Distribution,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct PodAcc {
    decisions: u64,
    first_ts: Option<f64>,
    last_ts: Option<f64>,
    outcomes: [u64; 7],
    released: u64,
    pinned_worse: u64,
    gate: SignedHistogram,
}

/// Counts of a named thing (endpoint, pod), bounded.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Names {
    counts: BTreeMap<String, u64>,
    others: u64,
}

impl Names {
    fn merge(&mut self, o: &Names) {
        for (name, c) in &o.counts {
            if let Some(x) = self.counts.get_mut(name) {
                *x += c;
            } else if self.counts.len() < MAX_NAMES {
                self.counts.insert(name.clone(), *c);
            } else {
                self.others += c;
            }
        }
        self.others += o.others;
    }

    fn add(&mut self, name: &str) {
        if let Some(c) = self.counts.get_mut(name) {
            *c += 1;
        } else if self.counts.len() < MAX_NAMES {
            self.counts.insert(name.to_string(), 1);
        } else {
            self.others += 1;
        }
    }

    /// The most frequent names, at most `n`.
    fn top(&self, n: usize) -> Vec<String> {
        let mut v: Vec<(&String, &u64)> = self.counts.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.into_iter().take(n).map(|(k, _)| k.clone()).collect()
    }
}

/// A time range that grows.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Span {
    first: Option<f64>,
    last: Option<f64>,
}

impl Span {
    fn merge(&mut self, o: Span) {
        self.add(o.first);
        self.add(o.last);
    }

    fn add(&mut self, ts: Option<f64>) {
        if let Some(t) = ts.filter(|t| t.is_finite()) {
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
    }
}

/// What the rules read of one deployment's decisions, gathered one
/// decision at a time (in log-time order).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SignalsAcc {
    decisions: u64,
    span: Span,
    outcomes: [u64; 7],
    /// Decisions with no sticky endpoint whose best prefix score is known,
    /// by score in hundredths.
    no_match_scores: Vec<u64>,
    /// Decisions with a sticky endpoint whose best prefix score is known.
    engaged_scored: u64,
    threshold: Option<f64>,
    /// Releases whose chosen endpoint and sticky set are known.
    releases_checked: u64,
    inert: u64,
    inert_span: Span,
    inert_endpoints: Names,
    missing: u64,
    missing_span: Span,
    missing_endpoints: Names,
    pods: BTreeMap<String, PodAcc>,
    pods_other: u64,
    last_pod: Option<String>,
    /// Consecutive decisions (in time order) from different pods.
    pod_switches: u64,
    /// `tokens / TTFT` of decisions whose logged TTFT sits beside the
    /// in-flight tokens it was computed from.
    implied_peaks: Vec<f64>,
    implied_total: u64,
    /// Decisions whose peak came from the log itself.
    logged_peak: u64,
    /// Router-predicted reuse of the endpoint picked: matched and prompt
    /// tokens, summed.
    picked_matched: f64,
    picked_prompt: f64,
    picked_n: u64,
}

fn outcome_index(o: Outcome) -> usize {
    Outcome::ALL.iter().position(|x| *x == o).unwrap_or(0)
}

/// The best prefix score of the decision's candidates, when known: the
/// exact candidates' match over total blocks, else the prefix scorer's
/// scores.
fn best_score(d: &DecisionInput) -> Option<f64> {
    let exact = d.exact.as_ref().and_then(|c| {
        c.iter()
            .filter(|c| c.total_blocks.is_some_and(|t| t > 0))
            .map(|c| c.prefix_score())
            .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))))
    });
    exact.or_else(|| {
        d.scored
            .iter()
            .filter_map(|e| e.prefix_score.filter(|s| s.is_finite()))
            .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))))
    })
}

/// Whether `chosen` (as logged: `namespace/name`, or `ip:port`) names
/// `endpoint`.
fn same_endpoint(chosen: &str, endpoint: &str) -> bool {
    let first = chosen.split(',').next().unwrap_or(chosen).trim();
    first == endpoint || endpoint.rsplit('/').next() == Some(first)
}

/// Whether the endpoint the request was sent to was sticky, when the log
/// shows both its choice and the candidates' prefix match.
fn chosen_sticky(d: &DecisionInput, threshold: f64) -> Option<(bool, String)> {
    let chosen = d.chosen.as_deref()?;
    if let Some(c) = d.exact.as_ref()
        && let Some(c) = c.iter().find(|c| same_endpoint(chosen, &c.id))
        && c.total_blocks.is_some_and(|t| t > 0)
    {
        return Some((c.prefix_score() >= threshold, c.id.clone()));
    }
    let e = d
        .scored
        .iter()
        .find(|e| same_endpoint(chosen, &e.endpoint))?;
    let s = e.prefix_score.filter(|s| s.is_finite())?;
    Some((s >= threshold, e.endpoint.to_string()))
}

/// An EPP pod's counted decisions: `(pod, first, last)`.
pub(crate) type PodSpan = (String, Option<f64>, Option<f64>);

impl SignalsAcc {
    /// Adds one counted decision, its sample, and the config it ran under.
    pub fn add(&mut self, d: &DecisionInput, s: &GateSample, config: &Config, pinned_min_ms: f64) {
        self.decisions += 1;
        self.span.add(d.ts);
        let threshold = d.affinity_threshold.unwrap_or(config.affinity_threshold);
        self.threshold = Some(threshold);
        let outcome = s.outcome.or(d.outcome);
        if let Some(o) = outcome {
            self.outcomes[outcome_index(o)] += 1;
        }
        let score = best_score(d);
        match outcome {
            Some(Outcome::NoMatch) => {
                if let Some(sc) = score {
                    if self.no_match_scores.is_empty() {
                        self.no_match_scores = vec![0; 101];
                    }
                    let i = (sc.clamp(0.0, 1.0) * 100.0).floor() as usize;
                    self.no_match_scores[i.min(100)] += 1;
                }
            }
            Some(Outcome::Sticky | Outcome::LoadOverride | Outcome::RequestLoadOverride)
                if score.is_some() =>
            {
                self.engaged_scored += 1;
            }
            _ => {}
        }
        if outcome.is_some_and(|o| o.is_release())
            && let Some((sticky, ep)) = chosen_sticky(d, threshold)
        {
            self.releases_checked += 1;
            if sticky {
                self.inert += 1;
                self.inert_span.add(d.ts);
                self.inert_endpoints.add(&ep);
            }
        }
        if outcome == Some(Outcome::MissingSignal) {
            self.missing += 1;
            self.missing_span.add(d.ts);
            for e in &d.scored {
                if e.token_load.is_none() && e.in_flight_tokens.is_none() {
                    self.missing_endpoints.add(&e.endpoint);
                }
            }
            for c in d.exact.iter().flatten() {
                if c.in_flight_tokens.is_none() {
                    self.missing_endpoints.add(&c.id);
                }
            }
        }
        if d.prefill_throughput.is_some() && !d.peak_inferred {
            self.logged_peak += 1;
        }
        if d.peak_inferred
            && let Some(p) = d.prefill_throughput
        {
            self.implied_total += 1;
            if self.implied_peaks.len() < MAX_PEAK_SAMPLES {
                self.implied_peaks.push(p);
            }
        }
        if let Some(p) = d.picked_match
            && p.prompt_tokens() > 0
        {
            self.picked_matched += p.matched_tokens() as f64;
            self.picked_prompt += p.prompt_tokens() as f64;
            self.picked_n += 1;
        }
        if let Some(pod) = d.epp_pod.as_deref() {
            if self.last_pod.as_deref().is_some_and(|l| l != pod) {
                self.pod_switches += 1;
            }
            if self.last_pod.as_deref() != Some(pod) {
                self.last_pod = Some(pod.to_string());
            }
            let acc = if let Some(a) = self.pods.get_mut(pod) {
                Some(a)
            } else if self.pods.len() < MAX_NAMES {
                Some(self.pods.entry(pod.to_string()).or_default())
            } else {
                self.pods_other += 1;
                None
            };
            if let Some(a) = acc {
                a.decisions += 1;
                let mut sp = Span {
                    first: a.first_ts,
                    last: a.last_ts,
                };
                sp.add(d.ts);
                (a.first_ts, a.last_ts) = (sp.first, sp.last);
                if let Some(o) = outcome {
                    a.outcomes[outcome_index(o)] += 1;
                    if o.is_release() {
                        a.released += 1;
                    }
                }
                if let Some(g) = s.gate_input_ms {
                    a.gate.record(g);
                    let bar = crate::gate::whatif::pinned_worse_bar(config);
                    if outcome == Some(Outcome::Sticky) && g >= pinned_min_ms && g < bar {
                        a.pinned_worse += 1;
                    }
                }
            }
        }
    }

    /// Adds another accumulator's decisions (a partial report's, read
    /// after `self`'s in time). A switch between replicas at the seam of
    /// the two is not seen.
    pub fn merge(&mut self, o: &SignalsAcc) {
        self.decisions += o.decisions;
        self.span.merge(o.span);
        for (a, b) in self.outcomes.iter_mut().zip(o.outcomes) {
            *a += b;
        }
        if !o.no_match_scores.is_empty() {
            if self.no_match_scores.is_empty() {
                self.no_match_scores = vec![0; 101];
            }
            for (a, b) in self.no_match_scores.iter_mut().zip(&o.no_match_scores) {
                *a += b;
            }
        }
        self.engaged_scored += o.engaged_scored;
        if o.threshold.is_some() {
            self.threshold = o.threshold;
        }
        self.releases_checked += o.releases_checked;
        self.inert += o.inert;
        self.inert_span.merge(o.inert_span);
        self.inert_endpoints.merge(&o.inert_endpoints);
        self.missing += o.missing;
        self.missing_span.merge(o.missing_span);
        self.missing_endpoints.merge(&o.missing_endpoints);
        for (pod, b) in &o.pods {
            let a = if let Some(a) = self.pods.get_mut(pod) {
                a
            } else if self.pods.len() < MAX_NAMES {
                self.pods.entry(pod.clone()).or_default()
            } else {
                self.pods_other += b.decisions;
                continue;
            };
            a.decisions += b.decisions;
            let mut sp = Span {
                first: a.first_ts,
                last: a.last_ts,
            };
            sp.merge(Span {
                first: b.first_ts,
                last: b.last_ts,
            });
            (a.first_ts, a.last_ts) = (sp.first, sp.last);
            for (x, y) in a.outcomes.iter_mut().zip(b.outcomes) {
                *x += y;
            }
            a.released += b.released;
            a.pinned_worse += b.pinned_worse;
            a.gate.merge(&b.gate);
        }
        self.pods_other += o.pods_other;
        self.pod_switches += o.pod_switches;
        if o.last_pod.is_some() {
            self.last_pod.clone_from(&o.last_pod);
        }
        let room = MAX_PEAK_SAMPLES.saturating_sub(self.implied_peaks.len());
        self.implied_peaks
            .extend(o.implied_peaks.iter().take(room).copied());
        self.implied_total += o.implied_total;
        self.logged_peak += o.logged_peak;
        self.picked_matched += o.picked_matched;
        self.picked_prompt += o.picked_prompt;
        self.picked_n += o.picked_n;
    }

    /// The EPP pods' counted decisions, `(pod, first, last)`, and whether
    /// some decisions have no pod (or one past the cap).
    pub(crate) fn pod_spans(&self) -> (Vec<PodSpan>, bool) {
        let spans = self
            .pods
            .iter()
            .map(|(p, a)| (p.clone(), a.first_ts, a.last_ts))
            .collect();
        let in_pods: u64 = self.pods.values().map(|a| a.decisions).sum();
        (spans, in_pods < self.decisions)
    }

    /// The per-replica view: one entry per EPP pod, when there are several.
    pub fn replicas(&self) -> Vec<ReplicaReport> {
        if self.pods.len() < 2 {
            return Vec::new();
        }
        self.pods
            .iter()
            .map(|(pod, a)| {
                let share = |n: u64| {
                    if a.decisions == 0 {
                        0.0
                    } else {
                        n as f64 / a.decisions as f64
                    }
                };
                ReplicaReport {
                    epp_pod: pod.clone(),
                    decisions: a.decisions,
                    first_ts: a.first_ts,
                    last_ts: a.last_ts,
                    outcomes: Outcome::ALL
                        .iter()
                        .enumerate()
                        .map(|(i, o)| (o.as_str().to_string(), a.outcomes[i]))
                        .collect(),
                    released: a.released,
                    released_share: share(a.released),
                    pinned_worse: a.pinned_worse,
                    pinned_worse_share: share(a.pinned_worse),
                    gate_input_ms: Distribution::of(&a.gate),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
