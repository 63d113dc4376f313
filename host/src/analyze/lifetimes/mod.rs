//! Lifetime rules. A model's format chooses its rule ([`crate::input::LifetimeRule`]):
//! - TensorFlow Lite Micro's for `.tflite` ([`tflite_micro`], with its walk over the graph in
//!   [`tflite_walk`]): it decides which tensors are planned, their lifetimes and arena sizes,
//!   and yields a model with explicit lifetimes;
//! - the sequential rule below for every model (JSON, CSV, and a resolved `.tflite`), which
//!   derives lifetimes from the operator order where none are explicit.
//!
//! # The sequential rule
//!
//! Inclusive lifetimes from the operator order, following TensorFlow Lite Micro.
//!
//! Step numbering: graph inputs are live at step 0; operator `k` (0-based) runs at step
//! `k + 1`; graph outputs live until the last step, `operators.len()`. A tensor lives from the
//! step that writes it (or step 0 for graph inputs) to the last step that reads or writes it.
//! Constants and persistent tensors live the whole run. An explicit `lifetime` on a tensor
//! replaces the derived one. All tensors of an alias chain share the union of their
//! lifetimes, since they share the root's bytes. O(n + total operator arity).

pub mod tflite_micro;
pub mod tflite_walk;
pub mod tflm_kernels;

use memplan_plugin_api::Lifetime;

use crate::analyze::aliases::AliasRoots;
use crate::error::{Error, Result};
use crate::input::model::TensorKind;
use crate::input::Model;

const UNSET: u32 = u32::MAX;

/// Lifetimes of every tensor and the number of steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    pub lifetimes: Vec<Lifetime>,
    pub num_steps: u32,
    /// Tensors that no operator, graph input/output or explicit lifetime touches (their
    /// lifetime is `[0, 0]`): count and the first one's index, for a warning.
    pub unused: (usize, Option<u32>),
}

