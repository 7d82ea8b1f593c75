//! Writing the filter's parameters back into an `EndpointPickerConfig`:
//! edited in place, every other byte kept ([`emit`]), or a minimal config
//! holding the filter alone ([`minimal_config`]). The module docs of `epp`
//! describe the edits.

use gatecal_filter::{Config, Param, TtftSource};
use saphyr_parser::ScalarStyle;

use super::{
    EppConfigError, Host, Node, each_document, explain_template, filters_from_yaml, no_filter,
    search,
};

/// The parameters [`emit`] sets on each edited instance.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamChanges {
    /// `peakPrefillThroughput`.
    pub peak_prefill_throughput: f64,
    /// `maxTTFTPenaltyMs`.
    pub max_ttft_penalty_ms: f64,
    /// `penaltyMode`.
    pub penalty_mode: gatecal_filter::PenaltyMode,
}

impl ParamChanges {
    /// `config` with these changes applied.
    pub fn apply(&self, config: &Config) -> Config {
        Config {
            peak_prefill_throughput: self.peak_prefill_throughput,
            max_ttft_penalty_ms: self.max_ttft_penalty_ms,
            penalty_mode: self.penalty_mode,
            ..config.clone()
        }
    }
}

/// A number as the config writes it: integers without a fraction.
pub fn yaml_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// A minimal plugin entry with `changes`, for a deployment without a config
/// file: a valid `EndpointPickerConfig` holding only the filter (add your
/// other plugins and profiles).
pub fn minimal_config(changes: &ParamChanges) -> String {
    let mut s = String::from(
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n",
    );
    if changes.penalty_mode != gatecal_filter::PenaltyMode::Static {
        s.push_str(&format!(
            "    penaltyMode: {}\n",
            changes.penalty_mode.as_str()
        ));
    }
    s.push_str(&format!(
        "    peakPrefillThroughput: {}\n    maxTTFTPenaltyMs: {}\n",
        yaml_number(changes.peak_prefill_throughput),
        yaml_number(changes.max_ttft_penalty_ms)
    ));
    s
}

/// One text edit: replace `start..end` with `text`.
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// The edits that set `changes` on one plugin entry, in the coordinates of
/// the text it was parsed from.
fn entry_edits(
    entry: &Node,
    text: &str,
    changes: &ParamChanges,
    config: &Config,
) -> Result<Vec<Edit>, EppConfigError> {
    let mode = Param::PenaltyMode.name();
    let mut want: Vec<(&str, String)> = vec![
        (
            Param::PeakPrefillThroughput.name(),
            yaml_number(changes.peak_prefill_throughput),
        ),
        (
            Param::MaxTtftPenaltyMs.name(),
            yaml_number(changes.max_ttft_penalty_ms),
        ),
    ];
    let params = entry.get("parameters");
    let has_mode = params.is_some_and(|p| p.get(mode).is_some());
    if has_mode
        || changes.penalty_mode != config.penalty_mode
        || changes.penalty_mode != gatecal_filter::PenaltyMode::Static
    {
        want.insert(0, (mode, changes.penalty_mode.as_str().to_string()));
    }
    let mut edits = Vec::new();
    let mut missing = Vec::new();
    match params {
        Some(p @ Node::Map { .. }) => {
            for (k, v) in &want {
                match p.get(k) {
                    Some(Node::Scalar {
                        value,
                        style,
                        start,
                        end,
                    }) => {
                        if **value == **v {
                            continue;
                        }
                        let t = match style {
                            ScalarStyle::SingleQuoted if *k == mode => format!("'{v}'"),
                            ScalarStyle::DoubleQuoted if *k == mode => format!("\"{v}\""),
                            _ => v.clone(),
                        };
                        edits.push(Edit {
                            start: *start,
                            end: *end,
                            text: t,
                        });
                    }
                    Some(_) => {
                        return Err(EppConfigError::Emit(format!(
                            "parameter {k} is not a plain value"
                        )));
                    }
                    None => missing.push((*k, v.clone())),
                }
            }
            if !missing.is_empty() {
                edits.push(insert_into_map(p, text, &missing, None)?);
            }
        }
        Some(n) if n.is_null() => {
            let Node::Scalar { start, end, .. } = n else {
                unreachable!("is_null is a scalar")
            };
            let body: Vec<String> = want.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            let flow = format!("{{{}}}", body.join(", "));
            if start == end {
                // `parameters:` with nothing after it: the empty scalar sits
                // at the key's end, before the colon.
                let at = text[*start..].find(':').map_or(*start, |i| start + i + 1);
                edits.push(Edit {
                    start: at,
                    end: at,
                    text: format!(" {flow}"),
                });
            } else {
                edits.push(Edit {
                    start: *start,
                    end: *end,
                    text: flow,
                });
            }
        }
        Some(_) => {
            return Err(EppConfigError::Emit(
                "the entry's parameters are not a mapping".into(),
            ));
        }
        None => {
            edits.push(insert_into_map(entry, text, &want, Some("parameters"))?);
        }
    }
    Ok(edits)
}

