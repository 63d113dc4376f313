//! `memplan bench INPUTS... --planner a,b,c`: for each input and planner, the scratch arena
//! height, its lower bound, their ratio and the median planning time over several runs.
//!
//! Figures (the scratch side of the plan, which is what planners differ on):
//! - *height*: per scratch arena, the highest `offset + size` of the tensors bound there
//!   (before the arena is rounded up to its alignment), summed over the scratch arenas;
//! - *lower bound*: [`arena_lower_bound`] of every scratch tensor (aliases excepted), the same
//!   for all planners and the same figure as the plan's table when they share one arena;
//! - *time*: the median wall time of `--runs` calls of the planner, and the slowest;
//! - *limit*: the time the planner was given ([`time_limit`]): its `time_limit_s` option, else
//!   its documented default (built-in planners), capped by `--timeout`. A run slower than the
//!   limit by more than [`OVERRUN_SLACK_PERCENT`] % + [`OVERRUN_SLACK`] *overran* it, and its
//!   row says so: a planner must return its best plan so far when its time is up.
//!
//! Every run of a planner must give the same plan, unless a run was stopped by its time limit
//! (a search the clock stops may end elsewhere each time: the row then gives the last run's
//! height and the range over the runs); a planner that does not is reported as failed. That
//! plan is then checked, outside the timed runs, with the same checker as `memplan plan` (and
//! so is every other plan a time-limited run gave): a plan the checker rejects fails its row (exit 3 when it is the first
//! failure), so no figure is reported for a plan that would never be used. Rows come in input
//! order, then planner order, so that everything but the times is the same from one bench to
//! the next. A progress bar is drawn on stderr when it is a terminal.
//!
//! This module measures; `report::bench` prints the rows, `commands::bench` wires them.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::time::{Duration, Instant};

use memplan_plugin_api::bounds::arena_lower_bound;
use memplan_plugin_api::{ArenaRole, MemoryPlan, PlanRequest};

use crate::check::Violations;
use crate::error::{Error, Result};

/// Violations a failed row names: a row is one line of the text table, so only the first few;
/// `memplan plan` with the same planner lists them all.
pub const VIOLATIONS_SHOWN: usize = 3;

/// How far past its time limit a planner run may end, in percent of the limit, before it
/// counts as an overrun (plus [`OVERRUN_SLACK`]): returning takes a moment after the stop.
pub const OVERRUN_SLACK_PERCENT: u32 = 10;
/// How far past its time limit a planner run may end, beyond [`OVERRUN_SLACK_PERCENT`].
pub const OVERRUN_SLACK: Duration = Duration::from_millis(50);

/// A run that took at least this share of its time limit (in percent) was stopped by it: a
/// search the clock stops may end with another plan from run to run.
pub const STOPPED_AT_LIMIT_PERCENT: u32 = 95;

/// One planner's figures on one input.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub height: u64,
    pub lower_bound: u64,
    pub median_time: Duration,
    /// The slowest run's time.
    pub max_time: Duration,
    /// The time the planner was given, when one is known ([`time_limit`]).
    pub limit: Option<Duration>,
    /// The lowest and highest height over the runs, when they differ: only a planner stopped
    /// by its time limit may give different plans (`height` is the last run's).
    pub height_range: Option<(u64, u64)>,
    pub runs: u32,
}

impl Measurement {
    /// Whether the slowest run ended later than the limit allows (see the module
    /// documentation).
    pub fn overran(&self) -> bool {
        self.limit.is_some_and(|limit| {
            self.max_time > limit + limit * OVERRUN_SLACK_PERCENT / 100 + OVERRUN_SLACK
        })
    }

    /// `height / lower_bound` (1 when both are 0).
    pub fn ratio(&self) -> f64 {
        if self.lower_bound == 0 {
            if self.height == 0 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            self.height as f64 / self.lower_bound as f64
        }
    }
}

/// One row of the bench: an input, a planner and what came out.
#[derive(Debug)]
pub struct BenchRow {
    pub input: String,
    pub planner: String,
    pub outcome: Result<Measurement>,
}

/// The time a planner is given: `time_limit_s` in its `options` (a JSON object; the
/// convention of memplan's planners), else `default` (its documented default, when known),
/// capped by the host's `timeout`. `None` when none of them is known.
pub fn time_limit(
    options: &str,
    default: Option<Duration>,
    timeout: Option<Duration>,
) -> Option<Duration> {
    let given = serde_json::from_str::<serde_json::Value>(options)
        .ok()
        .and_then(|options| options.get("time_limit_s")?.as_f64())
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok());
    match (given.or(default), timeout) {
        (Some(limit), Some(timeout)) => Some(limit.min(timeout)),
        (limit, timeout) => limit.or(timeout),
    }
}

