//! The order stage (`analyze::order`): how long choosing the operator order takes on every
//! model of the shared corpus (budget: 100 ms each), and on generated graphs of 1,000 and
//! 10,000 operators (within the time limit, never worse than the stored order).
//!
//! Run: `MEMPLAN_CORPUS=$PWD/../shared/data cargo bench -p memplan --bench order` (release build).
//! Prints, per input, the best wall time of a few runs, the bound with the stored order and
//! with the order found, and whether that order is proven the least. Exits non-zero when a
//! corpus model takes more than its budget, a generated graph more than the time limit plus a
//! margin, or an order found is worse than the stored one.

use std::path::Path;
use std::time::{Duration, Instant};

use memplan::analyze::order::generated::generated_problem;
use memplan::analyze::order::{choose, search, OrderMode, DEFAULT_TIME_LIMIT};
use memplan::input::read_model;

const RUNS: usize = 5;
const CORPUS_BUDGET: Duration = Duration::from_millis(100);
/// What a generated graph may take past the time limit (building the answer after the
/// deadline is seen).
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);

fn best_of<T>(mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let result = run();
        best = best.min(start.elapsed());
        last = Some(result);
    }
    (best, last.expect("RUNS > 0"))
}

fn main() {
    let mut failures = Vec::new();
    println!(
        "{:<34} {:>10} {:>12} {:>10} {:>7}",
        "input", "time ms", "stored bound", "best bound", "proven"
    );
    match std::env::var_os("MEMPLAN_CORPUS") {
        None => println!("(MEMPLAN_CORPUS is not set: no corpus models)"),
        Some(corpus) => {
            let dir = Path::new(&corpus).join("models");
            let mut models: Vec<_> = std::fs::read_dir(&dir)
                .expect("corpus models")
                .map(|entry| entry.expect("entry").path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "tflite"))
                .collect();
            models.sort();
            for path in models {
                let model = read_model(&path).expect("corpus model reads");
                let (time, order) = best_of(|| {
                    let mut model = model.clone();
                    choose(&mut model, OrderMode::Keep, DEFAULT_TIME_LIMIT).expect("order stage")
                });
                let name = path.file_name().unwrap().to_string_lossy();
                match order {
                    Some(order) => println!(
                        "{name:<34} {:>10.2} {:>12} {:>10} {:>7}",
                        time.as_secs_f64() * 1e3,
                        order.stored_bound,
                        order.best_bound,
                        order.exact
                    ),
                    None => println!("{name:<34} {:>10.2} (one operator: nothing to order)", 0.0),
                }
                if time > CORPUS_BUDGET {
                    failures.push(format!(
                        "{name}: {time:?}, over the {CORPUS_BUDGET:?} budget"
                    ));
                }
            }
        }
    }
    for operators in [1_000, 10_000] {
        let problem = generated_problem(operators, 1);
        let stored: Vec<u32> = (0..operators as u32).collect();
        let stored_peak = search::peak_of(&problem, &stored);
        let (time, found) =
            best_of(|| search::search(&problem, Instant::now() + DEFAULT_TIME_LIMIT));
        let name = format!("generated, {operators} operators");
        println!(
            "{name:<34} {:>10.2} {:>12} {:>10} {:>7}",
            time.as_secs_f64() * 1e3,
            stored_peak,
            found.peak,
            found.exact
        );
        if time > DEFAULT_TIME_LIMIT + DEADLINE_MARGIN {
            failures.push(format!("{name}: {time:?}, past the time limit"));
        }
        if found.peak > stored_peak {
            failures.push(format!("{name}: worse than the stored order"));
        }
    }
    if !failures.is_empty() {
        eprintln!("order bench failed:\n{}", failures.join("\n"));
        std::process::exit(1);
    }
}
