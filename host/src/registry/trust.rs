//! Plugin trust: which plugin files memplan agrees to load at all.
//!
//! Loading a library runs its code with the user's rights, so before the dynamic loader sees a
//! file memplan
//! - refuses it when the file or its directory is writable by group or others (anyone else
//!   who can write there could replace the planner), unless `--allow-insecure-plugins`;
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
    let text =
        std::fs::read_to_string(path).map_err(|error| bad(format!("cannot be read: {error}")))?;
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
            if let Some(problem) = insecure(path, metadata.permissions().mode(), "file") {
                return Err(problem);
            }
            let dir = path.parent().unwrap_or(Path::new("/"));
            let dir_mode = std::fs::metadata(dir)
                .map_err(|error| format!("its directory cannot be inspected: {error}"))?
                .permissions()
                .mode();
            if let Some(problem) = insecure(dir, dir_mode, "directory") {
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

    /// The path to give the dynamic loader: the open file itself (`/proc/self/fd/N`), which
    /// stays open for the rest of the process so that the path stays valid and names the
    /// bytes that were hashed.
    #[cfg(target_os = "linux")]
    pub fn into_load_path(self) -> PathBuf {
        use std::os::fd::IntoRawFd;
        let fd = self.file.into_raw_fd(); // never closed: see the module docs
        PathBuf::from(format!("/proc/self/fd/{fd}"))
    }

    /// Without `/proc/self/fd`, the file is loaded by its path (the permission check still
    /// keeps others from swapping it).
    #[cfg(not(target_os = "linux"))]
    pub fn into_load_path(self) -> PathBuf {
        self.path
    }
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
        let load_path = opened.into_load_path();
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
        assert!(missing.unwrap_err().message.contains("cannot be read"));
    }
}
