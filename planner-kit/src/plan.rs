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
//!    - when the arena does not fit what is left of the memory's budget, every movable tensor
//!      that ends above the budget (rounded down to the arena alignment) is carried to the
//!      next memory in the order and the rest is packed again, until it fits. Each round
//!      carries at least one tensor, so this ends; usually in one or two rounds, as the
//!      tensors left below the limit mostly keep a valid place when the ones above leave;
//!    - nothing to carry, or no next memory: `DoesNotFit`, naming the memory, the bytes the
//!      arena needs and the budget;
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
//! Cost: the packers' cost plus O(n log n) bookkeeping per spill round, and one pass that
//! writes the allocations in tensor order (a merge of the arenas' tensor lists: O(n) while
//! tensors come in runs from one arena, as they do when one arena holds most of them; at
//! worst O(n × arenas)).

use std::collections::BTreeMap;

use memplan_plugin_api::abi_stable::std_types::{RString, RVec};

use crate::bump::BumpPacker;
use crate::{Buffer, Packer};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::HostContext;
use memplan_plugin_api::{
    Allocation, Arena, ArenaRole, Binding, MemoryPlan, PlanError, PlanErrorKind, PlanRequest,
    TensorRequest,
};

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

fn invalid(message: String) -> PlanError {
    PlanError::new(PlanErrorKind::InvalidRequest, message)
}

/// What the one pass over the request (`validate`) finds. With a million tensors the
/// request is over 100 MB, and every pass over it costs as much as a good part of the
/// packing, so the later passes work from these lists.
struct Inventory {
    /// The tensors that take space (not aliases, not empty), by role, in tensor order.
    constant: Vec<u32>,
    persistent: Placeables,
    scratch: Placeables,
    /// Empty tensors (not aliases), bound without space.
    empty: Vec<u32>,
    /// Aliases, bound to their root's bytes.
    aliases: Vec<u32>,
}

/// The tensors of a role the kit spills between memories (persistent or scratch) that take
/// space, in tensor order.
#[derive(Default)]
struct Placeables {
    /// Tensors the request pins: to a memory, or at a fixed offset.
    pinned: Vec<u32>,
    /// Tensors free to go to any memory.
    free: Vec<u32>,
    /// The buffers of `free`, one each, built in the same pass: when they all go to one
    /// arena (the usual case) the packer gets these without another pass over the request.
    free_buffers: Vec<Buffer>,
}

impl Placeables {
    fn with_capacity(tensors: usize) -> Placeables {
        Placeables {
            pinned: Vec::new(),
            free: Vec::with_capacity(tensors),
            free_buffers: Vec::with_capacity(tensors),
        }
    }
}

impl Inventory {
    fn with_capacity(tensors: usize) -> Inventory {
        Inventory {
            // Room that is never written costs address space only.
            constant: Vec::with_capacity(tensors),
            persistent: Placeables::with_capacity(tensors),
            scratch: Placeables::with_capacity(tensors),
            empty: Vec::new(),
            aliases: Vec::new(),
        }
    }

    /// The persistent or scratch tensors to place; taken, as the caller places them.
    fn take_placeables(&mut self, role: ArenaRole) -> Placeables {
        match role {
            ArenaRole::Persistent => std::mem::take(&mut self.persistent),
            ArenaRole::Scratch => std::mem::take(&mut self.scratch),
            ArenaRole::Constant => unreachable!("constants do not spill"),
        }
    }
}

/// The packer's view of `tensor`.
fn buffer_of(tensor: &TensorRequest) -> Buffer {
    Buffer {
        size: tensor.size,
        alignment: tensor.alignment,
        lifetime: tensor.lifetime,
        fixed_offset: tensor.fixed_offset.into_option().into(),
    }
}

