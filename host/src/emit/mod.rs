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
mod c_external;
mod c_header;
mod c_order;
mod c_sources;
mod c_templates;
mod c_text;
mod residency;
mod svg;
mod tflite_model;
mod tflite_order;

use std::fmt;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};
use crate::render::RenderPlan;

pub use atomic::{check_destination, publish, OutputFile, PendingFile};

/// Every file of the output directory, formatted straight into the file as it is written:
/// the largest first (see [`atomic::publish_pending`]).
pub fn pending_files(plan: &RenderPlan) -> Vec<PendingFile<'_>> {
    let p = &plan.prefix;
    let mut files = vec![
        PendingFile {
            name: format!("{p}_residency.json"),
            contents: Box::new(move |out| residency::write_residency_json(out, plan)),
        },
        PendingFile {
            name: format!("{p}_tensors.c"),
            contents: Box::new(move |out| {
                formatted(out, "the tensor tables", |text| {
                    c_sources::write_tensors_c(text, plan)
                })
            }),
        },
        PendingFile {
            name: format!("{p}_plan.json"),
            contents: Box::new(move |out| out.write_all(plan.plan_document.as_bytes())),
        },
        PendingFile {
            name: format!("{p}_tensors.h"),
            contents: Box::new(move |out| {
                formatted(out, "the C header", |text| {
                    c_header::write_tensors_h(text, plan)
                })
            }),
        },
        PendingFile {
            name: format!("{p}_layout.svg"),
            contents: Box::new(move |out| {
                formatted(out, "the layout picture", |text| {
                    svg::write_layout_svg(text, plan)
                })
            }),
        },
        PendingFile {
            name: format!("{p}_constants.c"),
            contents: Box::new(move |out| {
                formatted(out, "the constant blobs", |text| {
                    c_sources::write_constants_c(text, plan)
                })
            }),
        },
    ];
    if let (true, Some(tflite)) = (plan.emit_tflite, &plan.tflite) {
        files.push(PendingFile {
            name: format!("{p}.tflite"),
            contents: Box::new(move |out| {
                let reordered;
                let file = match plan.changed_order() {
                    Some(order) => {
                        reordered = tflite_order::model_with_operator_order(
                            &tflite.file,
                            order,
                            &tflite.source,
                        )
                        .map_err(|error| io::Error::other(error.message))?;
                        &reordered
                    }
                    None => &tflite.file,
                };
                let model = tflite_model::model_with_offline_plan(
                    file,
                    tflite.subgraph_count,
                    &tflite.offsets,
                    &tflite.source,
                )
                .map_err(|error| io::Error::other(error.message))?;
                out.write_all(&model)
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
                contents: Box::new(move |out| out.write_all(&payload.bytes)),
            });
        }
    }
    files
}

/// Runs `format` (text formatting) into the byte writer `out`: the writer's own error if it
/// failed, or a formatting failure (a bug) named by `what`.
fn formatted(
    out: &mut dyn io::Write,
    what: &'static str,
    format: impl FnOnce(&mut dyn fmt::Write) -> fmt::Result,
) -> io::Result<()> {
    struct Text<'a> {
        out: &'a mut dyn io::Write,
        error: Option<io::Error>,
    }
    impl fmt::Write for Text<'_> {
        fn write_str(&mut self, text: &str) -> fmt::Result {
            self.out.write_all(text.as_bytes()).map_err(|error| {
                self.error = Some(error);
                fmt::Error
            })
        }
    }
    let mut text = Text { out, error: None };
    match format(&mut text) {
        Ok(()) => Ok(()),
        Err(fmt::Error) => Err(text
            .error
            .take()
            .unwrap_or_else(|| io::Error::other(format!("memplan cannot format {what}")))),
    }
}

/// Every file of the output directory, formatted, sorted by name.
pub fn output_files(plan: &RenderPlan) -> Result<Vec<OutputFile>> {
    let mut files = pending_files(plan)
        .into_iter()
        .map(|file| {
            let mut contents = Vec::new();
            (file.contents)(&mut contents).map_err(|error| {
                Error::internal(format!("cannot format {}: {error}", file.name))
            })?;
            Ok(OutputFile {
                contents,
                name: file.name,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
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
