//! Writes a `.tflite` model whose subgraph 0 runs its operators in another order (the one
//! memplan chose, `analyze::order`), leaving every other byte of the model as it was.
//!
//! The same technique as the offline plan's writer ([`super::tflite_model`]): a new prefix,
//! then the whole input file unchanged. The prefix holds a new root `Model` table pointing at
//! the input's own objects except `subgraphs`, a new `subgraphs` vector pointing at the
//! input's subgraph tables except the first, and a new first `SubGraph` table whose fields
//! point at the input's tensors, inputs, outputs and name, and whose `operators` vector lists
//! the input's operator tables in the new order. Operator tables are not copied: each keeps
//! its bytes, options included. The prefix's length is a multiple of 16, so the input keeps
//! its alignment.
//!
//! Models whose buffers sit outside the flatbuffer (absolute file offsets, which the prefix
//! would move) and tables with fields past the schema memplan knows are refused. The written
//! model is read back with memplan's reader and its subgraph 0 compared with the input's in
//! the new order before it is used.

use std::path::Path;

use super::tflite_model::{
    Input, Prefix, Target, BUFFER_OFFSET, MODEL_BUFFERS, MODEL_FIELDS, MODEL_VERSION,
};
use crate::error::{Error, Result};
use crate::input::tflite::read_tflite_bytes;
use crate::input::LifetimeRule;

const MODEL_SUBGRAPHS: usize = 2;
/// `SubGraph`: tensors, inputs, outputs, operators, name, debug_metadata_index.
const SUBGRAPH_FIELDS: usize = 6;
const SUBGRAPH_OPERATORS: usize = 3;
const SUBGRAPH_DEBUG_METADATA_INDEX: usize = 5;

/// The input model `file` with subgraph 0's operators in `order` (their stored indices in run
/// order); `path` names the input in messages.
pub fn model_with_operator_order(file: &[u8], order: &[u32], path: &Path) -> Result<Vec<u8>> {
    let refuse = |why: &str| {
        Error::input(format!(
            "{}: --emit-tflite with a new operator order: {why}; plan with --order keep to \
             write the model in its stored order",
            path.display()
        ))
    };
    let input = Input { bytes: file };
    let root = input.follow(0)?;
    let fields = input.fields(root)?;
    if fields.iter().skip(MODEL_FIELDS).any(Option::is_some) {
        return Err(refuse(
            "the model's root table has fields beyond the TFLite schema memplan knows",
        ));
    }
    let field = |index: usize| fields.get(index).copied().flatten();
    if let Some(at) = field(MODEL_BUFFERS) {
        for buffer in input.tables(input.follow(at)?)? {
            let offset = input.fields(buffer)?.get(BUFFER_OFFSET).copied().flatten();
            if offset.map(|at| input.u64(at)).transpose()?.unwrap_or(0) > 1 {
                return Err(refuse(
                    "its buffers sit outside the flatbuffer, at file offsets a rewrite would move",
                ));
            }
        }
    }
    let subgraphs = input.tables(input.follow(field(MODEL_SUBGRAPHS).ok_or_else(|| {
        Error::internal("the .tflite writer found no subgraphs in a model the reader accepted")
    })?)?)?;
    let first = *subgraphs.first().ok_or_else(|| {
        Error::internal("the .tflite writer found no subgraph in a model the reader accepted")
    })?;
    let subgraph_fields = input.fields(first)?;
    if subgraph_fields
        .iter()
        .skip(SUBGRAPH_FIELDS)
        .any(Option::is_some)
    {
        return Err(refuse(
            "subgraph 0 has fields beyond the TFLite schema memplan knows",
        ));
    }
    let subgraph_field = |index: usize| subgraph_fields.get(index).copied().flatten();
    let operators = match subgraph_field(SUBGRAPH_OPERATORS) {
        Some(at) => input.tables(input.follow(at)?)?,
        None => Vec::new(),
    };
    if order.len() != operators.len() {
        return Err(Error::internal(format!(
            "the new operator order lists {} operators, subgraph 0 has {}",
            order.len(),
            operators.len()
        )));
    }

    let mut prefix = Prefix::default();
    prefix.u32(0); // root uoffset, patched below
    prefix.bytes.extend_from_slice(b"TFL3");

    // Root table: the input's fields, `subgraphs` pointing at the new vector.
    let (root_table, subgraphs_reference) = copy_table(
        &mut prefix,
        &input,
        &fields[..MODEL_FIELDS.min(fields.len())],
        MODEL_FIELDS,
        MODEL_VERSION,
        MODEL_SUBGRAPHS,
    )?;

    // subgraphs: the new first one, then the input's others.
    prefix.pad_to(4, 0);
    let here = prefix.here();
    prefix.references.push((subgraphs_reference, here));
    prefix.u32(subgraphs.len() as u32);
    let first_slot = prefix.bytes.len();
    prefix.u32(0);
    for &subgraph in &subgraphs[1..] {
        prefix.reference(Target::Input(subgraph));
    }

    // The first subgraph's table: its fields, `operators` pointing at the new vector.
    let (subgraph_table, operators_reference) = copy_table(
        &mut prefix,
        &input,
        &subgraph_fields[..SUBGRAPH_FIELDS.min(subgraph_fields.len())],
        SUBGRAPH_FIELDS,
        SUBGRAPH_DEBUG_METADATA_INDEX,
        SUBGRAPH_OPERATORS,
    )?;
    prefix
        .references
        .push((first_slot, Target::Prefix(subgraph_table)));

    // operators: the input's tables in the new order.
    prefix.pad_to(4, 0);
    let here = prefix.here();
    prefix.references.push((operators_reference, here));
    prefix.u32(operators.len() as u32);
    for &operator in order {
        prefix.reference(Target::Input(operators[operator as usize]));
    }
    prefix.pad_to(16, 0);

    prefix.patch(root_table, path)?;
    let mut model = prefix.bytes;
    model.extend_from_slice(file);
    check_written(file, &model, order, path)?;
    Ok(model)
}

