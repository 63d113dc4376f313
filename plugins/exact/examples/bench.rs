//! Benchmark of the `exact` packer (run in release):
//!
//! ```text
//! cargo run --release -p memplan-planner-exact --example bench -- [--time S] [--options JSON] [--no-greedy] INSTANCE...
//! ```
//!
//! `--no-greedy` leaves out the greedy column (every greedy packing without a deadline).
//! `--options` takes the planner's options, e.g. `'{"bisection": false}'` to measure what one
//! search technique brings (see `Techniques`); `--time` overrides its `time_limit_s`.
//!
//! An INSTANCE is a MiniMalloc CSV file (half-open lifetimes) or a generator spec of the kit's
//! `testing::generated_instance` (e.g. `cut:PIECES[:SEED[:STEPS]]`, a 2^20-byte x STEPS
//! rectangle cut into PIECES buffers whose optimum is its width, or `compiler:N[:SEED]`). One line per instance: buffers,
//! lower bound, greedy height, exact height, time, and the packer's note.

use std::time::{Duration, Instant};

use memplan_planner_exact::problem::Problem;
use memplan_planner_exact::search::Deadline;
use memplan_planner_exact::{greedy, ExactOptions, ExactPacker};
use memplan_planner_kit::testing::{generated_instance, read_minimalloc};
use memplan_planner_kit::{arena_lower_bound, Buffer, Packer};
use memplan_plugin_api::HostContext;

/// A generator spec (the kit's `generated_instance`) or a MiniMalloc CSV file.
fn load(instance: &str) -> Result<Vec<Buffer>, String> {
    generated_instance(instance).unwrap_or_else(|| read_minimalloc(instance.as_ref()))
}

fn greedy_height(buffers: &[Buffer]) -> u64 {
    let problem = Problem::new(buffers);
    let context = HostContext::detached();
    let no_deadline = Deadline {
        at: None,
        context: &context,
    };
    problem
        .components
        .iter()
        .map(|component| {
            let offsets =
                greedy::greedy(component, &no_deadline, &no_deadline).expect("no deadline");
            component.height(&offsets) * problem.unit
        })
        .max()
        .unwrap_or(0)
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = ExactOptions::default();
    if let Some(position) = args.iter().position(|arg| arg == "--options") {
        let json = args
            .get(position + 1)
            .ok_or("--options needs a JSON object")?;
        options = ExactOptions::parse(json).map_err(|error| error.message.to_string())?;
        args.drain(position..position + 2);
    }
    if let Some(position) = args.iter().position(|arg| arg == "--time") {
        let seconds: f64 = args
            .get(position + 1)
            .and_then(|text| text.parse().ok())
            .ok_or("--time needs a number of seconds")?;
        options.time_limit = Duration::from_secs_f64(seconds);
        args.drain(position..position + 2);
    }
    // Without a deadline the greedy column takes every greedy packing in full: minutes on
    // 100,000 random buffers while the kit's packer is quadratic there.
    let skip_greedy = args.iter().any(|arg| arg == "--no-greedy");
    args.retain(|arg| arg != "--no-greedy");
    let context = HostContext::detached();
    println!("instance | buffers | lower bound | greedy | exact | time | note");
    for instance in &args {
        let buffers = load(instance)?;
        let bound = arena_lower_bound(&buffers);
        let started = Instant::now();
        let packing = ExactPacker::from_options(&options)
            .pack(&buffers, &context)
            .map_err(|error| error.message.to_string())?;
        let elapsed = started.elapsed();
        println!(
            "{instance} | {} | {bound} | {} | {} | {:.3} s | {}",
            buffers.len(),
            if skip_greedy {
                "-".to_string()
            } else {
                greedy_height(&buffers).to_string()
            },
            packing.height,
            elapsed.as_secs_f64(),
            packing.note
        );
    }
    Ok(())
}
