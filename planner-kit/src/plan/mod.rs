//! The passes every planner shares, around one packing algorithm (a [`Packer`]).
//!
//! # Algorithm
//!
//! [`plan_with_packer`] validates the request, then places tensors role by role. Each
//! *arena* is one `(role, memory, source memory)` triple; its buffers are packed by a packer,
//! its alignment is the largest of the memory's arena alignment and its tensors' alignments,
//! and its size is the packing height rounded up to that alignment. A memory's *budget* is
//! shared by every arena placed in it; arenas are charged against it in the order below.
//!
//! 1. **Constants** go to their destination memory (`memory`, set by the host) with their
//!    source memory (`source_memory`, defaulting to the destination: cold; different:
//!    staged). One arena per `(destination, source)`, bump-allocated in tensor order
//!    ([`BumpPacker`]): constants live the whole run, so no packing can beat the sum of the
//!    aligned sizes. Only the destination's budget is charged.
//! 2. **Persistent** tensors, bump-allocated like constants, and then **scratch** tensors
//!    (inputs, outputs, intermediates), packed by the planner's packer, are placed the same
//!    way, *with spill*:
//!    - a tensor pinned to a memory (`memory` set) stays there; an unpinned tensor with a
//!      fixed offset stays in the first memory of the scratch order; the other unpinned
//!      tensors are *movable*;
//!    - the *scratch order* is the writable memories with a `scratch_order`, ascending
//!      (memory index breaks ties). Memories are visited in that order; each packs its pinned
//!      tensors plus the movable tensors carried to it (in tensor order, so packers break ties
//!      by tensor index);
//!    - when the arena does not fit what is left of the memory's budget (rounded down to the
//!      arena alignment: the *limit*), movable tensors are carried to the next memory in the
//!      order and the rest is packed again, until it fits. Which ones, two ways, each run
//!      along the whole order: *cut*, every movable tensor the packer put above the limit;
//!      *planned*, in the first round at each memory, those above the limit in the best of
//!      the kit's greedy packings with a barrier at the limit (no tensor spans it, so each is
//!      wholly below or above; every order and fit, compared by the height they need above
//!      it, then by the bytes above), and in later rounds the cut. When the cut spills, both
//!      runs are made and the one with fewer bytes in all its arenas is kept (the cut on a
//!      tie). Each round carries at least one tensor, so this ends; usually in one or two
//!      rounds;
//!    - nothing to carry, or no next memory: `DoesNotFit`, naming the memory, the bytes the
//!      arena needs and the budget;
//!    - when tensors were carried, the plan's summary says the split between memories is
//!      heuristic: a packer's "proven optimal" holds for each arena's own tensors, not for the
//!      split (a better split may need fewer bytes in all);
//!    - memories outside the scratch order that have pinned tensors are packed last, without
//!      spill.
//! 3. **Fixed offsets** are handed to the packers, which keep them.
//! 4. **Empty tensors** (size 0) are bound without space: offset 0 (or their fixed offset) in
//!    the arena their role and memory would give them (the first scratch memory when
//!    unpinned); that arena may not exist when nothing else is in it.
//! 5. **Aliases** take their root's binding, offset by the view offset.
//!
//! Arenas are listed sorted by `(role, memory, source memory)`; the plan's summary joins the
//! packers' notes. Everything is deterministic: same request, same plan.
//!
//! Cost: the packers' cost plus O(n log n) bookkeeping per spill round (a spill runs the
//! packers twice, and the six barrier packings once per memory), and one pass that
//! writes the allocations in tensor order (a merge of the arenas' tensor lists: O(n) while
//! tensors come in runs from one arena, as they do when one arena holds most of them; at
//! worst O(n × arenas)).

mod inventory;
mod passes;
#[cfg(test)]
mod tests;

use inventory::*;
use passes::*;

use crate::bump::BumpPacker;
use crate::Packer;
use memplan_plugin_api::HostContext;
use memplan_plugin_api::{ArenaRole, MemoryPlan, PlanError, PlanErrorKind, PlanRequest};

/// Plans a whole request with `packer` doing the scratch packing (see the module docs).
pub fn plan_with_packer(
    request: &PlanRequest,
    context: &HostContext,
    packer: &dyn Packer,
) -> Result<MemoryPlan, PlanError> {
    let inventory = validate(request)?;
    let mut state = KitState::new(request, context, inventory);
    state.place_constants()?;
    state.place_with_spill(ArenaRole::Persistent, &BumpPacker)?;
    state.place_with_spill(ArenaRole::Scratch, packer)?;
    state.finish()
}

pub(super) fn invalid(message: String) -> PlanError {
    PlanError::new(PlanErrorKind::InvalidRequest, message)
}