/// Rejects requests the passes cannot honour, naming the tensor or memory, and takes the
/// [`Inventory`], in one pass.
fn validate(request: &PlanRequest) -> Result<Inventory, PlanError> {
    let mut inventory = Inventory::with_capacity(request.tensors.len());
    let memories = &request.memories;
    if memories.is_empty() && !request.tensors.is_empty() {
        return Err(invalid("the request lists tensors but no memories".into()));
    }
    for memory in memories.iter() {
        if !memory.arena_alignment.is_power_of_two() {
            return Err(invalid(format!(
                "memory {}: arena alignment {} is not a power of two",
                memory.name, memory.arena_alignment
            )));
        }
    }
    let memory_index = |tensor: &str, what: &str, index: u32| -> Result<usize, PlanError> {
        if (index as usize) < memories.len() {
            Ok(index as usize)
        } else {
            Err(invalid(format!(
                "tensor {tensor}: {what} index {index} is out of range ({} memories)",
                memories.len()
            )))
        }
    };
    for (index, tensor) in request.tensors.iter().enumerate() {
        let id = tensor.id.as_str();
        if !tensor.alignment.is_power_of_two() {
            return Err(invalid(format!(
                "tensor {id}: alignment {} is not a power of two",
                tensor.alignment
            )));
        }
        if let Some(offset) = tensor.fixed_offset.into_option() {
            // Packers add sizes to fixed offsets (and `FixedOffset` can then keep u64::MAX
            // for "none").
            if offset.checked_add(tensor.size).is_none() {
                return Err(invalid(format!(
                    "tensor {id}: fixed offset {offset} plus its {} bytes ends past 64 bits",
                    tensor.size
                )));
            }
        }
        if tensor.lifetime.first > tensor.lifetime.last {
            return Err(invalid(format!(
                "tensor {id}: lifetime [{}, {}] ends before it starts",
                tensor.lifetime.first, tensor.lifetime.last
            )));
        }
        if let Some(alias) = tensor.alias_of.into_option() {
            match request.tensors.get(alias.root as usize) {
                None => {
                    return Err(invalid(format!(
                        "tensor {id}: alias root index {} is out of range",
                        alias.root
                    )))
                }
                Some(root) if root.alias_of.is_some() => {
                    return Err(invalid(format!(
                        "tensor {id}: alias root {} is itself an alias (the host resolves \
                         alias chains to their root)",
                        root.id
                    )))
                }
                Some(_) => {}
            }
            inventory.aliases.push(index as u32);
            continue;
        }
        let memory = match tensor.memory.into_option() {
            Some(index) => Some(memory_index(id, "memory", index)?),
            None => None,
        };
        match tensor.kind.role() {
            ArenaRole::Constant => {
                let Some(destination) = memory else {
                    return Err(invalid(format!(
                        "constant tensor {id} has no destination memory"
                    )));
                };
                if let Some(source) = tensor.source_memory.into_option() {
                    let source = memory_index(id, "source memory", source)?;
                    if source != destination && !memories[destination].writable {
                        return Err(invalid(format!(
                            "constant tensor {id} is staged from {} into {}, which is not \
                             writable",
                            memories[source].name, memories[destination].name
                        )));
                    }
                }
            }
            ArenaRole::Scratch | ArenaRole::Persistent => {
                if let Some(index) = memory {
                    if !memories[index].writable {
                        return Err(invalid(format!(
                            "{} tensor {id} is placed in {}, which is not writable",
                            tensor.kind.as_str(),
                            memories[index].name
                        )));
                    }
                }
            }
        }
        let index = index as u32;
        let placeables = match tensor.kind.role() {
            _ if tensor.size == 0 => {
                inventory.empty.push(index);
                continue;
            }
            ArenaRole::Constant => {
                inventory.constant.push(index);
                continue;
            }
            ArenaRole::Persistent => &mut inventory.persistent,
            ArenaRole::Scratch => &mut inventory.scratch,
        };
        if tensor.memory.is_none() && tensor.fixed_offset.is_none() {
            placeables.free.push(index);
            placeables.free_buffers.push(buffer_of(tensor));
        } else {
            placeables.pinned.push(index);
        }
    }
    Ok(inventory)
}

/// One packed arena, not yet charged to its memory.
struct PackedArena {
    /// Ascending.
    tensors: Vec<u32>,
    /// The packer's buffers of `tensors`, kept for their sizes.
    buffers: Vec<Buffer>,
    offsets: Vec<u64>,
    alignment: u64,
    size: u64,
    note: String,
}

