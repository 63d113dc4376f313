//! `memplan bench INPUTS... --planner a,b,c`: reads each input, measures each planner on it
//! (`selection::measure`, which says what the figures are) and prints the table
//! (`report::bench`). A progress bar is drawn on stderr when it is a terminal.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use memplan_plugin_api::{ArenaRole, MemoryPlan, PlanRequest};

use crate::check;
use crate::cli::config::BenchConfig;
use crate::cli::BenchFormat;
use crate::error::{Error, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::registry::Registry;
use crate::report::bench::{format_csv, format_text, rows_json};
use crate::selection::measure::{measure_planner, BenchRow};

pub fn run(config: &BenchConfig) -> Result<ExitCode> {
    let planners = &config.planners;
    let selected: Vec<&str> = planners.iter().map(String::as_str).collect();
    let registry = Registry::discover(&config.plugins.dirs, &config.plugins.trust, &selected)?;
    let progress = progress_bar(
        config.inputs.len() * planners.len() * config.runs as usize,
        config.show_progress,
    );
    let mut rows = Vec::with_capacity(config.inputs.len() * planners.len());
    for path in &config.inputs {
        let mut analysis = super::read_and_analyze(path, &config.target)?;
        analysis.ensure_plannable()?;
        let label = path.display().to_string();
        for planner in planners {
            config.options.set_for(&mut analysis.request, planner);
            // External tensors are not the planner's, nor in the lower bound.
            let planner_request = analysis.planner_request();
            let measured = measure_planner(
                &planner_request,
                planner,
                config.runs,
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
                (Ok((measurement, plan)), Some(dir)) => {
                    write_solution(dir, path, planner, &analysis.request, &plan)?;
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

    let mut stdout = std::io::stdout().lock();
    let text = match config.format {
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

/// Writes `plan` of `input` by `planner` as `DIR/{input file stem}.{planner}.csv` (see
/// [`solution_csv`]); the directory is created when missing.
fn write_solution(
    dir: &Path,
    input: &Path,
    planner: &str,
    request: &PlanRequest,
    plan: &MemoryPlan,
) -> Result<()> {
    let stem = input
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".to_string());
    let file = dir.join(format!("{stem}.{planner}.csv"));
    let text = solution_csv(request, plan).map_err(|problem| {
        Error::input(format!(
            "--solutions: cannot write {} as a MiniMalloc solution: {problem}",
            input.display()
        ))
    })?;
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&file, text))
        .map_err(|error| {
            Error::input(format!(
                "--solutions: cannot write {}: {error}; give a directory you can write",
                file.display()
            ))
        })
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
    let mut out = String::from("id,lower,upper,size,offset\n");
    for allocation in plan.allocations.iter() {
        let tensor = &request.tensors[allocation.tensor as usize];
        if allocation.binding.role != ArenaRole::Scratch
            || tensor.alias_of.is_some()
            || tensor.size == 0
        {
            continue;
        }
        out.push_str(&format!(
            "{},{},{},{},{}\n",
            tensor.id,
            tensor.lifetime.first,
            u64::from(tensor.lifetime.last) + 1,
            tensor.size,
            allocation.binding.offset
        ));
    }
    Ok(out)
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
