//! Loading one plugin file: open it with the dynamic loader, check its ABI and initialize its
//! root module.
//!
//! This is deliberately separate from the directory scan: the file arrives already opened,
//! permission-checked and hashed by [`trust`](super::trust), and is loaded through its open
//! descriptor so that the bytes checked are the bytes loaded; the `--isolate` worker loads its
//! one file the same way.
//!
//! Libraries are opened with abi_stable's `RawLibrary` and then leaked *before* anything else
//! is looked at: Rust `cdylib`s with thread-local destructors crash on `dlclose`, and that
//! includes files that turn out not to be memplan plugins. (`lib_header_from_path` would close
//! a library whose header is missing; `RootModule::load_from_*` caches one module per type for
//! the whole process, so it cannot load several plugins.)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use abi_stable::library::{lib_header_from_raw_library, LibraryError, RawLibrary};
use memplan_plugin_api::manifest::Manifest;
use memplan_plugin_api::{PlannerEntry, PluginModuleRef, ABI_VERSION};

use super::trust::OpenedPlugin;

/// A third-party plugin file memplan has opened, checked and hashed, and read the manifest of,
/// but not loaded: memplan never runs a third-party file's code in its own process unless told
/// to (`--isolate=never`). Its planners run in a sandboxed worker, which loads the file itself
/// through the descriptor kept here ([`DeferredPlugin::load_planner`]).
pub struct DeferredPlugin {
    opened: OpenedPlugin,
    manifest: Manifest,
    /// The file loaded into this process, once (`--isolate=never`).
    in_process: OnceLock<Result<PluginModuleRef, String>>,
}

impl std::fmt::Debug for DeferredPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredPlugin")
            .field("path", &self.opened.path)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl DeferredPlugin {
    pub fn new(opened: OpenedPlugin, manifest: Manifest) -> DeferredPlugin {
        DeferredPlugin {
            opened,
            manifest,
            in_process: OnceLock::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.opened.path
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The open file's descriptor, which the worker loads the file through.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.opened.raw_fd()
    }

    /// Loads the file from `load_path` (a path naming the open file: the worker's
    /// `/proc/self/fd/N`) and returns planner `name`'s entry. The file must export exactly the
    /// planners its manifest lists. The error is a one-line reason for the user.
    pub fn load_planner(&self, load_path: &Path, name: &str) -> Result<PlannerEntry, String> {
        let module = open_module(load_path).map_err(describe_deferred_failure)?;
        self.planner_of(module, name)
    }

    /// Planner `name`'s entry, the file loaded into memplan's own process (once).
    pub fn load_planner_in_process(&self, name: &str) -> Result<PlannerEntry, String> {
        let module = self.in_process.get_or_init(|| {
            let load_path = self
                .opened
                .load_path()
                .map_err(|error| format!("cannot keep the file open: {error}"))?;
            open_module(&load_path).map_err(describe_deferred_failure)
        });
        self.planner_of(*module.as_ref().map_err(Clone::clone)?, name)
    }

    fn planner_of(&self, module: PluginModuleRef, name: &str) -> Result<PlannerEntry, String> {
        let entries = module.planners();
        let declared = self.manifest.names();
        if let Some(reason) = manifest_mismatch(&declared, &entries) {
            return Err(reason);
        }
        entries
            .iter()
            .find(|entry| entry.name.as_str() == name)
            .copied()
            .ok_or_else(|| format!("it does not export planner `{name}`"))
    }
}

/// A plugin file as found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginFile {
    pub path: PathBuf,
    /// SHA-256 of the file's bytes when it was loaded, lowercase hex.
    pub sha256: String,
}

/// Why a file did not yield a plugin.
#[derive(Debug)]
pub enum LoadFailure {
    /// A library without abi_stable's root-module symbol: some other shared library that
    /// happens to sit in a plugin directory. Skipped quietly.
    NotAPlugin { detail: String },
    /// A file that could not be used as a plugin, with a one-line reason for the user and,
    /// when the loader gave one, the full report (abi_stable's layout comparison) for `-v`.
    Rejected {
        reason: String,
        detail: Option<String>,
    },
}

