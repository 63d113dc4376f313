//! Reading + analysing a generated model of 1,000,000 tensors, next to serde_json alone
//! parsing the same file into a `serde_json::Value` (the bar: ours must not be slower).
//!
//! Run: `cargo bench -p memplan --bench read_analyze` (release build). Prints the best of a
//! few runs of each. `MEMPLAN_BENCH_TENSORS` changes the model size.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memplan::analyze::analyze;
use memplan::input::{read_model, Constraints, Rules, Target};

const RUNS: usize = 3;

/// A chain of operators, each reading the previous activation and a constant weight (16
/// bytes, inline base64) and writing a new activation; every 16th activation also gets a
/// reshape view (an alias) that the next operator reads instead. Returns the JSON text.
fn generate(tensor_count: usize) -> String {
    let mut json = String::with_capacity(tensor_count * 120);
    json.push_str("{\"version\":1,\"tensors\":[\n");
    json.push_str("{\"id\":\"x\",\"kind\":\"input\",\"dtype\":\"float32\",\"shape\":[1,8,8,4]}");
    let mut operators = String::with_capacity(tensor_count * 60);
    let mut previous = "x".to_string();
    let mut count = 1;
    let mut op = 0;
    while count + 3 <= tensor_count {
        let weight = format!("w{op}");
        let activation = format!("a{op}");
        write!(
            json,
            ",\n{{\"id\":\"{weight}\",\"dtype\":\"int8\",\"shape\":[16],\"data\":\"AAECAwQFBgcICQoLDA0ODw==\"}}\
             ,\n{{\"id\":\"{activation}\",\"dtype\":\"float32\",\"shape\":[1,8,8,4]}}"
        )
        .unwrap();
        count += 2;
        if op > 0 {
            operators.push(',');
        }
        write!(
            operators,
            "\n{{\"type\":\"CONV_2D\",\"inputs\":[\"{previous}\",\"{weight}\"],\"outputs\":[\"{activation}\"]}}"
        )
        .unwrap();
        previous = activation.clone();
        if op % 16 == 15 {
            let view = format!("v{op}");
            write!(
                json,
                ",\n{{\"id\":\"{view}\",\"size\":1024,\"alias_of\":\"{activation}\",\"alias_offset\":0}}"
            )
            .unwrap();
            count += 1;
            previous = view;
        }
        op += 1;
    }
    while count < tensor_count {
        write!(
            json,
            ",\n{{\"id\":\"p{count}\",\"kind\":\"persistent\",\"size\":64}}"
        )
        .unwrap();
        count += 1;
    }
    write!(
        json,
        "\n],\"operators\":[{operators}\n],\"inputs\":[\"x\"],\"outputs\":[\"{previous}\"]}}\n"
    )
    .unwrap();
    json
}

fn best_of<T>(mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let value = run();
        best = best.min(start.elapsed());
        last = Some(value);
    }
    (best, last.expect("RUNS > 0"))
}

fn temp_model_path() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memplan-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create bench dir");
    dir.join("model.json")
}

fn main() {
    let tensor_count: usize = std::env::var("MEMPLAN_BENCH_TENSORS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let path = temp_model_path();
    std::fs::write(&path, generate(tensor_count)).expect("write model");
    let bytes = std::fs::metadata(&path).expect("stat model").len();
    println!(
        "model: {tensor_count} tensors, {:.1} MB, {}",
        bytes as f64 / 1e6,
        path.display()
    );

    // serde_json alone: read the file and parse it into a Value.
    let (serde_time, value) = best_of(|| {
        let text = std::fs::read_to_string(&path).expect("read model");
        serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON")
    });
    let serde_tensors = value["tensors"].as_array().map_or(0, Vec::len);
    drop(value);

    let target = Target::generic();
    let (read_time, _) = best_of(|| read_model(&path).expect("read model"));
    let (total_time, analysis) = best_of(|| {
        let model = read_model(Path::new(&path)).expect("read model");
        analyze(model, &target, &Constraints::default(), &Rules::default()).expect("analyze")
    });
    assert_eq!(analysis.request.tensors.len(), serde_tensors);

    println!(
        "serde_json -> Value (read + parse):   {:>8.1} ms",
        serde_time.as_secs_f64() * 1e3
    );
    println!(
        "memplan read_model:                   {:>8.1} ms",
        read_time.as_secs_f64() * 1e3
    );
    println!(
        "memplan read_model + analyze:         {:>8.1} ms  ({:.2}x serde_json -> Value)",
        total_time.as_secs_f64() * 1e3,
        total_time.as_secs_f64() / serde_time.as_secs_f64()
    );
    println!(
        "steps {}, lower bound of FLASH {} bytes",
        analysis.request.num_steps, analysis.memory_lower_bounds[1]
    );
    let _ = std::fs::remove_dir_all(path.parent().expect("bench dir"));
}
