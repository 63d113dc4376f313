//! `memplan check INPUT PLAN.json`: check a plan file against a model.
//!
//! read model → analyze → read plan file → check. Prints the verdict on stdout
//! (`report::check`) and exits 0 (ok) or 3 (rejected).

use std::process::ExitCode;

use crate::check;
use crate::cli::config::CheckConfig;
use crate::cli::Format;
use crate::error::{ErrorKind, Result};
use crate::plan_file;
use crate::report::check::{json_report, text_report};

pub fn run(config: &CheckConfig) -> Result<ExitCode> {
    let analysis = super::read_and_analyze(&config.input, &config.target)?;
    let read = plan_file::read_plan_file(&config.plan, &analysis)?;
    let outcome = check::check_resolved_plan(&analysis, read.plan, read.resolution);
    let report = match config.format {
        Format::Text => text_report(&config.plan, &read.planner, &analysis, &outcome),
        Format::Json => json_report(&config.plan, &read.planner, &analysis, &outcome),
    };
    print!("{report}");
    Ok(match outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(ErrorKind::Rejected.exit_code()),
    })
}
