//! Arena-level contracts: every arena is in a memory of the target, one arena per role and
//! memory (2); only constant arenas have a source memory of their own (3); arena alignments
//! are powers of two and at least the memory's minimum (4); scratch, persistent and staged
//! constant arenas sit in writable memories, and the arenas of a memory fit its budget (6).

use memplan_plugin_api::ArenaRole;

use super::{distinct_memories, ArenaIndex, Checker, Violation, ViolationKind};

impl Checker<'_> {
    /// Checks each arena on its own and returns the index of arenas by (role, memory).
    pub(super) fn check_arenas(&mut self) -> ArenaIndex {
        let mut index = ArenaIndex::new(self.request.memories.len());
        for (position, arena) in self.plan.arenas.iter().enumerate() {
            let name = self.arena_name(arena.role, arena.memory, arena.source_memory);
            let mut known = true;
            for memory in distinct_memories(arena.memory, arena.source_memory) {
                if !self.is_known_memory(memory) {
                    known = false;
                    let message = format!(
                        "arena #{position} ({name}, {} bytes) names memory {}, which target `{}` \
                         does not have (it has {}); the planner must place arenas only in the \
                         request's memories",
                        arena.size,
                        self.memory_name(memory),
                        self.target,
                        self.known_memories_text()
                    );
                    self.report(
                        Violation::new(ViolationKind::UnknownMemory, message)
                            .arena(name.clone())
                            .memory(self.memory_name(memory)),
                    );
                }
            }
            if !known {
                continue;
            }
            if let Some(first) = index.get(arena.role, arena.memory) {
                let other = &self.plan.arenas[first];
                let message = format!(
                    "the plan has two {} arenas in {}: arena #{first} ({} bytes) and arena \
                     #{position} ({} bytes); the planner must use one arena per role and memory",
                    arena.role.as_str(),
                    name.memory,
                    other.size,
                    arena.size
                );
                self.report(
                    Violation::new(ViolationKind::DuplicateArena, message).arena(name.clone()),
                );
            } else {
                index.insert(arena.role, arena.memory, position);
            }
            if arena.role != ArenaRole::Constant && arena.source_memory != arena.memory {
                let message = format!(
                    "the {} arena in {} ({} bytes) has source memory {}; only constant arenas \
                     are staged from another memory: the planner must set its source memory to {}",
                    arena.role.as_str(),
                    name.memory,
                    arena.size,
                    name.source_memory,
                    name.memory
                );
                self.report(
                    Violation::new(ViolationKind::ArenaSourceMismatch, message).arena(name.clone()),
                );
            }
            let memory = &self.request.memories[arena.memory as usize];
            if !arena.alignment.is_power_of_two() {
                let message = format!(
                    "the {name} ({} bytes) has alignment {}, which is not a power of two; the \
                     planner must use a power of two of at least {}",
                    arena.size, arena.alignment, memory.arena_alignment
                );
                self.report(
                    Violation::new(ViolationKind::BadArenaAlignment, message).arena(name.clone()),
                );
            } else if arena.alignment < memory.arena_alignment {
                let message = format!(
                    "the {name} ({} bytes) has alignment {}, below the minimum arena alignment {} of \
                     {}; the planner must align the arena to at least {}",
                    arena.size,
                    arena.alignment,
                    memory.arena_alignment,
                    name.memory,
                    memory.arena_alignment
                );
                self.report(
                    Violation::new(ViolationKind::BadArenaAlignment, message).arena(name.clone()),
                );
            }
            let needs_writable =
                arena.role != ArenaRole::Constant || arena.source_memory != arena.memory;
            if needs_writable && !memory.writable {
                let what = match arena.role {
                    ArenaRole::Constant => "a staged constant arena is written at boot",
                    _ => "scratch and persistent arenas are written at run time",
                };
                let message = format!(
                    "the {name} ({} bytes) is in {}, which is read-only; {what}: the planner must \
                     place it in a writable memory",
                    arena.size, name.memory
                );
                self.report(
                    Violation::new(ViolationKind::ReadOnlyMemory, message)
                        .arena(name.clone())
                        .memory(name.memory.clone()),
                );
            }
        }
        index
    }

    /// Contract 6: per memory, the arenas placed there fit its budget.
    pub(super) fn check_budgets(&mut self) {
        let memory_count = self.request.memories.len();
        let mut used = vec![0u64; memory_count];
        for arena in self.plan.arenas.iter() {
            if let Some(total) = used.get_mut(arena.memory as usize) {
                *total = total.saturating_add(arena.size);
            }
        }
        for (memory_index, memory) in self.request.memories.iter().enumerate() {
            let Some(budget) = memory.budget.into_option() else {
                continue;
            };
            let total = used[memory_index];
            if total <= budget {
                continue;
            }
            let parts: Vec<String> = self
                .plan
                .arenas
                .iter()
                .filter(|arena| arena.memory as usize == memory_index)
                .map(|arena| format!("{} {} bytes", arena.role.as_str(), arena.size))
                .collect();
            let message = format!(
                "the arenas in {} take {total} bytes ({}), {} over its budget of {budget} bytes; \
                 the planner must spill tensors to another memory or pack tighter, and report \
                 that the plan does not fit if it cannot",
                memory.name,
                parts.join(", "),
                total - budget
            );
            self.report(
                Violation::new(ViolationKind::OverBudget, message).memory(memory.name.to_string()),
            );
        }
    }
}
