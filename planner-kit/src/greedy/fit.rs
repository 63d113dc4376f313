//! The fit policy: which gap a buffer takes among the occupied byte ranges (best or first).

use super::Fit;
use memplan_plugin_api::bounds::align_up;

/// The offset for a buffer of `size` bytes among the `occupied` byte ranges `(offset, end)`
/// (sorted by offset; they may overlap one another), never across one of the `barriers`
/// (ascending offsets a buffer may end at or start at, but not span).
#[inline]
pub(super) fn choose_gap(
    occupied: impl IntoIterator<Item = (u64, u64)>,
    size: u64,
    alignment: u64,
    fit: Fit,
    barriers: &[u64],
) -> u64 {
    // (gap length, offset) of the best bounded gap so far.
    let mut best: Option<(u64, u64)> = None;
    let mut cursor = 0u64;
    for (start, end) in occupied {
        if start > cursor {
            if let Some(candidate) = offset_in_gap(cursor, start, size, alignment, barriers) {
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
        None => lowest_start(cursor, size, alignment, barriers),
    }
}

/// Where `size` bytes go in the free bytes `from..to`: at the [`lowest_start`] from `from`,
/// when they end by `to` there; `None` when they do not fit.
#[inline]
pub(super) fn offset_in_gap(
    from: u64,
    to: u64,
    size: u64,
    alignment: u64,
    barriers: &[u64],
) -> Option<u64> {
    let candidate = lowest_start(from, size, alignment, barriers);
    (candidate.saturating_add(size) <= to).then_some(candidate)
}

/// The lowest aligned offset from `from` up where `size` bytes span none of the `barriers`
/// (ascending): past a barrier they would cross, the search moves to the barrier itself.
/// Also where a buffer goes in the unbounded space above every occupied byte.
#[inline]
pub(super) fn lowest_start(from: u64, size: u64, alignment: u64, barriers: &[u64]) -> u64 {
    let mut start = align_up(from, alignment);
    for &barrier in barriers {
        if start < barrier && start.saturating_add(size) > barrier {
            start = align_up(barrier, alignment);
        }
    }
    start
}