struct KitState<'a> {
    request: &'a PlanRequest,
    context: &'a HostContext,
    /// Writable memories with a scratch order, in that order.
    scratch_order: Vec<u32>,
    /// Bytes of the arenas placed so far, per memory.
    used: Vec<u64>,
    /// The tensors still to place.
    inventory: Inventory,
    arenas: Vec<Arena>,
    /// The committed arenas' tensors with their bindings at offset 0, until `finish` writes
    /// the allocations.
    bound: Vec<(Binding, PackedArena)>,
    notes: Vec<String>,
}

impl<'a> KitState<'a> {
    fn new(
        request: &'a PlanRequest,
        context: &'a HostContext,
        inventory: Inventory,
    ) -> KitState<'a> {
        let mut ordered: Vec<(u32, u32)> = request
            .memories
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
        KitState {
            request,
            context,
            scratch_order: ordered.into_iter().map(|(_, index)| index).collect(),
            used: vec![0; request.memories.len()],
            inventory,
            arenas: Vec::new(),
            bound: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn first_scratch_memory(&self, tensor: u32) -> Result<u32, PlanError> {
        self.scratch_order.first().copied().ok_or_else(|| {
            let t = &self.request.tensors[tensor as usize];
            invalid(format!(
                "{} tensor {} has no memory and the target has no writable memory in its \
                 scratch order",
                t.kind.as_str(),
                t.id
            ))
        })
    }

    fn place_constants(&mut self) -> Result<(), PlanError> {
        let mut groups: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
        for index in std::mem::take(&mut self.inventory.constant) {
            let tensor = &self.request.tensors[index as usize];
            let destination = tensor.memory.unwrap();
            let source = tensor.source_memory.into_option().unwrap_or(destination);
            groups.entry((destination, source)).or_default().push(index);
        }
        for ((destination, source), tensors) in groups {
            let packed = self.pack_arena(destination, tensors, None, &BumpPacker)?;
            if !self.fits(destination, packed.size) {
                return Err(self.does_not_fit(ArenaRole::Constant, destination, packed.size));
            }
            self.commit(ArenaRole::Constant, destination, source, packed);
        }
        Ok(())
    }

    /// Places the tensors of `role` (persistent or scratch) with spill along the scratch
    /// order (see the module docs).
    fn place_with_spill(&mut self, role: ArenaRole, packer: &dyn Packer) -> Result<(), PlanError> {
        let placeables = self.inventory.take_placeables(role);
        let mut pinned: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for index in placeables.pinned {
            let memory = match self.request.tensors[index as usize].memory.into_option() {
                Some(memory) => memory,
                // At a fixed offset in no given memory: the first in the scratch order.
                None => self.first_scratch_memory(index)?,
            };
            pinned.entry(memory).or_default().push(index);
        }
        if let Some(&first) = placeables.free.first() {
            self.first_scratch_memory(first)?;
        }
        let mut carried = placeables.free;
        // The buffers of `carried` while it is still the free list `validate` made.
        let mut carried_buffers = Some(placeables.free_buffers);

        let order = self.scratch_order.clone();
        for (position, &memory) in order.iter().enumerate() {
            let mut set = pinned.remove(&memory).unwrap_or_default();
            // Buffers already built for `set`, when it is the free list as `validate` made it.
            let mut set_buffers = None;
            if set.is_empty() {
                // Usually every tensor: hand the list over rather than copy it.
                std::mem::swap(&mut set, &mut carried);
                set_buffers = carried_buffers.take();
            } else {
                set.append(&mut carried);
                set.sort_unstable();
                carried_buffers = None;
            }
            let has_next = position + 1 < order.len();
            while !set.is_empty() {
                let tensors = std::mem::take(&mut set);
                let packed = self.pack_arena(memory, tensors, set_buffers.take(), packer)?;
                if self.fits(memory, packed.size) {
                    self.commit(role, memory, memory, packed);
                    break;
                }
                let limit = self.room(memory) / packed.alignment * packed.alignment;
                let before = carried.len();
                for (&index, &offset) in packed.tensors.iter().zip(&packed.offsets) {
                    let tensor = &self.request.tensors[index as usize];
                    let movable = tensor.memory.is_none() && tensor.fixed_offset.is_none();
                    if movable && has_next && offset + tensor.size > limit {
                        carried.push(index);
                    } else {
                        set.push(index);
                    }
                }
                if carried.len() == before {
                    return Err(self.does_not_fit(role, memory, packed.size));
                }
                if self.context.should_stop() {
                    return Err(PlanError::new(
                        PlanErrorKind::Cancelled,
                        "stopped while spilling tensors between memories",
                    ));
                }
            }
        }
        for (memory, tensors) in pinned {
            let packed = self.pack_arena(memory, tensors, None, packer)?;
            if !self.fits(memory, packed.size) {
                return Err(self.does_not_fit(role, memory, packed.size));
            }
            self.commit(role, memory, memory, packed);
        }
        Ok(())
    }

    /// Packs `tensors` (non-empty, not aliases; `buffers` their buffers when already built)
    /// into one arena of `memory`.
    fn pack_arena(
        &self,
        memory: u32,
        tensors: Vec<u32>,
        buffers: Option<Vec<Buffer>>,
        packer: &dyn Packer,
    ) -> Result<PackedArena, PlanError> {
        let buffers = buffers.unwrap_or_else(|| {
            let tensors_of_request = &self.request.tensors;
            tensors
                .iter()
                .map(|&index| buffer_of(&tensors_of_request[index as usize]))
                .collect()
        });
        debug_assert_eq!(buffers.len(), tensors.len());
        let packing = packer.pack(&buffers, self.context)?;
        if packing.offsets.len() != buffers.len() {
            return Err(PlanError::new(
                PlanErrorKind::Failed,
                format!(
                    "the packer returned {} offsets for {} buffers",
                    packing.offsets.len(),
                    buffers.len()
                ),
            ));
        }
        // In one pass (at a million buffers each pass reads 32 MB): the height, computed
        // rather than taken from the packer, as the arena must hold every offset it gave; and
        // the alignment, the largest of the memory's and its tensors'.
        let (height, alignment) = buffers.iter().zip(&packing.offsets).fold(
            (
                0,
                self.request.memories[memory as usize]
                    .arena_alignment
                    .max(1),
            ),
            |(height, alignment), (buffer, offset)| {
                (
                    height.max(offset + buffer.size),
                    alignment.max(buffer.alignment),
                )
            },
        );
        debug_assert!(
            tensors.is_sorted(),
            "arenas list their tensors in ascending order"
        );
        Ok(PackedArena {
            tensors,
            buffers,
            offsets: packing.offsets,
            alignment,
            size: align_up(height, alignment),
            note: packing.note,
        })
    }

    /// Bytes of `memory`'s budget not yet taken by arenas (`u64::MAX` when unbounded).
    fn room(&self, memory: u32) -> u64 {
        match self.request.memories[memory as usize].budget.into_option() {
            Some(budget) => budget.saturating_sub(self.used[memory as usize]),
            None => u64::MAX,
        }
    }

    fn fits(&self, memory: u32, size: u64) -> bool {
        size <= self.room(memory)
    }

    fn does_not_fit(&self, role: ArenaRole, memory: u32, need: u64) -> PlanError {
        let name = &self.request.memories[memory as usize].name;
        let budget = self.request.memories[memory as usize]
            .budget
            .into_option()
            .unwrap_or(u64::MAX);
        let used = self.used[memory as usize];
        let taken = if used > 0 {
            format!(", of which {used} are already taken by other arenas")
        } else {
            String::new()
        };
        let spill = match role {
            ArenaRole::Constant => "constants cannot spill",
            _ if self.scratch_order.last() == Some(&memory) => {
                "it is the last memory in the scratch order, with nowhere to spill to"
            }
            _ => "the tensors pinned there (or at fixed offsets) alone do not fit",
        };
        PlanError::new(
            PlanErrorKind::DoesNotFit,
            format!(
                "the {} arena in memory {name} needs {need} bytes but the budget is {budget} \
                 bytes{taken}; {spill}. Raise the budget (--memory {name}=BYTES) or pin tensors \
                 to other memories",
                role.as_str()
            ),
        )
    }

    fn commit(
        &mut self,
        role: ArenaRole,
        memory: u32,
        source_memory: u32,
        mut packed: PackedArena,
    ) {
        self.used[memory as usize] += packed.size;
        let note = std::mem::take(&mut packed.note);
        if !note.is_empty() && !self.notes.contains(&note) {
            self.notes.push(note);
        }
        self.arenas.push(Arena {
            role,
            memory,
            source_memory,
            size: packed.size,
            alignment: packed.alignment,
        });
        let binding = Binding {
            role,
            memory,
            source_memory,
            offset: 0,
        };
        self.bound.push((binding, packed));
    }

    /// The binding of empty tensor `index` (never packed): its own
    /// memory (or the first in the scratch order) at its fixed offset (or 0).
    fn binding_without_space(&self, index: usize) -> Binding {
        let tensor = &self.request.tensors[index];
        let role = tensor.kind.role();
        let memory = match tensor.memory.into_option() {
            Some(memory) => memory,
            None => self.scratch_order.first().copied().unwrap_or(0),
        };
        let source_memory = match role {
            ArenaRole::Constant => tensor.source_memory.into_option().unwrap_or(memory),
            _ => memory,
        };
        Binding {
            role,
            memory,
            source_memory,
            offset: tensor.fixed_offset.into_option().unwrap_or(0),
        }
    }

    /// One allocation per tensor, in tensor order; aliases get a placeholder binding (their
    /// root's is known only once it is written).
    ///
    /// Written once, in one pass: the committed arenas, the empty tensors and the aliases
    /// each list their tensors in ascending order, and between them every tensor exactly
    /// once (validate sorts each tensor into one list; each placed tensor is committed in
    /// one arena). So a merge visits the tensors in turn, usually taking long runs from one
    /// list. Allocations are 48 bytes: at a million tensors, writing them a first time
    /// with placeholders and again on commit cost a 48 MB pass.
    fn allocations_in_tensor_order(&self) -> RVec<Allocation> {
        /// A list of tensors and the position of the next to take.
        struct Cursor<'s> {
            tensors: &'s [u32],
            next: usize,
            /// The arena, for an arena's list.
            arena: Option<&'s (Binding, PackedArena)>,
        }
        let mut cursors: Vec<Cursor> = self
            .bound
            .iter()
            .map(|bound| Cursor {
                tensors: &bound.1.tensors,
                next: 0,
                arena: Some(bound),
            })
            .collect();
        for list in [&self.inventory.empty, &self.inventory.aliases] {
            cursors.push(Cursor {
                tensors: list,
                next: 0,
                arena: None,
            });
        }
        let count = self.request.tensors.len();
        let mut allocations = RVec::with_capacity(count);
        let mut current = 0;
        for index in 0..count as u32 {
            let takes = |cursor: &Cursor| cursor.tensors.get(cursor.next) == Some(&index);
            if !cursors.get(current).is_some_and(takes) {
                current = cursors
                    .iter()
                    .position(takes)
                    .expect("validate lists every tensor once");
            }
            let cursor = &mut cursors[current];
            let at = cursor.next;
            cursor.next += 1;
            allocations.push(match cursor.arena {
                Some((binding, packed)) => {
                    let binding = Binding {
                        offset: packed.offsets[at],
                        ..*binding
                    };
                    Allocation::new(index, binding, packed.buffers[at].size)
                }
                // Empty tensors, or aliases (bound by the caller).
                None => Allocation::new(index, self.binding_without_space(index as usize), 0),
            });
        }
        allocations
    }

