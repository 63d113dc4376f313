//! Variants of greedy packing in lifetime-start order, for traces too large for anything but
//! an O(n log n) pass: the same sweep over time ([`Order::Start`] with [`Fit::Best`] is the
//! plain one), run from another place, in the other direction or choosing its gaps another
//! way, each about as cheap. A portfolio keeps the lowest.
//!
//! # Algorithm
//!
//! Packing in start order is a sweep over time: a buffer takes a gap among the buffers live
//! when it starts. Its height is the lower bound plus the fragmentation at the steps where the
//! live bytes come near their peak; which steps those are, and how fragmented, depends on
//! where the sweep starts and which gaps it takes.
//!
//! - [`SweepVariant::NearestEnd`]: forwards, with [`GapChoice::NearestEnd`]: of the smallest
//!   few gaps that fit, the one whose neighbour ends nearest the buffer's own end, the buffer
//!   put against that neighbour. Buffers that end together then leave one stretch of free
//!   bytes, where best fit scatters small gaps that later buffers do not fit.
//! - [`SweepVariant::Mirrored`]: best fit backwards in time, from the last step to the first
//!   (the lifetimes mirrored: a buffer's last step becomes its first).
//! - [`SweepVariant::AnchoredAtPeak`]: at the busiest step (the first step where the live
//!   bytes peak: [`busiest_step`]) every packing is tightest, and the buffers live there all
//!   overlap one another, so stacking them from offset 0 without gaps (in the order the
//!   [`PeakStacking`] names) packs that step at the lower bound. Every other buffer lives
//!   wholly after the busiest step or wholly before it, so the two sides are packed apart:
//!   the later buffers by a sweep forward from it, the earlier ones by a sweep backward, each
//!   with the stacked buffers kept where they are (as fixed offsets, all live when the sweep
//!   begins) and the [`GapChoice`] given. Neither side meets a buffer of the other, so the two
//!   packings together are a packing of all.
//!
//! Measured (height over the lower bound; generated traces of `testing::generated_instance`,
//! seed 1 unless given, release build; "anchored" stacks by earliest start / latest end):
//!
//! | trace | plain | nearest end | mirrored | anchored, best fit | anchored, nearest end |
//! |---|---|---|---|---|---|
//! | random, 1M | 1.0049 | 1.0017 | 1.0062 | 1.0003, 1.0020 | 1.0000, 1.0004 |
//! | random, 1M, seed 2 | 1.0063 | 1.0017 | 1.0063 | 1.0055, 1.0060 | 1.0016, 1.0017 |
//! | random, 100k | 1.0180 | 1.0079 | 1.0210 | 1.0159, 1.0167 | 1.0072, 1.0064 |
//! | random, 100k, seed 2 | 1.0216 | 1.0094 | 1.0185 | 1.0215, 1.0198 | 1.0093, 1.0074 |
//! | training (compiler), 62k | 1.0007 | 1.0011 | 1.0013 | 1.0005, 1.0008 | 1.0010, 1.0000 |
//! | model-like, 1M | 1.1762 | 1.1592 | 1.2176 | 1.1218, 1.1218 | 1.2007, 1.2007 |
//!
//! No variant is lowest everywhere, so a portfolio runs several. Each takes about as long
//! as the plain sweep (1M random: 0.47 s plain, 0.46-0.78 s the others, anchored with nearest
//! end the slowest).
//!
//! Cost: sorting and copying the buffers, O(n log n), plus the sweeps, whose cost is that of
//! packing in start order ([`crate::greedy`]).

use crate::greedy::{pack_greedy_until, pack_start_order, Fit, GapChoice, Order, Poller, Stopped};
use crate::{Buffer, FixedOffset, Packing};
use memplan_plugin_api::bounds::{align_up, busiest_step};
use memplan_plugin_api::Lifetime;

