//! Plugin trust: which plugin files memplan agrees to load at all.
//!
//! Loading a library runs its code with the user's rights, so before the dynamic loader sees a
//! file memplan
//! - refuses it, unless `--allow-insecure-plugins`, when anyone but the user and root could
//!   replace it (as sudo and ssh judge their files): the file itself (after following
//!   symlinks: the file that is loaded, not a link to it) must be owned by the user or root
//!   and not writable by group or others, and so must every directory from it up to `/`,
//!   except that a directory others may write to is fine when it is sticky (`/tmp`: others
//!   cannot replace what they do not own);
//! - hashes it, so that planners can be pinned to the exact bytes the user reviewed:
//!   `--plugin-sha256 NAME=HEX` (repeatable) and a lock file of `{"NAME": "HEX"}` pairs
//!   (`--lock FILE`, or `memplan.lock` in the current directory when it exists).
//!
//! The check and the load must see the same bytes. [`OpenedPlugin::open`] opens the file
//! once, checks the permissions of that open file, hashes the bytes read from it, and the
//! loader then opens `/proc/self/fd/N` — the very file behind the descriptor — instead of the
//! path, which someone could have pointed elsewhere in the meantime. The descriptor is kept
//! open for the life of the process (libraries are never unloaded either).
//!
//! A lock file is only ever *read* from the current directory; plugins are never *loaded*
//! from it (see `search`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The lock file read from the current directory when `--lock` is not given.
pub const DEFAULT_LOCK_FILE: &str = "memplan.lock";

/// Permission bits that let someone other than the owner write.
const GROUP_OR_OTHER_WRITE: u32 = 0o022;

/// Where a pin came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinSource {
    CommandLine,
    LockFile(PathBuf),
}

impl std::fmt::Display for PinSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PinSource::CommandLine => f.write_str("--plugin-sha256"),
            PinSource::LockFile(path) => write!(f, "lock file {}", path.display()),
        }
    }
}

/// The SHA-256 a planner's file must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// Lowercase hex.
    pub sha256: String,
    pub source: PinSource,
}

/// What the user allows to be loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustPolicy {
    /// `--allow-insecure-plugins`: load files even when group or others may write them.
    pub allow_insecure: bool,
    /// Planner name -> pin. A `--plugin-sha256` pin replaces the lock file's for that name.
    pub pins: BTreeMap<String, Pin>,
}

impl TrustPolicy {
    /// The policy from the command line: `--plugin-sha256 NAME=HEX` arguments, then the lock
    /// file (`lock`, or [`DEFAULT_LOCK_FILE`] in `cwd` when it exists). Malformed pins and lock
    /// files are usage errors (exit 2).
    pub fn from_args(
        allow_insecure: bool,
        command_line_pins: &[(String, String)],
        lock: Option<&Path>,
        cwd: &Path,
    ) -> Result<TrustPolicy> {
        let mut pins = BTreeMap::new();
        let lock_path = match lock {
            Some(path) => Some(path.to_path_buf()),
            None => Some(cwd.join(DEFAULT_LOCK_FILE)).filter(|path| path.is_file()),
        };
        if let Some(path) = lock_path {
            for (name, sha256) in read_lock_file(&path)? {
                let source = PinSource::LockFile(path.clone());
                pins.insert(name, Pin { sha256, source });
            }
        }
        for (name, sha256) in command_line_pins {
            let pin = Pin {
                sha256: sha256.clone(),
                source: PinSource::CommandLine,
            };
            pins.insert(name.clone(), pin);
        }
        Ok(TrustPolicy {
            allow_insecure,
            pins,
        })
    }

    /// Every pin, by planner name.
    pub fn pins(&self) -> impl Iterator<Item = (&str, &Pin)> {
        self.pins.iter().map(|(name, pin)| (name.as_str(), pin))
    }

    pub fn pin(&self, planner: &str) -> Option<&Pin> {
        self.pins.get(planner)
    }

