//! Plugin discovery and selection, end to end: the real `memplan` binary with the workspace
//! plugins and with fixture plugins built out of tree (tests/fixtures/plugins).
//!
//! Tests marked `needs the model reader (issue 3)` run `memplan plan` on a model and can only
//! pass once the model reader and the analysis exist.

use std::path::Path;

use memplan_tests::{
    build_fixture_plugin, describe, failed_with, fixture_plugin, library_file_name, memplan,
    plan_tiny, plan_tiny_with, plugin_api_copy, plugin_dir, plugin_dir_with, run_memplan, temp_dir,
    workspace_root,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn sha256_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{:x}", Sha256::digest(bytes))
}

/// Runs `memplan planners --format json` with `args` and returns the parsed document.
fn planners_json(args: &[&str]) -> (Value, std::process::Output) {
    planners_json_of(&mut memplan(), args)
}

/// Runs `command` (a `memplan` command) with `planners --format json` and `args` appended.
fn planners_json_of(
    command: &mut std::process::Command,
    args: &[&str],
) -> (Value, std::process::Output) {
    let output = command
        .args(["planners", "--format", "json"])
        .args(args)
        .output()
        .expect("start memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let document = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", describe(&output)));
    (document, output)
}

fn planner<'a>(document: &'a Value, name: &str) -> Option<&'a Value> {
    document["planners"]
        .as_array()
        .expect("planners is a list")
        .iter()
        .find(|planner| planner["name"] == name)
}

fn rejected(document: &Value) -> &Vec<Value> {
    document["rejected"].as_array().expect("rejected is a list")
}

