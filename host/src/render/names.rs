//! C identifiers for the emitted sources.
//!
//! Tensor ids are arbitrary strings (`"12"`, `"conv/weights:0"`), so each tensor gets an enum
//! constant `{prefix}_tensor_{suffix}`: the suffix is the id with every character outside
//! `[A-Za-z0-9_]` replaced by `_` (an empty id becomes `_`). Ids that are already valid
//! suffixes keep them, taken first; the others, in tensor order, take their sanitized form,
//! or that form followed by `_2`, `_3`, ... when it is already taken. The result depends
//! only on the ids and their order, and no two tensors share a name.
//!
//! The `{prefix}_tensor_` namespace belongs to tensor ids alone: no other emitted symbol
//! starts with it.

use std::collections::BTreeSet;

use crate::error::{Error, Result};

/// Whether `text` is a C identifier (ASCII letters, digits and `_`, not starting with a digit).
pub fn is_c_identifier(text: &str) -> bool {
    let mut bytes = text.bytes();
    matches!(bytes.next(), Some(first) if first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

fn is_identifier_suffix(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

fn sanitize(id: &str) -> String {
    if id.is_empty() {
        return "_".to_string();
    }
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Unique identifier suffixes for `ids` (see the module comment), same order.
pub fn tensor_suffixes(ids: &[&str]) -> Vec<String> {
    let mut taken: BTreeSet<String> = ids
        .iter()
        .filter(|id| is_identifier_suffix(id))
        .map(|id| id.to_string())
        .collect();
    ids.iter()
        .map(|id| {
            if is_identifier_suffix(id) {
                return id.to_string();
            }
            let base = sanitize(id);
            let mut candidate = base.clone();
            let mut counter = 2u64;
            while taken.contains(&candidate) {
                candidate = format!("{base}_{counter}");
                counter += 1;
            }
            taken.insert(candidate.clone());
            candidate
        })
        .collect()
}

/// Checks the module prefix the user chose (`--prefix`).
pub fn check_prefix(prefix: &str) -> Result<()> {
    if is_c_identifier(prefix) {
        Ok(())
    } else {
        Err(Error::input(format!(
            "--prefix `{prefix}` is not a C identifier: it names the emitted files and C \
             symbols, so use ASCII letters, digits and `_`, not starting with a digit"
        )))
    }
}

/// The lowercase form of a memory name used inside C symbols (`SRAM` -> `sram`).
pub fn memory_symbol(memory: &str) -> Result<String> {
    if is_identifier_suffix(memory) {
        Ok(memory.to_ascii_lowercase())
    } else {
        Err(Error::input(format!(
            "memory `{memory}` cannot be used in C symbol names: rename it in the target \
             description to ASCII letters, digits and `_`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ids_keep_their_names_and_others_get_unique_ones() {
        let ids = ["a.b", "a_b", "12", "", "a-b", "a_b_2", "conv/w:0"];
        let suffixes = tensor_suffixes(&ids);
        assert_eq!(
            suffixes,
            ["a_b_3", "a_b", "12", "_", "a_b_4", "a_b_2", "conv_w_0"]
        );
        let unique: BTreeSet<&String> = suffixes.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn prefixes_and_memories_must_fit_c_symbols() {
        assert!(check_prefix("model").is_ok());
        assert!(check_prefix("_m2").is_ok());
        assert!(check_prefix("2m").is_err());
        assert!(check_prefix("my-model").is_err());
        assert!(check_prefix("").is_err());
        assert_eq!(memory_symbol("SRAM").unwrap(), "sram");
        assert_eq!(memory_symbol("ITCM_0").unwrap(), "itcm_0");
        let error = memory_symbol("EXT RAM").unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(error.message.contains("EXT RAM"));
    }
}
