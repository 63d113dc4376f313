use std::path::Path;

use super::*;
use crate::input::model::{Operator, Tensor};

fn corpus_model(name: &str) -> Option<Model> {
    let dir = std::env::var_os("MEMPLAN_CORPUS")?;
    Some(crate::input::read_model(&Path::new(&dir).join("models").join(name)).expect("reads"))
}

#[test]
fn hey_jarvis_reorders_from_3248_to_2528_and_chains_keep_their_order() {
    let Some(mut model) = corpus_model("hey_jarvis.tflite") else {
        assert!(std::env::var_os("CI").is_none(), "CI sets MEMPLAN_CORPUS");
        return;
    };
    let order = choose(&mut model, OrderMode::Best, DEFAULT_TIME_LIMIT)
        .unwrap()
        .expect("a .tflite has an order");
    assert_eq!((order.stored_bound, order.best_bound), (3248, 2528));
    assert!(order.applied && order.exact);
    assert_eq!(order.best[0], 0, "CALL_ONCE stays first");
    assert_eq!(order.operator_types[0], "CALL_ONCE");

    for name in ["vww_96_int8.tflite", "person_detect.tflite"] {
        let mut model = corpus_model(name).unwrap();
        let before = model.clone();
        let order = choose(&mut model, OrderMode::Best, DEFAULT_TIME_LIMIT)
            .unwrap()
            .unwrap();
        assert!(!order.gains() && !order.applied, "{name}");
        assert_eq!(model, before, "{name}");
    }
}

#[test]
fn keep_reports_the_gain_without_reordering() {
    let Some(mut model) = corpus_model("hey_jarvis.tflite") else {
        return;
    };
    let before = model.clone();
    let order = choose(&mut model, OrderMode::Keep, DEFAULT_TIME_LIMIT)
        .unwrap()
        .unwrap();
    assert!(order.gains() && !order.applied);
    assert_eq!(model, before);
}

/// A JSON-like model of the generated graph: buffer `b` is tensor `b`.
fn sequential_model(operators: usize, seed: u64) -> Model {
    let problem = generated::generated_problem(operators, seed);
    let mut tensors: Vec<Tensor> = problem
        .buffers
        .iter()
        .enumerate()
        .map(|(index, buffer)| {
            Tensor::new(
                format!("t{index}"),
                if buffer.from_start {
                    TensorKind::Input
                } else if buffer.to_end {
                    TensorKind::Output
                } else {
                    TensorKind::Intermediate
                },
                buffer.size,
            )
        })
        .collect();
    tensors[0].kind = TensorKind::Input;
    let operators = (0..operators)
        .map(|k| Operator {
            op_type: format!("op{k}"),
            inputs: problem.touches[k]
                .iter()
                .copied()
                .filter(|&b| b as usize != k + 1)
                .collect(),
            outputs: vec![k as u32 + 1],
        })
        .collect();
    Model {
        path: "generated.json".into(),
        inputs: vec![0],
        outputs: vec![problem.buffers.len() as u32 - 1],
        tensors,
        operators,
        ..Model::default()
    }
}

#[test]
fn the_search_counts_steps_as_the_lifetime_rule_does() {
    for seed in 0..100 {
        let mut model = sequential_model(4 + seed as usize % 9, seed);
        let stored = model.clone();
        let problem = problem_of(&model).unwrap().expect("orderable");
        let found = search::search(&problem, Instant::now() + DEFAULT_TIME_LIMIT);
        let stored_order: Vec<u32> = (0..problem.before.len() as u32).collect();
        assert_eq!(
            search::peak_of(&problem, &stored_order),
            scratch_peak(&stored).unwrap(),
            "seed {seed}"
        );
        let order = choose(&mut model, OrderMode::Best, DEFAULT_TIME_LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(order.best_bound, found.peak, "seed {seed}");
        assert_eq!(
            scratch_peak(&model).unwrap(),
            order.best_bound,
            "seed {seed}"
        );
    }
}

/// t0 (input) -> op0 -> t1 -> op1 -> t2 (output); op2 reads t0 into t3 (output).
fn chain_model() -> Model {
    let kinds = [
        TensorKind::Input,
        TensorKind::Intermediate,
        TensorKind::Output,
        TensorKind::Output,
    ];
    let op = |inputs: &[u32], outputs: &[u32]| Operator {
        op_type: "op".into(),
        inputs: inputs.to_vec(),
        outputs: outputs.to_vec(),
    };
    Model {
        path: "chain.json".into(),
        tensors: kinds
            .iter()
            .enumerate()
            .map(|(index, &kind)| Tensor::new(format!("t{index}"), kind, 16))
            .collect(),
        operators: vec![op(&[0], &[1]), op(&[1], &[2]), op(&[0], &[3])],
        inputs: vec![0],
        outputs: vec![2, 3],
        ..Model::default()
    }
}

#[test]
fn a_given_order_that_breaks_a_dependency_is_refused() {
    let mut model = chain_model();
    let error = apply_given(&mut model, &[1, 0, 2], Path::new("plan.json"))
        .unwrap_err()
        .message;
    assert!(
        error.contains("is not a valid order")
            && error.contains("operator 1 (op) runs before operator 0"),
        "{error}"
    );
    let error = apply_given(&mut model, &[0, 0, 2], Path::new("plan.json"))
        .unwrap_err()
        .message;
    assert!(error.contains("listed twice"), "{error}");
    let error = apply_given(&mut model, &[0, 1], Path::new("plan.json"))
        .unwrap_err()
        .message;
    assert!(error.contains("lists 2 operators"), "{error}");
    // op2 only needs the input: it may run first.
    apply_given(&mut model, &[2, 0, 1], Path::new("plan.json")).unwrap();
    assert_eq!(model.operators[0].outputs, vec![3]);
}
