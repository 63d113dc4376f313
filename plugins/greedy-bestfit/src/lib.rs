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
//!   `{"fit":"first"}` is TFLite Micro's greedy memory planner.

use memplan_planner_kit::{
    pack_greedy_until, plan_with_packer, Buffer, Fit, Order, Packer, Packing, PlannerOptions,
};
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanRequest, Planner};

pub struct GreedyBestFit;

impl Planner for GreedyBestFit {
    const NAME: &'static str = "greedy-bestfit";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "largest first, each into the smallest gap that fits among buffers live at the same time";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        let packer = GreedyPacker::from_options(&request.options)?;
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
}

impl GreedyPacker {
    /// Reads `order` and `fit` from the planner options JSON; rejects anything else.
    pub fn from_options(json: &str) -> Result<GreedyPacker, PlanError> {
        let mut options = PlannerOptions::parse(GreedyBestFit::NAME, json)?;
        let packer = GreedyPacker {
            order: options
                .take_choice("order", &Order::ALL)?
                .unwrap_or_default(),
            fit: options.take_choice("fit", &Fit::ALL)?.unwrap_or_default(),
        };
        options.finish(&["order", "fit"])?;
        Ok(packer)
    }
}

impl Packer for GreedyPacker {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        // Asks the host between placements, so that --timeout stops even a slow packing.
        pack_greedy_until(buffers, self.order, self.fit, &|| context.should_stop()).map_err(
            |stopped| {
                let mut error = stopped.into_plan_error(buffers.len());
                if (self.order, self.fit) != (Order::Start, Fit::Best) {
                    // The one order and fit that is O(n log n) on every trace shape.
                    error.message = format!(
                        "{}; best fit in lifetime-start order (--planner-options \
                         '{{\"order\":\"start\"}}') packs any trace in O(n log n), a million \
                         buffers in about half a second",
                        error.message
                    )
                    .into();
                }
                error
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

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
                fit: Fit::First
            }
        );
    }

    #[test]
    fn unknown_and_badly_typed_options_are_invalid_requests() {
        for (json, named) in [
            (r#"{"fits":"best"}"#, "`fits`"),
            (r#"{"fit":"worst"}"#, "`best`, `first`"),
            (r#"{"order":1}"#, "`size`, `duration`, `area`, `start`"),
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
    fn a_stop_request_ends_a_million_buffer_packing_early() {
        // Unlimited, best fit on a million random-lifetime buffers takes minutes; asked to
        // stop 200 ms in, the packing gives up within a poll and says it was cancelled. The
        // margin is for unoptimised test builds on a loaded machine (the release build's
        // figures are pack_bench's: `--shapes --limit S`).
        let buffers = memplan_planner_kit::testing::random_lifetime_trace(1_000_000, 1);
        for options in ["{}", r#"{"fit":"first","order":"start"}"#] {
            let start = Instant::now();
            let deadline = start + Duration::from_millis(200);
            let result = GreedyPacker::from_options(options)
                .unwrap()
                .pack(&buffers, &with_deadline(&deadline));
            let elapsed = start.elapsed();
            let error = result.expect_err("stopped before a plan");
            assert_eq!(error.kind, PlanErrorKind::Cancelled, "{options}");
            assert!(error.message.contains("time limit"), "{}", error.message);
            // Where another order would have been quick, the message names it.
            assert!(
                error.message.contains(r#"'{"order":"start"}'"#),
                "{}",
                error.message
            );
            assert!(elapsed < Duration::from_secs(10), "{options}: {elapsed:?}");
        }
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
