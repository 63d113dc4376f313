//! Plan stage, host side: finds and trusts planner plugins and registers their planners by
//! NAME; running one is [`crate::runner`]'s job, choosing between several
//! [`crate::selection`]'s.
//!
//! memplan's own planners are [`builtin`]: linked into the binary, registered between the
//! `--plugin-dir` directories and the rest of the search path. Every file is third-party.
//!
//! Discovery walks the search path of [`search`] (each `--plugin-dir`, `MEMPLAN_PLUGIN_PATH`,
//! the installation's plugin folders; never the current directory), reads every candidate
//! file's planner manifest without loading it (the sandboxed worker that runs one of its
//! planners loads it, see [`load::DeferredPlugin`]) and registers each planner by its NAME:
//! - a name seen earlier wins; a later one is shadowed, with a warning naming the shadowed
//!   file. So a `--plugin-dir` file (asked for on the command line) replaces a built-in
//!   planner of its name, and a built-in planner wins over files of `MEMPLAN_PLUGIN_PATH` and
//!   the plugin folders; a planner pinned to a file's SHA-256 is never the built-in one;
//! - a name exported twice within one directory is ambiguous (the order of files in a
//!   directory is no way to choose): neither is used, and selecting it is an error naming both
//!   files;
//! - files that are not memplan plugins are skipped; files that are, but cannot be used
//!   (wrong ABI, cannot be opened), are kept as [`Rejected`] with a one-line reason.
//!
//! A file's manifest also says which interface its planners are built against: the Rust plugin
//! ABI (abi_stable, `export_planners!`), or the C interface of `memplan_planner.h`, whose
//! planners are packers the planner kit runs ([`crate::runner::c_packer`]). Both are found,
//! trusted, pinned, listed and run through the same paths; only loading differs
//! ([`load`]).
//!
//! Before the loader sees a file, [`trust`] opens, permission-checks and hashes it under the
//! user's [`TrustPolicy`]: insecure files are rejected, and when every selected planner is
//! pinned to a SHA-256, files with other hashes are not loaded at all. A pinned planner found
//! in a file with another hash is rejected. [`crate::runner::isolate`] runs a planner in a
//! worker process.
//!
//! Libraries are never unloaded, so planner handles stay valid for the whole process.

pub mod builtin;
pub mod load;
pub mod manifest;
pub mod search;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memplan_plugin_api::manifest::PlannerInterface;
use memplan_plugin_api::{MemoryPlan, PlanRequest, PlannerEntry};

use crate::error::{Error, Result};
use crate::runner::{
    isolate, plan_in_worker, run, run_planner, Isolation, PlannerFn, RunLimits, WorkerCode,
    WorkerJob,
};
pub use load::{open_module, DeferredPlugin, LoadFailure, PluginFile};
pub use search::{candidate_files, executable_dir, search_path, PLUGIN_PATH_VAR};
pub use trust::{OpenedPlugin, PinSource, TrustPolicy};

/// Where a planner comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlannerSource {
    /// Linked into memplan ([`builtin`]): memplan's own planner.
    BuiltIn,
    /// Exported by a plugin file (shared by every planner of that file): third-party.
    File(Arc<PluginFile>),
}

impl PlannerSource {
    /// What the plan file and `memplan planners` record in place of a file for a built-in
    /// planner.
    pub const BUILT_IN: &'static str = "built in";

    /// The plugin file, `None` for a built-in planner.
    pub fn file(&self) -> Option<&PluginFile> {
        match self {
            PlannerSource::BuiltIn => None,
            PlannerSource::File(file) => Some(file),
        }
    }

    /// The file's path, or [`PlannerSource::BUILT_IN`].
    pub fn path_label(&self) -> String {
        self.file().map_or_else(
            || Self::BUILT_IN.to_string(),
            |file| file.path.display().to_string(),
        )
    }

    /// The file's SHA-256, or [`PlannerSource::BUILT_IN`].
    pub fn sha256_label(&self) -> &str {
        self.file().map_or(Self::BUILT_IN, |file| &file.sha256)
    }
}

impl std::fmt::Display for PlannerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlannerSource::BuiltIn => write!(f, "memplan's built-in planners"),
            PlannerSource::File(file) => write!(f, "{}", file.path.display()),
        }
    }
}

