//! Reader of MiniMalloc's CSV: one buffer per line, `id,lower,upper,size` with the half-open
//! lifetime `[lower, upper)`, in any column order, plus the optional columns `alignment`,
//! `offset` (a fixed placement), `hint` and `gaps`.
//!
//! `hint` (a preferred offset) is accepted and ignored. `gaps` (steps inside the lifetime
//! when the buffer is not live) is accepted and ignored, which is safe: the buffer is then
//! treated as live throughout, a stricter problem than MiniMalloc's.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::input::model::{
    alignment_problem, Lifetime, LifetimeRule, Model, Tensor, TensorKind, MAX_TENSOR_BYTES,
};
use crate::input::source::{read_text, text_from_bytes, MAX_MODEL_FILE_BYTES};

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
    let file = path.display();
    let mut lines = numbered_lines(text, 1);
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

    let header_names: Vec<&str> = header.split(',').map(str::trim).collect();
    let layout = RowLayout {
        file: &file,
        columns: &columns,
        names: &header_names,
    };
    // The rows start on the line after the header.
    let header_end = header.as_ptr() as usize - text.as_ptr() as usize + header.len();
    let body = text[header_end..]
        .find('\n')
        .map_or("", |newline| &text[header_end + newline + 1..]);
    let (tensors, num_steps, maybe_repeated) = read_rows(&layout, body, header_line + 1)?;
    if let Some((first, again)) = maybe_repeated.then(|| first_duplicate(&tensors)).flatten() {
        // Rare, so the lines are found again rather than kept for every row.
        let mut rows = numbered_lines(body, header_line + 1);
        let first_line = rows.nth(first).map_or(0, |(number, _)| number);
        let line = rows.nth(again - first - 1).map_or(0, |(number, _)| number);
        let id = &tensors[again].id;
        return Err(Error::input(format!(
            "{file}:{line}: duplicate buffer id '{id}' (first on line {first_line}); ids must be unique"
        )));
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

/// What the header says about the rows: the column of each field, and its name as written.
struct RowLayout<'a> {
    file: &'a std::path::Display<'a>,
    columns: &'a [Column],
    names: &'a [&'a str],
}

/// Rows are read in parts of about this many bytes, which the threads take in turn: parts
/// small enough that the threads finish together (one core here is often slower than the
/// other), large enough that taking one costs nothing next to reading it.
const PART_BYTES: usize = 1 << 20;

/// Most threads that read rows: past a few, the kernel handing out pages is the limit.
const MAX_READING_THREADS: usize = 8;

