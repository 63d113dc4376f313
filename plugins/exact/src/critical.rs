//! Critical steps: an arena packed at its lower bound by searching only the buffers live
//! where its live bytes come near the bound, and packing the others greedily around them.
//!
//! # Algorithm
//!
//! A packing is higher than the bound only at steps where the live bytes and the gaps
//! between them add up to more than the bound, and the gaps a greedy packing leaves are a
//! few percent of it: at steps whose live bytes are well below the bound every packing has
//! room to spare. Where few buffers are live at a time (traces with long timelines, tens of
//! buffers live at each step), the steps near the bound are few and far apart, and the
//! buffers live at them few, so the exact search packs those at the bound in milliseconds,
//! where it cannot search a whole arena of 100,000 buffers.
//!
//! 1. The *critical* steps: those whose live bytes are within [`FIRST_MARGIN`] of the bound.
//!    The critical buffers are the ones live at any critical step.
//! 2. The exact search ([`ExactPacker`], goal "fit") packs the critical buffers within the
//!    bound, from each component of them swept on its own ([`swept_by_component`]). If it
//!    cannot (before the deadline), this stops. In later rounds it packs only the
//!    *components* (critical buffers linked through lifetimes that overlap) that hold a
//!    buffer new to the critical ones: any other component is one of the last round's,
//!    whose offsets it keeps (nothing searched now lives beside it). On three generated
//!    random traces the later rounds searched 28-87 % of the critical buffers, and with the
//!    default 1 s `random:100000:42:60000` reached the bound in 0.36 s instead of 0.72 s,
//!    `random:200000:51:100000` in 0.34 s instead of 0.66 s (none of 81 traces came
//!    higher).
//! 3. Every other buffer is packed by the kit's greedy packer, the critical ones held at the
//!    offsets the search gave them: best fit by size where few buffers are live per step
//!    (at most the kit's [`FEW_LIVE`] on average: model-like traces), by start where more
//!    (the kit's sweep, which steers around the held buffers: up to
//!    [`START_ORDER_MOST_LIVE`], fewer in large arenas), else by area (see
//!    [`CriticalSteps::rest_order`]; the first round of large arenas by start there too:
//!    [`CriticalSteps::first_round_order`]).
//! 4. Where that packing is still above the bound, the steps where it is, and
//!    [`GROW_STEPS`] start steps either side of each ([`GROW_STEPS_AROUND`] where the later
//!    rounds pack only near the critical buffers), become critical too, and again from 1.
//!    From [`REPACK_AROUND_FROM`] buffers ([`REPACK_AROUND_BY_AREA_FROM`] where the rest is
//!    packed by area) the later rounds keep the last round's packing
//!    and pack again only the buffers live beside a critical buffer whose offset the search
//!    changed (around every buffer live beside those, held): the rest of that packing is
//!    clear of everything live beside it, which did not move. The steps above the bound
//!    all lie near critical buffers, so those get packed again.
//!
//! It stops at the bound, when no component takes a new buffer, when the buffers it would
//! search (those of the components with a new one) would be more than three quarters of all
//! ([`MOST_SEARCHED_QUARTERS`]: the search would then be searching the arena itself, which
//! the portfolio does anyway), after
//! [`MOST_ROUNDS`] rounds, or at the deadline; it returns the lowest packing it made. Each
//! round costs a search of the critical buffers and one greedy packing, of the arena
//! (O(n log n)) or, in later rounds of large arenas, of the buffers near the critical ones
//! (O(n) to find them); the steps are the distinct start steps (the live bytes change only
//! there).
//!
//! Where many buffers are live at every step (random lifetimes over a few thousand steps),
//! the first greedy packing is above the bound at most steps, the second round takes
//! nearly every buffer, and it stops there: those arenas it does not help.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use memplan_planner_kit::{
    average_live, live_bytes_at_points, pack_greedy_until, pack_sweep_variant, Buffer, Fit,
    FixedOffset, Order, Packing, Stopped, SweepVariant, Timeline, FEW_LIVE,
};
use memplan_plugin_api::HostContext;

use crate::options::{Goal, Techniques};
use crate::packer::ExactPacker;
use crate::problem::overlap_runs;
use crate::search::Deadline;

