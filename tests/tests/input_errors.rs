//! Bad input stops `memplan plan` before planning with exit code 2 and a message naming the
//! file, the place in it and what is wrong.

use std::path::PathBuf;

use memplan_tests::{describe, run_memplan, temp_dir, workspace_root};

/// Writes `text` to `name` in a fresh directory and returns its path.
fn write(name: &str, text: &str) -> PathBuf {
    let path = temp_dir("input-errors").join(name);
    std::fs::write(&path, text).expect("write input file");
    path
}

/// Runs `memplan plan` with `args` and asserts exit 2 and that stderr contains every one of
/// `expected`.
fn assert_input_error(args: &[&str], expected: &[&str]) {
    let mut full = vec!["plan"];
    full.extend_from_slice(args);
    let output = run_memplan(&full);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    for needle in expected {
        assert!(
            stderr.contains(needle),
            "missing {needle:?}\n{}",
            describe(&output)
        );
    }
    assert!(!stderr.contains("panicked"), "{}", describe(&output));
}

fn model_error(name: &str, text: &str, expected: &[&str]) {
    let path = write(name, text);
    assert_input_error(&[path.to_str().unwrap()], expected);
}

#[test]
fn malformed_truncated_and_empty_json() {
    model_error(
        "malformed.json",
        "{\"version\":1,\n\"tensors\":[}",
        &["malformed.json:2:", "not valid JSON"],
    );
    model_error(
        "truncated.json",
        "{\"version\":1,\n\"tensors\":[{\"id\":",
        &["truncated.json:2:", "truncated"],
    );
    model_error("empty.json", "", &["empty.json: the file is empty"]);
}

#[test]
fn wrong_types_and_bad_sizes_point_at_the_value() {
    model_error(
        "types.json",
        "{\"version\":1,\"tensors\":[\n{\"id\":\"a\",\"size\":true}]}",
        &["types.json:2:", "invalid type"],
    );
    model_error(
        "negative.json",
        "{\"version\":1,\"tensors\":[\n{\"id\":\"a\",\"size\":-8}]}",
        &["negative.json:2:", "negative value -8"],
    );
    model_error(
        "overflow.json",
        r#"{"version":1,"tensors":[{"id":"a","dtype":"float32","shape":[4294967296,4294967296]}]}"#,
        &["overflow.json", "tensor 'a'", "overflows"],
    );
}

#[test]
fn errors_of_meaning_name_the_tensor() {
    model_error(
        "duplicate.json",
        r#"{"version":1,"tensors":[{"id":"a","size":4},{"id":"a","size":8}]}"#,
        &["duplicate.json", "duplicate tensor id 'a'"],
    );
    model_error(
        "unknown.json",
        r#"{"version":1,"tensors":[{"id":"a","size":4}],"operators":[{"type":"relu","inputs":["a"],"outputs":["nope"]}],"inputs":["a"]}"#,
        &[
            "unknown.json",
            "operators[0] (relu)",
            "no tensor has id 'nope'",
        ],
    );
    model_error(
        "cycle.json",
        r#"{"version":1,"tensors":[{"id":"a","size":4,"alias_of":"b"},{"id":"b","size":4,"alias_of":"a"}]}"#,
        &["cycle.json", "alias cycle 'a' -> 'b' -> 'a'"],
    );
    model_error(
        "data.json",
        r#"{"version":1,"tensors":[{"id":"w","dtype":"int8","shape":[4],"data":"AQID"}]}"#,
        &[
            "data.json",
            "tensor 'w'",
            "data is 3 bytes but the tensor is 4 bytes",
        ],
    );
    model_error(
        "unwritten.json",
        r#"{"version":1,"tensors":[{"id":"a","size":4},{"id":"b","size":4}],"operators":[{"type":"add","inputs":["a"],"outputs":["b"]}],"outputs":["b"]}"#,
        &["unwritten.json", "reads tensor 'a'", "not a graph input"],
    );
}

