//! One module per subcommand, each wiring the pipeline stages for it.

pub mod bench;
pub mod check;
pub mod plan;
pub mod planners;

use std::path::Path;

use crate::analyze::{self, Analysis};
use crate::cli::{PluginArgs, TargetArgs};
use crate::error::{Error, Result};
use crate::input;
use crate::registry::TrustPolicy;

/// The read and analyze stages, shared by `plan` and `check`: the target flags, then the model.
pub(crate) fn read_and_analyze(model: &Path, target: &TargetArgs) -> Result<Analysis> {
    let setup = input::TargetSetup::load(
        target.target.as_deref(),
        &target.memory,
        target.rules.as_deref(),
    )?;
    let model = input::read_model(model)?;
    analyze::analyze(model, &setup.target, &setup.constraints, &setup.rules)
}

/// The plugin trust policy of the command line (`--allow-insecure-plugins`,
/// `--plugin-sha256`, `--lock` or `./memplan.lock`).
fn trust_policy(args: &PluginArgs) -> Result<TrustPolicy> {
    let cwd = std::env::current_dir()
        .map_err(|error| Error::internal(format!("cannot find the current directory: {error}")))?;
    TrustPolicy::from_args(
        args.allow_insecure_plugins,
        &args.plugin_sha256,
        args.lock.as_deref(),
        &cwd,
    )
}
