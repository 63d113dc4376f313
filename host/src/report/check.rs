//! The report of `memplan check`: text (the arenas with their lower bounds, or the first
//! violations then "and N more") or JSON (one document listing every violation as an object).

use std::path::Path;

use serde_json::json;

use crate::analyze::Analysis;
use crate::check::embedded_tflite::EmbeddedPlanReport;
use crate::check::{self, CheckedPlan, Violations};

fn bytes(head: Option<u64>) -> String {
    head.map_or("unknown".to_string(), |head| format!("{head} bytes"))
}

/// The text verdict on the offline plan a `.tflite` model carries: every violation, or the
/// TFLite Micro arena head the plan implies.
pub fn embedded_text_report(model: &Path, report: &EmbeddedPlanReport) -> String {
    let model = model.display();
    let mut text = if report.violations.is_empty() {
        format!(
            "{model}: ok: the offline plan (OfflineMemoryAllocation, {} tensors placed) fits \
             TensorFlow Lite Micro's lifetimes\n  TFLite Micro arena head with the plan: {} \
             (with its own plan: {})\n",
            report.offline_tensors,
            bytes(report.head),
            bytes(report.head_alone)
        )
    } else {
        let count = report.violations.len();
        let mut text = format!(
            "{model}: rejected: the offline plan (OfflineMemoryAllocation) breaks {count} \
             rule{}:\n",
            if count == 1 { "" } else { "s" }
        );
        for violation in &report.violations {
            text.push_str(&format!(
                "  - [{}] tensor {}: {}\n",
                violation.kind, violation.tensor, violation.message
            ));
        }
        text
    };
    for unknown in &report.unknown_scratch {
        text.push_str(&format!("  the head is unknown: {unknown}\n"));
    }
    text
}

/// The JSON verdict on the offline plan a `.tflite` model carries.
pub fn embedded_json_report(model: &Path, report: &EmbeddedPlanReport) -> String {
    let violations: Vec<serde_json::Value> = report
        .violations
        .iter()
        .map(|violation| {
            json!({
                "kind": violation.kind,
                "tensor": violation.tensor,
                "message": violation.message,
            })
        })
        .collect();
    let document = json!({
        "model": model.display().to_string(),
        "plan": "OfflineMemoryAllocation",
        "ok": report.violations.is_empty(),
        "offline_tensors": report.offline_tensors,
        "violations": violations,
        "tflite_micro": {
            "head": report.head,
            "head_alone": report.head_alone,
            "unknown_kernel_scratch": report.unknown_scratch,
        },
    });
    format!("{document:#}\n")
}

pub fn text_report(
    plan_path: &Path,
    planner: &str,
    analysis: &Analysis,
    outcome: &Result<CheckedPlan, Violations>,
) -> String {
    let planner = if planner.is_empty() {
        "unnamed"
    } else {
        planner
    };
    match outcome {
        Ok(checked) => {
            let external = external_ids(analysis);
            let tensors = analysis.request.tensors.len();
            let arenas = checked.plan.arenas.len();
            let placed = match external.len() {
                0 => format!("{tensors} tensors in {arenas} arenas"),
                count => {
                    const SHOWN: usize = 8;
                    let mut named: Vec<&str> = external.iter().copied().take(SHOWN).collect();
                    let more = (count > SHOWN).then(|| format!("and {} more", count - SHOWN));
                    named.extend(more.as_deref());
                    format!(
                        "{tensors} tensors, {} in {arenas} arenas and {count} external (in the \
                         caller's buffers: {})",
                        tensors - count,
                        named.join(", ")
                    )
                }
            };
            let mut text = format!("{}: ok: plan by {planner}, {placed}\n", plan_path.display());
            for (arena, lower_bound) in checked.plan.arenas.iter().zip(&checked.lower_bounds) {
                let name = arena_name(analysis, arena);
                text.push_str(&format!(
                    "  {name}: {} bytes, alignment {}, lower bound {lower_bound}\n",
                    arena.size, arena.alignment
                ));
            }
            text
        }
        Err(violations) => format!(
            "{}: rejected: the plan by {planner} breaks {} rule{}:\n{}",
            plan_path.display(),
            violations.len(),
            if violations.len() == 1 { "" } else { "s" },
            violations.to_text()
        ),
    }
}

/// The ids of the external tensors (in the caller's buffers, no allocation), in tensor order.
fn external_ids(analysis: &Analysis) -> Vec<&str> {
    analysis
        .external
        .indices()
        .map(|index| analysis.request.tensors[index].id.as_str())
        .collect()
}

