use std::path::PathBuf;

use super::*;

/// Writes `text` to a fresh file `name` and reads it as a model.
fn read(name: &str, text: &str) -> Result<Model> {
    let dir = std::env::temp_dir().join(format!("memplan-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    read_model_json(&path)
}

fn error(name: &str, text: &str) -> String {
    let error = read(name, text).unwrap_err();
    assert_eq!(error.kind, crate::ErrorKind::Input, "{}", error.message);
    error.message
}

fn tensors(list: &str) -> String {
    format!(r#"{{"version":1,"tensors":[{list}]}}"#)
}

#[test]
fn the_minimal_model_reads_with_inferred_kinds() {
    let model = read(
        "minimal.json",
        r#"{"version":1,"tensors":[{"id":"a","kind":"input","size":64},{"id":"b","kind":"output","size":64}],"operators":[{"type":"copy","inputs":["a"],"outputs":["b"]}],"inputs":["a"],"outputs":["b"]}"#,
    )
    .unwrap();
    assert_eq!(model.tensors.len(), 2);
    assert_eq!(model.operators[0].inputs, vec![0]);
    assert_eq!(
        (model.inputs.clone(), model.outputs.clone()),
        (vec![0], vec![1])
    );

    let model = read(
        "inferred.json",
        r#"{"version":1,"tensors":[{"id":0,"size":4},{"id":1,"size":4},{"id":2,"dtype":"int16","shape":[2],"data":"AQACAA=="},{"id":3,"size":8}],
           "operators":[{"type":"add","inputs":[0,2],"outputs":[3]},{"type":"neg","inputs":[3],"outputs":[1]}],"inputs":[0],"outputs":["1"]}"#,
    )
    .unwrap();
    let kinds: Vec<TensorKind> = model.tensors.iter().map(|t| t.kind).collect();
    use TensorKind::*;
    assert_eq!(kinds, vec![Input, Output, Constant, Intermediate]);
    assert_eq!(model.tensors[2].id, "2");
    assert_eq!(model.tensors[2].element_size, 2);
    assert_eq!(model.tensors[2].data.as_deref(), Some(&[1u8, 0, 2, 0][..]));
}

#[test]
fn data_file_ranges_are_read_relative_to_the_model() {
    let dir = std::env::temp_dir().join(format!("memplan-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.bin"), [9u8, 8, 7, 6, 5, 4]).unwrap();
    let model = read(
        "datafile.json",
        &tensors(
            r#"{"id":"w","kind":"constant","size":3,"data_file":{"path":"w.bin","offset":2}}"#,
        ),
    )
    .unwrap();
    assert_eq!(model.tensors[0].data.as_deref(), Some(&[7u8, 6, 5][..]));
    let message = error(
        "datafile-bad.json",
        &tensors(
            r#"{"id":"w","kind":"constant","size":3,"data_file":{"path":"w.bin","offset":4}}"#,
        ),
    );
    assert!(
        message.contains("tensor 'w' (tensors[0]): data_file"),
        "{message}"
    );
    assert!(message.contains("outside the file (6 bytes)"), "{message}");
}

/// A fresh directory `label` for one test of the data_file policy.
fn policy_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "memplan-json-policy-{}-{label}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `dir/model.json`, whose one constant (3 bytes) reads `data_path`.
fn policy_model(dir: &Path, data_path: &str) -> PathBuf {
    let model = dir.join("model.json");
    let doc = serde_json::json!({
        "version": 1,
        "tensors": [{"id": "w", "kind": "constant", "size": 3, "data_file": {"path": data_path}}]
    });
    std::fs::write(&model, doc.to_string()).unwrap();
    model
}

/// A fresh directory with a model reading `data_path`: `(directory, model)`.
fn policy_case(label: &str, data_path: &str) -> (PathBuf, PathBuf) {
    let dir = policy_dir(label);
    let model = policy_model(&dir, data_path);
    (dir, model)
}

/// Reads the model of [`policy_case`] and returns the input error's message.
fn policy_refusal(model: &Path) -> String {
    let error = read_model_json(model).unwrap_err();
    assert_eq!(error.kind, crate::ErrorKind::Input, "{}", error.message);
    let message = error.message;
    assert!(
        message.starts_with(&format!("{}: tensor 'w' (tensors[0]): ", model.display())),
        "{message}"
    );
    assert!(
        message.contains("put the data file in the model's directory or a subdirectory"),
        "{message}"
    );
    message
}

#[test]
fn data_file_paths_in_a_subdirectory_are_read() {
    let (dir, model) = policy_case("subdir", "weights/w.bin");
    std::fs::create_dir_all(dir.join("weights")).unwrap();
    std::fs::write(dir.join("weights/w.bin"), [1u8, 2, 3]).unwrap();
    let model = read_model_json(&model).unwrap();
    assert_eq!(model.tensors[0].data.as_deref(), Some(&[1u8, 2, 3][..]));
}

#[test]
fn absolute_data_file_paths_are_refused_even_inside_the_directory() {
    let dir = policy_dir("absolute");
    std::fs::write(dir.join("w.bin"), [1u8, 2, 3]).unwrap();
    let absolute = dir.join("w.bin").display().to_string();
    let model = policy_model(&dir, &absolute);
    let message = policy_refusal(&model);
    assert!(
        message.contains(&format!("data_file path `{absolute}` is absolute")),
        "{message}"
    );
}

#[test]
fn data_file_paths_going_up_are_refused() {
    // A file that exists next to the model's directory.
    let dir = policy_dir("dotdot");
    let outside = dir.with_extension("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.bin"), [1u8, 2, 3]).unwrap();
    let up = format!(
        "../{}/secret.bin",
        outside.file_name().unwrap().to_str().unwrap()
    );
    let message = policy_refusal(&policy_model(&dir, &up));
    assert!(
        message.contains(&format!("data_file path `{up}` goes up a directory (`..`)")),
        "{message}"
    );
    // Even when it would come back inside.
    let (dir, model) = policy_case("dotdot-inside", "sub/../w.bin");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("w.bin"), [1u8, 2, 3]).unwrap();
    assert!(policy_refusal(&model).contains("goes up a directory"));
}

