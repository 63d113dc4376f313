//! Reading + analysing a generated model of 1,000,000 tensors, next to serde_json alone
//! parsing the same file into a `serde_json::Value` (the bar: ours must not be slower).
//!
//! Run: `cargo bench -p memplan --bench read_analyze` (release build). Prints the best of a
//! few runs of each. `MEMPLAN_BENCH_TENSORS` changes the model size;
//! `MEMPLAN_BENCH_ORDER=reverse` lists the tensors in reverse creation order.
//!
//! `MEMPLAN_BENCH_CSV=FILE` measures a MiniMalloc CSV instead (e.g. the 1,000,000-buffer trace
//! `pack_bench --write-traces` writes): reading alone and reading + analysing, with the
//! reading speed in MB/s (the bar: 200 MB/s).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memplan::analyze::analyze;
use memplan::input::{read_model, Constraints, Rules, Target};
use memplan_planner_kit::testing::thread_cpu_time;

const RUNS: usize = 5;

/// A chain of operators, each reading the previous activation and a constant weight (16
/// bytes, inline base64) and writing a new activation; every 16th activation also gets a
/// reshape view (an alias) that the next operator reads instead. Tensors are listed in
/// creation order, as exporters write them, or in reverse when `reversed` (the order the
/// reader's creation-order fast path cannot use: every id goes through the hash map).
/// Returns the JSON text.
fn generate(tensor_count: usize, reversed: bool) -> String {
    let mut tensors: Vec<String> = Vec::with_capacity(tensor_count);
    tensors
        .push("{\"id\":\"x\",\"kind\":\"input\",\"dtype\":\"float32\",\"shape\":[1,8,8,4]}".into());
    let mut operators: Vec<String> = Vec::with_capacity(tensor_count / 2);
    let mut previous = "x".to_string();
    let mut op = 0;
    while tensors.len() + 3 <= tensor_count {
        let weight = format!("w{op}");
        let activation = format!("a{op}");
        tensors.push(format!(
            "{{\"id\":\"{weight}\",\"dtype\":\"int8\",\"shape\":[16],\"data\":\"AAECAwQFBgcICQoLDA0ODw==\"}}"
        ));
        tensors.push(format!(
            "{{\"id\":\"{activation}\",\"dtype\":\"float32\",\"shape\":[1,8,8,4]}}"
        ));
        operators.push(format!(
            "{{\"type\":\"CONV_2D\",\"inputs\":[\"{previous}\",\"{weight}\"],\"outputs\":[\"{activation}\"]}}"
        ));
        previous = activation.clone();
        if op % 16 == 15 {
            let view = format!("v{op}");
            tensors.push(format!(
                "{{\"id\":\"{view}\",\"size\":1024,\"alias_of\":\"{activation}\",\"alias_offset\":0}}"
            ));
            previous = view;
        }
        op += 1;
    }
    while tensors.len() < tensor_count {
        let count = tensors.len();
        tensors.push(format!(
            "{{\"id\":\"p{count}\",\"kind\":\"persistent\",\"size\":64}}"
        ));
    }
    if reversed {
        tensors.reverse();
    }
    let mut json = String::with_capacity(tensor_count * 120);
    write!(
        json,
        "{{\"version\":1,\"tensors\":[\n{}\n],\"operators\":[\n{}\n],\"inputs\":[\"x\"],\"outputs\":[\"{previous}\"]}}\n",
        tensors.join(",\n"),
        operators.join(",\n")
    )
    .expect("write to a String");
    json
}

/// Wall and CPU time of one run.
#[derive(Clone, Copy)]
struct Timing {
    wall: Duration,
    cpu: Option<Duration>,
}

impl Timing {
    fn measure<T>(run: impl FnOnce() -> T) -> (Timing, T) {
        let (start, cpu_start) = (Instant::now(), thread_cpu_time());
        let value = run();
        let wall = start.elapsed();
        let cpu = thread_cpu_time()
            .zip(cpu_start)
            .map(|(end, start)| end - start);
        (Timing { wall, cpu }, value)
    }

    /// The faster of two timings, by CPU time when known.
    fn best(self, other: Timing) -> Timing {
        let key = |t: Timing| t.cpu.unwrap_or(t.wall);
        if key(other) < key(self) {
            other
        } else {
            self
        }
    }

    fn millis(self) -> (f64, f64) {
        (
            self.wall.as_secs_f64() * 1e3,
            self.cpu.unwrap_or(self.wall).as_secs_f64() * 1e3,
        )
    }
}

fn temp_model_path() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memplan-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create bench dir");
    dir.join("model.json")
}

/// What one child process measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    SerdeValue,
    Read,
    ReadAnalyze,
}

impl Phase {
    const ALL: [Phase; 3] = [Phase::SerdeValue, Phase::Read, Phase::ReadAnalyze];

