//! Render stage: turns a checked plan into regions, hashes and constant blobs.

use crate::analyze::Analysis;
use crate::check::CheckedPlan;
use crate::error::{Error, Result};

/// What the emit stage needs, and nothing it would have to compute.
#[derive(Clone, Debug, Default)]
pub struct RenderPlan {
    pub prefix: String,
}

/// Options of the render stage.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    pub prefix: String,
    pub external_arenas: bool,
}

/// Placeholder until the render issue lands.
pub fn render(
    _analysis: &Analysis,
    _checked: &CheckedPlan,
    _options: &RenderOptions,
) -> Result<RenderPlan> {
    Err(Error::internal("render is not implemented yet"))
}