    /// The hashes a file must have to be loaded when the user selected `selected`: when every
    /// selected planner is pinned, nothing but their pinned files may be loaded; otherwise
    /// (some selected planner is not pinned, or nothing is selected, as in `memplan planners`)
    /// any file may be loaded and a pinned planner found in a file with another hash is
    /// rejected after loading ([`TrustPolicy::check_planner`]).
    pub fn required_hashes(&self, selected: &[&str]) -> Option<Vec<&Pin>> {
        if selected.is_empty() {
            return None;
        }
        selected.iter().map(|name| self.pin(name)).collect()
    }

    /// Why planner `name` found in a file with hash `sha256` must not be used, if it must not.
    pub fn check_planner(&self, name: &str, sha256: &str) -> Option<String> {
        let pin = self.pin(name)?;
        (pin.sha256 != sha256).then(|| {
            format!(
                "planner `{name}` is pinned to SHA-256 {} by {}, but this file's SHA-256 is \
                 {sha256}",
                pin.sha256, pin.source
            )
        })
    }
}

/// 64 hex digits, returned lowercase.
pub(crate) fn parse_sha256(hex: &str) -> Option<String> {
    (hex.len() == 64 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

/// Reads a lock file: one JSON object mapping planner names to SHA-256 hex strings.
fn read_lock_file(path: &Path) -> Result<BTreeMap<String, String>> {
    let bad = |problem: String| {
        Error::input(format!(
            "lock file {}: {problem}; it must be a JSON object mapping planner names to the \
             SHA-256 of their plugin files, e.g. {{\"greedy-bestfit\": \"<64 hex digits>\"}}",
            path.display()
        ))
    };
    // Opened as every input is: a pipe or device is refused, and so is a file above the cap.
    let text = crate::input::source::read_text(
        path,
        "a lock file",
        crate::input::source::MAX_SETTINGS_FILE_BYTES,
    )?;
    let entries: BTreeMap<String, String> =
        serde_json::from_str(&text).map_err(|error| bad(format!("not valid: {error}")))?;
    entries
        .into_iter()
        .map(|(name, hex)| match parse_sha256(&hex) {
            Some(sha256) => Ok((name, sha256)),
            None => Err(bad(format!(
                "the entry for `{name}` is not a SHA-256: {hex:?}"
            ))),
        })
        .collect()
}

/// A plugin file opened, permission-checked and hashed, ready to be handed to the loader.
#[derive(Debug)]
pub struct OpenedPlugin {
    pub path: PathBuf,
    /// SHA-256 of the bytes read from `file`, lowercase hex.
    pub sha256: String,
    file: File,
}

impl OpenedPlugin {
    /// Opens `path`, refuses it when it is insecure (unless `allow_insecure`) and hashes its
    /// bytes. The error is a one-line reason for the user.
    pub fn open(path: &Path, allow_insecure: bool) -> Result<OpenedPlugin, String> {
        let mut file = File::open(path).map_err(|error| format!("cannot be opened: {error}"))?;
        let metadata = file
            .metadata()
            .map_err(|error| format!("cannot be inspected: {error}"))?;
        if !allow_insecure {
            use std::os::unix::fs::MetadataExt;
            if let Some(problem) = insecure(path, metadata.permissions().mode(), "file")
                .or_else(|| foreign_owner(path, metadata.uid(), "file"))
            {
                return Err(problem);
            }
            // Every directory the path goes through, the links' included.
            if let Some(problem) = insecure_route(path)? {
                return Err(problem);
            }
        }
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let read = file
                .read(&mut buffer)
                .map_err(|error| format!("cannot be read: {error}"))?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        Ok(OpenedPlugin {
            path: path.to_path_buf(),
            sha256: format!("{:x}", hasher.finalize()),
            file,
        })
    }

    /// The file's planner manifest, read without loading it; `None` when it has none.
    pub fn manifest(&self) -> Option<memplan_plugin_api::manifest::Manifest> {
        super::manifest::declared_planners(&self.file)
    }

    /// Whether the file is a memplan plugin, read without loading it (see
    /// [`super::manifest::names_the_plugin_loader`]).
    pub fn names_the_plugin_loader(&self) -> bool {
        super::manifest::names_the_plugin_loader(&self.file)
    }

    /// The open file's descriptor (valid as long as `self` is).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    /// The path to give the dynamic loader for the open file, through a copy of its descriptor
    /// that stays open for the rest of the process: the loader takes a path it has loaded
    /// before for the library it loaded then, so a `/proc/self/fd/N` it has seen must never
    /// name another file (as it would once N is closed and reused).
    #[cfg(target_os = "linux")]
    pub fn load_path(&self) -> std::io::Result<PathBuf> {
        // SAFETY: F_DUPFD_CLOEXEC on the open descriptor; the copy is never closed.
        let copy = unsafe { libc::fcntl(self.raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if copy < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(PathBuf::from(format!("/proc/self/fd/{copy}")))
    }

    #[cfg(not(target_os = "linux"))]
    pub fn load_path(&self) -> std::io::Result<PathBuf> {
        Ok(self.path.clone())
    }
}

/// Why someone other than the user and root could change what `path` leads to, if they could:
/// the path is followed one name at a time, as the kernel does, and every directory a name is
/// looked up in must be the user's or root's and not writable by group or others (unless
/// sticky, like `/tmp`: others cannot replace what they do not own there). Symbolic links are
/// followed where they stand, so a link's own directory is checked as well as its target's,
/// and so is every link of a chain: a link in a directory anyone may write can be pointed
/// elsewhere. The error is a reason for the user (a name on the way that cannot be read).
pub fn insecure_route(path: &Path) -> Result<Option<String>, String> {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let start = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|error| format!("cannot be resolved: {error}"))?
            .join(path)
    };
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = Default::default();
    let push_front = |pending: &mut std::collections::VecDeque<std::ffi::OsString>,
                      target: &Path| {
        for component in target.components().rev() {
            pending.push_front(component.as_os_str().to_os_string());
        }
    };
    push_front(&mut pending, &start);
    let mut current = PathBuf::from("/");
    let mut links: Vec<PathBuf> = Vec::new();
    let mut checked: Vec<PathBuf> = Vec::new();
    let mut check = |dir: &Path, links: &[PathBuf]| -> Result<Option<String>, String> {
        if checked.iter().any(|seen| seen == dir) {
            return Ok(None);
        }
        checked.push(dir.to_path_buf());
        let metadata = std::fs::metadata(dir).map_err(|error| {
            format!(
                "its directory {} cannot be inspected: {error}",
                dir.display()
            )
        })?;
        let mode = metadata.permissions().mode();
        let problem = if mode & 0o1000 != 0 {
            None
        } else {
            insecure(dir, mode, "directory")
        };
        Ok(problem
            .or_else(|| foreign_owner(dir, metadata.uid(), "directory"))
            .map(|problem| match links {
                [] => problem,
                links => format!(
                    "{problem} (on the way from {} through the link{} {})",
                    path.display(),
                    if links.len() == 1 { "" } else { "s" },
                    links
                        .iter()
                        .map(|link| link.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }))
    };
    if let Some(problem) = check(&current, &links)? {
        return Ok(Some(problem));
    }
    while let Some(name) = pending.pop_front() {
        match Path::new(&name).components().next() {
            Some(Component::RootDir) => current = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                current.pop();
            }
            Some(Component::Normal(_)) => {
                let next = current.join(&name);
                let metadata = std::fs::symlink_metadata(&next)
                    .map_err(|error| format!("{} cannot be inspected: {error}", next.display()))?;
                if metadata.file_type().is_symlink() {
                    // Its directory, `current`, is checked already.
                    if links.len() >= 40 {
                        return Err(format!("too many symbolic links from {}", path.display()));
                    }
                    let target = std::fs::read_link(&next)
                        .map_err(|error| format!("{} cannot be read: {error}", next.display()))?;
                    links.push(next);
                    push_front(&mut pending, &target);
                } else {
                    current = next;
                    if metadata.is_dir() {
                        if let Some(problem) = check(&current, &links)? {
                            return Ok(Some(problem));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Why a `what` owned by `uid` is unsafe to load from, if it is: only the user and root may own
/// what a plugin is loaded from.
fn foreign_owner(path: &Path, uid: u32, what: &str) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let user = unsafe { libc::geteuid() };
    (uid != 0 && uid != user).then(|| {
        format!(
            "refused: the {what} {} is owned by user {uid}, who is neither you (user {user}) nor \
             root, so they could replace the planner; pass --allow-insecure-plugins if you \
             trust them",
            path.display()
        )
    })
}

/// Why `mode` makes `path` (a `what`) unsafe to load from, if it does.
fn insecure(path: &Path, mode: u32, what: &str) -> Option<String> {
    (mode & GROUP_OR_OTHER_WRITE != 0).then(|| {
        format!(
            "refused: the {what} {} is writable by {} (mode {:o}), so someone else could \
             replace the planner; run `chmod go-w {}`, or pass --allow-insecure-plugins if \
             you trust everyone who can write there",
            path.display(),
            match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => "group and others",
                (true, false) => "its group",
                _ => "others",
            },
            mode & 0o7777,
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH_A: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    fn scratch_dir(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memplan-trust-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[test]
    fn an_opened_file_is_hashed_and_loaded_through_its_descriptor() {
        let dir = scratch_dir("open");
        let path = dir.join("libabc.so");
        std::fs::write(&path, b"abc").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let opened = OpenedPlugin::open(&path, false).unwrap();
        assert_eq!(opened.sha256, HASH_A);
        let load_path = opened.load_path().unwrap();
        // Replacing the file at its path does not change what the descriptor names.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"something else").unwrap();
        assert_eq!(std::fs::read(&load_path).unwrap(), b"abc");
    }

    #[test]
    fn group_or_other_writable_files_and_directories_are_refused() {
        let dir = scratch_dir("perm");
        let path = dir.join("libp.so");
        std::fs::write(&path, b"p").unwrap();
        for (mode, who) in [
            (0o664, "its group"),
            (0o646, "others"),
            (0o666, "group and others"),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let reason = OpenedPlugin::open(&path, false).unwrap_err();
            assert!(reason.contains(&format!("writable by {who}")), "{reason}");
            assert!(reason.contains("--allow-insecure-plugins"), "{reason}");
            assert!(OpenedPlugin::open(&path, true).is_ok());
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let reason = OpenedPlugin::open(&path, false).unwrap_err();
        assert!(reason.contains("the directory"), "{reason}");
        assert!(OpenedPlugin::open(&path, true).is_ok());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(OpenedPlugin::open(&path, false).is_ok());
    }

    #[test]
    fn the_loaded_file_and_every_directory_above_it_are_checked() {
        let root = scratch_dir("ancestors");
        // A symlink in a safe directory to a library in a world-writable one: refused, naming
        // the directory that holds the real file.
        let (safe, open) = (root.join("safe"), root.join("open"));
        std::fs::create_dir(&safe).unwrap();
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(open.join("libp.so"), b"p").unwrap();
        std::os::unix::fs::symlink(open.join("libp.so"), safe.join("libp.so")).unwrap();
        let reason = OpenedPlugin::open(&safe.join("libp.so"), false).unwrap_err();
        assert!(reason.contains(&open.display().to_string()), "{reason}");
        assert!(reason.contains("through the link"), "{reason}");
        // A safe directory under a world-writable parent: refused; sticky (like /tmp): fine.
        let nested = open.join("plugins");
        std::fs::create_dir(&nested).unwrap();
        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(nested.join("libq.so"), b"q").unwrap();
        let reason = OpenedPlugin::open(&nested.join("libq.so"), false).unwrap_err();
        assert!(reason.contains("writable by group and others"), "{reason}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(OpenedPlugin::open(&nested.join("libq.so"), false).is_ok());
        // Owned by another user (only root can arrange that; elsewhere this part is skipped).
        let other = std::process::Command::new("chown")
            .arg("12345")
            .arg(nested.join("libq.so"))
            .status()
            .is_ok_and(|status| status.success());
        if other {
            let reason = OpenedPlugin::open(&nested.join("libq.so"), false).unwrap_err();
            assert!(reason.contains("owned by user 12345"), "{reason}");
        }
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn every_link_of_a_chain_and_every_directory_on_the_way_is_checked() {
        let root = scratch_dir("chain");
        let (safe, open, real) = (root.join("safe"), root.join("open"), root.join("real"));
        for dir in [&safe, &open, &real] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(real.join("libp.so"), b"p").unwrap();
        std::fs::set_permissions(real.join("libp.so"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        // safe/libp.so -> open/hop.so -> real/libp.so: the middle link sits in a directory
        // anyone may write (not sticky), so it can be pointed anywhere. Both ends are safe.
        std::os::unix::fs::symlink(real.join("libp.so"), open.join("hop.so")).unwrap();
        std::os::unix::fs::symlink(open.join("hop.so"), safe.join("libp.so")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let reason = OpenedPlugin::open(&safe.join("libp.so"), false).unwrap_err();
        assert!(
            reason.contains(&format!("the directory {}", open.display())),
            "{reason}"
        );
        // A plugin directory anyone may write holding only a link to a safe file: refused.
        std::os::unix::fs::symlink(real.join("libp.so"), open.join("libq.so")).unwrap();
        let reason = OpenedPlugin::open(&open.join("libq.so"), false).unwrap_err();
        assert!(reason.contains("writable by group and others"), "{reason}");
        // A relative link through `..`, all safe: accepted.
        std::os::unix::fs::symlink("../real/libp.so", safe.join("librel.so")).unwrap();
        assert!(OpenedPlugin::open(&safe.join("librel.so"), false).is_ok());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(OpenedPlugin::open(&safe.join("libp.so"), false).is_ok());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn pins_come_from_the_command_line_and_the_lock_file() {
        let dir = scratch_dir("lock");
        let upper = HASH_A.to_ascii_uppercase();
        std::fs::write(
            dir.join(DEFAULT_LOCK_FILE),
            format!(
                r#"{{"linear": "{upper}", "greedy-bestfit": "{}"}}"#,
                "0".repeat(64)
            ),
        )
        .unwrap();
        let policy = TrustPolicy::from_args(
            false,
            &[("greedy-bestfit".to_string(), HASH_A.to_string())],
            None,
            &dir,
        )
        .unwrap();
        assert_eq!(policy.pin("linear").unwrap().sha256, HASH_A);
        assert!(matches!(
            policy.pin("linear").unwrap().source,
            PinSource::LockFile(_)
        ));
        let flag = policy.pin("greedy-bestfit").unwrap();
        assert_eq!(
            (flag.sha256.as_str(), &flag.source),
            (HASH_A, &PinSource::CommandLine)
        );
        assert!(policy.check_planner("linear", HASH_A).is_none());
        let reason = policy.check_planner("linear", &"1".repeat(64)).unwrap();
        assert!(reason.contains("lock file"), "{reason}");
        assert!(policy.check_planner("unpinned", HASH_A).is_none());

        // Only when every selected planner is pinned are the loadable files restricted.
        assert_eq!(policy.required_hashes(&["linear"]).unwrap().len(), 1);
        assert!(policy.required_hashes(&["linear", "unpinned"]).is_none());
        assert!(policy.required_hashes(&[]).is_none());

        // Without --lock and without a memplan.lock in the directory, nothing is pinned.
        let empty = scratch_dir("nolock");
        assert!(TrustPolicy::from_args(false, &[], None, &empty)
            .unwrap()
            .pins
            .is_empty());
    }

    #[test]
    fn malformed_pins_and_lock_files_are_usage_errors() {
        let dir = scratch_dir("bad");
        let lock = dir.join("bad.lock");
        for text in ["[]", r#"{"linear": 3}"#, r#"{"linear": "abc"}"#] {
            std::fs::write(&lock, text).unwrap();
            let error = TrustPolicy::from_args(false, &[], Some(&lock), &dir).unwrap_err();
            assert_eq!(error.kind, crate::ErrorKind::Input, "{text}");
            assert!(error.message.contains("bad.lock"), "{}", error.message);
        }
        let missing = TrustPolicy::from_args(false, &[], Some(&dir.join("nope")), &dir);
        assert!(missing
            .unwrap_err()
            .message
            .contains("cannot read a lock file"));
        // Opened as every input is: no device, no file above the settings cap.
        let zero = dir.join("zero.lock");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let error = TrustPolicy::from_args(false, &[], Some(&zero), &dir).unwrap_err();
        assert!(error.message.contains("is a device"), "{}", error.message);
        let huge = dir.join("huge.lock");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(crate::input::source::MAX_SETTINGS_FILE_BYTES + 1)
            .unwrap();
        let error = TrustPolicy::from_args(false, &[], Some(&huge), &dir).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(error.message.contains("the 64 MiB"), "{}", error.message);
    }
}