pub fn derive(model: &Model, roots: &AliasRoots) -> Result<Lifetimes> {
    let file = model.path.display();
    let n = model.tensors.len();
    let last_step = u32::try_from(model.operators.len())
        .ok()
        .filter(|&steps| steps < UNSET - 1)
        .ok_or_else(|| Error::input(format!("{file}: too many operators (at most 2^32 - 2)")))?;
    let mut first = vec![UNSET; n];
    let mut last = vec![UNSET; n];
    // Whether the bytes of each root have been written by the time an operator reads them.
    let mut written = vec![false; n];
    // Steps only grow, so "first touch" is the earliest and "latest touch" the last.
    fn touch(first: &mut [u32], last: &mut [u32], t: u32, step: u32) {
        let t = t as usize;
        if first[t] == UNSET {
            first[t] = step;
        }
        last[t] = step;
    }

    for (t, tensor) in model.tensors.iter().enumerate() {
        if matches!(tensor.kind, TensorKind::Constant | TensorKind::Persistent)
            || tensor.lifetime.is_some()
        {
            written[roots.root[t] as usize] = true;
        }
    }
    for &t in &model.inputs {
        touch(&mut first, &mut last, t, 0);
        written[roots.root[t as usize] as usize] = true;
    }
    for (k, op) in model.operators.iter().enumerate() {
        let step = k as u32 + 1;
        for &t in &op.inputs {
            let tensor = &model.tensors[t as usize];
            if !written[roots.root[t as usize] as usize] && tensor.lifetime.is_none() {
                return Err(Error::input(format!(
                    "{file}: operators[{k}] ({}) reads tensor '{}', which no earlier operator writes and which is not a graph input or a constant; list it in `inputs`, mark it constant/persistent, or fix the operator order",
                    op.op_type, tensor.id
                )));
            }
            touch(&mut first, &mut last, t, step);
        }
        for &t in &op.outputs {
            let tensor = &model.tensors[t as usize];
            if tensor.kind == TensorKind::Constant {
                return Err(Error::input(format!(
                    "{file}: operators[{k}] ({}) writes constant tensor '{}'; constants are read-only (make it persistent or intermediate)",
                    op.op_type, tensor.id
                )));
            }
            touch(&mut first, &mut last, t, step);
            written[roots.root[t as usize] as usize] = true;
        }
    }
    for &t in &model.outputs {
        touch(&mut first, &mut last, t, last_step);
    }

    let mut max_last = if n == 0 { None } else { Some(last_step) };
    for tensor in &model.tensors {
        if let Some(lifetime) = tensor.lifetime {
            max_last = Some(max_last.map_or(lifetime.last, |m| m.max(lifetime.last)));
        }
    }
    let needed = match max_last {
        None => 0,
        Some(last) => last.checked_add(1).ok_or_else(|| {
            Error::input(format!(
                "{file}: a lifetime ends at step {last}; steps must stay below 2^32 - 1"
            ))
        })?,
    };
    let num_steps = match model.num_steps {
        Some(given) if given < needed => {
            return Err(Error::input(format!(
                "{file}: the model has {given} steps but a lifetime reaches step {}",
                needed - 1
            )))
        }
        Some(given) => given,
        None => needed,
    };
    let whole_run = Lifetime::new(0, num_steps.saturating_sub(1));

    for (t, tensor) in model.tensors.iter().enumerate() {
        if let Some(lifetime) = tensor.lifetime {
            first[t] = lifetime.first;
            last[t] = lifetime.last;
        } else if matches!(tensor.kind, TensorKind::Constant | TensorKind::Persistent) {
            first[t] = whole_run.first;
            last[t] = whole_run.last;
        }
    }
    // Merge each alias chain: the root's range becomes the union over the chain, then every
    // member takes the root's range.
    for t in 0..n {
        let r = roots.root[t] as usize;
        if r != t && first[t] != UNSET {
            if first[r] == UNSET {
                first[r] = first[t];
                last[r] = last[t];
            } else {
                first[r] = first[r].min(first[t]);
                last[r] = last[r].max(last[t]);
            }
        }
    }
    let mut unused = (0usize, None);
    let lifetimes = (0..n)
        .map(|t| {
            let r = roots.root[t] as usize;
            if first[r] == UNSET {
                unused.0 += 1;
                unused.1.get_or_insert(t as u32);
                Lifetime::new(0, 0)
            } else {
                Lifetime::new(first[r], last[r])
            }
        })
        .collect();
    Ok(Lifetimes {
        lifetimes,
        num_steps,
        unused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::aliases;
    use crate::input::{ModelAlias, Operator, Tensor};

    fn op(inputs: &[u32], outputs: &[u32]) -> Operator {
        Operator {
            op_type: "op".into(),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
        }
    }

    fn model(kinds: &[TensorKind], operators: Vec<Operator>) -> Model {
        Model {
            path: "m.json".into(),
            tensors: kinds
                .iter()
                .enumerate()
                .map(|(i, &k)| Tensor::new(format!("t{i}"), k, 16))
                .collect(),
            operators,
            ..Model::default()
        }
    }

    fn derive_all(model: &Model) -> Result<Lifetimes> {
        derive(model, &aliases::resolve(model)?)
    }

    #[test]
    fn follows_tflite_micro_step_numbering() {
        use TensorKind::*;
        // t0 input -> op0 -> t1 -> op1(t1, t3 const) -> t2 output; t4 persistent.
        let mut m = model(
            &[Input, Intermediate, Output, Constant, Persistent],
            vec![op(&[0], &[1]), op(&[1, 3], &[2])],
        );
        m.inputs = vec![0];
        m.outputs = vec![2];
        let l = derive_all(&m).unwrap();
        assert_eq!(l.num_steps, 3);
        let expected = [(0, 1), (1, 2), (2, 2), (0, 2), (0, 2)];
        for (t, &(first, last)) in expected.iter().enumerate() {
            assert_eq!(l.lifetimes[t], Lifetime::new(first, last), "t{t}");
        }
        assert_eq!(l.unused, (0, None));
    }

    #[test]
    fn alias_chains_share_the_union_of_their_lifetimes() {
        use TensorKind::*;
        // Concatenation in place: t1 and t2 are views of t3, written by op0 and op1, read by op2.
        let mut m = model(
            &[Input, Intermediate, Intermediate, Intermediate, Output],
            vec![op(&[0], &[1]), op(&[0], &[2]), op(&[3], &[4])],
        );
        m.tensors[3].size = 32;
        m.tensors[1].alias_of = Some(ModelAlias {
            target: 3,
            offset: 0,
        });
        m.tensors[2].alias_of = Some(ModelAlias {
            target: 3,
            offset: 16,
        });
        m.inputs = vec![0];
        m.outputs = vec![4];
        let l = derive_all(&m).unwrap();
        for t in 1..=3 {
            assert_eq!(l.lifetimes[t], Lifetime::new(1, 3), "t{t}");
        }
    }

    #[test]
    fn reading_an_unwritten_tensor_is_an_input_error() {
        use TensorKind::*;
        let m = model(&[Intermediate, Output], vec![op(&[0], &[1])]);
        let error = derive_all(&m).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(
            error
                .message
                .contains("operators[0] (op) reads tensor 't0'"),
            "{}",
            error.message
        );
        let m = model(&[Constant], vec![op(&[], &[0])]);
        assert!(derive_all(&m)
            .unwrap_err()
            .message
            .contains("writes constant tensor 't0'"));
    }

    #[test]
    fn explicit_lifetimes_set_the_steps_and_unused_tensors_are_counted() {
        use TensorKind::*;
        let mut m = model(&[Intermediate, Intermediate, Constant], vec![]);
        m.tensors[0].lifetime = Some(Lifetime::new(2, 6));
        m.tensors[2].data = Some(vec![0; 16]);
        let l = derive_all(&m).unwrap();
        assert_eq!(l.num_steps, 7);
        assert_eq!(l.lifetimes[0], Lifetime::new(2, 6));
        assert_eq!(l.lifetimes[2], Lifetime::new(0, 6));
        assert_eq!(l.unused, (1, Some(1)));
        m.num_steps = Some(5);
        assert!(derive_all(&m)
            .unwrap_err()
            .message
            .contains("reaches step 6"));
    }
}
