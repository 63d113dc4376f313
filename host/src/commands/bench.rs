//! `memplan bench INPUTS... --planner a,b,c`: reads each input, measures each planner on it
//! (`selection::measure`, which says what the figures are) and prints the table
//! (`report::bench`). A progress bar is drawn on stderr when it is a terminal.

use std::path::Path;
use std::process::ExitCode;

use memplan_plugin_api::{ArenaRole, MemoryPlan, PlanRequest};

use crate::check;
use crate::cli::config::BenchConfig;
use crate::cli::BenchFormat;
use crate::emit::{self, OutputFile};
use crate::error::{Error, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::registry::Registry;
use crate::report::bench::{format_csv, format_text, rows_json};
use crate::selection::measure::{measure_planner, time_limit, BenchRow};

pub fn run(config: &BenchConfig) -> Result<ExitCode> {
    if config.solutions.is_some() {
        check_solution_names(&config.inputs)?;
    }
    let planners = &config.planners;
    let selected: Vec<&str> = planners.iter().map(String::as_str).collect();
    let registry = Registry::discover(&config.plugins.dirs, &config.plugins.trust, &selected)?;
    let progress = progress_bar(
        config.inputs.len() * planners.len() * config.runs as usize,
        config.show_progress,
    );
    let mut rows = Vec::with_capacity(config.inputs.len() * planners.len());
    let mut solutions = Vec::new();
    for path in &config.inputs {
        let mut analysis = super::read_and_analyze(path, &config.target)?;
        analysis.ensure_plannable()?;
        let label = path.display().to_string();
        for planner in planners {
            config.options.set_for(&mut analysis.request, planner);
            // External tensors are not the planner's, nor in the lower bound.
            let planner_request = analysis.planner_request();
            let limit = time_limit(
                &planner_request.options,
                registry
                    .find(planner)
                    .ok()
                    .and_then(|handle| handle.default_time_limit()),
                config.limits.timeout,
            );
            let measured = measure_planner(
                &planner_request,
                planner,
                config.runs,
                limit,
                || {
                    progress.set_message(format!("{label} {planner}"));
                    progress.inc(1);
                    registry.plan(planner, &planner_request, &config.limits, config.isolate)
                },
                |plan| {
                    check::check_plan(&analysis, analysis.external.restore_indices(plan))
                        .map(|checked| checked.plan)
                },
            );
            drop(planner_request);
            let outcome = match (measured, &config.solutions) {
                (Ok((measurement, plan)), Some(_)) => {
                    solutions.push(solution_file(path, planner, &analysis.request, &plan)?);
                    Ok(measurement)
                }
                (measured, _) => measured.map(|(measurement, _)| measurement),
            };
            rows.push(BenchRow {
                input: label.clone(),
                planner: planner.clone(),
                outcome,
            });
        }
    }
    progress.finish_and_clear();
    if let Some(dir) = &config.solutions {
        emit::publish(&solutions, dir)?;
    }

    let text = match config.format {
        BenchFormat::Text => format_text(&rows),
        BenchFormat::Json => format!("{:#}\n", rows_json(&rows)),
        BenchFormat::Csv => format_csv(&rows),
    };
    crate::report::print(&text, "the bench results")?;
    let first_failure = rows.iter().find_map(|row| row.outcome.as_ref().err());
    Ok(match first_failure {
        Some(error) => error.exit_code(),
        None => ExitCode::SUCCESS,
    })
}

/// `plan` of `input` by `planner` as the file `{input file stem}.{planner}.csv` of the
/// `--solutions` directory (see [`solution_csv`]).
fn solution_file(
    input: &Path,
    planner: &str,
    request: &PlanRequest,
    plan: &MemoryPlan,
) -> Result<OutputFile> {
    let text = solution_csv(request, plan).map_err(|problem| {
        Error::input(format!(
            "--solutions: cannot write {} as a MiniMalloc solution: {problem}",
            input.display()
        ))
    })?;
    Ok(OutputFile {
        name: solution_name(input, planner),
        contents: text.into_bytes(),
    })
}

/// The name of the solution of `input` by `planner`: `{input file stem}.{planner}.csv`.
fn solution_name(input: &Path, planner: &str) -> String {
    let stem = input
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".to_string());
    format!("{stem}.{planner}.csv")
}

/// Two inputs whose solutions would have the same name (same file stem in two directories)
/// are refused before any planner runs, rather than one solution replacing the other.
fn check_solution_names(inputs: &[std::path::PathBuf]) -> Result<()> {
    let mut seen = std::collections::HashMap::new();
    for input in inputs {
        let name = solution_name(input, "");
        if let Some(first) = seen.insert(name, input) {
            return Err(Error::input(format!(
                "--solutions: `{}` and `{}` would write solutions of the same name; bench them \
                 in two runs with two --solutions directories, or rename one",
                first.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// A MiniMalloc-format solution of `plan`: `id,lower,upper,size,offset`, one line per scratch
/// tensor with bytes of its own (aliases and empty tensors have none), in tensor order; the
/// lifetime half-open as MiniMalloc writes it (`upper` = last step + 1), the offset in the
/// scratch arena. A MiniMalloc solution describes one arena: a plan whose scratch tensors
/// spilled over several memories has none.
pub fn solution_csv(
    request: &PlanRequest,
    plan: &MemoryPlan,
) -> std::result::Result<String, String> {
    let mut arenas = plan
        .arenas
        .iter()
        .filter(|arena| arena.role == ArenaRole::Scratch);
    if let (Some(_), Some(_)) = (arenas.next(), arenas.next()) {
        return Err(format!(
            "its plan has {} scratch arenas (tensors split over memories), and a MiniMalloc \
             solution describes one",
            plan.arenas
                .iter()
                .filter(|arena| arena.role == ArenaRole::Scratch)
                .count()
        ));
    }
    let rows = plan.allocations.iter().filter_map(|allocation| {
        let tensor = &request.tensors[allocation.tensor as usize];
        let own_bytes = allocation.binding.role == ArenaRole::Scratch
            && tensor.alias_of.is_none()
            && tensor.size > 0;
        own_bytes.then(|| {
            (
                tensor.id.as_str(),
                u64::from(tensor.lifetime.first),
                u64::from(tensor.lifetime.last) + 1,
                tensor.size,
                allocation.binding.offset,
            )
        })
    });
    Ok(memplan_minimalloc::write_solution(rows))
}

/// A one-line progress bar on stderr (drawn only when it is a terminal and `shown`): runs
/// done of `runs`, and what runs now.
fn progress_bar(runs: usize, shown: bool) -> ProgressBar {
    if !shown {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(runs as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("[{bar:30}] {pos}/{len} {wide_msg}") {
        bar.set_style(style.progress_chars("#>."));
    }
    bar
}