/// Calls `plan` `runs` times (at least once), then `check`s the plan of the last run (once,
/// untimed) and measures it against `limit` (see [`time_limit`]); fails with the planner's
/// error, when two runs give different plans, or when `check` rejects a plan (kind
/// `Rejected`, naming the first violations).
///
/// No plan is held while the next run is timed: each run's plan is dropped once compared
/// with the first run's (by [`plan_digest`]). Held, the first plan made the second run's
/// allocations fault in fresh pages where the first had reused what reading the input freed:
/// 78-110 ms instead of 40-59 ms for 2,000,000 tensors (`portfolio`, `time_limit_s` 0),
/// enough to flag a run as overrunning its limit that a single `memplan plan` would not.
pub fn measure_planner(
    request: &PlanRequest,
    planner: &str,
    runs: u32,
    limit: Option<Duration>,
    mut plan: impl FnMut() -> Result<MemoryPlan>,
    mut check: impl FnMut(MemoryPlan) -> Result<MemoryPlan, Violations>,
) -> Result<(Measurement, MemoryPlan)> {
    let runs = runs.max(1);
    let mut times = Vec::with_capacity(runs as usize);
    let keys = RandomState::new();
    let mut first_digest = None;
    let mut last = None;
    let mut heights = (u64::MAX, 0);
    let mut reached_limit = false;
    for run in 0..runs {
        let start = Instant::now();
        let this = plan()?;
        let elapsed = start.elapsed();
        times.push(elapsed);
        reached_limit |=
            limit.is_some_and(|limit| elapsed >= limit * STOPPED_AT_LIMIT_PERCENT / 100);
        let height = scratch_height(&this);
        heights = (heights.0.min(height), heights.1.max(height));
        let digest = plan_digest(&keys, &this);
        let is_last = run + 1 == runs;
        match first_digest {
            None => first_digest = Some(digest),
            Some(first) if first != digest => {
                if !reached_limit {
                    return Err(Error::plugin(format!(
                        "planner `{planner}` is not deterministic: run {} gave a different plan \
                         from run 1, and no run was stopped by its time limit",
                        run + 1
                    )));
                }
                // A search the clock stopped may end elsewhere from run to run; each plan it
                // gives must still be a valid one (the last is checked below).
                if !is_last {
                    check(this).map_err(|violations| wrong_plan_error(planner, &violations))?;
                    continue;
                }
            }
            Some(_) => {}
        }
        if is_last {
            last = Some(this);
        }
    }
    times.sort_unstable();
    let plan = last.expect("the last run's plan is kept");
    let height = scratch_height(&plan);
    let plan = check(plan).map_err(|violations| wrong_plan_error(planner, &violations))?;
    let measurement = Measurement {
        height,
        lower_bound: scratch_lower_bound(request),
        median_time: times[times.len() / 2],
        max_time: times[times.len() - 1],
        limit,
        height_range: (heights.0 != heights.1).then_some(heights),
        runs,
    };
    Ok((measurement, plan))
}

/// A digest of `plan`'s arenas and allocations (not its summary, which may say how long a
/// search ran) under `keys`: two runs whose digests differ gave different plans. SipHash with
/// keys drawn for the bench run, so that a planner cannot make two different plans look
/// alike without knowing them.
///
/// Every field of every allocation is hashed, packed into bytes and written a block at a
/// time: the derived `Hash` wrote each field on its own, seven SipHash writes an allocation,
/// and at 2,000,000 tensors that took as long as a planner call with `time_limit_s` 0.
fn plan_digest(keys: &RandomState, plan: &MemoryPlan) -> u64 {
    /// Allocations packed per write: 37 KiB, which stay in the cache while written.
    const BLOCK: usize = 1024;
    const PACKED_BYTES: usize = 37;
    let mut hasher = keys.build_hasher();
    plan.arenas.as_slice().hash(&mut hasher);
    hasher.write_usize(plan.allocations.len());
    let mut block = Vec::with_capacity(BLOCK * PACKED_BYTES);
    for allocations in plan.allocations.chunks(BLOCK) {
        block.clear();
        for allocation in allocations {
            let binding = allocation.binding;
            let mut packed = [0; PACKED_BYTES];
            packed[..4].copy_from_slice(&allocation.tensor.to_le_bytes());
            packed[4] = binding.role as u8;
            packed[5..9].copy_from_slice(&binding.memory.to_le_bytes());
            packed[9..13].copy_from_slice(&binding.source_memory.to_le_bytes());
            packed[13..21].copy_from_slice(&binding.offset.to_le_bytes());
            packed[21..29].copy_from_slice(&allocation.offset.to_le_bytes());
            packed[29..].copy_from_slice(&allocation.size.to_le_bytes());
            block.extend_from_slice(&packed);
        }
        hasher.write(&block);
    }
    hasher.finish()
}

