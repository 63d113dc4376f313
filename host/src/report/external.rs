//! The external tensors in the `memplan plan` summary: the buffers the firmware binds
//! (the roots of external alias groups; their views are in them), which take no arena bytes.

use serde::Serialize;

use crate::render::RenderPlan;

/// One external buffer in the JSON summary.
#[derive(Serialize)]
pub struct ExternalSummary<'a> {
    pub tensor: &'a str,
    pub kind: &'static str,
    pub size: u64,
    pub alignment: u64,
}

/// The external buffers of `plan`, in tensor order.
pub fn summaries(plan: &RenderPlan) -> Vec<ExternalSummary<'_>> {
    plan.tensors
        .iter()
        .filter(|tensor| tensor.external && tensor.alias_of.is_none())
        .map(|tensor| ExternalSummary {
            tensor: &tensor.id,
            kind: tensor.kind.as_str(),
            size: tensor.size,
            alignment: tensor.alignment,
        })
        .collect()
}

/// The text line about them, e.g. `external (bound by the firmware, in no arena): 2 buffers,
/// 110 bytes: image (input, 100 bytes), probs (output, 10 bytes)`; none without them.
pub fn text(plan: &RenderPlan) -> Option<String> {
    /// Buffers named before "and N more".
    const SHOWN: usize = 8;
    let buffers = summaries(plan);
    if buffers.is_empty() {
        return None;
    }
    let bytes: u64 = buffers.iter().map(|buffer| buffer.size).sum();
    let mut named: Vec<String> = buffers
        .iter()
        .take(SHOWN)
        .map(|buffer| format!("{} ({}, {} bytes)", buffer.tensor, buffer.kind, buffer.size))
        .collect();
    if buffers.len() > SHOWN {
        named.push(format!("and {} more", buffers.len() - SHOWN));
    }
    Some(format!(
        "external (bound by the firmware, in no arena): {} buffer{}, {bytes} bytes: {}",
        buffers.len(),
        if buffers.len() == 1 { "" } else { "s" },
        named.join(", ")
    ))
}
