//! The bound on the deployments tracked (see [`Pooled`]).

use rustc_hash::FxHashSet;
use serde::Serialize;

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
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Pooled {
    /// Distinct deployment names pooled into [`OTHER_DEPLOYMENT`].
    pub deployments: u64,
    /// Decisions of those deployments.
    pub decisions: u64,
    /// The cap in force.
    pub max_deployments: usize,
}

/// Admits deployment names up to a cap.
#[derive(Debug)]
pub struct DeploymentCap {
    max: usize,
    kept: FxHashSet<String>,
    pooled_names: FxHashSet<String>,
    pooled: Pooled,
}

impl DeploymentCap {
    /// A cap of `max` deployments (at least 1).
    pub fn new(max: usize) -> DeploymentCap {
        let max = max.max(1);
        DeploymentCap {
            max,
            kept: FxHashSet::default(),
            pooled_names: FxHashSet::default(),
            pooled: Pooled {
                max_deployments: max,
                ..Pooled::default()
            },
        }
    }

    /// Keeps `name`, or renames it [`OTHER_DEPLOYMENT`] once `max` others
    /// are kept. The pooled names are remembered to count them once; past
    /// `16 × max` of them, only their decisions are counted (the set stays
    /// bounded).
    pub fn admit(&mut self, name: &mut String) {
        if self.kept.contains(name.as_str()) {
            return;
        }
        if self.kept.len() < self.max {
            self.kept.insert(name.clone());
            return;
        }
        self.pooled.decisions += 1;
        if self.pooled_names.len() < 16 * self.max {
            if self.pooled_names.insert(std::mem::take(name)) {
                self.pooled.deployments += 1;
            }
        } else {
            name.clear();
        }
        name.push_str(OTHER_DEPLOYMENT);
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
            let mut s = n.to_string();
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
                max_deployments: 2
            }
        );
    }
}