/// A variant of the start-order sweep (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SweepVariant {
    /// Backwards in time.
    Mirrored,
    /// Forwards in time, each buffer put in the fitting gap, among the smallest few, whose
    /// neighbour ends nearest its own end, against that neighbour (not best fit): buffers
    /// that end together free one stretch of bytes.
    NearestEnd,
    /// From the busiest step outwards, its buffers stacked in the given order, each side's
    /// buffers taking the gap the [`GapChoice`] picks.
    AnchoredAtPeak(PeakStacking, GapChoice),
}

/// The order, bottom first, in which the buffers live at the busiest step are stacked. Ties
/// go to the larger, then to the lower index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeakStacking {
    /// The latest last step at the bottom: after the peak, buffers end from the top down.
    LatestEnd,
    /// The earliest first step at the bottom: before the peak (going backwards), buffers end
    /// from the top down.
    EarliestStart,
    /// The longest lifetime at the bottom.
    Longest,
    /// The largest at the bottom.
    Largest,
}

impl SweepVariant {
    /// Every variant, in the order a portfolio tries them.
    /// The lowest most often first (measured on generated random-lifetime, training and
    /// model-like traces of 62,000 to 1,000,000 buffers).
    pub const ALL: [SweepVariant; 8] = [
        SweepVariant::NearestEnd,
        SweepVariant::AnchoredAtPeak(PeakStacking::EarliestStart, GapChoice::NearestEnd),
        SweepVariant::AnchoredAtPeak(PeakStacking::LatestEnd, GapChoice::NearestEnd),
        SweepVariant::AnchoredAtPeak(PeakStacking::EarliestStart, GapChoice::Smallest),
        SweepVariant::AnchoredAtPeak(PeakStacking::LatestEnd, GapChoice::Smallest),
        SweepVariant::AnchoredAtPeak(PeakStacking::Longest, GapChoice::Smallest),
        SweepVariant::Mirrored,
        SweepVariant::AnchoredAtPeak(PeakStacking::Largest, GapChoice::Smallest),
    ];

    /// What a plan's note calls it.
    pub fn name(self) -> &'static str {
        match self {
            SweepVariant::Mirrored => "greedy best fit by lifetime end, backwards in time",
            SweepVariant::NearestEnd => {
                "start-order sweep, each buffer beside the neighbour that ends nearest its end"
            }
            SweepVariant::AnchoredAtPeak(stacking, choice) => match (stacking, choice) {
                (PeakStacking::LatestEnd, GapChoice::Smallest) => {
                    "start-order sweeps out of the busiest step (its buffers by latest end)"
                }
                (PeakStacking::EarliestStart, GapChoice::Smallest) => {
                    "start-order sweeps out of the busiest step (its buffers by earliest start)"
                }
                (PeakStacking::Longest, GapChoice::Smallest) => {
                    "start-order sweeps out of the busiest step (its buffers by longest lifetime)"
                }
                (PeakStacking::Largest, GapChoice::Smallest) => {
                    "start-order sweeps out of the busiest step (its buffers by size)"
                }
                (PeakStacking::LatestEnd, GapChoice::NearestEnd) => {
                    "start-order sweeps out of the busiest step (its buffers by latest end), \
                     each buffer beside the neighbour ending nearest"
                }
                (PeakStacking::EarliestStart, GapChoice::NearestEnd) => {
                    "start-order sweeps out of the busiest step (its buffers by earliest \
                     start), each buffer beside the neighbour ending nearest"
                }
                (PeakStacking::Longest, GapChoice::NearestEnd) => {
                    "start-order sweeps out of the busiest step (its buffers by longest \
                     lifetime), each buffer beside the neighbour ending nearest"
                }
                (PeakStacking::Largest, GapChoice::NearestEnd) => {
                    "start-order sweeps out of the busiest step (its buffers by size), each \
                     buffer beside the neighbour ending nearest"
                }
            },
        }
    }
}

