//! The words of the reports that are not plain English, each explained
//! once at the end of the output that prints it: the table's and the
//! Markdown's closing "Glossary". docs/usage.md has the same list.

/// `(term as printed, how it is recognised in the output, explanation)`.
/// A term is explained when its marker appears in the output.
pub const GLOSSARY: &[(&str, &str, &str)] = &[
    (
        "gate input",
        "gate input",
        "bestStickyTTFT − bestNonStickyTTFT in ms: how much longer the best endpoint holding the prompt's prefix would take to start than the best other endpoint; the filter releases the pin only when it exceeds the bar",
    ),
    (
        "bar",
        "bar",
        "maxTTFTPenaltyMs, the gate's threshold: a gate input strictly above it releases the pin",
    ),
    (
        "peak",
        "peak",
        "peakPrefillThroughput, the prompt tokens per second one endpoint computes at most; the filter turns queued tokens into ms with it",
    ),
    (
        "pinned",
        "inned",
        "held on the endpoints holding the prompt's prefix while the gate input was at least the pinned-worse minimum (5,000 ms unless --pinned-worse-min says otherwise)",
    ),
    (
        "released",
        "eleased",
        "the gate let the request go to any endpoint (logged outcomes load_override and request_load_override)",
    ),
    (
        "reference peak",
        "reference peak",
        "the one peak at which every row's pinned share is measured, so rows at other peaks compare",
    ),
    (
        "evidence L/O/R/U",
        "L/O/R/U",
        "how each gate input is known: L logged by the filter, O observed from the endpoints' logged loads, R reconstructed from loads carried forward, U unknown",
    ),
    (
        "gate n",
        "gate n",
        "decisions where the gate was evaluated and its input is known",
    ),
    (
        "p50, p90, p99, p99.9",
        "p99",
        "percentiles: the value below which that share of the values lie (p50 is the median)",
    ),
    (
        "self-check",
        "self-check",
        "the decisions whose gate input is exact (logged, observed or traced), replayed through the filter core under the config in force: how many give the logged outcome",
    ),
    (
        "replay",
        "replay",
        "every decision with a known gate input, reconstructed ones included, replayed through the filter core under the config in force: how many give the logged outcome",
    ),
    (
        "censored",
        "censored",
        "a held decision whose reconstructed gate input came out above the bar: the filter held it, so its input was at most the bar, and it is moved down to the bar",
    ),
    (
        "current",
        "current",
        "the config in force (from the log, --config, flags, or the defaults), replayed",
    ),
    (
        "[log], [file], [flag], [default]",
        "[default]",
        "where a parameter's value came from: the EPP's log lines, --config, a flag, or the filter's default",
    ),
    (
        "no match info",
        "no match info",
        "matchedTokens rows: decisions whose best sticky endpoint had no matched-token count, so the break-even test was skipped and the request held",
    ),
    (
        "matchedTokens",
        "matchedTokens",
        "penaltyMode that releases when the extra queued tokens exceed the tokens the request has cached (with a ceiling in ms, or none)",
    ),
    (
        "break-even",
        "reak-even",
        "the matched tokens of the best sticky endpoint over the peak, in ms: the prefill a hold saves; holding longer than that costs more than it saves",
    ),
    (
        "excess TTFT",
        "excess TTFT",
        "ms per decision lost against the break-even: holding when the gate input exceeds it, or releasing when it does not",
    ),
    (
        "90 % interval",
        "90 % interval",
        "the range that holds the figure with 90 % confidence: for the peak, a bootstrap over the measured intervals; for a predicted TTFT, the replay at both ends of the engine speed's interval, widened by the quantile's rank interval and the model error measured on held-out simulator runs (methodology §8)",
    ),
    (
        "spread p10–p90",
        "spread",
        "the 10th to 90th percentile of the per-interval rates: how much they vary, not an uncertainty of the estimate",
    ),
    (
        "below N, above N (histogram)",
        "below",
        "gate inputs beyond the histogram's first or last edge, counted but not drawn",
    ),
    (
        "not_applicable",
        "not_applicable",
        "logged outcome: no filter decision for the request (the filter did not run in its profile)",
    ),
    (
        "exploration",
        "exploration",
        "logged outcome: the filter skipped narrowing at random (explorationProbability)",
    ),
    (
        "no_match",
        "no_match",
        "logged outcome: no endpoint holds enough of the prompt's prefix",
    ),
    (
        "sticky",
        "sticky",
        "logged outcome: the request was narrowed to the endpoints holding its prefix (held)",
    ),
    (
        "load_override",
        "load_override",
        "logged outcome: the TTFT (or in-flight tokens) gate released the pin",
    ),
    (
        "missing_signal",
        "missing_signal",
        "logged outcome: the gate was skipped for a missing load signal",
    ),
    (
        "request_load_override",
        "request_load_override",
        "logged outcome: the in-flight request gate released the pin",
    ),
    ("tok/s", "tok/s", "tokens per second"),
    (
        "baseline, candidate",
        "Baseline",
        "gate-dist --compare: the first and the second input (or the decisions before and from --compare-at's time), run through the same analysis",
    ),
    (
        "Δ, pp",
        "Δ",
        "the candidate's figure minus the baseline's: for a share in percentage points (pp), for a quantile in ms",
    ),
    (
        "p (z-test)",
        "z-test",
        "the two-sided p-value of the two-proportion z-test: how often two sides with the same share would differ at least this much by chance",
    ),
    (
        "95 % interval of Δ",
        "interval of Δ",
        "shares: Wald's interval of the difference; quantiles: the 2.5th to 97.5th percentile of the difference over B bootstrap resamples of both sides' histograms (seeded: the same input gives the same interval)",
    ),
    (
        "significant",
        "significant",
        "a share's p under 0.05, or a quantile's 95 % interval of Δ that excludes 0; the tests treat decisions as independent, and decisions close in time share load, so a borderline result is weak evidence",
    ),
    (
        "†",
        "†",
        "the test's approximation is poor: a share's expected count is under 5, or fewer than 5 values lie beyond a quantile",
    ),
];