/// Steps whose live bytes are at least the bound less this share of it (1/10: 10 %) are
/// critical from the start. Measured on random lifetimes over 10,000-1,000,000 steps with
/// about 50 buffers live per step: the greedy rest is then above the bound at a few hundred
/// steps, which the second round takes in.
///
/// Other margins suit other traces, by no rule found. This search alone with 3-4 s, on
/// generated random traces with 100-250 live per step that it leaves above the bound or
/// reaches late with 1/10: 1/20 reaches it on `random:300000:52:60000`
/// in 1.40 s (never at the bound before, 1.0108 x it by the portfolio with 10 s),
/// `random:30000:8:5000` in 0.28 s (0.76 s) and `random:10000:4:5000` in 0.09 s (1.0152),
/// but leaves `random:100000:5:25000` 1.0436 (at the bound in 0.70 s) and
/// `random:100000:4:20000` 1.0675; 1/14 reaches it on `random:5000:302:3000` in 0.85 s,
/// 1/7 on `random:60000:401:20000` in 2.82 s, where 1/10 leaves them 1.0191 and 1.0102 x
/// it with 10 s. Trying margins in turn would need each cut short (where its search cannot
/// fit the critical buffers, it runs until the deadline), which costs the traces 1/10
/// reaches late (`random:100000:4:20000`: at the bound in 8.0 s of 10 s). Where the live
/// bytes come near the bound at most steps (random lifetimes over 1,000 steps, about 5,000
/// live per step) no margin helps: with 1/50 to 1/200 the first round has 12-63 % of the
/// buffers, and its search fits them at the bound on one seed of three (1/200 on
/// `random:100000:4`), the rest around them then 1.08 x the bound.
const FIRST_MARGIN: u64 = 10;
/// Start steps either side of a step where the greedy rest was above the bound that become
/// critical with it, where each round packs the whole arena again (see
/// [`CriticalSteps::repacks_around`]). There the rest adapts to the critical buffers'
/// new offsets everywhere, and a narrower growth leaves the next round's search fewer buffers
/// to fit. With the portfolio's default 1 s, on 72 generated random traces of 5,000-190,000
/// buffers (17-333 live per step), against 20 (one run each, then 3 alternating runs of the
/// 11 that differed): 8 came to the bound on every run (`random:20000:303:8000` from 1.0418
/// x it in 0.85-0.95 s, just before the deadline: on 5 later runs 2 times,
/// `random:30000:411:15000` 1.0187-1.0398 in 0.35-0.52 s,
/// `random:5000:302:3000` 1.0191 in 0.32-0.45 s, `random:40000:1:10000` 1.0056 in
/// 0.82-0.97 s, `random:30000:744:10000` 1.0246 in 0.71-0.86 s), `random:50000:9:20000`
/// 1.0319 to 1.0301, none higher; `random:20000:1:5000` and `:6:5000` stay 1.0309 and
/// 1.0373. The critical-step search alone was mixed on the same traces: 20 reached the bound
/// on `random:50000:9:20000` in 0.56 s where 5 left it 1.0295.
const GROW_STEPS: usize = 5;
/// [`GROW_STEPS`] where the rounds after the first pack only near the critical buffers
/// (`repack_around`). There 5 made more rounds, each repacking around buffers the last moved:
/// with 1 s, on 52 generated random traces of 200,000-1,000,000 buffers, most reached the
/// bound later (`random:500000:77:400000` in 0.43 s instead of 0.26 s) and
/// `random:1000000:210:400000` not at all (1.0351).
const GROW_STEPS_AROUND: usize = 20;
/// Arenas with more than the kit's [`FEW_LIVE`] and at most this many buffers live per step
/// on average pack the rest in start order. Best fit in start order is the kit's sweep, which
/// steers around the critical buffers held in the middle of the timeline: a round costs about
/// half what it does by area or size (random lifetimes of 1,000,000 buffers, 18-36 live per
/// step over 1.4-2.8 million steps: 0.43-0.45 s against 0.70-1.06 s), and its first packing
/// is often higher, which the next rounds make up. With the portfolio's default 1 s, on 28
/// generated random traces of 3,000-2,000,000 buffers with 18-125 live per step, 11 come
/// lower than by area (`random:1000000:12:1400000` from 1.0411 x the bound to at it in
/// 0.61 s, `random:1000000:2:1000000` 1.0475 to 1.0073, `random:1000000:8:2000000` 1.0758
/// to 1.0303, `random:500000:32:300000` 1.0509 to at the bound), 17 end as high (most of
/// them sooner: `random:250000:9:250000` at the bound in 0.24 s instead of 0.63 s), none
/// higher. Over more live buffers by start ends higher (`random:200000:7:50000`, about 200
/// live: 1.0377 against 1.0143; `random:40000:1:10000` 1.0147 against 1.0056); with at
/// most 16, by size reaches the bound sooner (`model:1000000` 0.48 s against 0.72 s;
/// `model:1500000:3` at the bound against 1.0468). From [`REPACK_AROUND_FROM`] buffers by
/// start only up to [`START_ORDER_MOST_LIVE_REPACKED`], but the first round by start anyway
/// ([`CriticalSteps::first_round_order`]).
const START_ORDER_MOST_LIVE: u64 = 128;
/// The techniques of a round's exact search: those aiming at the bound
/// ([`Techniques::AT_THE_TARGET`]), since a round keeps its search's packing only there.
/// With every technique, descents, bisection and raised restarts took most of the search's
/// time on components the sweeps leave 1-3 % above the bound: one of 1,482 buffers (the first
/// round of `random:100000:4:20000`) fitted in 2.90 s with them, 0.88 s without. This search
/// alone with 3 s, on 18 generated random traces whose first round's search does not fit in
/// 1 s: at the bound on 3 (`random:100000:4:20000` in 1.53 s, `random:150000:7:50000` 0.95 s,
/// `random:120000:705:30000` 1.28 s), against 2 with every technique (1.81 and 2.33 s). With
/// the portfolio's default 1 s (one run each, the ones that differed run again):
/// - 72 generated random traces of 5,000-190,000 buffers: 39 at the bound instead of 37, 4
///   lower (`random:20000:303:8000` from 1.0418 x the bound to at it in 0.69 s,
///   `random:150000:7:50000` from 1.0188 to 0.95 s, just before the deadline: 1.0131-1.0422
///   on 8 runs later), none higher;
/// - 32 on new seeds (10,000-200,000 buffers, 60-300 live per step): 2 to the bound
///   (`random:100000:812:50000` from 1.0082 in 0.77 s, `random:40000:831:20000` from 1.0089
///   in 0.37 s; another build of the same code gave 1.0089 on 8 runs of 8 of `memplan
///   bench`, the bound with `-v` and with `memplan plan`, cause not found), none higher;
/// - 122 traces of earlier measurements (1,000-2,000,000 buffers, every shape): 5 lower
///   (`random:60000:202:25000` from 1.0054 to the bound in 0.45 s), one higher on one run
///   (`random:1000000:28:3300000`, at the bound in 0.99 s before; 3 runs more each way: at
///   the bound in 0.82-0.92 s with either).
const SEARCH_TECHNIQUES: Techniques = Techniques::AT_THE_TARGET;
/// [`START_ORDER_MOST_LIVE`] in arenas of [`REPACK_AROUND_FROM`] buffers or more, whose later
/// rounds pack only the buffers near the critical ones (by start in the first round all the
/// same: [`CriticalSteps::first_round_order`]). There, from about 126 live per step, the
/// later rounds by area reach the bound where by start they did not: with the portfolio's
/// default 1 s, `random:300000:34:120000` from 1.0328 x the bound to at it in 0.31 s,
/// `random:200000:36:80000` 1.0414 to 0.32-0.46 s, `random:1000000:210:400000` 1.0351 to
/// 0.90 s, `random:500000:222:200000` 1.0453 to 0.83 s, `random:400000:224:160000` 1.0369 to
/// 0.52-0.57 s (two runs each); with 117 live (`random:700000:212:300000`) and 116 both
/// were at the bound. Below [`REPACK_AROUND_FROM`] buffers by area from 113 live was worse
/// (`random:150000:204:63000`, 120 live: at the bound in 0.21 s against 1.0023 x it).
const START_ORDER_MOST_LIVE_REPACKED: u64 = 112;
/// Arenas with at least this many buffers pack only the buffers near the critical buffers
/// again after the first round (`repack_around`), smaller ones the whole arena. On 1,000,000
/// random lifetimes over 1.8 million steps (28 live per step) a later round took 20-25 ms
/// instead of 0.40-0.44 s. With the portfolio's default 1 s, on 35 generated traces of
/// 200,000-2,000,000 buffers (random lifetimes with 10-250 live per step, model-like,
/// training) 9 came lower, all to the bound (`random:1000000:23:1790000` from 1.0464 x the
/// bound, `random:1000000:54:500000` 1.0498, `model:2000000:1` 1.0363, `random:200000:7:50000`
/// 1.0143), 10 reached it sooner (`model:500000:5` in 0.22 s instead of 0.51 s;
/// `random:1000000:21:2780000` in 0.57 s, where before it did only on some runs, just before
/// the deadline), one later (`random:200000:51:100000`, 0.70 s instead of 0.51 s), none ended
/// higher. Below, where a round of the whole arena is quick, the whole arena's packing was
/// lower: held buffers that start after the ones packed again are in their way, where in a
/// packing of the whole arena they make room (`random:5000:2:2000`, `random:10000:4:5000`
/// and `random:40000:2:10000` at the bound, 1.0232, 1.0211 and 1.0053 x it repacked).
const REPACK_AROUND_FROM: usize = 200_000;
/// [`REPACK_AROUND_FROM`] for arenas whose rest is packed by area
/// ([`CriticalSteps::rest_order`]: more than [`START_ORDER_MOST_LIVE`] live per step), where
/// a packing of the whole arena is superlinear (0.2-0.5 s a round at 100,000-150,000
/// buffers). The critical-step search alone with 1 s, on 26 generated random traces of
/// 50,000-180,000 buffers with 100-333 live per step: 10 of those by area reached the bound
/// sooner (`random:100000:5:25000` in 0.35 s instead of 0.65 s, `random:120000:403:40000`
/// 0.38 s for 0.92 s, `random:150000:706:40000` 0.56 s for 0.98 s) and
/// `random:180000:708:50000` at all (1.0326 before), none later or higher; those by start
/// (up to 128 live) are left as they were, since repacked around, `random:50000:9:20000`
/// (125 live) ended 1.1331 x the bound where it reaches it in 0.55 s. Up to 50,000 buffers
/// (where the portfolio runs this search after its candidates, beside the exact search)
/// mixed: `random:40000:2:10000` at the bound in 0.18 s instead of 0.38 s, but
/// `random:35000:724:10000` 1.0247 where it reached it in 0.89 s, and in the portfolio
/// `random:50000:748:15000` 1.0167 on 7 runs of 7, where whole-arena rounds give 1.0020 on
/// 2 runs of 3.
const REPACK_AROUND_BY_AREA_FROM: usize = 50_001;
/// Rounds at most: each adds at least one critical step, and a packing that needs more is
/// not converging.
const MOST_ROUNDS: usize = 32;
/// The rounds stop where the buffers a round would search are more than this many quarters
/// of the arena's. Three quarters, not two, since a round's search runs only the techniques
/// aiming at the bound ([`SEARCH_TECHNIQUES`]); before that, three quarters left
/// `random:150000:7:50000` and `random:30000:411:15000` higher. With the portfolio's default
/// 1 s, on 104 generated random traces of 5,000-200,000 buffers and the 122 of earlier
/// measurements (1,000-2,000,000 buffers, every shape), one run each and three more each way
/// of those that differed: `random:20000:802:3333` from 1.0048 x the bound to at it in
/// 0.54-0.70 s and `random:2000:301` from 1.0234 to 1.0050 (3 runs of 3 each), none higher
/// (`random:140000:756:30000` 1.0302-1.0318 either way).
const MOST_SEARCHED_QUARTERS: usize = 3;

