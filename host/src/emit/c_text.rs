//! Small pieces of C text shared by the emitted header and sources.

use memplan_plugin_api::TensorKind;

/// `text` made safe inside a `/* */` comment: no comment terminator, no comment opener
/// (`-Wcomment`, an error under `-Werror`), no trigraph, no line break, other control
/// character or bidirectional formatting character (`-Wbidi-chars`), these written as
/// `\u{XXXX}` ([`crate::printable::escape_hidden`]); model tensor names are arbitrary
/// strings, e.g. `block/*/conv`.
pub fn comment_text(text: &str) -> String {
    let cleaned = crate::printable::escape_hidden(text);
    // Splitting a terminator cannot make an opener, and the reverse cannot make a terminator.
    cleaned
        .replace("*/", "* /")
        .replace("/*", "/ *")
        .replace("??", "?\\?")
}

/// Length of a C array holding `size` bytes: ISO C forbids zero-length arrays, so an empty
/// arena still gets one (unused) byte.
pub fn array_len(size: u64) -> u64 {
    size.max(1)
}

/// The `{PREFIX}_KIND_*` constant of a tensor kind.
pub fn kind_constant(macro_prefix: &str, kind: TensorKind) -> String {
    format!("{macro_prefix}_KIND_{}", kind.as_str().to_ascii_uppercase())
}

/// Every tensor kind, in the order of the emitted `{prefix}_tensor_kind` enum.
pub const KINDS: [TensorKind; 5] = [
    TensorKind::Input,
    TensorKind::Output,
    TensorKind::Intermediate,
    TensorKind::Constant,
    TensorKind::Persistent,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_cannot_be_closed_or_broken_by_names() {
        assert_eq!(comment_text("a*/b"), "a* /b");
        assert_eq!(comment_text("x??/\ny"), "x?\\?/\\u{000a}y");
        assert_eq!(comment_text("w\u{202E}0"), "w\\u{202e}0");
        assert_eq!(comment_text("conv/w:0"), "conv/w:0");
        assert_eq!(comment_text("block/*/conv"), "block/ * /conv");
        assert_eq!(comment_text("a/**/b"), "a/ ** /b");
        for name in ["block/*/conv", "a/**/b", "*/*/*", "//*"] {
            let text = comment_text(name);
            assert!(
                !text.contains("/*") && !text.contains("*/"),
                "{name}: {text}"
            );
        }
    }

    #[test]
    fn arrays_are_never_empty() {
        assert_eq!(array_len(0), 1);
        assert_eq!(array_len(4096), 4096);
    }
}
