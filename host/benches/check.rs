//! Benchmark of the plan checker on a 1,000,000-tensor model-like plan.
//!
//! Run with `cargo bench -p memplan --bench check`. The request is a long chain of operators:
//! scratch tensors living a few steps each (some with reshape-like aliases), weights as cold
//! constants in MRAM, a few persistent tensors. The plan is a simple valid placement: scratch
//! tensors rotate through a ring of fixed-size slots that is longer than any lifetime, constants
//! and persistent tensors are bump-allocated. The checker runs on it several times; the report
//! gives the fastest and the median run.
//!
//! With `MEMPLAN_BENCH_PLUGIN_DIR=DIR`, every planner of every plugin library in DIR also plans
//! the same request, and its planning time is printed beside the checking time of its plan:
//! the checker must stay cheaper than planning (checking a plan may never cost more than
//! making one).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abi_stable::library::lib_header_from_path;
use abi_stable::std_types::{RSome, RString, RVec};
use memplan::analyze::Analysis;
use memplan::check::check_plan;
use memplan_planner_kit::testing::{allocation, memory, tensor, XorShift64Star};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::{
    AliasOf, Arena, ArenaRole, HostContext, Lifetime, MemoryPlan, PlanRequest, PluginModuleRef,
    TensorKind,
};

const TENSORS: usize = 1_000_000;
const RUNS: usize = 5;
/// Scratch slots in the ring; every scratch lifetime is shorter than this many steps.
const RING: u64 = 8;
const SLOT: u64 = 4096;
const SRAM: u32 = 0;
const MRAM: u32 = 1;

/// The request and a valid plan for it.
fn model_like() -> (Analysis, MemoryPlan) {
    // Seeded, so that every run checks the same plan.
    let mut rng = XorShift64Star::new(7);
    let mut tensors = Vec::with_capacity(TENSORS);
    let mut allocations = Vec::with_capacity(TENSORS);
    // Roughly: 6 of 10 tensors are scratch (1 in 20 of those an alias of the previous
    // one), 4 of 10 are weights, and 1 in 1000 is persistent.
    let mut step: u32 = 0;
    let mut ring_position: u64 = 0;
    let mut constant_end: u64 = 0;
    let mut persistent_end: u64 = 0;
    let mut last_scratch: Option<(usize, u64, Lifetime)> = None;
    let mut pending_lifetimes = Vec::new();
    for index in 0..TENSORS {
        let roll = rng.below(1000);
        if roll == 0 {
            // Lifetime fixed up below, once the number of steps is known.
            tensors.push(tensor(&index.to_string(), TensorKind::Persistent, 64, 0, 0));
            pending_lifetimes.push(index);
            allocations.push(allocation(
                index as u32,
                ArenaRole::Persistent,
                SRAM,
                persistent_end,
                64,
            ));
            persistent_end += 64;
        } else if roll < 400 {
            let size = 16 + rng.below(2048);
            let mut weights = tensor(&index.to_string(), TensorKind::Constant, size, 0, 0);
            weights.memory = RSome(MRAM);
            weights.source_memory = RSome(MRAM);
            tensors.push(weights);
            pending_lifetimes.push(index);
            allocations.push(allocation(
                index as u32,
                ArenaRole::Constant,
                MRAM,
                constant_end,
                size,
            ));
            constant_end = align_up(constant_end + size, 16);
        } else if let Some((root, root_offset, lifetime)) = last_scratch.filter(|_| roll < 430) {
            let mut view = tensor(
                &index.to_string(),
                TensorKind::Intermediate,
                64,
                lifetime.first,
                lifetime.last,
            );
            view.alias_of = RSome(AliasOf {
                root: root as u32,
                offset: 0,
            });
            tensors.push(view);
            allocations.push(allocation(
                index as u32,
                ArenaRole::Scratch,
                SRAM,
                root_offset,
                64,
            ));
        } else {
            let lifetime = Lifetime::new(step, step + rng.below(RING - 1) as u32);
            let size = 64 + rng.below(SLOT - 64);
            let kind = if index == 0 {
                TensorKind::Input
            } else {
                TensorKind::Intermediate
            };
            let offset = (ring_position % RING) * SLOT;
            tensors.push(tensor(
                &index.to_string(),
                kind,
                size,
                lifetime.first,
                lifetime.last,
            ));
            allocations.push(allocation(
                index as u32,
                ArenaRole::Scratch,
                SRAM,
                offset,
                size,
            ));
            last_scratch = Some((index, offset, lifetime));
            ring_position += 1;
            step += 1;
        }
    }
    let num_steps = step + RING as u32;
    for index in pending_lifetimes {
        tensors[index].lifetime = Lifetime::new(0, num_steps - 1);
    }
    let arena = |role, memory, size| Arena {
        role,
        memory,
        source_memory: memory,
        size,
        alignment: 16,
    };
    let plan = MemoryPlan {
        arenas: RVec::from(vec![
            arena(ArenaRole::Scratch, SRAM, RING * SLOT),
            arena(ArenaRole::Persistent, SRAM, persistent_end),
            arena(ArenaRole::Constant, MRAM, constant_end),
        ]),
        allocations: RVec::from(allocations),
        summary: RString::new(),
    };
    let request = PlanRequest {
        tensors: RVec::from(tensors),
        memories: RVec::from(vec![
            memory("SRAM", None, true, Some(0)),
            memory("MRAM", None, false, None),
        ]),
        num_steps,
        options: RString::from("{}"),
    };
    let analysis = Analysis {
        source: PathBuf::from("bench.json"),
        target: "bench".to_string(),
        names: (0..TENSORS).map(|i| format!("tensor_{i}")).collect(),
        // Not read by the stages under test.
        memory_lower_bounds: Vec::new(),
        pinned_overflow: None,
        external: Default::default(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        tflite: None,
        order: None,
        constant_data: vec![None; TENSORS],
        request,
    };
    (analysis, plan)
}

/// Checks `plan` `RUNS` times; returns (fastest, median). Panics if the plan is rejected.
fn time_check(analysis: &Analysis, plan: &MemoryPlan) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let input = plan.clone();
        let start = Instant::now();
        let result = check_plan(analysis, input);
        times.push(start.elapsed());
        if let Err(violations) = result {
            panic!("the benchmark plan was rejected:\n{}", violations.to_text());
        }
    }
    times.sort();
    (times[0], times[RUNS / 2])
}

