//! `memplan plan`: read → analyze → plan (plugin) → check → render → emit.

use std::process::ExitCode;

use abi_stable::std_types::RString;

use crate::cli::PlanArgs;
use crate::error::Result;
use crate::registry::{Registry, RunLimits};
use crate::render::RenderOptions;
use crate::{analyze, check, emit, input, render};

pub fn run(args: &PlanArgs) -> Result<ExitCode> {
    // The planner is found before the model is read, so that a wrong name or a broken plugin
    // is reported at once rather than after a long analysis.
    let limits = RunLimits::from_timeout_seconds(args.timeout)?;
    let registry = Registry::discover(&args.plugins.plugin_dirs)?;
    let planner = registry.find(&args.planner)?;

    let model = input::read_model(&args.input)?;
    let mut analysis = analyze::analyze(model)?;
    analysis.request.options = RString::from(args.planner_options.as_str());

    let plan = planner.run(&analysis.request, &limits)?;
    let checked = check::check_plan(&analysis, plan)?;
    let rendered = render::render(
        &analysis,
        &checked,
        &RenderOptions {
            prefix: args.prefix.clone(),
            external_arenas: args.external_arenas,
        },
    )?;
    emit::emit(&rendered, &args.out)?;
    Ok(ExitCode::SUCCESS)
}
