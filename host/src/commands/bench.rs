//! `memplan bench INPUTS... --planner a,b,c`: for each input and planner, the scratch arena
//! height, its lower bound, their ratio and the median planning time over several runs.
//!
//! Figures (the scratch side of the plan, which is what planners differ on):
//! - *height*: per scratch arena, the highest `offset + size` of the tensors bound there
//!   (before the arena is rounded up to its alignment), summed over the scratch arenas;
//! - *lower bound*: [`lower_bound`] of every scratch tensor (aligned sizes), the same for all
//!   planners; no plan's height can be below it, however its tensors are split over memories;
//! - *time*: the median wall time of `--runs` calls of the planner.
//!
//! Every run of a planner must give the same plan; a planner that does not is reported as
//! failed. That plan is then checked once, outside the timed runs, with the same checker as
//! `memplan plan`: a plan the checker rejects fails its row (exit 3 when it is the first
//! failure), so no figure is reported for a plan that would never be used. Rows come in input
//! order, then planner order, so that everything but the times is the same from one bench to
//! the next. A progress bar is drawn on stderr when it is a terminal.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use memplan_plugin_api::bounds::{align_up, lower_bound};
use memplan_plugin_api::{ArenaRole, MemoryPlan, PlanRequest};
use serde_json::{json, Value};

use crate::check::{self, Violations};
use crate::cli::{BenchArgs, BenchFormat};
use crate::commands::select::{parse_planner_list, PlannerOptionsByName};
use crate::error::{Error, Result};
use crate::registry::{Registry, RunLimits};

/// Violations a failed row names: a row is one line of the text table, so only the first few;
/// `memplan plan` with the same planner lists them all.
const VIOLATIONS_SHOWN: usize = 3;

/// One planner's figures on one input.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub height: u64,
    pub lower_bound: u64,
    pub median_time: Duration,
    pub runs: u32,
}

impl Measurement {
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

pub fn run(args: &BenchArgs, show_progress: bool) -> Result<ExitCode> {
    let planners = parse_planner_list(&args.planner)?;
    let options = PlannerOptionsByName::parse(&args.planner_options, &planners)?;
    let trust = super::trust_policy(&args.plugins)?;
    let selected: Vec<&str> = planners.iter().map(String::as_str).collect();
    let registry = Registry::discover(&args.plugins.plugin_dirs, &trust, &selected)?;
    let limits = RunLimits::from_timeout_seconds(args.timeout)?;
    let mut progress = Progress::new(
        args.inputs.len() * planners.len() * args.runs as usize,
        show_progress && std::io::stderr().is_terminal(),
    );
    let mut rows = Vec::with_capacity(args.inputs.len() * planners.len());
    for path in &args.inputs {
        let mut analysis = super::read_and_analyze(path, &args.target)?;
        analysis.ensure_plannable()?;
        let label = path.display().to_string();
        for planner in &planners {
            options.set_for(&mut analysis.request, planner);
            let outcome = measure_planner(
                &analysis.request,
                planner,
                args.runs,
                || {
                    progress.step(&label, planner);
                    registry.plan(planner, &analysis.request, &limits)
                },
                |plan| check::check_plan(&analysis, plan).map(drop),
            );
            rows.push(BenchRow {
                input: label.clone(),
                planner: planner.clone(),
                outcome,
            });
        }
    }
    progress.finish();

    let mut stdout = std::io::stdout().lock();
    let text = match args.format {
        BenchFormat::Text => format_text(&rows),
        BenchFormat::Json => format!("{:#}\n", rows_json(&rows)),
        BenchFormat::Csv => format_csv(&rows),
    };
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|error| Error::internal(format!("writing the bench results: {error}")))?;
    let first_failure = rows.iter().find_map(|row| row.outcome.as_ref().err());
    Ok(match first_failure {
        Some(error) => error.exit_code(),
        None => ExitCode::SUCCESS,
    })
}

