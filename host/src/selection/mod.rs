//! `--planner a,b,c`: run each planner, keep the plan with the smallest total bytes over the
//! writable memories (ties: the first listed), and report every planner's result.
//!
//! Selection is a function over a closure that runs one planner by name, so it does not
//! depend on how planners are found or run. The closure should return only plans the checker
//! accepted (an error of kind `Rejected` otherwise), so that an invalid plan never wins. The
//! report of every planner's result is [`Selection::candidates`], which the summary renders.

use std::borrow::Borrow;
use std::time::{Duration, Instant};

use memplan_plugin_api::{MemoryPlan, PlanRequest};

pub mod measure;

use crate::error::{Error, ErrorKind, Result};

/// Bytes a plan takes in the writable memories (scratch, persistent and staged constant
/// arenas): what running the model costs in RAM, the figure selection minimises.
pub fn writable_bytes(request: &PlanRequest, plan: &MemoryPlan) -> u64 {
    plan.arenas
        .iter()
        .filter(|arena| {
            request
                .memories
                .get(arena.memory as usize)
                .is_some_and(|memory| memory.writable)
        })
        .map(|arena| arena.size)
        .sum()
}

/// One planner's result in a best-of run.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub planner: String,
    /// Wall time of the planner's run and of the check of its plan.
    pub elapsed: Duration,
    pub outcome: CandidateOutcome,
}

/// What came of one planner in a best-of run.
#[derive(Clone, Debug, PartialEq)]
pub enum CandidateOutcome {
    /// A plan the checker accepted, taking `writable_bytes` in the writable memories;
    /// `kept` for the one plan that was kept.
    Planned { writable_bytes: u64, kept: bool },
    /// The planner's plan was rejected by the checker.
    Rejected { reason: String },
    /// The planner gave no plan; `kind` says how it failed (plugin failure, does not fit, ...).
    Failed { kind: ErrorKind, reason: String },
}

/// One planner's result. `P` is the plan as the caller keeps it: a `MemoryPlan`, or a
/// checked plan that borrows as one.
#[derive(Debug)]
pub struct PlannerRun<P> {
    pub planner: String,
    pub elapsed: Duration,
    pub outcome: Result<P>,
    /// [`writable_bytes`] of the plan, when there is one.
    pub writable_bytes: Option<u64>,
}

/// Every planner's result and which plan was kept.
#[derive(Debug)]
pub struct Selection<P> {
    /// In the order the planners were listed.
    pub runs: Vec<PlannerRun<P>>,
    /// Index in `runs` of the kept plan (always a successful run).
    pub chosen: usize,
}

impl<P> Selection<P> {
    pub fn chosen_planner(&self) -> &str {
        &self.runs[self.chosen].planner
    }

    /// The kept plan.
    pub fn plan(&self) -> &P {
        self.runs[self.chosen]
            .outcome
            .as_ref()
            .expect("the chosen run succeeded")
    }

    /// Takes the kept plan out of the selection.
    pub fn into_plan(mut self) -> P {
        self.runs
            .swap_remove(self.chosen)
            .outcome
            .expect("the chosen run succeeded")
    }

    /// Every planner's result for the summary, in the order listed: its plan's bytes (and
    /// whether it was kept), or why it gave none. Built once here; `report::plan` renders it
    /// as text and as JSON.
    pub fn candidates(&self) -> Vec<Candidate> {
        self.runs
            .iter()
            .enumerate()
            .map(|(index, run)| Candidate {
                planner: run.planner.clone(),
                elapsed: run.elapsed,
                outcome: match (&run.outcome, run.writable_bytes) {
                    (Ok(_), Some(writable_bytes)) => CandidateOutcome::Planned {
                        writable_bytes,
                        kept: index == self.chosen,
                    },
                    (Err(error), _) if error.kind == ErrorKind::Rejected => {
                        CandidateOutcome::Rejected {
                            reason: error.message.clone(),
                        }
                    }
                    (Err(error), _) => CandidateOutcome::Failed {
                        kind: error.kind,
                        reason: error.message.clone(),
                    },
                    (Ok(_), None) => unreachable!("successful runs have their bytes"),
                },
            })
            .collect()
    }
}

/// Runs `run` for each of `planners` in order and keeps the smallest plan by
/// [`writable_bytes`] (ties: the first listed). Fails only when no planner gave a plan: with
/// one planner, with its own error; with several, with an error listing each failure, of the
/// first failure's kind.
pub fn select_plan<P: Borrow<MemoryPlan>>(
    planners: &[String],
    request: &PlanRequest,
    mut run: impl FnMut(&str) -> Result<P>,
) -> Result<Selection<P>> {
    let mut runs = Vec::with_capacity(planners.len());
    let mut chosen: Option<usize> = None;
    for planner in planners {
        let start = Instant::now();
        let outcome = run(planner);
        let elapsed = start.elapsed();
        let bytes = outcome
            .as_ref()
            .ok()
            .map(|plan| writable_bytes(request, plan.borrow()));
        if let Some(bytes) = bytes {
            let smaller = chosen.is_none_or(|best| {
                let best: &PlannerRun<P> = &runs[best];
                bytes < best.writable_bytes.expect("chosen runs succeeded")
            });
            if smaller {
                chosen = Some(runs.len());
            }
        }
        runs.push(PlannerRun {
            planner: planner.clone(),
            elapsed,
            outcome,
            writable_bytes: bytes,
        });
    }
    match chosen {
        Some(chosen) => Ok(Selection { runs, chosen }),
        None => Err(all_failed(runs)),
    }
}

