//! Running one planner in-process: the host context its callbacks reach, the deadline, and
//! the mapping of its errors onto memplan's exit codes.
//!
//! The plugin cannot see the host's `tracing` subscriber or clock, so the [`HostContext`] it
//! receives points at a [`RunState`] on this stack frame: `log` re-emits each line as a
//! `tracing` event with target `memplan::planner` and field `planner=NAME`; `should_stop`
//! and `remaining_ms` read the deadline derived from `--timeout`. The state outlives the call
//! because the plugin may only use the context during it (see `HostContext`).

use std::ffi::c_void;
use std::time::{Duration, Instant};

use abi_stable::std_types::RStr;
use memplan_plugin_api::{
    HostContext, LogLevel, MemoryPlan, PlanError, PlanErrorKind, PlanRequest, PlannerEntry,
};

use super::c_packer::CPlanner;
use crate::error::{Error, ErrorKind, Result};

/// A planner's code, loaded and ready to call.
#[derive(Clone, Copy)]
pub enum PlannerFn {
    /// A Rust planner's entry (abi_stable, `export_planners!`), which plans the whole request.
    Rust(PlannerEntry),
    /// A C planner's packer (`memplan_planner.h`), run through the planner kit's passes.
    C(CPlanner),
}

impl PlannerFn {
    /// Calls the planner on `request` with `context`; returns its own answer.
    fn call(
        &self,
        request: &PlanRequest,
        context: &HostContext,
    ) -> std::result::Result<MemoryPlan, PlanError> {
        match self {
            PlannerFn::Rust(entry) => (entry.plan)(request, context).into_result(),
            // The kit's passes around a C packer are memplan's code, but a panic in them on a
            // packer's answer is still this planner's failure: reported as a Rust planner's
            // panic is (its entry point catches them).
            PlannerFn::C(planner) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                planner.plan(request, context)
            }))
            .unwrap_or_else(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|text| text.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic around its packer".to_string());
                Err(PlanError::new(PlanErrorKind::Panicked, message))
            }),
        }
    }
}

/// How a planner run is bounded.
#[derive(Clone, Debug, Default)]
pub struct RunLimits {
    /// Stop the planner after this long (`--timeout`).
    pub timeout: Option<Duration>,
    /// Bytes a planner in a sandboxed worker may allocate (`--plan-memory-limit`; `None`: the
    /// default, half of the machine's memory). In process, memplan cannot bound a planner's
    /// memory.
    pub memory_limit: Option<u64>,
}

/// The time limit of an isolated planner when `--timeout` is not given: a worker that hangs
/// must not keep memplan waiting forever (in process, memplan cannot stop a planner that
/// ignores the stop request anyway, so there the default stays "none").
pub const DEFAULT_ISOLATED_TIMEOUT: Duration = Duration::from_secs(600);

impl RunLimits {
    /// The limits of a run in a worker process: a time limit always
    /// ([`DEFAULT_ISOLATED_TIMEOUT`] unless `--timeout` gave one).
    pub fn for_worker(&self) -> RunLimits {
        RunLimits {
            timeout: self.timeout.or(Some(DEFAULT_ISOLATED_TIMEOUT)),
            ..self.clone()
        }
    }
}

/// What the host-context callbacks of one run read.
struct RunState<'a> {
    planner: &'a str,
    /// `None`: no deadline (or one too far in the future to represent).
    deadline: Option<Instant>,
}

impl RunState<'_> {
    fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    fn context(&self) -> HostContext {
        // SAFETY: the callbacks read `RunState` through `state`; the context is handed to one
        // planner call, during which `self` is borrowed and stays alive.
        unsafe {
            HostContext::from_host_callbacks(
                self as *const RunState as *const c_void,
                forward_log,
                should_stop,
                remaining_ms,
            )
        }
    }
}

/// The `RunState` behind a context's state pointer. Invariant relied on by the three
/// callbacks: `state` is the `RunState` that built the context, which lives until the planner
/// returns, and plugins may not keep the context beyond the call.
fn state<'a>(state: *const c_void) -> &'a RunState<'a> {
    unsafe { &*(state as *const RunState) }
}

