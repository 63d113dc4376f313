//! Planner `portfolio`, memplan's default: the smallest plan the shipped methods find within a
//! time budget, and a note saying which method won and whether it is proven optimal.
//!
//! Per arena (the kit's `plan_with_packer` does constants, persistent tensors, memories, spill
//! and aliases around it):
//! 1. the arena's lower bound (the one memplan reports: `bounds::arena_lower_bound`). No
//!    packing is lower, so a candidate that reaches it ends the search, proven optimal;
//! 2. cheap candidates, each O(n log n): the kit's greedy packer by decreasing size with best
//!    and first fit (first fit is TFLite Micro's planner), by duration and by area (XLA's heap
//!    simulator keeps the best of several such orders), two at a time on two threads. Above
//!    [`ONLY_TWO_GREEDY_ABOVE`] buffers only the first two run, so a million-tensor model plans
//!    in well under a second;
//! 3. while the best is above the bound, the `exact` branch-and-bound search (this crate),
//!    which reaches the bound on every shipped model in milliseconds and on MiniMalloc's hard
//!    instances within a second, until the budget (`time_limit_s`, default
//!    [`DEFAULT_TIME_LIMIT`], shared by every arena of the plan; the host's `--timeout` too)
//!    runs out. Arenas of more than [`EXACT_MAX_BUFFERS`] buffers skip it: its setup alone would
//!    not fit the budget, and greedy is within a few percent there.
//!
//! Every candidate is deterministic; only the search depends on the clock, and only when the
//! budget runs out before it proves its plan optimal (the note says so).

use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use memplan_planner_kit::{
    pack_greedy_until, plan_with_packer, Buffer, Fit, Order, Packer, Packing, PlannerOptions,
    Stopped,
};
use memplan_plugin_api::bounds;
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanErrorKind, PlanRequest, Planner};

use crate::ExactPacker;

/// Search time for a whole plan when `time_limit_s` is not given.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(1);
/// Arenas with more buffers get the two size-ordered greedy candidates only.
pub const ONLY_TWO_GREEDY_ABOVE: usize = 200_000;
/// Arenas with more buffers do not run the exact search.
pub const EXACT_MAX_BUFFERS: usize = 50_000;

/// The greedy candidates, in the order they are tried, with the name the note gives them.
const GREEDY: [(Order, Fit, &str); 4] = [
    (Order::Size, Fit::Best, "greedy best fit by size"),
    (
        Order::Size,
        Fit::First,
        "greedy first fit by size (TFLite Micro's)",
    ),
    (Order::Duration, Fit::Best, "greedy best fit by duration"),
    (Order::Area, Fit::Best, "greedy best fit by area"),
];

pub struct Portfolio;

impl Planner for Portfolio {
    const NAME: &'static str = "portfolio";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "the smallest of greedy orders and fits, then the exact \
         search while time remains (option time_limit_s, default 1); says which won";

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

/// The lower bound of one arena holding `buffers` (the host's figure: [`bounds::arena_lower_bound`]).
pub fn arena_lower_bound(buffers: &[Buffer]) -> u64 {
    bounds::arena_lower_bound(
        buffers
            .iter()
            .map(|buffer| (buffer.size, buffer.alignment, buffer.lifetime)),
    )
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
        let mut best: Option<(Packing, String)> = None;
        // Two candidates at a time, one per core: their results are taken in list order, so
        // the kept plan is the one a single thread would keep.
        for pair in GREEDY[..greedy_count].chunks(2) {
            if best
                .as_ref()
                .is_some_and(|(packing, _)| packing.height <= bound)
                || (best.is_some() && context.should_stop())
            {
                break;
            }
            // The host's stop request is asked on this thread (the context is not shared)
            // and passed on to the other candidate's thread through `give_up`.
            let give_up = AtomicBool::new(false);
            let candidates: Vec<(Result<Packing, Stopped>, &str)> = std::thread::scope(|scope| {
                let others: Vec<_> = pair[1..]
                    .iter()
                    .map(|&(order, fit, name)| {
                        let give_up = &give_up;
                        scope.spawn(move || {
                            let stop = || give_up.load(Ordering::Relaxed);
                            (pack_greedy_until(buffers, order, fit, &stop), name)
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
                let (order, fit, name) = pair[0];
                let mut candidates = vec![(pack_greedy_until(buffers, order, fit, &asked), name)];
                for other in others {
                    while !other.is_finished() {
                        asked();
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    match other.join() {
                        Ok(candidate) => candidates.push(candidate),
                        Err(panic) => std::panic::resume_unwind(panic),
                    }
                }
                candidates
            });
            for (candidate, name) in candidates {
                let Ok(candidate) = candidate else {
                    continue;
                };
                if best
                    .as_ref()
                    .is_none_or(|(packing, _)| candidate.height < packing.height)
                {
                    best = Some((candidate, name.to_string()));
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
        let (mut packing, mut winner) = best.expect("at least one greedy candidate ran");
        let mut search_note = None;
        if packing.height > bound && buffers.len() <= EXACT_MAX_BUFFERS && !context.should_stop() {
            let searched = self.exact.pack_within(buffers, room, context)?;
            if searched.height < packing.height {
                winner = "exact search".to_string();
                packing = searched;
            } else {
                search_note = Some(searched.note.clone());
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
