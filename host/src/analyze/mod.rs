//! Analyze stage: turns a [`Model`] plus target, constraints and rules into the plan request
//! a planner receives: inclusive lifetimes, merged alias chains, slot alignment, resolved
//! placement attributes and memory budgets.

use std::path::PathBuf;

use memplan_plugin_api::PlanRequest;

use crate::error::{Error, Result};
use crate::input::Model;

/// What the later stages know about the model.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// The model file, for messages.
    pub source: PathBuf,
    /// Name of the target the memories come from.
    pub target: String,
    /// What the planner receives (its `options` field is filled in by the plan command).
    pub request: PlanRequest,
    /// Tensor names, by tensor index.
    pub names: Vec<String>,
    /// Bytes of constant tensors, by tensor index (`None` for non-constants).
    pub constant_data: Vec<Option<Vec<u8>>>,
}

/// Runs the analysis. Placeholder until the model-input issue lands.
pub fn analyze(model: Model) -> Result<Analysis> {
    Err(Error::internal(format!(
        "{}: analysis is not implemented yet",
        model.path.display()
    )))
}
