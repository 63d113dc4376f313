//! Plan stage, host side: finds and trusts planner plugins and registers their planners by
//! NAME; running one is [`crate::runner`]'s job, choosing between several
//! [`crate::selection`]'s.
//!
//! Discovery walks the search path of [`search`] (each `--plugin-dir`, `MEMPLAN_PLUGIN_PATH`,
//! the executable's directory and its `plugins/`; never the current directory), loads every
//! candidate file with [`load::load_plugin`] and registers each planner the file exports by
//! its NAME:
//! - a name seen in an earlier directory wins; a later one is shadowed, with a warning naming
//!   the shadowed file;
//! - a name exported twice within one directory is ambiguous (the order of files in a
//!   directory is no way to choose): neither is used, and selecting it is an error naming both
//!   files;
//! - files that are not memplan plugins are skipped; files that are, but cannot be used
//!   (wrong ABI, cannot be opened), are kept as [`Rejected`] with a one-line reason.
//!
//! Before the loader sees a file, [`trust`] opens, permission-checks and hashes it under the
//! user's [`TrustPolicy`]: insecure files are rejected, and when every selected planner is
//! pinned to a SHA-256, files with other hashes are not loaded at all. A pinned planner found
//! in a file with another hash is rejected. [`crate::runner::isolate`] runs a planner in a
//! worker process.
//!
//! Libraries are never unloaded, so planner handles stay valid for the whole process.

pub mod load;
pub mod manifest;
pub mod search;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memplan_plugin_api::{MemoryPlan, PlanRequest, PlannerEntry};

use crate::error::{Error, Result};
use crate::runner::{isolate, plan_in_worker, run, run_planner, Isolation, RunLimits, WorkerJob};
pub use load::{load_plugin, open_module, LoadFailure, PluginFile};
pub use search::{candidate_files, executable_dir, search_path, PLUGIN_PATH_VAR};
pub use trust::{OpenedPlugin, PinSource, TrustPolicy};

/// One planner exported by a loaded plugin.
#[derive(Clone)]
pub struct PlannerHandle {
    pub name: String,
    pub version: String,
    pub description: String,
    /// The file it was loaded from (shared by every planner of that file).
    pub file: Arc<PluginFile>,
    /// Whether that file is part of memplan's installation (see [`is_installed_with_memplan`]);
    /// `--isolate=auto` runs the others in a sandboxed worker.
    pub shipped: bool,
    entry: PlannerEntry,
}

impl PlannerHandle {
    fn new(entry: PlannerEntry, file: Arc<PluginFile>, shipped: bool) -> PlannerHandle {
        PlannerHandle {
            name: entry.name.as_str().to_string(),
            version: entry.version.as_str().to_string(),
            description: entry.description.as_str().to_string(),
            file,
            shipped,
            entry,
        }
    }

