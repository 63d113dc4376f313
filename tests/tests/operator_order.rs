//! `--order best|keep` end to end: a JSON model whose best order differs from the stored one,
//! planned both ways; the plan file, header and summary say which order the plan holds for;
//! `memplan check` applies a plan file's order and refuses an invalid one; a `.tflite` written
//! in a new order checks clean alone and against the original with its plan file.

use std::path::{Path, PathBuf};

use memplan_tests::{describe, require_corpus, run_memplan, temp_dir};
use serde_json::Value;

/// `big` (256 bytes) is written by op0 but read only by op3: stored, it is live while op1 and
/// op2 run (peak 384 at op2: big, a, b). Run op1, op2, op0, op3 and the peak is 336.
const MODEL: &str = r#"{"version": 1,
 "tensors": [
  {"id": "in", "kind": "input", "size": 16},
  {"id": "big", "size": 256},
  {"id": "a", "size": 64},
  {"id": "b", "size": 64},
  {"id": "out", "kind": "output", "size": 16}
 ],
 "operators": [
  {"type": "READ", "inputs": ["in"], "outputs": ["big"]},
  {"type": "CONV_2D", "inputs": ["in"], "outputs": ["a"]},
  {"type": "CONV_2D", "inputs": ["a"], "outputs": ["b"]},
  {"type": "CONCATENATION", "inputs": ["b", "big"], "outputs": ["out"]}
 ],
 "inputs": ["in"], "outputs": ["out"]}"#;

fn model_file() -> PathBuf {
    let path = temp_dir("order-model").join("model.json");
    std::fs::write(&path, MODEL).unwrap();
    path
}

/// `memplan plan MODEL --format json --out OUT` with `extra`: the summary and OUT.
fn plan(model: &Path, extra: &[&str]) -> (Value, PathBuf) {
    let out = temp_dir("order-out").join("out");
    let mut args = vec![
        "plan".to_string(),
        model.display().to_string(),
        "--format".into(),
        "json".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|arg| arg.to_string()));
    let output = run_memplan(&args);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    (serde_json::from_slice(&output.stdout).unwrap(), out)
}

fn scratch_bound(summary: &Value) -> &Value {
    &summary["arenas"][0]["lower_bound"]
}

fn check(model: &Path, plan: Option<&Path>) -> std::process::Output {
    let mut args = vec!["check".to_string(), model.display().to_string()];
    args.extend(plan.map(|plan| plan.display().to_string()));
    run_memplan(&args)
}

#[test]
fn keep_is_the_default_and_says_what_best_would_gain() {
    let model = model_file();
    let (summary, out) = plan(&model, &[]);
    let order = &summary["operator_order"];
    assert_eq!(order["planned_for"], "stored", "{summary}");
    assert_eq!(
        (&order["stored_bound"], &order["best_bound"]),
        (&Value::from(384), &Value::from(336))
    );
    assert_eq!(order["proven"], true);
    assert!(order.get("run_order").is_none());
    assert_eq!(scratch_bound(&summary), 384);
    let plan_file: Value =
        serde_json::from_slice(&std::fs::read(out.join("model_plan.json")).unwrap()).unwrap();
    assert!(plan_file.get("operator_order").is_none());
    let header = std::fs::read_to_string(out.join("model_tensors.h")).unwrap();
    assert!(!header.contains("OPERATOR_ORDER"));

    let output = run_memplan([
        "plan",
        model.to_str().unwrap(),
        "--out",
        temp_dir("order-text").join("out").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("--order best would lower it to 336 bytes (-12.5%, proven the least)"),
        "{text}"
    );
}

#[test]
fn best_plans_for_the_new_order_and_check_applies_it_and_refuses_invalid_orders() {
    let model = model_file();
    let (summary, out) = plan(&model, &["--order", "best"]);
    let order = &summary["operator_order"];
    assert_eq!(order["planned_for"], "best", "{summary}");
    assert_eq!(order["run_order"], serde_json::json!([1, 2, 0, 3]));
    assert_eq!(scratch_bound(&summary), 336);
    let header = std::fs::read_to_string(out.join("model_tensors.h")).unwrap();
    assert!(
        header.contains("#define MODEL_OPERATOR_ORDER { \\\n    1u, 2u, 0u, 3u \\\n}"),
        "{header}"
    );
    assert!(header.contains("the firmware must run the operators in this order"));
    let residency: Value =
        serde_json::from_slice(&std::fs::read(out.join("model_residency.json")).unwrap()).unwrap();
    assert_eq!(residency["operator_order"], serde_json::json!([1, 2, 0, 3]));

    let plan_path = out.join("model_plan.json");
    let output = check(&model, Some(&plan_path));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));

    let mut document: Value = serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    let edited = temp_dir("order-edited").join("plan.json");
    let check_with = |order: Option<Value>, document: &mut Value| {
        match order {
            Some(order) => document["operator_order"] = order,
            None => {
                document.as_object_mut().unwrap().remove("operator_order");
            }
        }
        std::fs::write(&edited, document.to_string()).unwrap();
        check(&model, Some(&edited))
    };
    // op3 reads b before op2 writes it: not an order of this model (the plan is rejected).
    let output = check_with(Some(serde_json::json!([0, 3, 1, 2])), &mut document);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is not a valid order") && stderr.contains("operator 3 (CONCATENATION)"),
        "{stderr}"
    );
    // Not a permutation: a malformed plan file.
    let output = check_with(Some(serde_json::json!([0, 0, 1, 2])), &mut document);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    // Without its order, the plan does not hold for the stored order: big overlaps a or b.
    let output = check_with(None, &mut document);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
}

#[test]
fn a_tflite_written_in_a_new_order_checks_clean_alone_and_with_its_plan_file() {
    let test = "a_tflite_written_in_a_new_order_checks_clean_alone_and_with_its_plan_file";
    let Some(corpus) = require_corpus(test) else {
        return;
    };
    let model = corpus.join("models/hey_jarvis.tflite");
    let (summary, out) = plan(&model, &["--emit-tflite"]);
    assert_eq!(summary["operator_order"]["planned_for"], "best");
    assert_eq!(scratch_bound(&summary), 2528);
    let output = check(&out.join("model.tflite"), None);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let output = check(&model, Some(&out.join("model_plan.json")));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    // The same plan for the stored order would overlap live tensors.
    let mut document: Value =
        serde_json::from_slice(&std::fs::read(out.join("model_plan.json")).unwrap()).unwrap();
    document.as_object_mut().unwrap().remove("operator_order");
    let edited = temp_dir("order-tflite").join("plan.json");
    std::fs::write(&edited, document.to_string()).unwrap();
    let output = check(&model, Some(&edited));
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
}
