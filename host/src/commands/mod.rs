//! One module per subcommand, each wiring the pipeline stages for it.

pub mod bench;
pub mod check;
pub mod plan;
pub mod planners;

use std::path::Path;

use crate::analyze::{self, Analysis};
use crate::cli::config::TargetConfig;
use crate::error::Result;
use crate::input;

/// The read and analyze stages, shared by `plan`, `check` and `bench`: the target files, then
/// the model.
pub(crate) fn read_and_analyze(model: &Path, target: &TargetConfig) -> Result<Analysis> {
    let setup = input::TargetSetup::load(
        target.target.as_deref(),
        target.constraints.clone(),
        target.rules.as_deref(),
    )?;
    let model = input::read_model(model)?;
    analyze::analyze(model, &setup.target, &setup.constraints, &setup.rules)
}
