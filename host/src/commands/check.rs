//! `memplan check INPUT PLAN.json`: check a plan file against a model.

use std::process::ExitCode;

use crate::cli::CheckArgs;
use crate::error::{Error, Result};
use crate::{analyze, input};

pub fn run(args: &CheckArgs) -> Result<ExitCode> {
    let setup = input::TargetSetup::load(
        args.target.target.as_deref(),
        &args.target.memory,
        args.target.rules.as_deref(),
    )?;
    let model = input::read_model(&args.input)?;
    let _analysis = analyze::analyze(model, &setup.target, &setup.constraints, &setup.rules)?;
    Err(Error::internal(format!(
        "{}: checking plan files is not implemented yet",
        args.plan.display()
    )))
}
