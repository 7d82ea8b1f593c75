//! The rules: one function per finding, each reading a deployment's
//! [`View`] and returning the finding when it holds.
//!
//! The thresholds are constants here, documented with their false-positive
//! risk in `docs/usage.md` ("Findings").

use gatecal_filter::{Outcome, TtftSource};

use super::{Finding, FindingEvidence, Severity, SignalsAcc, ids, outcome_index};
use crate::config::source::{ParamSource, SourcedConfig};

/// Fewer decisions than this: no rate-based finding.
pub const MIN_DECISIONS: u64 = 30;
/// `affinity_disengaged`: share of decisions without a sticky endpoint.
pub const DISENGAGED_NO_MATCH_SHARE: f64 = 0.9;
/// `affinity_disengaged`: the prompts share prefixes (best prefix score at
/// p90, or vLLM's prefix cache hit rate) at least this much.
pub const DISENGAGED_REUSE: f64 = 0.2;
/// `affinity_disengaged`: vLLM's hit rate above the best prefix score's
/// p50 by at least this much says the engines hold more than the prefix
/// index: the index, not the threshold, is short.
pub const DISENGAGED_INDEX_MARGIN: f64 = 0.1;
/// `gate_never_fires`: released share below this.
pub const NEVER_FIRES_RELEASED: f64 = 0.01;
/// `gate_never_fires`: pinned-worse share at least this (warning).
pub const NEVER_FIRES_PINNED: f64 = 0.05;
/// `gate_never_fires`: pinned-worse share at least this (critical).
pub const NEVER_FIRES_PINNED_CRITICAL: f64 = 0.15;
/// `inert_breaks`: releases whose sticky set and choice are known.
pub const INERT_MIN_RELEASES: u64 = 10;
/// `inert_breaks`: share of those sent to a sticky endpoint anyway.
pub const INERT_SHARE: f64 = 0.5;
/// `missing_signal`: share of decisions (warning).
pub const MISSING_SHARE: f64 = 0.05;
/// `missing_signal`: share of decisions (critical).
pub const MISSING_SHARE_CRITICAL: f64 = 0.2;
/// `missing_signal`: decisions at least.
pub const MISSING_MIN: u64 = 10;
/// `split_load_view`: each of two replicas holds at least this share.
pub const SPLIT_MIN_SHARE: f64 = 0.05;
/// `split_load_view`: their time ranges overlap by at least this share of
/// the shorter one.
pub const SPLIT_MIN_OVERLAP: f64 = 0.5;
/// `split_load_view`: consecutive decisions from different replicas.
pub const SPLIT_MIN_SWITCHES: u64 = 10;
/// `peak_misconfigured`: configured and measured peaks differ by this
/// factor (warning).
pub const PEAK_FACTOR: f64 = 1.5;
/// `peak_misconfigured`: by this factor (critical).
pub const PEAK_FACTOR_CRITICAL: f64 = 3.0;
/// `reuse_shortfall`: predicted minus delivered hit rate at least.
pub const REUSE_GAP: f64 = 0.15;
/// `reuse_shortfall`: requests with a predicted hit.
pub const REUSE_MIN_REQUESTS: u64 = 50;

/// A measured peak (recommend): value, source label, sample size.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPeak {
    /// Tokens/s.
    pub value: f64,
    /// Where it comes from (`vllm_stats`, `prometheus`, `calibration`,
    /// or [`TTFT_FIT`]).
    pub source: String,
    /// Its samples (saturated intervals, calibration runs, or the requests
    /// the TTFT fit rests on).
    pub samples: u64,
}

/// [`MeasuredPeak::source`] of the engine speed the TTFT model fitted to
/// the observed first tokens.
pub const TTFT_FIT: &str = "ttft_fit";

impl MeasuredPeak {
    /// Its source and sample size, in words.
    fn evidence(&self) -> String {
        if self.source == TTFT_FIT {
            format!(
                "fitted to the observed first tokens of {} request{}",
                self.samples,
                if self.samples == 1 { "" } else { "s" }
            )
        } else {
            format!("{}, {} samples", self.source, self.samples)
        }
    }
}

