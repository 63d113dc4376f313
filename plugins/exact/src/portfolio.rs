//! Planner `portfolio`, memplan's default: the smallest plan the shipped methods find within a
//! time budget, and a note saying which method won and whether it is proven optimal.
//!
//! Per arena (the kit's `plan_with_packer` does constants, persistent tensors, memories, spill
//! and aliases around it):
//! 1. the arena's lower bound (the one memplan reports: the kit's `arena_lower_bound`). No
//!    packing is lower, so a candidate that reaches it ends the search, proven optimal;
//! 2. cheap candidates: the kit's greedy packer in each of its orders (by duration, size,
//!    area, lifetime start) with best and then first fit (first fit by size is TFLite
//!    Micro's planner; XLA's heap simulator keeps the best of several such orders), then
//!    the kit's start-order sweep variants (`sweep_variants`). From
//!    [`SWEEPS_FROM`] buffers on, the kit's first start-order sweep variant goes first
//!    (O(n log n) on every trace shape, where the other orders are superlinear on random and
//!    training traces: the kit's greedy module says why; from [`SIZE_BEFORE_SWEEPS_FROM`]
//!    buffers [`LARGE_FIRST_SWEEP`] before it), best fit by duration (by size from
//!    [`SIZE_BEFORE_SWEEPS_FROM`] buffers) next, then the other start-order sweeps
//!    (`sweep_variants`) and plain best fit by start, then the other orders. From
//!    [`SIZE_BEFORE_SWEEPS_FROM`] buffers where few are live per step ([`FEW_LIVE`] on
//!    average: model-like traces), best fit by size goes first instead: there it is about
//!    as cheap as a sweep and lower ([`Candidate::for_arena`]). Where at least
//!    [`BUSY_STEPS_FROM_LIVE`] are live per step on average ([`BUSY_STEPS_FROM_LIVE_UNSEARCHED`]
//!    where the search skips the arena), sweeps out of [`BUSY_STEP_SWEEPS`] other busy steps
//!    follow the kit's sweeps. Two threads take
//!    them from the list in turn; the others stop at the deadline, and a candidate at the
//!    bound stops those after it. The first completes unless the time is too short for it:
//!    from [`SWEEPS_FROM`] buffers, where it is not done shortly before the limit's
//!    allowance (10 % and 50 ms) runs out, a third thread makes the kit's one-pass packing
//!    (`one_pass`: 30-78 ms at 1,000,000 buffers, 1.00-1.56 x the bound on the generated
//!    traces), which then stands in for it (`run_candidates`), so that every arena gets a
//!    plan within the limit; where more than [`FEW_LIVE`] are live per step, the other thread
//!    stops then, so that the first has a core to complete on (`one_pass_halts_the_other`).
//!    Where not even the one-pass packing alone has its time, before the bound or after it,
//!    it is made at once instead, without the candidates (the bound beside it where still to
//!    find). The search starts from the lowest of them;
//! 3. on arenas of [`CRITICAL_FROM`] buffers or more, the *critical-step search*
//!    ([`CriticalSteps`]): the exact search packs the buffers live where the live bytes
//!    come within 10 % of the bound at the bound, the kit's greedy packer the others around
//!    them, and where that is still above the bound those steps join, round after round.
//!    Where its first round takes at most one buffer in [`CRITICAL_FIRST_SHARE`] (the live
//!    bytes come near the bound at few steps: random lifetimes over as many steps as
//!    buffers, model-like traces) it goes *before* step 2, with half the time left before
//!    the sooner of the deadline and the host's `--timeout`, and a plan at the bound ends
//!    there, its packing one more start for the search. In arenas the search skips (from
//!    [`BESIDE_CANDIDATES_FROM`] buffers), where its first round costs a greedy packing of the
//!    arena (up to 1.5 s at 1,000,000 buffers; the later rounds of large arenas pack only the
//!    buffers near the critical ones) that the candidates need the time for, it runs on the
//!    other core beside step 2 instead, until that deadline, ranked between the first
//!    candidate and the others
//!    (generated model-like traces of 300,000-1,000,000 buffers: at the bound in 0.19-0.45 s
//!    of the default 1 s, where they ended 0.03-8 % above it). There, where its first round
//!    takes more, it is tried beside step 2 all the same: each round goes on only where its
//!    search fits the critical buffers within the bound in a fifth of the time left
//!    ([`CRITICAL_TRIAL_SHARE`]); else the other core goes back to the candidates. Elsewhere
//!    (or where no round of the trial completed), where its first round takes more, it runs
//!    after step 2 while the best is above the bound, until the deadline: on the other core
//!    beside the search (step 4) where the search runs, else on this one.
//!    It leaves arenas whose live bytes come near the bound at most steps (random lifetimes
//!    over 1,000 steps) to the others: there its rounds would take every buffer;
//! 4. while the best is above the bound and time remains, on arenas of at most
//!    [`EXACT_MAX_BUFFERS`] buffers, two things at once until the deadline (`time_limit_s`,
//!    default [`DEFAULT_TIME_LIMIT`], shared by every arena of the plan; the host's
//!    `--timeout` too), each on its own core:
//!    - the `exact` branch-and-bound search (this crate), started from the packings of step
//!      2 (it need not make greedy packings of its own), for the whole budget;
//!    - on arenas of [`CLIMB_FROM`] buffers or more, the critical-step search where it is
//!      still to run (step 3), then while above the bound hill climbing over the lowest greedy
//!      candidate's placement order (as Arm's Vela does, [`climb`]): a buffer at the top is
//!      swapped with one placed before it, and the swap kept when the packing is no higher,
//!      a fixed number of packings scaled to the arena ([`CLIMB_WORK`]); on smaller arenas,
//!      where climbing has not measured gains, a second search of restarts only
//!      ([`SECOND_SEARCH`]), which reaches the bound of cut-like instances sooner.
//!
//!    Arenas of more than [`EXACT_MAX_BUFFERS`] buffers skip this step: the search keeps its
//!    deadline and memory there too, but on the large traces measured (training traces of
//!    62,000 buffers, random lifetimes of 100,000) found nothing below the greedy candidates
//!    within 10 s.
//!
//!    The search returning stops the other thread. Where either reaches the lower bound, the
//!    two race to it by work, not by the clock ([`Race`]): the one there with less work
//!    wins, the other stops once its work has passed the winner's, so a plan finished before
//!    the deadline is the same on every run. The critical-step search used to run between
//!    the candidates and the search, with half the time left and the other core idle: on
//!    generated training traces of 1,500-3,000 buffers it needs more (even-compiler:3000
//!    alone reaches the bound in about 0.56 s, and ended 1.0048 x it in the portfolio's
//!    1 s; beside the search it is at the bound in about 0.7 s).
//!
//! Running the members side by side rather than one after the other is what keeps the
//! portfolio no worse than any of them alone with the same budget (on a 1,042-buffer trace,
//! climbing first used to take the time the search needed to prove its bound); the tests
//! check it member by member. Every member but the searches and the climbing (cut short at
//! the deadline) is deterministic; the note says when the budget ran out.

use std::time::{Duration, Instant};

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use memplan_planner_kit::threads::{join_asking, join_or_resume};
use memplan_planner_kit::time_limit::{for_buffers, return_by};
use memplan_planner_kit::{
    arena_lower_bound, average_live, greedy_ranks, pack_greedy_ranked, pack_greedy_until,
    pack_one_pass, pack_one_pass_until, pack_sweep_variant, pack_sweep_variant_on_two_threads,
    plan_with_packer, Buffer, Fit, GapChoice, Order, Packer, Packing, PeakStacking, PlannerOptions,
    Stopped, SweepVariant, XorShift64Star, FEW_LIVE,
};
use memplan_plugin_api::abi_stable::std_types::RStr;
use memplan_plugin_api::{
    HostContext, LogLevel, MemoryPlan, PlanError, PlanErrorKind, PlanRequest, Planner,
};

use crate::core_share::{on_share, shares_the_cores, SHARE_WINDOW};
use crate::critical::{CriticalPacking, CriticalSteps};
use crate::greedy::SWEEP_FIRST_FROM;
use crate::options::Techniques;
use crate::packer::{
    no_reuse_plan, one_pass_begun_by, one_pass_beside, one_pass_would_overrun, ExactPacker,
};
use crate::search::Deadline;

/// Search time for a whole plan when `time_limit_s` is not given.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(1);
/// Arenas with at least this many buffers take an O(n log n) start-order sweep first (the
/// one candidate that completes unless the time is too short even for it, where the
/// one-pass packing stands in: see [`SWEEP_FIRST_FROM`] and `run_candidates`), then best fit by
/// duration and by size (greedy-bestfit's own packing, so that the portfolio is not above it
/// where time allows: on a 1,000,000-buffer model-like trace by size is 0.03 % above the
/// bound, done in about 0.9 s), then the other start-order sweeps ([`Candidate::for_arena`]).
pub const SWEEPS_FROM: usize = SWEEP_FIRST_FROM;
/// Arenas with at least this many buffers take best fit by size right after the first two
/// sweeps ([`LARGE_FIRST_SWEEP`] and the kit's first variant; where a buffer has a fixed
/// offset, right after the first candidate), and by duration only after the other sweeps:
/// there by size must finish within the budget where the critical-step search (beside the
/// candidates there) does not reach the bound (a 1,000,000-buffer model-like trace: 0.56 s),
/// and on random traces both orders run until the deadline, holding a thread each, which
/// would leave the sweeps none. Below it by duration goes second (training traces: at the
/// bound within 0.1 s) and by size after the sweeps.
pub const SIZE_BEFORE_SWEEPS_FROM: usize = 200_000;
/// The first candidate from [`SIZE_BEFORE_SWEEPS_FROM`] buffers on (where it applies: no
/// buffer at a fixed offset; and where more than [`FEW_LIVE`] are live per step on average,
/// else best fit by size goes first: [`Candidate::for_arena`]), before the kit's first sweep
/// variant. Generated traces of
/// 300,000-1,000,000 buffers with the default 1 s: random-lifetime `random:1000000` went
/// from 1.0017 x the bound (at the deadline) to at the bound in 0.82-0.91 s, seed 3 from
/// 1.0024 to 1.0011, training `compiler:1000000:2` and `compiler:400000:2` reach their
/// bound in 0.52 and 0.19 s instead of 1.0 s; none of the twenty measured ends higher (the
/// kit's first variant, lower on `random:1000000:2:1000000`, comes second and completes
/// within the second there: [`SIZE_BEFORE_SWEEPS_FROM`]). With 0.3 s the first candidate
/// was all that completed at 1,000,000 buffers (the one-pass packing now stands in for it
/// there: `run_candidates`): this one is lower on five of the ten traces
/// of that size, the same on three, higher on the model-like one (1.2007 where the first
/// variant gives 1.1592) and `random:1000000:2:1000000`, and takes 0.05-0.15 s longer. The
/// band and all-live traces of 1,000,000 buffers take 0.28 s instead of 0.19-0.21 s (both
/// at the bound).
pub const LARGE_FIRST_SWEEP: SweepVariant =
    SweepVariant::AnchoredAtPeak(PeakStacking::EarliestStart, GapChoice::NearestEnd);
/// Arenas with at least this many buffers live per step on average (the kit's
/// `average_live`) take sweeps out of [`BUSY_STEP_SWEEPS`] more busy steps right after the
/// kit's sweep variants (the kit's `busy_steps`; each by earliest start and by latest end,
/// each buffer beside the neighbour ending nearest: `SweepVariant::AnchoredAtBusyStep`).
/// There the live bytes come near the bound at many steps, the greedy orders other than
/// start are superlinear, and the lowest packing is mostly a sweep's: whichever leaves the
/// least fragmentation where the live bytes come next nearest the bound, which only trying
/// tells. With the default 1 s, on 34 generated random traces with 300-10,000 live per step
/// (10,000-300,000 buffers over 1,000-10,000 steps) 26 came lower, 8 the same, none higher:
/// `random:20000:3` from 1.0185 x the bound to 1.0017, `random:50000:3` 1.0107 to 1.0002,
/// `random:150000` 1.0050 to 1.00005, `random:100000:2` 1.0074 to 1.0042,
/// `random:60000:4:10000` (300 live) 1.0327 to 1.0175; from 200,000 buffers they get no time
/// in 1 s, and on `random:100000` and `random:70000` (seeds 1-3) they found nothing lower.
/// Below 256 live they took the critical-step search's time where the search runs:
/// `random:40000:2:10000` (200 live), at the bound by that search, ended 1.0053 x it with
/// them from 100 live.
pub const BUSY_STEPS_FROM_LIVE: u64 = 256;
/// [`BUSY_STEPS_FROM_LIVE`] in arenas the exact search skips (more than
/// [`EXACT_MAX_BUFFERS`] buffers): there nothing after the candidates has the time. The
/// greedy orders other than start take the rest of the budget without completing where 64
/// or more are live per step, and the critical-step search runs before the candidates or
/// beside them. On 17 generated random traces of 60,000-400,000 buffers with 70-252 live per
/// step, with 1 s, 6 came lower (`random:150000:7:50000`, 150 live, 1.0422 x the bound to
/// 1.0188; `random:100000:4:20000` 1.0134 to 1.0060; `random:70000:41:20000` 1.0390 to
/// 1.0328), 11 the same, none higher (2 runs each of the seven with 70-126 live).
pub const BUSY_STEPS_FROM_LIVE_UNSEARCHED: u64 = 64;
/// The busy steps after the busiest that sweeps start from in dense arenas (see
/// [`BUSY_STEPS_FROM_LIVE`]): 32 sweeps, at 100,000 buffers over 1,000 steps about 55 ms
/// each, which the budget's second mostly covers there. On nine traces of 50,000-100,000
/// buffers over 1,000 steps the lowest of 16 such sweeps (8 busy steps) was higher than the
/// lowest of 32 on five (`random:100000:2`: 1.0074 against 1.0044 x the bound).
pub const BUSY_STEP_SWEEPS: u8 = 16;
/// How many buffers an arena of `count` must have live per step on average to take the
/// sweeps out of other busy steps: [`BUSY_STEPS_FROM_LIVE`], or
/// [`BUSY_STEPS_FROM_LIVE_UNSEARCHED`] where the search skips it.
fn busy_steps_from_live(count: usize) -> u64 {
    match search_skips(count) {
        true => BUSY_STEPS_FROM_LIVE_UNSEARCHED,
        false => BUSY_STEPS_FROM_LIVE,
    }
}

