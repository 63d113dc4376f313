//! External tensors (`--external-io`, the `external` rule attribute): graph inputs, outputs
//! and whatever rules name live in buffers the firmware owns. The arena shrinks by what they
//! took, the plan file records them and `memplan check` takes them from it, and the C sources
//! bind them: a C program binds buffers, writes and reads them back through the accessors.

use std::path::{Path, PathBuf};
use std::process::Command;

use memplan_tests::{describe, failed_with, memplan, require_corpus, temp_dir, workspace_root};
use serde_json::Value;

fn tiny_conv() -> PathBuf {
    workspace_root().join("examples").join("tiny_conv.json")
}

/// `memplan plan MODEL ARGS --out OUT --format json`: the summary and OUT.
fn plan(model: &Path, args: &[&str]) -> (Value, PathBuf) {
    let out = temp_dir("external-io-out");
    let output = memplan()
        .arg("plan")
        .arg(model)
        .args(args)
        .arg("--out")
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .expect("run memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    (serde_json::from_slice(&output.stdout).unwrap(), out)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The scratch arena's size and lower bound (0 and 0 when the plan has none), after checking
/// that its size is its lower bound rounded up to its alignment (the planner found an optimal
/// placement, so the size is what the bound says).
fn scratch_arena(summary: &Value) -> (u64, u64) {
    let arenas: Vec<&Value> = summary["arenas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|arena| arena["role"] == "scratch")
        .collect();
    let Some(arena) = arenas.first() else {
        return (0, 0);
    };
    assert_eq!(arenas.len(), 1, "{summary}");
    let (size, bound) = (
        arena["size"].as_u64().unwrap(),
        arena["lower_bound"].as_u64().unwrap(),
    );
    let alignment = arena["alignment"].as_u64().unwrap();
    assert_eq!(size, bound.div_ceil(alignment) * alignment, "{summary}");
    (size, bound)
}

/// The test's own lower bound of the scratch tensors of a residency report for which `keep`
/// holds: per step the sizes of the live non-alias tensors rounded up to their alignment, the
/// largest rounding of the peak step not counted (the top tensor needs no padding after it).
/// Every tensor of these models has the same alignment, which is what makes this exact.
fn scratch_bound(residency: &Value, keep: impl Fn(&Value) -> bool) -> u64 {
    let steps = residency["num_steps"].as_u64().unwrap() as usize;
    let mut rounded = vec![0u64; steps.max(1)];
    let mut padding = vec![0u64; steps.max(1)];
    let mut bare = vec![0u64; steps.max(1)];
    for tensor in residency["tensors"].as_array().unwrap() {
        let scratch = matches!(
            tensor["kind"].as_str().unwrap(),
            "input" | "output" | "intermediate"
        );
        if !scratch || tensor.get("alias_of").is_some() || !keep(tensor) {
            continue;
        }
        let size = tensor["size"].as_u64().unwrap();
        let alignment = tensor["alignment"].as_u64().unwrap().max(1);
        let up = size.div_ceil(alignment) * alignment;
        let first = tensor["steps"][0].as_u64().unwrap() as usize;
        let last = tensor["steps"][1].as_u64().unwrap() as usize;
        for step in first..=last {
            rounded[step] += up;
            bare[step] += size;
            padding[step] = padding[step].max(up - size);
        }
    }
    (0..rounded.len())
        .map(|step| bare[step].max(rounded[step] - padding[step]))
        .max()
        .unwrap_or(0)
}

fn is_io(tensor: &Value) -> bool {
    matches!(tensor["kind"].as_str().unwrap(), "input" | "output")
}

/// The arena without inputs and outputs is today's less exactly what they forced into it:
/// returns today's scratch arena size and the one with inputs and outputs external.
fn assert_arena_shrinks_by_the_io(model: &Path) -> (u64, u64) {
    let (today, today_out) = plan(model, &[]);
    let (external, external_out) = plan(model, &["--external-io", "inputs,outputs"]);
    let residency = read_json(&today_out.join("model_residency.json"));
    let all = scratch_bound(&residency, |_| true);
    let internal = scratch_bound(&residency, |tensor| !is_io(tensor));
    let (today_size, today_bound) = scratch_arena(&today);
    let (external_size, external_bound) = scratch_arena(&external);
    assert_eq!(today_bound, all, "{}: today's bound", model.display());
    assert_eq!(
        today_bound - external_bound,
        all - internal,
        "{}: the bound must shrink by what the inputs and outputs forced into it",
        model.display()
    );
    // The report marks them, in no region; the summary lists them.
    let external_residency = read_json(&external_out.join("model_residency.json"));
    for tensor in external_residency["tensors"].as_array().unwrap() {
        let io = is_io(tensor);
        assert_eq!(tensor.get("external").is_some(), io, "{tensor}");
        if io {
            assert_eq!(tensor["region_id"], Value::Null, "{tensor}");
        }
    }
    assert!(!external["external"].as_array().unwrap().is_empty());
    (today_size, external_size)
}

#[test]
fn the_arena_shrinks_by_what_inputs_and_outputs_took() {
    // tiny_conv: the input is live at the peak step.
    let (today, external) = assert_arena_shrinks_by_the_io(&tiny_conv());
    assert!(external < today, "{external} < {today}");
}

#[test]
fn corpus_arenas_with_inputs_and_outputs_external() {
    let Some(corpus) = require_corpus("corpus_arenas_with_inputs_and_outputs_external") else {
        return;
    };
    let models = corpus.join("models");
    // vww_96_int8 and person_detect: the peak is two inner activations, the input (27648 and
    // 9216 bytes) is not live there: the arena stays 55296 bytes (README figures).
    assert_eq!(
        assert_arena_shrinks_by_the_io(&models.join("vww_96_int8.tflite")),
        (55296, 55296)
    );
    assert_eq!(
        assert_arena_shrinks_by_the_io(&models.join("person_detect.tflite")),
        (55296, 55296)
    );
    // simple_add: every activation is an input or the output.
    assert_eq!(
        assert_arena_shrinks_by_the_io(&models.join("simple_add_model.tflite")),
        (49152, 0)
    );
}

#[test]
fn check_takes_the_external_tensors_from_the_plan_file() {
    let (_, out) = plan(&tiny_conv(), &["--external-io", "inputs,outputs"]);
    let plan_file = out.join("model_plan.json");
    let document = read_json(&plan_file);
    let listed: Vec<&str> = document["external"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["image", "probs"]);
    let check = |plan: &Path| {
        memplan()
            .arg("check")
            .arg(tiny_conv())
            .arg(plan)
            .args(["--format", "json"])
            .output()
            .expect("run memplan check")
    };
    let ok = check(&plan_file);
    assert_eq!(ok.status.code(), Some(0), "{}", describe(&ok));
    let report: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["external"], serde_json::json!(["image", "probs"]));

    // A plan that places an external tensor is rejected, naming it.
    let dir = temp_dir("external-io-check");
    let mut placed = document.clone();
    placed["allocations"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
            {"tensor": "image", "role": "scratch", "memory": "SRAM", "offset": 0, "size": 100}
        ));
    let placed_file = dir.join("placed.json");
    std::fs::write(&placed_file, placed.to_string()).unwrap();
    let rejected = check(&placed_file);
    assert_eq!(rejected.status.code(), Some(3), "{}", describe(&rejected));
    let report: Value = serde_json::from_slice(&rejected.stdout).unwrap();
    let violations = report["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{report}");
    assert_eq!(violations[0]["kind"], "external_placed", "{report}");
    assert!(
        violations[0]["message"].as_str().unwrap().contains("image"),
        "{report}"
    );

    // Without its list the same allocations miss the two tensors.
    let mut unlisted = document.clone();
    unlisted.as_object_mut().unwrap().remove("external");
    let unlisted_file = dir.join("unlisted.json");
    std::fs::write(&unlisted_file, unlisted.to_string()).unwrap();
    let rejected = check(&unlisted_file);
    assert_eq!(rejected.status.code(), Some(3), "{}", describe(&rejected));
    let report: Value = serde_json::from_slice(&rejected.stdout).unwrap();
    let kinds: Vec<&str> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|violation| violation["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["missing_allocation", "missing_allocation"],
        "{report}"
    );
}

#[test]
fn rules_mark_single_tensors_and_override_the_kinds() {
    let dir = temp_dir("external-io-rules");
    let rules = dir.join("rules.json");
    // probs stays in the arena despite --external-io outputs; flat (a view of pool_out) is
    // external, which takes pool_out with it.
    std::fs::write(
        &rules,
        r#"[{"type": "output", "attributes": {"external": false}},
            {"id": "flat", "attributes": {"external": true}}]"#,
    )
    .unwrap();
    let rules = rules.to_str().unwrap();
    let (summary, out) = plan(
        &tiny_conv(),
        &["--external-io", "inputs,outputs", "--rules", rules],
    );
    let buffers: Vec<&str> = summary["external"]
        .as_array()
        .unwrap()
        .iter()
        .map(|buffer| buffer["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(buffers, ["image", "pool_out"]);
    let residency = read_json(&out.join("model_residency.json"));
    let external: Vec<&str> = residency["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tensor| tensor.get("external").is_some())
        .map(|tensor| tensor["id"].as_str().unwrap())
        .collect();
    assert_eq!(external, ["image", "pool_out", "flat"]);
    // The check of the plan needs neither the flag nor the rules: the plan file says.
    let output = memplan()
        .arg("check")
        .arg(tiny_conv())
        .arg(out.join("model_plan.json"))
        .output()
        .expect("run memplan check");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

#[test]
fn emit_tflite_with_external_tensors_is_refused() {
    let Some(corpus) = require_corpus("emit_tflite_with_external_tensors_is_refused") else {
        return;
    };
    let model = corpus.join("models").join("vww_96_int8.tflite");
    let out = temp_dir("external-io-tflite");
    let output = memplan()
        .arg("plan")
        .arg(&model)
        .args(["--emit-tflite", "--external-io", "inputs"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run memplan");
    let stderr = failed_with(&output, 2);
    assert!(
        stderr.contains("--emit-tflite cannot be combined"),
        "{stderr}"
    );
    // Made external by a rule, found after analysis: refused the same way, nothing written.
    let rules = temp_dir("external-io-tflite-rules").join("rules.json");
    std::fs::write(
        &rules,
        r#"[{"type": "input", "attributes": {"external": true}}]"#,
    )
    .unwrap();
    let output = memplan()
        .arg("plan")
        .arg(&model)
        .arg("--emit-tflite")
        .arg("--rules")
        .arg(&rules)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run memplan");
    let stderr = failed_with(&output, 2);
    assert!(stderr.contains("is external"), "{stderr}");
    assert!(
        stderr.contains("--emit-tflite cannot be combined"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}

/// Binds every external buffer, checks the bind errors, writes each external tensor through
/// `model_data_of` and reads it back from the buffer (and the other way), and checks that arena
/// tensors still resolve. Prints the external buffers as `buffer TENSOR SIZE`.
const BIND_PROGRAM: &str = r#"
#include "model_tensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(what) do { printf("FAIL %s (line %d)\n", what, __LINE__); return 1; } while (0)

static uint8_t *aligned(uint8_t *raw, size_t alignment) {
    return (uint8_t *)(((uintptr_t)raw + alignment - 1u) & ~(uintptr_t)(alignment - 1u));
}

int main(void) {
    static uint8_t *raw[MODEL_NUM_EXTERNAL_BUFFERS];
    static uint8_t *buffers[MODEL_NUM_EXTERNAL_BUFFERS];
    uint32_t i;
    size_t k;
    if (model_external_buffers_bound() != MODEL_ERR_UNBOUND) FAIL("unbound at start");
    if (model_data_of(MODEL_INPUT_0) != NULL) FAIL("data of an unbound input");
    if (model_bind_tensor(MODEL_INPUT_0, NULL, 4096) != MODEL_ERR_NULL) FAIL("NULL");
    if (model_bind_tensor(model_tensor_conv_out, raw, 4096) != MODEL_ERR_TENSOR)
        FAIL("an arena tensor has no external buffer");
    if (model_bind_tensor(model_tensor_flat, raw, 4096) != MODEL_ERR_TENSOR)
        FAIL("a view is bound through its root");
    for (i = 0; i < MODEL_NUM_EXTERNAL_BUFFERS; ++i) {
        const model_external_buffer_t *buffer = &model_external_buffers[i];
        size_t alignment = buffer->alignment < 2u ? 2u : buffer->alignment;
        raw[i] = malloc(buffer->size + 2u * alignment);
        if (raw[i] == NULL) FAIL("malloc");
        buffers[i] = aligned(raw[i], alignment);
        if (model_bind_tensor(buffer->tensor, buffers[i], buffer->size - 1u) != MODEL_ERR_SIZE)
            FAIL("a short buffer");
        if (buffer->alignment > 1u &&
            model_bind_tensor(buffer->tensor, buffers[i] + 1, buffer->size) != MODEL_ERR_ALIGNMENT)
            FAIL("a misaligned buffer");
        if (model_external_bases[i] != NULL) FAIL("a failed bind changed the base");
        printf("buffer %u %u\n", (unsigned)buffer->tensor, (unsigned)buffer->size);
    }
    /* The first through its own function, the others through the generic one. */
    if (model_bind_tensor_image(buffers[0], model_external_buffers[0].size) != MODEL_OK)
        FAIL("model_bind_tensor_image");
    if (model_external_buffers_bound() != MODEL_ERR_UNBOUND) FAIL("one still unbound");
    for (i = 1; i < MODEL_NUM_EXTERNAL_BUFFERS; ++i) {
        if (model_bind_tensor(model_external_buffers[i].tensor, buffers[i],
                              model_external_buffers[i].size) != MODEL_OK)
            FAIL("model_bind_tensor");
    }
    if (model_external_buffers_bound() != MODEL_OK) FAIL("all bound");
    for (i = 0; i < MODEL_NUM_EXTERNAL_TENSORS; ++i) {
        const model_external_tensor_t *external = &model_external_tensors[i];
        uint8_t *data = model_data_of(external->tensor);
        size_t size = model_descriptors[external->tensor].size;
        if (data != buffers[external->buffer] + external->offset) FAIL("data_of an external tensor");
        for (k = 0; k < size; ++k) data[k] = (uint8_t)(external->tensor * 31u + k);
        for (k = 0; k < size; ++k)
            if (buffers[external->buffer][external->offset + k] != (uint8_t)(external->tensor * 31u + k))
                FAIL("read back through the buffer");
        memset(buffers[external->buffer] + external->offset, 0x5a, size);
        for (k = 0; k < size; ++k)
            if (model_data_of(external->tensor)[k] != 0x5a) FAIL("read back through data_of");
    }
    if (model_data_of(MODEL_INPUT_0) != buffers[0]) FAIL("MODEL_INPUT_0 is the first buffer");
    if (model_data_of(model_tensor_conv_out) == NULL) FAIL("an arena tensor");
    if (model_data_of(model_tensor_conv_out) == buffers[0]) FAIL("an arena tensor in a buffer");
    for (i = 0; i < MODEL_NUM_EXTERNAL_BUFFERS; ++i) free(raw[i]);
    printf("ok\n");
    return 0;
}
"#;

/// Compiles the emitted sources in `out` with the bind program under `std` and runs it.
fn compile_and_run(out: &Path, std: &str, external_arenas: bool) -> String {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let program = out.join("bind_test.c");
    let mut source = BIND_PROGRAM.to_string();
    if external_arenas {
        // Arenas of their own for the sources without buffers (bound before use).
        source = source.replacen(
            "    if (model_external_buffers_bound()",
            "    static uint64_t scratch[4096], persistent[512];\n    \
             if (model_bind_arena(model_arena_sram, scratch, sizeof scratch) != MODEL_OK) FAIL(\"arena\");\n    \
             if (model_bind_arena(model_arena_persistent_sram, persistent, sizeof persistent) != MODEL_OK) FAIL(\"arena\");\n    \
             if (model_external_buffers_bound()",
            1,
        );
    }
    std::fs::write(&program, source).unwrap();
    let binary = out.join("bind_test");
    let compiled = Command::new(&compiler)
        .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(out)
        .arg(&program)
        .arg(out.join("model_tensors.c"))
        .arg(out.join("model_constants.c"))
        .arg("-o")
        .arg(&binary)
        .output()
        .expect("run the C compiler");
    assert!(
        compiled.status.success(),
        "{std}:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&binary)
        .output()
        .expect("run the bind program");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{stdout}");
    assert!(stdout.ends_with("ok\n"), "{stdout}");
    stdout
}

#[test]
fn firmware_binds_the_external_buffers_and_reads_them_back() {
    let dir = temp_dir("external-io-c");
    let rules = dir.join("rules.json");
    std::fs::write(
        &rules,
        r#"[{"id": "flat", "attributes": {"external": true}}]"#,
    )
    .unwrap();
    let rules = rules.to_str().unwrap();
    let args = ["--external-io", "inputs,outputs", "--rules", rules];
    let (_, out) = plan(&tiny_conv(), &args);
    let header = std::fs::read_to_string(out.join("model_tensors.h")).unwrap();
    // The header says what the firmware must bind, and the view in its root's buffer.
    for line in [
        "model_bind_tensor_image(): input, at least 100 bytes",
        "model_bind_tensor_pool_out(): intermediate, at least 64 bytes",
        "holds model_tensor_flat at offset 0",
        "model_bind_tensor_probs(): output, at least 10 bytes",
    ] {
        assert!(header.contains(line), "{line}\n{header}");
    }
    // Sources as documented (C11, the arena buffers are _Alignas'd).
    let stdout = compile_and_run(&out, "-std=c11", false);
    // image (0), pool_out (4), probs (9).
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.starts_with("buffer "))
            .collect::<Vec<_>>(),
        ["buffer 0 100", "buffer 4 64", "buffer 9 10"]
    );
    // With external arenas nothing needs C11: the sources are C99 too.
    let mut external_arenas = args.to_vec();
    external_arenas.push("--external-arenas");
    let (_, out) = plan(&tiny_conv(), &external_arenas);
    compile_and_run(&out, "-std=c99", true);
}

#[test]
fn bench_leaves_external_tensors_out_of_the_height_and_the_bound() {
    let bench = |extra: &[&str]| -> Value {
        let output = memplan()
            .arg("bench")
            .arg(tiny_conv())
            .args([
                "--planner",
                "greedy-bestfit",
                "--runs",
                "1",
                "--format",
                "json",
            ])
            .args(extra)
            .output()
            .expect("run memplan bench");
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let document: Value = serde_json::from_slice(&output.stdout).unwrap();
        document["results"][0].clone()
    };
    let today = bench(&[]);
    let external = bench(&["--external-io", "inputs,outputs"]);
    // The same bounds the plan command reports: 356 with the input, 320 without.
    assert_eq!(today["lower_bound"], 356, "{today}");
    assert_eq!(external["lower_bound"], 320, "{external}");
    assert_eq!(external["height"], 320, "{external}");
}