    /// Writes the allocations, binding empty tensors and aliases, and assembles the plan.
    fn finish(mut self) -> Result<MemoryPlan, PlanError> {
        let request = self.request;
        let mut allocations = self.allocations_in_tensor_order();
        // Roots are never aliases (validate), so they are bound by now.
        for &index in &self.inventory.aliases {
            let tensor = &request.tensors[index as usize];
            let alias = tensor.alias_of.unwrap();
            let root = allocations[alias.root as usize].binding;
            let binding = Binding {
                offset: root.offset + alias.offset,
                ..root
            };
            allocations[index as usize] = Allocation::new(index, binding, tensor.size);
        }
        self.arenas
            .sort_unstable_by_key(|a| (a.role, a.memory, a.source_memory));
        Ok(MemoryPlan {
            arenas: self.arenas.into_iter().collect(),
            allocations,
            summary: RString::from(self.notes.join("; ")),
        })
    }
}

#[cfg(test)]
mod tests {
    use memplan_plugin_api::abi_stable::std_types::{ROption, RString, RVec};

    use super::*;
    use crate::greedy::{pack_greedy, Fit, Order};
    use crate::testing::{assert_valid_plan, memory, tensor};
    use crate::Packing;
    use memplan_plugin_api::{AliasOf, MemoryRequest, TensorKind, TensorRequest};

