//! The emitted C compiles with the system C compiler under
//! `-std=c11 -Wall -Wextra -Werror -pedantic`, in both arena modes, and a C program linked
//! against it (tests/c/check_plan.c) binds the arenas, hydrates staged constants and checks
//! every descriptor, every constant byte and the plan hash.

mod fixture;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use memplan::analyze::Analysis;
use memplan::check::CheckedPlan;
use memplan::render::{render, RenderOptions};
use memplan_plugin_api::TensorKind;

const STRICT: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

/// C source with the fixture's own expectations: each constant's model bytes and each
/// tensor's alignment, taken from the analysis, independently of memplan's output.
fn expected_c(analysis: &Analysis) -> String {
    let mut out = String::from("#include <stddef.h>\n#include <stdint.h>\n\n");
    out.push_str(
        "typedef struct { uint32_t tensor; const uint8_t *bytes; size_t size; } expected_constant_t;\n\n",
    );
    let mut entries = Vec::new();
    for (index, data) in analysis.constant_data.iter().enumerate() {
        let tensor = &analysis.request.tensors[index];
        let Some(data) = data else { continue };
        assert_eq!(tensor.kind, TensorKind::Constant);
        let bytes: Vec<String> = data.iter().map(|byte| byte.to_string()).collect();
        writeln!(
            out,
            "static const uint8_t expected_{index}[{}] = {{ {} }};",
            data.len(),
            bytes.join(", ")
        )
        .unwrap();
        entries.push(format!(
            "    {{ {index}u, expected_{index}, {}u }},",
            data.len()
        ));
    }
    assert!(!entries.is_empty(), "the fixture has constants");
    writeln!(
        out,
        "\nconst expected_constant_t expected_constants[] = {{\n{}\n}};",
        entries.join("\n")
    )
    .unwrap();
    writeln!(
        out,
        "const size_t expected_constant_count = {};",
        entries.len()
    )
    .unwrap();
    let alignments: Vec<String> = analysis
        .request
        .tensors
        .iter()
        .map(|tensor| format!("{}u", tensor.alignment))
        .collect();
    writeln!(
        out,
        "const size_t expected_alignments[] = {{ {} }};",
        alignments.join(", ")
    )
    .unwrap();
    writeln!(
        out,
        "const size_t expected_tensor_count = {};",
        analysis.request.tensors.len()
    )
    .unwrap();
    out
}

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Renders and emits `(analysis, checked)` with prefix `demo` into `root/out`.
fn emit_demo(
    root: &Path,
    analysis: &Analysis,
    checked: &CheckedPlan,
    external_arenas: bool,
) -> PathBuf {
    let options = RenderOptions {
        prefix: "demo".to_string(),
        external_arenas,
        planner: "fixture".to_string(),
        planners: Vec::new(),
        emit_tflite: false,
    };
    let plan = render(analysis, checked, &options).expect("render");
    let out = root.join("out");
    memplan::emit::emit(&plan, &out).expect("emit");
    out
}

fn check_program() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/check_plan.c")
}

fn compile_and_run_check(external_arenas: bool) {
    let root = fixture::temp_dir(&format!("c-check-{external_arenas}"));
    let (analysis, checked) = fixture::demo();
    let out = emit_demo(&root, &analysis, &checked, external_arenas);
    let residency: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("demo_residency.json")).unwrap()).unwrap();
    let plan_hash = residency["plan_hash"]
        .as_str()
        .expect("plan_hash")
        .to_string();
    let expected = root.join("expected.c");
    fs::write(&expected, expected_c(&analysis)).unwrap();
    let program = root.join("check_plan");
    run(Command::new(compiler())
        .args(STRICT)
        .arg(format!("-DEXPECTED_PLAN_HASH=\"{plan_hash}\""))
        .arg("-I")
        .arg(&out)
        .arg(out.join("demo_tensors.c"))
        .arg(out.join("demo_constants.c"))
        .arg(check_program())
        .arg(&expected)
        .arg("-o")
        .arg(&program));
    let stdout = run(Command::new(&program).arg(&out));
    assert_eq!(stdout.trim(), "ok");
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn internal_arenas_compile_hydrate_and_check() {
    compile_and_run_check(false);
}

#[test]
fn external_arenas_compile_bind_hydrate_and_check() {
    compile_and_run_check(true);
}

/// The last section directive before `symbol`'s label in GNU assembly.
fn section_of<'a>(assembly: &'a str, symbol: &str) -> &'a str {
    let label = format!("{symbol}:");
    let mut section = "";
    for line in assembly.lines().map(str::trim) {
        if line == label {
            return section;
        }
        if line.starts_with(".section") || [".bss", ".data", ".text"].contains(&line) {
            section = line;
        }
    }
    panic!("no label {label} in the assembly");
}

#[test]
fn section_macros_place_arrays_where_the_user_says() {
    let root = fixture::temp_dir("c-sections");
    let (analysis, checked) = fixture::demo();
    let out = emit_demo(&root, &analysis, &checked, false);
    // The DTCM scratch buffer must sit in the section the macro names (read back with the
    // compiler's own view of the object: its assembly).
    let assembly = root.join("tensors.s");
    run(Command::new(compiler())
        .args(STRICT)
        .arg("-DDEMO_SECTION_DTCM=__attribute__((section(\".dtcm_bss\")))")
        .arg("-I")
        .arg(&out)
        .arg("-S")
        .arg(out.join("demo_tensors.c"))
        .arg("-o")
        .arg(&assembly));
    let text = fs::read_to_string(&assembly).unwrap();
    assert_eq!(
        section_of(&text, "demo_arena_dtcm_buffer"),
        ".section\t.dtcm_bss,\"aw\""
    );
    assert_ne!(
        section_of(&text, "demo_arena_sram_buffer"),
        section_of(&text, "demo_arena_dtcm_buffer")
    );
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_empty_plan_still_compiles_in_both_modes() {
    for external_arenas in [false, true] {
        let root = fixture::temp_dir(&format!("c-empty-{external_arenas}"));
        let (analysis, checked) = fixture::empty();
        let out = emit_demo(&root, &analysis, &checked, external_arenas);
        let residency: serde_json::Value =
            serde_json::from_slice(&fs::read(out.join("demo_residency.json")).unwrap()).unwrap();
        assert_eq!(residency["plan_hash"], "e3b0c44298fc1c14");
        let main = root.join("main.c");
        fs::write(
            &main,
            "#include \"demo_tensors.h\"\n\
             int main(void) {\n\
             \treturn demo_hydrate_constants() == DEMO_OK && demo_data_of(0) == NULL\n\
             \t\t&& demo_num_arena_buffers == 0 ? 0 : 1;\n}\n",
        )
        .unwrap();
        let program = root.join("empty");
        run(Command::new(compiler())
            .args(STRICT)
            .arg("-I")
            .arg(&out)
            .arg(out.join("demo_tensors.c"))
            .arg(out.join("demo_constants.c"))
            .arg(&main)
            .arg("-o")
            .arg(&program));
        run(&mut Command::new(&program));
        fs::remove_dir_all(&root).unwrap();
    }
}
