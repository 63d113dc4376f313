//! Planners written in C and C++ against `plugin-api/include/memplan_planner.h`, end to end:
//! the examples of `examples/c-planner/` and the fixtures of `tests/fixtures/c-planners/`,
//! built out of tree with the system's C and C++ compilers (once per test process, every
//! warning an error), are listed, pinned, run in the sandboxed worker and in process by the
//! real `memplan` binary on corpus models and MiniMalloc instances, and each fault gets the
//! exit code and message a Rust planner's gets (tests/tests/isolation.rs for those).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use memplan_plugin_api::c_abi::{self, CBuffer, CHost, CPackRequest, CPackResult};
use memplan_plugin_api::manifest::{parse_manifest, PlannerInterface};
use memplan_tests::{
    describe, failed_with, memplan, plan_tiny, require_corpus, temp_dir, workspace_root,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The warnings every C planner here is built with: the header and the examples must compile
/// clean under them.
const STRICT: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

fn include_dir() -> PathBuf {
    workspace_root().join("plugin-api").join("include")
}

/// Runs a compiler command, panicking with its output when it fails.
fn compile(mut command: Command) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}",
        describe(&output)
    );
}

/// `compiler` with the strict flags, `language` (`c` or `c++`) at `standard`, the header's
/// directory, and `args`.
fn compiler_command(compiler: &str, language: &str, standard: &str, args: &[&str]) -> Command {
    let mut command = Command::new(compiler);
    command
        .args(["-x", language, &format!("-std={standard}")])
        .args(STRICT)
        .arg("-I")
        .arg(include_dir())
        .args(args);
    command
}

/// Builds the shared library `lib{stem}.so` in `dir` from `source` (C99, or C++17 for `.cpp`)
/// with the system compiler (`cc`, `c++`).
fn build_library(source: &Path, dir: &Path, stem: &str) -> PathBuf {
    let library = dir.join(format!("lib{stem}.so"));
    let cpp = source
        .extension()
        .is_some_and(|extension| extension == "cpp");
    let (compiler, language, standard) = if cpp {
        ("c++", "c++", "c++17")
    } else {
        ("cc", "c", "c99")
    };
    let mut command = compiler_command(compiler, language, standard, &["-O2", "-fPIC"]);
    // nanosleep in the fixtures is POSIX, not C99.
    command
        .arg("-D_POSIX_C_SOURCE=199309L")
        .arg(source)
        .args(["-shared", "-o"])
        .arg(&library);
    compile(command);
    library
}

/// The C planners, built once per test process: a directory with the two examples and the
/// misbehaving fixture (what `--plugin-dir` is given), and the fixture of a future C ABI, in
/// a directory of its own.
struct Built {
    planners: PathBuf,
    future: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = workspace_root();
        let examples = root.join("examples").join("c-planner");
        let fixtures = root.join("tests").join("fixtures").join("c-planners");
        let planners = temp_dir("c-planners");
        build_library(&examples.join("first_fit.c"), &planners, "c_first_fit");
        build_library(&examples.join("best_fit.cpp"), &planners, "cpp_best_fit");
        build_library(&fixtures.join("misbehaving.c"), &planners, "c_misbehaving");
        let future = temp_dir("c-future-abi");
        build_library(&fixtures.join("future_abi.c"), &future, "c_future_abi");
        Built { planners, future }
    })
}

fn c_planners() -> &'static Path {
    &built().planners
}

fn sha256_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{:x}", Sha256::digest(bytes))
}

/// Whether `program` runs here (clang may not be installed).
fn available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// What the layout program prints: `NAME VALUE` per line, and the manifest it embeds.
fn layout_of(binary: &Path) -> (BTreeMap<String, String>, String) {
    let output = Command::new(binary)
        .output()
        .expect("run the layout program");
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let (lines, manifest) = stdout
        .split_once("manifest ")
        .expect("the manifest is printed");
    let values = lines
        .lines()
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').expect("NAME VALUE");
            (name.to_string(), value.to_string())
        })
        .collect();
    (values, manifest.to_string())
}

