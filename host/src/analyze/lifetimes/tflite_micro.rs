//! TensorFlow Lite Micro's rule (`facts/tflm-lifetimes.md`): which tensors of a `.tflite`
//! graph are planned, their lifetimes and their arena sizes, so that a plan of the scratch
//! tensors compares with TFLite Micro's arena byte for byte. [`resolve`] turns the graph the
//! reader found into tensors with explicit lifetimes, which the rest of analysis treats like
//! any model's:
//! - tensors of subgraph 0 and of every subgraph its control-flow operators run (the walk,
//!   [`super::tflite_walk`]); ids are the TFLite tensor indices (`"12"`; `"2:5"` for tensor 5
//!   of subgraph 2), names come from the model;
//! - constant tensors (their buffer has bytes) are `Constant` with those bytes, their size the
//!   byte count; a tensor whose buffer an earlier tensor already uses is a view of it
//!   (`alias_of`, offset 0), so shared bytes are stored, and copied, once;
//! - variable tensors are `Persistent` (TFLite Micro keeps them outside its planned arena), and
//!   so are the outputs of VAR_HANDLE: its kernel points them at persistent op data in Prepare,
//!   before planning, so TFLite Micro never gives them arena space;
//! - every other tensor the run touches is `Input`/`Output` (subgraph 0's graph inputs and
//!   outputs) or `Intermediate`, with the walk's lifetime and its size rounded up to 16 bytes,
//!   TFLite Micro's arena alignment (the rounding is what makes the figures comparable);
//!   tensors of size 0 stay 0; tensors the run never touches are left out (TFLite Micro does
//!   not plan them, and with no use there is no lifetime to give them);
//! - constant and persistent tensors live the whole run, `[0, last step]`;
//! - `operators` lists the operators in the order they run, those of invoked subgraphs
//!   inline (with control flow an operator's step is not its position, so lifetimes are
//!   explicit and `num_steps` is the last step + 1);
//! - an `OfflineMemoryAllocation` entry's offsets become `fixed_offset` of the scratch
//!   tensors it places;
//! - the scratch buffers reference kernels request in Prepare ([`super::tflm_kernels`]) follow
//!   the tensors, as `Intermediate` tensors of their operator (id `op7.scratch0`, or
//!   `2:op7.scratch0` in subgraph 2), live from the operator's step to the end of the
//!   subgraphs it runs, rounded up to 16 bytes: TFLite Micro places them in the same arena, so
//!   a plan must leave room for them. They come in TFLite Micro's request order (subgraph by
//!   subgraph, operator by operator), after every tensor, as in TFLite Micro's list;
//! - [`Model::tflite`] records where each kept tensor sits among all subgraphs' tensors, for the
//!   offline plan written into the model.
//!
//! Every tensor asks for 16-byte alignment, as TFLite Micro's arena and the flatbuffer's
//! constant buffers (`force_align: 16`) give it.

use std::collections::hash_map::{Entry, HashMap};

use memplan_plugin_api::bounds::align_up;

use super::tflite_walk::{self, Walk, WalkError};
use super::tflm_kernels::{kernel_scratch, KernelScratch};
use crate::error::{Error, Result};
use crate::input::graph::{
    GraphStorage, GraphSubgraph, GraphTensor, OperatorFlow, TfliteGraph, TfliteOrigin, TflmRole,
};
use crate::input::model::{
    Lifetime, LifetimeRule, Model, ModelAlias, Operator, Tensor, TensorKind, MAX_TENSOR_BYTES,
};
use crate::input::tflite::tensor_id;

/// TFLite Micro's arena alignment: every planned size is rounded up to it.
pub const TFLM_ALIGNMENT: u64 = 16;