/// The CSV columns whose names are not plain English: `(column, what
/// it holds)`. A name ending in `*` covers every column it begins. The
/// CSV explains the ones its header holds in `#` comment lines before
/// the header.
pub const CSV_COLUMNS: &[(&str, &str)] = &[
    (
        "rule",
        "in_force (the decisions as logged), static or matchedTokens (a what-if replay), or finding",
    ),
    (
        "rule_max_ttft_penalty_ms",
        "the row's bar (maxTTFTPenaltyMs; the ceiling for matchedTokens, 0 = none)",
    ),
    (
        "rule_peak_prefill_throughput",
        "the row's peak (peakPrefillThroughput, tok/s)",
    ),
    (
        "released, released_share",
        "decisions whose pin the gate released (logged outcomes load_override and request_load_override)",
    ),
    (
        "pinned_worse*",
        "decisions held while the gate input was at least the pinned-worse minimum (5,000 ms unless --pinned-worse-min)",
    ),
    (
        "unknown",
        "decisions whose gate input is unknown, so the row cannot replay them",
    ),
    (
        "gate_n",
        "decisions where the gate was evaluated and its input is known",
    ),
    (
        "p50_ms, p90_ms, p99_ms, p999_ms",
        "gate input percentiles in ms (p50 the median, p999 = p99.9)",
    ),
    ("bar_ms", "the bar in force (maxTTFTPenaltyMs)"),
    (
        "evidence_*",
        "how each gate input is known: logged by the filter, observed from the endpoints' logged loads, reconstructed from loads carried forward, traced, or unknown",
    ),
    (
        "self_check_*",
        "the decisions with an exact gate input replayed under the config in force, and how many gave the logged outcome",
    ),
    (
        "small_sample",
        "true when the quantiles are over fewer than 20 gate inputs",
    ),
    (
        "replay_*",
        "every decision with a known gate input replayed under the config in force: how many agreed with the log, released as logged and as replayed",
    ),
    (
        "censored*",
        "held decisions whose reconstructed gate input came out above the bar, moved down to the bar (the filter held them, so their input was at most the bar)",
    ),
    (
        "population",
        "all, or trace_sample when every decision of the row came from traces alone",
    ),
    (
        "traced_*",
        "decisions with a filter span in the traces, and the gate input those spans give",
    ),
    (
        "validation_pairs",
        "decisions both traced and reconstructed, compared in the abs_error columns",
    ),
    (
        "abs_error_*",
        "the absolute error of the reconstructed gate input against the traced one",
    ),
    (
        "reconstructed_*",
        "the reconstructed gate input of the traced decisions",
    ),
    (
        "outcome_*",
        "decisions by logged outcome (the names the filter logs; docs/usage.md's glossary explains each)",
    ),
    (
        "observed_ttft_*",
        "time to first token the log shows: the request's arrival at the EPP to its first response body, ms",
    ),
    (
        "config",
        "current on the replayed row of the config in force, or the label of a --candidate-config or --what-if row",
    ),
    (
        "config_error",
        "why a candidate config is not valid for the deployment",
    ),
    (
        "finding_*",
        "the finding rows that come first: id, severity (info, warning, critical), summary and action",
    ),
    (
        "peak_tps",
        "the deployment's estimated peak prefill throughput, tok/s",
    ),
    ("peak_interval_*", "the 90 % interval of the peak estimate"),
    ("peak_source", "where the peak estimate comes from"),
    ("peak_samples", "the samples behind the peak estimate"),
    (
        "reference_peak_tps",
        "the one peak at which every row's pinned share is measured",
    ),
    (
        "break_even_*",
        "matched tokens of the best sticky endpoint, and those tokens over the peak in ms: the prefill a hold saves",
    ),
    (
        "row_kind",
        "what the row is: current, static, matchedTokens, corrected_peak, candidate, or finding",
    ),
    ("recommended", "true on the row recommend chooses"),
    ("penalty_mode", "the row's penaltyMode"),
    ("row_peak_tps", "the row's peakPrefillThroughput"),
    ("row_max_ttft_penalty_ms", "the row's maxTTFTPenaltyMs"),
    (
        "logged_released_share",
        "the released share the log shows (current row only)",
    ),
    (
        "excess_ttft_ms",
        "ms per decision lost against the break-even: holding when the gate input exceeds it, or releasing when it does not",
    ),
    (
        "no_match_info",
        "decisions whose best sticky endpoint had no matched-token count (matchedTokens rows hold them)",
    ),
    (
        "warnings",
        "how many warnings the deployment's report carries",
    ),
    (
        "source_disagreements",
        "peak sources that disagree beyond their intervals",
    ),
    (
        "matched_token_sources",
        "where the matched-token counts come from",
    ),
    (
        "predicted_ttft_*",
        "time to first token predicted by replaying the logged traffic under the row's config, ms, with its 90 % interval (low, high) and the requests replayed (n)",
    ),
    (
        "predicted_prefix_hit_share",
        "the share of prompt tokens predicted to hit the prefix cache under the row's config",
    ),
];