/// What the header must say, from the Rust mirror of its types.
fn expected_layout() -> BTreeMap<String, String> {
    use std::mem::{offset_of, size_of};
    let mut expected = BTreeMap::new();
    let mut put = |name: &str, value: String| {
        expected.insert(name.to_string(), value);
    };
    put("sizeof memplan_buffer", size_of::<CBuffer>().to_string());
    put(
        "offsetof memplan_buffer.size",
        offset_of!(CBuffer, size).to_string(),
    );
    put(
        "offsetof memplan_buffer.alignment",
        offset_of!(CBuffer, alignment).to_string(),
    );
    put(
        "offsetof memplan_buffer.first",
        offset_of!(CBuffer, first).to_string(),
    );
    put(
        "offsetof memplan_buffer.last",
        offset_of!(CBuffer, last).to_string(),
    );
    put(
        "offsetof memplan_buffer.fixed_offset",
        offset_of!(CBuffer, fixed_offset).to_string(),
    );
    put("sizeof memplan_host", size_of::<CHost>().to_string());
    put(
        "offsetof memplan_host.state",
        offset_of!(CHost, state).to_string(),
    );
    put(
        "offsetof memplan_host.log",
        offset_of!(CHost, log).to_string(),
    );
    put(
        "offsetof memplan_host.should_stop",
        offset_of!(CHost, should_stop).to_string(),
    );
    put(
        "offsetof memplan_host.remaining_ms",
        offset_of!(CHost, remaining_ms).to_string(),
    );
    put(
        "offsetof memplan_host.set_note",
        offset_of!(CHost, set_note).to_string(),
    );
    put(
        "offsetof memplan_host.set_error",
        offset_of!(CHost, set_error).to_string(),
    );
    put(
        "sizeof memplan_pack_request",
        size_of::<CPackRequest>().to_string(),
    );
    for (field, offset) in [
        ("abi_major", offset_of!(CPackRequest, abi_major)),
        ("abi_minor", offset_of!(CPackRequest, abi_minor)),
        ("buffers", offset_of!(CPackRequest, buffers)),
        ("buffer_count", offset_of!(CPackRequest, buffer_count)),
        ("options_json", offset_of!(CPackRequest, options_json)),
        ("room", offset_of!(CPackRequest, room)),
        ("host", offset_of!(CPackRequest, host)),
    ] {
        put(
            &format!("offsetof memplan_pack_request.{field}"),
            offset.to_string(),
        );
    }
    put(
        "sizeof memplan_pack_result",
        size_of::<CPackResult>().to_string(),
    );
    put(
        "offsetof memplan_pack_result.offsets",
        offset_of!(CPackResult, offsets).to_string(),
    );
    put(
        "offsetof memplan_pack_result.offset_count",
        offset_of!(CPackResult, offset_count).to_string(),
    );
    put("sizeof memplan_status", size_of::<i32>().to_string());
    put("sizeof memplan_log_level", size_of::<i32>().to_string());
    put(
        "MEMPLAN_C_ABI_VERSION_MAJOR",
        c_abi::C_ABI_MAJOR.to_string(),
    );
    put(
        "MEMPLAN_C_ABI_VERSION_MINOR",
        c_abi::C_ABI_MINOR.to_string(),
    );
    put("MEMPLAN_C_ABI_VERSION", c_abi::C_ABI_VERSION.to_string());
    put(
        "MEMPLAN_NO_FIXED_OFFSET",
        c_abi::NO_FIXED_OFFSET.to_string(),
    );
    put("MEMPLAN_UNBOUNDED", c_abi::UNBOUNDED.to_string());
    put("MEMPLAN_NO_DEADLINE", c_abi::NO_DEADLINE.to_string());
    put("MEMPLAN_OK", c_abi::status::OK.to_string());
    put(
        "MEMPLAN_DOES_NOT_FIT",
        c_abi::status::DOES_NOT_FIT.to_string(),
    );
    put(
        "MEMPLAN_INVALID_REQUEST",
        c_abi::status::INVALID_REQUEST.to_string(),
    );
    put("MEMPLAN_CANCELLED", c_abi::status::CANCELLED.to_string());
    put("MEMPLAN_FAILED", c_abi::status::FAILED.to_string());
    put("MEMPLAN_LOG_ERROR", c_abi::log_level::ERROR.to_string());
    put("MEMPLAN_LOG_WARN", c_abi::log_level::WARN.to_string());
    put("MEMPLAN_LOG_INFO", c_abi::log_level::INFO.to_string());
    put("MEMPLAN_LOG_DEBUG", c_abi::log_level::DEBUG.to_string());
    put("MEMPLAN_LOG_TRACE", c_abi::log_level::TRACE.to_string());
    expected
}