/// The tensors of `rows` (the lines after the header, the first numbered `first_line`), the
/// number of steps they span, and whether an id may repeat (false: none does).
///
/// Rows are cut into parts at newlines, each part given the slots of the one tensor vector
/// its lines may fill (one per line), and the parts read by as many threads as there are
/// cores (up to [`MAX_READING_THREADS`]): building a million 160-byte tensors is mostly
/// the kernel handing out fresh pages, which cores do side by side. The parts are joined
/// without copying, except to close the gaps blank lines leave. The first error in line
/// order wins.
fn read_rows(
    layout: &RowLayout,
    rows: &str,
    first_line: usize,
) -> Result<(Vec<Tensor>, u32, bool)> {
    let parts = split_rows(rows, first_line);
    let slot_counts: Vec<usize> = parts.iter().map(|part| part.lines).collect();
    let total_slots: usize = slot_counts.iter().sum();
    let mut tensors: Vec<Tensor> = Vec::with_capacity(total_slots);
    let mut numeric_ids = NumericIdsSeen::new(total_slots);
    let numeric_ids = numeric_ids.flags();

    // Each part's rows and slots, taken by the thread that reads it; its result, in order.
    let mut spare = &mut tensors.spare_capacity_mut()[..total_slots];
    let mut work = Vec::with_capacity(parts.len());
    for (part, &count) in parts.into_iter().zip(&slot_counts) {
        let (slots, rest) = std::mem::take(&mut spare).split_at_mut(count);
        spare = rest;
        work.push(Mutex::new(Some((part, slots))));
    }
    let results: Vec<Mutex<Option<Result<ReadPart>>>> =
        work.iter().map(|_| Mutex::new(None)).collect();
    let next_part = AtomicUsize::new(0);
    let read_parts = || {
        while let Some(index) =
            Some(next_part.fetch_add(1, Ordering::Relaxed)).filter(|&index| index < work.len())
        {
            if let Some((part, slots)) = lock(&work[index]).take() {
                let read = read_part(layout, &part, numeric_ids, slots);
                *lock(&results[index]) = Some(read);
            }
        }
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_READING_THREADS)
        .min(work.len());
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads)
            .filter_map(|_| {
                // A thread that cannot be started is one fewer helper; this one reads anyway.
                std::thread::Builder::new()
                    .name("csv-rows".into())
                    .spawn_scoped(scope, read_parts)
                    .ok()
            })
            .collect();
        read_parts();
        for helper in helpers {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });

    // Every part was read (the queue ran out only once each was taken). An error drops the
    // tensors every part wrote (`ReadPart`'s drop) with `results`.
    let mut reads = Vec::with_capacity(results.len());
    for result in results {
        let read = result
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(|| Ok(ReadPart::none(&mut [])));
        reads.push(read?);
    }
    let num_steps = reads.iter().map(|read| read.num_steps).max().unwrap_or(0);
    let maybe_repeated = reads.iter().any(|read| read.maybe_repeated);
    let lens: Vec<usize> = reads.iter().map(|read| read.len).collect();
    // From here the vector owns what the parts wrote.
    reads.into_iter().for_each(std::mem::forget);
    let base = tensors.as_mut_ptr();
    let mut len = 0;
    let mut part_start = 0;
    for (&part_len, &part_slots) in lens.iter().zip(&slot_counts) {
        // SAFETY: the part's tensors are its first `part_len` slots, from `part_start`, all
        // within the vector's capacity; the first `len` slots are the earlier parts'. Blank
        // lines leave gaps (part_len < part_slots): later tensors move down to close them
        // (`copy` handles overlap, and `len <= part_start`).
        unsafe {
            if len < part_start {
                std::ptr::copy(base.add(part_start), base.add(len), part_len);
            }
        }
        len += part_len;
        part_start += part_slots;
    }
    // SAFETY: the first `len` slots are initialised (above) and nothing past them is, so the
    // vector takes ownership of exactly the tensors read.
    unsafe { tensors.set_len(len) };
    Ok((tensors, num_steps, maybe_repeated))
}

/// `mutex`'s guard; a thread that panicked holding it leaves nothing half-done here.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `rows` cut after newlines into parts of about [`PART_BYTES`], each with its first line's
/// number and its count of lines. Never empty: empty rows are one empty part.
fn split_rows(rows: &str, first_line: usize) -> Vec<Rows<'_>> {
    let mut parts = Vec::with_capacity(rows.len() / PART_BYTES + 1);
    let mut rest = rows;
    let mut line = first_line;
    loop {
        let end = match rest.get(PART_BYTES..).and_then(|tail| tail.find('\n')) {
            // A newline is one byte, so the cut is at a character boundary.
            Some(newline) => PART_BYTES + newline + 1,
            None => rest.len(),
        };
        let (text, tail) = rest.split_at(end);
        let lines = line_count(text);
        parts.push(Rows {
            text,
            first_line: line,
            lines,
        });
        if tail.is_empty() {
            return parts;
        }
        line += lines;
        rest = tail;
    }
}

/// Lines in `text`, the last one counted whether or not it ends with a newline.
fn line_count(text: &str) -> usize {
    // Counted in bytes per 255-byte chunk, which compiles to wide vector compares; a `usize`
    // count per byte was three times slower (10 ms on a 28 MB trace).
    let newlines: usize = text
        .as_bytes()
        .chunks(255)
        .map(|chunk| {
            let count = chunk
                .iter()
                .fold(0u8, |count, &byte| count + u8::from(byte == b'\n'));
            usize::from(count)
        })
        .sum();
    newlines + usize::from(!text.ends_with('\n'))
}

/// One part of the rows.
struct Rows<'a> {
    text: &'a str,
    /// The number of the first line of `text`.
    first_line: usize,
    /// Lines in `text` ([`line_count`]): at most one tensor each.
    lines: usize,
}

