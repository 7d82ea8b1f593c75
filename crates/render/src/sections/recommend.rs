//! The sections of a recommend report, and the cells and notes only it
//! shows (the producers' block sizes, where matched tokens come from).

use gatecal_analysis::{DeploymentRec, RecommendReport, Row, RowKind};
use gatecal_filter::PenaltyMode;

use super::{Section, input_section, s, vllm_cut_note};
use crate::notes::{Note, lines};
use crate::num::{bar, count, ms, pct};

fn tps(v: f64) -> String {
    crate::num::group(v.round() as i64)
}

/// The block sizes of the producers a deployment's matched tokens come
/// from, with their labels.
pub fn producer_block_sizes(
    d: &gatecal_analysis::DeploymentRec,
) -> Vec<(&str, &gatecal_analysis::BlockSize)> {
    let b = &d.matched_tokens.block_sizes;
    [
        ("approximate_producer", &b.approximate_producer),
        ("precise_producer", &b.precise_producer),
    ]
    .into_iter()
    .filter(|(label, _)| d.matched_tokens.sources.contains_key(*label))
    .collect()
}

/// A deployment's matched-token sources, `label count`, each producer's
/// with the block size applied and where it comes from.
pub fn matched_sources(d: &gatecal_analysis::DeploymentRec) -> String {
    let b = &d.matched_tokens.block_sizes;
    d.matched_tokens
        .sources
        .iter()
        .map(|(k, v)| {
            let size = match k.as_str() {
                "approximate_producer" => Some(&b.approximate_producer),
                "precise_producer" => Some(&b.precise_producer),
                _ => None,
            };
            match size {
                Some(s) => format!(
                    "{k} {} ({}-token blocks, {})",
                    count(*v),
                    s.tokens,
                    s.source.as_str()
                ),
                None => format!("{k} {}", count(*v)),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every section of a recommend report, in order.
pub fn recommend_sections(r: &RecommendReport) -> Vec<Section> {
    let mut out = vec![input_section(&r.input)];
    out.push(Section {
        title: s("Peak prefill throughput (tokens/s per endpoint)"),
        headers: vec![
            s("deployment"),
            s("estimate"),
            s("source"),
            s("samples"),
            s("90 % interval"),
            s("spread p10–p90"),
            s("configured"),
        ],
        rows: r
            .deployments
            .iter()
            .map(|d| {
                let p = &d.peak_prefill_throughput;
                vec![
                    d.name.clone(),
                    tps(p.value),
                    p.source.as_str().to_string(),
                    count(p.samples),
                    match p.interval {
                        Some([a, b]) => format!("{}–{}", tps(a), tps(b)),
                        None => "–".into(),
                    },
                    match (p.spread_low, p.spread_high) {
                        (Some(a), Some(b)) => format!("{}–{}", tps(a), tps(b)),
                        _ => "–".into(),
                    },
                    tps(d.current.config.parameters.peak_prefill_throughput),
                ]
            })
            .collect(),
        notes: lines(
            &r.deployments
                .iter()
                .map(|d| Note::about(&d.name, d.peak_prefill_throughput.method.clone()))
                .chain(vllm_cut_note(&r.vllm_cut).map(Note::general))
                .collect::<Vec<_>>(),
        ),
    });
    out.push(Section {
        title: s("Break-even: matched tokens of the best sticky endpoint, and / peak × 1000 in ms"),
        headers: vec![
            s("deployment"),
            s("decisions"),
            s("tokens p10 / p50 / p90"),
            s("ms p10"),
            s("ms p50"),
            s("ms p90"),
            s("sources"),
        ],
        rows: r
            .deployments
            .iter()
            .map(|d| {
                let b = &d.break_even_ms;
                let t = &d.break_even_tokens;
                let tok = |v: Option<i64>| v.map_or("–".to_string(), crate::num::group);
                let sources = if d.matched_tokens.sources.is_empty() {
                    s("none")
                } else {
                    matched_sources(d)
                };
                vec![
                    d.name.clone(),
                    format!(
                        "{} of {}",
                        count(d.matched_tokens.with_matched),
                        count(d.matched_tokens.decisions)
                    ),
                    format!("{} / {} / {}", tok(t.p10), tok(t.p50), tok(t.p90)),
                    ms(b.p10),
                    ms(b.p50),
                    ms(b.p90),
                    sources,
                ]
            })
            .collect(),
        notes: lines(
            &r.deployments
                .iter()
                .flat_map(|d| {
                    let missing = d
                        .matched_tokens
                        .missing
                        .as_ref()
                        .map(|m| Note::about(&d.name, missing_matched_note(m, &d.warnings)));
                    let sizes = producer_block_sizes(d)
                        .into_iter()
                        .map(|(label, b)| {
                            Note::about(
                                &d.name,
                                format!(
                                    "{label}: {}-token blocks ({}): {}",
                                    b.tokens,
                                    b.source.as_str(),
                                    b.detail
                                ),
                            )
                        })
                        .collect::<Vec<_>>();
                    missing.into_iter().chain(sizes)
                })
                .collect::<Vec<_>>(),
        ),
    });
    out.push(super::ttft::observed_section(r.deployments.iter().map(
        |d| {
            (
                d.name.as_str(),
                &d.observed_ttft_ms,
                &d.observed_ttft_by_endpoint_ms,
            )
        },
    )));
    let mut rows = Vec::new();
    for d in &r.deployments {
        for row in &d.rows {
            let mut label = match row.kind {
                RowKind::Current => format!("current ({})", d.current.config.source),
                _ => row.label.clone(),
            };
            if d.recommended.as_ref().is_some_and(|x| x.row == row.label) {
                label.push_str(" ← recommended");
            } else if d.paste.as_ref().is_some_and(|x| x.row == row.label) {
                label.push_str(" ← to paste");
            }
            let released = match row.logged_released_share {
                Some(l) => format!("{} (logged {})", pct(row.released_share), pct(l)),
                None => pct(row.released_share),
            };
            let bar_cell = match (row.penalty_mode, row.max_ttft_penalty_ms == 0.0) {
                (PenaltyMode::MatchedTokens, true) => s("no ceiling"),
                (PenaltyMode::MatchedTokens, false) => {
                    format!("ceiling {}", bar(Some(row.max_ttft_penalty_ms)))
                }
                _ => bar(Some(row.max_ttft_penalty_ms)),
            };
            rows.push(vec![
                d.name.clone(),
                label,
                row.penalty_mode.as_str().to_string(),
                tps(row.peak_prefill_throughput),
                bar_cell,
                released,
                pct(row.pinned_worse_share),
                ms(row.excess_ttft_ms),
                predicted_cell(row),
                row.predicted_prefix_hit_share
                    .map_or_else(|| "–".into(), pct),
            ]);
        }
    }
    let mut notes = vec![Note::general(
        "Each config replayed through the filter core on the same decisions; shares are of all decisions. \
         Pinned and excess TTFT are measured at one reference peak (the estimate), so rows compare: \
         pinned = held with the gate input ≥ the pinned-worse minimum; excess TTFT = per decision with matched tokens and a known gate input, \
         holding when the gate input exceeds the break-even costs the difference, and releasing when it does not costs the difference. \
         Predicted TTFT = the deployment's requests replayed through the filter core and the picker under each config, served by the engine fitted to the observed first tokens \
         (p50 / p90 / p99 ms, the p90's 90 % interval in brackets); prefix hit = the replay's cached share of prompt tokens. \
         corrected peak = the config in force with peakPrefillThroughput set to the fitted engine's speed (else the peak estimate); static N s = static mode at that peak with bar N s.",
    )];
    for d in &r.deployments {
        notes.extend(model_notes(d));
    }
    for d in &r.deployments {
        match &d.recommended {
            Some(x) => notes.push(Note::about(&d.name, format!("recommended {}", x.why))),
            // The warning says why; the note only when no warning does.
            None if d.warnings.iter().any(|w| w.starts_with(NO_RECOMMENDATION)) => {}
            None => notes.push(Note::about(
                &d.name,
                "no recommendation (no matched tokens to derive a bar from)",
            )),
        }
        for w in &d.warnings {
            notes.push(Note::warning(&d.name, w.clone()));
        }
    }
    let notes = lines(&notes);
    out.push(Section {
        title: s("Configs and what they would have done"),
        headers: vec![
            s("deployment"),
            s("config"),
            s(gatecal_filter::Param::PenaltyMode.name()),
            s("peak tok/s"),
            s(gatecal_filter::Param::MaxTtftPenaltyMs.name()),
            s("released"),
            s("pinned"),
            s("excess TTFT ms"),
            s("predicted TTFT p50 / p90 [interval] / p99 ms"),
            s("prefix hit"),
        ],
        rows,
        notes,
    });
    out
}

/// How the warning of a deployment without a recommendation begins.
const NO_RECOMMENDATION: &str = "no recommendation";

/// The break-even table's note on a deployment without matched tokens:
/// `missing` as it is, or, when one of the deployment's warnings (under
/// the configs table) already says all of it, its first clause and where
/// the rest is.
fn missing_matched_note(missing: &str, warnings: &[String]) -> String {
    match missing.split_once("; ") {
        Some((first, _)) if warnings.iter().any(|w| w.contains(missing)) => {
            format!("{first} (where they come from: the warning under the configs table)")
        }
        _ => missing.to_string(),
    }
}

/// A row's predicted TTFT: `p50 / p90 [lo–hi] / p99`, `–` without one.
fn predicted_cell(row: &Row) -> String {
    super::ttft::predicted_cell(row.predicted_ttft_ms.as_ref())
}

/// The engine model and the self-check of a deployment, as notes.
fn model_notes(d: &DeploymentRec) -> Vec<Note> {
    let mut out: Vec<Note> = super::ttft::model_note(&d.name, &d.ttft_model)
        .into_iter()
        .collect();
    if let Some(c) = &d.ttft_self_check {
        out.push(super::ttft::self_check_note(
            &d.name,
            c,
            "failed: no config is recommended by predicted TTFT",
        ));
    }
    if let Some(g) = d.recommended.as_ref().and_then(|x| x.gain_ms.as_ref()) {
        let rec = d.recommended.as_ref().map_or("", |x| x.row.as_str());
        let obj = d.recommended.as_ref().map_or("", |x| x.objective.as_str());
        out.push(Note::about(
            &d.name,
            format!(
                "chosen by the lowest predicted TTFT {obj}: {rec}, {} ms below the current config [{}–{}]",
                ms(Some(g.value)),
                ms(Some(g.interval[0])),
                ms(Some(g.interval[1]))
            ),
        ));
    }
    out
}
