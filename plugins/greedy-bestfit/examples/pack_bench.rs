//! Measures `greedy-bestfit` without the host: the MiniMalloc and TFLite Micro traces of the
//! shared corpus, and generated traces with a model-like lifetime profile of 100,000 and
//! 1,000,000 buffers. For each: packing height, lower bound, their ratio and the median time
//! (wall clock and CPU) of the whole planner call (kit passes included) over several runs.
//!
//! ```text
//! cargo run --release -p memplan-planner-greedy-bestfit --example pack_bench -- /work/shared/data
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use memplan_planner_greedy_bestfit::corpus::{read_buffers, single_memory_request};
use memplan_planner_greedy_bestfit::GreedyBestFit;
use memplan_plugin_api::bounds::{align_up, lower_bound};
use memplan_plugin_api::kit::{pack_greedy, Buffer, Fit, Order};
use memplan_plugin_api::{HostContext, Lifetime, MemoryPlan, Planner};

/// A small deterministic generator (SplitMix64), so traces are the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// A trace shaped like a model graph: two tensors produced per op step; most consumed by the
/// next op or the one after (90%), some by a later op (9%, up to 16 steps: residual and
/// concat inputs), a few much later (1%, up to 256 steps: skip connections), and four live
/// the whole run (graph inputs and outputs). Sizes log-uniform from 16 B to 64 KiB, in
/// multiples of 16, alignment 16.
fn model_like_trace(count: usize, seed: u64) -> Vec<Buffer> {
    let mut random = SplitMix(seed);
    let steps = (count / 2).max(1) as u32;
    (0..count)
        .map(|index| {
            let first = (index / 2) as u32;
            let roll = random.below(100);
            let duration = match roll {
                0..90 => 1 + random.below(2),
                90..99 => 3 + random.below(14),
                _ => 17 + random.below(240),
            } as u32;
            let lifetime = if index < 4 {
                Lifetime::new(0, steps - 1)
            } else {
                Lifetime::new(first, (first + duration - 1).min(steps - 1))
            };
            let exponent = 4 + random.below(13);
            let size = align_up((1u64 << exponent) + random.below(1u64 << exponent), 16);
            Buffer {
                size,
                alignment: 16,
                lifetime,
                fixed_offset: None,
            }
        })
        .collect()
}

/// CPU time this thread has run for (Linux `schedstat`), `None` elsewhere. On a loaded
/// machine wall time includes waiting for a core; CPU time does not.
fn thread_cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// Median wall and CPU times of `runs` calls of `work`, and its (identical) plan.
fn median_time(
    runs: usize,
    mut work: impl FnMut() -> MemoryPlan,
) -> (Duration, Duration, MemoryPlan) {
    let mut times = Vec::with_capacity(runs);
    let mut cpu_times = Vec::with_capacity(runs);
    let mut plan = MemoryPlan::default();
    for _ in 0..runs {
        let start = Instant::now();
        let cpu_start = thread_cpu_time().unwrap_or_default();
        let this = work();
        times.push(start.elapsed());
        cpu_times.push(
            thread_cpu_time()
                .unwrap_or_default()
                .saturating_sub(cpu_start),
        );
        assert!(
            plan.allocations.is_empty() || this == plan,
            "non-deterministic plan"
        );
        plan = this;
    }
    times.sort();
    cpu_times.sort();
    (times[runs / 2], cpu_times[runs / 2], plan)
}

/// Prints one row; returns the median wall and CPU times.
fn measure(name: &str, buffers: &[Buffer], options: &str, runs: usize) -> (Duration, Duration) {
    let mut request = single_memory_request(buffers);
    request.options = options.into();
    let (time, cpu_time, plan) = median_time(runs, || {
        GreedyBestFit::plan(&request, &HostContext::detached()).expect("planning failed")
    });
    let height = plan
        .allocations
        .iter()
        .map(|a| a.offset + a.size)
        .max()
        .unwrap_or(0);
    let bound = lower_bound(
        buffers
            .iter()
            .map(|b| (align_up(b.size, b.alignment), b.lifetime)),
    );
    println!(
        "{name:<46} {options:<16} {:>9} {height:>10} {bound:>10} {:>7.4} {:>10.2} {:>10.2}",
        buffers.len(),
        height as f64 / bound as f64,
        time.as_secs_f64() * 1e3,
        cpu_time.as_secs_f64() * 1e3
    );
    (time, cpu_time)
}

fn main() {
    let corpus = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/work/shared/data".to_string());
    println!(
        "{:<46} {:<16} {:>9} {:>10} {:>10} {:>7} {:>10} {:>10}",
        "trace", "options", "buffers", "height", "lower bnd", "ratio", "wall ms", "cpu ms"
    );
    for (sub, options) in [("minimalloc", "{}"), ("tflm-traces", r#"{"fit":"first"}"#)] {
        let dir = Path::new(&corpus).join(sub);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "csv"))
            .collect();
        files.sort();
        for path in files {
            let name = format!("{sub}/{}", path.file_name().unwrap().to_string_lossy());
            measure(&name, &read_buffers(&path), options, 5);
        }
    }
    for count in [100_000, 1_000_000] {
        let buffers = model_like_trace(count, 1);
        let mut cpu_times = Vec::new();
        let mut height = 0;
        for _ in 0..3 {
            let start = thread_cpu_time().unwrap_or_default();
            height = pack_greedy(&buffers, Order::Size, Fit::Best).height;
            cpu_times.push(thread_cpu_time().unwrap_or_default().saturating_sub(start));
        }
        cpu_times.sort();
        println!(
            "pack_greedy alone, {count} buffers: height {height}, median cpu {:.1} ms",
            cpu_times[1].as_secs_f64() * 1e3
        );
    }
    let small = model_like_trace(100_000, 1);
    let small_time = measure("generated model-like 100k", &small, "{}", 5);
    let large = model_like_trace(1_000_000, 1);
    let large_time = measure("generated model-like 1M", &large, "{}", 3);
    println!(
        "1M / 100k time ratio: wall {:.2}, cpu {:.2}",
        large_time.0.as_secs_f64() / small_time.0.as_secs_f64(),
        large_time.1.as_secs_f64() / small_time.1.as_secs_f64()
    );
}