    fn name(self) -> &'static str {
        match self {
            Phase::SerdeValue => "serde-value",
            Phase::Read => "read",
            Phase::ReadAnalyze => "read-analyze",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Phase::SerdeValue => "serde_json -> Value (read + parse)",
            Phase::Read => "memplan read_model",
            Phase::ReadAnalyze => "memplan read_model + analyze",
        }
    }

    /// Runs the phase once on `path`; returns its timing and the number of tensors seen.
    fn run(self, path: &Path) -> (Timing, usize) {
        match self {
            Phase::SerdeValue => {
                let (timing, value) = Timing::measure(|| {
                    let text = std::fs::read_to_string(path).expect("read model");
                    serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON")
                });
                (timing, value["tensors"].as_array().map_or(0, Vec::len))
            }
            Phase::Read => {
                let (timing, model) = Timing::measure(|| read_model(path).expect("read model"));
                (timing, model.tensors.len())
            }
            Phase::ReadAnalyze => {
                let target = Target::generic();
                let (timing, analysis) = Timing::measure(|| {
                    let model = read_model(path).expect("read model");
                    analyze(model, &target, &Constraints::default(), &Rules::default())
                        .expect("analyze")
                });
                (timing, analysis.request.tensors.len())
            }
        }
    }
}

/// Each measurement runs in a fresh child process (`read_analyze --phase NAME FILE`), so no
/// run pays for freeing what the one before it allocated, and the phases take turns so that
/// load elsewhere on the machine hits them alike.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--phase") {
        let phase = Phase::ALL
            .into_iter()
            .find(|p| Some(p.name()) == args.get(at + 1).map(String::as_str))
            .expect("known phase");
        let path = PathBuf::from(args.get(at + 2).expect("model path"));
        let (timing, tensors) = phase.run(&path);
        let cpu = timing.cpu.unwrap_or(timing.wall);
        println!("{} {} {tensors}", timing.wall.as_nanos(), cpu.as_nanos());
        return;
    }

    if let Some(csv) = std::env::var_os("MEMPLAN_BENCH_CSV") {
        bench_csv(Path::new(&csv));
        return;
    }
    let tensor_count: usize = std::env::var("MEMPLAN_BENCH_TENSORS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let reversed = std::env::var("MEMPLAN_BENCH_ORDER").is_ok_and(|order| order == "reverse");
    let path = temp_model_path();
    std::fs::write(&path, generate(tensor_count, reversed)).expect("write model");
    let bytes = std::fs::metadata(&path).expect("stat model").len();
    println!(
        "model: {tensor_count} tensors ({} order), {:.1} MB, {}",
        if reversed { "reverse" } else { "creation" },
        bytes as f64 / 1e6,
        path.display()
    );

    let best = best_runs(&Phase::ALL, &path, tensor_count);
    print_and_compare(&best);
    let _ = std::fs::remove_dir_all(path.parent().expect("bench dir"));
}

/// The best timing of each phase over [`RUNS`] runs, each in a fresh child process.
fn best_runs(phases: &[Phase], path: &Path, tensor_count: usize) -> Vec<Timing> {
    let exe = std::env::current_exe().expect("own path");
    let mut best: Vec<Option<Timing>> = vec![None; phases.len()];
    for _ in 0..RUNS {
        for (slot, &phase) in phases.iter().enumerate() {
            let output = std::process::Command::new(&exe)
                .args(["--phase", phase.name()])
                .arg(path)
                .output()
                .expect("run child");
            assert!(output.status.success(), "{} failed", phase.name());
            let text = String::from_utf8_lossy(&output.stdout);
            let fields: Vec<u64> = text
                .split_whitespace()
                .map(|f| f.parse().expect("number"))
                .collect();
            assert_eq!(
                fields[2] as usize,
                tensor_count,
                "{} saw every tensor",
                phase.name()
            );
            let timing = Timing {
                wall: Duration::from_nanos(fields[0]),
                cpu: Some(Duration::from_nanos(fields[1])),
            };
            best[slot] = Some(best[slot].map_or(timing, |b| b.best(timing)));
        }
    }
    best.into_iter().map(|t| t.expect("RUNS > 0")).collect()
}

/// Reading and reading + analysing a MiniMalloc CSV, with the reading speed.
fn bench_csv(path: &Path) {
    let bytes = std::fs::metadata(path).expect("stat the CSV").len();
    let lines = std::fs::read_to_string(path)
        .expect("read the CSV")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count();
    let buffers = lines.saturating_sub(1);
    println!(
        "MiniMalloc CSV: {buffers} buffers, {:.1} MB, {}",
        bytes as f64 / 1e6,
        path.display()
    );
    let phases = [Phase::Read, Phase::ReadAnalyze];
    let best = best_runs(&phases, path, buffers);
    println!("best of {RUNS} runs, each in a fresh process (wall ms / CPU ms):");
    for (phase, timing) in phases.into_iter().zip(&best) {
        let (wall, cpu) = timing.millis();
        println!("  {:<38} {wall:>8.1} / {cpu:>8.1}", phase.label());
    }
    let read_seconds = best[0].wall.as_secs_f64();
    println!(
        "reading: {:.0} MB/s (wall)",
        bytes as f64 / 1e6 / read_seconds
    );
}

fn print_and_compare(best: &[Timing]) {
    println!("best of {RUNS} runs, each in a fresh process (wall ms / CPU ms):");
    for (phase, timing) in Phase::ALL.into_iter().zip(best) {
        let (wall, cpu) = timing.millis();
        println!("  {:<38} {wall:>8.1} / {cpu:>8.1}", phase.label());
    }
    let ratio = |t: Timing| t.millis().1 / best[0].millis().1;
    println!(
        "read + analyze / serde_json -> Value: {:.2} (CPU time); read alone: {:.2}",
        ratio(best[2]),
        ratio(best[1])
    );
}