/// The sweeps out of other busy steps, in the order tried: busy steps 1 to
/// [`BUSY_STEP_SWEEPS`], each by earliest start and then by latest end, each buffer beside
/// the neighbour ending nearest.
fn busy_step_sweeps() -> impl Iterator<Item = SweepVariant> {
    (1..=BUSY_STEP_SWEEPS).flat_map(|rank| {
        [PeakStacking::EarliestStart, PeakStacking::LatestEnd]
            .map(|stacking| SweepVariant::AnchoredAtBusyStep(rank, stacking, GapChoice::NearestEnd))
    })
}

/// Arenas with more buffers do not run the exact search.
pub const EXACT_MAX_BUFFERS: usize = 50_000;

/// Whether the exact search skips an arena of `count` buffers ([`EXACT_MAX_BUFFERS`]).
fn search_skips(count: usize) -> bool {
    count > EXACT_MAX_BUFFERS
}
/// Arenas with at least this many buffers (those the exact search skips) run the
/// critical-step search on the other core beside the candidates, for the whole budget,
/// instead of before them with half of it where it applies ([`CRITICAL_FIRST_SHARE`]; its
/// core's twin idle meanwhile). From 200,000 buffers its first round alone takes much of the
/// budget. From here, on 29 generated traces of 60,000-180,000 buffers (random lifetimes with
/// 25-2,500 live per step, model-like, training) with the default 1 s, 3 came lower, all to
/// the bound (`random:80000:11:40000` from 1.0331 x it, `random:100000:42:60000` 1.0135,
/// `random:120000:12:30000` 1.0031: their rounds need 0.5-0.85 s), none higher; those at the
/// bound before took up to 20 ms longer (`model:150000:97` 0.10 s instead of 0.08 s: the
/// first candidate completes before the plan does). On smaller arenas, where the search runs
/// after the candidates, 38 traces of 1,000-50,000 buffers ended as high as before.
pub const BESIDE_CANDIDATES_FROM: usize = EXACT_MAX_BUFFERS + 1;
/// Arenas with at least this many buffers run the critical-step search ([`CriticalSteps`]);
/// on smaller ones the search of the whole arena does as well (MiniMalloc's instances,
/// 150-450 buffers).
pub const CRITICAL_FROM: usize = 1000;
/// The critical-step search runs before the candidates where its first round searches at
/// most one buffer in this many, with at most half the time left.
pub const CRITICAL_FIRST_SHARE: usize = 20;
/// Where the critical-step search runs beside the candidates ([`BESIDE_CANDIDATES_FROM`])
/// and its first round searches more than one buffer in [`CRITICAL_FIRST_SHARE`], each
/// round goes on only if its search fits the critical buffers within the bound in this share
/// of the time left (`CriticalSteps::pack_on_trial`); else the other core goes back to the
/// candidates. A round's search either fits at once or not within the whole budget (the
/// first round's on 43 generated random traces of 10,000-300,000 buffers, alone with 1 s:
/// within 0.14 s, or not within 0.92-1.0 s), so the trial costs the traces where the search
/// does not fit a fifth of the other core, where running it beside them for the whole budget
/// cost them what they had gained from it (`random:200000:405:50000` 1.0412 to 1.0457 x
/// the bound). With the default 1 s, on 39 generated random traces of 10,000-190,000
/// buffers with 100-333 live per step (with [`CriticalSteps`]'s later rounds there packing
/// only near the critical buffers): 12 came lower, 10 of them to the bound
/// (`random:100000:5:25000` from 1.0065 in 0.42 s, `random:120000:403:40000` 1.0248 in
/// 0.44 s, `random:180000:708:50000` 1.0247 in 0.70 s, `random:60000:701:15000` 1.0261 in
/// 0.31 s), one higher (`random:80000:702:20000` 1.0277 to 1.0290, with the first round
/// alone on trial: its second round's search takes 2.3 s; with every round on trial it is
/// 1.0277 again, on 64 traces nothing else changed), the rest the same. On 12 more of
/// 100,000-1,000,000 buffers the same heights; on the 122 traces of earlier measurements
/// (1,000-2,000,000 buffers, every shape) 3 lower, the others within their run-to-run
/// spread. Since a round's search runs only the techniques aiming at the bound, some first
/// rounds fit in between (alone, on 9 of the 18 traces whose first round did not fit in 1 s:
/// 0.48-0.94 s); a third of the time left instead of a fifth was mixed on 55 generated
/// random traces of 60,000-200,000 buffers (1 lower, 2 higher, one run each).
pub const CRITICAL_TRIAL_SHARE: u32 = 5;

/// A greedy candidate: its order, its fit and the name the note gives it.
type GreedyCandidate = (Order, Fit, &'static str);

/// The greedy candidates of arenas below [`SWEEPS_FROM`] buffers, in the order they are
/// tried: every order of the kit with best and then first fit, by duration first as
/// `exact`'s own ([`crate::greedy::ORDERS`]), but best fit by size second, so that it runs
/// beside it on the other core: on training traces by duration is both the quick one and the
/// lowest (28,000 buffers: at the bound in 0.1 s, where by size one pass took 1.4 s and left
/// the plan 0.4 % above it). The search starts from the lowest of them per component
/// ([`crate::greedy::best_start`]) instead of making its own.
const GREEDY: [GreedyCandidate; 8] = [
    (Order::Duration, Fit::Best, "greedy best fit by duration"),
    (Order::Size, Fit::Best, "greedy best fit by size"),
    (Order::Duration, Fit::First, "greedy first fit by duration"),
    (
        Order::Size,
        Fit::First,
        "greedy first fit by size (TFLite Micro's)",
    ),
    (Order::Area, Fit::Best, "greedy best fit by area"),
    (Order::Area, Fit::First, "greedy first fit by area"),
    (Order::Start, Fit::Best, "greedy best fit by lifetime start"),
    (
        Order::Start,
        Fit::First,
        "greedy first fit by lifetime start",
    ),
];

/// Buffer placements the hill climbing may spend per arena: packings of an arena of n
/// buffers, at most [`CLIMB_MAX_STEPS`] (a packing of 300 buffers takes ~30 us here).
pub const CLIMB_WORK: usize = 600_000;
/// Most packings the hill climbing tries per arena.
pub const CLIMB_MAX_STEPS: usize = 4000;
/// Arenas with fewer buffers skip the hill climbing: there the exact search does better with
/// the time (MiniMalloc's instances, 150-450 buffers: climbing first left it too little
/// time on D and J), above it climbing does better (a 3,000-buffer cut: 1.32 -> 1.19 x the
/// bound; the search found nothing lower in the same second).
pub const CLIMB_FROM: usize = 1000;

pub struct Portfolio;

impl Planner for Portfolio {
    const NAME: &'static str = "portfolio";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "the smallest of greedy orders and fits, hill climbing \
         over the order, then the exact search while time remains (option time_limit_s, \
         default 1); says which won";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        let mut options = PlannerOptions::parse(Self::NAME, &request.options)?;
        let time_limit = options.take_seconds("time_limit_s")?;
        options.finish(&["time_limit_s"])?;
        let packer = PortfolioPacker::new(time_limit.unwrap_or(DEFAULT_TIME_LIMIT));
        plan_with_packer(request, context, &packer)
    }
}

/// Packs one arena with the portfolio; see the module documentation.
pub struct PortfolioPacker {
    /// The exact search as planner `exact` runs it; holds the plan's deadline, shared by
    /// every arena.
    exact: ExactPacker,
    /// The search the second core runs beside it where no hill climbing does: restarts only
    /// ([`SECOND_SEARCH`]), same deadline.
    second: ExactPacker,
}

/// The techniques of the search on the second core: no persistent searches. Measured on
/// MiniMalloc's D, F and J with 1 s (idle machine): the full search ends at 1.057, 1.0 and
/// 1.078 x the bound, this one reaches D's bound in 0.9 s and F's in 0.4 s and J at 1.056;
/// together they are never worse than the full search alone.
pub const SECOND_SEARCH: Techniques = Techniques {
    tight_searches: false,
    descents: false,
    raised_restarts: false,
    bisection: false,
    ..Techniques::ALL
};

impl PortfolioPacker {
    /// A packer whose searches stop `time_limit` from now.
    pub fn new(time_limit: Duration) -> PortfolioPacker {
        let exact = ExactPacker::new(time_limit);
        let second = ExactPacker::new(time_limit).with_techniques(SECOND_SEARCH);
        PortfolioPacker { exact, second }
    }
}

