//! `memplan check INPUT PLAN.json`: check a plan file against a model.
//!
//! read model → analyze → read plan file → check. Prints the verdict on stdout
//! (`report::check`) and exits 0 (ok) or 3 (rejected). Without `--target`, the plan is checked
//! against the built-in target it names; a plan checked against another target than the one
//! it was made for is a usage error (its memories differ: every binding would be reported).
//!
//! `memplan check MODEL.tflite` (no plan file): check the offline plan the model carries
//! (`check::embedded_tflite`); its offsets are what is checked, so analysis does not take them
//! as placements to keep.

use std::path::Path;
use std::process::ExitCode;

use crate::analyze::order::stored::stored_order_violations;
use crate::check;
use crate::check::embedded_tflite::EmbeddedViolation;
use crate::cli::config::{CheckConfig, TargetConfig};
use crate::cli::Format;
use crate::error::{Error, ErrorKind, Result};
use crate::input::{LifetimeRule, Target};
use crate::plan_file;
use crate::report::check::{embedded_json_report, embedded_text_report, json_report, text_report};

pub fn run(config: &CheckConfig) -> Result<ExitCode> {
    let Some(plan) = &config.plan else {
        return check_embedded(config);
    };
    // A solution CSV (`bench --solutions`, MiniMalloc) names no target and becomes a plan
    // document only against the analysed model.
    let solution = plan
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("csv"));
    let document = if solution {
        None
    } else {
        Some(plan_file::read_document(plan)?)
    };
    let planned = document
        .as_ref()
        .and_then(|document| document.target.as_deref());
    let mut target = target_of_the_plan(plan, planned, &config.target)?;
    if let Some(document) = &document {
        // The plan's external tensors are external in the analysis it is checked against.
        target.external_io.ids = document.external_ids();
    }
    let order = document
        .as_ref()
        .and_then(|document| document.operator_order.as_deref());
    let analysis = match order {
        Some(order) => super::read_order_and_analyze(
            &config.input,
            &target,
            super::OrderRequest::Given { order, plan },
            |_| {},
        )?,
        None => super::read_and_analyze(&config.input, &target)?,
    };
    let document = match document {
        Some(document) => document,
        None => plan_file::read_solution(plan, &analysis)?,
    };
    if let Some(planned) = &document.target {
        if *planned != analysis.target {
            return Err(Error::input(format!(
                "{}: the plan was made for target `{planned}` (its \"target\" field), and it \
                 would be checked against target `{}`: its memories differ. Check it against \
                 the target it was made for: --target {planned} (or that target's file)",
                plan.display(),
                analysis.target
            )));
        }
    }
    let read = plan_file::resolve(document, &analysis);
    let outcome = check::check_resolved_plan(&analysis, read.plan, read.resolution);
    let report = match config.format {
        Format::Text => text_report(plan, &read.planner, &analysis, &outcome),
        Format::Json => json_report(plan, &read.planner, &analysis, &outcome),
    };
    crate::report::print(&report, "the check report")?;
    Ok(match outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(ErrorKind::Rejected.exit_code()),
    })
}

/// The target to check `plan` against: `--target` when given, else the built-in target the
/// plan names (`planned`; a plan for a target file needs that file given with `--target`).
fn target_of_the_plan(
    plan: &Path,
    planned: Option<&str>,
    given: &TargetConfig,
) -> Result<TargetConfig> {
    if given.target.is_some() {
        return Ok(given.clone());
    }
    match planned {
        Some(name) if Target::preset(name).is_some() => Ok(TargetConfig {
            target: Some(name.to_string()),
            ..given.clone()
        }),
        Some(name) if name != Target::generic().name => Err(Error::input(format!(
            "{}: the plan was made for target `{name}`, which is not built in; give that \
             target's file with --target FILE",
            plan.display()
        ))),
        _ => Ok(given.clone()),
    }
}

fn check_embedded(config: &CheckConfig) -> Result<ExitCode> {
    if !config.target.external_io.kinds.is_empty() {
        return Err(Error::input(format!(
            "{}: without a plan file, check checks the offline plan the model carries, in \
             which TensorFlow Lite Micro keeps every tensor in its arena; --external-io does \
             not apply (give the plan file memplan wrote to check a plan with external tensors)",
            config.input.display()
        )));
    }
    let mut order_violations = Vec::new();
    let analysis = super::read_edit_and_analyze(&config.input, &config.target, |model| {
        if let LifetimeRule::TfliteMicro(graph) = &mut model.rule {
            graph.offline_plan_under_check = true;
            order_violations = stored_order_violations(graph);
        }
    })?;
    let mut report = check::embedded_tflite::check_embedded_plan(&analysis)?;
    report.violations.extend(
        order_violations
            .into_iter()
            .map(|violation| EmbeddedViolation {
                kind: "order",
                tensor: violation.tensor,
                message: violation.message,
            }),
    );
    let text = match config.format {
        Format::Text => embedded_text_report(&config.input, &report),
        Format::Json => embedded_json_report(&config.input, &report),
    };
    crate::report::print(&text, "the check report")?;
    Ok(if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(ErrorKind::Rejected.exit_code())
    })
}
