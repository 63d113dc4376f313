//! Standard base64 (RFC 4648, `+/` alphabet, `=` padding optional) for constant bytes inline in
//! model JSON, by the `base64` crate's decoder, with its errors said for users.

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::{alphabet, DecodeError, Engine};

/// Padding optional, as exporters differ; bits left over in the last character are ignored,
/// as most decoders do.
const ENGINE: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes `text`. On failure, returns the byte position of the first bad character and why.
pub fn decode(text: &str) -> Result<Vec<u8>, (usize, &'static str)> {
    ENGINE.decode(text).map_err(|error| match error {
        DecodeError::InvalidByte(position, b'=') => (position, "misplaced `=` padding"),
        DecodeError::InvalidByte(position, _) => (position, "not a base64 character"),
        DecodeError::InvalidLength(position) => {
            (position, "the length is not a whole number of bytes")
        }
        DecodeError::InvalidLastSymbol(position, _) => (position, "a bad last character"),
        DecodeError::InvalidPadding => (text.len(), "bad `=` padding"),
    })
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
        assert_eq!(
            decode("Zm9v!A==").unwrap_err(),
            (4, "not a base64 character")
        );
        assert_eq!(
            decode("Zm9vY").unwrap_err().1,
            "the length is not a whole number of bytes"
        );
        assert!(decode("Zg===").is_err());
        assert_eq!(
            decode("Zm=vYg==").unwrap_err(),
            (2, "misplaced `=` padding")
        );
    }
}
