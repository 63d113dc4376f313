//! The summary `memplan plan` prints on stdout: per region its role, memory, size, lower
//! bound, fragmentation and budget use, as a table (`--format text`) or as one JSON document
//! (`--format json`). With several planners (`--planner a,b`) it also lists each planner's
//! result ([`Candidate`]): one line each under the first line of the table, a `candidates`
//! array in the JSON.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::error::ErrorKind;
use crate::render::RenderPlan;
use crate::selection::{Candidate, CandidateOutcome};

/// What the plan command knows about the run beyond the rendered plan.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Name of the planner whose plan was kept.
    pub planner: String,
    /// The plugin file it came from, or `built in`.
    pub planner_file: String,
    /// What it shadows: files later in the search path with a planner of the same name, or
    /// memplan's built-in planners.
    pub shadowed_files: Vec<String>,
    /// The planner's one-line note about its plan (may be empty).
    pub planner_summary: String,
    /// With several planners (`--planner a,b`), each planner's result in the order listed;
    /// empty with one planner.
    pub candidates: Vec<Candidate>,
    /// Wall-clock time of each stage, in pipeline order (`read`, `analyze`, `plan`, ...).
    pub timings: Vec<(&'static str, Duration)>,
    /// The output directory and the files written there.
    pub out: PathBuf,
    pub files: Vec<String>,
}

/// A candidate in the JSON summary. Fields in alphabetical order, the order the report has
/// always had.
#[derive(Serialize)]
struct CandidateSummary<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<u8>,
    kept: bool,
    ok: bool,
    planner: &'a str,
    time_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    writable_bytes: Option<u64>,
}

impl<'a> CandidateSummary<'a> {
    fn new(candidate: &'a Candidate) -> Self {
        let (writable_bytes, kept, error, kind) = match &candidate.outcome {
            CandidateOutcome::Planned {
                writable_bytes,
                kept,
            } => (Some(*writable_bytes), *kept, None, None),
            CandidateOutcome::Rejected { reason } => {
                (None, false, Some(reason), Some(ErrorKind::Rejected))
            }
            CandidateOutcome::Failed { kind, reason } => (None, false, Some(reason), Some(*kind)),
        };
        CandidateSummary {
            error: error.map(String::as_str),
            exit_code: kind.map(ErrorKind::exit_code),
            kept,
            ok: writable_bytes.is_some(),
            planner: &candidate.planner,
            time_ms: round2(candidate.elapsed.as_secs_f64() * 1e3),
            writable_bytes,
        }
    }
}

/// The text of a candidate: one line, e.g.
/// `greedy-bestfit: 4096 bytes in writable memories, 1.2 ms (kept)`, except that a reason of
/// several lines (the violations of a rejected plan) has its further lines indented by
/// [`CONTINUATION`], so that in the list they sit under their planner's line.
fn candidate_text(candidate: &Candidate) -> String {
    let time = text_ms(candidate.elapsed);
    let planner = &candidate.planner;
    match &candidate.outcome {
        CandidateOutcome::Planned {
            writable_bytes,
            kept,
        } => {
            let kept = if *kept { " (kept)" } else { "" };
            format!("{planner}: {writable_bytes} bytes in writable memories, {time}{kept}")
        }
        CandidateOutcome::Rejected { reason } | CandidateOutcome::Failed { reason, .. } => {
            let reason = reason.replace('\n', &format!("\n{CONTINUATION}"));
            format!("{planner}: failed after {time}: {reason}")
        }
    }
}

/// Indent of the candidates' lines in the text summary.
const CANDIDATE_INDENT: &str = "  ";

/// Extra indent of the further lines of a candidate's text.
const CONTINUATION: &str = "  ";

/// A duration as people read it in the text summary: `12.3 ms`.
fn text_ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

#[derive(Serialize)]
struct SummaryDocument<'a> {
    prefix: &'a str,
    planner: &'a str,
    planner_file: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shadowed_files: Vec<String>,
    planner_summary: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    candidates: Vec<CandidateSummary<'a>>,
    plan_hash: &'a str,
    tensor_layout_hash: &'a str,
    arenas: Vec<ArenaSummary<'a>>,
    out: String,
    files: &'a [String],
    timings_ms: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tflite_micro: Option<TfliteMicroSummary<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operator_order: Option<super::order::OrderSummary<'a>>,
    /// The buffers the firmware binds (external tensors), in no arena.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    external: Vec<super::external::ExternalSummary<'a>>,
}

