//! Plugins run inside memplan's process, and one that changes the working directory (a
//! `chdir("/")` in a constructor or a planner) would move every relative path memplan has yet
//! to use: the model, the target, `--out` (files landing in `/relout`). So loading plugins and
//! running a planner in-process are bracketed by [`KeepWorkingDirectory`], which puts the
//! working directory back (by descriptor, so even a renamed directory is found again) and names
//! the plugin that moved it. (Tested end to end, `tests/tests/plugins.rs`: changing the
//! directory of the test process itself would disturb the tests running beside it.)

use std::fs::File;
use std::path::PathBuf;

/// The working directory when created; restored when dropped if something changed it.
pub struct KeepWorkingDirectory {
    /// Who runs meanwhile, for the warning ("planner `x` (file)", "loading plugins").
    who: String,
    path: Option<PathBuf>,
    directory: Option<File>,
}

impl KeepWorkingDirectory {
    pub fn new(who: impl Into<String>) -> KeepWorkingDirectory {
        KeepWorkingDirectory {
            who: who.into(),
            path: std::env::current_dir().ok(),
            directory: File::open(".").ok(),
        }
    }
}

impl Drop for KeepWorkingDirectory {
    fn drop(&mut self) {
        let now = std::env::current_dir().ok();
        if now == self.path {
            return;
        }
        let restored = match &self.directory {
            #[cfg(unix)]
            Some(directory) => {
                use std::os::fd::AsRawFd;
                // SAFETY: fchdir on a directory descriptor we own.
                unsafe { libc::fchdir(directory.as_raw_fd()) == 0 }
            }
            _ => self
                .path
                .as_ref()
                .is_some_and(|path| std::env::set_current_dir(path).is_ok()),
        };
        let was = self
            .path
            .as_ref()
            .map_or("?".to_string(), |path| path.display().to_string());
        let moved_to = now.map_or("?".to_string(), |path| path.display().to_string());
        if restored {
            tracing::warn!(
                "{} changed memplan's working directory to `{moved_to}`; memplan moved back to \
                 `{was}` (a plugin must not change the process's working directory)",
                self.who
            );
        } else {
            tracing::error!(
                "{} changed memplan's working directory to `{moved_to}` and memplan cannot move \
                 back to `{was}`; relative paths now resolve from `{moved_to}`",
                self.who
            );
        }
    }
}
