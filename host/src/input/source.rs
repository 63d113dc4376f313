//! Reading input files as text and parsing JSON with messages that point at the place to fix.
//!
//! Every input reader goes through here so that "cannot read", "empty file" and JSON syntax or
//! type errors read the same everywhere: `FILE:LINE:COLUMN: what is wrong; what to do`.

use std::path::Path;

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::error::Category;

use crate::error::{Error, Result};

/// The largest model (`.json`, `.csv`, `.tflite`), `data_file` or plan file memplan reads:
/// 2 GiB, the most a `.tflite` flatbuffer can address and far above any model a
/// microcontroller runs (a million-tensor model JSON is about 100 MB). A larger file is refused
/// before it is read, rather than filling the memory (docs/model-format.md, "Input files").
pub const MAX_MODEL_FILE_BYTES: u64 = 2 << 30;
/// The largest target, rules, constraints or lock file memplan reads: 64 MiB.
pub const MAX_SETTINGS_FILE_BYTES: u64 = 64 << 20;

/// Opens `path` for reading if it is a regular file (after symbolic links) of at most `cap`
/// bytes, with its size. A FIFO would block reading forever, a device (`/dev/zero`) never end,
/// and a directory is not an input: each is refused by name before it is opened. Every input
/// file memplan reads is opened here.
pub(crate) fn open_regular_file(path: &Path, what: &str, cap: u64) -> Result<(std::fs::File, u64)> {
    let cannot = |error: std::io::Error| {
        Error::input(format!("{}: cannot read {what}: {error}", path.display()))
    };
    let metadata = std::fs::metadata(path).map_err(cannot)?;
    let kind = metadata.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let (is, why) = if kind.is_dir() {
            ("a directory", "")
        } else if kind.is_fifo() {
            ("a named pipe (FIFO)", " (reading it could wait forever)")
        } else if kind.is_char_device() || kind.is_block_device() {
            ("a device", " (reading it might never end)")
        } else if kind.is_socket() {
            ("a socket", "")
        } else {
            ("not a regular file", "")
        };
        return Err(Error::input(format!(
            "{}: is {is}, not a file{why}; give {what} as a regular file",
            path.display()
        )));
    }
    if metadata.len() > cap {
        return Err(too_large(path, what, metadata.len(), cap));
    }
    let file = std::fs::File::open(path).map_err(cannot)?;
    Ok((file, metadata.len()))
}

/// The message for a file above its size cap.
fn too_large(path: &Path, what: &str, len: u64, cap: u64) -> Error {
    Error::input(format!(
        "{}: is {len} bytes, more than the {} MiB memplan reads as {what}; check that this is \
         the file you meant (the caps: docs/model-format.md, \"Input files\")",
        path.display(),
        cap >> 20,
    ))
}

/// Reads the rest of `file` (the input `path`, opened by [`open_regular_file`] with `cap`)
/// onto `bytes`, refusing it if it grows past `cap` meanwhile (the size was checked when it was
/// opened, but a file may be written as it is read).
pub(crate) fn read_capped(
    file: std::fs::File,
    bytes: &mut Vec<u8>,
    path: &Path,
    what: &str,
    cap: u64,
) -> Result<()> {
    use std::io::Read;
    let room = cap.saturating_sub(bytes.len() as u64);
    file.take(room.saturating_add(1))
        .read_to_end(bytes)
        .map_err(|error| {
            Error::input(format!("{}: cannot read {what}: {error}", path.display()))
        })?;
    if bytes.len() as u64 > cap {
        return Err(too_large(path, what, bytes.len() as u64, cap));
    }
    Ok(())
}

