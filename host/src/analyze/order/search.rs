//! The search for the valid order with the least peak of live bytes.
//!
//! The cost of running operator `v` next depends only on the set `S` of operators already
//! run: the bytes live after `S` (buffers touched by `S`, or live from the start, that still
//! have an operator to run or are graph outputs), plus the buffers `v` touches first, plus its
//! transient bytes. So the least peak of an order that runs the set `S` first is a function of
//! `S` alone, and the search works on sets of executed operators ("downsets" of the
//! constraint graph, as SERENITY does) rather than on orders:
//!
//! 1. heuristics give an incumbent: greedy list scheduling (repeatedly run the ready operator
//!    whose step holds the least, then frees the most; two variants, ties by stored position,
//!    so a chain comes out as stored), and local moves from the stored order (operators that
//!    allocate move to just before their first consumer, operators that free to just after
//!    their last producer, repeated while the peak drops); the stored order is an incumbent too;
//! 2. an exact best-first search (Dijkstra on the bottleneck cost) over downsets: states are
//!    taken by increasing peak, each reached once with its least peak (memoised in a hash
//!    map), and a step that reaches the incumbent's peak is cut (the bound). The first full
//!    set taken is an optimal order; an empty queue proves the incumbent optimal.
//!
//! The exact search stops at the deadline or at [`MAX_STATES`] downsets (a wide graph has
//! exponentially many); the best order found so far is then kept, flagged as not proven. The
//! result is never worse than the stored order. Greedy costs O(n · ready · arity) and checks
//! the deadline as it goes, and so do the local moves (O(n · distance moved) a round). The
//! exact search looks at the clock every few thousand candidate steps, and memoises at most
//! 256 MiB of downsets.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use super::problem::OrderProblem;

/// Most downsets the exact search memoises (each a bit set and a few words).
pub const MAX_STATES: usize = 1 << 21;
/// Most bytes the exact search's downsets may take (two bit sets each: the state's and the
/// memo's key): a graph of 10,000 operators has 1,250-byte sets.
const MAX_STATE_BYTES: usize = 256 << 20;
/// Candidate steps the exact search weighs between two looks at the clock.
const STEPS_PER_CLOCK_CHECK: u64 = 4096;

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

/// Moves operators along `order` as far as the constraints let them: each operator that
/// holds more bytes after it runs than before (it allocates) moves to just before the first
/// operator that needs it, then each that frees bytes moves to just after the last operator
/// it needs, which is how a state read moves next to its consumer. Returns the better of the
/// result and `order`. O(n · distance moved).
fn moved_to_needs(problem: &OrderProblem, order: &[u32], deadline: Instant) -> Option<Found> {
    let n = order.len();
    let mut after: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (operator, before) in problem.before.iter().enumerate() {
        for &earlier in before {
            after[earlier as usize].push(operator as u32);
        }
    }
    // What running the operator adds to the live bytes, by the order it starts from.
    let mut sweep = Sweep::new(problem);
    let mut net = vec![0i128; n];
    for &operator in order {
        let before = sweep.live;
        sweep.run(operator as usize);
        net[operator as usize] = i128::from(sweep.live) - i128::from(before);
    }
    let mut order = order.to_vec();
    let mut position = vec![0usize; n];
    for (at, &operator) in order.iter().enumerate() {
        position[operator as usize] = at;
    }
    // Sink allocators, last first, so each finds its consumers already in place.
    for at in (0..n).rev() {
        if at % 64 == 0 && Instant::now() > deadline {
            return None;
        }
        let operator = order[at];
        if net[operator as usize] <= 0 {
            continue;
        }
        let target = after[operator as usize]
            .iter()
            .map(|&next| position[next as usize])
            .min()
            .unwrap_or(n)
            - 1;
        if target > at {
            order[at..=target].rotate_left(1);
            for shifted in at..=target {
                position[order[shifted] as usize] = shifted;
            }
        }
    }
    // Hoist freers, first first.
    for at in 0..n {
        if at % 64 == 0 && Instant::now() > deadline {
            return None;
        }
        let operator = order[at];
        if net[operator as usize] >= 0 {
            continue;
        }
        let target = problem.before[operator as usize]
            .iter()
            .map(|&earlier| position[earlier as usize] + 1)
            .max()
            .unwrap_or(0);
        if target < at {
            order[target..=at].rotate_right(1);
            for shifted in target..=at {
                position[order[shifted] as usize] = shifted;
            }
        }
    }
    Some(Found {
        peak: peak_of(problem, &order),
        order,
        exact: false,
    })
}

