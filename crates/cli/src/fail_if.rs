//! `--fail-if EXPR`: CI gates over a report's figures and findings.
//!
//! An expression is one of
//!
//! - `FIGURE OP NUMBER`: a deployment's figure, named as in the JSON report
//!   (a path inside a deployment's object, such as `released_share` or
//!   `gate_input_ms.p99`; `pinned_share` is the pinned-worse share), with
//!   `OP` one of `>`, `>=`, `<`, `<=`, `==`, `!=`. It holds when it holds
//!   for some deployment (a figure that is `null` never holds);
//! - `finding:ID`: a finding with that id is in the report;
//! - `severity OP LEVEL`: a finding's severity compares so (`info`,
//!   `warning`, `critical`).
//!
//! The report is written whatever the gates say; when any holds, each is
//! listed on stderr with the values that made it hold, and the process
//! exits 4 ([`EXIT_GATES_HELD`]). An expression that does not parse, or
//! names an unknown figure, finding or severity, is a usage error (exit 2)
//! that lists the known ones.

use std::fmt;

use gatecal_analysis::findings::{Severity, ids};
use gatecal_analysis::{GateDistReport, RecommendReport};

/// Exit code when a `--fail-if` gate held.
pub const EXIT_GATES_HELD: u8 = 4;

/// The figures of a binary: the name a gate uses, and the path of its value
/// inside a deployment's JSON object.
pub type Figures = &'static [(&'static str, &'static str)];

/// gate-dist's figures (a deployment of `deployments`).
pub const GATE_DIST_FIGURES: Figures = &[
    ("decisions", "decisions"),
    ("released", "released"),
    ("released_share", "released_share"),
    ("pinned_share", "pinned_worse.share"),
    ("pinned_worse.share", "pinned_worse.share"),
    ("pinned_worse.count", "pinned_worse.count"),
    ("bar_ms", "bar_ms"),
    ("gate_input_ms.count", "gate_input_ms.count"),
    ("gate_input_ms.p50", "gate_input_ms.p50"),
    ("gate_input_ms.p90", "gate_input_ms.p90"),
    ("gate_input_ms.p99", "gate_input_ms.p99"),
    ("gate_input_ms.p999", "gate_input_ms.p999"),
    ("gate_input_ms.max", "gate_input_ms.max"),
    ("evidence.unknown", "evidence.unknown"),
    ("replay.decisions", "replay.decisions"),
    ("replay.agreed", "replay.agreed"),
    ("self_check.replayed", "self_check.replayed"),
    ("self_check.agreed", "self_check.agreed"),
    (
        "config.parameters.maxTTFTPenaltyMs",
        "config.parameters.maxTTFTPenaltyMs",
    ),
    (
        "config.parameters.peakPrefillThroughput",
        "config.parameters.peakPrefillThroughput",
    ),
];

/// recommend's figures (a deployment of `deployments`).
pub const RECOMMEND_FIGURES: Figures = &[
    ("decisions", "current.decisions"),
    ("released_share", "current.released_share"),
    ("logged_released_share", "current.logged_released_share"),
    ("pinned_share", "current.pinned_worse_share"),
    ("current.decisions", "current.decisions"),
    ("current.released_share", "current.released_share"),
    (
        "current.logged_released_share",
        "current.logged_released_share",
    ),
    ("current.pinned_worse_share", "current.pinned_worse_share"),
    (
        "peak_prefill_throughput.value",
        "peak_prefill_throughput.value",
    ),
    ("reference_peak", "reference_peak"),
    ("break_even_ms.p10", "break_even_ms.p10"),
    ("break_even_ms.p50", "break_even_ms.p50"),
    ("break_even_ms.p90", "break_even_ms.p90"),
    ("matched_tokens.with_matched", "matched_tokens.with_matched"),
];

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// What a gate tests.
#[derive(Clone, Debug, PartialEq)]
pub enum Test {
    /// A deployment figure against a number: its name and JSON path.
    Figure {
        /// As written.
        name: String,
        /// Inside a deployment's object.
        path: &'static str,
        /// The comparison.
        op: Op,
        /// The number.
        value: f64,
    },
    /// A finding id is in the report.
    Finding(&'static str),
    /// A finding's severity compares.
    Severity(Op, Severity),
}

/// One `--fail-if` gate.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    /// The expression as given.
    pub text: String,
    /// What it tests.
    pub test: Test,
}

