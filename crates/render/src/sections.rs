//! The report's tables, built once for every human-readable format.

use gatecal_analysis::{GateDistReport, InputSummary, Stats, WhatIfResult};
use gatecal_filter::{Outcome, PenaltyMode};

use crate::notes::{Note, lines};
use crate::num::{bar, count, count_pct, ms, pct, utc};

mod findings;
mod histogram;
mod recommend;
mod ttft;

pub use findings::{evidence_note, findings_section};
pub use histogram::{DISPLAY_BINS, display_bins, text_histogram};
pub use recommend::{matched_sources, producer_block_sizes, recommend_sections};

/// A titled table of strings.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// Title.
    pub title: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table: the same text about several
    /// deployments once, naming them ([`crate::notes`]).
    pub notes: Vec<String>,
}

fn s(v: &str) -> String {
    v.to_string()
}

/// Whether any decision of the report has traced evidence (the evidence
/// column then shows it).
fn traced(r: &GateDistReport) -> bool {
    r.overall.stats.evidence.traced > 0
}

fn evidence(st: &Stats, with_traced: bool) -> String {
    let e = &st.evidence;
    if with_traced {
        return format!(
            "{} / {} / {} / {} / {}",
            count(e.logged),
            count(e.traced),
            count(e.observed),
            count(e.reconstructed),
            count(e.unknown)
        );
    }
    format!(
        "{} / {} / {} / {}",
        count(e.logged),
        count(e.observed),
        count(e.reconstructed),
        count(e.unknown)
    )
}

fn self_check(st: &Stats) -> String {
    let c = &st.self_check;
    if c.replayed == 0 {
        "–".into()
    } else {
        format!(
            "{}/{} ({})",
            count(c.agreed),
            count(c.replayed),
            pct(c.agreed as f64 / c.replayed as f64)
        )
    }
}

/// A quantile, marked `*` when it is over fewer than 20 values.
fn q(v: Option<f64>, small: bool) -> String {
    let m = ms(v);
    if small && v.is_some() {
        format!("{m}{SMALL_MARK}")
    } else {
        m
    }
}

/// One row of the what-if table: deployment, config label, rule, peak,
/// released, pinned, unknown, no match info.
fn what_if_row(name: &str, label: &str, w: &WhatIfResult) -> Vec<String> {
    let rule = match w.mode {
        PenaltyMode::Static => format!("static, bar {}", bar(w.max_ttft_penalty_ms)),
        PenaltyMode::MatchedTokens => match w.max_ttft_penalty_ms {
            Some(m) if m > 0.0 => format!("matchedTokens, ceiling {}", bar(Some(m))),
            Some(_) => s("matchedTokens, no ceiling"),
            None => s("matchedTokens, mixed ceilings"),
        },
    };
    vec![
        name.to_string(),
        label.to_string(),
        rule,
        w.peak_prefill_throughput
            .map(|p| crate::num::group(p.round() as i64))
            .unwrap_or_else(|| s("mixed")),
        count_pct(w.released, w.released_share),
        count_pct(w.pinned_worse, w.pinned_worse_share),
        count(w.unknown),
        if w.mode == PenaltyMode::MatchedTokens {
            count(w.no_match_info)
        } else {
            s("–")
        },
    ]
}

/// The marker of quantiles over fewer than 20 values.
pub const SMALL_MARK: &str = "*";

/// The note that explains [`SMALL_MARK`].
pub fn small_sample_note() -> String {
    format!(
        "{SMALL_MARK} fewer than {} gate inputs: the quantiles are a handful of order statistics, not a distribution.",
        gatecal_analysis::MIN_QUANTILE_SAMPLE
    )
}

fn replay_cell(st: &Stats) -> String {
    let r = &st.replay;
    if r.decisions == 0 {
        "–".into()
    } else {
        format!("{}/{}", count(r.agreed), count(r.decisions))
    }
}

/// One row of the summary table.
fn summary_row(name: &str, st: &Stats, with_traced: bool) -> Vec<String> {
    let g = &st.gate_input_ms;
    let small = g.small_sample;
    vec![
        name.to_string(),
        count(st.decisions),
        count_pct(st.released, st.released_share),
        count_pct(st.pinned_worse.count, st.pinned_worse.share),
        count(g.count),
        q(g.p50, small),
        q(g.p90, small),
        q(g.p99, small),
        q(g.p999, small),
        ms(g.max),
        bar(st.bar_ms),
        evidence(st, with_traced),
        self_check(st),
        replay_cell(st),
    ]
}

