//! Planner `linear`: every tensor gets bytes of its own, bump-allocated in tensor order
//! ([`BumpPacker`]), so the scratch arena is the sum of the aligned sizes: no reuse between
//! tensors whose lifetimes do not overlap. It is the upper reference point every real planner
//! must beat, and simple enough to be obviously correct.
//!
//! Everything else — constants, persistent tensors, memories, spill under budgets, fixed
//! offsets, aliases, empty tensors — is the planner kit's ([`plan_with_packer`]).
//! It takes no options.

use memplan_planner_kit::{plan_with_packer, BumpPacker, PlannerOptions};
use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanRequest, Planner};

pub struct Linear;

impl Planner for Linear {
    const NAME: &'static str = "linear";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "one slot per tensor, bump-allocated in tensor order; no reuse";

    fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
        PlannerOptions::parse(Self::NAME, &request.options)?.finish(&[])?;
        plan_with_packer(request, context, &BumpPacker)
    }
}

// Linked into memplan (its built-in planners); `cdylib/` exports the same planners from a plugin file.
memplan_plugin_api::planner_root_module!(Linear);

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    use memplan_planner_kit::testing::{assert_valid_plan, memory, tensor, with_deadline};
    use memplan_plugin_api::abi_stable::std_types::{RString, RVec};
    use memplan_plugin_api::{PlanErrorKind, TensorKind, TensorRequest};

    fn request(options: &str) -> PlanRequest {
        let tensor = |id: &str, step| TensorRequest {
            alignment: 8,
            ..tensor(id, TensorKind::Intermediate, 24, step, step)
        };
        PlanRequest {
            tensors: RVec::from(vec![tensor("a", 0), tensor("b", 1), tensor("c", 2)]),
            memories: RVec::from(vec![memory("SRAM", None, true, Some(0))]),
            num_steps: 3,
            options: RString::from(options),
        }
    }

    #[test]
    fn tensors_never_share_bytes() {
        let request = request("{}");
        let plan = Linear::plan(&request, &HostContext::detached()).unwrap();
        assert_valid_plan(&request, &plan);
        let offsets: Vec<u64> = plan.allocations.iter().map(|a| a.offset).collect();
        assert_eq!(offsets, vec![0, 24, 48]);
        assert_eq!(plan.arenas[0].size, 80);
    }

    #[test]
    fn a_stop_request_ends_planning_with_cancelled() {
        // A million tensors, the host already asking to stop: the bump packing gives up at
        // its first poll rather than placing them all.
        let tensors: Vec<TensorRequest> = (0..1_000_000u32)
            .map(|i| {
                tensor(
                    &i.to_string(),
                    TensorKind::Intermediate,
                    16,
                    i % 1000,
                    i % 1000,
                )
            })
            .collect();
        let request = PlanRequest {
            tensors: RVec::from(tensors),
            ..request("{}")
        };
        let deadline = Instant::now();
        let error = Linear::plan(&request, &with_deadline(&deadline)).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::Cancelled);
        assert!(error.message.contains("time limit"), "{}", error.message);
    }

    #[test]
    fn options_are_rejected() {
        let error =
            Linear::plan(&request(r#"{"fit":"first"}"#), &HostContext::detached()).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::InvalidRequest);
        assert!(error.message.contains("`fit`"), "{}", error.message);
    }
}
