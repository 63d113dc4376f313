//! The order stage, the first of analysis (before lifetimes): memplan chooses the order the
//! operators run in, when another valid order has a lower peak of live bytes.
//!
//! TensorFlow Lite Micro runs the operators of a subgraph in the order they are stored, and
//! any order that keeps what each operator needs ([`problem`]: data, resource variables,
//! variable tensors, control flow, operators memplan cannot reason about) computes the same
//! results. The lower bound of the arena, the peak of live bytes over steps, is a property of
//! the order; [`search`] finds the valid order with the least peak (exact where the graph
//! allows, a heuristic within the time limit beyond).
//!
//! What is ordered: the operators of a `.tflite` model's subgraph 0 (other subgraphs run as
//! stored, inside their control-flow operator) and a JSON model's `operators`. Models whose
//! lifetimes do not follow from the order (explicit lifetimes or steps, CSV), and models with
//! placements to keep (fixed offsets, an offline plan in the `.tflite`, which were made for
//! the stored order), keep their order.
//!
//! Both bounds reported (stored order, new order) are computed by applying the lifetime rule
//! to the model in that order, exactly as the rest of analysis then does, not by the search's
//! own model of the steps: a new order is taken only when its real bound is lower, so a model
//! where nothing is gained is planned exactly as before.

pub mod generated;
pub mod problem;
pub mod search;
pub mod stored;

use std::path::Path;
use std::time::{Duration, Instant};

use memplan_plugin_api::bounds::lower_bound;

use crate::analyze::{aliases, lifetimes};
use crate::error::{Error, Result};
use crate::input::graph::TfliteGraph;
use crate::input::model::{LifetimeRule, Model, TensorKind};
use problem::OrderProblem;

/// Whether the plan is made for the best order found or for the stored one (`--order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderMode {
    /// Plan for the best order found (when it lowers the bound).
    Best,
    /// Plan for the stored order; the best one is still searched, to say what it would gain.
    Keep,
}

impl OrderMode {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderMode::Best => "best",
            OrderMode::Keep => "keep",
        }
    }
}

/// How long the search may take by default (the corpus models take a few milliseconds).
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(1);

/// What the order stage found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorOrder {
    /// The peak of live scratch bytes (the arena's lower bound) with the stored order.
    pub stored_bound: u64,
    /// The same with the best order found (equal to `stored_bound` when nothing is gained).
    pub best_bound: u64,
    /// The best order found, as stored operator indices in run order (subgraph 0 of a
    /// `.tflite`); the stored order when nothing is gained.
    pub best: Vec<u32>,
    /// Operator types in stored order, for listings.
    pub operator_types: Vec<String>,
    /// Whether the model was reordered: the plan holds for `best`, not the stored order.
    pub applied: bool,
    /// Whether `best_bound` is proven the least over valid orders.
    pub exact: bool,
    pub search_time: Duration,
}

impl OperatorOrder {
    /// Whether another order lowers the bound.
    pub fn gains(&self) -> bool {
        self.best_bound < self.stored_bound
    }
}

/// Searches the best order of `model` and, with [`OrderMode::Best`] and a gain, reorders the
/// model. `None` for models whose order is not memplan's to choose (module docs).
pub fn choose(
    model: &mut Model,
    mode: OrderMode,
    time_limit: Duration,
) -> Result<Option<OperatorOrder>> {
    let start = Instant::now();
    let Some(problem) = problem_of(model)? else {
        return Ok(None);
    };
    let found = search::search(&problem, start + time_limit);
    let stored_bound = scratch_peak(model)?;
    let mut reordered = model.clone_order_view();
    permute(&mut reordered, &found.order);
    let best_bound = scratch_peak(&reordered)?;
    if best_bound != found.peak {
        tracing::debug!(
            "{}: the order search counted a peak of {} bytes, the lifetime rule gives {best_bound}",
            model.path.display(),
            found.peak
        );
    }
    let gains = best_bound < stored_bound;
    let applied = gains && mode == OrderMode::Best;
    let types = operator_types(model);
    if applied {
        permute(model, &found.order);
    }
    Ok(Some(OperatorOrder {
        stored_bound,
        best_bound: best_bound.min(stored_bound),
        best: if gains {
            found.order
        } else {
            (0..problem.before.len() as u32).collect()
        },
        operator_types: types,
        applied,
        exact: found.exact,
        search_time: start.elapsed(),
    }))
}

