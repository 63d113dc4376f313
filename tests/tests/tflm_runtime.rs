//! memplan's offline plans run on TensorFlow Lite Micro itself: the PyPI `tflite-micro`
//! runtime (reference kernels, pinned in `tests/tflm/requirements.txt`) runs every model of the
//! shared corpus as given and as `memplan plan --emit-tflite` writes it, several invocations on
//! one interpreter with seeded inputs (stateful models keep their state), and the outputs must
//! be bit-identical, TFLM's arena head with memplan's plan no larger than without, and both
//! heads exactly what memplan's summary predicted.
//!
//! The Python to run is `MEMPLAN_TFLM_PYTHON` (a venv with the requirements installed; `.ci/run`
//! creates one under `target/`). Without it the test skips, except under `CI=true`, where it
//! fails: CI always runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use memplan_tests::{describe, require_corpus, run_memplan, temp_dir, workspace_root};

/// The Python with `tflite-micro`, or `None` (skipped) outside CI.
fn tflm_python(test: &str) -> Option<PathBuf> {
    match std::env::var_os("MEMPLAN_TFLM_PYTHON") {
        Some(python) => Some(PathBuf::from(python)),
        None => {
            assert!(
                std::env::var_os("CI").is_none_or(|ci| ci != "true"),
                "{test}: CI=true but MEMPLAN_TFLM_PYTHON is not set; .ci/run sets it"
            );
            eprintln!("{test}: MEMPLAN_TFLM_PYTHON is not set; skipping (see README.md)");
            None
        }
    }
}

/// What TFLM reports for one model: its arena head, a digest of every output of every
/// invocation, and one per output.
#[derive(Debug, PartialEq, Eq)]
struct TflmRun {
    head: u64,
    outputs_sha256: String,
    /// One digest per output, over all invocations.
    output_sha256: Vec<String>,
}

fn run_tflm(python: &Path, model: &Path) -> TflmRun {
    let script = workspace_root().join("tests/tflm/run_tflm.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(model)
        .args(["--invocations", "4", "--seed", "7"])
        .output()
        .expect("run the TFLM harness");
    assert!(
        output.status.success(),
        "TFLM on {}:\n{}",
        model.display(),
        describe(&output)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}:\n{}", describe(&output)));
    assert_eq!(report["invocations"], 4);
    TflmRun {
        output_sha256: report["output_sha256"]
            .as_array()
            .expect("digests")
            .iter()
            .map(|digest| digest.as_str().expect("digest").to_string())
            .collect(),
        head: report["head"].as_u64().expect("head"),
        outputs_sha256: report["outputs_sha256"]
            .as_str()
            .expect("digest")
            .to_string(),
    }
}

/// `memplan plan MODEL --emit-tflite --format json` with `extra`; the summary and the written
/// model.
fn plan_with_tflite(model: &Path, label: &str, extra: &[&str]) -> (serde_json::Value, PathBuf) {
    let out = temp_dir(label).join("out");
    let mut args = vec![
        "plan".to_string(),
        model.display().to_string(),
        "--emit-tflite".to_string(),
        "--format".to_string(),
        "json".to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|arg| arg.to_string()));
    let output = run_memplan(&args);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        summary["tflite_micro"]["model_written"], "model.tflite",
        "{summary}"
    );
    (summary, out.join("model.tflite"))
}

fn corpus_models(corpus: &Path) -> Vec<PathBuf> {
    let mut models: Vec<PathBuf> = std::fs::read_dir(corpus.join("models"))
        .expect("corpus models")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "tflite"))
        .collect();
    models.sort();
    assert!(models.len() >= 8, "the corpus has its eight models");
    models
}

