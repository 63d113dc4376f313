//! `.tflite` input through the real binary: damaged or foreign files are bad input (exit 2)
//! with a message that says what is wrong, never a panic.

use std::path::Path;

use memplan_tests::{describe, require_corpus, run_memplan, temp_dir};

/// Runs `memplan plan FILE` and asserts exit 2 with `expected` in the message.
fn assert_rejected(file: &Path, expected: &str) {
    let output = run_memplan([Path::new("plan"), file]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(stderr.contains(expected), "{}", describe(&output));
    assert!(
        stderr.contains(&file.display().to_string()),
        "{}",
        describe(&output)
    );
    assert!(!stderr.contains("panicked"), "{}", describe(&output));
}

#[test]
fn foreign_file_with_tflite_extension_is_bad_input() {
    let file = temp_dir("tflite-foreign").join("model.tflite");
    std::fs::write(&file, b"this is a text file, not a flatbuffer").unwrap();
    assert_rejected(&file, "not a TFLite model");
}

#[test]
fn truncated_model_is_bad_input() {
    let Some(corpus) = require_corpus("truncated_model_is_bad_input") else {
        return;
    };
    let bytes = std::fs::read(corpus.join("models/person_detect.tflite")).unwrap();
    let file = temp_dir("tflite-truncated").join("person_detect.tflite");
    std::fs::write(&file, &bytes[..bytes.len() / 3]).unwrap();
    assert_rejected(&file, "failed verification");
}

/// `memplan plan MODEL --format json` with `extra` arguments: the scratch arena's size and
/// lower bound.
fn scratch_arena(model: &Path, extra: &[&str]) -> (u64, u64) {
    let out = temp_dir("tflite-plan");
    let mut args = vec![
        "plan".to_string(),
        model.display().to_string(),
        "--format".to_string(),
        "json".to_string(),
        "--out".to_string(),
        out.join("out").display().to_string(),
    ];
    args.extend(extra.iter().map(|arg| arg.to_string()));
    let output = run_memplan(&args);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let scratch: Vec<&serde_json::Value> = summary["arenas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|arena| arena["role"] == "scratch")
        .collect();
    assert_eq!(scratch.len(), 1, "{}", describe(&output));
    (
        scratch[0]["size"].as_u64().unwrap(),
        scratch[0]["lower_bound"].as_u64().unwrap(),
    )
}

#[test]
fn first_fit_gives_tflm_graph_only_and_the_planners_never_do_worse() {
    let Some(corpus) = require_corpus("first_fit_gives_tflm_graph_only") else {
        return;
    };
    for (file, graph_only) in memplan_tests::TFLM_GRAPH_ONLY {
        let model = corpus.join("models").join(file);
        let first_fit = scratch_arena(
            &model,
            &[
                "--planner",
                "greedy-bestfit",
                "--planner-options",
                r#"{"fit":"first"}"#,
            ],
        );
        assert_eq!(
            first_fit.0, graph_only,
            "{file}: fit=first vs TFLM graph_only"
        );
        let (best_fit, lower_bound) = scratch_arena(&model, &["--planner", "greedy-bestfit"]);
        assert!(
            best_fit <= graph_only,
            "{file}: best fit {best_fit} > {graph_only}"
        );
        let (exact, _) = scratch_arena(&model, &["--planner", "exact"]);
        assert!(
            exact <= best_fit,
            "{file}: exact {exact} > greedy-bestfit {best_fit}"
        );
        // On every model of the corpus the lower bound is reachable.
        assert_eq!(exact, lower_bound, "{file}: exact above the lower bound");
        // The default planner (portfolio) reaches it too, where greedy alone may not.
        let (default, _) = scratch_arena(&model, &[]);
        assert_eq!(
            default, lower_bound,
            "{file}: the default planner above the lower bound"
        );
    }
}
