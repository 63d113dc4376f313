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
//! - [`SweepVariant::AnchoredAtBusyStep`]: the same out of another busy step ([`busy_steps`]:
//!   the busiest steps, each at least [`ANCHOR_SPACING`] of the mean lifetime from the busier
//!   ones). Where many buffers are live at every step the busiest step's stack is tight but
//!   the sweeps out of it leave fragmentation where the live bytes come next nearest the
//!   bound; out of another step they leave it elsewhere, and which is lowest is a matter of
//!   trying (random lifetimes of 10,000-150,000 buffers over 1,000 steps: the lowest of 16
//!   such sweeps was up to 0.013 x the bound below the busiest step's, `random:20000:3`
//!   1.0065 against 1.0196, and the same on some).
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
//! Where thousands of buffers are live at every step (`random:100000`, seeds 1, 2 and 4:
//! about 5,000 live over 1,000 steps) the lowest of these sweeps stays 0.4-0.6 % above the
//! bound. On seed 1 the buffers above it are mostly large (20 of the first 30: 850 bytes
//! and more, of at most 1,000) and start where the live bytes are 2-7 % below the bound: the
//! free bytes are there, but in gaps too small for them. What the sweep out of the busiest
//! step (latest end at the bottom) gave with other choices, seed 1 unless given (measured
//! with a stand-alone model of the sweep that gives the kit's heights, 1.0064 with nearest
//! end and 1.0167 with best fit):
//!
//! - each gap first filled exactly by buffers starting at that step (subset sums): 1.0433;
//! - large buffers in the lowest gap that fits, small ones against the top of the highest
//!   (split at 200, 500 or 800 bytes): 1.037-1.045;
//! - the gap whose two neighbours' last steps bracket the buffer's: 1.0119-1.0129;
//! - nearest end weighed against the bytes the gap wastes: 1.0073-1.0086; among the 4, 64 or
//!   all smallest fitting gaps instead of 16: 1.0090, 1.0063, 1.0066;
//! - out of the least busy step of the middle half of the timeline: 1.009 on all three seeds;
//! - the stack by longest lifetime, by the shorter or the longer of its two sides, or by their
//!   product: 1.0050-1.0101, none lower on all three seeds than the best of latest end and
//!   earliest start;
//! - the buffers that ended above the bound held at the top of the arena (packed among
//!   themselves) and the others swept again, round after round (12 rounds): others end above
//!   it instead, on the forward side more each round (73, then 78-182), on the backward side
//!   1-30, never none;
//! - a buffer that finds no gap below the bound makes one: buffers that started at most 6, 12
//!   or 25 steps before it (seed 1: 6 and 12) move out of the way, each into another gap free
//!   over its lifetime so far (measured with another model of this sweep, whose own heights
//!   are 1.0070, 1.0074 and 1.0099 on seeds 1, 2 and 4): 1.0061-1.0064, 1.0065-1.0067 and
//!   1.0086-1.0088. The bytes above the bound fall by 3-30 %, the heights by 0.0013 at most.
//!
//! Measured later on seed 1 with stand-alone models of the plain forward sweep (best fit,
//! 1.0180 as the kit's) and of the sweep out of the busiest step (1.0159 stacked by earliest
//! start, 1.0167 by latest end, as the kit's). In the plain sweep:
//!
//! - buffers live where the live bytes come within 1 % or 2 % of the bound in the lowest gap
//!   that fits, the others in the highest below the bound: 1.0235 and 1.0282 (best fit for
//!   the first kind: 1.0176);
//! - one of the 3 smallest fitting gaps at random for 10 % or 30 % of the buffers:
//!   1.0168-1.0197 over 12 seeds of the choice;
//! - where a step's buffers go above the bound, that step and the 5 before it packed again,
//!   up to 20 times, each with such random choices: 1.0190.
//!
//! Out of busy steps: two of them at least 300 steps apart, each side of a cut at the least
//! busy step between them packed by its own sweeps, the buffers live at the cut held by the
//! other side: 1.1639-1.1657 (stacks by latest end, earliest start, midpoint). Around the
//! cut, two packings made apart leave gaps the other cannot use.
//!
//! On the portfolio's plans (seeds 1 and 3: 1.0064, 1.0018), each buffer above the bound
//! moved, largest first, into the smallest gap below it over its lifetime, or else into a
//! place whose buffers all move to such gaps (one ejection): 46 of 103 and 14 of 35 moved, all
//! of them directly; no ejection succeeded, and the heights stayed.
//!
//! What the two sides show: a side comes lowest where the stack's order suits it (latest end
//! at the bottom for the forward side, earliest start for the backward one). So stacked, the
//! forward side of seed 4 and the backward side of seed 1 came to the bound, those of seed 2
//! to 1.0027 and 1.0037. The other side, whose buffers leave the stack in an order that does
//! not suit it, then ended 1.0099 (seed 4) and 1.0072 (seed 1) x the bound. One stack serves
//! both sides: on such traces these sweeps lose most of what they lose there.
//!
//! Stacked by earliest midpoint ([`PeakStacking::Midpoint`]), which suits each side in part,
//! the sweep with nearest end came lower than both of the other two on 6 of 11 generated
//! traces and higher on 3: `random:100000:S` (1,000 steps), seeds 1-3, 1.0082, 1.0060,
//! 1.0020 against the lower of the two's 1.0064, 1.0074, 1.0019; `random:100000:S:5000`
//! 1.0049, 1.0134, 1.0160 against 1.0050, 1.0162, 1.0179; `random:100000:S:20000` 1.0194,
//! 1.0266, 1.0336 against 1.0240, 1.0110, 1.0287; `random:1000000:1:1000` and
//! `random:1000000:1:10000` 1.0000 and 1.0068 against 1.0000 and 1.0075. So it is one more
//! variant, after the other two.
//!
//! Cost: sorting and copying the buffers, O(n log n), plus the sweeps, whose cost is that of
//! packing in start order ([`crate::greedy`]).