/// What the rules read of one deployment.
#[derive(Clone, Debug)]
pub struct View<'a> {
    /// Deployment name.
    pub name: &'a str,
    /// The config in force.
    pub config: &'a SourcedConfig,
    /// Per-decision signals.
    pub signals: &'a SignalsAcc,
    /// Decisions counted.
    pub decisions: u64,
    /// Released (logged), over all decisions.
    pub released_share: f64,
    /// Pinned-worse, over all decisions.
    pub pinned_worse_share: f64,
    /// Lower edge of pinned-worse, ms.
    pub pinned_worse_min_ms: f64,
    /// The gate input's median, ms, when known.
    pub gate_p50_ms: Option<f64>,
    /// The bar a calibration recommends, ms (recommend).
    pub suggested_bar_ms: Option<f64>,
    /// The measured peak (recommend).
    pub measured_peak: Option<MeasuredPeak>,
    /// The engine speed the TTFT model fitted to the observed first tokens
    /// (recommend), source [`TTFT_FIT`]; read when there is no measured
    /// peak.
    pub fitted_peak: Option<MeasuredPeak>,
    /// vLLM's own prefix cache hit rate and its stats lines (recommend).
    pub vllm_hit_rate: Option<(f64, u64)>,
}

fn pct(x: f64) -> String {
    let p = x * 100.0;
    if p > 0.0 && p < 0.1 {
        format!("{p:.2} %")
    } else {
        format!("{p:.1} %")
    }
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

fn evidence(v: &View, count: u64) -> FindingEvidence {
    FindingEvidence {
        decisions: v.decisions,
        count,
        first_ts: v.signals.span.first,
        last_ts: v.signals.span.last,
        ..FindingEvidence::default()
    }
}

fn finding(
    id: &'static str,
    severity: Severity,
    v: &View,
    summary: String,
    evidence: FindingEvidence,
    action: String,
) -> Finding {
    Finding {
        id,
        severity,
        deployment: v.name.to_string(),
        summary,
        evidence,
        action,
    }
}

/// Every rule, on one deployment.
pub fn all(v: &View) -> Vec<Finding> {
    [
        affinity_disengaged(v),
        gate_never_fires(v),
        split_load_view(v),
        peak_misconfigured(v),
        default_peak_assumed(v),
        inert_breaks(v),
        reuse_shortfall(v),
        missing_signal(v),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The nearest-rank quantile of a hundredths histogram, as a score.
fn score_quantile(h: &[u64], q: f64) -> Option<f64> {
    let n: u64 = h.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, c) in h.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(i as f64 / 100.0);
        }
    }
    Some(1.0)
}

