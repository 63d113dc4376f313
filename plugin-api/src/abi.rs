//! The types that cross the host/plugin boundary.
//!
//! Every type here is `#[repr(C)]` and derives `StableAbi`, so abi_stable checks at load time
//! that host and plugin agree on its layout. Changing a field here is an ABI break: bump
//! [`crate::ABI_VERSION`]'s major. New information for planners travels in the JSON planner
//! options or in new prefix fields of the root module.
//!
//! Tensors and memories are referred to by their index in [`PlanRequest::tensors`] and
//! [`PlanRequest::memories`]: a plan of a million tensors stays a flat array of integers.

use abi_stable::std_types::{ROption, RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};

/// What a tensor is, which decides the arena role it must be bound to.
#[repr(u8)]
#[derive(
    StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TensorKind {
    /// A graph input: lives in a scratch arena from step 0.
    Input,
    /// A graph output: lives in a scratch arena until the last step.
    Output,
    /// Produced and consumed inside the graph: scratch.
    Intermediate,
    /// Has bytes known at compile time: a constant arena.
    Constant,
    /// State that lives the whole run (variables): a persistent arena.
    Persistent,
}

impl TensorKind {
    /// The arena role every tensor of this kind must be bound to.
    pub fn role(self) -> ArenaRole {
        match self {
            TensorKind::Input | TensorKind::Output | TensorKind::Intermediate => ArenaRole::Scratch,
            TensorKind::Constant => ArenaRole::Constant,
            TensorKind::Persistent => ArenaRole::Persistent,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TensorKind::Input => "input",
            TensorKind::Output => "output",
            TensorKind::Intermediate => "intermediate",
            TensorKind::Constant => "constant",
            TensorKind::Persistent => "persistent",
        }
    }
}

/// The role of an arena. Ordered as regions are numbered: scratch, persistent, constant.
#[repr(u8)]
#[derive(
    StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ArenaRole {
    Scratch,
    Persistent,
    Constant,
}

impl ArenaRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ArenaRole::Scratch => "scratch",
            ArenaRole::Persistent => "persistent",
            ArenaRole::Constant => "constant",
        }
    }
}

/// An inclusive range of op steps `[first, last]` during which a tensor must keep its bytes.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lifetime {
    pub first: u32,
    pub last: u32,
}

impl Lifetime {
    #[inline]
    pub fn new(first: u32, last: u32) -> Self {
        Lifetime { first, last }
    }

    /// Whether two inclusive lifetimes share at least one step.
    #[inline]
    pub fn overlaps(self, other: Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    /// Number of steps covered (inclusive), at least 1.
    #[inline]
    pub fn duration(self) -> u32 {
        self.last.saturating_sub(self.first).saturating_add(1)
    }
}

/// A view of another tensor: no slot of its own, its bytes start `offset` bytes into the
/// slot of `root` (already resolved to the end of the alias chain by the host).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasOf {
    /// Index of the root tensor (itself not an alias).
    pub root: u32,
    /// Byte offset of the view inside the root's slot.
    pub offset: u64,
}

/// One tensor to place, as the host resolved it.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorRequest {
    /// The tensor's id in the model (numeric ids are decimal strings).
    pub id: RString,
    pub kind: TensorKind,
    /// Bytes the slot must hold. Zero-size tensors get a binding but no space.
    pub size: u64,
    /// Required offset alignment inside the arena (a power of two, >= 1), already the max of
    /// the target's minimum, the element size, the tensor's hint and the arena alignment.
    pub alignment: u64,
    /// Inclusive lifetime; for an alias, the merged lifetime of its whole chain.
    pub lifetime: Lifetime,
    /// Set when the tensor is a view of another tensor.
    pub alias_of: ROption<AliasOf>,
    /// A placement the plan must use as it is (byte offset inside the tensor's arena). The
    /// arena is the one of the tensor's role in its `memory`; a scratch or persistent tensor
    /// with a fixed offset and no `memory` goes to the first memory of the scratch order
    /// ([`PlanRequest::first_scratch_memory`]), where the host checks that fixed placements
    /// do not contradict each other. The checker refuses a plan that puts it elsewhere.
    pub fixed_offset: ROption<u64>,
    /// Index of the memory this tensor must be placed in at run time. For scratch and
    /// persistent tensors `None` lets the planner choose (preferred order, spill on budget);
    /// for constants it is always set by the host (the destination memory).
    pub memory: ROption<u32>,
    /// Constants only: index of the memory the bytes are stored in. Equal to `memory` for a
    /// cold constant (read in place); different for a staged one (copied at boot).
    pub source_memory: ROption<u32>,
}