impl Packer for PortfolioPacker {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        self.pack_within(buffers, None, context)
    }

    /// The greedy candidates, then the exact search (told `room`, so that it aims at the
    /// budget first when the greedy packings exceed it) beside the hill climbing.
    fn pack_within(
        &self,
        buffers: &[Buffer],
        room: Option<u64>,
        context: &HostContext,
    ) -> Result<Packing, PlanError> {
        let deadline = self.exact.deadline();
        // The sooner of this deadline and the host's (`--timeout`): the critical-step search
        // shares what is left of it, so that the candidates after it keep their share, and
        // what runs on the other thread (whose context has no deadline) stops by it.
        let sooner = Deadline::sooner_than_host(deadline, context);
        let insurance = self.insurance(buffers, sooner);
        // Where not even the one-pass packing alone has its time ([`ONE_PASS_ALONE_PER_BUFFER`],
        // as `exact` reckons it) before the first candidate must stop, it is made at once:
        // after the bound, and beside the first candidate, it came too late (2,000,000 random
        // lifetimes over 10,000,000 steps with 0.3 s: the plan after 0.64-0.66 s, the bound
        // alone taking 0.27 s there; now 0.33-0.37 s). Asked before the bound (which is then
        // found beside it) and again after it, which can take that long.
        let no_time_for_more = || {
            insurance.is_some_and(|insurance| insurance.leaves_the_one_pass_no_time(buffers.len()))
        };
        // The first candidate, for the warning, is found beside the packing too (a pass over
        // the lifetimes: 5-8 ms at 2,000,000 buffers).
        let first = || Candidate::for_arena(buffers)[0];
        let one_pass_at_once = |packing: Packing, bound: u64, first: Candidate| {
            let share = self.exact.core_share();
            warn_one_pass_stands_in(buffers.len(), first, &packing, bound, share, context);
            concluded(packing, Candidate::OnePass.name(), bound, None, context)
        };
        // Where not even that packing would come within the allowance, the no-reuse packing
        // does (`random:2000000:6:10000000` with 0.1 s: the one-pass packing's plan came
        // after 0.27 s, against an allowance of 0.16 s).
        let no_time_for_one_pass =
            || one_pass_would_overrun(self.exact.made(), sooner, buffers.len());
        let no_reuse = || no_reuse_plan(buffers, "portfolio", sooner < deadline, context);
        if no_time_for_more() {
            if no_time_for_one_pass() {
                return Ok(no_reuse());
            }
            let (packing, (bound, first)) =
                one_pass_beside(buffers, || (arena_lower_bound(buffers), first()));
            return Ok(one_pass_at_once(packing, bound, first));
        }
        let bound = arena_lower_bound(buffers);
        // With 0.5 s the same trace's plan came after 0.63 s: the bound left too little time
        // for the one-pass packing beside the first candidate.
        if no_time_for_more() {
            if no_time_for_one_pass() {
                return Ok(no_reuse());
            }
            let (packing, first) = one_pass_beside(buffers, first);
            return Ok(one_pass_at_once(packing, bound, first));
        }
        let time_left_here = || sooner.saturating_duration_since(Instant::now());
        let half_the_time_left = || Instant::now() + time_left_here() / 2;
        // The critical-step search goes first where the live bytes come near the bound at
        // few steps (a plan at the bound then needs no candidate), else after the candidates.
        // In arenas the search skips (above EXACT_MAX_BUFFERS buffers) it runs on the other
        // core beside the candidates instead (`critical_beside_candidates`), with the whole
        // budget, where going first it had half of it and a core only: at 1,000,000 buffers
        // its first round costs a greedy packing of the arena (up to 1.5 s) and finding its
        // steps 0.1-0.2 s, both of which the candidates need in 1 s, and at 80,000-120,000
        // buffers with 100-125 live per step its five or six rounds took 0.5-0.85 s (see
        // `BESIDE_CANDIDATES_FROM`).
        let critical_applies = buffers.len() >= CRITICAL_FROM;
        let beside_candidates = buffers.len() >= BESIDE_CANDIDATES_FROM;
        let is_sparse =
            |steps: &CriticalSteps| steps.first_critical() * CRITICAL_FIRST_SHARE <= buffers.len();
        let mut first_steps =
            (critical_applies && !beside_candidates).then(|| CriticalSteps::new(buffers, bound));
        let mut sparse = first_steps.as_ref().is_some_and(is_sparse);
        let mut critical = None;
        if let Some(steps) = first_steps.as_ref().filter(|_| sparse) {
            critical = match steps.pack(buffers, half_the_time_left(), context, None) {
                Some(found) if found.packing.height <= bound => {
                    let winner = critical_name(&found);
                    return Ok(concluded(found.packing, &winner, bound, None, context));
                }
                other => other,
            };
        }
        let candidates = Candidate::for_arena(buffers);
        // Beside the candidates the other core finds the critical steps and, where they are
        // sparse, runs the search on them until the sooner of the deadline and the host's.
        let critical_beside_candidates = |context: &HostContext, halt: &AtomicBool| {
            let steps = CriticalSteps::new(buffers, bound);
            let found = match is_sparse(&steps) {
                true => steps.pack(buffers, sooner, context, Some(halt)),
                false => {
                    steps.pack_on_trial(buffers, sooner, CRITICAL_TRIAL_SHARE, context, Some(halt))
                }
            };
            (steps, found)
        };
        let beside: Option<&CriticalBeside<'_>> =
            (critical_applies && beside_candidates).then_some(&critical_beside_candidates);
        let (mut greedy, beside, insured) = self.run_candidates(
            &candidates,
            buffers,
            bound,
            deadline,
            beside,
            insurance,
            context,
        );
        // Where the first candidate did not complete (it gave way to the one-pass packing, or
        // the host asked to stop), the one-pass packing stands in for it: made by the
        // insurance, else here where no other candidate completed either (a fraction of a
        // sweep's time; the host's grace is a second at least).
        let mut candidates = candidates;
        // The share of a core is the one the insurance began on: measured after it, the
        // insurance's own thread would count as other work.
        let stand_in = match insured {
            Some(insured) => Some(insured),
            None => greedy
                .is_empty()
                .then(|| (pack_one_pass(buffers), self.exact.core_share())),
        };
        if let Some((packing, share)) = stand_in {
            let first = candidates[0];
            warn_one_pass_stands_in(buffers.len(), first, &packing, bound, share, context);
            candidates.push(Candidate::OnePass);
            greedy.push((candidates.len() - 1, packing));
        }
        // Where the critical-step search ran beside the candidates, it ranks after the first
        // and before the others: it wins a tie with any but the first (which completes unless
        // the one-pass packing stands in), so that the plan does not depend on which finished
        // first.
        let mut critical_ranks_second = false;
        if let Some((steps, found)) = beside {
            sparse = is_sparse(&steps);
            first_steps = Some(steps);
            critical_ranks_second = true;
            critical = found;
        }
        // The lowest candidate, the first of equal ones.
        let (candidate, lowest) = greedy
            .iter()
            .min_by_key(|(candidate, packing)| (packing.height, *candidate))
            .expect("at least one candidate");
        let name = candidates[*candidate].name();
        let first_is_lowest = *candidate == 0;
        // Hill climbing goes over a greedy order: the lowest greedy candidate's.
        let (order, fit) = greedy
            .iter()
            .filter_map(|(index, packing)| match candidates[*index] {
                Candidate::Greedy(order, fit, _) => Some(((packing.height, *index), (order, fit))),
                Candidate::Sweep(_) | Candidate::OnePass => None,
            })
            .min_by_key(|&(key, _)| key)
            .map_or((Order::Start, Fit::Best), |(_, order_and_fit)| {
                order_and_fit
            });
        let mut packing = lowest.clone();
        let mut winner = name.to_string();
        let mut search_note = None;
        // Exact starts from the packings made here instead of making its own.
        let mut starts: Vec<Vec<u64>> = greedy
            .into_iter()
            .map(|(_, packing)| packing.offsets)
            .collect();
        let time_left = || !context.should_stop() && Instant::now() < deadline;
        let searching = !search_skips(buffers.len());
        // Where the search runs, the critical-step search (if still to run) goes on the other
        // core beside it; else here, until the deadline.
        let mut critical_beside = None;
        if critical_applies
            && !sparse
            && critical.is_none()
            && packing.height > bound
            && time_left()
        {
            let steps = first_steps.unwrap_or_else(|| CriticalSteps::new(buffers, bound));
            match searching {
                true => critical_beside = Some(steps),
                false => critical = steps.pack(buffers, deadline, context, None),
            }
        }
        if let Some(critical) = critical {
            let tie_won = critical_ranks_second && !first_is_lowest;
            if critical.packing.height < packing.height
                || (tie_won && critical.packing.height == packing.height)
            {
                winner = critical_name(&critical);
                packing = critical.packing.clone();
            }
            starts.push(critical.packing.offsets);
        }
        // The search's setup alone takes time on large arenas: not begun once time is up.
        if packing.height > bound && searching && time_left() {
            let climbing = buffers.len() >= CLIMB_FROM;
            let race = Race::new();
            let this = std::thread::current();
            // The other thread's context has no deadline of its own: the critical-step search
            // and the climbing there stop by the clock at `sooner` (a greedy packing of
            // theirs can take a while).
            let (searched, other) = std::thread::scope(|scope| {
                // The other core runs the critical-step search where it is still to run, then
                // climbs where climbing has measured gains, else it runs a second search with
                // other techniques; none takes time from this one. It wakes this thread when
                // done.
                let other = scope.spawn(|| {
                    let run = || {
                        let lane = Lane::new(&race, Side::Other, None);
                        let context = lane.context();
                        let mut other = Vec::new();
                        if let Some(steps) = &critical_beside {
                            if let Some(found) =
                                steps.pack(buffers, sooner, &context, Some(&race.stop_other))
                            {
                                let at_bound = found.packing.height <= bound;
                                other.push((critical_name(&found), Ok(found.packing)));
                                if at_bound {
                                    lane.finished(true);
                                    return other;
                                }
                            }
                        }
                        let more = if climbing {
                            let stop = || context.should_stop() || Instant::now() >= sooner;
                            let steps = (CLIMB_WORK / buffers.len()).min(CLIMB_MAX_STEPS);
                            climb(buffers, order, fit, bound, steps, &stop)
                                .map(|climbed| (format!("hill climbing from {name}"), Ok(climbed)))
                        } else {
                            let searched = self.second.pack_from(buffers, room, &starts, &context);
                            Some(("exact search".to_string(), searched))
                        };
                        if let Some((_, Ok(packing))) = &more {
                            lane.finished(packing.height <= bound);
                        }
                        other.extend(more);
                        other
                    };
                    let other = run();
                    this.unpark();
                    other
                });
                // The host's context is asked on this thread only (it is not shared): the
                // search's lane forwards to it.
                let lane = Lane::new(&race, Side::Search, Some(context));
                let searched = self
                    .exact
                    .pack_from(buffers, room, &starts, &lane.context());
                lane.finished(matches!(&searched, Ok(packing) if packing.height <= bound));
                // The other thread may still run (where the search is at the bound, until its
                // own work passes the search's): the host's stop is passed on to it.
                let other = join_asking(other, &|| {
                    if context.should_stop() {
                        race.stop_other.store(true, Ordering::Relaxed);
                    }
                });
                (searched, other)
            });
            // Where both reached the bound, the one that got there with less work wins.
            let other_first = race.first_at_bound() == Some(Side::Other);
            // The search fails with `Cancelled` only when the deadline came before its own
            // start: the greedy candidate stands.
            match searched {
                Err(error) if error.kind == PlanErrorKind::Cancelled => {}
                Err(error) => return Err(error),
                Ok(searched) => {
                    // Kept for the note should the other thread's packing be lower still.
                    search_note = Some(searched.note.clone());
                    if searched.height < packing.height {
                        winner = "exact search".to_string();
                        packing = searched;
                    }
                }
            }
            for other in other {
                match other {
                    (_, Err(error)) if error.kind == PlanErrorKind::Cancelled => {}
                    (_, Err(error)) => return Err(error),
                    (name, Ok(other))
                        if other.height < packing.height
                            || (other_first && other.height <= bound) =>
                    {
                        winner = name;
                        packing = other;
                    }
                    _ => {}
                }
            }
        }
        Ok(concluded(packing, &winner, bound, search_note, context))
    }
}

/// Warns that the one-pass `packing` of `count` buffers stands in for the `first` candidate,
/// which the time left was too short for.
fn warn_one_pass_stands_in(
    count: usize,
    first: Candidate,
    packing: &Packing,
    bound: u64,
    share: f64,
    context: &HostContext,
) {
    context.warn(&one_pass_stands_in(count, first, packing, bound, share));
}

/// [`warn_one_pass_stands_in`]'s warning, which says where other work shared the cores (the
/// planner's thread had `share` of a core: [`shares_the_cores`]), as a reason the first
/// packing was not done that more time may not remedy.
fn one_pass_stands_in(
    count: usize,
    first: Candidate,
    packing: &Packing,
    bound: u64,
    share: f64,
) -> String {
    let shared = match shares_the_cores(share) {
        true => format!(
            "; other work shared the cores (this planner's thread had {:.0} % of one)",
            share * 100.0
        ),
        false => String::new(),
    };
    format!(
        "portfolio: the time left was too short for a first packing of {count} buffers ({}); \
         a one-pass packing ({:.3} x the lower bound {bound}) stands in for it{shared}: allow \
         more time (option time_limit_s, --timeout) for a lower plan",
        first.name(),
        packing.height as f64 / bound.max(1) as f64,
    )
}

/// `packing` with the portfolio's note ([`verdict`]), logged.
fn concluded(
    mut packing: Packing,
    winner: &str,
    bound: u64,
    search_note: Option<String>,
    context: &HostContext,
) -> Packing {
    packing.note = verdict(winner, packing.height, bound, &packing.note, search_note);
    context.debug(&format!(
        "portfolio: {} buffers: {}",
        packing.offsets.len(),
        packing.note
    ));
    packing
}

impl PortfolioPacker {
    /// The candidates that complete (index into `candidates`, packing), in list order. Two
    /// threads take them from the list in turn until it ends, time runs out, or one reaches
    /// `bound` (then the later ones stop; the earlier ones still complete, so that the lowest
    /// first one at the bound wins whatever the timing). The first completes unless the host
    /// asks to stop or `insurance` stops it; the others stop at `deadline` too.
    ///
    /// `beside`, if given, runs on the other thread before it takes candidates, with a
    /// context that asks it to stop once the first candidate reaches the bound or the host
    /// asks to stop (it keeps its own deadline); its result comes back beside the
    /// candidates'. It ranks between the first candidate and the second: the caller keeps it
    /// over any but the first on a tie, so where it reports a packing at the bound, the
    /// candidates after the first stop as they would for the second reaching it.
    ///
    /// `insurance`, if given, insures the first candidate against running past the limit:
    /// where it is not done at `insurance.from` (sooner where the first candidate has less
    /// than a core: `Insurance::begins_with_share`), a third thread makes the one-pass packing
    /// (called off once the first candidate completes; made at once where the first stops
    /// without completing; the other thread stops then where `one_pass_halts_the_other` or
    /// other work shares the cores), and once `insurance.until` has come the first candidate
    /// waits for that packing and stops. Where `insurance.from` has come before the call, the
    /// other thread stays idle (see `short`). The one-pass packing comes back only where the first
    /// candidate did not complete. Where the first is a sweep the time left does not allow on
    /// one core ([`first_sweep_needs_both_cores`]), it packs on both, and the other thread
    /// begins once it is done.
    #[allow(clippy::too_many_arguments)]
    fn run_candidates(
        &self,
        candidates: &[Candidate],
        buffers: &[Buffer],
        bound: u64,
        deadline: Instant,
        beside: Option<&CriticalBeside<'_>>,
        insurance: Option<Insurance>,
        context: &HostContext,
    ) -> CandidatesRun {
        // The next candidate to hand out (the first goes to this thread).
        let next = AtomicUsize::new(1);
        // Candidates after this one need not run: it reached the bound.
        let last_needed = AtomicUsize::new(usize::MAX);
        // Its `stop_other` is set when the host asks to stop (asked on this thread only: the
        // context is not shared), which ends the other thread's candidates, and when the
        // first candidate reaches the bound, which stops `beside` (its context's stop
        // request; the candidates after the first stop then by `last_needed`).
        let race = Race::new();
        let done: Mutex<Vec<(usize, Packing)>> = Mutex::new(Vec::new());
        // Set once the first candidate has completed, which calls the insurance off.
        let first_completed = AtomicBool::new(false);
        // Where the insurance starts at once (`short`), the time is too short for anything
        // but the first candidate and the one-pass packing: the other thread runs neither
        // `beside` nor candidates, which would only slow the two (the one-pass packing of
        // `random:1000000:2:1000000` took 0.26 s beside both instead of 0.1 s alone, and came
        // after the limit's allowance).
        let short = insurance.is_some_and(|insurance| insurance.from <= Instant::now());
        let first_on_both_cores = !short
            && insurance.is_some_and(|insurance| {
                first_sweep_needs_both_cores(&candidates[0], buffers.len(), insurance.until)
            });
        let work = |mut index: usize, host_stop: &dyn Fn() -> bool| {
            while index < candidates.len() && index <= last_needed.load(Ordering::Relaxed) {
                // The first candidate is never skipped: a stop request cuts it short only
                // where it is large (the kit's packers complete small packings), so that an
                // arena planned after the time ran out still gets a plan.
                let late = || index > 0 && Instant::now() >= deadline;
                if index > 0 && (late() || host_stop()) {
                    break;
                }
                let stop = || index > last_needed.load(Ordering::Relaxed) || late() || host_stop();
                let packed = match candidates[index] {
                    Candidate::Sweep(variant) if index == 0 && first_on_both_cores => {
                        pack_sweep_variant_on_two_threads(buffers, variant, &stop)
                    }
                    candidate => candidate.pack(buffers, &stop),
                };
                if let Ok(Some(packing)) = packed {
                    if index == 0 {
                        first_completed.store(true, Ordering::Release);
                    }
                    if packing.height <= bound {
                        last_needed.fetch_min(index, Ordering::Relaxed);
                        if index == 0 {
                            race.stop_other.store(true, Ordering::Relaxed);
                        }
                    }
                    done.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push((index, packing));
                }
                index = next.fetch_add(1, Ordering::Relaxed);
            }
        };
        let asked = || {
            let stop = context.should_stop();
            if stop {
                race.stop_other.store(true, Ordering::Relaxed);
            }
            stop
        };
        // Set once the first candidate is done (complete or stopped), which wakes the
        // insurance; `insured` once the insurance's packing is made.
        let first_done = AtomicBool::new(false);
        let insured = AtomicBool::new(false);
        // The share of a core this thread has had since the packer's making, in thousandths
        // (0 until known): published before the threads start and as the first candidate
        // packs, for the insurance to begin sooner where other work shares the cores.
        let first_share = AtomicU32::new(0);
        let publish_share = || {
            let share = self.exact.core_share();
            if share > 0.0 {
                first_share.store((share * 1000.0).max(1.0) as u32, Ordering::Relaxed);
            }
        };
        publish_share();
        // Set once the insurance is over (its packing made, or not to be made), however it
        // ends; it then wakes this thread.
        let insurance_over = AtomicBool::new(false);
        let first_stop = || {
            publish_share();
            if asked() {
                return true;
            }
            if insurance.is_none_or(|insurance| Instant::now() < insurance.until) {
                return false;
            }
            // Past `until` the first candidate waits for the insurance's packing, which then
            // has this core too, and stops once it is made. Packing on, it slowed that
            // packing down where other work shared the cores: with two busy processes beside
            // it, 9 runs of 15 on 2,000,000-buffer traces with 1 s went past the allowance.
            while !insurance_over.load(Ordering::Acquire) && !asked() {
                std::thread::park_timeout(SHARE_WINDOW / 4);
            }
            insured.load(Ordering::Acquire) || asked()
        };
        let (beside_result, insured_packing) = std::thread::scope(|scope| {
            // The other thread wakes this one when it is done, so that waiting for it costs
            // no more than it takes (a sleep of a few ms was most of the planning time of a
            // small model).
            let this = std::thread::current();
            let other = (!short && (candidates.len() > 1 || beside.is_some())).then(|| {
                let (work, next, race, last_needed) = (&work, &next, &race, &last_needed);
                let first_done = &first_done;
                scope.spawn(move || {
                    // Woken when the first candidate is done; `beside` is then not begun:
                    // finding the critical steps cannot be stopped (0.1-0.2 s at 2,000,000
                    // buffers), and begun then it made 2,000,000-buffer traces with 1 s
                    // return after up to 1.30 s.
                    while first_on_both_cores && !first_done.load(Ordering::Acquire) {
                        std::thread::park_timeout(Duration::from_millis(5));
                    }
                    let beside = beside.filter(|_| !first_on_both_cores);
                    let beside_result = beside.map(|beside| {
                        let lane = Lane::new(race, Side::Other, None);
                        let (steps, found) = beside(&lane.context(), &race.stop_other);
                        if found.as_ref().is_some_and(|f| f.packing.height <= bound) {
                            last_needed.fetch_min(0, Ordering::Relaxed);
                        }
                        (steps, found)
                    });
                    work(next.fetch_add(1, Ordering::Relaxed), &|| {
                        race.stop_other.load(Ordering::Relaxed)
                    });
                    this.unpark();
                    beside_result
                })
            });
            let insurer = insurance.map(|insurance| {
                let (first_done, first_completed) = (&first_done, &first_completed);
                let (insured, race, first_share) = (&insured, &race, &first_share);
                let insurance_over = &insurance_over;
                let first_thread = std::thread::current();
                scope.spawn(move || {
                    let _over = OnDrop(|| {
                        insurance_over.store(true, Ordering::Release);
                        first_thread.unpark();
                    });
                    // Asleep until `from`, or until the first candidate is done: where it did
                    // not complete (the host asked to stop) its stand-in is made at once.
                    // `from` comes sooner where the first candidate has less than a core.
                    let from = || {
                        let share = first_share.load(Ordering::Relaxed);
                        insurance.begins_with_share(f64::from(share) / 1000.0)
                    };
                    while !first_done.load(Ordering::Acquire) && Instant::now() < from() {
                        std::thread::park_timeout(
                            from()
                                .saturating_duration_since(Instant::now())
                                .min(SHARE_WINDOW / 2),
                        );
                    }
                    if first_completed.load(Ordering::Acquire) {
                        return None;
                    }
                    let share = f64::from(first_share.load(Ordering::Relaxed)) / 1000.0;
                    if shares_the_cores(share) || one_pass_halts_the_other(buffers) {
                        race.stop_other.store(true, Ordering::Relaxed);
                    }
                    let packing =
                        pack_one_pass_until(buffers, &|| first_completed.load(Ordering::Relaxed))
                            .ok();
                    insured.store(packing.is_some(), Ordering::Release);
                    packing.map(|packing| (packing, share))
                })
            });
            work(0, &first_stop);
            first_done.store(true, Ordering::Release);
            if let Some(other) = &other {
                other.thread().unpark();
            }
            let insured_packing = insurer.and_then(|insurer| {
                insurer.thread().unpark();
                join_or_resume(insurer)
            });
            let beside_result = other.and_then(|other| {
                join_asking(other, &|| {
                    asked();
                })
            });
            (beside_result, insured_packing)
        });
        let mut done = done
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        done.sort_unstable_by_key(|&(index, _)| index);
        // The one-pass packing only stands in for a first candidate that did not complete,
        // so that which packing wins does not depend on how long the first took.
        let insured_packing = insured_packing.filter(|_| !first_completed.into_inner());
        (done, beside_result, insured_packing)
    }

