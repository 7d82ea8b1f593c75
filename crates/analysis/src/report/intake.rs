//! How both analyses take a decision in: readied under the configs in
//! force ([`InForce::prepare`]), then through the analysis's reorder
//! buffer ([`InOrder::feed`]), or, given in the order that buffer would
//! release it, handled at once.

use std::collections::BTreeMap;

use crate::config::in_force::InForce;
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