#[test]
fn unknown_memories_targets_and_formats() {
    let model = write(
        "ok.json",
        r#"{"version":1,"tensors":[{"id":"a","kind":"input","size":64},{"id":"b","kind":"output","size":64}],"operators":[{"type":"copy","inputs":["a"],"outputs":["b"]}],"inputs":["a"],"outputs":["b"]}"#,
    );
    let model = model.to_str().unwrap();
    assert_input_error(
        &[model, "--target", "apollo3_evb", "--memory", "PSRAM=4096"],
        &[
            "--memory PSRAM=4096",
            "no memory `PSRAM`",
            "DTCM, SRAM, MRAM",
        ],
    );
    assert_input_error(
        &[model, "--target", "apollo3_evb", "--memory", "DTCM=1000000"],
        &["exceed the 65536 bytes"],
    );
    assert_input_error(
        &[model, "--target", "apollo9_evb"],
        &["apollo9_evb", "apollo510_evb"],
    );
    let rules = write(
        "rules.json",
        r#"[{"type":"scratch","attributes":{"memory":"TCM"}}]"#,
    );
    assert_input_error(
        &[model, "--rules", rules.to_str().unwrap()],
        &["rules.json: rule 0: memory `TCM`", "SRAM, FLASH"],
    );
    let unknown = write("model.onnx", "x");
    assert_input_error(
        &[unknown.to_str().unwrap()],
        &["model.onnx", "unknown model format"],
    );
}

#[test]
fn bad_minimalloc_csv_names_the_line() {
    model_error(
        "bad.csv",
        "id,lower,upper,size\na,0,3,16\nb,5,2,16\n",
        &["bad.csv:3:", "lower 5 must be below upper 2"],
    );
}

#[test]
fn the_shipped_example_passes_read_and_analysis() {
    let example = workspace_root().join("examples/tiny_conv.json");
    let output = run_memplan(["plan".as_ref(), example.as_os_str()]);
    assert_ne!(output.status.code(), Some(2), "{}", describe(&output));
    let rules = workspace_root().join("examples/apollo3_rules.json");
    let limits = workspace_root().join("examples/limits.json");
    let output = run_memplan([
        "plan".as_ref(),
        example.as_os_str(),
        "--target".as_ref(),
        "apollo3_evb".as_ref(),
        "--rules".as_ref(),
        rules.as_os_str(),
        "--memory".as_ref(),
        limits.as_os_str(),
    ]);
    assert_ne!(output.status.code(), Some(2), "{}", describe(&output));
}