/// Calls `plan` `runs` times (at least once), then `check`s the plan it gives (once, untimed)
/// and measures it; fails with the planner's error, when two runs give different plans, or
/// when `check` rejects the plan (kind `Rejected`, naming the first violations).
pub fn measure_planner(
    request: &PlanRequest,
    planner: &str,
    runs: u32,
    mut plan: impl FnMut() -> Result<MemoryPlan>,
    check: impl FnOnce(MemoryPlan) -> Result<(), Violations>,
) -> Result<Measurement> {
    let runs = runs.max(1);
    let mut times = Vec::with_capacity(runs as usize);
    let mut first: Option<MemoryPlan> = None;
    for run in 0..runs {
        let start = Instant::now();
        let this = plan()?;
        times.push(start.elapsed());
        match &first {
            None => first = Some(this),
            Some(first) if *first != this => {
                return Err(Error::plugin(format!(
                    "planner `{planner}` is not deterministic: run {} gave a different plan \
                     from run 1",
                    run + 1
                )))
            }
            Some(_) => {}
        }
    }
    times.sort_unstable();
    let plan = first.expect("at least one run");
    let height = scratch_height(&plan);
    check(plan).map_err(|violations| wrong_plan_error(planner, &violations))?;
    Ok(Measurement {
        height,
        lower_bound: scratch_lower_bound(request),
        median_time: times[times.len() / 2],
        runs,
    })
}

