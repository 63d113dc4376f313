//! Reader of memplan's model JSON, version 1 (docs/model-format.md).
//!
//! Built for million-tensor models: serde deserializes straight into typed documents (no
//! `serde_json::Value`), ids and base64 borrowed from the text, and each tensor object is
//! turned into a [`Tensor`] the moment it is parsed, so the raw tensor documents are never
//! held all at once. Ids are resolved through one hash map (a cheap non-cryptographic hash:
//! the keys are the user's own file). A second, linear pass resolves references, loads
//! `data_file` bytes and infers kinds.
//!
//! Syntax and type errors, and errors found while a tensor is parsed (duplicate id, bad dtype,
//! size overflow, bad base64, ...), carry the file, line and column; errors found afterwards
//! name the tensor (id and index) or the operator.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Component, Path, PathBuf};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::base64;
use crate::input::model::{
    alignment_problem, Lifetime, LifetimeRule, Model, ModelAlias, Operator, Tensor, TensorKind,
    MAX_TENSOR_BYTES,
};
use crate::input::source::{parse_json, read_text, text_from_bytes, JsonId, MAX_MODEL_FILE_BYTES};

mod data_files;
mod documents;
#[cfg(test)]
mod tests;

use data_files::*;
use documents::*;

const WHAT: &str = "a memplan model JSON (docs/model-format.md)";

/// Reads a model JSON file.
pub fn read_model_json(path: &Path) -> Result<Model> {
    let text = read_text(path, WHAT, MAX_MODEL_FILE_BYTES)?;
    parse_model_json(path, &text)
}

/// Reads a model JSON from its bytes; `path` names it in messages and is where relative
/// `data_file` paths start. The entry for fuzzing: never panics, whatever the bytes.
pub fn read_model_json_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    let text = text_from_bytes(path, bytes.to_vec(), WHAT)?;
    parse_model_json(path, &text)
}

fn parse_model_json(path: &Path, text: &str) -> Result<Model> {
    let doc: ModelDoc = parse_json(path, text, WHAT)?;
    build_model(path, doc)
}

/// Bytes per element of a dtype name.
fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        "int64" | "uint64" | "float64" | "complex64" => 8,
        "complex128" => 16,
        _ => return None,
    })
}

const DTYPES: &str =
    "bool, int8, uint8, int16, uint16, float16, bfloat16, int32, uint32, float32, int64, uint64, float64, complex64, complex128";

/// The checks and conversions that need nothing but the tensor object itself. The kind is
/// provisional when not written (see [`TensorList::kind_given`]).
fn convert_tensor(doc: &TensorDoc<'_>) -> std::result::Result<Tensor, String> {
    let element_size = match doc.dtype.as_deref() {
        Some(dtype) => dtype_size(dtype)
            .ok_or_else(|| format!("unknown dtype `{dtype}`; use one of {DTYPES}"))?,
        None => 1,
    };
    let shape_size = match doc.shape {
        None => None,
        Some(_) if doc.dtype.is_none() => {
            return Err("`shape` needs a `dtype` to know the element size".into())
        }
        Some(ShapeProduct(elements)) => Some(
            elements
                .and_then(|e| e.checked_mul(element_size))
                .ok_or("the shape's byte size overflows 64 bits")?,
        ),
    };
    let size = match (doc.size.map(|s| s.0), shape_size) {
        (Some(size), Some(from_shape)) if size != from_shape => {
            return Err(format!(
                "`size` {size} disagrees with dtype and shape ({from_shape} bytes); give one or make them agree"
            ))
        }
        (Some(size), _) | (None, Some(size)) => size,
        (None, None) => return Err("no size: give `size` in bytes, or `dtype` and `shape`".into()),
    };
    if size > MAX_TENSOR_BYTES {
        return Err(format!(
            "size {size} bytes is larger than memplan accepts ({MAX_TENSOR_BYTES})"
        ));
    }
    if let Some(problem) = doc.alignment.and_then(alignment_problem) {
        return Err(problem);
    }
    let lifetime = match doc.lifetime {
        Some([first, last]) if first > last => {
            return Err(format!(
                "lifetime [{first}, {last}] ends before it starts; lifetimes are inclusive [first, last]"
            ))
        }
        Some([first, last]) => Some(Lifetime::new(first, last)),
        None => None,
    };
    let data = match &doc.data {
        Some(text) => Some(base64::decode(text).map_err(|(position, why)| {
            format!("`data` is not valid base64: {why} at character {position}")
        })?),
        None => None,
    };
    let id = doc.id.0.to_string();
    Ok(Tensor {
        // No name of its own: the id names it (see `Tensor::name`).
        name: doc.name.as_deref().map_or_else(String::new, str::to_string),
        id,
        kind: doc.kind.unwrap_or(TensorKind::Intermediate),
        size,
        element_size,
        alignment: doc.alignment,
        alias_of: None,
        fixed_offset: doc.fixed_offset.map(|o| o.0),
        lifetime,
        data,
    })
}

