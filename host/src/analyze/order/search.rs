//! The search for the valid order with the least peak of live bytes.
//!
//! The cost of running operator `v` next depends only on the set `S` of operators already
//! run: the bytes live after `S` (buffers touched by `S`, or live from the start, that still
//! have an operator to run or are graph outputs), plus the buffers `v` touches first, plus its
//! transient bytes. So the least peak of an order that runs the set `S` first is a function of
//! `S` alone, and the search works on sets of executed operators ("downsets" of the
//! constraint graph, as SERENITY does) rather than on orders:
//!
//! 1. greedy list scheduling gives an incumbent: repeatedly run the ready operator whose step
//!    holds the least, then frees the most (two variants, ties by stored position, so a chain
//!    comes out as stored); the stored order is an incumbent too;
//! 2. an exact best-first search (Dijkstra on the bottleneck cost) over downsets: states are
//!    taken by increasing peak, each reached once with its least peak (memoised in a hash
//!    map), and a step that reaches the incumbent's peak is cut (the bound). The first full
//!    set taken is an optimal order; an empty queue proves the incumbent optimal.
//!
//! The exact search stops at the deadline or at [`MAX_STATES`] downsets (a wide graph has
//! exponentially many); the best order found so far is then kept, flagged as not proven. The
//! result is never worse than the stored order. Greedy costs O(n · ready · arity) and checks
//! the deadline as it goes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use super::problem::OrderProblem;

/// Most downsets the exact search memoises (each a bit set and a few words).
pub const MAX_STATES: usize = 1 << 21;

/// An order and its peak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Stored positions in run order.
    pub order: Vec<u32>,
    pub peak: u64,
    /// Proven the least peak of any valid order.
    pub exact: bool,
}

/// Bytes live as an order runs: the sweep behind [`peak_of`] and the greedy search.
struct Sweep<'p> {
    problem: &'p OrderProblem,
    /// By buffer: operators run that touch it.
    touched: Vec<u32>,
    live: u64,
}

impl<'p> Sweep<'p> {
    fn new(problem: &'p OrderProblem) -> Sweep<'p> {
        Sweep {
            problem,
            touched: vec![0; problem.buffers.len()],
            live: live_at_start(problem),
        }
    }

    /// Bytes `operator` would hold at its step, and bytes live after it.
    fn cost(&self, operator: usize) -> (u64, u64) {
        let (mut first, mut freed) = (0, 0);
        for &buffer in &self.problem.touches[operator] {
            let record = &self.problem.buffers[buffer as usize];
            let touched = self.touched[buffer as usize];
            if touched == 0 && !record.from_start {
                first += record.size;
            }
            if touched as usize + 1 == record.touchers.len() && !record.to_end {
                freed += record.size;
            }
        }
        let step = self.live + first + self.problem.transient[operator];
        (step, self.live + first - freed)
    }

    fn run(&mut self, operator: usize) -> u64 {
        let (step, after) = self.cost(operator);
        for &buffer in &self.problem.touches[operator] {
            self.touched[buffer as usize] += 1;
        }
        self.live = after;
        step
    }
}

/// Bytes at step 0: everything live from the start.
fn step_zero(problem: &OrderProblem) -> u64 {
    problem
        .buffers
        .iter()
        .filter(|buffer| buffer.from_start)
        .map(|buffer| buffer.size)
        .sum()
}

/// Bytes live after step 0: what is live from the start and stays (used later or an output).
fn live_at_start(problem: &OrderProblem) -> u64 {
    problem
        .buffers
        .iter()
        .filter(|buffer| buffer.from_start && (buffer.to_end || !buffer.touchers.is_empty()))
        .map(|buffer| buffer.size)
        .sum()
}

/// The peak of live bytes when the operators run in `order` (stored positions).
pub fn peak_of(problem: &OrderProblem, order: &[u32]) -> u64 {
    let mut sweep = Sweep::new(problem);
    let mut peak = step_zero(problem);
    for &operator in order {
        peak = peak.max(sweep.run(operator as usize));
    }
    peak
}

/// Which greedy rule picks among ready operators.
#[derive(Clone, Copy)]
enum Rule {
    /// Least bytes at its step, then least live after.
    LeastStep,
    /// Least live after, then least at its step.
    LeastAfter,
}

/// Greedy list scheduling (module docs), `None` past the deadline.
fn greedy(problem: &OrderProblem, rule: Rule, deadline: Instant) -> Option<Found> {
    let n = problem.before.len();
    let mut waiting: Vec<u32> = problem.before.iter().map(|b| b.len() as u32).collect();
    let mut after: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (operator, before) in problem.before.iter().enumerate() {
        for &earlier in before {
            after[earlier as usize].push(operator as u32);
        }
    }
    let mut ready: Vec<u32> = (0..n as u32)
        .filter(|&o| waiting[o as usize] == 0)
        .collect();
    let mut sweep = Sweep::new(problem);
    let mut peak = step_zero(problem);
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        if order.len() % 64 == 63 && Instant::now() > deadline {
            return None;
        }
        let (slot, _) = ready
            .iter()
            .enumerate()
            .map(|(slot, &operator)| {
                let (step, live_after) = sweep.cost(operator as usize);
                let key = match rule {
                    Rule::LeastStep => (step.max(peak), live_after, operator),
                    Rule::LeastAfter => (live_after, step.max(peak), operator),
                };
                (slot, key)
            })
            .min_by_key(|&(_, key)| key)?;
        let operator = ready.swap_remove(slot);
        peak = peak.max(sweep.run(operator as usize));
        order.push(operator);
        for &next in &after[operator as usize] {
            waiting[next as usize] -= 1;
            if waiting[next as usize] == 0 {
                ready.push(next);
            }
        }
    }
    (order.len() == n).then_some(Found {
        order,
        peak,
        exact: false,
    })
}