/// The replay agreement sentence of one deployment (always shown), with the
/// cause and the first disagreeing request ids when some disagree.
pub fn replay_notes(name: &str, st: &Stats) -> Vec<Note> {
    let r = &st.replay;
    let mut out = vec![Note::about(
        name,
        format!(
            "the config in force reproduces {} of {} logged outcomes with a known gate input; releases: {} logged, {} replayed",
            count(r.agreed),
            count(r.decisions),
            count(r.logged_released),
            count(r.replayed_released)
        ),
    )];
    if let Some(c) = &r.cause {
        let ids = if r.disagreements.is_empty() {
            String::new()
        } else {
            format!(" (first: {})", r.disagreements.join(", "))
        };
        out.push(Note::warning(name, format!("{c}{ids}")));
    }
    out
}

/// The censoring footnote of one deployment, when the logged holds moved
/// any reconstructed estimate.
pub fn censoring_note(name: &str, st: &Stats) -> Option<Note> {
    let c = &st.censoring;
    (c.moved > 0).then(|| {
        Note::about(name, format!(
            "the logged holds censored {} of {} reconstructed gate inputs down to the bar (moved p50 {} / p90 {} / max {} ms)",
            count(c.moved),
            count(c.reconstructed),
            ms(c.move_p50_ms),
            ms(c.move_p90_ms),
            ms(c.move_max_ms)
        ))
    })
}

/// The config in force of one deployment with each logged-able parameter's
/// source, and a warning per parameter whose logged value differs from a
/// file's or flag's.
pub fn config_notes(name: &str, c: &gatecal_analysis::SourcedConfig) -> Vec<Note> {
    use gatecal_analysis::ParamSource;
    let src = |k: &str| match c.source_of(k) {
        ParamSource::Log => "log",
        ParamSource::File => "file",
        ParamSource::Flag => "flag",
        ParamSource::Default => "default",
    };
    let p = &c.parameters;
    let mut out = vec![Note::about(
        name,
        format!(
            "config from {}: maxTTFTPenaltyMs {} ms [{}], peakPrefillThroughput {} tok/s [{}], affinityThreshold {} [{}], penaltyMode {} [{}]",
            c.source,
            crate::num::group(p.max_ttft_penalty_ms.round() as i64),
            src(gatecal_filter::Param::MaxTtftPenaltyMs.name()),
            crate::num::group(p.peak_prefill_throughput.round() as i64),
            src(gatecal_filter::Param::PeakPrefillThroughput.name()),
            p.affinity_threshold,
            src(gatecal_filter::Param::AffinityThreshold.name()),
            p.penalty_mode.as_str(),
            src(gatecal_filter::Param::PenaltyMode.name()),
        ),
    )];
    if let Some(era) = &c.era {
        out.push(Note::about(name, era.note.clone()));
    }
    for d in &c.log_disagreements {
        let given = match d.given_source {
            ParamSource::Flag => "the flag",
            _ => "the config file",
        };
        let used = match d.used {
            ParamSource::Flag => "using the flag's (a what-if; drop it to replay what the EPP ran)",
            _ => "using the log's",
        };
        out.push(Note::warning(
            name,
            format!(
                "{}{}: the log shows {}, {given} gives {}; {used}",
                d.parameter,
                d.instance
                    .as_deref()
                    .map(|i| format!(" of filter instance {i}"))
                    .unwrap_or_default(),
                d.log,
                d.given
            ),
        ));
    }
    out
}

/// The summary headers.
fn summary_headers(r: &GateDistReport) -> Vec<String> {
    vec![
        s("deployment"),
        s("decisions"),
        s("released"),
        format!(
            "pinned ≥{} ms",
            crate::num::group(r.options.pinned_worse_min_ms as i64)
        ),
        s("gate n"),
        s("p50 ms"),
        s("p90 ms"),
        s("p99 ms"),
        s("p99.9 ms"),
        s("max ms"),
        s("bar"),
        s(if traced(r) {
            "evidence L/T/O/R/U"
        } else {
            "evidence L/O/R/U"
        }),
        s("self-check"),
        s("replay"),
    ]
}

