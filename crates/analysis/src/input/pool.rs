//! The bound on the deployments tracked (see [`Pooled`]).

use std::hash::BuildHasher;

use gatecal_parser::Name;
use rustc_hash::{FxBuildHasher, FxHashSet};
use serde::Serialize;

/// Distinct pooled names counted exactly, at most (64-bit fingerprints,
/// 8 bytes each: 8 MiB at the bound); past it the count is a lower bound
/// ([`Pooled::at_least`]).
pub const MAX_POOLED_NAMES: usize = 1 << 20;

/// Deployments tracked at most by default; the rest are pooled.
pub const MAX_DEPLOYMENTS: usize = 256;

/// The name of the pooled deployment.
pub const OTHER_DEPLOYMENT: &str = "(other deployments)";

/// What was pooled, as reported.
///
/// A bound on the deployments tracked: memory and the report's size grow
/// with them (each holds histograms, windows, endpoint trackers; the SVG
/// output draws one file each), so past [`MAX_DEPLOYMENTS`] the decisions
/// of every further deployment are pooled into one named
/// [`OTHER_DEPLOYMENT`], and how many were pooled is reported. The first
/// deployments seen are kept (the order of the input).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Pooled {
    /// Distinct deployment names pooled into [`OTHER_DEPLOYMENT`].
    pub deployments: u64,
    /// Decisions of those deployments.
    pub decisions: u64,
    /// The cap in force.
    pub max_deployments: usize,
    /// Whether more than [`MAX_POOLED_NAMES`] names were pooled, so that
    /// `deployments` is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_least: bool,
}

/// Admits deployment names up to a cap.
#[derive(Debug)]
pub struct DeploymentCap {
    max: usize,
    kept: FxHashSet<Name>,
    /// [`OTHER_DEPLOYMENT`], shared by the pooled decisions.
    other: Name,
    /// Fingerprints of the pooled names.
    pooled_names: FxHashSet<u64>,
    pooled: Pooled,
}

impl DeploymentCap {
    /// A cap of `max` deployments (at least 1).
    pub fn new(max: usize) -> DeploymentCap {
        let max = max.max(1);
        DeploymentCap {
            max,
            kept: FxHashSet::default(),
            other: Name::from(OTHER_DEPLOYMENT),
            pooled_names: FxHashSet::default(),
            pooled: Pooled {
                max_deployments: max,
                ..Pooled::default()
            },
        }
    }

    /// Keeps `name`, or renames it [`OTHER_DEPLOYMENT`] once `max` others
    /// are kept. The pooled names are remembered by a 64-bit fingerprint
    /// to count them once; past [`MAX_POOLED_NAMES`] of them, only their
    /// decisions are counted and the count says it is a lower bound.
    pub fn admit(&mut self, name: &mut Name) {
        if !self.kept(name) {
            *name = self.other.clone();
        }
    }

    /// [`DeploymentCap::admit`] for a name held as a `String`.
    pub fn admit_string(&mut self, name: &mut String) {
        if !self.kept(name) {
            name.clear();
            name.push_str(OTHER_DEPLOYMENT);
        }
    }

    /// Whether `name` is kept (else it is counted as pooled).
    fn kept(&mut self, name: &str) -> bool {
        if self.kept.contains(name) {
            return true;
        }
        if self.kept.len() < self.max {
            self.kept.insert(Name::from(name));
            return true;
        }
        self.pooled.decisions += 1;
        let fingerprint = FxBuildHasher.hash_one(name);
        if self.pooled_names.contains(&fingerprint) {
            // Counted already.
        } else if self.pooled_names.len() < MAX_POOLED_NAMES {
            self.pooled_names.insert(fingerprint);
            self.pooled.deployments += 1;
        } else {
            self.pooled.at_least = true;
        }
        false
    }

    /// What was pooled so far.
    pub fn pooled(&self) -> &Pooled {
        &self.pooled
    }
}

impl Default for DeploymentCap {
    fn default() -> Self {
        DeploymentCap::new(MAX_DEPLOYMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_names_are_pooled_and_counted() {
        let mut c = DeploymentCap::new(2);
        let mut got = Vec::new();
        for n in ["a", "b", "c", "a", "d", "c", "b"] {
            let mut s = Name::from(n);
            c.admit(&mut s);
            got.push(s);
        }
        assert_eq!(
            got,
            [
                "a",
                "b",
                OTHER_DEPLOYMENT,
                "a",
                OTHER_DEPLOYMENT,
                OTHER_DEPLOYMENT,
                "b"
            ]
        );
        assert_eq!(
            *c.pooled(),
            Pooled {
                deployments: 2,
                decisions: 3,
                max_deployments: 2,
                at_least: false,
            }
        );
    }

    /// Tens of thousands of deployments past the cap are counted exactly
    /// (the count used to stop at 16 × the cap: "4096 more" of 49,744).
    #[test]
    fn many_pooled_names_are_counted_exactly() {
        let mut c = DeploymentCap::default();
        for round in 0..2 {
            for i in 0..50_000 {
                let mut s = Name::from(format!("deployment-{i}"));
                c.admit(&mut s);
                if i >= MAX_DEPLOYMENTS {
                    assert_eq!(s, OTHER_DEPLOYMENT, "round {round}");
                }
            }
        }
        assert_eq!(c.pooled().deployments, 50_000 - MAX_DEPLOYMENTS as u64);
        assert_eq!(c.pooled().decisions, 2 * (50_000 - MAX_DEPLOYMENTS as u64));
        assert!(!c.pooled().at_least);
    }
}
