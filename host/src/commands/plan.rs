//! `memplan plan`: read → analyze → plan (plugin) → check → render → emit.

use std::process::ExitCode;
use std::time::Duration;

use abi_stable::std_types::RString;

use crate::cli::PlanArgs;
use crate::error::Result;
use crate::registry::{Registry, RunLimits};
use crate::render::RenderOptions;
use crate::{check, emit, render};

pub fn run(args: &PlanArgs) -> Result<ExitCode> {
    let mut analysis = super::read_and_analyze(&args.input, &args.target)?;
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
