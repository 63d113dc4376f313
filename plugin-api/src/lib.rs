//! memplan-plugin-api: everything a memplan planner plugin needs.
//!
//! - [`abi`]: the `#[repr(C)]`, `StableAbi` types that cross the host/plugin boundary
//!   (the plan request and the memory plan);
//! - [`context`]: the host context (logging, cancellation, deadline) passed to every call;
//! - [`export`]: the root module, [`Planner`] and [`export_planners!`], which makes a plugin
//!   in a few lines and turns every panic into an error value;
//! - [`bounds`]: the arena lower bound shared by host and planners.
//!
//! A plugin is a `cdylib` crate that depends on this crate only:
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
pub mod context;
pub mod export;
pub mod kit;

pub use abi::*;
pub use context::{HostContext, LogLevel};
pub use export::{
    __plugin_module, Planner, PlannerEntry, PluginModule, PluginModuleRef, ABI_VERSION,
};

/// Re-exported so that `export_planners!` and plugins need no direct dependency on it.
pub use abi_stable;