/// What the critical-step search made: its lowest packing, and how.
pub struct CriticalPacking {
    pub packing: Packing,
    /// Rounds run (searches of the critical buffers).
    pub rounds: usize,
    /// Critical buffers in the round that made `packing`.
    pub critical: usize,
}

/// The critical steps of an arena: its live bytes per start step, and which steps are
/// critical from the start. O(n log n) to make.
pub struct CriticalSteps {
    steps: StartSteps,
    bound: u64,
    /// Per start step, whether it is critical from the start (its live bytes within
    /// [`FIRST_MARGIN`] of the bound).
    first_steps: Vec<bool>,
    /// The buffers live at those steps.
    first: Vec<usize>,
    /// The greedy order the buffers that are not critical are packed in (the first round's
    /// follows from it: [`CriticalSteps::first_round_order`]).
    rest_order: Order,
}

impl CriticalSteps {
    /// The critical steps of `buffers`, whose lower bound is `bound`.
    pub fn new(buffers: &[Buffer], bound: u64) -> CriticalSteps {
        let steps = StartSteps::new(buffers);
        let floor = bound - bound / FIRST_MARGIN;
        let first_steps: Vec<bool> = steps
            .live_bytes(buffers)
            .iter()
            .map(|&bytes| bytes >= floor)
            .collect();
        let first = steps.buffers_live_at(&first_steps);
        CriticalSteps {
            steps,
            bound,
            first_steps,
            first,
            rest_order: Self::rest_order(buffers),
        }
    }

    /// The greedy order of the buffers around the critical ones: by size where at most
    /// [`FEW_LIVE`] are live per step on average, as the portfolio's first candidate there;
    /// by start up to [`START_ORDER_MOST_LIVE`] ([`START_ORDER_MOST_LIVE_REPACKED`] from
    /// [`REPACK_AROUND_FROM`] buffers); else by area. Measured with the portfolio's
    /// default 1 s: by size the model-like traces of 1,000,000 buffers reach their bound in
    /// 0.39-0.41 s instead of 0.71-0.77 s (a round is about twice as quick), and
    /// `model:300000:4` in 0.19 s instead of 0.29 s; by size everywhere, random lifetimes
    /// with 50-200 live per step ended higher (`random:2000:1` 1.0293 against 1.0111 x the
    /// bound, `random:5000:2:2000` 1.0232 against at the bound, `random:40000:1:10000` 1.0147
    /// against 1.0056). See [`START_ORDER_MOST_LIVE`] for by start. By duration instead of
    /// by area, on 121 generated traces of 1,500-300,000 buffers with more than 112 live per
    /// step (one run each): 8 lower (`random:190000:735:60000` from 1.0242 x the bound to at
    /// it, `random:15000:741:5000` from 1.0100), 17 higher (`random:140000:733:45000` from the
    /// bound to 1.0298, `random:120000:755:45000` to 1.0345); this search alone with 3 s by
    /// duration brings `random:20000:1:5000` to the bound in 0.86 s, where by area it ends
    /// 1.0319.
    fn rest_order(buffers: &[Buffer]) -> Order {
        let most_live = match buffers.len() >= REPACK_AROUND_FROM {
            true => START_ORDER_MOST_LIVE_REPACKED,
            false => START_ORDER_MOST_LIVE,
        };
        match average_live(buffers) {
            live if live <= FEW_LIVE => Order::Size,
            live if live <= most_live => Order::Start,
            _ => Order::Area,
        }
    }

    /// The greedy order the first round packs the buffers that are not critical in, of an
    /// arena of `count` buffers whose [`Self::rest_order`] is `rest_order`: from
    /// [`REPACK_AROUND_FROM`] buffers, where that round is the only one to pack the whole
    /// arena (the later ones pack only near the critical buffers: `repack_around`), start
    /// order where `rest_order` is by area, else that order. Start order is the kit's
    /// O(n log n) sweep, where by area a greedy packing of a random trace is superlinear: at
    /// 1,000,000 buffers with 168 live per step the first round by area did not complete
    /// within 1 s. With the portfolio's default 1 s, on generated random traces of
    /// 200,000-2,000,000 buffers with 144-252 live per step (against by area in every round):
    /// `random:1000000:55:300000` from 1.0218-1.0230 x the bound to at it in 0.73-0.91 s,
    /// `random:200000:214:60000` 1.0305 to 0.23 s, `random:350000:215:100000` 1.0261 to
    /// 0.39 s, `random:250000:218:50000` 1.0131 to 0.22 s, `random:300000:211:80000` 1.0333 to
    /// 0.32 s, `random:400000:208:150000` 1.0449 to 0.53 s, `random:800000:216:250000` 1.0398
    /// to 1.0 s; 6 the same (`random:400000:56:100000` 1.0356, where no round fits its
    /// critical buffers); two of 2,000,000 buffers end at the first candidate or at the
    /// one-pass packing from run to run, either way. One is worse on some runs:
    /// `random:200000:7:50000` (201 live) was at the bound in 0.95 s on 2 runs of 6 and
    /// 1.0377 on the others, and is now 1.0198-1.0377 (the critical-step search alone with
    /// 1 s: by area throughout at the bound in 0.92 s, this way 1.0198).
    fn first_round_order(rest_order: Order, count: usize) -> Order {
        match rest_order {
            Order::Area if count >= REPACK_AROUND_FROM => Order::Start,
            order => order,
        }
    }

