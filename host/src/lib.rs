//! memplan: plans where every tensor of a model lives in memory, with planner backends
//! loaded at run time from plugins, checks every plan, and writes C sources.
//!
//! The modules follow the pipeline, data flowing one way:
//!
//! ```text
//! input ──► analyze ──► registry + runner (plan, in a plugin) ──► check ──► render ──► emit
//! ```
//!
//! - [`input`]: read model files (JSON, `.tflite`, MiniMalloc CSV), targets, rules → [`input::Model`]
//! - [`analyze`]: lifetimes, aliases, alignment, attributes, budgets → [`analyze::Analysis`]
//! - [`registry`]: find and trust plugins, register their planners by name
//! - [`runner`]: run one planner, in process or in a sandboxed worker → `MemoryPlan`
//! - [`selection`]: `--planner a,b,c` keeps the best checked plan; `bench` measures planners
//! - [`check`]: every contract of a plan, all violations at once → [`check::CheckedPlan`]
//! - [`render`]: regions, hashes, constant blobs → [`render::RenderPlan`]
//! - [`emit`]: C sources, residency report, plan file, sidecars, written atomically
//!
//! [`cli`] parses the command line and resolves it into a checked configuration; [`main`]
//! dispatches it to [`commands`], which wire the stages for each subcommand; [`report`] prints
//! what they found; [`allocator`] keeps freed memory for reuse during the run; [`printable`]
//! decides which characters of user-given text are never shown raw.

pub mod allocator;
pub mod analyze;
pub mod check;
pub mod cli;
pub mod commands;
pub mod emit;
pub mod error;
pub mod input;
pub mod json_layout;
pub mod plan_file;
pub mod printable;
pub mod registry;
pub mod render;
pub mod report;
pub mod runner;
pub mod selection;

pub use error::{Error, ErrorKind, Result};

use std::process::ExitCode;

use clap::Parser;

use cli::config::{self, Task};

/// The `memplan` process: parse the command line, resolve it into a checked configuration
/// (every usage error, exit 2, before any work), run the subcommand and map errors onto exit
/// codes.
pub fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(2),
            };
        }
    };
    init_logging(cli.verbose, cli.quiet);
    allocator::keep_freed_memory();
    allocator::leave_memory_to_exit();
    match config::resolve(cli).and_then(run) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("memplan: error: {error}");
            error.exit_code()
        }
    }
}

/// Runs a resolved configuration.
pub fn run(config: config::Config) -> Result<ExitCode> {
    match &config.task {
        Task::Plan(plan) => commands::plan::run(plan),
        Task::Planners(planners) => commands::planners::run(planners),
        Task::Check(check) => commands::check::run(check),
        Task::Bench(bench) => commands::bench::run(bench),
    }
}

/// Sets up logging on stderr: warnings by default, `-v` debug, `-vv` trace, `-q` errors only.
/// `RUST_LOG` overrides.
fn init_logging(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only on a terminal: piped logs (CI, tests, files) stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
}
