//! Fuzz target: the model JSON reader on arbitrary bytes. It must return (model or error)
//! without panicking, within the allocation bound of `memplan_fuzz`.
//!
//! The model's path lies in a directory that does not exist, so a relative `data_file`
//! fails to load like a missing file would, instead of reading whatever happens to be in
//! the fuzzer's working directory.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use memplan::input::json::read_model_json_bytes;

fuzz_target!(|bytes: &[u8]| {
    memplan_fuzz::within_allocation_bound(bytes, |bytes| {
        let _ = read_model_json_bytes(bytes, Path::new("/nonexistent-memplan-fuzz/model.json"));
    });
});
