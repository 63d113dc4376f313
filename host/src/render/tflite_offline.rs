//! The offline plan memplan writes into a `.tflite` model for TensorFlow Lite Micro
//! (`OfflineMemoryAllocation` metadata, `facts/tflm-offline-plan.md`), and the arena head TFLM
//! will reach with it.
//!
//! Offsets: a tensor TFLM plans (not constant, not variable, not a VAR_HANDLE output, not
//! empty) gets its offset in memplan's scratch arena; every other tensor -1. Kernel scratch
//! buffers cannot be given offsets: TFLM places them itself, largest first, in the lowest gap
//! the offline tensors leave (simulated with [`crate::analyze::tflm_greedy`]).
//!
//! The written plan never makes TFLM's head larger than TFLM's own plan gives: when memplan's
//! offsets would (kernel scratch buffers land above a tight plan), or when the result cannot be
//! told (a kernel whose requests memplan cannot size, too many buffers to simulate), or cannot
//! be expressed (tensors in more than one memory, an offset past 2^31), every offset is -1 —
//! TFLM plans the model as it would alone — and [`TfliteOfflinePlan::kept_tflm_plan`] says why.

use memplan_plugin_api::ArenaRole;

use crate::analyze::tflm_greedy::{tflm_buffers, tflm_head};
use crate::analyze::Analysis;
use crate::check::CheckedPlan;
use crate::error::{Error, Result};
use crate::input::graph::TfliteOrigin;

/// TFLite Micro's word for "plan this tensor online".
pub const ONLINE: i32 = -1;

/// The offline plan for a `.tflite` model and what TFLM makes of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfliteOfflinePlan {
    /// The input model's path, for messages.
    pub source: std::path::PathBuf,
    /// The input model's bytes.
    pub file: Vec<u8>,
    /// Subgraphs of the model (the entry's second word).
    pub subgraph_count: u32,
    /// The offsets written, one per tensor of every subgraph in subgraph order.
    pub offsets: Vec<i32>,
    /// TFLM's head for the model with no offline plan; `None` when it cannot be told.
    pub head_alone: Option<u64>,
    /// TFLM's head with memplan's offsets (before any fallback); `None` when it cannot be
    /// told or memplan's plan cannot be written.
    pub head_with_plan: Option<u64>,
    /// TFLM's head for the input model as given, when it already carries an offline plan.
    pub head_embedded: Option<u64>,
    /// Why the written offsets are all -1 (TFLM's own plan) instead of memplan's.
    pub kept_tflm_plan: Option<String>,
    /// Operators whose kernel scratch buffers memplan cannot size.
    pub unknown_scratch: Vec<String>,
}

impl TfliteOfflinePlan {
    /// TFLM's head with the offsets written.
    pub fn head_written(&self) -> Option<u64> {
        if self.kept_tflm_plan.is_some() {
            self.head_alone
        } else {
            self.head_with_plan
        }
    }
}

/// The offline plan for a model read from a `.tflite` file; `None` for other models.
pub fn offline_plan(
    analysis: &Analysis,
    checked: &CheckedPlan,
) -> Result<Option<TfliteOfflinePlan>> {
    let Some(origin) = analysis.tflite.as_deref() else {
        return Ok(None);
    };
    if analysis.external.any() {
        // TFLM cannot keep a tensor outside its arena: no offline plan (`--emit-tflite` is
        // refused, `render::check_emit_tflite`), the C sources only.
        return Ok(None);
    }
    let request = &analysis.request;
    let mut allocation_of = vec![None; request.tensors.len()];
    for allocation in checked.plan.allocations.iter() {
        if let Some(slot) = allocation_of.get_mut(allocation.tensor as usize) {
            *slot = Some(allocation);
        }
    }
    // memplan's offset of every tensor TFLM plans (by request index), and the memories of
    // their arenas.
    let mut planned = Vec::new();
    let mut memories = Vec::new();
    for (index, tensor) in request.tensors.iter().enumerate() {
        if tensor.kind.role() != ArenaRole::Scratch || tensor.size == 0 {
            continue;
        }
        let allocation = allocation_of[index]
            .ok_or_else(|| Error::internal(format!("tensor `{}` has no allocation", tensor.id)))?;
        if allocation.binding.role == ArenaRole::Scratch
            && !memories.contains(&allocation.binding.memory)
        {
            memories.push(allocation.binding.memory);
        }
        planned.push((index, allocation.offset));
    }
    let head_alone = tflm_head(&tflm_buffers(request, |_| None));
    let head_embedded = origin.embedded_offsets.as_ref().and_then(|embedded| {
        tflm_head(&tflm_buffers(request, |index| {
            origin.offline_offset(embedded, index)
        }))
    });

    let memplan_offsets = memplan_offsets(origin, &planned);
    let (head_with_plan, problem) = match (&memplan_offsets, memories.len()) {
        (_, 2..) => (
            None,
            Some(format!(
                "memplan's plan puts the tensors in {} memories, and TFLite Micro has one arena",
                memories.len()
            )),
        ),
        (Err(problem), _) => (None, Some(problem.clone())),
        (Ok(offsets), _) => (
            tflm_head(&tflm_buffers(request, |index| {
                origin.offline_offset(offsets, index)
            })),
            None,
        ),
    };
    let kept_tflm_plan = problem.or_else(|| {
        if let Some(unknown) = origin.unknown_scratch.first() {
            return Some(format!(
                "{unknown}, so what TFLite Micro adds around memplan's offsets cannot be told{}",
                more(origin.unknown_scratch.len())
            ));
        }
        match (head_alone, head_with_plan) {
            (Some(alone), Some(with)) if with > alone => Some(format!(
                "with memplan's offsets TFLite Micro would place the kernels' scratch buffers \
                 above them, for a head of {with} bytes, more than the {alone} of its own plan"
            )),
            (Some(_), Some(_)) => None,
            _ => Some(format!(
                "the model has more buffers than memplan simulates TFLite Micro's planner for ({})",
                crate::analyze::tflm_greedy::MAX_SIMULATED_BUFFERS
            )),
        }
    });
    let offsets = match (&kept_tflm_plan, memplan_offsets) {
        (None, Ok(offsets)) => offsets,
        _ => vec![ONLINE; origin.tensor_count],
    };
    Ok(Some(TfliteOfflinePlan {
        source: analysis.source.clone(),
        file: origin.file.clone(),
        subgraph_count: origin.subgraph_count,
        offsets,
        head_alone,
        head_with_plan,
        head_embedded,
        kept_tflm_plan,
        unknown_scratch: origin.unknown_scratch.clone(),
    }))
}

fn more(count: usize) -> String {
    match count {
        0 | 1 => String::new(),
        count => format!(" ({} more such operators)", count - 1),
    }
}

/// memplan's offset for every tensor TFLM plans, -1 for the others.
fn memplan_offsets(
    origin: &TfliteOrigin,
    planned: &[(usize, u64)],
) -> std::result::Result<Vec<i32>, String> {
    let mut offsets = vec![ONLINE; origin.tensor_count];
    for &(index, offset) in planned {
        let Some(position) = origin.tflite_index[index] else {
            continue;
        };
        offsets[position as usize] = i32::try_from(offset).map_err(|_| {
            format!(
                "memplan's plan puts a tensor at offset {offset}, past what the model's 32-bit \
                 offsets can say"
            )
        })?;
    }
    Ok(offsets)
}
