//! The greedy packing on the shared corpus (`MEMPLAN_CORPUS`): TFLite Micro's own greedy
//! figures with `{"fit":"first"}`, and the MiniMalloc challenge instances within 1.45x of the
//! lower bound with the default best fit.

use memplan_planner_greedy_bestfit::GreedyPacker;
use memplan_planner_kit::testing::{assert_valid_packing, corpus_dir, csv_files, read_minimalloc};
use memplan_planner_kit::{arena_lower_bound, Buffer, Packer};
use memplan_plugin_api::HostContext;

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
        let buffers = read_minimalloc(&dir.join(file)).unwrap();
        assert_eq!(pack(&buffers, r#"{"fit":"first"}"#), tflm, "{file}");
    }
}

#[test]
fn best_fit_is_within_1_45_of_the_lower_bound_on_minimalloc_instances() {
    let Some(dir) = corpus_dir("minimalloc") else {
        eprintln!("MEMPLAN_CORPUS is not set; skipping");
        return;
    };
    let files = csv_files(&dir);
    assert!(
        files.len() >= 6,
        "expected the six challenge instances in {}",
        dir.display()
    );
    for path in files {
        let buffers = read_minimalloc(&path).unwrap();
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
    let buffers = read_minimalloc(&dir.join("K.1048576.csv")).unwrap();
    let packer = GreedyPacker::default();
    let first = packer.pack(&buffers, &HostContext::detached()).unwrap();
    for _ in 0..3 {
        assert_eq!(
            packer.pack(&buffers, &HostContext::detached()).unwrap(),
            first
        );
    }
}
