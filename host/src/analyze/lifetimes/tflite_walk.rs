//! Tensor lifetimes exactly as TFLite Micro derives them (`facts/tflm-lifetimes.md`), so that
//! a plan of the scratch tensors can be compared with TFLite Micro's arena byte for byte.
//!
//! A step counter starts at 0 and walks subgraph 0:
//! - each subgraph input is first used at the current step (unless already set) and last
//!   used there;
//! - each operator advances the counter by one; its outputs are first used there (unless
//!   already set); a control-flow operator then runs each subgraph it invokes, advancing the
//!   counter by one before walking it the same way, recursively; finally every input (index
//!   >= 0) and every output of the operator is last used at the current step;
//! - each subgraph output is first used at the current step (unless already set) and last
//!   used there.
//!
//! "Last used at" always means the current step, which only grows, so a later use extends a
//! lifetime. A subgraph invoked twice is walked twice. Lifetimes are inclusive.

use memplan_plugin_api::Lifetime;

#[cfg(test)]
use crate::input::graph::OperatorFlow;
use crate::input::graph::SubgraphFlow;

/// The result of the walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// Per subgraph, per tensor: the lifetime, `None` when the walk never touched the tensor
    /// (or never reached its subgraph).
    pub lifetimes: Vec<Vec<Option<Lifetime>>>,
    /// The last step of the run (the counter's final value).
    pub last_step: u32,
    /// Operators in the order they ran, as (subgraph, operator index).
    pub order: Vec<(usize, usize)>,
    /// Per subgraph, per operator: the steps it runs over, from its own step to the last
    /// step of the subgraphs it invokes (TFLite Micro's lifetime for the kernel's scratch
    /// buffers); from its first run to its last when it runs more than once; `None` when the
    /// run never reaches it.
    pub operator_spans: Vec<Vec<Option<Lifetime>>>,
    /// Per subgraph: whether the run reaches it (subgraph 0 always does).
    pub reached: Vec<bool>,
}

/// Why a walk was refused: the model's control flow is outside what can be planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// A subgraph (directly or not) invokes itself: the walk would never end.
    Cycle { subgraph: usize },
    /// Control flow nested deeper than [`MAX_NESTING`].
    TooDeep,
    /// The walk would take more than its `max_work` steps and tensor uses (subgraphs invoked
    /// from many places expand exponentially).
    TooLarge,
}

/// Deepest nesting of invoked subgraphs accepted (real models nest one or two levels).
pub const MAX_NESTING: usize = 64;
/// Most steps plus tensor uses one walk may take, which bounds the time a hostile file can
/// cost. Callers may set a lower limit (the reader's is proportional to the file's size).
pub const MAX_WORK: u64 = 1 << 22;

/// A tensor use in progress: TFLite Micro's first-created and last-used markers.
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    first: Option<u32>,
    last: Option<u32>,
}

struct Walker<'g> {
    subgraphs: &'g [&'g SubgraphFlow],
    marks: Vec<Vec<Marks>>,
    step: u32,
    work: u64,
    max_work: u64,
    on_stack: Vec<bool>,
    reached: Vec<bool>,
    order: Vec<(usize, usize)>,
    operator_spans: Vec<Vec<Option<Lifetime>>>,
}

/// Walks `subgraphs` from subgraph 0 (which must exist), taking at most
/// `max_work.min(MAX_WORK)` steps and tensor uses.
pub fn walk(subgraphs: &[&SubgraphFlow], max_work: u64) -> Result<Walk, WalkError> {
    let mut walker = Walker {
        subgraphs,
        marks: subgraphs
            .iter()
            .map(|subgraph| vec![Marks::default(); subgraph.tensor_count])
            .collect(),
        step: 0,
        work: 0,
        max_work: max_work.min(MAX_WORK),
        on_stack: vec![false; subgraphs.len()],
        reached: vec![false; subgraphs.len()],
        order: Vec::new(),
        operator_spans: subgraphs
            .iter()
            .map(|subgraph| vec![None; subgraph.operators.len()])
            .collect(),
    };
    walker.walk_subgraph(0, 0)?;
    let lifetimes = walker
        .marks
        .iter()
        .map(|marks| marks.iter().map(|mark| lifetime_of(*mark)).collect())
        .collect();
    Ok(Walk {
        lifetimes,
        last_step: walker.step,
        order: walker.order,
        operator_spans: walker.operator_spans,
        reached: walker.reached,
    })
}

