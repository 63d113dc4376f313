//! `memplan check INPUT PLAN.json`: check a plan file against a model.

use std::process::ExitCode;

use crate::cli::CheckArgs;
use crate::error::{Error, Result};

pub fn run(args: &CheckArgs) -> Result<ExitCode> {
    let _analysis = super::read_and_analyze(&args.input, &args.target)?;
    Err(Error::internal(format!(
        "{}: checking plan files is not implemented yet",
        args.plan.display()
    )))
}
