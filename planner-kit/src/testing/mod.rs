//! Helpers for planner tests and benchmarks: building buffers, requests and allocations by
//! hand, a seeded generator for random instances ([`XorShift64Star`]), and checking that a
//! packing, or a whole plan, is valid.
//!
//! Behind the kit's `testing` feature (and the kit's own `cfg(test)`), so that every planner
//! crate's tests, and the host's tests and benchmarks, share one copy through a
//! dev-dependency while shipped plugins carry none of it. The validity checks are plain pairwise
//! comparisons, O(n^2): meant for test inputs of a few thousand buffers, not for production
//! paths (the host's checker does the O(n log n) sweep and is the authority on plans).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::time::Instant;

use memplan_plugin_api::abi_stable::std_types::{ROption, RStr, RString};

use crate::{Buffer, FixedOffset, Packing};
use memplan_plugin_api::{
    Allocation, ArenaRole, Binding, HostContext, Lifetime, LogLevel, MemoryPlan, MemoryRequest,
    PlanRequest, TensorKind, TensorRequest,
};

pub use crate::random::XorShift64Star;

mod generators;
mod instances;
pub use generators::{
    all_live_trace, band_trace, compiler_trace, even_compiler_trace, generated_instance,
    random_lifetime_trace, random_lifetime_trace_over, CUT_STEPS, CUT_WIDTH, GENERATED_SPECS,
};
pub use instances::{
    corpus_dir, corpus_root, csv_files, minimalloc_csv, model_like_trace, read_minimalloc,
    rectangle_cut, single_memory_request, tflm_greedy_medium, TFLM_HEAD,
};

/// CPU time this thread has run for (Linux `/proc/thread-self/schedstat`), `None`
/// elsewhere. For benchmarks on a shared machine: wall time includes waiting for a core, CPU
/// time does not.
pub fn thread_cpu_time() -> Option<std::time::Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(nanos))
}

