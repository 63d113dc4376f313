//! Lower bounds of an arena: no placement of its buffers can be smaller.
//!
//! [`lower_bound`] is the sweep: the maximum, over op steps, of the sum of the sizes of the
//! buffers live at that step. [`arena_lower_bound`] is *the* lower bound of an arena, the one
//! figure memplan reports everywhere (analysis, plan and check tables, residency JSON, the
//! shipped planners' notes): the larger of
//! - the peak of the bare sizes, and
//! - the peak of the sizes rounded up to the arena's smallest alignment, less the largest such
//!   rounding: every buffer starts at a multiple of its own alignment, hence of the smallest,
//!   so buffers live together are stacked at least that far apart, except that the top one
//!   needs no padding after it.
//!
//! Rounding each size to its own alignment would overestimate: with mixed alignments a valid
//! arena can be smaller (a 16-byte tensor aligned to 64 and an 8-byte one aligned to 16 fit in
//! 24 bytes, where the rounded sizes sum to 80), and even with one alignment the top buffer's
//! padding is not needed (two 1-byte buffers aligned to 16 fit in 17 bytes). A bound that
//! overestimates would let a planner call a plan optimal that is not.

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
    busiest_step(buffers).map_or(0, |(_, peak)| peak)
}

/// The first step at which the summed `(size, lifetime)` pairs peak, and the peak ([`None`]
/// when no size is above 0): where every packing is at its tightest, so a packer that places
/// the buffers live there first can stack them without a gap. O(n log n), the sweep of
/// [`lower_bound`].
pub fn busiest_step<I>(buffers: I) -> Option<(u32, u64)>
where
    I: IntoIterator<Item = (u64, Lifetime)>,
{
    let buffers = buffers.into_iter();
    let mut events = Vec::with_capacity(2 * buffers.size_hint().0);
    for (size, lifetime) in buffers {
        if size > 0 {
            push_events(&mut events, size, lifetime);
        }
    }
    events.sort_unstable_by_key(|event| event.key);
    let mut live: u64 = 0;
    let mut busiest: Option<(u32, u64)> = None;
    for event in events {
        if event.is_end() {
            live -= event.size;
        } else {
            live = live.saturating_add(event.size);
            if busiest.is_none_or(|(_, peak)| live > peak) {
                busiest = Some(((event.key >> 1) as u32, live));
            }
        }
    }
    busiest
}

/// A buffer's start or end in a sweep over steps, 16 bytes: a million buffers' events are
/// 32 MB, which a planner run in a fresh worker process pays for in page faults.
struct Event {
    /// The step times two, plus one for a start: sorted by key, the ends at a step come
    /// before its starts (a buffer whose last step is `s` ends at `s + 1`, so the buffers
    /// live at a step are all counted together).
    key: u64,
    size: u64,
}

impl Event {
    fn is_end(&self) -> bool {
        self.key & 1 == 0
    }
}

/// Adds the start and end events of a buffer of `size` bytes live over `lifetime`.
fn push_events(events: &mut Vec<Event>, size: u64, lifetime: Lifetime) {
    events.push(Event {
        key: (u64::from(lifetime.first) << 1) | 1,
        size,
    });
    events.push(Event {
        key: (u64::from(lifetime.last) + 1) << 1,
        size,
    });
}