/// The failure of a row whose plan the checker rejected: the planner, how many violations and
/// the first [`VIOLATIONS_SHOWN`] of them, one per line (the text table joins the lines).
pub fn wrong_plan_error(planner: &str, violations: &Violations) -> Error {
    let count = violations.len();
    let mut message = format!(
        "planner `{planner}` returned a wrong plan, rejected by the checker ({count} \
         violation{}):",
        if count == 1 { "" } else { "s" }
    );
    for violation in violations.iter().take(VIOLATIONS_SHOWN) {
        message.push_str(&format!("\n  - {violation}"));
    }
    if count > VIOLATIONS_SHOWN {
        message.push_str(&format!(
            "\n  and {} more; `memplan plan` with this planner lists them",
            count - VIOLATIONS_SHOWN
        ));
    }
    Error::rejected(message)
}

/// Sum over scratch arenas of the highest `offset + size` bound there.
pub fn scratch_height(plan: &MemoryPlan) -> u64 {
    let mut tops: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for allocation in plan.allocations.iter() {
        let binding = allocation.binding;
        if binding.role == ArenaRole::Scratch {
            let top = tops
                .entry((binding.memory, binding.source_memory))
                .or_default();
            *top = (*top).max(binding.offset + allocation.size);
        }
    }
    tops.values().sum()
}

