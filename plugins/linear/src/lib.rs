//! Planner `linear`: every tensor gets a slot of its own, bump-allocated per
//! (role, memory, source memory) arena in tensor order. No reuse of memory between
//! tensors whose lifetimes do not overlap, so the arena is the sum of the aligned sizes:
//! the upper reference point every real planner must beat, and a planner simple enough to
//! be obviously correct.
//!
//! Placement: constants go to their destination memory (source memory from the request);
//! scratch and persistent tensors go to their pinned memory, else to the writable memory
//! first in the scratch order. Tensors with a fixed offset keep it; bumping starts above the
//! highest fixed slot. Aliases take their root's binding plus the view offset.

use std::collections::BTreeMap;

use memplan_plugin_api::abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::{
    Allocation, Arena, ArenaRole, Binding, HostContext, MemoryPlan, PlanError, PlanErrorKind,
    PlanRequest, Planner,
};

pub struct Linear;

impl Planner for Linear {
    const NAME: &'static str = "linear";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "one slot per tensor, bump-allocated in tensor order; no reuse";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        plan_linear(request, context)
    }
}

memplan_plugin_api::export_planners!(Linear);

type ArenaKey = (ArenaRole, u32, u32);

fn default_memory(request: &PlanRequest) -> Result<u32, PlanError> {
    request
        .memories
        .iter()
        .enumerate()
        .filter(|(_, memory)| memory.writable)
        .filter_map(|(index, memory)| {
            memory
                .scratch_order
                .into_option()
                .map(|order| (order, index))
        })
        .min()
        .map(|(_, index)| index as u32)
        .ok_or_else(|| {
            PlanError::new(
                PlanErrorKind::InvalidRequest,
                "the target has no writable memory in its scratch order",
            )
        })
}

fn arena_key(request: &PlanRequest, tensor: usize, fallback: u32) -> ArenaKey {
    let t = &request.tensors[tensor];
    let role = t.kind.role();
    let memory = t.memory.into_option().unwrap_or(fallback);
    let source = match role {
        ArenaRole::Constant => t.source_memory.into_option().unwrap_or(memory),
        _ => memory,
    };
    (role, memory, source)
}

fn plan_linear(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
    let fallback = default_memory(request)?;
    let count = request.tensors.len();
    let mut ends: BTreeMap<ArenaKey, (u64, u64)> = BTreeMap::new(); // (end, base alignment)
    let mut offsets: Vec<Option<(ArenaKey, u64)>> = vec![None; count];

    // Fixed slots first, so that bumping starts above all of them.
    for (index, tensor) in request.tensors.iter().enumerate() {
        if tensor.alias_of.is_some() {
            continue;
        }
        if let Some(offset) = tensor.fixed_offset.into_option() {
            let key = arena_key(request, index, fallback);
            let entry = ends.entry(key).or_insert((0, 1));
            entry.0 = entry.0.max(offset + tensor.size);
            entry.1 = entry.1.max(tensor.alignment);
            offsets[index] = Some((key, offset));
        }
    }
    for (index, tensor) in request.tensors.iter().enumerate() {
        if tensor.alias_of.is_some() || offsets[index].is_some() {
            continue;
        }
        let key = arena_key(request, index, fallback);
        let entry = ends.entry(key).or_insert((0, 1));
        let offset = align_up(entry.0, tensor.alignment);
        entry.0 = offset + tensor.size;
        entry.1 = entry.1.max(tensor.alignment);
        offsets[index] = Some((key, offset));
    }

    let mut allocations = RVec::with_capacity(count);
    for (index, tensor) in request.tensors.iter().enumerate() {
        let (key, offset) = match tensor.alias_of.into_option() {
            Some(alias) => {
                let (key, root_offset) = offsets[alias.root as usize].ok_or_else(|| {
                    PlanError::new(
                        PlanErrorKind::InvalidRequest,
                        "alias root is itself an alias",
                    )
                })?;
                (key, root_offset + alias.offset)
            }
            None => offsets[index].expect("every non-alias tensor was placed above"),
        };
        let (role, memory, source_memory) = key;
        allocations.push(Allocation {
            tensor: index as u32,
            binding: Binding {
                role,
                memory,
                source_memory,
                offset,
            },
            offset,
            size: tensor.size,
        });
    }

    let arenas: RVec<Arena> = ends
        .into_iter()
        .filter(|(_, (end, _))| *end > 0)
        .map(|((role, memory, source_memory), (end, alignment))| {
            let alignment = alignment.max(request.memories[memory as usize].arena_alignment);
            Arena {
                role,
                memory,
                source_memory,
                size: align_up(end, alignment),
                alignment,
            }
        })
        .collect();
    context.debug(&format!(
        "linear: {} tensors in {} arenas",
        count,
        arenas.len()
    ));
    Ok(MemoryPlan {
        arenas,
        allocations,
        summary: RString::new(),
    })
}