/// The lower bound of one arena holding `(size, alignment, lifetime)` buffers (see the module
/// docs): never above the height of any valid placement. O(n log n), one sweep.
pub fn arena_lower_bound<I>(buffers: I) -> u64
where
    I: IntoIterator<Item = (u64, u64, Lifetime)>,
    I::IntoIter: Clone,
{
    let buffers = buffers.into_iter().filter(|&(size, _, _)| size > 0);
    let Some(alignment) = buffers
        .clone()
        .map(|(_, alignment, _)| alignment.max(1))
        .min()
    else {
        return 0;
    };
    // Ends before starts at one step, as in `lower_bound`; each size is rounded in the
    // sweep, which keeps the events small.
    let mut events = Vec::with_capacity(2 * buffers.clone().count());
    let mut top_rounding = 0;
    for (size, _, lifetime) in buffers {
        top_rounding = top_rounding.max(align_up(size, alignment) - size);
        push_events(&mut events, size, lifetime);
    }
    events.sort_unstable_by_key(|event| event.key);
    let (mut bare, mut rounded) = (0u64, 0u64);
    let (mut bare_peak, mut rounded_peak) = (0u64, 0u64);
    for event in events {
        let (size, padded) = (event.size, align_up(event.size, alignment));
        if event.is_end() {
            bare -= size;
            rounded -= padded;
        } else {
            bare = bare.saturating_add(size);
            rounded = rounded.saturating_add(padded);
            bare_peak = bare_peak.max(bare);
            rounded_peak = rounded_peak.max(rounded);
        }
    }
    bare_peak.max(rounded_peak.saturating_sub(top_rounding))
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
    fn the_arena_bound_never_counts_padding_a_placement_can_avoid() {
        // One alignment: the top buffer needs no padding after it (0..1 and 16..17).
        assert_eq!(
            arena_lower_bound([(1, 16, lt(0, 1)), (1, 16, lt(0, 1))]),
            17
        );
        // Mixed alignments: 0..16 aligned to 64, 16..24 aligned to 16.
        assert_eq!(
            arena_lower_bound([(16, 64, lt(0, 0)), (8, 16, lt(0, 0))]),
            24
        );
        // Sizes that are multiples of the alignment: the plain peak.
        assert_eq!(
            arena_lower_bound([(32, 16, lt(0, 1)), (48, 16, lt(1, 2)), (16, 16, lt(3, 3))]),
            80
        );
        // Padding between buffers stacked at one step counts.
        assert_eq!(
            arena_lower_bound([(1, 16, lt(0, 0)), (1, 16, lt(0, 0)), (1, 16, lt(0, 0))]),
            33
        );
        // Three 10-byte tensors aligned to 16 live together: two are padded, the top one
        // ends at its last byte.
        let three = [(10, 16, lt(0, 0)), (10, 16, lt(0, 0)), (10, 16, lt(0, 0))];
        assert_eq!(arena_lower_bound(three), 42);
        // The bare peak when the rounding is taken at another step than the peak's.
        assert_eq!(
            arena_lower_bound([(100, 4, lt(0, 0)), (1, 4, lt(1, 1))]),
            100
        );
        // One ending the step before another starts: never live together.
        assert_eq!(
            arena_lower_bound([(32, 16, lt(0, 1)), (48, 16, lt(2, 3))]),
            48
        );
        assert_eq!(arena_lower_bound(Vec::new()), 0);
        assert_eq!(arena_lower_bound([(0, 16, lt(0, 3))]), 0);
    }

    #[test]
    fn the_sweeps_agree_with_summing_every_step() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        for _ in 0..200 {
            let buffers: Vec<(u64, u64, Lifetime)> = (0..next(12))
                .map(|_| {
                    let first = next(8) as u32;
                    let last = first + next(4) as u32;
                    (next(40), 1 << next(4), lt(first, last))
                })
                .collect();
            let live_at = |step: u32| {
                buffers
                    .iter()
                    .filter(move |(_, _, l)| l.first <= step && step <= l.last)
            };
            let bare_peak = (0..12)
                .map(|step| live_at(step).map(|b| b.0).sum::<u64>())
                .max()
                .unwrap();
            assert_eq!(
                lower_bound(buffers.iter().map(|&(size, _, l)| (size, l))),
                bare_peak
            );
            // The busiest step is the first whose live sizes reach the peak.
            let first_busiest = (0..12)
                .find(|&step| live_at(step).map(|b| b.0).sum::<u64>() == bare_peak)
                .unwrap();
            assert_eq!(
                busiest_step(buffers.iter().map(|&(size, _, l)| (size, l))),
                (bare_peak > 0).then_some((first_busiest, bare_peak)),
                "{buffers:?}"
            );
            let placed: Vec<_> = buffers.iter().filter(|b| b.0 > 0).collect();
            let expected = match placed.iter().map(|b| b.1).min() {
                None => 0,
                Some(alignment) => {
                    let top = placed
                        .iter()
                        .map(|b| align_up(b.0, alignment) - b.0)
                        .max()
                        .unwrap();
                    let rounded_peak = (0..12)
                        .map(|step| {
                            live_at(step)
                                .filter(|b| b.0 > 0)
                                .map(|b| align_up(b.0, alignment))
                                .sum::<u64>()
                        })
                        .max()
                        .unwrap();
                    bare_peak.max(rounded_peak.saturating_sub(top))
                }
            };
            assert_eq!(
                arena_lower_bound(buffers.iter().copied()),
                expected,
                "{buffers:?}"
            );
        }
    }

    #[test]
    fn empty_and_zero_size_give_zero() {
        assert_eq!(lower_bound(std::iter::empty()), 0);
        assert_eq!(lower_bound([(0, lt(0, 9))]), 0);
    }
}