/// One planner: built in, or exported by a loaded plugin.
#[derive(Clone)]
pub struct PlannerHandle {
    pub name: String,
    pub version: String,
    pub description: String,
    pub source: PlannerSource,
    /// What the planner is built against: the Rust plugin ABI, or the C interface of
    /// `memplan_planner.h` (from its file's manifest).
    pub interface: PlannerInterface,
    code: PlannerCode,
}

/// Where a planner's code is.
#[derive(Clone)]
enum PlannerCode {
    /// In memplan's process: a built-in planner.
    Loaded(PlannerEntry),
    /// In a third-party file memplan has not loaded: known by its manifest, loaded by the
    /// worker that runs it (or, with `--isolate=never`, into memplan's process when it runs).
    Deferred(Arc<DeferredPlugin>),
}

impl PlannerHandle {
    /// One of memplan's built-in planners.
    fn built_in(entry: PlannerEntry) -> PlannerHandle {
        PlannerHandle {
            name: entry.name.as_str().to_string(),
            version: entry.version.as_str().to_string(),
            description: entry.description.as_str().to_string(),
            source: PlannerSource::BuiltIn,
            interface: PlannerInterface::Rust,
            code: PlannerCode::Loaded(entry),
        }
    }

    /// The time this planner gives itself when its options name none: known for memplan's
    /// own searching planners (`exact`, `portfolio`), `None` otherwise.
    pub fn default_time_limit(&self) -> Option<std::time::Duration> {
        if self.shipped() {
            builtin::default_time_limit(&self.name)
        } else {
            None
        }
    }

    /// Whether this planner is memplan's own (built in); `--isolate=auto` runs the others in
    /// a sandboxed worker.
    pub fn shipped(&self) -> bool {
        self.source == PlannerSource::BuiltIn
    }

    /// A third-party planner its file's manifest declares, not loaded.
    fn deferred(
        declared: &memplan_plugin_api::manifest::DeclaredPlanner,
        file: Arc<PluginFile>,
        plugin: Arc<DeferredPlugin>,
    ) -> PlannerHandle {
        let interface = plugin.manifest().interface;
        let unknown = |text: &str| {
            if text.is_empty() {
                "?".to_string()
            } else {
                text.to_string()
            }
        };
        PlannerHandle {
            name: declared.name.clone(),
            version: unknown(&declared.version),
            description: unknown(&declared.description),
            source: PlannerSource::File(file),
            interface,
            code: PlannerCode::Deferred(plugin),
        }
    }

    /// "cannot be loaded: REASON", as an error naming this planner and its file.
    fn load_failure(&self, reason: &str) -> Error {
        Error::plugin(format!(
            "planner `{}` ({}) cannot be loaded: {}",
            self.name,
            crate::printable::escape_hidden(&self.source.to_string()),
            crate::printable::escape_hidden(reason)
        ))
    }

    /// Whether this planner runs in a worker process under `isolation`: always, never, or
    /// (auto) when it is not part of memplan's installation.
    pub fn runs_isolated(&self, isolation: Isolation) -> bool {
        match isolation {
            Isolation::Never => false,
            Isolation::Always => true,
            Isolation::Auto => !self.shipped(),
        }
    }

    /// Runs this planner on `request`, in process or in a sandboxed worker as `isolation`
    /// says (see [`PlannerHandle::run`] and [`PlannerHandle::run_isolated`]).
    pub fn execute(
        &self,
        request: &PlanRequest,
        limits: &RunLimits,
        isolation: Isolation,
    ) -> Result<MemoryPlan> {
        let why = match (isolation, &self.source) {
            (Isolation::Auto, PlannerSource::BuiltIn) => "built into memplan".to_string(),
            (Isolation::Auto, PlannerSource::File(file)) => {
                format!("third-party: {}", file.path.display())
            }
            (Isolation::Always, _) => "--isolate".to_string(),
            (Isolation::Never, _) => "--isolate=never".to_string(),
        };
        if self.runs_isolated(isolation) {
            tracing::debug!(
                "planner `{}` runs in a sandboxed worker process ({why})",
                self.name
            );
            self.run_isolated(request, limits)
        } else {
            tracing::debug!("planner `{}` runs in memplan's process ({why})", self.name);
            self.run(request, limits)
        }
    }