/// A downset reached by the exact search.
struct State {
    /// Operators run, one bit each.
    set: Box<[u64]>,
    peak: u64,
    live: u64,
    /// The state it was reached from and the operator run last (`u32::MAX` for the start).
    parent: u32,
    operator: u32,
}

fn contains(set: &[u64], operator: u32) -> bool {
    set[operator as usize / 64] >> (operator % 64) & 1 == 1
}

/// The exact search (module docs) with `bound` the incumbent's peak: an order below it, or
/// `Ok(None)` when there is none, or `Err(())` when stopped by the deadline or the state cap.
fn exact(problem: &OrderProblem, bound: u64, deadline: Instant) -> Result<Option<Found>, ()> {
    let n = problem.before.len();
    let words = n.div_ceil(64);
    let start_peak = step_zero(problem);
    if start_peak >= bound {
        return Ok(None);
    }
    let mut states = vec![State {
        set: vec![0u64; words].into_boxed_slice(),
        peak: start_peak,
        live: live_at_start(problem),
        parent: u32::MAX,
        operator: u32::MAX,
    }];
    let mut index: HashMap<Box<[u64]>, u32> = HashMap::new();
    index.insert(states[0].set.clone(), 0);
    // By least peak, then most operators run (closer to the end).
    let mut queue = BinaryHeap::new();
    queue.push(Reverse((start_peak, Reverse(0u32), 0u32)));
    let mut popped = 0u64;
    while let Some(Reverse((peak, Reverse(count), at))) = queue.pop() {
        if states[at as usize].peak != peak {
            continue; // a better path reached it since
        }
        popped += 1;
        if popped % 256 == 0 && Instant::now() > deadline {
            return Err(());
        }
        if count as usize == n {
            let mut order = Vec::with_capacity(n);
            let mut at = at;
            while states[at as usize].parent != u32::MAX {
                order.push(states[at as usize].operator);
                at = states[at as usize].parent;
            }
            order.reverse();
            return Ok(Some(Found {
                order,
                peak,
                exact: true,
            }));
        }
        let (set, live) = (states[at as usize].set.clone(), states[at as usize].live);
        for operator in 0..n as u32 {
            if contains(&set, operator)
                || !problem.before[operator as usize]
                    .iter()
                    .all(|&earlier| contains(&set, earlier))
            {
                continue;
            }
            let (mut first, mut freed) = (0, 0);
            for &buffer in &problem.touches[operator as usize] {
                let record = &problem.buffers[buffer as usize];
                let mut run = record.touchers.iter().filter(|&&t| contains(&set, t));
                let touched = run.next().is_some();
                if !touched && !record.from_start {
                    first += record.size;
                }
                let run_count = usize::from(touched) + run.count();
                if run_count + 1 == record.touchers.len() && !record.to_end {
                    freed += record.size;
                }
            }
            let step = live + first + problem.transient[operator as usize];
            let next_peak = peak.max(step);
            if next_peak >= bound {
                continue;
            }
            let mut next = set.clone();
            next[operator as usize / 64] |= 1 << (operator % 64);
            let target = match index.get(&next) {
                Some(&existing) => {
                    if states[existing as usize].peak <= next_peak {
                        continue;
                    }
                    let state = &mut states[existing as usize];
                    state.peak = next_peak;
                    state.parent = at;
                    state.operator = operator;
                    existing
                }
                None => {
                    if states.len() >= MAX_STATES {
                        return Err(());
                    }
                    let id = states.len() as u32;
                    index.insert(next.clone(), id);
                    states.push(State {
                        set: next,
                        peak: next_peak,
                        live: live + first - freed,
                        parent: at,
                        operator,
                    });
                    id
                }
            };
            queue.push(Reverse((next_peak, Reverse(count + 1), target)));
        }
    }
    Ok(None)
}