/// Applies TFLite Micro's rule to a model read from a `.tflite` file; other models come back
/// as they are.
pub fn resolve(model: Model) -> Result<Model> {
    let Model { path, rule, .. } = model;
    let LifetimeRule::TfliteMicro(graph) = rule else {
        return Ok(Model {
            path,
            rule,
            ..model
        });
    };
    let mut graph = *graph;
    let error = |message: String| Error::input(format!("{}: {message}", path.display()));
    let walk = walk(&graph, &error)?;
    let subgraphs = std::mem::take(&mut graph.subgraphs);
    let whole_run = Lifetime::new(0, walk.last_step);
    let flow0 = &subgraphs[0].flow;
    let mut kinds = vec![TensorKind::Intermediate; subgraphs[0].tensors.len()];
    // Outputs first, so that a tensor both input and output counts as an input.
    for &tensor in &flow0.outputs {
        kinds[tensor] = TensorKind::Output;
    }
    for &tensor in &flow0.inputs {
        kinds[tensor] = TensorKind::Input;
    }

    let var_handles = var_handle_outputs(&subgraphs);
    let mut tensors: Vec<Tensor> = Vec::new();
    // By model tensor: its position among all subgraphs' tensors.
    let mut tflite_index: Vec<Option<u32>> = Vec::new();
    // By tensor of every subgraph: what TFLite Micro does with it.
    let mut roles: Vec<TflmRole> = Vec::new();
    let fixed_offsets = if graph.offline_plan_under_check {
        None
    } else {
        graph.offline_offsets.as_ref()
    };
    // Model index of each (subgraph, tensor) kept.
    let mut model_index: Vec<Vec<Option<u32>>> = Vec::with_capacity(subgraphs.len());
    // The first constant tensor of each buffer: later ones become views of it, so shared
    // bytes are stored (and copied) once.
    let mut buffer_owner: HashMap<u32, u32> = HashMap::new();
    let mut global_offset = 0usize;
    for (subgraph, record) in subgraphs.iter().enumerate() {
        let mut indices = vec![None; record.tensors.len()];
        for (index, tensor) in record.tensors.iter().enumerate() {
            if !walk.reached[subgraph] {
                roles.push(TflmRole::Unused);
                continue;
            }
            let id = tensor_id(subgraph, index);
            let mut model_tensor = match tensor.storage {
                GraphStorage::Constant { buffer } => {
                    let mut constant = match buffer_owner.entry(buffer) {
                        Entry::Occupied(owner) => {
                            let owner = *owner.get();
                            let size = tensors[owner as usize].size;
                            let mut view = Tensor::new(id, TensorKind::Constant, size);
                            view.alias_of = Some(ModelAlias {
                                target: owner,
                                offset: 0,
                            });
                            view
                        }
                        Entry::Vacant(slot) => {
                            slot.insert(tensors.len() as u32);
                            let bytes = graph.buffers.remove(&buffer).unwrap_or_default();
                            let mut owner =
                                Tensor::new(id, TensorKind::Constant, bytes.len() as u64);
                            owner.data = Some(bytes);
                            owner
                        }
                    };
                    constant.lifetime = Some(whole_run);
                    constant
                }
                // VAR_HANDLE's outputs point at persistent op data, never at the arena.
                GraphStorage::Arena if var_handles[subgraph][index] => {
                    let size = planned_size(subgraph, index, tensor, &error)?;
                    let mut handle = Tensor::new(id, TensorKind::Persistent, size);
                    handle.lifetime = Some(whole_run);
                    handle
                }
                GraphStorage::Variable => {
                    let size = planned_size(subgraph, index, tensor, &error)?;
                    let mut variable = Tensor::new(id, TensorKind::Persistent, size);
                    variable.lifetime = Some(whole_run);
                    variable
                }
                GraphStorage::Arena => {
                    // Never touched by the run: TFLite Micro does not plan it.
                    let Some(lifetime) = walk.lifetimes[subgraph][index] else {
                        roles.push(TflmRole::Unused);
                        continue;
                    };
                    let kind = if subgraph == 0 {
                        kinds[index]
                    } else {
                        TensorKind::Intermediate
                    };
                    let size = planned_size(subgraph, index, tensor, &error)?;
                    let mut scratch = Tensor::new(id, kind, size);
                    scratch.lifetime = Some(lifetime);
                    scratch.fixed_offset = fixed_offsets
                        .map(|offsets| offsets[global_offset + index])
                        .and_then(|offset| u64::try_from(offset).ok());
                    scratch
                }
            };
            roles.push(match tensor.storage {
                GraphStorage::Constant { .. } => TflmRole::Constant,
                GraphStorage::Variable => TflmRole::Variable,
                GraphStorage::Arena if var_handles[subgraph][index] => TflmRole::ResourceHandle,
                GraphStorage::Arena if model_tensor.size == 0 => TflmRole::Empty,
                GraphStorage::Arena => TflmRole::Planned,
            });
            model_tensor.name = tensor.name.clone();
            model_tensor.element_size = tensor.element_size.unwrap_or(1);
            model_tensor.alignment = Some(TFLM_ALIGNMENT);
            indices[index] = Some(tensors.len() as u32);
            tensors.push(model_tensor);
            tflite_index.push(Some((global_offset + index) as u32));
        }
        global_offset += record.tensors.len();
        model_index.push(indices);
    }

    // Every tensor an operator or a graph names was touched by the walk, or is constant or
    // variable, and so was kept.
    let kept = |subgraph: usize, tensor: usize| -> Result<u32> {
        model_index[subgraph][tensor].ok_or_else(|| {
            Error::internal(format!(
                "{}: tensor {} was dropped although the graph uses it",
                path.display(),
                tensor_id(subgraph, tensor)
            ))
        })
    };
    let kept_all = |subgraph: usize, list: &mut dyn Iterator<Item = usize>| {
        list.map(|tensor| kept(subgraph, tensor))
            .collect::<Result<Vec<u32>>>()
    };
    let mut operators = Vec::with_capacity(walk.order.len());
    for &(subgraph, position) in &walk.order {
        let flow = &subgraphs[subgraph].flow.operators[position];
        let name = &subgraphs[subgraph].operator_names[position];
        // The walk bounds the steps; a long name runs into the budget instead.
        graph.copy_budget.take(name.len(), &path)?;
        operators.push(Operator {
            op_type: name.clone(),
            inputs: kept_all(subgraph, &mut flow.inputs.iter().flatten().copied())?,
            outputs: kept_all(subgraph, &mut flow.outputs.iter().copied())?,
        });
    }
    let inputs = kept_all(0, &mut flow0.inputs.iter().copied())?;
    let outputs = kept_all(0, &mut flow0.outputs.iter().copied())?;
    let unknown_scratch = add_kernel_scratch(&subgraphs, &walk, &mut tensors);
    tflite_index.resize(tensors.len(), None);
    let origin = TfliteOrigin {
        file: std::mem::take(&mut graph.file),
        tensor_count: global_offset,
        subgraph_count: subgraphs.len() as u32,
        tflite_index,
        unknown_scratch,
        embedded_offsets: graph.offline_offsets.take(),
        roles,
    };
    Ok(Model {
        path,
        tensors,
        operators,
        inputs,
        outputs,
        num_steps: Some(walk.last_step + 1),
        rule: LifetimeRule::Sequential,
        tflite: Some(Box::new(origin)),
    })
}