    /// Runs this planner on `request` within `limits` (see [`run_planner`] for how its
    /// failures map onto exit codes).
    pub fn run(&self, request: &PlanRequest, limits: &RunLimits) -> Result<MemoryPlan> {
        let origin = self.source.to_string();
        let code = match &self.code {
            PlannerCode::Loaded(entry) => PlannerFn::Rust(*entry),
            PlannerCode::Deferred(plugin) => {
                tracing::debug!(
                    "loading {} into memplan's process for planner `{}`",
                    plugin.path().display(),
                    self.name
                );
                plugin
                    .load_planner_in_process(&self.name)
                    .map_err(|reason| self.load_failure(&reason))?
            }
        };
        run_planner(&self.name, &origin, &code, request, limits)
    }

    /// Runs this planner in a sandboxed worker process (`--isolate`, see [`isolate`]), with
    /// [`RunLimits::for_worker`]'s time limit; its failures map onto exit codes as in
    /// [`PlannerHandle::run`], and a crash, exit, time-out or sandbox violation of the worker
    /// is exit 4.
    pub fn run_isolated(&self, request: &PlanRequest, limits: &RunLimits) -> Result<MemoryPlan> {
        let origin = self.source.to_string();
        let limits = limits.for_worker();
        let load = |load_path: &Path| match &self.code {
            PlannerCode::Loaded(entry) => Ok(PlannerFn::Rust(*entry)),
            PlannerCode::Deferred(plugin) => plugin.load_planner(load_path, &self.name),
        };
        let code = match &self.code {
            PlannerCode::Loaded(entry) => WorkerCode::Loaded(entry),
            PlannerCode::Deferred(plugin) => WorkerCode::Load {
                fd: plugin.raw_fd(),
                load: &load,
            },
        };
        let job = WorkerJob {
            planner: &self.name,
            origin: &origin,
            code,
            limits: &limits,
            memory_limit: limits
                .memory_limit
                .unwrap_or_else(isolate::default_memory_limit),
        };
        let started = std::time::Instant::now();
        let answer = plan_in_worker(&job, request)?;
        run::planner_outcome(&self.name, &origin, answer, &limits, started.elapsed())
    }
}

impl std::fmt::Debug for PlannerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannerHandle")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// A file that is a plugin (or meant to be one) but was not used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub path: PathBuf,
    pub reason: String,
}

/// What a planner name resolved to during discovery.
#[derive(Clone, Debug)]
enum Claim {
    /// Index into `Registry::planners`.
    Planner(usize),
    /// Exported by several files of the same directory (or twice by one file).
    Ambiguous(Vec<PathBuf>),
}

/// The planners found on the search path, and the files that were rejected.
#[derive(Debug, Default)]
pub struct Registry {
    searched: Vec<PathBuf>,
    /// In discovery order: search-path directory, then file name, then export order.
    planners: Vec<PlannerHandle>,
    rejected: Vec<Rejected>,
    claims: BTreeMap<String, Claim>,
    trust: TrustPolicy,
    /// Every candidate file that could be opened, with its SHA-256, loaded or not: what a
    /// pin could have named.
    hashed: Vec<(PathBuf, String)>,
    /// Planners found in a file whose hash their pin refuses (not typos of a name).
    refused_by_pin: std::collections::BTreeSet<String>,
    /// Whether every file was loaded (not only the pinned ones), so that a planner name no
    /// file provides is known to be provided by none.
    loaded_every_file: bool,
    /// By planner name: what the registered one shadows (files later in the search path, or
    /// the built-in planner), as [`PlannerSource`] displays it.
    shadowed: BTreeMap<String, Vec<String>>,
    /// Files not loaded because their manifest names none of the selected planners, with the
    /// planners they declare (for suggestions and pin checks).
    not_loaded: Vec<(PathBuf, Vec<String>)>,
}

