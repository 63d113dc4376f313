//! Property test of the checker against the real planners.
//!
//! Random valid requests (seeded, so a failure names a reproducible seed) are planned by every
//! planner of every plugin the end-to-end build puts beside the binary; each plan must pass
//! the checker. Then each plan is broken by single mutations — move an offset, drop a tensor,
//! change a role, shrink an arena, misalign — and every mutated plan must be rejected with the
//! violation kind that mutation causes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use memplan::analyze::Analysis;
use memplan::check::{check_plan, ViolationKind};
use memplan_planner_kit::testing::{with_deadline, XorShift64Star};
use memplan_plugin_api::abi_stable::std_types::{RNone, RSome, RString, RVec};
use memplan_plugin_api::{
    AliasOf, ArenaRole, Lifetime, MemoryPlan, MemoryRequest, PlanRequest, TensorKind, TensorRequest,
};

const SEEDS: u64 = 150;

const SRAM: u32 = 0;
const DTCM: u32 = 1;
const MRAM: u32 = 2;

fn memory(name: &str, writable: bool, scratch_order: Option<u32>) -> MemoryRequest {
    MemoryRequest {
        name: RString::from(name),
        budget: RNone,
        writable,
        scratch_order: scratch_order.into(),
        arena_alignment: 16,
    }
}

/// A request the host could have made: inputs from step 0, outputs to the last step,
/// constants (cold in MRAM or staged into SRAM/DTCM) and persistent tensors for the whole run,
/// aliases sharing their root's kind, placement and lifetime, at most one fixed offset, some
/// empty tensors, no budgets.
fn random_request(rng: &mut XorShift64Star) -> PlanRequest {
    let num_steps = 1 + rng.below(12) as u32;
    let last = num_steps - 1;
    let count = 1 + rng.below(40) as usize;
    let mut tensors: Vec<TensorRequest> = Vec::with_capacity(count);
    let mut has_fixed = false;
    for index in 0..count {
        let roots: Vec<usize> = (0..tensors.len())
            .filter(|&i| tensors[i].alias_of.is_none() && tensors[i].size > 0)
            .collect();
        if !roots.is_empty() && rng.percent(12) {
            let root_index = rng.pick(&roots);
            let root = tensors[root_index].clone();
            let offset = rng.below(root.size);
            let size = 1 + rng.below(root.size - offset);
            tensors.push(TensorRequest {
                id: RString::from(index.to_string()),
                size,
                alignment: 1,
                alias_of: RSome(AliasOf {
                    root: root_index as u32,
                    offset,
                }),
                fixed_offset: RNone,
                ..root
            });
            continue;
        }
        let kind = match rng.below(100) {
            0..=9 => TensorKind::Input,
            10..=19 => TensorKind::Output,
            20..=64 => TensorKind::Intermediate,
            65..=86 => TensorKind::Constant,
            _ => TensorKind::Persistent,
        };
        let size = if rng.percent(5) {
            0
        } else {
            1 + rng.below(512)
        };
        let first = rng.below(u64::from(num_steps)) as u32;
        let end = first + rng.below(u64::from(num_steps - first)) as u32;
        let lifetime = match kind {
            TensorKind::Input => Lifetime::new(0, end),
            TensorKind::Output => Lifetime::new(first, last),
            TensorKind::Intermediate => Lifetime::new(first, end),
            TensorKind::Constant | TensorKind::Persistent => Lifetime::new(0, last),
        };
        let (memory, source_memory) = match kind {
            TensorKind::Constant if rng.percent(60) => (RSome(MRAM), RSome(MRAM)),
            TensorKind::Constant => (RSome(rng.pick(&[SRAM, DTCM])), RSome(MRAM)),
            _ if rng.percent(20) => (RSome(DTCM), RNone),
            _ => (RNone, RNone),
        };
        let fixed_offset = if kind == TensorKind::Intermediate && !has_fixed && rng.percent(10) {
            has_fixed = true;
            RSome(64 * rng.below(4))
        } else {
            RNone
        };
        tensors.push(TensorRequest {
            id: RString::from(index.to_string()),
            kind,
            size,
            alignment: rng.pick(&[1, 2, 4, 8, 16, 32]),
            lifetime,
            alias_of: RNone,
            fixed_offset,
            // A fixed offset is only meaningful in a known arena.
            memory: if fixed_offset.is_some() {
                RSome(SRAM)
            } else {
                memory
            },
            source_memory,
        });
    }
    PlanRequest {
        tensors: RVec::from(tensors),
        memories: RVec::from(vec![
            memory("SRAM", true, Some(0)),
            memory("DTCM", true, Some(1)),
            memory("MRAM", false, None),
        ]),
        num_steps,
        options: RString::from("{}"),
    }
}

