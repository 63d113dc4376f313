//! Measures `greedy-bestfit` without the host: the MiniMalloc and TFLite Micro traces of the
//! shared corpus, then generated traces with a model-like lifetime profile of 100,000 and
//! 1,000,000 buffers. For each: packing height, lower bound, their ratio and the median time
//! (wall clock and CPU) of the whole planner call (kit passes included) over several runs.
//!
//! The two generated sizes are run in alternation (one 1M run, then three 100k runs, seven
//! times), so that a change in the machine's load over the minute the bench takes weighs on
//! both sides of their ratio alike.
//!
//! This process keeps the C allocator's default policy, while `memplan` keeps freed memory
//! for its whole run (`host/src/allocator.rs`): here each 1M run also faults in about
//! 118 MB of fresh pages, so its time and the ratio come out higher than `memplan bench`'s.
//!
//! ```text
//! cargo run --release -p memplan-planner-greedy-bestfit --example pack_bench -- /work/shared/data
//! cargo run --release -p memplan-planner-greedy-bestfit --example pack_bench -- --write-traces DIR
//! ```
//!
//! `--write-traces DIR` writes the two generated traces as MiniMalloc CSV files
//! (`model_like_100k.csv`, `model_like_1m.csv`) for `memplan bench`, and stops.
//!
//! `--shapes` times the planner on each generated trace shape instead (`band`, `all-live`,
//! `random`, `model`, `compiler`; see `testing::generated_instance`) at 100k and 1M buffers,
//! each run under a host deadline as `--timeout` sets one (`--limit S`, default 60 s: a run
//! that reaches it prints how long after the deadline the planner returned), with the load
//! average before and after; `--sizes N,N` sets the sizes, `--runs R` the runs per row
//! (median; default 1). Each shape runs with the default options and with
//! `{"order":"start"}` (start order with best fit, which the kit packs as one sweep over time,
//! O(n log n) on every shape); `--start-only` runs only the latter, `--all-orders` every order
//! and fit:
//!
//! ```text
//! cargo run --release -p memplan-planner-greedy-bestfit --example pack_bench -- --shapes
//! cargo run --release -p memplan-planner-greedy-bestfit --example pack_bench -- --shapes --sizes 100000 --limit 1 --all-orders
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use memplan_planner_greedy_bestfit::GreedyBestFit;
use memplan_planner_kit::testing::{
    csv_files, generated_instance, minimalloc_csv, model_like_trace, read_minimalloc,
    single_memory_request, thread_cpu_time, with_deadline,
};
use memplan_planner_kit::{arena_lower_bound, Buffer, Fit, Order};
use memplan_plugin_api::{HostContext, MemoryPlan, PlanRequest, Planner};

/// The generated traces: (file name, buffer count).
const GENERATED: [(&str, usize); 2] = [
    ("model_like_100k.csv", 100_000),
    ("model_like_1m.csv", 1_000_000),
];

/// Wall and CPU times of planning one request, run after run; checks every run gives the
/// same plan.
struct Timings {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    plan: Option<MemoryPlan>,
}

impl Timings {
    fn new() -> Timings {
        Timings {
            wall: Vec::new(),
            cpu: Vec::new(),
            plan: None,
        }
    }

    fn run(&mut self, request: &PlanRequest) {
        let start = Instant::now();
        let cpu_start = thread_cpu_time().unwrap_or_default();
        let plan = GreedyBestFit::plan(request, &HostContext::detached()).expect("planning failed");
        self.wall.push(start.elapsed());
        let cpu = thread_cpu_time().unwrap_or_default();
        self.cpu.push(cpu.saturating_sub(cpu_start));
        assert!(
            self.plan.as_ref().is_none_or(|first| *first == plan),
            "non-deterministic plan"
        );
        self.plan.get_or_insert(plan);
    }

    /// Median wall and CPU times.
    fn medians(&self) -> (Duration, Duration) {
        let median = |times: &[Duration]| {
            let mut times = times.to_vec();
            times.sort();
            times[times.len() / 2]
        };
        (median(&self.wall), median(&self.cpu))
    }
}

fn request(buffers: &[Buffer], options: &str) -> PlanRequest {
    let mut request = single_memory_request(buffers);
    request.options = options.into();
    request
}

/// Prints one row.
fn print_row(name: &str, buffers: &[Buffer], options: &str, timings: &Timings) {
    let plan = timings.plan.as_ref().expect("at least one run");
    let height = plan
        .allocations
        .iter()
        .map(|a| a.offset + a.size)
        .max()
        .unwrap_or(0);
    let bound = arena_lower_bound(buffers);
    let (wall, cpu) = timings.medians();
    println!(
        "{name:<46} {options:<16} {:>9} {height:>10} {bound:>10} {:>7.4} {:>10.2} {:>10.2}",
        buffers.len(),
        height as f64 / bound as f64,
        wall.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3
    );
}

fn write_traces(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
    for (file, count) in GENERATED {
        let path = dir.join(file);
        std::fs::write(&path, minimalloc_csv(&model_like_trace(count, 1)))
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        println!("wrote {}", path.display());
    }
}

/// The trace shapes `--shapes` times, as generator spec prefixes.
const SHAPES: [&str; 5] = ["band", "all-live", "random", "model", "compiler"];

/// Start order with best fit: the sweep over time, O(n log n) on every shape.
const START_BEST_FIT: &str = r#"{"order":"start"}"#;