/// Packs `buffers` with the sweep `variant`, asking `stop` as [`pack_greedy_until`] does.
/// `None` when the variant does not apply: [`SweepVariant::AnchoredAtPeak`] with a buffer
/// that has a fixed offset (the stack at the peak would have to go around it), and
/// [`SweepVariant::NearestEnd`] where a buffer at a fixed offset starts after one it
/// overlaps (the sweep's rule: `greedy::sweep`).
pub fn pack_sweep_variant(
    buffers: &[Buffer],
    variant: SweepVariant,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    match variant {
        SweepVariant::Mirrored => pack_mirrored(buffers, stop).map(Some),
        SweepVariant::NearestEnd => pack_start_order(buffers, GapChoice::NearestEnd, stop),
        SweepVariant::AnchoredAtPeak(stacking, choice) => {
            if buffers.iter().any(|buffer| buffer.fixed_offset.is_some()) {
                return Ok(None);
            }
            pack_anchored_at_peak(buffers, stacking, choice, stop).map(Some)
        }
    }
}

/// Start-order best fit over the buffers with their lifetimes mirrored (last step first).
fn pack_mirrored(buffers: &[Buffer], stop: &dyn Fn() -> bool) -> Result<Packing, Stopped> {
    let Some(last) = buffers.iter().map(|buffer| buffer.lifetime.last).max() else {
        return Ok(Packing::default());
    };
    let mirrored: Vec<Buffer> = buffers.iter().map(|buffer| mirror(buffer, last)).collect();
    pack_greedy_until(&mirrored, Order::Start, Fit::Best, stop)
}

/// `buffer` with its lifetime mirrored around `last` (the latest last step of all buffers).
fn mirror(buffer: &Buffer, last: u32) -> Buffer {
    Buffer {
        lifetime: Lifetime::new(last - buffer.lifetime.last, last - buffer.lifetime.first),
        ..*buffer
    }
}