/// A downset reached by the exact search; its bit set is in [`Downsets::sets`].
struct State {
    peak: u64,
    live: u64,
    /// The state it was reached from and the operator run last (`u32::MAX` for the start).
    parent: u32,
    operator: u32,
}

/// The downsets the exact search has reached: bit sets stored one after another (one
/// allocation, however many states), found again through a map from a 64-bit hash of the set
/// to its state, probing the next hash on a collision.
struct Downsets {
    words: usize,
    sets: Vec<u64>,
    states: Vec<State>,
    index: HashMap<u64, u32>,
}

impl Downsets {
    fn set(&self, state: u32) -> &[u64] {
        let start = state as usize * self.words;
        &self.sets[start..start + self.words]
    }

    fn hash(set: &[u64]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        set.hash(&mut hasher);
        hasher.finish()
    }

    /// The state of `set`, or where a new one goes in the map.
    fn find(&self, set: &[u64]) -> Result<u32, u64> {
        let mut key = Self::hash(set);
        loop {
            match self.index.get(&key) {
                Some(&state) if self.set(state) == set => return Ok(state),
                Some(_) => key = key.wrapping_add(1),
                None => return Err(key),
            }
        }
    }

    fn insert(&mut self, key: u64, set: &[u64], state: State) -> u32 {
        let id = self.states.len() as u32;
        self.sets.extend_from_slice(set);
        self.states.push(state);
        self.index.insert(key, id);
        id
    }
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
    let mut downsets = Downsets {
        words,
        sets: Vec::new(),
        states: Vec::new(),
        index: HashMap::new(),
    };
    let empty = vec![0u64; words];
    let key = downsets.find(&empty).err().unwrap_or_default();
    downsets.insert(
        key,
        &empty,
        State {
            peak: start_peak,
            live: live_at_start(problem),
            parent: u32::MAX,
            operator: u32::MAX,
        },
    );
    // By least peak, then most operators run (closer to the end).
    let mut queue = BinaryHeap::new();
    queue.push(Reverse((start_peak, Reverse(0u32), 0u32)));
    let max_states = MAX_STATES.min(MAX_STATE_BYTES / (8 * words + 48));
    let mut weighed = 0u64;
    let mut set = vec![0u64; words];
    let mut next = vec![0u64; words];
    while let Some(Reverse((peak, Reverse(count), at))) = queue.pop() {
        if downsets.states[at as usize].peak != peak {
            continue; // a better path reached it since
        }
        weighed += n as u64;
        if weighed >= STEPS_PER_CLOCK_CHECK {
            weighed = 0;
            if Instant::now() > deadline {
                return Err(());
            }
        }
        if count as usize == n {
            let mut order = Vec::with_capacity(n);
            let mut at = at;
            while downsets.states[at as usize].parent != u32::MAX {
                order.push(downsets.states[at as usize].operator);
                at = downsets.states[at as usize].parent;
            }
            order.reverse();
            return Ok(Some(Found {
                order,
                peak,
                exact: true,
            }));
        }
        set.copy_from_slice(downsets.set(at));
        let live = downsets.states[at as usize].live;
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
            next.copy_from_slice(&set);
            next[operator as usize / 64] |= 1 << (operator % 64);
            let target = match downsets.find(&next) {
                Ok(existing) => {
                    let state = &mut downsets.states[existing as usize];
                    if state.peak <= next_peak {
                        continue;
                    }
                    state.peak = next_peak;
                    state.parent = at;
                    state.operator = operator;
                    existing
                }
                Err(key) => {
                    if downsets.states.len() >= max_states {
                        return Err(());
                    }
                    downsets.insert(
                        key,
                        &next,
                        State {
                            peak: next_peak,
                            live: live + first - freed,
                            parent: at,
                            operator,
                        },
                    )
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
    // Local moves, from the stored order and from the best so far, while they gain.
    for start in [None, Some(())] {
        let mut from = match start {
            None => (0..problem.before.len() as u32).collect(),
            Some(()) => best.order.clone(),
        };
        while let Some(found) = moved_to_needs(problem, &from, deadline) {
            if found.peak >= best.peak {
                break;
            }
            from = found.order.clone();
            best = found;
        }
    }
    // The exact search stops an eighth of the remaining time early: dropping what it
    // memoised (up to 256 MiB) takes time too.
    let now = Instant::now();
    let exact_deadline = now + deadline.saturating_duration_since(now) * 7 / 8;
    match exact(problem, best.peak, exact_deadline) {
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