/// Inserts `kvs` into mapping `m` (under a new key `wrap` when given).
fn insert_into_map(
    m: &Node,
    text: &str,
    kvs: &[(&str, String)],
    wrap: Option<&str>,
) -> Result<Edit, EppConfigError> {
    let Node::Map {
        entries,
        flow_end,
        start,
    } = m
    else {
        return Err(EppConfigError::Emit("not a mapping".into()));
    };
    if let Some(close) = flow_end {
        let body: Vec<String> = kvs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let body = body.join(", ");
        let item = match wrap {
            Some(w) => format!("{w}: {{{body}}}"),
            None => body,
        };
        let sep = if entries.is_empty() { "" } else { ", " };
        return Ok(Edit {
            start: *close,
            end: *close,
            text: format!("{sep}{item}"),
        });
    }
    // Block mapping: after the line of its last value, at its keys' indent.
    let first_key = match entries.first() {
        Some((Node::Scalar { start, .. }, _)) => *start,
        _ => *start,
    };
    let line_start = text[..first_key].rfind('\n').map_or(0, |i| i + 1);
    let indent = " ".repeat(text[line_start..first_key].chars().count());
    let last = m
        .last_end()
        .ok_or_else(|| EppConfigError::Emit("an empty block mapping".into()))?;
    let at = text[last..].find('\n').map_or(text.len(), |i| last + i);
    let mut s = String::new();
    match wrap {
        Some(w) => {
            s.push_str(&format!("\n{indent}{w}:"));
            for (k, v) in kvs {
                s.push_str(&format!("\n{indent}  {k}: {v}"));
            }
        }
        None => {
            for (k, v) in kvs {
                s.push_str(&format!("\n{indent}{k}: {v}"));
            }
        }
    }
    Ok(Edit {
        start: at,
        end: at,
        text: s,
    })
}

/// Applies edits (non-overlapping) to `text`.
fn apply_edits(text: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| std::cmp::Reverse(e.start));
    let mut out = text.to_string();
    for e in edits {
        out.replace_range(e.start..e.end, &e.text);
    }
    out
}

