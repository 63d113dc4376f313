//! Planner `exact`: packs each scratch arena by a complete branch-and-bound search for the
//! smallest height, in the spirit of MiniMalloc (Moffitt, ASPLOS 2023).
//!
//! The kit does the passes every planner shares (memories, budgets, spill, constants,
//! aliases) and hands each arena's buffers to [`ExactPacker`], which:
//! 1. splits the buffers into independent components (lifetimes chained by overlap) and
//!    counts sizes in units of the smallest alignment ([`problem`]);
//! 2. takes a greedy packing of each component as the first upper bound ([`greedy`]) and
//!    the peak liveness as the lower bound;
//! 3. for every component above the arena's lower bound, runs resumable searches over
//!    canonical packings ([`search`]) round-robin with doubling node budgets:
//!    - *tight* searches at the lower bound (a decision problem: MiniMalloc's capacity
//!      mode, where pruning is strongest), which either reach the bound (proven optimal) or
//!      exhaust and raise the bound;
//!    - *descents* from the greedy height: each packing found lowers the cap below itself,
//!      until the cap meets the lower bound or the tree is exhausted (proven optimal);
//!    - each in three candidate orders and with time running both ways (the search time is
//!      very sensitive to the order), plus short restarts of tight searches in seeded
//!      shuffled orders with Luby budgets, which cut the heavy tail of the search time;
//!    - *bisection* searches capped between the bound and the best height found, moved
//!      up after an attempt without a packing and down after one: on instances where the
//!      bound is far below the optimum (MiniMalloc's J) they get lower than descents do;
//!    - one restart in three searches a *merged* instance instead: buffers glued into blocks
//!      where their sizes say they were cut from one piece ([`merge`]), in seeded variants;
//!      a packing of the blocks is one of the buffers, but a failure proves nothing;
//!    - where the component fills every column up to the bound exactly (a *tiling*, as an
//!      arena cut into pieces), *band splits* ([`bands`]): the component cut into bands
//!      across its whole lifetime, recursively, each packed on its own;
//! 4. stops at the deadline (`--timeout`, or the `time_limit_s` option, default 10 s) or
//!    on the host's cancellation, and returns the best packing found, with a note saying
//!    whether its height is proven optimal and what bound remains otherwise.
//!
//! Under a memory budget the kit passes the room left ([`Packer::pack_within`]): the
//! searches of step 3 first aim at the budget instead of the lower bound (the decision
//! problem MiniMalloc solves), and stop once every component fits; option `goal` says what
//! follows: `"smallest"` (the default) minimises from there, `"fit"` returns that packing.
//!
//! Node budgets, not the clock, decide when to switch searches, so a run that finishes
//! before its deadline is deterministic.

use std::time::{Duration, Instant};

use memplan_planner_kit::{plan_with_packer, Buffer, Packer, Packing, PlannerOptions};
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanRequest, Planner};

pub mod bands;
pub mod greedy;
pub mod merge;
pub mod portfolio;
pub mod problem;
pub mod search;

use bands::BandSplits;
use merge::MergedRestarts;
use problem::{Component, Problem};
use search::{Branching, Deadline, End, Order, Search};

/// Time a plan may take when neither the option nor the host says otherwise.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10);
/// Nodes each search gets in the first round; doubled every round.
const FIRST_BUDGET: u64 = 4096;
/// Components whose lifetimes cover more (buffer, column) pairs than this get a smaller
/// portfolio of searches and no restarts.
const LARGE_COMPONENT: usize = 1 << 20;
/// Restarts per round get this many times the budget of one persistent search.
const RESTART_SHARE: u64 = 4;
/// Nodes of the shortest restart.
const RESTART_UNIT: u64 = 1024;
/// One restart in this many searches the merged instance ([`merge`]), while it may hold a
/// packing at the bound.
const MERGED_EVERY: u64 = 3;
/// Band splits get this many times the budget of one persistent search per round.
const BANDS_SHARE: u64 = 256;
/// The bisection cap comes at most this close to the best height: the gap over 2^shift.
const BISECTION_SHIFT_MAX: u32 = 10;
/// Bisection searches per component and round, each with the round's node budget.
const BISECTIONS_PER_ROUND: usize = 4;

