//! Planner `greedy-bestfit`: decreasing-size best-fit packing in the manner of XLA's heap
//! simulator.
//!
//! Buffers are sorted (size descending, then longer lifetime, then tensor order) and each is
//! put in the smallest free gap, among the buffers live at the same time, that fits it (ties:
//! lowest offset), honouring alignment and fixed offsets. The algorithm, its indexes over time
//! and its cost are documented with [`pack_greedy`], which this planner shares with others
//! (the exact planner starts from it); the passes around it (constants, persistent tensors,
//! memories and spill, aliases, empty tensors) are the kit's ([`plan_with_packer`]).
//!
//! Options (`--planner-options`, JSON):
//! - `order`: `size` (default) | `duration` | `area` | `start` — the order buffers are taken in;
//! - `fit`: `best` (default) | `first` — smallest fitting gap, or lowest fitting gap.
//!   `{"fit":"first"}` is TFLite Micro's greedy memory planner;
//! - `time_limit_s`: seconds the planner may take (none by default; memplan's `--timeout` too).
//!
//! # Time limits
//!
//! Best fit in lifetime-start order is O(n log n) on every trace; the other orders are
//! superlinear where many buffers live at once in fragmented bytes (random lifetimes: 4.8 s
//! for 100,000 buffers by size; the kit's greedy module says why). Where a time limit is
//! given (`time_limit_s`, or memplan's `--timeout`, whichever is sooner) and the packing is
//! not done in time, it stops early enough for the kit's one-pass packing (O(n), at most
//! [`one_pass_at_the_slowest`]) and the plan's return to come within the limit and its
//! allowance (10 % and 50 ms, as `memplan bench` measures it): the one-pass packing
//! then stands in, with a warning naming the faster order. So the planner returns a plan
//! within its limit on any input, as memplan's other planners do.

use std::time::{Duration, Instant};

use memplan_planner_kit::time_limit::return_by;
use memplan_planner_kit::{
    one_pass_at_the_slowest, pack_greedy_until, pack_one_pass, plan_with_packer, Buffer, Fit,
    Order, Packer, Packing, PlannerOptions,
};
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanRequest, Planner};

pub struct GreedyBestFit;

impl Planner for GreedyBestFit {
    const NAME: &'static str = "greedy-bestfit";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "largest first, each into the smallest gap that fits among buffers live at the same time \
         (option time_limit_s, none by default)";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        let made = Instant::now();
        let packer = GreedyPacker {
            made: Some(made),
            ..GreedyPacker::from_options(&request.options)?
        };
        context.debug(&format!(
            "greedy-bestfit: order {}, fit {}",
            packer.order.name(),
            packer.fit.name()
        ));
        plan_with_packer(request, context, &packer)
    }
}

// Linked into memplan (its built-in planners); `cdylib/` exports the same planners from a plugin file.
memplan_plugin_api::planner_root_module!(GreedyBestFit);

/// [`pack_greedy`] with a chosen order and fit, as a [`Packer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GreedyPacker {
    pub order: Order,
    pub fit: Fit,
    /// The planner's own time limit (`time_limit_s`); memplan's `--timeout` applies as well.
    pub time_limit: Option<Duration>,
    /// When the planner was called, which its time limit counts from (`None`: when the
    /// packing began).
    pub made: Option<Instant>,
}

impl GreedyPacker {
    /// Reads `order`, `fit` and `time_limit_s` from the planner options JSON; rejects anything
    /// else.
    pub fn from_options(json: &str) -> Result<GreedyPacker, PlanError> {
        let mut options = PlannerOptions::parse(GreedyBestFit::NAME, json)?;
        let packer = GreedyPacker {
            order: options
                .take_choice("order", &Order::ALL)?
                .unwrap_or_default(),
            fit: options.take_choice("fit", &Fit::ALL)?.unwrap_or_default(),
            time_limit: options.take_seconds("time_limit_s")?,
            made: None,
        };
        options.finish(&["order", "fit", "time_limit_s"])?;
        Ok(packer)
    }

