//! A TFLite model's graph as the reader finds it: subgraphs, operators, the subgraphs control-
//! flow operators run, and tensors with their storage, type and shape. Lifetimes, which
//! tensors TFLite Micro plans, and their arena sizes are not decided here: analysis applies
//! TFLite Micro's rule to this graph (`analyze::lifetimes::tflite_micro`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};

/// The graph of a `.tflite` model. Indices are validated by the reader: tensor indices
/// against their subgraph's tensor count, invoked subgraphs against the subgraph count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TfliteGraph {
    pub subgraphs: Vec<GraphSubgraph>,
    /// Bytes of each constant buffer the tensors use, by buffer index, copied once.
    pub buffers: BTreeMap<u32, Vec<u8>>,
    /// Offsets of an `OfflineMemoryAllocation` metadata entry: per tensor of every subgraph,
    /// in subgraph order, an arena offset or -1 ("plan it online").
    pub offline_offsets: Option<Vec<i32>>,
    /// Steps and tensor uses the lifetime walk may take (proportional to the file's size).
    pub work_limit: u64,
    /// What may still be copied out of the file (names, per operator run).
    pub copy_budget: CopyBudget,
    /// The file's bytes, which a model with memplan's offline plan is written from.
    pub file: Vec<u8>,
    /// The offline plan is what `memplan check` checks, not placements to keep: analysis
    /// leaves the offsets out of the tensors (they stay in [`TfliteOrigin::embedded_offsets`]).
    pub offline_plan_under_check: bool,
}

/// What TensorFlow Lite Micro does with a tensor of the model (`facts/tflm-offline-plan.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TflmRole {
    /// Planned in the arena's head: an offline offset places it.
    Planned,
    /// Its bytes are in the model.
    Constant,
    /// `is_variable`: kept in the persistent tail unless given an offset.
    Variable,
    /// An output of VAR_HANDLE, pointed at persistent op data before planning.
    ResourceHandle,
    /// Size 0.
    Empty,
    /// Never used by the run (or in a subgraph the run never reaches).
    Unused,
}

/// What later stages need to know of a `.tflite` model beyond its tensors: where each planned
/// tensor sits in the file, and what TFLite Micro will add at run time. Analysis fills it in
/// when it applies TFLite Micro's rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TfliteOrigin {
    /// The file's bytes.
    pub file: Vec<u8>,
    /// Tensors of all subgraphs together: the length of an `OfflineMemoryAllocation` list.
    pub tensor_count: usize,
    /// Subgraphs of the model.
    pub subgraph_count: u32,
    /// By model tensor: its index among all subgraphs' tensors in subgraph order (the position
    /// of its offset in an `OfflineMemoryAllocation` list), or `None` for a kernel's scratch
    /// buffer, which TFLite Micro always places itself.
    pub tflite_index: Vec<Option<u32>>,
    /// Operators whose kernel requests scratch buffers memplan cannot size, each as
    /// "operator 3 (SignalRfft): why".
    pub unknown_scratch: Vec<String>,
    /// The offsets of the model's own `OfflineMemoryAllocation` entry, when it has one.
    pub embedded_offsets: Option<Vec<i32>>,
    /// By tensor of every subgraph, in subgraph order: what TFLite Micro does with it.
    pub roles: Vec<TflmRole>,
}

impl TfliteOrigin {
    /// The offset `offsets` (an `OfflineMemoryAllocation` list) gives model tensor `index`;
    /// `None` for -1 (planned online) and for a kernel scratch buffer (not in the list).
    pub fn offline_offset(&self, offsets: &[i32], index: usize) -> Option<u64> {
        let position = self.tflite_index.get(index).copied().flatten()?;
        u64::try_from(*offsets.get(position as usize)?).ok()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphSubgraph {
    pub tensors: Vec<GraphTensor>,
    /// The builtin or custom name of each operator, in subgraph order.
    pub operator_names: Vec<String>,
    pub flow: SubgraphFlow,
    /// By operator: what the order stage (`analyze::order`) needs to know beyond the flow.
    pub operator_facts: Vec<OperatorFacts>,
}

/// What decides where an operator may move when memplan chooses the operator order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorFacts {
    /// A custom operator, or a builtin code memplan has no name for: memplan cannot know what
    /// it does.
    pub unknown: bool,
    /// For VAR_HANDLE: the resource variable it names, `container/shared_name` (TFLite Micro
    /// gives every VAR_HANDLE with the same pair the same variable).
    pub resource: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphTensor {
    pub name: String,
    /// TFLite's type name (`INT8`, ...) and code.
    pub type_name: &'static str,
    pub type_code: i8,
    /// Bytes per element; `None` for types without a fixed size (strings, resources).
    pub element_size: Option<u64>,
    /// `None` for a scalar.
    pub shape: Option<Vec<i32>>,
    pub storage: GraphStorage,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphStorage {
    /// Bytes known at compile time, in [`TfliteGraph::buffers`] under this index.
    Constant { buffer: u32 },
    /// `is_variable`: state kept by the runtime across invocations.
    Variable,
    /// Placed in the arena by the runtime.
    Arena,
}

/// What the walk needs of one subgraph: tensor indices are already validated against the
/// subgraph's tensor count, and invoked subgraph indices against the model's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubgraphFlow {
    pub tensor_count: usize,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    pub operators: Vec<OperatorFlow>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorFlow {
    /// `None` for an omitted optional input (index -1 in the model).
    pub inputs: Vec<Option<usize>>,
    pub outputs: Vec<usize>,
    /// Subgraphs the operator runs, in the order TFLite Micro walks them (CALL_ONCE: init;
    /// IF: then, else; WHILE: cond, body).
    pub invokes: Vec<usize>,
}

/// How many bytes a model may have copied out of its file, counting each read of an entry
/// (every tensor, operator, operator input and output, name and constant buffer), so that a
/// crafted file whose tables are shared on purpose cannot make memory grow out of proportion
/// to its size. Converters write each entry once, so real files stay far below the limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyBudget {
    taken: u64,
    limit: u64,
    /// The limit as a multiple of the file's size, for the message.
    per_file_byte: u64,
}

impl CopyBudget {
    /// `per_file_byte` times `file_size`, plus `floor` so that tiny hand-made models pass.
    pub fn new(file_size: usize, per_file_byte: u64, floor: u64) -> CopyBudget {
        CopyBudget {
            taken: 0,
            limit: per_file_byte
                .saturating_mul(file_size as u64)
                .saturating_add(floor),
            per_file_byte,
        }
    }

    /// Counts `bytes` more copied (before they are copied); an input error naming `path`
    /// once past the limit.
    pub fn take(&mut self, bytes: usize, path: &Path) -> Result<()> {
        self.taken = self.taken.saturating_add(bytes as u64);
        if self.taken > self.limit {
            return Err(Error::input(format!(
                "{}: unsupported: the file's tables are shared so that, read entry by entry, \
                 it describes more than {} bytes of tensors, operators, names and constant \
                 data ({} times its size); converters write each once, so the file was crafted \
                 or damaged",
                path.display(),
                self.limit,
                self.per_file_byte
            )));
        }
        Ok(())
    }
}
