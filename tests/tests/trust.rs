//! Plugin trust, end to end: permissions, `--plugin-sha256` pins and `memplan.lock`
//! (docs/plugins.md), with the out-of-tree `vendor` fixture plugin copied into fresh
//! directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use memplan_tests::{
    describe, failed_with, fixture_plugin, library_file_name, memplan, plan_tiny_with,
    plugin_dir_with, temp_dir,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

const VENDOR: &str = "fixture-vendor";

fn sha256_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{:x}", Sha256::digest(bytes))
}

/// A fresh plugin directory with the vendor fixture; returns the directory and the file.
fn vendor_dir(label: &str) -> (PathBuf, PathBuf) {
    let library = fixture_plugin("vendor");
    let file_name = library_file_name("acme");
    let dir = plugin_dir_with(label, &[(&library, &file_name)]);
    let dir = dir.canonicalize().unwrap();
    let file = dir.join(&file_name);
    (dir, file)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// `memplan planners --format json --plugin-dir DIR` plus `extra`, run in `cwd`.
fn planners(dir: &Path, extra: &[&str], cwd: Option<&Path>) -> (Value, Output) {
    let mut command = memplan();
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let output = command
        .args(["planners", "--format", "json", "--plugin-dir"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("start memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let document = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", describe(&output)));
    (document, output)
}

fn lists(document: &Value, name: &str) -> bool {
    document["planners"]
        .as_array()
        .expect("planners is a list")
        .iter()
        .any(|planner| planner["name"] == name)
}

/// The rejection reason recorded for `path`.
fn rejection(document: &Value, path: &Path) -> Option<String> {
    document["rejected"]
        .as_array()
        .expect("rejected is a list")
        .iter()
        .find(|rejected| rejected["path"] == path.display().to_string())
        .map(|rejected| rejected["reason"].as_str().unwrap_or_default().to_string())
}

/// `memplan plan` on the tiny model with the vendor planner from `dir`, in `cwd`.
fn plan_vendor(dir: &Path, extra: &[&str], cwd: Option<&Path>) -> Output {
    let mut command = memplan();
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    plan_tiny_with(command, VENDOR, dir, extra)
}

#[test]
fn a_group_writable_plugin_is_refused_unless_allowed() {
    let (dir, file) = vendor_dir("trust-group");
    chmod(&file, 0o775);
    let (document, output) = planners(&dir, &[], None);
    assert!(!lists(&document, VENDOR), "{}", describe(&output));
    let reason = rejection(&document, &file).unwrap_or_else(|| panic!("{}", describe(&output)));
    assert!(reason.contains("writable by its group"), "{reason}");
    assert!(reason.contains("--allow-insecure-plugins"), "{reason}");

    let (document, output) = planners(&dir, &["--allow-insecure-plugins"], None);
    assert!(lists(&document, VENDOR), "{}", describe(&output));

    // Selecting the refused planner says why it is missing.
    let message = failed_with(&plan_vendor(&dir, &[], None), 4);
    assert!(
        message.contains("no planner named `fixture-vendor`")
            && message.contains("writable by its group"),
        "{message}"
    );
}

#[test]
fn a_plugin_in_a_world_writable_directory_is_refused_unless_allowed() {
    let (dir, file) = vendor_dir("trust-dir");
    chmod(&dir, 0o777);
    let (document, output) = planners(&dir, &[], None);
    chmod(&dir, 0o755);
    assert!(!lists(&document, VENDOR), "{}", describe(&output));
    let reason = rejection(&document, &file).unwrap_or_else(|| panic!("{}", describe(&output)));
    assert!(reason.contains("the directory"), "{reason}");

    chmod(&dir, 0o777);
    let (document, output) = planners(&dir, &["--allow-insecure-plugins"], None);
    chmod(&dir, 0o755);
    assert!(lists(&document, VENDOR), "{}", describe(&output));
}

#[test]
fn a_pin_mismatch_exits_4_before_loading_and_lists_the_candidates() {
    let (dir, file) = vendor_dir("trust-pin-mismatch");
    let wrong = "ab".repeat(32);
    let output = plan_vendor(
        &dir,
        &["-v", "--plugin-sha256", &format!("{VENDOR}={wrong}")],
        None,
    );
    let message = failed_with(&output, 4);
    assert!(
        message.contains(&format!("planner `{VENDOR}` is pinned to SHA-256 {wrong}")),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "{} (SHA-256 {})",
            file.display(),
            sha256_of(&file)
        )),
        "{message}"
    );
    // Nothing was loaded: the registry never saw the planner.
    assert!(!message.contains("found planner"), "{message}");
}

#[test]
fn a_matching_pin_loads_the_planner() {
    let (dir, file) = vendor_dir("trust-pin-match");
    let pin = format!("{VENDOR}={}", sha256_of(&file).to_ascii_uppercase());
    let (document, output) = planners(&dir, &["--plugin-sha256", &pin], None);
    assert!(lists(&document, VENDOR), "{}", describe(&output));
    assert!(
        rejection(&document, &file).is_none(),
        "{}",
        describe(&output)
    );
}