pub fn json_report(
    plan_path: &Path,
    planner: &str,
    analysis: &Analysis,
    outcome: &Result<CheckedPlan, Violations>,
) -> String {
    let document = match outcome {
        Ok(checked) => {
            let arenas: Vec<_> = checked
                .plan
                .arenas
                .iter()
                .zip(&checked.lower_bounds)
                .map(|(arena, lower_bound)| {
                    let name = arena_name(analysis, arena);
                    json!({
                        "role": name.role,
                        "memory": name.memory,
                        "source_memory": name.source_memory,
                        "size": arena.size,
                        "alignment": arena.alignment,
                        "lower_bound": lower_bound,
                    })
                })
                .collect();
            json!({
                "ok": true,
                "plan": plan_path.display().to_string(),
                "planner": planner,
                "arenas": arenas,
                "external": external_ids(analysis),
                "violations": [],
            })
        }
        Err(violations) => json!({
            "ok": false,
            "plan": plan_path.display().to_string(),
            "planner": planner,
            "violations": violations.0,
        }),
    };
    format!("{document:#}\n")
}

/// Names of a checked arena's memories (a checked plan only names the target's memories).
fn arena_name(analysis: &Analysis, arena: &memplan_plugin_api::Arena) -> check::ArenaName {
    let memory_name = |index: u32| analysis.request.memories[index as usize].name.to_string();
    check::ArenaName {
        role: arena.role,
        memory: memory_name(arena.memory),
        source_memory: memory_name(arena.source_memory),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Violation, ViolationKind};
    use memplan_planner_kit::testing::allocation;
    use memplan_plugin_api::abi_stable::std_types::{RNone, RSome, RString, RVec};
    use memplan_plugin_api::{
        Arena, ArenaRole, Lifetime, MemoryPlan, MemoryRequest, PlanRequest, TensorKind,
        TensorRequest,
    };

    fn analysis() -> Analysis {
        crate::check::testing::analysis(
            PlanRequest {
                tensors: RVec::from(vec![TensorRequest {
                    id: RString::from("0"),
                    kind: TensorKind::Input,
                    size: 8,
                    alignment: 16,
                    lifetime: Lifetime::new(0, 0),
                    alias_of: RNone,
                    fixed_offset: RNone,
                    memory: RNone,
                    source_memory: RNone,
                }]),
                memories: RVec::from(vec![MemoryRequest {
                    name: RString::from("SRAM"),
                    budget: RNone,
                    writable: true,
                    scratch_order: RSome(0),
                    arena_alignment: 16,
                }]),
                num_steps: 1,
                options: RString::from("{}"),
            },
            &["x"],
        )
    }

    fn checked() -> CheckedPlan {
        CheckedPlan {
            plan: MemoryPlan {
                arenas: RVec::from(vec![Arena {
                    role: ArenaRole::Scratch,
                    memory: 0,
                    source_memory: 0,
                    size: 16,
                    alignment: 16,
                }]),
                allocations: RVec::from(vec![allocation(0, ArenaRole::Scratch, 0, 0, 8)]),
                summary: RString::new(),
            },
            lower_bounds: vec![16],
        }
    }

    fn rejected(count: usize) -> Violations {
        Violations(
            (0..count)
                .map(|n| Violation::new(ViolationKind::Overlap, format!("collision {n}")))
                .collect(),
        )
    }

    #[test]
    fn text_of_an_ok_plan_lists_arenas_with_lower_bounds() {
        let text = text_report(Path::new("p.json"), "linear", &analysis(), &Ok(checked()));
        assert!(
            text.starts_with("p.json: ok: plan by linear, 1 tensors in 1 arenas"),
            "{text}"
        );
        assert!(
            text.contains("scratch arena in SRAM: 16 bytes, alignment 16, lower bound 16"),
            "{text}"
        );
    }

    #[test]
    fn text_of_a_rejected_plan_shows_twenty_and_counts_the_rest() {
        let text = text_report(Path::new("p.json"), "", &analysis(), &Err(rejected(25)));
        assert!(
            text.starts_with("p.json: rejected: the plan by unnamed breaks 25 rules"),
            "{text}"
        );
        assert!(
            text.contains("collision 19") && !text.contains("collision 20"),
            "{text}"
        );
        assert!(text.contains("and 5 more"), "{text}");
    }

    #[test]
    fn json_lists_every_violation_as_an_object() {
        let text = json_report(Path::new("p.json"), "x", &analysis(), &Err(rejected(25)));
        let document: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(document["ok"], false);
        let violations = document["violations"].as_array().unwrap();
        assert_eq!(violations.len(), 25);
        assert_eq!(violations[24]["kind"], "overlap");
        assert_eq!(violations[24]["message"], "collision 24");
    }

    #[test]
    fn json_of_an_ok_plan_has_arenas_and_no_violations() {
        let text = json_report(Path::new("p.json"), "linear", &analysis(), &Ok(checked()));
        let document: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(document["ok"], true);
        assert_eq!(document["violations"].as_array().unwrap().len(), 0);
        assert_eq!(document["arenas"][0]["memory"], "SRAM");
        assert_eq!(document["arenas"][0]["lower_bound"], 16);
        assert_eq!(document["planner"], "linear");
    }
}