#[test]
fn every_corpus_model_runs_identically_on_tflm_with_memplans_plan_and_no_larger() {
    let test = "every_corpus_model_runs_identically_on_tflm_with_memplans_plan_and_no_larger";
    let (Some(corpus), Some(python)) = (require_corpus(test), tflm_python(test)) else {
        return;
    };
    let mut table = Vec::new();
    for model in corpus_models(&corpus) {
        let name = model.file_name().unwrap().to_string_lossy().into_owned();
        // The stored order: TFLM's own head on the model as given is predicted too (a new
        // order is the next test's).
        let (summary, written) = plan_with_tflite(&model, "tflm-e2e", &["--order", "keep"]);
        let predicted = &summary["tflite_micro"];
        let original = run_tflm(&python, &model);
        let with_plan = run_tflm(&python, &written);
        assert_eq!(
            with_plan.outputs_sha256, original.outputs_sha256,
            "{name}: outputs differ with memplan's plan"
        );
        assert!(
            with_plan.head <= original.head,
            "{name}: TFLM's head grew from {} to {} with memplan's plan",
            original.head,
            with_plan.head
        );
        // memplan's simulation of TFLM's planner is exact, alone and around the plan.
        assert_eq!(
            predicted["head_alone"], original.head,
            "{name}: {predicted}"
        );
        assert_eq!(
            predicted["head_written"], with_plan.head,
            "{name}: {predicted}"
        );
        table.push(format!("{name}: {} -> {}", original.head, with_plan.head));
        if name == "vww_96_int8.tflite" {
            assert_eq!(original.head, 73728);
            assert_eq!(
                with_plan.head, 55296,
                "vww_96_int8 with memplan's exact plan"
            );
        }
    }
    eprintln!(
        "TFLM heads, alone -> with memplan's plan:\n{}",
        table.join("\n")
    );
}

#[test]
fn a_plan_that_would_grow_tflms_head_is_not_written_and_best_of_selection_writes_too() {
    let test = "a_plan_that_would_grow_tflms_head_is_not_written_and_best_of_selection_writes_too";
    let (Some(corpus), Some(python)) = (require_corpus(test), tflm_python(test)) else {
        return;
    };
    // `linear` gives every tensor its own bytes: far above TFLM's own plan, so the model keeps
    // TFLM's plan (every offset -1) and says why.
    let model = corpus.join("models/keyword_scrambled.tflite");
    let (summary, written) = plan_with_tflite(&model, "tflm-linear", &["--planner", "linear"]);
    let predicted = &summary["tflite_micro"];
    assert_eq!(predicted["offsets_written"], "tflite-micro", "{predicted}");
    assert!(
        predicted["kept_tflite_micro_plan"]
            .as_str()
            .is_some_and(|reason| reason.contains("more than the 672")),
        "{predicted}"
    );
    let original = run_tflm(&python, &model);
    let kept = run_tflm(&python, &written);
    assert_eq!(kept, original);

    // Best-of selection (`--planner a,b`) writes the kept plan.
    let model = corpus.join("models/vww_96_int8.tflite");
    let (summary, written) = plan_with_tflite(
        &model,
        "tflm-best-of",
        &["--planner", "greedy-bestfit,exact"],
    );
    assert_eq!(summary["planner"], "exact", "{summary}");
    let with_plan = run_tflm(&python, &written);
    assert_eq!(with_plan.head, 55296);
    assert_eq!(
        with_plan.outputs_sha256,
        run_tflm(&python, &model).outputs_sha256
    );
}

/// A streaming model: CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, the shape of
/// TFLM's streaming keyword models, written by the runtime's own schema
/// (tests/tflm/make_streaming_model.py).
fn streaming_model(python: &Path, label: &str) -> PathBuf {
    let model = temp_dir(label).join("streaming.tflite");
    let output = Command::new(python)
        .arg(workspace_root().join("tests/tflm/make_streaming_model.py"))
        .arg(&model)
        .output()
        .expect("run the model generator");
    assert!(output.status.success(), "{}", describe(&output));
    model
}

#[test]
fn a_streaming_model_keeps_its_state_and_first_fit_gives_tflms_head() {
    let test = "a_streaming_model_keeps_its_state_and_first_fit_gives_tflms_head";
    let Some(python) = tflm_python(test) else {
        return;
    };
    let model = streaming_model(&python, "tflm-streaming");
    let original = run_tflm(&python, &model);

    // VAR_HANDLE outputs take no arena space in TFLM: first fit gives its head exactly.
    let (summary, written) = plan_with_tflite(
        &model,
        "tflm-streaming-first-fit",
        &[
            "--planner",
            "greedy-bestfit",
            "--planner-options",
            r#"{"fit":"first"}"#,
            "--order",
            "keep",
        ],
    );
    let scratch = memplan_tests::scratch_arenas(&summary);
    assert_eq!(scratch.len(), 1, "{summary}");
    assert_eq!(scratch[0]["size"], original.head, "{summary}");
    assert_eq!(run_tflm(&python, &written), original);

    // The default planner's plan keeps the state across invocations: identical outputs.
    let (summary, written) = plan_with_tflite(&model, "tflm-streaming", &["--order", "keep"]);
    let with_plan = run_tflm(&python, &written);
    assert_eq!(with_plan.outputs_sha256, original.outputs_sha256);
    assert!(with_plan.head <= original.head);
    assert_eq!(summary["tflite_micro"]["head_written"], with_plan.head);
}