fn analysis_of(request: PlanRequest) -> Analysis {
    let count = request.tensors.len();
    Analysis {
        source: PathBuf::from("random.json"),
        target: "random".to_string(),
        names: (0..count).map(|i| format!("tensor_{i}")).collect(),
        // Not read by the stages under test.
        memory_lower_bounds: Vec::new(),
        pinned_overflow: None,
        external: Default::default(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        tflite: None,
        order: None,
        constant_data: vec![None; count],
        request,
    }
}

/// The non-alias, non-empty allocations bound to `arena_role`/`arena_memory`: the slots.
fn slots_of(plan: &MemoryPlan, request: &PlanRequest, role: ArenaRole, memory: u32) -> Vec<usize> {
    (0..plan.allocations.len())
        .filter(|&i| {
            let allocation = &plan.allocations[i];
            let tensor = &request.tensors[allocation.tensor as usize];
            tensor.alias_of.is_none()
                && tensor.size > 0
                && allocation.binding.role == role
                && allocation.binding.memory == memory
        })
        .collect()
}

fn set_offset(plan: &mut MemoryPlan, position: usize, offset: u64) {
    plan.allocations[position].offset = offset;
    plan.allocations[position].binding.offset = offset;
}

/// A single change that breaks a valid plan, and the kind of violation it must cause.
type Mutation = fn(&mut XorShift64Star, &PlanRequest, &mut MemoryPlan) -> Option<ViolationKind>;

/// Moves a slot onto another slot of its arena that is live at the same time; without such a
/// pair, moves a slot to the end of its arena.
fn move_an_offset(
    rng: &mut XorShift64Star,
    request: &PlanRequest,
    plan: &mut MemoryPlan,
) -> Option<ViolationKind> {
    let mut pairs = Vec::new();
    let mut lonely = Vec::new();
    for arena in plan.arenas.iter() {
        let slots = slots_of(plan, request, arena.role, arena.memory);
        for &a in &slots {
            lonely.push((a, arena.size));
            for &b in &slots {
                let (ta, tb) = (plan.allocations[a].tensor, plan.allocations[b].tensor);
                let live_together = request.tensors[ta as usize]
                    .lifetime
                    .overlaps(request.tensors[tb as usize].lifetime);
                if a != b && live_together {
                    pairs.push((a, b));
                }
            }
        }
    }
    if !pairs.is_empty() {
        let (a, b) = rng.pick(&pairs);
        let offset = plan.allocations[b].binding.offset;
        set_offset(plan, a, offset);
        Some(ViolationKind::Overlap)
    } else if !lonely.is_empty() {
        let (a, arena_size) = rng.pick(&lonely);
        set_offset(plan, a, arena_size);
        Some(ViolationKind::OutOfArena)
    } else {
        None
    }
}

fn drop_a_tensor(
    rng: &mut XorShift64Star,
    _: &PlanRequest,
    plan: &mut MemoryPlan,
) -> Option<ViolationKind> {
    if plan.allocations.is_empty() {
        return None;
    }
    let position = rng.below(plan.allocations.len() as u64) as usize;
    plan.allocations.remove(position);
    Some(ViolationKind::MissingAllocation)
}

fn change_a_role(
    rng: &mut XorShift64Star,
    request: &PlanRequest,
    plan: &mut MemoryPlan,
) -> Option<ViolationKind> {
    if plan.allocations.is_empty() {
        return None;
    }
    let position = rng.below(plan.allocations.len() as u64) as usize;
    let binding = &mut plan.allocations[position].binding;
    let others: Vec<ArenaRole> = [
        ArenaRole::Scratch,
        ArenaRole::Persistent,
        ArenaRole::Constant,
    ]
    .into_iter()
    .filter(|&role| role != binding.role)
    .collect();
    binding.role = rng.pick(&others);
    let tensor = &request.tensors[plan.allocations[position].tensor as usize];
    Some(if tensor.alias_of.is_some() {
        ViolationKind::AliasMisplaced
    } else {
        ViolationKind::WrongRole
    })
}

/// Makes an arena one byte shorter than its highest slot end.
fn shrink_an_arena(
    rng: &mut XorShift64Star,
    request: &PlanRequest,
    plan: &mut MemoryPlan,
) -> Option<ViolationKind> {
    let used: Vec<(usize, u64)> = plan
        .arenas
        .iter()
        .enumerate()
        .filter_map(|(position, arena)| {
            slots_of(plan, request, arena.role, arena.memory)
                .into_iter()
                .map(|i| plan.allocations[i].binding.offset + plan.allocations[i].size)
                .max()
                .map(|end| (position, end))
        })
        .collect();
    if used.is_empty() {
        return None;
    }
    let (position, end) = rng.pick(&used);
    plan.arenas[position].size = end - 1;
    Some(ViolationKind::OutOfArena)
}

/// Moves a slot that needs alignment one byte up; without one, gives an arena an alignment
/// that is not a power of two.
fn misalign(
    rng: &mut XorShift64Star,
    request: &PlanRequest,
    plan: &mut MemoryPlan,
) -> Option<ViolationKind> {
    let aligned: Vec<usize> = (0..plan.allocations.len())
        .filter(|&i| {
            let tensor = &request.tensors[plan.allocations[i].tensor as usize];
            tensor.alias_of.is_none() && tensor.size > 0 && tensor.alignment > 1
        })
        .collect();
    if !aligned.is_empty() {
        let position = rng.pick(&aligned);
        let offset = plan.allocations[position].binding.offset + 1;
        set_offset(plan, position, offset);
        Some(ViolationKind::Misaligned)
    } else if !plan.arenas.is_empty() {
        let position = rng.below(plan.arenas.len() as u64) as usize;
        plan.arenas[position].alignment = 48;
        Some(ViolationKind::BadArenaAlignment)
    } else {
        None
    }
}

/// How long each planner call may search. The property is validity, not optimality: an
/// anytime planner (`exact`) returns its best plan so far when the host says stop.
const PLANNING_TIME: Duration = Duration::from_millis(100);

const MUTATIONS: [(&str, Mutation); 5] = [
    ("move an offset", move_an_offset),
    ("drop a tensor", drop_a_tensor),
    ("change a role", change_a_role),
    ("shrink an arena", shrink_an_arena),
    ("misalign", misalign),
];

#[test]
fn shipped_planners_pass_the_checker_and_every_mutation_is_caught() {
    // The planners memplan runs: built in, through the same entries their plugin files export.
    let planners = memplan::registry::builtin::entries();
    assert!(
        planners
            .iter()
            .any(|planner| planner.name.as_str() == "linear"),
        "the linear planner must be among the shipped planners"
    );
    for planner in &planners {
        let mut applied = [0usize; MUTATIONS.len()];
        for seed in 0..SEEDS {
            let mut rng = XorShift64Star::new(seed);
            let analysis = analysis_of(random_request(&mut rng));
            let deadline = Instant::now() + PLANNING_TIME;
            let plan = (planner.plan)(&analysis.request, &with_deadline(&deadline))
                .into_result()
                .unwrap_or_else(|error| {
                    panic!("planner {} failed on seed {seed}: {error}", planner.name)
                });
            if let Err(violations) = check_plan(&analysis, plan.clone()) {
                panic!(
                    "planner {} seed {seed}: a valid request's plan was rejected:\n{}",
                    planner.name,
                    violations.to_text()
                );
            }
            for (slot, (label, mutate)) in MUTATIONS.iter().enumerate() {
                let mut broken = plan.clone();
                let Some(expected) = mutate(&mut rng, &analysis.request, &mut broken) else {
                    continue;
                };
                applied[slot] += 1;
                let violations = check_plan(&analysis, broken).err().unwrap_or_else(|| {
                    panic!(
                        "planner {} seed {seed}: `{label}` was not caught",
                        planner.name
                    )
                });
                assert!(
                    violations.contains(expected),
                    "planner {} seed {seed}: `{label}` should cause {expected}, got:\n{}",
                    planner.name,
                    violations.to_text()
                );
            }
        }
        eprintln!(
            "planner {}: {SEEDS} random requests passed; mutations caught: {applied:?}",
            planner.name
        );
        for (count, (label, _)) in applied.iter().zip(&MUTATIONS) {
            assert!(
                *count as u64 > SEEDS / 2,
                "planner {}: `{label}` applied to only {count} of {SEEDS} plans",
                planner.name
            );
        }
    }
}