/// The Luby sequence 1 1 2 1 1 2 4 1 1 2 ... (`index` from 1): restart lengths within a
/// constant factor of the best fixed length, whatever the instance.
fn luby(index: u64) -> u64 {
    let mut index = index;
    loop {
        // Smallest k with 2^k - 1 >= index.
        let k = 64 - index.leading_zeros() as u64;
        if index == (1u64 << k) - 1 {
            return 1 << (k - 1);
        }
        index -= (1u64 << (k - 1)) - 1;
    }
}

pub struct Exact;

impl Planner for Exact {
    const NAME: &'static str = "exact";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "branch-and-bound search for the smallest arena, anytime (option time_limit_s, default 10)";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        let options = ExactOptions::parse(&request.options)?;
        let packer = ExactPacker::new(options.time_limit).with_goal(options.goal);
        plan_with_packer(request, context, &packer)
    }
}

// Linked into memplan (its built-in planners); `cdylib/` exports the same planners from a plugin file.
memplan_plugin_api::planner_root_module!(Exact, portfolio::Portfolio);

/// The planner's options (`--planner-options`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExactOptions {
    /// Search time for the whole plan (all arenas); the host's deadline still applies.
    pub time_limit: Duration,
    pub goal: Goal,
}

/// What the search is after (option `goal`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Goal {
    /// The lowest arena, proven optimal when time allows (`"smallest"`, the default).
    #[default]
    Smallest,
    /// The first packing that fits the memory's budget (`"fit"`, MiniMalloc's question):
    /// searches aim at the budget rather than the lower bound and stop once every buffer
    /// fits. Without a budget, the same as `Smallest`.
    Fit,
}

