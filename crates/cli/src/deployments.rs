//! What identifies each deployment found in the inputs (`--list-deployments`),
//! and the check that every `--config NAME=FILE` names one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use gatecal_parser::{Decision, VllmStats, endpoint_pod};
use gatecal_render::num::utc;

/// Pods listed per deployment and kind at most (the rest are counted).
pub const MAX_PODS_LISTED: usize = 256;

/// A set of pod names, keeping at most [`MAX_PODS_LISTED`] and counting the rest.
#[derive(Debug, Default)]
pub struct Pods {
    names: BTreeSet<String>,
    more: u64,
}

impl Pods {
    fn add(&mut self, pod: &str) {
        if self.names.contains(pod) {
            return;
        }
        if self.names.len() < MAX_PODS_LISTED {
            self.names.insert(pod.to_string());
        } else {
            // May count a pod twice: an upper bound, said as such.
            self.more += 1;
        }
    }

    fn show(&self) -> String {
        if self.names.is_empty() {
            return "none".into();
        }
        let mut s = self.names.iter().cloned().collect::<Vec<_>>().join(", ");
        if self.more > 0 {
            s.push_str(&format!(" and up to {} more", self.more));
        }
        s
    }
}

/// One deployment's identity as seen in the inputs.
#[derive(Debug, Default)]
pub struct Seen {
    /// EPP pods (kubectl `--prefix`) that logged its decisions.
    pub epp_pods: Pods,
    /// The pods its decisions name as endpoints.
    pub endpoint_pods: Pods,
    /// vLLM pods whose stats lines it got.
    pub vllm_pods: Pods,
    /// First decision or stats time.
    pub first_ts: Option<f64>,
    /// Last decision or stats time.
    pub last_ts: Option<f64>,
}

impl Seen {
    fn time(&mut self, ts: Option<f64>) {
        if let Some(t) = ts.filter(|t| t.is_finite()) {
            self.first_ts = Some(self.first_ts.map_or(t, |f| f.min(t)));
            self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
        }
    }
}

/// The deployments found, by name.
#[derive(Debug, Default)]
pub struct DeploymentIndex {
    /// By deployment name.
    pub seen: BTreeMap<String, Seen>,
    /// The first and last time of every decision read (also those a time
    /// filter leaves out), epoch seconds.
    pub span: Option<(f64, f64)>,
}

impl DeploymentIndex {
    /// Notes the time of a decision read, counted or not.
    pub fn decision_time(&mut self, ts: Option<f64>) {
        if let Some(t) = ts.filter(|t| t.is_finite()) {
            self.span = Some(self.span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
    }

    fn entry(&mut self, name: &str) -> &mut Seen {
        if !self.seen.contains_key(name) {
            self.seen.insert(name.to_string(), Seen::default());
        }
        self.seen.get_mut(name).expect("just inserted")
    }

    /// Notes a decision.
    pub fn decision(&mut self, d: &Decision) {
        let e = self.entry(&d.deployment);
        e.time(d.ts);
        if let Some(p) = &d.epp_pod {
            e.epp_pods.add(p);
        }
        for c in &d.candidates {
            if let Some(p) = endpoint_pod(&c.endpoint) {
                e.endpoint_pods.add(p);
            }
        }
    }

    /// Notes a vLLM stats line.
    pub fn vllm(&mut self, s: &VllmStats) {
        let e = self.entry(&s.deployment);
        e.time(s.ts);
        if let Some(p) = &s.pod {
            e.vllm_pods.add(p);
        }
    }
}

/// One row of `--list-deployments`, from the report.
pub struct Listed<'a> {
    /// The deployment's name.
    pub name: &'a str,
    /// Decisions counted in the report.
    pub decisions: u64,
    /// Where its filter config comes from.
    pub config_source: &'a str,
}

impl Pods {
    fn list(&self) -> serde_json::Value {
        serde_json::json!({
            "names": self.names.iter().collect::<Vec<_>>(),
            "more": self.more,
        })
    }
}

/// Writes `--list-deployments` in `format`: per deployment, its name,
/// decisions, time range, config source, and the EPP, endpoint and vLLM
/// pods seen. Text for a table; JSON `{"deployments": [{"name",
/// "decisions", "first_utc", "last_utc", "config_source", "epp_pods",
/// "endpoint_pods", "vllm_pods": {"names": [...], "more": N}}]}`; one CSV
/// row per deployment (pods `;`-separated); a Markdown table.
pub fn write_list(
    w: &mut dyn Write,
    rows: &[Listed<'_>],
    index: &DeploymentIndex,
    format: gatecal_render::Format,
) -> std::io::Result<()> {
    use gatecal_render::Format;
    let empty = Seen::default();
    let seen = |name: &str| index.seen.get(name).unwrap_or(&empty);
    let time = |t: Option<f64>| t.map(utc);
    match format {
        Format::Table => {}
        Format::Json => {
            let list: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    let s = seen(r.name);
                    serde_json::json!({
                        "name": r.name,
                        "decisions": r.decisions,
                        "first_utc": time(s.first_ts),
                        "last_utc": time(s.last_ts),
                        "config_source": r.config_source,
                        "epp_pods": s.epp_pods.list(),
                        "endpoint_pods": s.endpoint_pods.list(),
                        "vllm_pods": s.vllm_pods.list(),
                    })
                })
                .collect();
            serde_json::to_writer_pretty(&mut *w, &serde_json::json!({ "deployments": list }))?;
            return writeln!(w);
        }
        Format::Csv => {
            use gatecal_render::escape::csv;
            writeln!(
                w,
                "deployment,decisions,first_utc,last_utc,config_source,epp_pods,endpoint_pods,vllm_pods"
            )?;
            let pods = |p: &Pods| p.names.iter().cloned().collect::<Vec<_>>().join(";");
            for r in rows {
                let s = seen(r.name);
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},{}",
                    csv(r.name),
                    r.decisions,
                    time(s.first_ts).unwrap_or_default(),
                    time(s.last_ts).unwrap_or_default(),
                    csv(r.config_source),
                    csv(&pods(&s.epp_pods)),
                    csv(&pods(&s.endpoint_pods)),
                    csv(&pods(&s.vllm_pods)),
                )?;
            }
            return Ok(());
        }
        Format::Markdown => {
            use gatecal_render::escape::markdown;
            writeln!(
                w,
                "| deployment | decisions | time (UTC) | config | EPP pods | endpoint pods | vLLM pods |\n|---|---:|---|---|---|---|---|"
            )?;
            for r in rows {
                let s = seen(r.name);
                let range = match (s.first_ts, s.last_ts) {
                    (Some(a), Some(b)) => format!("{} .. {}", utc(a), utc(b)),
                    _ => "no times".into(),
                };
                writeln!(
                    w,
                    "| {} | {} | {range} | {} | {} | {} | {} |",
                    markdown(r.name),
                    r.decisions,
                    markdown(r.config_source),
                    markdown(&s.epp_pods.show()),
                    markdown(&s.endpoint_pods.show()),
                    markdown(&s.vllm_pods.show()),
                )?;
            }
            return Ok(());
        }
    }
    if rows.is_empty() {
        writeln!(w, "no deployments found")?;
    }
    for r in rows {
        let s = seen(r.name);
        let range = match (s.first_ts, s.last_ts) {
            (Some(a), Some(b)) => format!("{} .. {} UTC", utc(a), utc(b)),
            _ => "no times".into(),
        };
        // Names come from the logs: one line each, no control character.
        let plain = |t: &str| gatecal_render::escape::terminal(t).into_owned();
        writeln!(
            w,
            "{}\n  decisions: {}\n  time: {range}\n  config: {}\n  EPP pods: {}\n  endpoint pods: {}\n  vLLM pods: {}",
            plain(r.name),
            r.decisions,
            plain(r.config_source),
            plain(&s.epp_pods.show()),
            plain(&s.endpoint_pods.show()),
            plain(&s.vllm_pods.show()),
        )?;
    }
    Ok(())
}

