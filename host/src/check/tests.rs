//! One minimal broken plan per contract rule: a valid plan, changed in one place, must fail
//! with exactly the expected kind and a message naming what is involved.

use memplan_planner_kit::testing::{allocation, tensor};
use memplan_plugin_api::abi_stable::std_types::{ROption, RSome, RString, RVec};
use memplan_plugin_api::{
    AliasOf, Allocation, Arena, ArenaRole, Binding, MemoryPlan, MemoryRequest, PlanRequest,
    TensorKind,
};

use super::*;

const SRAM: u32 = 0;
const MRAM: u32 = 1;
const DTCM: u32 = 2;

fn memory(
    name: &str,
    writable: bool,
    scratch_order: Option<u32>,
    budget: Option<u64>,
) -> MemoryRequest {
    MemoryRequest {
        name: RString::from(name),
        budget: ROption::from(budget),
        writable,
        scratch_order: ROption::from(scratch_order),
        arena_alignment: 16,
    }
}

fn arena(role: ArenaRole, memory: u32, source_memory: u32, size: u64) -> Arena {
    Arena {
        role,
        memory,
        source_memory,
        size,
        alignment: 16,
    }
}

/// Indices of the tensors of [`valid`].
const INPUT: u32 = 0;
const MID: u32 = 1;
const OUTPUT: u32 = 2;
const WEIGHTS: u32 = 3;
const BIAS: u32 = 4;
const STATE: u32 = 5;
const VIEW: u32 = 6;
const FIXED: u32 = 7;

/// Positions in `plan.arenas` of [`valid`].
const SCRATCH_SRAM: usize = 0;
const CONST_MRAM: usize = 1;
const CONST_SRAM: usize = 2;
const PERSISTENT_SRAM: usize = 3;

/// A small request covering every kind of tensor (cold and staged constants, an alias, a
/// fixed offset, an empty tensor) and a plan for it that breaks no rule.
fn valid() -> (Analysis, MemoryPlan) {
    let mut tensors = vec![
        tensor("0", TensorKind::Input, 64, 0, 1),
        tensor("1", TensorKind::Intermediate, 32, 1, 2),
        tensor("2", TensorKind::Output, 64, 2, 3),
        tensor("3", TensorKind::Constant, 48, 0, 3),
        tensor("4", TensorKind::Constant, 16, 0, 3),
        tensor("5", TensorKind::Persistent, 32, 0, 3),
        tensor("6", TensorKind::Intermediate, 16, 1, 2),
        tensor("7", TensorKind::Intermediate, 16, 0, 3),
        tensor("8", TensorKind::Intermediate, 0, 1, 1),
    ];
    tensors[WEIGHTS as usize].memory = RSome(MRAM);
    tensors[WEIGHTS as usize].source_memory = RSome(MRAM);
    tensors[BIAS as usize].memory = RSome(SRAM);
    tensors[BIAS as usize].source_memory = RSome(MRAM);
    tensors[VIEW as usize].alias_of = RSome(AliasOf {
        root: MID,
        offset: 16,
    });
    tensors[FIXED as usize].fixed_offset = RSome(128);
    let names = [
        "serving_input",
        "conv_out",
        "softmax_out",
        "conv_weights",
        "conv_bias",
        "rnn_state",
        "conv_out_view",
        "pinned_scratch",
        "empty",
    ];
    let request = PlanRequest {
        tensors: RVec::from(tensors),
        memories: RVec::from(vec![
            memory("SRAM", true, Some(0), Some(1 << 20)),
            memory("MRAM", false, None, None),
            memory("DTCM", true, Some(1), Some(4096)),
        ]),
        num_steps: 4,
        options: RString::from("{}"),
    };
    let analysis = testing::analysis(request, &names);
    let plan = MemoryPlan {
        arenas: RVec::from(vec![
            arena(ArenaRole::Scratch, SRAM, SRAM, 144),
            arena(ArenaRole::Constant, MRAM, MRAM, 48),
            arena(ArenaRole::Constant, SRAM, MRAM, 16),
            arena(ArenaRole::Persistent, SRAM, SRAM, 32),
        ]),
        allocations: RVec::from(vec![
            allocation(INPUT, ArenaRole::Scratch, SRAM, 0, 64),
            allocation(MID, ArenaRole::Scratch, SRAM, 64, 32),
            allocation(OUTPUT, ArenaRole::Scratch, SRAM, 0, 64),
            allocation(WEIGHTS, ArenaRole::Constant, MRAM, 0, 48),
            // A staged constant: in SRAM at run time, its bytes from MRAM.
            Allocation::new(
                BIAS,
                Binding {
                    role: ArenaRole::Constant,
                    memory: SRAM,
                    source_memory: MRAM,
                    offset: 0,
                },
                16,
            ),
            allocation(STATE, ArenaRole::Persistent, SRAM, 0, 32),
            allocation(VIEW, ArenaRole::Scratch, SRAM, 80, 16),
            allocation(FIXED, ArenaRole::Scratch, SRAM, 128, 16),
            allocation(8, ArenaRole::Scratch, SRAM, 0, 0),
        ]),
        summary: RString::new(),
    };
    (analysis, plan)
}

