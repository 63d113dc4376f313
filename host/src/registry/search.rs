//! Where plugins are looked for, and which files in those directories are candidates.
//!
//! The search path (README.md, docs/plugins.md) is: each `--plugin-dir` in the order given,
//! then every entry of `MEMPLAN_PLUGIN_PATH`, then the installation's drop-in folders for
//! third-party plugins, found relative to the `memplan` executable: `plugins/` beside it and
//! `../lib/memplan/plugins` (the `PREFIX/lib/memplan/plugins` of an installation into
//! `PREFIX/bin`). The executable's own directory is not searched: memplan's planners are built
//! in, and a `bin` directory (`~/.cargo/bin`, `/usr/local/bin`) is no place to look for
//! plugins. The current directory is never searched implicitly: an empty entry of
//! `MEMPLAN_PLUGIN_PATH` (which PATH-like variables traditionally read as ".") and relative
//! entries are ignored with a warning, so that running memplan inside an untrusted checkout
//! cannot load code from it. Directories are canonicalized and searched once each, at their
//! first position.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable holding extra plugin directories, `:`-separated.
pub const PLUGIN_PATH_VAR: &str = "MEMPLAN_PLUGIN_PATH";

/// Builds the ordered, de-duplicated list of directories to search.
///
/// `plugin_dirs` come from the command line: one that is not a directory is a usage error
/// (exit 2), since the user asked for it by name. `env_path` is the value of
/// [`PLUGIN_PATH_VAR`]; its missing directories are skipped (environment variables often
/// carry stale entries). `exe_dir` is the directory of the running executable.
pub fn search_path(
    plugin_dirs: &[PathBuf],
    env_path: Option<&OsStr>,
    exe_dir: Option<&Path>,
) -> Result<Vec<PathBuf>> {
    let mut searched: Vec<PathBuf> = Vec::new();
    let mut push = |dir: PathBuf| {
        if !searched.contains(&dir) {
            searched.push(dir);
        }
    };

    for dir in plugin_dirs {
        let canonical = dir
            .canonicalize()
            .ok()
            .filter(|canonical| canonical.is_dir())
            .ok_or_else(|| {
                Error::input(format!(
                    "--plugin-dir {}: no such directory; pass a directory that holds planner \
                     plugins",
                    dir.display()
                ))
            })?;
        push(canonical);
    }

    if let Some(value) = env_path {
        for entry in std::env::split_paths(value) {
            if entry.as_os_str().is_empty() {
                tracing::warn!(
                    "{PLUGIN_PATH_VAR} has an empty entry; ignored (the current directory is \
                     never searched for plugins)"
                );
            } else if entry.is_relative() {
                tracing::warn!(
                    "{PLUGIN_PATH_VAR} entry `{}` is not an absolute path; ignored (the current \
                     directory is never searched for plugins)",
                    entry.display()
                );
            } else {
                match existing_dir(&entry) {
                    Some(dir) => push(dir),
                    None => tracing::debug!(
                        "{PLUGIN_PATH_VAR} entry {} is not a directory; skipped",
                        entry.display()
                    ),
                }
            }
        }
    }

    if let Some(exe_dir) = exe_dir {
        for dir in installation_plugin_dirs(exe_dir) {
            if let Some(dir) = existing_dir(&dir) {
                push(dir);
            }
        }
    }
    Ok(searched)
}

/// The drop-in folders for third-party plugins of a memplan whose executable lies in
/// `exe_dir`: `plugins/` beside it, then `PREFIX/lib/memplan/plugins` for `exe_dir` =
/// `PREFIX/bin`.
pub fn installation_plugin_dirs(exe_dir: &Path) -> [PathBuf; 2] {
    [
        exe_dir.join("plugins"),
        exe_dir
            .join("..")
            .join("lib")
            .join("memplan")
            .join("plugins"),
    ]
}

/// The directory of the running `memplan` executable, if the OS can tell.
pub fn executable_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    exe.parent().map(Path::to_path_buf)
}

fn existing_dir(dir: &Path) -> Option<PathBuf> {
    dir.canonicalize().ok().filter(|dir| dir.is_dir())
}

/// The candidate plugin files of one directory: regular files (symlinks followed) whose name
/// ends with the platform's dynamic-library suffix (`.so`, `.dylib`, `.dll`), sorted by file
/// name so that discovery does not depend on the order the file system lists them in.
pub fn candidate_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let has_suffix = path
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|name| name.ends_with(std::env::consts::DLL_SUFFIX));
        if has_suffix && path.metadata().is_ok_and(|metadata| metadata.is_file()) {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, unique per test.
    fn scratch(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memplan-search-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn order_is_flags_then_environment_then_installation_folders() {
        let root = scratch("order");
        let [flag_a, flag_b, env_a, exe, lib] =
            ["flag-a", "flag-b", "env-a", "bin", "lib"].map(|name| root.join(name));
        let installed = lib.join("memplan").join("plugins");
        for dir in [
            &flag_a,
            &flag_b,
            &env_a,
            &exe,
            &exe.join("plugins"),
            &installed,
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let env = std::env::join_paths([env_a.clone(), root.join("missing")]).unwrap();
        let searched = search_path(
            &[flag_b.clone(), flag_a.clone()],
            Some(env.as_os_str()),
            Some(&exe),
        )
        .unwrap();
        assert_eq!(
            searched,
            vec![flag_b, flag_a, env_a, exe.join("plugins"), installed]
        );
    }

    #[test]
    fn never_the_current_directory_and_each_directory_once() {
        let root = scratch("cwd");
        let env = OsStr::new(":.:relative/dir:");
        let searched = search_path(std::slice::from_ref(&root), Some(env), Some(&root)).unwrap();
        assert_eq!(searched, vec![root]);
    }

    #[test]
    fn a_missing_plugin_dir_flag_is_a_usage_error() {
        let root = scratch("missing-flag");
        let error = search_path(&[root.join("nope")], None, None).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(error.message.contains("nope"), "{}", error.message);
    }

    #[test]
    fn candidates_are_sorted_library_files_only() {
        let dir = scratch("candidates");
        let suffix = std::env::consts::DLL_SUFFIX;
        for name in [
            format!("zeta{suffix}"),
            format!("alpha{suffix}"),
            "notes.txt".to_string(),
            format!("alpha{suffix}.1"),
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.join(format!("subdir{suffix}"))).unwrap();
        let files = candidate_files(&dir).unwrap();
        assert_eq!(
            files,
            vec![
                dir.join(format!("alpha{suffix}")),
                dir.join(format!("zeta{suffix}"))
            ]
        );
    }
}
