//! Fuzz target: the plan file reader (`memplan check`'s input) on arbitrary bytes, against
//! the analysis of a fixed small model, and the checker on whatever plan it resolves. Reading must
//! return (plan or error) and checking must return (checked plan or violations) without
//! panicking, together within the allocation bound of `memplan_fuzz`.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use memplan::analyze::{analyze, Analysis};
use memplan::check::check_resolved_plan;
use memplan::input::json::read_model_json_bytes;
use memplan::input::{Constraints, Rules, Target};
use memplan::plan_file::read_plan_text;

/// A model with one tensor of each kind the checker treats differently: input, output,
/// intermediate, a view of the intermediate, a constant and a persistent tensor pinned at
/// an offset. The seed `fuzz/seeds/plan_json/fixed_model_plan.json` is a valid plan of it.
const MODEL: &str = r#"{"version": 1, "tensors": [
  {"id": "0", "name": "in", "kind": "input", "size": 16},
  {"id": "1", "name": "out", "kind": "output", "size": 16},
  {"id": "2", "name": "mid", "size": 48},
  {"id": "view", "size": 16, "alias_of": "2", "alias_offset": 16},
  {"id": "w", "name": "weights", "size": 32, "data": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"},
  {"id": "state", "kind": "persistent", "size": 8, "fixed_offset": 0}],
 "operators": [
  {"type": "A", "inputs": ["0", "w"], "outputs": ["2"]},
  {"type": "B", "inputs": ["view", "state"], "outputs": ["1", "state"]}],
 "inputs": ["0"], "outputs": ["1"]}"#;

/// The analysis of [`MODEL`] on the generic target (SRAM for scratch, FLASH for constants).
fn analysis() -> Analysis {
    let model = read_model_json_bytes(MODEL.as_bytes(), Path::new("fuzz_model.json"))
        .expect("the fixed model reads");
    analyze(
        model,
        &Target::generic(),
        &Constraints::default(),
        &Rules::default(),
    )
    .expect("the fixed model analyses")
}

fuzz_target!(|bytes: &[u8]| {
    static ANALYSIS: OnceLock<Analysis> = OnceLock::new();
    let analysis = ANALYSIS.get_or_init(analysis);
    memplan_fuzz::within_allocation_bound(bytes, |bytes| {
        // `memplan check` reads the file as UTF-8 text; other bytes stop there.
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        if let Ok(read) = read_plan_text(Path::new("fuzz_plan.json"), text, analysis) {
            let _ = check_resolved_plan(analysis, read.plan, read.resolution);
        }
    });
});
