//! Times the kit's one-pass packing (`pack_one_pass`) alone, the packing that stands in where
//! a short time limit leaves no time for a first sweep (run in release):
//!
//! ```text
//! cargo run --release -p memplan-planner-exact --example one_pass_bench -- [--runs R] INSTANCE...
//! ```
//!
//! An INSTANCE is a generator spec of the kit's `testing::generated_instance` (e.g.
//! `random:2000000:219:700000`) or a MiniMalloc CSV file. One line per instance: buffers,
//! height over the lower bound, the fastest, median and slowest of R runs (default 5), and
//! the median time of the lower bound (`arena_lower_bound`), which the portfolio finds on the
//! other core beside the one-pass packing and waits for.

use std::time::{Duration, Instant};

use memplan_planner_kit::testing::{generated_instance, read_minimalloc};
use memplan_planner_kit::{arena_lower_bound, pack_one_pass, Buffer};

fn load(instance: &str) -> Result<Vec<Buffer>, String> {
    generated_instance(instance).unwrap_or_else(|| read_minimalloc(instance.as_ref()))
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 5;
    if let Some(at) = args.iter().position(|arg| arg == "--runs") {
        runs = args
            .get(at + 1)
            .and_then(|r| r.parse().ok())
            .expect("--runs takes a number");
        args.drain(at..at + 2);
    }
    println!(
        "{:<32} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "instance", "buffers", "ratio", "min ms", "median ms", "max ms", "bound ms"
    );
    for instance in &args {
        let buffers = match load(instance) {
            Ok(buffers) => buffers,
            Err(error) => {
                eprintln!("{instance}: {error}");
                std::process::exit(2);
            }
        };
        let mut times: Vec<Duration> = Vec::new();
        let mut bound_times: Vec<Duration> = Vec::new();
        let (mut height, mut bound) = (0, 0);
        for _ in 0..runs.max(1) {
            let start = Instant::now();
            let packing = pack_one_pass(&buffers);
            times.push(start.elapsed());
            height = packing.height;
            let start = Instant::now();
            bound = arena_lower_bound(&buffers);
            bound_times.push(start.elapsed());
        }
        times.sort();
        bound_times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{:<32} {:>9} {:>8.4} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            instance,
            buffers.len(),
            height as f64 / bound.max(1) as f64,
            ms(times[0]),
            ms(times[times.len() / 2]),
            ms(times[times.len() - 1]),
            ms(bound_times[bound_times.len() / 2])
        );
    }
}