/// The one-line reason a file with a manifest did not load; the loader's full report (a layout
/// comparison) goes to the debug log (`-v`).
fn describe_deferred_failure(failure: LoadFailure) -> String {
    match failure {
        LoadFailure::NotAPlugin { detail } => {
            format!("it has a planner manifest but is not a memplan plugin ({detail})")
        }
        LoadFailure::Rejected { reason, detail } => {
            if let Some(detail) = detail {
                tracing::debug!("loader report:\n{detail}");
            }
            reason
        }
    }
}

/// Why a manifest naming another plugin ABI than memplan's is refused, if it does (a manifest
/// of format 1 names none: the loader checks when the file is loaded).
pub fn abi_mismatch(manifest: &Manifest) -> Option<String> {
    let declared = manifest.abi_version.as_deref()?;
    let major = |version: &str| version.split('.').next().map(str::to_string);
    (major(declared) != major(ABI_VERSION)).then(|| {
        format!(
            "built against plugin ABI {declared}, but this memplan uses plugin ABI \
             {ABI_VERSION}; rebuild the plugin against a memplan-plugin-api with ABI \
             {ABI_VERSION}"
        )
    })
}

/// Opens the library at `path` (for a checked file, its `/proc/self/fd/N`) and initializes its
/// root module.
pub fn open_module(path: &Path) -> Result<PluginModuleRef, LoadFailure> {
    let library = RawLibrary::load_at(path).map_err(describe_failure)?;
    // Leaked on purpose: never unloaded (see the module docs).
    let library: &'static RawLibrary = Box::leak(Box::new(library));
    // SAFETY: the library is never unloaded, so the header may live for 'static.
    let header = unsafe { lib_header_from_raw_library(library) }.map_err(describe_failure)?;
    header
        .init_root_module::<PluginModuleRef>()
        .map_err(describe_failure)
}

/// Turns an abi_stable loading error into a [`LoadFailure`] with a reason a user can act on.
fn describe_failure(error: LibraryError) -> LoadFailure {
    let rejected =
        |reason: String, detail: Option<String>| LoadFailure::Rejected { reason, detail };
    match error {
        LibraryError::GetSymbolError { .. } => LoadFailure::NotAPlugin {
            detail: one_line(&error.to_string()),
        },
        LibraryError::OpenError { err, .. } => rejected(
            format!(
                "the dynamic loader cannot open it: {}",
                one_line(&err.to_string())
            ),
            None,
        ),
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => rejected(
            format!(
                "built against plugin ABI {actual_version}, but this memplan uses plugin ABI \
                 {ABI_VERSION}; rebuild the plugin against a memplan-plugin-api with ABI \
                 {ABI_VERSION}"
            ),
            None,
        ),
        LibraryError::AbiInstability(report) => {
            let report = report.to_string();
            let what = match first_layout_mismatch(&report) {
                Some((type_name, problem)) => format!("`{type_name}` differs ({problem})"),
                None => "the types it shares with the host differ".to_string(),
            };
            rejected(
                format!(
                    "incompatible plugin ABI: {what} from memplan-plugin-api ABI \
                     {ABI_VERSION}, so it was built against a modified or mismatched \
                     plugin-api; rebuild it against the published memplan-plugin-api, or run \
                     with -v for the full layout report"
                ),
                Some(report),
            )
        }
        LibraryError::InvalidAbiHeader(_) | LibraryError::InvalidCAbi { .. } => rejected(
            "built with an incompatible version of abi_stable (memplan uses abi_stable 0.11); \
             rebuild it against memplan-plugin-api"
                .to_string(),
            Some(error.to_string()),
        ),
        LibraryError::ParseVersionError(_) => rejected(
            format!(
                "its ABI version string is malformed: {}",
                one_line(&error.to_string())
            ),
            None,
        ),
        LibraryError::RootModule { ref err, .. } => rejected(
            format!(
                "its root module failed to initialize: {}",
                one_line(&err.to_string())
            ),
            None,
        ),
        LibraryError::Many(_) => rejected(
            "it failed several load checks; run with -v for the full report".to_string(),
            Some(error.to_string()),
        ),
    }
}