    /// The insurance of an arena's first candidate (see `run_candidates`), from
    /// [`SWEEPS_FROM`] buffers (below, the first candidate is done within milliseconds).
    /// The first candidate stops at [`return_by`] (the limit counted from the `exact`
    /// packer's making to `sooner`); the one-pass packing starts [`ONE_PASS_TIME_PER_BUFFER`] per
    /// buffer before, if the first candidate is not done by then. (Stopped at half the
    /// allowance instead, `random:500000:4` with 0.3 s went from 1.0017 x the bound in 0.36 s,
    /// its first candidate, to the one-pass packing's 1.06.)
    fn insurance(&self, buffers: &[Buffer], sooner: Instant) -> Option<Insurance> {
        if buffers.len() < SWEEPS_FROM {
            return None;
        }
        let made = self.exact.made();
        let until = return_by(made, sooner, buffers.len());
        let one_pass = for_buffers(ONE_PASS_TIME_PER_BUFFER, buffers.len());
        let from = until.checked_sub(one_pass).unwrap_or(made);
        Some(Insurance { from, until, made })
    }
}

/// Time the insurance of the first candidate allows per buffer for the one-pass packing
/// (`pack_one_pass`): measured 37-105 ns alone at 1,000,000 buffers (the kit's `one_pass`
/// table; the slowest where about 50 are live per step) and 107 ns at 2,000,000; out of time
/// order over sparse steps 115 ns at 1,000,000 and 145 ns at 2,000,000 (since 2026-11-28:
/// 30-78 ns at 1,000,000 and 88-127 ns at 2,000,000). Beside the
/// first sweep it takes longer: with 250 ns, and the critical-step search running too (three
/// threads on two cores), it came too late on `random:1000000:2:1000000` with 0.3 s
/// (returned in 0.41 s). That search now stops once the one-pass packing begins where more
/// than 16 are live (`one_pass_halts_the_other`), and the one-pass packing takes 0.27-0.29 s
/// at 2,000,000 buffers where it took up to 0.45 s: with 300 ns instead of 400, the first
/// sweep of `random:2000000:11:4000000` completes with 1 s in 5 runs of 7 (1.0857 x the
/// bound; 0 of 3 with 400 ns, once the sweep stopped within 35 ms of being asked), and the
/// 1,000,000-buffer traces with 0.3 s still end within the allowance (0.36-0.37 s). With
/// 360 ns (begun 0.12 s sooner at 2,000,000 buffers) no run of six 2,000,000-buffer traces
/// with 1 s went past the allowance in a batch where 4 of 48 did with 300 ns (up to 1.195 s;
/// the one-pass packing was not made by the time the first must stop), but in a calmer batch
/// the first sweep of `random:2000000:221:500000` was stopped on 5 runs of 10 instead of 2
/// (1.2922 x the bound instead of 1.0106), and no run went past the allowance either way.
pub const ONE_PASS_TIME_PER_BUFFER: Duration = Duration::from_nanos(300);

/// Calls its function when dropped, also where a panic unwinds past it.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Time an arena's first sweep ([`LARGE_FIRST_SWEEP`]) is taken to need per buffer alone on
/// a core: it took 435-520 ns on random lifetimes of 1,500,000-2,000,000 buffers over
/// 300,000-10,000,000 steps (290 ns on `model:2000000:1`, 1,170 ns over 1,000 steps), with a
/// fifth added. See [`first_sweep_needs_both_cores`].
pub const FIRST_SWEEP_TIME_PER_BUFFER: Duration = Duration::from_nanos(600);

/// Whether the `first` candidate of an arena of `count` buffers is a sweep out of a step
/// that would not be done by `until` (when the insurance stops it) alone on a core
/// ([`FIRST_SWEEP_TIME_PER_BUFFER`]): it then packs its two sides at once (the kit's
/// `pack_sweep_variant_on_two_threads`), and the other thread waits for it and then takes
/// the candidates after it, without the critical-step search (`beside`). At 2,000,000
/// buffers with 1 s the bound leaves the sweep about 0.96 s. On one core beside that search
/// it was done 0.78-1.08 s after the planner call on 8 generated random traces of 1,800,000-
/// 2,000,000 buffers (3 runs each), and was stopped on 1 run of 24 (the one-pass packing
/// then stands in: 1.29-1.82 x the bound on five of them, where the sweep gives 1.01-1.09);
/// on both cores it was done after 0.52-0.84 s on every run. The critical-step search and
/// the candidates after the first made nothing lower on those traces with 1 s. (On
/// 2,000,000 random lifetimes over 1,000 steps the sweep takes 2.3 s alone, and the one-pass
/// packing stands in either way.)
fn first_sweep_needs_both_cores(first: &Candidate, count: usize, until: Instant) -> bool {
    let anchored = matches!(
        first,
        Candidate::Sweep(SweepVariant::AnchoredAtPeak(..) | SweepVariant::AnchoredAtBusyStep(..))
    );
    let alone = for_buffers(FIRST_SWEEP_TIME_PER_BUFFER, count);
    anchored && until.saturating_duration_since(Instant::now()) < alone
}

/// When the one-pass packing insures an arena's first candidate (see `run_candidates`).
#[derive(Clone, Copy, Debug)]
struct Insurance {
    /// A third thread starts the one-pass packing then, where the first candidate is not
    /// done.
    from: Instant,
    /// From then the first candidate waits for the one-pass packing, and stops once it is
    /// made.
    until: Instant,
    /// Nothing begins before this (the packer's making).
    made: Instant,
}

/// Whether the other thread (the critical-step search, candidates) stops once the one-pass
/// packing of `buffers` is begun, leaving its core to the first candidate: where more than the
/// kit's [`FEW_LIVE`] are live per step on average, the one-pass packing (by size classes
/// there) is 1.5-1.8 x the bound, so the first candidate had better complete. (On
/// `random:2000000:11:4000000`, 25 live, with 1 s, the first sweep completed one run in two
/// beside the search and the one-pass packing, 1.0857 x the bound, and the one-pass
/// packing's 1.8168 stood in the other.) Where fewer are live, the one-pass packing is
/// 1.0-1.15 x, and the critical-step search may yet reach the bound (`model:1500000:3` does
/// in 0.8 s). Asked only where the one-pass packing begins, on its thread: a pass over the
/// lifetimes (5-8 ms at 2,000,000 buffers) that every large arena paid up front before.
fn one_pass_halts_the_other(buffers: &[Buffer]) -> bool {
    average_live(buffers) > FEW_LIVE
}

impl Insurance {
    /// When the one-pass packing begins where the first candidate's thread has had `share`
    /// of a core since the packer's making (0: not yet known): as long before `until` as it
    /// takes on that share ([`on_share`]: `until - from` on a calm machine, where the other
    /// thread stops once it begins, see `run_candidates`), and never before the making.
    fn begins_with_share(&self, share: f64) -> Instant {
        let one_pass = on_share(self.until.saturating_duration_since(self.from), share);
        self.until
            .checked_sub(one_pass)
            .map_or(self.made, |from| from.max(self.made))
    }

    /// Whether the one-pass packing of `count` buffers, begun now, would not be done by
    /// `until` even alone on a core ([`ONE_PASS_ALONE_PER_BUFFER`]): then nothing else is to
    /// run before or beside it.
    fn leaves_the_one_pass_no_time(&self, count: usize) -> bool {
        one_pass_begun_by(self.until, count).is_none_or(|latest| Instant::now() >= latest)
    }
}

/// The critical-step search run beside the candidates (see `run_candidates`): the arena's
/// critical steps, and its packing where it made one.
type CriticalBeside<'a> =
    dyn Fn(&HostContext, &AtomicBool) -> (CriticalSteps, Option<CriticalPacking>) + Sync + 'a;

/// The candidates that completed (index, packing), what ran beside them, and the one-pass
/// packing where it stands in for the first candidate, with the share of a core the first
/// candidate's thread had had when that packing began (0: not known).
type CandidatesRun = (
    Vec<(usize, Packing)>,
    Option<(CriticalSteps, Option<CriticalPacking>)>,
    Option<(Packing, f64)>,
);

/// One cheap packing the portfolio tries before searching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Candidate {
    Greedy(Order, Fit, &'static str),
    Sweep(SweepVariant),
    /// The one-pass packing (`pack_one_pass`), never in the list taken in turn: it stands in
    /// for a first candidate that did not complete within the time limit.
    OnePass,
}