/// Which numeric ids the threads reading the rows have seen, to know without a second pass
/// that no id repeats (the common case): an id whose flag is already set, or one the flags
/// do not cover, sends the reader to [`first_duplicate`] for the lines to name.
struct NumericIdsSeen {
    flags: Vec<u8>,
}

impl NumericIdsSeen {
    /// Flags for the numeric ids below four times `count`, as [`SeenIds`] has.
    fn new(count: usize) -> Self {
        // Zeroed memory from the allocator: untouched pages cost nothing.
        NumericIdsSeen {
            flags: vec![0; numeric_id_limit(count)],
        }
    }

    fn flags(&mut self) -> &[AtomicU8] {
        let flags: &mut [u8] = &mut self.flags;
        // SAFETY: AtomicU8 has the size, alignment and bit validity of u8, and the unique
        // borrow of the bytes is held for as long as the atomic view lives.
        unsafe { &*(flags as *mut [u8] as *const [AtomicU8]) }
    }
}

/// The tensors one part of the rows wrote into its slots (the first `len` of them), and the
/// steps they span. Dropped (on an error in any part), it drops those tensors.
struct ReadPart<'a> {
    slots: &'a mut [std::mem::MaybeUninit<Tensor>],
    len: usize,
    num_steps: u32,
    /// Whether an id read may repeat one read before (here or in another part).
    maybe_repeated: bool,
}

impl<'a> ReadPart<'a> {
    fn none(slots: &'a mut [std::mem::MaybeUninit<Tensor>]) -> Self {
        ReadPart {
            slots,
            len: 0,
            num_steps: 0,
            maybe_repeated: false,
        }
    }

    /// Adds `tensor` after those written. There is a slot for it: one per line.
    #[inline(always)]
    fn push(&mut self, tensor: Tensor) {
        self.slots[self.len].write(tensor);
        self.len += 1;
    }
}

impl Drop for ReadPart<'_> {
    fn drop(&mut self) {
        for slot in &mut self.slots[..self.len] {
            // SAFETY: the first `len` slots were written by `push` and are dropped only here.
            unsafe { slot.assume_init_drop() };
        }
    }
}

/// Reads `rows` into `slots`, one per line, setting the flags of the numeric ids it sees
/// in `numeric_ids` (shared by the threads).
fn read_part<'a>(
    layout: &RowLayout,
    rows: &Rows,
    numeric_ids: &[AtomicU8],
    slots: &'a mut [std::mem::MaybeUninit<Tensor>],
) -> Result<ReadPart<'a>> {
    let RowLayout {
        file,
        columns,
        names,
    } = layout;
    let mut part = ReadPart::none(slots);
    for (line_number, line) in numbered_lines(rows.text, rows.first_line) {
        let at = |what: String| Error::input(format!("{file}:{line_number}: {what}"));
        // The fields, split once; a line with another count is refused (with the count).
        let mut fields = [""; MAX_COLUMNS];
        let field_count = split_fields(line, &mut fields[..columns.len()]);
        if field_count != columns.len() {
            return Err(at(format!(
                "{field_count} fields, but the header has {} columns",
                columns.len()
            )));
        }
        let mut id = "";
        let (mut lower, mut upper, mut size) = (0u64, 0u64, 0u64);
        let (mut alignment, mut offset) = (None, None);
        for ((&column, &field), name) in columns.iter().zip(&fields).zip(names.iter()) {
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
        part.num_steps = part.num_steps.max(upper);
        part.maybe_repeated |= match canonical_number(id) {
            Some(number) => numeric_ids
                .get(number)
                .is_none_or(|flag| flag.swap(1, Ordering::Relaxed) != 0),
            None => true,
        };
        part.push(Tensor {
            alignment,
            fixed_offset: offset,
            lifetime: Some(Lifetime::new(lower as u32, upper - 1)),
            ..Tensor::new(id, TensorKind::Intermediate, size)
        });
    }
    Ok(part)
}

/// The indices of the first tensor whose id an earlier one has, and of that earlier one:
/// `(earlier, again)`.
fn first_duplicate(tensors: &[Tensor]) -> Option<(usize, usize)> {
    let mut seen = SeenIds::with_capacity(tensors.len());
    tensors.iter().enumerate().find_map(|(index, tensor)| {
        // SeenIds keeps a non-zero number per id: the index plus one.
        seen.insert(&tensor.id, index + 1)
            .map(|earlier| (earlier - 1, index))
    })
}