fn keys(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn planners_json_lists_the_built_in_planners_and_files_with_their_sha256() {
    let (document, output) = planners_json(&[]);
    assert_eq!(keys(&document), ["planners", "rejected"]);
    let names: Vec<&str> = document["planners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|planner| planner["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["exact", "greedy-bestfit", "linear", "portfolio"]);
    let linear = planner(&document, "linear").expect("linear is listed");
    assert_eq!(
        keys(linear),
        [
            "description",
            "interface",
            "name",
            "path",
            "sha256",
            "shipped",
            "version"
        ]
    );
    // Built into memplan: memplan's own, run in process by default, with no file.
    assert_eq!(linear["shipped"], true);
    assert_eq!(linear["interface"], "rust");
    assert_eq!(linear["path"], "built in");
    assert_eq!(linear["sha256"], "built in");
    assert!(!linear["version"].as_str().unwrap().is_empty());
    assert!(!linear["description"].as_str().unwrap().is_empty());
    // The plugin files of the same planners lie beside the binary, which is not searched.
    assert!(rejected(&document).is_empty(), "{}", describe(&output));

    // Given with --plugin-dir, the file's `linear` is used instead, third-party.
    let dir = plugin_dir().canonicalize().unwrap();
    let (document, output) = planners_json(&["--plugin-dir", dir.to_str().unwrap()]);
    let linear = planner(&document, "linear").expect("linear is listed");
    assert_eq!(linear["shipped"], false, "{}", describe(&output));
    let path = Path::new(linear["path"].as_str().expect("path is a string"));
    assert_eq!(path, dir.join(library_file_name("memplan_plugin_linear")));
    assert_eq!(linear["sha256"].as_str(), Some(sha256_of(path).as_str()));
    assert!(
        stderr(&output).contains("replaces memplan's built-in `linear`"),
        "{}",
        describe(&output)
    );
}

#[test]
fn planners_text_shows_name_file_and_hash() {
    let dir = plugin_dir().canonicalize().unwrap();
    let output = run_memplan(["planners", "--plugin-dir", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let library = dir.join(library_file_name("memplan_plugin_linear"));
    assert!(text.contains("linear "), "{text}");
    assert!(text.contains(&library.display().to_string()), "{text}");
    assert!(text.contains(&sha256_of(&library)), "{text}");
    let output = run_memplan(["planners"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("file:   built into memplan"), "{text}");
}

#[test]
fn test_plugins_are_never_on_the_default_search_path() {
    let vendor = fixture_plugin("vendor");
    let panics = fixture_plugin("misbehaving");
    let default_dir = plugin_dir().canonicalize().unwrap();
    for library in [&vendor, &panics] {
        assert!(!library.starts_with(&default_dir), "{}", library.display());
    }
    let (document, output) = planners_json(&[]);
    for name in ["fixture-vendor", "fixture-panics", "fixture-hangs"] {
        assert!(planner(&document, name).is_none(), "{}", describe(&output));
    }
    assert!(rejected(&document).is_empty(), "{}", describe(&output));
}

#[test]
fn an_out_of_tree_plugin_is_found_with_plugin_dir_and_listed() {
    let library = fixture_plugin("vendor");
    let file_name = library_file_name("acme_planner");
    let dir = plugin_dir_with("vendor", &[(&library, &file_name)]);
    let dir_arg = dir.display().to_string();
    let (document, output) = planners_json(&["--plugin-dir", &dir_arg]);
    let vendor = planner(&document, "fixture-vendor")
        .unwrap_or_else(|| panic!("fixture-vendor not listed: {}", describe(&output)));
    let path = dir.canonicalize().unwrap().join(&file_name);
    assert_eq!(
        vendor["path"].as_str(),
        Some(path.display().to_string().as_str())
    );
    assert_eq!(vendor["version"], "2.3.4");
    assert_eq!(
        vendor["description"],
        "test fixture: an out-of-tree planner, first fit in order of lifetime start"
    );
    assert_eq!(vendor["sha256"].as_str(), Some(sha256_of(&path).as_str()));
    // The default directory is still searched after --plugin-dir.
    assert!(
        planner(&document, "linear").is_some(),
        "{}",
        describe(&output)
    );
}

#[test]
fn memplan_plugin_path_is_searched() {
    let library = fixture_plugin("vendor");
    let dir = plugin_dir_with("env-path", &[(&library, &library_file_name("acme"))]);
    let mut command = memplan();
    command.env(
        "MEMPLAN_PLUGIN_PATH",
        format!("/no/such/dir:{}", dir.display()),
    );
    let (document, output) = planners_json_of(&mut command, &[]);
    let vendor = planner(&document, "fixture-vendor").expect("found through the variable");
    assert!(
        vendor["path"]
            .as_str()
            .unwrap()
            .starts_with(&dir.canonicalize().unwrap().display().to_string()),
        "{}",
        describe(&output)
    );
}

#[test]
fn an_unknown_planner_exits_4_listing_planners_and_directories() {
    let library = fixture_plugin("vendor");
    let dir = plugin_dir_with("unknown", &[(&library, &library_file_name("acme"))]);
    let typo = failed_with(&plan_tiny("fixture-vendr", &dir, &[]), 4);
    assert!(
        typo.contains("no planner named `fixture-vendr` (did you mean `fixture-vendor`?)"),
        "{typo}"
    );
    let output = plan_tiny("no-such-planner", &dir, &[]);
    let message = failed_with(&output, 4);
    assert!(!message.contains("did you mean"), "{message}");
    assert!(
        message.contains("no planner named `no-such-planner`"),
        "{message}"
    );
    assert!(message.contains("linear"), "{message}");
    assert!(message.contains("fixture-vendor"), "{message}");
    assert!(
        message.contains(&dir.canonicalize().unwrap().display().to_string()),
        "{message}"
    );
    // The hint names the built-in planners and how a third-party file is found, and no
    // longer sends anyone to the executable's directory (#34 item 9).
    assert!(
        message.contains(
            "memplan's own planners are built in (greedy-bestfit, exact, portfolio, linear)"
        ),
        "{message}"
    );
    assert!(
        message.contains("pass its directory with --plugin-dir DIR"),
        "{message}"
    );
    let exe_dir = plugin_dir().canonicalize().unwrap();
    assert!(
        !message.contains(&exe_dir.display().to_string()),
        "{message}"
    );
}

#[test]
fn a_missing_plugin_dir_is_bad_usage() {
    let missing = temp_dir("missing").join("not-there");
    let output = memplan()
        .arg("planners")
        .arg("--plugin-dir")
        .arg(&missing)
        .output()
        .unwrap();
    let message = failed_with(&output, 2);
    assert!(message.contains("not-there"), "{message}");
}

#[test]
fn a_plugin_built_against_plugin_api_1_0_loads_in_a_host_built_with_2_x() {
    // The crate's major version moved (the kit moved out: a source break), the ABI did not:
    // abi_stable compares the version it records in every type's layout, which plugin-api's
    // build.rs sets to the ABI version. A plugin built against a plugin-api release 1.0.0 with
    // the same types must load and plan.
    let api_1_0 = plugin_api_copy("plugin-api-1.0.0", |copy| {
        let manifest = copy.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains("version = \"2.0.0\""), "{text}");
        std::fs::write(
            &manifest,
            text.replace("version = \"2.0.0\"", "version = \"1.0.0\""),
        )
        .unwrap();
    });
    let library = build_fixture_plugin("vendor", "memplan-fixture-api-1-0", &api_1_0);
    let dir = plugin_dir_with("api-1-0", &[(&library, &library_file_name("old_api"))]);
    let (document, output) = planners_json(&["--plugin-dir", dir.to_str().unwrap()]);
    assert!(rejected(&document).is_empty(), "{}", describe(&output));
    assert!(
        planner(&document, "fixture-vendor").is_some(),
        "{}",
        describe(&output)
    );
    let planned = plan_tiny("fixture-vendor", &dir, &[]);
    assert_eq!(planned.status.code(), Some(0), "{}", describe(&planned));
}

#[test]
fn a_plugin_built_against_a_drifted_abi_is_rejected_with_a_reason() {
    // A copy of plugin-api whose TensorRequest declares `size` and `alignment` in the other
    // order: same crate name, same ABI version string, source-compatible (the kit and the
    // plugin still compile), but a different layout — the drift a careless edit makes.
    let drifted_api = plugin_api_copy("plugin-api-drifted", |copy| {
        let abi = copy.join("src").join("abi.rs");
        let text = std::fs::read_to_string(&abi).unwrap();
        let start = text
            .find("pub struct TensorRequest {")
            .expect("plugin-api's TensorRequest moved");
        let end = start + text[start..].find("\n}\n").unwrap();
        let body = &text[start..end];
        let (size, alignment) = ("    pub size: u64,\n", "    pub alignment: u64,\n");
        assert!(body.contains(size) && body.contains(alignment), "{body}");
        let swapped = body
            .replace(size, "    pub SWAP: u64,\n")
            .replace(alignment, size)
            .replace("    pub SWAP: u64,\n", alignment);
        std::fs::write(&abi, format!("{}{swapped}{}", &text[..start], &text[end..])).unwrap();
    });
    let library = build_fixture_plugin("vendor", "memplan-fixture-drifted", &drifted_api);
    let file_name = library_file_name("drifted");
    let dir = plugin_dir_with("drifted", &[(&library, &file_name)]);
    let dir_arg = dir.display().to_string();

    // memplan does not load a third-party file to list it: the drift shows when the
    // sandboxed worker loads it to run its planner, as a one-line reason.
    let planned = plan_tiny("fixture-vendor", &dir, &[]);
    let message = failed_with(&planned, 4);
    assert!(
        message.contains("planner `fixture-vendor` (") && message.contains("cannot be loaded"),
        "{message}"
    );
    let error_line = message.lines().next().unwrap_or_default();
    assert!(error_line.contains("incompatible plugin ABI"), "{message}");
    assert!(error_line.contains("`TensorRequest` differs"), "{message}");
    assert!(!message.contains("loader report"), "{message}");

    // The full abi_stable layout report only with -v.
    let mut verbose = memplan();
    verbose.arg("-v");
    let verbose = plan_tiny_with(verbose, "fixture-vendor", &dir, &[]);
    assert!(
        stderr(&verbose).contains("loader report"),
        "{}",
        describe(&verbose)
    );
    let _ = dir_arg;
}

#[test]
fn the_same_name_twice_in_one_directory_is_an_error_naming_both_files() {
    let library = fixture_plugin("vendor");
    let (first, second) = (library_file_name("acme_a"), library_file_name("acme_b"));
    let dir = plugin_dir_with("twice", &[(&library, &first), (&library, &second)]);
    let output = plan_tiny("fixture-vendor", &dir, &[]);
    let message = failed_with(&output, 4);
    assert!(
        message.contains(&first) && message.contains(&second),
        "{message}"
    );

    let dir_arg = dir.display().to_string();
    let (document, output) = planners_json(&["--plugin-dir", &dir_arg]);
    assert!(
        planner(&document, "fixture-vendor").is_none(),
        "{}",
        describe(&output)
    );
    assert_eq!(rejected(&document).len(), 2, "{}", describe(&output));
}

#[test]
fn an_earlier_directory_shadows_a_later_one_with_a_warning() {
    let library = fixture_plugin("vendor");
    let first = plugin_dir_with("shadow-first", &[(&library, &library_file_name("acme"))]);
    let second = plugin_dir_with(
        "shadow-second",
        &[(&library, &library_file_name("acme_old"))],
    );
    let (first_arg, second_arg) = (first.display().to_string(), second.display().to_string());
    let (document, output) =
        planners_json(&["--plugin-dir", &first_arg, "--plugin-dir", &second_arg]);
    let vendor = planner(&document, "fixture-vendor").expect("listed");
    let winner = first
        .canonicalize()
        .unwrap()
        .join(library_file_name("acme"));
    let shadowed = second
        .canonicalize()
        .unwrap()
        .join(library_file_name("acme_old"));
    assert_eq!(
        vendor["path"].as_str(),
        Some(winner.display().to_string().as_str())
    );
    let warning = stderr(&output);
    assert!(
        warning.contains(&shadowed.display().to_string()),
        "{warning}"
    );
    assert!(warning.contains("shadowed"), "{warning}");

    // The plan's summary names the file the planner came from and the one it shadows.
    let output = memplan()
        .arg("plan")
        .arg(memplan_tests::tiny_model())
        .args(["--planner", "fixture-vendor", "--format", "json"])
        .args([
            "--plugin-dir",
            &first_arg,
            "--plugin-dir",
            &second_arg,
            "--out",
        ])
        .arg(memplan_tests::temp_dir("shadow-plan"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["planner_file"], winner.display().to_string());
    assert_eq!(
        summary["shadowed_files"],
        serde_json::json!([shadowed.display().to_string()])
    );
}

#[test]
fn plan_runs_an_out_of_tree_planner_selected_by_name() {
    let library = fixture_plugin("vendor");
    let dir = plugin_dir_with("plan-vendor", &[(&library, &library_file_name("acme"))]);
    let output = plan_tiny("fixture-vendor", &dir, &["-v", "--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let document: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(
        document["planner"],
        "fixture-vendor",
        "{}",
        describe(&output)
    );
    // The plugin's log line reaches the host's log, tagged with the planner's name.
    let log = stderr(&output);
    let line = log
        .lines()
        .find(|line| line.contains("fixture-vendor placing 2 tensors"))
        .unwrap_or_else(|| panic!("plugin log line missing: {}", describe(&output)));
    assert!(line.contains("planner=fixture-vendor"), "{line}");
}

#[test]
fn a_panicking_planner_exits_4_with_the_panic_message() {
    let library = fixture_plugin("misbehaving");
    let dir = plugin_dir_with("plan-panics", &[(&library, &library_file_name("boom"))]);
    let output = plan_tiny("fixture-panics", &dir, &[]);
    // Exit 4 (not a signal): the host caught the failure and reported it.
    let message = failed_with(&output, 4);
    assert!(
        message.contains("memplan: error: planner `fixture-panics`"),
        "{message}"
    );
    assert!(
        message.contains("fixture planner gave up on purpose (2 tensors)"),
        "{message}"
    );
}

#[test]
fn a_planner_that_ignores_the_timeout_is_given_up_on_with_exit_4() {
    let library = fixture_plugin("misbehaving");
    let dir = plugin_dir_with("plan-hangs", &[(&library, &library_file_name("stuck"))]);
    let started = std::time::Instant::now();
    // In process (a third-party planner would be sandboxed by default, and killed there).
    let output = plan_tiny(
        "fixture-hangs",
        &dir,
        &["--timeout", "0.2", "--isolate=never"],
    );
    let message = failed_with(&output, 4);
    assert!(message.contains("planner `fixture-hangs`"), "{message}");
    assert!(message.contains("did not stop"), "{message}");
    // Deadline 0.2 s plus the 1 s grace period, with room for a slow machine.
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn the_out_of_tree_example_plans_every_tensor_kind_through_the_kit() {
    // examples/tiny_conv.json has constants, a persistent tensor and an alias: the vendor
    // example (docs/writing-a-planner.md) plans them all, and the host's checker accepts it.
    let library = fixture_plugin("vendor");
    let dir = plugin_dir_with("vendor-kinds", &[(&library, &library_file_name("acme"))]);
    let out = temp_dir("vendor-kinds-out");
    let output = run_memplan([
        "plan".as_ref(),
        workspace_root().join("examples/tiny_conv.json").as_os_str(),
        "--planner".as_ref(),
        "fixture-vendor".as_ref(),
        "--plugin-dir".as_ref(),
        dir.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let roles: Vec<&str> = document["arenas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arena| arena["role"].as_str().unwrap())
        .collect();
    for role in ["scratch", "persistent", "constant"] {
        assert!(roles.contains(&role), "{role} arena missing: {roles:?}");
    }
    assert_eq!(document["planner"], "fixture-vendor");
}

#[test]
fn buffers_all_live_at_once_plan_without_quadratic_cost() {
    // 160,000 buffers all live at once took the greedy packer 37 s (every placement read
    // every placed buffer); they take one run of bytes, which the dense index reads once.
    let mut csv = String::from("id,lower,upper,size\n");
    for index in 0..160_000 {
        csv.push_str(&format!("{index},0,1,{}\n", 16 + (index % 97) * 16));
    }
    let dir = memplan_tests::temp_dir("all-live");
    let trace = dir.join("all_live.csv");
    std::fs::write(&trace, csv).unwrap();
    let started = std::time::Instant::now();
    let output = memplan_tests::run_memplan([
        "plan".as_ref(),
        trace.as_os_str(),
        "--planner".as_ref(),
        "greedy-bestfit".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--out".as_ref(),
        dir.join("out").as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    // All live at once: the only packing is a stack, as high as the sizes' sum.
    let total: u64 = (0..160_000u64).map(|index| 16 + (index % 97) * 16).sum();
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let scratch = memplan_tests::scratch_arenas(&document)[0];
    assert_eq!(scratch["size"].as_u64(), Some(total), "{scratch}");
    // Not a benchmark: a guard against the quadratic cost (minutes in a debug build).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn shipped_planners_stop_at_the_time_limit_even_where_placement_is_slow() {
    // 60,000 buffers each live for 30,000 steps, of mixed sizes: thousands live at once in
    // fragmented bytes, where every placement of the general greedy packer compares
    // thousands of gaps (seconds of placement). With --timeout 2 greedy-bestfit in its
    // default order stops early enough for the one-pass packing to stand in, saying so,
    // instead of running on until memplan calls it unresponsive. In lifetime-start order with
    // best fit the kit packs as one sweep over time, O(n log n): greedy-bestfit so, and the
    // portfolio (whose first candidate at this size it is), plan within the limit.
    let mut csv = String::from("id,lower,upper,size\n");
    let mut state = 12345u64;
    for index in 0..60_000u64 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let size = 16 * (1 + (state >> 33) % 1000);
        csv.push_str(&format!("{index},{index},{},{size}\n", index + 30_000));
    }
    let dir = memplan_tests::temp_dir("slow-placement");
    let trace = dir.join("staircase.csv");
    std::fs::write(&trace, csv).unwrap();
    for (planner, options, stood_in) in [
        ("greedy-bestfit", "{}", true),
        ("greedy-bestfit", r#"{"order":"start"}"#, false),
        ("portfolio", "{}", false),
    ] {
        let started = std::time::Instant::now();
        let output = memplan_tests::run_memplan([
            "plan".as_ref(),
            trace.as_os_str(),
            "--planner".as_ref(),
            planner.as_ref(),
            "--planner-options".as_ref(),
            options.as_ref(),
            "--timeout".as_ref(),
            "2".as_ref(),
            "--out".as_ref(),
            dir.join("out").as_os_str(),
        ]);
        let stderr = stderr(&output);
        assert!(
            !stderr.contains("ignores the host's stop request"),
            "{stderr}"
        );
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        if stood_in {
            assert!(
                stderr.contains("did not place all 60000 buffers within the time limit")
                    && stderr.contains("one-pass packing")
                    && stderr.contains(r#"'{"order":"start"}'"#),
                "{planner}: {stderr}"
            );
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{planner} {options} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn the_plan_file_records_each_planner_with_its_version_and_file_hash() {
    let library = fixture_plugin("vendor");
    let file_name = library_file_name("acme_recorded");
    let dir = plugin_dir_with("recorded", &[(&library, &file_name)]);
    let out = temp_dir("recorded-out");
    let output = memplan()
        .arg("plan")
        .arg(workspace_root().join("examples").join("tiny_conv.json"))
        .args(["--planner", "linear,fixture-vendor", "--plugin-dir"])
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let plan: Value =
        serde_json::from_slice(&std::fs::read(out.join("model_plan.json")).unwrap()).unwrap();
    let file = dir.canonicalize().unwrap().join(&file_name);
    assert_eq!(
        plan["planners"],
        serde_json::json!([
            {"name": "linear", "version": "0.1.0",
             "file": "built in", "sha256": "built in"},
            {"name": "fixture-vendor", "version": "2.3.4",
             "file": file.display().to_string(), "sha256": sha256_of(&file)},
        ]),
        "{plan}"
    );
}

#[test]
fn version_names_memplan_the_plugin_abi_and_the_commit() {
    let output = run_memplan(["--version"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let commit = std::process::Command::new("git")
        .current_dir(workspace_root())
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    assert_eq!(
        text.trim(),
        format!(
            "memplan 0.1.0 (plugin ABI {}, commit {commit})",
            memplan_plugin_api::ABI_VERSION
        )
    );
}