/// The failure of a row whose plan the checker rejected: the planner, how many violations and
/// the first [`VIOLATIONS_SHOWN`] of them, one per line (the text table joins the lines).
fn wrong_plan_error(planner: &str, violations: &Violations) -> Error {
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

/// Lower bound of the scratch tensors of `request` (aliases excepted), aligned sizes.
pub fn scratch_lower_bound(request: &PlanRequest) -> u64 {
    lower_bound(
        request
            .tensors
            .iter()
            .filter(|t| t.kind.role() == ArenaRole::Scratch && t.alias_of.is_none())
            .map(|t| (align_up(t.size, t.alignment), t.lifetime)),
    )
}

fn format_text(rows: &[BenchRow]) -> String {
    let input_width = rows.iter().map(|r| r.input.len()).max().unwrap_or(0).max(5);
    let planner_width = rows
        .iter()
        .map(|r| r.planner.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "{:<input_width$}  {:<planner_width$}  {:>12}  {:>12}  {:>7}  {:>11}\n",
        "input", "planner", "height", "lower bound", "ratio", "median ms"
    );
    for row in rows {
        match &row.outcome {
            Ok(m) => out.push_str(&format!(
                "{:<input_width$}  {:<planner_width$}  {:>12}  {:>12}  {:>7.4}  {:>11.3}\n",
                row.input,
                row.planner,
                m.height,
                m.lower_bound,
                m.ratio(),
                m.median_time.as_secs_f64() * 1e3
            )),
            Err(error) => out.push_str(&format!(
                "{:<input_width$}  {:<planner_width$}  failed: {}\n",
                row.input,
                row.planner,
                error.message.replace('\n', " ")
            )),
        }
    }
    out
}

fn rows_json(rows: &[BenchRow]) -> Value {
    let results: Vec<Value> = rows
        .iter()
        .map(|row| match &row.outcome {
            Ok(m) => json!({
                "input": row.input,
                "planner": row.planner,
                "height": m.height,
                "lower_bound": m.lower_bound,
                "ratio": m.ratio(),
                "median_ms": m.median_time.as_secs_f64() * 1e3,
                "runs": m.runs,
            }),
            Err(error) => json!({
                "input": row.input,
                "planner": row.planner,
                "error": error.message,
                "exit_code": error.kind.exit_code(),
            }),
        })
        .collect();
    json!({ "results": results })
}

fn format_csv(rows: &[BenchRow]) -> String {
    let mut out = String::from("input,planner,height,lower_bound,ratio,median_ms,error\n");
    for row in rows {
        let fields = match &row.outcome {
            Ok(m) => [
                m.height.to_string(),
                m.lower_bound.to_string(),
                format!("{:.6}", m.ratio()),
                format!("{:.3}", m.median_time.as_secs_f64() * 1e3),
                String::new(),
            ],
            Err(error) => [
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                error.message.clone(),
            ],
        };
        let mut line = vec![csv_field(&row.input), csv_field(&row.planner)];
        line.extend(fields.iter().map(|field| csv_field(field)));
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// A one-line progress bar on stderr, redrawn in place.
struct Progress {
    total: usize,
    done: usize,
    enabled: bool,
}

impl Progress {
    const WIDTH: usize = 30;

    fn new(total: usize, enabled: bool) -> Progress {
        Progress {
            total,
            done: 0,
            enabled,
        }
    }

    /// Counts one planner run and redraws the bar with what is being run.
    fn step(&mut self, input: &str, planner: &str) {
        self.done += 1;
        if !self.enabled {
            return;
        }
        let filled = Self::WIDTH * self.done / self.total.max(1);
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\r\x1b[K[{}{}] {}/{} {input} {planner}",
            "#".repeat(filled),
            ".".repeat(Self::WIDTH - filled),
            self.done,
            self.total
        );
        let _ = stderr.flush();
    }

    fn finish(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::RString;
    use abi_stable::std_types::{ROption, RVec};
    use memplan_planner_kit::testing::allocation;
    use memplan_plugin_api::{AliasOf, TensorKind, TensorRequest};

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
    fn lower_bound_counts_aligned_scratch_tensors_only() {
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
        assert_eq!(scratch_lower_bound(&request), 16 + 32);
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
            || {
                calls += 1;
                Ok(plan_with_height(48))
            },
            |plan| {
                checked.push(plan);
                Ok(())
            },
        )
        .unwrap();
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
            || {
                calls += 1;
                Ok(plan_with_height(32 * calls))
            },
            |_| {
                checks += 1;
                Ok(())
            },
        )
        .unwrap_err();
        assert!(error.message.contains("not deterministic"), "{error}");
        assert_eq!(checks, 0, "no plan to check");
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
            || Ok(plan_with_height(16)),
            |_| Err(Violations(violations)),
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
    fn outputs_list_every_row_in_order() {
        let measurement = Measurement {
            height: 90,
            lower_bound: 80,
            median_time: Duration::from_micros(1500),
            runs: 3,
        };
        let rows = vec![
            BenchRow {
                input: "a.csv".into(),
                planner: "greedy-bestfit".into(),
                outcome: Ok(measurement),
            },
            BenchRow {
                input: "a.csv".into(),
                planner: "broken".into(),
                outcome: Err(Error::plugin("crashed, badly")),
            },
            BenchRow {
                input: "a.csv".into(),
                planner: "sloppy".into(),
                outcome: Err(wrong_plan_error(
                    "sloppy",
                    &Violations(vec![Violation::new(ViolationKind::OutOfArena, "too far")]),
                )),
            },
        ];
        let csv = format_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[1], "a.csv,greedy-bestfit,90,80,1.125000,1.500,");
        assert_eq!(lines[2], "a.csv,broken,,,,,\"crashed, badly\"");
        // A line break in a message is quoted in CSV (so the row is two lines of the file).
        assert!(
            lines[3].starts_with("a.csv,sloppy,,,,,\"planner `sloppy` returned a wrong plan"),
            "{csv}"
        );
        let json = rows_json(&rows);
        assert_eq!(json["results"][0]["ratio"], 1.125);
        assert_eq!(json["results"][1]["exit_code"], 4);
        assert_eq!(json["results"][2]["exit_code"], 3);
        assert!(json["results"][2].get("height").is_none());
        let text = format_text(&rows);
        assert!(text.lines().nth(1).unwrap().contains("1.1250"), "{text}");
        assert!(
            text.lines().nth(2).unwrap().contains("failed: crashed"),
            "{text}"
        );
        let rejected = text.lines().nth(3).unwrap();
        assert!(
            rejected.contains("failed: planner `sloppy` returned a wrong plan")
                && rejected.contains("[out_of_arena, contract 4] too far"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 4, "one line per row: {text}");
    }
}
