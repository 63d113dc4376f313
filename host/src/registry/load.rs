//! Loading one plugin file: open it with the dynamic loader, check its ABI and initialize its
//! root module (a Rust plugin), or find the packer functions its manifest names (a C planner,
//! `memplan_planner.h`).
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
use memplan_plugin_api::c_abi::{CPackFn, C_ABI_VERSION};
use memplan_plugin_api::manifest::{DeclaredPlanner, Manifest, PlannerInterface};
use memplan_plugin_api::{PlannerEntry, PluginModuleRef, ABI_VERSION};

use super::trust::OpenedPlugin;
use crate::runner::{CPlanner, PlannerFn};

/// A plugin file loaded into a process, by its interface.
#[derive(Clone, Copy)]
enum LoadedFile {
    Rust(PluginModuleRef),
    /// Never unloaded (leaked), like a Rust plugin's library.
    C(&'static libloading::os::unix::Library),
}

/// A third-party plugin file memplan has opened, checked and hashed, and read the manifest of,
/// but not loaded: memplan never runs a third-party file's code in its own process unless told
/// to (`--isolate=never`). Its planners run in a sandboxed worker, which loads the file itself
/// through the descriptor kept here ([`DeferredPlugin::load_planner`]).
pub struct DeferredPlugin {
    opened: OpenedPlugin,
    manifest: Manifest,
    /// The file loaded into this process, once (`--isolate=never`).
    in_process: OnceLock<Result<LoadedFile, String>>,
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
    /// `/proc/self/fd/N`) and returns planner `name`'s code. A Rust plugin must export exactly
    /// the planners its manifest lists; a C planner's file, the packer function its manifest
    /// names. The error is a one-line reason for the user.
    pub fn load_planner(&self, load_path: &Path, name: &str) -> Result<PlannerFn, String> {
        let file = self.load(load_path)?;
        self.planner_in(file, name)
    }

    /// Planner `name`'s code, the file loaded into memplan's own process (once).
    pub fn load_planner_in_process(&self, name: &str) -> Result<PlannerFn, String> {
        let file = self.in_process.get_or_init(|| {
            let load_path = self
                .opened
                .load_path()
                .map_err(|error| format!("cannot keep the file open: {error}"))?;
            self.load(&load_path)
        });
        self.planner_in(*file.as_ref().map_err(Clone::clone)?, name)
    }

    /// Loads the file from `load_path` as its manifest's interface says.
    fn load(&self, load_path: &Path) -> Result<LoadedFile, String> {
        match self.manifest.interface {
            PlannerInterface::Rust => open_module(load_path)
                .map(LoadedFile::Rust)
                .map_err(describe_deferred_failure),
            PlannerInterface::C => open_c_library(load_path),
        }
    }

    fn planner_in(&self, file: LoadedFile, name: &str) -> Result<PlannerFn, String> {
        match file {
            LoadedFile::Rust(module) => self.planner_of(module, name).map(PlannerFn::Rust),
            LoadedFile::C(library) => {
                let declared = self
                    .manifest
                    .planners
                    .iter()
                    .find(|planner| planner.name == name)
                    .ok_or_else(|| format!("its manifest does not list planner `{name}`"))?;
                c_packer_of(library, declared).map(PlannerFn::C)
            }
        }
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

/// Why a file is refused by its manifest alone, if it is: it names another plugin ABI major
/// than memplan's (a manifest of format 1 names none: the loader checks when the file is
/// loaded), another C ABI major, or a C entry function by something that is not a C
/// identifier.
pub fn manifest_refusal(manifest: &Manifest) -> Option<String> {
    let declared = manifest.abi_version.as_deref()?;
    let major = |version: &str| version.split('.').next().map(str::to_string);
    match manifest.interface {
        PlannerInterface::Rust => (major(declared) != major(ABI_VERSION)).then(|| {
            format!(
                "built against plugin ABI {declared}, but this memplan uses plugin ABI \
                 {ABI_VERSION}; rebuild the plugin against a memplan-plugin-api with ABI \
                 {ABI_VERSION}"
            )
        }),
        PlannerInterface::C => {
            if major(declared) != major(C_ABI_VERSION) {
                return Some(format!(
                    "a C planner built against memplan_planner.h with C ABI {declared}, but \
                     this memplan speaks C ABI {C_ABI_VERSION}; rebuild it against the \
                     memplan_planner.h of this memplan's memplan-plugin-api (include/)"
                ));
            }
            manifest
                .planners
                .iter()
                .find(|planner| !is_c_identifier(&planner.entry))
                .map(|planner| {
                    format!(
                        "its manifest names {:?} as the entry function of planner `{}`, which \
                         is not a C identifier; name the packer's symbol in MEMPLAN_PLANNER",
                        planner.entry, planner.name
                    )
                })
        }
    }
}

/// Whether `name` is a C identifier (what a packer's symbol must be).
fn is_c_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// Opens a C planner's library at `path` (for a checked file, its `/proc/self/fd/N`), every
/// symbol bound now (`RTLD_NOW`: while the worker may still read the system's libraries), and
/// leaks it: never unloaded.
fn open_c_library(path: &Path) -> Result<LoadedFile, String> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading a library runs its constructors; the file is a checked plugin file,
    // loaded where its planner runs (a sandboxed worker unless --isolate=never).
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|error| {
        format!(
            "the dynamic loader cannot open it: {}",
            one_line(&error.to_string())
        )
    })?;
    Ok(LoadedFile::C(Box::leak(Box::new(library))))
}

/// The packer of C planner `declared` in `library`.
fn c_packer_of(
    library: &'static libloading::os::unix::Library,
    declared: &DeclaredPlanner,
) -> Result<CPlanner, String> {
    let mut symbol = declared.entry.clone().into_bytes();
    symbol.push(0);
    // SAFETY: the manifest says the symbol is a `memplan_pack_fn` (MEMPLAN_PACKER declares it
    // with that type); the library is never unloaded.
    let pack = unsafe { library.get::<CPackFn>(&symbol) }.map_err(|_| {
        format!(
            "it does not export `{}`, the entry function its manifest names for planner `{}`; \
             define it with MEMPLAN_PACKER({}) of memplan_planner.h (exported, C linkage)",
            declared.entry, declared.name, declared.entry
        )
    })?;
    // SAFETY: as above.
    Ok(unsafe { CPlanner::new(*pack) })
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
    fn c_manifests_of_another_major_or_with_odd_entries_are_refused() {
        use memplan_plugin_api::manifest::parse_manifest;
        let c = |abi: &str, entry: &str| {
            parse_manifest(
                format!("memplan-planners/2\nc {abi}\nc-x\t1.0\tx\t{entry}\n").as_bytes(),
            )
            .unwrap()
        };
        assert_eq!(manifest_refusal(&c("1.0", "pack_x")), None);
        assert_eq!(manifest_refusal(&c("1.7", "_pack2")), None);
        let refusal = manifest_refusal(&c("2.0", "pack_x")).unwrap();
        assert!(refusal.contains("C ABI 2.0"), "{refusal}");
        for entry in ["", "2pack", "pack-x", "pack x"] {
            let refusal = manifest_refusal(&c("1.0", entry)).unwrap();
            assert!(refusal.contains("not a C identifier"), "{entry}: {refusal}");
        }
    }

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
