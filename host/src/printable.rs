//! The one place that decides which characters of user-given text (tensor names and ids, file
//! paths, what a planner says) must not be shown raw, and how they are shown instead.
//!
//! Two kinds: control characters (C0, DEL, C1: line breaks, escapes that drive a terminal,
//! NUL) and the Unicode bidirectional formatting characters, which reorder the text around
//! them so that what a reader sees is not what is there ("Trojan Source"; GCC's
//! `-Wbidi-chars` rejects them in C sources). Each is shown as `\u{XXXX}`, its code point,
//! which is plain ASCII wherever it lands (a C comment, a terminal, a log).

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
/// digits); borrowed when there is none.
pub fn escape_hidden(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_hidden(c) {
            escaped.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
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
}
