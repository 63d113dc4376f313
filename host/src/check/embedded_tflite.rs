//! `memplan check model.tflite` without a plan file: checks the offline plan a model already
//! carries (`OfflineMemoryAllocation`, written by memplan or by another tool such as Arm
//! Vela) against TensorFlow Lite Micro's lifetimes, which TFLM itself never does
//! (`facts/tflm-offline-plan.md`: it checks nothing about offline offsets).
//!
//! Violations, every one reported:
//! - two offline tensors share bytes while both are live (the shared overlap sweep);
//! - an offset that is not a multiple of 16 (TFLM's buffer alignment: it places run-time
//!   buffers at an offline buffer's offset + its rounded size, so they are misaligned too);
//! - an offset TFLM ignores: for a constant tensor, a VAR_HANDLE output, an empty tensor or one
//!   the run never uses;
//! - an offset for a variable tensor: TFLM then plans it in the head from before the first
//!   step to its last use, so later buffers overwrite its state between invocations.
//!
//! With no violation, the report gives the head TFLM reaches with the plan (its online
//! buffers, kernel scratch buffers included, placed around the offline ones, simulated).

use crate::analyze::lifetimes::tflite_micro::TFLM_ALIGNMENT;
use crate::analyze::Analysis;
use crate::error::{Error, Result};
use crate::input::graph::TflmRole;
use crate::placement::sweep::{collisions, Span};
use crate::placement::tflm_greedy::{tflm_buffers, tflm_head};
use memplan_plugin_api::Lifetime;

/// One problem of an embedded plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddedViolation {
    /// `overlap`, `misaligned`, `ignored`, `variable`, or `order` (the stored operator order is
    /// not valid, `analyze::order::stored`).
    pub kind: &'static str,
    /// The tensor, as `12 (name)`.
    pub tensor: String,
    pub message: String,
}

/// The verdict on an embedded plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddedPlanReport {
    /// Tensors the plan gives an offset (not -1).
    pub offline_tensors: usize,
    pub violations: Vec<EmbeddedViolation>,
    /// TFLM's head with the plan, `None` when it cannot be told (too many buffers, or kernel
    /// scratch buffers memplan cannot size).
    pub head: Option<u64>,
    /// TFLM's head with no offline plan, for comparison.
    pub head_alone: Option<u64>,
    /// Operators whose kernel scratch buffers memplan cannot size.
    pub unknown_scratch: Vec<String>,
}

/// An offline tensor's bytes and lifetime, for the overlap sweep.
struct OfflineSpan {
    offset: u64,
    size: u64,
    lifetime: Lifetime,
}

impl Span for OfflineSpan {
    fn offset(&self) -> u64 {
        self.offset
    }
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
    fn lifetime(&self) -> Lifetime {
        self.lifetime
    }
}

