//! One module per subcommand, each wiring the pipeline stages for it.

pub mod check;
pub mod plan;
pub mod planners;
pub mod worker;

use crate::cli::PluginArgs;
use crate::error::{Error, Result};
use crate::registry::TrustPolicy;

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
