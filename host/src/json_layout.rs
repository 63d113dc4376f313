//! The layout of the large JSON files memplan writes (`{prefix}_plan.json`,
//! `{prefix}_residency.json`): indented like `serde_json`'s pretty printer down to a depth,
//! compact below it, so that each record of a long list (a tensor, an allocation) is one line.
//!
//! Why: fully indented, a million tensors take 350 bytes each in the residency report, most of
//! it spaces and newlines, and writing them is most of memplan's time on large inputs; one line
//! per record keeps the file as easy to read, grep and diff, at well under half the size.

use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

/// Indents containers that start at depth `<= pretty_depth` (the root is depth 1); writes
/// deeper ones compactly, on one line.
pub struct ShallowPretty {
    pretty_depth: usize,
    depth: usize,
    /// Per open container: whether it has a value yet (to close it on its own line).
    has_value: Vec<bool>,
}

impl ShallowPretty {
    pub fn new(pretty_depth: usize) -> ShallowPretty {
        ShallowPretty {
            pretty_depth,
            depth: 0,
            has_value: Vec::new(),
        }
    }

    fn pretty(&self) -> bool {
        self.depth <= self.pretty_depth
    }

    fn indent<W: ?Sized + io::Write>(&self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b"\n")?;
        for _ in 0..self.depth {
            writer.write_all(b"  ")?;
        }
        Ok(())
    }

    fn open<W: ?Sized + io::Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value.push(false);
        writer.write_all(bracket)
    }

    fn close<W: ?Sized + io::Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        let had_value = self.has_value.pop().unwrap_or(false);
        let pretty = self.pretty();
        self.depth -= 1;
        if pretty && had_value {
            self.indent(writer)?;
        }
        writer.write_all(bracket)
    }

    fn element<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if let Some(has_value) = self.has_value.last_mut() {
            *has_value = true;
        }
        if !first {
            writer.write_all(b",")?;
        }
        if self.pretty() {
            self.indent(writer)?;
        }
        Ok(())
    }
}

impl Formatter for ShallowPretty {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(writer, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(writer, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.pretty() {
            writer.write_all(b": ")
        } else {
            CompactFormatter.begin_object_value(writer)
        }
    }
}

/// Writes `value` as JSON text laid out by [`ShallowPretty`], newline-terminated.
pub fn to_writer<T: Serialize + ?Sized>(
    writer: &mut dyn std::io::Write,
    value: &T,
    pretty_depth: usize,
) -> std::io::Result<()> {
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut *writer, ShallowPretty::new(pretty_depth));
    value
        .serialize(&mut serializer)
        .map_err(std::io::Error::from)?;
    writer.write_all(b"\n")
}

/// `value` as JSON text laid out by [`ShallowPretty`], newline-terminated.
pub fn to_string<T: Serialize + ?Sized>(
    value: &T,
    pretty_depth: usize,
) -> serde_json::Result<String> {
    let mut bytes = Vec::with_capacity(4096);
    to_writer(&mut bytes, value, pretty_depth).map_err(serde_json::Error::io)?;
    // serde_json writes valid UTF-8.
    Ok(String::from_utf8(bytes).expect("serde_json writes UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_below_the_depth_are_one_line_each_and_the_text_is_the_same_json() {
        let value = json!({
            "format": "x",
            "empty": [],
            "tensors": [{"id": "0", "size": 16, "shape": [1, 2]}, {"id": "1", "size": 32}],
        });
        let text = to_string(&value, 2).unwrap();
        assert_eq!(
            text,
            "{\n  \"empty\": [],\n  \"format\": \"x\",\n  \"tensors\": [\n    \
             {\"id\":\"0\",\"shape\":[1,2],\"size\":16},\n    {\"id\":\"1\",\"size\":32}\n  ]\n}\n"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
        // Depth 0: everything on one line.
        assert_eq!(to_string(&json!({"a": [1]}), 0).unwrap(), "{\"a\":[1]}\n");
    }
}