use crate::greedy::{
    live_bytes_at_points, pack_greedy_until, pack_start_order, Fit, GapChoice, Order, Poller,
    Stopped, Timeline,
};
use crate::threads::join_asking;
use crate::{Buffer, FixedOffset, Packing};
use memplan_plugin_api::bounds::{align_up, busiest_step};
use memplan_plugin_api::Lifetime;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// [`SweepVariant::AnchoredAtPeak`] from another busy step: the one of the given rank
    /// among the busiest steps at least [`ANCHOR_SPACING`] apart ([`busy_steps`]; rank 0 is
    /// the busiest step itself).
    AnchoredAtBusyStep(u8, PeakStacking, GapChoice),
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
    /// The earliest midpoint (first plus last step) at the bottom: between the first two.
    /// After the peak the buffers that end first sit mostly low, before it those that start
    /// last sit mostly high, so each side's sweep finds the bytes freed more together than
    /// on the side that latest end or earliest start does not suit.
    Midpoint,
}

impl SweepVariant {
    /// Every variant, in the order a portfolio tries them.
    /// The lowest most often first (measured on generated random-lifetime, training and
    /// model-like traces of 62,000 to 1,000,000 buffers).
    pub const ALL: [SweepVariant; 9] = [
        SweepVariant::NearestEnd,
        SweepVariant::AnchoredAtPeak(PeakStacking::EarliestStart, GapChoice::NearestEnd),
        SweepVariant::AnchoredAtPeak(PeakStacking::LatestEnd, GapChoice::NearestEnd),
        SweepVariant::AnchoredAtPeak(PeakStacking::Midpoint, GapChoice::NearestEnd),
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
            SweepVariant::AnchoredAtPeak(stacking, choice) => {
                anchored_name(false, stacking, choice)
            }
            SweepVariant::AnchoredAtBusyStep(_, stacking, choice) => {
                anchored_name(true, stacking, choice)
            }
        }
    }
}

/// The name of the sweeps out of a step, the busiest one or `another`, with the buffers live
/// there stacked by `$by` and the gaps chosen by `$choice`.
macro_rules! anchored_name {
    ($another:expr, $choice:expr, $by:literal) => {
        match ($another, $choice) {
            (false, GapChoice::Smallest) => {
                concat!(
                    "start-order sweeps out of the busiest step (its buffers by ",
                    $by,
                    ")"
                )
            }
            (false, GapChoice::NearestEnd) => concat!(
                "start-order sweeps out of the busiest step (its buffers by ",
                $by,
                "), each buffer beside the neighbour ending nearest"
            ),
            (true, GapChoice::Smallest) => {
                concat!(
                    "start-order sweeps out of another busy step (its buffers by ",
                    $by,
                    ")"
                )
            }
            (true, GapChoice::NearestEnd) => concat!(
                "start-order sweeps out of another busy step (its buffers by ",
                $by,
                "), each buffer beside the neighbour ending nearest"
            ),
        }
    };
}