impl Candidate {
    fn name(self) -> &'static str {
        match self {
            Candidate::Greedy(_, _, name) => name,
            Candidate::Sweep(variant) => variant.name(),
            Candidate::OnePass => "one-pass packing (the time was too short for a first packing)",
        }
    }

    /// Its packing; `None` where it does not apply (see [`pack_sweep_variant`]).
    fn pack(self, buffers: &[Buffer], stop: &dyn Fn() -> bool) -> Result<Option<Packing>, Stopped> {
        match self {
            Candidate::Greedy(order, fit, _) => {
                pack_greedy_until(buffers, order, fit, stop).map(Some)
            }
            Candidate::Sweep(variant) => pack_sweep_variant(buffers, variant, stop),
            Candidate::OnePass => pack_one_pass_until(buffers, stop).map(Some),
        }
    }

    /// The candidates for an arena of `buffers`, in the order they are tried: [`GREEDY`];
    /// from [`SWEEPS_FROM`] buffers on, first one that is O(n log n) on every trace shape and
    /// so completes in time unless the time is very short (the kit's first sweep variant, or
    /// where a buffer has a fixed offset plain best fit by start), then best fit by duration (on
    /// training traces quick and often at the bound: 28,000 buffers in 67 ms, which it can
    /// only end early where no slower candidate comes before it; from
    /// [`SIZE_BEFORE_SWEEPS_FROM`] buffers best fit by size, greedy-bestfit's own packing,
    /// instead), then the other sweeps and plain best fit by start, then the other of the
    /// two, then the rest of [`GREEDY`]. In dense arenas (at least [`BUSY_STEPS_FROM_LIVE`]
    /// live per step on average, [`BUSY_STEPS_FROM_LIVE_UNSEARCHED`] above
    /// [`EXACT_MAX_BUFFERS`] buffers) the sweeps out of other busy steps come right after the
    /// kit's sweeps, at any size.
    ///
    /// The first is the kit's first sweep variant, the start-order sweep that puts each buffer
    /// beside the neighbour ending nearest: on 1M random-lifetime buffers 1.0017 x the bound
    /// on both seeds measured in 0.63 s, where plain best fit by start gives 1.0049-1.0063 in
    /// 0.47 s (the kit's `sweep_variants` gives the figures of every variant). From
    /// [`SIZE_BEFORE_SWEEPS_FROM`] buffers [`LARGE_FIRST_SWEEP`] goes before it, and it before
    /// best fit by size.
    ///
    /// From [`SIZE_BEFORE_SWEEPS_FROM`] buffers where at most [`FEW_LIVE`] are live per step
    /// on average, best fit by size goes first, then the sweeps: a placement there compares
    /// with few buffers, so it costs about a sweep (1.1-1.6 times as long), and it is lower
    /// on every such trace measured (model-like traces of 200,000-2,000,000 buffers:
    /// 1.036-1.098 x the bound where the first sweep gave 1.070-1.316; random lifetimes
    /// with 5-10 live: 1.000-1.020 where it gave 1.033-1.088). With the default 1 s the
    /// critical-step search beside it reaches the bound up to 1,000,000 buffers as before,
    /// and at 2,000,000 (`model:2000000:1`, where by size alone gives 1.0363 x the bound and
    /// the first sweep 1.0438) since its later rounds pack only the buffers near the critical
    /// ones.
    fn for_arena(buffers: &[Buffer]) -> Vec<Candidate> {
        let greedy: Vec<Candidate> = GREEDY
            .iter()
            .map(|&(order, fit, name)| Candidate::Greedy(order, fit, name))
            .collect();
        let anchored_applies = buffers.iter().all(|buffer| buffer.fixed_offset.is_none());
        let mut sweeps: Vec<Candidate> = SweepVariant::ALL
            .into_iter()
            .filter(|variant| {
                anchored_applies || !matches!(variant, SweepVariant::AnchoredAtPeak(..))
            })
            .map(Candidate::Sweep)
            .collect();
        // A pass over the lifetimes (5-8 ms at 2,000,000 buffers): made once, only where it
        // decides something.
        let live = (anchored_applies || buffers.len() >= SIZE_BEFORE_SWEEPS_FROM)
            .then(|| average_live(buffers));
        let dense = |live: u64| live >= busy_steps_from_live(buffers.len());
        let busy_step_sweeps: Vec<Candidate> = match anchored_applies && live.is_some_and(dense) {
            true => busy_step_sweeps().map(Candidate::Sweep).collect(),
            false => Vec::new(),
        };
        if buffers.len() < SWEEPS_FROM {
            // After every greedy order (a model those reach the bound on keeps its plan):
            // random-lifetime traces of a few thousand buffers, where no greedy order comes
            // near the bound, get the sweeps' packings as search starts.
            return greedy
                .into_iter()
                .chain(sweeps)
                .chain(busy_step_sweeps)
                .collect();
        }
        let is = |order, fit| move |candidate: &Candidate| matches!(*candidate, Candidate::Greedy(o, f, _) if o == order && f == fit);
        let (by_start, by_duration, by_size) = (
            is(Order::Start, Fit::Best),
            is(Order::Duration, Fit::Best),
            is(Order::Size, Fit::Best),
        );
        let find = |wanted: &dyn Fn(&Candidate) -> bool| {
            *greedy.iter().find(|c| wanted(c)).expect("in GREEDY")
        };
        // From SIZE_BEFORE_SWEEPS_FROM buffers a sweep takes a large share of the budget
        // (0.6-0.8 s at 1,000,000), so the first is the one likeliest to be lowest there:
        // the sweeps out of the busiest step with each buffer beside the neighbour ending
        // nearest, its buffers by earliest start (see `LARGE_FIRST_SWEEP`).
        if buffers.len() >= SIZE_BEFORE_SWEEPS_FROM {
            if let Some(at) = sweeps
                .iter()
                .position(|&c| c == Candidate::Sweep(LARGE_FIRST_SWEEP))
            {
                let large_first = sweeps.remove(at);
                sweeps.insert(0, large_first);
            }
        }
        let few_live =
            buffers.len() >= SIZE_BEFORE_SWEEPS_FROM && live.is_some_and(|live| live <= FEW_LIVE);
        let first = if few_live {
            find(&by_size)
        } else if anchored_applies {
            sweeps.remove(0)
        } else {
            find(&by_start)
        };
        // Next, on the other thread, the greedy order likeliest to win at this size; the
        // other one after the sweeps (on random traces both run until the deadline, and a
        // thread they hold runs no sweep).
        let (second, later) = match buffers.len() >= SIZE_BEFORE_SWEEPS_FROM {
            true => (find(&by_size), find(&by_duration)),
            false => (find(&by_duration), find(&by_size)),
        };
        let mut list = vec![first];
        // Where the large arenas' first sweep went first, the kit's first variant comes
        // next: the critical-step search holds the other thread there, and the sweeps are
        // what completes within the second (on `random:1000000:2:1000000` this one is the
        // lower, 1.0475 x the bound, and best fit by size does not complete on random
        // traces).
        if buffers.len() >= SIZE_BEFORE_SWEEPS_FROM && anchored_applies && !few_live {
            list.push(sweeps.remove(0));
        }
        if !few_live {
            list.push(second);
        }
        list.extend(sweeps);
        list.extend(busy_step_sweeps);
        if anchored_applies || few_live {
            list.push(find(&by_start));
        }
        list.push(later);
        list.extend(
            greedy
                .iter()
                .filter(|c| !by_start(c) && !by_duration(c) && !by_size(c)),
        );
        list
    }
}

/// The portfolio's two searching threads: the `exact` search on the host's thread, and the
/// other core's climbing or second search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Search = 0,
    Other = 1,
}

/// The race of the two threads to the lower bound, judged by work, not by the clock.
///
/// A thread's work is how many times it has asked whether to stop (its searches ask every
/// so many nodes, the climbing at every packing): on every run the same for the same
/// progress, where which thread gets somewhere first in time depends on the machine. A
/// thread that reaches the bound publishes its work; the other stops as soon as its own work
/// passes that (reaching the bound later in work cannot win), and the thread with less work
/// wins, the search on a tie. So a plan at the bound is the same on every run, and comes
/// once the winner and as much of the other's work are done, not at the deadline (MiniMalloc's
/// D: the second search reaches its bound in about 0.3 s, and the portfolio used to wait for
/// the search until the second was over). The search returning otherwise (proven above the
/// bound, or stopped) stops the other thread, as does the host asking to stop.
///
/// The critical-step search on the other thread asks once every 1,024 nodes of its exact
/// searches, as the search does, and not in its greedy packings (which stop by the clock),
/// so that the two sides' work compares like for like: asked at every greedy poll it
/// reached the bound of a 2,000-buffer training trace with as much work as the search did
/// in four times the time, and held the portfolio that long (0.3 s instead of 0.08 s).
struct Race {
    /// The work at which each side reached the bound; `u64::MAX` while it has not.
    at_bound: [AtomicU64; 2],
    /// Set when the search returned without reaching the bound, or the host asked to stop:
    /// the other thread stops.
    stop_other: AtomicBool,
}

impl Race {
    fn new() -> Race {
        Race {
            at_bound: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
            stop_other: AtomicBool::new(false),
        }
    }

    /// The side that reached the bound with less work (the search on a tie), if any did.
    fn first_at_bound(&self) -> Option<Side> {
        let search = self.at_bound[Side::Search as usize].load(Ordering::Acquire);
        let other = self.at_bound[Side::Other as usize].load(Ordering::Acquire);
        match (search, other) {
            (u64::MAX, u64::MAX) => None,
            (search, other) if search <= other => Some(Side::Search),
            _ => Some(Side::Other),
        }
    }
}

/// One thread's part in the [`Race`], and the host context its work runs with: it counts the
/// work, asks to stop once the race is lost (or the search is done, or, on the search's
/// thread, the host asks), and on the search's thread passes log lines and the deadline on
/// to the host's context (which is asked on the thread that owns it only); the other
/// thread's log lines are dropped and it has no deadline of its own.
struct Lane<'a> {
    race: &'a Race,
    side: Side,
    host: Option<&'a HostContext>,
    work: Cell<u64>,
}

