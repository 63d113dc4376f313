//! Reading a MiniMalloc CSV: the header names the columns, then the rows are read in parts
//! on several threads, each row made into the caller's type where it will stay.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::ids::{canonical_number, first_duplicate, NumericIdsSeen};
use crate::text::{line_count, numbered_lines, parse_number, split_fields, MAX_COLUMNS};
use crate::{FormatError, Row, Rows, WHAT};

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

/// Parses MiniMalloc CSV `text` (without a byte-order mark), making each row with `make`,
/// whose error message (e.g. a limit of the caller's) is reported at the row's line. The
/// rows are read on several threads (see [`read_rows`]); `id_of` gives a made row's id, to
/// name the lines of a repeated one. The first error in line order wins.
pub fn parse<T, F>(text: &str, make: F, id_of: fn(&T) -> &str) -> Result<Rows<T>, FormatError>
where
    T: Send,
    F: Fn(Row<'_>) -> Result<T, String> + Sync,
{
    let mut lines = numbered_lines(text, 1);
    let (header_line, header) = lines.next().ok_or_else(|| FormatError {
        line: None,
        message: format!("the file is empty; expected {WHAT}"),
    })?;
    let at = |message: String| FormatError {
        line: Some(header_line),
        message,
    };
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
                return Err(at(format!(
                    "unknown column `{name}`; the columns are id, lower, upper, size and optionally alignment, offset, hint, gaps"
                )))
            }
        };
        if column != Column::Ignored && columns.contains(&column) {
            return Err(at(format!("column `{name}` appears twice")));
        }
        columns.push(column);
    }
    if columns.len() > MAX_COLUMNS {
        return Err(at(format!(
            "{} columns; a MiniMalloc CSV has at most {MAX_COLUMNS} \
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
            return Err(at(format!(
                "the header has no `{name}` column; expected {WHAT}"
            )));
        }
    }

    let header_names: Vec<&str> = header.split(',').map(str::trim).collect();
    let layout = RowLayout {
        columns: &columns,
        names: &header_names,
    };
    // The rows start on the line after the header.
    let header_end = header.as_ptr() as usize - text.as_ptr() as usize + header.len();
    let body = text[header_end..]
        .find('\n')
        .map_or("", |newline| &text[header_end + newline + 1..]);
    let (rows, steps, maybe_repeated) = read_rows(&layout, body, header_line + 1, &make)?;
    if let Some((first, again)) = maybe_repeated
        .then(|| first_duplicate(&rows, id_of))
        .flatten()
    {
        // Rare, so the lines are found again rather than kept for every row.
        let mut lines = numbered_lines(body, header_line + 1);
        let first_line = lines.nth(first).map_or(0, |(number, _)| number);
        let line = lines.nth(again - first - 1).map_or(0, |(number, _)| number);
        let id = id_of(&rows[again]);
        return Err(FormatError {
            line: Some(line),
            message: format!(
                "duplicate buffer id '{id}' (first on line {first_line}); ids must be unique"
            ),
        });
    }
    Ok(Rows { rows, steps })
}

/// What the header says about the rows: the column of each field, and its name as written.
struct RowLayout<'a> {
    columns: &'a [Column],
    names: &'a [&'a str],
}

/// Rows are read in parts of about this many bytes, which the threads take in turn: parts
/// small enough that the threads finish together (one core here is often slower than the
/// other), large enough that taking one costs nothing next to reading it.
const PART_BYTES: usize = 1 << 20;

/// Most threads that read rows: past a few, the kernel handing out pages is the limit.
const MAX_READING_THREADS: usize = 8;

