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
    } else if alignment.is_power_of_two() {
        // A mask, not a division (tens of cycles, at every buffer of a packer's loop). The
        // same value: where `size + alignment - 1` overflows, the multiple is 2^64, which
        // saturates as below.
        size.checked_add(alignment - 1)
            .map_or(u64::MAX, |end| end & !(alignment - 1))
    } else {
        size.div_ceil(alignment).saturating_mul(alignment)
    }
}

/// Peak of the summed `(size, lifetime)` pairs over steps. O(n log n) (see [`busiest_step`]).
/// Sizes are taken as given (round them first if alignment padding should count).
pub fn lower_bound<I>(buffers: I) -> u64
where
    I: IntoIterator<Item = (u64, Lifetime)>,
{
    busiest_step(buffers).map_or(0, |(_, peak)| peak)
}

/// The first step at which the summed `(size, lifetime)` pairs peak, and the peak ([`None`]
/// when no size is above 0): where every packing is at its tightest, so a packer that places
/// the buffers live there first can stack them without a gap. O(n log n): see [`peaks`].
pub fn busiest_step<I>(buffers: I) -> Option<(u32, u64)>
where
    I: IntoIterator<Item = (u64, Lifetime)>,
{
    let swept: Vec<SweptBuffer> = buffers
        .into_iter()
        .filter(|&(size, _)| size > 0)
        .map(|(size, lifetime)| SweptBuffer {
            size,
            padded: size,
            lifetime,
        })
        .collect();
    peaks(&swept).map(|peaks| (peaks.bare_step, peaks.bare))
}

/// The lower bound of one arena holding `(size, alignment, lifetime)` buffers (see the module
/// docs): never above the height of any valid placement. O(n log n): see [`peaks`].
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
    let mut top_rounding = 0;
    let swept: Vec<SweptBuffer> = buffers
        .map(|(size, _, lifetime)| {
            let padded = align_up(size, alignment);
            top_rounding = top_rounding.max(padded - size);
            SweptBuffer {
                size,
                padded,
                lifetime,
            }
        })
        .collect();
    peaks(&swept).map_or(0, |peaks| {
        peaks.bare.max(peaks.padded.saturating_sub(top_rounding))
    })
}

/// A buffer as the sweeps over steps see it: its size, that size rounded up (or the same),
/// and its lifetime.
struct SweptBuffer {
    size: u64,
    padded: u64,
    lifetime: Lifetime,
}

/// The peaks over steps of the live sizes (`bare`, reached first at `bare_step`) and of the
/// live rounded sizes (`padded`).
struct Peaks {
    bare: u64,
    bare_step: u32,
    padded: u64,
}

/// Steps spanned per buffer up to which [`peaks`] sums per step rather than sorting: with a
/// counter of 8 bytes a step, at most 64 bytes a buffer.
const DENSE_STEPS_PER_BUFFER: usize = 8;

