//! Finding a repeated buffer id among a million rows without hashing a million strings:
//! MiniMalloc traces number their buffers 0, 1, 2, ..., so numeric ids are looked up in
//! tables indexed by the number, and only other ids are hashed.

use std::collections::HashMap;
use std::sync::atomic::AtomicU8;

/// Which numeric ids the threads reading the rows have seen, to know without a second pass
/// that no id repeats (the common case): an id whose flag is already set, or one the flags
/// do not cover, sends the reader to [`first_duplicate`] for the lines to name.
pub(crate) struct NumericIdsSeen {
    flags: Vec<u8>,
}

impl NumericIdsSeen {
    /// Flags for the numeric ids below four times `count`, as [`SeenIds`] has.
    pub(crate) fn new(count: usize) -> Self {
        // Zeroed memory from the allocator: untouched pages cost nothing.
        NumericIdsSeen {
            flags: vec![0; numeric_id_limit(count)],
        }
    }

    pub(crate) fn flags(&mut self) -> &[AtomicU8] {
        let flags: &mut [u8] = &mut self.flags;
        // SAFETY: AtomicU8 has the size, alignment and bit validity of u8, and the unique
        // borrow of the bytes is held for as long as the atomic view lives.
        unsafe { &*(flags as *mut [u8] as *const [AtomicU8]) }
    }
}

/// The indices of the first row whose id an earlier one has, and of that earlier one:
/// `(earlier, again)`.
pub(crate) fn first_duplicate<T>(rows: &[T], id_of: impl Fn(&T) -> &str) -> Option<(usize, usize)> {
    let mut seen = SeenIds::with_capacity(rows.len());
    rows.iter().enumerate().find_map(|(index, row)| {
        // SeenIds keeps a non-zero number per id: the index plus one.
        seen.insert(id_of(row), index + 1)
            .map(|earlier| (earlier - 1, index))
    })
}

/// A non-zero number (where it was seen) for each buffer id seen so far, to find duplicates.
/// MiniMalloc traces number their buffers 0, 1, 2, ...: such ids are looked up in a table
/// indexed by the number (hashing a million strings was half the reading time); other ids go
/// to a hash map. Keys borrow the ids: owned copies would be a million more allocations.
struct SeenIds<'a> {
    /// Where numeric id `n` was seen, at `n` (0: not seen), for ids below `numeric_limit`.
    numeric: Vec<u32>,
    numeric_limit: usize,
    other: HashMap<&'a str, usize>,
}

impl<'a> SeenIds<'a> {
    /// Room for numeric ids below four times the expected count.
    fn with_capacity(count: usize) -> Self {
        let numeric_limit = numeric_id_limit(count);
        SeenIds {
            numeric: Vec::with_capacity(numeric_limit),
            numeric_limit,
            other: HashMap::new(),
        }
    }

    /// Records `id` as seen at `at` (not 0); where it was first seen when it is a duplicate.
    fn insert(&mut self, id: &'a str, at: usize) -> Option<usize> {
        match (canonical_number(id), u32::try_from(at)) {
            (Some(number), Ok(at)) if number < self.numeric_limit => {
                if number >= self.numeric.len() {
                    self.numeric.resize(number + 1, 0);
                }
                match std::mem::replace(&mut self.numeric[number], at) {
                    0 => None,
                    first => {
                        self.numeric[number] = first;
                        Some(first as usize)
                    }
                }
            }
            _ => self.other.insert(id, at).inspect(|&first| {
                self.other.insert(id, first);
            }),
        }
    }
}

/// Numeric ids below this many are tracked in a table rather than hashed, for `count` rows.
pub(crate) fn numeric_id_limit(count: usize) -> usize {
    count.saturating_mul(4).min(1 << 26)
}

/// The number `id` writes in canonical decimal ("7", not "07" or "+7"), so that equal
/// numbers are equal ids.
pub(crate) fn canonical_number(id: &str) -> Option<usize> {
    let canonical = !id.is_empty()
        && id.bytes().all(|byte| byte.is_ascii_digit())
        && (id.len() == 1 || !id.starts_with('0'));
    canonical.then(|| id.parse::<usize>().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_ids_are_found_numeric_or_not_and_07_is_not_7() {
        let mut seen = SeenIds::with_capacity(4);
        assert_eq!(seen.insert("3", 2), None);
        assert_eq!(seen.insert("07", 3), None);
        assert_eq!(seen.insert("7", 4), None);
        assert_eq!(seen.insert("conv", 5), None);
        // Past the numeric table (4 x 4 ids): the hash map.
        assert_eq!(seen.insert("99", 6), None);
        assert_eq!(seen.insert("3", 7), Some(2));
        assert_eq!(seen.insert("07", 8), Some(3));
        assert_eq!(seen.insert("conv", 9), Some(5));
        assert_eq!(seen.insert("99", 10), Some(6));
        assert_eq!(seen.insert("7", 11), Some(4));
    }
}
