//! One deployment's calibration at the end of the input: its peak's
//! checks, the break-even bar, the replayed rows and the recommendations.

use std::collections::BTreeMap;

use gatecal_filter::{Config, Outcome, PenaltyMode, TtftSource, ttft_ms};

use super::bar::{derive_static_bar, excess_ms, fmt_ms, nearest_rank, recommendation_yaml};
use super::finish::Finish;
use super::schema::{
    BreakEven, BreakEvenTokens, BreakEvenWindow, Current, DeploymentRec, Gain, MatchedTokens,
    ModeParams, Paste, PeakReport, Recommended, Row, RowKind,
};
use super::{
    Dep, Kept, MIN_WINDOW_DECISIONS, MISSING_MATCHED, THIN_MATCHED_DECISIONS,
    THIN_SATURATED_INTERVALS, wide_interval,
};
use crate::config::source::SourcedConfig;
use crate::gate::hist::SignedHistogram;
use crate::gate::whatif::replay;
use crate::peak::throughput::PeakSource;
use crate::predict::per_deployment::{Engine, Objective, SelfCheck, self_check};

/// The bars of the static sweep, ms.
pub const SWEEP_BARS_MS: [f64; 5] = [1000.0, 2000.0, 5000.0, 10000.0, 30000.0];

impl Finish<'_> {
    pub(super) fn deployment(
        &self,
        name: String,
        dep: Option<&Dep>,
        config: SourcedConfig,
        peak: PeakReport,
        engine: Option<&Engine>,
    ) -> DeploymentRec {
        let mut warnings = Vec::new();
        let p = peak.value;
        // No estimate of the peak (every source was 0 or missing): no
        // peakPrefillThroughput is recommended, and nothing is computed
        // from it.
        let has_peak = p.is_finite() && p > 0.0;
        for e in &peak.estimates {
            if !(e.value.is_finite() && e.value > 0.0) && e.source != PeakSource::Config {
                warnings.push(format!(
                    "no peak estimate from {}: {} tok/s ({})",
                    e.source.as_str(),
                    e.value,
                    e.method
                ));
            }
        }
        if !has_peak {
            warnings.push(format!(
                "no estimate of peakPrefillThroughput (every source gives {p} tok/s): none is recommended; measure it (a saturated vLLM, a calibration file) or pass --peak-prefill-throughput"
            ));
        }
        let matched_list = dep
            .map(|d| d.matched.as_slice())
            .filter(|_| has_peak)
            .unwrap_or(&[]);
        // Break-even bars.
        let mut all = SignedHistogram::new();
        let mut windows: BTreeMap<i64, SignedHistogram> = BTreeMap::new();
        for (ts, m) in matched_list {
            let be = ttft_ms(*m as f64, p);
            all.record(be);
            if let (Some(w), Some(t)) = (self.opts.window_s, ts) {
                windows
                    .entry((t / w).floor() as i64)
                    .or_default()
                    .record(be);
            }
        }
        let all_r = all.recorded();
        let break_even = BreakEven {
            count: all.count(),
            p10: all_r.quantile(0.1),
            p50: all_r.quantile(0.5),
            p90: all_r.quantile(0.9),
            windows: windows
                .iter()
                .map(|(i, h)| {
                    let r = h.recorded();
                    BreakEvenWindow {
                        start_ts: *i as f64 * self.opts.window_s.unwrap_or(0.0),
                        count: h.count(),
                        p10: r.quantile(0.1),
                        p50: r.quantile(0.5),
                        p90: r.quantile(0.9),
                    }
                })
                .collect(),
        };
        // In tokens: independent of the peak, so known without one.
        let mut tokens: Vec<i64> = dep
            .map(|d| d.matched.as_slice())
            .unwrap_or(&[])
            .iter()
            .map(|(_, m)| *m)
            .collect();
        tokens.sort_unstable();
        let break_even_tokens = BreakEvenTokens {
            count: tokens.len() as u64,
            p10: nearest_rank(&tokens, 0.1),
            p50: nearest_rank(&tokens, 0.5),
            p90: nearest_rank(&tokens, 0.9),
        };

        // The decisions the excess TTFT is measured on: (gate input, break-even), ms.
        let scored: Vec<(f64, f64)> = dep
            .map(|d| d.kept.as_slice())
            .filter(|_| has_peak)
            .unwrap_or(&[])
            .iter()
            .filter_map(|(k, _)| match *k {
                Kept::Gate {
                    sticky,
                    non_sticky,
                    matched,
                } if matched > 0 => Some((
                    ttft_ms((sticky - non_sticky) as f64, p),
                    ttft_ms(matched as f64, p),
                )),
                _ => None,
            })
            .collect();
        let mut sources = BTreeMap::new();
        if let Some(d) = dep {
            for (k, v) in &d.sources {
                sources.insert(k.as_str().to_string(), *v);
            }
        }
        let missing = tokens.is_empty().then(|| MISSING_MATCHED.to_string());
        let matched_tokens = MatchedTokens {
            decisions: dep.map_or(0, |d| d.with_sticky),
            with_matched: tokens.len() as u64,
            sources,
            scored: scored.len() as u64,
            missing,
            block_sizes: self.opts.block_sizes_of(&name).into_owned(),
        };

        // The rows.
        let current_bar = config.parameters.max_ttft_penalty_ms;
        let derived = derive_static_bar(&scored, break_even.p50);
        let mut rows = Vec::new();
        let pred = engine.map(|e| (e, &config.parameters));
        let cur = self.row(dep, p, pred, "current".into(), RowKind::Current, &|base| {
            Ok(base.clone())
        });
        rows.push(cur);
        if let Some(bar) = derived {
            rows.push(
                self.row(dep, p, pred, "static".into(), RowKind::Static, &|base| {
                    Ok(Config {
                        penalty_mode: PenaltyMode::Static,
                        peak_prefill_throughput: p.round(),
                        max_ttft_penalty_ms: bar,
                        ..base.clone()
                    })
                }),
            );
        }
        if !scored.is_empty() {
            for (label, kind, ceiling) in [
                ("matchedTokens", RowKind::MatchedTokens, None),
                (
                    "matchedTokens, no ceiling",
                    RowKind::MatchedTokensNoCeiling,
                    Some(0.0),
                ),
            ] {
                rows.push(self.row(dep, p, pred, label.into(), kind, &|base| {
                    Ok(Config {
                        penalty_mode: PenaltyMode::MatchedTokens,
                        peak_prefill_throughput: p.round(),
                        max_ttft_penalty_ms: ceiling.unwrap_or(base.max_ttft_penalty_ms),
                        ..base.clone()
                    })
                }));
            }
        }
        let instance = dep.and_then(|d| d.shown.instance.clone());
        for c in &self.opts.candidates {
            rows.push(
                self.row(dep, p, pred, c.label.clone(), RowKind::Candidate, &|base| {
                    c.resolve(base, instance.as_deref())
                }),
            );
        }
        // The peak the decisions support: the engine fitted to the observed
        // first tokens, else an estimate from evidence.
        let corrected = engine
            .and_then(Engine::fitted_peak)
            .or((has_peak && peak.source != PeakSource::Config).then_some(p))
            .filter(|c| c.is_finite() && *c > 0.0)
            .map(f64::round);
        if let Some(cp) = corrected {
            rows.push(self.row(
                dep,
                p,
                pred,
                "corrected peak".into(),
                RowKind::CorrectedPeak,
                &|base| {
                    Ok(Config {
                        peak_prefill_throughput: cp,
                        ..base.clone()
                    })
                },
            ));
        }
        if config.parameters.ttft_source != TtftSource::LatencyPredictor
            && let Some(sp) = corrected.or(has_peak.then_some(p.round()))
        {
            for bar in SWEEP_BARS_MS {
                rows.push(self.row(
                    dep,
                    p,
                    pred,
                    format!("static {} s", bar / 1000.0),
                    RowKind::StaticSweep,
                    &|base| {
                        Ok(Config {
                            penalty_mode: PenaltyMode::Static,
                            peak_prefill_throughput: sp,
                            max_ttft_penalty_ms: bar,
                            ..base.clone()
                        })
                    },
                ));
            }
        }
        let observed_ttft_ms = dep
            .map(|d| d.requests.observed())
            .unwrap_or_else(|| crate::predict::per_deployment::Requests::default().observed());
        let observed_ttft_by_endpoint_ms = dep
            .map(|d| d.requests.observed_by_endpoint())
            .unwrap_or_default();
        if observed_ttft_ms.n == 0 && dep.is_some() {
            warnings.push(format!(
                "no observed TTFT: {}",
                observed_ttft_ms.source.trim_start_matches("none: ")
            ));
        }
        let objective = self.opts.objective;
        let check = rows[0]
            .predicted_ttft_ms
            .as_ref()
            .and_then(|c| self_check(c, &observed_ttft_ms, objective));
        warnings.extend(dep.and_then(|d| d.requests.old_records()));
        if let Some(m) = engine.map(|e| &e.model) {
            if m.tokens_per_s.is_none() && dep.is_some() {
                warnings.push(format!(
                    "no predicted TTFT: no engine model ({})",
                    m.source.trim_start_matches("none: ")
                ));
            }
            if m.requests_cut > 0 {
                warnings.push(format!(
                    "the predicted TTFT rests on the first {} requests; {} later one(s) were not replayed (memory cap)",
                    m.workload.requests, m.requests_cut
                ));
            }
        }
        let current = Current {
            config: config.clone(),
            decisions: dep.map_or(0, |d| d.kept.len() as u64),
            released_share: rows[0].released_share,
            logged_released_share: rows[0].logged_released_share.unwrap_or(0.0),
            pinned_worse_share: rows[0].pinned_worse_share,
            unknown: rows[0].unknown,
        };

        // The recommendation: by predicted TTFT when the self-check holds,
        // else by excess TTFT when there is no prediction at all.
        let recommended = match &check {
            Some(c) if !c.passed => {
                warnings.push(self_check_failed(c, objective));
                None
            }
            Some(_) => self.choose(&name, &rows, &config.parameters, objective),
            None if rows[0].predicted_ttft_ms.is_some() => {
                warnings.push(
                    "no self-check of the predicted TTFT (no observed TTFT to compare the current row with): the choice by excess TTFT stands".into(),
                );
                self.recommend(&name, &rows, &config.parameters, &break_even, current_bar)
            }
            None => self.recommend(&name, &rows, &config.parameters, &break_even, current_bar),
        };
        let failed = check.as_ref().is_some_and(|c| !c.passed);
        if recommended.is_none() && !failed {
            warnings.push(format!(
                "no recommendation: {}",
                if !has_peak {
                    "no estimate of the peak to measure the break-even at".to_string()
                } else if tokens.is_empty() {
                    MISSING_MATCHED.to_string()
                } else {
                    "no decision has both matched tokens and a known gate input".to_string()
                }
            ));
        }

        // Warnings.
        match peak.source {
            PeakSource::Config => warnings.push(
                "thin evidence: no vLLM stats, calibration or --known-peak; the peak is the configured value".into(),
            ),
            PeakSource::VllmStatsUnsaturated => warnings.push(format!(
                "thin evidence: the engines were never saturated; {:.0} tok/s is only the highest interval rate seen",
                p
            )),
            PeakSource::VllmStats if peak.samples < THIN_SATURATED_INTERVALS => {
                warnings.push(format!(
                    "thin evidence: only {} saturated intervals behind the peak estimate",
                    peak.samples
                ))
            }
            _ => {}
        }
        if let Some(w) = wide_interval(&peak, p) {
            warnings.push(w);
        }
        let configured = config.parameters.peak_prefill_throughput;
        if peak.source != PeakSource::Config
            && configured > 0.0
            && (configured / p > 2.0 || p / configured > 2.0)
        {
            warnings.push(format!(
                "the configured peakPrefillThroughput {configured:.0} is {:.1}x the estimate {p:.0}: every TTFT the gate computes is off by that factor",
                configured / p
            ));
        }
        if break_even.count > 0 && break_even.count < THIN_MATCHED_DECISIONS {
            warnings.push(format!(
                "thin evidence: {} decision(s) with matched tokens",
                break_even.count
            ));
        }
        let p50s: Vec<f64> = break_even
            .windows
            .iter()
            .filter(|w| w.count >= MIN_WINDOW_DECISIONS)
            .filter_map(|w| w.p50)
            .filter(|v| *v > 0.0)
            .collect();
        if let (Some(lo), Some(hi)) = (
            p50s.iter().copied().reduce(f64::min),
            p50s.iter().copied().reduce(f64::max),
        ) && hi / lo > 2.0
        {
            warnings.push(format!(
                "the break-even p50 drifted {:.1}x across windows ({lo:.0} ms to {hi:.0} ms): a static bar cannot follow it; matchedTokens does",
                hi / lo
            ));
        }
        for d in &config.log_disagreements {
            let (given, used) = match d.given_source {
                crate::config::source::ParamSource::Flag => ("the flag", "the flag's"),
                _ => ("the config file", "the file's"),
            };
            let used = if d.used == crate::config::source::ParamSource::Log {
                "the log's".to_string()
            } else {
                format!("{used} (a what-if; drop it to replay what the EPP ran)")
            };
            warnings.push(format!(
                "{}{}: the log shows {}, {given} gives {}; the current row uses {used}",
                d.parameter,
                d.instance
                    .as_deref()
                    .map(|i| format!(" of filter instance {i}"))
                    .unwrap_or_default(),
                fmt_ms(d.log),
                fmt_ms(d.given)
            ));
        }
        for r in &rows {
            if let Some(e) = &r.error {
                warnings.push(format!("candidate {}: {e}", r.label));
            }
        }

        let paste = self.paste(&name, &rows, recommended.as_ref(), &mut warnings);
        let ttft_model = engine.map(|e| e.model.clone()).unwrap_or_else(|| {
            crate::predict::per_deployment::Requests::default()
                .engine(p, config.parameters.affinity_threshold, 1)
                .model
        });
        DeploymentRec {
            name,
            peak_prefill_throughput: peak,
            reference_peak: p,
            matched_tokens,
            break_even_ms: break_even,
            break_even_tokens,
            current,
            observed_ttft_ms,
            observed_ttft_by_endpoint_ms,
            ttft_model,
            ttft_self_check: check,
            rows,
            recommended,
            paste,
            source_disagreements: Vec::new(),
            warnings,
        }
    }

    /// Replays every decision of `dep` under `make(base config)`, measuring
    /// pinned-worse and excess TTFT at the reference peak `p`.
    fn row(
        &self,
        dep: Option<&Dep>,
        p: f64,
        pred: Option<(&Engine, &Config)>,
        label: String,
        kind: RowKind,
        make: &dyn Fn(&Config) -> Result<Config, gatecal_filter::ConfigError>,
    ) -> Row {
        let pinned_min = self.opts.pinned_worse_min_ms;
        let mut n = 0u64;
        let mut released = 0u64;
        let mut pinned = 0u64;
        let mut unknown = 0u64;
        let mut no_match = 0u64;
        let mut scored = 0u64;
        let mut excess = 0.0f64;
        let mut shown: Option<Config> = None;
        let mut error = None;
        let mut made: Vec<Option<Config>> = Vec::new();
        if let Some(d) = dep {
            for c in &d.configs {
                match make(c) {
                    Ok(x) => made.push(Some(x)),
                    Err(e) => {
                        error.get_or_insert_with(|| e.to_string());
                        made.push(None);
                    }
                }
            }
            for (k, ci) in &d.kept {
                n += 1;
                let Some(Some(c)) = made.get(usize::from(*ci)) else {
                    unknown += 1;
                    continue;
                };
                if shown.is_none() {
                    shown = Some(c.clone());
                }
                let r = replay(&k.sample(), c);
                let Some(o) = r.outcome else {
                    unknown += 1;
                    continue;
                };
                if r.no_match_info {
                    no_match += 1;
                }
                let rel = o.is_release();
                if rel {
                    released += 1;
                }
                let g_ref = match *k {
                    Kept::Gate {
                        sticky, non_sticky, ..
                    } if p > 0.0 && p.is_finite() => Some(ttft_ms((sticky - non_sticky) as f64, p)),
                    Kept::Predicted { sticky, non_sticky } => Some(sticky - non_sticky),
                    _ => None,
                };
                if o == Outcome::Sticky && g_ref.is_some_and(|g| g >= pinned_min) {
                    pinned += 1;
                }
                if let Kept::Gate { matched, .. } = *k
                    && matched > 0
                    && let Some(g) = g_ref
                {
                    let b = ttft_ms(matched as f64, p);
                    scored += 1;
                    excess += excess_ms(g, b, rel);
                }
            }
        }
        let base = dep
            .map(|d| d.shown.config.parameters.clone())
            .unwrap_or_default();
        let shown = shown.or_else(|| make(&base).ok()).unwrap_or(base);
        if error.is_none()
            && let Err(e) = make(
                &dep.map(|d| d.shown.config.parameters.clone())
                    .unwrap_or_default(),
            )
        {
            error = Some(e.to_string());
        }
        let share = |c: u64| if n == 0 { 0.0 } else { c as f64 / n as f64 };
        let predicted = match pred {
            Some((e, current)) if error.is_none() => {
                make(current).ok().and_then(|c| e.predict(current, &c))
            }
            _ => None,
        };
        let (predicted_ttft_ms, predicted_prefix_hit_share) = match predicted {
            Some((t, h)) => (Some(t), h),
            None => (None, None),
        };
        Row {
            label,
            kind,
            penalty_mode: shown.penalty_mode,
            peak_prefill_throughput: shown.peak_prefill_throughput,
            max_ttft_penalty_ms: shown.max_ttft_penalty_ms,
            released_share: share(released),
            logged_released_share: (kind == RowKind::Current)
                .then(|| share(dep.map_or(0, |d| d.logged_released))),
            pinned_worse_share: share(pinned),
            excess_ttft_ms: (scored > 0).then(|| excess / scored as f64),
            unknown,
            no_match_info: no_match,
            error,
            predicted_ttft_ms,
            predicted_prefix_hit_share,
        }
    }

    /// One mode, and why.
    fn recommend(
        &self,
        name: &str,
        rows: &[Row],
        current: &Config,
        break_even: &BreakEven,
        current_bar: f64,
    ) -> Option<Recommended> {
        let find = |k: RowKind| rows.iter().find(|r| r.kind == k && r.error.is_none());
        let st = find(RowKind::Static)?;
        let es = st.excess_ttft_ms?;
        let params = |r: &Row| ModeParams {
            penalty_mode: r.penalty_mode,
            peak_prefill_throughput: r.peak_prefill_throughput,
            max_ttft_penalty_ms: r.max_ttft_penalty_ms,
            excess_ttft_ms: r.excess_ttft_ms,
        };
        // matchedTokens with the current bar as ceiling, unless no ceiling
        // does strictly better.
        let mt = match (
            find(RowKind::MatchedTokens),
            find(RowKind::MatchedTokensNoCeiling),
        ) {
            (Some(a), Some(b)) if b.excess_ttft_ms < a.excess_ttft_ms => b,
            (Some(a), _) => a,
            _ => return None,
        };
        let em = mt.excess_ttft_ms?;
        let static_p = params(st);
        let matched_p = params(mt);
        let (rec, alt, why) = if current.ttft_source == TtftSource::LatencyPredictor {
            (
                static_p,
                matched_p,
                "static: ttftSource latencyPredictor does not allow penaltyMode matchedTokens"
                    .to_string(),
            )
        } else if em < es {
            (
                matched_p,
                static_p,
                format!(
                    "matchedTokens: it releases when the queued excess exceeds each request's own cached tokens, so its expected excess TTFT is {em:.0} ms per decision against {es:.0} ms for the best static bar ({} ms); it needs a filter build with penaltyMode",
                    fmt_ms(st.max_ttft_penalty_ms)
                ),
            )
        } else {
            (
                static_p,
                matched_p,
                format!(
                    "static: the derived bar does as well as matchedTokens here ({es:.0} against {em:.0} ms expected excess TTFT per decision) and works on every filter build"
                ),
            )
        };
        let _ = (break_even, current_bar);
        let row = if rec == params(st) { st } else { mt };
        let yaml = recommendation_yaml(name, &rec, &alt, &why);
        Some(Recommended {
            params: rec,
            alternative: alt,
            why,
            yaml,
            row: row.label.clone(),
            objective: "excess_ttft".into(),
            gain_ms: None,
        })
    }
}