/// The ledger table.
pub fn input_section(i: &InputSummary) -> Section {
    Section {
        title: s("Input"),
        headers: vec![
            s("lines"),
            s("used"),
            s("ignored"),
            s("malformed"),
            s("decisions"),
            s("incomplete"),
            s("evicted"),
        ],
        rows: vec![vec![
            count(i.lines_total),
            count(i.lines_used),
            count(i.lines_ignored),
            count(i.lines_malformed),
            count(i.decisions_assembled),
            count(i.decisions_incomplete),
            count(i.decisions_evicted),
        ]],
        notes: i
            .traces
            .iter()
            .map(|t| {
                format!(
                    "traces: {} input(s), {} span(s), {} traced decision(s){}; {}",
                    count(t.inputs),
                    count(t.spans),
                    count(t.decisions),
                    if t.without_profile > 0 {
                        format!(" ({} without their profile span)", count(t.without_profile))
                    } else {
                        String::new()
                    },
                    t.note
                )
            })
            .chain(duplicates_note(&i.duplicates).map(|n| format!("duplicates: {n}")))
            .chain((i.prometheus_samples_dropped > 0).then(|| {
                format!(
                    "prometheus: {} sample(s) dropped, their time or value out of range (NaN, an infinity, negative, past 2^53)",
                    count(i.prometheus_samples_dropped)
                )
            }))
            .chain(i.first_malformed.iter().map(|m| format!("malformed: {m}")))
            .collect(),
    }
}

/// The note on vLLM stats lines past the cap, when any were: the peak
/// section's footnote and recommend's warning.
pub fn vllm_cut_note(c: &gatecal_analysis::VllmCut) -> Option<String> {
    (c.lines > 0).then(|| {
        format!(
            "{} vLLM stats line(s) past the first {} were not used (the peak and the hit rates come from the first ones read)",
            count(c.lines),
            count(c.max_lines as u64)
        )
    })
}

