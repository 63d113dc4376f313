//! memplan-plugin-api: everything a memplan planner plugin needs.
//!
//! - [`abi`]: the `#[repr(C)]`, `StableAbi` types that cross the host/plugin boundary
//!   (the plan request and the memory plan);
//! - [`context`]: the host context (logging, cancellation, deadline) passed to every call;
//! - [`export`]: the root module, [`Planner`] and [`export_planners!`], which makes a plugin
//!   in a few lines and turns every panic into an error value;
//! - [`bounds`]: the arena lower bound shared by host and planners;
//! - [`c_abi`]: the C interface of `include/memplan_planner.h`, for planners written in C or
//!   C++ (packers the host runs through the planner kit).
//!
//! This crate is the ABI and nothing else: its version changes only when the ABI does. The
//! planner kit (the shared passes for constants, persistent tensors, scratch with spill and
//! aliases, and the greedy and bump packers) is the separate crate `memplan-planner-kit`;
//! `docs/writing-a-planner.md` shows a complete planner written with it.
//!
//! A plugin is a `cdylib` crate that depends on this crate (and usually the kit):
//!
//! ```no_run
//! use memplan_plugin_api::{HostContext, MemoryPlan, PlanError, PlanRequest, Planner};
//! struct MyPlanner;
//! impl Planner for MyPlanner {
//!     const NAME: &'static str = "my-planner";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!     const DESCRIPTION: &'static str = "what it does, in one line";
//!     fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
//!         todo!()
//!     }
//! }
//! memplan_plugin_api::export_planners!(MyPlanner);
//! ```

pub mod abi;
pub mod bounds;
pub mod c_abi;
pub mod context;
#[doc(hidden)]
pub mod export;
pub mod manifest;

pub use abi::*;
pub use context::{HostContext, LogLevel};
pub use export::{Planner, ABI_VERSION};

/// Loader internals: what `export_planners!` expands to and what the host reads. Not for
/// planner authors.
#[doc(hidden)]
pub use export::{__plugin_module, PlannerEntry, PluginModule, PluginModuleRef};

/// Re-exported so that `export_planners!` and plugins need no direct dependency on it.
pub use abi_stable;