fn mode_params(r: &Row) -> ModeParams {
    ModeParams {
        penalty_mode: r.penalty_mode,
        peak_prefill_throughput: r.peak_prefill_throughput,
        max_ttft_penalty_ms: r.max_ttft_penalty_ms,
        excess_ttft_ms: r.excess_ttft_ms,
    }
}

/// `v (lo–hi) ms`.
fn with_interval(v: f64, i: [f64; 2]) -> String {
    format!("{v:.0} ms ({:.0}–{:.0})", i[0], i[1])
}

/// The warning of a failed self-check.
fn self_check_failed(c: &SelfCheck, objective: Objective) -> String {
    let off: Vec<String> = c
        .quantiles
        .iter()
        .filter(|q| !q.inside && (q.quantile != "p99" || objective == Objective::P99))
        .map(|q| {
            format!(
                "{} predicted {} against {:.0} ms observed ({:+.0} %)",
                q.quantile,
                with_interval(q.predicted, q.interval),
                q.observed,
                q.gap_share * 100.0
            )
        })
        .collect();
    let mut why = Vec::new();
    if !off.is_empty() {
        why.push(format!(
            "the replay of the config in force misses the observed TTFT beyond its 90 % interval ({})",
            off.join("; ")
        ));
    }
    why.extend(c.outcomes_failure());
    format!(
        "no recommendation: {}, so no predicted TTFT is acted on; the paste block falls back to the corrected peak",
        why.join("; and ")
    )
}

