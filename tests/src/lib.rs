//! Support for the end-to-end tests in `tests/tests/`: they run the real `memplan` binary
//! with the real plugins, exactly as a user would.
//!
//! The binary and the workspace plugins are built once per test process by a nested
//! `cargo build` into their own target directory (`target/e2e`), so the tests do not depend
//! on what `cargo test` happened to build and never wait on the outer build's lock. memplan's
//! planners are built into the binary; the plugin files of the same planners
//! (`plugins/*/cdylib`) land beside it, where the default search path does not look: a test
//! that runs them as plugin files passes `--plugin-dir`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

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

/// The plugin files of the built-in planners (`plugins/*/cdylib`), in a directory holding
/// exactly those (copied from the build's output directory, which may keep stale libraries of
/// earlier builds and is not on the default search path).
pub fn plugin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let built = memplan_bin().parent().expect("binary has a parent");
        let dir = e2e_target_dir().join("plugin-files");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the plugin files directory");
        for family in ["greedy_bestfit", "exact", "linear"] {
            let name = library_file_name(&format!("memplan_plugin_{family}"));
            std::fs::copy(built.join(&name), dir.join(&name))
                .unwrap_or_else(|error| panic!("copying {name}: {error}"));
        }
        dir
    })
    .clone()
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
    memplan_planner_kit::testing::corpus_root()
}

