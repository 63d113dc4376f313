//! The output directory is replaced only by a run that succeeds: a failed `memplan plan`
//! leaves it exactly as it was.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use memplan_tests::{describe, run_memplan, temp_dir};

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let contents = if entry.file_type().unwrap().is_dir() {
                Vec::new()
            } else {
                fs::read(entry.path()).unwrap()
            };
            (entry.file_name().to_string_lossy().into_owned(), contents)
        })
        .collect()
}

#[test]
fn a_failed_run_leaves_the_previous_output_untouched() {
    let dir = temp_dir("failed-run");
    let out = dir.join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("model_tensors.h"), b"/* previous output */\n").unwrap();
    fs::write(out.join("model_plan.json"), b"{\"previous\": true}\n").unwrap();
    let model = dir.join("broken.json");
    fs::write(&model, b"{ this is not a model").unwrap();
    let before = snapshot(&dir);
    let previous = snapshot(&out);

    let output = run_memplan([
        "plan".as_ref(),
        model.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_ne!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(output.status.code().is_some(), "{}", describe(&output));
    assert_eq!(snapshot(&out), previous, "{}", describe(&output));
    assert_eq!(
        snapshot(&dir),
        before,
        "no temporary or backup directory may remain: {}",
        describe(&output)
    );
}

#[test]
fn bad_output_options_are_usage_errors_reported_before_reading_the_model() {
    let dir = temp_dir("bad-output-options");
    // The model does not exist: these runs must fail on the options, before reading it.
    let model = dir.join("missing.json");

    let output = run_memplan([
        "plan".as_ref(),
        model.as_os_str(),
        "--prefix".as_ref(),
        "my-model".as_ref(),
        "--out".as_ref(),
        dir.join("out").as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--prefix `my-model`"),
        "{}",
        describe(&output)
    );

    let sources = dir.join("src");
    fs::create_dir(&sources).unwrap();
    fs::write(sources.join("main.c"), b"int main(void) { return 0; }\n").unwrap();
    let output = run_memplan([
        "plan".as_ref(),
        model.as_os_str(),
        "--out".as_ref(),
        sources.as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("main.c"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        fs::read(sources.join("main.c")).unwrap(),
        b"int main(void) { return 0; }\n"
    );
    let entries: Vec<String> = snapshot(&dir).into_keys().collect();
    assert_eq!(entries, ["src"], "nothing else is created");
}

#[test]
fn files_of_the_user_that_look_like_memplans_are_never_deleted() {
    let dir = temp_dir("firmware-out");
    let out = dir.join("fw");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("firmware.bin"), b"\x7fELF firmware").unwrap();
    fs::write(out.join("sensor_plan.json"), b"{\"sensor\": 1}").unwrap();
    let before = snapshot(&out);
    let plan = |out: &Path| {
        run_memplan([
            "plan".as_ref(),
            memplan_tests::tiny_model().as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
    };
    let output = plan(&out);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no .memplan-manifest"),
        "{}",
        describe(&output)
    );
    assert_eq!(snapshot(&out), before);

    // memplan's own output directory is replaced run after run.
    let ours = dir.join("ours");
    for _ in 0..2 {
        let output = plan(&ours);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    }
    assert!(ours.join(".memplan-manifest").is_file());
}