    /// Whether the rounds after the first pack only the buffers near the critical ones again
    /// (`repack_around`) in an arena of `count` buffers, not the whole arena: from
    /// [`REPACK_AROUND_FROM`] buffers, or [`REPACK_AROUND_BY_AREA_FROM`] where the rest is
    /// packed by area.
    fn repacks_around(&self, count: usize) -> bool {
        count >= REPACK_AROUND_FROM
            || (count >= REPACK_AROUND_BY_AREA_FROM && self.rest_order == Order::Area)
    }

    /// How many buffers the first round searches.
    pub fn first_critical(&self) -> usize {
        self.first.len()
    }

    /// Packs `buffers` (those it was made from) at the bound as the module documentation
    /// says, until `deadline` (or the host's, if sooner) or the context asks to stop (asked
    /// before each round and by its searches): the lowest packing made, `None` when no round
    /// completed one. Where `halt` is given, its greedy packings also stop once it is set
    /// (they do not ask the context: see below).
    pub fn pack(
        &self,
        buffers: &[Buffer],
        deadline: Instant,
        context: &HostContext,
        halt: Option<&AtomicBool>,
    ) -> Option<CriticalPacking> {
        self.pack_rounds(buffers, deadline, None, context, halt)
    }

    /// [`Self::pack`] on trial: each round's search must fit the buffers it searches within
    /// the bound in `1/share` of the time left when it starts, else the rounds stop there
    /// (the lowest packing made before it, `None` where that was the first round's). With
    /// every search technique, a round's search fitted them in a fraction of the time or not
    /// in the whole of it: the first round's, on 43 generated random traces of
    /// 10,000-300,000 buffers with 1 s, within 0.14 s or not within 0.92-1.0 s; the later
    /// rounds' on the 14 of them that reached the bound within 0.05 s, and on 4 whose rounds
    /// did not converge in 1.2-2.7 s. So a short trial tells whether the rounds are worth the
    /// time. With the techniques at the bound alone (`SEARCH_TECHNIQUES`) some first
    /// rounds fit in between (9 of 18 that did not fit in 1 s before: 0.48-0.94 s), which a
    /// fifth of the time left misses; a third was mixed (`CRITICAL_TRIAL_SHARE`).
    pub fn pack_on_trial(
        &self,
        buffers: &[Buffer],
        deadline: Instant,
        share: u32,
        context: &HostContext,
        halt: Option<&AtomicBool>,
    ) -> Option<CriticalPacking> {
        self.pack_rounds(buffers, deadline, Some(share), context, halt)
    }

    /// [`Self::pack`], on trial where `trial_share` is given ([`Self::pack_on_trial`]).
    fn pack_rounds(
        &self,
        buffers: &[Buffer],
        deadline: Instant,
        trial_share: Option<u32>,
        context: &HostContext,
        halt: Option<&AtomicBool>,
    ) -> Option<CriticalPacking> {
        let bound = self.bound;
        let mut critical_steps = self.first_steps.clone();
        let mut critical = self.first.clone();
        // The host's deadline, if sooner, folded in: the greedy packings and the search's
        // starts stop by the clock alone. Asking the context counts as work in the
        // portfolio's race (its `Lane`), where their polls would weigh as much as 1,024
        // nodes of the exact search each; the host's stop is its deadline.
        let deadline = Deadline::sooner_than_host(deadline, context);
        let until = Deadline {
            at: Some(deadline),
            context,
        };
        let time_is_up =
            || until.time_is_up() || halt.is_some_and(|halt| halt.load(Ordering::Relaxed));
        let mut best: Option<CriticalPacking> = None;
        // The last round's packing, which the next one changes only around the critical
        // buffers its search moved (see `repack_around`).
        let mut last: Option<Vec<u64>> = None;
        // Which buffers were critical in an earlier round.
        let mut was_critical = vec![false; buffers.len()];
        let repacks_around = self.repacks_around(buffers.len());
        let grow = match repacks_around {
            true => GROW_STEPS_AROUND,
            false => GROW_STEPS,
        };
        for round in 1..=MOST_ROUNDS {
            if round > 1 {
                critical = self.steps.buffers_live_at(&critical_steps);
            }
            if critical.is_empty() || until.passed() {
                break;
            }
            // Only the components (critical buffers linked by lifetimes that overlap) with a
            // buffer new this round are searched: the others keep the offsets the last round
            // gave them, which no buffer searched now can conflict with.
            let new_in_component = match &last {
                Some(_) => self.steps.components_with_new(&critical, &was_critical),
                None => vec![true; critical.len()],
            };
            let searched_now: Vec<usize> = (0..critical.len())
                .filter(|&at| new_in_component[at])
                .collect();
            // Searching nearly the whole arena is searching the arena itself, which the
            // portfolio does anyway (`MOST_SEARCHED_QUARTERS`). The components kept as they
            // were do not count: counted, `random:10000:4:5000`'s rounds stopped where the
            // critical buffers would be more than half of all, 1.0152 x the bound; not
            // counted, it reaches the bound in 0.37 s.
            if searched_now.is_empty()
                || searched_now.len() * 4 > buffers.len() * MOST_SEARCHED_QUARTERS
            {
                break;
            }
            let chosen: Vec<Buffer> = searched_now
                .iter()
                .map(|&at| buffers[critical[at]])
                .collect();
            let time_left = deadline.saturating_duration_since(Instant::now());
            let search_time = match trial_share {
                Some(share) => time_left / share,
                None => time_left,
            };
            let search = ExactPacker::new(search_time)
                .with_goal(Goal::Fit)
                .with_techniques(SEARCH_TECHNIQUES);
            // The search aims at the bound and leaves alone every component its start packs
            // within it, so the start is made per component (`swept_by_component`). Given
            // none, the packer makes the best of eight greedy packings, superlinear on
            // fragmented traces (0.1 s of a 0.7 s round on 7,376 critical buffers of
            // random:100000:1:20000); the kit's sweeps are O(n log n).
            let start: Vec<Vec<u64>> = swept_by_component(&chosen, bound, &time_is_up)
                .into_iter()
                .collect();
            let Ok(searched) = search.pack_from(&chosen, Some(bound), &start, context) else {
                break;
            };
            if searched.height > bound {
                break;
            }
            let mut critical_offsets: Vec<u64> = match &last {
                Some(offsets) => critical.iter().map(|&index| offsets[index]).collect(),
                None => vec![0; critical.len()],
            };
            for (&at, &offset) in searched_now.iter().zip(&searched.offsets) {
                critical_offsets[at] = offset;
            }
            for &index in &critical {
                was_critical[index] = true;
            }
            let order = match round {
                1 => Self::first_round_order(self.rest_order, buffers.len()),
                _ => self.rest_order,
            };
            let repacked = match last.take().filter(|_| repacks_around) {
                Some(offsets) => self.repack_around(
                    buffers,
                    offsets,
                    &critical,
                    &critical_offsets,
                    order,
                    &time_is_up,
                ),
                None => self.pack_around(buffers, &critical, &critical_offsets, order, &time_is_up),
            };
            let Ok(packing) = repacked else {
                break;
            };
            let height = packing.height;
            let too_high = self.steps.steps_above(buffers, &packing.offsets, bound);
            last = Some(packing.offsets.clone());
            if best
                .as_ref()
                .is_none_or(|best| height < best.packing.height)
            {
                best = Some(CriticalPacking {
                    packing,
                    rounds: round,
                    critical: critical.len(),
                });
            }
            if height <= bound {
                break;
            }
            let last_step = self.steps.count - 1;
            for step in too_high {
                let around = step.saturating_sub(grow)..=(step + grow).min(last_step);
                critical_steps[around].fill(true);
            }
        }
        best
    }

