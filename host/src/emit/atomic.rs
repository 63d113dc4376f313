//! Publishing the output directory atomically.
//!
//! Every file is first written (and fsynced) into `<out>.tmp-<pid>/new` beside `--out`, in a
//! work directory whose marker file names it (so that only directories memplan provably made
//! are ever swept as leftovers); only when all of them are on disk is the new directory
//! exchanged with the old one and the old one deleted, file by file as its manifest lists
//! them. Any failure before the swap removes the work directory and leaves `--out` exactly as
//! it was; a failure of the swap, or a file of someone else's found in the old output, puts
//! the old directory back.
//!
//! Because the whole directory is replaced, memplan refuses to replace one that holds
//! anything it did not write (a mistaken `--out src` must not delete sources).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One file of the output directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFile {
    pub name: String,
    pub contents: Vec<u8>,
}

/// Writes a file's contents into the writer given.
pub type WriteContents<'a> = dyn Fn(&mut dyn io::Write) -> io::Result<()> + Send + Sync + 'a;

/// A file of the output directory, formatted straight into the file as it is written, so that
/// a large plan's files are never held in memory.
pub struct PendingFile<'a> {
    pub name: String,
    pub contents: Box<WriteContents<'a>>,
}

impl<'a> PendingFile<'a> {
    /// A file whose bytes are already there.
    pub fn ready(file: &'a OutputFile) -> Self {
        PendingFile {
            name: file.name.clone(),
            contents: Box::new(move |out| out.write_all(&file.contents)),
        }
    }
}

/// The file memplan writes into every output directory it publishes: a first line naming the
/// format, then the name of every file it wrote, one per line. A directory is replaced only when
/// this file lists everything in it, so that memplan never deletes what it did not write (a file
/// name alone proves nothing: `firmware.bin` or `sensor_plan.json` of the user's would match).
pub const MANIFEST: &str = ".memplan-manifest";
const MANIFEST_HEADER: &str = "memplan output directory; memplan replaces it, and only it, \
    when it lists every file in it";

/// The manifest's text for `names`.
fn manifest_text(names: &[&str]) -> String {
    let mut text = format!("{MANIFEST_HEADER}\n");
    for name in names {
        text.push_str(name);
        text.push('\n');
    }
    text
}

/// The files a manifest lists, or `None` when it is not one of memplan's.
fn manifest_names(text: &str) -> Option<Vec<&str>> {
    let mut lines = text.lines();
    (lines.next()? == MANIFEST_HEADER).then(|| lines.collect())
}

fn write_error(path: &Path, error: io::Error) -> Error {
    // ENOSPC (28) and EDQUOT (122 on Linux): the disk or the user's quota is full, which
    // no permission change fixes.
    let advice = match error.raw_os_error() {
        Some(28) => "the disk is full; free space on it or choose an --out on another disk",
        Some(122) => "the disk quota is exhausted; free space or choose an --out elsewhere",
        _ => "check that the --out directory's parent is writable",
    };
    Error::input(format!(
        "cannot write `{}`: {error}; {advice}",
        path.display()
    ))
}

/// Creates `path`, writes its contents through a buffer and waits until they are on disk.
pub fn write_synced(path: &Path, contents: &WriteContents) -> io::Result<()> {
    let mut file = io::BufWriter::with_capacity(1 << 20, fs::File::create(path)?);
    contents(&mut file)?;
    file.flush()?;
    file.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .sync_all()
}

