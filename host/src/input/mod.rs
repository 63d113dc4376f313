//! Read stage: model files, targets, memory constraints and attribute rules.
//!
//! Entry point: [`read_model`], which picks the reader by file extension. Every reader turns
//! bad input into an [`Error`] of kind `Input` (exit 2) naming the file and the place in it.

pub mod model;
pub mod tflite;

use std::path::Path;

use crate::error::{Error, Result};
pub use model::{Model, ModelAlias, Operator, Tensor};

/// Reads a model: `.json` (memplan model JSON), `.tflite`, `.csv` (MiniMalloc).
pub fn read_model(path: &Path) -> Result<Model> {
    let extension = path.extension().and_then(|extension| extension.to_str());
    if extension.is_some_and(|extension| extension.eq_ignore_ascii_case("tflite")) {
        return tflite::read_tflite(path);
    }
    Err(Error::internal(format!(
        "{}: model readers are not implemented yet",
        path.display()
    )))
}