#[test]
fn a_matching_pin_plans() {
    let (dir, file) = vendor_dir("trust-pin-plan");
    let pin = format!("{VENDOR}={}", sha256_of(&file));
    let output = plan_vendor(&dir, &["--plugin-sha256", &pin], None);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

#[test]
fn planners_rejects_a_pinned_planner_in_a_file_with_another_hash() {
    let (dir, file) = vendor_dir("trust-pin-list");
    let wrong = "cd".repeat(32);
    let pin = format!("{VENDOR}={wrong}");
    let (document, output) = planners(&dir, &["--plugin-sha256", &pin], None);
    assert!(!lists(&document, VENDOR), "{}", describe(&output));
    let reason = rejection(&document, &file).unwrap_or_else(|| panic!("{}", describe(&output)));
    assert!(reason.contains(&wrong), "{reason}");
    assert!(reason.contains(&sha256_of(&file)), "{reason}");
    assert!(reason.contains("--plugin-sha256"), "{reason}");
}

#[test]
fn memplan_lock_in_the_current_directory_pins_planners() {
    let (dir, file) = vendor_dir("trust-lock");
    let project = temp_dir("trust-lock-project");
    let lock = project.join("memplan.lock");

    std::fs::write(&lock, format!(r#"{{"{VENDOR}": "{}"}}"#, sha256_of(&file))).unwrap();
    let (document, output) = planners(&dir, &[], Some(&project));
    assert!(lists(&document, VENDOR), "{}", describe(&output));

    let wrong = "ef".repeat(32);
    std::fs::write(&lock, format!(r#"{{"{VENDOR}": "{wrong}"}}"#)).unwrap();
    let message = failed_with(&plan_vendor(&dir, &[], Some(&project)), 4);
    assert!(message.contains("lock file"), "{message}");
    assert!(message.contains(&wrong), "{message}");

    // --lock names another file; a command-line pin overrides the lock file's.
    let elsewhere = temp_dir("trust-lock-elsewhere").join("pins.json");
    std::fs::write(&elsewhere, format!(r#"{{"{VENDOR}": "{wrong}"}}"#)).unwrap();
    let lock_arg = elsewhere.display().to_string();
    let (document, output) = planners(&dir, &["--lock", &lock_arg], None);
    assert!(!lists(&document, VENDOR), "{}", describe(&output));
    let pin = format!("{VENDOR}={}", sha256_of(&file));
    let (document, output) = planners(&dir, &["--lock", &lock_arg, "--plugin-sha256", &pin], None);
    assert!(lists(&document, VENDOR), "{}", describe(&output));
}

#[test]
fn a_malformed_lock_file_is_bad_usage() {
    let (dir, _) = vendor_dir("trust-lock-bad");
    let project = temp_dir("trust-lock-bad-project");
    std::fs::write(project.join("memplan.lock"), "[1, 2]").unwrap();
    let output = memplan()
        .current_dir(&project)
        .args(["planners", "--plugin-dir"])
        .arg(&dir)
        .output()
        .expect("start memplan");
    let message = failed_with(&output, 2);
    assert!(message.contains("memplan.lock"), "{message}");
}

#[test]
fn a_pin_naming_no_planner_found_is_a_usage_error() {
    // A typo in a pinned name used to be ignored, leaving the planner it meant unpinned.
    let (dir, file) = vendor_dir("trust-pin-typo");
    let pin = format!("fixture-vendr={}", sha256_of(&file));
    let message = failed_with(&plan_vendor(&dir, &["--plugin-sha256", &pin], None), 2);
    assert!(
        message.contains("--plugin-sha256 fixture-vendr=...: no planner named `fixture-vendr`")
            && message.contains("did you mean `fixture-vendor`?"),
        "{message}"
    );
}

#[test]
fn a_plugin_dir_reached_through_a_link_in_a_world_writable_directory_is_not_searched() {
    // `--plugin-dir /open/link` where `/open` is writable by anyone (not sticky) and `link`
    // points at a safe directory: anyone could point the link at their own plugins.
    let (dir, _file) = vendor_dir("trust-dir-link");
    let open = temp_dir("trust-open");
    std::os::unix::fs::symlink(&dir, open.join("plugins")).unwrap();
    chmod(&open, 0o777);
    let (document, output) = planners(&open.join("plugins"), &[], None);
    chmod(&open, 0o755);
    assert!(!lists(&document, VENDOR), "{}", describe(&output));
    let text = describe(&output);
    assert!(
        text.contains("not searched: refused: the directory")
            && text.contains(&format!(
                "{} is writable by group and others",
                open.display()
            )),
        "{text}"
    );
}