    /// A packing of all `buffers` with the `critical` ones held at `searched` (their offsets,
    /// in the same order) and the others packed greedily around them, in `order`.
    fn pack_around(
        &self,
        buffers: &[Buffer],
        critical: &[usize],
        searched: &[u64],
        order: Order,
        stop: &dyn Fn() -> bool,
    ) -> Result<Packing, Stopped> {
        let mut held = buffers.to_vec();
        for (&index, &offset) in critical.iter().zip(searched) {
            held[index].fixed_offset = FixedOffset::at(offset);
        }
        pack_greedy_until(&held, order, Fit::Best, stop)
    }

    /// [`Self::pack_around`] made from the last round's packing `offsets`, in which every
    /// critical buffer of the last round was among this round's `critical` (the critical
    /// steps only grow): the buffers that are not critical and live at the same time as a
    /// critical buffer whose offset changed are packed again, greedily around every buffer
    /// live beside them (held where they are); the others keep their offsets, which stay
    /// clear of every buffer live beside them, since none of those moved. A round then costs
    /// a packing of the buffers near the critical steps instead of the whole arena's (1,000,000
    /// random lifetimes over 1.8 million steps: 0.4 s a round before).
    fn repack_around(
        &self,
        buffers: &[Buffer],
        mut offsets: Vec<u64>,
        critical: &[usize],
        searched: &[u64],
        order: Order,
        stop: &dyn Fn() -> bool,
    ) -> Result<Packing, Stopped> {
        let mut is_critical = vec![false; buffers.len()];
        let mut moved = Vec::new();
        for (&index, &offset) in critical.iter().zip(searched) {
            is_critical[index] = true;
            if offsets[index] != offset {
                offsets[index] = offset;
                moved.push(index);
            }
        }
        let beside_moved = self.steps.buffers_live_at(&self.steps.spans_of(&moved));
        let again: Vec<usize> = beside_moved
            .into_iter()
            .filter(|&index| !is_critical[index])
            .collect();
        // Every buffer live beside one packed again: those held, the others packed.
        let near = self.steps.buffers_live_at(&self.steps.spans_of(&again));
        let mut packed_again = vec![false; buffers.len()];
        for &index in &again {
            packed_again[index] = true;
        }
        let part: Vec<Buffer> = near
            .iter()
            .map(|&index| match packed_again[index] {
                true => buffers[index],
                false => Buffer {
                    fixed_offset: FixedOffset::at(offsets[index]),
                    ..buffers[index]
                },
            })
            .collect();
        let packed = pack_greedy_until(&part, order, Fit::Best, stop)?;
        for (&index, &offset) in near.iter().zip(&packed.offsets) {
            offsets[index] = offset;
        }
        Ok(Packing::at(buffers, offsets))
    }
}

/// A start for the search of the critical buffers `chosen`: each component (buffers chained
/// by lifetimes that overlap, which share no step with any other) packed on its own by the
/// kit's sweep variants in turn ([`SweepVariant::ALL`]), the first within `bound` kept, else
/// the lowest. `None` where no variant applies to a component (buffers at fixed offsets:
/// [`pack_sweep_variant`]) or `stop` says so.
///
/// A round's critical buffers lie around several steps where the live bytes come near the bound,
/// far apart in time. A sweep of all of them at once is anchored at most at one of those (the
/// busiest): the others it meets in passing, with whatever gaps it left there, and the search then
/// has to repack their components: 1.7 and 3.4 s for the first rounds of `random:150000:7:50000`
/// and `random:100000:4:20000` (6,470 and 21,127 critical buffers). Each component swept on its own
/// is anchored at its own busiest step and mostly fits. With the portfolio's default 1 s, on 66
/// generated random traces (1,500-2,000,000 buffers, 10-1,000 live per step; 18 of them on seeds
/// not measured before), 4 came to the bound from 1.02-1.06 x it (`random:200000:7:50000` 1.0198,
/// `random:600000:209:200000` 1.0331, `random:300000:407:150000` 1.0615, `random:500000:410:200000`
/// 1.0353: at the bound in 0.25-0.31, 0.60-0.80, 0.30-0.34 and 0.47-0.54 s, medians of 3 runs in
/// each of 3-4 sets), one came lower (`random:5000:302:3000` 1.0203 to 1.0191), 17 reached the
/// bound sooner (`random:200000:51:100000` in 0.21 s instead of 0.46 s, `random:400000:224:160000`
/// 0.34 s instead of 0.56 s), the others took as long within 0.05 s, and none ended higher. On 60
/// more (model-like, training, random over up to 5 million steps) one came to the bound
/// (`random:1000000:70:3300000`, 1.0368 before, at it in 1.01 s) and one ended higher:
/// `random:10000:4:5000`, at the bound in 0.52 s before, then 1.0152 x it: its rounds stopped
/// where the critical buffers would be more than half of all, where before the seventh came to
/// the bound with 4,959 of 10,000. Letting them take up to three quarters brought it back, but
/// `random:150000:7:50000` and `random:30000:411:15000` ended higher (1.0188 to 1.0422, and from
/// the bound to 1.0187); counting only the buffers a round searches brought it back (at the bound
/// in 0.37 s) and changed no other height on 132 generated traces.
fn swept_by_component(chosen: &[Buffer], bound: u64, stop: &dyn Fn() -> bool) -> Option<Vec<u64>> {
    let mut by_first: Vec<usize> = (0..chosen.len()).collect();
    by_first.sort_unstable_by_key(|&at| chosen[at].lifetime.first);
    let mut offsets = vec![0; chosen.len()];
    for run in overlap_runs(&by_first, |&at| {
        let lifetime = chosen[at].lifetime;
        (lifetime.first as usize, lifetime.last as usize)
    }) {
        // In the caller's order, which the sweeps' ties follow.
        let mut members = by_first[run].to_vec();
        members.sort_unstable();
        let component: Vec<Buffer> = members.iter().map(|&at| chosen[at]).collect();
        let mut lowest: Option<Packing> = None;
        for variant in SweepVariant::ALL {
            let Some(packing) = pack_sweep_variant(&component, variant, stop).ok()? else {
                continue;
            };
            if lowest
                .as_ref()
                .is_none_or(|lowest| packing.height < lowest.height)
            {
                lowest = Some(packing);
            }
            if lowest.as_ref().is_some_and(|lowest| lowest.height <= bound) {
                break;
            }
        }
        for (&at, &offset) in members.iter().zip(&lowest?.offsets) {
            offsets[at] = offset;
        }
    }
    Some(offsets)
}

