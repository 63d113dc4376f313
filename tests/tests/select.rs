//! Best-of selection (`memplan plan --planner a,b,c`) end to end: each planner's plan is checked
//! before it may compete, failed and rejected planners are reported beside the others, and the
//! smallest plan is kept (ties: the first listed), in the text and the JSON summary.

use std::path::PathBuf;

use memplan_tests::{
    describe, failed_with, fixture_plugin, library_file_name, memplan, plan_tiny, plugin_dir_with,
    temp_dir, workspace_root,
};
use serde_json::{json, Value};

/// A plan that overlaps, then two good planners that tie (on the tiny model both need 128
/// bytes), with one that panics between them.
const PLANNERS: &str = "fixture-overlapping,linear,fixture-panics,greedy-bestfit";

/// A plugin directory holding the misbehaving fixture; the workspace planners are found
/// beside the binary.
fn misbehaving_dir(label: &str) -> PathBuf {
    let library = fixture_plugin("misbehaving");
    plugin_dir_with(label, &[(&library, &library_file_name("misbehaving"))])
}

/// `line` with every time (`12.3 ms`) replaced by `T ms`, so lines compare exactly.
fn without_times(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (index, word) in words.iter().enumerate() {
        let is_time = words
            .get(index + 1)
            .is_some_and(|next| next.starts_with("ms"))
            && word.parse::<f64>().is_ok();
        out.push(if is_time { "T" } else { word });
    }
    out.join(" ")
}

#[test]
fn the_text_summary_lists_every_planner_under_the_kept_one() {
    let output = plan_tiny(PLANNERS, &misbehaving_dir("select-text"), &[]);
    // A candidate's wrong plan makes the run exit 3, though the kept plan is written.
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("planner `fixture-overlapping` returned a wrong plan"),
        "{}",
        describe(&output)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<String> = stdout.lines().map(without_times).collect();
    assert_eq!(lines[0], "module `model`, planned by linear", "{stdout}");
    assert!(
        lines[1].starts_with(
            "  fixture-overlapping: failed after T ms: planner `fixture-overlapping` returned a \
             wrong plan: the plan was rejected by the checker (1 violation):"
        ),
        "{stdout}"
    );
    // The violations of a rejected plan are indented under their planner's line.
    assert!(
        lines[2].starts_with("      - [overlap, contract 5] tensor `b`"),
        "{stdout}"
    );
    assert_eq!(
        lines[3], "  linear: 128 bytes in writable memories, T ms (kept)",
        "{stdout}"
    );
    assert!(
        lines[4].starts_with("  fixture-panics: failed after T ms: planner `fixture-panics` (")
            && lines[4].contains("panicked: fixture planner gave up on purpose"),
        "{stdout}"
    );
    assert_eq!(
        lines[5], "  greedy-bestfit: 128 bytes in writable memories, T ms",
        "{stdout}"
    );
    assert!(lines[6].starts_with("plan_hash "), "{stdout}");
}

