//! The crates a vendor builds a plugin against package for crates.io (#32 item 5):
//! `cargo package` of memplan-plugin-api, memplan-planner-kit and memplan-minimalloc (which
//! the kit's `testing` feature uses) succeeds, and each package carries what a build from
//! crates.io needs (its README, plugin-api's build.rs, which sets the ABI version) with
//! versioned dependencies in place of the workspace's paths.
//!
//! `--no-verify`: building the packaged sources would compile abi_stable again for every CI
//! run; the rest of the suite builds these sources. The only network it needs is the
//! crates.io index (cargo checks the dependencies' versions there).

use std::io::Read;
use std::process::Command;

use memplan_tests::{describe, e2e_target_dir, workspace_root};

/// The files of a `.crate` archive and its normalized `Cargo.toml`.
fn crate_contents(archive: &std::path::Path) -> (Vec<String>, String) {
    let output = Command::new("tar")
        .arg("tzf")
        .arg(archive)
        .output()
        .expect("run tar");
    assert!(output.status.success(), "{}", describe(&output));
    let files: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            line.split_once('/')
                .map_or(line, |(_, rest)| rest)
                .to_string()
        })
        .collect();
    let stem = archive.file_stem().unwrap().to_string_lossy().into_owned();
    let mut manifest = String::new();
    Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-O")
        .arg(format!("{stem}/Cargo.toml"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run tar")
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut manifest)
        .unwrap();
    (files, manifest)
}

#[test]
fn plugin_api_planner_kit_and_minimalloc_package_for_crates_io() {
    let target = e2e_target_dir().join("package");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "package",
            "--no-verify",
            "--allow-dirty",
            "-p",
            "memplan-plugin-api",
            "-p",
            "memplan-planner-kit",
            // The kit's `testing` feature reads MiniMalloc CSVs with it: published beside it.
            "-p",
            "memplan-minimalloc",
            "--target-dir",
        ])
        .arg(&target)
        .output()
        .expect("run cargo package");
    assert!(output.status.success(), "{}", describe(&output));

    let read_version = |crate_dir: &str| {
        let manifest =
            std::fs::read_to_string(workspace_root().join(crate_dir).join("Cargo.toml")).unwrap();
        manifest
            .lines()
            .find_map(|line| line.strip_prefix("version = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("a version line")
            .to_string()
    };
    let api_version = read_version("plugin-api");
    let kit_version = read_version("planner-kit");
    let api = target
        .join("package")
        .join(format!("memplan-plugin-api-{api_version}.crate"));
    let kit = target
        .join("package")
        .join(format!("memplan-planner-kit-{kit_version}.crate"));

    let (files, manifest) = crate_contents(&api);
    // The C header ships in the crate, where a vendor of a C planner finds it.
    for file in [
        "README.md",
        "build.rs",
        "src/lib.rs",
        "src/abi.rs",
        "src/c_abi.rs",
        "include/memplan_planner.h",
    ] {
        assert!(files.iter().any(|f| f == file), "{file} not in {files:?}");
    }
    for field in ["license = ", "repository = ", "readme = ", "description = "] {
        assert!(manifest.contains(field), "{field} missing:\n{manifest}");
    }

    let (files, manifest) = crate_contents(&kit);
    assert!(files.iter().any(|f| f == "README.md"), "{files:?}");
    // The kit depends on plugin-api by version, the one just packaged.
    assert!(
        manifest.contains(&format!(
            "[dependencies.memplan-plugin-api]\nversion = \"{api_version}\""
        )),
        "{manifest}"
    );
    // No path into the workspace is left (target paths such as `src/lib.rs` stay).
    assert!(!manifest.contains("path = \".."), "{manifest}");

    let minimalloc = target.join("package").join(format!(
        "memplan-minimalloc-{}.crate",
        read_version("minimalloc")
    ));
    let (files, manifest) = crate_contents(&minimalloc);
    assert!(files.iter().any(|f| f == "README.md"), "{files:?}");
    for field in ["license = ", "repository = ", "readme = ", "description = "] {
        assert!(manifest.contains(field), "{field} missing:\n{manifest}");
    }
}