impl Registry {
    /// Scans the search path built from `plugin_dirs` (the `--plugin-dir` flags),
    /// `MEMPLAN_PLUGIN_PATH` and the executable's directory, loading what `trust` allows for
    /// running the planners named in `selected` (empty: no particular planner).
    pub fn discover(
        plugin_dirs: &[PathBuf],
        trust: &TrustPolicy,
        selected: &[&str],
    ) -> Result<Registry> {
        let env_path = std::env::var_os(PLUGIN_PATH_VAR);
        // A directory the user names by a path others could redirect (a link in, or a
        // directory under, one anyone may write) is not searched: its files would pass the
        // checks of their own resolved directories.
        let mut refused = Vec::new();
        let mut safe_route = |dir: &Path| {
            // A directory named by its own resolved path: every file's route is checked
            // from it (see `trust`); only a route through links can differ.
            let resolved = dir.canonicalize().is_ok_and(|resolved| resolved == dir);
            if trust.allow_insecure || !dir.is_absolute() || !dir.exists() || resolved {
                return true;
            }
            match trust::insecure_route(dir) {
                Ok(None) => true,
                Ok(Some(problem)) | Err(problem) => {
                    tracing::warn!("plugin directory {}: {problem}", dir.display());
                    refused.push(Rejected {
                        path: dir.to_path_buf(),
                        reason: format!("not searched: {problem}"),
                    });
                    false
                }
            }
        };
        let plugin_dirs: Vec<PathBuf> = plugin_dirs
            .iter()
            .filter(|dir| {
                let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
                safe_route(&absolute)
            })
            .cloned()
            .collect();
        let env_path = env_path.map(|value| {
            let kept: Vec<PathBuf> = std::env::split_paths(&value)
                .filter(|entry| safe_route(entry))
                .collect();
            std::env::join_paths(kept).unwrap_or(value)
        });
        let searched = search_path(
            &plugin_dirs,
            env_path.as_deref(),
            executable_dir().as_deref(),
        )?;
        // The --plugin-dir directories (those kept) come first in the search path, each once.
        let command_line = search_path(&plugin_dirs, None, None)?.len();
        let mut registry = Registry::scan_with(searched, command_line, trust, selected);
        registry.rejected.splice(0..0, refused);
        registry.check_pins_name_planners(selected)?;
        Ok(registry)
    }

    /// A pin for a planner that no file provides is most likely a typo: silently ignoring it
    /// would leave the planner it meant unpinned. A `--plugin-sha256` one is a usage error
    /// (exit 2); a lock file's a warning (a lock may list planners not installed here). Pins
    /// of selected planners are reported by [`Registry::find`] instead.
    fn check_pins_name_planners(&self, selected: &[&str]) -> Result<()> {
        if !self.loaded_every_file {
            return Ok(());
        }
        let names = self.known_names();
        for (name, pin) in self.trust.pins() {
            if names.contains(&name)
                || self.claims.contains_key(name)
                || self.refused_by_pin.contains(name)
                || selected.contains(&name)
            {
                continue;
            }
            let suggestion = closest_name(name, &names)
                .map(|close| format!(" (did you mean `{close}`?)"))
                .unwrap_or_default();
            let found = if names.is_empty() {
                "no planners were found".to_string()
            } else {
                format!("planners found: {}", names.join(", "))
            };
            match &pin.source {
                PinSource::CommandLine => {
                    return Err(Error::input(format!(
                    "--plugin-sha256 {name}=...: no planner named `{name}` was found{suggestion}; \
                         {found}. Pin a planner by the name `memplan planners` lists"
                )))
                }
                PinSource::LockFile(path) => tracing::warn!(
                    "{}: pins planner `{name}`, which no plugin file provides{suggestion}; {found}",
                    path.display()
                ),
            }
        }
        Ok(())
    }

    /// Loads every candidate file of `searched`, in order, as `--plugin-dir` directories
    /// (before the built-in planners), under the default trust policy (insecure files
    /// refused, nothing pinned).
    pub fn scan(searched: Vec<PathBuf>) -> Registry {
        let command_line = searched.len();
        Registry::scan_with(searched, command_line, &TrustPolicy::default(), &[])
    }

    /// Loads every candidate file of `searched` that `trust` allows, in order, and registers
    /// the built-in planners after its first `command_line` directories (the `--plugin-dir`
    /// ones): a planner of a directory the user named on the command line replaces the
    /// built-in one of its name; the rest of the search path does not.
    pub fn scan_with(
        searched: Vec<PathBuf>,
        command_line: usize,
        trust: &TrustPolicy,
        selected: &[&str],
    ) -> Registry {
        let mut registry = Registry {
            searched: Vec::new(),
            trust: trust.clone(),
            ..Registry::default()
        };
        let required: Option<Vec<String>> = trust
            .required_hashes(selected)
            .map(|pins| pins.into_iter().map(|pin| pin.sha256.clone()).collect());
        let _workdir = crate::runner::workdir::KeepWorkingDirectory::new("loading plugins");
        for (position, dir) in searched.iter().enumerate() {
            if position == command_line {
                registry.register_builtin();
            }
            registry.scan_directory(dir, required.as_deref(), selected);
        }
        if searched.len() <= command_line {
            registry.register_builtin();
        }
        registry.searched = searched;
        registry.loaded_every_file = required.is_none();
        registry
    }