/// Flushes a directory's entries (new names, renames) to disk where the platform allows it.
fn sync_directory(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        fs::File::open(path)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Replaces directory `out` by one holding exactly `files`, with the guarantees of `--out`
/// (docs/output-files.md).
pub fn publish(files: &[OutputFile], out: &Path) -> Result<()> {
    publish_with(files, out, &write_synced)
}

/// [`publish`] with the file writer given, so that tests can make a write fail midway.
pub fn publish_with(
    files: &[OutputFile],
    out: &Path,
    write: &(dyn Fn(&Path, &WriteContents) -> io::Result<()> + Sync),
) -> Result<()> {
    let pending: Vec<PendingFile> = files.iter().map(PendingFile::ready).collect();
    publish_pending(&pending, out, write)
}

/// Replaces directory `out` by one holding exactly `files`, each formatted as it is written.
/// Files are formatted and written side by side, two at a time, in list order (list the large
/// ones first: a million tensors make a few hundred megabytes, and each file is flushed to
/// disk); the first failure, in list order, is reported.
pub fn publish_pending(
    files: &[PendingFile],
    out: &Path,
    write: &(dyn Fn(&Path, &WriteContents) -> io::Result<()> + Sync),
) -> Result<()> {
    let name = directory_name(out)?;
    let parent = match out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|error| write_error(&parent, error))?;
    // One run at a time publishes beside `out`; checked again under the lock, since another
    // run may have written `out` since the command line was checked.
    let _lock = DirectoryLock::take(&parent, out)?;
    sweep_leftovers(&parent, &name);
    check_replaceable(out)?;

    let pid = std::process::id();
    let work = parent.join(leftover_name(&name, pid));
    if work.exists() {
        // Ours by name and pid: only this process can have made it (a stale one of a process
        // that had this pid is marked as such too, and no one else's is replaced: see
        // `sweep_leftovers`).
        if !is_marked_leftover(&work, &name, pid) {
            return Err(Error::input(format!(
                "`{}` is in the way of memplan's work directory and memplan did not make it; \
                 move it away",
                work.display()
            )));
        }
        fs::remove_dir_all(&work).map_err(|error| write_error(&work, error))?;
    }
    let staging = work.join(STAGED);
    let written = fs::create_dir(&work)
        .and_then(|()| fs::write(work.join(RUN_MARKER), run_marker_text(&name, pid)))
        .and_then(|()| fs::create_dir(&staging))
        .map_err(|error| write_error(&work, error))
        .and_then(|()| {
            write_all(files, &staging, write)?;
            let names: Vec<&str> = files.iter().map(|file| file.name.as_str()).collect();
            let manifest = manifest_text(&names);
            let path = staging.join(MANIFEST);
            write(&path, &|out: &mut dyn io::Write| {
                out.write_all(manifest.as_bytes())
            })
            .map_err(|error| write_error(&path, error))?;
            sync_directory(&staging).map_err(|error| write_error(&staging, error))
        });
    if let Err(error) = written {
        let _ = fs::remove_dir_all(&work);
        return Err(error);
    }
    let outcome = swap_into_place(&work, out);
    // Whatever happened, what is left in the work directory is ours to remove (a previous
    // output holding anything else was moved away from it or back into place).
    let _ = fs::remove_dir_all(&work);
    outcome?;
    // The new directory is in place; a failed flush of the parent only weakens durability.
    let _ = sync_directory(&parent);
    Ok(())
}

/// Formats and writes `files` into `directory`, two threads taking the next file in turn;
/// the first error in list order.
fn write_all(
    files: &[PendingFile],
    directory: &Path,
    write: &(dyn Fn(&Path, &WriteContents) -> io::Result<()> + Sync),
) -> Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, Result<()>)> = std::thread::scope(|scope| {
        let work = || {
            let mut done = Vec::new();
            loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(file) = files.get(index) else {
                    return done;
                };
                let path = directory.join(&file.name);
                let result =
                    write(&path, &*file.contents).map_err(|error| write_error(&path, error));
                done.push((index, result));
            }
        };
        let helper = scope.spawn(work);
        let mut results = work();
        match helper.join() {
            Ok(theirs) => results.extend(theirs),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        results
    });
    let mut results = results;
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().try_for_each(|(_, result)| result)
}

/// The subdirectory of the work directory where the new output is written.
const STAGED: &str = "new";
/// The subdirectory of the work directory the previous output is moved into where directories
/// cannot be exchanged.
const PREVIOUS: &str = "previous";

