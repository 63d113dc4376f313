//! Check stage: verifies a plan against the request before anything is rendered.
//!
//! A plan comes from a plugin (code we did not write) or from a plan file (possibly written by
//! another tool), so nothing in it is trusted. Every contract listed in docs/plan-format.md
//! ("What `check` reports") is checked and every violation reported, not just the first; each
//! kind of violation is a [`ViolationKind`] and names the tensors, arena, offsets, sizes and
//! lifetimes involved and what the planner must do instead.
//!
//! The passes, each O(n log n) or better in the number of tensors and arenas:
//! - `arenas`: arena-level rules (known memory, one arena per role and memory, source
//!   memory, alignment, writable memory, budgets);
//! - `allocations`: one allocation per tensor, role, memory, arena, bounds, alignment,
//!   fixed offsets, aliases;
//! - `overlap`: per arena, a sweep over time with the live slots ordered by offset, so each
//!   new slot is compared with its two neighbours only; and the arena lower bounds.
//!
//! `embedded_tflite` checks the offline plan a `.tflite` model carries, for `memplan check
//! MODEL.tflite` without a plan file.

mod allocations;
mod arenas;
pub mod embedded_tflite;
mod overlap;
mod violation;

use memplan_plugin_api::{ArenaRole, Lifetime, MemoryPlan, PlanRequest};

use crate::analyze::{Analysis, ExternalTensors};
pub use violation::{ArenaName, TensorName, Violation, ViolationKind, Violations, SHOWN_IN_TEXT};

/// A plan that passed every check, with the lower bound of each of its arenas.
#[derive(Clone, Debug)]
pub struct CheckedPlan {
    pub plan: MemoryPlan,
    /// Lower bound of each arena of `plan.arenas`, same order: the max over steps of the
    /// aligned sizes of the tensors (aliases excluded) live in it.
    pub lower_bounds: Vec<u64>,
}

/// A checked plan is still a plan: best-of selection compares checked plans.
impl std::borrow::Borrow<MemoryPlan> for CheckedPlan {
    fn borrow(&self) -> &MemoryPlan {
        &self.plan
    }
}

/// What a plan file reader could not turn into request indices. Memories the target does not
/// have are given indices from `request.memories.len()` on, named here, so that the checker
/// reports them once with their names; allocations naming tensors the model does not have
/// cannot be represented in a [`MemoryPlan`] and arrive as ready-made violations.
#[derive(Clone, Debug, Default)]
pub struct Resolution {
    /// Name of memory index `request.memories.len() + k` at position `k`.
    pub unknown_memory_names: Vec<String>,
    /// Violations found while resolving names (unknown tensor ids).
    pub violations: Vec<Violation>,
}

/// Checks a plan produced by a planner for `analysis`. Returns the plan with its lower bounds,
/// or every violation (which converts into an [`crate::Error`] of kind `Rejected`, exit 3).
pub fn check_plan(analysis: &Analysis, plan: MemoryPlan) -> Result<CheckedPlan, Violations> {
    check_resolved_plan(analysis, plan, Resolution::default())
}

/// Checks a plan read from a file, together with what its reader could not resolve.
pub fn check_resolved_plan(
    analysis: &Analysis,
    plan: MemoryPlan,
    resolution: Resolution,
) -> Result<CheckedPlan, Violations> {
    let Resolution {
        unknown_memory_names,
        violations,
    } = resolution;
    let mut checker = Checker {
        request: &analysis.request,
        names: &analysis.names,
        external: &analysis.external,
        target: &analysis.target,
        unknown_memory_names: &unknown_memory_names,
        plan: &plan,
        violations,
    };
    let arena_index = checker.check_arenas();
    let allocation_of = checker.index_allocations();
    let slots = checker.check_allocations(&arena_index, &allocation_of);
    checker.check_aliases(&allocation_of);
    checker.check_overlaps(&slots);
    checker.check_budgets();
    let lower_bounds = overlap::lower_bounds(&slots);

    let mut violations = checker.violations;
    if violations.is_empty() {
        Ok(CheckedPlan { plan, lower_bounds })
    } else {
        // Contract order reads best; within a contract, the order the passes found them.
        violations.sort_by_key(|violation| violation.contract);
        Err(Violations(violations))
    }
}

/// One sized, non-alias tensor placed in an arena: what the overlap sweep and the lower
/// bound look at.
#[derive(Clone, Copy, Debug)]
struct Slot {
    tensor: u32,
    offset: u64,
    size: u64,
    alignment: u64,
    lifetime: Lifetime,
}