/// The first type whose layout differs, and abi_stable's first complaint, picked out of its
/// layout report. The report walks the root module's type tree in blocks headed
/// `N error(s)inside:`; the first block with N > 0 continues with `Layout of expected type:`
/// and `type:NAME`, and the complaints follow as `Error:PROBLEM`. The report is meant for
/// humans, so this is best effort: `None` falls back to a generic reason.
fn first_layout_mismatch(report: &str) -> Option<(String, String)> {
    let mut lines = report.lines().map(str::trim);
    lines.find(|line| {
        line.strip_suffix("error(s)inside:")
            .and_then(|count| count.trim().parse::<u64>().ok())
            .is_some_and(|count| count > 0)
    })?;
    lines.find(|line| *line == "Layout of expected type:")?;
    let type_name = lines
        .find_map(|line| line.strip_prefix("type:"))?
        .trim()
        .to_string();
    let problem = lines
        .find_map(|line| line.strip_prefix("Error:"))
        .map_or_else(|| "layout mismatch".to_string(), |p| p.trim().to_string());
    Some((type_name, problem))
}

/// Collapses a multi-line loader message into one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a file whose manifest does not list the planners it exports is refused (`None` when
/// they agree): a run selecting one of its planners by the manifest would skip the file, or
/// load it for a planner it does not have.
fn manifest_mismatch(declared: &[String], entries: &[PlannerEntry]) -> Option<String> {
    let mut exported: Vec<&str> = entries.iter().map(|entry| entry.name.as_str()).collect();
    let mut listed: Vec<&str> = declared.iter().map(String::as_str).collect();
    exported.sort_unstable();
    listed.sort_unstable();
    (exported != listed).then(|| {
        format!(
            "its planner manifest (section {}) lists {} but it exports {}; rebuild it with \
             memplan-plugin-api's export_planners!, which writes both",
            memplan_plugin_api::manifest::MANIFEST_SECTION,
            name_list(&listed),
            name_list(&exported)
        )
    })
}

fn name_list(names: &[&str]) -> String {
    if names.is_empty() {
        "no planners".to_string()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mismatched_type_is_named_from_the_layout_report() {
        // The shape of abi_stable's report: blocks of matching types, then the mismatch.
        let report = "0 error(s)inside:\n    field_name:0\n    type:PluginModule\n\
                      Layout of expected type:\n    type:PluginModule\n\
                      11 error(s)inside:\n    <other>\n    type:TensorRequest\n\
                      Layout of expected type:\n    --- Type Layout ---\n\
                      \x20   type:TensorRequest\n    size:120\n\
                      Layout of found type:\n    type:TensorRequest\n\n\
                      Error:incompatible type size\nExpected:\n    120\n";
        assert_eq!(
            first_layout_mismatch(report),
            Some((
                "TensorRequest".to_string(),
                "incompatible type size".to_string()
            ))
        );
        assert_eq!(first_layout_mismatch("something else entirely"), None);
    }

    #[test]
    fn a_file_the_loader_cannot_open_is_rejected_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("memplan-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("garbage{}", std::env::consts::DLL_SUFFIX));
        std::fs::write(&path, b"not a shared library").unwrap();
        let opened = OpenedPlugin::open(&path, true).unwrap();
        match open_module(&opened.load_path().unwrap()) {
            Err(LoadFailure::Rejected { reason, .. }) => {
                assert!(reason.contains("dynamic loader"), "{reason}")
            }
            Err(other) => panic!("expected a rejection, got {other:?}"),
            Ok(_) => panic!("a text file loaded as a plugin"),
        }
    }
}
