//! The greedy packing on the shared corpus (`MEMPLAN_CORPUS`): TFLite Micro's own greedy
//! figures with `{"fit":"first"}`, and the MiniMalloc challenge instances within 1.45x of the
//! lower bound with the default best fit.

use std::path::Path;

use memplan_planner_greedy_bestfit::GreedyPacker;
use memplan_planner_kit::testing::{
    assert_valid_packing, buffers_from_rows, corpus_dir,
};
use memplan_planner_kit::{arena_lower_bound, Buffer, Packer};
use memplan_plugin_api::HostContext;

/// One corpus file's buffers, read by the host's MiniMalloc reader.
fn read_buffers(path: &Path) -> Vec<Buffer> {
    let model = memplan::input::read_model(path).unwrap_or_else(|error| panic!("{error}"));
    buffers_from_rows(model.tensors.iter().map(|t| {
        (
            t.size,
            t.alignment,
            t.lifetime.expect("CSV rows have lifetimes"),
            t.fixed_offset,
        )
    }))
}

fn pack(buffers: &[Buffer], options: &str) -> u64 {
    let packing = GreedyPacker::from_options(options)
        .unwrap()
        .pack(buffers, &HostContext::detached())
        .unwrap();
    assert_valid_packing(buffers, &packing);
    packing.height
}

#[test]
fn first_fit_reproduces_tflm_greedy_figures() {
    let Some(dir) = corpus_dir("tflm-traces") else {
        eprintln!("MEMPLAN_CORPUS is not set; skipping");
        return;
    };
    for (file, tflm) in [
        ("greedy_medium_test.csv", 90),
        ("greedy_overlap_test.csv", 120),
        ("person_detection_greedy_test.csv", 64512),
    ] {
        let buffers = read_buffers(&dir.join(file));
        assert_eq!(pack(&buffers, r#"{"fit":"first"}"#), tflm, "{file}");
    }
}

#[test]
fn best_fit_is_within_1_45_of_the_lower_bound_on_minimalloc_instances() {
    let Some(dir) = corpus_dir("minimalloc") else {
        eprintln!("MEMPLAN_CORPUS is not set; skipping");
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "csv"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 6,
        "expected the six challenge instances in {}",
        dir.display()
    );
    for path in files {
        let buffers = read_buffers(&path);
        let (height, bound) = (pack(&buffers, "{}"), arena_lower_bound(&buffers));
        assert!(
            height as f64 <= 1.45 * bound as f64,
            "{}: height {height} > 1.45 x lower bound {bound}",
            path.display()
        );
    }
}

#[test]
fn packing_the_corpus_is_deterministic() {
    let Some(dir) = corpus_dir("minimalloc") else {
        eprintln!("MEMPLAN_CORPUS is not set; skipping");
        return;
    };
    let buffers = read_buffers(&dir.join("K.1048576.csv"));
    let packer = GreedyPacker::default();
    let first = packer.pack(&buffers, &HostContext::detached()).unwrap();
    for _ in 0..3 {
        assert_eq!(
            packer.pack(&buffers, &HostContext::detached()).unwrap(),
            first
        );
    }
}
