//! `memplan planners`: list the planners found and the files rejected.

use std::process::ExitCode;

use crate::cli::PlannersArgs;
use crate::error::Result;
use crate::registry::Registry;

pub fn run(args: &PlannersArgs) -> Result<ExitCode> {
    let registry = Registry::discover(&args.plugins.plugin_dirs)?;
    for dir in &registry.searched {
        println!("searched {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
