//! The lower bound of an arena: the maximum, over op steps, of the sum of the sizes of the
//! buffers live at that step. No placement of the buffers can be smaller than the bound of
//! their bare sizes.
//!
//! The figure reported beside an arena (DESIGN's *lower bound*) rounds each size up to its
//! own alignment first. When the tensors of an arena share one alignment that is still a
//! bound; with mixed alignments a valid arena can be smaller (a 16-byte tensor aligned to 64
//! and an 8-byte one aligned to 16 fit in 24 bytes, where the rounded sizes sum to 80), so
//! code that must never overestimate rounds to the smallest alignment instead (the exact
//! planner's units, the host's early does-not-fit check). Host (analysis, reports) and
//! planners share this one sweep so every figure means the same thing.

use crate::abi::Lifetime;

/// `size` rounded up to a multiple of `alignment` (a power of two or 0/1 for none).
///
/// `#[inline]`: the planner kit, another crate, calls it in its per-buffer loops.
#[inline]
pub fn align_up(size: u64, alignment: u64) -> u64 {
    if alignment <= 1 {
        size
    } else {
        size.div_ceil(alignment).saturating_mul(alignment)
    }
}

/// Peak of the summed `(size, lifetime)` pairs over steps. O(n log n): one sorted sweep over
/// the 2n start/end events. Sizes are taken as given (round them first if alignment padding
/// should count).
pub fn lower_bound<I>(buffers: I) -> u64
where
    I: IntoIterator<Item = (u64, Lifetime)>,
{
    // (step, is_end, size): at one step every start is counted before any end, because
    // lifetimes are inclusive and a buffer ending at step s is still live at s.
    let mut events: Vec<(u64, bool, u64)> = Vec::new();
    for (size, lifetime) in buffers {
        if size == 0 {
            continue;
        }
        events.push((u64::from(lifetime.first), false, size));
        events.push((u64::from(lifetime.last) + 1, true, size));
    }
    events.sort_unstable_by_key(|&(step, is_end, _)| (step, !is_end));
    let mut live: u64 = 0;
    let mut peak: u64 = 0;
    for (_, is_end, size) in events {
        if is_end {
            live -= size;
        } else {
            live = live.saturating_add(size);
            peak = peak.max(live);
        }
    }
    peak
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lt(first: u32, last: u32) -> Lifetime {
        Lifetime::new(first, last)
    }

    #[test]
    fn align_up_rounds_to_powers_of_two() {
        assert_eq!(align_up(0, 16), 0);
        assert_eq!(align_up(1, 16), 16);
        assert_eq!(align_up(16, 16), 16);
        assert_eq!(align_up(17, 1), 17);
        assert_eq!(align_up(17, 0), 17);
    }

    #[test]
    fn inclusive_lifetimes_touching_at_a_step_are_both_live() {
        assert_eq!(lower_bound([(10, lt(0, 2)), (20, lt(2, 4))]), 30);
    }

    #[test]
    fn disjoint_lifetimes_do_not_add_up() {
        assert_eq!(
            lower_bound([(10, lt(0, 1)), (20, lt(2, 4)), (5, lt(3, 3))]),
            25
        );
    }

    #[test]
    fn empty_and_zero_size_give_zero() {
        assert_eq!(lower_bound(std::iter::empty()), 0);
        assert_eq!(lower_bound([(0, lt(0, 9))]), 0);
    }
}