    /// Registers the built-in planners, except those pinned to a file's SHA-256 (a pin asks
    /// for that file's planner) and those a `--plugin-dir` file provides already.
    fn register_builtin(&mut self) {
        for entry in builtin::entries() {
            let handle = PlannerHandle::built_in(entry);
            if let Some(pin) = self.trust.pin(&handle.name) {
                tracing::debug!(
                    "built-in planner `{}` not used: {} pins it to a plugin file",
                    handle.name,
                    pin.source
                );
                continue;
            }
            self.register(
                Path::new(PlannerSource::BUILT_IN),
                handle.name.clone(),
                vec![handle],
            );
        }
    }

    /// Loads the candidate files of `dir`; with `required`, only those with one of its hashes;
    /// with planners `selected`, only those whose manifest declares one of them (or that have
    /// no manifest).
    fn scan_directory(&mut self, dir: &Path, required: Option<&[String]>, selected: &[&str]) {
        let files = match candidate_files(dir) {
            Ok(files) => files,
            Err(error) => {
                self.rejected.push(Rejected {
                    path: dir.to_path_buf(),
                    reason: format!("cannot list this plugin directory: {error}"),
                });
                return;
            }
        };
        // Planners of this directory by name, so that duplicates within it are found before
        // any of them is registered.
        let mut by_name: BTreeMap<String, Vec<PlannerHandle>> = BTreeMap::new();
        for path in files {
            let opened = match OpenedPlugin::open(&path, self.trust.allow_insecure) {
                Ok(opened) => opened,
                Err(reason) => {
                    tracing::warn!("{}: {reason}", path.display());
                    self.rejected.push(Rejected { path, reason });
                    continue;
                }
            };
            self.hashed.push((path.clone(), opened.sha256.clone()));
            if required.is_some_and(|hashes| !hashes.contains(&opened.sha256)) {
                tracing::debug!(
                    "{}: not loaded, its SHA-256 {} is not pinned for the selected planner",
                    path.display(),
                    opened.sha256
                );
                continue;
            }
            let manifest = opened.manifest();
            let declared = manifest.as_ref().map(|manifest| manifest.names());
            if let Some(declared) = &declared {
                if !selected.is_empty() && !declared.iter().any(|name| selected.contains(&&**name))
                {
                    tracing::debug!(
                        "{}: not loaded, it declares planners {} and none is selected",
                        path.display(),
                        declared.join(", ")
                    );
                    self.not_loaded.push((path, declared.clone()));
                    continue;
                }
            }
            // Every file is third-party (memplan's own planners are built in): registered
            // from its manifest, never loaded into memplan's process here.
            self.admit_third_party(path, opened, manifest, &mut by_name);
        }
        for (name, handles) in by_name {
            self.register(dir, name, handles);
        }
    }

    /// Adds `handle`, a planner of plugin file `file`, to the planners of its directory,
    /// `by_name`, unless its name is not one `--planner` can select or its pin refuses its
    /// file (then it is rejected, saying why).
    fn admit(
        &mut self,
        handle: PlannerHandle,
        file: &PluginFile,
        by_name: &mut BTreeMap<String, Vec<PlannerHandle>>,
    ) {
        let path = file.path.clone();
        if !is_valid_planner_name(&handle.name) {
            self.rejected.push(Rejected {
                path,
                reason: format!(
                    "exports a planner named {:?}; planner names are non-empty and use only \
                     a-z, 0-9 and `-`, so that they can be given to --planner",
                    handle.name
                ),
            });
            return;
        }
        if let Some(reason) = self.trust.check_planner(&handle.name, &file.sha256) {
            tracing::warn!("{}: {reason}", path.display());
            self.refused_by_pin.insert(handle.name.clone());
            self.rejected.push(Rejected { path, reason });
            return;
        }
        tracing::debug!(
            "found planner `{}` {} in {} (third-party: known by its manifest, not loaded)",
            handle.name,
            handle.version,
            path.display()
        );
        by_name.entry(handle.name.clone()).or_default().push(handle);
    }