/// `affinity_disengaged`: at least 90 % of the decisions that looked for a
/// sticky endpoint found none, while the prompts do share prefixes (the
/// best prefix score's p90, or vLLM's hit rate, at least 0.2), or while
/// nothing says whether they do.
pub fn affinity_disengaged(v: &View) -> Option<Finding> {
    let s = v.signals;
    let o = |x: Outcome| s.outcomes[outcome_index(x)];
    let no_match = o(Outcome::NoMatch);
    let engaged = o(Outcome::Sticky)
        + o(Outcome::LoadOverride)
        + o(Outcome::RequestLoadOverride)
        + o(Outcome::MissingSignal);
    let looked = no_match + engaged;
    let no_share = share(no_match, looked);
    if looked < MIN_DECISIONS || no_share < DISENGAGED_NO_MATCH_SHARE {
        return None;
    }
    let threshold = s
        .threshold
        .unwrap_or(v.config.parameters.affinity_threshold);
    let mut ev = evidence(v, no_match);
    ev.decisions = looked;
    ev.figures.insert("no_match_share".into(), no_share);
    ev.figures.insert("affinity_threshold".into(), threshold);
    let scored: u64 = s.no_match_scores.iter().sum();
    let head = format!(
        "affinity never engages: {no_match} of {looked} decisions ({}) found no endpoint at affinityThreshold {threshold}",
        pct(no_share)
    );
    let (p50, p90) = (
        score_quantile(&s.no_match_scores, 0.5),
        score_quantile(&s.no_match_scores, 0.9),
    );
    if scored >= 20
        && let (Some(p50), Some(p90)) = (p50, p90)
    {
        ev.figures.insert("best_prefix_score_p50".into(), p50);
        ev.figures.insert("best_prefix_score_p90".into(), p90);
        ev.figures.insert("scored_decisions".into(), scored as f64);
        if p90 < DISENGAGED_REUSE && v.vllm_hit_rate.is_none_or(|(h, _)| h < DISENGAGED_REUSE) {
            // No reuse to exploit: prefix affinity has nothing to pin.
            return None;
        }
        if let Some((hit, lines)) = v.vllm_hit_rate {
            ev.figures.insert("vllm_prefix_cache_hit_rate".into(), hit);
            ev.figures.insert("vllm_stats_lines".into(), lines as f64);
            if hit >= p50 + DISENGAGED_INDEX_MARGIN {
                return Some(finding(
                    ids::AFFINITY_DISENGAGED,
                    Severity::Critical,
                    v,
                    format!(
                        "{head}; their best prefix score is {p50:.2} at p50 and {p90:.2} at p90, while vLLM reports a prefix cache hit rate of {} over {lines} stats lines: the engines hold more of the prompts than the prefix index says",
                        pct(hit)
                    ),
                    ev,
                    "a larger index for the approximate prefix producer (lruCapacityPerServer), then check affinityThreshold again".into(),
                ));
            }
        }
        let to = ((p50 * 20.0).floor() / 20.0).clamp(0.05, (threshold - 0.05).max(0.05));
        return Some(finding(
            ids::AFFINITY_DISENGAGED,
            Severity::Critical,
            v,
            format!("{head}; their best prefix score is {p50:.2} at p50 and {p90:.2} at p90"),
            ev,
            format!(
                "affinityThreshold: {to:.2} (about half of these requests would pin), or check the prefix producer's index size"
            ),
        ));
    }
    if let Some((hit, lines)) = v.vllm_hit_rate {
        ev.figures.insert("vllm_prefix_cache_hit_rate".into(), hit);
        ev.figures.insert("vllm_stats_lines".into(), lines as f64);
        if hit < DISENGAGED_REUSE {
            return None;
        }
        return Some(finding(
            ids::AFFINITY_DISENGAGED,
            Severity::Critical,
            v,
            format!(
                "{head}, while vLLM reports a prefix cache hit rate of {} over {lines} stats lines",
                pct(hit)
            ),
            ev,
            "affinityThreshold below the share of each prompt the engines hold cached, or a larger index for the approximate prefix producer (lruCapacityPerServer)".into(),
        ));
    }
    Some(finding(
        ids::AFFINITY_DISENGAGED,
        Severity::Warning,
        v,
        format!("{head}; the log shows no prefix scores, so whether prompts share prefixes is unknown"),
        ev,
        "run recommend with the vLLM logs: if their prefix cache hit rate is high, lower affinityThreshold".into(),
    ))
}

