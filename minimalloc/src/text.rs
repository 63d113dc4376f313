//! Lines, fields and numbers of a CSV, as `str::lines`, `split(',')`, `trim` and
//! `str::parse::<u64>` read them, in byte loops: a million-line trace spends most of its
//! reading time here, and the general machinery was several times slower.

/// The lines of `text` that are not blank, numbered from `first_number` (blank ones count),
/// each without its `\n` or `\r\n` ending. A plain byte loop: `str::lines` finds each end with the
/// general pattern searcher, which cost a fifth of the reading time of a million-line trace.
pub(crate) fn numbered_lines(
    text: &str,
    first_number: usize,
) -> impl Iterator<Item = (usize, &str)> {
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

/// Lines in `text`, the last one counted whether or not it ends with a newline.
pub(crate) fn line_count(text: &str) -> usize {
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

/// Splits `line` at its commas into `fields` (each trimmed) and returns how many fields the
/// line has, which may be more or fewer than `fields` holds (those past it are dropped).
/// A byte loop for the same reason as [`numbered_lines`]: fields are a few bytes long.
pub(crate) fn split_fields<'a>(line: &'a str, fields: &mut [&'a str]) -> usize {
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
pub(crate) const MAX_COLUMNS: usize = 16;

/// `field` without surrounding whitespace; fields seldom have any, so the common case only
/// looks at the two ends.
pub(crate) fn trimmed(field: &str) -> &str {
    match (field.as_bytes().first(), field.as_bytes().last()) {
        (Some(&first), Some(&last)) if first.is_ascii_graphic() && last.is_ascii_graphic() => field,
        _ => field.trim(),
    }
}

/// A non-negative decimal integer, as `str::parse::<u64>` reads it; plain digits (every
/// MiniMalloc file) without its general machinery.
pub(crate) fn parse_number(field: &str) -> Option<u64> {
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
}