/// A model may only take constant bytes from files inside its own directory: an absolute path
/// or a symbolic link leading out stops `plan` with exit 2 (nothing written), while a path into
/// a subdirectory plans.
#[test]
fn data_files_outside_the_model_directory_are_refused() {
    let outside = temp_dir("data-file-outside").join("secret.key");
    std::fs::write(&outside, b"PRIVATE").expect("write the outside file");
    let dir = temp_dir("data-file-model");
    let model_reading = |name: &str, path: &str| {
        let doc = serde_json::json!({
            "version": 1,
            "tensors": [
                {"id": "in", "kind": "input", "size": 16},
                {"id": "w", "dtype": "int8", "shape": [7], "data_file": {"path": path}},
                {"id": "out", "kind": "output", "size": 16}
            ],
            "operators": [{"type": "add", "inputs": ["in", "w"], "outputs": ["out"]}],
            "inputs": ["in"],
            "outputs": ["out"]
        });
        let model = dir.join(name);
        std::fs::write(&model, doc.to_string()).expect("write the model");
        model
    };
    let out = dir.join("out");
    let plan = |model: &std::path::Path| {
        run_memplan([
            "plan".as_ref(),
            model.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
    };
    let refused = |model: &std::path::Path, expected: &[&str]| {
        let output = plan(model);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        let model_name = model.display().to_string();
        for needle in [
            model_name.as_str(),
            "tensor 'w'",
            "put the data file in the model's directory or a subdirectory",
        ]
        .iter()
        .chain(expected)
        {
            assert!(
                stderr.contains(needle),
                "missing {needle:?}\n{}",
                describe(&output)
            );
        }
        assert!(!out.exists(), "a refused model wrote {}", out.display());
    };

    let absolute = outside.display().to_string();
    refused(
        &model_reading("absolute.json", &absolute),
        &[&format!("data_file path `{absolute}` is absolute")],
    );
    refused(
        &model_reading("up.json", "../secret.key"),
        &["data_file path `../secret.key` goes up a directory"],
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, dir.join("key.bin")).expect("make the link");
        refused(
            &model_reading("linked.json", "key.bin"),
            &[
                "data_file path `key.bin` leads through a symbolic link",
                "outside the model's directory",
            ],
        );
    }

    std::fs::create_dir_all(dir.join("data")).expect("make the data directory");
    std::fs::write(dir.join("data/w.bin"), b"weights").expect("write the data file");
    let output = plan(&model_reading("inside.json", "data/w.bin"));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

#[test]
fn absurd_alignments_are_input_errors_not_planner_failures() {
    // Three buffers aligned to 2^63 used to reach the planner and come back as exit 3 with
    // offset u64::MAX; a target's min_alignment 2^62 used to panic later.
    model_error(
        "huge_alignment.csv",
        "id,lower,upper,size,alignment\na,0,2,16,9223372036854775808\nb,0,2,16,9223372036854775808\nc,0,2,16,9223372036854775808\n",
        &["buffer 'a'", "alignment 9223372036854775808 is larger than memplan accepts"],
    );
    let target = write(
        "huge_alignment_target.json",
        r#"{"name":"odd","min_alignment":4611686018427387904,"memories":[{"name":"SRAM","capacity":65536,"writable":true,"order":0}]}"#,
    );
    let model = workspace_root().join("examples/tiny_conv.json");
    assert_input_error(
        &[
            &model.display().to_string(),
            "--target",
            &target.display().to_string(),
        ],
        &["min_alignment", "larger than memplan accepts"],
    );
}

#[test]
fn contradictory_fixed_placements_are_the_model_s_fault() {
    // Two live 16-byte buffers fixed at 0 and 8: no plan can keep both, and the checker used
    // to blame the planner (exit 3).
    model_error(
        "contradiction.csv",
        "id,lower,upper,size,offset\na,0,3,16,0\nb,1,4,16,8\nc,5,6,16,0\n",
        &[
            "fixed placements contradict each other",
            "'a' (bytes 0..16, steps 0..=2) and 'b' (bytes 8..24, steps 1..=3)",
        ],
    );
    model_error(
        "contradiction.json",
        r#"{"version":1,"tensors":[
            {"id":"x","kind":"intermediate","size":32,"fixed_offset":0,"lifetime":[0,2]},
            {"id":"y","kind":"intermediate","size":32,"fixed_offset":16,"lifetime":[2,3]}]}"#,
        &["'x' (bytes 0..32, steps 0..=2) and 'y' (bytes 16..48, steps 2..=3)"],
    );
}

#[test]
fn inputs_that_are_not_regular_files_are_refused_by_name() {
    let dir = temp_dir("input-kinds");
    // A FIFO would block the read forever; a device would never end.
    let fifo = dir.join("pipe.json");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(status.success());
    assert_input_error(
        &[fifo.to_str().unwrap()],
        &["is a named pipe (FIFO), not a file"],
    );
    let zero = dir.join("zero.tflite");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    assert_input_error(&[zero.to_str().unwrap()], &["is a device, not a file"]);
    let folder = dir.join("folder.csv");
    std::fs::create_dir(&folder).unwrap();
    assert_input_error(&[folder.to_str().unwrap()], &["is a directory, not a file"]);
    // A large file that is not a model is refused from its header (a sparse 2 GiB file).
    let big = dir.join("big.tflite");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    assert_input_error(
        &[big.to_str().unwrap()],
        &["not a TFLite model: file identifier"],
    );
    std::fs::remove_file(&big).unwrap();
}