/// The [`Peaks`] of `buffers` (all of size above 0; [`None`] when there are none).
///
/// Where the steps they span are not many more than the buffers (at most
/// [`DENSE_STEPS_PER_BUFFER`] per buffer, and the rounded sizes sum within 64 bits), the live
/// sizes per step are summed from a difference per step ([`summed_peak`]), once for the sizes
/// and, where some size is rounded, once more for the rounded ones: O(n + steps), five times
/// quicker than sorting at 1,000,000 buffers, which every large plan pays for (the bound, and
/// each sweep out of the busiest step). Elsewhere (steps far apart) the buffers' starts and
/// ends are sorted and swept: O(n log n). Sorting 2,000,000 buffers over 10,000,000 steps
/// took 262 ms, summed per step 134-139 ms (`examples/one_pass_bench` of the exact planner,
/// which measures it because the portfolio waits for the bound beside the one-pass packing
/// when time is short); both sums in one pass, 16 bytes a step, were allowed only half as
/// many steps.
fn peaks(buffers: &[SweptBuffer]) -> Option<Peaks> {
    let low = buffers.iter().map(|buffer| buffer.lifetime.first).min()?;
    let high = buffers.iter().map(|buffer| buffer.lifetime.last).max()?;
    let span = (high - low) as usize + 1;
    let (total, rounded) = buffers
        .iter()
        .fold((Some(0u64), false), |(total, rounded), buffer| {
            (
                total.and_then(|total| total.checked_add(buffer.padded)),
                rounded || buffer.padded != buffer.size,
            )
        });
    if span > DENSE_STEPS_PER_BUFFER * buffers.len() + 1024 || total.is_none() {
        return Some(sorted_peaks(buffers));
    }
    let mut change = vec![0u64; span + 1];
    let steps = (low, high);
    let (bare, bare_step) = summed_peak(buffers, steps, &mut change, |buffer| buffer.size);
    let padded = match rounded {
        true => summed_peak(buffers, steps, &mut change, |buffer| buffer.padded).0,
        false => bare,
    };
    Some(Peaks {
        bare,
        bare_step,
        padded,
    })
}

/// The peak over the steps `low..=high` of the live sizes `size` gives, and the first step
/// that reaches it, summed per step in `change` (a counter per step, one more than the steps):
/// per step, what starts there less what ended the step before. No sum of live sizes passes
/// the total (within 64 bits, see [`peaks`]), so the wrapping sums are exact.
fn summed_peak(
    buffers: &[SweptBuffer],
    (low, high): (u32, u32),
    change: &mut [u64],
    size: impl Fn(&SweptBuffer) -> u64,
) -> (u64, u32) {
    change.fill(0);
    for buffer in buffers {
        let (first, after) = (
            (buffer.lifetime.first - low) as usize,
            (buffer.lifetime.last - low) as usize + 1,
        );
        change[first] = change[first].wrapping_add(size(buffer));
        change[after] = change[after].wrapping_sub(size(buffer));
    }
    let (mut live, mut peak, mut peak_step) = (0u64, 0u64, low);
    for (step, &step_change) in (low..=high).zip(change.iter()) {
        live = live.wrapping_add(step_change);
        if live > peak {
            peak = live;
            peak_step = step;
        }
    }
    (peak, peak_step)
}

