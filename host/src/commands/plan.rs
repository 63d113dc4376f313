//! `memplan plan`: read → analyze → plan (plugin) → check → render → emit.

use std::process::ExitCode;
use std::time::Duration;

use abi_stable::std_types::RString;

use crate::cli::PlanArgs;
use crate::error::Result;
use crate::registry::{Registry, RunLimits};
use crate::render::RenderOptions;
use crate::{analyze, check, emit, input, render};

pub fn run(args: &PlanArgs) -> Result<ExitCode> {
    let setup = input::TargetSetup::load(
        args.target.target.as_deref(),
        &args.target.memory,
        args.target.rules.as_deref(),
    )?;
    let model = input::read_model(&args.input)?;
    let mut analysis = analyze::analyze(model, &setup.target, &setup.constraints, &setup.rules)?;
    analysis.request.options = RString::from(args.planner_options.as_str());

    let registry = Registry::discover(&args.plugins.plugin_dirs)?;
    let limits = RunLimits {
        timeout: args.timeout.map(Duration::from_secs_f64),
    };
    let plan = registry.plan(&args.planner, &analysis.request, &limits)?;
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