fn allocation_mut(plan: &mut MemoryPlan, tensor: u32) -> &mut Allocation {
    plan.allocations
        .iter_mut()
        .find(|allocation| allocation.tensor == tensor)
        .expect("the valid plan allocates every tensor")
}

fn move_to(plan: &mut MemoryPlan, tensor: u32, offset: u64) {
    let allocation = allocation_mut(plan, tensor);
    allocation.offset = offset;
    allocation.binding.offset = offset;
}

/// Checks and asserts that every violation is of `kind`; returns them.
fn only(analysis: &Analysis, plan: MemoryPlan, kind: ViolationKind) -> Vec<Violation> {
    let violations = check_plan(analysis, plan).expect_err("the plan must be rejected");
    for violation in violations.iter() {
        assert_eq!(violation.kind, kind, "unexpected violation: {violation}");
        assert_eq!(violation.contract, kind.contract());
    }
    violations.0
}

/// `only`, for a change that must produce exactly one violation.
fn the_one(analysis: &Analysis, plan: MemoryPlan, kind: ViolationKind) -> Violation {
    let violations = only(analysis, plan, kind);
    assert_eq!(violations.len(), 1, "{violations:#?}");
    violations.into_iter().next().unwrap()
}

fn assert_mentions(violation: &Violation, parts: &[&str]) {
    for part in parts {
        assert!(
            violation.message.contains(part),
            "`{part}` missing from: {}",
            violation.message
        );
    }
}

fn assert_names_tensor(violation: &Violation, id: &str, name: &str) {
    let tensor = violation.tensor.as_ref().expect("names a tensor");
    assert_eq!((tensor.id.as_str(), tensor.name.as_str()), (id, name));
    assert_mentions(violation, &[&format!("`{id}`"), name]);
}

#[test]
fn the_valid_plan_passes_with_lower_bounds() {
    let (analysis, plan) = valid();
    let checked = check_plan(&analysis, plan).expect("valid");
    // Scratch: at step 1, input 64 + conv_out 32 + pinned 16 (the view has no slot).
    assert_eq!(checked.lower_bounds, vec![112, 48, 16, 32]);
}

#[test]
fn contract_1_missing_allocation() {
    let (analysis, mut plan) = valid();
    plan.allocations
        .retain(|allocation| allocation.tensor != OUTPUT);
    let violation = the_one(&analysis, plan, ViolationKind::MissingAllocation);
    assert_names_tensor(&violation, "2", "softmax_out");
    assert_mentions(
        &violation,
        &["output", "64 bytes", "steps [2, 3]", "scratch"],
    );
}

#[test]
fn contract_1_duplicate_allocation() {
    let (analysis, mut plan) = valid();
    let mut second = *allocation_mut(&mut plan, STATE);
    second.offset = 0;
    plan.allocations.push(second);
    let violation = the_one(&analysis, plan, ViolationKind::DuplicateAllocation);
    assert_names_tensor(&violation, "5", "rnn_state");
    assert_mentions(&violation, &["persistent arena in SRAM", "#5", "#9"]);
}

#[test]
fn contract_1_unknown_tensor() {
    let (analysis, mut plan) = valid();
    plan.allocations
        .push(allocation(99, ArenaRole::Scratch, SRAM, 0, 8));
    let violation = the_one(&analysis, plan, ViolationKind::UnknownTensor);
    assert_mentions(&violation, &["tensor index 99", "9 tensors"]);
}

#[test]
fn contract_1_allocation_offset_disagrees_with_binding() {
    let (analysis, mut plan) = valid();
    allocation_mut(&mut plan, MID).offset = 0;
    let violation = the_one(&analysis, plan, ViolationKind::OffsetMismatch);
    assert_names_tensor(&violation, "1", "conv_out");
    assert_mentions(
        &violation,
        &["offset 0", "binding offset 64", "scratch arena in SRAM"],
    );
}

