//! Read stage: model files, targets, memory constraints and attribute rules.
//!
//! Entry point: [`read_model`], which picks the reader by file extension. Every reader turns
//! bad input into an [`Error`] of kind `Input` (exit 2) naming the file and the place in it.

pub mod model;

use std::path::Path;

use crate::error::{Error, Result};
pub use model::{Model, ModelAlias, Operator, Tensor};

/// Reads a model: `.json` (memplan model JSON), `.tflite`, `.csv` (MiniMalloc).
pub fn read_model(path: &Path) -> Result<Model> {
    Err(Error::internal(format!(
        "{}: model readers are not implemented yet",
        path.display()
    )))
}