/// The best valid order found by `deadline` (module docs); never worse than the stored one.
pub fn search(problem: &OrderProblem, deadline: Instant) -> Found {
    let stored: Vec<u32> = (0..problem.before.len() as u32).collect();
    let mut best = Found {
        peak: peak_of(problem, &stored),
        order: stored,
        exact: false,
    };
    for rule in [Rule::LeastStep, Rule::LeastAfter] {
        if let Some(found) = greedy(problem, rule, deadline) {
            if found.peak < best.peak {
                best = found;
            }
        }
    }
    match exact(problem, best.peak, deadline) {
        Ok(Some(found)) => found,
        Ok(None) => Found {
            exact: true,
            ..best
        },
        Err(()) => best,
    }
}

#[cfg(test)]
mod tests {
    use super::super::generated::generated_problem;
    use super::super::problem::{violated_edge, Buffer};
    use super::*;
    use std::time::Duration;

    /// The least peak over every valid order, by enumeration.
    fn brute_force(problem: &OrderProblem) -> u64 {
        fn extend(problem: &OrderProblem, order: &mut Vec<u32>, best: &mut u64) {
            let n = problem.before.len();
            if order.len() == n {
                *best = (*best).min(peak_of(problem, order));
                return;
            }
            for operator in 0..n as u32 {
                if order.contains(&operator)
                    || !problem.before[operator as usize]
                        .iter()
                        .all(|earlier| order.contains(earlier))
                {
                    continue;
                }
                order.push(operator);
                extend(problem, order, best);
                order.pop();
            }
        }
        let mut best = u64::MAX;
        extend(problem, &mut Vec::new(), &mut best);
        best
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn exact_search_matches_brute_force_on_small_random_graphs() {
        let mut improved = 0;
        for seed in 0..300 {
            let problem = generated_problem(3 + (seed % 6) as usize, seed);
            let found = search(&problem, far());
            assert!(found.exact, "seed {seed}");
            assert_eq!(violated_edge(&problem, &found.order), None, "seed {seed}");
            assert_eq!(peak_of(&problem, &found.order), found.peak, "seed {seed}");
            assert_eq!(
                found.peak,
                brute_force(&problem),
                "seed {seed}: {problem:?}"
            );
            let stored: Vec<u32> = (0..problem.before.len() as u32).collect();
            improved += usize::from(found.peak < peak_of(&problem, &stored));
        }
        // The generator's graphs are irregular enough that ordering matters on many.
        assert!(improved > 30, "{improved}");
    }

    #[test]
    fn a_state_read_moves_next_to_its_consumer() {
        // op0 writes a (100 bytes, read by op3); op1 -> b -> op2 -> c -> op3: running op0
        // just before op3 keeps a out of op1's and op2's steps.
        let buffer = |size, touchers: &[u32]| Buffer {
            size,
            touchers: touchers.to_vec(),
            from_start: false,
            to_end: false,
        };
        let problem = OrderProblem {
            before: vec![vec![], vec![], vec![1], vec![0, 2]],
            touches: vec![vec![0], vec![1], vec![1, 2], vec![0, 2]],
            transient: vec![0; 4],
            buffers: vec![
                buffer(100, &[0, 3]),
                buffer(50, &[1, 2]),
                buffer(50, &[2, 3]),
            ],
        };
        assert_eq!(peak_of(&problem, &[0, 1, 2, 3]), 200);
        let found = search(&problem, far());
        assert_eq!(found.order, vec![1, 2, 0, 3]);
        assert_eq!(found.peak, 150);
        assert!(found.exact);
    }

    #[test]
    fn large_graphs_get_a_valid_order_never_worse_than_the_stored_one() {
        let problem = generated_problem(2000, 7);
        let stored: Vec<u32> = (0..2000).collect();
        let found = search(&problem, Instant::now() + Duration::from_millis(300));
        assert_eq!(violated_edge(&problem, &found.order), None);
        assert!(found.peak <= peak_of(&problem, &stored));
        assert_eq!(peak_of(&problem, &found.order), found.peak);
    }
}
