//! Plugins must not write on memplan's stdout: `--format json` promises one JSON document
//! there, and a planner's stray `println!` would corrupt it. While a planner runs (in process,
//! or for the whole life of an isolated worker), file descriptor 1 points at stderr, so what a
//! plugin prints still reaches the user, on the stream for diagnostics.

use std::ffi::c_int;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

extern "C" {
    fn dup2(old: c_int, new: c_int) -> c_int;
}

/// Points descriptor 1 at stderr and returns a descriptor of the stdout it had, after
/// flushing what Rust buffered for it.
pub fn redirect_stdout_to_stderr() -> std::io::Result<OwnedFd> {
    std::io::stdout().flush()?;
    let original = std::io::stdout().as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 on the process's own standard descriptors; 2 is open for the whole run.
    if unsafe { dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(original)
}

/// Stdout pointed at stderr until dropped (around an in-process planner call).
pub struct StdoutToStderr {
    original: Option<OwnedFd>,
}

impl StdoutToStderr {
    /// Redirects; if that fails, stdout stays as it was (the plan still works; only a plugin
    /// that prints could then disturb it) and the reason is logged.
    pub fn redirect() -> StdoutToStderr {
        let original = redirect_stdout_to_stderr()
            .map_err(|error| tracing::debug!("cannot point stdout at stderr: {error}"))
            .ok();
        StdoutToStderr { original }
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        if let Some(original) = self.original.take() {
            // What the plugin's own std buffered stays in its buffer; ours is empty.
            let _ = std::io::stdout().flush();
            // SAFETY: as above; `original` is a valid descriptor we own until this returns.
            unsafe { dup2(original.as_raw_fd(), 1) };
        }
    }
}
