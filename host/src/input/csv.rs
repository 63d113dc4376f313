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
    if columns.len() > MAX_COLUMNS {
        return Err(Error::input(format!(
            "{file}:{header_line}: {} columns; a MiniMalloc CSV has at most {MAX_COLUMNS} \
             (id, lower, upper, size, alignment, offset, and repeated hint or gaps)",
            columns.len()
        )));
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

    // One tensor per line: counting the lines first spares the vector its regrowth.
    let mut tensors: Vec<Tensor> =
        Vec::with_capacity(text.bytes().filter(|&byte| byte == b'\n').count() + 1);
    let mut seen = SeenIds::with_capacity(tensors.capacity());
    let mut num_steps: u32 = 0;
    let header_names: Vec<&str> = header.split(',').map(str::trim).collect();
    for (line_number, line) in lines {
        let at = |what: String| Error::input(format!("{file}:{line_number}: {what}"));
        // The fields, split once; a line with another count is refused (with the count).
        let mut fields = [""; MAX_COLUMNS];
        let mut field_count = 0;
        for field in line.split(',') {
            if field_count < columns.len() {
                fields[field_count] = trimmed(field);
            }
            field_count += 1;
        }
        if field_count != columns.len() {
            return Err(at(format!(
                "{field_count} fields, but the header has {} columns",
                columns.len()
            )));
        }
        let mut id = "";
        let (mut lower, mut upper, mut size) = (0u64, 0u64, 0u64);
        let (mut alignment, mut offset) = (None, None);
        for ((&column, &field), name) in columns.iter().zip(&fields).zip(&header_names) {
            let number = || {
                parse_number(field).ok_or_else(|| {
                    at(format!(
                        "column `{name}`: `{field}` is not a non-negative integer"
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
        if let Some(first) = seen.insert(id, line_number) {
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

/// Most columns a file may have: the eight known ones and a few repeated `hint` or `gaps`.
const MAX_COLUMNS: usize = 16;

/// `field` without surrounding whitespace; fields seldom have any, so the common case only
/// looks at the two ends.
fn trimmed(field: &str) -> &str {
    match (field.as_bytes().first(), field.as_bytes().last()) {
        (Some(&first), Some(&last)) if first.is_ascii_graphic() && last.is_ascii_graphic() => field,
        _ => field.trim(),
    }
}

/// A non-negative decimal integer, as `str::parse::<u64>` reads it; plain digits (every
/// MiniMalloc file) without its general machinery.
fn parse_number(field: &str) -> Option<u64> {
    let bytes = field.as_bytes();
    if !bytes.is_empty() && bytes.len() <= 19 && bytes.iter().all(u8::is_ascii_digit) {
        return Some(
            bytes
                .iter()
                .fold(0u64, |value, &digit| value * 10 + u64::from(digit - b'0')),
        );
    }
    field.parse().ok()
}

/// The line of each buffer id read so far, to refuse duplicates. MiniMalloc traces number
/// their buffers 0, 1, 2, ...: such ids are looked up in a table indexed by the number
/// (hashing a million strings was half the reading time); other ids go to a hash map. Keys
/// borrow from the text: a million owned ids freed at the end of reading would leave the
/// allocator a backlog of small free chunks that slows the planner's first large allocations.
struct SeenIds<'a> {
    /// Line of numeric id `n` at `n` (0: not seen), for ids below `numeric_limit`.
    numeric: Vec<u32>,
    numeric_limit: usize,
    other: HashMap<&'a str, usize>,
}

impl<'a> SeenIds<'a> {
    /// Room for numeric ids below four times the expected count.
    fn with_capacity(count: usize) -> Self {
        let numeric_limit = count.saturating_mul(4).min(1 << 26);
        SeenIds {
            numeric: Vec::with_capacity(numeric_limit),
            numeric_limit,
            other: HashMap::new(),
        }
    }

    /// Records `id` on `line`; the line it was first seen on when it is a duplicate.
    fn insert(&mut self, id: &'a str, line: usize) -> Option<usize> {
        // Canonical decimal only ("7", not "07" or "+7"), so that equal numbers are equal ids.
        let canonical = !id.is_empty()
            && id.bytes().all(|byte| byte.is_ascii_digit())
            && (id.len() == 1 || !id.starts_with('0'));
        let number = canonical.then(|| id.parse::<usize>().ok()).flatten();
        match (number, u32::try_from(line)) {
            (Some(number), Ok(line)) if number < self.numeric_limit => {
                if number >= self.numeric.len() {
                    self.numeric.resize(number + 1, 0);
                }
                match std::mem::replace(&mut self.numeric[number], line) {
                    0 => None,
                    first => {
                        self.numeric[number] = first;
                        Some(first as usize)
                    }
                }
            }
            _ => self.other.insert(id, line).inspect(|&first| {
                self.other.insert(id, first);
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_str_parse_reads_them() {
        for text in ["0", "7", "0042", "18446744073709551615", "+5"] {
            assert_eq!(parse_number(text), text.parse().ok(), "{text}");
        }
        for text in ["", "-1", "1e3", "18446744073709551616", " 5", "5x"] {
            assert_eq!(parse_number(text), None, "{text}");
        }
        assert_eq!(trimmed(" 12 "), "12");
        assert_eq!(trimmed("12"), "12");
        assert_eq!(trimmed("\u{a0}12"), "12");
    }

    #[test]
    fn a_header_of_too_many_columns_is_refused_not_a_panic() {
        let header = vec!["hint"; 14].join(",");
        let text = format!(
            "id,lower,upper,size,{header}\n0,0,1,16{}\n",
            ",0".repeat(14)
        );
        let error = parse_minimalloc_csv(Path::new("t.csv"), &text).unwrap_err();
        assert!(error.message.contains("18 columns"), "{error}");
    }

    #[test]
    fn duplicate_ids_are_found_numeric_or_not_and_07_is_not_7() {
        let mut seen = SeenIds::with_capacity(4);
        assert_eq!(seen.insert("3", 2), None);
        assert_eq!(seen.insert("07", 3), None);
        assert_eq!(seen.insert("7", 4), None);
        assert_eq!(seen.insert("conv", 5), None);
        // Past the numeric table (4 x 4 ids): the hash map.
        assert_eq!(seen.insert("99", 6), None);
        assert_eq!(seen.insert("3", 7), Some(2));
        assert_eq!(seen.insert("07", 8), Some(3));
        assert_eq!(seen.insert("conv", 9), Some(5));
        assert_eq!(seen.insert("99", 10), Some(6));
        assert_eq!(seen.insert("7", 11), Some(4));
    }

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