/// The lines of `text` that are not blank, numbered from `first_number` (blank ones count),
/// each without its `\n` or `\r\n` ending. A plain byte loop: `str::lines` finds each end with the
/// general pattern searcher, which cost a fifth of the reading time of a million-line trace.
fn numbered_lines(text: &str, first_number: usize) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text;
    let mut number = first_number - 1;
    std::iter::from_fn(move || loop {
        if rest.is_empty() {
            return None;
        }
        number += 1;
        let line = match rest.bytes().position(|byte| byte == b'\n') {
            Some(end) => {
                // `\n` is one byte, so both ends are character boundaries.
                let line = &rest[..end];
                rest = &rest[end + 1..];
                line
            }
            None => std::mem::take(&mut rest),
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !line.trim().is_empty() {
            return Some((number, line));
        }
    })
}

/// Splits `line` at its commas into `fields` (each trimmed) and returns how many fields the
/// line has, which may be more or fewer than `fields` holds (those past it are dropped).
/// A byte loop for the same reason as [`numbered_lines`]: fields are a few bytes long.
fn split_fields<'a>(line: &'a str, fields: &mut [&'a str]) -> usize {
    let mut count = 0;
    let mut start = 0;
    for (at, &byte) in line.as_bytes().iter().enumerate() {
        if byte == b',' {
            if let Some(field) = fields.get_mut(count) {
                // `,` is one byte, so `start` and `at` are character boundaries.
                *field = trimmed(&line[start..at]);
            }
            count += 1;
            start = at + 1;
        }
    }
    if let Some(field) = fields.get_mut(count) {
        *field = trimmed(&line[start..]);
    }
    count + 1
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

/// A non-zero number (where it was seen) for each buffer id seen so far, to find duplicates.
/// MiniMalloc traces number their buffers 0, 1, 2, ...: such ids are looked up in a table
/// indexed by the number (hashing a million strings was half the reading time); other ids go
/// to a hash map. Keys borrow the ids: owned copies would be a million more allocations.
struct SeenIds<'a> {
    /// Where numeric id `n` was seen, at `n` (0: not seen), for ids below `numeric_limit`.
    numeric: Vec<u32>,
    numeric_limit: usize,
    other: HashMap<&'a str, usize>,
}

impl<'a> SeenIds<'a> {
    /// Room for numeric ids below four times the expected count.
    fn with_capacity(count: usize) -> Self {
        let numeric_limit = numeric_id_limit(count);
        SeenIds {
            numeric: Vec::with_capacity(numeric_limit),
            numeric_limit,
            other: HashMap::new(),
        }
    }

    /// Records `id` as seen at `at` (not 0); where it was first seen when it is a duplicate.
    fn insert(&mut self, id: &'a str, at: usize) -> Option<usize> {
        match (canonical_number(id), u32::try_from(at)) {
            (Some(number), Ok(at)) if number < self.numeric_limit => {
                if number >= self.numeric.len() {
                    self.numeric.resize(number + 1, 0);
                }
                match std::mem::replace(&mut self.numeric[number], at) {
                    0 => None,
                    first => {
                        self.numeric[number] = first;
                        Some(first as usize)
                    }
                }
            }
            _ => self.other.insert(id, at).inspect(|&first| {
                self.other.insert(id, first);
            }),
        }
    }
}

/// Numeric ids below this many are tracked in a table rather than hashed, for `count` rows.
fn numeric_id_limit(count: usize) -> usize {
    count.saturating_mul(4).min(1 << 26)
}