/// Lower bound of the scratch tensors of `request` (aliases excepted), as one arena's.
pub fn scratch_lower_bound(request: &PlanRequest) -> u64 {
    arena_lower_bound(
        request
            .tensors
            .iter()
            .filter(|t| t.kind.role() == ArenaRole::Scratch && t.alias_of.is_none())
            .map(|t| (t.size, t.alignment, t.lifetime)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::RString;
    use abi_stable::std_types::{ROption, RVec};
    use memplan_planner_kit::testing::allocation;
    use memplan_plugin_api::{AliasOf, Allocation, TensorKind, TensorRequest};

    use crate::check::{Violation, ViolationKind};
    use crate::error::ErrorKind;

    fn tensor(kind: TensorKind, size: u64, first: u32, last: u32) -> TensorRequest {
        memplan_planner_kit::testing::tensor("t", kind, size, first, last)
    }

    #[test]
    fn height_sums_scratch_arenas_and_ignores_other_roles() {
        let plan = MemoryPlan {
            arenas: RVec::new(),
            allocations: RVec::from(vec![
                allocation(0, ArenaRole::Scratch, 0, 0, 40),
                allocation(1, ArenaRole::Scratch, 0, 48, 10),
                allocation(2, ArenaRole::Scratch, 1, 0, 7),
                allocation(3, ArenaRole::Constant, 0, 0, 1000),
            ]),
            summary: RString::new(),
        };
        assert_eq!(scratch_height(&plan), 58 + 7);
    }

    #[test]
    fn lower_bound_counts_scratch_tensors_only_with_the_padding_no_placement_avoids() {
        let mut alias = tensor(TensorKind::Intermediate, 64, 0, 1);
        alias.alias_of = ROption::RSome(AliasOf { root: 0, offset: 0 });
        let request = PlanRequest {
            tensors: RVec::from(vec![
                tensor(TensorKind::Input, 10, 0, 1),
                tensor(TensorKind::Intermediate, 20, 1, 2),
                tensor(TensorKind::Constant, 500, 0, 2),
                alias,
            ]),
            memories: RVec::new(),
            num_steps: 3,
            options: RString::from("{}"),
        };
        // 10 and 20 bytes aligned to 16, live together: 10 padded to 16, then 20 (0..10,
        // 16..36).
        assert_eq!(scratch_lower_bound(&request), 16 + 20);
    }

    fn empty_request() -> PlanRequest {
        PlanRequest {
            tensors: RVec::from(vec![tensor(TensorKind::Intermediate, 32, 0, 0)]),
            memories: RVec::new(),
            num_steps: 1,
            options: RString::from("{}"),
        }
    }

    fn plan_with_height(height: u64) -> MemoryPlan {
        MemoryPlan {
            arenas: RVec::new(),
            allocations: RVec::from(vec![allocation(0, ArenaRole::Scratch, 0, 0, height)]),
            summary: RString::new(),
        }
    }

    #[test]
    fn measuring_runs_the_planner_the_given_number_of_times_and_checks_its_plan_once() {
        let mut calls = 0;
        let mut checked = Vec::new();
        let m = measure_planner(
            &empty_request(),
            "p",
            5,
            None,
            || {
                calls += 1;
                Ok(plan_with_height(48))
            },
            |plan| {
                checked.push(plan.clone());
                Ok(plan)
            },
        )
        .unwrap()
        .0;
        assert_eq!(calls, 5);
        assert_eq!(checked, vec![plan_with_height(48)]);
        assert_eq!((m.height, m.lower_bound, m.runs), (48, 32, 5));
        assert_eq!(m.ratio(), 1.5);
    }

    #[test]
    fn a_planner_giving_different_plans_is_reported_as_not_deterministic() {
        let mut calls = 0;
        let mut checks = 0;
        let error = measure_planner(
            &empty_request(),
            "flaky",
            3,
            None,
            || {
                calls += 1;
                Ok(plan_with_height(32 * calls))
            },
            |plan| {
                checks += 1;
                Ok(plan)
            },
        )
        .unwrap_err();
        assert!(error.message.contains("not deterministic"), "{error}");
        assert_eq!(checks, 0, "no plan to check");
    }

    #[test]
    fn runs_stopped_by_their_time_limit_may_differ_and_every_plan_is_checked() {
        let mut calls = 0;
        let mut checks = 0;
        let measured = measure_planner(
            &empty_request(),
            "search",
            3,
            Some(Duration::from_millis(20)),
            || {
                calls += 1;
                std::thread::sleep(Duration::from_millis(25));
                Ok(plan_with_height([64, 48, 64][calls - 1]))
            },
            |plan| {
                checks += 1;
                Ok(plan)
            },
        )
        .unwrap()
        .0;
        assert_eq!(measured.height, 64, "the last run's");
        assert_eq!(measured.height_range, Some((48, 64)));
        // The one that differed from the first, and the last.
        assert_eq!(checks, 2);
        // The row gives the last run's plan and height, checked once.
        let mut checked = Vec::new();
        let (measured, plan) = two_runs_stopped_by_their_limit(|plan| {
            checked.push(scratch_height(&plan));
            Ok(plan)
        })
        .unwrap();
        assert_eq!((measured.height, scratch_height(&plan)), (64, 64));
        assert_eq!(checked, vec![64]);
        // A differing plan the checker rejects fails the row.
        let error = two_runs_stopped_by_their_limit(|plan| {
            if scratch_height(&plan) == 64 {
                Err(Violations(vec![Violation::new(
                    ViolationKind::Overlap,
                    "bad",
                )]))
            } else {
                Ok(plan)
            }
        })
        .unwrap_err();
        assert_eq!(error.kind, ErrorKind::Rejected);
    }

    /// Two runs of 25 ms, each past a 20 ms limit, giving plans of heights 32 and 64, the
    /// plans checked by `check`.
    fn two_runs_stopped_by_their_limit(
        check: impl FnMut(MemoryPlan) -> Result<MemoryPlan, Violations>,
    ) -> Result<(Measurement, MemoryPlan)> {
        let mut calls = 0;
        measure_planner(
            &empty_request(),
            "search",
            2,
            Some(Duration::from_millis(20)),
            || {
                calls += 1;
                std::thread::sleep(Duration::from_millis(25));
                Ok(plan_with_height(32 * calls))
            },
            check,
        )
    }

    #[test]
    fn a_summary_that_differs_from_run_to_run_is_not_a_different_plan() {
        // exact's summary says how long its search ran; the plan itself is the same.
        let mut calls = 0;
        let measurement = measure_planner(
            &empty_request(),
            "timed",
            3,
            None,
            || {
                calls += 1;
                let mut plan = plan_with_height(32);
                plan.summary = RString::from(format!("searched for {calls} ms"));
                Ok(plan)
            },
            Ok,
        )
        .unwrap()
        .0;
        assert_eq!(measurement.height, 32);
    }

    #[test]
    fn the_digest_changes_with_every_field_of_any_allocation() {
        // Two blocks of packed allocations and a part of a third, so that a change after the
        // first block counts too.
        let plan = MemoryPlan {
            arenas: RVec::new(),
            allocations: (0..2500u32)
                .map(|tensor| allocation(tensor, ArenaRole::Scratch, 0, u64::from(tensor), 1))
                .collect(),
            summary: RString::new(),
        };
        let keys = RandomState::new();
        let digest = plan_digest(&keys, &plan);
        assert_eq!(plan_digest(&keys, &plan.clone()), digest);
        let changes: [fn(&mut Allocation); 7] = [
            |a| a.tensor += 1,
            |a| a.binding.role = ArenaRole::Persistent,
            |a| a.binding.memory = 1,
            |a| a.binding.source_memory = 1,
            |a| a.binding.offset += 1,
            |a| a.offset += 1,
            |a| a.size += 1,
        ];
        for (field, change) in changes.iter().enumerate() {
            for index in [0, 1500, 2499] {
                let mut changed = plan.clone();
                change(&mut changed.allocations[index]);
                assert_ne!(
                    plan_digest(&keys, &changed),
                    digest,
                    "field {field} of allocation {index}"
                );
            }
        }
        let mut shorter = plan.clone();
        shorter.allocations.pop();
        assert_ne!(plan_digest(&keys, &shorter), digest);
    }

    #[test]
    fn a_plan_the_checker_rejects_fails_the_row_naming_the_first_violations() {
        let violations: Vec<Violation> = (1..=5)
            .map(|n| Violation::new(ViolationKind::Overlap, format!("overlap number {n}")))
            .collect();
        let error = measure_planner(
            &empty_request(),
            "sloppy",
            2,
            None,
            || Ok(plan_with_height(16)),
            |_| Err(Violations(violations.clone())),
        )
        .unwrap_err();
        assert_eq!(error.kind, ErrorKind::Rejected);
        let message = &error.message;
        assert!(
            message.starts_with(
                "planner `sloppy` returned a wrong plan, rejected by the checker (5 violations):"
            ),
            "{message}"
        );
        for shown in 1..=VIOLATIONS_SHOWN {
            assert!(
                message.contains(&format!(
                    "\n  - [overlap, contract 5] overlap number {shown}"
                )),
                "{message}"
            );
        }
        assert!(!message.contains("overlap number 4"), "{message}");
        assert!(message.ends_with("and 2 more; `memplan plan` with this planner lists them"));
    }

    #[test]
    fn the_limit_is_the_option_else_the_default_capped_by_the_timeout() {
        let s = Duration::from_secs_f64;
        assert_eq!(time_limit("{}", None, None), None);
        assert_eq!(time_limit("{}", Some(s(1.0)), None), Some(s(1.0)));
        let given = r#"{"time_limit_s": 2.5, "goal": "fast"}"#;
        assert_eq!(time_limit(given, Some(s(1.0)), None), Some(s(2.5)));
        assert_eq!(time_limit(given, None, Some(s(2.0))), Some(s(2.0)));
        assert_eq!(time_limit("{}", None, Some(s(3.0))), Some(s(3.0)));
        assert_eq!(time_limit("{}", Some(s(10.0)), Some(s(3.0))), Some(s(3.0)));
        // Not a number of seconds: the planner refuses it; the bench knows no limit from it.
        assert_eq!(time_limit(r#"{"time_limit_s": "x"}"#, None, None), None);
        assert_eq!(
            time_limit(r#"{"time_limit_s": -1}"#, Some(s(1.0)), None),
            Some(s(1.0))
        );
    }

    #[test]
    fn a_run_past_the_limit_and_its_slack_is_an_overrun_and_the_slowest_run_counts() {
        let mut calls = 0u64;
        let measure = |limit: Option<Duration>, calls: &mut u64| {
            measure_planner(
                &empty_request(),
                "slow",
                3,
                limit,
                || {
                    *calls += 1;
                    // The second run is the slow one: 120 ms, the others 1 ms.
                    let pause = if *calls % 3 == 2 { 120 } else { 1 };
                    std::thread::sleep(Duration::from_millis(pause));
                    Ok(plan_with_height(32))
                },
                Ok,
            )
            .unwrap()
            .0
        };
        let measured = measure(Some(Duration::from_millis(50)), &mut calls);
        assert!(
            measured.median_time < Duration::from_millis(100),
            "{measured:?}"
        );
        assert!(
            measured.max_time >= Duration::from_millis(120),
            "{measured:?}"
        );
        // 50 ms + 10 % + 50 ms = 105 ms < 120 ms.
        assert!(measured.overran(), "{measured:?}");
        // 100 ms + 10 % + 50 ms = 160 ms: the edge.
        let ending_at = |millis| Measurement {
            limit: Some(Duration::from_millis(100)),
            max_time: Duration::from_millis(millis),
            ..measured.clone()
        };
        assert!(!ending_at(160).overran());
        assert!(ending_at(161).overran());
        let unlimited = measure(None, &mut calls);
        assert!(!unlimited.overran());
    }
}
