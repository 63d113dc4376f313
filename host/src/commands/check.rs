//! `memplan check INPUT PLAN.json`: check a plan file against a model.
//!
//! read model → analyze → read plan file → check. Prints the verdict on stdout
//! (`report::check`) and exits 0 (ok) or 3 (rejected).
//!
//! `memplan check MODEL.tflite` (no plan file): check the offline plan the model carries
//! (`check::embedded_tflite`); its offsets are what is checked, so analysis does not take them
//! as placements to keep.

use std::process::ExitCode;

use crate::check;
use crate::cli::config::CheckConfig;
use crate::cli::Format;
use crate::error::{ErrorKind, Result};
use crate::input::LifetimeRule;
use crate::plan_file;
use crate::report::check::{embedded_json_report, embedded_text_report, json_report, text_report};

pub fn run(config: &CheckConfig) -> Result<ExitCode> {
    let Some(plan) = &config.plan else {
        return check_embedded(config);
    };
    let analysis = super::read_and_analyze(&config.input, &config.target)?;
    let read = plan_file::read_plan_file(plan, &analysis)?;
    let outcome = check::check_resolved_plan(&analysis, read.plan, read.resolution);
    let report = match config.format {
        Format::Text => text_report(plan, &read.planner, &analysis, &outcome),
        Format::Json => json_report(plan, &read.planner, &analysis, &outcome),
    };
    print!("{report}");
    Ok(match outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(ErrorKind::Rejected.exit_code()),
    })
}

fn check_embedded(config: &CheckConfig) -> Result<ExitCode> {
    let analysis = super::read_edit_and_analyze(&config.input, &config.target, |model| {
        if let LifetimeRule::TfliteMicro(graph) = &mut model.rule {
            graph.offline_plan_under_check = true;
        }
    })?;
    let report = check::embedded_tflite::check_embedded_plan(&analysis)?;
    let text = match config.format {
        Format::Text => embedded_text_report(&config.input, &report),
        Format::Json => embedded_json_report(&config.input, &report),
    };
    print!("{text}");
    Ok(if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(ErrorKind::Rejected.exit_code())
    })
}
