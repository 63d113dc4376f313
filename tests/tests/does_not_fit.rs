//! A model whose pinned tensors alone exceed a memory's budget stops in the analysis with exit
//! code 5, before any planner runs, in every command that analyses a model; a budget the
//! pinned tensors fit is left to the planner, whose own does-not-fit reads alike.

use std::path::{Path, PathBuf};

use memplan_tests::{describe, failed_with, run_memplan, temp_dir, workspace_root};

fn example(name: &str) -> PathBuf {
    workspace_root().join("examples").join(name)
}

/// `memplan ARGS...` with paths and strings mixed.
fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Output {
    run_memplan(args.iter().map(|arg| arg.as_ref()))
}

/// Asserts exit 5 from the analysis (no planner named) and that stderr has every `expected`.
fn stopped_early(output: &std::process::Output, expected: &[&str]) {
    let stderr = failed_with(output, 5);
    for needle in expected {
        assert!(
            stderr.contains(needle),
            "missing {needle:?}\n{}",
            describe(output)
        );
    }
    assert!(
        stderr.contains("no planner was run") && !stderr.contains("planner `"),
        "{}",
        describe(output)
    );
}

#[test]
fn constants_over_the_flash_budget_stop_plan_and_bench_before_planning() {
    let model = example("tiny_conv.json");
    let out = temp_dir("does-not-fit").join("out");
    let expected = [
        "tiny_conv.json: the tensors pinned to memory FLASH need at least 692 bytes but the \
         budget is 100 bytes (--memory FLASH=100)",
        "constants (it is their destination memory) 692 bytes",
        "the largest: 'fc_w' (constant, 640 bytes), 'conv_w' (constant, 36 bytes), 'conv_b' \
         (constant, 16 bytes)",
        "no plan fits in less than 692 bytes, and the shipped planners need 704 (arenas \
         rounded to their alignment; --memory FLASH=704)",
    ];
    let output = run(&[&"plan", &model, &"--memory", &"FLASH=100", &"--out", &out]);
    stopped_early(&output, &expected);
    assert!(!out.exists(), "a failed run wrote {}", out.display());

    // `check` reports what is wrong with the plan it is given: a plan made without the
    // limit breaks the budget (exit 3, the checker's report).
    let planned = temp_dir("does-not-fit").join("out");
    let output = run(&[&"plan", &model, &"--out", &planned]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let plan_file = planned.join("model_plan.json");
    let output = run(&[&"check", &model, &plan_file, &"--memory", &"FLASH=100"]);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("FLASH"), "{}", describe(&output));

    let output = run(&[&"bench", &model, &"--runs", &"1", &"--memory", &"FLASH=100"]);
    stopped_early(&output, &expected);
}

#[test]
fn scratch_pinned_by_rules_over_a_budget_stops_plan() {
    let output = run(&[
        &"plan",
        &example("tiny_conv.json"),
        &"--target",
        &"apollo3_evb",
        &"--rules",
        &example("apollo3_rules.json"),
        &"--memory",
        &"DTCM=300",
        &"--out",
        &temp_dir("does-not-fit").join("out"),
    ]);
    stopped_early(
        &output,
        &[
            "the tensors pinned to memory DTCM need at least 356 bytes but the budget is 300 \
             bytes (--memory DTCM=300)",
            "scratch tensors (placed there by `memory` rules) 356 bytes",
            "'conv_out' (intermediate, 256 bytes)",
            "the shipped planners need 368 (arenas rounded to their alignment; --memory DTCM=368)",
        ],
    );
}