    /// Whether this planner runs in a worker process under `isolation`: always, never, or
    /// (auto) when it is not part of memplan's installation.
    pub fn runs_isolated(&self, isolation: Isolation) -> bool {
        match isolation {
            Isolation::Never => false,
            Isolation::Always => true,
            Isolation::Auto => !self.shipped,
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
        let why = match (isolation, self.shipped) {
            (Isolation::Auto, true) => "shipped with memplan".to_string(),
            (Isolation::Auto, false) => format!("third-party: {}", self.file.path.display()),
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
        let origin = self.file.path.display().to_string();
        run_planner(&self.name, &origin, &self.entry, request, limits)
    }

    /// Runs this planner in a sandboxed worker process (`--isolate`, see [`isolate`]), with
    /// [`RunLimits::for_worker`]'s time limit; its failures map onto exit codes as in
    /// [`PlannerHandle::run`], and a crash, exit, time-out or sandbox violation of the worker
    /// is exit 4.
    pub fn run_isolated(&self, request: &PlanRequest, limits: &RunLimits) -> Result<MemoryPlan> {
        let origin = self.file.path.display().to_string();
        let limits = limits.for_worker();
        let job = WorkerJob {
            planner: &self.name,
            origin: &origin,
            entry: &self.entry,
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
            .field("file", &self.file.path)
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
    /// By planner name: the files later in the search path whose planner of that name the
    /// registered one shadows.
    shadowed: BTreeMap<String, Vec<PathBuf>>,
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
        let searched = search_path(
            plugin_dirs,
            env_path.as_deref(),
            executable_dir().as_deref(),
        )?;
        let registry = Registry::scan_with(searched, trust, selected);
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

    /// Loads every candidate file of `searched`, in order, under the default trust policy
    /// (insecure files refused, nothing pinned).
    pub fn scan(searched: Vec<PathBuf>) -> Registry {
        Registry::scan_with(searched, &TrustPolicy::default(), &[])
    }

    /// Loads every candidate file of `searched` that `trust` allows, in order.
    pub fn scan_with(searched: Vec<PathBuf>, trust: &TrustPolicy, selected: &[&str]) -> Registry {
        let mut registry = Registry {
            searched: Vec::new(),
            trust: trust.clone(),
            ..Registry::default()
        };
        let required: Option<Vec<String>> = trust
            .required_hashes(selected)
            .map(|pins| pins.into_iter().map(|pin| pin.sha256.clone()).collect());
        let _workdir = crate::runner::workdir::KeepWorkingDirectory::new("loading plugins");
        let installation = installation_dirs();
        for dir in &searched {
            registry.scan_directory(dir, required.as_deref(), &installation, selected);
        }
        registry.searched = searched;
        registry.loaded_every_file = required.is_none();
        registry
    }

    /// Loads the candidate files of `dir`; with `required`, only those with one of its hashes;
    /// with planners `selected`, only those whose manifest declares one of them (or that have
    /// no manifest). Files in `installation` (memplan's own directories) are shipped with it.
    fn scan_directory(
        &mut self,
        dir: &Path,
        required: Option<&[String]>,
        installation: &[PathBuf],
        selected: &[&str],
    ) {
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
            let declared = opened.declared_planners();
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
            match load_plugin(opened) {
                Ok((file, module)) => {
                    let shipped = is_installed_with_memplan(&file.path, installation);
                    let file = Arc::new(file);
                    let entries = module.planners();
                    if let Some(reason) = manifest_mismatch(declared.as_deref(), &entries) {
                        tracing::warn!("{}: {reason}", path.display());
                        self.rejected.push(Rejected { path, reason });
                        continue;
                    }
                    if entries.is_empty() {
                        self.rejected.push(Rejected {
                            path: path.clone(),
                            reason: "a memplan plugin that exports no planners".to_string(),
                        });
                    }
                    for entry in entries.iter() {
                        let handle = PlannerHandle::new(*entry, Arc::clone(&file), shipped);
                        if !is_valid_planner_name(&handle.name) {
                            self.rejected.push(Rejected {
                                path: path.clone(),
                                reason: format!(
                                    "exports a planner named {:?}; planner names are non-empty \
                                     and use only a-z, 0-9 and `-`, so that they can be given \
                                     to --planner",
                                    handle.name
                                ),
                            });
                            continue;
                        }
                        if let Some(reason) = self.trust.check_planner(&handle.name, &file.sha256) {
                            tracing::warn!("{}: {reason}", path.display());
                            self.refused_by_pin.insert(handle.name.clone());
                            self.rejected.push(Rejected {
                                path: path.clone(),
                                reason,
                            });
                            continue;
                        }
                        tracing::debug!(
                            "found planner `{}` {} in {}",
                            handle.name,
                            handle.version,
                            path.display()
                        );
                        by_name.entry(handle.name.clone()).or_default().push(handle);
                    }
                }
                Err(LoadFailure::NotAPlugin { detail }) => {
                    tracing::debug!(
                        "{}: not a memplan plugin, skipped ({detail})",
                        path.display()
                    )
                }
                Err(LoadFailure::Rejected { reason, detail }) => {
                    tracing::warn!("{}: rejected: {reason}", path.display());
                    if let Some(detail) = detail {
                        tracing::debug!("{}: loader report:\n{detail}", path.display());
                    }
                    self.rejected.push(Rejected { path, reason });
                }
            }
        }
        for (name, handles) in by_name {
            self.register(dir, name, handles);
        }
    }

    /// Registers the planners called `name` found in `dir`, or records why they are not used.
    fn register(&mut self, dir: &Path, name: String, mut handles: Vec<PlannerHandle>) {
        if let Some(claim) = self.claims.get(&name) {
            let winner = match claim {
                Claim::Planner(index) => self.planners[*index].file.path.display().to_string(),
                Claim::Ambiguous(paths) => join_paths(paths),
            };
            for handle in handles {
                let reason = format!(
                    "planner `{name}` is shadowed by {winner}, which comes earlier in the \
                     search path"
                );
                tracing::warn!("{}: {reason}", handle.file.path.display());
                self.shadowed
                    .entry(name.clone())
                    .or_default()
                    .push(handle.file.path.clone());
                self.rejected.push(Rejected {
                    path: handle.file.path.clone(),
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
        let mut paths: Vec<PathBuf> = handles.iter().map(|h| h.file.path.clone()).collect();
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

    /// The files whose planner `name` is shadowed by the one registered (later in the search
    /// path), in discovery order.
    pub fn shadowed(&self, name: &str) -> &[PathBuf] {
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
        format!(
            "no planner named `{name}`{suggestion}: {found}; {searched}{rejected}. Put the \
             plugin that provides `{name}` in one of these directories, or pass --plugin-dir \
             DIR or set {PLUGIN_PATH_VAR}"
        )
    }
}

/// Why a file whose manifest does not list the planners it exports is refused (`None` when
/// it has no manifest or they agree): a run selecting one of its planners by the manifest
/// would skip the file, or load it for a planner it does not have.
fn manifest_mismatch(declared: Option<&[String]>, entries: &[PlannerEntry]) -> Option<String> {
    let declared = declared?;
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

/// memplan's own plugin directories: the executable's directory and its `plugins/`
/// (canonical), where the planners built and installed with memplan live.
fn installation_dirs() -> Vec<PathBuf> {
    executable_dir()
        .map(|dir| {
            let plugins = dir.join("plugins");
            std::iter::once(dir)
                .chain(plugins.canonicalize().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the plugin file at `path` — after following symbolic links, so that a link in
/// memplan's directory to a file elsewhere does not count — lies directly in one of the
/// `installation` directories. Anything else is a third-party plugin, sandboxed by
/// `--isolate=auto`.
fn is_installed_with_memplan(path: &Path, installation: &[PathBuf]) -> bool {
    path.canonicalize()
        .ok()
        .and_then(|file| file.parent().map(Path::to_path_buf))
        .is_some_and(|dir| installation.contains(&dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_search_path_finds_nothing_and_says_where_it_looked() {
        let registry = Registry::scan(Vec::new());
        assert!(registry.planners().is_empty());
        let error = registry.find("greedy-bestfit").unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Plugin);
        assert!(
            error.message.contains("`greedy-bestfit`"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("no planners were found"),
            "{}",
            error.message
        );
        assert!(error.message.contains("--plugin-dir"), "{}", error.message);
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
        assert!(registry.planners().is_empty());
        assert_eq!(registry.rejected().len(), 1, "{:?}", registry.rejected());
        assert_eq!(registry.rejected()[0].path, garbage);
        let error = registry.find("linear").unwrap_err();
        assert!(
            error.message.contains(&dir.display().to_string()),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("1 plugin file(s) were rejected"),
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