extern "C" fn no_log(_: *const c_void, _: LogLevel, _: RStr<'_>) {}

extern "C" fn past_deadline(state: *const c_void) -> bool {
    // SAFETY: `state` is the `Instant` that `with_deadline` borrows for the call.
    let deadline = unsafe { &*(state as *const Instant) };
    Instant::now() >= *deadline
}

extern "C" fn ms_to_deadline(state: *const c_void) -> u64 {
    // SAFETY: as in `past_deadline`.
    let deadline = unsafe { &*(state as *const Instant) };
    deadline
        .saturating_duration_since(Instant::now())
        .as_millis() as u64
}

/// A host context that asks the planner to stop from `deadline` on (which must outlive the
/// call), as the host does with `--timeout`; it drops log lines.
pub fn with_deadline(deadline: &Instant) -> HostContext {
    // SAFETY: the callbacks read an `Instant` through the state, and the caller keeps
    // `deadline` alive for as long as the context is used.
    unsafe {
        HostContext::from_host_callbacks(
            deadline as *const Instant as *const c_void,
            no_log,
            past_deadline,
            ms_to_deadline,
        )
    }
}

/// A buffer of `size` bytes, alignment 1, live over the inclusive steps `first..=last`.
pub fn buffer(size: u64, first: u32, last: u32) -> Buffer {
    Buffer {
        size,
        alignment: 1,
        lifetime: Lifetime::new(first, last),
        fixed_offset: FixedOffset::NONE,
    }
}

/// A tensor request of `kind` and `size` bytes, alignment 16, live over the inclusive steps
/// `first..=last`, with no alias, fixed offset or memory: set those fields as a test needs.
pub fn tensor(id: &str, kind: TensorKind, size: u64, first: u32, last: u32) -> TensorRequest {
    TensorRequest {
        id: RString::from(id),
        kind,
        size,
        alignment: 16,
        lifetime: Lifetime::new(first, last),
        alias_of: ROption::RNone,
        fixed_offset: ROption::RNone,
        memory: ROption::RNone,
        source_memory: ROption::RNone,
    }
}

/// A memory with arena alignment 16.
pub fn memory(
    name: &str,
    budget: Option<u64>,
    writable: bool,
    order: Option<u32>,
) -> MemoryRequest {
    MemoryRequest {
        name: RString::from(name),
        budget: budget.into(),
        writable,
        scratch_order: order.into(),
        arena_alignment: 16,
    }
}

/// The allocation of tensor `tensor` at `offset` of the `role` arena of `memory`, whose initial
/// bytes also come from `memory` (every arena but a staged constant one).
pub fn allocation(tensor: u32, role: ArenaRole, memory: u32, offset: u64, size: u64) -> Allocation {
    let binding = Binding {
        role,
        memory,
        source_memory: memory,
        offset,
    };
    Allocation::new(tensor, binding, size)
}

/// Every way `packing` breaks the packing contract for `buffers`: wrong number of offsets,
/// misaligned offsets, moved fixed offsets, a height that is not the highest end, and pairs of
/// buffers live at the same time whose bytes overlap.
pub fn packing_violations(buffers: &[Buffer], packing: &Packing) -> Vec<String> {
    let mut violations = Vec::new();
    if packing.offsets.len() != buffers.len() {
        violations.push(format!(
            "{} offsets for {} buffers",
            packing.offsets.len(),
            buffers.len()
        ));
        return violations;
    }
    let mut highest = 0;
    for (index, (buffer, &offset)) in buffers.iter().zip(&packing.offsets).enumerate() {
        highest = u64::max(highest, offset + buffer.size);
        if buffer.alignment > 1 && offset % buffer.alignment != 0 {
            violations.push(format!(
                "buffer {index} at {offset} is not aligned to {}",
                buffer.alignment
            ));
        }
        if let Some(fixed) = buffer.fixed_offset.get() {
            if fixed != offset {
                violations.push(format!(
                    "buffer {index} moved from fixed {fixed} to {offset}"
                ));
            }
        }
    }
    if highest != packing.height {
        violations.push(format!(
            "height {} but the highest end is {highest}",
            packing.height
        ));
    }
    // Only pairs live together are compared: in order of first step, a buffer meets those
    // that start before it ends (O(n log n) plus the pairs live together, where comparing
    // every pair took minutes at 500,000 buffers).
    let mut by_first: Vec<usize> = (0..buffers.len())
        .filter(|&index| buffers[index].size > 0)
        .collect();
    by_first.sort_unstable_by_key(|&index| (buffers[index].lifetime.first, index));
    let mut overlapping = Vec::new();
    for (at, &a) in by_first.iter().enumerate() {
        let x = &buffers[a];
        for &b in by_first[at + 1..]
            .iter()
            .take_while(|&&b| buffers[b].lifetime.first <= x.lifetime.last)
        {
            let y = &buffers[b];
            let (ox, oy) = (packing.offsets[a], packing.offsets[b]);
            if ox < oy + y.size && oy < ox + x.size {
                overlapping.push((a.min(b), a.max(b)));
            }
        }
    }
    overlapping.sort_unstable();
    for (a, b) in overlapping {
        let (ox, oy) = (packing.offsets[a], packing.offsets[b]);
        violations.push(format!(
            "buffers {a} [{ox}, {}) and {b} [{oy}, {}) overlap while both live",
            ox + buffers[a].size,
            oy + buffers[b].size
        ));
    }
    violations
}

/// Panics with every violation when `packing` is not a valid packing of `buffers`.
pub fn assert_valid_packing(buffers: &[Buffer], packing: &Packing) {
    let violations = packing_violations(buffers, packing);
    assert!(
        violations.is_empty(),
        "invalid packing:\n  {}",
        violations.join("\n  ")
    );
}

/// Every way `plan` breaks the plan contract for `request` that a planner can get wrong:
/// tensors without exactly one allocation, bindings to the wrong role or to a missing arena,
/// misaligned or out-of-arena slots, live tensors overlapping in one arena, aliases off their
/// root's slot, and memories whose arenas exceed the budget.
pub fn plan_violations(request: &PlanRequest, plan: &MemoryPlan) -> Vec<String> {
    let mut violations = Vec::new();
    let mut allocation_of = vec![None; request.tensors.len()];
    for allocation in plan.allocations.iter() {
        match allocation_of.get_mut(allocation.tensor as usize) {
            Some(slot @ None) => *slot = Some(*allocation),
            Some(Some(_)) => {
                violations.push(format!("tensor {} allocated twice", allocation.tensor))
            }
            None => violations.push(format!(
                "allocation of unknown tensor {}",
                allocation.tensor
            )),
        }
    }
    let arenas: BTreeMap<_, _> = plan
        .arenas
        .iter()
        .map(|a| ((a.role, a.memory, a.source_memory), a))
        .collect();
    let mut used = vec![0u64; request.memories.len()];
    for arena in plan.arenas.iter() {
        used[arena.memory as usize] += arena.size;
        if !arena.alignment.is_power_of_two() {
            violations.push(format!(
                "arena alignment {} is not a power of two",
                arena.alignment
            ));
        }
    }
    for (memory, &bytes) in request.memories.iter().zip(&used) {
        if let Some(budget) = memory.budget.into_option() {
            if bytes > budget {
                violations.push(format!(
                    "{} holds {bytes} bytes, budget {budget}",
                    memory.name
                ));
            }
        }
    }
    // Non-empty, non-alias slots per arena, for the pairwise overlap check.
    let mut slots: BTreeMap<_, Vec<usize>> = BTreeMap::new();
    for (index, tensor) in request.tensors.iter().enumerate() {
        let Some(allocation) = allocation_of[index] else {
            violations.push(format!("tensor {} has no allocation", tensor.id));
            continue;
        };
        let binding = allocation.binding;
        let key = (binding.role, binding.memory, binding.source_memory);
        if allocation.offset != binding.offset || allocation.size != tensor.size {
            violations.push(format!(
                "tensor {}: allocation disagrees with binding",
                tensor.id
            ));
        }
        if binding.role != tensor.kind.role() {
            violations.push(format!(
                "tensor {} bound to a {:?} arena",
                tensor.id, binding.role
            ));
        }
        if let Some(alias) = tensor.alias_of.into_option() {
            let root = allocation_of[alias.root as usize].map(|a| a.binding);
            let expected =
                root.map(|r| (r.role, r.memory, r.source_memory, r.offset + alias.offset));
            let actual = (
                binding.role,
                binding.memory,
                binding.source_memory,
                binding.offset,
            );
            if expected != Some(actual) {
                violations.push(format!(
                    "alias {} is not at its root's slot plus {}",
                    tensor.id, alias.offset
                ));
            }
            continue;
        }
        if tensor.size == 0 {
            continue;
        }
        let Some(arena) = arenas.get(&key) else {
            violations.push(format!(
                "tensor {} bound to a missing arena {key:?}",
                tensor.id
            ));
            continue;
        };
        if binding.offset % tensor.alignment.max(1) != 0 {
            violations.push(format!(
                "tensor {} at {} not aligned to {}",
                tensor.id, binding.offset, tensor.alignment
            ));
        }
        if let Some(fixed) = tensor.fixed_offset.into_option() {
            if fixed != binding.offset {
                violations.push(format!(
                    "tensor {} moved from fixed offset {fixed}",
                    tensor.id
                ));
            }
        }
        if binding.offset + tensor.size > arena.size {
            violations.push(format!(
                "tensor {} ends past its arena ({})",
                tensor.id, arena.size
            ));
        }
        slots.entry(key).or_default().push(index);
    }
    for members in slots.values() {
        for (position, &a) in members.iter().enumerate() {
            for &b in &members[position + 1..] {
                let (x, y) = (&request.tensors[a], &request.tensors[b]);
                let (ox, oy) = (
                    allocation_of[a].unwrap().offset,
                    allocation_of[b].unwrap().offset,
                );
                if x.lifetime.overlaps(y.lifetime) && ox < oy + y.size && oy < ox + x.size {
                    violations.push(format!(
                        "tensors {} and {} overlap while both live",
                        x.id, y.id
                    ));
                }
            }
        }
    }
    violations
}

/// Panics with every violation when `plan` is not a valid plan for `request`.
pub fn assert_valid_plan(request: &PlanRequest, plan: &MemoryPlan) {
    let violations = plan_violations(request, plan);
    assert!(
        violations.is_empty(),
        "invalid plan:\n  {}",
        violations.join("\n  ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_and_percentages_stay_in_range() {
        let mut random = XorShift64Star::new(3);
        let picks: Vec<u32> = (0..1000).map(|_| random.pick(&[2, 4, 8])).collect();
        for item in [2, 4, 8] {
            assert!(picks.contains(&item), "{item} never picked");
        }
        assert!(picks.iter().all(|pick| [2, 4, 8].contains(pick)));
        assert!((0..1000).all(|_| !random.percent(0) && random.percent(100)));
        let hits = (0..10_000).filter(|_| random.percent(30)).count();
        assert!((2_700..3_300).contains(&hits), "{hits} of 10000 at 30%");
    }

    #[test]
    fn allocations_take_their_offset_from_the_binding() {
        let allocation = allocation(3, ArenaRole::Constant, 1, 48, 16);
        assert_eq!(allocation.tensor, 3);
        assert_eq!(allocation.binding.source_memory, 1);
        assert_eq!(allocation.offset, allocation.binding.offset);
        assert_eq!((allocation.offset, allocation.size), (48, 16));
    }

    #[test]
    fn overlapping_live_buffers_are_reported() {
        let buffers = vec![buffer(10, 0, 3), buffer(10, 3, 5), buffer(10, 4, 5)];
        let bad = Packing {
            offsets: vec![0, 5, 0],
            height: 15,
            note: String::new(),
        };
        let violations = packing_violations(&buffers, &bad);
        assert_eq!(violations.len(), 2, "{violations:?}");
        let good = Packing {
            offsets: vec![0, 10, 0],
            height: 20,
            note: String::new(),
        };
        assert!(packing_violations(&buffers, &good).is_empty());
    }

    #[test]
    fn misalignment_moved_fixed_offsets_and_wrong_height_are_reported() {
        let buffers = vec![
            Buffer {
                alignment: 8,
                ..buffer(8, 0, 0)
            },
            Buffer {
                fixed_offset: FixedOffset::at(32),
                ..buffer(8, 0, 0)
            },
        ];
        let packing = Packing {
            offsets: vec![4, 16],
            height: 40,
            note: String::new(),
        };
        assert_eq!(packing_violations(&buffers, &packing).len(), 3);
    }
}
