//! `memplan planners`: list the planners (name, version, description, file — `built in` for
//! memplan's own —, the file's SHA-256, the interface it is built against and where the planner
//! runs by default), then the files that were rejected and why.

use std::process::ExitCode;

use serde::Serialize;

use crate::cli::config::PlannersConfig;
use crate::cli::Format;
use crate::error::{Error, Result};
use crate::registry::Registry;
use memplan_plugin_api::manifest::PlannerInterface;

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
    /// The plugin file, or `built in`.
    path: String,
    /// The file's SHA-256, or `built in`.
    sha256: &'a str,
    /// `rust` (the plugin ABI) or `c` (`memplan_planner.h`).
    interface: &'static str,
    /// Built into memplan: runs in process by default, where third-party planners (every
    /// plugin file) run sandboxed (`--isolate=auto`).
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
                path: planner.source.path_label(),
                sha256: planner.source.sha256_label(),
                interface: match planner.interface {
                    PlannerInterface::Rust => "rust",
                    PlannerInterface::C => "c",
                },
                shipped: planner.shipped(),
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
        let origin = match planner.source.file() {
            None => "    file:   built into memplan\n".to_string(),
            Some(file) => format!(
                "    file:   {}\n    sha256: {}\n",
                file.path.display(),
                file.sha256
            ),
        };
        let interface = match planner.interface {
            PlannerInterface::Rust => "Rust (plugin ABI)".to_string(),
            PlannerInterface::C => format!(
                "C (memplan_planner.h, C ABI {})",
                memplan_plugin_api::c_abi::C_ABI_VERSION
            ),
        };
        out.push_str(&format!(
            "{} {}\n    {}\n{origin}    abi:    {interface}\n    runs:   {}\n",
            planner.name,
            planner.version,
            planner.description,
            if planner.shipped() {
                "in process (built into memplan)"
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