#[test]
fn contract_1_allocation_size_differs_from_tensor() {
    let (analysis, mut plan) = valid();
    allocation_mut(&mut plan, OUTPUT).size = 60;
    let violation = the_one(&analysis, plan, ViolationKind::SizeMismatch);
    assert_names_tensor(&violation, "2", "softmax_out");
    assert_mentions(&violation, &["64 bytes", "reserves 60 bytes"]);
}

#[test]
fn contract_2_wrong_role() {
    let (analysis, mut plan) = valid();
    // The persistent tensor moves into free scratch space above everything else.
    plan.arenas[SCRATCH_SRAM].size = 192;
    let state = allocation_mut(&mut plan, STATE);
    state.binding.role = ArenaRole::Scratch;
    move_to(&mut plan, STATE, 144);
    let violation = the_one(&analysis, plan, ViolationKind::WrongRole);
    assert_names_tensor(&violation, "5", "rnn_state");
    assert_mentions(
        &violation,
        &["persistent tensor", "scratch arena in SRAM", "offset 144"],
    );
}

#[test]
fn contract_2_wrong_memory() {
    let (mut analysis, plan) = valid();
    analysis.request.tensors[OUTPUT as usize].memory = RSome(DTCM);
    let violation = the_one(&analysis, plan, ViolationKind::WrongMemory);
    assert_names_tensor(&violation, "2", "softmax_out");
    assert_mentions(&violation, &["placed in DTCM", "scratch arena in SRAM"]);
}

#[test]
fn contract_2_wrong_constant_source_memory() {
    let (mut analysis, plan) = valid();
    // The request stores the bias in DTCM; the plan stages it from MRAM.
    analysis.request.tensors[BIAS as usize].source_memory = RSome(DTCM);
    let violation = the_one(&analysis, plan, ViolationKind::WrongMemory);
    assert_names_tensor(&violation, "4", "conv_bias");
    assert_mentions(&violation, &["stored in DTCM", "source memory MRAM"]);
}

#[test]
fn contract_2_unknown_memory_of_an_arena() {
    let (analysis, mut plan) = valid();
    plan.arenas.push(arena(ArenaRole::Scratch, 7, 7, 64));
    let violations = only(&analysis, plan, ViolationKind::UnknownMemory);
    // Memory and source memory are the same unknown memory: one report.
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert_mentions(&violations[0], &["#7", "`generic`", "SRAM, MRAM, DTCM"]);
}

#[test]
fn contract_2_unknown_memory_of_a_binding_uses_the_name_from_the_file() {
    let (analysis, mut plan) = valid();
    let weights = allocation_mut(&mut plan, WEIGHTS);
    weights.binding.memory = 3;
    weights.binding.source_memory = 3;
    let resolution = Resolution {
        unknown_memory_names: vec!["FLASH".to_string()],
        violations: Vec::new(),
    };
    let violations = check_resolved_plan(&analysis, plan, resolution).expect_err("rejected");
    assert!(
        violations
            .iter()
            .all(|v| v.kind == ViolationKind::UnknownMemory),
        "{violations:#?}"
    );
    assert_eq!(violations.len(), 1);
    assert_names_tensor(&violations.0[0], "3", "conv_weights");
    assert_mentions(&violations.0[0], &["memory FLASH"]);
}

#[test]
fn contract_2_missing_arena() {
    let (analysis, mut plan) = valid();
    plan.arenas.remove(CONST_SRAM);
    let violation = the_one(&analysis, plan, ViolationKind::MissingArena);
    assert_names_tensor(&violation, "4", "conv_bias");
    assert_mentions(
        &violation,
        &["constant arena in SRAM (source MRAM)", "at least 16 bytes"],
    );
}

#[test]
fn contract_2_empty_tensors_need_no_arena() {
    let (analysis, mut plan) = valid();
    let empty = allocation_mut(&mut plan, 8);
    empty.binding.memory = DTCM;
    empty.binding.source_memory = DTCM;
    check_plan(&analysis, plan).expect("an empty tensor may be bound where no arena is");
}

#[test]
fn contract_2_duplicate_arena() {
    let (analysis, mut plan) = valid();
    plan.arenas.push(arena(ArenaRole::Scratch, SRAM, SRAM, 16));
    let violation = the_one(&analysis, plan, ViolationKind::DuplicateArena);
    assert_mentions(
        &violation,
        &[
            "two scratch arenas in SRAM",
            "#0 (144 bytes)",
            "#4 (16 bytes)",
        ],
    );
}

