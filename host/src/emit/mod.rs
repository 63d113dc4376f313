//! Emit stage: writes the rendered plan's files, atomically.

use std::path::Path;

use crate::error::{Error, Result};
use crate::render::RenderPlan;

/// Placeholder until the emit issue lands.
pub fn emit(_rendered: &RenderPlan, _out: &Path) -> Result<()> {
    Err(Error::internal("emit is not implemented yet"))
}
