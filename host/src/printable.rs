//! Text from outside memplan made safe to print on a terminal.
//!
//! Planner messages, a worker's log, tensor ids, file paths and anything else memplan did not
//! write itself may hold bytes a terminal acts on: ANSI escape sequences (colours, cursor
//! moves, window titles, clearing the screen), carriage returns and backspaces that overwrite
//! what was printed, NUL, C1 controls, and the bidirectional-override characters that make text
//! read differently from what it is ("Trojan Source"). Every place memplan prints text (its
//! error line, its log, the worker's relayed log, the plan summary) passes it through
//! [`printable`] or [`printable_lines`], which show such characters as escapes (`\x1b`,
//! `\u{202e}`) instead of sending them. JSON output needs nothing: its encoder escapes control
//! characters itself.

use std::borrow::Cow;

/// `text` with every character a terminal would act on shown as an escape, newlines and tabs
/// included: for text that must stay on one line (a planner's message inside memplan's own).
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` with every character a terminal would act on shown as an escape, except newlines
/// and tabs: for multi-line text printed as it is (memplan's error line, a log).
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Whether a terminal (or a reader) would take `c` for something other than a printed
/// character: C0 and C1 controls, DEL, and the Unicode bidirectional formatting characters.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let kept = |c: char| keep_lines && (c == '\n' || c == '\t');
    if !text.chars().any(|c| is_unsafe(c) && !kept(c)) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_unsafe(c) || kept(c) {
            escaped.push(c);
        } else if (c as u32) < 0x80 {
            escaped.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            escaped.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(escaped)
}

/// Bytes that may not be UTF-8 (a worker's raw writes) made printable a chunk at a time: a
/// character cut between two chunks is kept until the next one completes it, bytes that are
/// not UTF-8 are shown as `\xNN`.
#[derive(Default)]
pub struct PrintableStream {
    /// The start of a UTF-8 sequence the last chunk ended in.
    pending: Vec<u8>,
}

impl PrintableStream {
    /// The printable text of `chunk` (after what was pending), newlines and tabs kept.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(chunk);
        let mut out = String::with_capacity(bytes.len());
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(&printable_lines(text));
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    // SAFETY-free: `valid` is UTF-8 by the error's own account.
                    out.push_str(&printable_lines(
                        std::str::from_utf8(valid).unwrap_or_default(),
                    ));
                    match error.error_len() {
                        Some(bad) => {
                            for byte in &after[..bad] {
                                out.push_str(&format!("\\x{byte:02x}"));
                            }
                            rest = &after[bad..];
                        }
                        None => {
                            self.pending = after.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// What is left pending at the end of the stream, shown as escapes.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
            .iter()
            .map(|byte| format!("\\x{byte:02x}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_shown_not_sent() {
        assert_eq!(printable("plain text, ü"), "plain text, ü");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        assert_eq!(
            printable("\x1b[2J\x1b]0;pwned\x07red\rfake\0x\x7f"),
            "\\x1b[2J\\x1b]0;pwned\\x07red\\x0dfake\\x00x\\x7f"
        );
        assert_eq!(
            printable("a\u{202e}b\u{2066}c\u{9b}"),
            "a\\u{202e}b\\u{2066}c\\u{9b}"
        );
        assert_eq!(printable("one\ntwo\tthree"), "one\\x0atwo\\x09three");
        assert_eq!(
            printable_lines("one\ntwo\tthree\x1b"),
            "one\ntwo\tthree\\x1b"
        );
    }

    #[test]
    fn a_stream_keeps_characters_cut_between_chunks_and_escapes_bad_bytes() {
        let mut stream = PrintableStream::default();
        let text = "é\x1b[31m\n".as_bytes();
        assert_eq!(stream.push(&text[..1]), "");
        assert_eq!(stream.push(&text[1..]), "é\\x1b[31m\n");
        assert_eq!(stream.push(b"\xffok\xc3"), "\\xffok");
        assert_eq!(stream.finish(), "\\xc3");
    }
}
