//! The host context handed to every planner call.
//!
//! A plugin is a separate Rust binary with its own copy of `std` and of `tracing`: it cannot
//! see the host's subscriber, clock or cancellation state. The host therefore passes plain
//! `extern "C"` callbacks with an opaque state pointer. A planner logs through
//! [`HostContext::log`] and polls [`HostContext::should_stop`] in its loops so that a deadline
//! (`--timeout`) stops a long search on time.

use std::ffi::c_void;
use std::time::Duration;

use abi_stable::std_types::RStr;
use abi_stable::StableAbi;

/// Severity of a plugin log line; mapped by the host onto `tracing` levels.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Callbacks into the host. Valid for the duration of one planner call only.
///
/// The fields are private: a planner can use a context it was given (and copy it for the
/// duration of the call) but cannot make one with a state pointer of its own choosing, which
/// the host's callbacks would dereference. Only [`HostContext::detached`] is safe to build;
/// a host builds its contexts with the `unsafe` [`HostContext::from_host_callbacks`].
///
/// ```compile_fail
/// use memplan_plugin_api::HostContext;
/// fn forge(context: &HostContext) -> HostContext {
///     // error[E0451]: fields of `HostContext` are private
///     HostContext { state: std::ptr::null(), ..*context }
/// }
/// ```
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct HostContext {
    /// Opaque host state, passed back to each callback unchanged.
    state: *const c_void,
    /// Emit one log line tagged with the planner's name.
    log: extern "C" fn(state: *const c_void, level: LogLevel, message: RStr<'_>),
    /// True once the planner should stop and return its best plan so far (or `Cancelled`).
    should_stop: extern "C" fn(state: *const c_void) -> bool,
    /// Milliseconds left before the deadline; `u64::MAX` when there is none.
    remaining_ms: extern "C" fn(state: *const c_void) -> u64,
}

extern "C" fn detached_log(_: *const c_void, _: LogLevel, _: RStr<'_>) {}
extern "C" fn detached_should_stop(_: *const c_void) -> bool {
    false
}
extern "C" fn detached_remaining_ms(_: *const c_void) -> u64 {
    u64::MAX
}

impl HostContext {
    /// A host's context: `state` is handed back to each callback unchanged.
    ///
    /// # Safety
    /// Each callback must be sound for `state` for as long as the context (or any copy of it)
    /// is used: the host guarantees this by building the context for one planner call and
    /// keeping `state` alive until that call returns. Planners never need this.
    #[doc(hidden)]
    pub unsafe fn from_host_callbacks(
        state: *const c_void,
        log: extern "C" fn(state: *const c_void, level: LogLevel, message: RStr<'_>),
        should_stop: extern "C" fn(state: *const c_void) -> bool,
        remaining_ms: extern "C" fn(state: *const c_void) -> u64,
    ) -> HostContext {
        HostContext {
            state,
            log,
            should_stop,
            remaining_ms,
        }
    }

    /// A context that drops log lines and never asks to stop: for unit tests and for
    /// calling planner code outside a host.
    pub fn detached() -> Self {
        HostContext {
            state: std::ptr::null(),
            log: detached_log,
            should_stop: detached_should_stop,
            remaining_ms: detached_remaining_ms,
        }
    }

    pub fn log(&self, level: LogLevel, message: &str) {
        (self.log)(self.state, level, RStr::from_str(message))
    }

    pub fn info(&self, message: &str) {
        self.log(LogLevel::Info, message)
    }

    pub fn debug(&self, message: &str) {
        self.log(LogLevel::Debug, message)
    }

    pub fn warn(&self, message: &str) {
        self.log(LogLevel::Warn, message)
    }

    pub fn should_stop(&self) -> bool {
        (self.should_stop)(self.state)
    }

    /// Time left before the host's deadline, `None` when there is no deadline.
    pub fn remaining(&self) -> Option<Duration> {
        match (self.remaining_ms)(self.state) {
            u64::MAX => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }
}
