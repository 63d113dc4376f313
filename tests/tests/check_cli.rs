//! `memplan check MODEL PLAN.json` end to end: plan files written by hand (as another tool
//! would) and by `memplan plan`, checked against a model JSON on the generic target
//! (one writable SRAM, a read-only FLASH).

use std::path::{Path, PathBuf};

use memplan_tests::{describe, run_memplan, temp_dir};
use serde_json::Value;

/// in [0, 1] 64 bytes, mid ("conv/out") [1, 2] 32 bytes, out [2, 2] 64 bytes.
const MODEL: &str = r#"{"version": 1,
 "tensors": [
  {"id": "in", "kind": "input", "size": 64},
  {"id": "mid", "name": "conv/out", "size": 32},
  {"id": "out", "kind": "output", "size": 64}
 ],
 "operators": [
  {"type": "CONV_2D", "inputs": ["in"], "outputs": ["mid"]},
  {"type": "FULLY_CONNECTED", "inputs": ["mid"], "outputs": ["out"]}
 ],
 "inputs": ["in"], "outputs": ["out"]}"#;

/// A plan file for [`MODEL`] with `out` at `out_offset`.
fn plan_text(out_offset: u64) -> String {
    format!(
        r#"{{"format": "memplan-plan", "version": 1, "planner": "by-hand",
 "arenas": [{{"role": "scratch", "memory": "SRAM", "size": 128, "alignment": 16}}],
 "allocations": [
  {{"tensor": "in", "role": "scratch", "memory": "SRAM", "offset": 0, "size": 64}},
  {{"tensor": "mid", "role": "scratch", "memory": "SRAM", "offset": 64, "size": 32}},
  {{"tensor": "out", "role": "scratch", "memory": "SRAM", "offset": {out_offset}, "size": 64}}
 ]}}"#
    )
}

/// Writes the model and a plan file into a fresh directory; returns their paths.
fn files(model: &str, plan: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir("check-cli");
    let model_path = dir.join("model.json");
    let plan_path = dir.join("plan.json");
    std::fs::write(&model_path, model).unwrap();
    std::fs::write(&plan_path, plan).unwrap();
    (model_path, plan_path)
}

fn check(model: &Path, plan: &Path, json: bool) -> std::process::Output {
    let mut args = vec![
        "check".to_string(),
        model.display().to_string(),
        plan.display().to_string(),
    ];
    if json {
        args.extend(["--format".to_string(), "json".to_string()]);
    }
    run_memplan(args)
}

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("stdout is not JSON ({error}):\n{}", describe(output)))
}

#[test]
fn a_valid_hand_written_plan_passes_with_lower_bounds() {
    let (model, plan) = files(MODEL, &plan_text(0));
    let output = check(&model, &plan, false);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("ok"), "{text}");
    assert!(text.contains("scratch arena in SRAM: 128 bytes"), "{text}");
    assert!(text.contains("lower bound 96"), "{text}");

    let output = check(&model, &plan, true);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let document = stdout_json(&output);
    assert_eq!(document["ok"], true);
    assert_eq!(document["planner"], "by-hand");
    assert_eq!(document["arenas"][0]["lower_bound"], 96);
}

#[test]
fn an_overlap_is_rejected_naming_both_tensors() {
    // `out` at 64 shares bytes [64, 96) with `mid` at step 2.
    let (model, plan) = files(MODEL, &plan_text(64));
    let output = check(&model, &plan, false);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for part in [
        "overlap",
        "`out`",
        "`mid`",
        "conv/out",
        "bytes [64, 96)",
        "steps [2, 2]",
    ] {
        assert!(text.contains(part), "`{part}` missing:\n{text}");
    }

    let output = check(&model, &plan, true);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let document = stdout_json(&output);
    assert_eq!(document["ok"], false);
    let violations = document["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{document:#}");
    assert_eq!(violations[0]["kind"], "overlap");
    assert_eq!(violations[0]["contract"], 5);
    assert_eq!(violations[0]["tensor"]["id"], "out");
    assert_eq!(violations[0]["other_tensor"]["name"], "conv/out");
    assert_eq!(violations[0]["arena"]["memory"], "SRAM");
}

