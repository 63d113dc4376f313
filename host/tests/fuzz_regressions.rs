//! Regression tests for what fuzzing found (`docs/fuzzing.md`): every input that made a
//! reader panic or allocate beyond its bound is kept under `tests/fuzz_regressions/TARGET/`,
//! and each must now be refused with an error, without a panic, within the same allocation
//! bound the fuzz targets check (`fuzz/src/allocation.rs`, shared by path so both measure
//! the same way).

#[path = "../../fuzz/src/allocation.rs"]
mod allocation;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use memplan::analyze::lifetimes::tflite_micro::resolve;
use memplan::input::csv::read_minimalloc_csv_bytes;
use memplan::input::json::read_model_json_bytes;
use memplan::input::tflite::read_tflite_bytes;
use memplan::Result;

#[global_allocator]
static ALLOCATOR: allocation::CountingAllocator = allocation::CountingAllocator;

/// The stored inputs of one fuzz target, sorted by name.
fn regressions(target: &str) -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|err| panic!("{}: {err}", directory.display()))
        .map(|entry| entry.expect("directory entry").path())
        // Subdirectories hold what inputs refer to (a model JSON's data files).
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no inputs", directory.display());
    files
}

/// Feeds every stored input of `target` to `read`; each must give an error, not panic,
/// and stay within the allocation bound. Reports every failing file at once.
fn assert_all_refused<T: std::fmt::Debug>(target: &str, read: impl Fn(&[u8], &Path) -> Result<T>) {
    let mut failures = Vec::new();
    for file in regressions(target) {
        let bytes = std::fs::read(&file).expect("readable regression input");
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            allocation::within_allocation_bound(&bytes, |bytes| read(bytes, &file).map(|_| ()))
        }));
        match outcome {
            Ok(Err(_)) => {}
            Ok(Ok(())) => failures.push(format!("{}: was accepted", file.display())),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                failures.push(format!("{}: panicked: {message}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn tflite_regressions_are_refused() {
    // Reading and TFLite Micro's rule (which refuses what the graph cannot plan).
    assert_all_refused("tflite", |bytes, path| {
        read_tflite_bytes(bytes, path).and_then(resolve)
    });
}

/// Read at their own path, so that relative `data_file` paths resolve next to them.
#[test]
fn model_json_regressions_are_refused() {
    assert_all_refused("model_json", read_model_json_bytes);
}

/// The bound is not so tight that real inputs break it: every real model, MiniMalloc
/// instance and example reads within it (the shared corpus when `MEMPLAN_CORPUS` is set,
/// the repository's examples always). Prints each input's peak per input byte.
#[test]
fn real_inputs_stay_within_the_allocation_bound() {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut add = |directory: &Path, extension: &str| {
        let entries = std::fs::read_dir(directory)
            .unwrap_or_else(|err| panic!("{}: {err}", directory.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.extension().is_some_and(|found| found == extension) {
                inputs.push(path);
            }
        }
    };
    add(&repository.join("examples"), "json");
    if let Some(corpus) = memplan_planner_kit::testing::corpus_root() {
        add(&corpus.join("models"), "tflite");
        add(&corpus.join("minimalloc"), "csv");
        add(&corpus.join("tflm-traces"), "csv");
    }
    inputs.sort();
    let mut failures = Vec::new();
    for path in &inputs {
        let bytes = std::fs::read(path).expect("readable input");
        let (read, peak) = allocation::peak_allocation(&bytes, |bytes| {
            match path.extension().and_then(|extension| extension.to_str()) {
                Some("tflite") => read_tflite_bytes(bytes, path).and_then(resolve).map(drop),
                Some("csv") => read_minimalloc_csv_bytes(bytes, path).map(drop),
                // Examples include targets and rules: only the reading's memory matters here.
                _ => read_model_json_bytes(bytes, path).map(drop),
            }
        });
        let bound = allocation::allocation_bound(bytes.len());
        println!(
            "{}: {} bytes, peak {peak} ({:.1} per byte), {}",
            path.display(),
            bytes.len(),
            peak as f64 / bytes.len().max(1) as f64,
            if read.is_ok() { "read" } else { "refused" }
        );
        if peak > bound {
            failures.push(format!("{}: peak {peak} > bound {bound}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
