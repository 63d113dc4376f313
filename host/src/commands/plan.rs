//! `memplan plan`: read → analyze → plan (plugin) → check → render → emit.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use abi_stable::std_types::RString;

use crate::cli::{Format, PlanArgs};
use crate::emit::summary::{self, RunReport};
use crate::error::{Error, Result};
use crate::registry::{Registry, RunLimits};
use crate::render::RenderOptions;
use crate::{analyze, check, emit, input, render};

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

pub fn run(args: &PlanArgs) -> Result<ExitCode> {
    // Mistakes in the output options, a wrong planner name or a broken plugin are reported
    // before the model is read and planned, which may take long.
    let render_options = RenderOptions {
        prefix: args.prefix.clone(),
        external_arenas: args.external_arenas,
        planner: args.planner.clone(),
    };
    render::check_options(&render_options)?;
    emit::check_destination(&args.out)?;
    let limits = RunLimits::from_timeout_seconds(args.timeout)?;
    let registry = Registry::discover(&args.plugins.plugin_dirs)?;
    let planner = registry.find(&args.planner)?;

    let mut timings = Vec::new();
    let model = timed(&mut timings, "read", || input::read_model(&args.input))?;
    let mut analysis = timed(&mut timings, "analyze", || analyze::analyze(model))?;
    analysis.request.options = RString::from(args.planner_options.as_str());

    let plan = timed(&mut timings, "plan", || {
        planner.run(&analysis.request, &limits)
    })?;
    let planner_summary = plan.summary.to_string();
    let checked = timed(&mut timings, "check", || {
        check::check_plan(&analysis, plan).map_err(Error::from)
    })?;
    let rendered = timed(&mut timings, "render", || {
        render::render(&analysis, &checked, &render_options)
    })?;
    let files = timed(&mut timings, "emit", || emit::emit(&rendered, &args.out))?;

    let report = RunReport {
        planner: args.planner.clone(),
        planner_summary,
        timings,
        out: args.out.clone(),
        files,
    };
    let mut stdout = std::io::stdout().lock();
    match args.format {
        Format::Text => summary::write_text(&rendered, &report, &mut stdout),
        Format::Json => summary::write_json(&rendered, &report, &mut stdout),
    }
    .map_err(|error| Error::internal(format!("cannot write the summary to stdout: {error}")))?;
    Ok(ExitCode::SUCCESS)
}
