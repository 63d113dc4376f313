//! Standard base64 (RFC 4648, `+/` alphabet, `=` padding optional) for constant bytes inline in
//! model JSON. A dozen lines of decoder are cheaper than a dependency.

/// Decodes `text`. On failure, returns the byte position of the first bad character and why.
pub fn decode(text: &str) -> Result<Vec<u8>, (usize, &'static str)> {
    let bytes = text.as_bytes();
    let unpadded = bytes
        .iter()
        .rposition(|&b| b != b'=')
        .map_or(0, |last| last + 1);
    if bytes.len() - unpadded > 2 {
        return Err((unpadded, "too much `=` padding"));
    }
    if unpadded % 4 == 1 {
        return Err((unpadded, "the length is not a whole number of bytes"));
    }
    let mut out = Vec::with_capacity(unpadded / 4 * 3 + 2);
    let mut accumulator: u32 = 0;
    let mut bits = 0;
    for (position, &byte) in bytes[..unpadded].iter().enumerate() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err((position, "not a base64 character")),
        };
        accumulator = (accumulator << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((accumulator >> bits) as u8);
            accumulator &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_rfc4648_vectors() {
        for (encoded, plain) in [
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYg==", "foob"),
            ("Zm9vYmE=", "fooba"),
            ("Zm9vYmFy", "foobar"),
            ("Zm9vYg", "foob"),
        ] {
            assert_eq!(decode(encoded).unwrap(), plain.as_bytes(), "{encoded}");
        }
        assert_eq!(decode("//+A").unwrap(), vec![0xff, 0xff, 0x80]);
    }

    #[test]
    fn rejects_bad_characters_and_lengths() {
        assert_eq!(decode("Zm9v!A==").unwrap_err().0, 4);
        assert!(decode("Zm9vY").is_err());
        assert!(decode("Zg===").is_err());
    }
}
