//! Planner `portfolio`, memplan's default: the smallest plan the shipped methods find within a
//! time budget, and a note saying which method won and whether it is proven optimal.
//!
//! Per arena (the kit's `plan_with_packer` does constants, persistent tensors, memories, spill
//! and aliases around it):
//! 1. the arena's lower bound (the one memplan reports: the kit's `arena_lower_bound`). No
//!    packing is lower, so a candidate that reaches it ends the search, proven optimal;
//! 2. cheap candidates, each O(n log n): the kit's greedy packer by decreasing size with best
//!    and first fit (first fit is TFLite Micro's planner), by duration, by area (XLA's heap
//!    simulator keeps the best of several such orders) and by lifetime start with first and
//!    best fit (a linear scan over time), two at a time on two threads. Above
//!    [`ONLY_TWO_GREEDY_ABOVE`] buffers only the first two run, so a million-tensor model plans
//!    in well under a second;
//! 3. while the best is above the bound, on arenas of [`CLIMB_FROM`] buffers or more, hill
//!    climbing over the winner's placement order (as Arm's Vela does, [`climb`]): a buffer
//!    that ends at the top is swapped with one placed before it, and the swap kept when the
//!    packing is no higher. A fixed number of packings, scaled to the arena ([`CLIMB_WORK`]),
//!    so it stays deterministic;
//! 4. while the best is above the bound, the `exact` branch-and-bound search (this crate),
//!    which reaches the bound on every shipped model in milliseconds and on MiniMalloc's hard
//!    instances within a second, until the budget (`time_limit_s`, default
//!    [`DEFAULT_TIME_LIMIT`], shared by every arena of the plan; the host's `--timeout` too)
//!    runs out. Arenas of more than [`EXACT_MAX_BUFFERS`] buffers skip it: the search keeps
//!    its deadline and memory there too, but starts again from greedy packings of its own,
//!    which take seconds at that size, and on the large traces measured (training traces of
//!    62,000 buffers, random lifetimes of 100,000) found nothing below the greedy candidates
//!    within 10 s.
//!
//! Every candidate is deterministic; only the search depends on the clock, and only when the
//! budget runs out before it proves its plan optimal (the note says so).

use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use memplan_planner_kit::{
    arena_lower_bound, greedy_ranks, pack_greedy_ranked, pack_greedy_until, plan_with_packer,
    Buffer, Fit, Order, Packer, Packing, PlannerOptions, Stopped, XorShift64Star,
};
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanErrorKind, PlanRequest, Planner};

use crate::packer::ExactPacker;

/// Search time for a whole plan when `time_limit_s` is not given.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(1);
/// Arenas with more buffers get the two size-ordered greedy candidates only.
pub const ONLY_TWO_GREEDY_ABOVE: usize = 200_000;
/// Arenas with more buffers do not run the exact search.
pub const EXACT_MAX_BUFFERS: usize = 50_000;

/// A greedy candidate: its order, its fit and the name the note gives it.
type Candidate = (Order, Fit, &'static str);

/// The greedy candidates, in the order they are tried.
const GREEDY: [Candidate; 6] = [
    (Order::Size, Fit::Best, "greedy best fit by size"),
    (
        Order::Size,
        Fit::First,
        "greedy first fit by size (TFLite Micro's)",
    ),
    (Order::Duration, Fit::Best, "greedy best fit by duration"),
    (Order::Area, Fit::Best, "greedy best fit by area"),
    (
        Order::Start,
        Fit::First,
        "greedy first fit by lifetime start",
    ),
    (Order::Start, Fit::Best, "greedy best fit by lifetime start"),
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
        let packer = PortfolioPacker {
            exact: ExactPacker::new(time_limit.unwrap_or(DEFAULT_TIME_LIMIT)),
        };
        plan_with_packer(request, context, &packer)
    }
}

/// Packs one arena with the portfolio; see the module documentation.
pub struct PortfolioPacker {
    /// Holds the plan's deadline, shared by every arena.
    exact: ExactPacker,
}