fn split_op(s: &str) -> Option<(&str, Op, &str)> {
    for (tok, op) in [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        (">", Op::Gt),
        ("<", Op::Lt),
    ] {
        if let Some(i) = s.find(tok) {
            return Some((s[..i].trim(), op, s[i + tok.len()..].trim()));
        }
    }
    None
}

/// Parses one expression against a binary's figures; the error names what
/// is known.
pub fn parse(expr: &str, figures: Figures) -> Result<Gate, String> {
    let text = expr.trim().to_string();
    let known_figures = || {
        figures
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(id) = text.strip_prefix("finding:") {
        let id = id.trim();
        return match ids::ALL.iter().find(|k| **k == id) {
            Some(k) => Ok(Gate {
                text,
                test: Test::Finding(k),
            }),
            None => Err(format!(
                "unknown finding {id:?}; the findings are: {}",
                ids::ALL.join(", ")
            )),
        };
    }
    let Some((lhs, op, rhs)) = split_op(&text) else {
        return Err(format!(
            "expected FIGURE OP NUMBER (OP one of > >= < <= == !=), finding:ID or severity OP LEVEL; the figures are: {}",
            known_figures()
        ));
    };
    if lhs == "severity" {
        return match Severity::parse(rhs) {
            Some(s) => Ok(Gate {
                text,
                test: Test::Severity(op, s),
            }),
            None => Err(format!(
                "unknown severity {rhs:?}; the severities are: info, warning, critical"
            )),
        };
    }
    let Some((name, path)) = figures.iter().find(|(n, _)| *n == lhs) else {
        return Err(format!(
            "unknown figure {lhs:?}; the figures are: {}",
            known_figures()
        ));
    };
    let value: f64 = rhs
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("{rhs:?} is not a number (in {text:?})"))?;
    Ok(Gate {
        text,
        test: Test::Figure {
            name: name.to_string(),
            path,
            op,
            value,
        },
    })
}

/// A clap value parser for gate-dist's `--fail-if`.
pub fn parse_gate_dist(s: &str) -> Result<Gate, String> {
    parse(s, GATE_DIST_FIGURES)
}

/// A clap value parser for recommend's `--fail-if`.
pub fn parse_recommend(s: &str) -> Result<Gate, String> {
    parse(s, RECOMMEND_FIGURES)
}

fn at<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// The gates that hold on a JSON report (`deployments[].name` and the
/// top-level `findings`), each as a line with the values that made it hold.
pub fn held(gates: &[Gate], report: &serde_json::Value) -> Vec<String> {
    let empty = Vec::new();
    let deployments = report["deployments"].as_array().unwrap_or(&empty);
    let findings = report["findings"].as_array().unwrap_or(&empty);
    let mut out = Vec::new();
    for g in gates {
        let hits: Vec<String> = match &g.test {
            Test::Figure {
                path, op, value, ..
            } => deployments
                .iter()
                .filter_map(|d| {
                    let x = at(d, path)?.as_f64()?;
                    op.holds(x, *value)
                        .then(|| format!("{} {path} = {x}", d["name"].as_str().unwrap_or("?")))
                })
                .collect(),
            Test::Finding(id) => findings
                .iter()
                .filter(|f| f["id"] == *id)
                .map(|f| {
                    format!(
                        "{} {} ({})",
                        f["deployment"].as_str().unwrap_or("?"),
                        id,
                        f["severity"].as_str().unwrap_or("?")
                    )
                })
                .collect(),
            Test::Severity(op, level) => findings
                .iter()
                .filter(|f| {
                    f["severity"]
                        .as_str()
                        .and_then(Severity::parse)
                        .is_some_and(|s| op.holds(s, *level))
                })
                .map(|f| {
                    format!(
                        "{} {} ({})",
                        f["deployment"].as_str().unwrap_or("?"),
                        f["id"].as_str().unwrap_or("?"),
                        f["severity"].as_str().unwrap_or("?")
                    )
                })
                .collect(),
        };
        if !hits.is_empty() {
            out.push(format!("{}: {}", g.text, hits.join("; ")));
        }
    }
    out
}

