//! `--isolate` and `--timeout`, end to end: the real `memplan` binary runs the misbehaving
//! fixture planners (tests/fixtures/plugins/misbehaving) and must survive every one of them,
//! exit 4 and say what happened.
//!
//! Most tests run `memplan plan` on the tiny model; the worker tests at the end speak the
//! worker protocol directly.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use memplan_tests::{
    describe, failed_with, fixture_plugin, library_file_name, memplan, plan_tiny, plugin_dir_with,
};
use serde_json::Value;

/// A plugin directory holding the misbehaving fixture (one per test, so tests run in
/// parallel without sharing files).
fn misbehaving_dir(label: &str) -> PathBuf {
    let library = fixture_plugin("misbehaving");
    plugin_dir_with(label, &[(&library, &library_file_name("misbehaving"))])
}

/// `memplan plan` on the tiny model with planner `name` from the misbehaving fixture.
fn plan(name: &str, extra: &[&str]) -> Output {
    plan_tiny(name, &misbehaving_dir(name), extra)
}

/// Runs planner `name` isolated and checks the exit-4 message names it and says `what`.
fn isolated_failure(name: &str, what: &str) -> String {
    let output = plan(name, &["--isolate"]);
    let message = failed_with(&output, 4);
    assert!(
        message.contains(&format!("memplan: error: planner `{name}` (")),
        "{message}"
    );
    assert!(message.contains(what), "{message}");
    message
}

#[test]
fn a_segfault_in_a_planner_is_reported_with_the_signal() {
    isolated_failure(
        "fixture-segfaults",
        "signal 11, SIGSEGV (segmentation fault)",
    );
}

#[test]
fn an_abort_in_a_planner_is_reported_with_the_signal() {
    isolated_failure("fixture-aborts", "SIGABRT (abort)");
}

#[test]
fn a_planner_that_exits_is_reported_with_the_exit_status() {
    isolated_failure("fixture-exits", "exit status 7");
}

#[test]
fn a_panic_in_an_isolated_planner_keeps_its_message() {
    isolated_failure(
        "fixture-panics",
        "fixture planner gave up on purpose (2 tensors)",
    );
}

#[test]
fn an_isolated_planner_past_the_timeout_is_killed() {
    let started = Instant::now();
    let output = plan("fixture-hangs", &["--isolate", "--timeout", "0.5"]);
    let message = failed_with(&output, 4);
    assert!(message.contains("planner `fixture-hangs`"), "{message}");
    assert!(
        message.contains("did not finish within the time limit of 0.5 s"),
        "{message}"
    );
    // 0.5 s plus the 1 s kill grace, with room for a slow machine.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn an_isolated_cooperative_planner_reports_the_time_limit() {
    let output = plan(
        "fixture-cooperative-slow",
        &["--isolate", "--timeout", "0.5"],
    );
    let message = failed_with(&output, 4);
    assert!(
        message.contains("planner `fixture-cooperative-slow` stopped at the time limit (0.5 s"),
        "{message}"
    );
    assert!(message.contains("asked to stop after"), "{message}");
}

#[test]
fn a_cooperative_planner_stops_at_the_timeout_in_process() {
    let output = plan(
        "fixture-cooperative-slow",
        &["--timeout", "1", "--isolate=never"],
    );
    let message = failed_with(&output, 4);
    assert!(
        message.contains("planner `fixture-cooperative-slow` stopped at the time limit (1 s"),
        "{message}"
    );
}

#[test]
fn a_planner_ignoring_the_timeout_in_process_is_given_up_on_quickly() {
    let started = Instant::now();
    let output = plan("fixture-hangs", &["--timeout", "1", "--isolate=never"]);
    let message = failed_with(&output, 4);
    assert!(message.contains("planner `fixture-hangs`"), "{message}");
    assert!(message.contains("Rerun with --isolate"), "{message}");
    // 1 s plus the 1 s grace period, with room for a slow machine.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn an_incomplete_plan_is_rejected_by_the_checker() {
    for isolate in [false, true] {
        let extra: &[&str] = if isolate { &["--isolate"] } else { &[] };
        let output = plan("fixture-incomplete", extra);
        failed_with(&output, 3);
    }
}

#[test]
fn an_overlapping_plan_is_rejected_by_the_checker() {
    for isolate in [false, true] {
        let extra: &[&str] = if isolate { &["--isolate"] } else { &[] };
        let output = plan("fixture-overlapping", extra);
        let message = failed_with(&output, 3);
        assert!(
            message.contains("the plan was rejected by the checker (1 violation)")
                && message.contains("[overlap, contract 5]")
                && message.contains("nothing was written to"),
            "{message}"
        );
    }
}