impl Packer for PortfolioPacker {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        self.pack_within(buffers, None, context)
    }

    /// The greedy candidates, then the exact search (told `room`, so that it aims at the
    /// budget first when the greedy packings exceed it).
    fn pack_within(
        &self,
        buffers: &[Buffer],
        room: Option<u64>,
        context: &HostContext,
    ) -> Result<Packing, PlanError> {
        let bound = arena_lower_bound(buffers);
        let greedy_count = if buffers.len() > ONLY_TWO_GREEDY_ABOVE {
            2
        } else {
            GREEDY.len()
        };
        let mut best: Option<(Packing, String, Order, Fit)> = None;
        // Two candidates at a time, one per core: their results are taken in list order, so
        // the kept plan is the one a single thread would keep.
        for pair in GREEDY[..greedy_count].chunks(2) {
            if best
                .as_ref()
                .is_some_and(|(packing, ..)| packing.height <= bound)
                || (best.is_some() && context.should_stop())
            {
                break;
            }
            // The host's stop request is asked on this thread (the context is not shared)
            // and passed on to the other candidate's thread through `give_up`.
            let give_up = AtomicBool::new(false);
            let candidates: Vec<(Result<Packing, Stopped>, &Candidate)> =
                std::thread::scope(|scope| {
                    // The other thread wakes this one when it is done, so that waiting for
                    // it costs no more than it takes (a sleep of a few ms was most of the
                    // planning time of a small model).
                    let this = std::thread::current();
                    let others: Vec<_> = pair[1..]
                        .iter()
                        .map(|candidate| {
                            let give_up = &give_up;
                            let this = this.clone();
                            scope.spawn(move || {
                                let stop = || give_up.load(Ordering::Relaxed);
                                let (order, fit, _) = *candidate;
                                let packed = pack_greedy_until(buffers, order, fit, &stop);
                                this.unpark();
                                (packed, candidate)
                            })
                        })
                        .collect();
                    let asked = || {
                        let stop = context.should_stop();
                        if stop {
                            give_up.store(true, Ordering::Relaxed);
                        }
                        stop
                    };
                    let (order, fit, _) = pair[0];
                    let mut candidates =
                        vec![(pack_greedy_until(buffers, order, fit, &asked), &pair[0])];
                    for other in others {
                        while !other.is_finished() {
                            asked();
                            std::thread::park_timeout(std::time::Duration::from_millis(2));
                        }
                        match other.join() {
                            Ok(candidate) => candidates.push(candidate),
                            Err(panic) => std::panic::resume_unwind(panic),
                        }
                    }
                    candidates
                });
            for (candidate, &(order, fit, name)) in candidates {
                let Ok(candidate) = candidate else {
                    continue;
                };
                if best
                    .as_ref()
                    .is_none_or(|(packing, ..)| candidate.height < packing.height)
                {
                    best = Some((candidate, name.to_string(), order, fit));
                }
            }
            if best.is_none() {
                return Err(PlanError::new(
                    PlanErrorKind::Cancelled,
                    format!(
                        "stopped at the time limit while placing {} buffers, before any greedy \
                         candidate was complete",
                        buffers.len()
                    ),
                ));
            }
        }
        let (mut packing, mut winner, order, fit) =
            best.expect("at least one greedy candidate ran");
        if packing.height > bound && (CLIMB_FROM..=EXACT_MAX_BUFFERS).contains(&buffers.len()) {
            let deadline = self.exact.deadline();
            let stop = || context.should_stop() || std::time::Instant::now() >= deadline;
            let steps = (CLIMB_WORK / buffers.len()).min(CLIMB_MAX_STEPS);
            if let Some(climbed) = climb(buffers, order, fit, bound, steps, &stop) {
                if climbed.height < packing.height {
                    winner = format!("hill climbing from {winner}");
                    packing = climbed;
                }
            }
        }
        let mut search_note = None;
        if packing.height > bound && buffers.len() <= EXACT_MAX_BUFFERS && !context.should_stop() {
            // The search fails with `Cancelled` only when the deadline came before its own
            // start: the greedy candidate stands.
            match self.exact.pack_within(buffers, room, context) {
                Err(error) if error.kind == PlanErrorKind::Cancelled => {}
                Err(error) => return Err(error),
                Ok(searched) if searched.height < packing.height => {
                    winner = "exact search".to_string();
                    packing = searched;
                }
                Ok(searched) => search_note = Some(searched.note),
            }
        }
        packing.note = verdict(&winner, packing.height, bound, &packing.note, search_note);
        context.debug(&format!(
            "portfolio: {} buffers: {}",
            buffers.len(),
            packing.note
        ));
        Ok(packing)
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
    format!("{winner} won, {gap:.1}% above the lower bound {bound}{search}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_planner_kit::pack_greedy;
    use memplan_planner_kit::testing::{
        assert_valid_packing, buffer, rectangle_cut, tflm_greedy_medium,
    };

    fn packer(seconds: f64) -> PortfolioPacker {
        PortfolioPacker {
            exact: ExactPacker::new(Duration::from_secs_f64(seconds)),
        }
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
                .starts_with("greedy best fit by size won, proven optimal"),
            "{}",
            packing.note
        );
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
