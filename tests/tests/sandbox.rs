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
        "memory limit of 256.0 MiB (--plan-memory-limit)",
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
fn memplan_never_runs_the_code_of_a_third_party_file_itself() {
    // Loading a file runs its constructors. The fixture's writes a marker file when
    // MEMPLAN_FIXTURE_LOAD_MARKER is set: memplan lists the fixture's planners from its
    // manifest and runs them in a worker that loads the file inside the sandbox, with an
    // empty environment, so the marker is never written, by any command.
    let dir = hostile_dir("manifest-selects");
    let marker = load_marker("never-in-memplan");
    let run = |args: &[&str]| {
        let output = memplan()
            .args(args)
            .arg("--plugin-dir")
            .arg(&dir)
            .env("MEMPLAN_FIXTURE_LOAD_MARKER", &marker)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        output
    };
    let model = tiny_model();
    let model = model.to_str().unwrap();
    let out = temp_dir("manifest-selects-out");
    let out = out.to_str().unwrap();
    run(&["plan", model, "--planner", "greedy-bestfit", "--out", out]);
    let listing = run(&["planners"]);
    let listing = String::from_utf8_lossy(&listing.stdout);
    // Listed from the manifest: name, version, description, file.
    assert!(
        listing.contains("fixture-threads")
            && listing.contains("0.0.1")
            && listing.contains("test fixture: plans on four threads it joins")
            && listing.contains("libhostile.so"),
        "{listing}"
    );
    let report = run(&[
        "-v",
        "plan",
        model,
        "--planner",
        "fixture-load-report",
        "--format",
        "json",
        "--out",
        out,
    ]);
    assert!(
        !marker.exists(),
        "the fixture's constructor ran in memplan's process"
    );
    let summary: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let said = summary["planner_summary"].as_str().unwrap();
    // It ran, in the worker, which has no environment.
    assert!(
        said.starts_with("constructor ran: 0 environment variables"),
        "{said}"
    );
    let log = String::from_utf8_lossy(&report.stderr);
    if log.contains("landlock (") {
        // Landlock keeps even reading to the plugin and the system's libraries while loading.
        assert!(said.ends_with("/etc/passwd readable: false"), "{said}");
    }
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
fn a_library_without_a_manifest_is_never_loaded() {
    // Any shared library on the search path: memplan used to load it to see whether it is a
    // plugin (running its constructors), and skip it quietly afterwards. Now it is not
    // loaded: the system's C library is a file nobody would want run by a plugin search.
    let dir = temp_dir("no-manifest");
    let libc_path = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
    ]
    .into_iter()
    .map(Path::new)
    .find(|path| path.exists());
    let Some(libc_path) = libc_path else { return };
    std::fs::copy(libc_path, dir.join("libc-copy.so")).unwrap();
    let output = memplan()
        .args(["-vv", "planners", "--plugin-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        log.contains("not a memplan plugin, skipped without loading it"),
        "{log}"
    );
}

#[test]
fn a_plugin_whose_manifest_lies_is_refused() {
    // The manifest names `fixture-forkz` where the file exports `fixture-forks`: selected by
    // the manifest, it would be loaded for a planner it lacks. The worker that loads it finds
    // out and refuses it, saying so.
    let library = fixture_plugin("hostile");
    let mut bytes = std::fs::read(&library).unwrap();
    let magic = b"memplan-planners/2\n";
    let start = bytes
        .windows(magic.len())
        .position(|window| window == magic)
        .expect("the fixture has a manifest");
    let name = b"fixture-forks\t";
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
        .arg("plan")
        .arg(tiny_model())
        .args(["--planner", "fixture-forkz", "--out"])
        .arg(temp_dir("manifest-lies-out"))
        .arg("--plugin-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let message = failed_with(&output, 4);
    assert!(
        message.contains("planner `fixture-forkz` (")
            && message.contains(
                "cannot be loaded: its planner manifest (section .memplan_planners) lists"
            )
            && message.contains("but it exports"),
        "{message}"
    );
}

#[test]
fn a_reply_flood_is_cut_at_what_a_reply_can_be() {
    // 1000 MiB on the reply pipe: memplan reads no more than a reply to the tiny model can
    // take, stops the worker and stays small itself.
    let out = temp_dir("flood-out");
    let output = std::process::Command::new("/usr/bin/time")
        .args(["-f", "max-rss-kib %M"])
        .arg(memplan_tests::memplan_bin())
        .arg("plan")
        .arg(tiny_model())
        .args(["--planner", "fixture-floods-reply", "--plugin-dir"])
        .arg(hostile_dir("flood"))
        .args(["--planner-options", r#"{"mib": "1000"}"#, "--out"])
        .arg(&out)
        .env_remove("MEMPLAN_PLUGIN_PATH")
        .output()
        .expect("run memplan under /usr/bin/time");
    let message = failed_with(&output, 4);
    assert!(
        message.contains("planner `fixture-floods-reply` (")
            && message.contains("on its reply pipe, more than any reply to this request"),
        "{message}"
    );
    let rss_kib: u64 = message
        .lines()
        .find_map(|line| line.strip_prefix("max-rss-kib "))
        .and_then(|kib| kib.trim().parse().ok())
        .expect("/usr/bin/time reports the peak");
    assert!(rss_kib < 300 << 10, "memplan held {rss_kib} KiB");
}

#[test]
fn looking_up_a_path_with_fstatat_is_stopped() {
    let secret = temp_dir("stat-secret").join("shadow");
    std::fs::write(&secret, "x".repeat(12345)).unwrap();
    let message = stopped(
        "fixture-stats-path",
        &format!(r#"{{"path": {:?}}}"#, secret.display().to_string()),
        &[],
        "tried to look at the file system (newfstatat)",
    );
    assert!(!message.contains("12345"), "{message}");
}

#[test]
fn fstat_of_its_own_descriptors_still_works() {
    let output = memplan()
        .arg("plan")
        .arg(tiny_model())
        .args([
            "--planner",
            "fixture-fstat",
            "--format",
            "json",
            "--plugin-dir",
        ])
        .arg(hostile_dir("fstat"))
        .arg("--out")
        .arg(temp_dir("fstat-out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        summary["planner_summary"],
        "libc fstat returned 0, Rust metadata says a pipe: Ok(true)"
    );
}

#[test]
fn a_forged_reply_is_the_planners_failure_not_memplans() {
    let (output, out) = plan("fixture-forges-reply", "{}", &[]);
    let message = failed_with(&output, 4);
    assert!(
        message.starts_with("memplan: error: planner `fixture-forges-reply` ("),
        "{message}"
    );
    assert!(
        !message.contains("memplan: error: model does not fit"),
        "{message}"
    );
    out.check();
}

#[test]
fn thousands_of_threads_are_stopped() {
    let message = stopped(
        "fixture-many-threads",
        "{}",
        &[],
        "threads at once, more than the 256 a sandboxed planner may run",
    );
    assert!(
        message.contains("memplan itself is unaffected"),
        "{message}"
    );
}

#[test]
fn a_planner_cannot_drive_the_terminal_or_speak_as_memplan() {
    let output = memplan()
        .arg("plan")
        .arg(tiny_model())
        .args(["--planner", "fixture-terminal", "--plugin-dir"])
        .arg(hostile_dir("terminal"))
        .arg("--out")
        .arg(temp_dir("terminal-out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    for stream in [&output.stdout, &output.stderr] {
        assert!(!stream.contains(&0x1b), "{}", describe(&output));
        assert!(!stream.windows(3).any(|w| w == "\u{202e}".as_bytes()));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr
            .lines()
            .any(|line| line.starts_with("memplan: error:")),
        "{stderr}"
    );
    assert!(
        stderr.contains("[planner fixture-terminal] memplan: error: model does not fit (forged)"),
        "{stderr}"
    );
    assert!(stderr.contains("\\u{001b}[31mred"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("summary \\u{001b}[5mblinks"));
}

#[test]
fn a_planner_sees_no_environment() {
    let output = memplan()
        .arg("plan")
        .arg(tiny_model())
        .args([
            "--planner",
            "fixture-environment",
            "--format",
            "json",
            "--plugin-dir",
        ])
        .arg(hostile_dir("environment"))
        .arg("--out")
        .arg(temp_dir("environment-out"))
        .env("MY_SECRET_TOKEN", "hunter2")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["planner_summary"], "0 variables: ");
    assert!(!describe(&output).contains("hunter2"));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_32_bit_system_call_is_named_as_such() {
    let message = stopped(
        "fixture-int80",
        "{}",
        &[],
        "made a system call through another interface than this machine's own (the 32-bit \
         `int 0x80`",
    );
    assert!(!message.contains("start a process"), "{message}");
}

#[test]
fn verbose_says_which_sandbox_layers_are_in_force() {
    let output = memplan()
        .args(["-v", "plan"])
        .arg(tiny_model())
        .args(["--planner", "fixture-threads", "--plugin-dir"])
        .arg(hostile_dir("layers"))
        .arg("--out")
        .arg(temp_dir("layers-out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let log = String::from_utf8_lossy(&output.stderr);
    let layers = log
        .lines()
        .find(|line| line.contains("sandbox layers:"))
        .unwrap_or_else(|| panic!("{log}"));
    for layer in [
        "seccomp",
        "landlock",
        "empty environment",
        "at most 256 threads",
    ] {
        assert!(layers.contains(layer), "{layers}");
    }
}

#[test]
fn without_landlock_the_sandbox_holds_and_says_so() {
    // A kernel without Landlock, as the worker sees it: memplan runs under a filter that
    // answers "not implemented" to landlock_create_ruleset (inherited by the worker).
    use std::os::unix::process::CommandExt;
    let no_landlock: seccompiler::BpfProgram = seccompiler::SeccompFilter::new(
        std::collections::BTreeMap::from([(libc::SYS_landlock_create_ruleset, Vec::new())]),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::ENOSYS as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .unwrap();
    let run = |planner: &str, options: &str| {
        let mut command = memplan();
        command
            .args(["-v", "plan"])
            .arg(tiny_model())
            .args(["--planner", planner, "--planner-options", options])
            .arg("--plugin-dir")
            .arg(hostile_dir("no-landlock"))
            .arg("--out")
            .arg(temp_dir("no-landlock-out"));
        // SAFETY: between fork and exec the child only installs a filter compiled before.
        unsafe {
            let filter = no_landlock.clone();
            command.pre_exec(move || {
                seccompiler::apply_filter(&filter)
                    .map_err(|error| std::io::Error::other(error.to_string()))
            });
        }
        command.output().unwrap()
    };
    let output = run("fixture-threads", "{}");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        log.contains("no landlock (this kernel does not have it)"),
        "{log}"
    );
    let secret = temp_dir("no-landlock-secret").join("id_rsa");
    std::fs::write(&secret, "PRIVATE").unwrap();
    let output = run(
        "fixture-reads-secret",
        &format!(r#"{{"path": {:?}}}"#, secret.display().to_string()),
    );
    let message = failed_with(&output, 4);
    assert!(
        message.contains("tried to open a file (openat)"),
        "{message}"
    );
}
