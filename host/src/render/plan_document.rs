//! The `{prefix}_plan.json` document: the full plan, tensors by id and memories by name.
//!
//! MERGE SEAM: the plan file format belongs to `crate::plan_file` (issue 5), written in
//! parallel. This module is the one place that produces the document; at merge it becomes a
//! call to `plan_file::to_document(...)` and these serde types go away.

use memplan_plugin_api::{ArenaRole, MemoryPlan, PlanRequest};
use serde::Serialize;

use crate::error::{Error, Result};

#[derive(Serialize)]
struct PlanDocument<'a> {
    format: &'static str,
    version: u32,
    arenas: Vec<ArenaRecord<'a>>,
    allocations: Vec<AllocationRecord<'a>>,
}

#[derive(Serialize)]
struct ArenaRecord<'a> {
    role: ArenaRole,
    memory: &'a str,
    source_memory: &'a str,
    size: u64,
    alignment: u64,
}

#[derive(Serialize)]
struct AllocationRecord<'a> {
    tensor: &'a str,
    role: ArenaRole,
    memory: &'a str,
    source_memory: &'a str,
    offset: u64,
    size: u64,
}

/// The plan file's text (pretty JSON, newline-terminated), in the plan's own order.
pub fn plan_document(request: &PlanRequest, plan: &MemoryPlan) -> Result<String> {
    let memory = |index: u32| super::memory_of(request, index).map(|memory| memory.name.as_str());
    let arenas = plan
        .arenas
        .iter()
        .map(|arena| {
            Ok(ArenaRecord {
                role: arena.role,
                memory: memory(arena.memory)?,
                source_memory: memory(arena.source_memory)?,
                size: arena.size,
                alignment: arena.alignment,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let allocations = plan
        .allocations
        .iter()
        .map(|allocation| {
            let tensor = request
                .tensors
                .get(allocation.tensor as usize)
                .ok_or_else(|| {
                    Error::internal(format!(
                        "the plan names unknown tensor #{}",
                        allocation.tensor
                    ))
                })?;
            Ok(AllocationRecord {
                tensor: tensor.id.as_str(),
                role: allocation.binding.role,
                memory: memory(allocation.binding.memory)?,
                source_memory: memory(allocation.binding.source_memory)?,
                offset: allocation.offset,
                size: allocation.size,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let document = PlanDocument {
        format: "memplan-plan",
        version: 1,
        arenas,
        allocations,
    };
    let mut text = serde_json::to_string_pretty(&document)
        .map_err(|error| Error::internal(format!("cannot serialize the plan: {error}")))?;
    text.push('\n');
    Ok(text)
}