#[test]
fn contract_3_slot_source_differs_from_arena_source() {
    let (analysis, mut plan) = valid();
    plan.arenas[CONST_SRAM].source_memory = SRAM;
    let violation = the_one(&analysis, plan, ViolationKind::SlotSourceMismatch);
    assert_names_tensor(&violation, "4", "conv_bias");
    assert_mentions(
        &violation,
        &["source memory MRAM", "has source memory SRAM"],
    );
}

#[test]
fn contract_3_scratch_or_persistent_arena_with_a_source_memory() {
    let (analysis, mut plan) = valid();
    plan.arenas[PERSISTENT_SRAM].source_memory = DTCM;
    allocation_mut(&mut plan, STATE).binding.source_memory = DTCM;
    let violation = the_one(&analysis, plan, ViolationKind::ArenaSourceMismatch);
    assert_mentions(
        &violation,
        &["persistent arena in SRAM", "source memory DTCM"],
    );
}

#[test]
fn contract_4_out_of_arena() {
    let (analysis, mut plan) = valid();
    plan.arenas[SCRATCH_SRAM].size = 140;
    let violation = the_one(&analysis, plan, ViolationKind::OutOfArena);
    assert_names_tensor(&violation, "7", "pinned_scratch");
    assert_mentions(
        &violation,
        &["offset 128", "byte 144", "(140 bytes)", "steps [0, 3]"],
    );
}

#[test]
fn contract_4_misaligned_offset() {
    let (mut analysis, mut plan) = valid();
    analysis.request.tensors[MID as usize].alignment = 128;
    plan.arenas[SCRATCH_SRAM].alignment = 128;
    let violation = the_one(&analysis, plan, ViolationKind::Misaligned);
    assert_names_tensor(&violation, "1", "conv_out");
    assert_mentions(
        &violation,
        &["offset 64", "alignment 128", "next one is 128"],
    );
}

#[test]
fn contract_4_arena_alignment_not_a_power_of_two() {
    let (analysis, mut plan) = valid();
    plan.arenas[PERSISTENT_SRAM].alignment = 24;
    let violation = the_one(&analysis, plan, ViolationKind::BadArenaAlignment);
    assert_mentions(
        &violation,
        &["persistent arena in SRAM", "24", "not a power of two"],
    );
}

#[test]
fn contract_4_arena_alignment_below_the_memory_minimum() {
    let (mut analysis, mut plan) = valid();
    analysis.request.tensors[STATE as usize].alignment = 4;
    plan.arenas[PERSISTENT_SRAM].alignment = 8;
    let violation = the_one(&analysis, plan, ViolationKind::BadArenaAlignment);
    assert_mentions(
        &violation,
        &["alignment 8", "minimum arena alignment 16 of SRAM"],
    );
}

#[test]
fn contract_4_arena_alignment_below_a_slot_alignment() {
    let (mut analysis, plan) = valid();
    analysis.request.tensors[MID as usize].alignment = 32;
    let violation = the_one(&analysis, plan, ViolationKind::BadArenaAlignment);
    assert_names_tensor(&violation, "1", "conv_out");
    assert_mentions(&violation, &["scratch arena in SRAM", "needs alignment 32"]);
}

#[test]
fn contract_4_fixed_offset_moved() {
    let (mut analysis, plan) = valid();
    analysis.request.tensors[FIXED as usize].fixed_offset = RSome(112);
    let violation = the_one(&analysis, plan, ViolationKind::FixedOffsetMoved);
    assert_names_tensor(&violation, "7", "pinned_scratch");
    assert_mentions(&violation, &["fixed offset 112", "offset 128"]);
}

#[test]
fn contract_5_overlap_names_both_tensors_bytes_and_steps() {
    let (analysis, mut plan) = valid();
    move_to(&mut plan, OUTPUT, 64);
    let violation = the_one(&analysis, plan, ViolationKind::Overlap);
    assert_names_tensor(&violation, "2", "softmax_out");
    let other = violation.other_tensor.as_ref().expect("names the partner");
    assert_eq!((other.id.as_str(), other.name.as_str()), ("1", "conv_out"));
    assert_mentions(
        &violation,
        &[
            "conv_out",
            "bytes [64, 96)",
            "steps [2, 2]",
            "scratch arena in SRAM",
            "offset 96",
        ],
    );
}

#[test]
fn contract_5_alias_at_the_wrong_offset() {
    let (analysis, mut plan) = valid();
    move_to(&mut plan, VIEW, 96);
    let violation = the_one(&analysis, plan, ViolationKind::AliasMisplaced);
    assert_names_tensor(&violation, "6", "conv_out_view");
    assert_mentions(
        &violation,
        &["view of tensor `1`", "view offset 16", "offset 80", "at 96"],
    );
}