/// See [`SweepVariant::AnchoredAtPeak`]. No buffer has a fixed offset.
fn pack_anchored_at_peak(
    buffers: &[Buffer],
    stacking: PeakStacking,
    choice: GapChoice,
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    // Each pass over all the buffers counts as work, as in the sides' sweeps, so that `stop`
    // is asked between them too (they take tens of milliseconds each at 2,000,000 buffers:
    // asked only in the sides' sweeps, the stop came up to 0.25 s late), and a small packing
    // still completes.
    let mut poller = Poller::new(stop);
    let mut passed = || poller.spent(buffers.len() as u64);
    let Some((peak, _)) = busiest_step(buffers.iter().map(|buffer| (buffer.size, buffer.lifetime)))
    else {
        return Ok(Packing::default());
    };
    passed()?;
    let live_at_peak =
        |buffer: &Buffer| buffer.lifetime.first <= peak && peak <= buffer.lifetime.last;
    let mut stacked: Vec<usize> = (0..buffers.len())
        .filter(|&index| live_at_peak(&buffers[index]))
        .collect();
    let key = |index: usize| {
        let buffer = &buffers[index];
        let bottom_first = match stacking {
            PeakStacking::LatestEnd => u64::MAX - u64::from(buffer.lifetime.last),
            PeakStacking::EarliestStart => u64::from(buffer.lifetime.first),
            PeakStacking::Longest => {
                u64::MAX - u64::from(buffer.lifetime.last - buffer.lifetime.first)
            }
            PeakStacking::Largest => u64::MAX - buffer.size,
        };
        (bottom_first, u64::MAX - buffer.size, index)
    };
    stacked.sort_unstable_by_key(|&index| key(index));
    passed()?;
    let mut offsets = vec![0; buffers.len()];
    let mut top = 0;
    for &index in &stacked {
        let offset = align_up(top, buffers[index].alignment);
        offsets[index] = offset;
        top = offset + buffers[index].size;
    }
    // Each side: the stacked buffers, kept where they are, and the side's own buffers; the
    // backward side mirrored so that it, too, is packed forwards in time.
    let last = buffers
        .iter()
        .map(|buffer| buffer.lifetime.last)
        .max()
        .unwrap_or(0);
    let mut height = top;
    for forward in [true, false] {
        let own: Vec<usize> = (0..buffers.len())
            .filter(|&index| {
                let lifetime = buffers[index].lifetime;
                if forward {
                    lifetime.first > peak
                } else {
                    lifetime.last < peak
                }
            })
            .collect();
        if own.is_empty() {
            continue;
        }
        passed()?;
        let side: Vec<Buffer> = stacked
            .iter()
            .map(|&index| Buffer {
                fixed_offset: FixedOffset::at(offsets[index]),
                ..buffers[index]
            })
            .chain(own.iter().map(|&index| buffers[index]))
            .map(|buffer| {
                if forward {
                    buffer
                } else {
                    mirror(&buffer, last)
                }
            })
            .collect();
        passed()?;
        let packing = pack_start_order(&side, choice, stop)?
            .expect("the stacked buffers start before the side's own: the sweep applies");
        for (&index, &offset) in own.iter().zip(&packing.offsets[stacked.len()..]) {
            offsets[index] = offset;
        }
        height = height.max(packing.height);
    }
    Ok(Packing {
        offsets,
        height,
        note: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_valid_packing, buffer, generated_instance};
    use crate::{arena_lower_bound, pack_greedy};

    fn never() -> impl Fn() -> bool {
        || false
    }

    #[test]
    fn every_variant_packs_every_generated_shape_validly() {
        for spec in [
            "random:3000:1",
            "random:3000:2",
            "model:2000:1",
            "compiler:3000:1",
            "band:5000",
            "all-live:500:1",
            "cut:300:1",
        ] {
            let buffers = generated_instance(spec).unwrap().unwrap();
            let bound = arena_lower_bound(&buffers);
            for variant in SweepVariant::ALL {
                let packing = pack_sweep_variant(&buffers, variant, &never())
                    .unwrap()
                    .expect("no fixed offsets");
                assert_valid_packing(&buffers, &packing);
                assert!(packing.height >= bound, "{spec} {variant:?}");
            }
        }
    }

    #[test]
    fn the_stack_at_the_busiest_step_has_no_gap() {
        // Steps 0-4; the busiest is 2, where a, b and c (60 bytes) are live; d and e live
        // only before it, f only after.
        let buffers = vec![
            buffer(10, 0, 2),
            buffer(20, 1, 3),
            buffer(30, 2, 4),
            buffer(25, 0, 1),
            buffer(5, 0, 0),
            buffer(5, 4, 4),
        ];
        for stacking in [
            PeakStacking::LatestEnd,
            PeakStacking::EarliestStart,
            PeakStacking::Longest,
            PeakStacking::Largest,
        ] {
            let packing =
                pack_anchored_at_peak(&buffers, stacking, GapChoice::Smallest, &never()).unwrap();
            assert_valid_packing(&buffers, &packing);
            let mut stack: Vec<(u64, u64)> = [0, 1, 2]
                .iter()
                .map(|&index| (packing.offsets[index], buffers[index].size))
                .collect();
            stack.sort_unstable();
            assert_eq!(stack[0].0, 0, "{stacking:?}");
            for pair in stack.windows(2) {
                assert_eq!(pair[0].0 + pair[0].1, pair[1].0, "{stacking:?}");
            }
        }
        // By latest end: c (last 4) at the bottom, then b (3), then a (2).
        let packing = pack_anchored_at_peak(
            &buffers,
            PeakStacking::LatestEnd,
            GapChoice::Smallest,
            &never(),
        )
        .unwrap();
        assert_eq!(&packing.offsets[..3], &[50, 30, 0]);
    }

    #[test]
    fn nearest_end_puts_a_buffer_beside_the_one_ending_with_it() {
        // At step 0, five 10-byte buffers stack up: a (ends at 1), b (5), c (1), d (9), e (9).
        // At step 2 a and c are gone: gaps of 10 bytes at 0 (under b) and at 20 (between b and
        // d). f ends at 9: best fit takes the lowest gap, nearest end the one under d.
        let mut buffers = vec![
            buffer(10, 0, 1),
            buffer(10, 0, 5),
            buffer(10, 0, 1),
            buffer(10, 0, 9),
            buffer(10, 0, 9),
            buffer(10, 2, 9),
        ];
        let best = pack_greedy(&buffers, Order::Start, Fit::Best);
        assert_eq!(best.offsets[5], 0);
        let nearest = pack_sweep_variant(&buffers, SweepVariant::NearestEnd, &never())
            .unwrap()
            .unwrap();
        assert_valid_packing(&buffers, &nearest);
        assert_eq!(&nearest.offsets[..5], &[0, 10, 20, 30, 40]);
        assert_eq!(nearest.offsets[5], 20);
        // Against the nearer neighbour inside a larger gap: g (4 bytes, ends at 5) goes to
        // the top of the gap under b... b ends at 5, so g sits right under it.
        buffers[5] = buffer(4, 2, 5);
        let nearest = pack_sweep_variant(&buffers, SweepVariant::NearestEnd, &never())
            .unwrap()
            .unwrap();
        assert_valid_packing(&buffers, &nearest);
        assert_eq!(nearest.offsets[5], 6, "against b, which starts at 10");
    }

    #[test]
    fn mirrored_is_start_order_on_reversed_time() {
        // Two buffers ending together and a later one: backwards, the long one comes first.
        let buffers = vec![buffer(8, 0, 5), buffer(16, 4, 5), buffer(8, 0, 1)];
        let packing = pack_sweep_variant(&buffers, SweepVariant::Mirrored, &never())
            .unwrap()
            .unwrap();
        assert_valid_packing(&buffers, &packing);
        let reversed: Vec<Buffer> = buffers.iter().map(|b| mirror(b, 5)).collect();
        assert_eq!(
            packing,
            pack_greedy(&reversed, Order::Start, Fit::Best),
            "the same offsets as start order on the mirrored lifetimes"
        );
    }

    #[test]
    fn fixed_offsets_rule_out_only_the_anchored_variants() {
        let mut buffers = vec![buffer(8, 0, 3), buffer(16, 2, 5), buffer(4, 4, 6)];
        buffers[1].fixed_offset = FixedOffset::at(64);
        for variant in SweepVariant::ALL {
            let packed = pack_sweep_variant(&buffers, variant, &never()).unwrap();
            match variant {
                SweepVariant::Mirrored | SweepVariant::NearestEnd => {
                    // The fixed buffer starts at step 2, after buffer 0 it overlaps: mirrored,
                    // it comes first; forwards, the sweep does not apply.
                    let Some(packing) = packed else {
                        assert_eq!(variant, SweepVariant::NearestEnd);
                        continue;
                    };
                    assert_valid_packing(&buffers, &packing);
                    assert_eq!(packing.offsets[1], 64);
                }
                SweepVariant::AnchoredAtPeak(..) => assert_eq!(packed, None),
            }
        }
    }

    #[test]
    fn a_small_packing_completes_even_asked_to_stop() {
        // As the kit's greedy packings do (a planner past its deadline still packs its small
        // arenas): `stop` is first asked after STOP_FIRST_POLL_WORK units of work.
        let buffers = generated_instance("random:2000:1").unwrap().unwrap();
        for variant in SweepVariant::ALL {
            let asked_to_stop = pack_sweep_variant(&buffers, variant, &|| true);
            assert!(matches!(asked_to_stop, Ok(Some(_))), "{variant:?}");
            assert_eq!(
                asked_to_stop,
                pack_sweep_variant(&buffers, variant, &|| false),
                "{variant:?}"
            );
        }
    }

    #[test]
    fn a_stop_request_is_passed_on() {
        let buffers = generated_instance("random:200000:1").unwrap().unwrap();
        for variant in SweepVariant::ALL {
            assert_eq!(
                pack_sweep_variant(&buffers, variant, &|| true),
                Err(Stopped),
                "{variant:?}"
            );
        }
    }
}
