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
    let scratch = memplan_tests::scratch_arenas(&summary);
    assert_eq!(scratch.len(), 1, "{}", describe(&output));
    (
        scratch[0]["size"].as_u64().unwrap(),
        scratch[0]["lower_bound"].as_u64().unwrap(),
    )
}

#[test]
fn first_fit_gives_tflm_head_and_the_planners_never_do_worse() {
    let Some(corpus) = require_corpus("first_fit_gives_tflm_head") else {
        return;
    };
    for (file, tflm_head) in memplan_tests::TFLM_HEAD {
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
        assert_eq!(first_fit.0, tflm_head, "{file}: fit=first vs TFLM's head");
        let (best_fit, lower_bound) = scratch_arena(&model, &["--planner", "greedy-bestfit"]);
        assert!(
            best_fit <= tflm_head,
            "{file}: best fit {best_fit} > {tflm_head}"
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

/// `memplan plan MODEL --emit-tflite --out OUT`: the path of the written model.
fn emit_tflite(model: &Path, label: &str) -> std::path::PathBuf {
    let out = temp_dir(label).join("out");
    let output = run_memplan([
        Path::new("plan"),
        model,
        Path::new("--emit-tflite"),
        Path::new("--out"),
        &out,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let written = out.join("model.tflite");
    assert!(written.is_file(), "{}", describe(&output));
    written
}

/// Little-endian int32 words of `bytes`.
fn words(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|word| i32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

#[test]
fn check_without_a_plan_file_checks_the_models_own_offline_plan() {
    let Some(corpus) = require_corpus("check_without_a_plan_file") else {
        return;
    };
    let model = corpus.join("models/vww_96_int8.tflite");
    // The model as shipped carries no plan: bad input, saying what to do.
    let output = run_memplan([Path::new("check"), &model]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("carries no offline plan"),
        "{}",
        describe(&output)
    );

    // memplan's own plan: ok, with the head it implies.
    let written = emit_tflite(&model, "check-embedded");
    let output = run_memplan([
        Path::new("check"),
        &written,
        Path::new("--format"),
        Path::new("json"),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["tflite_micro"]["head"], 55296, "{report}");
    assert_eq!(report["tflite_micro"]["head_alone"], 73728, "{report}");

    // The same plan broken three ways: every planned tensor moved to offset 0 (so tensors
    // live together share bytes), the input (tensor 0) to 8 (misaligned), and a constant
    // tensor given an offset (TFLite Micro ignores it). Every one is reported, exit 3.
    let mut bytes = std::fs::read(&written).unwrap();
    let all = words(&bytes);
    // The plan's words: version 1, one subgraph, the tensor count, then the offsets.
    let header = all
        .windows(3)
        .position(|w| w[0] == 1 && w[1] == 1 && w[2] > 60 && w[2] < 200)
        .expect("the offline plan's header");
    let tensors = all[header + 2] as usize;
    let offsets = all[header + 3..header + 3 + tensors].to_vec();
    let constant = offsets
        .iter()
        .position(|&offset| offset == -1)
        .expect("a tensor left to TFLite Micro");
    let mut set = |tensor: usize, value: i32| {
        let at = (header + 3 + tensor) * 4;
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    };
    for (tensor, &offset) in offsets.iter().enumerate() {
        if offset >= 0 {
            set(tensor, 0);
        }
    }
    set(0, 8);
    set(constant, 0);
    let broken = temp_dir("check-embedded-broken").join("broken.tflite");
    std::fs::write(&broken, &bytes).unwrap();
    let output = run_memplan([Path::new("check"), &broken]);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("[misaligned] tensor 0"), "{stdout}");
    assert!(stdout.contains("[overlap] tensor"), "{stdout}");
    assert!(
        stdout.contains(&format!("[ignored] tensor {constant}")),
        "{stdout}"
    );
    assert!(stdout.contains("does not plan"), "{stdout}");
}

#[test]
fn an_offline_plan_is_kept_as_fixed_placements_unless_ignored() {
    let Some(corpus) = require_corpus("an_offline_plan_is_kept_unless_ignored") else {
        return;
    };
    // memplan's plan of vww (55296 bytes, its lower bound), then every planned offset moved
    // 16 KiB up: still a valid plan, but a wasteful one.
    let written = emit_tflite(&corpus.join("models/vww_96_int8.tflite"), "offline-kept");
    let mut bytes = std::fs::read(&written).unwrap();
    let all = words(&bytes);
    let header = all
        .windows(3)
        .position(|w| w[0] == 1 && w[1] == 1 && w[2] > 60 && w[2] < 200)
        .expect("the offline plan's header");
    let tensors = all[header + 2] as usize;
    for (tensor, &offset) in all[header + 3..header + 3 + tensors].iter().enumerate() {
        if offset >= 0 {
            let at = (header + 3 + tensor) * 4;
            bytes[at..at + 4].copy_from_slice(&(offset + 16384).to_le_bytes());
        }
    }
    let shifted = temp_dir("offline-shifted").join("shifted.tflite");
    std::fs::write(&shifted, &bytes).unwrap();

    // Kept, and the user is told how to drop it.
    let output = run_memplan([
        Path::new("plan"),
        &shifted,
        Path::new("--out"),
        &temp_dir("offline-kept-out").join("out"),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--ignore-offline-plan"),
        "{}",
        describe(&output)
    );
    let (kept, bound) = scratch_arena(&shifted, &[]);
    assert!(kept >= 55296 + 16384, "{kept}");
    assert_eq!(bound, 55296);
    // Dropped: planned afresh, down to the bound again.
    let (fresh, _) = scratch_arena(&shifted, &["--ignore-offline-plan"]);
    assert_eq!(fresh, 55296);

    // Only a .tflite model has an offline plan to drop.
    let output = run_memplan([
        Path::new("plan"),
        &memplan_tests::tiny_model(),
        Path::new("--ignore-offline-plan"),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
}