#[test]
fn the_header_compiles_warning_free_as_c99_and_cpp17_and_matches_the_rust_types() {
    let source = workspace_root()
        .join("tests")
        .join("fixtures")
        .join("c-planners")
        .join("layout.c");
    let dir = temp_dir("c-layout");
    let expected = expected_layout();
    let mut compilers = vec![("gcc", "g++")];
    if available("clang") && available("clang++") {
        compilers.push(("clang", "clang++"));
    } else {
        eprintln!("clang is not installed: the header is compiled with gcc only");
    }
    for (c, cpp) in compilers {
        for (compiler, language, standard) in [(c, "c", "c99"), (cpp, "c++", "c++17")] {
            let binary = dir.join(format!("layout-{compiler}-{standard}"));
            let mut command = compiler_command(compiler, language, standard, &[]);
            command.arg(&source).arg("-o").arg(&binary);
            compile(command);
            let (values, manifest) = layout_of(&binary);
            assert_eq!(values, expected, "{compiler} -std={standard}");
            // What MEMPLAN_MANIFEST writes is a C manifest the host reads.
            let manifest = parse_manifest(manifest.as_bytes()).expect("a manifest");
            assert_eq!(manifest.interface, PlannerInterface::C);
            assert_eq!(manifest.abi_version.as_deref(), Some(c_abi::C_ABI_VERSION));
            assert_eq!(manifest.planners[0].name, "layout-check");
            assert_eq!(manifest.planners[0].entry, "layout_pack");
        }
    }
}

/// `memplan plan INPUT --planner PLANNER` with the C planners, `--format json`, and `extra`.
fn plan_json(input: &Path, planner: &str, extra: &[&str]) -> (Output, Value) {
    let output = memplan()
        .arg("plan")
        .arg(input)
        .args(["--planner", planner, "--format", "json", "--plugin-dir"])
        .arg(c_planners())
        .arg("--out")
        .arg(temp_dir("c-plan-out"))
        .args(extra)
        .output()
        .expect("start memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", describe(&output)));
    (output, summary)
}

#[test]
fn the_c_and_cpp_examples_plan_a_corpus_model_and_a_minimalloc_instance() {
    let Some(corpus) = require_corpus("c and c++ examples") else {
        return;
    };
    let model = corpus.join("models").join("person_detect.tflite");
    let instance = corpus.join("minimalloc").join("K.1048576.csv");
    let instance_bytes: u64 = std::fs::read_to_string(&instance)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| line.rsplit(',').next().unwrap().parse::<u64>().unwrap())
        .sum();
    for (planner, note) in [
        ("c-first-fit", "first fit in order of lifetime start (C)"),
        ("cpp-best-fit", "best fit by decreasing size in units of"),
    ] {
        let file = c_planners().join(if planner == "c-first-fit" {
            "libc_first_fit.so"
        } else {
            "libcpp_best_fit.so"
        });
        for input in [&model, &instance] {
            // In the sandboxed worker (the default for a third-party file) and in process:
            // the same plan, which the checker accepted (exit 0).
            let (_, isolated) = plan_json(input, planner, &[]);
            let (_, in_process) = plan_json(input, planner, &["--isolate=never"]);
            assert_eq!(isolated["planner"], planner);
            assert_eq!(isolated["planner_file"], file.display().to_string());
            assert!(
                isolated["planner_summary"].as_str().unwrap().contains(note),
                "{planner}: {}",
                isolated["planner_summary"]
            );
            assert_eq!(isolated["plan_hash"], in_process["plan_hash"]);
            assert_eq!(
                isolated["tensor_layout_hash"],
                in_process["tensor_layout_hash"]
            );
            let scratch = &memplan_tests::scratch_arenas(&isolated)[0];
            let size = scratch["size"].as_u64().unwrap();
            assert!(
                size >= scratch["lower_bound"].as_u64().unwrap(),
                "{scratch}"
            );
            if input == &instance {
                // Reuse: well under the sum of the sizes (no reuse), which is 5.6x the bound.
                assert!(
                    size < instance_bytes / 2,
                    "{planner}: {size} of {instance_bytes}"
                );
            }
        }
        // The model's constants were placed by the kit around the C packer, as for Rust.
        let (_, summary) = plan_json(&model, planner, &[]);
        let roles: Vec<&str> = summary["arenas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|arena| arena["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["scratch", "constant"], "{planner}");
    }
}