#[test]
fn unknown_tensor_ids_and_memories_are_violations_not_parse_errors() {
    let plan = plan_text(0)
        .replace(r#""tensor": "in""#, r#""tensor": "ghost""#)
        .replace(
            r#""tensor": "mid", "role": "scratch", "memory": "SRAM""#,
            r#""tensor": "mid", "role": "scratch", "memory": "PSRAM""#,
        );
    let (model, plan) = files(MODEL, &plan);
    let output = check(&model, &plan, true);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let document = stdout_json(&output);
    let kinds: Vec<&str> = document["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|violation| violation["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["unknown_tensor", "missing_allocation", "unknown_memory"],
        "{document:#}"
    );
    let text = document.to_string();
    assert!(text.contains("ghost") && text.contains("PSRAM"), "{text}");
}

#[test]
fn text_shows_twenty_violations_then_a_count() {
    // 25 graph inputs and one output, none allocated: 26 missing allocations.
    let ids: Vec<String> = (0..25).map(|i| format!("\"x{i}\"")).collect();
    let tensors: Vec<String> = (0..25)
        .map(|i| format!(r#"{{"id": "x{i}", "kind": "input", "size": 8}}"#))
        .collect();
    let model = format!(
        r#"{{"version": 1, "tensors": [{}, {{"id": "y", "kind": "output", "size": 8}}],
 "operators": [{{"type": "ADD_N", "inputs": [{}], "outputs": ["y"]}}],
 "inputs": [{}], "outputs": ["y"]}}"#,
        tensors.join(", "),
        ids.join(", "),
        ids.join(", ")
    );
    let plan = r#"{"format": "memplan-plan", "version": 1, "arenas": [], "allocations": []}"#;
    let (model, plan) = files(&model, plan);
    let output = check(&model, &plan, false);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text.matches("missing_allocation").count(), 20, "{text}");
    assert!(text.contains("and 6 more"), "{text}");

    let output = check(&model, &plan, true);
    let document = stdout_json(&output);
    assert_eq!(document["violations"].as_array().unwrap().len(), 26);
}

#[test]
fn malformed_plan_json_is_bad_input_with_line_and_column() {
    let (model, plan) = files(
        MODEL,
        "{\"format\": \"memplan-plan\",\n \"version\": 1,,\n}",
    );
    let output = check(&model, &plan, false);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("plan.json:2:15"), "{}", describe(&output));
}

#[test]
fn a_plan_written_by_memplan_plan_passes_memplan_check() {
    let (model, _) = files(MODEL, "");
    let out = temp_dir("check-cli-out");
    let output = run_memplan([
        "plan".to_string(),
        model.display().to_string(),
        "--planner".to_string(),
        "linear".to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let output = check(&model, &out.join("model_plan.json"), false);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

#[test]
fn a_plan_is_checked_against_the_target_it_was_made_for() {
    let dir = temp_dir("check-target");
    let model = memplan_tests::workspace_root().join("examples/tiny_conv.json");
    let out = dir.join("out");
    let output = run_memplan([
        "plan".as_ref(),
        model.as_os_str(),
        "--target".as_ref(),
        "apollo3_evb".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let plan = out.join("model_plan.json");
    // Without --target: the plan's own target.
    let output = run_memplan(["check".as_ref(), model.as_os_str(), plan.as_os_str()]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    // Another target: a usage error naming both, never a list of internal indices.
    let output = run_memplan([
        "check".as_ref(),
        model.as_os_str(),
        plan.as_os_str(),
        "--target".as_ref(),
        "generic".as_ref(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("made for target `apollo3_evb`") && stderr.contains("`generic`"),
        "{stderr}"
    );
    assert!(!stderr.contains('#'), "{stderr}");
}