/// For a `.tflite` input: TensorFlow Lite Micro's arena head (bytes) with its own plan and with
/// memplan's offline plan, as simulated (`placement::tflm_greedy`).
#[derive(Serialize)]
struct TfliteMicroSummary<'a> {
    /// TFLM's head with its own plan (no offline plan).
    head_alone: Option<u64>,
    /// TFLM's head with memplan's offsets.
    head_with_plan: Option<u64>,
    /// TFLM's head for the input model as given, when it carries an offline plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    head_embedded: Option<u64>,
    /// TFLM's head with the offsets the written model carries.
    head_written: Option<u64>,
    /// `memplan` or `tflite-micro`: whose plan the offsets written are.
    offsets_written: &'static str,
    /// Why memplan's offsets were not written.
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_tflite_micro_plan: Option<&'a str>,
    /// Operators whose kernel scratch buffers memplan cannot size.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unknown_kernel_scratch: &'a [String],
    /// The model file written (`--emit-tflite`), if any.
    model_written: Option<String>,
}

impl<'a> TfliteMicroSummary<'a> {
    fn new(plan: &'a RenderPlan) -> Option<Self> {
        let tflite = plan.tflite.as_ref()?;
        Some(TfliteMicroSummary {
            head_alone: tflite.head_alone,
            head_with_plan: tflite.head_with_plan,
            head_embedded: tflite.head_embedded,
            head_written: tflite.head_written(),
            offsets_written: if tflite.kept_tflm_plan.is_some() {
                "tflite-micro"
            } else {
                "memplan"
            },
            kept_tflite_micro_plan: tflite.kept_tflm_plan.as_deref(),
            unknown_kernel_scratch: &tflite.unknown_scratch,
            model_written: plan.emit_tflite.then(|| format!("{}.tflite", plan.prefix)),
        })
    }
}

