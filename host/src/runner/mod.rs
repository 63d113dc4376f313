//! Plan stage, running one planner: in memplan's process or in a sandboxed worker process.
//!
//! The registry (`crate::registry`) finds a planner and hands its entry here; this module
//! calls it and turns whatever happens into a plan or an error with memplan's exit codes:
//! - [`run`]: the in-process call: the host context the plugin's callbacks reach, the
//!   deadline, and the mapping of the planner's errors;
//! - [`crash`], [`threads`], [`stdout`], [`workdir`]: guards around an in-process call (a
//!   crash names the planner, threads it leaves running, its prints kept off stdout, its
//!   working directory changes undone);
//! - [`isolate`]: the same call in a forked worker under a seccomp sandbox, with its reply
//!   sent back over a pipe;
//! - [`c_packer`]: a C planner's packer (`memplan_planner.h`) run through the planner kit, so
//!   that it is called like a Rust planner everywhere above.
//!
//! Nothing here knows how planners are found, trusted or chosen between.

pub mod c_packer;
pub mod crash;
pub mod isolate;
pub mod run;
pub mod stdout;
pub mod threads;
pub mod workdir;

pub use c_packer::CPlanner;
pub use isolate::{plan_in_worker, Isolation, WorkerCode, WorkerJob, WorkerReply};
pub use run::{call_planner, run_planner, PlannerFn, RunLimits};
