//! memplan: plans where every tensor of a model lives in memory, with planner backends
//! loaded at run time from plugins, checks every plan, and writes C sources.
//!
//! The modules follow the pipeline, data flowing one way:
//!
//! ```text
//! input ──► analyze ──► registry (plan, in a plugin) ──► check ──► render ──► emit
//! ```
//!
//! - [`input`]: read model files (JSON, `.tflite`, MiniMalloc CSV), targets, rules → [`input::Model`]
//! - [`analyze`]: lifetimes, aliases, alignment, attributes, budgets → [`analyze::Analysis`]
//! - [`registry`]: find plugins, select a planner by name, run it → `MemoryPlan`
//! - [`check`]: every contract of a plan, all violations at once → [`check::CheckedPlan`]
//! - [`render`]: regions, hashes, constant blobs → [`render::RenderPlan`]
//! - [`emit`]: C sources, residency report, plan file, sidecars, written atomically
//!
//! [`commands`] wires the stages for each subcommand; [`cli`] parses the command line;
//! [`allocator`] keeps freed memory for reuse during the run.

pub mod allocator;
pub mod analyze;
pub mod check;
pub mod cli;
pub mod commands;
pub mod emit;
pub mod error;
pub mod input;
pub mod plan_file;
pub mod registry;
pub mod render;
pub mod report;

pub use error::{Error, ErrorKind, Result};