impl Finish<'_> {
    /// The row with the lowest predicted `objective`, the current one when
    /// their intervals overlap.
    pub(super) fn choose(
        &self,
        name: &str,
        rows: &[Row],
        current: &Config,
        objective: Objective,
    ) -> Option<Recommended> {
        let latency = current.ttft_source == TtftSource::LatencyPredictor;
        let eligible = |r: &&Row| {
            r.error.is_none()
                && r.predicted_ttft_ms.is_some()
                && !(latency && r.penalty_mode == PenaltyMode::MatchedTokens)
        };
        let value = |r: &Row| r.predicted_ttft_ms.as_ref().map(|p| p.at(objective));
        let cur = rows.iter().find(|r| r.kind == RowKind::Current)?;
        let (cv, ci) = value(cur)?;
        let best = rows.iter().filter(eligible).min_by(|a, b| {
            let (x, y) = (
                value(a).map_or(f64::MAX, |v| v.0),
                value(b).map_or(f64::MAX, |v| v.0),
            );
            x.total_cmp(&y)
        })?;
        let (bv, bi) = value(best)?;
        let overlap = bi[0] <= ci[1] && ci[0] <= bi[1];
        let obj = objective.as_str();
        let chosen = if best.kind == RowKind::Current || overlap {
            cur
        } else {
            best
        };
        let why = if chosen.kind == RowKind::Current {
            if best.kind == RowKind::Current {
                format!(
                    "current: no config replayed predicts a lower TTFT {obj} than the config in force ({})",
                    with_interval(cv, ci)
                )
            } else {
                format!(
                    "current: the lowest predicted TTFT {obj}, {} under {}, is inside the current config's interval ({}), so no change is predicted to help",
                    with_interval(bv, bi),
                    best.label,
                    with_interval(cv, ci)
                )
            }
        } else {
            format!(
                "{}: the lowest predicted TTFT {obj}, {}, against {} under the config in force: {:.0} ms lower ({:.0}–{:.0}); it would have released {:.1} % of the decisions",
                chosen.label,
                with_interval(bv, bi),
                with_interval(cv, ci),
                cv - bv,
                ci[0] - bi[1],
                ci[1] - bi[0],
                chosen.released_share * 100.0
            )
        };
        // The alternative: the best row of the other family.
        let other = if chosen.penalty_mode == PenaltyMode::MatchedTokens {
            PenaltyMode::Static
        } else {
            PenaltyMode::MatchedTokens
        };
        let alt_row = rows
            .iter()
            .filter(eligible)
            .filter(|r| r.penalty_mode == other)
            .min_by(|a, b| {
                let (x, y) = (
                    value(a).map_or(f64::MAX, |v| v.0),
                    value(b).map_or(f64::MAX, |v| v.0),
                );
                x.total_cmp(&y)
            })
            .unwrap_or(cur);
        let rec = mode_params(chosen);
        let alt = mode_params(alt_row);
        let yaml = recommendation_yaml(name, &rec, &alt, &why);
        Some(Recommended {
            params: rec,
            alternative: alt,
            why,
            yaml,
            row: chosen.label.clone(),
            objective: obj.into(),
            gain_ms: Some(Gain {
                value: cv - value(chosen)?.0,
                interval: [ci[0] - value(chosen)?.1[1], ci[1] - value(chosen)?.1[0]],
            }),
        })
    }

    /// What to paste: the row `--choose` names, else the recommendation
    /// (in the `--mode` family), else the corrected peak and the static bar
    /// the decisions support.
    pub(super) fn paste(
        &self,
        name: &str,
        rows: &[Row],
        recommended: Option<&Recommended>,
        warnings: &mut Vec<String>,
    ) -> Option<Paste> {
        let objective = self.opts.objective;
        let mode = self.opts.mode;
        let make = |r: &Row, why: String| {
            let params = mode_params(r);
            let alt = rows
                .iter()
                .find(|x| x.kind == RowKind::Current)
                .map(mode_params)
                .unwrap_or_else(|| params.clone());
            let yaml = recommendation_yaml(name, &params, &alt, &why).replace(
                "# alternative, not recommended",
                "# the config in force, for comparison",
            );
            Paste {
                row: r.label.clone(),
                params,
                why,
                yaml,
            }
        };
        let did = |r: &Row| {
            let ttft = r
                .predicted_ttft_ms
                .as_ref()
                .map(|p| {
                    format!(
                        ", predicted TTFT {} {}",
                        objective.as_str(),
                        with_interval(p.at(objective).0, p.at(objective).1)
                    )
                })
                .unwrap_or_default();
            format!(
                "it would have released {:.1} % of the decisions, pinned {:.1} %{ttft}",
                r.released_share * 100.0,
                r.pinned_worse_share * 100.0
            )
        };
        if let Some(label) = &self.opts.choose {
            match rows
                .iter()
                .find(|r| r.label == *label || r.kind.as_str() == label)
            {
                Some(r) if r.error.is_none() => {
                    return Some(make(
                        r,
                        format!("{}: chosen with --choose; {}", r.label, did(r)),
                    ));
                }
                Some(r) => warnings.push(format!(
                    "--choose {label}: not valid for this deployment: {}",
                    r.error.as_deref().unwrap_or_default()
                )),
                None => warnings.push(format!(
                    "--choose {label}: no such row (rows: {})",
                    rows.iter()
                        .map(|r| r.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
        if let Some(rec) = recommended
            && mode.is_none_or(|m| m == rec.params.penalty_mode)
        {
            return Some(Paste {
                row: rec.row.clone(),
                params: rec.params.clone(),
                why: rec.why.clone(),
                yaml: rec.yaml.clone(),
            });
        }
        let family = mode.unwrap_or(PenaltyMode::Static);
        // A recommendation by predicted TTFT in the other family: that
        // family's row with the lowest prediction.
        if let Some(rec) = recommended
            && rec.gain_ms.is_some()
            && let Some(r) = rows
                .iter()
                .filter(|r| r.error.is_none() && r.penalty_mode == family)
                .filter_map(|r| Some((r, r.predicted_ttft_ms.as_ref()?.at(objective).0)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(r, _)| r)
        {
            return Some(make(
                r,
                format!(
                    "{}: --mode {}: the lowest predicted TTFT {} of that family (the recommendation is {}); {}",
                    r.label,
                    family.as_str(),
                    objective.as_str(),
                    rec.row,
                    did(r)
                ),
            ));
        }
        let find = |k: RowKind| rows.iter().find(|r| r.kind == k && r.error.is_none());
        let pick = match family {
            PenaltyMode::MatchedTokens => find(RowKind::MatchedTokens)
                .or_else(|| find(RowKind::MatchedTokensNoCeiling))
                .map(|r| (r, "matchedTokens at the peak estimate, the current bar as ceiling")),
            PenaltyMode::Static => find(RowKind::Static)
                .map(|r| (r, "static at the peak estimate, the bar that minimises the excess TTFT"))
                .or_else(|| {
                    find(RowKind::CorrectedPeak).map(|r| {
                        (
                            r,
                            "the config in force with peakPrefillThroughput corrected to the peak the decisions support (the engine fitted to the observed first tokens, else the peak estimate); its bar is kept, as no bar can be derived without matched tokens",
                        )
                    })
                }),
        };
        if let Some((r, what)) = pick {
            let reason = if recommended.is_some() {
                format!("--mode {}", family.as_str())
            } else {
                "no recommendation".to_string()
            };
            return Some(make(
                r,
                format!("{}: {reason}; {what}; {}", r.label, did(r)),
            ));
        }
        if family == PenaltyMode::MatchedTokens
            && let Some(r) = find(RowKind::CorrectedPeak)
        {
            let mut m = r.clone();
            m.penalty_mode = PenaltyMode::MatchedTokens;
            m.label = format!("{}, matchedTokens", r.label);
            return Some(make(
                &m,
                format!(
                    "{}: --mode matchedTokens without matched tokens in the log: the corrected peak with penaltyMode matchedTokens and the current bar as ceiling (not replayed: the log has no match information)",
                    m.label
                ),
            ));
        }
        None
    }
}