impl Goal {
    pub const ALL: [(&'static str, Goal); 2] = [("smallest", Goal::Smallest), ("fit", Goal::Fit)];
}

impl ExactOptions {
    pub fn parse(json: &str) -> Result<ExactOptions, PlanError> {
        let mut options = PlannerOptions::parse(Exact::NAME, json)?;
        let time_limit = options.take_seconds("time_limit_s")?;
        let goal = options.take_choice("goal", &Goal::ALL)?;
        options.finish(&["time_limit_s", "goal"])?;
        Ok(ExactOptions {
            time_limit: time_limit.unwrap_or(DEFAULT_TIME_LIMIT),
            goal: goal.unwrap_or_default(),
        })
    }
}

/// Packs one arena by branch and bound; see the crate documentation.
pub struct ExactPacker {
    /// Shared by every arena of one plan: an arena proven optimal early leaves its time to
    /// the next one.
    deadline: Instant,
    goal: Goal,
}

impl ExactPacker {
    /// A packer whose searches stop `time_limit` from now.
    pub fn new(time_limit: Duration) -> ExactPacker {
        let now = Instant::now();
        ExactPacker {
            deadline: now
                .checked_add(time_limit)
                .unwrap_or(now + DEFAULT_TIME_LIMIT * 1000),
            goal: Goal::Smallest,
        }
    }

    pub fn with_goal(self, goal: Goal) -> ExactPacker {
        ExactPacker { goal, ..self }
    }

    /// When its searches stop (the host's deadline may come sooner).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// What the search achieved for one arena, in units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub height: u64,
    /// No packing is lower than this.
    pub lower_bound: u64,
    pub nodes: u64,
}

impl Outcome {
    pub fn is_proven(&self) -> bool {
        self.height <= self.lower_bound
    }
}

impl Packer for ExactPacker {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        self.pack_within(buffers, None, context)
    }

    fn pack_within(
        &self,
        buffers: &[Buffer],
        room: Option<u64>,
        context: &HostContext,
    ) -> Result<Packing, PlanError> {
        let started = Instant::now();
        let fit_within = room.filter(|_| self.goal == Goal::Fit);
        let deadline = match context.remaining() {
            Some(remaining) => self.deadline.min(started + remaining),
            None => self.deadline,
        };
        let problem = Problem::new(buffers);
        let deadline = Deadline {
            at: Some(deadline),
            context,
        };
        let mut offsets: Vec<Vec<u64>> = problem
            .components
            .iter()
            .map(|component| greedy::greedy(component, &deadline))
            .collect();
        // Heights count units: a packing at most `room / unit` units high fits. With a
        // budget, the search first aims at it (a decision problem, where pruning is
        // strongest: MiniMalloc instance J fits in 0.03 s this way, while minimising from
        // the greedy height takes more than 10 s to get below the budget); the goal
        // "smallest" then minimises from there.
        let fits_in = room.map(|room| room / problem.unit);
        let mut outcome = improve(
            &problem.components,
            &mut offsets,
            fits_in.unwrap_or(0),
            deadline,
        );
        if self.goal == Goal::Smallest && fits_in.is_some() {
            let fitting = outcome.nodes;
            outcome = improve(&problem.components, &mut offsets, 0, deadline);
            outcome.nodes += fitting;
        }

        let mut packing = Packing {
            offsets: vec![0; buffers.len()],
            height: 0,
            note: String::new(),
        };
        for &index in &problem.empty {
            packing.offsets[index] = buffers[index].fixed_offset.get().unwrap_or(0);
        }
        for (component, offsets) in problem.components.iter().zip(&offsets) {
            for (item, offset) in component.items.iter().zip(offsets) {
                packing.offsets[item.buffer] = buffers[item.buffer]
                    .fixed_offset
                    .get()
                    .unwrap_or(offset * problem.unit);
            }
        }
        packing.height = buffers
            .iter()
            .zip(&packing.offsets)
            .map(|(buffer, offset)| offset + buffer.size)
            .max()
            .unwrap_or(0);
        let bound = portfolio::arena_lower_bound(buffers);
        packing.note = match fit_within {
            Some(room) if packing.height <= room && !outcome.is_proven() => format!(
                "height {}: fits the {room} bytes left under the budget; goal \"fit\" stopped \
                 the search there, not minimised (lower bound {bound}; {} nodes, {:.2} s)",
                packing.height,
                outcome.nodes,
                started.elapsed().as_secs_f64()
            ),
            _ => note(
                &outcome,
                packing.height,
                bound,
                problem.unit,
                started.elapsed(),
            ),
        };
        context.debug(&format!(
            "exact: {} buffers: {}",
            buffers.len(),
            packing.note
        ));
        Ok(packing)
    }
}

/// What the search achieved, for the plan's summary. `bound` is the arena's lower bound as
/// memplan reports it everywhere ([`portfolio::arena_lower_bound`]); the search may prove more
/// (`outcome.lower_bound`, in units), which is said apart.
fn note(outcome: &Outcome, height: u64, bound: u64, unit: u64, elapsed: Duration) -> String {
    let granularity = if unit > 1 {
        format!(", heights compared in {unit}-byte units")
    } else {
        String::new()
    };
    let effort = format!(
        "{} nodes, {:.2} s{granularity}",
        outcome.nodes,
        elapsed.as_secs_f64()
    );
    if outcome.is_proven() {
        let reason = if height <= bound {
            "equal to the lower bound"
        } else {
            "search exhausted"
        };
        return format!("height {height}: proven optimal, {reason} ({effort})");
    }
    // The top unit of a packing holds at least one byte.
    let proven = outcome.lower_bound.saturating_sub(1) * unit + 1;
    let gap = 100.0 * (height as f64 - bound as f64) / bound.max(1) as f64;
    let searched = if proven > bound {
        format!("; the search proved no packing is below {proven}")
    } else {
        String::new()
    };
    format!(
        "height {height}, lower bound {bound} (gap {gap:.2}%){searched}: time limit reached \
         ({effort})"
    )
}

/// Lowers the packing of each component by search until the arena height is proven
/// optimal, or every component is at most `enough` units high (0: minimise), or the deadline
/// passes. `offsets` holds a valid packing per component (units) on entry and on return.
///
/// Every component above the arena's lower bound gets a tight search (at the bound) and a
/// descent search in each [`Order`], on the component and on its mirror image in time.
/// They are resumable and run round-robin with node budgets doubling every round, so no
/// search and no component starves the others. After each component's turn come short
/// restarts (see below). The clock only decides where everything stops.
pub fn improve(
    components: &[Component],
    offsets: &mut [Vec<u64>],
    enough: u64,
    deadline: Deadline<'_>,
) -> Outcome {
    let mut heights: Vec<u64> = components
        .iter()
        .zip(offsets.iter())
        .map(|(component, offsets)| component.height(offsets))
        .collect();
    let mut lower_bound = components.iter().map(|c| c.lower_bound).max().unwrap_or(0);
    // Heights at or below this end the search: the lower bound, or a budget to fit.
    let done_at = |lower_bound: u64| lower_bound.max(enough);
    let target = done_at(lower_bound);
    struct Work<'a> {
        component: usize,
        searches: Vec<Search<'a>>,
        /// Searches of the component's merged instances ([`merge`]), made at the first
        /// merged restart (gluing takes time a component solved before then need not
        /// spend); `Some(None)` when nothing glues.
        merged: Option<Option<MergedRestarts>>,
        /// Band splits of the component ([`bands`]), made at its first turn; `Some(None)`
        /// when it is not a tiling of the target.
        bands: Option<Option<BandSplits>>,
        /// Bisection searches started, and the next one's cap below the best height: the
        /// gap to the bound shifted right by this.
        bisections: u64,
        bisection_shift: u32,
    }
    // Time runs both ways in the search: the mirrored component is searched too.
    let mirrored: Vec<Component> = components.iter().map(Component::mirrored).collect();
    let mut work: Vec<Work> = (0..components.len())
        .filter(|&index| heights[index] > target)
        .map(|index| {
            // Each search keeps per-column lists of its buffers; on very large components
            // only one order runs each way, so memory stays a few times the input's.
            let orders: &[Order] = if components[index].span_total() > LARGE_COMPONENT {
                &Order::ALL[..1]
            } else {
                &Order::ALL
            };
            let mut searches: Vec<Search> = Vec::new();
            for cap in [target, heights[index] - 1] {
                for component in [&components[index], &mirrored[index]] {
                    searches.extend(
                        orders
                            .iter()
                            .map(|&order| Search::new(component, order, cap, target)),
                    );
                }
            }
            Work {
                component: index,
                searches,
                merged: None,
                bands: None,
                bisections: 0,
                bisection_shift: 1,
            }
        })
        .collect();
    let mut nodes = 0;
    let mut budget = FIRST_BUDGET;
    let mut restarts = 0u64;
    'rounds: while !work.is_empty() {
        for job in &mut work {
            let index = job.component;
            let mut stopped = false;
            for search in &mut job.searches {
                if heights[index] <= done_at(lower_bound) {
                    break;
                }
                search.lower_cap(heights[index] - 1);
                search.set_stop_at(done_at(lower_bound));
                let end = search.run(budget, deadline);
                adopt(search, &mut heights[index], &mut offsets[index]);
                match end {
                    End::Stopped => {
                        stopped = true;
                        break;
                    }
                    End::Exhausted if search.is_complete() => {
                        // Nothing at or below the final cap: the component needs one more.
                        // (A finished search returns at once when run again.)
                        let proven = (search.cap() + 1).min(heights[index]);
                        lower_bound = lower_bound.max(proven);
                    }
                    _ => {}
                }
            }
            // Band splits ([`bands`]): while the component must fill every column up to the
            // target exactly, cutting it into bands across its whole lifetime packs cut-like
            // tilings that the searches need millions of nodes for.
            let target = done_at(lower_bound);
            if !stopped && heights[index] > target {
                let splits = job
                    .bands
                    .get_or_insert_with(|| BandSplits::new(&components[index], target));
                if let Some(splits) = splits.as_mut().filter(|splits| splits.cap() == target) {
                    let before = splits.nodes();
                    let packing = splits.run(&components[index], budget * BANDS_SHARE, deadline);
                    nodes += splits.nodes() - before;
                    if let Some(packing) = packing {
                        heights[index] = components[index].height(&packing);
                        offsets[index] = packing;
                    } else if deadline.passed() {
                        stopped = true;
                    }
                }
            }
            // Bisection: searches capped between the bound and the best height. The cap
            // prunes as hard as a tight search's, so such a search finds a packing below it
            // (or proves there is none) far sooner than a descent gets there from above.
            // The cap starts halfway; an attempt without a packing moves it halfway closer
            // to the best height (easier), one with a packing moves it back down.
            for _ in 0..BISECTIONS_PER_ROUND {
                let floor = done_at(lower_bound);
                if stopped || heights[index] <= floor + 1 {
                    break;
                }
                let gap = heights[index] - floor;
                let cap = heights[index] - (gap >> job.bisection_shift).max(1);
                job.bisections += 1;
                let component = if job.bisections % 2 == 0 {
                    &components[index]
                } else {
                    &mirrored[index]
                };
                let order = Order::ALL[(job.bisections / 2) as usize % Order::ALL.len()];
                let mut search = Search::new(component, order, cap, floor);
                let before = heights[index];
                let end = search.run(budget, deadline);
                nodes += search.nodes();
                adopt(&search, &mut heights[index], &mut offsets[index]);
                match end {
                    End::Stopped => stopped = true,
                    End::Exhausted if search.is_complete() => {
                        let proven = (search.cap() + 1).min(heights[index]);
                        lower_bound = lower_bound.max(proven);
                    }
                    _ => {}
                }
                if heights[index] < before {
                    job.bisection_shift = job.bisection_shift.saturating_sub(1).max(1);
                } else if end == End::Budget {
                    job.bisection_shift = (job.bisection_shift + 1).min(BISECTION_SHIFT_MAX);
                }
            }
            // Restarts: fresh tight searches in seeded shuffled orders, both branchings and
            // both directions, with short Luby budgets. The search time is heavy-tailed in
            // the order; restarts cut the tail when the bound is reachable.
            let mut spent = 0;
            // Each restart builds its search afresh: not worth it on very large components.
            let share = if components[index].span_total() > LARGE_COMPONENT {
                0
            } else {
                budget * RESTART_SHARE
            };
            // Every restart costs at least one node of the budget and polls the deadline:
            // one that ends at its root (0 nodes) must neither loop forever nor run late.
            while !stopped && spent < share && heights[index] > done_at(lower_bound) {
                if deadline.passed() {
                    stopped = true;
                    break;
                }
                restarts += 1;
                // Every third restart searches merged blocks instead ([`merge`]): a
                // heuristic, so its exhaustion proves nothing about the buffers, only that
                // this variant of the blocks is not worth more restarts.
                let merged = if restarts % MERGED_EVERY == 0 {
                    job.merged
                        .get_or_insert_with(|| MergedRestarts::new(&components[index], &deadline))
                        .as_mut()
                        .and_then(|merged| merged.next(&components[index], &deadline))
                } else {
                    None
                };
                let mut restart = match merged {
                    Some((blocks, order, branching)) => Search::new(
                        &blocks.component,
                        order,
                        done_at(lower_bound),
                        done_at(lower_bound),
                    )
                    .with_branching(branching),
                    None => Search::new(
                        if restarts % 2 == 0 {
                            &components[index]
                        } else {
                            &mirrored[index]
                        },
                        Order::Shuffled(restarts),
                        done_at(lower_bound),
                        done_at(lower_bound),
                    )
                    .with_branching(if restarts % 4 < 2 {
                        Branching::Leftmost
                    } else {
                        Branching::FewestChildren
                    }),
                };
                let end = restart.run(RESTART_UNIT * luby(restarts), deadline);
                spent += restart.nodes().max(1);
                nodes += restart.nodes();
                if let Some((found, packing)) = restart.best() {
                    if *found < heights[index] {
                        heights[index] = *found;
                        offsets[index] = match &merged {
                            Some((blocks, ..)) => blocks.expand(packing),
                            None => packing.clone(),
                        };
                    }
                }
                let exhausted = end == End::Exhausted && restart.is_complete();
                let cap = restart.cap();
                let was_merged = merged.is_some();
                drop(restart);
                match end {
                    _ if exhausted && was_merged => {
                        if let Some(Some(merged)) = &mut job.merged {
                            merged.next_variant(&components[index], &deadline);
                        }
                    }
                    _ if exhausted => {
                        let proven = (cap + 1).min(heights[index]);
                        lower_bound = lower_bound.max(proven);
                    }
                    End::Stopped => stopped = true,
                    _ => {}
                }
            }
            if stopped {
                break 'rounds;
            }
        }
        work.retain(|job| {
            let done = heights[job.component] <= done_at(lower_bound);
            if done {
                nodes += job.searches.iter().map(Search::nodes).sum::<u64>();
            }
            !done
        });
        budget = budget.saturating_mul(2);
    }
    nodes += work
        .iter()
        .flat_map(|job| &job.searches)
        .map(Search::nodes)
        .sum::<u64>();
    Outcome {
        height: heights.iter().copied().max().unwrap_or(0),
        lower_bound,
        nodes,
    }
}

