//! `memplan plan`: read → analyze → plan (plugin) → check → render → emit.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::cli::config::PlanConfig;
use crate::cli::Format;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::Registry;
use crate::report::plan::{self as summary, RunReport};
use crate::selection;
use crate::{check, emit, render};

/// Runs `stage` and records how long it took under `name`.
fn timed<T>(
    timings: &mut Vec<(&'static str, Duration)>,
    name: &'static str,
    stage: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let start = Instant::now();
    let result = stage();
    timings.push((name, start.elapsed()));
    result
}

pub fn run(config: &PlanConfig) -> Result<ExitCode> {
    // A wrong planner name or a broken plugin is reported before the model is read and
    // planned, which may take long (usage errors were found by `cli::config::resolve`).
    let mut render_options = config.render.clone();
    let names = &config.planners;
    let options = &config.options;
    let limits = &config.limits;
    let selected: Vec<&str> = names.iter().map(String::as_str).collect();
    let registry = Registry::discover(&config.plugins.dirs, &config.plugins.trust, &selected)?;
    let planners = names
        .iter()
        .map(|name| registry.find(name))
        .collect::<Result<Vec<_>>>()?;

    let mut timings = Vec::new();
    let mut analysis = timed(&mut timings, "read+analyze", || {
        super::read_order_and_analyze(
            &config.input,
            &config.target,
            super::OrderRequest::Search(config.order),
        )
    })?;
    analysis.ensure_plannable()?;
    crate::render::check_emit_tflite(&analysis, &render_options)?;

    // Each candidate plan is checked before it may compete, so a wrong plan never wins.
    let mut check_time = Duration::ZERO;
    let planning_start = Instant::now();
    // The request carries the first planner's options; another planner whose options differ
    // gets a copy with its own (a cost paid only with per-planner options).
    options.set_for(&mut analysis.request, &names[0]);
    // External tensors are not the planner's: it gets the others, renumbered.
    let planner_request = analysis.planner_request();
    let selection = selection::select_plan(names, &analysis.request, |name| {
        let index = names
            .iter()
            .position(|n| n == name)
            .expect("name from the list");
        let own_options;
        let request = if planner_request.options.as_str() == options.for_planner(name) {
            &*planner_request
        } else {
            let mut copy = planner_request.clone().into_owned();
            options.set_for(&mut copy, name);
            own_options = copy;
            &own_options
        };
        let plan = planners[index].execute(request, limits, config.isolate)?;
        let plan = analysis.external.restore_indices(plan);
        let check_start = Instant::now();
        let checked = check::check_plan(&analysis, plan).map_err(|violations| {
            let error = Error::from(violations);
            Error::new(
                error.kind,
                format!("planner `{name}` returned a wrong plan: {error}"),
            )
        });
        check_time += check_start.elapsed();
        checked
    })
    .map_err(|error| {
        // Only when no planner's plan is kept: a rejected candidate beside a kept plan is
        // reported in the summary, and the kept plan is written.
        let message = format!(
            "{}\nnothing was written to {}",
            error.message.trim_end(),
            config.out.display()
        );
        Error::new(error.kind, message)
    })?;
    timings.push(("plan", planning_start.elapsed().saturating_sub(check_time)));
    timings.push(("check", check_time));

    let candidates = if names.len() > 1 {
        selection.candidates()
    } else {
        Vec::new()
    };
    render_options.planner = selection.chosen_planner().to_string();
    let checked = selection.into_plan();
    let planner_summary = checked.plan.summary.to_string();
    let rendered = timed(&mut timings, "render", || {
        render::render(&analysis, &checked, &render_options)
    })?;
    let files = timed(&mut timings, "emit", || emit::emit(&rendered, &config.out))?;

    let chosen = registry.find(&render_options.planner)?;
    let report = RunReport {
        planner_file: chosen.file.path.clone(),
        shadowed_files: registry.shadowed(&chosen.name).to_vec(),
        planner: render_options.planner.clone(),
        planner_summary,
        candidates,
        timings,
        out: config.out.clone(),
        files,
    };
    let mut stdout = std::io::stdout().lock();
    match config.format {
        Format::Text => summary::write_text(&rendered, &report, &mut stdout),
        Format::Json => summary::write_json(&rendered, &report, &mut stdout),
    }
    .map_err(|error| Error::internal(format!("cannot write the summary to stdout: {error}")))?;
    let exit = wrong_plans_exit(&report);
    drop(planner_request);
    crate::allocator::release((analysis, checked, rendered));
    Ok(exit)
}

/// A planner that returns a wrong plan is broken, even when another's plan is kept: the run
/// writes the kept plan and exits 3 (the checker's code), so that CI notices.
fn wrong_plans_exit(report: &RunReport) -> ExitCode {
    let wrong: Vec<&str> = report
        .candidates
        .iter()
        .filter(|candidate| {
            matches!(
                candidate.outcome,
                selection::CandidateOutcome::Rejected { .. }
            )
        })
        .map(|candidate| candidate.planner.as_str())
        .collect();
    if wrong.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "memplan: error: planner{} `{}` returned a wrong plan (rejected by the checker, see the \
         summary); the plan of `{}` was written to {}, and memplan exits 3 so that the broken \
         planner is noticed",
        if wrong.len() == 1 { "" } else { "s" },
        wrong.join("`, `"),
        report.planner,
        report.out.display()
    );
    ExitCode::from(ErrorKind::Rejected.exit_code())
}
