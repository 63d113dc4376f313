//! What the summary says about the operator order (`analyze::order`): the lower bound with the
//! stored order and with the best order found, and whether the plan holds for the new order
//! (then the firmware must run it) or what `--order best` would gain.

use serde::Serialize;

use crate::render::RenderPlan;

/// The `operator_order` object of the JSON summary.
#[derive(Serialize)]
pub struct OrderSummary<'a> {
    /// `best` when the plan holds for memplan's order, `stored` otherwise.
    planned_for: &'static str,
    /// The peak of live scratch bytes with the stored order.
    stored_bound: u64,
    /// The same with the best valid order found.
    best_bound: u64,
    gain_bytes: u64,
    gain_percent: f64,
    /// Whether `best_bound` is proven the least over valid orders.
    proven: bool,
    search_ms: f64,
    /// The order the plan holds for (stored operator indices in run order), when changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    run_order: Option<&'a [u32]>,
}

impl<'a> OrderSummary<'a> {
    pub fn new(plan: &'a RenderPlan) -> Option<Self> {
        let order = plan.order.as_ref()?;
        let gain = order.stored_bound - order.best_bound;
        Some(OrderSummary {
            planned_for: if order.applied { "best" } else { "stored" },
            stored_bound: order.stored_bound,
            best_bound: order.best_bound,
            gain_bytes: gain,
            gain_percent: percent(gain, order.stored_bound),
            proven: order.exact,
            search_ms: (order.search_time.as_secs_f64() * 1e5).round() / 100.0,
            run_order: plan.changed_order(),
        })
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 1e4 / whole as f64).round() / 100.0
    }
}

/// The text lines: none when no valid order lowers the bound (the model is planned as
/// stored, as before).
pub fn order_text(plan: &RenderPlan) -> Vec<String> {
    let Some(order) = plan.order.as_ref().filter(|order| order.gains()) else {
        return Vec::new();
    };
    let gain = order.stored_bound - order.best_bound;
    let least = if order.exact {
        ", proven the least"
    } else {
        ""
    };
    if order.applied {
        let carrier = if plan.emit_tflite {
            format!("{}.tflite carries it", plan.prefix)
        } else {
            format!(
                "run the operators in the order {}_tensors.h lists",
                plan.prefix
            )
        };
        vec![
            format!(
                "operator order: memplan's (--order best): lower bound {} bytes, {} with the \
                 stored order (-{gain} bytes, -{:.1}%{least})",
                order.best_bound,
                order.stored_bound,
                percent(gain, order.stored_bound)
            ),
            format!("  the plan holds for this order only: {carrier}"),
        ]
    } else {
        vec![format!(
            "operator order: as stored (lower bound {} bytes); --order best would lower it to \
             {} bytes (-{:.1}%{least})",
            order.stored_bound,
            order.best_bound,
            percent(gain, order.stored_bound)
        )]
    }
}
