//! Plan stage, host side: finds planner plugins, selects one by NAME and runs it.
//!
//! Search order (DESIGN.md): each `--plugin-dir`, then `MEMPLAN_PLUGIN_PATH`, then the
//! directory of the `memplan` executable and its `plugins/` subfolder; never the current
//! directory. Libraries are loaded with `lib_header_from_path` + `init_root_module` and never
//! unloaded.

pub mod isolate;
pub mod trust;

use std::path::PathBuf;

use memplan_plugin_api::{MemoryPlan, PlanRequest};

use crate::error::{Error, Result};

/// How a planner run is bounded.
#[derive(Clone, Debug, Default)]
pub struct RunLimits {
    /// Stop the planner after this long (`--timeout`).
    pub timeout: Option<std::time::Duration>,
}

/// The planners found on the search path, and the files that were rejected.
#[derive(Debug, Default)]
pub struct Registry {
    /// Directories searched, in order.
    pub searched: Vec<PathBuf>,
}

impl Registry {
    /// Scans the search path built from `plugin_dirs`, the environment and the executable.
    pub fn discover(plugin_dirs: &[PathBuf]) -> Result<Registry> {
        Ok(Registry {
            searched: plugin_dirs.to_vec(),
        })
    }

    /// Runs the planner called `name` on `request`.
    pub fn plan(
        &self,
        name: &str,
        _request: &PlanRequest,
        _limits: &RunLimits,
    ) -> Result<MemoryPlan> {
        Err(Error::plugin(format!(
            "no planner named `{name}`: plugin loading is not implemented yet"
        )))
    }
}