/// The distinct start steps, ascending, and each buffer's span over them: the live bytes
/// change only at a start step (rising) or after a buffer's last step (falling, and then
/// rising again only at the next start), so the live bytes at start steps are all there is
/// to know about them.
struct StartSteps {
    /// Per buffer, the first and last start step (index) of its lifetime.
    spans: Vec<(usize, usize)>,
    count: usize,
}

impl StartSteps {
    /// The spans the kit's [`Timeline`] (the greedy packer's time index) gives.
    fn new(buffers: &[Buffer]) -> StartSteps {
        let timeline = Timeline::new(buffers);
        let spans = buffers
            .iter()
            .map(|buffer| {
                let (first, last) = timeline.span(buffer.lifetime);
                (first as usize, last as usize)
            })
            .collect();
        StartSteps {
            spans,
            count: timeline.points().len(),
        }
    }

    /// The live bytes at each start step.
    fn live_bytes(&self, buffers: &[Buffer]) -> Vec<u64> {
        let spans = self
            .spans
            .iter()
            .map(|&(first, last)| (first as u32, last as u32));
        live_bytes_at_points(
            self.count,
            spans.zip(buffers.iter().map(|buffer| buffer.size)),
        )
    }

    /// The start steps marked where any of the buffers `indices` is live.
    fn spans_of(&self, indices: &[usize]) -> Vec<bool> {
        // Each buffer counted as one byte: a step is marked where any is live.
        let spans = indices.iter().map(|&index| {
            let (first, last) = self.spans[index];
            ((first as u32, last as u32), 1)
        });
        live_bytes_at_points(self.count, spans)
            .into_iter()
            .map(|live| live > 0)
            .collect()
    }

    /// For each of the buffers `members` (ascending indices), whether its component (the
    /// members linked through lifetimes that overlap, one after another) holds a buffer not
    /// marked in `before`.
    fn components_with_new(&self, members: &[usize], before: &[bool]) -> Vec<bool> {
        let mut by_first: Vec<usize> = (0..members.len()).collect();
        by_first.sort_unstable_by_key(|&at| self.spans[members[at]].0);
        let mut has_new = vec![false; members.len()];
        for run in overlap_runs(&by_first, |&at| self.spans[members[at]]) {
            let component = &by_first[run];
            let new = component.iter().any(|&at| !before[members[at]]);
            for &at in component {
                has_new[at] = new;
            }
        }
        has_new
    }

    /// The buffers live at any start step marked in `marked`, ascending.
    fn buffers_live_at(&self, marked: &[bool]) -> Vec<usize> {
        // marked_before[s]: marked steps before s.
        let mut marked_before = Vec::with_capacity(self.count + 1);
        marked_before.push(0u32);
        for &mark in marked {
            marked_before.push(marked_before[marked_before.len() - 1] + u32::from(mark));
        }
        (0..self.spans.len())
            .filter(|&index| {
                let (first, last) = self.spans[index];
                marked_before[last + 1] > marked_before[first]
            })
            .collect()
    }