impl Slot {
    /// One past the last byte (saturating: an offset near `u64::MAX` is caught as out of the
    /// arena, not as an arithmetic overflow).
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// The state shared by the passes: the request, the plan and the violations found so far.
struct Checker<'a> {
    request: &'a PlanRequest,
    names: &'a [String],
    /// Tensors in the caller's buffers: they must have no allocation.
    external: &'a ExternalTensors,
    target: &'a str,
    unknown_memory_names: &'a [String],
    plan: &'a MemoryPlan,
    violations: Vec<Violation>,
}

impl Checker<'_> {
    fn report(&mut self, violation: Violation) {
        self.violations.push(violation);
    }

    fn tensor_name(&self, index: u32) -> TensorName {
        let tensor = &self.request.tensors[index as usize];
        TensorName {
            index: Some(index),
            id: tensor.id.to_string(),
            name: crate::analyze::name_or_id(self.names, index as usize, &tensor.id).to_string(),
        }
    }

    /// `tensor `id` ("name") (kind, N bytes, steps [first, last])`: how a message introduces
    /// the tensor it is about.
    fn described(&self, index: u32) -> String {
        let tensor = &self.request.tensors[index as usize];
        format!(
            "{} ({}, {} bytes, {})",
            self.tensor_name(index),
            tensor.kind.as_str(),
            tensor.size,
            steps(tensor.lifetime)
        )
    }

    fn is_known_memory(&self, index: u32) -> bool {
        (index as usize) < self.request.memories.len()
    }

    fn memory_name(&self, index: u32) -> String {
        let known = self.request.memories.len();
        match self.request.memories.get(index as usize) {
            Some(memory) => memory.name.to_string(),
            None => self
                .unknown_memory_names
                .get(index as usize - known)
                .cloned()
                .unwrap_or_else(|| format!("#{index}")),
        }
    }

    /// The target's memories, for messages about unknown ones.
    fn known_memories_text(&self) -> String {
        let names: Vec<&str> = self
            .request
            .memories
            .iter()
            .map(|memory| memory.name.as_str())
            .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }

    fn arena_name(&self, role: ArenaRole, memory: u32, source_memory: u32) -> ArenaName {
        ArenaName {
            role,
            memory: self.memory_name(memory),
            source_memory: self.memory_name(source_memory),
        }
    }
}

/// `[first, last]`, the way every message writes an inclusive lifetime.
fn steps(lifetime: Lifetime) -> String {
    format!("steps [{}, {}]", lifetime.first, lifetime.last)
}

/// A memory and a source memory, the source left out when it is the same memory, so that a
/// problem with one memory is reported once.
fn distinct_memories(memory: u32, source_memory: u32) -> impl Iterator<Item = u32> {
    std::iter::once(memory).chain((source_memory != memory).then_some(source_memory))
}

/// The position in `plan.arenas` of the arena of each (role, memory): the arena a binding
/// refers to. A flat table over the request's memories (a look-up per tensor must be cheap);
/// the first arena wins over duplicates.
struct ArenaIndex {
    memory_count: usize,
    positions: Vec<Option<usize>>,
}

impl ArenaIndex {
    const ROLES: usize = 3;

    fn new(memory_count: usize) -> Self {
        ArenaIndex {
            memory_count,
            positions: vec![None; Self::ROLES * memory_count],
        }
    }

    fn slot(&self, role: ArenaRole, memory: u32) -> Option<usize> {
        let memory = memory as usize;
        (memory < self.memory_count).then(|| role as usize * self.memory_count + memory)
    }

    /// The arena of `role` in `memory`, if the plan has one (`None` for unknown memories).
    fn get(&self, role: ArenaRole, memory: u32) -> Option<usize> {
        self.slot(role, memory)
            .and_then(|slot| self.positions[slot])
    }

    /// Records the arena at `position`; `memory` must be one of the request's.
    fn insert(&mut self, role: ArenaRole, memory: u32, position: usize) {
        let slot = self
            .slot(role, memory)
            .expect("only arenas in known memories are indexed");
        self.positions[slot] = Some(position);
    }
}

#[cfg(test)]
mod tests;

/// Helpers for unit tests of the stages that take an [`Analysis`].
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;

    use memplan_plugin_api::PlanRequest;

    use crate::analyze::Analysis;

    /// The analysis of `request` for a model file `model.json` on target `generic`, tensors
    /// named by `names` (by index), no constant bytes.
    pub(crate) fn analysis(request: PlanRequest, names: &[&str]) -> Analysis {
        let count = request.tensors.len();
        Analysis {
            source: PathBuf::from("model.json"),
            target: "generic".to_string(),
            request,
            names: names.iter().map(|name| name.to_string()).collect(),
            // Not read by the stages under test.
            memory_lower_bounds: Vec::new(),
            pinned_overflow: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            tflite: None,
            order: None,
            constant_data: vec![None; count],
            external: Default::default(),
        }
    }
}