/// [`peaks`] by sorting the buffers' starts and ends: the step times two, plus one for a
/// start, so that sorted by it the ends at a step come before its starts (a buffer whose last
/// step is `s` ends at `s + 1`) and the buffers live at a step are all counted together. The
/// sums saturate (rounded sizes summing past 64 bits come here).
fn sorted_peaks(buffers: &[SweptBuffer]) -> Peaks {
    // (key, size, rounded size): 24 bytes, so that the sweep reads them in order.
    let mut events = Vec::with_capacity(2 * buffers.len());
    for buffer in buffers {
        let sizes = (buffer.size, buffer.padded);
        events.push(((u64::from(buffer.lifetime.first) << 1) | 1, sizes));
        events.push(((u64::from(buffer.lifetime.last) + 1) << 1, sizes));
    }
    events.sort_unstable_by_key(|&(key, _)| key);
    let (mut bare, mut padded) = (0u64, 0u64);
    let mut peaks = Peaks {
        bare: 0,
        bare_step: 0,
        padded: 0,
    };
    for (key, (size, padded_size)) in events {
        if key & 1 == 0 {
            bare = bare.saturating_sub(size);
            padded = padded.saturating_sub(padded_size);
        } else {
            bare = bare.saturating_add(size);
            padded = padded.saturating_add(padded_size);
            if bare > peaks.bare {
                peaks.bare = bare;
                peaks.bare_step = (key >> 1) as u32;
            }
            peaks.padded = peaks.padded.max(padded);
        }
    }
    peaks
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
    fn align_up_by_mask_gives_what_the_division_gives_up_to_saturation() {
        let by_division =
            |size: u64, alignment: u64| size.div_ceil(alignment).saturating_mul(alignment);
        for shift in 1..64 {
            let alignment = 1u64 << shift;
            for size in [
                0,
                1,
                alignment - 1,
                alignment,
                alignment + 1,
                12_345_678_901,
                u64::MAX - alignment,
                u64::MAX - alignment + 1,
                u64::MAX - alignment + 2,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(
                    align_up(size, alignment),
                    by_division(size, alignment),
                    "{size} to {alignment}"
                );
            }
        }
        // Not a power of two (outside the contract): still rounded up.
        assert_eq!(align_up(10, 12), 12);
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

    /// Numbers below the bound given, from a xorshift generator seeded with `state`.
    fn below(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        }
    }

    #[test]
    fn the_sweeps_agree_with_summing_every_step() {
        let mut next = below(0x2545_f491_4f6c_dd1d);
        // Steps 0..12 are summed per step; spread 100,000 apart they are sorted instead.
        for round in 0..400 {
            let buffers: Vec<(u64, u64, Lifetime)> = (0..next(12))
                .map(|_| {
                    let first = next(8) as u32;
                    let last = first + next(4) as u32;
                    (next(40), 1 << next(4), lt(first, last))
                })
                .collect();
            let spread = if round % 2 == 0 { 1 } else { 100_000 };
            let spread_buffers: Vec<(u64, u64, Lifetime)> = buffers
                .iter()
                .map(|&(size, alignment, l)| {
                    (size, alignment, lt(l.first * spread, l.last * spread))
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
                lower_bound(spread_buffers.iter().map(|&(size, _, l)| (size, l))),
                bare_peak
            );
            // The busiest step is the first whose live sizes reach the peak.
            let first_busiest = (0..12)
                .find(|&step| live_at(step).map(|b| b.0).sum::<u64>() == bare_peak)
                .unwrap();
            assert_eq!(
                busiest_step(spread_buffers.iter().map(|&(size, _, l)| (size, l))),
                (bare_peak > 0).then_some((first_busiest * spread, bare_peak)),
                "{spread_buffers:?}"
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
                arena_lower_bound(spread_buffers.iter().copied()),
                expected,
                "{spread_buffers:?}"
            );
        }
    }

    #[test]
    fn sums_per_step_over_up_to_8_steps_a_buffer_agree_with_the_sorted_sweep() {
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        // 2,000 buffers over about 12,000 steps (6 a buffer), sizes as they are, then rounded
        // to 16 bytes.
        for rounding in [1, 16] {
            let swept: Vec<SweptBuffer> = (0..2000)
                .map(|_| {
                    let first = next(12_000) as u32;
                    let size = 1 + next(1000);
                    SweptBuffer {
                        size,
                        padded: align_up(size, rounding),
                        lifetime: lt(first, first + next(40) as u32),
                    }
                })
                .collect();
            let (summed, sorted) = (peaks(&swept).unwrap(), sorted_peaks(&swept));
            assert_eq!(
                (summed.bare, summed.bare_step, summed.padded),
                (sorted.bare, sorted.bare_step, sorted.padded),
                "rounded to {rounding}"
            );
            assert_eq!(summed.padded > summed.bare, rounding > 1);
        }
    }

    #[test]
    fn sizes_summing_past_64_bits_saturate_instead_of_wrapping() {
        let half = u64::MAX / 2 + 1;
        let buffers = [(half, lt(0, 1)), (half, lt(1, 2)), (7, lt(3, 3))];
        assert_eq!(busiest_step(buffers), Some((1, u64::MAX)));
        assert_eq!(
            arena_lower_bound(buffers.map(|(size, l)| (size, 1, l))),
            u64::MAX
        );
    }

    #[test]
    fn empty_and_zero_size_give_zero() {
        assert_eq!(lower_bound(std::iter::empty()), 0);
        assert_eq!(lower_bound([(0, lt(0, 9))]), 0);
    }
}