#[test]
fn constants_far_into_their_arena_are_input_errors_not_gigabytes_or_a_panic() {
    // 512 MiB, 1 TiB and 2^63: memplan would write the padding out in full, or overflow.
    for offset in ["536870912", "1099511627776", "9223372036854775808"] {
        model_error(
            &format!("far-constant-{offset}.json"),
            &format!(
                r#"{{"version": 1,
                "tensors": [
                  {{"id": "w", "kind": "constant", "dtype": "int8", "shape": [4],
                    "data": "AAECAw==", "fixed_offset": {offset}}},
                  {{"id": "x", "kind": "input", "size": 16}}],
                "operators": [{{"type": "ADD", "inputs": ["x", "w"], "outputs": ["x"]}}],
                "inputs": ["x"], "outputs": ["x"]}}"#
            ),
            &["tensor 'w'", &format!("fixed_offset {offset}"), "256 MiB"],
        );
    }
}

/// Runs `memplan ARGS`, killing it after 60 seconds (a run that would wait forever must fail the
/// test, not hang it).
fn run_memplan_within_a_minute(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut child = memplan_tests::memplan()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start memplan");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!("memplan did not finish in a minute: {}", describe(&output));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn every_input_file_is_opened_one_way_pipes_devices_and_oversized_files_refused() {
    let dir = temp_dir("every-input");
    let model = workspace_root().join("examples").join("tiny_conv.json");
    let fifo = dir.join("pipe.json");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(status.success());
    let zero = dir.join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    // Sparse files: no disk space, but above the caps (2 GiB for models and plans, 64 MiB for
    // targets and rules).
    let sparse = |name: &str, len: u64| {
        let path = dir.join(name);
        std::fs::File::create(&path).unwrap().set_len(len).unwrap();
        path
    };
    let huge_json = sparse("huge.json", 50 << 30);
    let huge_csv = sparse("huge.csv", 3 << 30);
    let huge_target = sparse("huge_target.json", 100 << 20);
    let huge_rules = sparse("huge_rules.json", 100 << 20);
    let huge_plan = sparse("huge_plan.json", 3 << 30);
    let data_model = dir.join("data.json");
    std::fs::write(
        &data_model,
        r#"{"version":1,"tensors":[
            {"id":"w","kind":"constant","size":4,"data_file":{"path":"pipe.json"}}]}"#,
    )
    .unwrap();

    let out = dir.join("out");
    let strings = |args: &[&std::ffi::OsStr]| -> Vec<std::ffi::OsString> {
        args.iter().map(|arg| arg.to_os_string()).collect()
    };
    let plan = |input: &std::path::Path| {
        strings(&[
            "plan".as_ref(),
            input.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
    };
    let check = |plan_file: &std::path::Path| {
        strings(&["check".as_ref(), model.as_os_str(), plan_file.as_os_str()])
    };
    let flag = |name: &str, value: &std::path::Path| {
        let mut args = plan(&model);
        args.extend(strings(&[name.as_ref(), value.as_os_str()]));
        args
    };
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (
            check(&fifo),
            "is a named pipe (FIFO), not a file (reading it could wait forever)",
        ),
        (
            check(&zero),
            "is a device, not a file (reading it might never end)",
        ),
        (
            check(&huge_plan),
            "more than the 2048 MiB memplan reads as a plan file",
        ),
        (
            plan(&huge_json),
            "is 53687091200 bytes, more than the 2048 MiB memplan reads",
        ),
        (plan(&huge_csv), "memplan reads as a MiniMalloc"),
        (
            flag("--target", &huge_target),
            "more than the 64 MiB memplan reads as a target JSON",
        ),
        (flag("--target", &fifo), "is a named pipe (FIFO)"),
        (flag("--rules", &huge_rules), "the 64 MiB memplan reads"),
        (flag("--rules", &zero), "is a device"),
        (plan(&data_model), "pipe.json: is a named pipe (FIFO)"),
    ];
    for (args, expected) in cases {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|arg| arg.as_os_str()).collect();
        let output = run_memplan_within_a_minute(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            describe(&output)
        );
        assert!(
            stderr.contains(expected),
            "{args:?}: missing {expected:?}: {}",
            describe(&output)
        );
    }
}