#[test]
fn empty_and_directory_data_file_paths_are_refused() {
    for (label, path) in [
        ("empty", ""),
        ("slash", "weights/"),
        ("dot", "weights/."),
        ("cwd", "."),
    ] {
        let (dir, model) = policy_case(label, path);
        std::fs::create_dir_all(dir.join("weights")).unwrap();
        let message = policy_refusal(&model);
        let what = if path.is_empty() {
            "is empty"
        } else {
            "names a directory, not a file"
        };
        assert!(
            message.contains(&format!("data_file path `{path}` {what}")),
            "{path}: {message}"
        );
    }
}

#[cfg(unix)]
#[test]
fn symbolic_links_out_of_the_model_directory_are_refused() {
    let (dir, model) = policy_case("symlink-out", "w.bin");
    let outside = dir.with_extension("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.bin"), [1u8, 2, 3]).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.bin"), dir.join("w.bin")).unwrap();
    let message = policy_refusal(&model);
    let canonical = std::fs::canonicalize(outside.join("secret.bin")).unwrap();
    assert!(
        message.contains(&format!(
            "data_file path `w.bin` leads through a symbolic link to {}, outside the model's directory",
            canonical.display()
        )),
        "{message}"
    );
    // A linked directory leading out is refused the same way.
    let (dir, model) = policy_case("symlink-dir-out", "linked/secret.bin");
    std::os::unix::fs::symlink(&outside, dir.join("linked")).unwrap();
    assert!(policy_refusal(&model).contains("outside the model's directory"));
    // A link that stays inside the directory is fine.
    let (dir, model) = policy_case("symlink-in", "w.bin");
    std::fs::create_dir_all(dir.join("real")).unwrap();
    std::fs::write(dir.join("real/data.bin"), [4u8, 5, 6]).unwrap();
    std::os::unix::fs::symlink("real/data.bin", dir.join("w.bin")).unwrap();
    let model = read_model_json(&model).unwrap();
    assert_eq!(model.tensors[0].data.as_deref(), Some(&[4u8, 5, 6][..]));
}

