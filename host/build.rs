//! Records the commit memplan is built from, for `memplan --version`, as the environment
//! variable `MEMPLAN_COMMIT` of the compilation.
//!
//! Where it comes from, first that applies:
//! 1. `MEMPLAN_COMMIT` in the build's environment (a packager building from a source archive
//!    that knows its commit);
//! 2. `git rev-parse HEAD` when the sources are a git checkout of this workspace (and not some
//!    other repository that happens to contain a copy: its top level must be the workspace
//!    root). Uncommitted changes are not flagged: the build script reruns when HEAD moves,
//!    not on every edit, so such a flag would go stale;
//! 3. `unknown`: a build from a package without `.git`, or without git installed. That is not
//!    an error: the version and the ABI version still say what the binary is.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MEMPLAN_COMMIT");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate lives inside the workspace")
        .to_path_buf();
    let commit = match std::env::var("MEMPLAN_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_string(),
        _ => git_commit(&workspace).unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=MEMPLAN_COMMIT={commit}");
}

/// The checkout's commit, or `None` when `workspace` is not the top of a git checkout.
fn git_commit(workspace: &Path) -> Option<String> {
    let toplevel = git(workspace, &["rev-parse", "--show-toplevel"])?;
    if PathBuf::from(&toplevel).canonicalize().ok()? != workspace.canonicalize().ok()? {
        return None;
    }
    // Rebuild when HEAD moves: HEAD itself (a checkout of another branch), the branch's ref
    // and packed-refs (a commit, a fetch that packs refs). Git prints paths relative to the
    // working directory, which is `workspace` here.
    for path in ["HEAD", "packed-refs"] {
        if let Some(file) = git(workspace, &["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={}", workspace.join(file).display());
        }
    }
    if let Some(branch) = git(workspace, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(file) = git(workspace, &["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={}", workspace.join(file).display());
        }
    }
    git(workspace, &["rev-parse", "HEAD"])
}

/// The trimmed output of `git ARGS` run in `dir`, when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}