#[test]
fn a_chatty_planner_is_heard_tagged_with_its_name_and_still_plans() {
    for isolate in [false, true] {
        let extra: &[&str] = if isolate {
            &["-v", "--isolate"]
        } else {
            &["-v"]
        };
        let output = plan("fixture-chatty", extra);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let log = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = log
            .lines()
            .filter(|line| line.contains("chatty line "))
            .collect();
        assert_eq!(lines.len(), 10_000, "isolate: {isolate}");
        assert!(
            lines
                .iter()
                .all(|line| line.contains("planner=fixture-chatty")),
            "isolate: {isolate}: {}",
            lines[0]
        );
        assert!(lines[9_999].contains("chatty line 10000 of 10000"));
    }
}

/// Pids of the processes whose parent is `parent` (from /proc).
fn children_of(parent: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let name = entry.expect("entry").file_name();
        let Some(pid) = name.to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        if fields[1].parse::<u32>() == Ok(parent) {
            children.push(pid);
        }
    }
    children
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet: it runs nothing).
fn has_ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat[stat.rfind(')').unwrap() + 2..].starts_with('Z'),
    }
}

#[test]
fn killing_memplan_ends_its_isolated_worker() {
    let dir = misbehaving_dir("killed-parent");
    let mut memplan = memplan()
        .arg("plan")
        .arg(memplan_tests::tiny_model())
        .args(["--planner", "fixture-hangs", "--isolate", "--plugin-dir"])
        .arg(&dir)
        .arg("--out")
        .arg(memplan_tests::temp_dir("killed-parent-out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start memplan");
    let parent = memplan.id();
    let started = Instant::now();
    let worker = loop {
        if let Some(&worker) = children_of(parent).first() {
            break worker;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no worker started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Give the worker time to read the request, load the plugin and enter the planner (it
    // then waits on nothing memplan holds), then end memplan the way a supervisor does.
    std::thread::sleep(Duration::from_secs(3));
    let status = std::process::Command::new("kill")
        .args(["-TERM", &parent.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    memplan.wait().expect("reap memplan");
    let killed = Instant::now();
    while !has_ended(worker) {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "worker {worker} still runs after memplan was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_planner_printing_on_stdout_does_not_corrupt_the_json_output() {
    // In process, what the plugin prints goes to stderr. (Sandboxed, printing on stdout
    // stops the planner: tests/tests/sandbox.rs.)
    {
        let output = plan("fixture-prints", &["--format", "json", "--isolate=never"]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let document: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "stdout is not one JSON document ({error}): {}",
                describe(&output)
            )
        });
        assert_eq!(document["planner"], "fixture-prints");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("fixture-prints: debugging output"),
            "{stderr}"
        );
    }
    let dir = misbehaving_dir("prints-bench");
    let output = memplan()
        .arg("bench")
        .arg(memplan_tests::tiny_model())
        .args([
            "--planner",
            "fixture-prints",
            "--isolate=never",
            "--runs",
            "2",
            "--format",
            "json",
            "--plugin-dir",
        ])
        .arg(&dir)
        .output()
        .expect("run memplan bench");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let document: Result<Value, _> = serde_json::from_slice(&output.stdout);
    assert!(document.is_ok(), "{}", describe(&output));
}

#[test]
fn bench_with_isolate_fails_only_the_crashing_planner_s_row() {
    let dir = misbehaving_dir("bench-isolate");
    let output = memplan()
        .arg("bench")
        .arg(memplan_tests::tiny_model())
        .args([
            "--planner",
            "fixture-segfaults,linear",
            "--isolate",
            "--runs",
            "1",
        ])
        .args(["--format", "json", "--plugin-dir"])
        .arg(&dir)
        .output()
        .expect("run memplan bench");
    // The first failure's exit code, after the whole table.
    assert_eq!(output.status.code(), Some(4), "{}", describe(&output));
    let document: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("bench JSON ({error}): {}", describe(&output)));
    let rows = document["results"].as_array().expect("results");
    assert_eq!(rows.len(), 2, "{document}");
    assert_eq!(rows[0]["planner"], "fixture-segfaults");
    assert!(
        rows[0]["error"].as_str().unwrap_or("").contains("SIGSEGV"),
        "{document}"
    );
    assert_eq!(rows[1]["planner"], "linear");
    assert!(rows[1]["height"].as_u64().is_some(), "{document}");
}

#[test]
fn bench_flags_a_planner_that_overran_its_time_limit() {
    let dir = misbehaving_dir("bench-late");
    let output = memplan()
        .arg("bench")
        .arg(memplan_tests::tiny_model())
        .args(["--planner", "fixture-late,linear", "--runs", "1"])
        .args(["--planner-options", r#"fixture-late={"time_limit_s": 0.1}"#])
        .args(["--timeout", "30", "--plugin-dir"])
        .arg(&dir)
        .output()
        .expect("run memplan bench");
    // An overrun is flagged, not a failure: the plan is still good.
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let late = text.lines().find(|line| line.contains("fixture-late"));
    let late = late.unwrap_or_else(|| panic!("no fixture-late row: {}", describe(&output)));
    // 100 ms given (the option wins over --timeout), 400 ms taken.
    assert!(
        late.contains("  100  OVERRAN: slowest run 4"),
        "{}",
        describe(&output)
    );
    // linear has no limit of its own: --timeout is its limit, and it keeps within it.
    let linear = text.lines().find(|line| line.contains("linear")).unwrap();
    assert!(
        linear.ends_with("  30000") && !linear.contains("OVERRAN"),
        "{}",
        describe(&output)
    );
}

#[test]
fn an_in_process_crash_names_the_planner_and_suggests_isolate() {
    // Without --isolate a crash takes memplan down; it still says which planner did it, and
    // exits with the plugin-failure code instead of a bare signal status.
    for (planner, how) in [
        ("fixture-segfaults", "with SIGSEGV"),
        ("fixture-aborts", "with SIGABRT"),
        ("fixture-exits", "by calling exit"),
    ] {
        let output = plan(planner, &["--isolate=never"]);
        let message = failed_with(&output, 4);
        let ended = message.contains(&format!("crashed memplan's process {how}"))
            || message.contains(&format!("ended memplan's process {how}"));
        assert!(
            message.contains(&format!("memplan: error: planner `{planner}` ("))
                && ended
                && message.contains("Rerun with --isolate"),
            "{planner}: {message}"
        );
    }
}

#[test]
fn a_planner_changing_the_working_directory_does_not_move_relative_paths() {
    // memplan runs in a directory of its own with a relative --out: a planner's chdir("/")
    // must not send the files to /relout.
    let dir = misbehaving_dir("chdir");
    let cwd = memplan_tests::temp_dir("chdir-cwd");
    let output = memplan()
        .current_dir(&cwd)
        .arg("plan")
        .arg(memplan_tests::tiny_model())
        .args([
            "--planner",
            "fixture-chdir",
            "--isolate=never",
            "--plugin-dir",
        ])
        .arg(&dir)
        .args(["--out", "relout"])
        .output()
        .expect("run memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(cwd.join("relout").join(".memplan-manifest").is_file());
    assert!(!std::path::Path::new("/relout").exists());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("planner `fixture-chdir`") && stderr.contains("moved back"),
        "{stderr}"
    );
}

/// The kernel release's (major, minor), e.g. (6, 1); None off Linux.
fn kernel_version() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>());
    Some((numbers.next()?.ok()?, numbers.next()?.ok()?))
}

#[test]
fn a_large_isolated_plan_is_the_in_process_plan_with_its_memory_made_ahead() {
    // 100,000 buffers: enough freed memory (about 20 MB) for the worker to start its helper
    // that faults in fresh pages while the (multi-threaded) default planner runs, inside the
    // sandbox. The plan must be the one made in process.
    let dir = memplan_tests::temp_dir("large-isolated");
    let trace = dir.join("trace.csv");
    let buffers = memplan_planner_kit::testing::model_like_trace(100_000, 7);
    std::fs::write(
        &trace,
        memplan_planner_kit::testing::minimalloc_csv(&buffers),
    )
    .unwrap();
    let run = |isolate: &str| {
        let output = memplan()
            .arg("plan")
            .arg(&trace)
            .args(["--planner", "portfolio", "-v", isolate, "--out"])
            .arg(dir.join(isolate))
            .output()
            .expect("run memplan plan");
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let hashes = stdout
            .lines()
            .find(|line| line.starts_with("plan_hash"))
            .unwrap_or_else(|| panic!("no plan_hash line: {}", describe(&output)))
            .to_string();
        (hashes, String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (isolated, log) = run("--isolate=always");
    let (in_process, _) = run("--isolate=never");
    assert_eq!(isolated, in_process);
    let populated: f64 = log
        .lines()
        .find_map(|line| {
            line.split("worker: ")
                .nth(1)?
                .strip_suffix(" MB of free memory populated ahead of the planner")
        })
        .unwrap_or_else(|| panic!("the worker started no helper:\n{log}"))
        .parse()
        .unwrap();
    // MADV_POPULATE_WRITE arrived in Linux 5.14; before, the helper stops at once.
    if kernel_version().is_some_and(|version| version >= (5, 14)) {
        assert!(populated > 1.0, "{populated} MB populated:\n{log}");
    }
}

#[test]
fn an_isolated_planner_logs_into_a_redirected_stderr_file() {
    // `memplan plan ... 2> build.log`: the worker may not make files grow, so its log lines
    // reach the file through memplan (they used to end the worker with SIGXFSZ).
    let dir = memplan_tests::temp_dir("stderr-file");
    let log = dir.join("build.log");
    let output = memplan()
        .arg("plan")
        .arg(memplan_tests::tiny_model())
        .args(["--planner", "portfolio", "--isolate=always", "-v", "--out"])
        .arg(dir.join("out"))
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .output()
        .expect("run memplan plan");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(output.status.code(), Some(0), "{logged}");
    // The planner's own note, logged in the worker through its host context.
    assert!(
        logged.contains("memplan::planner: portfolio: 2 buffers: greedy best fit by duration won"),
        "{logged}"
    );
}
