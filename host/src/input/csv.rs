//! Reader of MiniMalloc's CSV: one buffer per line, `id,lower,upper,size` with the half-open
//! lifetime `[lower, upper)`, in any column order, plus the optional columns `alignment`,
//! `offset` (a fixed placement), `hint` and `gaps`.
//!
//! `hint` (a preferred offset) is accepted and ignored. `gaps` (steps inside the lifetime
//! when the buffer is not live) is accepted and ignored, which is safe: the buffer is then
//! treated as live throughout, a stricter problem than MiniMalloc's.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::input::model::{
    alignment_problem, Lifetime, LifetimeRule, Model, Tensor, TensorKind, MAX_TENSOR_BYTES,
};
use crate::input::source::{read_text, text_from_bytes};

const WHAT: &str = "a MiniMalloc CSV with header id,lower,upper,size";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Column {
    Id,
    Lower,
    Upper,
    Size,
    Alignment,
    Offset,
    Ignored,
}

/// Reads a MiniMalloc CSV file into a model without operators (explicit lifetimes).
pub fn read_minimalloc_csv(path: &Path) -> Result<Model> {
    let text = read_text(path, WHAT)?;
    parse_minimalloc_csv(path, &text)
}

/// Reads a MiniMalloc CSV from its bytes; `path` names it in messages. The entry for
/// fuzzing: never panics, whatever the bytes.
pub fn read_minimalloc_csv_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
    let text = text_from_bytes(path, bytes.to_vec(), WHAT)?;
    parse_minimalloc_csv(path, &text)
}

fn parse_minimalloc_csv(path: &Path, text: &str) -> Result<Model> {
    let file = path.display();
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim_end_matches('\r')))
        .filter(|(_, line)| !line.trim().is_empty());
    let (header_line, header) = lines
        .next()
        .ok_or_else(|| Error::input(format!("{file}: the file is empty; expected {WHAT}")))?;
    let mut columns = Vec::new();
    for name in header.split(',') {
        let name = name.trim();
        let column = match name.to_ascii_lowercase().as_str() {
            "id" => Column::Id,
            "lower" => Column::Lower,
            "upper" => Column::Upper,
            "size" => Column::Size,
            "alignment" => Column::Alignment,
            "offset" => Column::Offset,
            "hint" | "gaps" => Column::Ignored,
            _ => {
                return Err(Error::input(format!(
                    "{file}:{header_line}: unknown column `{name}`; the columns are id, lower, upper, size and optionally alignment, offset, hint, gaps"
                )))
            }
        };
        if column != Column::Ignored && columns.contains(&column) {
            return Err(Error::input(format!(
                "{file}:{header_line}: column `{name}` appears twice"
            )));
        }
        columns.push(column);
    }
    for (required, name) in [
        (Column::Id, "id"),
        (Column::Lower, "lower"),
        (Column::Upper, "upper"),
        (Column::Size, "size"),
    ] {
        if !columns.contains(&required) {
            return Err(Error::input(format!(
                "{file}:{header_line}: the header has no `{name}` column; expected {WHAT}"
            )));
        }
    }

    let mut tensors: Vec<Tensor> = Vec::new();
    // Keys borrow from `text`: a million owned ids freed at the end of reading would leave
    // the allocator a backlog of small free chunks that slows the planner's first large
    // allocations (glibc sorts at most 10,000 of them per allocation).
    let mut line_of_id: HashMap<&str, usize> = HashMap::new();
    let mut num_steps: u32 = 0;
    for (line_number, line) in lines {
        let at = |what: String| Error::input(format!("{file}:{line_number}: {what}"));
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != columns.len() {
            return Err(at(format!(
                "{} fields, but the header has {} columns",
                fields.len(),
                columns.len()
            )));
        }
        let mut id = "";
        let (mut lower, mut upper, mut size) = (0u64, 0u64, 0u64);
        let (mut alignment, mut offset) = (None, None);
        for ((&column, &field), name) in columns.iter().zip(&fields).zip(header.split(',')) {
            let number = || {
                field.parse::<u64>().map_err(|_| {
                    at(format!(
                        "column `{}`: `{field}` is not a non-negative integer",
                        name.trim()
                    ))
                })
            };
            match column {
                Column::Id => id = field,
                Column::Lower => lower = number()?,
                Column::Upper => upper = number()?,
                Column::Size => size = number()?,
                Column::Alignment => alignment = Some(number()?),
                Column::Offset => offset = Some(number()?),
                Column::Ignored => {}
            }
        }
        if id.is_empty() {
            return Err(at("empty id".into()));
        }
        if upper <= lower {
            return Err(at(format!(
                "buffer '{id}': lower {lower} must be below upper {upper} (the lifetime [lower, upper) is half-open)"
            )));
        }
        let upper = u32::try_from(upper).map_err(|_| {
            at(format!(
                "buffer '{id}': upper {upper} is beyond the 2^32 - 1 steps memplan supports"
            ))
        })?;
        if size > MAX_TENSOR_BYTES {
            return Err(at(format!(
                "buffer '{id}': size {size} is larger than memplan accepts ({MAX_TENSOR_BYTES})"
            )));
        }
        if let Some(problem) = alignment.and_then(alignment_problem) {
            return Err(at(format!("buffer '{id}': {problem}")));
        }
        if let Some(first) = line_of_id.insert(id, line_number) {
            return Err(at(format!(
                "duplicate buffer id '{id}' (first on line {first}); ids must be unique"
            )));
        }
        num_steps = num_steps.max(upper);
        let mut tensor = Tensor::new(id, TensorKind::Intermediate, size);
        tensor.alignment = alignment;
        tensor.fixed_offset = offset;
        tensor.lifetime = Some(Lifetime::new(lower as u32, upper - 1));
        tensors.push(tensor);
    }
    Ok(Model {
        path: path.to_path_buf(),
        tensors,
        operators: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        num_steps: Some(num_steps),
        rule: LifetimeRule::Sequential,
        tflite: None,
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
        let Some(corpus) = std::env::var_os("MEMPLAN_CORPUS") else {
            return;
        };
        let path = Path::new(&corpus).join("minimalloc/A.1048576.csv");
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
