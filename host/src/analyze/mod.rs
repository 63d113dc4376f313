//! Analyze stage: turns a [`Model`] plus target, constraints and rules into the plan request
//! a planner receives: inclusive lifetimes, merged alias chains, slot alignment, resolved
//! placement attributes and memory budgets.
//!
//! Order of work: memory limits (constraints checked against the target), rules checked
//! against the target, alias roots ([`aliases`]), lifetimes ([`lifetimes`]), then one pass
//! over the tensors resolving attributes, alignment and memories; last, the lower bound of
//! what must go to each memory, and a does-not-fit error (exit 5) when one exceeds its
//! budget, before any planner runs (the `fit` module). Everything is O(n) apart from those bounds
//! (O(n log n) sweeps).

pub mod aliases;
pub mod external;
mod fit;
mod fixed;
pub mod lifetimes;
pub mod order;

use std::collections::HashSet;
use std::path::PathBuf;

use abi_stable::std_types::{RNone, RSome, RString, RVec};
use memplan_plugin_api::{AliasOf, MemoryRequest, PlanRequest, TensorKind, TensorRequest};

use crate::error::{Error, Result};
use crate::input::graph::TfliteOrigin;
use crate::input::{Attributes, Constraints, MemoryLimit, Model, Rules, Target, Tensor};
pub use external::ExternalTensors;

/// Arena base alignment never goes below this (heliaAOT's floor).
pub const MIN_ARENA_ALIGNMENT: u64 = 16;

/// What the later stages know about the model.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// The model file, for messages.
    pub source: PathBuf,
    /// Name of the target the memories come from.
    pub target: String,
    /// What the planner receives (its `options` field is filled in by the plan command).
    pub request: PlanRequest,
    /// Tensor names, by tensor index; empty for a tensor without a name of its own (see
    /// [`Analysis::name_of`]).
    pub names: Vec<String>,
    /// Bytes of constant tensors, by tensor index (`None` for non-constants and for aliases
    /// of constants, whose bytes are their root's).
    pub constant_data: Vec<Option<Vec<u8>>>,
    /// By memory index: the lower bound of the bytes that must go there in any valid plan —
    /// the tensors pinned to the memory (constants by their destination, scratch and
    /// persistent tensors by a `memory` rule), the sum over the three roles of the least size
    /// of the arena they force (see the `fit` module). Tensors the planner may place freely
    /// and external tensors are not counted.
    pub memory_lower_bounds: Vec<u64>,
    /// Set when some memory's bound exceeds its budget: no plan can fit, and the error says
    /// which memory, the bytes and what to change (exit 5). Commands that plan stop on it
    /// before running a planner ([`Analysis::ensure_plannable`]); `check` goes on, as the
    /// budget violations of the plan it is given are its report.
    pub pinned_overflow: Option<Error>,
    /// The model's graph inputs and outputs (tensor indices) in its own order, where it lists
    /// them (a `.tflite` model's subgraph 0; may be empty: then the tensors of kind input and
    /// output, in tensor order, are the graph's).
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
    /// For a `.tflite` model: where its tensors sit in the file and what TFLite Micro adds at
    /// run time (kernel scratch buffers), for the offline plan written into the model.
    pub tflite: Option<Box<TfliteOrigin>>,
    /// What the order stage found (`order`), set by the caller that ran it; `None` when it did
    /// not run or the model's order is not memplan's to choose.
    pub order: Option<order::OperatorOrder>,
    /// The tensors in buffers the caller owns, outside every arena ([`external`]): the
    /// planner gets [`Analysis::planner_request`], and `memory_lower_bounds` leave them out.
    pub external: ExternalTensors,
}