/// `gate_never_fires`: under 1 % of decisions released while at least 5 %
/// stayed pinned with the gate input in `[pinned-worse min, bar)`.
pub fn gate_never_fires(v: &View) -> Option<Finding> {
    let bar = v.config.parameters.max_ttft_penalty_ms;
    if v.decisions < MIN_DECISIONS
        || bar <= 0.0
        || v.released_share >= NEVER_FIRES_RELEASED
        || v.pinned_worse_share < NEVER_FIRES_PINNED
    {
        return None;
    }
    let severity = if v.pinned_worse_share >= NEVER_FIRES_PINNED_CRITICAL {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let pinned = (v.pinned_worse_share * v.decisions as f64).round() as u64;
    let mut ev = evidence(v, pinned);
    ev.figures.insert("released_share".into(), v.released_share);
    ev.figures
        .insert("pinned_worse_share".into(), v.pinned_worse_share);
    ev.figures.insert("bar_ms".into(), bar);
    let action = match v.suggested_bar_ms {
        Some(b) => format!("maxTTFTPenaltyMs: {b:.0} (the break-even bar recommend derived)"),
        None => "maxTTFTPenaltyMs: the break-even bar recommend derives (the what-if rows show each bar's releases)".into(),
    };
    Some(finding(
        ids::GATE_NEVER_FIRES,
        severity,
        v,
        format!(
            "the bar almost never fires: {} of decisions released while {} stayed pinned with the gate input in [{:.0}, {bar:.0}) ms",
            pct(v.released_share),
            pct(v.pinned_worse_share),
            v.pinned_worse_min_ms
        ),
        ev,
        action,
    ))
}

/// `split_load_view`: two or more EPP replicas, each with at least 5 % of
/// the decisions, whose time ranges overlap by half the shorter one and
/// whose decisions alternate at least 10 times.
pub fn split_load_view(v: &View) -> Option<Finding> {
    let s = v.signals;
    let big: Vec<(&String, &super::PodAcc)> = s
        .pods
        .iter()
        .filter(|(_, a)| share(a.decisions, v.decisions) >= SPLIT_MIN_SHARE)
        .collect();
    if big.len() < 2 || s.pod_switches < SPLIT_MIN_SWITCHES {
        return None;
    }
    let mut best_overlap = 0.0f64;
    for (i, (_, a)) in big.iter().enumerate() {
        for (_, b) in &big[i + 1..] {
            let (Some(af), Some(al), Some(bf), Some(bl)) =
                (a.first_ts, a.last_ts, b.first_ts, b.last_ts)
            else {
                continue;
            };
            let shorter = (al - af).min(bl - bf);
            let inter = al.min(bl) - af.max(bf);
            if shorter > 0.0 {
                best_overlap = best_overlap.max((inter / shorter).clamp(0.0, 1.0));
            }
        }
    }
    if best_overlap < SPLIT_MIN_OVERLAP {
        return None;
    }
    let n = big.len();
    let bar = v.config.parameters.max_ttft_penalty_ms;
    let mut ev = evidence(v, v.decisions);
    ev.pods = big.iter().take(8).map(|(p, _)| (*p).clone()).collect();
    ev.figures.insert("replicas".into(), n as f64);
    ev.figures.insert("overlap".into(), best_overlap);
    ev.figures
        .insert("alternations".into(), s.pod_switches as f64);
    Some(finding(
        ids::SPLIT_LOAD_VIEW,
        Severity::Warning,
        v,
        format!(
            "{n} EPP replicas decided for this pool at the same time (overlap {} of the shorter span, {} alternations): each gate input counts only its own replica's in-flight tokens, about 1/{n} of the pool's",
            pct(best_overlap),
            s.pod_switches
        ),
        ev,
        format!(
            "maxTTFTPenaltyMs: {:.0} (the bar over {n}, if traffic splits evenly), or one active EPP replica per pool",
            bar / n as f64
        ),
    ))
}

/// `default_peak_assumed`: on the throughput path, the peak in force is the
/// filter's default, never shown by the log nor given; or it was inferred
/// from logged TTFTs beside their in-flight tokens (info).
pub fn default_peak_assumed(v: &View) -> Option<Finding> {
    let c = &v.config.parameters;
    if c.ttft_source != TtftSource::PrefillThroughput {
        return None;
    }
    let s = v.signals;
    let peak = c.peak_prefill_throughput;
    if s.implied_total > 0 && s.logged_peak == 0 {
        let mut p = s.implied_peaks.clone();
        p.sort_by(f64::total_cmp);
        let (lo, mid, hi) = (p[0], p[p.len() / 2], p[p.len() - 1]);
        let mut ev = evidence(v, s.implied_total);
        ev.figures.insert("inferred_peak".into(), mid);
        ev.figures.insert("inferred_min".into(), lo);
        ev.figures.insert("inferred_max".into(), hi);
        ev.figures.insert("peak_in_force".into(), peak);
        return Some(finding(
            ids::DEFAULT_PEAK_ASSUMED,
            Severity::Info,
            v,
            format!(
                "the log never states peakPrefillThroughput; {} {} logged beside the in-flight tokens {} computed from {} {mid:.0} tok/s{}, used for every ms figure",
                s.implied_total,
                if s.implied_total == 1 {
                    "gate line's TTFT"
                } else {
                    "gate lines' TTFTs"
                },
                if s.implied_total == 1 {
                    "it was"
                } else {
                    "they were"
                },
                if s.implied_total == 1 {
                    "gives"
                } else {
                    "give"
                },
                if hi > lo {
                    format!(" (range {lo:.0} to {hi:.0})")
                } else {
                    String::new()
                }
            ),
            ev,
            format!("none needed; to pin it, --peak-prefill-throughput {mid:.0}"),
        ));
    }
    if v.config
        .source_of(gatecal_filter::Param::PeakPrefillThroughput.name())
        != ParamSource::Default
    {
        return None;
    }
    let mut ev = evidence(v, v.decisions);
    ev.figures.insert("peak_in_force".into(), peak);
    let fitted = trusted_fit(v).filter(|m| m.value.is_finite() && m.value > 0.0);
    let (summary, action) = match (&v.measured_peak, fitted) {
        (Some(m), _) if m.value > 0.0 => {
            let f = peak / m.value;
            ev.figures.insert("measured_peak".into(), m.value);
            ev.figures.insert("scale".into(), f);
            (
                format!(
                    "the log never shows peakPrefillThroughput: the config in force is taken to run the default {peak:.0} tok/s (the current row replays it), {f:.2}x the measured {:.0} tok/s ({})",
                    m.value,
                    m.evidence()
                ),
                "pass --config with the EPP's config, so that the current row replays its peak"
                    .to_string(),
            )
        }
        (_, Some(m)) => {
            let f = peak / m.value;
            ev.figures.insert("fitted_peak".into(), m.value);
            ev.figures.insert("fitted_requests".into(), m.samples as f64);
            ev.figures.insert("scale".into(), f);
            (
                format!(
                    "every ms figure assumes the default peakPrefillThroughput {peak:.0} tok/s (the log never shows it); the observed first tokens fit {:.0} tok/s ({} request{}): every ms figure would scale by {peak:.0}/{:.0} = x{f:.2}",
                    m.value,
                    m.samples,
                    if m.samples == 1 { "" } else { "s" },
                    m.value
                ),
                format!(
                    "pass --config with the EPP's config, or --peak-prefill-throughput {:.0} if the fit holds",
                    m.value
                ),
            )
        }
        _ => (
            format!(
                "every ms figure assumes the default peakPrefillThroughput {peak:.0} tok/s (the log never shows it): it scales by {peak:.0}/P at a real peak P (recommend measures P)"
            ),
            "pass --config with the EPP's config, or --peak-prefill-throughput P (recommend measures P from vLLM logs or the observed first tokens)".into(),
        ),
    };
    Some(finding(
        ids::DEFAULT_PEAK_ASSUMED,
        Severity::Warning,
        v,
        summary,
        ev,
        action,
    ))
}

/// `peak_misconfigured`: the peak in force and the measured one differ by
/// 1.5x or more (3x: critical).
pub fn peak_misconfigured(v: &View) -> Option<Finding> {
    let c = &v.config.parameters;
    let m = v
        .measured_peak
        .as_ref()
        .filter(|m| m.value > 0.0)
        .or(trusted_fit(v))?;
    if c.ttft_source != TtftSource::PrefillThroughput || m.value <= 0.0 || !m.value.is_finite() {
        return None;
    }
    let peak = c.peak_prefill_throughput;
    let f = (peak / m.value).max(m.value / peak);
    if f < PEAK_FACTOR {
        return None;
    }
    let severity = if f >= PEAK_FACTOR_CRITICAL {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut ev = evidence(v, v.decisions);
    ev.figures.insert("peak_in_force".into(), peak);
    ev.figures.insert("measured_peak".into(), m.value);
    ev.figures.insert("factor".into(), f);
    ev.figures
        .insert("measured_samples".into(), m.samples as f64);
    Some(finding(
        ids::PEAK_MISCONFIGURED,
        severity,
        v,
        format!(
            "peakPrefillThroughput {peak:.0} tok/s in force, {:.0} measured ({}): {f:.1}x apart, so every gate input is off by that factor",
            m.value,
            m.evidence()
        ),
        ev,
        format!("peakPrefillThroughput: {:.0}", m.value),
    ))
}

/// `inert_breaks`: of at least 10 releases whose sticky set and choice are
/// known, half or more went to a sticky endpoint anyway.
pub fn inert_breaks(v: &View) -> Option<Finding> {
    let s = v.signals;
    let sh = share(s.inert, s.releases_checked);
    if s.releases_checked < INERT_MIN_RELEASES || sh < INERT_SHARE {
        return None;
    }
    let mut ev = evidence(v, s.inert);
    ev.decisions = s.releases_checked;
    ev.first_ts = s.inert_span.first;
    ev.last_ts = s.inert_span.last;
    ev.endpoints = s.inert_endpoints.top(8);
    ev.figures.insert("inert_share".into(), sh);
    Some(finding(
        ids::INERT_BREAKS,
        Severity::Warning,
        v,
        format!(
            "{} of {} releases ({}) were sent to a sticky endpoint anyway: a prefix scorer after the filter undoes the gate",
            s.inert,
            s.releases_checked,
            pct(sh)
        ),
        ev,
        "lower the prefix scorer's weight in the profile (or remove it) so that a release can reach a less loaded endpoint".into(),
    ))
}

/// The router's predicted hit share on the endpoints it picked and vLLM's
/// delivered hit rate (with its stats lines), when the first exceeds the
/// second by [`REUSE_GAP`] or more over at least [`REUSE_MIN_REQUESTS`].
fn reuse_gap(v: &View) -> Option<(f64, f64, u64)> {
    let s = v.signals;
    let (hit, lines) = v.vllm_hit_rate?;
    if s.picked_n < REUSE_MIN_REQUESTS || s.picked_prompt <= 0.0 {
        return None;
    }
    let predicted = s.picked_matched / s.picked_prompt;
    (predicted - hit >= REUSE_GAP).then_some((predicted, hit, lines))
}

/// The engine speed fitted to the observed first tokens, unless the reuse
/// falls short: the fit replays the router's predicted prefix hits, and
/// when vLLM delivers far fewer its speed absorbs the missing prefill work
/// and stands for no peak.
fn trusted_fit<'a>(v: &'a View) -> Option<&'a MeasuredPeak> {
    v.fitted_peak.as_ref().filter(|_| reuse_gap(v).is_none())
}