    /// When the packing of `count` buffers must stop for the one-pass packing to stand in
    /// within the sooner of the planner's limit (counted from `made`, else from `now`) and the
    /// host's (`host_left` of it is left `now`): the kit's `return_by` (the limit's allowance
    /// less the time to return) less the one-pass packing at its slowest, and not before
    /// `now`. `None` without a limit.
    fn stop_by(&self, now: Instant, host_left: Option<Duration>, count: usize) -> Option<Instant> {
        let made = self.made.unwrap_or(now);
        let own = self.time_limit.and_then(|limit| made.checked_add(limit));
        let host = host_left.and_then(|left| now.checked_add(left));
        let sooner = match (own, host) {
            (Some(own), Some(host)) => own.min(host),
            (own, host) => own.or(host)?,
        };
        let latest = return_by(made, sooner, count).checked_sub(one_pass_at_the_slowest(count));
        Some(latest.map_or(now, |latest| latest.max(now)))
    }
}

impl Packer for GreedyPacker {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        let stop_by = self.stop_by(Instant::now(), context.remaining(), buffers.len());
        // Asks the host between placements, so that --timeout stops even a slow packing.
        let stop = || context.should_stop() || stop_by.is_some_and(|by| Instant::now() >= by);
        match pack_greedy_until(buffers, self.order, self.fit, &stop) {
            Ok(packing) => Ok(packing),
            Err(_stopped) => Ok(self.one_pass_stands_in(buffers, context)),
        }
    }
}

