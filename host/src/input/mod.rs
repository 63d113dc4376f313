//! Read stage: model files, targets, memory constraints and attribute rules.
//!
//! Entry points: [`read_model`], which picks the reader by file extension, and
//! [`TargetSetup::load`] for what the target flags name. Every reader turns bad input into an
//! [`Error`] of kind `Input` (exit 2) naming the file and the place in it.

pub mod base64;
pub mod constraints;
pub mod csv;
pub mod external_io;
pub mod graph;
pub mod json;
pub mod model;
pub mod rules;
pub(crate) mod source;
pub mod target;
pub mod tflite;

use std::path::Path;

use crate::error::{Error, Result};
pub use constraints::{Constraints, MemoryConstraint, MemoryLimit};
pub use external_io::ExternalIo;
pub use model::{LifetimeRule, Model, ModelAlias, Operator, Tensor};
pub use rules::{Attributes, Rules};
pub use target::{Target, TargetMemory};

/// Whether `path` names a `.tflite` model (the extension decides, as for [`read_model`]).
pub fn is_tflite_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|extension| extension.eq_ignore_ascii_case("tflite"))
}

/// Reads a model: `.json` (memplan model JSON), `.tflite`, `.csv` (MiniMalloc).
pub fn read_model(path: &Path) -> Result<Model> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("json") => json::read_model_json(path),
        Some("csv") => csv::read_minimalloc_csv(path),
        Some("tflite") => tflite::read_tflite(path),
        _ => Err(Error::input(format!(
            "{}: unknown model format; give a memplan model `.json`, a `.tflite` or a MiniMalloc `.csv`",
            path.display()
        ))),
    }
}

/// What `--target`, `--memory` and `--rules` name, read and parsed (checked against each other
/// by the analysis).
#[derive(Clone, Debug)]
pub struct TargetSetup {
    pub target: Target,
    pub constraints: Constraints,
    pub rules: Rules,
}

impl TargetSetup {
    pub fn load(
        target: Option<&str>,
        constraints: Constraints,
        rules: Option<&Path>,
        external_io: ExternalIo,
    ) -> Result<Self> {
        let mut rules = match rules {
            Some(path) => Rules::read(path)?,
            None => Rules::default(),
        };
        rules.external_io = external_io;
        Ok(TargetSetup {
            target: Target::load(target)?,
            constraints,
            rules,
        })
    }
}
