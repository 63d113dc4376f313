//! When an in-process planner crashes memplan (a segfault, an abort, a call to `exit`), say so.
//!
//! Without this, a planner that dereferences a bad pointer ends memplan with status 139 and no
//! word about which planner did it. While a planner runs in process, [`CrashGuard`] installs
//! handlers for the fatal signals (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) and an `atexit`
//! hook; each writes one line naming the planner and suggesting `--isolate`, then ends the
//! process with the plugin-failure code, 4. The handlers only call async-signal-safe `write`
//! and `_exit`, on the alternate signal stack Rust sets up for the main thread (planners run
//! on it), so a stack overflow is reported too. The previous handlers (Rust's own stack
//! overflow report) come back when the planner returns. Isolated workers do not arm it: there
//! the parent reports the signal or exit status itself.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::error::ErrorKind;

/// "planner `NAME` (FILE)" of the planner running in process, or null.
static RUNNING: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static RUNNING_LEN: AtomicUsize = AtomicUsize::new(0);

const PREFIX: &[u8] = b"memplan: error: ";
const CRASHED: &[u8] = b" crashed memplan's process with ";
const EXITED: &[u8] = b" ended memplan's process by calling exit";
const ADVICE: &[u8] = b" while planning; nothing was written. Rerun with --isolate, which runs \
the planner in a child process that its crash cannot take memplan down with, and report it to \
the planner's authors\n";

/// Armed while an in-process planner runs; see the module docs.
pub struct CrashGuard {
    /// Keeps the bytes `RUNNING` points at alive.
    _label: Box<[u8]>,
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl CrashGuard {
    pub fn arm(planner: &str, origin: &str) -> CrashGuard {
        let label: Box<[u8]> = format!("planner `{planner}` ({origin})")
            .into_bytes()
            .into_boxed_slice();
        RUNNING_LEN.store(label.len(), Ordering::SeqCst);
        RUNNING.store(label.as_ptr() as *mut u8, Ordering::SeqCst);
        CrashGuard {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            previous: unix::install(),
            _label: label,
        }
    }
}

impl Drop for CrashGuard {
    fn drop(&mut self) {
        RUNNING.store(std::ptr::null_mut(), Ordering::SeqCst);
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        unix::restore(&self.previous);
    }
}

/// Stops reporting: memplan itself is about to end the process on purpose while a planner
/// runs (the `--timeout` watchdog), with its own message.
pub fn disarm() {
    RUNNING.store(std::ptr::null_mut(), Ordering::SeqCst);
}

/// Writes the report for the running planner (`what` says how it ended the process) and ends
/// the process with exit code 4; returns if no planner is running.
fn report_and_exit(what: &[&[u8]]) {
    let label = RUNNING.load(Ordering::SeqCst);
    if label.is_null() {
        return;
    }
    let len = RUNNING_LEN.load(Ordering::SeqCst);
    // SAFETY: `label` points at `len` bytes kept alive by the armed CrashGuard.
    let label = unsafe { std::slice::from_raw_parts(label, len) };
    // No allocation here: this runs in a signal handler, possibly after a crash inside malloc.
    unix::write_stderr(PREFIX);
    unix::write_stderr(label);
    for part in what {
        unix::write_stderr(part);
    }
    unix::write_stderr(ADVICE);
    unix::exit_now(i32::from(ErrorKind::Plugin.exit_code()));
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod unix {
    use std::sync::Once;

    const SIGNALS: [libc::c_int; 5] = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGABRT,
        libc::SIGFPE,
        libc::SIGILL,
    ];

    fn signal_name(signal: libc::c_int) -> &'static [u8] {
        match signal {
            libc::SIGSEGV => b"SIGSEGV (invalid memory access)",
            libc::SIGBUS => b"SIGBUS (bus error)",
            libc::SIGABRT => b"SIGABRT (abort)",
            libc::SIGFPE => b"SIGFPE (arithmetic fault)",
            libc::SIGILL => b"SIGILL (illegal instruction)",
            _ => b"a fatal signal",
        }
    }

    extern "C" fn on_fatal_signal(signal: libc::c_int) {
        super::report_and_exit(&[super::CRASHED, signal_name(signal)]);
        // No planner running (a race with the guard's drop): die of the signal as before.
        // SAFETY: resetting a handler and re-raising are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    extern "C" fn on_exit() {
        super::report_and_exit(&[super::EXITED]);
    }

    /// Installs the handlers (and, once, the atexit hook); returns the previous handlers.
    pub(super) fn install() -> Vec<(libc::c_int, libc::sigaction)> {
        static AT_EXIT: Once = Once::new();
        // SAFETY: registering a plain extern "C" function.
        AT_EXIT.call_once(|| unsafe {
            libc::atexit(on_exit);
        });
        let mut previous = Vec::with_capacity(SIGNALS.len());
        for signal in SIGNALS {
            // SAFETY: sigaction with a zeroed struct, our handler and SA_ONSTACK; the old
            // action is saved to be restored.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction =
                    on_fatal_signal as extern "C" fn(libc::c_int) as *const () as usize;
                action.sa_flags = libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, &action, &mut old) == 0 {
                    previous.push((signal, old));
                }
            }
        }
        previous
    }

    pub(super) fn restore(previous: &[(libc::c_int, libc::sigaction)]) {
        for (signal, old) in previous {
            // SAFETY: puts back an action sigaction gave us.
            unsafe {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
    }

    pub(super) fn write_stderr(bytes: &[u8]) {
        // SAFETY: write(2) is async-signal-safe; a short or failed write loses the message.
        unsafe {
            libc::write(2, bytes.as_ptr().cast(), bytes.len());
        }
    }

    pub(super) fn exit_now(code: i32) -> ! {
        // SAFETY: _exit is async-signal-safe and ends the process at once.
        unsafe { libc::_exit(code) }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod unix {
    pub(super) fn write_stderr(_: &[u8]) {}
    pub(super) fn exit_now(code: i32) -> ! {
        std::process::exit(code)
    }
}