#[test]
fn the_json_summary_has_one_candidate_per_planner() {
    let output = plan_tiny(
        PLANNERS,
        &misbehaving_dir("select-json"),
        &["--format", "json"],
    );
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let mut document: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("summary JSON: {error}\n{}", describe(&output)));
    assert_eq!(document["planner"], "linear");
    let candidates = document["candidates"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("no candidates: {}", describe(&output)));
    assert_eq!(candidates.len(), 4);
    // Times and the failure messages vary; check them, then compare the rest exactly.
    let mut errors = Vec::new();
    for candidate in candidates.iter_mut() {
        let object = candidate.as_object_mut().unwrap();
        let time = object.remove("time_ms").and_then(|t| t.as_f64());
        assert!(time.is_some_and(|t| t >= 0.0), "{object:?}");
        if let Some(error) = object.remove("error") {
            errors.push(error.as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        *candidates,
        vec![
            json!({"planner": "fixture-overlapping", "ok": false, "kept": false, "exit_code": 3}),
            json!({"planner": "linear", "ok": true, "kept": true, "writable_bytes": 128}),
            json!({"planner": "fixture-panics", "ok": false, "kept": false, "exit_code": 4}),
            json!({"planner": "greedy-bestfit", "ok": true, "kept": false, "writable_bytes": 128}),
        ]
    );
    assert!(
        errors[0].starts_with("planner `fixture-overlapping` returned a wrong plan")
            && errors[0].contains("\n  - [overlap, contract 5]"),
        "{errors:?}"
    );
    assert!(errors[1].contains("panicked"), "{errors:?}");
}

#[test]
fn one_planner_lists_no_candidates() {
    let dir = misbehaving_dir("select-one");
    let json = plan_tiny("greedy-bestfit", &dir, &["--format", "json"]);
    assert_eq!(json.status.code(), Some(0), "{}", describe(&json));
    let document: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(document.get("candidates").is_none(), "{document}");
    let text = plan_tiny("greedy-bestfit", &dir, &[]);
    let stdout = String::from_utf8(text.stdout).unwrap();
    assert!(
        stdout.lines().nth(1).unwrap().starts_with("plan_hash "),
        "{stdout}"
    );
}

/// `memplan plan examples/tiny_conv.json ARGS --format json` with a fresh output directory.
fn plan_example_json(label: &str, args: &[&str]) -> (std::process::Output, Option<Value>) {
    let out = temp_dir(label);
    let model = workspace_root().join("examples/tiny_conv.json");
    let mut command = memplan();
    command.arg("plan").arg(&model).args(args);
    command.args(["--format", "json", "--out"]).arg(&out);
    let output = command.output().expect("run memplan");
    let document = serde_json::from_slice(&output.stdout).ok();
    (output, document)
}

#[test]
fn each_planner_gets_its_own_options() {
    // `fit` is greedy-bestfit's option: linear refuses it, so it must reach greedy-bestfit only.
    let first_fit = r#"greedy-bestfit={"fit":"first"}"#;
    let (output, both) = plan_example_json(
        "per-planner-options",
        &[
            "--planner",
            "greedy-bestfit,linear",
            "--planner-options",
            first_fit,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let both = both.expect("a JSON summary");
    let candidates = both["candidates"].as_array().expect("candidates");
    assert!(
        candidates.iter().all(|candidate| candidate["ok"] == true),
        "{candidates:?}"
    );
    let (output, alone) = plan_example_json(
        "per-planner-options-alone",
        &[
            "--planner",
            "greedy-bestfit",
            "--planner-options",
            r#"{"fit":"first"}"#,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let alone = alone.expect("a JSON summary");
    assert_eq!(both["planner"], "greedy-bestfit");
    assert_eq!(both["tensor_layout_hash"], alone["tensor_layout_hash"]);
}

#[test]
fn options_for_a_planner_not_selected_are_a_usage_error_before_the_model_is_read() {
    let output = memplan()
        .args(["plan", "no-such-model.json", "--planner", "greedy-bestfit"])
        .args(["--planner-options", r#"exact={"time_limit_s":1}"#])
        .output()
        .expect("run memplan");
    let message = failed_with(&output, 2);
    assert!(
        message.contains("`exact` is not selected") && !message.contains("no-such-model"),
        "{message}"
    );
}

#[test]
fn a_failed_candidate_fails_the_run_after_the_kept_plan_is_written() {
    let dir = misbehaving_dir("select-failed");
    // (planners, extra arguments, exit code, what stderr says)
    let cases: [(&str, &[&str], i32, &str); 4] = [
        (
            "greedy-bestfit,fixture-segfaults",
            &[],
            4,
            "planner `fixture-segfaults` failed",
        ),
        (
            "greedy-bestfit,fixture-hangs",
            &["--timeout", "1"],
            4,
            "planner `fixture-hangs` failed",
        ),
        (
            "fixture-exits,greedy-bestfit,fixture-overlapping",
            &[],
            4,
            "exits 4 (the first failure's code)",
        ),
        (
            "greedy-bestfit,linear",
            &["--planner-options", r#"{"fit":"first"}"#],
            2,
            "planner `linear` refused its options",
        ),
    ];
    for (planners, extra, code, expected) in cases {
        let out = temp_dir("select-failed-out").join("out");
        let output = memplan()
            .arg("plan")
            .arg(memplan_tests::tiny_model())
            .args(["--planner", planners, "--plugin-dir"])
            .arg(&dir)
            .arg("--out")
            .arg(&out)
            .args(extra)
            .args(["--format", "json"])
            .output()
            .expect("run memplan");
        let stderr = failed_with(&output, code);
        assert!(stderr.contains(expected), "{planners}: {stderr}");
        assert!(
            stderr.contains("the plan of `greedy-bestfit` was written to"),
            "{planners}: {stderr}"
        );
        assert!(out.join("model_tensors.h").exists(), "{planners}: {stderr}");
        let document: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("summary JSON: {error}\n{}", describe(&output)));
        let fates: Vec<(String, bool)> = document["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|candidate| {
                (
                    candidate["planner"].as_str().unwrap().to_string(),
                    candidate["ok"].as_bool().unwrap(),
                )
            })
            .collect();
        let listed: Vec<&str> = planners.split(',').collect();
        assert_eq!(
            fates
                .iter()
                .map(|(name, _)| name.as_str())
                .collect::<Vec<_>>(),
            listed,
            "every candidate's fate is listed"
        );
        assert_eq!(
            fates.iter().filter(|(_, ok)| *ok).count(),
            1,
            "{planners}: only greedy-bestfit planned: {fates:?}"
        );
    }
}