    /// Registers the planners a third-party file's manifest declares, without loading the
    /// file: its code runs only in the sandboxed worker that runs one of its planners (or in
    /// memplan's process with `--isolate=never`). A file without a manifest is never loaded:
    /// refused when it is a memplan plugin (built against an earlier plugin-api), skipped
    /// quietly otherwise.
    fn admit_third_party(
        &mut self,
        path: PathBuf,
        opened: OpenedPlugin,
        manifest: Option<memplan_plugin_api::manifest::Manifest>,
        by_name: &mut BTreeMap<String, Vec<PlannerHandle>>,
    ) {
        let Some(manifest) = manifest else {
            if opened.names_the_plugin_loader() {
                let reason = format!(
                    "a memplan plugin without a planner manifest (section {}, which \
                     export_planners! writes): memplan does not load a \
                     third-party file to learn its planners; rebuild it against the current \
                     memplan-plugin-api",
                    memplan_plugin_api::manifest::MANIFEST_SECTION
                );
                tracing::warn!("{}: rejected: {reason}", path.display());
                self.rejected.push(Rejected { path, reason });
            } else {
                tracing::debug!(
                    "{}: not a memplan plugin, skipped without loading it",
                    path.display()
                );
            }
            return;
        };
        if let Some(reason) = load::manifest_refusal(&manifest) {
            tracing::warn!("{}: rejected: {reason}", path.display());
            self.rejected.push(Rejected { path, reason });
            return;
        }
        if manifest.planners.is_empty() {
            self.rejected.push(Rejected {
                path,
                reason: "a memplan plugin that exports no planners".to_string(),
            });
            return;
        }
        let file = Arc::new(PluginFile {
            path,
            sha256: opened.sha256.clone(),
        });
        let plugin = Arc::new(DeferredPlugin::new(opened, manifest));
        for declared in &plugin.manifest().planners {
            let handle = PlannerHandle::deferred(declared, Arc::clone(&file), Arc::clone(&plugin));
            self.admit(handle, &file, by_name);
        }
    }

    /// Registers the planners called `name` found in `dir`, or records why they are not used.
    fn register(&mut self, dir: &Path, name: String, mut handles: Vec<PlannerHandle>) {
        if let Some(claim) = self.claims.get(&name) {
            let winner = match claim {
                Claim::Planner(index) => self.planners[*index].source.to_string(),
                Claim::Ambiguous(paths) => join_paths(paths),
            };
            for handle in handles {
                let shadowed = handle.source.to_string();
                self.shadowed
                    .entry(name.clone())
                    .or_default()
                    .push(shadowed.clone());
                let PlannerSource::File(file) = &handle.source else {
                    // A --plugin-dir file replaces the built-in planner: the user asked for it.
                    tracing::warn!(
                        "planner `{name}` of {winner} (--plugin-dir) replaces memplan's built-in \
                         `{name}`"
                    );
                    continue;
                };
                let built_in_wins = matches!(
                    claim,
                    Claim::Planner(index) if self.planners[*index].shipped()
                );
                let reason = if built_in_wins {
                    format!(
                        "planner `{name}` is built into memplan, which wins over files of \
                         {PLUGIN_PATH_VAR} and the plugin folders; to run this file's instead, \
                         pass its directory with --plugin-dir (or pin `{name}` to its SHA-256)"
                    )
                } else {
                    format!(
                        "planner `{name}` is shadowed by {winner}, which comes earlier in the \
                         search path"
                    )
                };
                tracing::warn!("{}: {reason}", file.path.display());
                self.rejected.push(Rejected {
                    path: file.path.clone(),
                    reason,
                });
            }
            return;
        }
        if handles.len() == 1 {
            let handle = handles.pop().expect("one handle");
            self.claims
                .insert(name, Claim::Planner(self.planners.len()));
            self.planners.push(handle);
            return;
        }
        let mut paths: Vec<PathBuf> = handles
            .iter()
            .filter_map(|h| h.source.file().map(|file| file.path.clone()))
            .collect();
        paths.dedup();
        let reason = if paths.len() == 1 {
            format!("exports planner `{name}` more than once, so none of them is used")
        } else {
            format!(
                "planner `{name}` is exported by several files in {}: {}; none of them is \
                 used, remove all but one",
                dir.display(),
                join_paths(&paths)
            )
        };
        for path in &paths {
            self.rejected.push(Rejected {
                path: path.clone(),
                reason: reason.clone(),
            });
        }
        self.claims.insert(name, Claim::Ambiguous(paths));
    }