fn time_planners(dir: &Path, analysis: &Analysis) {
    let mut libraries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| {
            path.extension().and_then(|e| e.to_str()) == Some(std::env::consts::DLL_EXTENSION)
        })
        .collect();
    libraries.sort();
    for library in libraries {
        let module = lib_header_from_path(&library)
            .and_then(|header| header.init_root_module::<PluginModuleRef>())
            .unwrap_or_else(|error| panic!("{}: {error}", library.display()));
        for planner in module.planners().iter() {
            let start = Instant::now();
            let result = (planner.plan)(&analysis.request, &HostContext::detached()).into_result();
            let planning = start.elapsed();
            match result {
                Ok(plan) => {
                    let (fastest, median) = time_check(analysis, &plan);
                    println!(
                        "planner {:<16} plans in {:>9.1} ms; checking its plan: fastest {:>7.1} ms, median {:>7.1} ms",
                        planner.name.as_str(),
                        ms(planning),
                        ms(fastest),
                        ms(median)
                    );
                }
                Err(error) => println!("planner {}: no plan ({error})", planner.name.as_str()),
            }
        }
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench`-less arguments; only a real
    // `cargo bench` (which passes `--bench`) does the full run.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let start = Instant::now();
    let (analysis, plan) = model_like();
    println!(
        "built a request of {} tensors ({} steps) and a valid plan in {:.0} ms",
        analysis.request.tensors.len(),
        analysis.request.num_steps,
        ms(start.elapsed())
    );
    let (fastest, median) = time_check(&analysis, &plan);
    println!(
        "check_plan on the ring placement: fastest {:.1} ms, median {:.1} ms ({RUNS} runs)",
        ms(fastest),
        ms(median)
    );
    if let Some(dir) = std::env::var_os("MEMPLAN_BENCH_PLUGIN_DIR") {
        time_planners(Path::new(&dir), &analysis);
    }
}
