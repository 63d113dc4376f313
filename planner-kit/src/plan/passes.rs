//! The passes themselves: constants, then persistent and scratch tensors with spill, then
//! the allocations in tensor order ([`KitState`]). The spill algorithm is described in the
//! module docs of `plan`.

use std::collections::BTreeMap;

use memplan_plugin_api::abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::{
    Allocation, Arena, ArenaRole, Binding, HostContext, MemoryPlan, PlanError, PlanErrorKind,
    PlanRequest,
};

use super::invalid;
use super::inventory::{buffer_of, Inventory};
use crate::bump::BumpPacker;
use crate::greedy::{pack_greedy_between, Fit, Order};
use crate::{Buffer, Packer};

/// One packed arena, not yet charged to its memory.
pub(super) struct PackedArena {
    /// Ascending.
    pub(super) tensors: Vec<u32>,
    /// The packer's buffers of `tensors`, kept for their sizes.
    pub(super) buffers: Vec<Buffer>,
    pub(super) offsets: Vec<u64>,
    pub(super) alignment: u64,
    pub(super) size: u64,
    pub(super) note: String,
}

/// How the spill pass picks the tensors a memory cannot hold.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    /// Those the packer put above the budget.
    Cut,
    /// Those a packing that keeps every tensor wholly below or above the budget puts above
    /// it ([`KitState::plan_split`]).
    Planned,
}

/// The arenas of one spill run along the scratch order, not committed yet.
pub(super) struct SpillRun {
    /// Memory, arena, and whether tensors were carried out of it.
    pub(super) arenas: Vec<(u32, PackedArena, bool)>,
    /// Whether tensors were carried from one memory to the next.
    pub(super) spilled: bool,
}

impl SpillRun {
    /// Bytes of all its arenas.
    fn bytes(&self) -> u64 {
        self.arenas.iter().map(|(_, packed, _)| packed.size).sum()
    }
}

pub(super) struct KitState<'a> {
    pub(super) request: &'a PlanRequest,
    pub(super) context: &'a HostContext,
    /// Writable memories with a scratch order, in that order.
    pub(super) scratch_order: Vec<u32>,
    /// Bytes of the arenas placed so far, per memory.
    pub(super) used: Vec<u64>,
    /// The tensors still to place.
    pub(super) inventory: Inventory,
    pub(super) arenas: Vec<Arena>,
    /// The committed arenas' tensors with their bindings at offset 0, until `finish` writes
    /// the allocations.
    pub(super) bound: Vec<(Binding, PackedArena)>,
    pub(super) notes: Vec<String>,
}