/// Per subgraph, per tensor: whether a VAR_HANDLE operator outputs it.
pub(crate) fn var_handle_outputs(subgraphs: &[GraphSubgraph]) -> Vec<Vec<bool>> {
    subgraphs
        .iter()
        .map(|subgraph| {
            let mut marked = vec![false; subgraph.tensors.len()];
            let operators = subgraph.flow.operators.iter();
            for (operator, name) in operators.zip(&subgraph.operator_names) {
                if name == "VAR_HANDLE" {
                    for &tensor in &operator.outputs {
                        marked[tensor] = true;
                    }
                }
            }
            marked
        })
        .collect()
}

/// Appends the scratch buffers the reference kernels request ([`super::tflm_kernels`]) as
/// tensors of their operators, in TFLite Micro's request order; returns the operators whose
/// requests memplan cannot size.
fn add_kernel_scratch(
    subgraphs: &[GraphSubgraph],
    walk: &Walk,
    tensors: &mut Vec<Tensor>,
) -> Vec<String> {
    let mut unknown = Vec::new();
    for (subgraph, record) in subgraphs.iter().enumerate() {
        let operators = record.flow.operators.iter().zip(&record.operator_names);
        for (position, (operator, name)) in operators.enumerate() {
            // An operator the run never reaches gets no lifetime in TFLite Micro either.
            let Some(span) = walk.operator_spans[subgraph][position] else {
                continue;
            };
            let operator_id = if subgraph == 0 {
                format!("op{position}")
            } else {
                format!("{subgraph}:op{position}")
            };
            let sizes = match operator_scratch(record, operator, name) {
                KernelScratch::Buffers(sizes) => sizes,
                KernelScratch::Unknown(why) => {
                    unknown.push(format!("operator {operator_id} ({name}): {why}"));
                    continue;
                }
            };
            for (request, bytes) in sizes.into_iter().enumerate() {
                // A request of 0 bytes takes no arena space in TFLite Micro either.
                if bytes == 0 || bytes > MAX_TENSOR_BYTES {
                    continue;
                }
                let mut scratch = Tensor::new(
                    format!("{operator_id}.scratch{request}"),
                    TensorKind::Intermediate,
                    align_up(bytes, TFLM_ALIGNMENT),
                );
                scratch.name = format!("{name} scratch {request} ({operator_id})");
                scratch.lifetime = Some(span);
                scratch.alignment = Some(TFLM_ALIGNMENT);
                tensors.push(scratch);
            }
        }
    }
    unknown
}

