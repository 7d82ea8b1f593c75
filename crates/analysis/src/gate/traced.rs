//! The decisions with a trace span: the traced gate input and the
//! reconstruction's error measured against it.

use serde::{Deserialize, Serialize};

use crate::gate::hist::Distribution;
use crate::gate::hist::SignedHistogram;
use crate::gate::sample::{Evidence, GateSample};

/// The decisions with a trace span, and the reconstruction's error measured
/// on them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TracedStats {
    /// Decisions with a trace span: the trace sample (head-sampled traces
    /// hold a share of all decisions).
    pub decisions: u64,
    /// Of those, log decisions joined to their span by request id and
    /// profile (the rest were read from traces alone).
    pub joined: u64,
    /// The traced gate input over the sample.
    pub gate_input_ms: Distribution,
    /// The reconstruction checked against the traced input.
    pub validation: Validation,
}

/// The reconstruction's measured error: joined decisions whose logs alone
/// gave a `reconstructed` gate input, against their traced (exact) input.
/// Values are kept in the report's histograms (3 significant digits).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Validation {
    /// Joined decisions with a traced gate input.
    pub traced_inputs: u64,
    /// Of those, the pairs: the logs alone gave a `reconstructed` value.
    pub pairs: u64,
    /// Of those, where the logs alone gave `logged` evidence (the gate line).
    pub logged: u64,
    /// Of those, where the logs alone gave `observed` evidence.
    pub observed: u64,
    /// Of those, where the logs alone could not reconstruct the input
    /// (`unknown`, or the gate not seen as evaluated).
    pub reconstruction_unknown: u64,
    /// `|reconstructed - traced|` over the pairs, ms.
    pub abs_error_ms: Distribution,
    /// `reconstructed - traced` over the pairs, ms (signed: the bias).
    pub error_ms: Distribution,
    /// The reconstructed inputs of the pairs, ms.
    pub reconstructed_ms: Distribution,
    /// The traced inputs of the pairs, ms.
    pub traced_ms: Distribution,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct TracedAcc {
    pub(crate) decisions: u64,
    joined: u64,
    hist: SignedHistogram,
    traced_inputs: u64,
    logged: u64,
    observed: u64,
    unknown: u64,
    abs_err: SignedHistogram,
    err: SignedHistogram,
    rec: SignedHistogram,
    traced: SignedHistogram,
}

impl TracedAcc {
    pub(crate) fn add(&mut self, s: &GateSample) {
        self.decisions += 1;
        if let (Some(Evidence::Traced), Some(g)) = (s.evidence, s.gate_input_ms) {
            self.hist.record(g);
        }
        if s.traced_joined {
            self.joined += 1;
        }
        // A decision of a trace input, or a joined one without a traced gate
        // input: nothing to compare.
        let Some((ev, rec)) = s.reconstructed else {
            return;
        };
        let Some(t) = s.gate_input_ms else { return };
        self.traced_inputs += 1;
        match (ev, rec) {
            (Evidence::Reconstructed, Some(r)) => {
                self.abs_err.record((r - t).abs());
                self.err.record(r - t);
                self.rec.record(r);
                self.traced.record(t);
            }
            (Evidence::Logged, _) => self.logged += 1,
            (Evidence::Observed, _) => self.observed += 1,
            _ => self.unknown += 1,
        }
    }

    pub(crate) fn merge(&mut self, o: &TracedAcc) {
        self.decisions += o.decisions;
        self.joined += o.joined;
        self.hist.merge(&o.hist);
        self.traced_inputs += o.traced_inputs;
        self.logged += o.logged;
        self.observed += o.observed;
        self.unknown += o.unknown;
        self.abs_err.merge(&o.abs_err);
        self.err.merge(&o.err);
        self.rec.merge(&o.rec);
        self.traced.merge(&o.traced);
    }

    pub(crate) fn finish(&self) -> TracedStats {
        TracedStats {
            decisions: self.decisions,
            joined: self.joined,
            gate_input_ms: Distribution::of(&self.hist),
            validation: Validation {
                traced_inputs: self.traced_inputs,
                pairs: self.abs_err.count(),
                logged: self.logged,
                observed: self.observed,
                reconstruction_unknown: self.unknown,
                abs_error_ms: Distribution::of(&self.abs_err),
                error_ms: Distribution::of(&self.err),
                reconstructed_ms: Distribution::of(&self.rec),
                traced_ms: Distribution::of(&self.traced),
            },
        }
    }
}
