//! The command line: clap's types ([`args`], which import nothing else of memplan), the
//! parsers of every command-line string ([`parse`]) and the one step that checks them all and
//! resolves them into the configuration the commands run with ([`config`]). `crate::main`
//! parses, resolves, then dispatches to `crate::commands`.

pub mod args;
pub mod config;
pub mod parse;
pub mod planner_options;

pub use args::{
    BenchArgs, BenchFormat, CheckArgs, Cli, Command, Format, PlanArgs, PlannersArgs, PluginArgs,
    TargetArgs, Verbosity,
};
