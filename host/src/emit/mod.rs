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

use std::borrow::Cow;
use std::path::Path;

use crate::error::{Error, Result};
use crate::render::RenderPlan;

pub use atomic::{check_destination, OutputFile, PendingFile};

/// Every file of the output directory, to be formatted as it is written: the largest first
/// (see [`atomic::publish_pending`]).
pub fn pending_files(plan: &RenderPlan) -> Vec<PendingFile<'_>> {
    let p = &plan.prefix;
    let text = |text: std::result::Result<String, std::fmt::Error>, what: &'static str| {
        text.map(|text| Cow::Owned(text.into_bytes()))
            .map_err(format_error(what))
    };
    let mut files = vec![
        PendingFile {
            name: format!("{p}_residency.json"),
            contents: Box::new(move || {
                residency::residency_json(plan)
                    .map(|text| Cow::Owned(text.into_bytes()))
                    .map_err(format_error("the residency report"))
            }),
        },
        PendingFile {
            name: format!("{p}_tensors.c"),
            contents: Box::new(move || text(c_sources::tensors_c(plan), "the tensor tables")),
        },
        PendingFile {
            name: format!("{p}_plan.json"),
            contents: Box::new(move || Ok(Cow::Borrowed(plan.plan_document.as_bytes()))),
        },
        PendingFile {
            name: format!("{p}_tensors.h"),
            contents: Box::new(move || text(c_header::tensors_h(plan), "the C header")),
        },
        PendingFile {
            name: format!("{p}_layout.svg"),
            contents: Box::new(move || text(svg::layout_svg(plan), "the layout picture")),
        },
        PendingFile {
            name: format!("{p}_constants.c"),
            contents: Box::new(move || text(c_sources::constants_c(plan), "the constant blobs")),
        },
    ];
    if let (true, Some(tflite)) = (plan.emit_tflite, &plan.tflite) {
        files.push(PendingFile {
            name: format!("{p}.tflite"),
            contents: Box::new(move || {
                tflite_model::model_with_offline_plan(
                    &tflite.file,
                    tflite.subgraph_count,
                    &tflite.offsets,
                    &tflite.source,
                )
                .map(Cow::Owned)
            }),
        });
    }
    if plan.external_arenas {
        for payload in plan
            .regions
            .iter()
            .filter_map(|region| region.payload.as_ref())
        {
            files.push(PendingFile {
                name: payload.sidecar.clone(),
                contents: Box::new(move || Ok(Cow::Borrowed(&payload.bytes[..]))),
            });
        }
    }
    files
}

/// Every file of the output directory, formatted, sorted by name.
pub fn output_files(plan: &RenderPlan) -> Result<Vec<OutputFile>> {
    let mut files = pending_files(plan)
        .into_iter()
        .map(|file| {
            Ok(OutputFile {
                contents: (file.contents)()?.into_owned(),
                name: file.name,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Turns a formatting failure (a bug: formatting into memory cannot fail) into an error.
fn format_error<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |error| Error::internal(format!("cannot format {what}: {error}"))
}

/// Writes the rendered plan into directory `out`, replacing it atomically; returns the
/// names of the files written. On failure `out` is left exactly as it was.
pub fn emit(plan: &RenderPlan, out: &Path) -> Result<Vec<String>> {
    let files = pending_files(plan);
    atomic::publish_pending(&files, out, &atomic::write_synced)?;
    let mut names: Vec<String> = files.into_iter().map(|file| file.name).collect();
    names.sort();
    Ok(names)
}