    struct Greedy;
    impl Packer for Greedy {
        fn pack(&self, buffers: &[Buffer], _: &HostContext) -> Result<Packing, PlanError> {
            Ok(pack_greedy(buffers, Order::Size, Fit::Best))
        }
    }

    fn scratch(id: &str, size: u64, first: u32, last: u32) -> TensorRequest {
        tensor(id, TensorKind::Intermediate, size, first, last)
    }

    fn request(memories: Vec<MemoryRequest>, tensors: Vec<TensorRequest>) -> PlanRequest {
        let num_steps = tensors
            .iter()
            .map(|t| t.lifetime.last + 1)
            .max()
            .unwrap_or(0);
        PlanRequest {
            tensors: RVec::from(tensors),
            memories: RVec::from(memories),
            num_steps,
            options: RString::from("{}"),
        }
    }

    fn plan(request: &PlanRequest) -> Result<MemoryPlan, PlanError> {
        plan_with_packer(request, &HostContext::detached(), &Greedy)
    }

    fn arena(plan: &MemoryPlan, role: ArenaRole, memory: u32) -> Option<&Arena> {
        plan.arenas
            .iter()
            .find(|a| a.role == role && a.memory == memory)
    }

    fn binding(plan: &MemoryPlan, tensor: u32) -> Binding {
        plan.allocations[tensor as usize].binding
    }

