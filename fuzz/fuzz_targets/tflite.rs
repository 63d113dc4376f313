//! Fuzz target: the `.tflite` reader, then TFLite Micro's lifetime rule, on arbitrary bytes. It must return (model or error)
//! without panicking, within the allocation bound of `memplan_fuzz`.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use memplan::analyze::lifetimes::tflite_micro::resolve;
use memplan::input::tflite::read_tflite_bytes;

fuzz_target!(|bytes: &[u8]| {
    memplan_fuzz::within_allocation_bound(bytes, |bytes| {
        let _ = read_tflite_bytes(bytes, Path::new("fuzz.tflite")).and_then(resolve);
    });
});