/// The number `id` writes in canonical decimal ("7", not "07" or "+7"), so that equal
/// numbers are equal ids.
fn canonical_number(id: &str) -> Option<usize> {
    let canonical = !id.is_empty()
        && id.bytes().all(|byte| byte.is_ascii_digit())
        && (id.len() == 1 || !id.starts_with('0'));
    canonical.then(|| id.parse::<usize>().ok()).flatten()
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
    fn lines_and_fields_split_as_str_lines_and_split_do() {
        let text = "a, b ,c\r\n\n  \r\nd,,\n,\ne";
        let ours: Vec<(usize, &str)> = numbered_lines(text, 1).collect();
        let std: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .map(|(i, line)| (i + 1, line))
            .filter(|(_, line)| !line.trim().is_empty())
            .collect();
        assert_eq!(ours, std);
        for (_, line) in ours {
            let expected: Vec<&str> = line.split(',').map(str::trim).collect();
            let mut fields = [""; 4];
            let count = split_fields(line, &mut fields);
            assert_eq!(count, expected.len(), "{line:?}");
            assert_eq!(&fields[..count], &expected[..], "{line:?}");
            // Fewer slots than fields: the count is still the line's.
            let mut two = [""; 2];
            assert_eq!(split_fields(line, &mut two), expected.len(), "{line:?}");
        }
    }

    /// A CSV of `rows` buffers `0..rows` (after two blank lines, which leave a gap in the
    /// first part's slots), large enough to be read in several parts, with
    /// `edit` applied to the row lines (index `i` is buffer `i`).
    fn csv_of_parts(rows: usize, edit: impl Fn(usize, &mut String)) -> String {
        let mut text = String::from("id,lower,upper,size\n\n \n");
        for i in 0..rows {
            let mut line = format!("{i},{},{},{}", i % 7, i % 7 + 3, 16 + i % 5);
            edit(i, &mut line);
            text.push_str(&line);
            text.push('\n');
        }
        assert!(text.len() >= 2 * PART_BYTES, "{} bytes", text.len());
        text
    }

    #[test]
    fn parts_read_the_rows_in_order_across_blank_lines() {
        let rows = 250_000;
        let text = csv_of_parts(rows, |i, line| {
            if i == 10 || i == rows / 2 || i == rows - 10 {
                line.push_str("\n\n");
            }
        });
        let parts = split_rows(&text, 1);
        assert!(parts.len() >= 3, "{} parts", parts.len());
        assert_eq!(parts.iter().map(|part| part.text).collect::<String>(), text);
        for part in &parts {
            let (number, _) = numbered_lines(&text, 1)
                .find(|(_, line)| line.as_ptr() >= part.text.as_ptr())
                .unwrap();
            let (first, _) = numbered_lines(part.text, part.first_line).next().unwrap();
            assert_eq!(first, number);
        }
        let model = parse(&text).unwrap();
        assert_eq!(model.tensors.len(), rows);
        for (i, tensor) in model.tensors.iter().enumerate() {
            assert_eq!(tensor.id, i.to_string());
            assert_eq!(tensor.size, 16 + i as u64 % 5);
            assert_eq!(
                tensor.lifetime,
                Some(Lifetime::new(i as u32 % 7, i as u32 % 7 + 2))
            );
        }
        assert_eq!(model.num_steps, Some(9));
    }

    #[test]
    fn parts_report_the_first_error_by_line_and_duplicates_across_parts() {
        let rows = 250_000;
        // Buffer i is on line i + 4 (header, two blank lines).
        let late = parse(&csv_of_parts(rows, |i, line| {
            if i == rows - 5 {
                *line = format!("{i},3,2,4");
            }
        }))
        .unwrap_err();
        assert!(
            late.message.starts_with(&format!(
                "b.csv:{}: buffer '{}': lower 3",
                rows - 1,
                rows - 5
            )),
            "{late}"
        );
        let both = parse(&csv_of_parts(rows, |i, line| {
            if i == 7 || i == rows - 5 {
                line.push_str(",9");
            }
        }))
        .unwrap_err();
        assert!(both.message.starts_with("b.csv:11: 5 fields"), "{both}");
        let repeated = parse(&csv_of_parts(rows, |i, line| {
            if i == rows - 3 {
                *line = "17,0,1,4".into();
            }
        }))
        .unwrap_err();
        assert_eq!(
            repeated.message,
            format!(
                "b.csv:{}: duplicate buffer id '17' (first on line 21); ids must be unique",
                rows + 1
            )
        );
        let named = parse(&csv_of_parts(rows, |i, line| {
            if i == 3 || i == rows - 3 {
                *line = format!("conv,0,1,{i}");
            }
        }))
        .unwrap_err();
        assert_eq!(
            named.message,
            format!(
                "b.csv:{}: duplicate buffer id 'conv' (first on line 7); ids must be unique",
                rows + 1
            )
        );
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