    /// The start steps where some buffer ends above `bound` in the packing `offsets`.
    fn steps_above(&self, buffers: &[Buffer], offsets: &[u64], bound: u64) -> Vec<usize> {
        let mut by_first: Vec<usize> = (0..buffers.len())
            .filter(|&index| offsets[index] + buffers[index].size > bound)
            .collect();
        by_first.sort_unstable_by_key(|&index| self.spans[index].0);
        // Live buffers above the bound, by their last step: a step is above the bound while
        // one is live.
        let mut live: BinaryHeap<usize> = BinaryHeap::new();
        let mut next = 0;
        let mut above = Vec::new();
        for step in 0..self.count {
            while next < by_first.len() && self.spans[by_first[next]].0 == step {
                live.push(self.spans[by_first[next]].1);
                next += 1;
            }
            if live.peek().is_some_and(|&last| last >= step) {
                above.push(step);
            } else {
                live.clear();
            }
        }
        above
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_planner_kit::testing::{
        assert_valid_packing, buffer, random_lifetime_trace, random_lifetime_trace_over,
    };
    use memplan_planner_kit::{arena_lower_bound, pack_greedy};
    use memplan_plugin_api::{HostContext, Lifetime};
    use std::time::Duration;

    fn in_seconds(seconds: u64) -> Instant {
        Instant::now() + Duration::from_secs(seconds)
    }

    /// The first round's greedy order for `buffers`.
    fn first_round_order_of(buffers: &[Buffer]) -> Order {
        CriticalSteps::first_round_order(CriticalSteps::rest_order(buffers), buffers.len())
    }

    /// The critical-step search of `buffers` alone at their bound, with `seconds`, checked
    /// to be at the bound with a valid packing.
    fn packed_at_the_bound(buffers: &[Buffer], seconds: u64) -> CriticalPacking {
        let bound = arena_lower_bound(buffers);
        let context = HostContext::detached();
        let critical = CriticalSteps::new(buffers, bound)
            .pack(buffers, in_seconds(seconds), &context, None)
            .expect("a round completes");
        assert_eq!(critical.packing.height, bound);
        assert_valid_packing(buffers, &critical.packing);
        critical
    }

    #[test]
    fn start_steps_give_live_bytes_buffers_and_steps_above_a_height() {
        // Start steps 0, 2, 5; the last buffer ends between two of them.
        let buffers = [
            buffer(10, 0, 1),
            buffer(20, 2, 6),
            buffer(5, 0, 9),
            buffer(7, 5, 5),
            buffer(3, 2, 3),
        ];
        let steps = StartSteps::new(&buffers);
        assert_eq!(steps.count, 3);
        assert_eq!(steps.spans, [(0, 0), (1, 2), (0, 2), (2, 2), (1, 1)]);
        assert_eq!(steps.live_bytes(&buffers), [15, 28, 32]);
        assert_eq!(steps.buffers_live_at(&[false, true, false]), [1, 2, 4]);
        assert_eq!(steps.buffers_live_at(&[true, false, false]), [0, 2]);
        assert_eq!(steps.spans_of(&[0]), [true, false, false]);
        assert_eq!(steps.spans_of(&[0, 3]), [true, false, true]);
        assert_eq!(steps.spans_of(&[1, 4]), [false, true, true]);
        assert_eq!(steps.spans_of(&[]), [false, false, false]);
        // Buffers 0 and 2 overlap (start step 0), 1, 2, 3 and 4 too: one component, with a
        // buffer not marked before (0) or without (all marked).
        assert_eq!(
            steps.components_with_new(&[0, 1, 2, 3, 4], &[false, true, true, true, true]),
            [true; 5]
        );
        assert_eq!(
            steps.components_with_new(&[0, 1, 2, 3, 4], &[true; 5]),
            [false; 5]
        );
        // Without buffer 2, 0 (start step 0) is apart from 1, 3 and 4 (steps 1-2).
        assert_eq!(
            steps.components_with_new(&[0, 1, 3, 4], &[true, false, true, true, true]),
            [false, true, true, true]
        );
        assert_eq!(
            steps.components_with_new(&[0, 3], &[false, false, true, true, true]),
            [true, false]
        );
        // Offsets: only the 3 bytes at 40 (steps 2-3) and the 7 at 50 (step 5) end above 35.
        let offsets = [0, 0, 20, 50, 40];
        assert_eq!(steps.steps_above(&buffers, &offsets, 35), [1, 2]);
        assert_eq!(
            steps.steps_above(&buffers, &offsets, 57),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn the_rest_is_packed_by_size_where_few_are_live_by_start_where_more_by_area_where_many() {
        let model_like = memplan_planner_kit::testing::model_like_trace(20_000, 1);
        assert_eq!(CriticalSteps::rest_order(&model_like), Order::Size);
        // About 50 and 100 live per step.
        let spread = random_lifetime_trace_over(20_000, 1, 20_000);
        assert_eq!(CriticalSteps::rest_order(&spread), Order::Start);
        let closer = random_lifetime_trace_over(20_000, 1, 10_000);
        assert_eq!(CriticalSteps::rest_order(&closer), Order::Start);
        // About 1,000.
        let crowded = random_lifetime_trace_over(20_000, 1, 1000);
        assert_eq!(CriticalSteps::rest_order(&crowded), Order::Area);
        // Below REPACK_AROUND_FROM buffers the first round packs as the others do.
        for buffers in [&model_like, &spread, &crowded] {
            let first = first_round_order_of(buffers);
            assert_eq!(first, CriticalSteps::rest_order(buffers));
        }
    }

    #[test]
    fn the_first_round_of_a_large_arena_packs_by_start_where_the_others_pack_by_area() {
        // 200,000 buffers, about 168 live per step: the later rounds by area, the first (a
        // packing of the whole arena) by start.
        let crowded = random_lifetime_trace_over(REPACK_AROUND_FROM, 214, 60_000);
        assert_eq!(CriticalSteps::rest_order(&crowded), Order::Area);
        assert_eq!(first_round_order_of(&crowded), Order::Start);
        // About 126 live: by start in a smaller arena, by area (after a first round by start)
        // in a large one.
        let smaller = random_lifetime_trace_over(20_000, 1, 8_000);
        assert_eq!(CriticalSteps::rest_order(&smaller), Order::Start);
        let larger = random_lifetime_trace_over(REPACK_AROUND_FROM, 1, 80_000);
        assert_eq!(CriticalSteps::rest_order(&larger), Order::Area);
        assert_eq!(first_round_order_of(&larger), Order::Start);
        // Where the rest goes by start or by size anyway, the first round does too.
        let spread = random_lifetime_trace_over(REPACK_AROUND_FROM, 1, REPACK_AROUND_FROM as u32);
        assert_eq!(first_round_order_of(&spread), Order::Start);
        let model_like = memplan_planner_kit::testing::model_like_trace(REPACK_AROUND_FROM, 1);
        assert_eq!(first_round_order_of(&model_like), Order::Size);
        // And it reaches the bound through the repacking rounds.
        let critical = packed_at_the_bound(&crowded, 60);
        assert!(critical.rounds > 1, "one round: nothing was repacked");
    }

    #[test]
    fn where_the_rest_goes_by_area_smaller_arenas_repack_only_near_the_critical_buffers() {
        // About 200 live per step: by area, repacked around from REPACK_AROUND_BY_AREA_FROM
        // buffers.
        let crowded = random_lifetime_trace_over(60_000, 701, 15_000);
        let steps = CriticalSteps::new(&crowded, arena_lower_bound(&crowded));
        assert_eq!(steps.rest_order, Order::Area);
        assert!(steps.repacks_around(REPACK_AROUND_BY_AREA_FROM));
        assert!(!steps.repacks_around(REPACK_AROUND_BY_AREA_FROM - 1));
        // About 100 live: by start, the whole arena packed again below REPACK_AROUND_FROM.
        let spread = random_lifetime_trace_over(60_000, 701, 30_000);
        let steps = CriticalSteps::new(&spread, arena_lower_bound(&spread));
        assert_eq!(steps.rest_order, Order::Start);
        assert!(!steps.repacks_around(REPACK_AROUND_FROM - 1));
        assert!(steps.repacks_around(REPACK_AROUND_FROM));
        // The crowded one reaches its bound through rounds repacked around.
        let critical = packed_at_the_bound(&crowded, 60);
        assert!(critical.rounds > 1, "one round: nothing was repacked");
    }

    #[test]
    fn where_rounds_pack_the_whole_arena_few_steps_around_those_above_become_critical() {
        // 30,000 buffers, about 100 live per step: the rounds pack the whole arena again.
        // Growing by GROW_STEPS_AROUND steps it came to the bound after 3 s (1.0128 x it
        // with 2 s); by GROW_STEPS it does in about 0.15 s.
        let buffers = random_lifetime_trace_over(30_000, 411, 15_000);
        let steps = CriticalSteps::new(&buffers, arena_lower_bound(&buffers));
        assert!(!steps.repacks_around(buffers.len()));
        let critical = packed_at_the_bound(&buffers, 2);
        assert!(critical.rounds > 1, "one round: no steps grew");
    }

    #[test]
    fn a_round_whose_search_does_not_fit_in_its_trial_ends_the_rounds() {
        // About 170 live per step: the start of the first round's search (its components
        // swept) is above the bound; the search fits it in about 0.05 s.
        let buffers = random_lifetime_trace_over(20_000, 715, 6_000);
        let bound = arena_lower_bound(&buffers);
        let steps = CriticalSteps::new(&buffers, bound);
        let context = HostContext::detached();
        let no_time = steps.pack_on_trial(&buffers, in_seconds(60), u32::MAX, &context, None);
        assert!(no_time.is_none(), "the first round fitted without a search");
        let on_trial = steps
            .pack_on_trial(&buffers, in_seconds(60), 2, &context, None)
            .expect("a round completes");
        assert_eq!(on_trial.packing.height, bound);
        assert_valid_packing(&buffers, &on_trial.packing);
        // About 200 live per step: the first round's search fits at once, the second's
        // takes about 2.3 s. With 3 s, on trial (0.5 s for it) the first round's packing is
        // what it makes; without, the second round's, lower.
        let buffers = random_lifetime_trace_over(80_000, 702, 20_000);
        let steps = CriticalSteps::new(&buffers, arena_lower_bound(&buffers));
        let on_trial = steps
            .pack_on_trial(&buffers, in_seconds(3), 5, &context, None)
            .expect("the first round completes");
        assert_eq!(on_trial.rounds, 1);
        assert_valid_packing(&buffers, &on_trial.packing);
    }

    #[test]
    fn each_component_of_the_search_start_is_swept_on_its_own() {
        // Two copies of one trace (150 live per step), the second 2,000 steps after the
        // first: two components, which must come out alike.
        let copy = random_lifetime_trace_over(3000, 7, 1000);
        let later = copy.iter().map(|buffer| Buffer {
            lifetime: Lifetime::new(buffer.lifetime.first + 2000, buffer.lifetime.last + 2000),
            ..*buffer
        });
        let both: Vec<Buffer> = copy.iter().copied().chain(later).collect();
        let never = || false;
        let swept = |variant| pack_sweep_variant(&copy, variant, &never).unwrap().unwrap();
        // Any height will do: the first variant, in each component.
        let roomy = swept_by_component(&both, u64::MAX, &never).unwrap();
        let first = swept(SweepVariant::ALL[0]).offsets;
        assert_eq!((&roomy[..3000], &roomy[3000..]), (&first[..], &first[..]));
        // At the bound: the first variant within it, else the lowest of them.
        let bound = arena_lower_bound(&copy);
        let tight = swept_by_component(&both, bound, &never).unwrap();
        assert_eq!(tight[..3000], tight[3000..]);
        let packing = Packing::at(&both, tight);
        assert_valid_packing(&both, &packing);
        let heights: Vec<u64> = SweepVariant::ALL
            .map(|variant| swept(variant).height)
            .into();
        let kept = match heights.iter().position(|&height| height <= bound) {
            Some(at) => heights[at],
            None => *heights.iter().min().unwrap(),
        };
        assert_eq!(packing.height, kept);
    }

    #[test]
    fn rounds_search_up_to_three_quarters_of_the_buffers() {
        // About 300 buffers live per step: the first round takes more than two in five of
        // them, and the second, which reaches the bound, more than half.
        let buffers = random_lifetime_trace_over(20_000, 802, 3333);
        let critical = packed_at_the_bound(&buffers, 20);
        assert_eq!(critical.rounds, 2);
        assert!(
            critical.critical * 2 > buffers.len(),
            "{}",
            critical.critical
        );
        assert!(critical.critical * 4 <= buffers.len() * MOST_SEARCHED_QUARTERS);
    }

    #[test]
    fn a_random_trace_over_many_steps_is_packed_at_its_bound() {
        // About 50 buffers live per step: the live bytes come near their peak at few steps.
        let buffers = random_lifetime_trace_over(20_000, 3, 20_000);
        let bound = arena_lower_bound(&buffers);
        let greedy = pack_greedy(&buffers, Order::Area, Fit::Best);
        assert!(greedy.height > bound, "greedy alone reaches the bound");
        let steps = CriticalSteps::new(&buffers, bound);
        assert!(steps.first_critical() * 20 < buffers.len());
        let critical = packed_at_the_bound(&buffers, 20);
        assert!(critical.critical < buffers.len() / 2);
    }

    #[test]
    fn a_large_sparse_trace_reaches_its_bound_repacking_only_near_the_critical_buffers() {
        // 300,000 buffers, about 50 live per step: rounds after the first repack around the
        // critical buffers (`REPACK_AROUND_FROM`).
        let buffers = random_lifetime_trace_over(300_000, 61, 300_000);
        assert!(buffers.len() >= REPACK_AROUND_FROM);
        let critical = packed_at_the_bound(&buffers, 60);
        assert!(critical.rounds > 1, "one round: nothing was repacked");
    }

    #[test]
    fn repacking_moves_only_buffers_live_beside_a_moved_critical_one() {
        let buffers = random_lifetime_trace_over(20_000, 3, 20_000);
        let bound = arena_lower_bound(&buffers);
        let steps = CriticalSteps::new(&buffers, bound);
        let critical = &steps.first;
        let chosen: Vec<Buffer> = critical.iter().map(|&index| buffers[index]).collect();
        let never = || false;
        let first = pack_greedy(&chosen, Order::Size, Fit::Best).offsets;
        let before = steps
            .pack_around(&buffers, critical, &first, steps.rest_order, &never)
            .unwrap();
        assert_valid_packing(&buffers, &before);
        // The critical buffers elsewhere: those of the other order that moved.
        let second = pack_greedy(&chosen, Order::Start, Fit::Best).offsets;
        let moved: Vec<usize> = critical
            .iter()
            .zip(first.iter().zip(&second))
            .filter(|(_, (a, b))| a != b)
            .map(|(&index, _)| index)
            .collect();
        assert!(!moved.is_empty());
        let after = steps
            .repack_around(
                &buffers,
                before.offsets.clone(),
                critical,
                &second,
                steps.rest_order,
                &never,
            )
            .unwrap();
        assert_valid_packing(&buffers, &after);
        for (&index, &offset) in critical.iter().zip(&second) {
            assert_eq!(after.offsets[index], offset);
        }
        let beside_moved = steps.steps.buffers_live_at(&steps.steps.spans_of(&moved));
        let mut may_move = vec![false; buffers.len()];
        for index in beside_moved {
            may_move[index] = true;
        }
        let kept = (0..buffers.len()).filter(|&index| !may_move[index]).count();
        assert!(
            kept * 2 > buffers.len(),
            "most buffers are far from the moved ones"
        );
        for index in (0..buffers.len()).filter(|&index| !may_move[index]) {
            assert_eq!(
                after.offsets[index], before.offsets[index],
                "buffer {index}"
            );
        }
        // A buffer packed again that the caller fixed stays where it was fixed: here one
        // above every other buffer.
        let is_critical = |index: usize| critical.contains(&index);
        let fixed = (0..buffers.len())
            .find(|&index| may_move[index] && !is_critical(index))
            .expect("a buffer to pack again");
        let mut with_fixed = buffers.clone();
        with_fixed[fixed].fixed_offset = FixedOffset::at(before.height);
        let mut offsets = before.offsets.clone();
        offsets[fixed] = before.height;
        let after = steps
            .repack_around(
                &with_fixed,
                offsets,
                critical,
                &second,
                steps.rest_order,
                &never,
            )
            .unwrap();
        assert_valid_packing(&with_fixed, &after);
        assert_eq!(after.offsets[fixed], before.height);
    }

    #[test]
    fn traces_near_their_peak_at_most_steps_are_left_to_other_methods() {
        // Random lifetimes over 1,000 steps: 500 buffers live per step, the live bytes within
        // 10 % of their peak at most steps.
        let buffers = random_lifetime_trace(10_000, 1);
        let bound = arena_lower_bound(&buffers);
        let steps = CriticalSteps::new(&buffers, bound);
        assert!(steps.first_critical() * 2 > buffers.len());
        let context = HostContext::detached();
        assert!(steps
            .pack(&buffers, in_seconds(20), &context, None)
            .is_none());
    }

    #[test]
    fn nothing_is_packed_after_the_deadline() {
        let buffers = random_lifetime_trace_over(2_000, 1, 2_000);
        let bound = arena_lower_bound(&buffers);
        let steps = CriticalSteps::new(&buffers, bound);
        let context = HostContext::detached();
        assert!(steps
            .pack(&buffers, Instant::now(), &context, None)
            .is_none());
    }
}
