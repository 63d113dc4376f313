//! `memplan planners`: list the planners found (name, version, description, file, the file's
//! SHA-256 and where the planner runs by default), then the files that were rejected and why.

use std::process::ExitCode;

use serde::Serialize;

use crate::cli::config::PlannersConfig;
use crate::cli::Format;
use crate::error::{Error, Result};
use crate::registry::Registry;

/// The `--format json` document: exactly these fields, for scripts.
#[derive(Serialize)]
struct Listing<'a> {
    planners: Vec<PlannerRecord<'a>>,
    rejected: Vec<RejectedRecord<'a>>,
}

#[derive(Serialize)]
struct PlannerRecord<'a> {
    name: &'a str,
    version: &'a str,
    description: &'a str,
    path: String,
    sha256: &'a str,
    /// Part of memplan's installation: runs in process by default, where third-party
    /// planners run sandboxed (`--isolate=auto`).
    shipped: bool,
}

#[derive(Serialize)]
struct RejectedRecord<'a> {
    path: String,
    reason: &'a str,
}

pub fn run(config: &PlannersConfig) -> Result<ExitCode> {
    let registry = Registry::discover(&config.plugins.dirs, &config.plugins.trust, &[])?;
    let text = match config.format {
        Format::Json => json_listing(&registry)?,
        Format::Text => text_listing(&registry),
    };
    crate::report::print(&format!("{text}\n"), "the planner list")?;
    Ok(ExitCode::SUCCESS)
}

fn json_listing(registry: &Registry) -> Result<String> {
    let listing = Listing {
        planners: registry
            .planners()
            .into_iter()
            .map(|planner| PlannerRecord {
                name: &planner.name,
                version: &planner.version,
                description: &planner.description,
                path: planner.file.path.display().to_string(),
                sha256: &planner.file.sha256,
                shipped: planner.shipped,
            })
            .collect(),
        rejected: registry
            .rejected()
            .iter()
            .map(|rejected| RejectedRecord {
                path: rejected.path.display().to_string(),
                reason: &rejected.reason,
            })
            .collect(),
    };
    serde_json::to_string_pretty(&listing)
        .map_err(|error| Error::internal(format!("cannot serialize the planner list: {error}")))
}

fn text_listing(registry: &Registry) -> String {
    let mut out = String::new();
    let planners = registry.planners();
    if planners.is_empty() {
        out.push_str("no planners found\n");
    }
    for planner in planners {
        out.push_str(&format!(
            "{} {}\n    {}\n    file:   {}\n    sha256: {}\n    runs:   {}\n",
            planner.name,
            planner.version,
            planner.description,
            planner.file.path.display(),
            planner.file.sha256,
            if planner.shipped {
                "in process (shipped with memplan)"
            } else {
                "in a sandboxed worker (third-party; --isolate=never to run it in process)"
            }
        ));
    }
    if !registry.rejected().is_empty() {
        out.push_str("\nrejected:\n");
        for rejected in registry.rejected() {
            out.push_str(&format!(
                "    {}: {}\n",
                rejected.path.display(),
                rejected.reason
            ));
        }
    }
    out.push_str("\nsearched:\n");
    if registry.searched().is_empty() {
        out.push_str("    (no plugin directory exists)\n");
    }
    for dir in registry.searched() {
        out.push_str(&format!("    {}\n", dir.display()));
    }
    out.trim_end().to_string()
}
