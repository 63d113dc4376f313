//! The sandbox of third-party planners (`--isolate=auto`, the default), end to end: the real
//! `memplan` binary runs the hostile fixture planners (tests/fixtures/plugins/hostile), each of
//! which tries one thing a sandboxed planner may not do. Each must be stopped before it has an
//! effect, memplan must exit 4 naming the planner and what it tried, and `--out` must be left
//! as it was.

#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

use std::path::{Path, PathBuf};
use std::process::Output;

use memplan_tests::{
    describe, failed_with, fixture_plugin, library_file_name, memplan, plugin_dir_with, temp_dir,
    tiny_model,
};

/// A plugin directory (outside memplan's installation, so third-party) holding the hostile
/// fixture.
fn hostile_dir(label: &str) -> PathBuf {
    let library = fixture_plugin("hostile");
    plugin_dir_with(label, &[(&library, &library_file_name("hostile"))])
}

/// An output directory memplan wrote before (with a shipped planner), to show that a stopped
/// run leaves it as it was.
fn existing_out(label: &str) -> PathBuf {
    let out = temp_dir(label).join("out");
    let output = memplan()
        .arg("plan")
        .arg(tiny_model())
        .args(["--planner", "linear", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    out
}

/// Every file of `dir` with its bytes, sorted by name.
fn snapshot(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name(), std::fs::read(entry.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// `memplan plan` on the tiny model with hostile planner `name`, its options `options`.
fn plan(name: &str, options: &str, extra: &[&str]) -> (Output, Untouched) {
    let out = existing_out(name);
    let before = Untouched::expect(&out);
    let output = memplan()
        .arg("plan")
        .arg(tiny_model())
        .args(["--planner", name, "--plugin-dir"])
        .arg(hostile_dir(name))
        .args(["--planner-options", options, "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .expect("run memplan");
    (output, before)
}

/// What an output directory held before a run.
struct Untouched {
    dir: PathBuf,
    files: Vec<(std::ffi::OsString, Vec<u8>)>,
}

impl Untouched {
    fn expect(dir: &Path) -> Untouched {
        Untouched {
            dir: dir.to_path_buf(),
            files: snapshot(dir),
        }
    }

    fn check(&self) {
        assert!(
            snapshot(&self.dir) == self.files,
            "{} changed",
            self.dir.display()
        );
    }
}

/// Runs hostile planner `name` with the default isolation and checks that the sandbox stopped
/// it: exit 4, a message naming it and saying `what`, `--out` untouched. Returns the message.
fn stopped(name: &str, options: &str, extra: &[&str], what: &str) -> String {
    let (output, out) = plan(name, options, extra);
    let message = failed_with(&output, 4);
    assert!(
        message.contains(&format!("planner `{name}` (")),
        "{message}"
    );
    assert!(message.contains(what), "{message}");
    out.check();
    message
}

#[test]
fn reading_a_private_file_is_stopped() {
    let home = temp_dir("fake-home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let secret = home.join(".ssh").join("id_rsa");
    std::fs::write(&secret, "PRIVATE KEY 0xC0FFEE").unwrap();
    let message = stopped(
        "fixture-reads-secret",
        &format!(r#"{{"path": {:?}}}"#, secret.display().to_string()),
        &[],
        "was stopped by the sandbox: it tried to open a file (openat)",
    );
    assert!(!message.contains("0xC0FFEE"), "{message}");
    assert!(message.contains("--isolate=never"), "{message}");
}

#[test]
fn writing_a_file_is_stopped() {
    let target = temp_dir("written").join("planted.txt");
    stopped(
        "fixture-writes-file",
        &format!(r#"{{"path": {:?}}}"#, target.display().to_string()),
        &[],
        "tried to open a file",
    );
    assert!(!target.exists());
}

#[test]
fn a_network_connection_is_stopped() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    stopped(
        "fixture-connects",
        &format!(r#"{{"address": "{address}"}}"#),
        &[],
        "tried to use the network (socket)",
    );
    match listener.accept() {
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the planner reached the listener: {other:?}"),
    }
}

#[test]
fn running_a_program_is_stopped() {
    let marker = temp_dir("spawned").join("touched");
    stopped(
        "fixture-spawns",
        &format!(r#"{{"path": {:?}}}"#, marker.display().to_string()),
        &[],
        "was stopped by the sandbox",
    );
    assert!(!marker.exists());
}

#[test]
fn a_fork_bomb_is_stopped_at_its_first_fork() {
    stopped(
        "fixture-forks",
        "{}",
        &[],
        "tried to start a process (clone)",
    );
}

#[test]
fn a_50_gib_allocation_is_stopped_at_the_memory_limit() {
    stopped(
        "fixture-allocates-50g",
        "{}",
        &["--plan-memory-limit", "4G"],
        "tried to allocate 50.0 GiB at once (mmap), over its memory limit of 4.0 GiB \
         (--plan-memory-limit)",
    );
}

#[test]
fn memory_taken_bit_by_bit_ends_at_the_memory_limit() {
    let message = stopped(
        "fixture-creeps",
        "{}",
        &["--plan-memory-limit", "256M"],
        "memory limit of 256 MB (--plan-memory-limit)",
    );
    assert!(
        message.contains("memplan itself is unaffected"),
        "{message}"
    );
}

#[test]
fn a_thread_left_running_is_stopped() {
    stopped(
        "fixture-lingers",
        "{}",
        &[],
        "left 1 thread running after it returned",
    );
}

#[test]
fn tracing_memplan_is_stopped() {
    stopped(
        "fixture-ptraces",
        "{}",
        &[],
        "tried to trace or read another process (ptrace)",
    );
}

#[test]
fn killing_memplan_is_stopped() {
    stopped(
        "fixture-kills-parent",
        "{}",
        &[],
        "tried to signal another process (kill)",
    );
}

#[test]
fn writing_on_stdout_is_stopped_and_stdout_stays_clean() {
    let library = fixture_plugin("misbehaving");
    let dir = plugin_dir_with("prints", &[(&library, &library_file_name("misbehaving"))]);
    let out = existing_out("prints");
    let before = Untouched::expect(&out);
    let output = memplan()
        .arg("plan")
        .arg(tiny_model())
        .args([
            "--planner",
            "fixture-prints",
            "--format",
            "json",
            "--plugin-dir",
        ])
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let message = failed_with(&output, 4);
    assert!(
        message.contains("tried to write on standard output (write)"),
        "{message}"
    );
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("debugging output"),
        "{}",
        describe(&output)
    );
    before.check();
}

#[test]
fn a_planner_that_keeps_to_the_rules_plans_in_the_sandbox_with_threads() {
    let (output, _) = plan("fixture-threads", "{}", &["--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        summary
            .to_string()
            .contains("four threads summed 499999500000"),
        "{summary}"
    );
}

#[test]
fn isolate_never_runs_a_third_party_planner_with_the_users_rights() {
    let target = temp_dir("written-in-process").join("planted.txt");
    let (output, _) = plan(
        "fixture-writes-file",
        &format!(r#"{{"path": {:?}}}"#, target.display().to_string()),
        &["--isolate=never"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        target.exists(),
        "the planner ran in process and wrote its file"
    );
}

#[test]
fn in_process_a_thread_left_running_makes_the_plan_untrusted() {
    let (output, out) = plan("fixture-lingers", "{}", &["--isolate=never"]);
    let message = failed_with(&output, 4);
    assert!(
        message.contains("left 1 thread running after it returned in memplan's process"),
        "{message}"
    );
    out.check();
}

#[test]
fn shipped_planners_run_in_process_and_third_party_ones_sandboxed() {
    let output = memplan()
        .args(["-v", "plan"])
        .arg(tiny_model())
        .args([
            "--planner",
            "greedy-bestfit,fixture-threads",
            "--plugin-dir",
        ])
        .arg(hostile_dir("which-runs-where"))
        .arg("--out")
        .arg(temp_dir("which-runs-where-out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        log.contains("planner `greedy-bestfit` runs in memplan's process (built into memplan)"),
        "{log}"
    );
    assert!(
        log.contains("planner `fixture-threads` runs in a sandboxed worker process (third-party"),
        "{log}"
    );

    // memplan's own planner as a plugin file is a file like any other: third-party, sandboxed
    // (what is memplan's own is decided by identity, not by whose code a file holds or where
    // it lies; #34 item 9).
    let linear = memplan_tests::library_file_name("memplan_plugin_linear");
    let dir = memplan_tests::plugin_dir_with(
        "linear-as-a-file",
        &[(&memplan_tests::plugin_dir().join(&linear), &linear)],
    );
    let output = memplan()
        .args(["-v", "plan"])
        .arg(tiny_model())
        .args(["--planner", "linear", "--plugin-dir"])
        .arg(&dir)
        .arg("--out")
        .arg(temp_dir("linear-as-a-file-out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        log.contains("planner `linear` runs in a sandboxed worker process (third-party"),
        "{log}"
    );
    assert!(
        log.contains("replaces memplan's built-in `linear`"),
        "{log}"
    );
}

#[test]
fn bench_fails_only_the_row_of_a_stopped_planner() {
    let output = memplan()
        .args(["bench", "--runs", "1", "--format", "json"])
        .arg(tiny_model())
        .args(["--planner", "greedy-bestfit,fixture-forks", "--plugin-dir"])
        .arg(hostile_dir("bench"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", describe(&output));
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = rows.to_string();
    assert!(text.contains("tried to start a process"), "{text}");
    assert!(text.contains("greedy-bestfit"), "{text}");
}

/// Where the hostile fixture's constructor writes when it runs, fresh for `label`.
fn load_marker(label: &str) -> PathBuf {
    temp_dir(label).join("loaded")
}

#[test]
fn a_run_loads_only_the_plugin_files_that_declare_its_planner() {
    // Loading a file runs its constructors before any check. The fixture's manifest declares
    // its planners, none of them greedy-bestfit: a run selecting greedy-bestfit never loads
    // it; `memplan planners` (every planner) and a run selecting one of its planners do.
    let dir = hostile_dir("manifest-selects");
    let run = |args: &[&str], marker: &Path| {
        let output = memplan()
            .args(args)
            .arg("--plugin-dir")
            .arg(&dir)
            .env("MEMPLAN_FIXTURE_LOAD_MARKER", marker)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        output
    };
    let model = tiny_model();
    let model = model.to_str().unwrap();
    let out = temp_dir("manifest-selects-out");
    let out = out.to_str().unwrap();
    let marker = load_marker("manifest-not-selected");
    run(
        &["plan", model, "--planner", "greedy-bestfit", "--out", out],
        &marker,
    );
    assert!(
        !marker.exists(),
        "the fixture was loaded for greedy-bestfit"
    );
    let marker = load_marker("manifest-listing");
    let listing = run(&["planners"], &marker);
    assert!(marker.exists(), "`memplan planners` loads every file");
    assert!(String::from_utf8_lossy(&listing.stdout).contains("fixture-threads"));
    let marker = load_marker("manifest-selected");
    run(
        &["plan", model, "--planner", "fixture-threads", "--out", out],
        &marker,
    );
    assert!(
        marker.exists(),
        "the fixture was not loaded for its own planner"
    );
    // A typo still finds its suggestion among the planners of files not loaded.
    let output = memplan()
        .args(["plan", model, "--planner", "fixture-thread", "--out", out])
        .arg("--plugin-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let message = failed_with(&output, 4);
    assert!(
        message.contains("did you mean `fixture-threads`?"),
        "{message}"
    );
}

#[test]
fn a_plugin_whose_manifest_lies_is_refused() {
    // The manifest names `fixture-forkz` where the file exports `fixture-forks`: selected by
    // the manifest, it would be skipped or loaded for a planner it lacks. Refused, saying so.
    let library = fixture_plugin("hostile");
    let mut bytes = std::fs::read(&library).unwrap();
    let magic = b"memplan-planners/1\n";
    let start = bytes
        .windows(magic.len())
        .position(|window| window == magic)
        .expect("the fixture has a manifest");
    let name = b"fixture-forks\n";
    let at = start
        + bytes[start..]
            .windows(name.len())
            .position(|window| window == name)
            .expect("the manifest names fixture-forks");
    bytes[at + name.len() - 2] = b'z';
    let dir = temp_dir("manifest-lies");
    let file = dir.join(library_file_name("hostile"));
    std::fs::write(&file, bytes).unwrap();
    let output = memplan()
        .args(["planners", "--plugin-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("its planner manifest (section .memplan_planners) lists")
            && text.contains("fixture-forkz")
            && text.contains("but it exports"),
        "{text}"
    );
    assert!(!text.contains("fixture-threads  "), "{text}");
}