/// Reads the regular file `path` whole ([`open_regular_file`]), at most `cap` bytes.
pub(crate) fn read_regular_file(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>> {
    let (file, len) = open_regular_file(path, what, cap)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    read_capped(file, &mut bytes, path, what, cap)?;
    Ok(bytes)
}

/// Reads `path` as UTF-8 text of at most `cap` bytes. `what` names the expected content for
/// messages ("a memplan model JSON", "a target JSON", ...). An empty (or all-whitespace) file
/// is an input error.
pub(crate) fn read_text(path: &Path, what: &str, cap: u64) -> Result<String> {
    let bytes = read_regular_file(path, what, cap)?;
    text_from_bytes(path, bytes, what)
}

/// The contents of `path`, already read, as UTF-8 text; the same checks and messages as
/// [`read_text`]. A leading byte-order mark (which spreadsheet programs write) is dropped:
/// left in, it would be an invisible part of the first CSV column's name or a JSON error.
pub(crate) fn text_from_bytes(path: &Path, bytes: Vec<u8>, what: &str) -> Result<String> {
    let mut text = String::from_utf8(bytes).map_err(|error| {
        let (line, column) = line_column(error.as_bytes(), error.utf8_error().valid_up_to());
        Error::input(format!(
            "{}:{line}:{column}: not UTF-8 text; expected {what}",
            path.display()
        ))
    })?;
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    if text.trim().is_empty() {
        return Err(Error::input(format!(
            "{}: the file is empty; expected {what}",
            path.display()
        )));
    }
    Ok(text)
}

/// 1-based line and column of byte `offset` in `bytes`.
fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    (line, offset - line_start + 1)
}

/// Parses `text` (the contents of `path`) as JSON into `T`.
pub(crate) fn parse_json<'de, T: Deserialize<'de>>(
    path: &Path,
    text: &'de str,
    what: &str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|error| json_error(path, &error, what))
}

/// Turns a serde_json error into `FILE:LINE:COLUMN: detail; hint`.
pub(crate) fn json_error(path: &Path, error: &serde_json::Error, what: &str) -> Error {
    let full = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let detail = full.strip_suffix(&position).unwrap_or(&full);
    let hint = match error.classify() {
        Category::Eof => format!("the JSON ends early (is the file truncated?); expected {what}"),
        Category::Syntax => format!("this is not valid JSON; expected {what}"),
        Category::Data => format!("fix this value; see the format of {what}"),
        Category::Io => format!("expected {what}"),
    };
    Error::input(format!(
        "{}:{}:{}: {detail}; {hint}",
        path.display(),
        error.line(),
        error.column()
    ))
}

/// A tensor id as written in JSON: a string, or an integer taken as its decimal string.
/// Borrows from the text when it can (ids without escapes), so reading a large model does
/// not copy every id twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JsonId<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for JsonId<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct IdVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for IdVisitor<'a> {
            type Value = JsonId<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a tensor id (a string or an integer)")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JsonId(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonId(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(JsonId(Cow::Owned(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(JsonId(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(JsonId(Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_any(IdVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        size: u64,
    }

    #[test]
    fn json_errors_carry_file_line_and_column() {
        let path = Path::new("m.json");
        let error = parse_json::<Doc>(path, "{\n  \"size\": \"big\"\n}", "a test doc").unwrap_err();
        assert!(error.message.starts_with("m.json:2:"), "{}", error.message);
        assert!(error.message.contains("invalid type"), "{}", error.message);
        let error = parse_json::<Doc>(path, "{\"size\": 1", "a test doc").unwrap_err();
        assert!(error.message.contains("truncated"), "{}", error.message);
        let error = parse_json::<Doc>(path, "{\"size\" 1}", "a test doc").unwrap_err();
        assert!(error.message.starts_with("m.json:1:"), "{}", error.message);
        assert!(
            error.message.contains("not valid JSON"),
            "{}",
            error.message
        );
    }

    #[test]
    fn line_column_is_one_based() {
        assert_eq!(line_column(b"ab\ncd", 0), (1, 1));
        assert_eq!(line_column(b"ab\ncd", 4), (2, 2));
    }
}
