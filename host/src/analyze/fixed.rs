//! Fixed placements the model gives (`fixed_offset` in a model JSON, a MiniMalloc `offset`
//! column, a `.tflite` offline plan) must not contradict each other: two tensors fixed in the
//! same arena, live at the same step, whose bytes overlap, cannot both be honoured by any
//! plan. That is the model's fault, so analysis reports it (exit 2, naming both tensors)
//! instead of letting a planner fail or the checker blame the planner.
//!
//! A fixed tensor's arena is its role's in the memory it is pinned to; an unpinned scratch or
//! persistent tensor with a fixed offset goes to the first memory of the scratch order, as the
//! planner kit places it; constants are grouped by source memory too. One O(n log n) sweep per
//! arena ([`super::sweep`]).

use std::collections::BTreeMap;

use memplan_plugin_api::{ArenaRole, Lifetime, MemoryRequest, TensorRequest};

use super::sweep::{self, Span};
use crate::error::{Error, Result};

/// Contradictions a message names before "and N more".
const SHOWN: usize = 3;

#[derive(Clone, Copy)]
struct FixedSpan {
    tensor: usize,
    offset: u64,
    end: u64,
    lifetime: Lifetime,
}

impl Span for FixedSpan {
    fn offset(&self) -> u64 {
        self.offset
    }
    fn end(&self) -> u64 {
        self.end
    }
    fn lifetime(&self) -> Lifetime {
        self.lifetime
    }
}

/// Fails with an input error naming every pair of fixed tensors that cannot both keep their
/// place (up to [`SHOWN`], then a count).
pub(super) fn check_fixed_placements(
    file: &str,
    tensors: &[TensorRequest],
    memories: &[MemoryRequest],
) -> Result<()> {
    // The first memory of the scratch order, where the kit puts unpinned fixed tensors.
    let first_scratch = first_scratch_memory(memories);
    let mut arenas: BTreeMap<(usize, u32, u32), Vec<FixedSpan>> = BTreeMap::new();
    for (index, tensor) in tensors.iter().enumerate() {
        let Some(offset) = tensor.fixed_offset.into_option() else {
            continue;
        };
        if tensor.alias_of.is_some() || tensor.size == 0 {
            continue;
        }
        let role = tensor.kind.role();
        let Some(memory) = tensor.memory.into_option().or(first_scratch) else {
            continue;
        };
        let source = match role {
            ArenaRole::Constant => tensor.source_memory.into_option().unwrap_or(memory),
            _ => memory,
        };
        arenas
            .entry((role as usize, memory, source))
            .or_default()
            .push(FixedSpan {
                tensor: index,
                offset,
                end: offset.saturating_add(tensor.size),
                lifetime: tensor.lifetime,
            });
    }
    let mut contradictions = Vec::new();
    for (&(role, memory, _), spans) in &arenas {
        for (slot, other) in sweep::collisions(spans) {
            let (a, b) = (&spans[other], &spans[slot]);
            let role = [
                ArenaRole::Scratch,
                ArenaRole::Persistent,
                ArenaRole::Constant,
            ][role];
            contradictions.push(format!(
                "'{}' (bytes {}..{}, steps {}..={}) and '{}' (bytes {}..{}, steps {}..={}) are \
                 both fixed in the {} arena of {} and share bytes while both are live",
                tensors[a.tensor].id,
                a.offset,
                a.end,
                a.lifetime.first,
                a.lifetime.last,
                tensors[b.tensor].id,
                b.offset,
                b.end,
                b.lifetime.first,
                b.lifetime.last,
                role.as_str(),
                memories[memory as usize].name
            ));
        }
    }
    if contradictions.is_empty() {
        return Ok(());
    }
    let more = contradictions.len().saturating_sub(SHOWN);
    contradictions.truncate(SHOWN);
    let more = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    Err(Error::input(format!(
        "{file}: fixed placements contradict each other, so no plan can keep them: {}{more}. \
         Move one of each pair (fixed_offset in a model JSON, the offset column of a CSV, the \
         OfflineMemoryAllocation entry of a .tflite) or let the planner place it",
        contradictions.join("; ")
    )))
}

/// The writable memory first in the target's scratch order: where scratch tensors go unless a
/// rule pins them (the kit's order), `None` when no memory takes scratch tensors.
pub(crate) fn first_scratch_memory(memories: &[MemoryRequest]) -> Option<u32> {
    memories
        .iter()
        .enumerate()
        .filter(|(_, memory)| memory.writable)
        .filter_map(|(index, memory)| {
            memory
                .scratch_order
                .into_option()
                .map(|order| (order, index))
        })
        .min()
        .map(|(_, index)| index as u32)
}
