//! The tables of `memplan bench`: text (aligned columns), JSON and CSV, one row per input and
//! planner, in the order they were measured. Each row gives the planner's time limit, when one
//! is known, and flags a planner whose slowest run overran it.

use serde_json::{json, Value};

use crate::selection::measure::{BenchRow, Measurement};

pub fn format_text(rows: &[BenchRow]) -> String {
    let input_width = rows.iter().map(|r| r.input.len()).max().unwrap_or(0).max(5);
    let planner_width = rows
        .iter()
        .map(|r| r.planner.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "{:<input_width$}  {:<planner_width$}  {:>12}  {:>12}  {:>7}  {:>11}  {:>9}\n",
        "input", "planner", "height", "lower bound", "ratio", "median ms", "limit ms"
    );
    for row in rows {
        match &row.outcome {
            Ok(m) => out.push_str(&format!(
                "{:<input_width$}  {:<planner_width$}  {:>12}  {:>12}  {:>7.4}  {:>11.3}  {:>9}{}\n",
                row.input,
                row.planner,
                m.height,
                m.lower_bound,
                m.ratio(),
                m.median_time.as_secs_f64() * 1e3,
                m.limit
                    .map_or("-".to_string(), |limit| format!("{:.0}", limit.as_secs_f64() * 1e3)),
                flags(m)
            )),
            Err(error) => out.push_str(&format!(
                "{:<input_width$}  {:<planner_width$}  failed: {}\n",
                row.input,
                row.planner,
                error.message.replace('\n', " ")
            )),
        }
    }
    out
}

/// What the text row says after its columns: an overrun, heights that varied over the runs.
fn flags(m: &Measurement) -> String {
    let mut flags = String::new();
    if m.overran() {
        flags.push_str(&format!(
            "  OVERRAN: slowest run {:.0} ms",
            m.max_time.as_secs_f64() * 1e3
        ));
    }
    if let Some((low, high)) = m.height_range {
        flags.push_str(&format!(
            "  height varied {low}-{high} over the runs (stopped by its time limit)"
        ));
    }
    flags
}

pub fn rows_json(rows: &[BenchRow]) -> Value {
    let results: Vec<Value> = rows
        .iter()
        .map(|row| match &row.outcome {
            Ok(m) => json!({
                "input": row.input,
                "planner": row.planner,
                "height": m.height,
                "lower_bound": m.lower_bound,
                "ratio": m.ratio(),
                "median_ms": m.median_time.as_secs_f64() * 1e3,
                "max_ms": m.max_time.as_secs_f64() * 1e3,
                "limit_ms": m.limit.map(|limit| limit.as_secs_f64() * 1e3),
                "overran": m.overran(),
                "height_min": m.height_range.map_or(m.height, |range| range.0),
                "height_max": m.height_range.map_or(m.height, |range| range.1),
                "runs": m.runs,
            }),
            Err(error) => json!({
                "input": row.input,
                "planner": row.planner,
                "error": error.message,
                "exit_code": error.kind.exit_code(),
            }),
        })
        .collect();
    json!({ "results": results })
}

pub fn format_csv(rows: &[BenchRow]) -> String {
    let mut out = String::from(
        "input,planner,height,lower_bound,ratio,median_ms,max_ms,limit_ms,overran,error\n",
    );
    for row in rows {
        let fields = match &row.outcome {
            Ok(m) => [
                m.height.to_string(),
                m.lower_bound.to_string(),
                format!("{:.6}", m.ratio()),
                format!("{:.3}", m.median_time.as_secs_f64() * 1e3),
                format!("{:.3}", m.max_time.as_secs_f64() * 1e3),
                m.limit.map_or(String::new(), |limit| {
                    format!("{:.3}", limit.as_secs_f64() * 1e3)
                }),
                m.overran().to_string(),
                String::new(),
            ],
            Err(error) => [
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                error.message.clone(),
            ],
        };
        let mut line = vec![csv_field(&row.input), csv_field(&row.planner)];
        line.extend(fields.iter().map(|field| csv_field(field)));
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::check::{Violation, ViolationKind, Violations};
    use crate::error::Error;
    use crate::selection::measure::wrong_plan_error;

    #[test]
    fn outputs_list_every_row_in_order() {
        let measurement = Measurement {
            height: 90,
            lower_bound: 80,
            median_time: Duration::from_micros(1500),
            max_time: Duration::from_micros(2000),
            limit: None,
            height_range: None,
            runs: 3,
        };
        let overran = Measurement {
            median_time: Duration::from_millis(1400),
            max_time: Duration::from_millis(1700),
            limit: Some(Duration::from_secs(1)),
            height_range: Some((88, 90)),
            ..measurement.clone()
        };
        let rows = vec![
            BenchRow {
                input: "a.csv".into(),
                planner: "greedy-bestfit".into(),
                outcome: Ok(measurement),
            },
            BenchRow {
                input: "a.csv".into(),
                planner: "broken".into(),
                outcome: Err(Error::plugin("crashed, badly")),
            },
            BenchRow {
                input: "a.csv".into(),
                planner: "portfolio".into(),
                outcome: Ok(overran),
            },
            BenchRow {
                input: "a.csv".into(),
                planner: "sloppy".into(),
                outcome: Err(wrong_plan_error(
                    "sloppy",
                    &Violations(vec![Violation::new(ViolationKind::OutOfArena, "too far")]),
                )),
            },
        ];
        let csv = format_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[1],
            "a.csv,greedy-bestfit,90,80,1.125000,1.500,2.000,,false,"
        );
        assert_eq!(lines[2], "a.csv,broken,,,,,,,,\"crashed, badly\"");
        assert_eq!(
            lines[3],
            "a.csv,portfolio,90,80,1.125000,1400.000,1700.000,1000.000,true,"
        );
        // A line break in a message is quoted in CSV (so the row is two lines of the file).
        assert!(
            lines[4].starts_with("a.csv,sloppy,,,,,,,,\"planner `sloppy` returned a wrong plan"),
            "{csv}"
        );
        let json = rows_json(&rows);
        assert_eq!(json["results"][0]["ratio"], 1.125);
        assert_eq!(json["results"][0]["limit_ms"], Value::Null);
        assert_eq!(json["results"][0]["overran"], false);
        assert_eq!(json["results"][1]["exit_code"], 4);
        assert_eq!(json["results"][2]["limit_ms"], 1000.0);
        assert_eq!(json["results"][2]["max_ms"], 1700.0);
        assert_eq!(json["results"][2]["overran"], true);
        assert_eq!(json["results"][3]["exit_code"], 3);
        assert!(json["results"][3].get("height").is_none());
        let text = format_text(&rows);
        let first = text.lines().nth(1).unwrap();
        assert!(first.contains("1.1250") && first.ends_with(" -"), "{text}");
        assert!(
            text.lines().nth(2).unwrap().contains("failed: crashed"),
            "{text}"
        );
        let late = text.lines().nth(3).unwrap();
        assert!(
            late.ends_with(
                "1000  OVERRAN: slowest run 1700 ms  height varied 88-90 over the runs \
                 (stopped by its time limit)"
            ),
            "{text}"
        );
        assert_eq!(json["results"][2]["height_min"], 88);
        assert_eq!(json["results"][0]["height_max"], 90);
        let rejected = text.lines().nth(4).unwrap();
        assert!(
            rejected.contains("failed: planner `sloppy` returned a wrong plan")
                && rejected.contains("[out_of_arena, contract 4] too far"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 5, "one line per row: {text}");
    }
}