    /// DTCM (64 bytes, first), SRAM (unbounded, second), MRAM (read-only, not for scratch).
    fn three_memories(dtcm_budget: u64) -> Vec<MemoryRequest> {
        vec![
            memory("DTCM", Some(dtcm_budget), true, Some(0)),
            memory("SRAM", None, true, Some(1)),
            memory("MRAM", None, false, None),
        ]
    }

    #[test]
    fn scratch_reuses_memory_in_one_arena() {
        let req = request(
            three_memories(1024),
            vec![
                scratch("a", 32, 0, 1),
                scratch("b", 32, 1, 2),
                scratch("c", 32, 2, 3),
            ],
        );
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        assert_eq!(plan.arenas.len(), 1);
        assert_eq!(arena(&plan, ArenaRole::Scratch, 0).unwrap().size, 64);
        assert_eq!(binding(&plan, 0).offset, binding(&plan, 2).offset);
    }

    #[test]
    fn scratch_spills_to_the_next_memory_when_the_budget_is_exceeded() {
        let tensors = (0..4)
            .map(|i| scratch(&format!("t{i}"), 32, 0, 3))
            .collect();
        let req = request(three_memories(64), tensors);
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        assert_eq!(arena(&plan, ArenaRole::Scratch, 0).unwrap().size, 64);
        assert_eq!(arena(&plan, ArenaRole::Scratch, 1).unwrap().size, 64);
        let in_dtcm = (0..4).filter(|&t| binding(&plan, t).memory == 0).count();
        assert_eq!(in_dtcm, 2);
    }

