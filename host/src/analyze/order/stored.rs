//! Whether the order a `.tflite` model stores is one TensorFlow Lite Micro can run correctly,
//! from the model alone (`memplan check model.tflite`): a model memplan wrote with a new order
//! carries no record of the old one, so what can be checked is what any valid order keeps.
//!
//! - every tensor of subgraph 0 that is not a graph input, a constant or a variable (state
//!   read before it is assigned is the point of a variable) is written before it is read: an
//!   operator reading it earlier would read bytes no operator wrote;
//! - CALL_ONCE runs before every operator on a resource variable (its init subgraph sets the
//!   variables up).

use crate::input::graph::{GraphStorage, TfliteGraph};
use crate::input::tflite::tensor_id;

/// One problem of a stored order: the tensor or operator, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderViolation {
    pub tensor: String,
    pub message: String,
}

/// Every problem of subgraph 0's stored order (module docs).
pub fn stored_order_violations(graph: &TfliteGraph) -> Vec<OrderViolation> {
    let Some(subgraph) = graph.subgraphs.first() else {
        return Vec::new();
    };
    let flow = &subgraph.flow;
    let operator = |position: usize| {
        format!(
            "operator {position} ({})",
            subgraph.operator_names[position]
        )
    };
    let mut first_write: Vec<Option<usize>> = vec![None; flow.tensor_count];
    for (position, op) in flow.operators.iter().enumerate() {
        for &tensor in &op.outputs {
            first_write[tensor].get_or_insert(position);
        }
    }
    let mut is_input = vec![false; flow.tensor_count];
    for &tensor in &flow.inputs {
        is_input[tensor] = true;
    }
    let mut violations = Vec::new();
    let mut reported = vec![false; flow.tensor_count];
    for (position, op) in flow.operators.iter().enumerate() {
        for &tensor in op.inputs.iter().flatten() {
            let record = &subgraph.tensors[tensor];
            if record.storage != GraphStorage::Arena || is_input[tensor] || reported[tensor] {
                continue;
            }
            if let Some(writer) = first_write[tensor].filter(|&writer| writer > position) {
                reported[tensor] = true;
                violations.push(OrderViolation {
                    tensor: format!("{} ({})", tensor_id(0, tensor), record.name),
                    message: format!(
                        "{} reads it before {} writes it: the stored operator order is not \
                         valid (a model reordered by hand, or damaged)",
                        operator(position),
                        operator(writer)
                    ),
                });
            }
        }
    }
    if let Some(call_once) = subgraph
        .operator_names
        .iter()
        .position(|name| name == "CALL_ONCE")
    {
        let resource_ops = ["VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"];
        if let Some(early) = subgraph.operator_names[..call_once]
            .iter()
            .position(|name| resource_ops.contains(&name.as_str()))
        {
            violations.push(OrderViolation {
                tensor: operator(call_once),
                message: format!(
                    "{} runs before it, but CALL_ONCE sets the resource variables up and must \
                     run first",
                    operator(early)
                ),
            });
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::LifetimeRule;

    #[test]
    fn a_consumer_moved_before_its_producer_is_reported_and_the_stored_order_is_not() {
        let Some(dir) = std::env::var_os("MEMPLAN_CORPUS") else {
            assert!(std::env::var_os("CI").is_none(), "CI sets MEMPLAN_CORPUS");
            return;
        };
        let path = std::path::Path::new(&dir).join("models/hey_jarvis.tflite");
        let LifetimeRule::TfliteMicro(mut graph) = crate::input::read_model(&path).unwrap().rule
        else {
            unreachable!()
        };
        assert_eq!(stored_order_violations(&graph), Vec::new());
        let mut swapped = graph.clone();
        let swap = |graph: &mut crate::input::graph::TfliteGraph, a: usize, b: usize| {
            let subgraph = &mut graph.subgraphs[0];
            subgraph.flow.operators.swap(a, b);
            subgraph.operator_names.swap(a, b);
        };
        // The output's reader (QUANTIZE, last) moved before its writer.
        let last = graph.subgraphs[0].flow.operators.len() - 1;
        swap(&mut swapped, 1, last);
        let violations = stored_order_violations(&swapped);
        assert!(
            violations.iter().any(|violation| violation
                .message
                .contains("operator 1 (QUANTIZE) reads it before")),
            "{violations:?}"
        );
        // CALL_ONCE after a VAR_HANDLE.
        swap(&mut graph, 0, 1);
        let violations = stored_order_violations(&graph);
        assert!(
            violations
                .iter()
                .any(|violation| violation.message.contains("must run first")),
            "{violations:?}"
        );
    }
}
