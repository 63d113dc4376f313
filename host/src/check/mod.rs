//! Check stage: verifies a plan against the request before anything is rendered.
//! Every contract of DESIGN.md is checked and every violation reported.

use memplan_plugin_api::MemoryPlan;

use crate::analyze::Analysis;
use crate::error::{Error, Result};

/// A plan that passed every check, with the lower bound of each of its arenas.
#[derive(Clone, Debug)]
pub struct CheckedPlan {
    pub plan: MemoryPlan,
    /// Lower bound of each arena of `plan.arenas`, same order.
    pub lower_bounds: Vec<u64>,
}

/// Checks `plan` against `analysis`. Placeholder until the checker issue lands.
pub fn check_plan(_analysis: &Analysis, _plan: MemoryPlan) -> Result<CheckedPlan> {
    Err(Error::internal("the plan checker is not implemented yet"))
}
