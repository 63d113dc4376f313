//! The one place that decides which characters of user-given text (tensor names and ids, file
//! paths, what a planner says) must not be shown raw, and how they are shown instead.
//!
//! Two kinds: control characters (C0, DEL, C1: line breaks, escapes that drive a terminal,
//! NUL) and the Unicode bidirectional formatting characters, which reorder the text around
//! them so that what a reader sees is not what is there ("Trojan Source"; GCC's
//! `-Wbidi-chars` rejects them in C sources). Each is shown as `\u{XXXX}`, its code point,
//! which is plain ASCII wherever it lands (a C comment, a terminal, a log).
//!
//! Everything memplan prints that came from outside passes through here: its error line, every
//! field of its log, a sandboxed worker's relayed standard error ([`PrintableStream`]), the
//! planner's summary, as well as tensor names in C comments. JSON output needs nothing: its
//! encoder escapes control characters itself.

use std::borrow::Cow;

/// Whether `c` is a Unicode bidirectional formatting character: the embeddings, overrides and
/// their terminator (U+202A-U+202E), the isolates (U+2066-U+2069), and the marks (U+200E LRM,
/// U+200F RLM, U+061C ALM).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Whether `c` must not be shown raw: a control character or a bidirectional formatting one.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `text` with every [`is_hidden`] character written as `\u{XXXX}` (hex, at least four
/// digits); borrowed when there is none. For text that must stay on one line (a planner's
/// message inside memplan's own, a name in a C comment).
pub fn escape_hidden(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// [`escape_hidden`], except that line breaks and tabs are kept: for multi-line text printed as
/// it is (memplan's error line, a log, a worker's relayed standard error).
pub fn escape_hidden_lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

fn escape(text: &str, kept: fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_hidden(c) && !kept(c)) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_hidden(c) && !kept(c) {
            escaped.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// Bytes that may not be UTF-8 (a worker's raw writes) made printable a chunk at a time, line
/// breaks kept ([`escape_hidden_lines`]): a character cut between two chunks is kept until the
/// next one completes it, bytes that are not UTF-8 are shown as `\xNN`.
#[derive(Default)]
pub struct PrintableStream {
    /// The start of a UTF-8 sequence the last chunk ended in.
    pending: Vec<u8>,
}

impl PrintableStream {
    /// The printable text of `chunk` (after what was pending).
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(chunk);
        let mut out = String::with_capacity(bytes.len());
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(&escape_hidden_lines(text));
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    out.push_str(&escape_hidden_lines(
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
    fn controls_and_bidi_characters_are_shown_by_code_point() {
        assert!(matches!(
            escape_hidden("conv/w:0"),
            Cow::Borrowed("conv/w:0")
        ));
        assert_eq!(escape_hidden("a\u{202E}b"), "a\\u{202e}b");
        assert_eq!(
            escape_hidden("\u{1b}[31m\0\n"),
            "\\u{001b}[31m\\u{0000}\\u{000a}"
        );
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{2066}', '\u{2067}', '\u{2068}',
            '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}', '\u{85}', '\u{7f}',
        ] {
            let shown = escape_hidden(&c.to_string()).into_owned();
            assert!(
                shown.is_ascii() && shown.starts_with("\\u{"),
                "{c:?}: {shown}"
            );
        }
        // Letters of right-to-left scripts are text, not formatting.
        assert_eq!(escape_hidden("שלום"), "שלום");
    }

    #[test]
    fn lines_keep_their_breaks_and_a_stream_keeps_characters_cut_between_chunks() {
        assert_eq!(
            escape_hidden_lines("one\ntwo\tthree\x1b"),
            "one\ntwo\tthree\\u{001b}"
        );
        let mut stream = PrintableStream::default();
        let text = "é\x1b[31m\n".as_bytes();
        assert_eq!(stream.push(&text[..1]), "");
        assert_eq!(stream.push(&text[1..]), "é\\u{001b}[31m\n");
        assert_eq!(stream.push(b"\xffok\xc3"), "\\xffok");
        assert_eq!(stream.finish(), "\\xc3");
    }
}