/// Resolves references, loads data files, infers kinds and checks data against kinds.
fn build_model(path: &Path, doc: ModelDoc<'_>) -> Result<Model> {
    let file = path.display();
    if doc.version != 1 {
        return Err(Error::input(format!(
            "{file}: model format version {} is not supported; this memplan reads version 1",
            doc.version
        )));
    }
    let TensorList {
        mut tensors,
        kind_given,
        ids,
        aliases,
        data_files,
    } = doc.tensors;
    let index_of = index_ids(&file, &ids)?;
    let lookup = |id: &JsonId<'_>, place: &dyn Fn() -> String| -> Result<u32> {
        index_of.get(id.0.as_ref()).copied().ok_or_else(|| {
            Error::input(format!(
                "{file}: {}: no tensor has id '{}'; add it to `tensors` or fix the reference",
                place(),
                id.0
            ))
        })
    };
    let tensor_at = |tensors: &[Tensor], index: u32, what: String| {
        Error::input(format!(
            "{file}: tensor '{}' (tensors[{index}]): {what}",
            tensors[index as usize].id
        ))
    };

    for (index, target, offset) in &aliases {
        let target = lookup(target, &|| {
            format!(
                "tensor '{}' (tensors[{index}]): alias_of",
                tensors[*index as usize].id
            )
        })?;
        tensors[*index as usize].alias_of = Some(ModelAlias {
            target,
            offset: *offset,
        });
    }
    let mut loaded = DataFiles::new(path);
    for (index, data_file) in &data_files {
        let bytes = loaded
            .read(data_file, tensors[*index as usize].size)
            .map_err(|what| tensor_at(&tensors, *index, what))?;
        tensors[*index as usize].data = Some(bytes);
    }

    let inputs = doc
        .inputs
        .iter()
        .enumerate()
        .map(|(i, id)| lookup(id, &|| format!("inputs[{i}]")))
        .collect::<Result<Vec<u32>>>()?;
    let outputs = doc
        .outputs
        .iter()
        .enumerate()
        .map(|(i, id)| lookup(id, &|| format!("outputs[{i}]")))
        .collect::<Result<Vec<u32>>>()?;
    // Kind inference: graph input, else graph output, else constant when it has data, else
    // intermediate (the provisional kind).
    for &i in &outputs {
        if !kind_given[i as usize] {
            tensors[i as usize].kind = TensorKind::Output;
        }
    }
    for &i in &inputs {
        if !kind_given[i as usize] {
            tensors[i as usize].kind = TensorKind::Input;
        }
    }
    for (index, tensor) in tensors.iter_mut().enumerate() {
        if !kind_given[index] && tensor.data.is_some() && tensor.kind == TensorKind::Intermediate {
            tensor.kind = TensorKind::Constant;
        }
    }
    for (index, tensor) in tensors.iter().enumerate() {
        if let Some(what) = data_problem(tensor) {
            return Err(tensor_at(&tensors, index as u32, what));
        }
    }

    let OperatorList {
        types,
        ids: operator_ids,
        ranges,
    } = doc.operators;
    // Exporters list tensors in creation order and operators mostly name the tensor declared
    // right after the one named before (an operator's weights, then its output): try that
    // one first, a comparison with memory read just before, and fall back to the map.
    let mut next = 0usize;
    let resolved: Vec<Option<u32>> = operator_ids
        .iter()
        .map(|id| {
            let found = match ids.get(next) {
                Some(candidate) if candidate.as_ref() == id.0.as_ref() => Some(next as u32),
                _ => index_of.get(id.0.as_ref()).copied(),
            };
            if let Some(index) = found {
                next = index as usize + 1;
            }
            found
        })
        .collect();
    let mut operators = Vec::with_capacity(types.len());
    for (k, (op_type, [inputs, outputs])) in types.into_iter().zip(ranges).enumerate() {
        let indices = |range: std::ops::Range<usize>, list: &str| {
            let start = range.start;
            range
                .map(|at| {
                    resolved[at].ok_or_else(|| {
                        Error::input(format!(
                            "{file}: {}: {list}[{}]: no tensor has id '{}'; add it to `tensors` or fix the reference",
                            describe(k, &op_type),
                            at - start,
                            operator_ids[at].0
                        ))
                    })
                })
                .collect::<Result<Vec<u32>>>()
        };
        operators.push(Operator {
            inputs: indices(inputs, "inputs")?,
            outputs: indices(outputs, "outputs")?,
            op_type: op_type.into_owned(),
        });
    }

    Ok(Model {
        path: path.to_path_buf(),
        tensors,
        operators,
        inputs,
        outputs,
        num_steps: None,
        rule: LifetimeRule::Sequential,
        tflite: None,
    })
}
