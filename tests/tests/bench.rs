//! `memplan bench` end to end: the figures the greedy planner must reach on the shared corpus
//! (MiniMalloc instances, TFLite Micro traces, real models), several planners per input, the
//! output formats, determinism, and that every plan is checked before its figures count.

use std::path::{Path, PathBuf};

use memplan_tests::{
    describe, fixture_plugin, library_file_name, plugin_dir_with, require_corpus, run_memplan,
    temp_dir,
};
use serde_json::Value;

/// Runs `memplan bench ARGS --format json --runs 1` and returns its rows, asserting success.
fn bench_json(args: &[&str]) -> Vec<Value> {
    bench_json_exiting(args, 0)
}

/// Runs `memplan bench ARGS --format json --runs 1` and returns its rows, asserting it exits
/// with `code`.
fn bench_json_exiting(args: &[&str], code: i32) -> Vec<Value> {
    let mut all: Vec<&str> = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json", "--runs", "1"]);
    let output = run_memplan(&all);
    assert_eq!(output.status.code(), Some(code), "{}", describe(&output));
    let document: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("bench JSON: {error}\n{}", describe(&output)));
    document["results"]
        .as_array()
        .expect("`results` is an array")
        .clone()
}

fn csv_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "csv"))
        .map(|path| path.display().to_string())
        .collect();
    files.sort();
    files
}

fn number(row: &Value, key: &str) -> u64 {
    row[key]
        .as_u64()
        .unwrap_or_else(|| panic!("row without `{key}`: {row}"))
}

/// A small MiniMalloc CSV written to a fresh directory.
fn small_trace() -> PathBuf {
    let path = temp_dir("bench").join("trace.csv");
    std::fs::write(
        &path,
        "id,lower,upper,size\n0,0,2,32\n1,1,3,64\n2,2,4,32\n3,3,5,48\n4,0,5,16\n",
    )
    .unwrap();
    path
}

#[test]
fn greedy_bestfit_is_within_1_45_of_the_lower_bound_on_minimalloc() {
    let Some(corpus) = require_corpus("greedy_bestfit_is_within_1_45_of_the_lower_bound") else {
        return;
    };
    let files = csv_files(&corpus.join("minimalloc"));
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--planner", "greedy-bestfit"]);
    let rows = bench_json(&args);
    assert_eq!(rows.len(), files.len());
    for (row, file) in rows.iter().zip(&files) {
        assert_eq!(
            row["input"].as_str(),
            Some(file.as_str()),
            "rows in input order"
        );
        let (height, bound) = (number(row, "height"), number(row, "lower_bound"));
        assert!(
            height as f64 <= 1.45 * bound as f64,
            "{file}: height {height}, lower bound {bound}"
        );
    }
}

#[test]
fn first_fit_reproduces_tflm_greedy_figures() {
    let Some(corpus) = require_corpus("first_fit_reproduces_tflm_greedy_figures") else {
        return;
    };
    let dir = corpus.join("tflm-traces");
    for (file, tflm) in [
        ("greedy_medium_test.csv", 90),
        ("greedy_overlap_test.csv", 120),
        ("person_detection_greedy_test.csv", 64512),
    ] {
        let path = dir.join(file).display().to_string();
        let rows = bench_json(&[
            &path,
            "--planner",
            "greedy-bestfit",
            "--planner-options",
            r#"{"fit":"first"}"#,
        ]);
        assert_eq!(number(&rows[0], "height"), tflm, "{file}");
    }
}

#[test]
fn scratch_is_no_larger_than_tflm_head_on_every_model() {
    let Some(corpus) = require_corpus("scratch_is_no_larger_than_tflm_head") else {
        return;
    };
    let tflm_head = memplan_tests::TFLM_HEAD;
    let paths: Vec<String> = tflm_head
        .iter()
        .map(|(file, _)| corpus.join("models").join(file).display().to_string())
        .collect();
    let mut args: Vec<&str> = paths.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--planner", "greedy-bestfit"]);
    let rows = bench_json(&args);
    for (row, (file, figure)) in rows.iter().zip(tflm_head) {
        let height = number(row, "height");
        assert!(
            height <= figure,
            "{file}: scratch {height} > TFLM's head {figure}"
        );
    }
}