/// The rows made of `rows` (the lines after the header, the first numbered `first_line`), the
/// number of steps they span, and whether an id may repeat (false: none does).
///
/// Rows are cut into parts at newlines, each part given the slots of the one tensor vector
/// its lines may fill (one per line), and the parts read by as many threads as there are
/// cores (up to [`MAX_READING_THREADS`]): building a million 160-byte tensors is mostly
/// the kernel handing out fresh pages, which cores do side by side. The parts are joined
/// without copying, except to close the gaps blank lines leave. The first error in line
/// order wins.
fn read_rows<T, F>(
    layout: &RowLayout,
    rows: &str,
    first_line: usize,
    make: &F,
) -> Result<(Vec<T>, u64, bool), FormatError>
where
    T: Send,
    F: Fn(Row<'_>) -> Result<T, String> + Sync,
{
    let parts = split_rows(rows, first_line);
    let slot_counts: Vec<usize> = parts.iter().map(|part| part.lines).collect();
    let total_slots: usize = slot_counts.iter().sum();
    let mut made: Vec<T> = Vec::with_capacity(total_slots);
    let mut numeric_ids = NumericIdsSeen::new(total_slots);
    let numeric_ids = numeric_ids.flags();

    // Each part's rows and slots, taken by the thread that reads it; its result, in order.
    let mut spare = &mut made.spare_capacity_mut()[..total_slots];
    let mut work = Vec::with_capacity(parts.len());
    for (part, &count) in parts.into_iter().zip(&slot_counts) {
        let (slots, rest) = std::mem::take(&mut spare).split_at_mut(count);
        spare = rest;
        work.push(Mutex::new(Some((part, slots))));
    }
    let results: Vec<PartResult<T>> = work.iter().map(|_| Mutex::new(None)).collect();
    let next_part = AtomicUsize::new(0);
    let read_parts = || {
        while let Some(index) =
            Some(next_part.fetch_add(1, Ordering::Relaxed)).filter(|&index| index < work.len())
        {
            if let Some((part, slots)) = lock(&work[index]).take() {
                let read = read_part(layout, &part, numeric_ids, slots, make);
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
    // rows every part wrote (`ReadPart`'s drop) with `results`.
    let mut reads = Vec::with_capacity(results.len());
    for result in results {
        let read = result
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(|| Ok(ReadPart::none(&mut [])));
        reads.push(read?);
    }
    let steps = reads.iter().map(|read| read.steps).max().unwrap_or(0);
    let maybe_repeated = reads.iter().any(|read| read.maybe_repeated);
    let lens: Vec<usize> = reads.iter().map(|read| read.len).collect();
    // From here the vector owns what the parts wrote.
    reads.into_iter().for_each(std::mem::forget);
    let base = made.as_mut_ptr();
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
    unsafe { made.set_len(len) };
    Ok((made, steps, maybe_repeated))
}

/// `mutex`'s guard; a thread that panicked holding it leaves nothing half-done here.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `rows` cut after newlines into parts of about [`PART_BYTES`], each with its first line's
/// number and its count of lines. Never empty: empty rows are one empty part.
fn split_rows(rows: &str, first_line: usize) -> Vec<Part<'_>> {
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
        parts.push(Part {
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

/// Where the thread that reads a part leaves its result.
type PartResult<'a, T> = Mutex<Option<Result<ReadPart<'a, T>, FormatError>>>;

/// One part of the rows.
struct Part<'a> {
    text: &'a str,
    /// The number of the first line of `text`.
    first_line: usize,
    /// Lines in `text` ([`line_count`]): at most one row each.
    lines: usize,
}

/// The rows one part of the text wrote into its slots (the first `len` of them), and the
/// steps they span. Dropped (on an error in any part), it drops those rows.
struct ReadPart<'a, T> {
    slots: &'a mut [std::mem::MaybeUninit<T>],
    len: usize,
    steps: u64,
    /// Whether an id read may repeat one read before (here or in another part).
    maybe_repeated: bool,
}

impl<'a, T> ReadPart<'a, T> {
    fn none(slots: &'a mut [std::mem::MaybeUninit<T>]) -> Self {
        ReadPart {
            slots,
            len: 0,
            steps: 0,
            maybe_repeated: false,
        }
    }

    /// Adds `row` after those written. There is a slot for it: one per line.
    #[inline(always)]
    fn push(&mut self, row: T) {
        self.slots[self.len].write(row);
        self.len += 1;
    }
}

impl<T> Drop for ReadPart<'_, T> {
    fn drop(&mut self) {
        for slot in &mut self.slots[..self.len] {
            // SAFETY: the first `len` slots were written by `push` and are dropped only here.
            unsafe { slot.assume_init_drop() };
        }
    }
}

/// Reads `rows` into `slots`, one per line, setting the flags of the numeric ids it sees
/// in `numeric_ids` (shared by the threads).
fn read_part<'a, T, F>(
    layout: &RowLayout,
    rows: &Part,
    numeric_ids: &[AtomicU8],
    slots: &'a mut [std::mem::MaybeUninit<T>],
    make: &F,
) -> Result<ReadPart<'a, T>, FormatError>
where
    F: Fn(Row<'_>) -> Result<T, String>,
{
    let RowLayout { columns, names } = layout;
    let mut part = ReadPart::none(slots);
    for (line_number, line) in numbered_lines(rows.text, rows.first_line) {
        let at = |message: String| FormatError {
            line: Some(line_number),
            message,
        };
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
        let row = make(Row {
            id,
            lower,
            upper,
            size,
            alignment,
            offset,
        })
        .map_err(at)?;
        part.steps = part.steps.max(upper);
        part.maybe_repeated |= match canonical_number(id) {
            Some(number) => numeric_ids
                .get(number)
                .is_none_or(|flag| flag.swap(1, Ordering::Relaxed) != 0),
            None => true,
        };
        part.push(row);
    }
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owned rows of `text`, or the error as `b.csv:LINE: message`.
    fn read(text: &str) -> Result<Rows<crate::Buffer>, String> {
        let make = |row: Row| {
            Ok(crate::Buffer {
                id: row.id.to_string(),
                lower: row.lower,
                upper: row.upper,
                size: row.size,
                alignment: row.alignment,
                offset: row.offset,
            })
        };
        parse(text, make, |buffer: &crate::Buffer| &buffer.id)
            .map_err(|error| error.in_file(&"b.csv"))
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
        let read = read(&text).unwrap();
        assert_eq!(read.rows.len(), rows);
        for (i, buffer) in read.rows.iter().enumerate() {
            assert_eq!(buffer.id, i.to_string());
            assert_eq!(buffer.size, 16 + i as u64 % 5);
            assert_eq!(
                (buffer.lower, buffer.upper),
                (i as u64 % 7, i as u64 % 7 + 3)
            );
        }
        assert_eq!(read.steps, 9);
    }

    #[test]
    fn parts_report_the_first_error_by_line_and_duplicates_across_parts() {
        let rows = 250_000;
        // Buffer i is on line i + 4 (header, two blank lines).
        let late = read(&csv_of_parts(rows, |i, line| {
            if i == rows - 5 {
                *line = format!("{i},3,2,4");
            }
        }))
        .unwrap_err();
        assert!(
            late.starts_with(&format!(
                "b.csv:{}: buffer '{}': lower 3",
                rows - 1,
                rows - 5
            )),
            "{late}"
        );
        let both = read(&csv_of_parts(rows, |i, line| {
            if i == 7 || i == rows - 5 {
                line.push_str(",9");
            }
        }))
        .unwrap_err();
        assert!(both.starts_with("b.csv:11: 5 fields"), "{both}");
        let repeated = read(&csv_of_parts(rows, |i, line| {
            if i == rows - 3 {
                *line = "17,0,1,4".into();
            }
        }))
        .unwrap_err();
        assert_eq!(
            repeated,
            format!(
                "b.csv:{}: duplicate buffer id '17' (first on line 21); ids must be unique",
                rows + 1
            )
        );
        let named = read(&csv_of_parts(rows, |i, line| {
            if i == 3 || i == rows - 3 {
                *line = format!("conv,0,1,{i}");
            }
        }))
        .unwrap_err();
        assert_eq!(
            named,
            format!(
                "b.csv:{}: duplicate buffer id 'conv' (first on line 7); ids must be unique",
                rows + 1
            )
        );
    }

    #[test]
    fn the_callers_refusal_is_reported_at_the_rows_line() {
        let refuse_big = |row: Row| {
            if row.size > 100 {
                Err(format!("buffer '{}': too big", row.id))
            } else {
                Ok(row.size)
            }
        };
        let error = parse(
            "id,lower,upper,size\na,0,1,4\n\nb,0,1,400\n",
            refuse_big,
            |_| "",
        )
        .unwrap_err();
        assert_eq!(
            error,
            FormatError {
                line: Some(4),
                message: "buffer 'b': too big".into()
            }
        );
    }

    #[test]
    fn a_header_of_too_many_columns_is_refused_not_a_panic() {
        let header = vec!["hint"; 14].join(",");
        let text = format!(
            "id,lower,upper,size,{header}\n0,0,1,16{}\n",
            ",0".repeat(14)
        );
        let error = read(&text).unwrap_err();
        assert!(error.contains("18 columns"), "{error}");
    }

    #[test]
    fn rows_are_read_in_any_column_order() {
        let read = read("size,upper,id,lower,offset,alignment\r\n4,3,b1,0,16,8\n\n8,9,b2,3,0,1\n")
            .unwrap();
        assert_eq!(read.steps, 9);
        let b1 = &read.rows[0];
        assert_eq!(
            (b1.id.as_str(), b1.size, b1.lower, b1.upper),
            ("b1", 4, 0, 3)
        );
        assert_eq!((b1.offset, b1.alignment), (Some(16), Some(8)));
        assert_eq!((read.rows[1].lower, read.rows[1].upper), (3, 9));
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("", "b.csv: the file is empty"),
            (
                "id,lower,upper\n",
                "b.csv:1: the header has no `size` column",
            ),
            (
                "id,lower,upper,size,colour\n",
                "b.csv:1: unknown column `colour`",
            ),
            (
                "id,id,lower,upper,size\n",
                "b.csv:1: column `id` appears twice",
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
            ("id,lower,upper,size\n,0,2,4\n", "b.csv:2: empty id"),
            (
                "id,lower,upper,size\na,2,2,4\n",
                "b.csv:2: buffer 'a': lower 2 must be below upper 2",
            ),
        ];
        for (text, expected) in cases {
            let error = read(text).unwrap_err();
            assert!(error.starts_with(expected), "{text:?}: {error}");
        }
    }
}
