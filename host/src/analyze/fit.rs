//! What must go to each memory whatever the planner does, and the early "does not fit".
//!
//! A tensor is *pinned* to a memory when the request gives it one: every constant (its
//! destination memory), and scratch and persistent tensors a `memory` rule places. A valid
//! plan binds it there, in the memory's one arena of its role (checker contracts 1 and 2);
//! aliases take no space of their own and tensors the planner may place freely may go
//! anywhere, so neither counts. The arenas of a memory must fit its budget (contract 6), so
//! when the least size of the arenas the pinned tensors force on a memory exceeds its budget,
//! no plan can pass the checker and no planner can succeed. The analysis records the error
//! (exit 5, naming the memory, the bytes and what to change), and `plan` and `bench` stop on
//! it before any planner runs; `check` goes on, since the budget violations of the plan it
//! is given are what its user asked for.
//!
//! The least size of one arena (its *floor*) must hold for every plan the checker accepts
//! (plugins need not use the kit, and the checker does not make arena sizes multiples of
//! their alignment): an early stop that rejects a plan some planner could have given would be
//! a bug. Let `a` be the smallest alignment among the arena's tensors. Every offset is a
//! multiple of `a`, so at any step the live tensors, stacked by offset, each take at least
//! their size rounded up to `a` before the next one starts, except the topmost, which may end
//! at its last byte. The floor is the peak over steps of those rounded sizes, less the largest
//! rounding any one tensor adds, and never below the peak of the bare sizes. It is not the
//! per-arena lower bound of `memplan_plugin_api::bounds` (each size rounded to its own
//! alignment): with mixed alignments that one can exceed a valid arena (a 16-byte tensor
//! aligned to 64 at offset 0 and an 8-byte one aligned to 16 at offset 16 fit in 24 bytes,
//! where it counts 80).
//!
//! Cost: one O(n log n) sweep per role and memory; the message's list of the largest pinned
//! tensors is only built on the failure path.

use abi_stable::std_types::RSome;
use memplan_plugin_api::bounds::{align_up, arena_lower_bound};
use memplan_plugin_api::{ArenaRole, Lifetime, MemoryRequest, TensorRequest};

use crate::error::{Error, Result};
use crate::input::{Constraints, Target};

/// The roles in `ArenaRole` order, so that `role as usize` indexes them.
const ROLES: [ArenaRole; 3] = [
    ArenaRole::Scratch,
    ArenaRole::Persistent,
    ArenaRole::Constant,
];

/// How many of the largest pinned tensors a does-not-fit message names.
const LARGEST_SHOWN: usize = 3;

/// By memory index, by role (`ArenaRole as usize`): the floor of the arena the tensors
/// pinned to that memory force (see the module docs). Zero where nothing is pinned.
pub(super) fn pinned_floors(tensors: &[TensorRequest], memory_count: usize) -> Vec<[u64; 3]> {
    let mut arenas: Vec<Vec<(u64, u64, Lifetime)>> = vec![Vec::new(); memory_count * ROLES.len()];
    for (memory, tensor) in pinned(tensors) {
        arenas[memory as usize * ROLES.len() + tensor.kind.role() as usize].push((
            tensor.size,
            tensor.alignment,
            tensor.lifetime,
        ));
    }
    arenas
        .chunks(ROLES.len())
        .map(|per_role| {
            let mut floors = [0; 3];
            for (floor, buffers) in floors.iter_mut().zip(per_role) {
                *floor = arena_lower_bound(buffers.iter().copied());
            }
            floors
        })
        .collect()
}

/// The lower bound of a memory: the sum of its roles' floors.
pub(super) fn total(floors: &[u64; 3]) -> u64 {
    floors.iter().copied().fold(0u64, u64::saturating_add)
}

/// Tensors that take space in the memory the request pins them to, with that memory.
fn pinned(tensors: &[TensorRequest]) -> impl Iterator<Item = (u32, &TensorRequest)> {
    tensors.iter().filter_map(|t| match t.memory {
        RSome(memory) if t.alias_of.is_none() && t.size > 0 => Some((memory, t)),
        _ => None,
    })
}

/// A budget for memory `index` that the shipped planners (all built on the planner kit) can
/// meet with its pinned tensors: constants and persistent tensors bump-allocated in tensor
/// order, one arena per (role, source memory) as the kit makes them, and the scratch floor;
/// each arena rounded up to its alignment (the memory's arena alignment or a larger tensor
/// alignment). At least the floors' total, which no plan can beat.
fn kit_budget(
    tensors: &[TensorRequest],
    index: usize,
    arena_alignment: u64,
    floors: &[u64; 3],
) -> u64 {
    // (role, source memory) -> (bump end, largest alignment)
    let mut arenas: std::collections::BTreeMap<(usize, u32), (u64, u64)> =
        std::collections::BTreeMap::new();
    for (_, tensor) in pinned(tensors).filter(|&(memory, _)| memory as usize == index) {
        let role = tensor.kind.role();
        let source = match role {
            ArenaRole::Constant => tensor.source_memory.into_option().unwrap_or(index as u32),
            _ => index as u32,
        };
        let (end, alignment) = arenas
            .entry((role as usize, source))
            .or_insert((0, arena_alignment.max(1)));
        if role == ArenaRole::Scratch {
            *alignment = (*alignment).max(tensor.alignment);
            continue;
        }
        *end = align_up(*end, tensor.alignment).saturating_add(tensor.size);
        *alignment = (*alignment).max(tensor.alignment);
    }
    let budget = arenas
        .iter()
        .map(|(&(role, _), &(end, alignment))| {
            let height = if role == ArenaRole::Scratch as usize {
                floors[role]
            } else {
                end
            };
            align_up(height, alignment)
        })
        .fold(0u64, u64::saturating_add);
    budget.max(total(floors))
}