/// The value after `flag` in `args`, if given.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let position = args.iter().position(|arg| arg == flag)?;
    Some(
        args.get(position + 1)
            .unwrap_or_else(|| panic!("{flag} needs a value")),
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// `--shapes`: each shape at each size, under a deadline (see the module documentation).
fn time_shapes(args: &[String]) {
    let sizes: Vec<usize> = flag_value(args, "--sizes")
        .unwrap_or("100000,1000000")
        .split(',')
        .map(|size| size.parse().expect("--sizes: numbers separated by commas"))
        .collect();
    let limit = Duration::from_secs_f64(
        flag_value(args, "--limit").map_or(60.0, |s| s.parse().expect("--limit: seconds")),
    );
    let runs: usize = flag_value(args, "--runs").map_or(1, |r| r.parse().expect("--runs: a count"));
    let options: Vec<String> = if args.iter().any(|arg| arg == "--all-orders") {
        Order::ALL
            .iter()
            .flat_map(|(order, _)| {
                Fit::ALL
                    .iter()
                    .map(move |(fit, _)| format!(r#"{{"order":"{order}","fit":"{fit}"}}"#))
            })
            .collect()
    } else if args.iter().any(|arg| arg == "--start-only") {
        vec![START_BEST_FIT.into()]
    } else {
        vec!["{}".into(), START_BEST_FIT.into()]
    };
    println!("load average before: {}", load_average());
    println!(
        "{:<18} {:<34} {:>12} {:>7} {:>10} {:>10}  limit",
        "trace", "options", "height", "ratio", "wall ms", "cpu ms"
    );
    for shape in SHAPES {
        for &size in &sizes {
            let spec = format!("{shape}:{size}");
            let buffers = generated_instance(&spec)
                .expect("a generator spec")
                .expect("a valid spec");
            let bound = arena_lower_bound(&buffers);
            for options in &options {
                let request = request(&buffers, options);
                let (mut wall, mut cpu, mut outcome) = (Vec::new(), Vec::new(), None);
                for _ in 0..runs {
                    let start = Instant::now();
                    let cpu_start = thread_cpu_time().unwrap_or_default();
                    let deadline = start + limit;
                    let plan = GreedyBestFit::plan(&request, &with_deadline(&deadline));
                    wall.push(start.elapsed());
                    cpu.push(
                        thread_cpu_time()
                            .unwrap_or_default()
                            .saturating_sub(cpu_start),
                    );
                    outcome = Some(plan);
                }
                let median = |times: &mut Vec<Duration>| {
                    times.sort();
                    times[times.len() / 2].as_secs_f64() * 1e3
                };
                let (wall, cpu) = (median(&mut wall), median(&mut cpu));
                let (height, ratio, limit_note) = match outcome.expect("at least one run") {
                    Ok(plan) => {
                        let height = plan
                            .allocations
                            .iter()
                            .map(|a| a.offset + a.size)
                            .max()
                            .unwrap_or(0);
                        let ratio = format!("{:.4}", height as f64 / bound as f64);
                        (height.to_string(), ratio, String::new())
                    }
                    Err(error) => (
                        "-".into(),
                        "-".into(),
                        format!(
                            "stopped {:.0} ms after the {:.0} ms limit: {:?}",
                            wall - limit.as_secs_f64() * 1e3,
                            limit.as_secs_f64() * 1e3,
                            error.kind
                        ),
                    ),
                };
                println!(
                    "{spec:<18} {options:<34} {height:>12} {ratio:>7} {wall:>10.1} {cpu:>10.1}  {limit_note}"
                );
            }
        }
    }
    println!("load average after: {}", load_average());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, dir] = args.as_slice() {
        if flag == "--write-traces" {
            return write_traces(Path::new(dir));
        }
    }
    if args.iter().any(|arg| arg == "--shapes") {
        return time_shapes(&args);
    }
    let corpus = args.first().map_or("/work/shared/data", String::as_str);
    println!(
        "{:<46} {:<16} {:>9} {:>10} {:>10} {:>7} {:>10} {:>10}",
        "trace", "options", "buffers", "height", "lower bnd", "ratio", "wall ms", "cpu ms"
    );
    for (sub, options) in [("minimalloc", "{}"), ("tflm-traces", r#"{"fit":"first"}"#)] {
        let dir = Path::new(corpus).join(sub);
        for path in csv_files(&dir) {
            let name = format!("{sub}/{}", path.file_name().unwrap().to_string_lossy());
            let buffers = read_minimalloc(&path).unwrap();
            let request = request(&buffers, options);
            let mut timings = Timings::new();
            for _ in 0..5 {
                timings.run(&request);
            }
            print_row(&name, &buffers, options, &timings);
        }
    }

    let small = model_like_trace(GENERATED[0].1, 1);
    let large = model_like_trace(GENERATED[1].1, 1);
    let (small_request, large_request) = (request(&small, "{}"), request(&large, "{}"));
    let (mut small_timings, mut large_timings) = (Timings::new(), Timings::new());
    for _ in 0..7 {
        large_timings.run(&large_request);
        for _ in 0..3 {
            small_timings.run(&small_request);
        }
    }
    print_row("generated model-like 100k", &small, "{}", &small_timings);
    print_row("generated model-like 1M", &large, "{}", &large_timings);
    let (small_wall, small_cpu) = small_timings.medians();
    let (large_wall, large_cpu) = large_timings.medians();
    println!(
        "1M / 100k time ratio: wall {:.2}, cpu {:.2}",
        large_wall.as_secs_f64() / small_wall.as_secs_f64(),
        large_cpu.as_secs_f64() / small_cpu.as_secs_f64()
    );
}
