//! The two layout hashes of a rendered plan (docs/output-files.md).
//!
//! Both are the first 16 hex digits of a SHA-256 over `;`-terminated, `|`-separated UTF-8
//! records, so that a firmware build can compare the `{PREFIX}_PLAN_HASH` it was compiled
//! with against the residency report, and so that plans from heliaAOT and memplan with the same
//! regions hash alike:
//!
//! - `plan_hash`: one record `role|MEM|SRC|size|alignment|staged` per region, in region order;
//! - `tensor_layout_hash`: one record `id|role|MEM|offset|size` per bound tensor, numeric ids
//!   in numeric order first, then the other ids lexicographically. External tensors are bound
//!   to no arena and have no record.

use sha2::{Digest, Sha256};

use super::{Region, RenderedTensor};

/// First 16 hex digits of the SHA-256 of the concatenated `records`, each followed by `;`.
fn short_sha256<I, S>(records: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut hasher = Sha256::new();
    for record in records {
        hasher.update(record.as_ref().as_bytes());
        hasher.update(b";");
    }
    hex16(&hasher.finalize())
}

/// The first 16 hex digits of a digest.
fn hex16(digest: &[u8]) -> String {
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Hash of the region table; `regions` must be in region order.
pub fn plan_hash(regions: &[Region]) -> String {
    short_sha256(regions.iter().map(|region| {
        format!(
            "{}|{}|{}|{}|{}|{}",
            region.role.as_str(),
            region.memory,
            region.source_memory,
            region.size,
            region.alignment,
            u8::from(region.is_staged())
        )
    }))
}

/// Hash of where every tensor is bound.
pub fn tensor_layout_hash(tensors: &[RenderedTensor]) -> String {
    use std::fmt::Write as _;
    // Sort keys computed once per tensor rather than per comparison.
    let mut ordered: Vec<(LayoutKey, usize)> = tensors
        .iter()
        .enumerate()
        .filter(|(_, tensor)| !tensor.external)
        .map(|(index, tensor)| (layout_key(&tensor.id), index))
        .collect();
    ordered.sort_unstable();
    let mut hasher = Sha256::new();
    let mut record = String::with_capacity(64);
    for &(_, index) in &ordered {
        let tensor = &tensors[index];
        record.clear();
        let _ = write!(
            record,
            "{}|{}|{}|{}|{};",
            tensor.id,
            tensor.role.as_str(),
            tensor.memory,
            tensor.offset,
            tensor.size
        );
        hasher.update(record.as_bytes());
    }
    hex16(&hasher.finalize())
}

fn is_numeric(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|byte| byte.is_ascii_digit())
}

/// Non-numeric, significant digits' count, significant digits, text.
type LayoutKey<'a> = (bool, usize, &'a str, &'a str);

/// The sort key of an id in the tensor layout hash: numeric ids (decimal digits only) first,
/// by value of any length (significant digits' count, then the digits), ties (leading zeros)
/// by text; then every other id by its bytes.
fn layout_key(id: &str) -> LayoutKey<'_> {
    if is_numeric(id) {
        let digits = id.trim_start_matches('0');
        (false, digits.len(), digits, id)
    } else {
        (true, 0, "", id)
    }
}

#[cfg(test)]
mod tests {
    use memplan_plugin_api::{ArenaRole, Lifetime, TensorKind};

    use super::*;

    fn region(role: ArenaRole, memory: &str, source: &str, size: u64) -> Region {
        Region {
            id: 0,
            role,
            memory: memory.to_string(),
            source_memory: source.to_string(),
            size,
            alignment: 16,
            lower_bound: 0,
            used: 0,
            budget: None,
            c_name: String::new(),
            tensors: Vec::new(),
            payload: None,
        }
    }

    fn tensor(id: &str, offset: u64) -> RenderedTensor {
        RenderedTensor {
            id: id.to_string(),
            name: id.to_string(),
            c_name: String::new(),
            kind: TensorKind::Intermediate,
            role: ArenaRole::Scratch,
            memory: "SRAM".into(),
            source_memory: "SRAM".into(),
            region: Some(0),
            offset,
            size: 16,
            alignment: 16,
            lifetime: Lifetime::new(0, 0),
            alias_of: None,
            external: false,
        }
    }

    #[test]
    fn plan_hash_matches_the_design_test_vectors() {
        let regions = [
            region(ArenaRole::Scratch, "SRAM", "SRAM", 4096),
            region(ArenaRole::Constant, "MRAM", "MRAM", 1000),
        ];
        assert_eq!(plan_hash(&regions), "2adfd04cd62e36ac");
        assert_eq!(plan_hash(&[]), "e3b0c44298fc1c14");
    }

    #[test]
    fn plan_hash_sees_staging_and_sizes() {
        let cold = [region(ArenaRole::Constant, "SRAM", "SRAM", 1000)];
        let staged = [region(ArenaRole::Constant, "SRAM", "MRAM", 1000)];
        let bigger = [region(ArenaRole::Constant, "SRAM", "SRAM", 1016)];
        assert_ne!(plan_hash(&cold), plan_hash(&staged));
        assert_ne!(plan_hash(&cold), plan_hash(&bigger));
    }

    #[test]
    fn tensor_layout_hash_uses_numeric_then_lexicographic_order() {
        // The scheme applied by hand to the expected record order.
        let expected = short_sha256([
            "2|scratch|SRAM|0|16",
            "10|scratch|SRAM|16|16",
            "B|scratch|SRAM|32|16",
            "a|scratch|SRAM|48|16",
        ]);
        let tensors = [
            tensor("a", 48),
            tensor("10", 16),
            tensor("B", 32),
            tensor("2", 0),
        ];
        assert_eq!(tensor_layout_hash(&tensors), expected);
        assert_eq!(tensor_layout_hash(&[]), "e3b0c44298fc1c14");
    }

    #[test]
    fn layout_key_orders_numbers_by_value() {
        let mut ids = vec!["x", "10", "9", "007", "7", "1a", "100000000000000000000000"];
        ids.sort_by_key(|id| layout_key(id));
        assert_eq!(
            ids,
            ["007", "7", "9", "10", "100000000000000000000000", "1a", "x"]
        );
    }
}