/// Reorders `model` to `order` (a plan file's), after checking that it is a valid order of
/// the model's operators; `plan` names the plan file in messages.
pub fn apply_given(model: &mut Model, order: &[u32], plan: &Path) -> Result<OperatorOrder> {
    let problem = problem_of(model)?.ok_or_else(|| {
        Error::input(format!(
            "{}: the plan holds for another operator order (its \"operator_order\"), but {} \
             has no operator order memplan may change; check the plan against the model it \
             was made from",
            plan.display(),
            model.path.display()
        ))
    })?;
    let n = problem.before.len();
    let mut seen = vec![false; n];
    for &operator in order {
        match seen.get_mut(operator as usize) {
            Some(seen) if !*seen => *seen = true,
            _ => {
                return Err(Error::input(format!(
                    "{}: \"operator_order\" is not an order of the {n} operators of {}: operator \
                     {operator} is out of range or listed twice",
                    plan.display(),
                    model.path.display()
                )))
            }
        }
    }
    if order.len() != n {
        return Err(Error::input(format!(
            "{}: \"operator_order\" lists {} operators, {} has {n}",
            plan.display(),
            order.len(),
            model.path.display()
        )));
    }
    let types = operator_types(model);
    if let Some((earlier, later)) = problem::violated_edge(&problem, order) {
        return Err(Error::rejected(format!(
            "{}: \"operator_order\" is not a valid order of {}: operator {later} ({}) runs \
             before operator {earlier} ({}), which it depends on (data, a resource variable, \
             a variable tensor, or an operator memplan cannot reorder); the plan does not hold \
             for the model",
            plan.display(),
            model.path.display(),
            types.get(later as usize).map_or("?", String::as_str),
            types.get(earlier as usize).map_or("?", String::as_str),
        )));
    }
    let stored_bound = scratch_peak(model)?;
    permute(model, order);
    let best_bound = scratch_peak(model)?;
    Ok(OperatorOrder {
        stored_bound,
        best_bound,
        best: order.to_vec(),
        operator_types: types,
        applied: true,
        exact: false,
        search_time: Duration::ZERO,
    })
}

/// The operator types in the model's current order.
fn operator_types(model: &Model) -> Vec<String> {
    match &model.rule {
        LifetimeRule::TfliteMicro(graph) => graph.subgraphs[0].operator_names.clone(),
        LifetimeRule::Sequential => model
            .operators
            .iter()
            .map(|operator| operator.op_type.clone())
            .collect(),
    }
}

/// The order problem of a model, `None` when its order is not memplan's to choose.
fn problem_of(model: &Model) -> Result<Option<OrderProblem>> {
    match &model.rule {
        LifetimeRule::TfliteMicro(graph) => {
            let keeps_placements = !graph.offline_plan_under_check
                && graph
                    .offline_offsets
                    .as_ref()
                    .is_some_and(|offsets| offsets.iter().any(|&offset| offset >= 0));
            Ok((!keeps_placements)
                .then(|| problem::from_tflite(graph))
                .flatten())
        }
        LifetimeRule::Sequential => {
            if model
                .tensors
                .iter()
                .any(|tensor| tensor.fixed_offset.is_some())
            {
                return Ok(None);
            }
            let roots = aliases::resolve(model)?;
            Ok(problem::from_sequential(model, &roots))
        }
    }
}

impl Model {
    /// What the order stage needs to evaluate another order: the model without its constant
    /// bytes and file (a `.tflite` graph is cheap to copy without them).
    fn clone_order_view(&self) -> Model {
        match &self.rule {
            LifetimeRule::TfliteMicro(graph) => Model {
                path: self.path.clone(),
                rule: LifetimeRule::TfliteMicro(Box::new(TfliteGraph {
                    subgraphs: graph.subgraphs.clone(),
                    buffers: Default::default(),
                    offline_offsets: graph.offline_offsets.clone(),
                    work_limit: graph.work_limit,
                    copy_budget: graph.copy_budget,
                    file: Vec::new(),
                    offline_plan_under_check: graph.offline_plan_under_check,
                })),
                ..Model::default()
            },
            LifetimeRule::Sequential => self.clone(),
        }
    }
}

/// Runs the operators in `order` (stored positions): `order[k]` becomes operator `k`.
fn permute(model: &mut Model, order: &[u32]) {
    fn reorder<T: Clone>(items: &mut Vec<T>, order: &[u32]) {
        if items.len() == order.len() {
            *items = order.iter().map(|&k| items[k as usize].clone()).collect();
        }
    }
    match &mut model.rule {
        LifetimeRule::TfliteMicro(graph) => {
            let subgraph = &mut graph.subgraphs[0];
            reorder(&mut subgraph.flow.operators, order);
            reorder(&mut subgraph.operator_names, order);
            reorder(&mut subgraph.operator_facts, order);
        }
        LifetimeRule::Sequential => reorder(&mut model.operators, order),
    }
}

/// The peak of live scratch bytes of `model` in its current order, by the lifetime rule
/// analysis applies (TFLite Micro's for a `.tflite`, with kernel scratch buffers).
fn scratch_peak(model: &Model) -> Result<u64> {
    let resolved;
    let model = match &model.rule {
        LifetimeRule::TfliteMicro(_) => {
            let mut view = model.clone_order_view();
            if let LifetimeRule::TfliteMicro(graph) = &mut view.rule {
                graph.offline_plan_under_check = true; // placements play no part in the peak
            }
            resolved = lifetimes::tflite_micro::resolve(view)?;
            &resolved
        }
        LifetimeRule::Sequential => model,
    };
    let roots = aliases::resolve(model)?;
    let derived = lifetimes::derive(model, &roots)?;
    Ok(lower_bound(
        model
            .tensors
            .iter()
            .enumerate()
            .filter(|&(index, tensor)| {
                roots.root[index] as usize == index
                    && !matches!(tensor.kind, TensorKind::Constant | TensorKind::Persistent)
            })
            .map(|(index, tensor)| (tensor.size, derived.lifetimes[index])),
    ))
}

#[cfg(test)]
mod tests;