/// `reuse_shortfall`: the prefix hit the router predicted for the endpoints
/// it picked exceeds vLLM's delivered hit rate by 15 points or more.
pub fn reuse_shortfall(v: &View) -> Option<Finding> {
    let s = v.signals;
    let (predicted, hit, lines) = reuse_gap(v)?;
    let mut ev = evidence(v, s.picked_n);
    ev.decisions = s.picked_n;
    ev.figures.insert("predicted_hit_rate".into(), predicted);
    ev.figures.insert("vllm_hit_rate".into(), hit);
    ev.figures.insert("vllm_stats_lines".into(), lines as f64);
    Some(finding(
        ids::REUSE_SHORTFALL,
        Severity::Warning,
        v,
        format!(
            "the router predicted {} of prompt tokens cached on the endpoints it picked ({} requests); vLLM delivered {} ({lines} stats lines){}",
            pct(predicted),
            s.picked_n,
            pct(hit),
            match &v.fitted_peak {
                Some(m) if v.measured_peak.is_none() => format!(
                    "; the engine speed fitted to the first tokens ({:.0} tok/s) replays the predicted hits, so it is not taken for the peak",
                    m.value
                ),
                _ => String::new(),
            }
        ),
        ev,
        "check the producers' block size against vLLM's (--block-size) and the engines' KV cache capacity: the index holds prefixes vLLM evicted".into(),
    ))
}

/// `missing_signal`: at least 10 decisions and 5 % (20 %: critical) where a
/// side lacked its load signal, so the gate was skipped.
pub fn missing_signal(v: &View) -> Option<Finding> {
    let s = v.signals;
    let sh = share(s.missing, v.decisions);
    if s.missing < MISSING_MIN || sh < MISSING_SHARE {
        return None;
    }
    let severity = if sh >= MISSING_SHARE_CRITICAL {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut ev = evidence(v, s.missing);
    ev.first_ts = s.missing_span.first;
    ev.last_ts = s.missing_span.last;
    ev.endpoints = s.missing_endpoints.top(8);
    ev.figures.insert("missing_share".into(), sh);
    Some(finding(
        ids::MISSING_SIGNAL,
        severity,
        v,
        format!(
            "{} of {} decisions ({}) had a side without its load signal: the gate was skipped and every endpoint kept",
            s.missing,
            v.decisions,
            pct(sh)
        ),
        ev,
        "check the in-flight load producer (inFlightLoadProducerName) and the endpoints listed: their load attribute is missing".into(),
    ))
}