    /// The directories searched, in order.
    pub fn searched(&self) -> &[PathBuf] {
        &self.searched
    }

    /// The usable planners, sorted by name.
    pub fn planners(&self) -> Vec<&PlannerHandle> {
        let mut planners: Vec<&PlannerHandle> = self.planners.iter().collect();
        planners.sort_by(|a, b| a.name.cmp(&b.name));
        planners
    }

    /// The names of the planners found, loaded or declared by a file's manifest (and not
    /// loaded, not being selected), sorted.
    fn known_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.planners.iter().map(|p| p.name.as_str()).collect();
        for (_, declared) in &self.not_loaded {
            names.extend(declared.iter().map(String::as_str));
        }
        names.sort_unstable();
        names.dedup();
        names
    }

    /// What the registered planner `name` shadows (files later in the search path, or the
    /// built-in planner), in discovery order.
    pub fn shadowed(&self, name: &str) -> &[String] {
        self.shadowed.get(name).map_or(&[], Vec::as_slice)
    }

    /// The files that were not used, and why, in discovery order.
    pub fn rejected(&self) -> &[Rejected] {
        &self.rejected
    }

    /// The planner called `name`. Unknown or ambiguous names are a plugin error (exit 4) that
    /// lists what was found and where memplan looked.
    pub fn find(&self, name: &str) -> Result<&PlannerHandle> {
        match self.claims.get(name) {
            Some(Claim::Planner(index)) => Ok(&self.planners[*index]),
            Some(Claim::Ambiguous(paths)) => Err(Error::plugin(format!(
                "planner `{name}` is exported by more than one file in the same directory: \
                 {}; remove all but one, or put the one you want in an earlier --plugin-dir",
                join_paths(paths)
            ))),
            None => match self.trust.pin(name) {
                Some(pin) => Err(Error::plugin(self.pinned_planner_missing(name, pin))),
                None => Err(Error::plugin(self.unknown_planner_message(name))),
            },
        }
    }

    /// Where discovery looked, for messages.
    fn searched_description(&self) -> String {
        if self.searched.is_empty() {
            "no plugin directory exists".to_string()
        } else {
            format!("searched {}", join_paths(&self.searched))
        }
    }

    /// The message for a pinned planner that no file with its pinned hash exports.
    fn pinned_planner_missing(&self, name: &str, pin: &trust::Pin) -> String {
        let candidates = match self.hashed.as_slice() {
            [] => "no candidate files were found".to_string(),
            files => format!(
                "candidate files: {}",
                files
                    .iter()
                    .map(|(path, sha256)| format!("{} (SHA-256 {sha256})", path.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let searched = self.searched_description();
        format!(
            "planner `{name}` is pinned to SHA-256 {} by {}, but no plugin file with that \
             SHA-256 exports it, so it was not loaded; {candidates}; {searched}. Put the \
             pinned file on the search path, or update the pin if the plugin was updated on \
             purpose",
            pin.sha256, pin.source
        )
    }

    /// Runs the planner called `name`, isolated as `isolation` says.
    pub fn plan(
        &self,
        name: &str,
        request: &PlanRequest,
        limits: &RunLimits,
        isolation: Isolation,
    ) -> Result<MemoryPlan> {
        self.find(name)?.execute(request, limits, isolation)
    }

    fn unknown_planner_message(&self, name: &str) -> String {
        let names = self.known_names();
        let found = if names.is_empty() {
            "no planners were found".to_string()
        } else {
            format!("planners found: {}", names.join(", "))
        };
        let suggestion = closest_name(name, &names)
            .map(|close| format!(" (did you mean `{close}`?)"))
            .unwrap_or_default();
        let searched = self.searched_description();
        // A refused file may be the one that provides the planner: say why each was refused.
        let rejected =
            match self.rejected.as_slice() {
                [] => String::new(),
                rejected => format!(
                    "; {} plugin file(s) were rejected, any of which may provide it: {}",
                    rejected.len(),
                    rejected
                        .iter()
                        .take(REJECTED_SHOWN)
                        .map(|file| format!("{}: {}", file.path.display(), file.reason))
                        .chain((rejected.len() > REJECTED_SHOWN).then(|| {
                            "... (run `memplan planners` to see them all)".to_string()
                        }))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            };
        let builtin = builtin::names().join(", ");
        format!(
            "no planner named `{name}`{suggestion}: {found}; {searched}{rejected}. memplan's \
             own planners are built in ({builtin}); any other is a third-party plugin file \
             (run sandboxed): pass its directory with --plugin-dir DIR, or add it to \
             {PLUGIN_PATH_VAR}"
        )
    }
}

/// Rejected files an unknown-planner message names with their reasons.
const REJECTED_SHOWN: usize = 3;

/// The name in `names` closest to `typed` when it is close enough to be a typo: at most two
/// edits (inserted, deleted or changed characters), or one more for every eight characters.
fn closest_name<'n>(typed: &str, names: &[&'n str]) -> Option<&'n str> {
    let limit = 2 + typed.len() / 8;
    names
        .iter()
        .map(|&name| (edit_distance(typed, name), name))
        .filter(|&(distance, _)| distance <= limit)
        .min()
        .map(|(_, name)| name)
}

/// Levenshtein distance between `a` and `b`, over characters; O(len(a) × len(b)), for names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let change = previous[j] + usize::from(ca != cb);
            current[j + 1] = change.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Planner names are what users type after `--planner` (several separated by commas), so
/// they are restricted to lowercase letters, digits and `-`.
fn is_valid_planner_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|path| path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_search_path_finds_the_built_in_planners_and_says_where_it_looked() {
        let registry = Registry::scan(Vec::new());
        let names: Vec<&str> = registry
            .planners()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["exact", "greedy-bestfit", "linear", "portfolio"]);
        assert!(registry.planners().iter().all(|planner| planner.shipped()));
        let error = registry.find("minimalloc").unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Plugin);
        let message = &error.message;
        assert!(
            message.contains("no planner named `minimalloc`"),
            "{message}"
        );
        assert!(message.contains("no plugin directory exists"), "{message}");
        // The hint names what is built in and how a third-party file is found; it no longer
        // tells anyone to put files beside the executable (#34 item 9).
        assert!(
            message.contains("built in (greedy-bestfit, exact, portfolio, linear)"),
            "{message}"
        );
        assert!(message.contains("--plugin-dir DIR"), "{message}");
        assert!(!message.contains("one of these directories"), "{message}");
    }

    #[test]
    fn a_pinned_planner_is_never_the_built_in_one() {
        let dir = std::env::temp_dir().join(format!("memplan-registry-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pin = ("linear".to_string(), "0".repeat(64));
        let trust = TrustPolicy::from_args(false, &[pin], None, &dir).unwrap();
        let registry = Registry::scan_with(Vec::new(), 0, &trust, &["linear"]);
        let error = registry.find("linear").unwrap_err();
        assert!(
            error.message.contains("pinned to SHA-256"),
            "{}",
            error.message
        );
        assert!(registry.find("exact").unwrap().shipped());
    }

    #[test]
    fn planner_names_are_what_the_command_line_can_select() {
        for name in ["linear", "greedy-bestfit", "tflm2"] {
            assert!(is_valid_planner_name(name), "{name}");
        }
        for name in ["", "Linear", "a,b", "a b", "näive", "x_y"] {
            assert!(!is_valid_planner_name(name), "{name}");
        }
    }

    #[test]
    fn non_plugin_files_are_not_planners() {
        let dir = std::env::temp_dir().join(format!("memplan-registry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let garbage = dir.join(format!("broken{}", std::env::consts::DLL_SUFFIX));
        std::fs::write(&garbage, b"garbage").unwrap();
        std::fs::write(dir.join("README"), b"not a library").unwrap();
        let registry = Registry::scan(vec![dir.clone()]);
        assert!(registry.planners().iter().all(|planner| planner.shipped()));
        // A third-party file without a planner manifest is never handed to the dynamic
        // loader; one that is not a memplan plugin at all is skipped without a word.
        assert!(registry.rejected().is_empty(), "{:?}", registry.rejected());
        let error = registry.find("lienar-typo").unwrap_err();
        assert!(
            error.message.contains(&dir.display().to_string()),
            "{}",
            error.message
        );
    }

    #[test]
    fn typos_of_planner_names_get_a_suggestion() {
        let names = ["greedy-bestfit", "exact", "linear", "portfolio"];
        assert_eq!(
            closest_name("greedy-bestfti", &names),
            Some("greedy-bestfit")
        );
        assert_eq!(closest_name("exat", &names), Some("exact"));
        assert_eq!(closest_name("portfollio", &names), Some("portfolio"));
        assert_eq!(closest_name("minimalloc", &names), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