extern "C" fn forward_log(state_ptr: *const c_void, level: LogLevel, message: RStr<'_>) {
    let planner = state(state_ptr).planner;
    let message = message.as_str();
    match level {
        LogLevel::Error => {
            tracing::error!(target: "memplan::planner", planner = %planner, "{message}")
        }
        LogLevel::Warn => {
            tracing::warn!(target: "memplan::planner", planner = %planner, "{message}")
        }
        LogLevel::Info => {
            tracing::info!(target: "memplan::planner", planner = %planner, "{message}")
        }
        LogLevel::Debug => {
            tracing::debug!(target: "memplan::planner", planner = %planner, "{message}")
        }
        LogLevel::Trace => {
            tracing::trace!(target: "memplan::planner", planner = %planner, "{message}")
        }
    }
}

extern "C" fn should_stop(state_ptr: *const c_void) -> bool {
    state(state_ptr).remaining() == Some(Duration::ZERO)
}

extern "C" fn remaining_ms(state_ptr: *const c_void) -> u64 {
    match state(state_ptr).remaining() {
        // Never `u64::MAX` for a real deadline: that value means "none".
        Some(left) => u64::try_from(left.as_millis()).unwrap_or(u64::MAX - 1),
        None => u64::MAX,
    }
}

/// How long past its deadline a planner may take to notice `should_stop` and return: a tenth
/// of the timeout, at least one second.
pub(crate) fn grace_period(timeout: Duration) -> Duration {
    (timeout / 10).max(Duration::from_secs(1))
}

/// Runs an action on a helper thread unless disarmed (dropped) before `after` has passed.
struct Watchdog {
    /// Dropping the sender wakes the thread, which then returns without acting.
    _disarm: std::sync::mpsc::Sender<()>,
}

impl Watchdog {
    fn arm(after: Duration, on_expiry: impl FnOnce() + Send + 'static) -> Watchdog {
        let (disarm, disarmed) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = disarmed.recv_timeout(after) {
                on_expiry();
            }
        });
        Watchdog { _disarm: disarm }
    }
}

/// Runs the planner `code` (called `name`, loaded from `origin`) on `request` within
/// `limits`, and maps its failure onto memplan's error kinds (see [`planner_outcome`]).
pub fn run_planner(
    name: &str,
    origin: &str,
    code: &PlannerFn,
    request: &PlanRequest,
    limits: &RunLimits,
) -> Result<MemoryPlan> {
    let started = Instant::now();
    tracing::debug!(planner = %name, "running planner from {origin}");
    // A planner that ignores `should_stop` cannot be interrupted in-process; past the deadline
    // plus a grace period the host gives up on it and exits with the plugin-failure code.
    let _watchdog = limits.timeout.map(|timeout| {
        let message = format!(
            "memplan: error: planner `{name}` ({origin}) did not stop within {} s of its \
             --timeout of {} s; it ignores the host's stop request. Rerun with --isolate, \
             which can stop it, and report it to its authors",
            grace_period(timeout).as_secs_f64(),
            timeout.as_secs_f64()
        );
        Watchdog::arm(timeout.saturating_add(grace_period(timeout)), move || {
            super::crash::disarm();
            eprintln!("{message}");
            std::process::exit(i32::from(ErrorKind::Plugin.exit_code()));
        })
    });
    let threads_before = super::threads::count_threads();
    let answer = {
        let _workdir =
            super::workdir::KeepWorkingDirectory::new(format!("planner `{name}` ({origin})"));
        let _stdout = super::stdout::StdoutToStderr::redirect();
        let _crash = super::crash::CrashGuard::arm(name, origin);
        call_planner(name, code, request, limits)
    };
    // Code of the plugin still running could change the plan after the checker saw it.
    if let Some(before) = threads_before {
        let left = super::threads::threads_left_running(before, super::threads::count_threads);
        if left > 0 {
            return Err(Error::plugin(format!(
                "planner `{name}` ({origin}) {} in memplan's process; memplan does not use a \
                 plan that code still running could change. A planner must join the threads \
                 it starts (and shut down any thread pool) before it returns; run it with \
                 --isolate, where its threads end with its worker process",
                super::threads::left_running(left)
            )));
        }
    }
    planner_outcome(name, origin, answer, limits, started.elapsed())
}

