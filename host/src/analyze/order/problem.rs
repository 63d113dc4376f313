//! The order problem of one model: which orders of its operators are valid, and what each
//! step holds in the arena under a given order.
//!
//! Valid orders are the topological orders of a graph of "runs before" edges, each from an
//! operator to one stored later (so the stored order is always valid):
//! - data: the writer of a tensor runs before its readers; a tensor with several writers, one
//!   read before it is written, or a variable tensor (state across invocations) keeps all its
//!   operators in their stored order;
//! - resource variables: operators on the same variable (VAR_HANDLE, READ_VARIABLE,
//!   ASSIGN_VARIABLE on the handle of the same `container/shared_name`) keep their order;
//! - operators memplan cannot reason about (unknown or custom operators, operators with side
//!   effects such as random numbers or hash tables, kernels whose scratch memplan cannot size)
//!   keep their order among themselves and with every operator that touches one of their
//!   tensors;
//! - control flow (CALL_ONCE, IF, WHILE: they run other subgraphs, which may touch any
//!   variable) keeps its position relative to every operator, so CALL_ONCE stays first.
//!
//! What a step holds follows TensorFlow Lite Micro's lifetime rule (and memplan's sequential
//! rule, which is the same on graphs without control flow): a buffer (a planned tensor, or an
//! alias chain's root) is live from the step of the first operator that touches it (step 0
//! for a graph input or a tensor no operator writes) to the step of the last one (the end for
//! a graph output). An operator's kernel scratch buffers, and the planned tensors of the
//! subgraphs it runs, are live at its own step only ([`OrderProblem::transient`]); sizes are
//! the planned ones (16-byte rounded for TFLite Micro). Constant and persistent tensors live
//! the whole run whatever the order and are left out.

use std::collections::HashMap;

use memplan_plugin_api::bounds::align_up;

use crate::analyze::aliases::AliasRoots;
use crate::analyze::lifetimes::tflite_micro::{
    operator_scratch, planned_size, var_handle_outputs, TFLM_ALIGNMENT,
};
use crate::analyze::lifetimes::tflm_kernels::KernelScratch;
use crate::input::graph::{GraphStorage, TfliteGraph};
use crate::input::model::{Model, TensorKind};

/// A buffer whose lifetime depends on the order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub size: u64,
    /// Operators that read or write it, ascending, each once.
    pub touchers: Vec<u32>,
    /// Live from step 0 (a graph input, or read but never written).
    pub from_start: bool,
    /// Live to the last step (a graph output).
    pub to_end: bool,
}

/// See the module docs. Operators are numbered by stored position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderProblem {
    /// By operator: the operators that must run before it (all stored earlier).
    pub before: Vec<Vec<u32>>,
    /// By operator: the buffers it touches, each once.
    pub touches: Vec<Vec<u32>>,
    /// By operator: bytes live at its step only (kernel scratch, subgraphs it runs).
    pub transient: Vec<u64>,
    pub buffers: Vec<Buffer>,
}

/// Operators whose effects are not in their tensors: they keep their place among themselves
/// and with what they touch.
const SIDE_EFFECTS: &[&str] = &[
    "HASHTABLE",
    "HASHTABLE_FIND",
    "HASHTABLE_IMPORT",
    "HASHTABLE_SIZE",
    "RANDOM_STANDARD_NORMAL",
    "RANDOM_UNIFORM",
    "MULTINOMIAL",
];

/// Operators that run other subgraphs: they keep their place relative to every operator.
const CONTROL_FLOW: &[&str] = &["CALL_ONCE", "IF", "WHILE", "CALL"];

/// Operators on resource variables, with the handle as input 0.
const RESOURCE_USES: &[&str] = &["READ_VARIABLE", "ASSIGN_VARIABLE"];

/// Edges and uses gathered while a problem is built.
struct Builder {
    before: Vec<Vec<u32>>,
    /// By tensor key: (writers, readers), each in stored order as pushed.
    uses: Vec<(Vec<u32>, Vec<u32>)>,
}

impl Builder {
    fn new(operators: usize, tensors: usize) -> Builder {
        Builder {
            before: vec![Vec::new(); operators],
            uses: vec![(Vec::new(), Vec::new()); tensors],
        }
    }

    /// `a` and `b` keep their stored order.
    fn keep(&mut self, a: u32, b: u32) {
        match a.cmp(&b) {
            std::cmp::Ordering::Less => self.before[b as usize].push(a),
            std::cmp::Ordering::Greater => self.before[a as usize].push(b),
            std::cmp::Ordering::Equal => {}
        }
    }

    /// `operators` (ascending) keep their stored order.
    fn chain(&mut self, operators: &[u32]) {
        for pair in operators.windows(2) {
            self.keep(pair[0], pair[1]);
        }
    }