/// Checks the offline plan the analysed `.tflite` model carries. Bad input (exit 2) when the
/// model is not a `.tflite` or carries no plan.
pub fn check_embedded_plan(analysis: &Analysis) -> Result<EmbeddedPlanReport> {
    let file = analysis.source.display();
    let origin = analysis.tflite.as_deref().ok_or_else(|| {
        Error::input(format!(
            "{file}: without a plan file, `memplan check` checks the offline plan a .tflite \
             model carries, and this is not a .tflite model; give the plan file: memplan check \
             MODEL PLAN.json"
        ))
    })?;
    let offsets = origin.embedded_offsets.as_deref().ok_or_else(|| {
        Error::input(format!(
            "{file}: the model carries no offline plan (no OfflineMemoryAllocation metadata); \
             give a plan file (memplan check MODEL PLAN.json), or write one into the model with \
             memplan plan MODEL --emit-tflite"
        ))
    })?;
    let request = &analysis.request;
    // Model tensor of each position in the offsets list.
    let mut model_tensor = vec![None; origin.tensor_count];
    for (index, position) in origin.tflite_index.iter().enumerate() {
        if let Some(position) = position {
            model_tensor[*position as usize] = Some(index);
        }
    }
    let describe = |position: usize| match model_tensor[position] {
        Some(index) => {
            let id = request.tensors[index].id.as_str();
            match analysis.name_of(index) {
                name if name != id => format!("{id} ({name})"),
                _ => id.to_string(),
            }
        }
        None => format!("#{position} (in the offsets list)"),
    };

    let mut violations = Vec::new();
    let mut spans = Vec::new();
    let mut span_tensor = Vec::new();
    let mut offline_tensors = 0;
    for (position, &offset) in offsets.iter().enumerate() {
        if offset == -1 {
            continue;
        }
        offline_tensors += 1;
        let tensor = describe(position);
        let ignored = |why: &str| EmbeddedViolation {
            kind: "ignored",
            tensor: tensor.clone(),
            message: format!(
                "offset {offset} is given for {why}, which TFLite Micro does not plan, so it \
                 ignores the offset; give -1"
            ),
        };
        match origin.roles[position] {
            TflmRole::Constant => {
                violations.push(ignored("a constant tensor (its bytes are in the model)"))
            }
            TflmRole::ResourceHandle => violations.push(ignored(
                "an output of VAR_HANDLE (it points at persistent op data)",
            )),
            TflmRole::Empty => violations.push(ignored("an empty tensor")),
            TflmRole::Unused => violations.push(ignored("a tensor the model never uses")),
            TflmRole::Variable => violations.push(EmbeddedViolation {
                kind: "variable",
                tensor,
                message: format!(
                    "offset {offset} is given for a variable tensor: TFLite Micro then plans it \
                     in the arena's head from before the first step to its last use, so later \
                     buffers overwrite its state between invocations; give -1 (TFLite Micro \
                     keeps it in the persistent tail)"
                ),
            }),
            TflmRole::Planned => {
                if u64::from(offset.unsigned_abs()) % TFLM_ALIGNMENT != 0 {
                    violations.push(EmbeddedViolation {
                        kind: "misaligned",
                        tensor: tensor.clone(),
                        message: format!(
                            "offset {offset} is not a multiple of 16, TFLite Micro's buffer \
                             alignment (the tensor's data, and the buffers TFLite Micro places \
                             after it, would be misaligned)"
                        ),
                    });
                }
                if let (Some(index), Ok(offset)) = (model_tensor[position], u64::try_from(offset)) {
                    let request_tensor = &request.tensors[index];
                    spans.push(OfflineSpan {
                        offset,
                        size: request_tensor.size,
                        lifetime: request_tensor.lifetime,
                    });
                    span_tensor.push(position);
                }
            }
        }
    }
    for (a, b) in collisions(&spans) {
        let (first, second) = (&spans[a], &spans[b]);
        let start = first.offset.max(second.offset);
        let end = first.end().min(second.end());
        let steps = Lifetime::new(
            first.lifetime.first.max(second.lifetime.first),
            first.lifetime.last.min(second.lifetime.last),
        );
        violations.push(EmbeddedViolation {
            kind: "overlap",
            tensor: describe(span_tensor[a]),
            message: format!(
                "shares bytes {start}..{end} with tensor {} while both are live (steps {}..={})",
                describe(span_tensor[b]),
                steps.first,
                steps.last
            ),
        });
    }

    // TFLM's head: the offline tensors at their offsets, the rest (kernel scratch buffers
    // included) placed around them.
    let with_plan = tflm_buffers(request, |index| origin.offline_offset(offsets, index));
    let known = origin.unknown_scratch.is_empty();
    Ok(EmbeddedPlanReport {
        offline_tensors,
        violations,
        head: tflm_head(&with_plan).filter(|_| known),
        head_alone: tflm_head(&tflm_buffers(request, |_| None)).filter(|_| known),
        unknown_scratch: origin.unknown_scratch.clone(),
    })
}