#[test]
fn contract_5_alias_in_another_arena() {
    let (analysis, mut plan) = valid();
    allocation_mut(&mut plan, VIEW).binding.role = ArenaRole::Persistent;
    let violation = the_one(&analysis, plan, ViolationKind::AliasMisplaced);
    assert_names_tensor(&violation, "6", "conv_out_view");
    assert_mentions(
        &violation,
        &["scratch arena in SRAM", "persistent arena in SRAM"],
    );
}

#[test]
fn contract_6_over_budget() {
    let (mut analysis, plan) = valid();
    analysis.request.memories[SRAM as usize].budget = RSome(100);
    let violation = the_one(&analysis, plan, ViolationKind::OverBudget);
    assert_eq!(violation.memory.as_deref(), Some("SRAM"));
    assert_mentions(
        &violation,
        &["SRAM take 192 bytes", "92 over", "budget of 100 bytes"],
    );
}

#[test]
fn contract_6_read_only_memory() {
    let (mut analysis, plan) = valid();
    analysis.request.memories[SRAM as usize].writable = false;
    let violations = only(&analysis, plan, ViolationKind::ReadOnlyMemory);
    // Scratch, staged constant and persistent arenas are in SRAM.
    assert_eq!(violations.len(), 3, "{violations:#?}");
    assert_mentions(
        &violations[1],
        &["constant arena in SRAM (source MRAM)", "read-only"],
    );
}

#[test]
fn cold_constants_may_sit_in_read_only_memory() {
    let (analysis, plan) = valid();
    assert!(!analysis.request.memories[MRAM as usize].writable);
    assert!(check_plan(&analysis, plan.clone()).is_ok());
    assert_eq!(plan.arenas[CONST_MRAM].role, ArenaRole::Constant);
}

#[test]
fn all_violations_are_reported_in_contract_order() {
    let (mut analysis, mut plan) = valid();
    analysis.request.memories[SRAM as usize].budget = RSome(1);
    plan.allocations.clear();
    let violations = check_plan(&analysis, plan).expect_err("rejected");
    assert_eq!(violations.len(), 10, "{violations:#?}");
    assert!(violations.0[..9]
        .iter()
        .all(|v| v.kind == ViolationKind::MissingAllocation));
    assert_eq!(violations.0[9].kind, ViolationKind::OverBudget);
}

#[test]
fn resolution_violations_are_part_of_the_report() {
    let (analysis, plan) = valid();
    let resolution = Resolution {
        unknown_memory_names: Vec::new(),
        violations: vec![Violation::new(
            ViolationKind::UnknownTensor,
            "no tensor `x`",
        )],
    };
    let violations = check_resolved_plan(&analysis, plan, resolution).expect_err("rejected");
    assert_eq!(violations.len(), 1);
    assert_eq!(violations.0[0].kind, ViolationKind::UnknownTensor);
}

/// `valid()` with the input and the output external (in the caller's buffers).
fn with_external_io() -> (Analysis, MemoryPlan) {
    let (mut analysis, plan) = valid();
    let mut marked = vec![false; analysis.request.tensors.len()];
    marked[INPUT as usize] = true;
    marked[OUTPUT as usize] = true;
    analysis.external =
        crate::analyze::ExternalTensors::resolve("model.json", &analysis.request.tensors, marked)
            .unwrap();
    (analysis, plan)
}

#[test]
fn external_tensors_need_no_allocation_and_leave_the_lower_bound() {
    let (analysis, mut plan) = with_external_io();
    plan.allocations
        .retain(|allocation| allocation.tensor != INPUT && allocation.tensor != OUTPUT);
    let checked = check_plan(&analysis, plan).expect("valid without the external tensors");
    // Scratch: at step 2, conv_out 32 + pinned 16; the output's 64 bytes are the caller's.
    assert_eq!(checked.lower_bounds, vec![48, 48, 16, 32]);
}

#[test]
fn contract_1_external_tensor_placed() {
    let (analysis, mut plan) = with_external_io();
    plan.allocations
        .retain(|allocation| allocation.tensor != OUTPUT);
    let violation = the_one(&analysis, plan, ViolationKind::ExternalPlaced);
    assert_names_tensor(&violation, "0", "serving_input");
    assert_mentions(
        &violation,
        &[
            "is external",
            "offset 0 in the scratch arena in SRAM",
            "leave external",
        ],
    );
}