/// See [`anchored_name!`].
fn anchored_name(another: bool, stacking: PeakStacking, choice: GapChoice) -> &'static str {
    match stacking {
        PeakStacking::LatestEnd => anchored_name!(another, choice, "latest end"),
        PeakStacking::EarliestStart => anchored_name!(another, choice, "earliest start"),
        PeakStacking::Longest => anchored_name!(another, choice, "longest lifetime"),
        PeakStacking::Largest => anchored_name!(another, choice, "size"),
        PeakStacking::Midpoint => anchored_name!(another, choice, "earliest midpoint"),
    }
}

/// Busy steps to anchor sweeps at ([`SweepVariant::AnchoredAtBusyStep`]) lie at least this
/// share of the buffers' mean lifetime apart (in start steps): 1/5, so that the buffers live
/// at two of them differ by about a fifth or more, and so do the packings out of them.
/// Where many buffers are live at every step (random lifetimes over 1,000 steps), a sweep's
/// height is the peak plus the fragmentation it has left where the live bytes come next
/// nearest the peak; which anchor leaves the least there, no rule found tells, so a
/// portfolio tries several.
/// Random lifetimes of 50,000-100,000 buffers over 1,000 steps (nine traces), the lowest of
/// 32 sweeps out of busy steps a fifth apart (10 steps there) against three fifths apart:
/// lower on five by up to 0.0011 x the bound, the same on two, higher on two by 0.0002 at
/// most.
pub const ANCHOR_SPACING: u64 = 5;

/// Packs `buffers` with the sweep `variant`, asking `stop` as [`pack_greedy_until`] does.
/// `None` when the variant does not apply: [`SweepVariant::AnchoredAtPeak`] and
/// [`SweepVariant::AnchoredAtBusyStep`] with a buffer that has a fixed offset (the stack at
/// the peak would have to go around it), the latter also with a rank past the busy steps
/// there are ([`busy_steps`]), and [`SweepVariant::NearestEnd`] where a buffer at a fixed
/// offset starts after one it overlaps (the sweep's rule: `greedy::sweep`).
pub fn pack_sweep_variant(
    buffers: &[Buffer],
    variant: SweepVariant,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    pack_variant(buffers, variant, Sides::OneAfterTheOther, stop)
}

/// [`pack_sweep_variant`], the two sides of an anchored variant packed at once: the one with
/// fewer buffers on a second thread (scoped: it ends before this returns), the other on this
/// one. The packing is the same; it comes sooner where a core is free, by the smaller side's
/// share (the sides are seldom of one size: the sweep out of the busiest step of 8 generated
/// random traces of 1,800,000-2,000,000 buffers took 0.54-0.94 s instead of 0.86-1.01 s).
/// `stop` is asked on this thread only, and stops both sides. The other variants are packed
/// on this thread alone.
pub fn pack_sweep_variant_on_two_threads(
    buffers: &[Buffer],
    variant: SweepVariant,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    pack_variant(buffers, variant, Sides::AtOnce, stop)
}

/// How an anchored sweep packs its two sides.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sides {
    OneAfterTheOther,
    /// The side with fewer buffers on a thread of its own.
    AtOnce,
}

fn pack_variant(
    buffers: &[Buffer],
    variant: SweepVariant,
    sides: Sides,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    match variant {
        SweepVariant::Mirrored => pack_mirrored(buffers, stop).map(Some),
        SweepVariant::NearestEnd => pack_start_order(buffers, GapChoice::NearestEnd, stop),
        SweepVariant::AnchoredAtPeak(stacking, choice) => {
            pack_anchored(buffers, Anchor::Busiest, stacking, choice, sides, stop)
        }
        SweepVariant::AnchoredAtBusyStep(rank, stacking, choice) => {
            pack_anchored(buffers, Anchor::Busy(rank), stacking, choice, sides, stop)
        }
    }
}

