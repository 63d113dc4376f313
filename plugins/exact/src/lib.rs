//! Planner `exact`: packs each scratch arena by a complete branch-and-bound search for the
//! smallest height, in the spirit of MiniMalloc (Moffitt, ASPLOS 2023).
//!
//! The kit does the passes every planner shares (memories, budgets, spill, constants,
//! aliases) and hands each arena's buffers to [`ExactPacker`], which:
//! 1. splits the buffers into independent components (lifetimes chained by overlap) and
//!    counts sizes in units of the smallest alignment ([`problem`]);
//! 2. takes a greedy packing of each component as the first upper bound ([`greedy`]: the
//!    first may take all the time, the others stop at half of it) and the peak
//!    liveness as the lower bound;
//! 3. for every component above the arena's lower bound, runs resumable searches over
//!    canonical packings ([`search`]) round-robin with doubling node budgets ([`schedule`]):
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
//!    - *raised* restarts, capped between the bound and the best height (moved as
//!      bisection's caps are), each on the merged instance where something glues: on
//!      MiniMalloc's J they are what gets within 1.5 % of the bound;
//!    - where the component fills every column up to the bound exactly (a *tiling*, as an
//!      arena cut into pieces), *band splits* ([`bands`]): the component cut into bands
//!      across its whole lifetime, recursively, each packed on its own;
//! 4. stops at the deadline (`--timeout`, or the `time_limit_s` option, default 10 s) or
//!    on the host's cancellation, and returns the best packing found, with a note saying
//!    whether its height is proven optimal and what bound remains otherwise; when not even
//!    the first greedy packing of a component was complete by then (and no search found
//!    one), it returns the kit's one-pass packing of the arena (`one_pass`: reuse, at a
//!    fraction of a sweep's cost), with a note and a warning saying so, rather than a
//!    packing without reuse or no plan (it failed with `Cancelled` before).
//!
//! On inputs of 10,000 buffers or more ([`greedy::SWEEP_FIRST_FROM`]) given no start, the
//! kit's first sweep variant packs the whole input before step 1: it stops at the deadline,
//! where step 1's setup cannot (0.3-0.5 s at a million buffers), and steps 1-3 follow only
//! with time left for the setups (five times what the sweep took); else the sweep is the
//! plan. The sweep may run into the limit's allowance (10 % and 50 ms) up to where the
//! one-pass packing still comes back within it (the kit's `time_limit::return_by`), and that
//! packing stands in where the sweep did not complete. So a limit shorter than the setup ends in
//! time: at a million buffers with 0.3 s, a plan in 0.15-0.30 s (the one-pass packing on
//! the generated random, model-like and training traces, 1.053-1.564 x the bound, where
//! they failed with `Cancelled` in 0.28 s or took their sweep until 0.34 s); with 1 s random
//! lifetimes over 1,000 steps get their sweep in 0.64 s (1.0017), where they were
//! `Cancelled` after 1.04 s.
//!
//! On large inputs every step is O(n log n) in the buffers, plus the columns, in time per
//! node and in memory: components of more than 4,096 buffers, or whose lifetimes cover more
//! than 2^22 (buffer, column) pairs, get a *large* search
//! ([`search::LARGE_SEARCH_ITEMS`]), which branches on the leftmost column, does without
//! the release inference and the resting-point dominance, and records a raised run of
//! columns as one change; its first node budget is a whole dive (twice the items), and band
//! splits and merged restarts stay below 4,096 buffers. docs/planners.md ("`exact` on large
//! arenas") has the measured time and peak memory.
//!
//! Under a memory budget the kit passes the room left ([`memplan_planner_kit::Packer::pack_within`]): the
//! searches of step 3 first aim at the budget instead of the lower bound (the decision
//! problem MiniMalloc solves), and stop once every component fits; option `goal` says what
//! follows: `"smallest"` (the default) minimises from there, `"fit"` returns that packing.
//!
//! Node budgets, not the clock, decide when to switch searches, so a run that finishes
//! before its deadline is deterministic. Each technique of step 3 has a switch among the
//! options ([`Techniques`]), so that each can be turned off and measured.
//!
//! One role per file: [`options`] (what the user may set), [`packer`] (one arena: steps 1,
//! 2 and 4), [`schedule`] (step 3: which search runs when), [`search`] (one branch-and-bound
//! search), [`bands`] and [`merge`] (the two instance transformations), [`greedy`] (the
//! starting packings), [`problem`] (units, columns, components), [`critical`] (the search of
//! the buffers live where the live bytes come near the bound, the others packed greedily
//! around them), and [`portfolio`], the planner that tries greedy packings first and these
//! searches after.

use memplan_planner_kit::plan_with_packer;
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanRequest, Planner};

pub mod bands;
mod core_share;
pub mod critical;
pub mod greedy;
pub mod merge;
pub mod options;
pub mod packer;
pub mod portfolio;
pub mod problem;
pub mod schedule;
pub mod search;

pub use options::{ExactOptions, Goal, Techniques, DEFAULT_TIME_LIMIT};
pub use packer::ExactPacker;
pub use schedule::{improve, Outcome};

pub struct Exact;

impl Planner for Exact {
    const NAME: &'static str = options::NAME;
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "branch-and-bound search for the smallest arena, anytime (option time_limit_s, default 10)";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        let options = ExactOptions::parse(&request.options)?;
        plan_with_packer(request, context, &ExactPacker::from_options(&options))
    }
}

// Linked into memplan (its built-in planners); `cdylib/` exports the same planners from a plugin file.
memplan_plugin_api::planner_root_module!(Exact, portfolio::Portfolio);
