//! One module per subcommand, each wiring the pipeline stages for it.

pub mod bench;
pub mod check;
pub mod plan;
pub mod planners;
pub mod shell;

use std::path::Path;

use crate::analyze::order::{self, OperatorOrder, OrderMode};
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
    read_prepare_and_analyze(model, target, |model| {
        edit(model);
        Ok(None)
    })
}

/// What the order stage does before analysis (`analyze::order`).
pub(crate) enum OrderRequest<'a> {
    /// Search the best order; reorder the model with [`OrderMode::Best`].
    Search(OrderMode),
    /// Run the order a plan file gives (stored operator indices), after checking it is valid.
    Given { order: &'a [u32], plan: &'a Path },
}

/// [`read_edit_and_analyze`] with the order stage after `edit`; the analysis records what it
/// found.
pub(crate) fn read_order_and_analyze(
    model: &Path,
    target: &TargetConfig,
    request: OrderRequest,
    edit: impl FnOnce(&mut input::Model),
) -> Result<Analysis> {
    read_prepare_and_analyze(model, target, |model| {
        edit(model);
        match request {
            OrderRequest::Search(mode) => order::choose(model, mode, order::DEFAULT_TIME_LIMIT),
            OrderRequest::Given { order, plan } => order::apply_given(model, order, plan).map(Some),
        }
    })
}

/// Reads the target files and the model, runs `prepare` on the model, then analysis.
fn read_prepare_and_analyze(
    model: &Path,
    target: &TargetConfig,
    prepare: impl FnOnce(&mut input::Model) -> Result<Option<OperatorOrder>>,
) -> Result<Analysis> {
    let setup = input::TargetSetup::load(
        target.target.as_deref(),
        target.constraints.clone(),
        target.rules.as_deref(),
        target.external_io.clone(),
    )?;
    let mut model = input::read_model(model)?;
    let order = prepare(&mut model)?;
    let mut analysis = analyze::analyze(model, &setup.target, &setup.constraints, &setup.rules)?;
    analysis.order = order;
    Ok(analysis)
}