/// The busiest steps, at most `count`, busiest first (the earlier of equally busy), each at
/// least [`ANCHOR_SPACING`] of the mean lifetime (in start steps) from every busier one in the
/// list: the first is the busiest step. Only start steps count: the live bytes rise nowhere
/// else. O(n log n).
pub fn busy_steps(buffers: &[Buffer], count: usize) -> Vec<u32> {
    match busy_steps_until(buffers, count, &mut || Ok(())) {
        Ok(steps) => steps,
        Err(Stopped) => unreachable!("never asked to stop"),
    }
}

/// [`busy_steps`], calling `passed` after each pass over the buffers or the start steps
/// (tens of milliseconds each at 2,000,000 buffers), which may stop it.
fn busy_steps_until(
    buffers: &[Buffer],
    count: usize,
    passed: &mut dyn FnMut() -> Result<(), Stopped>,
) -> Result<Vec<u32>, Stopped> {
    if buffers.is_empty() || count == 0 {
        return Ok(Vec::new());
    }
    let timeline = Timeline::new(buffers);
    passed()?;
    let spans: Vec<(u32, u32)> = buffers
        .iter()
        .map(|buffer| timeline.span(buffer.lifetime))
        .collect();
    passed()?;
    let sizes = buffers.iter().map(|buffer| buffer.size);
    let live = live_bytes_at_points(timeline.points().len(), spans.iter().copied().zip(sizes));
    let covered: u64 = spans
        .iter()
        .map(|&(first, last)| u64::from(last - first) + 1)
        .sum();
    let spacing = (covered / buffers.len() as u64 / ANCHOR_SPACING).max(1);
    passed()?;
    let mut by_bytes: Vec<u32> = (0..live.len() as u32).collect();
    by_bytes.sort_unstable_by_key(|&point| (std::cmp::Reverse(live[point as usize]), point));
    passed()?;
    let mut chosen: Vec<u32> = Vec::with_capacity(count);
    for point in by_bytes {
        if chosen
            .iter()
            .all(|&other| u64::from(point.abs_diff(other)) >= spacing)
        {
            chosen.push(point);
            if chosen.len() == count {
                break;
            }
        }
    }
    Ok(chosen
        .into_iter()
        .map(|point| timeline.points()[point as usize])
        .collect())
}