/// Runs the analysis.
pub fn analyze(
    model: Model,
    target: &Target,
    constraints: &Constraints,
    rules: &Rules,
) -> Result<Analysis> {
    let limits = constraints.apply(target)?;
    check_rule_memories(target, rules)?;
    let mut model = lifetimes::tflite_micro::resolve(model)?;
    let tflite = model.tflite.take();
    let (graph_inputs, graph_outputs) = (model.inputs.clone(), model.outputs.clone());
    let roots = aliases::resolve(&model)?;
    let lifetimes = lifetimes::derive(&model, &roots)?;
    let file = model.path.display().to_string();
    if let (count @ 1.., Some(first)) = lifetimes.unused {
        tracing::warn!(
            "{file}: {count} tensor(s) are never used (first: '{}'); they get lifetime [0, 0]",
            model.tensors[first as usize].id
        );
    }

    let memories = memory_requests(target, &limits);
    // A tensor the planner may put in any scratch memory gets the strictest arena alignment
    // the user asked for among them, so its slot is valid wherever it lands.
    let free_alignment = target
        .memories
        .iter()
        .zip(&limits)
        .filter(|(memory, _)| memory.scratch_order.is_some())
        .filter_map(|(_, limit)| limit.arena_alignment)
        .max()
        .unwrap_or(1);
    let memory_index = |name: &str| -> Result<u32> {
        target.memory_index(name).map(|i| i as u32).ok_or_else(|| {
            Error::internal(format!(
                "memory {name} vanished after the rules were checked"
            ))
        })
    };
    let default_constant_memory = target.default_constant_memory() as u32;

    let resolver = rules.resolver();
    let mut named_by_rules: HashSet<&str> = HashSet::new();
    let n = model.tensors.len();
    let mut tensors: Vec<TensorRequest> = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    let mut constant_data = Vec::with_capacity(n);
    let mut marked_external = Vec::with_capacity(n);
    for (index, tensor) in model.tensors.into_iter().enumerate() {
        let attributes = resolver.resolve(tensor.kind, &tensor.id);
        marked_external.push(attributes.external == Some(true));
        if let Some(named) = resolver.named(&tensor.id) {
            named_by_rules.insert(named);
        }
        let (memory, source_memory) = if tensor.kind == TensorKind::Constant {
            let source = match &attributes.memory {
                Some(name) => memory_index(name)?,
                None => default_constant_memory,
            };
            let destination = match &attributes.constant_destination_memory {
                Some(name) => memory_index(name)?,
                None => source,
            };
            (RSome(destination), RSome(source))
        } else {
            let memory = match &attributes.memory {
                Some(name) => RSome(memory_index(name)?),
                None => RNone,
            };
            if let RSome(m) = memory {
                if !target.memories[m as usize].writable {
                    return Err(Error::input(format!(
                        "{file}: tensor '{}' ({}) is placed in {} by the rules, but {} is read-only; only constants may live there",
                        tensor.id,
                        tensor.kind.as_str(),
                        target.memories[m as usize].name,
                        target.memories[m as usize].name
                    )));
                }
            }
            (memory, RNone)
        };
        let memory_alignment = match memory {
            RSome(m) => limits[m as usize].arena_alignment.unwrap_or(1),
            RNone => free_alignment,
        };
        let alignment = slot_alignment(target, &tensor, &attributes, memory_alignment);
        check_fixed_offset(&file, &tensor, alignment)?;
        let alias_of = match tensor.alias_of {
            Some(_) => RSome(AliasOf {
                root: roots.root[index],
                offset: roots.offset[index],
            }),
            None => RNone,
        };
        names.push(tensor.name);
        constant_data.push(if tensor.kind == TensorKind::Constant {
            tensor.data
        } else {
            None
        });
        tensors.push(TensorRequest {
            id: RString::from(tensor.id),
            kind: tensor.kind,
            size: tensor.size,
            alignment,
            lifetime: lifetimes.lifetimes[index],
            alias_of,
            fixed_offset: tensor.fixed_offset.into(),
            memory,
            source_memory,
        });
    }
    // A view lives in its root's slot, so it is in its root's memory whatever rules say.
    for index in 0..n {
        if let RSome(alias) = tensors[index].alias_of {
            let root = &tensors[alias.root as usize];
            let (memory, source_memory) = (root.memory, root.source_memory);
            tensors[index].memory = memory;
            tensors[index].source_memory = source_memory;
        }
    }
    for id in resolver.ids().filter(|id| !named_by_rules.contains(id)) {
        tracing::warn!(
            "{}: the rules name tensor '{id}', which {file} does not have",
            rules.origin_file()
        );
    }

    external::warn_unknown_ids(&file, &resolver, &tensors);
    let external = ExternalTensors::resolve(&file, &tensors, marked_external)?;
    // External tensors take no arena bytes: the bounds and fixed placements are the planner's
    // tensors'.
    let planned = external.planner_tensors(&tensors);
    fixed::check_fixed_placements(&file, &planned, &memories)?;
    let floors = fit::pinned_floors(&planned, memories.len());
    let memory_lower_bounds: Vec<u64> = floors.iter().map(fit::total).collect();
    tracing::debug!(
        "{file}: {} tensors, {} steps on target {}; lower bounds of what must go in each memory: {}",
        tensors.len(),
        lifetimes.num_steps,
        target.name,
        memories
            .iter()
            .zip(&memory_lower_bounds)
            .map(|(memory, bound)| format!("{} {bound}", memory.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let pinned_overflow =
        fit::check_pinned_fit(&file, target, constraints, &memories, &planned, &floors).err();
    drop(planned);
    Ok(Analysis {
        source: model.path,
        target: target.name.clone(),
        request: PlanRequest {
            tensors: RVec::from(tensors),
            memories: RVec::from(memories),
            num_steps: lifetimes.num_steps,
            options: RString::from("{}"),
        },
        names,
        constant_data,
        memory_lower_bounds,
        pinned_overflow,
        inputs: graph_inputs,
        outputs: graph_outputs,
        tflite,
        order: None,
        external,
    })
}

/// The memories of the request: the target's, with the budgets and arena alignments the
/// constraints give.
fn memory_requests(target: &Target, limits: &[MemoryLimit]) -> Vec<MemoryRequest> {
    target
        .memories
        .iter()
        .zip(limits)
        .map(|(memory, limit)| MemoryRequest {
            name: RString::from(memory.name.as_str()),
            budget: limit.budget.into(),
            writable: memory.writable,
            scratch_order: memory.scratch_order.into(),
            arena_alignment: MIN_ARENA_ALIGNMENT
                .max(target.min_alignment)
                .max(limit.arena_alignment.unwrap_or(1)),
        })
        .collect()
}

/// A tensor's slot alignment: the largest of the target's minimum, its element size (as a
/// power of two), its own hint, the rules' and its memory's arena alignment.
fn slot_alignment(
    target: &Target,
    tensor: &Tensor,
    attributes: &Attributes,
    memory_alignment: u64,
) -> u64 {
    target
        .min_alignment
        .max(
            tensor
                .element_size
                .max(1)
                .checked_next_power_of_two()
                .unwrap_or(1 << 63),
        )
        .max(tensor.alignment.unwrap_or(1))
        .max(attributes.alignment.unwrap_or(1))
        .max(memory_alignment)
}

/// A fixed offset must leave the tensor's end within what memplan accepts and be a multiple
/// of its alignment.
fn check_fixed_offset(file: &str, tensor: &Tensor, alignment: u64) -> Result<()> {
    if let Some(offset) = tensor.fixed_offset {
        let end = offset.saturating_add(tensor.size);
        let cap = if tensor.kind == TensorKind::Constant {
            crate::input::model::MAX_CONSTANT_ARENA_BYTES
        } else {
            crate::input::model::MAX_TENSOR_BYTES
        };
        if end > cap {
            return Err(Error::input(format!(
                "{file}: tensor '{}': fixed_offset {offset} puts its end at byte {end}, past \
                 what memplan accepts ({cap}{}); give an offset inside the memory",
                tensor.id,
                if tensor.kind == TensorKind::Constant {
                    ", 256 MiB: constant arenas are written out in full"
                } else {
                    ""
                }
            )));
        }
    }
    if let Some(offset) = tensor.fixed_offset.filter(|o| o % alignment != 0) {
        return Err(Error::input(format!(
            "{file}: tensor '{}': fixed_offset {offset} is not a multiple of its alignment {alignment}; move it or lower the alignment",
            tensor.id
        )));
    }
    Ok(())
}

impl Analysis {
    /// The name of tensor `index`: its own, or its id when the model gave it none.
    pub fn name_of(&self, index: usize) -> &str {
        let id = self
            .request
            .tensors
            .get(index)
            .map_or("", |tensor| tensor.id.as_str());
        name_or_id(&self.names, index, id)
    }

    /// The request a planner gets: [`Analysis::request`] without the external tensors
    /// (borrowed when there are none). A plan made for it goes through
    /// [`ExternalTensors::restore_indices`] before it is checked.
    pub fn planner_request(&self) -> std::borrow::Cow<'_, PlanRequest> {
        self.external.planner_request(&self.request)
    }

    /// Fails with exit 5 when the tensors pinned to a memory alone exceed its budget (see
    /// [`Analysis::pinned_overflow`]): then no planner is worth running.
    pub fn ensure_plannable(&mut self) -> Result<()> {
        match self.pinned_overflow.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// `names[index]`, or `id` when that is empty (the tensor has no name of its own).
pub fn name_or_id<'a>(names: &'a [String], index: usize, id: &'a str) -> &'a str {
    match names.get(index) {
        Some(name) if !name.is_empty() => name,
        _ => id,
    }
}

/// Every memory a rule names exists on the target, and staging destinations are writable.
fn check_rule_memories(target: &Target, rules: &Rules) -> Result<()> {
    for (index, rule) in rules.rules.iter().enumerate() {
        let attributes = &rule.attributes;
        for name in [&attributes.memory, &attributes.constant_destination_memory]
            .into_iter()
            .flatten()
        {
            if target.memory_index(name).is_none() {
                return Err(Error::input(format!(
                    "{}: memory `{name}` is not on target {}; its memories are {}",
                    rules.origin(index),
                    target.name,
                    target.memory_names()
                )));
            }
        }
        if let Some(name) = &attributes.constant_destination_memory {
            let memory = &target.memories[target.memory_index(name).unwrap_or(0)];
            if !memory.writable {
                return Err(Error::input(format!(
                    "{}: constant_destination_memory {} is read-only; constants are copied there at boot, so pick a writable memory",
                    rules.origin(index),
                    memory.name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
