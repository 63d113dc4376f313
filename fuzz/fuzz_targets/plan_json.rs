//! Fuzz target: the plan file reader (`memplan check`'s input) on arbitrary bytes, against
//! a fixed small model analysis, and the checker on whatever plan it resolves. Reading must
//! return (plan or error) and checking must return (checked plan or violations) without
//! panicking, together within the allocation bound of `memplan_fuzz`.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use memplan::analyze::Analysis;
use memplan::check::check_resolved_plan;
use memplan::plan_file::read_plan_text;
use memplan_plugin_api::abi_stable::std_types::{RNone, RSome, RString, RVec};
use memplan_plugin_api::{
    AliasOf, Lifetime, MemoryRequest, PlanRequest, TensorKind, TensorRequest,
};

fn tensor(id: &str, kind: TensorKind, size: u64, lifetime: (u32, u32)) -> TensorRequest {
    TensorRequest {
        id: RString::from(id),
        kind,
        size,
        alignment: 16,
        lifetime: Lifetime::new(lifetime.0, lifetime.1),
        alias_of: RNone,
        fixed_offset: RNone,
        memory: RNone,
        source_memory: RNone,
    }
}

fn memory(name: &str, writable: bool, budget: Option<u64>) -> MemoryRequest {
    MemoryRequest {
        name: RString::from(name),
        budget: budget.map_or(RNone, RSome),
        writable,
        scratch_order: if writable { RSome(0) } else { RNone },
        arena_alignment: 16,
    }
}

/// A model with one tensor of each kind the checker treats differently: input, output,
/// intermediate, a view of the intermediate, a constant staged from MRAM into SRAM and a
/// persistent tensor pinned at an offset; SRAM has a budget.
fn analysis() -> Analysis {
    let mut view = tensor("view", TensorKind::Intermediate, 16, (1, 2));
    view.alias_of = RSome(AliasOf {
        root: 2,
        offset: 16,
    });
    let mut weights = tensor("w", TensorKind::Constant, 32, (0, 3));
    weights.memory = RSome(0);
    weights.source_memory = RSome(1);
    let mut state = tensor("state", TensorKind::Persistent, 8, (0, 3));
    state.fixed_offset = RSome(0);
    let tensors = vec![
        tensor("0", TensorKind::Input, 16, (0, 1)),
        tensor("1", TensorKind::Output, 16, (2, 3)),
        tensor("2", TensorKind::Intermediate, 48, (1, 2)),
        view,
        weights,
        state,
    ];
    let names = ["in", "out", "mid", "view", "weights", "state"];
    let constant_data = tensors
        .iter()
        .map(|tensor| (tensor.kind == TensorKind::Constant).then(|| vec![7u8; 32]))
        .collect();
    Analysis {
        source: PathBuf::from("fuzz.json"),
        target: "fuzz".to_string(),
        request: PlanRequest {
            tensors: RVec::from(tensors),
            memories: RVec::from(vec![
                memory("SRAM", true, Some(4096)),
                memory("MRAM", false, None),
            ]),
            num_steps: 4,
            options: RString::from("{}"),
        },
        names: names.iter().map(|name| name.to_string()).collect(),
        constant_data,
    }
}

fuzz_target!(|bytes: &[u8]| {
    static ANALYSIS: OnceLock<Analysis> = OnceLock::new();
    let analysis = ANALYSIS.get_or_init(analysis);
    memplan_fuzz::within_allocation_bound(bytes, |bytes| {
        // `memplan check` reads the file as UTF-8 text; other bytes stop there.
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        if let Ok(read) = read_plan_text(Path::new("fuzz_plan.json"), text, analysis) {
            let _ = check_resolved_plan(analysis, read.plan, read.resolution);
        }
    });
});