/// Fails with exit 5 when the floors of some memory add up to more than its budget, one
/// paragraph per such memory.
pub(super) fn check_pinned_fit(
    file: &str,
    target: &Target,
    constraints: &Constraints,
    memories: &[MemoryRequest],
    tensors: &[TensorRequest],
    floors: &[[u64; 3]],
) -> Result<()> {
    let paragraphs: Vec<String> = memories
        .iter()
        .zip(floors)
        .enumerate()
        .filter_map(|(index, (memory, floors))| {
            let budget = memory.budget.into_option()?;
            (total(floors) > budget)
                .then(|| does_not_fit(file, target, constraints, tensors, index, memory, floors))
        })
        .collect();
    if paragraphs.is_empty() {
        Ok(())
    } else {
        Err(Error::does_not_fit(paragraphs.join("\n")))
    }
}

/// The message for memory `index` (`request`), whose pinned tensors need more than its budget.
fn does_not_fit(
    file: &str,
    target: &Target,
    constraints: &Constraints,
    tensors: &[TensorRequest],
    index: usize,
    request: &MemoryRequest,
    floors: &[u64; 3],
) -> String {
    let need = total(floors);
    let budget = request.budget.into_option().unwrap_or(u64::MAX);
    let suggested = kit_budget(tensors, index, request.arena_alignment, floors);
    let memory = &target.memories[index];
    let name = &memory.name;
    // Later constraints win over earlier ones, so the budget is the last one that sets it.
    let budget_origin = constraints
        .entries
        .iter()
        .rev()
        .find(|c| c.max_size.is_some() && target.memory_index(&c.memory) == Some(index))
        .map_or_else(
            || format!("its capacity on target {}", target.name),
            |c| c.origin.clone(),
        );
    let roles: Vec<String> = ROLES
        .iter()
        .zip(floors)
        .filter(|(_, &floor)| floor > 0)
        .map(|(role, floor)| {
            let what = match role {
                ArenaRole::Constant => "constants (it is their destination memory)",
                ArenaRole::Persistent => "persistent tensors (placed there by `memory` rules)",
                ArenaRole::Scratch => "scratch tensors (placed there by `memory` rules)",
            };
            format!("{what} {floor} bytes")
        })
        .collect();
    let mut largest: Vec<&TensorRequest> = pinned(tensors)
        .filter(|&(memory, _)| memory as usize == index)
        .map(|(_, t)| t)
        .collect();
    largest.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.id.cmp(&b.id)));
    let largest: Vec<String> = largest
        .iter()
        .take(LARGEST_SHOWN)
        .map(|t| format!("'{}' ({}, {} bytes)", t.id, t.kind.as_str(), t.size))
        .collect();
    let what_to_do = match memory.capacity {
        Some(capacity) if need > capacity => format!(
            "{name} has only {capacity} bytes on target {}: move tensors out of it with the \
             rules (`memory`, `constant_destination_memory`), or use a target with more memory",
            target.name
        ),
        _ if suggested > need => format!(
            "Raise the budget: no plan fits in less than {need} bytes, and the shipped planners \
             need {suggested} (arenas rounded to their alignment; --memory {name}={suggested}), \
             or move tensors out of {name} with the rules (`memory`, \
             `constant_destination_memory`)"
        ),
        _ => format!(
            "Raise the budget to at least {need} bytes (--memory {name}={need}) or move tensors \
             out of {name} with the rules (`memory`, `constant_destination_memory`)"
        ),
    };
    format!(
        "{file}: the tensors pinned to memory {name} need at least {need} bytes but the budget \
         is {budget} bytes ({budget_origin}), so no plan can fit and no planner was run; pinned \
         there: {}; the largest: {}. {what_to_do}",
        roles.join(", "),
        largest.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::RNone;

    fn lt(first: u32, last: u32) -> Lifetime {
        Lifetime::new(first, last)
    }

    #[test]
    fn aliases_free_and_empty_tensors_pin_nothing() {
        use memplan_plugin_api::{AliasOf, TensorKind};
        let tensor = |id: &str, size: u64, memory| TensorRequest {
            id: id.into(),
            kind: TensorKind::Intermediate,
            size,
            alignment: 1,
            lifetime: lt(0, 0),
            alias_of: RNone,
            fixed_offset: RNone,
            memory,
            source_memory: RNone,
        };
        let mut view = tensor("view", 8, RSome(0));
        view.alias_of = RSome(AliasOf { root: 0, offset: 0 });
        let tensors = [
            tensor("root", 8, RSome(0)),
            view,
            tensor("free", 100, RNone),
            tensor("empty", 0, RSome(1)),
        ];
        assert_eq!(pinned_floors(&tensors, 2), vec![[8, 0, 0], [0, 0, 0]]);
    }
}