/// Puts `work/new` in place of `out`, then deletes the previous output, file by file as its
/// manifest lists them. An existing `out` is exchanged with it in one step (Linux's `renameat2`
/// with `RENAME_EXCHANGE`: at no moment is there no `out`, whatever kills memplan); where the
/// exchange is not available, `out` is moved aside into `work` first.
///
/// `out` was checked under the lock, but any process may still have written into it while the
/// files were written: a previous output that then holds anything its manifest does not list
/// is put back in place (the new output is dropped) and the run fails naming what it found,
/// so nothing of the user's is deleted.
fn swap_into_place(work: &Path, out: &Path) -> Result<()> {
    let staging = work.join(STAGED);
    if !out.exists() {
        return fs::rename(&staging, out).map_err(|error| write_error(out, error));
    }
    let (previous, exchanged) = if exchange(&staging, out).is_ok() {
        (staging.clone(), true)
    } else {
        let previous = work.join(PREVIOUS);
        fs::rename(out, &previous).map_err(|error| write_error(out, error))?;
        if let Err(error) = fs::rename(&staging, out) {
            // Put the previous output back; if even that fails, say where it is.
            return Err(match fs::rename(&previous, out) {
                Ok(()) => write_error(out, error),
                Err(restore) => Error::internal(format!(
                    "cannot move the new output into `{}` ({error}) nor the previous one back \
                     ({restore}); the previous output is in `{}`",
                    out.display(),
                    previous.display()
                )),
            });
        }
        (previous, false)
    };
    let foreign = foreign_entries(&previous).unwrap_or_else(|error| vec![error.to_string()]);
    if !foreign.is_empty() {
        let restored = if exchanged {
            exchange(&previous, out)
        } else {
            fs::rename(out, &staging).and_then(|()| {
                fs::rename(&previous, out).inspect_err(|_| {
                    let _ = fs::rename(&staging, out);
                })
            })
        };
        return Err(match restored {
            Ok(()) => Error::input(format!(
                "{} appeared in --out `{}` while memplan was writing ({}); memplan left --out as \
                 it was, with {}, and wrote nothing: move {} out or choose another --out, and run \
                 again",
                if foreign.len() == 1 {
                    "an entry memplan did not write"
                } else {
                    "entries memplan did not write"
                },
                out.display(),
                foreign.join(", "),
                if foreign.len() == 1 { "it" } else { "them" },
                if foreign.len() == 1 { "it" } else { "them" },
            )),
            Err(error) => {
                let kept = keep_aside(&previous, out);
                Error::internal(format!(
                    "{} appeared in --out `{}` while memplan was writing ({}) and the previous \
                     output could not be put back ({error}); the new output is in `{}` and the \
                     previous one, with them, in `{}`",
                    if foreign.len() == 1 {
                        "an entry memplan did not write"
                    } else {
                        "entries memplan did not write"
                    },
                    out.display(),
                    foreign.join(", "),
                    out.display(),
                    kept.display()
                ))
            }
        });
    }
    remove_previous_output(&previous, out);
    Ok(())
}

/// Deletes a previous output, which held only what its manifest lists when it was checked: the
/// listed files one by one, then the directory. Anything that appeared in it since is kept,
/// with the directory moved beside `out` and a warning saying where.
fn remove_previous_output(previous: &Path, out: &Path) {
    let listed: Vec<String> = fs::read_to_string(previous.join(MANIFEST))
        .ok()
        .and_then(|text| {
            manifest_names(&text).map(|names| names.into_iter().map(String::from).collect())
        })
        .unwrap_or_default();
    for name in listed.iter().map(String::as_str).chain([MANIFEST]) {
        match fs::remove_file(previous.join(name)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => tracing::warn!(
                "the new output is in `{}` but `{name}` of the previous one could not be \
                 removed: {error}",
                out.display()
            ),
            _ => {}
        }
    }
    if fs::remove_dir(previous).is_err() {
        let kept = keep_aside(previous, out);
        tracing::warn!(
            "something was written into --out `{}` while memplan replaced it; the new output is \
             in place and what was written is kept in `{}`",
            out.display(),
            kept.display()
        );
    }
}

/// Moves `directory` beside `out` as `<out>.kept-<pid>`, which nothing of memplan's deletes;
/// where it now is (where it was if even that fails).
fn keep_aside(directory: &Path, out: &Path) -> PathBuf {
    let kept = PathBuf::from(format!("{}.kept-{}", out.display(), std::process::id()));
    match fs::rename(directory, &kept) {
        Ok(()) => kept,
        Err(_) => directory.to_path_buf(),
    }
}

