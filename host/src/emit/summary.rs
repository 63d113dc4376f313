//! The summary `memplan plan` prints on stdout: per region its role, memory, size, lower
//! bound, fragmentation and budget use, as a table (`--format text`) or as one JSON document
//! (`--format json`).

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::render::RenderPlan;

/// What the plan command knows about the run beyond the rendered plan.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Name of the planner whose plan was kept.
    pub planner: String,
    /// The planner's one-line note about its plan (may be empty).
    pub planner_summary: String,
    /// With several planners (`--planner a,b`), one line per planner for people and the same
    /// as JSON; empty / `Null` with one planner.
    pub candidate_lines: Vec<String>,
    pub candidates: serde_json::Value,
    /// Wall-clock time of each stage, in pipeline order (`read`, `analyze`, `plan`, ...).
    pub timings: Vec<(&'static str, Duration)>,
    /// The output directory and the files written there.
    pub out: PathBuf,
    pub files: Vec<String>,
}

#[derive(Serialize)]
struct SummaryDocument<'a> {
    prefix: &'a str,
    planner: &'a str,
    planner_summary: &'a str,
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    candidates: &'a serde_json::Value,
    plan_hash: &'a str,
    tensor_layout_hash: &'a str,
    arenas: Vec<ArenaSummary<'a>>,
    out: String,
    files: &'a [String],
    timings_ms: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct ArenaSummary<'a> {
    region_id: usize,
    role: &'static str,
    memory: &'a str,
    source_memory: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    size: u64,
    alignment: u64,
    lower_bound: u64,
    used: u64,
    fragmentation: u64,
    fragmentation_percent: f64,
    budget: Option<u64>,
    budget_use_percent: Option<f64>,
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

fn milliseconds(duration: Duration) -> f64 {
    round2(duration.as_secs_f64() * 1000.0)
}

/// Writes the summary as one JSON document (newline-terminated).
pub fn write_json(plan: &RenderPlan, report: &RunReport, out: &mut dyn Write) -> io::Result<()> {
    let mut timings = serde_json::Map::new();
    let mut total = Duration::ZERO;
    for (stage, duration) in &report.timings {
        timings.insert(stage.to_string(), milliseconds(*duration).into());
        total += *duration;
    }
    timings.insert("total".to_string(), milliseconds(total).into());
    let document = SummaryDocument {
        prefix: &plan.prefix,
        planner: &report.planner,
        planner_summary: &report.planner_summary,
        candidates: &report.candidates,
        plan_hash: &plan.plan_hash,
        tensor_layout_hash: &plan.tensor_layout_hash,
        arenas: plan
            .regions
            .iter()
            .map(|region| ArenaSummary {
                region_id: region.id,
                role: region.role.as_str(),
                memory: &region.memory,
                source_memory: &region.source_memory,
                kind: region.constant_kind(),
                size: region.size,
                alignment: region.alignment,
                lower_bound: region.lower_bound,
                used: region.used,
                fragmentation: region.fragmentation(),
                fragmentation_percent: round2(region.fragmentation_percent()),
                budget: region.budget,
                budget_use_percent: region.budget_use_percent().map(round2),
            })
            .collect(),
        out: report.out.display().to_string(),
        files: &report.files,
        timings_ms: timings,
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

/// Writes the summary as a table for people.
pub fn write_text(plan: &RenderPlan, report: &RunReport, out: &mut dyn Write) -> io::Result<()> {
    let planner_note = if report.planner_summary.is_empty() {
        String::new()
    } else {
        format!(" ({})", report.planner_summary)
    };
    writeln!(
        out,
        "module `{}`, planned by {}{planner_note}",
        plan.prefix, report.planner
    )?;
    for line in &report.candidate_lines {
        writeln!(out, "  {line}")?;
    }
    writeln!(
        out,
        "plan_hash {}  tensor_layout_hash {}",
        plan.plan_hash, plan.tensor_layout_hash
    )?;
    if plan.regions.is_empty() {
        writeln!(out, "no arenas: no tensor takes memory")?;
    } else {
        writeln!(
            out,
            "{:>6}  {:<10}  {:<8}  {:<14}  {:>12}  {:>12}  {:>13}  {:>10}",
            "region",
            "role",
            "memory",
            "source",
            "size",
            "lower bound",
            "fragmentation",
            "budget use"
        )?;
        for region in &plan.regions {
            let source = match region.constant_kind() {
                Some(kind) => format!("{} ({kind})", region.source_memory),
                None => region.source_memory.clone(),
            };
            let budget = match region.budget_use_percent() {
                Some(percent) => format!("{percent:.1}%"),
                None => "unbounded".to_string(),
            };
            writeln!(
                out,
                "{:>6}  {:<10}  {:<8}  {:<14}  {:>12}  {:>12}  {:>12.1}%  {:>10}",
                region.id,
                region.role.as_str(),
                region.memory,
                source,
                region.size,
                region.lower_bound,
                region.fragmentation_percent(),
                budget
            )?;
        }
    }
    writeln!(
        out,
        "wrote {} files to {}",
        report.files.len(),
        report.out.display()
    )?;
    if !report.timings.is_empty() {
        let stages: Vec<String> = report
            .timings
            .iter()
            .map(|(stage, duration)| format!("{stage} {:.1} ms", duration.as_secs_f64() * 1000.0))
            .collect();
        writeln!(out, "time: {}", stages.join(", "))?;
    }
    Ok(())
}