    #[test]
    fn nowhere_to_spill_is_does_not_fit_naming_memory_need_and_budget() {
        let tensors = (0..4)
            .map(|i| scratch(&format!("t{i}"), 32, 0, 3))
            .collect();
        let memories = vec![
            memory("DTCM", Some(64), true, Some(0)),
            memory("SRAM", Some(32), true, Some(1)),
        ];
        let error = plan(&request(memories, tensors)).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::DoesNotFit);
        assert!(error.message.contains("SRAM"), "{}", error.message);
        assert!(
            error.message.contains("needs 64 bytes"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("budget is 32 bytes"),
            "{}",
            error.message
        );
    }

    #[test]
    fn pinned_tensors_stay_in_their_memory_even_when_they_do_not_fit() {
        let mut big = scratch("big", 128, 0, 1);
        big.memory = ROption::RSome(0);
        let error = plan(&request(three_memories(64), vec![big.clone()])).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::DoesNotFit);
        assert!(error.message.contains("DTCM"), "{}", error.message);

        // Pinned to the second memory while the first has room: it still goes there.
        big.memory = ROption::RSome(1);
        let req = request(three_memories(1024), vec![big, scratch("small", 16, 0, 1)]);
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        assert_eq!(binding(&plan, 0).memory, 1);
        assert_eq!(binding(&plan, 1).memory, 0);
    }

    #[test]
    fn fixed_offsets_are_kept() {
        let mut fixed = scratch("fixed", 32, 0, 3);
        fixed.fixed_offset = ROption::RSome(64);
        let req = request(
            three_memories(1024),
            vec![scratch("a", 48, 0, 1), fixed, scratch("b", 32, 2, 3)],
        );
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        assert_eq!(binding(&plan, 1).offset, 64);
        assert_eq!(binding(&plan, 1).memory, 0);
        assert_eq!(arena(&plan, ArenaRole::Scratch, 0).unwrap().size, 96);
    }

    #[test]
    fn a_fixed_offset_whose_end_overflows_is_an_invalid_request() {
        let mut fixed = scratch("fixed", 32, 0, 3);
        fixed.fixed_offset = ROption::RSome(u64::MAX - 31);
        let error = plan(&request(three_memories(1024), vec![fixed])).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
        assert!(
            error
                .message
                .contains("tensor fixed: fixed offset 18446744073709551584 plus its 32 bytes"),
            "{}",
            error.message
        );
    }

    #[test]
    fn aliases_take_their_roots_binding_plus_the_view_offset() {
        let mut view = scratch("view", 16, 1, 2);
        view.alias_of = ROption::RSome(AliasOf {
            root: 1,
            offset: 16,
        });
        let req = request(
            three_memories(1024),
            vec![scratch("a", 64, 0, 0), scratch("root", 64, 1, 2), view],
        );
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        let root = binding(&plan, 1);
        assert_eq!(
            binding(&plan, 2),
            Binding {
                offset: root.offset + 16,
                ..root
            }
        );
    }

    #[test]
    fn alias_of_an_alias_is_an_invalid_request() {
        let mut first = scratch("first", 16, 0, 0);
        first.alias_of = ROption::RSome(AliasOf { root: 0, offset: 0 });
        let mut second = scratch("second", 16, 0, 0);
        second.alias_of = ROption::RSome(AliasOf { root: 1, offset: 0 });
        let req = request(
            three_memories(64),
            vec![scratch("root", 16, 0, 0), first, second],
        );
        let error = plan(&req).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
        assert!(error.message.contains("second"), "{}", error.message);
    }

    #[test]
    fn empty_tensors_are_bound_without_space() {
        let req = request(
            three_memories(1024),
            vec![
                scratch("empty", 0, 0, 3),
                scratch("a", 32, 0, 3),
                tensor("c0", TensorKind::Persistent, 0, 0, 3),
            ],
        );
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        assert_eq!(
            plan.arenas.len(),
            1,
            "no arena for the empty persistent tensor"
        );
        assert_eq!(plan.allocations[0].size, 0);
        assert_eq!(binding(&plan, 0).role, ArenaRole::Scratch);
        assert_eq!(binding(&plan, 2).role, ArenaRole::Persistent);
        assert_eq!(arena(&plan, ArenaRole::Scratch, 0).unwrap().size, 32);
    }

    #[test]
    fn constants_are_bumped_per_destination_cold_and_staged() {
        let mut cold = tensor("cold", TensorKind::Constant, 20, 0, 3);
        cold.memory = ROption::RSome(2);
        let mut staged = tensor("staged", TensorKind::Constant, 40, 0, 3);
        staged.memory = ROption::RSome(0);
        staged.source_memory = ROption::RSome(2);
        let mut staged2 = staged.clone();
        staged2.id = RString::from("staged2");
        // DTCM: 96 bytes; the staged constants take 96 (40 -> 48 aligned, twice), so the
        // scratch tensor must spill to SRAM.
        let req = request(
            three_memories(96),
            vec![cold, staged, staged2, scratch("s", 16, 1, 2)],
        );
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        let cold_arena = arena(&plan, ArenaRole::Constant, 2).unwrap();
        assert_eq!((cold_arena.source_memory, cold_arena.size), (2, 32));
        let staged_arena = arena(&plan, ArenaRole::Constant, 0).unwrap();
        assert_eq!((staged_arena.source_memory, staged_arena.size), (2, 96));
        assert_eq!(binding(&plan, 2).offset, 48);
        assert_eq!(
            binding(&plan, 3).memory,
            1,
            "scratch spilled past the full DTCM"
        );
    }

    #[test]
    fn constants_over_budget_do_not_fit() {
        let mut constant = tensor("weights", TensorKind::Constant, 200, 0, 3);
        constant.memory = ROption::RSome(0);
        let error = plan(&request(three_memories(64), vec![constant])).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::DoesNotFit);
        assert!(
            error.message.contains("constant arena in memory DTCM"),
            "{}",
            error.message
        );
    }

    #[test]
    fn persistent_tensors_get_their_own_arena_per_memory_and_spill_too() {
        let persistent = |id: &str| tensor(id, TensorKind::Persistent, 48, 0, 5);
        let mut pinned = persistent("p_sram");
        pinned.memory = ROption::RSome(1);
        let req = request(
            three_memories(64),
            vec![
                persistent("p0"),
                persistent("p1"),
                pinned,
                scratch("s", 16, 0, 1),
            ],
        );
        let plan = plan(&req).unwrap();
        assert_valid_plan(&req, &plan);
        assert_eq!(arena(&plan, ArenaRole::Persistent, 0).unwrap().size, 48);
        assert_eq!(arena(&plan, ArenaRole::Persistent, 1).unwrap().size, 96);
        assert_eq!(
            binding(&plan, 1).memory,
            1,
            "second persistent tensor spilled"
        );
        assert_eq!(
            binding(&plan, 3).memory,
            0,
            "16 bytes of DTCM left for scratch"
        );
    }

    #[test]
    fn scratch_pinned_to_read_only_memory_is_an_invalid_request() {
        let mut t = scratch("t", 16, 0, 0);
        t.memory = ROption::RSome(2);
        let error = plan(&request(three_memories(64), vec![t])).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
        assert!(error.message.contains("MRAM"), "{}", error.message);
    }

    #[test]
    fn unpinned_scratch_needs_a_memory_in_the_scratch_order() {
        let memories = vec![memory("MRAM", None, false, None)];
        let error = plan(&request(memories, vec![scratch("t", 16, 0, 0)])).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
    }

    #[test]
    fn plans_are_deterministic() {
        let tensors: Vec<TensorRequest> = (0..300u32)
            .map(|i| {
                let first = i % 17;
                scratch(
                    &i.to_string(),
                    u64::from(i * 7919 % 211 + 1),
                    first,
                    first + i % 6,
                )
            })
            .collect();
        let req = request(three_memories(2048), tensors);
        let first = plan(&req).unwrap();
        assert_valid_plan(&req, &first);
        assert!(
            arena(&first, ArenaRole::Scratch, 1).is_some(),
            "the test should spill"
        );
        for _ in 0..3 {
            assert_eq!(plan(&req).unwrap(), first);
        }
    }
}