/// Takes the search's best packing for the component if it is lower than `height`.
fn adopt(search: &Search<'_>, height: &mut u64, offsets: &mut Vec<u64>) {
    if let Some((found, packing)) = search.best() {
        if *found < *height {
            *height = *found;
            offsets.clone_from(packing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_planner_kit::testing::{
        buffer, buffers_from_rows, rectangle_cut, tflm_greedy_medium,
    };
    use memplan_planner_kit::FixedOffset;

    /// Panics unless the packing is valid for `buffers`: time-overlapping buffers disjoint in
    /// bytes, offsets aligned, fixed offsets kept, height the highest top.
    fn assert_valid(buffers: &[Buffer], packing: &Packing) {
        assert_eq!(packing.offsets.len(), buffers.len());
        for (index, (buffer, &offset)) in buffers.iter().zip(&packing.offsets).enumerate() {
            assert_eq!(offset % buffer.alignment, 0, "buffer {index} misaligned");
            if let Some(fixed) = buffer.fixed_offset.get() {
                assert_eq!(offset, fixed, "buffer {index} moved from its fixed offset");
            }
            assert!(
                offset + buffer.size <= packing.height,
                "buffer {index} above the height"
            );
            for (other, (second, &second_offset)) in
                buffers.iter().zip(&packing.offsets).enumerate()
            {
                if other > index && buffer.lifetime.overlaps(second.lifetime) {
                    assert!(
                        offset + buffer.size <= second_offset
                            || second_offset + second.size <= offset,
                        "buffers {index} and {other} overlap"
                    );
                }
            }
        }
        let top = buffers
            .iter()
            .zip(&packing.offsets)
            .map(|(b, o)| o + b.size)
            .max();
        assert_eq!(packing.height, top.unwrap_or(0));
    }

    fn pack(buffers: &[Buffer], seconds: f64) -> Packing {
        let packing = ExactPacker::new(Duration::from_secs_f64(seconds))
            .pack(buffers, &HostContext::detached())
            .expect("packs");
        assert_valid(buffers, &packing);
        packing
    }

    #[test]
    fn a_search_that_finishes_is_deterministic() {
        // Dense cuts need thousands of nodes (and restarts) before the optimum.
        let buffers = rectangle_cut(1 << 20, 100, 120, 5);
        let first = pack(&buffers, 30.0);
        assert!(first.note.contains("proven optimal"), "{}", first.note);
        assert!(!first.note.contains("(0 nodes"), "{}", first.note);
        let second = pack(&buffers, 30.0);
        assert_eq!(first.offsets, second.offsets);
    }

    #[test]
    fn tflm_greedy_medium_is_packed_at_its_lower_bound() {
        // TFLM's greedy_medium_test (TFLM's greedy planner needs 90).
        let mut cases = vec![tflm_greedy_medium()];
        if let Ok(corpus) = std::env::var("MEMPLAN_CORPUS") {
            let path = std::path::Path::new(&corpus).join("tflm-traces/greedy_medium_test.csv");
            let model = memplan::input::read_model(&path).expect("the corpus has the TFLM traces");
            cases.push(buffers_from_rows(model.tensors.iter().map(|tensor| {
                let lifetime = tensor.lifetime.expect("CSV rows have lifetimes");
                (tensor.size, tensor.alignment, lifetime, tensor.fixed_offset)
            })));
        }
        for buffers in cases {
            let packing = pack(&buffers, 10.0);
            assert_eq!(packing.height, 80);
            assert!(packing.note.contains("proven optimal"), "{}", packing.note);
        }
    }

    #[test]
    fn rectangle_cuts_are_packed_at_their_width() {
        for seed in 1..=5 {
            let buffers = rectangle_cut(1 << 16, 200, 40, seed);
            let packing = pack(&buffers, 10.0);
            assert_eq!(packing.height, 1 << 16, "seed {seed}: {}", packing.note);
            assert!(packing.note.contains("proven optimal"), "{}", packing.note);
        }
    }

    #[test]
    fn dense_cuts_are_packed_by_band_splits() {
        // 300 pieces of 1 MiB x 50 steps: the searches alone leave seed 8 above the optimum
        // after 10 s (1,049,832 in a release build); band splits pack it in 0.1 s.
        let buffers = rectangle_cut(1 << 20, 50, 300, 8);
        let packing = pack(&buffers, 60.0);
        assert_eq!(packing.height, 1 << 20, "{}", packing.note);
        assert!(packing.note.contains("proven optimal"), "{}", packing.note);
    }

    #[test]
    fn the_time_limit_holds_where_every_buffer_lives_at_once() {
        // 30,000 buffers all live together: the search's starting packings and its bound
        // work on every buffer at once, and the time limit still holds.
        let buffers: Vec<Buffer> = (0..30_000u32)
            .map(|i| Buffer {
                size: 16 * u64::from(1 + i % 64),
                alignment: 16,
                lifetime: memplan_plugin_api::Lifetime::new(0, 1),
                fixed_offset: None.into(),
            })
            .collect();
        let started = Instant::now();
        // Not `pack`, whose pairwise check is quadratic: all are live together, so sorted by
        // offset, each must end before the next begins.
        let packing = ExactPacker::new(Duration::from_millis(200))
            .pack(&buffers, &HostContext::detached())
            .expect("a packing");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let mut ranges: Vec<(u64, u64)> = buffers
            .iter()
            .zip(&packing.offsets)
            .map(|(buffer, &offset)| (offset, offset + buffer.size))
            .collect();
        ranges.sort_unstable();
        assert!(ranges.windows(2).all(|pair| pair[0].1 <= pair[1].0));
    }

    #[test]
    fn a_tiny_time_limit_still_returns_a_valid_packing_with_its_bound() {
        // A dense cut that the search does not finish in 10 s (see the bench).
        let buffers = rectangle_cut(1 << 20, 50, 200, 2);
        let started = Instant::now();
        let packing = pack(&buffers, 0.05);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert!(packing.height > 1 << 20);
        assert!(
            packing.note.contains("lower bound 1048576") && packing.note.contains("time limit"),
            "{}",
            packing.note
        );
    }

    #[test]
    fn alignment_and_fixed_offsets_are_honoured() {
        let mut buffers = vec![
            buffer(20, 0, 3),
            buffer(16, 1, 2),
            buffer(40, 2, 5),
            buffer(10, 4, 6),
            buffer(30, 0, 6),
        ];
        buffers[0].alignment = 16;
        buffers[1].alignment = 32;
        buffers[1].fixed_offset = FixedOffset::at(64);
        buffers[2].alignment = 16;
        buffers[3].alignment = 64;
        buffers[4].alignment = 16;
        let packing = pack(&buffers, 1.0);
        // Never above the greedy start, whatever the search proves.
        let problem = Problem::new(&buffers);
        let context = HostContext::detached();
        let no_deadline = Deadline {
            at: None,
            context: &context,
        };
        let greedy_height = problem
            .components
            .iter()
            .map(|c| c.height(&greedy::greedy(c, &no_deadline)) * problem.unit)
            .max()
            .expect("one component");
        assert!(packing.height <= greedy_height);
    }

    #[test]
    fn goal_fit_stops_at_the_first_packing_under_the_budget() {
        // A dense cut whose optimum (2^20, a perfect tiling) the search does not prove in
        // seconds; the budget lies between it and the greedy height.
        let buffers = rectangle_cut(1 << 20, 50, 200, 2);
        let greedy = memplan_planner_kit::pack_greedy(
            &buffers,
            memplan_planner_kit::Order::Size,
            memplan_planner_kit::Fit::Best,
        )
        .height;
        assert!(greedy > 1 << 20);
        let room = (1 << 20) + (greedy - (1 << 20)) / 2;
        let within = |goal: Goal| {
            let packing = ExactPacker::new(Duration::from_secs(30))
                .with_goal(goal)
                .pack_within(&buffers, Some(room), &HostContext::detached())
                .expect("packs");
            assert_valid(&buffers, &packing);
            assert!(packing.height <= room, "{goal:?}: {}", packing.note);
            packing
        };
        let fit = within(Goal::Fit);
        assert!(
            fit.note.contains("goal \"fit\" stopped the search there")
                || fit.note.contains("proven optimal"),
            "{}",
            fit.note
        );
        // "smallest" fits the budget first, then keeps lowering.
        let smallest = ExactPacker::new(Duration::from_millis(500))
            .with_goal(Goal::Smallest)
            .pack_within(&buffers, Some(room), &HostContext::detached())
            .expect("packs");
        assert_valid(&buffers, &smallest);
        assert!(smallest.height <= room, "{}", smallest.note);
        assert!(!smallest.note.contains("goal"), "{}", smallest.note);
        // Without a budget, "fit" has nothing to aim at and minimises.
        let unbounded = ExactPacker::new(Duration::from_millis(200))
            .with_goal(Goal::Fit)
            .pack(&buffers, &HostContext::detached())
            .expect("packs");
        assert!(!unbounded.note.contains("goal"), "{}", unbounded.note);
    }

    #[test]
    fn options_accept_a_time_limit_and_name_unknown_options() {
        assert_eq!(
            ExactOptions::parse("{\"time_limit_s\": 2.5}")
                .expect("valid")
                .time_limit,
            Duration::from_millis(2500)
        );
        assert_eq!(
            ExactOptions::parse("").expect("empty").time_limit,
            DEFAULT_TIME_LIMIT
        );
        let error = ExactOptions::parse("{\"time_limit\": 2}").unwrap_err();
        assert_eq!(
            error.kind,
            memplan_plugin_api::PlanErrorKind::InvalidRequest
        );
        assert!(error.message.contains("`time_limit`"), "{}", error.message);
        assert!(ExactOptions::parse("{\"time_limit_s\": -1}").is_err());
        assert_eq!(
            ExactOptions::parse("{\"goal\": \"fit\"}")
                .expect("valid")
                .goal,
            Goal::Fit
        );
        assert_eq!(ExactOptions::parse("").expect("empty").goal, Goal::Smallest);
        let error = ExactOptions::parse("{\"goal\": \"fastest\"}").unwrap_err();
        assert!(error.message.contains("`fit`"), "{}", error.message);
    }
}