/// Exchanges two directories atomically.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = |path: &Path| {
        std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let (a, b) = (path(a)?, path(b)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only renames.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// An exclusive lock on the directory that holds `--out`, so that two runs never publish beside
/// each other at once (one would find the other's half-done swap). A run that finds it taken
/// says so and waits.
struct DirectoryLock {
    _directory: fs::File,
}

impl DirectoryLock {
    fn take(parent: &Path, out: &Path) -> Result<DirectoryLock> {
        let directory = fs::File::open(parent).map_err(|error| write_error(parent, error))?;
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let fd = directory.as_raw_fd();
            // SAFETY: flock on a descriptor we own; released when it is closed.
            if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                tracing::warn!(
                    "another memplan is writing beside `{}`; waiting for it to finish",
                    out.display()
                );
                // SAFETY: as above.
                if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
                    return Err(write_error(parent, io::Error::last_os_error()));
                }
            }
        }
        #[cfg(not(unix))]
        let _ = out;
        Ok(DirectoryLock {
            _directory: directory,
        })
    }
}

/// The file in a work directory that proves memplan made it; see [`run_marker_text`].
const RUN_MARKER: &str = ".memplan-run";

/// The name of the work directory of process `pid` publishing `--out` named `name`.
fn leftover_name(name: &str, pid: u32) -> String {
    format!("{name}.tmp-{pid}")
}

/// What the marker of a work directory says: the directory's own name and the process, so that
/// a marker copied with its directory elsewhere proves nothing.
fn run_marker_text(name: &str, pid: u32) -> String {
    format!(
        "memplan work directory `{}` of process {pid}; the next memplan writing --out `{name}` \
         removes it once that process has stopped\n",
        leftover_name(name, pid)
    )
}

/// Whether `path`, named like the work directory of process `pid` for `--out` `name`, holds the
/// marker memplan writes into it first.
fn is_marked_leftover(path: &Path, name: &str, pid: u32) -> bool {
    fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir())
        && fs::read_to_string(path.join(RUN_MARKER))
            .is_ok_and(|text| text == run_marker_text(name, pid))
}

/// Removes what runs killed mid-publish left beside `out`: `<name>.tmp-<pid>` work directories
/// of processes that no longer run. Only directories that hold memplan's marker naming them
/// are removed: a directory of the user's named like one (`build.tmp-2024`) is never touched.
/// Called under the lock, so no live run is publishing them.
fn sweep_leftovers(parent: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let pid = file_name
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(".tmp-"))
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else {
            continue;
        };
        let path = entry.path();
        if pid == std::process::id() || process_runs(pid) || !is_marked_leftover(&path, name, pid) {
            continue;
        }
        match fs::remove_dir_all(&path) {
            Ok(()) => tracing::info!(
                "removed `{}`, left by memplan process {pid}, which was stopped mid-publish",
                path.display()
            ),
            Err(error) => tracing::warn!("cannot remove `{}`: {error}", path.display()),
        }
    }
}

