//! `Model`: what the read stage produces from any input format (model JSON, `.tflite`,
//! MiniMalloc CSV). Host types only; the analyze stage turns a `Model` into a plan request.
//!
//! Tensors refer to each other by index into [`Model::tensors`]. Every reader validates
//! indices, so later stages may index without checks.

use crate::input::graph::{TfliteGraph, TfliteOrigin};
use std::path::PathBuf;

pub use memplan_plugin_api::{Lifetime, TensorKind};

/// The largest tensor any reader accepts: 2^48 bytes (256 TiB). No microcontroller memory is
/// anywhere near; the cap keeps offset + size sums of planners far from 64-bit overflow.
pub const MAX_TENSOR_BYTES: u64 = 1 << 48;

/// The largest constant arena memplan writes: 256 MiB. Constant arenas are written out in full
/// (a C array and, with external arenas, a sidecar file), so a constant placed far into its
/// arena would make memplan write gigabytes of padding; no microcontroller has that much flash.
pub const MAX_CONSTANT_ARENA_BYTES: u64 = 1 << 28;

/// The largest alignment any input may ask for: 16 MiB. Real ones are 1 to 64 bytes, MPU
/// regions a few hundred KiB; a larger one only makes arenas absurd (an alignment of 2^62
/// overflows offset arithmetic) or the constant arenas memplan writes enormous.
pub const MAX_ALIGNMENT: u64 = 1 << 24;

/// Why `alignment` is not one memplan accepts (a power of two up to [`MAX_ALIGNMENT`]), if it
/// is not; the caller says whose alignment it is.
pub fn alignment_problem(alignment: u64) -> Option<String> {
    if !alignment.is_power_of_two() {
        Some(format!("alignment {alignment} is not a power of two"))
    } else if alignment > MAX_ALIGNMENT {
        Some(format!(
            "alignment {alignment} is larger than memplan accepts ({MAX_ALIGNMENT}, 16 MiB)"
        ))
    } else {
        None
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// The file the model was read from, for messages.
    pub path: PathBuf,
    pub tensors: Vec<Tensor>,
    /// Operators in execution order; step `k + 1` runs operator `k` (inputs live at step 0).
    pub operators: Vec<Operator>,
    /// Graph inputs (tensor indices).
    pub inputs: Vec<u32>,
    /// Graph outputs (tensor indices).
    pub outputs: Vec<u32>,
    /// Number of op steps when lifetimes are explicit (pure buffer-packing problems, CSV,
    /// `.tflite` with TFLite Micro's lifetimes); `None` derives steps from the operators.
    pub num_steps: Option<u32>,
    /// How lifetimes follow from the model; chosen by the format, applied by analysis.
    pub rule: LifetimeRule,
    /// For a `.tflite` model once analysis applied TFLite Micro's rule: where its tensors sit
    /// in the file and what TFLite Micro adds at run time.
    pub tflite: Option<Box<TfliteOrigin>>,
}

/// The lifetime rule of a model (`analyze::lifetimes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LifetimeRule {
    /// Operators run one per step in list order; explicit lifetimes replace derived ones
    /// (memplan JSON, MiniMalloc CSV).
    #[default]
    Sequential,
    /// TensorFlow Lite Micro's: the tensors, their lifetimes and arena sizes follow from the
    /// graph as TFLite Micro walks it. `tensors` and `operators` are empty until analysis
    /// applies the rule.
    TfliteMicro(Box<TfliteGraph>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// Unique id (numeric ids as decimal strings).
    pub id: String,
    /// Human-readable name; empty when the tensor has none of its own (its id names it), which
    /// spares a copy of every id of a large trace.
    pub name: String,
    pub kind: TensorKind,
    /// Bytes (already the product of shape and element size when the format gave a shape).
    pub size: u64,
    /// Bytes per element (1 when unknown); slot alignment is at least this.
    pub element_size: u64,
    /// Alignment hint from the model, a power of two.
    pub alignment: Option<u64>,
    /// A view of another tensor.
    pub alias_of: Option<ModelAlias>,
    /// A placement that must be kept (byte offset inside the tensor's arena).
    pub fixed_offset: Option<u64>,
    /// An explicit inclusive lifetime that replaces the one derived from operators.
    pub lifetime: Option<Lifetime>,
    /// Bytes of a constant tensor (length == size).
    pub data: Option<Vec<u8>>,
}

impl Tensor {
    /// A tensor with the given id, kind and size and nothing else set (no name of its own).
    pub fn new(id: impl Into<String>, kind: TensorKind, size: u64) -> Self {
        Tensor {
            name: String::new(),
            id: id.into(),
            kind,
            size,
            element_size: 1,
            alignment: None,
            alias_of: None,
            fixed_offset: None,
            lifetime: None,
            data: None,
        }
    }
}

/// `alias_of` as written in the model: the tensor it views directly (which may itself be an
/// alias) and the byte offset of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelAlias {
    pub target: u32,
    pub offset: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operator {
    /// Operator type as named by the model (`CONV_2D`, `add`, ...).
    pub op_type: String,
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
}