/// Fails when a `--config NAME=FILE` (or another per-deployment flag,
/// `what`) names no deployment found, listing the names found.
pub fn check_names<'a>(
    what: &str,
    asked: impl IntoIterator<Item = &'a str>,
    found: &[&str],
) -> anyhow::Result<()> {
    let unknown: Vec<&str> = asked
        .into_iter()
        .filter(|n| !n.is_empty() && !found.contains(n))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "{what} names no deployment found: {}; the deployments found are: {} (see --list-deployments)",
        unknown.join(", "),
        if found.is_empty() {
            "none".to_string()
        } else {
            found.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_are_listed_with_the_names_found() {
        assert!(check_names("--config", ["a"], &["a", "b"]).is_ok());
        let e = check_names("--config", ["a", "zz"], &["a", "b"]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("zz") && e.contains("a, b"), "{e}");
        assert!(!e.contains("zz, "), "{e}");
    }

    #[test]
    fn the_list_is_written_in_every_format() {
        use gatecal_render::Format;
        let mut index = DeploymentIndex::default();
        let e = index.entry("glm, \"5\"");
        e.epp_pods.add("epp-1");
        e.time(Some(1_787_322_974.0));
        let rows = [Listed {
            name: "glm, \"5\"",
            decisions: 7,
            config_source: "default",
        }];
        let out = |f| {
            let mut w = Vec::new();
            write_list(&mut w, &rows, &index, f).unwrap();
            String::from_utf8(w).unwrap()
        };
        let v: serde_json::Value = serde_json::from_str(&out(Format::Json)).unwrap();
        assert_eq!(v["deployments"][0]["name"], "glm, \"5\"");
        assert_eq!(v["deployments"][0]["decisions"], 7);
        assert_eq!(v["deployments"][0]["epp_pods"]["names"][0], "epp-1");
        let csv = out(Format::Csv);
        let mut lines = csv.lines();
        assert!(lines.next().unwrap().starts_with("deployment,decisions,"));
        assert!(
            lines.next().unwrap().starts_with("\"glm, \"\"5\"\"\",7,"),
            "{csv}"
        );
        assert!(out(Format::Markdown).starts_with("| deployment |"));
        assert!(out(Format::Table).contains("  decisions: 7"));
    }

    #[test]
    fn pods_are_capped_and_counted() {
        let mut p = Pods::default();
        for i in 0..MAX_PODS_LISTED {
            // A pod listed is counted once.
            p.add(&format!("pod-{i:04}"));
            p.add(&format!("pod-{i:04}"));
        }
        assert_eq!(p.names.len(), MAX_PODS_LISTED);
        assert!(!p.show().contains("more"));
        for i in 0..3 {
            p.add(&format!("late-{i}"));
        }
        assert_eq!(p.names.len(), MAX_PODS_LISTED);
        assert!(p.show().ends_with("and up to 3 more"));
    }
}