    /// Every tensor's operators in ascending order, each once.
    fn touchers(&self, tensor: usize) -> Vec<u32> {
        let (writers, readers) = &self.uses[tensor];
        let mut all: Vec<u32> = writers.iter().chain(readers).copied().collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// The data rule (module docs) for one tensor; `state` marks a variable tensor.
    fn data_edges(&mut self, tensor: usize, state: bool) {
        let (writers, readers) = &self.uses[tensor];
        let mut writers = writers.clone();
        writers.dedup();
        match writers.as_slice() {
            [] if !state => {}
            [writer] if !state && readers.iter().all(|reader| reader >= writer) => {
                let (writer, readers) = (*writer, readers.clone());
                for reader in readers {
                    self.keep(writer, reader);
                }
            }
            _ => {
                let all = self.touchers(tensor);
                self.chain(&all);
            }
        }
    }

    /// Operator `pinned` keeps its place relative to every operator touching `tensors`.
    fn pin(&mut self, pinned: u32, tensors: &[usize]) {
        for &tensor in tensors {
            for other in self.touchers(tensor) {
                self.keep(pinned, other);
            }
        }
    }

    fn barrier(&mut self, operator: u32) {
        for other in 0..self.before.len() as u32 {
            self.keep(operator, other);
        }
    }

    fn finish(
        mut self,
        touches: Vec<Vec<u32>>,
        transient: Vec<u64>,
        buffers: Vec<Buffer>,
    ) -> OrderProblem {
        for before in &mut self.before {
            before.sort_unstable();
            before.dedup();
        }
        OrderProblem {
            before: self.before,
            touches,
            transient,
            buffers,
        }
    }
}

/// Buffers from `(tensor, size, from_start, to_end)`, and what each operator touches.
fn buffers_of(
    builder: &Builder,
    operators: usize,
    planned: impl Iterator<Item = (usize, u64, bool, bool)>,
) -> (Vec<Vec<u32>>, Vec<Buffer>) {
    let mut touches = vec![Vec::new(); operators];
    let mut buffers = Vec::new();
    for (tensor, size, from_start, to_end) in planned {
        let touchers = builder.touchers(tensor);
        for &operator in &touchers {
            touches[operator as usize].push(buffers.len() as u32);
        }
        buffers.push(Buffer {
            size,
            touchers,
            from_start,
            to_end,
        });
    }
    (touches, buffers)
}

/// The problem of a model with the sequential rule (memplan JSON with `operators`), or `None`
/// when its lifetimes do not follow from the order (explicit lifetimes or steps).
pub fn from_sequential(model: &Model, roots: &AliasRoots) -> Option<OrderProblem> {
    if model.operators.len() < 2
        || model.num_steps.is_some()
        || model.tensors.iter().any(|tensor| tensor.lifetime.is_some())
    {
        return None;
    }
    let n = model.tensors.len();
    let mut builder = Builder::new(model.operators.len(), n);
    let root = |tensor: u32| roots.root[tensor as usize] as usize;
    for (position, operator) in model.operators.iter().enumerate() {
        let position = position as u32;
        for &tensor in &operator.outputs {
            builder.uses[root(tensor)].0.push(position);
        }
        for &tensor in &operator.inputs {
            builder.uses[root(tensor)].1.push(position);
        }
    }
    let mut is_input = vec![false; n];
    let mut is_output = vec![false; n];
    for &tensor in &model.inputs {
        is_input[root(tensor)] = true;
    }
    for &tensor in &model.outputs {
        is_output[root(tensor)] = true;
    }
    let mut planned = Vec::new();
    for (tensor, record) in model.tensors.iter().enumerate() {
        if roots.root[tensor] as usize != tensor {
            continue;
        }
        match record.kind {
            TensorKind::Constant => {}
            TensorKind::Persistent => builder.data_edges(tensor, true),
            _ => {
                builder.data_edges(tensor, false);
                // The sequential rule refuses a read before any write (analysis reports it),
                // so only graph inputs are live from the start.
                planned.push((tensor, record.size, is_input[tensor], is_output[tensor]));
            }
        }
    }
    let (touches, buffers) = buffers_of(&builder, model.operators.len(), planned.into_iter());
    let transient = vec![0; model.operators.len()];
    Some(builder.finish(touches, transient, buffers))
}

/// The problem of subgraph 0 of a `.tflite` model, or `None` when it has fewer than two
/// operators or a tensor without a plannable size (analysis reports those).
pub fn from_tflite(graph: &TfliteGraph) -> Option<OrderProblem> {
    let subgraph = graph.subgraphs.first()?;
    let flow = &subgraph.flow;
    let operators = flow.operators.len();
    if operators < 2 {
        return None;
    }
    let handles = var_handle_outputs(&graph.subgraphs).swap_remove(0);
    let mut builder = Builder::new(operators, flow.tensor_count);
    for (position, operator) in flow.operators.iter().enumerate() {
        let position = position as u32;
        for &tensor in &operator.outputs {
            builder.uses[tensor].0.push(position);
        }
        for &tensor in operator.inputs.iter().flatten() {
            builder.uses[tensor].1.push(position);
        }
    }

    // Resource variables: each VAR_HANDLE's output names its variable.
    let mut resource_of_handle: HashMap<usize, String> = HashMap::new();
    let mut on_resource: HashMap<String, Vec<u32>> = HashMap::new();
    for (position, operator) in flow.operators.iter().enumerate() {
        let name = subgraph.operator_names[position].as_str();
        let facts = subgraph.operator_facts.get(position);
        if name == "VAR_HANDLE" {
            let key = facts
                .and_then(|facts| facts.resource.clone())
                .unwrap_or_else(|| format!("operator {position}"));
            for &tensor in &operator.outputs {
                resource_of_handle.insert(tensor, key.clone());
            }
            on_resource.entry(key).or_default().push(position as u32);
        } else if RESOURCE_USES.contains(&name) {
            if let Some(Some(handle)) = operator.inputs.first() {
                let key = resource_of_handle
                    .get(handle)
                    .cloned()
                    .unwrap_or_else(|| format!("tensor {handle}"));
                on_resource.entry(key).or_default().push(position as u32);
            }
        }
    }
    for operators in on_resource.values() {
        builder.chain(operators);
    }

    let mut is_input = vec![false; flow.tensor_count];
    let mut is_output = vec![false; flow.tensor_count];
    for &tensor in &flow.inputs {
        is_input[tensor] = true;
    }
    for &tensor in &flow.outputs {
        is_output[tensor] = true;
    }
    let mut planned = Vec::new();
    for (tensor, record) in subgraph.tensors.iter().enumerate() {
        match record.storage {
            GraphStorage::Constant { .. } => {}
            GraphStorage::Variable => builder.data_edges(tensor, true),
            GraphStorage::Arena if handles[tensor] => builder.data_edges(tensor, false),
            GraphStorage::Arena => {
                builder.data_edges(tensor, false);
                let size = planned_size(0, tensor, record, &|message| {
                    crate::error::Error::input(message)
                })
                .ok()?;
                let (writers, readers) = &builder.uses[tensor];
                let read_unwritten = writers.is_empty() && !readers.is_empty();
                planned.push((
                    tensor,
                    size,
                    is_input[tensor] || read_unwritten,
                    is_output[tensor],
                ));
            }
        }
    }

    // Pinned operators and barriers, after the data edges (pinning needs every use).
    let mut pinned = Vec::new();
    let mut transient = vec![0u64; operators];
    for (position, operator) in flow.operators.iter().enumerate() {
        let name = subgraph.operator_names[position].as_str();
        let unknown = subgraph
            .operator_facts
            .get(position)
            .is_some_and(|facts| facts.unknown);
        let scratch_unknown = match operator_scratch(subgraph, operator, name) {
            KernelScratch::Buffers(sizes) => {
                transient[position] = sizes
                    .iter()
                    .map(|&bytes| align_up(bytes, TFLM_ALIGNMENT))
                    .sum();
                false
            }
            KernelScratch::Unknown(_) => true,
        };
        // The subgraphs it runs: their planned tensors, all counted at its step (more than
        // any of its inner steps holds; its position is fixed anyway).
        for &callee in &operator.invokes {
            for (index, tensor) in graph.subgraphs[callee].tensors.iter().enumerate() {
                if tensor.storage == GraphStorage::Arena {
                    transient[position] += planned_size(callee, index, tensor, &|message| {
                        crate::error::Error::input(message)
                    })
                    .unwrap_or(0);
                }
            }
        }
        if !operator.invokes.is_empty() || CONTROL_FLOW.contains(&name) {
            builder.barrier(position as u32);
        } else if unknown || scratch_unknown || SIDE_EFFECTS.contains(&name) {
            pinned.push(position as u32);
            let tensors: Vec<usize> = operator
                .inputs
                .iter()
                .flatten()
                .chain(&operator.outputs)
                .copied()
                .filter(|&tensor| {
                    !matches!(
                        subgraph.tensors[tensor].storage,
                        GraphStorage::Constant { .. }
                    )
                })
                .collect();
            builder.pin(position as u32, &tensors);
        }
    }
    builder.chain(&pinned);
    let (touches, buffers) = buffers_of(&builder, operators, planned.into_iter());
    Some(builder.finish(touches, transient, buffers))
}

/// The first pair of operators `order` (stored positions in run order) puts against a
/// constraint, as (earlier required, later required), or `None` when the order is valid.
/// `order` must be a permutation of the operators.
pub fn violated_edge(problem: &OrderProblem, order: &[u32]) -> Option<(u32, u32)> {
    let mut step = vec![0usize; order.len()];
    for (position, &operator) in order.iter().enumerate() {
        step[operator as usize] = position;
    }
    for (operator, before) in problem.before.iter().enumerate() {
        for &earlier in before {
            if step[earlier as usize] > step[operator] {
                return Some((earlier, operator as u32));
            }
        }
    }
    None
}