/// One memory bank of the target, as the planner may use it.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRequest {
    /// Memory name, uppercase (`SRAM`, `DTCM`, `MRAM`, ...).
    pub name: RString,
    /// Bytes all arenas placed in this memory may take together; `None` is unbounded.
    pub budget: ROption<u64>,
    /// Whether the memory can be written at run time (scratch, persistent and staged
    /// constant arenas need that).
    pub writable: bool,
    /// Preferred place in the scratch order: lower is tried first. `None` means scratch
    /// never goes there unless a tensor is pinned to it.
    pub scratch_order: ROption<u32>,
    /// Minimum base alignment of any arena in this memory (a power of two, >= 16).
    pub arena_alignment: u64,
}

/// Everything a planner is asked to place.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRequest {
    pub tensors: RVec<TensorRequest>,
    pub memories: RVec<MemoryRequest>,
    /// Number of op steps; every lifetime lies in `[0, num_steps - 1]` (0 for an empty model).
    pub num_steps: u32,
    /// Planner options as a JSON document (`{}` when the user gave none).
    pub options: RString,
}

impl PlanRequest {
    /// The [scratch order](scratch_order) of the request's memories.
    pub fn scratch_order(&self) -> Vec<u32> {
        scratch_order(&self.memories)
    }

    /// The first memory of the [scratch order](scratch_order), where a scratch or persistent
    /// tensor with a fixed offset and no `memory` is placed; `None` when no memory is in the
    /// order.
    pub fn first_scratch_memory(&self) -> Option<u32> {
        scratch_order(&self.memories).first().copied()
    }
}

/// The *scratch order* of `memories`: the indices of the writable memories with a
/// `scratch_order`, ascending (the memory index breaks ties). Scratch and persistent tensors
/// without a `memory` are placed along it.
pub fn scratch_order(memories: &[MemoryRequest]) -> Vec<u32> {
    let mut ordered: Vec<(u32, u32)> = memories
        .iter()
        .enumerate()
        .filter(|(_, memory)| memory.writable)
        .filter_map(|(index, memory)| {
            memory
                .scratch_order
                .into_option()
                .map(|order| (order, index as u32))
        })
        .collect();
    ordered.sort_unstable();
    ordered.into_iter().map(|(_, index)| index).collect()
}

/// One arena of a plan: a contiguous block of one memory with one role.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Arena {
    pub role: ArenaRole,
    /// Index of the memory the arena lives in at run time.
    pub memory: u32,
    /// Index of the memory its initial bytes come from: `memory` except for staged constant
    /// arenas.
    pub source_memory: u32,
    pub size: u64,
    /// Base alignment of the arena, a power of two.
    pub alignment: u64,
}

/// Where a tensor lives: which arena (by role, memory and source memory) and at what offset.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Binding {
    pub role: ArenaRole,
    pub memory: u32,
    pub source_memory: u32,
    pub offset: u64,
}

/// The placement of one tensor.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Allocation {
    /// Index of the tensor in the request.
    pub tensor: u32,
    pub binding: Binding,
    /// Offset of the tensor's bytes in its arena; must equal `binding.offset`.
    pub offset: u64,
    /// Bytes reserved; must equal the tensor's size.
    pub size: u64,
}

impl Allocation {
    /// The allocation of tensor `tensor` (its index in the request) bound by `binding`,
    /// reserving `size` bytes (the tensor's size).
    ///
    /// `offset` is taken from `binding.offset`: the ABI keeps the offset twice and requires the
    /// two to be equal, so building allocations here keeps that invariant by construction.
    #[inline]
    pub fn new(tensor: u32, binding: Binding, size: u64) -> Allocation {
        Allocation {
            tensor,
            binding,
            offset: binding.offset,
            size,
        }
    }
}

/// A planner's answer.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPlan {
    pub arenas: RVec<Arena>,
    pub allocations: RVec<Allocation>,
    /// One line the host shows beside the plan (e.g. "proven optimal"); may be empty.
    pub summary: RString,
}

/// Why a planner gave no plan.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanErrorKind {
    /// The tensors cannot be placed within the memory budgets (exit 5).
    DoesNotFit,
    /// The planner options or the request are not something this planner accepts.
    InvalidRequest,
    /// The host asked the planner to stop (deadline or cancellation) before it had a plan.
    Cancelled,
    /// The planner panicked; the message carries the panic payload.
    Panicked,
    /// Any other failure inside the planner.
    Failed,
}

/// A planner's error, with a message for the user.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanError {
    pub kind: PlanErrorKind,
    pub message: RString,
}

impl PlanError {
    pub fn new(kind: PlanErrorKind, message: impl Into<String>) -> Self {
        PlanError {
            kind,
            message: RString::from(message.into()),
        }
    }
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for PlanError {}
