//! Support for the end-to-end tests in `tests/tests/`: they run the real `memplan` binary
//! with the real plugins, exactly as a user would.
//!
//! The binary and the workspace plugins are built once per test process by a nested
//! `cargo build` into their own target directory (`target/e2e`), so the tests do not depend
//! on what `cargo test` happened to build and never wait on the outer build's lock. The
//! plugins land beside the binary, where the default search path finds them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests crate lives inside the workspace")
        .to_path_buf()
}

/// Where the end-to-end artifacts are built.
pub fn e2e_target_dir() -> PathBuf {
    workspace_root().join("target").join("e2e")
}

/// Builds the host and every workspace plugin (debug) once; returns the `memplan` binary.
pub fn memplan_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let status = Command::new(cargo)
            .current_dir(workspace_root())
            .args([
                "build",
                "--workspace",
                "--exclude",
                "memplan-tests",
                "--target-dir",
            ])
            .arg(e2e_target_dir())
            .status()
            .expect("failed to run cargo to build memplan for the end-to-end tests");
        assert!(status.success(), "building memplan and its plugins failed");
        e2e_target_dir()
            .join("debug")
            .join(format!("memplan{}", std::env::consts::EXE_SUFFIX))
    })
}

/// The directory holding the workspace plugins (the binary's directory).
pub fn plugin_dir() -> PathBuf {
    memplan_bin()
        .parent()
        .expect("binary has a parent")
        .to_path_buf()
}

/// A `memplan` command with a clean environment for plugin search (no
/// `MEMPLAN_PLUGIN_PATH`), run from a fresh temporary directory.
pub fn memplan() -> Command {
    let mut command = Command::new(memplan_bin());
    command.env_remove("MEMPLAN_PLUGIN_PATH");
    command.env_remove("RUST_LOG");
    command.current_dir(temp_dir("cwd"));
    command
}

/// Runs `memplan` with `args` and returns its output.
pub fn run_memplan<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    memplan()
        .args(args)
        .output()
        .expect("failed to start memplan")
}

/// A fresh, empty directory under `target/e2e/tmp`, unique per call.
pub fn temp_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = e2e_target_dir()
        .join("tmp")
        .join(format!("{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// The shared corpus (`MEMPLAN_CORPUS`), if set. Tests that need it must not skip when it is
/// set: call [`require_corpus`] instead when the corpus is essential.
pub fn corpus() -> Option<PathBuf> {
    std::env::var_os("MEMPLAN_CORPUS").map(PathBuf::from)
}

/// The corpus directory, or `None` after printing why the test is skipped. Panics when
/// `MEMPLAN_CORPUS` is set but does not point at a directory.
pub fn require_corpus(test: &str) -> Option<PathBuf> {
    match corpus() {
        Some(dir) => {
            assert!(
                dir.is_dir(),
                "MEMPLAN_CORPUS={} is not a directory",
                dir.display()
            );
            Some(dir)
        }
        None => {
            eprintln!("{test}: MEMPLAN_CORPUS is not set; skipping");
            None
        }
    }
}

/// stdout and stderr of a run, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