/// Whether process `pid` exists.
fn process_runs(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let result = unsafe { libc::kill(pid, 0) };
        result == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// The last component of `out`, which names the temporary and backup directories.
fn directory_name(out: &Path) -> Result<String> {
    let name = out.file_name().ok_or_else(|| {
        Error::input(format!(
            "--out `{}` does not name a directory memplan can replace; give a path such as \
             ./memplan-out",
            out.display()
        ))
    })?;
    Ok(name.to_string_lossy().into_owned())
}

/// Whether `out` can be (re)placed by [`publish`]: it must name a directory and, if it
/// exists, be a directory holding only files memplan writes. The plan command asks this
/// before planning, so that a wrong `--out` is reported before a long planner run.
pub fn check_destination(out: &Path) -> Result<()> {
    directory_name(out)?;
    check_replaceable(out)
}

/// An existing `out` must be a directory holding only files memplan writes.
fn check_replaceable(out: &Path) -> Result<()> {
    let metadata = match fs::symlink_metadata(out) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(write_error(out, error)),
    };
    if metadata.file_type().is_symlink() {
        // Publishing renames directories: the link itself would be replaced, not the
        // directory it points at, so a link is refused rather than silently dropped.
        let target = fs::read_link(out)
            .map(|target| format!(" (to `{}`)", target.display()))
            .unwrap_or_default();
        return Err(Error::input(format!(
            "--out `{}` is a symbolic link{target}; memplan replaces its output directory as a \
             whole, which would replace the link, so give the directory itself as --out",
            out.display()
        )));
    }
    if !metadata.is_dir() {
        return Err(Error::input(format!(
            "--out `{}` exists and is not a directory; choose another --out",
            out.display()
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Replacing a directory needs only its parent to be writable: a read-only --out would
        // be replaced (and get a new owner and mode) against what its mode says.
        let mode = metadata.permissions().mode();
        if mode & 0o200 == 0 {
            return Err(Error::input(format!(
                "--out `{}` is read-only (mode {:o}); memplan replaces its output directory as a \
                 whole, so make it writable (chmod u+w) or choose another --out",
                out.display(),
                mode & 0o7777
            )));
        }
    }
    let entries = list_entries(out).map_err(|error| write_error(out, error))?;
    if entries.is_empty() {
        return Ok(());
    }
    let Some(foreign) = unlisted_entries(out, &entries) else {
        let mut found: Vec<&String> = entries.iter().map(|(name, _)| name).collect();
        found.sort();
        let shown: Vec<&str> = found.iter().take(5).map(|name| name.as_str()).collect();
        return Err(Error::input(format!(
            "--out `{}` is not empty and memplan did not write it (it has no {MANIFEST}; it \
             holds {}{}); memplan replaces its output directory as a whole, so give it an empty \
             directory or one memplan wrote (directories written before memplan kept a manifest \
             must be emptied once)",
            out.display(),
            shown.join(", "),
            if found.len() > shown.len() {
                format!(" and {} more", found.len() - shown.len())
            } else {
                String::new()
            }
        )));
    };
    if foreign.is_empty() {
        Ok(())
    } else {
        Err(Error::input(format!(
            "--out `{}` holds {} that memplan did not write ({}); memplan replaces the whole \
             output directory, so move {} out or choose another --out",
            out.display(),
            if foreign.len() == 1 {
                "an entry"
            } else {
                "entries"
            },
            foreign.join(", "),
            if foreign.len() == 1 { "it" } else { "them" }
        )))
    }
}

/// The names in `directory`, each with whether it is a regular file.
fn list_entries(directory: &Path) -> io::Result<Vec<(String, bool)>> {
    fs::read_dir(directory)?
        .map(|entry| {
            let entry = entry?;
            let is_file = entry
                .file_type()
                .map(|kind| kind.is_file())
                .unwrap_or(false);
            Ok((entry.file_name().to_string_lossy().into_owned(), is_file))
        })
        .collect()
}

/// Of `entries` (of `directory`), those its manifest does not list (sorted), or `None` when it
/// has no manifest of memplan's.
fn unlisted_entries(directory: &Path, entries: &[(String, bool)]) -> Option<Vec<String>> {
    let has_manifest = entries
        .iter()
        .any(|(name, is_file)| *is_file && name == MANIFEST);
    let text = has_manifest
        .then(|| fs::read_to_string(directory.join(MANIFEST)).ok())
        .flatten()?;
    let listed = manifest_names(&text)?;
    let mut foreign: Vec<String> = entries
        .iter()
        .filter(|(name, is_file)| {
            !is_file || (name != MANIFEST && !listed.contains(&name.as_str()))
        })
        .map(|(name, _)| name.clone())
        .collect();
    foreign.sort();
    Some(foreign)
}

/// What `directory` holds that memplan did not write: everything its manifest does not list,
/// or everything when it has none.
fn foreign_entries(directory: &Path) -> io::Result<Vec<String>> {
    let entries = list_entries(directory)?;
    Ok(unlisted_entries(directory, &entries).unwrap_or_else(|| {
        let mut names: Vec<String> = entries.into_iter().map(|(name, _)| name).collect();
        names.sort();
        names
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A fresh directory under the system temp dir, unique per test.
    fn scratch_dir(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memplan-atomic-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.file_name().to_string_lossy().into_owned(),
                    fs::read(entry.path()).unwrap(),
                )
            })
            .collect()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn files() -> Vec<OutputFile> {
        ["m_tensors.h", "m_tensors.c", "m_constants.c", "m_plan.json"]
            .iter()
            .map(|name| OutputFile {
                name: name.to_string(),
                contents: format!("new {name}").into_bytes(),
            })
            .collect()
    }

    #[test]
    fn a_failed_write_leaves_the_previous_output_untouched() {
        let root = scratch_dir("failed-write");
        let out = root.join("out");
        let previous = vec![OutputFile {
            name: "old_layout.svg".into(),
            contents: b"<svg/>".to_vec(),
        }];
        publish(&previous, &out).unwrap();
        let before = snapshot(&out);

        let count = std::sync::atomic::AtomicUsize::new(0);
        let failing = |path: &Path, contents: &WriteContents| {
            if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 2 {
                return Err(io::Error::other("disk full (injected)"));
            }
            write_synced(path, contents)
        };
        let error = publish_with(&files(), &out, &failing).unwrap_err();
        assert!(error.message.contains("disk full (injected)"), "{error}");
        assert_eq!(snapshot(&out), before);
        assert_eq!(
            names(&root),
            ["out"],
            "the temporary directory must be removed"
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_successful_run_replaces_the_whole_directory() {
        let root = scratch_dir("replace");
        let out = root.join("nested").join("out");
        let stale = vec![OutputFile {
            name: "stale_layout.svg".into(),
            contents: b"stale".to_vec(),
        }];
        publish(&stale, &out).unwrap();
        publish(&files(), &out).unwrap();
        let mut expected: BTreeMap<String, Vec<u8>> = files()
            .into_iter()
            .map(|file| (file.name, file.contents))
            .collect();
        let written: Vec<String> = files().into_iter().map(|file| file.name).collect();
        let written: Vec<&str> = written.iter().map(String::as_str).collect();
        expected.insert(MANIFEST.into(), manifest_text(&written).into_bytes());
        assert_eq!(snapshot(&out), expected);
        assert_eq!(
            names(&root.join("nested")),
            ["out"],
            "no temporary or backup directory may remain"
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn refuses_to_replace_a_directory_with_foreign_files_or_a_file() {
        let root = scratch_dir("foreign");
        let out = root.join("src");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("main.c"), b"int main(void) { return 0; }").unwrap();
        let before = snapshot(&out);
        let error = publish(&files(), &out).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(error.message.contains("main.c"), "{error}");
        assert_eq!(snapshot(&out), before);

        let file = root.join("plain-file");
        fs::write(&file, b"x").unwrap();
        let error = publish(&files(), &file).unwrap_err();
        assert!(error.message.contains("not a directory"), "{error}");
        assert_eq!(fs::read(&file).unwrap(), b"x");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn only_a_directory_whose_manifest_lists_everything_in_it_is_replaced() {
        let root = scratch_dir("manifest");
        // A firmware directory: file names that look like memplan's prove nothing.
        let out = root.join("fw");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("firmware.bin"), b"\x7fELF").unwrap();
        fs::write(out.join("sensor_plan.json"), b"{}").unwrap();
        let before = snapshot(&out);
        let error = publish(&files(), &out).unwrap_err();
        assert!(error.message.contains("no .memplan-manifest"), "{error}");
        assert!(error.message.contains("firmware.bin"), "{error}");
        assert_eq!(snapshot(&out), before);

        // memplan's own output, then a file of the user's added to it: refused, kept.
        let ours = root.join("ours");
        publish(&files(), &ours).unwrap();
        fs::write(ours.join("notes.txt"), b"mine").unwrap();
        let error = publish(&files(), &ours).unwrap_err();
        assert!(error.message.contains("notes.txt"), "{error}");
        assert_eq!(fs::read(ours.join("notes.txt")).unwrap(), b"mine");
        // A forged manifest without memplan's first line is not one.
        fs::remove_file(ours.join("notes.txt")).unwrap();
        fs::write(ours.join(MANIFEST), b"m_tensors.h\n").unwrap();
        assert!(publish(&files(), &ours).is_err());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_read_only_out_is_refused_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let root = scratch_dir("read-only");
        let out = root.join("out");
        publish(&files(), &out).unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o555)).unwrap();
        let before = snapshot(&out);
        let error = publish(&files(), &out).unwrap_err();
        assert!(error.message.contains("read-only (mode 555)"), "{error}");
        assert_eq!(snapshot(&out), before);
        fs::set_permissions(&out, fs::Permissions::from_mode(0o755)).unwrap();
        fs::remove_dir_all(&root).unwrap();
    }

    /// A work directory as a run of process `pid` killed while writing `--out` `name` leaves it.
    fn leftover(root: &Path, name: &str, pid: u32) -> PathBuf {
        let path = root.join(leftover_name(name, pid));
        fs::create_dir_all(path.join(STAGED)).unwrap();
        fs::write(path.join(RUN_MARKER), run_marker_text(name, pid)).unwrap();
        fs::write(path.join(STAGED).join("m_tensors.h"), b"half written").unwrap();
        path
    }

    #[test]
    fn leftovers_of_stopped_runs_are_swept_and_those_of_live_ones_kept() {
        let root = scratch_dir("leftovers");
        let out = root.join("out");
        // Above Linux's largest pid (2^22): no such process. Pid 1 always runs.
        leftover(&root, "out", 4194399);
        leftover(&root, "out", 1);
        leftover(&root, "other", 4194399);
        publish(&files(), &out).unwrap();
        assert_eq!(names(&root), ["other.tmp-4194399", "out", "out.tmp-1"]);
        // Publishing over an existing output exchanges the two in one step.
        publish(&files(), &out).unwrap();
        assert_eq!(names(&root), ["other.tmp-4194399", "out", "out.tmp-1"]);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn directories_named_like_leftovers_without_memplans_marker_are_kept() {
        let root = scratch_dir("users-leftovers");
        let out = root.join("build");
        // A user's backups, named as memplan once named its leftovers, and a leftover whose
        // marker was copied from another run's: none is provably a leftover of the pid it names.
        for directory in ["build.old-2024", "build.tmp-4194397", "build.tmp-4194396"] {
            fs::create_dir(root.join(directory)).unwrap();
            fs::write(root.join(directory).join("main.c"), b"int main;").unwrap();
        }
        fs::write(
            root.join("build.tmp-4194396").join(RUN_MARKER),
            run_marker_text("build", 4194395),
        )
        .unwrap();
        let stopped = leftover(&root, "build", 4194399);
        publish(&files(), &out).unwrap();
        assert!(
            !stopped.exists(),
            "a marked leftover of a stopped run is swept"
        );
        assert_eq!(
            names(&root),
            [
                "build",
                "build.old-2024",
                "build.tmp-4194396",
                "build.tmp-4194397"
            ]
        );
        for directory in ["build.old-2024", "build.tmp-4194397", "build.tmp-4194396"] {
            assert_eq!(
                fs::read(root.join(directory).join("main.c")).unwrap(),
                b"int main;"
            );
        }
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_file_written_into_out_while_memplan_writes_is_kept_and_the_run_refused() {
        let root = scratch_dir("late-writer");
        let out = root.join("out");
        publish(&files(), &out).unwrap();
        let mut expected = snapshot(&out);
        expected.insert("late.txt".into(), b"written meanwhile".to_vec());
        // Another process writes into --out after memplan checked it, before the swap.
        let late_writer = |path: &Path, contents: &WriteContents| {
            if !out.join("late.txt").exists() {
                fs::write(out.join("late.txt"), b"written meanwhile").unwrap();
            }
            write_synced(path, contents)
        };
        let error = publish_with(&files(), &out, &late_writer).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input, "{error}");
        assert!(error.message.contains("late.txt"), "{error}");
        assert!(error.message.contains("appeared"), "{error}");
        assert_eq!(snapshot(&out), expected);
        assert_eq!(names(&root), ["out"], "no work directory may remain");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_second_run_waits_for_the_lock_of_the_first() {
        let root = scratch_dir("lock");
        let out = root.join("out");
        let held = DirectoryLock::take(&root, &out).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let waiter = {
            let (root, out) = (root.clone(), out.clone());
            std::thread::spawn(move || {
                let _lock = DirectoryLock::take(&root, &out).unwrap();
                done.send(()).unwrap();
            })
        };
        assert!(
            finished
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "the second run must wait"
        );
        drop(held);
        finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the second run goes on once the first is done");
        waiter.join().unwrap();
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_symlinked_out_is_refused_naming_the_link_and_a_full_disk_is_named() {
        let root = std::env::temp_dir().join(format!("memplan-out-link-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let error = check_destination(&root.join("link")).unwrap_err();
        assert!(error.message.contains("is a symbolic link"), "{error}");
        assert!(error.message.contains("real"), "{error}");
        fs::remove_dir_all(&root).unwrap();

        let full = write_error(Path::new("out/x.c"), io::Error::from_raw_os_error(28));
        assert!(full.message.contains("the disk is full"), "{full}");
        let denied = write_error(Path::new("out/x.c"), io::Error::from_raw_os_error(13));
        assert!(denied.message.contains("parent is writable"), "{denied}");
    }
}
