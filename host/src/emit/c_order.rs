//! The operator order in `{prefix}_tensors.h`, when memplan changed it (`--order best`): the
//! plan holds for that order only (lifetimes, and so which tensors may share bytes, follow
//! from it), so the header lists it and says that the firmware must run it. Written as
//! macros, so that the header still defines no object.

use std::fmt::{self, Write};

use super::c_text::comment_text;
use crate::render::RenderPlan;

/// Entries per line of the order's initializer list.
const PER_LINE: usize = 16;

/// Nothing when the plan holds for the stored order.
pub fn write_operator_order(out: &mut dyn Write, plan: &RenderPlan) -> fmt::Result {
    let (Some(order), Some(found)) = (plan.changed_order(), plan.order.as_ref()) else {
        return Ok(());
    };
    let (p, pm) = (&plan.prefix, plan.macro_prefix());
    let run = if plan.emit_tflite {
        format!(
            "the firmware must run {p}.tflite (memplan wrote it with its operators in this\n   \
             order) or run the operators in this order."
        )
    } else {
        "the firmware must run the operators in this order.".to_string()
    };
    writeln!(
        out,
        "/* This plan holds for one operator order only, which memplan chose (--order best):\n   \
         lower bound {} bytes, {} with the stored order. Any other order corrupts tensors:\n   \
         {run}\n   {pm}_OPERATOR_ORDER lists the operators' indices in the input model \
         (subgraph 0\n   of a .tflite) in run order.",
        found.best_bound, found.stored_bound
    )?;
    for (position, &operator) in order.iter().enumerate() {
        let op_type = found
            .operator_types
            .get(operator as usize)
            .map_or(String::new(), |name| format!(" ({})", comment_text(name)));
        writeln!(out, "     {}: operator {operator}{op_type}", position + 1)?;
    }
    writeln!(out, "*/")?;
    writeln!(out, "#define {pm}_OPERATOR_ORDER_CHANGED 1")?;
    writeln!(out, "#define {pm}_NUM_OPERATORS {}u", order.len())?;
    write!(out, "#define {pm}_OPERATOR_ORDER {{")?;
    for (index, &operator) in order.iter().enumerate() {
        match (index, index % PER_LINE) {
            (0, _) => write!(out, " \\\n    ")?,
            (_, 0) => write!(out, ", \\\n    ")?,
            _ => write!(out, ", ")?,
        }
        write!(out, "{operator}u")?;
    }
    writeln!(out, " \\\n}}")?;
    Ok(())
}