fn all_failed<P>(mut runs: Vec<PlannerRun<P>>) -> Error {
    if runs.len() == 1 {
        return runs
            .pop()
            .and_then(|run| run.outcome.err())
            .expect("a failed run");
    }
    let errors: Vec<(String, Error)> = runs
        .into_iter()
        .filter_map(|run| run.outcome.err().map(|error| (run.planner, error)))
        .collect();
    let kind = errors.first().map_or(ErrorKind::Internal, |(_, e)| e.kind);
    let details: Vec<String> = errors
        .iter()
        .map(|(planner, error)| format!("  {planner}: {error}"))
        .collect();
    Error::new(
        kind,
        format!("no planner gave a plan:\n{}", details.join("\n")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::{ROption, RString, RVec};
    use memplan_plugin_api::{Arena, ArenaRole, MemoryRequest};

    fn request() -> PlanRequest {
        let memory = |name: &str, writable| MemoryRequest {
            name: RString::from(name),
            budget: ROption::RNone,
            writable,
            scratch_order: ROption::RSome(0),
            arena_alignment: 16,
        };
        PlanRequest {
            tensors: RVec::new(),
            memories: RVec::from(vec![memory("SRAM", true), memory("MRAM", false)]),
            num_steps: 0,
            options: RString::from("{}"),
        }
    }

    /// A plan with `scratch` bytes in SRAM and `constant` bytes in read-only MRAM.
    fn plan(scratch: u64, constant: u64) -> MemoryPlan {
        let arena = |role, memory, size| Arena {
            role,
            memory,
            source_memory: memory,
            size,
            alignment: 16,
        };
        MemoryPlan {
            arenas: RVec::from(vec![
                arena(ArenaRole::Scratch, 0, scratch),
                arena(ArenaRole::Constant, 1, constant),
            ]),
            allocations: RVec::new(),
            summary: RString::new(),
        }
    }

    fn names(list: &str) -> Vec<String> {
        list.split(',').map(str::to_string).collect()
    }

    #[test]
    fn the_smallest_writable_total_wins_and_read_only_bytes_do_not_count() {
        let selection = select_plan(&names("big,small,small-but-more-flash"), &request(), |p| {
            Ok(match p {
                "big" => plan(4096, 0),
                "small" => plan(1024, 100),
                _ => plan(1024, 0),
            })
        })
        .unwrap();
        assert_eq!(
            selection.chosen_planner(),
            "small",
            "ties go to the first listed"
        );
        assert_eq!(selection.runs.len(), 3);
        assert_eq!(selection.runs[0].writable_bytes, Some(4096));
    }

    #[test]
    fn failures_are_reported_and_do_not_stop_the_others() {
        let selection = select_plan(&names("broken,ok"), &request(), |p| match p {
            "broken" => Err(Error::plugin("planner `broken` panicked")),
            _ => Ok(plan(64, 0)),
        })
        .unwrap();
        assert_eq!(selection.chosen_planner(), "ok");
        assert!(selection.runs[0].outcome.is_err());
        assert_eq!(selection.into_plan(), plan(64, 0));
    }

    #[test]
    fn candidates_say_what_came_of_each_planner_and_which_plan_was_kept() {
        let selection = select_plan(&names("broken,wrong,big,small"), &request(), |p| match p {
            "broken" => Err(Error::plugin("planner `broken` panicked")),
            "wrong" => Err(Error::rejected("planner `wrong` returned a wrong plan")),
            "big" => Ok(plan(4096, 0)),
            _ => Ok(plan(64, 0)),
        })
        .unwrap();
        let outcomes: Vec<(String, CandidateOutcome)> = selection
            .candidates()
            .into_iter()
            .map(|candidate| (candidate.planner, candidate.outcome))
            .collect();
        assert_eq!(
            outcomes,
            vec![
                (
                    "broken".to_string(),
                    CandidateOutcome::Failed {
                        kind: ErrorKind::Plugin,
                        reason: "planner `broken` panicked".to_string()
                    }
                ),
                (
                    "wrong".to_string(),
                    CandidateOutcome::Rejected {
                        reason: "planner `wrong` returned a wrong plan".to_string()
                    }
                ),
                (
                    "big".to_string(),
                    CandidateOutcome::Planned {
                        writable_bytes: 4096,
                        kept: false
                    }
                ),
                (
                    "small".to_string(),
                    CandidateOutcome::Planned {
                        writable_bytes: 64,
                        kept: true
                    }
                ),
            ]
        );
    }

    #[test]
    fn when_all_fail_the_error_keeps_the_kind() {
        let one = select_plan(&names("a"), &request(), |_| {
            Err::<MemoryPlan, _>(Error::does_not_fit("too big"))
        })
        .unwrap_err();
        assert_eq!(one, Error::does_not_fit("too big"));
        let both = select_plan(&names("a,b"), &request(), |p| {
            Err::<MemoryPlan, _>(Error::does_not_fit(format!("{p} too big")))
        })
        .unwrap_err();
        assert_eq!(both.kind, ErrorKind::DoesNotFit);
        assert!(both.message.contains("a: a too big") && both.message.contains("b: b too big"));
    }
}