/// Where an anchored sweep stacks its buffers.
#[derive(Clone, Copy)]
enum Anchor {
    /// The busiest step ([`busiest_step`]).
    Busiest,
    /// The busy step of this rank ([`busy_steps`]).
    Busy(u8),
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

/// See [`SweepVariant::AnchoredAtPeak`] and [`SweepVariant::AnchoredAtBusyStep`]; `None`
/// where a buffer has a fixed offset or there is no busy step of the rank asked for.
fn pack_anchored(
    buffers: &[Buffer],
    anchor: Anchor,
    stacking: PeakStacking,
    choice: GapChoice,
    sides: Sides,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    // Each pass over all the buffers counts as work, as in the sides' sweeps, so that `stop`
    // is asked between them too (they take tens of milliseconds each at 2,000,000 buffers:
    // asked only in the sides' sweeps, the stop came up to 0.25 s late), and a small packing
    // still completes.
    if buffers.iter().any(|buffer| buffer.fixed_offset.is_some()) {
        return Ok(None);
    }
    let mut poller = Poller::new(stop);
    let mut passed = || poller.spent(buffers.len() as u64);
    let peak = match anchor {
        Anchor::Busiest => {
            busiest_step(buffers.iter().map(|buffer| (buffer.size, buffer.lifetime)))
                .map(|(step, _)| step)
        }
        Anchor::Busy(rank) => busy_steps_until(buffers, usize::from(rank) + 1, &mut passed)?
            .get(usize::from(rank))
            .copied(),
    };
    let Some(peak) = peak else {
        // No buffers (the busiest step), or fewer busy steps than the rank asked for.
        return Ok(matches!(anchor, Anchor::Busiest).then(Packing::default));
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
            PeakStacking::Midpoint => {
                u64::from(buffer.lifetime.first) + u64::from(buffer.lifetime.last)
            }
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
    // backward side mirrored so that it, too, is packed forwards in time. A side's packing
    // (its own buffers' offsets after the stacked ones'), `None` where it has no buffers.
    let last = buffers
        .iter()
        .map(|buffer| buffer.lifetime.last)
        .max()
        .unwrap_or(0);
    let own_of = |forward: bool| -> Vec<usize> {
        (0..buffers.len())
            .filter(|&index| {
                let lifetime = buffers[index].lifetime;
                if forward {
                    lifetime.first > peak
                } else {
                    lifetime.last < peak
                }
            })
            .collect()
    };
    let pack_side = |forward: bool, own: Vec<usize>, stop: &dyn Fn() -> bool| {
        if own.is_empty() {
            return Ok(None);
        }
        let mut poller = Poller::new(stop);
        poller.spent(buffers.len() as u64)?;
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
        poller.spent(buffers.len() as u64)?;
        let packing = pack_start_order(&side, choice, stop)?
            .expect("the stacked buffers start before the side's own: the sweep applies");
        Ok(Some((own, packing)))
    };
    // The later side's packing, then the earlier one's.
    let packed: [Result<Option<SidePacking>, Stopped>; 2] = match sides {
        Sides::OneAfterTheOther => {
            let later = pack_side(true, own_of(true), stop)?;
            [Ok(later), pack_side(false, own_of(false), stop)]
        }
        Sides::AtOnce => {
            // The larger side on this thread, whose memory the caller's work has warmed:
            // on the other, `random:2000000:221:500000`'s larger side made the sweep no
            // sooner than on one thread.
            let (later, earlier) = (own_of(true), own_of(false));
            passed()?;
            let later_here = later.len() >= earlier.len();
            let (here, there) = match later_here {
                true => (later, earlier),
                false => (earlier, later),
            };
            let (packed_here, packed_there) = at_once(
                |stop| pack_side(later_here, here, stop),
                |stop| pack_side(!later_here, there, stop),
                stop,
            );
            match later_here {
                true => [packed_here, packed_there],
                false => [packed_there, packed_here],
            }
        }
    };
    let mut height = top;
    for side in packed {
        if let Some((own, packing)) = side? {
            for (&index, &offset) in own.iter().zip(&packing.offsets[stacked.len()..]) {
                offsets[index] = offset;
            }
            height = height.max(packing.height);
        }
    }
    Ok(Some(Packing {
        offsets,
        height,
        note: String::new(),
    }))
}

/// A side of an anchored sweep packed: its own buffers (indices), and the packing of the
/// stacked buffers and then those.
type SidePacking = (Vec<usize>, Packing);

/// Runs `here` on this thread and `there` on a second one (scoped), each given a stop request
/// of its own: both say stop once `stop` (asked on this thread only, also while it waits for
/// the other) says so, or once `here` failed. The other thread wakes this one when done.
fn at_once<T: Send, E: Send>(
    here: impl FnOnce(&dyn Fn() -> bool) -> Result<T, E>,
    there: impl FnOnce(&dyn Fn() -> bool) -> Result<T, E> + Send,
    stop: &dyn Fn() -> bool,
) -> (Result<T, E>, Result<T, E>) {
    let stopped = AtomicBool::new(false);
    let stop_both = || {
        let asked = stopped.load(Ordering::Relaxed) || stop();
        if asked {
            stopped.store(true, Ordering::Relaxed);
        }
        asked
    };
    let this = std::thread::current();
    std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            let done = there(&|| stopped.load(Ordering::Relaxed));
            this.unpark();
            done
        });
        let done_here = here(&stop_both);
        if done_here.is_err() {
            stopped.store(true, Ordering::Relaxed);
        }
        let done_there = join_asking(other, &|| {
            stop_both();
        });
        (done_here, done_there)
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
            let busy_step_sweeps = [1, 3].into_iter().flat_map(|rank| {
                [
                    PeakStacking::EarliestStart,
                    PeakStacking::LatestEnd,
                    PeakStacking::Midpoint,
                ]
                .map(|stacking| {
                    SweepVariant::AnchoredAtBusyStep(rank, stacking, GapChoice::NearestEnd)
                })
            });
            let ranks = busy_steps(&buffers, 4).len() as u8;
            for variant in SweepVariant::ALL.into_iter().chain(busy_step_sweeps) {
                let packed = pack_sweep_variant(&buffers, variant, &never()).unwrap();
                let packing = match (packed, variant) {
                    // All live at once: one busy step.
                    (None, SweepVariant::AnchoredAtBusyStep(rank, ..)) if rank >= ranks => {
                        assert!(spec.starts_with("all-live"), "{spec} {variant:?}");
                        continue;
                    }
                    (packed, _) => packed.expect("no fixed offsets"),
                };
                assert_valid_packing(&buffers, &packing);
                assert!(packing.height >= bound, "{spec} {variant:?}");
            }
        }
    }

    #[test]
    fn every_variant_has_its_own_name() {
        let stackings = [
            PeakStacking::LatestEnd,
            PeakStacking::EarliestStart,
            PeakStacking::Longest,
            PeakStacking::Largest,
            PeakStacking::Midpoint,
        ];
        let mut names = vec![
            SweepVariant::Mirrored.name(),
            SweepVariant::NearestEnd.name(),
        ];
        for stacking in stackings {
            for choice in [GapChoice::Smallest, GapChoice::NearestEnd] {
                names.push(SweepVariant::AnchoredAtPeak(stacking, choice).name());
                // Every rank shares its name: the note says which kind of sweep won.
                let busy = SweepVariant::AnchoredAtBusyStep(1, stacking, choice).name();
                assert_eq!(
                    busy,
                    SweepVariant::AnchoredAtBusyStep(7, stacking, choice).name()
                );
                names.push(busy);
            }
        }
        let mut distinct = names.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), names.len(), "{names:#?}");
        assert_eq!(
            SweepVariant::AnchoredAtPeak(PeakStacking::EarliestStart, GapChoice::NearestEnd).name(),
            "start-order sweeps out of the busiest step (its buffers by earliest start), each \
             buffer beside the neighbour ending nearest"
        );
        assert_eq!(
            SweepVariant::AnchoredAtBusyStep(2, PeakStacking::Longest, GapChoice::Smallest).name(),
            "start-order sweeps out of another busy step (its buffers by longest lifetime)"
        );
    }

    #[test]
    fn busy_steps_are_the_busiest_apart_from_one_another() {
        // At every step 0-200 a 1-byte buffer starts that lives 50 steps: 50 bytes live
        // from step 49 on. Over the start steps (0-200: the later buffers are cut at 200)
        // the mean lifetime is 43, so busy steps lie at least 8 apart. One-step bumps at 50
        // (100 bytes), 53 (90), 120 (80) and 180 (70).
        let mut buffers: Vec<Buffer> = (0..=200).map(|step| buffer(1, step, step + 49)).collect();
        for (step, size) in [(50, 100), (53, 90), (120, 80), (180, 70)] {
            buffers.push(buffer(size, step, step));
        }
        // 53 is too near 50; then the first step with 50 bytes live at least 8 from the
        // others (49-57 are too near 50), and the next 8 after it.
        assert_eq!(busy_steps(&buffers, 5), vec![50, 120, 180, 58, 66]);
        assert_eq!(busy_steps(&buffers, 2), vec![50, 120]);
        assert_eq!(busy_steps(&buffers, 0), Vec::<u32>::new());
        assert_eq!(busy_steps(&[], 3), Vec::<u32>::new());
        // The first is the busiest step.
        let busiest = busiest_step(buffers.iter().map(|b| (b.size, b.lifetime)));
        assert_eq!(busiest.map(|(step, _)| step), Some(50));
        // Rank 0 is the sweep out of the busiest step; a rank past the busy steps there are
        // does not apply.
        for stacking in [PeakStacking::EarliestStart, PeakStacking::LatestEnd] {
            let choice = GapChoice::NearestEnd;
            let out_of = |variant| pack_sweep_variant(&buffers, variant, &never()).unwrap();
            assert_eq!(
                out_of(SweepVariant::AnchoredAtBusyStep(0, stacking, choice)),
                out_of(SweepVariant::AnchoredAtPeak(stacking, choice))
            );
            let ranks = busy_steps(&buffers, 255).len() as u8;
            assert!(out_of(SweepVariant::AnchoredAtBusyStep(
                ranks - 1,
                stacking,
                choice
            ))
            .is_some());
            assert_eq!(
                out_of(SweepVariant::AnchoredAtBusyStep(ranks, stacking, choice)),
                None
            );
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
            PeakStacking::Midpoint,
        ] {
            let packing = stacked_at_the_busiest_step(&buffers, stacking);
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
        let packing = stacked_at_the_busiest_step(&buffers, PeakStacking::LatestEnd);
        assert_eq!(&packing.offsets[..3], &[50, 30, 0]);
    }

    /// `buffers` packed by the sweeps out of the busiest step, its buffers stacked by
    /// `stacking`, each side's buffers in the smallest gap that fits.
    fn stacked_at_the_busiest_step(buffers: &[Buffer], stacking: PeakStacking) -> Packing {
        pack_anchored(
            buffers,
            Anchor::Busiest,
            stacking,
            GapChoice::Smallest,
            Sides::OneAfterTheOther,
            &never(),
        )
        .unwrap()
        .expect("no fixed offsets")
    }

    #[test]
    fn the_stack_by_earliest_midpoint_is_neither_by_start_nor_by_end() {
        // All three are live at steps 4-5, the busiest (4 the first). By their midpoints
        // (first plus last) y (9), x (10), z (11) from the bottom; by latest end it would be
        // x, z, y, by earliest start x, z, y too.
        let buffers = vec![buffer(10, 0, 10), buffer(20, 4, 5), buffer(30, 3, 8)];
        let stacked = |stacking| stacked_at_the_busiest_step(&buffers, stacking).offsets;
        assert_eq!(stacked(PeakStacking::Midpoint), vec![20, 0, 30]);
        assert_eq!(stacked(PeakStacking::LatestEnd), vec![0, 40, 10]);
        assert_eq!(stacked(PeakStacking::EarliestStart), vec![0, 40, 10]);
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
        let busy_step =
            SweepVariant::AnchoredAtBusyStep(0, PeakStacking::LatestEnd, GapChoice::NearestEnd);
        for variant in SweepVariant::ALL.into_iter().chain([busy_step]) {
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
                SweepVariant::AnchoredAtPeak(..) | SweepVariant::AnchoredAtBusyStep(..) => {
                    assert_eq!(packed, None)
                }
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
    fn two_threads_pack_as_one_does() {
        for spec in [
            "random:20000:3",
            "model:20000:1",
            "compiler:10000:1",
            "all-live:500:1",
        ] {
            let buffers = generated_instance(spec).unwrap().unwrap();
            let another_step =
                SweepVariant::AnchoredAtBusyStep(2, PeakStacking::LatestEnd, GapChoice::NearestEnd);
            for variant in SweepVariant::ALL.into_iter().chain([another_step]) {
                assert_eq!(
                    pack_sweep_variant_on_two_threads(&buffers, variant, &never()),
                    pack_sweep_variant(&buffers, variant, &never()),
                    "{spec} {variant:?}"
                );
            }
        }
    }

    #[test]
    fn at_once_passes_a_stop_request_to_the_other_thread() {
        // The other thread works until told to stop (10 s at most, then it says it was not
        // told); this one is done at once, then asks `stop` while it waits: the third ask
        // says stop, and the other thread hears it.
        let work_until_stopped = |stop: &dyn Fn() -> bool| {
            for _ in 0..10_000 {
                if stop() {
                    return Err("stopped");
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok("never told to stop")
        };
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let stop = || asked.fetch_add(1, Ordering::Relaxed) >= 2;
        let (here, there) = at_once(|_| Ok("done"), work_until_stopped, &stop);
        assert_eq!((here, there), (Ok("done"), Err("stopped")));
        assert!(asked.load(Ordering::Relaxed) >= 3);
        // Where this thread's work fails, the other stops too, though `stop` never says so.
        let (here, there) = at_once(|_| Err("failed"), work_until_stopped, &|| false);
        assert_eq!((here, there), (Err("failed"), Err("stopped")));
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
            assert_eq!(
                pack_sweep_variant_on_two_threads(&buffers, variant, &|| true),
                Err(Stopped),
                "{variant:?} on two threads"
            );
        }
    }
}
