//! The fit policy: which gap a buffer takes among the occupied byte ranges (best or first).

use super::*;

/// The offset for a buffer of `size` bytes among the `occupied` byte ranges `(offset, end)`
/// (sorted by offset; they may overlap one another).
#[inline]
pub(super) fn choose_gap(
    occupied: impl IntoIterator<Item = (u64, u64)>,
    size: u64,
    alignment: u64,
    fit: Fit,
) -> u64 {
    // (gap length, offset) of the best bounded gap so far.
    let mut best: Option<(u64, u64)> = None;
    let mut cursor = 0u64;
    for (start, end) in occupied {
        if start > cursor {
            let candidate = align_up(cursor, alignment);
            if candidate.saturating_add(size) <= start {
                let length = start - cursor;
                match fit {
                    Fit::First => return candidate,
                    Fit::Best => {
                        if best.is_none_or(|(best_length, _)| length < best_length) {
                            best = Some((length, candidate));
                        }
                    }
                }
            }
        }
        cursor = cursor.max(end);
    }
    match best {
        Some((_, offset)) => offset,
        None => align_up(cursor, alignment),
    }
}
