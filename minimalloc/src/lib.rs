//! memplan-minimalloc: MiniMalloc's CSV format, on its own so that the host, the planner
//! kit's test helpers and the planners' tests and examples share one reader and one writer
//! without depending on each other.
//!
//! A file has one buffer per line, `id,lower,upper,size` with the half-open lifetime
//! `[lower, upper)`, in any column order, plus the optional columns `alignment`, `offset` (a
//! fixed placement, or a solution's placement), `hint` and `gaps`. `hint` (a preferred
//! offset) and `gaps` (steps inside the lifetime when the buffer is not live) are accepted
//! and ignored, which is safe for a planner: the buffer is then treated as live throughout,
//! a stricter problem than MiniMalloc's.
//!
//! - [`parse`] reads the text into the caller's own row type (the host builds its tensors in
//!   place, on several threads, for million-row traces); [`read_file`] reads a file into
//!   [`Buffer`]s, for tests and tools.
//! - [`write_problem`] and [`write_solution`] write the two kinds of file MiniMalloc reads
//!   and writes.
//!
//! No dependencies: the format is text, and the host keeps what is memplan's (the limits it
//! accepts, how a file's bytes become text, its error type).

mod ids;
mod read;
mod text;
mod write;

pub use read::parse;
pub use write::{write_problem, write_solution};

/// What a MiniMalloc CSV is, for messages.
pub const WHAT: &str = "a MiniMalloc CSV with header id,lower,upper,size";

/// One row as read, the lifetime still half-open (`lower < upper`); the id is not empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row<'a> {
    pub id: &'a str,
    pub lower: u64,
    pub upper: u64,
    pub size: u64,
    pub alignment: Option<u64>,
    pub offset: Option<u64>,
}

/// The rows of a file, each as the caller made it, in file order.
#[derive(Debug)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    /// The largest `upper` of the rows (0 when there are none): the steps they span.
    pub steps: u64,
}

/// What is wrong with a file: `line` (1-based; `None` for the file as a whole) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    pub line: Option<usize>,
    pub message: String,
}

impl FormatError {
    /// The message as a user reads it: `{file}:{line}: {message}`.
    pub fn in_file(&self, file: &dyn std::fmt::Display) -> String {
        match self.line {
            Some(line) => format!("{file}:{line}: {}", self.message),
            None => format!("{file}: {}", self.message),
        }
    }
}

/// A row read by [`read_file`], owning its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub id: String,
    /// The half-open lifetime `[lower, upper)`.
    pub lower: u64,
    pub upper: u64,
    pub size: u64,
    pub alignment: Option<u64>,
    pub offset: Option<u64>,
}

/// Reads the MiniMalloc CSV at `path` (a leading byte-order mark is skipped); the error
/// names the file and line.
pub fn read_file(path: &std::path::Path) -> Result<Vec<Buffer>, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("{file}: cannot read {WHAT}: {error}"))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let make = |row: Row| {
        Ok(Buffer {
            id: row.id.to_string(),
            lower: row.lower,
            upper: row.upper,
            size: row.size,
            alignment: row.alignment,
            offset: row.offset,
        })
    };
    parse(text, make, |buffer: &Buffer| &buffer.id)
        .map(|rows| rows.rows)
        .map_err(|error| error.in_file(&file))
}