/// Writes a copy of an input table of `count` fields whose present fields are at `fields`:
/// each a uoffset pointing at the input's object, except field `scalar` (a 4-byte value,
/// copied) and field `replaced` (always written, as a reference the caller points at a new
/// object). Returns the table's position and that of the replaced field.
fn copy_table(
    prefix: &mut Prefix,
    input: &Input,
    fields: &[Option<usize>],
    count: usize,
    scalar: usize,
    replaced: usize,
) -> Result<(usize, usize)> {
    let field = |index: usize| fields.get(index).copied().flatten();
    let mut layout = vec![0u16; count];
    let mut size = 4u16;
    for (index, slot) in layout.iter_mut().enumerate() {
        if field(index).is_some() || index == replaced {
            *slot = size;
            size += 4;
        }
    }
    let table = prefix.table_start(&layout, size, 4);
    let mut replaced_at = 0;
    for (index, &slot) in layout.iter().enumerate() {
        if slot == 0 {
            continue;
        }
        let at = field(index).unwrap_or_default();
        if index == replaced {
            replaced_at = prefix.bytes.len();
            prefix.u32(0);
        } else if index == scalar {
            prefix.u32(input.u32(at)?);
        } else {
            prefix.reference(Target::Input(input.follow(at)?));
        }
    }
    Ok((table, replaced_at))
}

/// Reads the written model back (flatbuffer verification included): subgraph 0 must be the
/// input's with its operators in `order`, every other subgraph the input's.
fn check_written(file: &[u8], model: &[u8], order: &[u32], path: &Path) -> Result<()> {
    let graph = |bytes: &[u8]| match read_tflite_bytes(bytes, path)?.rule {
        LifetimeRule::TfliteMicro(graph) => Ok(graph.subgraphs),
        LifetimeRule::Sequential => Err(Error::internal("a .tflite read without TFLM's rule")),
    };
    let mut expected = graph(file)?;
    let written = graph(model).map_err(|error| {
        Error::internal(format!(
            "the .tflite written with a new operator order does not read back: {error}"
        ))
    })?;
    let first = &mut expected[0];
    first.flow.operators = order
        .iter()
        .map(|&k| first.flow.operators[k as usize].clone())
        .collect();
    first.operator_names = order
        .iter()
        .map(|&k| first.operator_names[k as usize].clone())
        .collect();
    first.operator_facts = order
        .iter()
        .map(|&k| first.operator_facts[k as usize].clone())
        .collect();
    if written != expected {
        return Err(Error::internal(
            "the .tflite written with a new operator order reads back with other subgraphs",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hey_jarvis_reversed_chunks_read_back_and_the_file_is_kept_after_the_prefix() {
        let Some(dir) = std::env::var_os("MEMPLAN_CORPUS") else {
            assert!(std::env::var_os("CI").is_none(), "CI sets MEMPLAN_CORPUS");
            return;
        };
        let path = Path::new(&dir).join("models/hey_jarvis.tflite");
        let file = std::fs::read(&path).unwrap();
        // Any permutation can be written (validity is the order stage's business).
        let (count, tensors, subgraphs) = match read_tflite_bytes(&file, &path).unwrap().rule {
            LifetimeRule::TfliteMicro(graph) => (
                graph.subgraphs[0].flow.operators.len() as u32,
                graph
                    .subgraphs
                    .iter()
                    .map(|s| s.tensors.len())
                    .sum::<usize>(),
                graph.subgraphs.len() as u32,
            ),
            LifetimeRule::Sequential => unreachable!(),
        };
        let order: Vec<u32> = (0..count).rev().collect();
        let written = model_with_operator_order(&file, &order, &path).unwrap();
        assert_eq!(written.len() % 16, file.len() % 16);
        assert!(
            written.ends_with(&file),
            "the input follows the prefix unchanged"
        );
        // The offline plan's writer composes with it.
        let offsets = vec![-1; tensors];
        super::super::tflite_model::model_with_offline_plan(&written, subgraphs, &offsets, &path)
            .unwrap();
    }
}