#[test]
fn memplan_planners_lists_c_planners_and_refuses_another_c_abi_by_its_manifest() {
    let output = memplan()
        .args(["planners", "--format", "json", "--plugin-dir"])
        .arg(c_planners())
        .arg("--plugin-dir")
        .arg(&built().future)
        .output()
        .expect("start memplan");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    let planners = listing["planners"].as_array().unwrap();
    for (name, file, description) in [
        (
            "c-first-fit",
            "libc_first_fit.so",
            "first fit in order of lifetime start, written in C",
        ),
        (
            "cpp-best-fit",
            "libcpp_best_fit.so",
            "best fit by decreasing size, a C++ solver behind the C interface",
        ),
    ] {
        let planner = planners
            .iter()
            .find(|planner| planner["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not listed: {listing}"));
        let path = c_planners().join(file);
        assert_eq!(planner["version"], "1.0.0");
        assert_eq!(planner["description"], description);
        assert_eq!(planner["path"], path.display().to_string());
        assert_eq!(planner["sha256"], sha256_of(&path));
        assert_eq!(planner["shipped"], false);
        assert_eq!(planner["interface"], "c");
    }
    let rejected = listing["rejected"].as_array().unwrap();
    let future = built().future.join("libc_future_abi.so");
    assert!(
        rejected.iter().any(|file| {
            file["path"] == future.display().to_string()
                && file["reason"]
                    .as_str()
                    .unwrap()
                    .contains("C ABI 2.0, but this memplan speaks C ABI 1.0")
        }),
        "{listing}"
    );
    assert!(
        !planners
            .iter()
            .any(|planner| planner["name"] == "c-fixture-future"),
        "{listing}"
    );
}

