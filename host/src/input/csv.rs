//! Reader of MiniMalloc's CSV (the format: `memplan-minimalloc`): each row becomes an
//! intermediate tensor with its half-open lifetime `[lower, upper)` made inclusive, within
//! the limits memplan accepts (steps, sizes, alignments); the model has no operators.

use std::path::Path;

use memplan_minimalloc::{Row, WHAT};

use crate::error::{Error, Result};
use crate::input::model::{
    alignment_problem, Lifetime, LifetimeRule, Model, Tensor, TensorKind, MAX_TENSOR_BYTES,
};
use crate::input::source::{read_text, text_from_bytes, MAX_MODEL_FILE_BYTES};

/// Reads a MiniMalloc CSV file into a model without operators (explicit lifetimes).
pub fn read_minimalloc_csv(path: &Path) -> Result<Model> {
    let text = read_text(path, WHAT, MAX_MODEL_FILE_BYTES)?;
    parse_minimalloc_csv(path, &text)
}

/// Reads a MiniMalloc CSV from its bytes; `path` names it in messages. The entry for
/// fuzzing: never panics, whatever the bytes.
pub fn read_minimalloc_csv_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    let text = text_from_bytes(path, bytes.to_vec(), WHAT)?;
    parse_minimalloc_csv(path, &text)
}

fn parse_minimalloc_csv(path: &Path, text: &str) -> Result<Model> {
    let read = memplan_minimalloc::parse(text, tensor, |tensor: &Tensor| &tensor.id)
        .map_err(|error| Error::input(error.in_file(&path.display())))?;
    Ok(Model {
        path: path.to_path_buf(),
        tensors: read.rows,
        operators: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        // Every row's `upper` fits 32 bits (`tensor` refuses the others).
        num_steps: Some(u32::try_from(read.steps).unwrap_or(u32::MAX)),
        rule: LifetimeRule::Sequential,
        tflite: None,
    })
}

/// The tensor of one row, or what memplan does not accept about it.
fn tensor(row: Row) -> std::result::Result<Tensor, String> {
    let Row {
        id,
        lower,
        upper,
        size,
        alignment,
        offset,
    } = row;
    let upper = u32::try_from(upper).map_err(|_| {
        format!("buffer '{id}': upper {upper} is beyond the 2^32 - 1 steps memplan supports")
    })?;
    if size > MAX_TENSOR_BYTES {
        return Err(format!(
            "buffer '{id}': size {size} is larger than memplan accepts ({MAX_TENSOR_BYTES})"
        ));
    }
    if let Some(problem) = alignment.and_then(alignment_problem) {
        return Err(format!("buffer '{id}': {problem}"));
    }
    Ok(Tensor {
        alignment,
        fixed_offset: offset,
        // `lower < upper` (the format's rule), so both fit 32 bits.
        lifetime: Some(Lifetime::new(lower as u32, upper - 1)),
        ..Tensor::new(id, TensorKind::Intermediate, size)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Model> {
        parse_minimalloc_csv(Path::new("b.csv"), text)
    }

    #[test]
    fn half_open_becomes_inclusive_in_any_column_order() {
        let model =
            parse("size,upper,id,lower,offset,alignment\r\n4,3,b1,0,16,8\n\n8,9,b2,3,0,1\n")
                .unwrap();
        assert_eq!(model.num_steps, Some(9));
        let b1 = &model.tensors[0];
        assert_eq!((b1.id.as_str(), b1.size), ("b1", 4));
        assert_eq!(b1.lifetime, Some(Lifetime::new(0, 2)));
        assert_eq!((b1.fixed_offset, b1.alignment), (Some(16), Some(8)));
        assert_eq!(model.tensors[1].lifetime, Some(Lifetime::new(3, 8)));
    }

    #[test]
    fn reads_the_shared_minimalloc_instances() {
        let Some(instances) = memplan_planner_kit::testing::corpus_dir("minimalloc") else {
            return;
        };
        let path = instances.join("A.1048576.csv");
        let model = read_minimalloc_csv(&path).unwrap();
        assert_eq!(model.tensors.len(), 154);
    }

    #[test]
    fn a_byte_order_mark_before_the_header_is_ignored() {
        let model = read_minimalloc_csv_bytes(
            "\u{feff}id,lower,upper,size\nb1,0,3,4\n".as_bytes(),
            Path::new("bom.csv"),
        )
        .unwrap();
        assert_eq!(model.tensors[0].id, "b1");
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            (
                "id,lower,upper,size,alignment\nb,0,1,16,9223372036854775808\n",
                "b.csv:2: buffer 'b': alignment 9223372036854775808 is larger than memplan accepts",
            ),
            (
                "id,lower,upper\n",
                "b.csv:1: the header has no `size` column",
            ),
            (
                "id,lower,upper,size,colour\n",
                "b.csv:1: unknown column `colour`",
            ),
            (
                "id,lower,upper,size\na,0,2,4\n\na,1,3,4\n",
                "b.csv:4: duplicate buffer id 'a' (first on line 2)",
            ),
            ("id,lower,upper,size\na,0,2\n", "b.csv:2: 3 fields"),
            (
                "id,lower,upper,size\na,0,4294967296,4\n",
                "b.csv:2: buffer 'a': upper 4294967296 is beyond the 2^32 - 1 steps",
            ),
            ("", "b.csv: the file is empty; expected a MiniMalloc CSV"),
            (
                "id,lower,upper,size\na,0,2,281474976710657\n",
                "b.csv:2: buffer 'a': size 281474976710657 is larger than memplan accepts",
            ),
            (
                "id,lower,upper,size\na,0,2,-4\n",
                "b.csv:2: column `size`: `-4`",
            ),
            (
                "id,lower,upper,size\na,2,2,4\n",
                "b.csv:2: buffer 'a': lower 2 must be below upper 2",
            ),
            (
                "id,lower,upper,size,alignment\na,0,2,4,3\n",
                "b.csv:2: buffer 'a': alignment 3",
            ),
            (
                "id,lower,upper,size\na,0,2,99999999999999999999\n",
                "b.csv:2: column `size`",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err();
            assert_eq!(error.kind, crate::ErrorKind::Input);
            assert!(
                error.message.starts_with(expected),
                "{text:?}: {}",
                error.message
            );
        }
    }
}