impl GreedyPacker {
    /// The kit's one-pass packing of `buffers`, for a packing in this order that the time
    /// limit cut short, with a note and a warning that say so.
    fn one_pass_stands_in(&self, buffers: &[Buffer], context: &HostContext) -> Packing {
        let mut packing = pack_one_pass(buffers);
        let faster = match (self.order, self.fit) {
            // The one order and fit that is O(n log n) on every trace shape.
            (Order::Start, Fit::Best) => String::new(),
            _ => "; best fit in lifetime-start order (--planner-options '{\"order\":\"start\"}') \
                  packs any trace in O(n log n), a million buffers in about half a second"
                .to_string(),
        };
        packing.note = format!(
            "{} fit in {} order did not place all {} buffers within the time limit; the kit's \
             one-pass packing (height {}) stands in: allow more time (option time_limit_s, \
             --timeout) for the greedy packing{faster}",
            self.fit.name(),
            self.order.name(),
            buffers.len(),
            packing.height,
        );
        context.warn(&format!("{}: {}", GreedyBestFit::NAME, packing.note));
        packing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use memplan_planner_kit::testing::{
        assert_valid_packing, assert_valid_plan, single_memory_request, tflm_greedy_medium,
        with_deadline,
    };
    use memplan_plugin_api::abi_stable::std_types::RString;
    use memplan_plugin_api::PlanErrorKind;

    #[test]
    fn options_default_to_size_order_and_best_fit() {
        assert_eq!(
            GreedyPacker::from_options("{}").unwrap(),
            GreedyPacker::default()
        );
        assert_eq!(
            GreedyPacker::from_options(r#"{"order":"area","fit":"first"}"#).unwrap(),
            GreedyPacker {
                order: Order::Area,
                fit: Fit::First,
                ..GreedyPacker::default()
            }
        );
    }

    #[test]
    fn unknown_and_badly_typed_options_are_invalid_requests() {
        for (json, named) in [
            (r#"{"fits":"best"}"#, "`fits`"),
            (r#"{"fit":"worst"}"#, "`best`, `first`"),
            (r#"{"order":1}"#, "`size`, `duration`, `area`, `start`"),
            (r#"{"time_limit_s":-1}"#, "time_limit_s"),
        ] {
            let error = GreedyPacker::from_options(json).unwrap_err();
            assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
            assert!(error.message.contains(named), "{json}: {}", error.message);
        }
    }

    #[test]
    fn first_fit_reproduces_tflm_on_the_inline_tflm_greedy_medium() {
        let buffers = tflm_greedy_medium();
        let packing = GreedyPacker::from_options(r#"{"fit":"first"}"#)
            .unwrap()
            .pack(&buffers, &HostContext::detached())
            .unwrap();
        assert_valid_packing(&buffers, &packing);
        assert_eq!(packing.height, 90);
    }

    #[test]
    fn a_stop_request_ends_the_packing_early_and_the_one_pass_packing_stands_in() {
        // Unlimited, best fit by size on 100,000 random-lifetime buffers takes about 5 s;
        // given 200 ms by the host, the packing stops early enough for the one-pass packing
        // to stand in. The margin is for unoptimised test builds on a loaded machine (the
        // release build's figures are in docs/planners.md, "greedy-bestfit under a time limit").
        let buffers = memplan_planner_kit::testing::random_lifetime_trace(100_000, 1);
        let one_pass = pack_one_pass(&buffers);
        for options in ["{}", r#"{"fit":"first","order":"start"}"#] {
            let start = Instant::now();
            let deadline = start + Duration::from_millis(200);
            let packing = GreedyPacker::from_options(options)
                .unwrap()
                .pack(&buffers, &with_deadline(&deadline))
                .expect("the one-pass packing stands in");
            let elapsed = start.elapsed();
            assert_valid_packing(&buffers, &packing);
            assert_eq!(packing.offsets, one_pass.offsets, "{options}");
            assert!(
                packing.note.contains("one-pass packing"),
                "{}",
                packing.note
            );
            // Where another order would have been quick, the note names it.
            assert!(
                packing.note.contains(r#"'{"order":"start"}'"#),
                "{}",
                packing.note
            );
            assert!(elapsed < Duration::from_secs(10), "{options}: {elapsed:?}");
        }
    }

    #[test]
    fn a_packing_done_in_time_is_the_greedy_one() {
        let buffers = tflm_greedy_medium();
        let packer = GreedyPacker::from_options(r#"{"time_limit_s": 5}"#).unwrap();
        assert_eq!(packer.time_limit, Some(Duration::from_secs(5)));
        let packing = packer.pack(&buffers, &HostContext::detached()).unwrap();
        let unlimited = GreedyPacker::default()
            .pack(&buffers, &HostContext::detached())
            .unwrap();
        assert_eq!(packing.offsets, unlimited.offsets);
        assert!(packing.note.is_empty(), "{}", packing.note);
    }

    #[test]
    fn the_packing_stops_for_the_one_pass_packing_and_the_return_within_the_allowance() {
        let now = Instant::now();
        let ms = |at: Option<Instant>| at.map(|at| at.duration_since(now).as_millis());
        let within = |seconds: f64| GreedyPacker {
            time_limit: Some(Duration::from_secs_f64(seconds)),
            made: Some(now),
            ..GreedyPacker::default()
        };
        // 1 s and 1,000,000 buffers: 1,150 ms, less 40 ms to return and 150 ms for the
        // one-pass packing.
        assert_eq!(ms(within(1.0).stop_by(now, None, 1_000_000)), Some(960));
        // The host's limit where it is sooner, its allowance counted the same way.
        let host = Some(Duration::from_millis(500));
        assert_eq!(ms(within(1.0).stop_by(now, host, 1_000_000)), Some(410));
        assert_eq!(
            ms(GreedyPacker::default().stop_by(now, host, 1_000)),
            Some(574)
        );
        // No time for the packing at all: it stops at once.
        assert_eq!(ms(within(0.0).stop_by(now, None, 2_000_000)), Some(0));
        // No limit: it runs to its end.
        assert_eq!(GreedyPacker::default().stop_by(now, None, 1_000_000), None);
    }

    #[test]
    fn plans_a_request_through_the_kit() {
        let buffers = tflm_greedy_medium();
        let mut request = single_memory_request(&buffers);
        request.options = RString::from(r#"{"fit":"first"}"#);
        let plan = GreedyBestFit::plan(&request, &HostContext::detached()).unwrap();
        assert_valid_plan(&request, &plan);
        assert_eq!(plan.arenas.len(), 1);
        assert_eq!(
            plan.arenas[0].size, 96,
            "90 rounded up to the arena alignment"
        );
    }
}