/// `model` with every tensor subgraph 0's operators write exposed as a graph output, and no
/// offline plan (`tests/tflm/expose_intermediates.py`).
fn with_intermediates_exposed(python: &Path, model: &Path, out: &Path) -> PathBuf {
    let output = Command::new(python)
        .arg(workspace_root().join("tests/tflm/expose_intermediates.py"))
        .arg(model)
        .arg(out)
        .output()
        .expect("run the intermediates script");
    assert!(output.status.success(), "{}", describe(&output));
    out.to_path_buf()
}

/// Plans `model` with `--emit-tflite` (the default `--order best`), checks that memplan chose
/// another order, and runs original and rewritten model on TFLM: identical outputs over
/// several invocations with state, every intermediate tensor identical, and TFLM's head with
/// the plan exactly the new lower bound memplan predicted. Returns that head.
fn new_order_runs_identically(python: &Path, model: &Path, label: &str) -> u64 {
    let name = model.display();
    let (summary, written) = plan_with_tflite(model, label, &[]);
    let order = &summary["operator_order"];
    assert_eq!(order["planned_for"], "best", "{name}: {summary}");
    let (stored, best) = (
        order["stored_bound"].as_u64().unwrap(),
        order["best_bound"].as_u64().unwrap(),
    );
    assert!(best < stored, "{name}: {order}");
    let run_order: Vec<u64> = order["run_order"]
        .as_array()
        .expect("run_order")
        .iter()
        .map(|operator| operator.as_u64().unwrap())
        .collect();
    let stored_order: Vec<u64> = (0..run_order.len() as u64).collect();
    assert_ne!(run_order, stored_order, "{name}");

    let original = run_tflm(python, model);
    let rewritten = run_tflm(python, &written);
    assert_eq!(
        rewritten.outputs_sha256, original.outputs_sha256,
        "{name}: outputs differ in the new order"
    );
    assert_eq!(
        summary["tflite_micro"]["head_written"], rewritten.head,
        "{name}: {summary}"
    );
    assert_eq!(
        rewritten.head, best,
        "{name}: TFLM's head is the new lower bound"
    );

    let dir = written.parent().unwrap();
    let original_all = run_tflm(
        python,
        &with_intermediates_exposed(python, model, &dir.join("original_all.tflite")),
    );
    let rewritten_all = run_tflm(
        python,
        &with_intermediates_exposed(python, &written, &dir.join("rewritten_all.tflite")),
    );
    assert!(original_all.output_sha256.len() > original.output_sha256.len());
    assert_eq!(
        rewritten_all.output_sha256, original_all.output_sha256,
        "{name}: an intermediate tensor differs in the new order"
    );
    rewritten.head
}

#[test]
fn a_new_operator_order_runs_identically_on_tflm_every_intermediate_too() {
    let test = "a_new_operator_order_runs_identically_on_tflm_every_intermediate_too";
    let (Some(corpus), Some(python)) = (require_corpus(test), tflm_python(test)) else {
        return;
    };
    // hey_jarvis: its state reads move next to their consumers (3424 with TFLM's own plan).
    let head = new_order_runs_identically(
        &python,
        &corpus.join("models/hey_jarvis.tflite"),
        "tflm-order-hey-jarvis",
    );
    assert_eq!(head, 2528);

    // The streaming model the tests build: its state read moves next to its consumer.
    let model = streaming_model(&python, "tflm-order-streaming");
    new_order_runs_identically(&python, &model, "tflm-order-streaming");

    // Chain models have one valid order: written exactly as with --order keep.
    for name in ["vww_96_int8.tflite", "person_detect.tflite"] {
        let model = corpus.join("models").join(name);
        let (best, best_model) = plan_with_tflite(&model, "tflm-order-chain", &[]);
        let (keep, keep_model) = plan_with_tflite(&model, "tflm-order-chain", &["--order", "keep"]);
        assert_eq!(best["operator_order"]["planned_for"], "stored", "{name}");
        assert_eq!(best["operator_order"]["gain_bytes"], 0, "{name}");
        assert_eq!(best["plan_hash"], keep["plan_hash"], "{name}");
        assert_eq!(
            best["tensor_layout_hash"], keep["tensor_layout_hash"],
            "{name}"
        );
        assert_eq!(
            std::fs::read(best_model).unwrap(),
            std::fs::read(keep_model).unwrap(),
            "{name}"
        );
    }
}
