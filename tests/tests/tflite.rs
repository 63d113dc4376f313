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
