//! The install layout for packagers (`scripts/install.sh`): one command installs memplan into a
//! prefix (binary, man page, completions, an empty drop-in folder for third-party plugins) and
//! one removes it; the installed binary plans with its built-in planners from any directory,
//! and a plugin file dropped into the installation is still third-party (#34 item 9).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memplan_tests::{
    describe, fixture_plugin, library_file_name, memplan_bin, plugin_dir, temp_dir, workspace_root,
};
use serde_json::Value;

/// Runs the install script with `args`, installing the binary under test (no release build).
fn install_script(args: &[&str]) -> Output {
    Command::new(workspace_root().join("scripts").join("install.sh"))
        .args(args)
        .arg("--bin")
        .arg(memplan_bin())
        .env_remove("DESTDIR")
        .output()
        .expect("run scripts/install.sh")
}

/// The files under `dir`, relative to it, sorted (directories are not listed).
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                files.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    files
}

/// The installed memplan, run from a fresh directory with no plugin path.
fn installed(prefix: &Path) -> Command {
    let mut command = Command::new(prefix.join("bin").join("memplan"));
    command
        .env_remove("MEMPLAN_PLUGIN_PATH")
        .env_remove("RUST_LOG")
        .current_dir(temp_dir("installed-cwd"));
    command
}

fn planners_json(prefix: &Path) -> Value {
    let output = installed(prefix)
        .args(["planners", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn planner<'a>(document: &'a Value, name: &str) -> Option<&'a Value> {
    document["planners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|planner| planner["name"] == name)
}

#[test]
fn one_command_installs_memplan_into_a_prefix_and_one_removes_it() {
    let prefix: PathBuf = temp_dir("prefix").canonicalize().unwrap();
    let prefix_arg = prefix.to_str().unwrap();
    let output = install_script(&["--prefix", prefix_arg]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(
        files_under(&prefix),
        [
            "bin/memplan",
            "lib/memplan/installed-files",
            "share/bash-completion/completions/memplan",
            "share/fish/vendor_completions.d/memplan.fish",
            "share/man/man1/memplan.1",
            "share/zsh/site-functions/_memplan",
        ]
    );
    assert!(prefix.join("lib/memplan/plugins").is_dir());
    let read = |file: &str| std::fs::read_to_string(prefix.join(file)).unwrap();
    assert!(read("share/man/man1/memplan.1").contains(".TH memplan 1"));
    assert!(read("share/bash-completion/completions/memplan").contains("complete -F _memplan"));
    assert!(read("share/zsh/site-functions/_memplan").starts_with("#compdef memplan"));
    assert!(read("share/fish/vendor_completions.d/memplan.fish").contains("complete -c memplan"));

    // From any directory, with its built-in planners.
    let model = workspace_root().join("examples").join("tiny_conv.json");
    let out = temp_dir("installed-out");
    let output = installed(&prefix)
        .arg("plan")
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("planned by portfolio"),
        "{}",
        describe(&output)
    );
    let listing = installed(&prefix).arg("planners").output().unwrap();
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(
        text.contains(&prefix.join("lib/memplan/plugins").display().to_string()),
        "the drop-in folder is searched: {text}"
    );

    let output = install_script(&["--prefix", prefix_arg, "--uninstall"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(files_under(&prefix), Vec::<String>::new());
    assert!(!prefix.join("lib/memplan").exists());
}

#[test]
fn a_plugin_dropped_into_the_installation_is_third_party_and_cannot_replace_a_built_in() {
    let prefix: PathBuf = temp_dir("prefix-dropin").canonicalize().unwrap();
    let prefix_arg = prefix.to_str().unwrap();
    let output = install_script(&["--prefix", prefix_arg]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let drop_in = prefix.join("lib/memplan/plugins");
    let vendor = fixture_plugin("vendor");
    std::fs::copy(&vendor, drop_in.join(library_file_name("acme"))).unwrap();
    // memplan's own planner as a file, copied into memplan's own installation: still a file,
    // so third-party, and the built-in `linear` wins over it.
    let linear_file = drop_in.join(library_file_name("memplan_plugin_linear"));
    std::fs::copy(
        plugin_dir().join(library_file_name("memplan_plugin_linear")),
        &linear_file,
    )
    .unwrap();

    let document = planners_json(&prefix);
    let acme = planner(&document, "fixture-vendor").expect("the drop-in plugin is found");
    assert_eq!(acme["shipped"], false, "{document}");
    let linear = planner(&document, "linear").unwrap();
    assert_eq!(linear["shipped"], true, "{document}");
    assert_eq!(linear["path"], "built in", "{document}");
    let rejected = document["rejected"].as_array().unwrap();
    assert!(
        rejected
            .iter()
            .any(|file| file["path"] == linear_file.display().to_string()
                && file["reason"]
                    .as_str()
                    .unwrap()
                    .contains("planner `linear` is built into memplan")),
        "{document}"
    );

    // Uninstalling keeps what others dropped in, and says so.
    let output = install_script(&["--prefix", prefix_arg, "--uninstall"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("kept"),
        "{}",
        describe(&output)
    );
    assert!(!prefix.join("bin/memplan").exists());
    assert_eq!(files_under(&prefix).len(), 2, "{:?}", files_under(&prefix));
}