impl<'a> KitState<'a> {
    pub(super) fn new(
        request: &'a PlanRequest,
        context: &'a HostContext,
        inventory: Inventory,
    ) -> KitState<'a> {
        KitState {
            request,
            context,
            scratch_order: request.scratch_order(),
            used: vec![0; request.memories.len()],
            inventory,
            arenas: Vec::new(),
            bound: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(super) fn first_scratch_memory(&self, tensor: u32) -> Result<u32, PlanError> {
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

    pub(super) fn place_constants(&mut self) -> Result<(), PlanError> {
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
    pub(super) fn place_with_spill(
        &mut self,
        role: ArenaRole,
        packer: &dyn Packer,
    ) -> Result<(), PlanError> {
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
        // Cutting at the budget first (the free list handed over: usually everything fits
        // and this is the only run); when tensors spilled, the planned split too, and the
        // run needing fewer bytes in all wins (the cut on a tie).
        let free = placeables.free.clone();
        let cut = self.spill_along_order(
            role,
            &pinned,
            placeables.free,
            Some(placeables.free_buffers),
            packer,
            Split::Cut,
        );
        let chosen = match cut {
            Ok(run) if !run.spilled => run,
            Err(error) if error.kind != PlanErrorKind::DoesNotFit => return Err(error),
            cut => {
                let planned =
                    self.spill_along_order(role, &pinned, free, None, packer, Split::Planned);
                match (cut, planned) {
                    (Ok(cut), Ok(planned)) if planned.bytes() < cut.bytes() => planned,
                    (Ok(cut), _) => cut,
                    (Err(_), Ok(planned)) => planned,
                    (Err(error), Err(_)) => return Err(error),
                }
            }
        };
        for (memory, packed, spilled_out) in chosen.arenas {
            if spilled_out {
                self.split_note(memory);
            }
            self.commit(role, memory, memory, packed);
        }
        for &memory in &self.scratch_order {
            pinned.remove(&memory);
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

    /// Packs the free tensors (`carried`, whose buffers `carried_buffers` may hold) and the
    /// `pinned` ones along the scratch order, carrying to the next memory what does not fit
    /// (see the module docs), without committing: the arenas, in scratch order.
    fn spill_along_order(
        &self,
        role: ArenaRole,
        pinned: &BTreeMap<u32, Vec<u32>>,
        mut carried: Vec<u32>,
        mut carried_buffers: Option<Vec<Buffer>>,
        packer: &dyn Packer,
        split: Split,
    ) -> Result<SpillRun, PlanError> {
        let mut run = SpillRun {
            arenas: Vec::new(),
            spilled: false,
        };
        let order = &self.scratch_order;
        for (position, &memory) in order.iter().enumerate() {
            let mut set = pinned.get(&memory).cloned().unwrap_or_default();
            // Buffers already built for `set`, when it is the free list as `validate` made it.
            let mut set_buffers = None;
            if set.is_empty() {
                // Usually every tensor: hand the list over rather than copy it. Tensors
                // carried over several rounds come in runs, each ascending.
                std::mem::swap(&mut set, &mut carried);
                set_buffers = carried_buffers.take();
                if !set.is_sorted() {
                    set.sort_unstable();
                }
            } else {
                set.append(&mut carried);
                set.sort_unstable();
                carried_buffers = None;
            }
            let has_next = position + 1 < order.len();
            let mut split_planned = false;
            while !set.is_empty() {
                let tensors = std::mem::take(&mut set);
                let packed = self.pack_arena(memory, tensors, set_buffers.take(), packer)?;
                if self.fits(memory, packed.size) {
                    run.spilled |= !carried.is_empty();
                    run.arenas.push((memory, packed, !carried.is_empty()));
                    break;
                }
                let limit = self.room(memory) / packed.alignment * packed.alignment;
                let before = carried.len();
                // The split planned for this memory's budget first, then (should the packer
                // not fit what it kept) whatever ends above the budget.
                let planned = match (split, split_planned, has_next) {
                    (Split::Planned, false, true) => {
                        split_planned = true;
                        self.plan_split(&packed, limit)
                    }
                    _ => None,
                };
                let offsets = planned.as_ref().unwrap_or(&packed.offsets);
                for (&index, &offset) in packed.tensors.iter().zip(offsets) {
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
        Ok(run)
    }

    /// Offsets of `packed`'s buffers in a packing where none spans `limit` (the memory's
    /// budget): those below stay, those above are carried to the next memory. The kit's
    /// greedy packings with a barrier at `limit`, every order and fit, are compared by the
    /// height they need above it (the next memory's share at its peak, its bytes in all
    /// breaking ties); `None` when the arena has nothing above the limit to gain from, or
    /// when every candidate puts a tensor that must stay (pinned, or at a fixed offset) above
    /// it, or when the host says stop.
    fn plan_split(&self, packed: &PackedArena, limit: u64) -> Option<Vec<u64>> {
        let must_stay = |index: u32| {
            let tensor = &self.request.tensors[index as usize];
            tensor.memory.is_some() || tensor.fixed_offset.is_some()
        };
        let stop = || self.context.should_stop();
        let mut best: Option<((u64, u64), Vec<u64>)> = None;
        for order in Order::ALL.map(|(_, order)| order) {
            for fit in Fit::ALL.map(|(_, fit)| fit) {
                let packing =
                    pack_greedy_between(&packed.buffers, order, fit, &[limit], &stop).ok()?;
                let mut above = (0u64, 0u64);
                let mut valid = true;
                for ((&index, buffer), &offset) in packed
                    .tensors
                    .iter()
                    .zip(&packed.buffers)
                    .zip(&packing.offsets)
                {
                    if offset + buffer.size > limit {
                        valid &= !must_stay(index);
                        above.0 = above.0.max(offset + buffer.size - limit);
                        above.1 += buffer.size;
                    }
                }
                if valid && best.as_ref().is_none_or(|(lowest, _)| above < *lowest) {
                    best = Some((above, packing.offsets));
                }
            }
        }
        best.map(|(_, offsets)| offsets)
    }

    /// Says in the plan's summary that tensors were split between memories: a packer's
    /// "proven optimal" then holds for each arena's own tensors, not for the split.
    fn split_note(&mut self, memory: u32) {
        let note = format!(
            "tensors spilled out of {}: the split between memories is heuristic, so optimality \
             claims hold per arena only",
            self.request.memories[memory as usize].name
        );
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// Packs `tensors` (non-empty, not aliases; `buffers` their buffers when already built)
    /// into one arena of `memory`.
    pub(super) fn pack_arena(
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
        let room = Some(self.room(memory)).filter(|&room| room != u64::MAX);
        let packing = packer.pack_within(&buffers, room, self.context)?;
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
    pub(super) fn room(&self, memory: u32) -> u64 {
        match self.request.memories[memory as usize].budget.into_option() {
            Some(budget) => budget.saturating_sub(self.used[memory as usize]),
            None => u64::MAX,
        }
    }

    pub(super) fn fits(&self, memory: u32, size: u64) -> bool {
        size <= self.room(memory)
    }

    pub(super) fn does_not_fit(&self, role: ArenaRole, memory: u32, need: u64) -> PlanError {
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

    pub(super) fn commit(
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
    pub(super) fn binding_without_space(&self, index: usize) -> Binding {
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
    pub(super) fn allocations_in_tensor_order(&self) -> RVec<Allocation> {
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
    pub(super) fn finish(mut self) -> Result<MemoryPlan, PlanError> {
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
