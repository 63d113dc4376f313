//! The binary builds, starts and answers --help and bad usage as the README says (exit 2 and
//! a message for bad usage).

use memplan_tests::{describe, run_memplan};

#[test]
fn help_exits_zero() {
    let output = run_memplan(["--help"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("plan"));
}

#[test]
fn unknown_flag_is_bad_usage() {
    let output = run_memplan(["plan", "--no-such-flag"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
}

/// The `#define ..._SHA256 "..."` lines and the plan hash of a header.
fn content_hashes(header: &str) -> (Vec<String>, String) {
    let payloads = header
        .lines()
        .filter(|line| line.starts_with("#define ") && line.contains("_SHA256 "))
        .map(str::to_string)
        .collect();
    let plan_hash = header
        .lines()
        .find(|line| line.contains("_PLAN_HASH "))
        .expect("a plan hash")
        .to_string();
    (payloads, plan_hash)
}

#[test]
fn a_changed_constant_byte_changes_its_payload_hash_not_the_plan_hash() {
    let dir = memplan_tests::temp_dir("payload-hash");
    let examples = memplan_tests::workspace_root().join("examples");
    for file in ["tiny_conv.json", "tiny_conv.bin"] {
        std::fs::copy(examples.join(file), dir.join(file)).unwrap();
    }
    let plan = |label: &str| {
        let out = dir.join(label);
        let output = memplan_tests::run_memplan([
            "plan".as_ref(),
            dir.join("tiny_conv.json").as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            memplan_tests::describe(&output)
        );
        let header = std::fs::read_to_string(out.join("model_tensors.h")).unwrap();
        let residency: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("model_residency.json")).unwrap())
                .unwrap();
        (content_hashes(&header), residency)
    };
    let ((before, plan_hash), residency) = plan("before");
    assert!(!before.is_empty(), "one hash per constant payload");
    let blob = &residency["arenas"]["constant"][0];
    assert!(
        before[0].ends_with(&format!(
            "\"{}\"",
            blob["payload_sha256"].as_str().expect("payload_sha256")
        )),
        "{before:?} {blob}"
    );
    let mut bytes = std::fs::read(dir.join("tiny_conv.bin")).unwrap();
    bytes[20] ^= 0x5a;
    std::fs::write(dir.join("tiny_conv.bin"), bytes).unwrap();
    let ((after, plan_hash_after), _) = plan("after");
    assert_eq!(plan_hash, plan_hash_after, "placements did not change");
    assert_ne!(before, after, "the payload's content hash did");
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_the_code_its_work_earned() {
    // `memplan planners | head -1`: the reader is gone before memplan writes.
    let dir = memplan_tests::temp_dir("closed-stdout");
    let model = memplan_tests::tiny_model();
    let out = dir.join("out");
    let plan = dir.join("plan.json");
    let model_arg = model.to_str().unwrap();
    let out_arg = out.to_str().unwrap();
    let plan_arg = plan.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["planners"],
        vec!["planners", "--format", "json"],
        vec!["plan", model_arg, "--out", out_arg],
        vec!["plan", model_arg, "--out", out_arg, "--format", "json"],
        vec!["check", model_arg, plan_arg],
        vec!["bench", model_arg, "--planner", "linear", "--runs", "1"],
    ];
    for args in commands {
        if args[0] == "check" {
            std::fs::copy(out.join("model_plan.json"), &plan).unwrap();
        }
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = memplan_tests::memplan()
            .args(&args)
            .stdout(writer)
            .output()
            .expect("run memplan");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
    assert!(
        out.join("model_tensors.h").exists(),
        "the files are written"
    );
}