#[test]
fn syntax_and_type_errors_carry_line_and_column() {
    let cases = [
        (
            "truncated.json",
            "{\"version\":1,\n\"tensors\":[{\"id\":\"a\",",
            "truncated.json:2:",
            "truncated",
        ),
        (
            "malformed.json",
            "{\"version\":1,\n\"tensors\":[}\n",
            "malformed.json:2:",
            "not valid JSON",
        ),
        (
            "types.json",
            "{\"version\":1,\n\"tensors\":[{\"id\":\"a\",\n \"size\":\"64\"}]}",
            "types.json:3:",
            "invalid type",
        ),
        (
            "negative.json",
            "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"size\":-4}]}",
            "negative.json:1:",
            "negative value -4",
        ),
        (
            "huge.json",
            "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"size\":1e30}]}",
            "huge.json:1:",
            "a number beyond 2^64 - 1",
        ),
        (
            "unknown-field.json",
            "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"sise\":4}]}",
            "unknown-field.json:1:",
            "unknown field `sise`",
        ),
        (
            "kind.json",
            "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"kind\":\"weight\",\"size\":4}]}",
            "kind.json:1:",
            "unknown variant `weight`",
        ),
        (
            "fraction.json",
            "{\"version\":1,\"tensors\":[{\"id\":\"a\",\"size\":4.5}]}",
            "fraction.json:1:",
            "4.5 is not a whole number",
        ),
        (
            "float-id.json",
            "{\"version\":1,\"tensors\":[{\"id\":1.5,\"size\":4}]}",
            "float-id.json:1:",
            "a tensor id",
        ),
    ];
    for (name, text, position, what) in cases {
        let message = error(name, text);
        assert!(message.contains(position), "{name}: {message}");
        assert!(message.contains(what), "{name}: {message}");
    }
    let message = error("empty.json", " \n");
    assert!(
        message.contains("empty.json: the file is empty"),
        "{message}"
    );
}

#[test]
fn semantic_errors_name_the_tensor() {
    let cases = [
        (tensors(r#"{"id":"a","size":4},{"id":"a","size":4}"#), "tensors[1]: duplicate tensor id 'a' (first used by tensors[0])"),
        (tensors(r#"{"id":"a","size":4,"alias_of":"zz"}"#), "tensor 'a' (tensors[0]): alias_of: no tensor has id 'zz'"),
        (tensors(r#"{"id":"a","dtype":"int32","shape":[4294967296,4294967296]}"#), "tensor 'a' (tensors[0]): the shape's byte size overflows"),
        (tensors(r#"{"id":"a","size":1000000000000000000}"#), "larger than memplan accepts"),
        (tensors(r#"{"id":"a","kind":"constant","size":4,"data":"AAAA"}"#), "tensor 'a' (tensors[0]): its data is 3 bytes but the tensor is 4 bytes"),
        (tensors(r#"{"id":"a","kind":"constant","size":4,"data":"AA*A"}"#), "not valid base64"),
        (tensors(r#"{"id":"a","kind":"constant","size":4}"#), "a constant needs its bytes"),
        (tensors(r#"{"id":"a","kind":"intermediate","size":1,"data":"AA=="}"#), "intermediate tensors cannot carry data"),
        (tensors(r#"{"id":"a","shape":[2]}"#), "`shape` needs a `dtype`"),
        (tensors(r#"{"id":"a","dtype":"int8","shape":[2],"size":3}"#), "`size` 3 disagrees"),
        (tensors(r#"{"id":"a","dtype":"int3","size":3}"#), "unknown dtype `int3`"),
        (tensors(r#"{"id":"a"}"#), "no size"),
        (tensors(r#"{"id":"a","size":4,"alignment":6}"#), "alignment 6 is not a power of two"),
        (tensors(r#"{"id":"a","size":18446744073709551616}"#), "a number beyond 2^64 - 1 (18446744073709551615)"),
        (tensors(r#"{"id":"a","size":4,"alignment":4611686018427387904}"#), "alignment 4611686018427387904 is larger than memplan accepts (16777216, 16 MiB)"),
        (tensors(r#"{"id":"a","size":4,"lifetime":[3,1]}"#), "lifetime [3, 1] ends before it starts"),
        (r#"{"version":1,"tensors":[{"id":"a","size":4}],"operators":[{"type":"relu","inputs":["a"],"outputs":["b"]}]}"#.to_string(), "operators[0] (relu): outputs[0]: no tensor has id 'b'"),
        (r#"{"version":1,"tensors":[],"inputs":["x"]}"#.to_string(), "inputs[0]: no tensor has id 'x'"),
        (r#"{"version":2,"tensors":[]}"#.to_string(), "version 2 is not supported"),
    ];
    for (text, expected) in cases {
        let message = error("semantic.json", &text);
        assert!(
            message.starts_with(&format!("{}", std::env::temp_dir().display())),
            "{message}"
        );
        assert!(message.contains("semantic.json:"), "{message}");
        assert!(message.contains(expected), "{text}\n{message}");
    }
}