#[test]
fn several_planners_give_one_row_each_in_the_order_listed() {
    let trace = small_trace();
    let trace = trace.display().to_string();
    let rows = bench_json(&[&trace, "--planner", "greedy-bestfit,linear"]);
    let planners: Vec<&str> = rows
        .iter()
        .map(|r| r["planner"].as_str().unwrap())
        .collect();
    assert_eq!(planners, vec!["greedy-bestfit", "linear"]);
    assert_eq!(
        number(&rows[0], "lower_bound"),
        number(&rows[1], "lower_bound")
    );
    assert!(number(&rows[0], "height") <= number(&rows[1], "height"));
    assert!(number(&rows[0], "height") >= number(&rows[0], "lower_bound"));
}

#[test]
fn csv_output_is_the_same_from_one_bench_to_the_next_but_for_times() {
    let trace = small_trace();
    let trace = trace.display().to_string();
    let bench_csv = || {
        let output = run_memplan([
            "bench",
            &trace,
            "--planner",
            "greedy-bestfit,linear",
            "--format",
            "csv",
            "--runs",
            "3",
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let text = String::from_utf8(output.stdout).unwrap();
        // Drop the time columns (median_ms and max_ms, 6th and 7th) and keep the rest.
        text.lines()
            .map(|line| {
                let mut fields: Vec<&str> = line.split(',').collect();
                fields.drain(5..7);
                fields.join(",")
            })
            .collect::<Vec<String>>()
    };
    let first = bench_csv();
    assert_eq!(
        first[0],
        "input,planner,height,lower_bound,ratio,limit_ms,overran,error"
    );
    assert_eq!(first.len(), 3);
    assert_eq!(bench_csv(), first);
}

#[test]
fn a_bad_planner_list_is_bad_usage() {
    let output = run_memplan(["bench", "model.csv", "--planner", "greedy-bestfit,,linear"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("empty planner name"));
}

#[test]
fn a_plan_the_checker_rejects_fails_its_row_and_the_other_planners_keep_theirs() {
    let library = fixture_plugin("misbehaving");
    let dir = plugin_dir_with(
        "bench-misbehaving",
        &[(&library, &library_file_name("misbehaving"))],
    );
    let dir = dir.display().to_string();
    let trace = small_trace();
    let trace = trace.display().to_string();
    let planners = "fixture-overlapping,greedy-bestfit,fixture-incomplete";
    let args = [trace.as_str(), "--planner", planners, "--plugin-dir", &dir];

    // Exit 3, as `memplan plan` does for a rejected plan: the first failed row decides.
    let rows = bench_json_exiting(&args, 3);
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (row, violation) in [
        (&rows[0], "[overlap, contract 5]"),
        (&rows[2], "[missing_allocation, contract 1]"),
    ] {
        let planner = row["planner"].as_str().unwrap();
        let error = row["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error: {row}"));
        assert!(
            error.starts_with(&format!(
                "planner `{planner}` returned a wrong plan, rejected by the checker"
            )),
            "{row}"
        );
        assert!(error.contains(violation), "{row}");
        assert_eq!(row["exit_code"], 3, "{row}");
        assert!(
            row.get("height").is_none(),
            "no figures for a wrong plan: {row}"
        );
    }
    let good = &rows[1];
    assert_eq!(good["planner"], "greedy-bestfit");
    assert!(good.get("error").is_none(), "{good}");
    assert!(
        number(good, "height") >= number(good, "lower_bound"),
        "{good}"
    );

    let mut text_args = vec!["bench"];
    text_args.extend_from_slice(&args);
    let output = run_memplan(&text_args);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "a header and one line per row: {text}");
    assert!(
        lines[1].contains("fixture-overlapping")
            && lines[1].contains("failed: planner `fixture-overlapping` returned a wrong plan"),
        "{text}"
    );
    assert!(
        lines[2].contains("greedy-bestfit") && !lines[2].contains("failed"),
        "{text}"
    );
    assert!(
        lines[3].contains("failed: planner `fixture-incomplete` returned a wrong plan"),
        "{text}"
    );
}

#[test]
fn solutions_are_written_in_minimalloc_form_and_read_back_as_the_same_packing() {
    // A small MiniMalloc instance, written here; the solution CSV read back as an input (its
    // `offset` column fixes every buffer) must plan to the same height and pass the checker.
    let dir = memplan_tests::temp_dir("solutions");
    let instance = dir.join("chain.csv");
    std::fs::write(
        &instance,
        "id,lower,upper,size\na,0,2,32\nb,1,3,48\nc,2,4,16\nd,0,4,8\n",
    )
    .unwrap();
    let solutions = dir.join("solutions");
    let rows = bench_json(&[
        instance.to_str().unwrap(),
        "--planner",
        "greedy-bestfit,exact",
        "--solutions",
        solutions.to_str().unwrap(),
    ]);
    for (row, planner) in rows.iter().zip(["greedy-bestfit", "exact"]) {
        let solution = solutions.join(format!("chain.{planner}.csv"));
        let text = std::fs::read_to_string(&solution).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("id,lower,upper,size,offset"));
        let ids: Vec<&str> = lines
            .map(|line| {
                let fields: Vec<&str> = line.split(',').collect();
                assert_eq!(fields.len(), 5, "{line}");
                fields[0]
            })
            .collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        let replayed = bench_json(&[solution.to_str().unwrap(), "--planner", "linear"]);
        assert_eq!(replayed[0]["height"], row["height"], "{text}");
        // `memplan check MODEL SOLUTION.csv` checks it as a plan.
        let checked = run_memplan([
            "check",
            instance.to_str().unwrap(),
            solution.to_str().unwrap(),
        ]);
        assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    }
    // A solution that overlaps two live buffers is rejected with the checker's violations.
    let wrong = dir.join("wrong.csv");
    std::fs::write(
        &wrong,
        "id,lower,upper,size,offset\na,0,2,32,0\nb,1,3,48,16\nc,2,4,16,64\nd,0,4,8,80\n",
    )
    .unwrap();
    let checked = run_memplan(["check", instance.to_str().unwrap(), wrong.to_str().unwrap()]);
    assert_eq!(checked.status.code(), Some(3), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains("[overlap, contract 5] tensor `b`"),
        "{}",
        describe(&checked)
    );
}

