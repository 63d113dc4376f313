//! Writes a generated instance as a MiniMalloc CSV, which `memplan plan`, `memplan bench` and
//! the planners' benchmarks read:
//!
//! ```text
//! cargo run --release -p memplan-planner-exact --example generate -- SPEC > FILE.csv
//! ```
//!
//! SPEC is one of `band:N`, `all-live:N[:SEED]`, `random:N[:SEED[:STEPS]]`, `model:N[:SEED]`,
//! `compiler:N[:SEED]`, `even-compiler:N[:SEED]` or `cut:PIECES[:SEED[:STEPS]]` (see
//! `testing::generated_instance`).

use std::io::Write;

use memplan_planner_kit::testing::{generated_instance, minimalloc_csv, GENERATED_SPECS};

fn main() {
    let spec = std::env::args().nth(1).unwrap_or_default();
    let buffers = match generated_instance(&spec) {
        Some(Ok(buffers)) => buffers,
        Some(Err(error)) => fail(&error),
        None => fail(&format!(
            "usage: generate SPEC, SPEC one of {GENERATED_SPECS}"
        )),
    };
    let csv = minimalloc_csv(&buffers);
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(csv.as_bytes())
        .and_then(|()| stdout.flush())
    {
        fail(&format!("cannot write the CSV: {error}"));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}
