//! Tensor names and ids are arbitrary strings, and they reach the emitted C in comments: the C
//! must still build under the documented strict flags, whatever the names hold.

use std::path::Path;
use std::process::Command;

use memplan_tests::{describe, memplan, temp_dir};

const STRICT: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

#[test]
fn names_that_open_or_close_c_comments_still_compile_strictly() {
    let dir = temp_dir("c-names");
    let model = dir.join("names.json");
    std::fs::write(
        &model,
        r#"{"version":1,
            "tensors":[
              {"id":"in/*","name":"block/*/conv","kind":"input","size":64},
              {"id":"mid","name":"a*/b ??/ //*","kind":"intermediate","size":32},
              {"id":"out","name":"x/**/y","kind":"output","size":64}],
            "operators":[
              {"type":"conv","inputs":["in/*"],"outputs":["mid"]},
              {"type":"fc","inputs":["mid"],"outputs":["out"]}],
            "inputs":["in/*"],"outputs":["out"]}"#,
    )
    .unwrap();
    let out = dir.join("out");
    let output = memplan()
        .arg("plan")
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    compile_strictly(&out, &dir);
}

/// Compiles the emitted C sources in `out` with [`STRICT`] flags into objects in `dir`.
fn compile_strictly(out: &Path, dir: &Path) {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    for source in ["model_tensors.c", "model_constants.c"] {
        let compiled = Command::new(&compiler)
            .args(STRICT)
            .arg("-c")
            .arg("-I")
            .arg(out)
            .arg(out.join(source))
            .arg("-o")
            .arg(dir.join(format!("{source}.o")))
            .output()
            .expect("run the C compiler");
        assert!(
            compiled.status.success(),
            "{source}:\n{}",
            String::from_utf8_lossy(&compiled.stderr)
        );
    }
}

#[test]
fn bidirectional_controls_in_names_never_reach_the_c_sources() {
    // "Trojan Source": a right-to-left override (and the other bidi controls) in a comment
    // makes GCC's -Wbidi-chars fail the build under -Werror, and shows the reader other code.
    let dir = temp_dir("c-bidi");
    let model = dir.join("bidi.json");
    let json = serde_json::json!({
        "version": 1,
        "tensors": [
            {"id": "in\u{202E}", "name": "access\u{202E}\u{2066}level", "kind": "input", "size": 64},
            {"id": "w\u{2067}", "name": "weights\u{200F}", "kind": "constant", "size": 4,
             "data": "AQIDBA=="},
            {"id": "out\u{202B}", "name": "x\u{2069}\u{202C}y", "kind": "output", "size": 64}],
        "operators": [{"type": "conv", "inputs": ["in\u{202E}", "w\u{2067}"],
                       "outputs": ["out\u{202B}"]}],
        "inputs": ["in\u{202E}"], "outputs": ["out\u{202B}"]
    });
    std::fs::write(&model, json.to_string()).unwrap();
    let out = dir.join("out");
    let output = memplan()
        .arg("plan")
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    for source in ["model_tensors.h", "model_tensors.c", "model_constants.c"] {
        let text = std::fs::read_to_string(out.join(source)).unwrap();
        assert!(
            !text.chars().any(memplan::printable::is_bidi_control),
            "{source} holds a bidi control:\n{text}"
        );
    }
    compile_strictly(&out, &dir);
    let header = std::fs::read_to_string(out.join("model_tensors.h")).unwrap();
    assert!(header.contains("in\\u{202e}"), "{header}");
}