/// A tensor only ever read (an operator input nobody produces and that is not a subgraph
/// input) has a last use but no first one; TFLite Micro then plans it from before the first
/// step, which overlaps exactly what a lifetime starting at step 0 overlaps.
fn lifetime_of(marks: Marks) -> Option<Lifetime> {
    let last = marks.last?;
    Some(Lifetime::new(marks.first.unwrap_or(0), last))
}

impl Walker<'_> {
    fn charge(&mut self, work: usize) -> Result<(), WalkError> {
        self.work = self.work.saturating_add(work as u64);
        if self.work > self.max_work {
            return Err(WalkError::TooLarge);
        }
        Ok(())
    }

    fn advance(&mut self) -> Result<(), WalkError> {
        self.charge(1)?;
        // MAX_WORK is far below u32::MAX, so the counter cannot overflow.
        self.step += 1;
        Ok(())
    }

    fn created(&mut self, subgraph: usize, tensor: usize) {
        let marks = &mut self.marks[subgraph][tensor];
        marks.first.get_or_insert(self.step);
    }

    fn used(&mut self, subgraph: usize, tensor: usize) {
        self.marks[subgraph][tensor].last = Some(self.step);
    }

    fn walk_subgraph(&mut self, index: usize, depth: usize) -> Result<(), WalkError> {
        if self.on_stack[index] {
            return Err(WalkError::Cycle { subgraph: index });
        }
        if depth > MAX_NESTING {
            return Err(WalkError::TooDeep);
        }
        self.on_stack[index] = true;
        self.reached[index] = true;
        let subgraph = &self.subgraphs[index];
        self.charge(subgraph.inputs.len() + subgraph.outputs.len())?;
        for &tensor in &subgraph.inputs {
            self.created(index, tensor);
            self.used(index, tensor);
        }
        for (position, operator) in subgraph.operators.iter().enumerate() {
            self.advance()?;
            self.order.push((index, position));
            self.charge(operator.inputs.len() + 2 * operator.outputs.len())?;
            for &tensor in &operator.outputs {
                self.created(index, tensor);
            }
            let start = self.step;
            for &callee in &operator.invokes {
                self.advance()?;
                self.walk_subgraph(callee, depth + 1)?;
            }
            let span = &mut self.operator_spans[index][position];
            let first = span.map_or(start, |span| span.first);
            *span = Some(Lifetime::new(first, self.step));
            for &tensor in operator.inputs.iter().flatten() {
                self.used(index, tensor);
            }
            for &tensor in &operator.outputs {
                self.used(index, tensor);
            }
        }
        for &tensor in &subgraph.outputs {
            self.created(index, tensor);
            self.used(index, tensor);
        }
        self.on_stack[index] = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk over owned subgraphs (the analysis walks borrowed ones).
    fn walk(subgraphs: &[SubgraphFlow], max_work: u64) -> Result<Walk, WalkError> {
        let borrowed: Vec<&SubgraphFlow> = subgraphs.iter().collect();
        super::walk(&borrowed, max_work)
    }

    fn op(inputs: &[usize], outputs: &[usize]) -> OperatorFlow {
        OperatorFlow {
            inputs: inputs.iter().map(|&tensor| Some(tensor)).collect(),
            outputs: outputs.to_vec(),
            invokes: Vec::new(),
        }
    }

    fn lifetime(first: u32, last: u32) -> Option<Lifetime> {
        Some(Lifetime::new(first, last))
    }

    #[test]
    fn chain_lifetimes_follow_the_steps() {
        // t0 -> op0 -> t1 -> op1 -> t2; t3 never used.
        let graph = [SubgraphFlow {
            tensor_count: 4,
            inputs: vec![0],
            outputs: vec![2],
            operators: vec![op(&[0], &[1]), op(&[1], &[2])],
        }];
        let walk = walk(&graph, MAX_WORK).unwrap();
        assert_eq!(
            walk.lifetimes[0],
            vec![lifetime(0, 1), lifetime(1, 2), lifetime(2, 2), None]
        );
        assert_eq!(walk.last_step, 2);
        assert_eq!(walk.order, vec![(0, 0), (0, 1)]);
    }

    #[test]
    fn omitted_inputs_and_read_only_tensors() {
        let mut operator = op(&[0, 3], &[1]);
        operator.inputs.push(None);
        let graph = [SubgraphFlow {
            tensor_count: 4,
            inputs: vec![0],
            outputs: vec![1],
            operators: vec![operator],
        }];
        let walk = walk(&graph, MAX_WORK).unwrap();
        // Tensor 3 is read but never produced: planned from the start, as TFLite Micro does.
        assert_eq!(
            walk.lifetimes[0],
            vec![lifetime(0, 1), lifetime(1, 1), None, lifetime(0, 1)]
        );
    }

    #[test]
    fn invoked_subgraph_is_walked_inside_the_operator() {
        let mut call = op(&[0], &[1]);
        call.invokes = vec![1];
        let graph = [
            SubgraphFlow {
                tensor_count: 3,
                inputs: vec![0],
                outputs: vec![2],
                operators: vec![call, op(&[1], &[2])],
            },
            SubgraphFlow {
                tensor_count: 2,
                inputs: vec![],
                outputs: vec![1],
                operators: vec![op(&[], &[0]), op(&[0], &[1])],
            },
        ];
        let walk = walk(&graph, MAX_WORK).unwrap();
        // Step 1: the call; step 2: entering subgraph 1; its operators at 3 and 4; the
        // call's inputs and outputs are last used at 4; the next operator at 5.
        assert_eq!(
            walk.lifetimes[0],
            vec![lifetime(0, 4), lifetime(1, 5), lifetime(5, 5)]
        );
        assert_eq!(walk.lifetimes[1], vec![lifetime(3, 4), lifetime(4, 4)]);
        assert_eq!(walk.last_step, 5);
        assert_eq!(walk.order, vec![(0, 0), (1, 0), (1, 1), (0, 1)]);
    }

    /// `levels` subgraphs, each with one operator that runs the next subgraph `calls` times
    /// (the last one runs nothing).
    fn nested_calls(levels: usize, calls: usize) -> Vec<SubgraphFlow> {
        (0..levels)
            .map(|level| {
                let mut call = op(&[], &[]);
                if level + 1 < levels {
                    call.invokes = vec![level + 1; calls];
                }
                SubgraphFlow {
                    tensor_count: 0,
                    inputs: vec![],
                    outputs: vec![],
                    operators: vec![call],
                }
            })
            .collect()
    }

    #[test]
    fn cycles_and_blowups_are_refused() {
        let mut looping = nested_calls(1, 0);
        looping[0].operators[0].invokes = vec![0];
        assert_eq!(
            walk(&looping, MAX_WORK),
            Err(WalkError::Cycle { subgraph: 0 })
        );

        // Each subgraph runs the next one twice: 2^39 walks of the last one.
        assert_eq!(
            walk(&nested_calls(40, 2), MAX_WORK),
            Err(WalkError::TooLarge)
        );
        assert_eq!(
            walk(&nested_calls(MAX_NESTING + 2, 1), MAX_WORK),
            Err(WalkError::TooDeep)
        );
        // Within the limits the same shapes are accepted.
        assert!(walk(&nested_calls(10, 2), MAX_WORK).is_ok());
        assert!(walk(&nested_calls(MAX_NESTING + 1, 1), MAX_WORK).is_ok());
        // A caller's lower limit is kept: 2^10 walks of the last subgraph exceed 1000.
        assert_eq!(walk(&nested_calls(10, 2), 1000), Err(WalkError::TooLarge));
    }
}