/// The text lines about TensorFlow Lite Micro's arena for a `.tflite` input.
fn tflite_micro_text(plan: &RenderPlan) -> Vec<String> {
    let Some(tflite) = plan.tflite.as_ref() else {
        return Vec::new();
    };
    let bytes = |head: Option<u64>| match head {
        Some(head) => format!("{head} bytes"),
        None => "unknown".to_string(),
    };
    let mut lines = vec![format!(
        "TFLite Micro arena head: {} with its own plan, {} with memplan's offline plan",
        bytes(tflite.head_alone),
        bytes(tflite.head_with_plan)
    )];
    if let Some(embedded) = tflite.head_embedded {
        lines.push(format!(
            "  the input model's own offline plan gives {embedded} bytes"
        ));
    }
    let model = format!("{}.tflite", plan.prefix);
    match (&tflite.kept_tflm_plan, plan.emit_tflite) {
        (Some(reason), true) => lines.push(format!(
            "  {model} keeps TFLite Micro's own plan (every offset -1): {reason}"
        )),
        (Some(reason), false) => lines.push(format!(
            "  --emit-tflite would keep TFLite Micro's own plan: {reason}"
        )),
        (None, true) => lines.push(format!("  {model} carries memplan's offline plan")),
        (None, false) => {}
    }
    lines
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
        planner_file: report.planner_file.clone(),
        shadowed_files: report.shadowed_files.clone(),
        planner_summary: &report.planner_summary,
        candidates: report
            .candidates
            .iter()
            .map(CandidateSummary::new)
            .collect(),
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
        tflite_micro: TfliteMicroSummary::new(plan),
        operator_order: super::order::OrderSummary::new(plan),
        external: super::external::summaries(plan),
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

/// Writes the summary as a table for people.
pub fn write_text(plan: &RenderPlan, report: &RunReport, out: &mut dyn Write) -> io::Result<()> {
    let planner_note = if report.planner_summary.is_empty() {
        String::new()
    } else {
        // The planner's own words: no control characters reach the terminal.
        format!(
            " ({})",
            crate::printable::escape_hidden(&report.planner_summary)
        )
    };
    writeln!(
        out,
        "module `{}`, planned by {}{planner_note}",
        plan.prefix, report.planner
    )?;
    if !report.shadowed_files.is_empty() {
        writeln!(
            out,
            "{CONTINUATION}planner `{}` from {}, which shadows the one in {} (later in the \
             plugin search path)",
            report.planner,
            report.planner_file,
            report.shadowed_files.join(", ")
        )?;
    }
    for candidate in &report.candidates {
        for line in candidate_text(candidate).lines() {
            writeln!(out, "{CANDIDATE_INDENT}{line}")?;
        }
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
    for line in super::order::order_text(plan) {
        writeln!(out, "{line}")?;
    }
    if let Some(line) = super::external::text(plan) {
        writeln!(out, "{line}")?;
    }
    for line in tflite_micro_text(plan) {
        writeln!(out, "{line}")?;
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
            .map(|(stage, duration)| format!("{stage} {}", text_ms(*duration)))
            .collect();
        writeln!(out, "time: {}", stages.join(", "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan without arenas: the summary around the candidates stays short.
    fn empty_plan() -> RenderPlan {
        RenderPlan {
            prefix: "model".to_string(),
            external_arenas: false,
            num_steps: 0,
            regions: Vec::new(),
            tensors: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            plan_hash: "e3b0c44298fc1c14".to_string(),
            tensor_layout_hash: "e3b0c44298fc1c14".to_string(),
            plan_document: String::new(),
            tflite: None,
            emit_tflite: false,
            order: None,
        }
    }

    fn candidate(planner: &str, micros: u64, outcome: CandidateOutcome) -> Candidate {
        Candidate {
            planner: planner.to_string(),
            elapsed: Duration::from_micros(micros),
            outcome,
        }
    }

    /// A report of four planners: one rejected, one kept, one failed, one beaten.
    fn report() -> RunReport {
        RunReport {
            planner: "small".to_string(),
            out: PathBuf::from("out"),
            candidates: vec![
                candidate(
                    "wrong",
                    250,
                    CandidateOutcome::Rejected {
                        reason: "rejected (2 violations):\n  - first\n  - second".to_string(),
                    },
                ),
                candidate(
                    "small",
                    1_250,
                    CandidateOutcome::Planned {
                        writable_bytes: 64,
                        kept: true,
                    },
                ),
                candidate(
                    "broken",
                    100,
                    CandidateOutcome::Failed {
                        kind: ErrorKind::Plugin,
                        reason: "panicked".to_string(),
                    },
                ),
                candidate(
                    "big",
                    2_000,
                    CandidateOutcome::Planned {
                        writable_bytes: 4096,
                        kept: false,
                    },
                ),
            ],
            ..RunReport::default()
        }
    }

    #[test]
    fn the_text_summary_lists_the_candidates_under_the_first_line() {
        let mut text = Vec::new();
        write_text(&empty_plan(), &report(), &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().take(8).collect();
        assert_eq!(
            lines,
            vec![
                "module `model`, planned by small",
                "  wrong: failed after 0.2 ms: rejected (2 violations):",
                "      - first",
                "      - second",
                "  small: 64 bytes in writable memories, 1.2 ms (kept)",
                "  broken: failed after 0.1 ms: panicked",
                "  big: 4096 bytes in writable memories, 2.0 ms",
                "plan_hash e3b0c44298fc1c14  tensor_layout_hash e3b0c44298fc1c14",
            ]
        );
    }

    #[test]
    fn the_json_summary_has_one_object_per_candidate() {
        let mut json = Vec::new();
        write_json(&empty_plan(), &report(), &mut json).unwrap();
        let document: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            document["candidates"],
            serde_json::json!([
                {"planner": "wrong", "ok": false, "kept": false, "time_ms": 0.25,
                 "error": "rejected (2 violations):\n  - first\n  - second", "exit_code": 3},
                {"planner": "small", "ok": true, "kept": true, "time_ms": 1.25,
                 "writable_bytes": 64},
                {"planner": "broken", "ok": false, "kept": false, "time_ms": 0.1,
                 "error": "panicked", "exit_code": 4},
                {"planner": "big", "ok": true, "kept": false, "time_ms": 2.0,
                 "writable_bytes": 4096},
            ])
        );
    }

    #[test]
    fn one_planner_has_no_candidates_in_either_summary() {
        let report = RunReport {
            planner: "only".to_string(),
            ..RunReport::default()
        };
        let mut json = Vec::new();
        write_json(&empty_plan(), &report, &mut json).unwrap();
        let document: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert!(document.get("candidates").is_none(), "{document}");
        let mut text = Vec::new();
        write_text(&empty_plan(), &report, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.lines().nth(1).unwrap().starts_with("plan_hash"),
            "{text}"
        );
    }
}