#[test]
fn a_c_planner_is_pinned_by_its_files_sha256_like_a_rust_one() {
    let file = c_planners().join("libc_first_fit.so");
    let pin = format!("c-first-fit={}", sha256_of(&file));
    let output = plan_tiny("c-first-fit", c_planners(), &["--plugin-sha256", &pin]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let wrong = format!("c-first-fit={}", "0".repeat(64));
    let message = failed_with(
        &plan_tiny("c-first-fit", c_planners(), &["--plugin-sha256", &wrong]),
        4,
    );
    assert!(message.contains("pinned to SHA-256 0000"), "{message}");
}

#[test]
fn a_c_planner_file_others_could_replace_is_refused_like_a_rust_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("c-insecure");
    let file = dir.join("libc_first_fit.so");
    std::fs::copy(c_planners().join("libc_first_fit.so"), &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let message = failed_with(&plan_tiny("c-first-fit", &dir, &[]), 4);
    assert!(
        message.contains("no planner named `c-first-fit`")
            && message.contains("is writable by group and others (mode 666)"),
        "{message}"
    );
}

#[test]
fn the_cmake_build_of_the_examples_installs_planners_memplan_runs() {
    let cmake = std::env::var("MEMPLAN_CMAKE").unwrap_or_else(|_| "cmake".to_string());
    if !available(&cmake) {
        // CI installs it (.ci/run); there the test must not skip.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "cmake is not installed (or MEMPLAN_CMAKE does not name it), and CI=true"
        );
        eprintln!("cmake is not installed (or MEMPLAN_CMAKE does not name it): skipping");
        return;
    }
    let build = temp_dir("c-cmake-build");
    let prefix = temp_dir("c-cmake-prefix");
    let source = workspace_root().join("examples").join("c-planner");
    for args in [
        vec![
            "-S".into(),
            source.display().to_string(),
            "-B".into(),
            build.display().to_string(),
            "-DCMAKE_BUILD_TYPE=Release".into(),
        ],
        vec!["--build".into(), build.display().to_string()],
        vec![
            "--install".into(),
            build.display().to_string(),
            "--prefix".into(),
            prefix.display().to_string(),
        ],
    ] {
        let mut command = Command::new(&cmake);
        command.args(&args);
        compile(command);
    }
    let installed = prefix.join("lib").join("memplan").join("plugins");
    for planner in ["c-first-fit", "cpp-best-fit"] {
        let output = plan_tiny(planner, &installed, &[]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    }
}

/// `memplan plan` on the tiny model with C planner `name`, sandboxed or in process.
fn plan_c(name: &str, isolated: bool, extra: &[&str]) -> Output {
    let mut args = vec![if isolated {
        "--isolate"
    } else {
        "--isolate=never"
    }];
    args.extend_from_slice(extra);
    plan_tiny(name, c_planners(), &args)
}

#[test]
fn a_crashing_c_planner_is_reported_like_a_rust_one() {
    let message = failed_with(&plan_c("c-fixture-segfaults", true, &[]), 4);
    assert!(
        message.contains("memplan: error: planner `c-fixture-segfaults` (")
            && message.contains("signal 11, SIGSEGV (segmentation fault)"),
        "{message}"
    );
    let message = failed_with(&plan_c("c-fixture-segfaults", false, &[]), 4);
    assert!(
        message.contains("crashed memplan's process with SIGSEGV")
            && message.contains("Rerun with --isolate"),
        "{message}"
    );
}

#[test]
fn a_hanging_c_planner_is_stopped_at_the_timeout_like_a_rust_one() {
    let started = Instant::now();
    let message = failed_with(&plan_c("c-fixture-hangs", true, &["--timeout", "0.5"]), 4);
    assert!(
        message.contains("planner `c-fixture-hangs`")
            && message.contains("did not finish within the time limit of 0.5 s"),
        "{message}"
    );
    let message = failed_with(&plan_c("c-fixture-hangs", false, &["--timeout", "1"]), 4);
    assert!(
        message.contains("planner `c-fixture-hangs`") && message.contains("Rerun with --isolate"),
        "{message}"
    );
    // 0.5 s and 1 s, each plus its grace, with room for a slow machine.
    assert!(started.elapsed() < Duration::from_secs(30));
    // One that polls the stop request gets its own message through, as a Rust planner's.
    for isolated in [true, false] {
        let output = plan_c("c-fixture-cooperative", isolated, &["--timeout", "0.5"]);
        let message = failed_with(&output, 4);
        assert!(
            message.contains("planner `c-fixture-cooperative` stopped at the time limit (0.5 s")
                && message.contains("asked to stop after"),
            "{message}"
        );
    }
}

#[test]
fn overlapping_offsets_of_a_c_planner_are_rejected_by_the_checker() {
    for isolated in [true, false] {
        let message = failed_with(&plan_c("c-fixture-overlapping", isolated, &[]), 3);
        assert!(
            message.contains("the plan was rejected by the checker (1 violation)")
                && message.contains("[overlap, contract 5]")
                && message.contains("nothing was written to"),
            "{message}"
        );
    }
}

#[test]
fn too_few_offsets_and_errors_of_a_c_planner_are_plugin_failures_with_its_message() {
    for isolated in [true, false] {
        let message = failed_with(&plan_c("c-fixture-too-few", isolated, &[]), 4);
        assert!(
            message.contains("planner `c-fixture-too-few` (")
                && message.contains("failed: the packer returned 1 offsets for 2 buffers"),
            "{message}"
        );
        let message = failed_with(&plan_c("c-fixture-fails", isolated, &[]), 4);
        assert!(
            message.contains("failed: c fixture gave up on purpose (2 buffers)"),
            "{message}"
        );
        let message = failed_with(&plan_c("c-fixture-no-entry", isolated, &[]), 4);
        assert!(
            message.contains("cannot be loaded: it does not export `c_fixture_absent`"),
            "{message}"
        );
    }
}

#[test]
fn a_cpp_exception_is_caught_at_the_boundary_and_shown_as_the_planners_message() {
    for isolated in [true, false] {
        let output = plan_c(
            "cpp-best-fit",
            isolated,
            &["--planner-options", r#"{"order":"bogus"}"#],
        );
        let message = failed_with(&output, 2);
        assert!(
            message.contains("planner `cpp-best-fit` (")
                && message.contains(
                    "does not accept this request: cpp-best-fit: option \"order\" must be \
                     \"size\" or \"area\", not \"bogus\""
                ),
            "{message}"
        );
    }
}

#[test]
fn a_c_planners_log_lines_and_note_reach_memplan() {
    for isolated in [true, false] {
        let output = plan_c("c-fixture-stacks", isolated, &["-v"]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stdout.contains("planned by c-fixture-stacks (stacked by c-fixture-stacks)"),
            "{}",
            describe(&output)
        );
        let line = stderr
            .lines()
            .find(|line| line.contains("c-fixture-stacks: stacking 2 buffers"))
            .unwrap_or_else(|| panic!("no log line: {}", describe(&output)));
        assert!(line.contains("planner=c-fixture-stacks"), "{line}");
    }
}