/// The note on Prometheus samples given twice, when any were: part of
/// [`duplicates_note`], and recommend's warning.
pub fn prometheus_duplicates_note(d: &gatecal_analysis::Duplicates) -> Option<String> {
    let mut parts = Vec::new();
    if d.prometheus > 0 {
        parts.push(format!(
            "{} Prometheus sample(s) seen twice (same series, time and value) are counted once",
            count(d.prometheus)
        ));
    }
    if d.prometheus_conflicts > 0 {
        parts.push(format!(
            "{} Prometheus sample(s) seen twice with different values (same series and time): the first read is used (the deployments' warnings name them)",
            count(d.prometheus_conflicts)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The note on decisions or vLLM stats lines seen twice, when any were
/// (or could not be checked): the input table's footnote and the binaries' warning.
pub fn duplicates_note(d: &gatecal_analysis::Duplicates) -> Option<String> {
    let mut parts = Vec::new();
    if d.decisions > 0 {
        parts.push(format!(
            "{} decision(s) seen twice (same deployment, request id, profile, filter instance and time) \
             are counted once: a log given twice, or overlapping captures",
            count(d.decisions)
        ));
    }
    if d.vllm_stats > 0 {
        parts.push(format!(
            "{} vLLM stats line(s) seen twice (same deployment, pod, engine, time and values) \
             are counted once",
            count(d.vllm_stats)
        ));
    }
    parts.extend(prometheus_duplicates_note(d));
    let unchecked: Vec<String> = [
        (d.unchecked, "decision(s)"),
        (d.vllm_unchecked, "vLLM stats line(s)"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{} {what}", count(n)))
    .collect();
    if !unchecked.is_empty() {
        parts.push(format!(
            "{} older than the duplicate check's memory (about the newest {} decisions and stats lines) were not checked",
            unchecked.join(" and "),
            count(gatecal_analysis::MAX_FINGERPRINTS as u64)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The partial reports a merged report was made of (`gate-dist merge`):
/// the first 20, each with its window (or its decisions' times) and count.
fn merged_notes(parts: &[gatecal_analysis::PartInfo]) -> Vec<String> {
    const LISTED: usize = 20;
    if parts.is_empty() {
        return Vec::new();
    }
    let decisions: u64 = parts.iter().map(|p| p.decisions).sum();
    let mut out = vec![format!(
        "merged from {} partial report(s), {} decision(s):",
        count(parts.len() as u64),
        count(decisions)
    )];
    for p in parts.iter().take(LISTED) {
        let t = |v: Option<f64>| v.map_or_else(|| "…".to_string(), crate::num::utc);
        let range = if p.since.is_some() || p.until.is_some() {
            format!("[{} – {})", t(p.since), t(p.until))
        } else {
            format!("{} – {}", t(p.first_ts), t(p.last_ts))
        };
        out.push(format!(
            "  {}: {range}, {} decision(s)",
            p.source.as_deref().unwrap_or("(partial)"),
            count(p.decisions)
        ));
    }
    if parts.len() > LISTED {
        out.push(format!(
            "  … and {} more",
            count((parts.len() - LISTED) as u64)
        ));
    }
    out
}

/// Every section of a gate-dist report, in order.
pub fn gate_dist_sections(r: &GateDistReport) -> Vec<Section> {
    let mut out = Vec::new();
    let mut input = input_section(&r.input);
    input.notes.extend(merged_notes(&r.merged));
    out.push(input);

    let mut rows: Vec<Vec<String>> = r
        .deployments
        .iter()
        .map(|d| summary_row(&d.name, &d.stats, traced(r)))
        .collect();
    if r.deployments.len() > 1 {
        rows.push(summary_row("overall", &r.overall.stats, traced(r)));
    }
    let mut notes = vec![Note::general(format!(
        "{}Shares are of all decisions. Pinned: held while the gate input was in [{} ms, bar]. \
         Gate input: bestStickyTTFT − bestNonStickyTTFT over decisions where the gate was evaluated; \
         evidence L/O/R/U = logged / observed / reconstructed (loads carried forward ≤ {} s) / unknown{}.",
        match &r.input.traces {
            Some(t) if t.traces_only => format!(
                "TRACE SAMPLE: these figures describe the {} traced decision(s), not all decisions. ",
                count(t.decisions)
            ),
            _ => String::new(),
        },
        crate::num::group(r.options.pinned_worse_min_ms as i64),
        r.options.max_staleness_s,
        if traced(r) {
            "; T = traced (the decision's span gives it exactly)"
        } else {
            ""
        }
    ))];
    for d in &r.deployments {
        let c = &d.stats.self_check;
        if c.replayed > c.agreed {
            notes.push(Note::about(&d.name, format!(
                "self-check disagrees on {} decision(s): {} — a parser or reconstruction bug, or a config mismatch",
                c.replayed - c.agreed,
                c.disagreements.join(", ")
            )));
        }
        if c.bar_mismatches > 0 {
            notes.push(Note::about(
                &d.name,
                format!(
                    "{} decision(s) logged a maxPenalty other than the config's {}",
                    c.bar_mismatches,
                    bar(d.stats.bar_ms)
                ),
            ));
        }
        notes.extend(replay_notes(&d.name, &d.stats));
        notes.extend(censoring_note(&d.name, &d.stats));
        if d.stats.gate_input_ms.unbounded > 0 {
            notes.push(Note::about(&d.name, format!(
                "{} gate input(s) were MaxFloat64 sentinels (a side had no prediction); counted, not in the quantiles",
                d.stats.gate_input_ms.unbounded
            )));
        }
        notes.extend(config_notes(&d.name, &d.config));
    }
    let small = r.deployments.iter().any(|d| {
        d.stats.gate_input_ms.small_sample
            || d.windows.iter().any(|w| w.stats.gate_input_ms.small_sample)
    }) || r.overall.stats.gate_input_ms.small_sample;
    if small {
        notes.push(Note::general(small_sample_note()));
    }
    out.push(Section {
        title: s("Gate input and releases"),
        headers: summary_headers(r),
        rows,
        notes: lines(&notes),
    });

    let mut headers = vec![s("deployment")];
    headers.extend(Outcome::ALL.iter().map(|o| o.as_str().to_string()));
    headers.push(s("unknown"));
    let outcome_row = |name: &str, st: &Stats| {
        let mut row = vec![name.to_string()];
        row.extend(
            Outcome::ALL
                .iter()
                .map(|o| count(st.outcomes.get(o.as_str()).copied().unwrap_or(0))),
        );
        row.push(count(st.outcomes.get("unknown").copied().unwrap_or(0)));
        row
    };
    let mut rows: Vec<Vec<String>> = r
        .deployments
        .iter()
        .map(|d| outcome_row(&d.name, &d.stats))
        .collect();
    if r.deployments.len() > 1 {
        rows.push(outcome_row("overall", &r.overall.stats));
    }
    if let Some(t) = traced_section(r) {
        out.push(t);
    }

    out.push(Section {
        title: s("Decisions by logged outcome"),
        headers,
        rows,
        notes: Vec::new(),
    });

    let mut rows = Vec::new();
    let peaks: Vec<String> = r
        .deployments
        .iter()
        .map(|d| {
            let p = crate::num::group(d.config.parameters.peak_prefill_throughput.round() as i64);
            if r.deployments.len() > 1 {
                format!("{} {p} tok/s", d.name)
            } else {
                format!("{p} tok/s")
            }
        })
        .collect();
    let mut notes = vec![Note::general(format!(
        "Every decision replayed through the filter core. current: the config in force, released as replayed (and as logged). \
         Pinned, in every row: held under the row's config with the gate input, measured at one reference peak (the config in force's: {}), \
         at least {} ms, so rows at other peaks compare and the current row's count is the summary's. \
         Unknown: gate input not known, in neither count. \
         No match info: the break-even test was skipped (held) for lack of matched tokens.",
        peaks.join(", "),
        crate::num::group(r.options.pinned_worse_min_ms as i64),
    ))];
    // The predicted TTFT, when the candidates were predicted: on the
    // current and candidate rows.
    let predicted = r
        .deployments
        .iter()
        .any(|d| d.stats.current.predicted_ttft_ms.is_some());
    let with_prediction =
        |mut row: Vec<String>, p: Option<&Option<gatecal_analysis::PredictedTtft>>| {
            if predicted {
                row.push(match p {
                    Some(p) => ttft::predicted_cell(p.as_ref()),
                    None => s(""),
                });
            }
            row
        };
    if predicted {
        notes.push(Note::general(
            "Predicted TTFT (current and candidate rows) = the deployment's requests replayed through the filter core and the picker under the row's config, \
             served by the engine fitted to the observed first tokens: p50 / p90 / p99 ms, the p90's 90 % interval in brackets (methodology §8). \
             The current row's prediction beside the observed TTFT is the self-check.",
        ));
    }
    for d in &r.deployments {
        let st = &d.stats;
        let cur = &st.current;
        let mut row = what_if_row(&d.name, "current", &cur.replayed);
        row[4] = format!(
            "{}, logged {}",
            count_pct(cur.replayed.released, cur.replayed.released_share),
            count_pct(cur.logged_released, cur.logged_released_share)
        );
        rows.push(with_prediction(row, cur.predicted_ttft_ms.as_ref()));
        for w in &st.what_if {
            rows.push(with_prediction(what_if_row(&d.name, "–", w), None));
        }
        if let Some(n) = d
            .ttft_model
            .as_ref()
            .and_then(|m| ttft::model_note(&d.name, m))
        {
            notes.push(n);
        }
        if let Some(Some(c)) = &d.ttft_self_check {
            notes.push(ttft::self_check_note(
                &d.name,
                c,
                "failed: the candidates' predictions are not to be acted on",
            ));
        }
        for w in &d.warnings {
            notes.push(Note::warning(&d.name, w.clone()));
        }
        for c in &st.candidates {
            let mut row = what_if_row(&d.name, &c.label, &c.result);
            if c.invalid == st.decisions && c.invalid > 0 {
                row[2] = s("not valid here (see below)");
                row[3] = s("–");
            }
            rows.push(with_prediction(row, c.predicted_ttft_ms.as_ref()));
            if let Some(e) = &c.error {
                notes.push(Note::warning(&d.name, format!(
                    "candidate {}: not valid for this deployment's config ({} decision(s) not replayed): {e}",
                    c.label,
                    count(c.invalid)
                )));
            }
        }
    }
    let mut headers = vec![
        s("deployment"),
        s("config"),
        s("rule"),
        s("peak tok/s"),
        s("released"),
        s("pinned"),
        s("unknown"),
        s("no match info"),
    ];
    if predicted {
        headers.push(s("predicted TTFT p50 / p90 [interval] / p99 ms"));
    }
    out.push(Section {
        title: s("What if"),
        headers,
        rows,
        notes: lines(&notes),
    });

    let windows: Vec<Vec<String>> = r
        .deployments
        .iter()
        .flat_map(|d| {
            d.windows.iter().map(move |w| {
                let g = &w.stats.gate_input_ms;
                vec![
                    d.name.clone(),
                    utc(w.start_ts),
                    count(w.stats.decisions),
                    count_pct(w.stats.released, w.stats.released_share),
                    count_pct(w.stats.pinned_worse.count, w.stats.pinned_worse.share),
                    count(g.count),
                    q(g.p50, g.small_sample),
                    q(g.p90, g.small_sample),
                    q(g.p99, g.small_sample),
                ]
            })
        })
        .collect();
    if !windows.is_empty() {
        out.push(Section {
            title: s("Per window"),
            headers: vec![
                s("deployment"),
                s("window start (UTC)"),
                s("decisions"),
                s("released"),
                s("pinned"),
                s("gate n"),
                s("p50 ms"),
                s("p90 ms"),
                s("p99 ms"),
            ],
            rows: windows,
            notes: Vec::new(),
        });
    }
    out.push(ttft::observed_section(r.deployments.iter().map(|d| {
        (
            d.name.as_str(),
            &d.observed_ttft_ms,
            &d.observed_ttft_by_endpoint_ms,
        )
    })));
    out
}

/// The trace sample and the reconstruction's error measured on it, when
/// any decision has a trace span.
fn traced_section(r: &GateDistReport) -> Option<Section> {
    let row = |name: &str, st: &Stats| -> Option<Vec<String>> {
        let t = st.traced.as_ref()?;
        let v = &t.validation;
        let pair = |d: &gatecal_analysis::Distribution| {
            if d.count == 0 {
                s("–")
            } else {
                format!("{} / {}", ms(d.p50), ms(d.p90))
            }
        };
        Some(vec![
            name.to_string(),
            count_pct(
                t.decisions,
                if st.decisions == 0 {
                    0.0
                } else {
                    t.decisions as f64 / st.decisions as f64
                },
            ),
            count(t.joined),
            count(t.gate_input_ms.count),
            pair(&t.gate_input_ms),
            count(v.pairs),
            pair(&v.abs_error_ms),
            pair(&v.error_ms),
            pair(&v.reconstructed_ms),
            pair(&v.traced_ms),
            count(v.reconstruction_unknown),
        ])
    };
    let mut rows: Vec<Vec<String>> = r
        .deployments
        .iter()
        .filter_map(|d| row(&d.name, &d.stats))
        .collect();
    if rows.is_empty() {
        return None;
    }
    if r.deployments.len() > 1
        && let Some(o) = row("overall", &r.overall.stats)
    {
        rows.push(o);
    }
    let mut notes = vec![s(
        "Traced: decisions with a filter_prefix_cache_affinity span (share of all decisions); joined: log decisions matched to their span by request id and profile. \
         Self-validation over the joined decisions the logs alone reconstructed: |error| and error = reconstructed − traced, and each side's p50 / p90, ms. \
         Not reconstructed: a traced input the logs alone could not give.",
    )];
    if let Some(t) = &r.input.traces {
        notes.push(t.note.clone());
    }
    Some(Section {
        title: s("Trace sample and self-validation"),
        headers: vec![
            s("deployment"),
            s("traced"),
            s("joined"),
            s("traced gate n"),
            s("traced p50 / p90"),
            s("pairs"),
            s("|error| p50 / p90"),
            s("error p50 / p90"),
            s("reconstructed p50 / p90"),
            s("traced p50 / p90 (pairs)"),
            s("not reconstructed"),
        ],
        rows,
        notes,
    })
}