#[test]
fn solutions_are_written_as_out_is_never_through_a_link_nor_over_a_users_file() {
    let dir = temp_dir("solutions-guarantees");
    let instance = small_trace();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();

    // A link planted in DIR under the name of a solution: its target must not be written.
    let planted = dir.join("planted");
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::symlink(&victim, planted.join("trace.greedy-bestfit.csv")).unwrap();
    // A user's file of that name in a directory memplan did not write.
    let users = dir.join("users");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("trace.greedy-bestfit.csv"), "mine").unwrap();
    for solutions in [&planted, &users] {
        let output = run_memplan([
            "bench".as_ref(),
            instance.as_os_str(),
            "--planner".as_ref(),
            "greedy-bestfit".as_ref(),
            "--runs".as_ref(),
            "1".as_ref(),
            "--solutions".as_ref(),
            solutions.as_os_str(),
        ]);
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("trace.greedy-bestfit.csv"),
            "{}",
            describe(&output)
        );
        assert!(output.stdout.is_empty(), "refused before any planner runs");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(
        std::fs::read_to_string(users.join("trace.greedy-bestfit.csv")).unwrap(),
        "mine"
    );

    // A directory memplan wrote is replaced as a whole, and a second bench may replace it.
    let fresh = dir.join("fresh");
    for _ in 0..2 {
        bench_json(&[
            instance.to_str().unwrap(),
            "--planner",
            "greedy-bestfit",
            "--solutions",
            fresh.to_str().unwrap(),
        ]);
    }
    let mut names: Vec<String> = std::fs::read_dir(&fresh)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".memplan-manifest", "trace.greedy-bestfit.csv"]);
}