impl<'a> Lane<'a> {
    fn new(race: &'a Race, side: Side, host: Option<&'a HostContext>) -> Lane<'a> {
        Lane {
            race,
            side,
            host,
            work: Cell::new(0),
        }
    }

    fn should_stop(&self) -> bool {
        let work = self.work.get() + 1;
        self.work.set(work);
        let rival = match self.side {
            Side::Search => Side::Other,
            Side::Other => Side::Search,
        };
        let rival_at = self.race.at_bound[rival as usize].load(Ordering::Acquire);
        // This side has not reached the bound within `work - 1`: the rival, there with
        // less work (or as much, on a tie the search wins), has won.
        let lost = rival_at < work || (rival_at == work && self.side == Side::Other);
        lost || match self.host {
            Some(host) => host.should_stop(),
            None => self.race.stop_other.load(Ordering::Relaxed),
        }
    }

    /// Publishes this side's work when it returned at the bound; the search returning
    /// otherwise stops the other side.
    fn finished(&self, at_bound: bool) {
        if at_bound {
            self.race.at_bound[self.side as usize].store(self.work.get(), Ordering::Release);
        } else if self.side == Side::Search {
            self.race.stop_other.store(true, Ordering::Relaxed);
        }
    }

    fn context(&self) -> HostContext {
        extern "C" fn log(state: *const c_void, level: LogLevel, message: RStr<'_>) {
            // SAFETY: `state` is the `Lane` the context was made from (see below).
            let lane = unsafe { &*state.cast::<Lane<'_>>() };
            if let Some(host) = lane.host {
                host.log(level, message.as_str());
            }
        }
        extern "C" fn should_stop(state: *const c_void) -> bool {
            // SAFETY: as in `log`.
            let lane = unsafe { &*state.cast::<Lane<'_>>() };
            lane.should_stop()
        }
        extern "C" fn remaining_ms(state: *const c_void) -> u64 {
            // SAFETY: as in `log`.
            let lane = unsafe { &*state.cast::<Lane<'_>>() };
            lane.host
                .and_then(HostContext::remaining)
                .map_or(u64::MAX, |left| {
                    u64::try_from(left.as_millis()).unwrap_or(u64::MAX - 1)
                })
        }
        // SAFETY: the callbacks only read the lane (its work counter is a `Cell`, and the
        // lane is used on the thread that made it), and the context never outlives the lane:
        // both are made and used within one call of `pack_within`, on one thread.
        unsafe {
            HostContext::from_host_callbacks(
                (self as *const Lane<'_>).cast::<c_void>(),
                log,
                should_stop,
                remaining_ms,
            )
        }
    }
}

/// Hill climbing over the placement order of greedy packing `order`/`fit` (see the module
/// documentation), at most `steps` moves: the best packing it reached, `None` when `stop`
/// ended it before the first. Deterministic: a seeded generator picks the moves.
pub fn climb(
    buffers: &[Buffer],
    order: Order,
    fit: Fit,
    bound: u64,
    steps: usize,
    stop: &dyn Fn() -> bool,
) -> Option<Packing> {
    let mut ranks = greedy_ranks(buffers, order, fit);
    let mut by_rank = vec![0u32; buffers.len()];
    for (index, &rank) in ranks.iter().enumerate() {
        by_rank[rank as usize] = index as u32;
    }
    let mut current = pack_greedy_ranked(buffers, &ranks, fit, stop).ok()?;
    let mut random = XorShift64Star::new(0x5eed);
    let mut at_top = Vec::new();
    for _ in 0..steps {
        if current.height <= bound || stop() {
            break;
        }
        // A buffer ending at the top, placed after at least one other movable buffer.
        at_top.clear();
        at_top.extend((0..buffers.len()).filter(|&index| {
            let buffer = &buffers[index];
            buffer.fixed_offset.is_none()
                && ranks[index] > 0
                && current.offsets[index] + buffer.size == current.height
        }));
        let Some(&moved) = at_top.get(random.below(at_top.len() as u64) as usize) else {
            break;
        };
        let other = by_rank[random.below(u64::from(ranks[moved])) as usize] as usize;
        let swap = |ranks: &mut [u32], by_rank: &mut [u32]| {
            ranks.swap(moved, other);
            by_rank[ranks[moved] as usize] = moved as u32;
            by_rank[ranks[other] as usize] = other as u32;
        };
        swap(&mut ranks, &mut by_rank);
        match pack_greedy_ranked(buffers, &ranks, fit, stop) {
            Ok(candidate) if candidate.height <= current.height => current = candidate,
            Ok(_) => swap(&mut ranks, &mut by_rank),
            Err(Stopped) => break,
        }
    }
    Some(current)
}

/// The critical-step search's name in a note.
fn critical_name(critical: &CriticalPacking) -> String {
    let rounds = match critical.rounds {
        1 => "1 round".to_string(),
        rounds => format!("{rounds} rounds"),
    };
    format!(
        "critical-step search (the exact search on the {} buffers live where the live bytes \
         come near the bound, the others packed greedily around them; {rounds})",
        critical.critical
    )
}

/// The note of the kept packing: which method won, and what is proven about it.
fn verdict(
    winner: &str,
    height: u64,
    bound: u64,
    winner_note: &str,
    search_note: Option<String>,
) -> String {
    if height <= bound {
        return format!("{winner} won, proven optimal (equal to the lower bound {bound})");
    }
    let gap = (height - bound) as f64 / bound as f64 * 100.0;
    let search = if winner == "exact search" {
        format!("; {winner_note}")
    } else {
        match search_note {
            Some(note) => format!("; the exact search found nothing lower ({note})"),
            None => "; the exact search did not run (arena too large or out of time)".to_string(),
        }
    };
    // Gaps under 0.1 % show three decimals: "0.0% above" read as optimal but unproven.
    let decimals = if gap < 0.1 { 3 } else { 1 };
    format!("{winner} won, {gap:.decimals$}% above the lower bound {bound}{search}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_planner_kit::bump::pack_bump;
    use memplan_planner_kit::pack_greedy;
    use memplan_planner_kit::testing::{
        assert_valid_packing, buffer, generated_instance, read_minimalloc, rectangle_cut,
        tflm_greedy_medium, with_deadline,
    };

    fn packer(seconds: f64) -> PortfolioPacker {
        PortfolioPacker::new(Duration::from_secs_f64(seconds))
    }

    /// MiniMalloc's A-K and generated instances of each shape the portfolio meets: cuts
    /// (above and below [`CLIMB_FROM`], so with and without climbing), model-like and
    /// compiler-like traces.
    fn member_instances() -> Vec<(String, Vec<Buffer>)> {
        let folder =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/minimalloc");
        let mut instances: Vec<(String, Vec<Buffer>)> = ('A'..='K')
            .map(|letter| {
                let path = folder.join(format!("{letter}.1048576.csv"));
                let buffers = read_minimalloc(&path).expect("MiniMalloc's A-K are in tests/data");
                (letter.to_string(), buffers)
            })
            .collect();
        for spec in [
            "cut:200:1",
            "cut:1200:2",
            "model:300",
            // Climbing this one for the whole budget stays above the bound, which the
            // search reaches in milliseconds (the portfolio used to climb first).
            "model:1042:2",
            "compiler:600",
            "compiler:2000",
        ] {
            let buffers = generated_instance(spec)
                .expect("a generator spec")
                .expect("a valid spec");
            instances.push((spec.to_string(), buffers));
        }
        instances
    }

    #[test]
    fn the_portfolio_is_never_worse_than_any_member_alone() {
        // Short enough that a member run first would leave the others nothing (climbing
        // model:1042:2 takes longer, while the search proves its bound in a tenth of it).
        const BUDGET: Duration = Duration::from_millis(300);
        let context = HostContext::detached();
        for (name, buffers) in member_instances() {
            let portfolio = PortfolioPacker::new(BUDGET)
                .pack(&buffers, &context)
                .expect("packs");
            assert_valid_packing(&buffers, &portfolio);
            let height = portfolio.height;
            // Greedy candidates are deterministic: compared exactly.
            for (order, fit, candidate) in GREEDY {
                let alone = pack_greedy(&buffers, order, fit).height;
                assert!(
                    height <= alone,
                    "{name}: {height} above {candidate}'s {alone}"
                );
            }
            // The search depends on the clock only through where it stops: its searches
            // take turns by node counts, so it only gets lower with time. The portfolio
            // runs it from the same start on its own core for at least half the budget (the
            // critical-step search may take the other half first), so it is no higher than
            // the search alone with a tenth of it (a margin for a busy machine, where the
            // portfolio's two threads and the tests beside it share two cores).
            let exact = ExactPacker::new(BUDGET / 10)
                .pack(&buffers, &context)
                .expect("packs");
            assert!(
                height <= exact.height,
                "{name}: {height} above exact's {} ({})",
                exact.height,
                exact.note
            );
        }
    }

    #[test]
    fn the_portfolio_is_never_worse_than_a_sweep_alone() {
        // The sweeps are members at every size (below SWEEPS_FROM after the greedy orders:
        // random:3000 was 1.058 x its bound without them, 1.040 with them); each is
        // deterministic and takes milliseconds here, as do the greedy candidates, so all of
        // them complete well within the budget even on a busy machine. So are the sweeps out
        // of other busy steps where many buffers are live per step (random:10000:3, about
        // 490; random:20000:3, about 980, came 1.0185 x its bound without them and 1.0017
        // with them in 1 s).
        let context = HostContext::detached();
        for spec in [
            "random:3000:1",
            "random:10000:3",
            "random:20000:3",
            "compiler:10000:2",
            "model:10000:1",
        ] {
            let buffers = generated_instance(spec)
                .expect("a generator spec")
                .expect("a valid spec");
            let portfolio = packer(2.0).pack(&buffers, &context).expect("packs");
            assert_valid_packing(&buffers, &portfolio);
            let by_start = pack_greedy(&buffers, Order::Start, Fit::Best).height;
            assert!(
                portfolio.height <= by_start,
                "{spec}: above best fit by start"
            );
            let dense = average_live(&buffers) >= busy_steps_from_live(buffers.len());
            assert!(dense || !spec.starts_with("random:20000"), "{spec}");
            let busy_steps = busy_step_sweeps().filter(|_| dense);
            for variant in SweepVariant::ALL.into_iter().chain(busy_steps) {
                let alone = pack_sweep_variant(&buffers, variant, &|| false)
                    .expect("not stopped")
                    .expect("no fixed offsets, and busy steps enough")
                    .height;
                assert!(
                    portfolio.height <= alone,
                    "{spec}: {} above {variant:?}'s {alone} ({})",
                    portfolio.height,
                    portfolio.note
                );
            }
        }
    }

    #[test]
    fn the_portfolio_is_never_worse_than_hill_climbing_alone() {
        let context = HostContext::detached();
        for (name, buffers) in member_instances() {
            if buffers.len() < CLIMB_FROM {
                continue;
            }
            // Hill climbing is deterministic (a fixed number of moves from a seeded
            // generator), run to its end here; the portfolio gets time enough to end it too
            // beside the search, which stops it early only by reaching the bound.
            let started = Instant::now();
            let (order, fit, _) = GREEDY
                .into_iter()
                .min_by_key(|&(order, fit, _)| pack_greedy(&buffers, order, fit).height)
                .expect("candidates");
            let steps = (CLIMB_WORK / buffers.len()).min(CLIMB_MAX_STEPS);
            let bound = arena_lower_bound(&buffers);
            let climbed = climb(&buffers, order, fit, bound, steps, &|| false)
                .expect("not stopped")
                .height;
            let budget = (started.elapsed() * 5).max(Duration::from_secs(1));
            let portfolio = PortfolioPacker::new(budget)
                .pack(&buffers, &context)
                .expect("packs");
            let height = portfolio.height;
            assert!(
                height <= climbed,
                "{name}: {height} above climbing's {climbed}"
            );
        }
    }

    #[test]
    fn a_million_buffer_model_is_planned_no_higher_than_greedy_by_size() {
        // greedy-bestfit's own packing runs second at any size, beside best fit by start: on
        // a model-like trace it is the lower one (by duration the plan was 1.8 % higher at
        // 1,000,000 buffers).
        let buffers = memplan_planner_kit::testing::model_like_trace(1_000_000, 1);
        let by_size = pack_greedy(&buffers, Order::Size, Fit::Best).height;
        let by_duration = pack_greedy(&buffers, Order::Duration, Fit::Best).height;
        assert!(by_size < by_duration, "{by_size} {by_duration}");
        let packing = packer(60.0)
            .pack(&buffers, &HostContext::detached())
            .unwrap();
        assert!(
            packing.height <= by_size,
            "{} > {by_size}: {}",
            packing.height,
            packing.note
        );
    }

    #[test]
    fn arenas_take_the_sweeps_after_the_greedy_orders_and_large_ones_a_sweep_first() {
        let greedy: Vec<Candidate> = GREEDY
            .iter()
            .map(|&(order, fit, name)| Candidate::Greedy(order, fit, name))
            .collect();
        // About 40 buffers live per step: more than FEW_LIVE, fewer than
        // BUSY_STEPS_FROM_LIVE.
        let trace = |count: u32| -> Vec<Buffer> {
            (0..count)
                .map(|i| buffer(16, i % (count / 10), i % (count / 10) + 3))
                .collect()
        };
        // Below SWEEPS_FROM: every greedy order first, in GREEDY's order, then the sweeps.
        let small: Vec<Candidate> = greedy
            .iter()
            .copied()
            .chain(SweepVariant::ALL.map(Candidate::Sweep))
            .collect();
        assert_eq!(Candidate::for_arena(&trace(SWEEPS_FROM as u32 - 1)), small);
        let mut large = trace(SWEEPS_FROM as u32);
        let candidates = Candidate::for_arena(&large);
        assert_eq!(candidates[0], Candidate::Sweep(SweepVariant::ALL[0]));
        assert!(matches!(
            candidates[1],
            Candidate::Greedy(Order::Duration, Fit::Best, _)
        ));
        // Below SIZE_BEFORE_SWEEPS_FROM best fit by size comes after the sweeps and by start;
        // from it, by size goes second and by duration after them.
        let sweeps = SweepVariant::ALL.len();
        assert!(matches!(
            candidates[1 + sweeps + 1],
            Candidate::Greedy(Order::Size, Fit::Best, _)
        ));
        let mut huge_trace = trace(SIZE_BEFORE_SWEEPS_FROM as u32);
        let huge = Candidate::for_arena(&huge_trace);
        // There the sweeps out of the busiest step by earliest start go first, then the
        // kit's first variant, then best fit by size.
        assert_eq!(huge[0], Candidate::Sweep(LARGE_FIRST_SWEEP));
        assert_eq!(huge[1], Candidate::Sweep(SweepVariant::ALL[0]));
        assert!(matches!(
            huge[2],
            Candidate::Greedy(Order::Size, Fit::Best, _)
        ));
        assert!(matches!(
            huge[1 + sweeps + 1],
            Candidate::Greedy(Order::Duration, Fit::Best, _)
        ));
        // Where few buffers are live per step, best fit by size goes first there, then the
        // sweeps (the large arenas' first sweep first), then best fit by start and by
        // duration.
        let few_live: Vec<Buffer> = (0..SIZE_BEFORE_SWEEPS_FROM as u32)
            .map(|i| buffer(16, i, i + 2))
            .collect();
        let few = Candidate::for_arena(&few_live);
        assert!(matches!(
            few[0],
            Candidate::Greedy(Order::Size, Fit::Best, _)
        ));
        assert_eq!(few[1], Candidate::Sweep(LARGE_FIRST_SWEEP));
        assert!(matches!(
            few[1 + sweeps],
            Candidate::Greedy(Order::Start, Fit::Best, _)
        ));
        assert!(matches!(
            few[2 + sweeps],
            Candidate::Greedy(Order::Duration, Fit::Best, _)
        ));
        // Every greedy candidate and every sweep is there, once.
        for list in [&candidates, &huge, &few] {
            assert_eq!(list.len(), GREEDY.len() + SweepVariant::ALL.len());
            for candidate in greedy
                .iter()
                .copied()
                .chain(SweepVariant::ALL.map(Candidate::Sweep))
            {
                assert_eq!(list.iter().filter(|&&c| c == candidate).count(), 1);
            }
        }
        // With a fixed offset the large arena's first is best fit by start, as below.
        huge_trace[5].fixed_offset = memplan_planner_kit::FixedOffset::at(0);
        assert!(matches!(
            Candidate::for_arena(&huge_trace)[0],
            Candidate::Greedy(Order::Start, Fit::Best, _)
        ));
        // With a fixed offset the anchored sweeps do not apply: best fit by start goes first.
        large[5].fixed_offset = memplan_planner_kit::FixedOffset::at(0);
        let candidates = Candidate::for_arena(&large);
        assert!(matches!(
            candidates[0],
            Candidate::Greedy(Order::Start, Fit::Best, _)
        ));
        assert!(candidates
            .iter()
            .all(|c| !matches!(c, Candidate::Sweep(SweepVariant::AnchoredAtPeak(..)))));
        assert!(candidates.contains(&Candidate::Sweep(SweepVariant::Mirrored)));
    }

    #[test]
    fn dense_arenas_take_sweeps_out_of_other_busy_steps_after_the_kits() {
        // 4-step lifetimes over `steps` steps: 4 * count / steps buffers live per step.
        let trace = |count: u32, steps: u32| -> Vec<Buffer> {
            (0..count)
                .map(|i| buffer(16, i % steps, i % steps + 3))
                .collect()
        };
        let busy = |rank, stacking| {
            Candidate::Sweep(SweepVariant::AnchoredAtBusyStep(
                rank,
                stacking,
                GapChoice::NearestEnd,
            ))
        };
        let busy_count = |list: &[Candidate]| {
            list.iter()
                .filter(|c| matches!(c, Candidate::Sweep(SweepVariant::AnchoredAtBusyStep(..))))
                .count()
        };
        let (earliest, latest) = (PeakStacking::EarliestStart, PeakStacking::LatestEnd);
        let at = |list: &[Candidate], wanted: Candidate| list.iter().position(|&c| c == wanted);
        let last_kit_sweep = |list: &[Candidate]| {
            SweepVariant::ALL
                .iter()
                .filter_map(|&variant| at(list, Candidate::Sweep(variant)))
                .max()
                .expect("the kit's sweeps are there")
        };
        for count in [
            SWEEPS_FROM as u32 - 1,
            SWEEPS_FROM as u32,
            EXACT_MAX_BUFFERS as u32,
            EXACT_MAX_BUFFERS as u32 + 1,
            SIZE_BEFORE_SWEEPS_FROM as u32,
        ] {
            let from = match count as usize > EXACT_MAX_BUFFERS {
                true => BUSY_STEPS_FROM_LIVE_UNSEARCHED,
                false => BUSY_STEPS_FROM_LIVE,
            };
            // About twice `from` live per step: right after the kit's sweeps, in rank order,
            // each busy step by earliest start and then by latest end.
            let steps = 2 * count / from as u32;
            let mut dense = trace(count, steps);
            assert!(average_live(&dense) >= from, "{count}");
            let list = Candidate::for_arena(&dense);
            let after = last_kit_sweep(&list) + 1;
            let sweeps = 2 * usize::from(BUSY_STEP_SWEEPS);
            assert_eq!(busy_count(&list), sweeps, "{count}");
            assert_eq!(list[after], busy(1, earliest), "{count}");
            assert_eq!(list[after + 1], busy(1, latest), "{count}");
            assert_eq!(list[after + 2], busy(2, earliest), "{count}");
            assert_eq!(list[after + sweeps - 1], busy(BUSY_STEP_SWEEPS, latest));
            assert_eq!(list.len(), GREEDY.len() + SweepVariant::ALL.len() + sweeps);
            // Fewer live per step, or a fixed offset (the anchored sweeps do not apply):
            // none.
            let sparser = trace(count, steps * 4);
            assert!(average_live(&sparser) < from, "{count}");
            for list in [Candidate::for_arena(&sparser), {
                dense[3].fixed_offset = memplan_planner_kit::FixedOffset::at(0);
                Candidate::for_arena(&dense)
            }] {
                assert_eq!(busy_count(&list), 0, "{count}");
            }
        }
    }

    #[test]
    fn a_first_sweep_takes_both_cores_only_where_one_would_not_do() {
        let in_seconds = |seconds: f64| Instant::now() + Duration::from_secs_f64(seconds);
        let sweep = Candidate::Sweep(LARGE_FIRST_SWEEP);
        // 2,000,000 buffers: 1.2 s alone on a core.
        assert!(first_sweep_needs_both_cores(
            &sweep,
            2_000_000,
            in_seconds(0.96)
        ));
        assert!(!first_sweep_needs_both_cores(
            &sweep,
            2_000_000,
            in_seconds(1.5)
        ));
        assert!(!first_sweep_needs_both_cores(
            &sweep,
            1_000_000,
            in_seconds(0.96)
        ));
        // Only a sweep out of a step has two sides to pack at once.
        let by_size = Candidate::Greedy(Order::Size, Fit::Best, "greedy best fit by size");
        assert!(!first_sweep_needs_both_cores(
            &by_size,
            2_000_000,
            in_seconds(0.5)
        ));
        let plain = Candidate::Sweep(SweepVariant::NearestEnd);
        assert!(!first_sweep_needs_both_cores(
            &plain,
            2_000_000,
            in_seconds(0.5)
        ));
    }

    #[test]
    fn the_deadline_holds_after_the_first_candidate() {
        // A cut (climbing and the search both run past any budget), a compiler-like trace
        // and random lifetimes (each greedy pass but best fit by start takes a while: on
        // 60,000 random buffers by duration, the first candidate before the sweeps, took
        // seconds): the first candidate completes, everything after it stops at the
        // deadline. A training trace of even sizes with 1 s: the critical-step search's
        // exact search took 2.2 ms a node there, polled the deadline 1,024 nodes apart and
        // ended 1.6 s late.
        let quarter = Duration::from_millis(250);
        for (spec, limit) in [
            ("cut:3000", quarter),
            ("compiler:20000", quarter),
            ("random:60000", quarter),
            ("even-compiler:10000", Duration::from_secs(1)),
        ] {
            let buffers = generated_instance(spec)
                .expect("a generator spec")
                .expect("a valid spec");
            let first_candidate = first_candidate_time(&buffers);
            let started = Instant::now();
            let packing = PortfolioPacker::new(limit)
                .pack(&buffers, &HostContext::detached())
                .expect("packs");
            let elapsed = started.elapsed();
            // Generous: the limit, its 10 % and 50 ms, one first candidate and a busy
            // machine.
            let allowed = limit.mul_f64(1.1) + Duration::from_millis(50) + first_candidate * 2;
            assert!(
                elapsed <= allowed + Duration::from_millis(500),
                "{spec}: {elapsed:?} with a limit of {limit:?} ({})",
                packing.note
            );
        }
    }

    /// How long the arena's first candidate takes alone.
    fn first_candidate_time(buffers: &[Buffer]) -> Duration {
        let started = Instant::now();
        Candidate::for_arena(buffers)[0]
            .pack(buffers, &|| false)
            .expect("not stopped")
            .expect("the first candidate applies");
        started.elapsed()
    }

    /// Asserts that `packing` is valid and the one-pass packing won.
    fn assert_one_pass_plan(buffers: &[Buffer], packing: &Packing) {
        assert_valid_packing(buffers, packing);
        assert!(
            packing.note.starts_with("one-pass packing"),
            "{}",
            packing.note
        );
    }

    #[test]
    fn a_limit_shorter_than_a_sweep_gets_the_one_pass_packing_in_time() {
        // 500,000 random buffers over as many steps (about 50 live per step, so that the
        // check of the packing is quick): the first candidate, a sweep, takes about 0.25 s
        // alone, and the portfolio used to wait for it whatever the limit. With 0.05 s the
        // one-pass packing stands in for it, within the limit's allowance.
        let buffers = generated_instance("random:500000:1:500000")
            .unwrap()
            .unwrap();
        let first_candidate = first_candidate_time(&buffers);
        let limit = Duration::from_millis(50);
        let started = Instant::now();
        let packing = PortfolioPacker::new(limit)
            .pack(&buffers, &HostContext::detached())
            .expect("packs");
        let elapsed = started.elapsed();
        assert_one_pass_plan(&buffers, &packing);
        // The allowance (10 % and 50 ms), and slack for a busy machine; the first candidate
        // alone took longer than that on an idle one.
        let allowed = limit.mul_f64(1.1) + Duration::from_millis(50);
        assert!(
            elapsed < first_candidate && elapsed < allowed + Duration::from_millis(250),
            "{elapsed:?}: the first candidate alone took {first_candidate:?}"
        );
    }

    /// An insurance from `from` to `until`, made at the sooner of `from` and now.
    fn insurance_of(from: Instant, until: Instant) -> Insurance {
        Insurance {
            from,
            until,
            made: from.min(Instant::now()),
        }
    }

    #[test]
    fn the_one_pass_warning_says_where_other_work_shared_the_cores() {
        let packing = Packing {
            offsets: vec![0],
            height: 1371,
            note: String::new(),
        };
        let first = Candidate::OnePass;
        let warning = |share: f64| one_pass_stands_in(2_000_000, first, &packing, 1000, share);
        let loaded = warning(0.48);
        assert!(
            loaded.contains(
                "(1.371 x the lower bound 1000) stands in for it; other work shared \
                 the cores (this planner's thread had 48 % of one): allow more time"
            ),
            "{loaded}"
        );
        for calm in [0.0, 0.8, 1.0] {
            let warning = warning(calm);
            assert!(!warning.contains("other work"), "{calm}: {warning}");
            assert!(
                warning.contains("stands in for it: allow more time"),
                "{warning}"
            );
        }
    }

    #[test]
    fn the_insurance_begins_sooner_where_the_first_candidate_has_less_than_a_core() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let insurance = insurance_of(now + ms(600), now + ms(1000));
        // Unknown, or a calm machine's share: `from` as reckoned for a core of its own.
        for share in [0.0, 0.95, 1.0] {
            assert_eq!(insurance.begins_with_share(share), now + ms(600), "{share}");
        }
        // The 400 ms the packing takes on a core grow by the square of the share.
        let on_share_of = |share: f64| now + ms(1000) - ms(400).div_f64(share * share);
        assert_eq!(insurance.begins_with_share(0.79), on_share_of(0.79));
        assert_eq!(insurance.begins_with_share(0.7), on_share_of(0.7));
        // Half a core: 1.6 s, more than is left, so at once (never before the packer's
        // making).
        assert_eq!(insurance.begins_with_share(0.5), insurance.made);
        assert_eq!(insurance.begins_with_share(0.01), insurance.made);
    }

    #[test]
    fn the_one_pass_packing_stands_in_only_for_a_first_candidate_that_did_not_complete() {
        // The insurance starts at once but the first candidate has 30 s to complete: its
        // one-pass packing is made (model-like traces take a few milliseconds), then dropped,
        // so that the plan does not depend on how long the first candidate took.
        let buffers = generated_instance("model:50000").unwrap().unwrap();
        let bound = arena_lower_bound(&buffers);
        let candidates = Candidate::for_arena(&buffers);
        let now = Instant::now();
        let insurance = insurance_of(now, now + Duration::from_secs(30));
        let (done, _, insured) = packer(30.0).run_candidates(
            &candidates,
            &buffers,
            bound,
            now + Duration::from_secs(30),
            None,
            Some(insurance),
            &HostContext::detached(),
        );
        assert_eq!(done.first().map(|(index, _)| *index), Some(0));
        assert!(insured.is_none());
        // Where the insurance's packing is made and its time has come, the first candidate
        // stops and the one-pass packing comes back in its place.
        let insurance = insurance_of(now, now);
        let buffers = generated_instance("random:200000:1:200000")
            .unwrap()
            .unwrap();
        let candidates = Candidate::for_arena(&buffers);
        let (done, _, insured) = packer(30.0).run_candidates(
            &candidates,
            &buffers,
            arena_lower_bound(&buffers),
            now + Duration::from_secs(30),
            None,
            Some(insurance),
            &HostContext::detached(),
        );
        assert!(done.iter().all(|(index, _)| *index != 0));
        let (insured, _) = insured.expect("the one-pass packing stands in");
        assert_valid_packing(&buffers, &insured);
    }

    #[test]
    fn the_one_pass_packing_is_made_at_once_only_where_it_alone_has_no_more_time() {
        let now = Instant::now();
        let until = |ms: u64| insurance_of(now, now + Duration::from_millis(ms));
        // 200 ns per buffer: 1,000,000 buffers need 0.2 s.
        assert!(until(150).leaves_the_one_pass_no_time(1_000_000));
        assert!(!until(2_000).leaves_the_one_pass_no_time(1_000_000));
        assert!(!until(150).leaves_the_one_pass_no_time(100_000));
        // A limit too short for the one-pass packing alone: it comes back as the plan, named
        // in the note, as where it stands in for a first candidate that did not complete.
        let buffers = generated_instance("random:200000:1:200000")
            .unwrap()
            .unwrap();
        let packing = PortfolioPacker::new(Duration::from_millis(1))
            .pack(&buffers, &HostContext::detached())
            .expect("packs");
        assert_one_pass_plan(&buffers, &packing);
        assert_eq!(packing.offsets, pack_one_pass(&buffers).offsets);
    }

    #[test]
    fn a_limit_too_short_for_the_one_pass_packing_gets_the_no_reuse_packing() {
        // 400,000 buffers with 1 ms: the one-pass packing may take 60 ms, past the 50.1 ms
        // of allowance. The no-reuse packing comes back, with the note saying why.
        let buffers = generated_instance("random:400000:1:400000")
            .unwrap()
            .unwrap();
        let packing = PortfolioPacker::new(Duration::from_millis(1))
            .pack(&buffers, &HostContext::detached())
            .expect("packs");
        assert_valid_packing(&buffers, &packing);
        assert_eq!(packing.offsets, pack_bump(&buffers).offsets);
        assert!(
            packing.note.starts_with("no-reuse packing")
                && packing.note.contains("option time_limit_s"),
            "{}",
            packing.note
        );
    }

    #[test]
    fn the_insurance_stops_the_other_thread_where_many_are_live() {
        // About 50 live per step: the one-pass packing would be far above the bound, so once
        // it is begun (10 ms after the call, before the first candidate, a sweep of 200,000
        // buffers, is done) the other thread stops: here a stand-in for the critical-step
        // search that waits for its halt, else for 20 s.
        let buffers = generated_instance("random:200000:1:200000")
            .unwrap()
            .unwrap();
        assert!(average_live(&buffers) > FEW_LIVE);
        let made = packer(30.0);
        assert!(one_pass_halts_the_other(&buffers));
        // A first candidate that packs on one core: the arena's own, a sweep out of a step,
        // would take both here (`first_sweep_needs_both_cores`), which leaves no other thread
        // running beside it (below).
        let mut candidates = Candidate::for_arena(&buffers);
        assert!(matches!(candidates[0], Candidate::Sweep(LARGE_FIRST_SWEEP)));
        candidates[0] = Candidate::Sweep(SweepVariant::NearestEnd);
        let bound = arena_lower_bound(&buffers);
        // The candidates with `beside`, the insurance beginning 10 ms after the call and
        // stopping the first candidate once its packing is made. Its times are made last, so
        // that the call comes before `from` (else the other thread would not run at all: see
        // `short`).
        let run = |candidates: &[Candidate], beside: &CriticalBeside<'_>| {
            let now = Instant::now();
            let insurance = insurance_of(
                now + Duration::from_millis(10),
                now + Duration::from_millis(10),
            );
            made.run_candidates(
                candidates,
                &buffers,
                bound,
                now + Duration::from_secs(30),
                Some(beside),
                Some(insurance),
                &HostContext::detached(),
            )
        };
        // A busy machine may wake the insurance only after the first candidate is done, or
        // start the call after `from`: the case is then not met, and tried again.
        let mut met = 0;
        for _ in 0..5 {
            let started = Instant::now();
            let waits_for_its_halt = |_: &HostContext, halt: &AtomicBool| {
                while !halt.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(20) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                (CriticalSteps::new(&buffers, 0), None)
            };
            let (_, beside, insured) = run(&candidates, &waits_for_its_halt);
            let Some((insured, _)) = insured.filter(|_| beside.is_some()) else {
                continue;
            };
            met += 1;
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{:?}",
                started.elapsed()
            );
            assert_valid_packing(&buffers, &insured);
        }
        assert!(met > 0, "never begun beside the other thread");
        // The arena's own first candidate takes both cores: nothing is begun beside it, and
        // the critical-step search not after it either.
        let begun = AtomicBool::new(false);
        let marks_it_begun = |_: &HostContext, _: &AtomicBool| {
            begun.store(true, Ordering::Relaxed);
            (CriticalSteps::new(&buffers, 0), None)
        };
        let (done, beside, insured) = run(&Candidate::for_arena(&buffers), &marks_it_begun);
        assert!(beside.is_none() && !begun.load(Ordering::Relaxed));
        let first_completed = done.first().is_some_and(|&(index, _)| index == 0);
        assert!(first_completed || insured.is_some());
        // Few live per step: the insurance leaves the other thread be.
        let model_like = generated_instance("model:50000").unwrap().unwrap();
        assert!(!one_pass_halts_the_other(&model_like));
    }

    #[test]
    fn a_large_arena_stopped_by_the_host_at_once_still_gets_a_plan() {
        // The host's deadline has passed before the portfolio starts: the first candidate
        // stops at its first poll, and the one-pass packing is the plan, where the portfolio
        // used to fail (`Cancelled`) without one.
        let buffers = generated_instance("random:100000:1:100000")
            .unwrap()
            .unwrap();
        let now = Instant::now();
        let asked_to_stop = with_deadline(&now);
        let packing = packer(10.0).pack(&buffers, &asked_to_stop).expect("packs");
        assert_one_pass_plan(&buffers, &packing);
    }

    #[test]
    fn an_arena_packed_after_the_time_ran_out_still_gets_its_first_candidate() {
        // A plan's later arenas share the deadline of the first: with no time left, a small
        // arena is still packed (its first candidate completes), not cancelled.
        let buffers: Vec<Buffer> = (0..4).map(|step| buffer(16, step, step + 1)).collect();
        let now = Instant::now();
        let asked_to_stop = memplan_planner_kit::testing::with_deadline(&now);
        let packing = packer(0.0).pack(&buffers, &asked_to_stop).expect("packs");
        assert_valid_packing(&buffers, &packing);
        assert!(
            packing.note.starts_with("greedy best fit by duration won"),
            "{}",
            packing.note
        );
    }

    #[test]
    fn hill_climbing_keeps_only_moves_that_do_not_raise_the_packing() {
        let buffers = rectangle_cut(1 << 20, 200, 600, 1);
        let start = pack_greedy(&buffers, Order::Size, Fit::Best);
        let climb_once =
            || climb(&buffers, Order::Size, Fit::Best, 1 << 20, 60, &|| false).unwrap();
        let climbed = climb_once();
        assert_valid_packing(&buffers, &climbed);
        assert!(
            climbed.height < start.height,
            "{} from {}",
            climbed.height,
            start.height
        );
        // Seeded moves and a fixed number of packings: the same result every time.
        assert_eq!(climb_once(), climbed);
        // Asked to stop at once, it returns the starting packing.
        let stopped = climb(&buffers, Order::Size, Fit::Best, 1 << 20, 60, &|| true).unwrap();
        assert_eq!(stopped.offsets, start.offsets);
    }

    #[test]
    fn a_search_beside_the_candidates_at_the_bound_stops_all_but_the_first() {
        // Random lifetimes: best fit by size, the third candidate from SIZE_BEFORE_SWEEPS_FROM
        // buffers, is superlinear there and would run until the deadline. The search beside
        // reports a packing at the bound at once (a stand-in: its offsets are not looked at;
        // the steps are found before, so that it comes before the first candidate is done),
        // so no candidate but the first, which completes (it has 30 s), may run to its end.
        let buffers = generated_instance("random:250000").unwrap().unwrap();
        let bound = arena_lower_bound(&buffers);
        let candidates = Candidate::for_arena(&buffers);
        let steps = Mutex::new(Some(CriticalSteps::new(&buffers, bound)));
        let started = Instant::now();
        let deadline = started + Duration::from_secs(30);
        let beside = |_: &HostContext, _: &AtomicBool| {
            let at_bound = Packing {
                offsets: vec![0; buffers.len()],
                height: bound,
                note: String::new(),
            };
            let found = CriticalPacking {
                packing: at_bound,
                rounds: 1,
                critical: 0,
            };
            let steps = steps.lock().unwrap().take().expect("called once");
            (steps, Some(found))
        };
        let (done, beside, insured) = packer(30.0).run_candidates(
            &candidates,
            &buffers,
            bound,
            deadline,
            Some(&beside),
            None,
            &HostContext::detached(),
        );
        assert!(insured.is_none());
        let took = started.elapsed();
        assert_eq!(
            done.iter().map(|(index, _)| *index).collect::<Vec<_>>(),
            [0]
        );
        assert!(beside.is_some_and(|(_, found)| found.is_some()));
        assert!(took < Duration::from_secs(10), "{took:?}");
    }

    #[test]
    fn the_critical_step_search_leaves_the_candidates_their_share_of_the_host_limit() {
        // 300,000 buffers, about 50 live per step: the critical-step search would go first
        // with the planner's 20 s, but the host (`--timeout`) allows 2 s, too little for its
        // rounds at this size; taken by the planner's time alone it held the time until the
        // host's stop and left no candidate complete (`Cancelled`).
        let buffers = generated_instance("random:300000:1:300000")
            .unwrap()
            .unwrap();
        let host_deadline = Instant::now() + Duration::from_secs(2);
        let context = with_deadline(&host_deadline);
        let packing = packer(20.0)
            .pack(&buffers, &context)
            .expect("the first candidate completes");
        assert_eq!(packing.offsets.len(), buffers.len());
        assert!(packing.height >= arena_lower_bound(&buffers));
    }

    #[test]
    fn the_host_limit_stops_the_critical_step_search_beside_the_search() {
        // even-compiler:3000: the critical-step search runs beside the search after the
        // candidates, and needs about 0.56 s to reach the bound; the host allows 0.4 s of
        // the planner's 20.
        let buffers = generated_instance("even-compiler:3000").unwrap().unwrap();
        let limit = Duration::from_millis(400);
        let started = Instant::now();
        let host_deadline = started + limit;
        let packing = packer(20.0)
            .pack(&buffers, &with_deadline(&host_deadline))
            .expect("the candidates complete");
        let elapsed = started.elapsed();
        assert_valid_packing(&buffers, &packing);
        // The limit, its 10 % and 50 ms, and a busy machine.
        let allowed = limit.mul_f64(1.1) + Duration::from_millis(50 + 300);
        assert!(elapsed <= allowed, "{elapsed:?}: {}", packing.note);
    }

    #[test]
    fn the_portfolio_is_never_worse_than_the_critical_step_search_alone() {
        // even-compiler:3000 (the live bytes near their peak at many steps) gets it after the
        // candidates, beside the search (with 1 s it used to get half the time left, too
        // little: 1.0048 x the bound); random:20000:3 over 20,000 steps gets it first. Both
        // reach the bound within about 0.6 s alone, deterministically, and stop the
        // portfolio there: the same plan on every run, long before the deadline.
        let context = HostContext::detached();
        for spec in ["even-compiler:3000", "random:20000:3:20000"] {
            let buffers = generated_instance(spec).unwrap().unwrap();
            let bound = arena_lower_bound(&buffers);
            let alone = CriticalSteps::new(&buffers, bound)
                .pack(
                    &buffers,
                    Instant::now() + Duration::from_secs(10),
                    &context,
                    None,
                )
                .expect("a round completes");
            assert_eq!(alone.packing.height, bound, "{spec}");
            let plans: Vec<Packing> = (0..2)
                .map(|_| {
                    let started = Instant::now();
                    let portfolio = packer(10.0).pack(&buffers, &context).unwrap();
                    assert!(started.elapsed() < Duration::from_secs(5), "{spec}");
                    assert_eq!(portfolio.height, bound, "{spec}: {}", portfolio.note);
                    assert!(
                        portfolio.note.starts_with("critical-step search"),
                        "{spec}: {}",
                        portfolio.note
                    );
                    portfolio
                })
                .collect();
            assert_eq!(plans[0].offsets, plans[1].offsets, "{spec}");
        }
    }

    #[test]
    fn a_greedy_candidate_at_the_lower_bound_ends_the_search() {
        // A chain of buffers each live one step: every greedy candidate reaches the bound.
        let buffers: Vec<Buffer> = (0..10).map(|step| buffer(64, step, step)).collect();
        let packing = packer(1.0)
            .pack(&buffers, &HostContext::detached())
            .unwrap();
        assert_valid_packing(&buffers, &packing);
        assert_eq!(packing.height, 64);
        assert!(
            packing
                .note
                .starts_with("greedy best fit by duration won, proven optimal"),
            "{}",
            packing.note
        );
    }

    #[test]
    fn a_lane_stops_once_the_rival_reached_the_bound_with_less_work() {
        let race = Race::new();
        let search = Lane::new(&race, Side::Search, None);
        let other = Lane::new(&race, Side::Other, None);
        assert_eq!(race.first_at_bound(), None);
        for _ in 0..3 {
            assert!(!other.should_stop());
        }
        other.finished(true);
        assert_eq!(race.first_at_bound(), Some(Side::Other));
        // The search may still get there with as much work as the other needed (it wins
        // ties), not with more.
        for _ in 0..3 {
            assert!(!search.should_stop());
        }
        assert!(search.should_stop());
        // Had the search reached the bound with work 3, it would have won the tie.
        race.at_bound[Side::Search as usize].store(3, Ordering::Release);
        assert_eq!(race.first_at_bound(), Some(Side::Search));
    }

    #[test]
    fn the_other_side_loses_ties_and_stops_when_the_search_returns_above_the_bound() {
        let race = Race::new();
        let other = Lane::new(&race, Side::Other, None);
        race.at_bound[Side::Search as usize].store(2, Ordering::Release);
        assert!(!other.should_stop());
        assert!(other.should_stop(), "work 2: a tie, which the search wins");
        let race = Race::new();
        let (search, other) = (
            Lane::new(&race, Side::Search, None),
            Lane::new(&race, Side::Other, None),
        );
        assert!(!other.should_stop());
        search.finished(false);
        assert!(other.should_stop());
        assert_eq!(race.first_at_bound(), None);
    }

    #[test]
    fn a_plan_at_the_bound_comes_before_the_deadline_and_the_same_on_every_run() {
        // MiniMalloc's D: the second search reaches its bound (in about 0.3 s on the
        // project's machine) where the first stays above it for seconds; the portfolio used
        // to wait for the first until the deadline.
        let (_, buffers) = member_instances()
            .into_iter()
            .find(|(name, _)| name == "D")
            .expect("D is among the instances");
        let bound = arena_lower_bound(&buffers);
        let budget = Duration::from_secs(20);
        let plans: Vec<Packing> = (0..2)
            .map(|_| {
                let started = Instant::now();
                let packing = PortfolioPacker::new(budget)
                    .pack(&buffers, &HostContext::detached())
                    .unwrap();
                assert!(
                    started.elapsed() < budget / 2,
                    "returned after {:?} of {budget:?}",
                    started.elapsed()
                );
                assert_valid_packing(&buffers, &packing);
                assert_eq!(packing.height, bound, "{}", packing.note);
                packing
            })
            .collect();
        assert_eq!(plans[0].offsets, plans[1].offsets);
    }

    #[test]
    fn the_exact_search_wins_where_greedy_stays_above_the_bound() {
        // A rectangle cut into pieces: the optimum is the width; greedy rarely finds it.
        let buffers = rectangle_cut(1 << 16, 40, 30, 3);
        let greedy = pack_greedy(&buffers, Order::Size, Fit::Best).height;
        let packing = packer(5.0)
            .pack(&buffers, &HostContext::detached())
            .unwrap();
        assert_valid_packing(&buffers, &packing);
        assert!(packing.height <= greedy);
        assert_eq!(packing.height, 1 << 16, "{}", packing.note);
        if greedy > 1 << 16 {
            assert!(
                packing.note.starts_with("exact search won, proven optimal"),
                "{}",
                packing.note
            );
        }
    }

    #[test]
    fn tflm_first_fit_can_win_and_is_named() {
        // TFLite Micro's greedy_medium_test: first fit needs 90, best fit more.
        let buffers = tflm_greedy_medium();
        let packing = packer(0.0)
            .pack(&buffers, &HostContext::detached())
            .unwrap();
        assert_valid_packing(&buffers, &packing);
        let best = pack_greedy(&buffers, Order::Size, Fit::Best).height;
        let first = pack_greedy(&buffers, Order::Size, Fit::First).height;
        assert_eq!(first, 90);
        assert!(packing.height <= best.min(first), "{}", packing.note);
        assert!(packing.note.contains(" won, "), "{}", packing.note);
    }

    #[test]
    fn notes_say_how_far_from_the_bound_and_why() {
        let note = verdict("greedy best fit by area", 110, 100, "", None);
        assert!(note.contains("10.0% above the lower bound 100"), "{note}");
        assert!(note.contains("did not run"), "{note}");
        let note = verdict("greedy best fit by size", 100_034, 100_000, "", None);
        assert!(
            note.contains("0.034% above the lower bound 100000"),
            "{note}"
        );
        let note = verdict("exact search", 100, 100, "", None);
        assert!(note.contains("proven optimal"), "{note}");
    }

    #[test]
    fn options_take_a_time_limit_and_refuse_others() {
        let mut request = memplan_planner_kit::testing::single_memory_request(&[buffer(8, 0, 0)]);
        request.options = r#"{"time_limit_s": 0.5}"#.into();
        assert!(Portfolio::plan(&request, &HostContext::detached()).is_ok());
        request.options = r#"{"fit": "first"}"#.into();
        let error = Portfolio::plan(&request, &HostContext::detached()).unwrap_err();
        assert!(error.message.contains("`fit`"), "{}", error.message);
    }
}
