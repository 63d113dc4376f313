//! Emit stage: formats the rendered plan's files and writes them atomically.
//!
//! Files in the output directory (see docs/output-files.md):
//! `{prefix}_tensors.h`, `{prefix}_tensors.c`, `{prefix}_constants.c`,
//! `{prefix}_residency.json`, `{prefix}_plan.json`, `{prefix}_layout.svg`, with external
//! arenas one sidecar `.bin` per constant payload, and with `--emit-tflite` `{prefix}.tflite`,
//! the input model carrying memplan's plan for TensorFlow Lite Micro. Everything is formatted in memory first,
//! from the render plan alone (no clock, no paths, sorted tables), so two runs on the same
//! inputs write byte-identical files.

mod atomic;
mod c_header;
mod c_sources;
mod c_templates;
mod c_text;
mod residency;
mod svg;
mod tflite_model;

use std::path::Path;

use crate::error::{Error, Result};
use crate::render::RenderPlan;

pub use atomic::{check_destination, OutputFile};

/// Every file of the output directory, formatted, sorted by name. The large files are
/// formatted side by side (a million tensors take a few hundred milliseconds each).
pub fn output_files(plan: &RenderPlan) -> Result<Vec<OutputFile>> {
    let p = &plan.prefix;
    let (residency, tensors_c, tensors_h, layout, constants) = std::thread::scope(|scope| {
        let residency = scope.spawn(|| residency::residency_json(plan));
        let tensors_c = scope.spawn(|| c_sources::tensors_c(plan));
        let tensors_h = c_header::tensors_h(plan);
        let layout = svg::layout_svg(plan);
        let constants = c_sources::constants_c(plan);
        (
            joined(residency),
            joined(tensors_c),
            tensors_h,
            layout,
            constants,
        )
    });
    let mut files = vec![
        OutputFile {
            name: format!("{p}_tensors.h"),
            contents: tensors_h
                .map_err(format_error("the C header"))?
                .into_bytes(),
        },
        OutputFile {
            name: format!("{p}_tensors.c"),
            contents: tensors_c
                .map_err(format_error("the tensor tables"))?
                .into_bytes(),
        },
        OutputFile {
            name: format!("{p}_constants.c"),
            contents: constants
                .map_err(format_error("the constant blobs"))?
                .into_bytes(),
        },
        OutputFile {
            name: format!("{p}_residency.json"),
            contents: residency
                .map_err(format_error("the residency report"))?
                .into_bytes(),
        },
        OutputFile {
            name: format!("{p}_plan.json"),
            contents: plan.plan_document.clone().into_bytes(),
        },
        OutputFile {
            name: format!("{p}_layout.svg"),
            contents: layout
                .map_err(format_error("the layout picture"))?
                .into_bytes(),
        },
    ];
    if let (true, Some(tflite)) = (plan.emit_tflite, &plan.tflite) {
        files.push(OutputFile {
            name: format!("{p}.tflite"),
            contents: tflite_model::model_with_offline_plan(
                &tflite.file,
                tflite.subgraph_count,
                &tflite.offsets,
                &tflite.source,
            )?,
        });
    }
    if plan.external_arenas {
        for payload in plan
            .regions
            .iter()
            .filter_map(|region| region.payload.as_ref())
        {
            files.push(OutputFile {
                name: payload.sidecar.clone(),
                contents: payload.bytes.clone(),
            });
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// The result of a formatting thread; a panic in it goes on in the caller's thread.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Turns a formatting failure (a bug: formatting into memory cannot fail) into an error.
fn format_error<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |error| Error::internal(format!("cannot format {what}: {error}"))
}

/// Writes the rendered plan into directory `out`, replacing it atomically; returns the
/// names of the files written. On failure `out` is left exactly as it was.
pub fn emit(plan: &RenderPlan, out: &Path) -> Result<Vec<String>> {
    let files = output_files(plan)?;
    atomic::publish(&files, out)?;
    Ok(files.into_iter().map(|file| file.name).collect())
}
