//! `memplan plan`: read → analyze → plan (plugin) → check → render → emit.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::cli::config::PlanConfig;
use crate::cli::Format;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::Registry;
use crate::report::plan::{self as summary, RunReport};
use crate::selection;
use crate::{check, emit, plan_file, render};

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
    render_options.planners = planners
        .iter()
        .map(|planner| plan_file::PlannerRecord {
            name: planner.name.clone(),
            version: planner.version.clone(),
            file: planner.source.path_label(),
            sha256: planner.source.sha256_label().to_string(),
        })
        .collect();

    let mut timings = Vec::new();
    let mut analysis = timed(&mut timings, "read+analyze", || {
        super::read_order_and_analyze(
            &config.input,
            &config.target,
            super::OrderRequest::Search(config.order),
            |model| offline_plan_as_read(model, config.ignore_offline_plan),
        )
    })?;
    analysis.ensure_plannable()?;
    crate::render::check_emit_tflite(&analysis, &render_options)?;

    // Each candidate plan is checked before it may compete, so a wrong plan never wins.
    let mut check_time = Duration::ZERO;
    let planning_start = Instant::now();
    // The request carries the first planner's options; another planner whose options differ
    // gets a copy with its own (`request_for`).
    options.set_for(&mut analysis.request, &names[0]);
    // External tensors are not the planner's: it gets the others, renumbered.
    let planner_request = analysis.planner_request();
    let selection = selection::select_plan(names, &analysis.request, |name| {
        let index = names
            .iter()
            .position(|n| n == name)
            .expect("name from the list");
        let request = options.request_for(&planner_request, name);
        let plan = planners[index].execute(&request, limits, config.isolate)?;
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
        planner_file: chosen.source.path_label(),
        shadowed_files: registry.shadowed(&chosen.name).to_vec(),
        planner: render_options.planner.clone(),
        planner_summary,
        candidates,
        timings,
        out: config.out.clone(),
        files,
    };
    let mut stdout = std::io::stdout().lock();
    let written = match config.format {
        Format::Text => summary::write_text(&rendered, &report, &mut stdout),
        Format::Json => summary::write_json(&rendered, &report, &mut stdout),
    }
    .and_then(|()| std::io::Write::flush(&mut stdout));
    crate::report::stdout_written(written, "the summary")?;
    let exit = failed_candidates_exit(&report);
    drop(planner_request);
    crate::allocator::release((analysis, checked, rendered));
    Ok(exit)
}

/// A `.tflite` model's offline plan (one memplan wrote with `--emit-tflite`, or another tool's)
/// is kept as fixed placements, which a fresh plan may well beat: dropped with
/// `--ignore-offline-plan`, else the user is told it is kept and how to drop it.
fn offline_plan_as_read(model: &mut crate::input::Model, ignore: bool) {
    let crate::input::LifetimeRule::TfliteMicro(graph) = &mut model.rule else {
        return;
    };
    if ignore {
        graph.offline_offsets = None;
        return;
    }
    let placed = graph.offline_offsets.as_ref().map_or(0, |offsets| {
        offsets.iter().filter(|&&offset| offset >= 0).count()
    });
    if placed > 0 {
        tracing::warn!(
            "{} carries an offline plan (OfflineMemoryAllocation metadata, e.g. from \
             --emit-tflite): its {placed} offsets are kept as fixed placements; plan with \
             --ignore-offline-plan to plan the model afresh",
            model.path.display()
        );
    }
}

/// A planner that fails is broken, even when another's plan is kept: the run writes the kept
/// plan and exits with the failure's code (3 for a wrong plan, 4 for a planner that crashed, was
/// stopped by the sandbox or timed out, 2 for options it refused), so that CI notices; the
/// first failed candidate in the order listed decides. A planner that found no plan within the
/// budgets (does not fit) has not failed: another's plan fitting them is the point of a
/// best-of run.
fn failed_candidates_exit(report: &RunReport) -> ExitCode {
    let failed: Vec<(&str, ErrorKind)> = report
        .candidates
        .iter()
        .filter_map(|candidate| match &candidate.outcome {
            selection::CandidateOutcome::Rejected { .. } => {
                Some((candidate.planner.as_str(), ErrorKind::Rejected))
            }
            selection::CandidateOutcome::Failed { kind, .. } if *kind != ErrorKind::DoesNotFit => {
                Some((candidate.planner.as_str(), *kind))
            }
            _ => None,
        })
        .collect();
    let Some(&(_, kind)) = failed.first() else {
        return ExitCode::SUCCESS;
    };
    let what: Vec<String> = failed
        .iter()
        .map(|(name, kind)| match kind {
            ErrorKind::Rejected => {
                format!("planner `{name}` returned a wrong plan (rejected by the checker)")
            }
            ErrorKind::Input => format!("planner `{name}` refused its options"),
            _ => format!("planner `{name}` failed"),
        })
        .collect();
    eprintln!(
        "memplan: error: {} (see the summary); the plan of `{}` was written to {}, and memplan \
         exits {} ({}) so that the failure is noticed",
        what.join(", "),
        report.planner,
        report.out.display(),
        kind.exit_code(),
        if failed.len() == 1 {
            "its code"
        } else {
            "the first failure's code"
        }
    );
    ExitCode::from(kind.exit_code())
}