/// What the kernel of `operator` (of `subgraph`, named `name`) requests ([`kernel_scratch`]).
pub(crate) fn operator_scratch(
    subgraph: &GraphSubgraph,
    operator: &OperatorFlow,
    name: &str,
) -> KernelScratch {
    let inputs: Vec<Option<&GraphTensor>> = operator
        .inputs
        .iter()
        .map(|tensor| tensor.map(|tensor| &subgraph.tensors[tensor]))
        .collect();
    let outputs: Vec<&GraphTensor> = operator
        .outputs
        .iter()
        .map(|&tensor| &subgraph.tensors[tensor])
        .collect();
    kernel_scratch(name, &inputs, &outputs)
}

fn walk(graph: &TfliteGraph, error: &dyn Fn(String) -> Error) -> Result<Walk> {
    let flows: Vec<_> = graph
        .subgraphs
        .iter()
        .map(|subgraph| &subgraph.flow)
        .collect();
    tflite_walk::walk(&flows, graph.work_limit).map_err(|err| {
        error(match err {
            WalkError::Cycle { subgraph } => format!(
                "unsupported: subgraph {subgraph} runs itself through control-flow operators \
                 (CALL_ONCE, IF, WHILE), so its lifetimes never end"
            ),
            WalkError::TooDeep => format!(
                "unsupported: control-flow operators nest more than {} subgraphs deep",
                tflite_walk::MAX_NESTING
            ),
            WalkError::TooLarge => format!(
                "unsupported: running every subgraph its control-flow operators invoke \
                 takes more than {} steps and tensor uses (a quarter of the file's size, \
                 at most {})",
                graph.work_limit.min(tflite_walk::MAX_WORK),
                tflite_walk::MAX_WORK
            ),
        })
    })
}

/// Bytes TFLite Micro reserves for a non-constant tensor: elements (the product of the shape,
/// 1 for a scalar) times the element size, rounded up to [`TFLM_ALIGNMENT`].
pub(crate) fn planned_size(
    subgraph: usize,
    index: usize,
    tensor: &GraphTensor,
    error: &dyn Fn(String) -> Error,
) -> Result<u64> {
    let place = || format!("tensor {} ({})", tensor_id(subgraph, index), tensor.name);
    let element_size = tensor.element_size.ok_or_else(|| {
        error(format!(
            "unsupported: {} has type {} (code {}), which has no fixed size to plan",
            place(),
            tensor.type_name,
            tensor.type_code
        ))
    })?;
    let mut bytes = element_size;
    for &dimension in tensor.shape.iter().flatten() {
        let dimension = u64::try_from(dimension).map_err(|_| {
            error(format!(
                "unsupported: {} has a dynamic shape (dimension {dimension}); give the model \
                 fixed shapes before planning",
                place()
            ))
        })?;
        bytes = bytes
            .checked_mul(dimension)
            .ok_or_else(|| error(format!("{} is larger than 2^64 bytes", place())))?;
    }
    if bytes > MAX_TENSOR_BYTES {
        // The cap every reader applies: it keeps planners' offset + size sums far from
        // overflow (TFLite Micro itself would fail on such a tensor).
        return Err(error(format!(
            "{} has {bytes} bytes, larger than memplan accepts ({MAX_TENSOR_BYTES}); check its \
             shape",
            place()
        )));
    }
    Ok(align_up(bytes, TFLM_ALIGNMENT))
}