/// Calls the planner `code` (called `name`) on `request` with a host context whose deadline
/// is `limits.timeout` from now, and returns its own answer. No watchdog: the `--isolate`
/// worker uses this directly, and its host enforces the time limit.
pub fn call_planner(
    name: &str,
    code: &PlannerFn,
    request: &PlanRequest,
    limits: &RunLimits,
) -> std::result::Result<MemoryPlan, PlanError> {
    let state = RunState {
        planner: name,
        deadline: limits
            .timeout
            .and_then(|timeout| Instant::now().checked_add(timeout)),
    };
    let context = state.context();
    code.call(request, &context)
}

/// Maps the answer of planner `name` (loaded from `origin`) after `elapsed` onto memplan's
/// errors: does-not-fit is exit 5, an invalid request exit 2, a panic, failure or
/// cancellation exit 4. A planner says which of its own errors it meets (an isolated one
/// through its worker's reply, which its code could also forge): every message names the
/// planner and its file, and the planner's words are shown on one line with control
/// characters escaped ([`crate::printable`]), never as memplan's own.
pub fn planner_outcome(
    name: &str,
    origin: &str,
    answer: std::result::Result<MemoryPlan, PlanError>,
    limits: &RunLimits,
    elapsed: Duration,
) -> Result<MemoryPlan> {
    match answer {
        Ok(plan) => {
            tracing::info!(
                planner = %name,
                "planned {} tensors into {} arenas in {:.3} s",
                plan.allocations.len(),
                plan.arenas.len(),
                elapsed.as_secs_f64()
            );
            Ok(plan)
        }
        Err(error) => Err({
            let error = PlanError {
                kind: error.kind,
                message: crate::printable::escape_hidden(&error.message)
                    .as_ref()
                    .into(),
            };
            let origin = crate::printable::escape_hidden(origin);
            match error.kind {
                PlanErrorKind::DoesNotFit => Error::does_not_fit(format!(
                    "planner `{name}` ({origin}): the tensors do not fit the memory budgets: {}",
                    error.message
                )),
                PlanErrorKind::InvalidRequest => Error::input(format!(
                    "planner `{name}` ({origin}) does not accept this request: {}",
                    error.message
                )),
                PlanErrorKind::Panicked => Error::plugin(format!(
                    "planner `{name}` ({origin}) panicked: {}",
                    error.message
                )),
                PlanErrorKind::Failed => Error::plugin(format!(
                    "planner `{name}` ({origin}) failed: {}",
                    error.message
                )),
                PlanErrorKind::Cancelled => match limits.timeout {
                    Some(timeout) if elapsed >= timeout => Error::plugin(format!(
                        "planner `{name}` stopped at the time limit ({} s, --timeout) without a \
                     plan: {}; give it more time or pick a faster planner",
                        timeout.as_secs_f64(),
                        error.message
                    )),
                    _ => Error::plugin(format!(
                        "planner `{name}` stopped without a plan: {}",
                        error.message
                    )),
                },
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use abi_stable::std_types::{RString, RVec};
    use memplan_plugin_api::{PlanError, Planner};

    use super::*;
    use crate::ErrorKind;

    fn empty_request(options: &str) -> PlanRequest {
        PlanRequest {
            tensors: RVec::new(),
            memories: RVec::new(),
            num_steps: 0,
            options: RString::from(options),
        }
    }

    /// Answers according to its options: `"fail": KIND` returns that error, `"wait": true`
    /// polls `should_stop` until the deadline and reports what it saw.
    struct Scripted;
    impl Planner for Scripted {
        const NAME: &'static str = "scripted";
        const VERSION: &'static str = "0.0.0";
        const DESCRIPTION: &'static str = "test planner driven by its options";
        fn plan(request: &PlanRequest, context: &HostContext) -> Result<MemoryPlan, PlanError> {
            let options: serde_json::Value = serde_json::from_str(&request.options).unwrap();
            context.info("hello from the plugin side");
            if let Some(kind) = options.get("fail").and_then(|kind| kind.as_str()) {
                let kind = serde_json::from_value(serde_json::json!(kind)).unwrap();
                return Err(PlanError::new(kind, "scripted failure"));
            }
            if options.get("panic").is_some() {
                panic!("scripted panic");
            }
            let mut summary = String::new();
            if options.get("wait").is_some() {
                let before = context.remaining().expect("a deadline was set");
                while !context.should_stop() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                summary = format!("waited; remaining before: {} ms", before.as_millis());
                if context.remaining() != Some(Duration::ZERO) {
                    summary = "remaining is not zero after should_stop".to_string();
                }
            } else if context.remaining().is_some() || context.should_stop() {
                summary = "a deadline appeared without --timeout".to_string();
            }
            Ok(MemoryPlan {
                summary: RString::from(summary),
                ..MemoryPlan::default()
            })
        }
    }

    fn run(options: &str, limits: &RunLimits) -> Result<MemoryPlan> {
        let entry = PlannerFn::Rust(PlannerEntry::of::<Scripted>());
        run_planner(
            "scripted",
            "scripted.so",
            &entry,
            &empty_request(options),
            limits,
        )
    }

    #[test]
    fn plan_error_kinds_map_to_exit_codes() {
        let limits = RunLimits::default();
        for (kind, expected) in [
            ("does_not_fit", ErrorKind::DoesNotFit),
            ("invalid_request", ErrorKind::Input),
            ("failed", ErrorKind::Plugin),
            ("cancelled", ErrorKind::Plugin),
            ("panicked", ErrorKind::Plugin),
        ] {
            let error = run(&format!(r#"{{"fail":"{kind}"}}"#), &limits).unwrap_err();
            assert_eq!(error.kind, expected, "{kind}: {}", error.message);
            assert!(error.message.contains("`scripted`"), "{}", error.message);
            assert!(
                error.message.contains("scripted failure"),
                "{}",
                error.message
            );
        }
    }

    #[test]
    fn a_panic_is_exit_4_with_the_message() {
        let error = run(r#"{"panic":true}"#, &RunLimits::default()).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Plugin);
        assert!(
            error.message.contains("scripted panic"),
            "{}",
            error.message
        );
        assert!(error.message.contains("panicked"), "{}", error.message);
    }

    #[test]
    fn no_timeout_means_no_deadline() {
        let plan = run("{}", &RunLimits::default()).unwrap();
        assert_eq!(plan.summary.as_str(), "");
    }

    #[test]
    fn should_stop_turns_true_at_the_deadline() {
        let limits = RunLimits {
            timeout: Some(Duration::from_millis(50)),
            ..RunLimits::default()
        };
        let started = Instant::now();
        let plan = run(r#"{"wait":true}"#, &limits).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(
            plan.summary.starts_with("waited; remaining before: "),
            "{}",
            plan.summary
        );
    }

    #[test]
    fn a_watchdog_fires_only_when_not_disarmed_in_time() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let fired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&fired);
        let (done, finished) = std::sync::mpsc::channel();
        let _watchdog = Watchdog::arm(Duration::from_millis(10), move || {
            flag.store(true, Ordering::SeqCst);
            done.send(()).unwrap();
        });
        finished.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(fired.load(Ordering::SeqCst));

        let fired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&fired);
        drop(Watchdog::arm(Duration::from_millis(50), move || {
            flag.store(true, Ordering::SeqCst)
        }));
        std::thread::sleep(Duration::from_millis(150));
        assert!(!fired.load(Ordering::SeqCst));
    }

    #[test]
    fn the_grace_period_is_a_tenth_of_the_timeout_and_at_least_a_second() {
        assert_eq!(grace_period(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(
            grace_period(Duration::from_secs(60)),
            Duration::from_secs(6)
        );
    }

    /// Collects what a `tracing` subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn plugin_log_lines_reach_tracing_tagged_with_the_planner() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            run("{}", &RunLimits::default()).unwrap();
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line = text
            .lines()
            .find(|line| line.contains("hello from the plugin side"))
            .unwrap_or_else(|| panic!("plugin log line missing from:\n{text}"));
        assert!(line.contains("memplan::planner"), "{line}");
        assert!(line.contains("planner=scripted"), "{line}");
    }
}