/// Writes `text` back with `changes` set on the filter instances `select`
/// accepts (by instance name and config), everything else byte for byte.
///
/// Only instances on the throughput path (`ttftSource: prefillThroughput`)
/// can take a peak and a bar in these units; others are left as they are.
/// Returns the new text and the names of the instances edited.
///
/// ```
/// use gatecal_analysis::{ParamChanges, emit, filters_from_yaml};
/// use gatecal_filter::PenaltyMode;
/// let yaml = "plugins:\n- name: affinity # ours\n  type: prefix-cache-affinity-filter\n  parameters:\n    affinityThreshold: 0.9\n    maxTTFTPenaltyMs: 18000\n";
/// let ch = ParamChanges { peak_prefill_throughput: 3000.0, max_ttft_penalty_ms: 1400.0, penalty_mode: PenaltyMode::Static };
/// let (out, names) = emit(yaml, &ch, |_, _| true).unwrap();
/// assert_eq!(names, ["affinity"]);
/// assert_eq!(out, "plugins:\n- name: affinity # ours\n  type: prefix-cache-affinity-filter\n  parameters:\n    affinityThreshold: 0.9\n    maxTTFTPenaltyMs: 1400\n    peakPrefillThroughput: 3000\n");
/// assert_eq!(filters_from_yaml(&out).unwrap()[0].1.max_ttft_penalty_ms, 1400.0);
/// ```
pub fn emit(
    text: &str,
    changes: &ParamChanges,
    select: impl Fn(&str, &Config) -> bool,
) -> Result<(String, Vec<String>), EppConfigError> {
    if !(changes.peak_prefill_throughput.is_finite() && changes.max_ttft_penalty_ms.is_finite()) {
        return Err(EppConfigError::Emit(
            "peakPrefillThroughput and maxTTFTPenaltyMs must be numbers".into(),
        ));
    }
    let mut found = Vec::new();
    let texts = each_document(text, &mut |d, _, texts| {
        search(d, "", 0, texts, &mut found, 0)
    })
    .map_err(|e| explain_template(text, e))?;
    if found.is_empty() {
        return Err(explain_template(text, no_filter(&texts)));
    }
    // Edits per text, then each string's edits mapped into its host.
    let mut per_text: Vec<Vec<Edit>> = (0..texts.texts.len()).map(|_| Vec::new()).collect();
    let mut names = Vec::new();
    let mut expected: Vec<(String, Config)> = Vec::new();
    for f in &found {
        let edit =
            select(&f.name, &f.config) && f.config.ttft_source == TtftSource::PrefillThroughput;
        if !edit {
            expected.push((f.name.clone(), f.config.clone()));
            continue;
        }
        if let Host::Fixed(why) = texts.texts[f.doc].1 {
            return Err(EppConfigError::Emit(format!(
                "{} is held in {why}; write it as a literal block (|) or edit it by hand",
                f.path
            )));
        }
        let new = changes.apply(&f.config);
        Config::from_value(&new.to_parameters()).map_err(|error| EppConfigError::Config {
            plugin: f.name.clone(),
            error,
        })?;
        per_text[f.doc].extend(entry_edits(
            &f.entry,
            &texts.texts[f.doc].0,
            changes,
            &f.config,
        )?);
        names.push(f.name.clone());
        expected.push((f.name.clone(), new));
    }
    if names.is_empty() {
        return Err(EppConfigError::Emit(
            "no filter instance on the throughput path (ttftSource: prefillThroughput) to edit"
                .into(),
        ));
    }
    // Innermost texts first: a string's edited value becomes an edit of its host.
    for i in (1..texts.texts.len()).rev() {
        let edits = std::mem::take(&mut per_text[i]);
        if edits.is_empty() {
            continue;
        }
        let (inner, host, parent) = &texts.texts[i];
        let parent = parent.unwrap_or(0);
        let Host::Literal {
            content_start,
            indent,
        } = *host
        else {
            return Err(EppConfigError::Emit(
                "a string that cannot be edited in place".into(),
            ));
        };
        let pad = " ".repeat(indent);
        // Inner byte offset -> host byte offset: same line, shifted by the indent.
        let line_starts: Vec<usize> = std::iter::once(0)
            .chain(inner.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let host_text = &texts.texts[parent].0;
        let mut host_line_starts = Vec::new();
        let mut pos = content_start;
        for _ in 0..line_starts.len() {
            host_line_starts.push(pos);
            pos = host_text[pos..]
                .find('\n')
                .map_or(host_text.len(), |j| pos + j + 1);
        }
        let map = |o: usize| -> usize {
            let l = line_starts.partition_point(|&s| s <= o) - 1;
            let hs = host_line_starts[l];
            let line_len = host_text[hs..].find('\n').unwrap_or(host_text.len() - hs);
            let shift = indent.min(line_len);
            hs + shift + (o - line_starts[l])
        };
        for e in edits {
            per_text[parent].push(Edit {
                start: map(e.start),
                end: map(e.end),
                text: e.text.replace('\n', &format!("\n{pad}")),
            });
        }
    }
    let out = apply_edits(text, std::mem::take(&mut per_text[0]));
    // The round trip: the written file reads back as asked.
    let back = filters_from_yaml(&out)?;
    if back.len() != expected.len()
        || back
            .iter()
            .zip(&expected)
            .any(|((n, c), (en, ec))| n != en || c != ec)
    {
        return Err(EppConfigError::Emit(
            "the edited file does not read back as the parameters asked for".into(),
        ));
    }
    Ok((out, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_filter::PenaltyMode;

    use crate::config::epp::find_filters;
    use crate::config::epp::tests::RAW;

    fn ch(peak: f64, bar: f64, mode: PenaltyMode) -> ParamChanges {
        ParamChanges {
            peak_prefill_throughput: peak,
            max_ttft_penalty_ms: bar,
            penalty_mode: mode,
        }
    }

    #[test]
    fn chart_with_two_instances() {
        let yaml = r#"
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- name: strict-affinity-filter
  type: prefix-cache-affinity-filter
  parameters: {affinityThreshold: 0.99, ttftSource: latencyPredictor, maxTTFTPenaltyMs: 5000}
- name: loose-affinity-filter
  type: prefix-cache-affinity-filter
  parameters: {affinityThreshold: 0.80, ttftSource: latencyPredictor, maxTTFTPenaltyMs: 5000}
"#;
        let f = filters_from_yaml(yaml).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].0, "strict-affinity-filter");
        assert_eq!(f[0].1.affinity_threshold, 0.99);
        assert_eq!(f[1].0, "loose-affinity-filter");
        // Neither is on the throughput path: nothing to edit.
        let e = emit(yaml, &ch(3000.0, 1000.0, PenaltyMode::Static), |_, _| true).unwrap_err();
        assert!(e.to_string().contains("throughput path"), "{e}");
    }

    #[test]
    fn raw_config_edited_in_place() {
        let (out, names) =
            emit(RAW, &ch(2996.4, 1400.0, PenaltyMode::Static), |_, _| true).unwrap();
        assert_eq!(names, ["affinity"]);
        let want = RAW.replace(
            "maxTTFTPenaltyMs: 18000           # the default",
            "maxTTFTPenaltyMs: 1400           # the default\n    peakPrefillThroughput: 2996.4",
        );
        assert_eq!(out, want);
        let f = find_filters(&out).unwrap();
        assert_eq!(f[0].name, "affinity");
        assert_eq!(f[0].config.affinity_threshold, 0.9);
        assert_eq!(f[0].config.max_ttft_penalty_ms, 1400.0);
        assert_eq!(f[0].config.peak_prefill_throughput, 2996.4);
        // matchedTokens adds the mode.
        let (out, _) = emit(
            RAW,
            &ch(3000.0, 18000.0, PenaltyMode::MatchedTokens),
            |_, _| true,
        )
        .unwrap();
        let f = find_filters(&out).unwrap();
        assert_eq!(f[0].config.penalty_mode, PenaltyMode::MatchedTokens);
        assert!(out.contains("\n    penaltyMode: matchedTokens\n"), "{out}");
        assert!(out.contains("maxTTFTPenaltyMs: 18000           # the default"));
    }

    #[test]
    fn flow_and_missing_parameters() {
        let flow = "plugins:\n- {name: a, type: prefix-cache-affinity-filter, parameters: {maxTTFTPenaltyMs: 5000, penaltyMode: 'matchedTokens'}}\n";
        let (out, _) = emit(flow, &ch(8000.0, 2000.0, PenaltyMode::Static), |_, _| true).unwrap();
        assert_eq!(
            out,
            "plugins:\n- {name: a, type: prefix-cache-affinity-filter, parameters: {maxTTFTPenaltyMs: 2000, penaltyMode: 'static', peakPrefillThroughput: 8000}}\n"
        );
        let bare = "plugins:\n- type: prefix-cache-affinity-filter\n- type: other\n";
        let (out, _) = emit(bare, &ch(8000.0, 2000.0, PenaltyMode::Static), |_, _| true).unwrap();
        assert_eq!(
            out,
            "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    peakPrefillThroughput: 8000\n    maxTTFTPenaltyMs: 2000\n- type: other\n"
        );
        let empty = "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n";
        let (out, _) = emit(empty, &ch(8000.0, 2000.0, PenaltyMode::Static), |_, _| true).unwrap();
        assert_eq!(
            find_filters(&out).unwrap()[0].config.max_ttft_penalty_ms,
            2000.0
        );
    }

    #[test]
    fn configmap_list_and_helm_values() {
        let inner = RAW
            .lines()
            .skip(1)
            .map(|l| format!("        {l}\n"))
            .collect::<String>();
        let list = format!(
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: glm-epp}}\n  data:\n    default-plugins.yaml: |\n{inner}"
        );
        let f = find_filters(&list).unwrap();
        assert_eq!(
            f[0].path,
            "items[0].data[\"default-plugins.yaml\"].plugins[1]"
        );
        let (out, _) = emit(&list, &ch(3000.0, 1500.0, PenaltyMode::Static), |_, _| true).unwrap();
        let want = list.replace(
            "        maxTTFTPenaltyMs: 18000           # the default",
            "        maxTTFTPenaltyMs: 1500           # the default\n            peakPrefillThroughput: 3000",
        );
        assert_eq!(out, want);

        let helm = format!(
            "router:\n  epp:\n    replicas: 2   # two EPPs\n    pluginsConfigFile: custom-plugins.yaml\n    pluginsCustomConfig:\n      custom-plugins.yaml: |\n{}\n    resources: {{}}\n",
            RAW.lines()
                .map(|l| if l.is_empty() {
                    "\n".to_string()
                } else {
                    format!("        {l}\n")
                })
                .collect::<String>()
                .trim_end()
        );
        let f = find_filters(&helm).unwrap();
        assert_eq!(
            f[0].path,
            "router.epp.pluginsCustomConfig[\"custom-plugins.yaml\"].plugins[1]"
        );
        let (out, _) = emit(
            &helm,
            &ch(3000.0, 1500.0, PenaltyMode::MatchedTokens),
            |_, _| true,
        )
        .unwrap();
        let g = find_filters(&out).unwrap();
        assert_eq!(g[0].config.penalty_mode, PenaltyMode::MatchedTokens);
        assert_eq!(g[0].config.peak_prefill_throughput, 3000.0);
        assert!(out.ends_with("\n    resources: {}\n"), "{out}");
        assert!(out.contains("    replicas: 2   # two EPPs\n"));

        let quoted = "data:\n  c.yaml: \"plugins:\\n- type: prefix-cache-affinity-filter\\n\"\n";
        assert_eq!(find_filters(quoted).unwrap().len(), 1);
        let e = emit(quoted, &ch(3000.0, 1500.0, PenaltyMode::Static), |_, _| {
            true
        })
        .unwrap_err();
        assert!(e.to_string().contains("literal block"), "{e}");
    }

    #[test]
    fn invalid_values_are_never_written() {
        let e = emit(RAW, &ch(0.0, 1400.0, PenaltyMode::Static), |_, _| true).unwrap_err();
        assert!(
            e.to_string().contains("peakPrefillThroughput must be > 0"),
            "{e}"
        );
        let e = emit(RAW, &ch(3000.0, f64::NAN, PenaltyMode::Static), |_, _| true);
        assert!(e.is_err());
    }

    #[test]
    fn minimal_config_reads_back() {
        let c = ch(2996.0, 1400.0, PenaltyMode::MatchedTokens);
        let f = find_filters(&minimal_config(&c)).unwrap();
        assert_eq!(f[0].config, c.apply(&Config::default()));
    }
}
