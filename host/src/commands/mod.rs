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
    read_edit_and_analyze(model, target, |_| {})
}

/// [`read_and_analyze`], with `edit` applied to the model as read, before analysis.
pub(crate) fn read_edit_and_analyze(
    model: &Path,
    target: &TargetConfig,
    edit: impl FnOnce(&mut input::Model),
) -> Result<Analysis> {
    let setup = input::TargetSetup::load(
        target.target.as_deref(),
        target.constraints.clone(),
        target.rules.as_deref(),
        target.external_io.clone(),
    )?;
    let mut model = input::read_model(model)?;
    edit(&mut model);
    analyze::analyze(model, &setup.target, &setup.constraints, &setup.rules)
}