/// At the bound itself the analysis lets the planner try: the kit pads the constant arena
/// to 704 bytes, so the default planner (portfolio) reports that 692 does not fit (the kit's
/// message, same exit code), and 704 plans.
#[test]
fn a_budget_the_pinned_tensors_fit_is_left_to_the_planner() {
    let model = example("tiny_conv.json");
    let plan =
        |budget: &str, out: &Path| run(&[&"plan", &model, &"--memory", &budget, &"--out", &out]);
    let output = plan("FLASH=692", &temp_dir("does-not-fit").join("out"));
    let stderr = failed_with(&output, 5);
    assert!(
        stderr.contains("planner `portfolio`")
            && stderr.contains(
                "the constant arena in memory FLASH needs 704 bytes but the budget is 692 bytes"
            )
            && stderr.contains("--memory FLASH=BYTES"),
        "{}",
        describe(&output)
    );
    let output = plan("FLASH=704", &temp_dir("does-not-fit").join("out"));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

/// The budget a does-not-fit message suggests is one the shipped planners meet.
#[test]
fn the_suggested_budget_plans() {
    let model = example("tiny_conv.json");
    let out = temp_dir("does-not-fit").join("out");
    let output = run(&[&"plan", &model, &"--memory", &"FLASH=100", &"--out", &out]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let suggested = stderr
        .split("--memory FLASH=")
        .nth(2)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .unwrap_or_else(|| panic!("no suggested budget in {stderr}"));
    let budget = format!("FLASH={suggested}");
    let output = run(&[&"plan", &model, &"--memory", &budget, &"--out", &out]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

#[test]
fn a_spill_between_memories_is_planned_where_cutting_one_packing_wastes_sram() {
    // person_detect on the Apollo3 EVB with 32 KiB of DTCM: cutting one packing at the budget
    // gave DTCM 27,648 + SRAM 55,296 (SRAM alone holding the whole peak); the planned split
    // needs 64,512 bytes in all, with every planner.
    let Some(corpus) = memplan_tests::require_corpus(
        "a_spill_between_memories_is_planned_where_cutting_one_packing_wastes_sram",
    ) else {
        return;
    };
    let model = corpus.join("models").join("person_detect.tflite");
    for planner in ["portfolio", "greedy-bestfit", "exact"] {
        let out = temp_dir("planned-split").join("out");
        let output = run(&[
            &"plan",
            &model,
            &"--target",
            &"apollo3_evb",
            &"--memory",
            &"DTCM=32K",
            &"--planner",
            &planner,
            &"--format",
            &"json",
            &"--out",
            &out,
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let scratch: Vec<(String, u64)> = memplan_tests::scratch_arenas(&summary)
            .into_iter()
            .map(|arena| {
                (
                    arena["memory"].as_str().unwrap().to_string(),
                    arena["size"].as_u64().unwrap(),
                )
            })
            .collect();
        let total: u64 = scratch.iter().map(|(_, size)| size).sum();
        assert!(total <= 64_512, "{planner}: {scratch:?}");
        assert!(
            scratch
                .iter()
                .any(|(memory, size)| memory == "DTCM" && *size <= 32 * 1024),
            "{planner}: {scratch:?}"
        );
        assert!(
            summary["planner_summary"]
                .as_str()
                .unwrap()
                .contains("the split between memories is heuristic"),
            "{summary}"
        );
    }
}

#[test]
fn exact_with_goal_fit_stops_at_the_first_packing_under_the_budget() {
    // A dense cut of a 2^20 x 50 rectangle: greedy packings end well above 2^20, the budget
    // lies between, and the search fits it (MiniMalloc's question) rather than minimising.
    let buffers = memplan_planner_kit::testing::rectangle_cut(1 << 20, 50, 200, 2);
    let greedy = memplan_planner_kit::pack_greedy(
        &buffers,
        memplan_planner_kit::Order::Size,
        memplan_planner_kit::Fit::Best,
    )
    .height;
    let budget = (1u64 << 20) + (greedy - (1 << 20)) / 2;
    let mut csv = String::from("id,lower,upper,size\n");
    for (id, buffer) in buffers.iter().enumerate() {
        let (lower, upper) = (buffer.lifetime.first, buffer.lifetime.last + 1);
        csv.push_str(&format!("{id},{lower},{upper},{}\n", buffer.size));
    }
    let dir = temp_dir("goal-fit");
    let trace = dir.join("cut.csv");
    std::fs::write(&trace, csv).unwrap();
    let memory = format!("SRAM={budget}");
    // The search stops at the first packing that fits: the generous time limit is a ceiling
    // for slow machines, not what it takes (under a second in a debug build here).
    let output = run(&[
        &"plan",
        &trace,
        &"--planner",
        &"exact",
        &"--planner-options",
        &r#"{"goal":"fit","time_limit_s":60}"#,
        &"--memory",
        &memory,
        &"--format",
        &"json",
        &"--out",
        &dir.join("out"),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let scratch = memplan_tests::scratch_arenas(&summary)[0];
    assert!(
        scratch["size"].as_u64().unwrap() <= budget,
        "{scratch} above {budget}"
    );
    let note = summary["planner_summary"].as_str().unwrap();
    assert!(
        note.contains("goal \"fit\" stopped the search there") || note.contains("proven optimal"),
        "{note}"
    );
}