/// The corpus directory, or `None` after printing why the test is skipped. Panics when
/// `MEMPLAN_CORPUS` is set but does not point at a directory.
pub fn require_corpus(test: &str) -> Option<PathBuf> {
    match corpus() {
        Some(dir) => Some(dir),
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

/// The dependency line every fixture manifest uses for the plugin API (relative to the
/// fixture); [`build_fixture_plugin`] points it at the crate to build against.
const FIXTURE_API_DEPENDENCY: &str = r#"memplan-plugin-api = { path = "../../../../plugin-api" }"#;
/// How a fixture depends on the planner kit (optional: a plugin may use the ABI alone).
const FIXTURE_KIT_DEPENDENCY: &str =
    r#"memplan-planner-kit = { path = "../../../../planner-kit" }"#;

/// Where fixture plugins are built: outside `target/e2e/debug`, so that the default search
/// path of the binary under test never finds them.
pub fn fixtures_build_dir() -> PathBuf {
    e2e_target_dir().join("fixtures")
}

/// Builds the fixture plugin `tests/fixtures/plugins/{name}` against the workspace's
/// `plugin-api` (once per test process) and returns the library file.
pub fn fixture_plugin(name: &str) -> PathBuf {
    let package = format!("memplan-fixture-{name}");
    build_fixture_plugin(name, &package, &workspace_root().join("plugin-api"))
}

/// Builds the fixture plugin `tests/fixtures/plugins/{fixture}` as Cargo package `package`
/// against the plugin-api crate at `plugin_api`, out of tree, the way a vendor would: the
/// fixture is copied to `target/e2e/fixtures/src/{package}` with its plugin-api dependency
/// pointed at `plugin_api` and the workspace's `Cargo.lock` (so that no network is needed),
/// then built into `target/e2e/fixtures/target`. Returns the library file. Builds are
/// serialized and cached per package for the test process.
pub fn build_fixture_plugin(fixture: &str, package: &str, plugin_api: &Path) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(library) = built.get(package) {
        return library.clone();
    }

    let source = workspace_root()
        .join("tests")
        .join("fixtures")
        .join("plugins")
        .join(fixture);
    let copy = fixtures_build_dir().join("src").join(package);
    let _ = std::fs::remove_dir_all(&copy);
    copy_dir(&source.join("src"), &copy.join("src"));

    let manifest = std::fs::read_to_string(source.join("Cargo.toml"))
        .unwrap_or_else(|error| panic!("reading the {fixture} fixture manifest: {error}"));
    let original_name = format!("name = \"memplan-fixture-{fixture}\"");
    assert!(
        manifest.contains(FIXTURE_API_DEPENDENCY) && manifest.contains(&original_name),
        "fixture {fixture}: Cargo.toml must contain `{original_name}` and `{FIXTURE_API_DEPENDENCY}`"
    );
    let api_dependency = format!(
        "memplan-plugin-api = {{ path = {:?} }}",
        plugin_api.display().to_string()
    );
    // The kit must be built against the same plugin-api as the plugin (a drifted copy, say):
    // the fixture gets its own copy of the kit, pointed at that plugin-api.
    let kit_dependency = format!(
        "memplan-planner-kit = {{ path = {:?} }}",
        planner_kit_copy(package, plugin_api).display().to_string()
    );
    let manifest = manifest
        .replace(FIXTURE_API_DEPENDENCY, &api_dependency)
        .replace(FIXTURE_KIT_DEPENDENCY, &kit_dependency)
        .replace(&original_name, &format!("name = \"{package}\""));
    std::fs::write(copy.join("Cargo.toml"), manifest).expect("write fixture manifest");
    std::fs::copy(workspace_root().join("Cargo.lock"), copy.join("Cargo.lock"))
        .expect("copy Cargo.lock");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let target = fixtures_build_dir().join("target");
    let status = Command::new(cargo)
        .arg("build")
        .arg("--manifest-path")
        .arg(copy.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("failed to run cargo to build a fixture plugin");
    assert!(status.success(), "building fixture plugin {package} failed");
    let library = target.join("debug").join(format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    ));
    assert!(library.is_file(), "{} was not built", library.display());
    built.insert(package.to_string(), library.clone());
    library
}

/// A copy of the workspace's `planner-kit` crate in `target/e2e/fixtures/src/{package}-kit`
/// that depends on the plugin-api at `plugin_api`.
fn planner_kit_copy(package: &str, plugin_api: &Path) -> PathBuf {
    let copy = fixtures_build_dir()
        .join("src")
        .join(format!("{package}-kit"));
    let _ = std::fs::remove_dir_all(&copy);
    let original = workspace_root().join("planner-kit");
    copy_dir(&original.join("src"), &copy.join("src"));
    let manifest = std::fs::read_to_string(original.join("Cargo.toml")).expect("kit manifest");
    let inherited = "memplan-plugin-api.workspace = true";
    assert!(
        manifest.contains(inherited),
        "planner-kit/Cargo.toml: {inherited}"
    );
    let api_dependency = format!(
        "memplan-plugin-api = {{ path = {:?} }}",
        plugin_api.display().to_string()
    );
    std::fs::write(
        copy.join("Cargo.toml"),
        manifest.replace(inherited, &api_dependency),
    )
    .expect("write kit manifest");
    copy
}

/// A copy of the workspace's `plugin-api` crate in `target/e2e/fixtures/src/{label}`, edited
/// by `edit` (given the copy's directory): for building plugins against a drifted ABI. The
/// copy stays under the workspace root so that its `workspace = true` fields still resolve.
pub fn plugin_api_copy(label: &str, edit: impl FnOnce(&Path)) -> PathBuf {
    let copy = fixtures_build_dir().join("src").join(label);
    let _ = std::fs::remove_dir_all(&copy);
    let original = workspace_root().join("plugin-api");
    copy_dir(&original.join("src"), &copy.join("src"));
    for file in ["Cargo.toml", "build.rs"] {
        std::fs::copy(original.join(file), copy.join(file))
            .unwrap_or_else(|error| panic!("copy plugin-api's {file}: {error}"));
    }
    edit(&copy);
    copy
}

/// A fresh directory holding a copy of each `(library, file name)`: a plugin directory that
/// holds exactly the plugins a test wants.
pub fn plugin_dir_with(label: &str, libraries: &[(&Path, &str)]) -> PathBuf {
    let dir = temp_dir(label);
    for (library, file_name) in libraries {
        std::fs::copy(library, dir.join(file_name)).unwrap_or_else(|error| {
            panic!(
                "copying {} into {}: {error}",
                library.display(),
                dir.display()
            )
        });
    }
    dir
}

/// A library file name with the platform's prefix and suffix (`lib{stem}.so` on Linux).
pub fn library_file_name(stem: &str) -> String {
    format!(
        "{}{stem}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// Copies the directory tree `from` to `to` (files and directories only).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create directory");
    for entry in std::fs::read_dir(from).expect("read directory") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// The tiny model every input reader accepts: an input copied to an output, 64 bytes each.
pub const TINY_MODEL_JSON: &str = r#"{"version":1,"tensors":[{"id":"a","kind":"input","size":64},{"id":"b","kind":"output","size":64}],"operators":[{"type":"copy","inputs":["a"],"outputs":["b"]}],"inputs":["a"],"outputs":["b"]}"#;

/// Writes [`TINY_MODEL_JSON`] into a fresh directory and returns its path.
pub fn tiny_model() -> PathBuf {
    let path = temp_dir("model").join("tiny.json");
    std::fs::write(&path, TINY_MODEL_JSON).expect("write the tiny model");
    path
}

/// `command` (a [`memplan`] command) running `plan` on the [`tiny_model`] with planner
/// `planner`, `--plugin-dir plugin_dir`, a fresh output directory and `extra` arguments.
pub fn plan_tiny_with(
    mut command: Command,
    planner: &str,
    plugin_dir: &Path,
    extra: &[&str],
) -> Output {
    command
        .arg("plan")
        .arg(tiny_model())
        .args(["--planner", planner, "--plugin-dir"])
        .arg(plugin_dir)
        .arg("--out")
        .arg(temp_dir("plan-out"))
        .args(extra)
        .output()
        .expect("failed to start memplan")
}

/// [`plan_tiny_with`] a plain [`memplan`] command.
pub fn plan_tiny(planner: &str, plugin_dir: &Path, extra: &[&str]) -> Output {
    plan_tiny_with(memplan(), planner, plugin_dir, extra)
}

/// Asserts that memplan exited with `code` (so it was not killed by a signal) and returns what
/// it wrote on stderr.
pub fn failed_with(output: &Output, code: i32) -> String {
    assert_eq!(output.status.code(), Some(code), "{}", describe(output));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub use memplan_planner_kit::testing::TFLM_HEAD;

/// The scratch arenas of a plan summary (`--format json`), in its order.
pub fn scratch_arenas(summary: &serde_json::Value) -> Vec<&serde_json::Value> {
    summary["arenas"]
        .as_array()
        .expect("a plan summary lists its arenas")
        .iter()
        .filter(|arena| arena["role"] == "scratch")
        .collect()
}