/// The [`CSV_COLUMNS`] entry `(names, what)` that explains `column`:
/// `names` lists alternatives separated by `, `, each exact or a prefix
/// ending in `*`.
pub fn csv_column(column: &str) -> Option<(&'static str, &'static str)> {
    CSV_COLUMNS.iter().copied().find(|(names, _)| {
        names.split(", ").any(|n| match n.strip_suffix('*') {
            Some(prefix) => column.starts_with(prefix),
            None => column == n,
        })
    })
}

/// The CSV columns that need no explanation.
pub const CSV_PLAIN: &[&str] = &[
    "deployment",
    "window_start",
    "window_end",
    "decisions",
    "max_ms",
    "row",
];

/// The `#` comment lines a CSV opens with: what they are, then each
/// column of `header` that [`CSV_COLUMNS`] explains, once per entry.
pub fn csv_comment(report: &str, header: &[&str]) -> String {
    let mut s = format!(
        "# gatecal {report} report. Lines starting with # are comments (pandas: read_csv(f, comment=\"#\"); shell: grep -v '^#').\n"
    );
    let mut seen: Vec<&str> = Vec::new();
    for (names, what) in header.iter().filter_map(|c| csv_column(c)) {
        if !seen.contains(&names) {
            seen.push(names);
            s.push_str(&format!("# {names}: {what}\n"));
        }
    }
    s
}

/// The glossary entries whose marker appears in `text`, in order.
pub fn used_in(text: &str) -> Vec<(&'static str, &'static str)> {
    GLOSSARY
        .iter()
        .filter(|(_, marker, _)| text.contains(marker))
        .map(|(term, _, what)| (*term, *what))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/usage.md's glossary explains every term the reports may print.
    #[test]
    fn usage_has_every_term() {
        let usage = include_str!("../../../docs/usage.md");
        let g = &usage[usage.find("## Glossary").expect("a glossary")..];
        for (term, _, _) in GLOSSARY {
            assert!(
                g.contains(&format!("**{term}**")),
                "docs/usage.md glossary lacks {term}"
            );
        }
    }

    /// docs/usage.md lists every CSV column the comment lines explain.
    #[test]
    fn usage_has_every_csv_column() {
        let usage = include_str!("../../../docs/usage.md");
        let g = &usage[usage.find("### CSV columns").expect("a CSV column list")..];
        for (names, _) in CSV_COLUMNS {
            assert!(
                g.contains(&format!("**`{names}`**")),
                "docs/usage.md CSV columns lack {names}"
            );
        }
    }

    #[test]
    fn only_the_terms_printed() {
        let used = used_in("p50 ms | evidence L/O/R/U");
        let terms: Vec<&str> = used.iter().map(|(t, _)| *t).collect();
        assert_eq!(terms, ["evidence L/O/R/U"]);
    }
}
