//! How both analyses take a decision in: readied under the configs in
//! force ([`InForce::prepare`]), then through the analysis's reorder
//! buffer ([`InOrder::feed`]), or, given in the order that buffer would
//! release it, handled at once; and how both settle the decisions still
//! waiting for their configs at the end ([`settle_waiting`]).

use std::collections::BTreeMap;

use crate::config::in_force::{InForce, Shown};
use crate::config::source::SourcedConfig;
use crate::gate::reorder::InOrder;
use crate::input::pool::DeploymentCap;
use crate::input::{DecisionInput, ProducerBlockSizes};

/// What readying a decision reads: the configs in force, the prefix
/// producers' block sizes, and the deployment cap.
pub(crate) type Parts<'a> = (
    &'a InForce,
    &'a BTreeMap<String, ProducerBlockSizes>,
    &'a mut DeploymentCap,
);

/// [`crate::GateDist`]'s and [`crate::Recommend`]'s intake.
pub(crate) trait Intake: InOrder {
    /// What readying a decision reads.
    fn intake(&mut self) -> Parts<'_>;

    /// Handles one readied decision, in release order.
    fn process(&mut self, d: DecisionInput);

    /// Readies a decision and adds it to the reorder buffer.
    fn take_buffered(&mut self, mut d: DecisionInput) {
        let (in_force, block_sizes, cap) = self.intake();
        in_force.prepare(&mut d, block_sizes, cap);
        self.feed(d);
    }

    /// Readies a decision given in release order and handles it at once.
    fn take_released(&mut self, mut d: DecisionInput) {
        let (in_force, block_sizes, cap) = self.intake();
        in_force.prepare(&mut d, block_sizes, cap);
        self.process(d);
    }
}

/// A deployment's accumulator of either analysis: the config it reports.
pub(crate) trait Shows {
    /// The config reported, with every filter instance's disagreements.
    fn shown(&mut self) -> &mut Shown;
}

/// At the end of the input (the reorder buffer drained): the decisions
/// still waiting for their deployment's bar handled under the configs
/// known ([`InForce::finish`]), each by `handle` with the deployments'
/// accumulators (`None` when only records are made), then the
/// disagreements the log showed after a config was fixed added to each
/// deployment's config.
pub(crate) fn settle_waiting<D, F>(
    in_force: &mut InForce,
    deps: &mut BTreeMap<String, D>,
    records_only: bool,
    mut handle: F,
) where
    D: Shows,
    F: FnMut(Option<&mut BTreeMap<String, D>>, &SourcedConfig, DecisionInput),
{
    in_force.finish(&mut |sc, d| handle((!records_only).then_some(&mut *deps), sc, d));
    for (name, dep) in deps.iter_mut() {
        in_force.late_disagreements(name, dep.shown());
    }
}