/// Some `--fail-if` gate held: exit 4 ([`EXIT_GATES_HELD`]).
#[derive(Debug)]
pub struct GatesHeld(pub String);

impl fmt::Display for GatesHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GatesHeld {}

/// Evaluates `gates` on a gate-dist report; when some hold, an error that
/// lists them (exit 4).
pub fn check_gate_dist(gates: &[Gate], report: &GateDistReport) -> anyhow::Result<()> {
    if gates.is_empty() {
        return Ok(());
    }
    check(gates, &serde_json::to_value(report)?)
}

/// Evaluates `gates` on a recommend report; when some hold, an error that
/// lists them (exit 4).
pub fn check_recommend(gates: &[Gate], report: &RecommendReport) -> anyhow::Result<()> {
    if gates.is_empty() {
        return Ok(());
    }
    check(gates, &serde_json::to_value(report)?)
}

/// Evaluates `gates` on a JSON report; when some hold, an error that lists
/// them (exit 4).
pub fn check(gates: &[Gate], v: &serde_json::Value) -> anyhow::Result<()> {
    let held = held(gates, v);
    if held.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = held.iter().map(|h| format!("gate held: {h}")).collect();
    Err(GatesHeld(format!(
        "{} of {} --fail-if gates held (exit 4):\n{}",
        held.len(),
        gates.len(),
        lines.join("\n")
    ))
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_parse_and_typos_name_the_known() {
        let g = parse_gate_dist("pinned_share > 0.10").unwrap();
        assert_eq!(
            g.test,
            Test::Figure {
                name: "pinned_share".into(),
                path: "pinned_worse.share",
                op: Op::Gt,
                value: 0.10
            }
        );
        assert_eq!(
            parse_gate_dist("severity >= warning").unwrap().test,
            Test::Severity(Op::Ge, Severity::Warning)
        );
        assert_eq!(
            parse_recommend("finding:affinity_disengaged").unwrap().test,
            Test::Finding("affinity_disengaged")
        );
        let e = parse_gate_dist("pinned_shar > 0.1").unwrap_err();
        assert!(
            e.contains("unknown figure") && e.contains("released_share"),
            "{e}"
        );
        let e = parse_gate_dist("finding:affinity").unwrap_err();
        assert!(e.contains("gate_never_fires"), "{e}");
        assert!(parse_gate_dist("released_share < x").is_err());
        assert!(parse_gate_dist("severity > loud").is_err());
        assert!(parse_gate_dist("released_share").is_err());
    }

    #[test]
    fn gates_hold_per_deployment_and_on_findings() {
        let v = serde_json::json!({
            "findings": [{"id": "gate_never_fires", "severity": "critical", "deployment": "a"}],
            "deployments": [
                {"name": "a", "released_share": 0.004, "pinned_worse": {"share": 0.2}},
                {"name": "b", "released_share": 0.3, "pinned_worse": {"share": null}}
            ]
        });
        let gates: Vec<Gate> = [
            "pinned_share > 0.10",
            "released_share < 0.01",
            "released_share > 0.5",
            "finding:gate_never_fires",
            "finding:missing_signal",
            "severity >= warning",
            "severity < info",
        ]
        .iter()
        .map(|e| parse_gate_dist(e).unwrap())
        .collect();
        let h = held(&gates, &v);
        assert_eq!(h.len(), 4, "{h:?}");
        assert_eq!(h[0], "pinned_share > 0.10: a pinned_worse.share = 0.2");
        assert_eq!(h[1], "released_share < 0.01: a released_share = 0.004");
        assert!(h[2].starts_with("finding:gate_never_fires: a"));
        assert!(h[3].starts_with("severity >= warning: a gate_never_fires"));
    }
}
