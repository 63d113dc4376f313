//! Tensor-level contracts: exactly one allocation per tensor and none for unknown or external
//! tensors (1);
//! bound to an existing arena of the role its kind requires, in the memory the request pinned
//! (2); sharing the arena's source memory (3); inside the arena, aligned, fixed offsets kept
//! (4); aliases at their root's binding plus the view offset (5).
//!
//! Each pass is a single walk over the allocations or the tensors: O(n) plus hash look-ups.

use memplan_plugin_api::{Binding, TensorKind};

use super::{distinct_memories, ArenaIndex, Checker, Slot, Violation, ViolationKind};

impl Checker<'_> {
    /// The position in `plan.allocations` of each tensor's allocation. Reports allocations of
    /// unknown tensors and second allocations of a tensor (the first one counts).
    pub(super) fn index_allocations(&mut self) -> Vec<Option<usize>> {
        let tensor_count = self.request.tensors.len();
        let mut allocation_of: Vec<Option<usize>> = vec![None; tensor_count];
        for (position, allocation) in self.plan.allocations.iter().enumerate() {
            let tensor = allocation.tensor as usize;
            if tensor >= tensor_count {
                let message = format!(
                    "allocation #{position} (offset {}, {} bytes) names tensor index {}, but the \
                     model has {tensor_count} tensors; the planner must allocate only the \
                     request's tensors",
                    allocation.offset, allocation.size, allocation.tensor
                );
                self.report(Violation::new(ViolationKind::UnknownTensor, message));
                continue;
            }
            match allocation_of[tensor] {
                None => allocation_of[tensor] = Some(position),
                Some(first) => {
                    let name = self.tensor_name(allocation.tensor);
                    let first_binding = self.plan.allocations[first].binding;
                    let subject = self.described(allocation.tensor);
                    let message = format!(
                        "{subject} has more than one allocation: #{first} at offset {} in {} and \
                         #{position} at offset {} in {}; the planner must give each tensor \
                         exactly one allocation",
                        first_binding.offset,
                        self.binding_arena_text(&first_binding),
                        allocation.binding.offset,
                        self.binding_arena_text(&allocation.binding)
                    );
                    self.report(
                        Violation::new(ViolationKind::DuplicateAllocation, message).tensor(name),
                    );
                }
            }
        }
        allocation_of
    }

    /// Checks every tensor's allocation and returns, per arena of the plan, the sized
    /// non-alias slots placed in it (the input of the overlap sweep and the lower bounds).
    pub(super) fn check_allocations(
        &mut self,
        arena_index: &ArenaIndex,
        allocation_of: &[Option<usize>],
    ) -> Vec<Vec<Slot>> {
        // Sized per arena up front: at a million tensors, growing the vectors costs more
        // than this extra pass.
        let mut capacities = vec![0usize; self.plan.arenas.len()];
        for allocation in self.plan.allocations.iter() {
            if let Some(position) =
                arena_index.get(allocation.binding.role, allocation.binding.memory)
            {
                capacities[position] += 1;
            }
        }
        let mut slots: Vec<Vec<Slot>> = capacities.into_iter().map(Vec::with_capacity).collect();
        for (index, tensor) in self.request.tensors.iter().enumerate() {
            let tensor_index = index as u32;
            let role = tensor.kind.role();
            if self.external.is_external(index) {
                if let Some(position) = allocation_of[index] {
                    self.report_external_placed(tensor_index, position);
                }
                continue;
            }
            let Some(position) = allocation_of[index] else {
                let place = match tensor.memory.into_option() {
                    Some(memory) => format!(" in {}", self.memory_name(memory)),
                    None => String::new(),
                };
                let what = if tensor.alias_of.is_some() {
                    "an alias, it needs its root's binding plus the view offset".to_string()
                } else {
                    format!("it needs a binding to a {} arena{place}", role.as_str())
                };
                let name = self.tensor_name(tensor_index);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject} has no allocation; {what}: the planner must \
                     allocate every tensor of the request",
                );
                self.report(Violation::new(ViolationKind::MissingAllocation, message).tensor(name));
                continue;
            };
            let allocation = self.plan.allocations[position];
            let binding = allocation.binding;
            if allocation.offset != binding.offset {
                let name = self.tensor_name(tensor_index);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject} has allocation offset {} but binding offset {} in {}; the planner \
                     must give both the same offset",
                    allocation.offset,
                    binding.offset,
                    self.binding_arena_text(&binding)
                );
                self.report(Violation::new(ViolationKind::OffsetMismatch, message).tensor(name));
            }
            if allocation.size != tensor.size {
                let name = self.tensor_name(tensor_index);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject}: its allocation at offset {} in {} reserves {} bytes; \
                     the planner must reserve exactly the tensor's size",
                    binding.offset,
                    self.binding_arena_text(&binding),
                    allocation.size
                );
                self.report(Violation::new(ViolationKind::SizeMismatch, message).tensor(name));
            }
            let unknown: Vec<u32> = distinct_memories(binding.memory, binding.source_memory)
                .filter(|&memory| !self.is_known_memory(memory))
                .collect();
            if !unknown.is_empty() {
                for memory in unknown {
                    let name = self.tensor_name(tensor_index);
                    let subject = self.described(tensor_index);
                    let message = format!(
                        "{subject} is bound to memory {}, which target `{}` does not have (it has \
                         {}); the planner must bind tensors only to the request's memories",
                        self.memory_name(memory),
                        self.target,
                        self.known_memories_text()
                    );
                    self.report(
                        Violation::new(ViolationKind::UnknownMemory, message)
                            .tensor(name)
                            .memory(self.memory_name(memory)),
                    );
                }
                continue;
            }
            if tensor.alias_of.is_some() {
                // An alias's role, memory and offset are its root's: `check_aliases`.
                continue;
            }
            if binding.role != role {
                let name = self.tensor_name(tensor_index);
                let arena_name =
                    self.arena_name(binding.role, binding.memory, binding.source_memory);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject} is bound to the {arena_name} at offset {}; the \
                     planner must bind {} tensors to {} arenas",
                    binding.offset,
                    tensor.kind.as_str(),
                    role.as_str()
                );
                self.report(
                    Violation::new(ViolationKind::WrongRole, message)
                        .tensor(name)
                        .arena(arena_name),
                );
            }
            if let Some(memory) = tensor.memory.into_option() {
                if binding.memory != memory {
                    let name = self.tensor_name(tensor_index);
                    let arena_name =
                        self.arena_name(binding.role, binding.memory, binding.source_memory);
                    let subject = self.described(tensor_index);
                    let message = format!(
                        "{subject} must be placed in {} as the request says, but is \
                         bound to the {arena_name} at offset {}; the planner must keep the \
                         memory the request gives",
                        self.memory_name(memory),
                        binding.offset
                    );
                    self.report(
                        Violation::new(ViolationKind::WrongMemory, message)
                            .tensor(name)
                            .arena(arena_name),
                    );
                }
            }
            if tensor.kind == TensorKind::Constant {
                if let Some(source) = tensor.source_memory.into_option() {
                    if binding.source_memory != source {
                        let name = self.tensor_name(tensor_index);
                        let arena_name =
                            self.arena_name(binding.role, binding.memory, binding.source_memory);
                        let subject = self.described(tensor_index);
                        let message = format!(
                            "{subject} is a constant stored in {} but its binding says source \
                             memory {}; the planner must bind it with source memory {} (cold \
                             when equal to its memory, staged otherwise)",
                            self.memory_name(source),
                            arena_name.source_memory,
                            self.memory_name(source)
                        );
                        self.report(
                            Violation::new(ViolationKind::WrongMemory, message)
                                .tensor(name)
                                .arena(arena_name),
                        );
                    }
                }
            }
            if let Some(fixed) = tensor.fixed_offset.into_option() {
                if binding.offset != fixed {
                    let name = self.tensor_name(tensor_index);
                    let arena_name =
                        self.arena_name(binding.role, binding.memory, binding.source_memory);
                    let subject = self.described(tensor_index);
                    let message = format!(
                        "{subject} has fixed offset {fixed} but is placed at offset \
                         {} in the {arena_name}; the planner must keep fixed offsets as given",
                        binding.offset
                    );
                    self.report(
                        Violation::new(ViolationKind::FixedOffsetMoved, message)
                            .tensor(name)
                            .arena(arena_name),
                    );
                }
            }
            let Some(arena_position) = arena_index.get(binding.role, binding.memory) else {
                // Empty tensors get a binding but no space, and empty arenas are dropped.
                if tensor.size > 0 {
                    let name = self.tensor_name(tensor_index);
                    let arena_name =
                        self.arena_name(binding.role, binding.memory, binding.source_memory);
                    let subject = self.described(tensor_index);
                    let message = format!(
                        "{subject} is bound to the {arena_name} at offset {}, but \
                         the plan has no {} arena in {}; the planner must add that arena (at \
                         least {} bytes) or bind the tensor to an arena of the plan",
                        binding.offset,
                        binding.role.as_str(),
                        arena_name.memory,
                        binding.offset.saturating_add(tensor.size)
                    );
                    self.report(
                        Violation::new(ViolationKind::MissingArena, message)
                            .tensor(name)
                            .arena(arena_name),
                    );
                }
                continue;
            };
            let arena = &self.plan.arenas[arena_position];
            if binding.source_memory != arena.source_memory {
                let arena_source = self.memory_name(arena.source_memory);
                let name = self.tensor_name(tensor_index);
                let arena_name =
                    self.arena_name(binding.role, binding.memory, binding.source_memory);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject} at offset {} is bound with source memory {}, but its {} arena in {} \
                     has source memory {arena_source}; all slots of an arena share the arena's \
                     source memory: the planner must bind it with source memory \
                     {arena_source} or put it in an arena of its own",
                    binding.offset,
                    arena_name.source_memory,
                    binding.role.as_str(),
                    arena_name.memory
                );
                self.report(
                    Violation::new(ViolationKind::SlotSourceMismatch, message)
                        .tensor(name)
                        .arena(arena_name),
                );
            }
            if tensor.size == 0 {
                continue;
            }
            if tensor.alignment > 1 && binding.offset % tensor.alignment != 0 {
                let name = self.tensor_name(tensor_index);
                let arena_name =
                    self.arena_name(binding.role, binding.memory, binding.source_memory);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject} is at offset {} in the {arena_name}, which is not a \
                     multiple of its alignment {}; the planner must use an aligned offset (the \
                     next one is {})",
                    binding.offset,
                    tensor.alignment,
                    memplan_plugin_api::bounds::align_up(binding.offset, tensor.alignment)
                );
                self.report(
                    Violation::new(ViolationKind::Misaligned, message)
                        .tensor(name)
                        .arena(arena_name),
                );
            }
            let end = binding.offset.saturating_add(tensor.size);
            if end > arena.size {
                let name = self.tensor_name(tensor_index);
                let arena_name =
                    self.arena_name(binding.role, binding.memory, binding.source_memory);
                let subject = self.described(tensor_index);
                let message = format!(
                    "{subject} at offset {} ends at byte {end}, past the end of the \
                     {arena_name} ({} bytes); the planner must grow the arena to at least {end} \
                     bytes or place the tensor lower",
                    binding.offset, arena.size
                );
                self.report(
                    Violation::new(ViolationKind::OutOfArena, message)
                        .tensor(name)
                        .arena(arena_name),
                );
            }
            slots[arena_position].push(Slot {
                tensor: tensor_index,
                offset: binding.offset,
                size: tensor.size,
                alignment: tensor.alignment,
                lifetime: tensor.lifetime,
            });
        }
        self.check_slot_alignments(&slots);
        slots
    }

    /// Contract 4: an arena's base alignment is at least every slot's alignment, or an aligned
    /// offset would not be an aligned address. Reported once per arena, naming the slot that
    /// needs the most.
    fn check_slot_alignments(&mut self, slots: &[Vec<Slot>]) {
        for (arena_position, arena_slots) in slots.iter().enumerate() {
            let arena = &self.plan.arenas[arena_position];
            let Some(neediest) = arena_slots.iter().max_by_key(|slot| slot.alignment) else {
                continue;
            };
            if !arena.alignment.is_power_of_two() || arena.alignment >= neediest.alignment {
                continue;
            }
            let name = self.tensor_name(neediest.tensor);
            let subject = self.described(neediest.tensor);
            let arena_name = self.arena_name(arena.role, arena.memory, arena.source_memory);
            let message = format!(
                "the {arena_name} has alignment {}, but {subject} at offset {} needs alignment {}: \
                 an aligned offset in an under-aligned arena is not an aligned address; the \
                 planner must align the arena to at least {}",
                arena.alignment, neediest.offset, neediest.alignment, neediest.alignment
            );
            self.report(
                Violation::new(ViolationKind::BadArenaAlignment, message)
                    .tensor(name)
                    .arena(arena_name),
            );
        }
    }

    /// Contract 5 for aliases: an alias has no slot of its own; it must have its root's
    /// binding (role, memory, source memory) at the root's offset plus the view offset.
    pub(super) fn check_aliases(&mut self, allocation_of: &[Option<usize>]) {
        for (index, tensor) in self.request.tensors.iter().enumerate() {
            let Some(alias) = tensor.alias_of.into_option() else {
                continue;
            };
            // A missing allocation of either side is reported already.
            let (Some(position), Some(Some(root_position))) =
                (allocation_of[index], allocation_of.get(alias.root as usize))
            else {
                continue;
            };
            let binding = self.plan.allocations[position].binding;
            let root_binding = self.plan.allocations[*root_position].binding;
            let expected = root_binding.offset.saturating_add(alias.offset);
            let same_arena = (binding.role, binding.memory, binding.source_memory)
                == (
                    root_binding.role,
                    root_binding.memory,
                    root_binding.source_memory,
                );
            if same_arena && binding.offset == expected {
                continue;
            }
            let name = self.tensor_name(index as u32);
            let subject = self.described(index as u32);
            let root_name = self.tensor_name(alias.root);
            let arena_name = self.arena_name(binding.role, binding.memory, binding.source_memory);
            let root_arena = self.arena_name(
                root_binding.role,
                root_binding.memory,
                root_binding.source_memory,
            );
            let message = if !same_arena {
                format!(
                    "{subject} is a view of {root_name} at view offset {}, so it \
                     belongs in its root's {root_arena}, but it is bound to the {arena_name}; \
                     the planner must give an alias its root's binding at offset {expected}",
                    alias.offset
                )
            } else {
                format!(
                    "{subject} is a view of {root_name} at view offset {}; the root \
                     is at offset {} in the {root_arena}, so the view must be at offset \
                     {expected}, but it is at {}; the planner must place an alias at its \
                     root's offset plus the view offset",
                    alias.offset, root_binding.offset, binding.offset
                )
            };
            self.report(
                Violation::new(ViolationKind::AliasMisplaced, message)
                    .tensor(name)
                    .other_tensor(root_name)
                    .arena(arena_name),
            );
        }
    }

    /// An external tensor has an allocation: it lives in the caller's buffer, not an arena.
    fn report_external_placed(&mut self, tensor: u32, position: usize) {
        let binding = self.plan.allocations[position].binding;
        let name = self.tensor_name(tensor);
        let subject = self.described(tensor);
        let arena_name = self.arena_name(binding.role, binding.memory, binding.source_memory);
        let message = format!(
            "{subject} is external (in a buffer the caller owns and binds at run time), but \
             allocation #{position} places it at offset {} in {}; the plan must leave external \
             tensors out of every arena",
            binding.offset,
            self.binding_arena_text(&binding)
        );
        self.report(
            Violation::new(ViolationKind::ExternalPlaced, message)
                .tensor(name)
                .arena(arena_name),
        );
    }

    /// "the scratch arena in SRAM" for messages about a binding.
    fn binding_arena_text(&self, binding: &Binding) -> String {
        format!(
            "the {}",
            self.arena_name(binding.role, binding.memory, binding.source_memory)
        )
    }
}
