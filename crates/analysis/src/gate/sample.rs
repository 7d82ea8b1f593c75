//! A decision's gate input as the analysis knows it ([`GateSample`]): its
//! value, how it is known ([`Evidence`]) and what a replay needs of it
//! ([`Replay`]).

use gatecal_filter::{Candidate, Outcome};
use serde::Serialize;

/// How a decision's gate input is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// Taken from a `TTFT load gate broken` line: exact.
    Logged,
    /// Taken from the decision's trace span
    /// (`llm_d.epp.filter.ttft_penalty_ms`): exact.
    Traced,
    /// Every candidate's load visible in the decision's own data: exact.
    Observed,
    /// Some loads carried forward from other decisions, bounded by staleness.
    Reconstructed,
    /// Not enough evidence.
    Unknown,
}

impl Evidence {
    /// The label, as written in reports and decision records.
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Logged => "logged",
            Evidence::Traced => "traced",
            Evidence::Observed => "observed",
            Evidence::Reconstructed => "reconstructed",
            Evidence::Unknown => "unknown",
        }
    }

    /// The evidence of a label; a label this build does not know (a later
    /// source's) counts as [`Evidence::Unknown`].
    pub fn from_label(label: &str) -> Evidence {
        match label {
            "logged" => Evidence::Logged,
            "traced" => Evidence::Traced,
            "observed" => Evidence::Observed,
            "reconstructed" => Evidence::Reconstructed,
            _ => Evidence::Unknown,
        }
    }
}

/// How a decision can be replayed under another config.
#[derive(Clone, Debug, PartialEq)]
pub enum Replay {
    /// The outcome does not depend on the gate's parameters (no sticky
    /// endpoint, exploration, every endpoint sticky, ...).
    Fixed(Outcome),
    /// Candidates to pass to the filter core.
    Candidates(Vec<Candidate>),
    /// The gate ran but its input is unknown.
    Unknown,
}

/// One decision with its gate input and how to replay it.
#[derive(Clone, Debug, PartialEq)]
pub struct GateSample {
    /// Seconds since the Unix epoch.
    pub ts: Option<f64>,
    /// `x-request-id`.
    pub request_id: Option<gatecal_parser::Name>,
    /// The outcome logged (or, for sources without one, replayed).
    pub outcome: Option<Outcome>,
    /// Whether `outcome` was logged by the EPP (rather than replayed).
    pub outcome_logged: bool,
    /// `None` when the gate was not evaluated.
    pub evidence: Option<Evidence>,
    /// Gate input in ms under the deployment's config, when known.
    pub gate_input_ms: Option<f64>,
    /// How to replay it.
    pub replay: Replay,
    /// Matched tokens of the best sticky endpoint, when known.
    pub matched_tokens: Option<i64>,
    /// The bar the EPP logged (`maxPenalty`), to check the config against.
    pub logged_bar_ms: Option<f64>,
    /// How far the logged outcome moved the reconstructed gate input, in ms
    /// (positive): set only when the carried-forward estimate contradicted
    /// the outcome (a held decision estimated above the bar) and was
    /// censored to the largest input the config holds.
    pub censored_ms: Option<f64>,
    /// The peak the EPP logged (`prefillThroughput`, P2251 builds).
    pub logged_peak: Option<f64>,
    /// Whether the decision has a trace span (it is in the trace sample).
    pub traced: bool,
    /// Whether it is a log decision joined to its span.
    pub traced_joined: bool,
    /// For a log decision joined to a span with a gate input: what the
    /// logs alone gave (`Some` evidence, and the value when known), before
    /// the traced input replaced it.
    pub reconstructed: Option<(Evidence, Option<f64>)>,
}

impl GateSample {
    /// For a joined decision whose logs alone gave `reconstructed` evidence:
    /// the reconstruction's gate input, ms.
    pub fn reconstructed_ms(&self) -> Option<f64> {
        match self.reconstructed {
            Some((Evidence::Reconstructed, v)) => v,
            _ => None,
        }
    }
}
