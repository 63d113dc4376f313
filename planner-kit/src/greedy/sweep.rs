//! Greedy packing in lifetime-start order with best fit ([`Order::Start`], [`Fit::Best`]) as
//! one sweep over time, O(n log n) on every trace shape.
//!
//! # Algorithm
//!
//! In start order (earliest first point, then larger, then lower index) every buffer placed
//! before `b` starts no later than `b`, so it overlaps `b` in time exactly when it is still
//! live at `b`'s first point. The buffers a placement must avoid are therefore exactly the
//! *live set* at that point, and packing is a sweep over the points: before placing the
//! buffers starting at point `p`, free the placed buffers whose last point is before `p`
//! (bucketed by last point in advance); then place each in the gap [`choose_gap`] would pick
//! among the live set.
//!
//! Buffers live at the same time never share a byte (each was placed clear of the others
//! live with it), so the live set is a sequence of disjoint byte ranges, kept as a doubly
//! linked list in offset order. Its gaps are the free stretches between neighbours (and below
//! the lowest one, from 0); each gap is named by the live buffer just above it, so freeing a
//! buffer merges the gap below it with the one below its upper neighbour in O(1) list work,
//! and placing a buffer in a gap links it in below that gap's owner. The space above the
//! highest live buffer is the unbounded gap.
//!
//! The gaps are also kept in one ordered index by (length, start): best fit takes the first
//! gap from length `size` up whose [`offset_in_gap`] fits (alignment and barriers can make a
//! long enough gap unfit: it goes on to the next), which is the smallest fitting gap and the
//! lowest of equally small ones, exactly as [`choose_gap`] picks over the union of the
//! overlapping buffers' bytes (adjacent live buffers leave no gap there either); when none
//! fits, the buffer goes to the [`lowest_start`] above the highest live buffer.
//!
//! Buffers with a fixed offset are placed first by the general packer, so a buffer avoids
//! every fixed buffer it overlaps in time, even one starting *after* it does; and fixed
//! buffers may share bytes. The sweep takes a fixed buffer at its first point, before the
//! other buffers starting there, into the gap that holds its bytes (found through the live
//! buffers by offset), which is exact when fixed buffers live together share no byte: a
//! buffer live when a fixed one comes overlaps it in time, so it kept clear of its bytes.
//! Where every fixed buffer starts no later than the buffers it overlaps (a stack at fixed
//! offsets with a sweep from it, as a sweep out of the busiest step packs each side:
//! [`crate::sweep_variants`]), only fixed buffers are live when one comes, and only they are
//! indexed by offset. Otherwise (the critical-step search holds buffers in the middle of the
//! timeline at the offsets its search gave them) a buffer may overlap fixed ones the sweep
//! has not met: best fit then takes their bytes as taken too ([`LiveBytes::best_fit_around`]:
//! the smallest stretch clear of both, the gaps they cut found through every live buffer
//! indexed by offset), and the other gap choices leave the packing to the general packer.
//! Where two fixed buffers live together share bytes, [`pack_start_best_fit`] says so at the
//! first shared byte, and the general packer places them. An empty buffer takes the offset
//! best fit gives it but no byte, so it enters no list (as in the general packer).
//!
//! First fit in start order would take the *lowest* fitting gap: that needs an index by start
//! that knows the longest gap under each of its nodes, which std's ordered maps cannot keep,
//! so [`Fit::First`] stays with the general packer.
//!
//! The same sweep can choose its gaps another way ([`GapChoice`], for the kit's
//! `sweep_variants`): [`GapChoice::NearestEnd`] reads the [`NEAREST_END_CANDIDATES`] smallest
//! fitting gaps in the same index and takes the one whose neighbour (each live buffer's node
//! keeps its last step) ends nearest the buffer's end; without barriers the buffer goes
//! against that neighbour, at the top of the gap when it is the one above.
//!
//! # Complexity
//!
//! O(n) to map lifetimes to points and radix sort the buffers (by first point and size only:
//! the sort is stable and the buffers come in index order), then per buffer one search of the
//! ordered index plus a constant number of inserts and removals: O(n log n) whatever the shape
//! of the trace (a search that meets gaps too misaligned or split by a barrier goes on to the
//! next, one step each; [`GapChoice::NearestEnd`] reads at most a constant number more); a
//! buffer at a fixed offset costs a lookup among the live fixed ones, O(log n). A buffer that
//! overlaps f fixed buffers not yet met costs O(f log f) more, plus the live gaps they cut
//! and those it passes over in the index because they are cut (the buffers near them only:
//! a critical-step search's round on 1,000,000 buffers over sparse steps, with 500-1,300
//! fixed, took 0.43-0.45 s where the general packer's, in the same order, took 0.77-0.91 s).
//! The general packer's obstacle, that the gaps of a union of buffers live at
//! different times cannot be looked up, does not arise: in start order the buffers a
//! placement avoids are all live at one point, and their gaps are the index's. A gap's key
//! is 64 bits where every end provably fits in 32 (the highest barrier or fixed end plus
//! every other size and alignment does), 128 otherwise. Memory O(n): 40 bytes per buffer
//! sorted, 32 per live one.
//!
//! Measured with `pack_bench --shapes --start-only --runs 3` (the whole `greedy-bestfit`
//! call with `{"order":"start"}`, kit passes included, release build, load average about 1
//! on the shared 2-core machine), 1M buffers: band 0.22 s, all-live 0.18 s, random 0.55 s
//! (1.0049 x the lower bound), model-like 0.29 s, compiler 0.53 s; 100k: 9-39 ms. The
//! general packer in the same order and fit (the packing call alone, with one buffer at a
//! fixed offset added, before the sweep took any): random 100k 5.3 s, compiler 100k 17.9 s,
//! model-like 1M 0.58 s, band 1M 0.79 s, all-live 1M 1.57 s.
//!
//! [`choose_gap`]: super::fit::choose_gap

use std::collections::BTreeMap;

use super::fit::{lowest_start, offset_in_gap};
use super::radix::{radix_sort, RadixRoom};
use super::timeline::Timeline;
use super::{Fit, Order, Poller, Stopped};
use crate::{Buffer, Grouped, Packing};

/// No buffer: the end of a list.
const NONE: u32 = u32::MAX;

/// Marks a fixed buffer's slot in [`LiveBytes::slot_of`].
const FIXED: u32 = 1 << 31;

/// Which gap a buffer takes among those that fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GapChoice {
    /// The smallest (best fit), the lowest of equally small ones: [`Fit::Best`].
    Smallest,
    /// Among the 16 smallest that fit, the one whose neighbour below or above
    /// ends nearest in time to the buffer's own end (the first of equally near ones), the
    /// buffer put against that neighbour: buffers that end together then free one stretch of
    /// bytes, not scattered gaps. Measured on random-lifetime traces: 100,000 buffers 1.0079
    /// x the lower bound where best fit gives 1.0178, 1,000,000 1.0017 where it gives 1.0049.
    NearestEnd,
}

/// How many of the smallest fitting gaps [`GapChoice::NearestEnd`] weighs (16 and 64 gave
/// the same heights within 0.02 %, 4 fell behind).
const NEAREST_END_CANDIDATES: u64 = 16;

/// Whether the sweep may pack `buffers` in `order` with `fit`: start order with best fit
/// (whether the buffers at fixed offsets allow it, [`pack_start_best_fit`] tells).
pub(super) fn applies(buffers: &[Buffer], order: Order, fit: Fit) -> bool {
    order == Order::Start && fit == Fit::Best && buffers.len() < FIXED as usize
}

/// Packs `buffers` in start order with best fit, no buffer spanning one of the `barriers`;
/// asks `stop` as the general packer does. `None` where the buffers at fixed offsets do not
/// allow the sweep (see the module documentation): the general packer's work then.
pub(super) fn pack_start_best_fit(
    buffers: &[Buffer],
    barriers: &[u64],
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    pack_start_order(buffers, barriers, GapChoice::Smallest, stop)
}

/// [`pack_start_best_fit`] with each buffer taking the gap `choice` picks.
pub(crate) fn pack_start_order(
    buffers: &[Buffer],
    barriers: &[u64],
    choice: GapChoice,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    let count = buffers.len();
    let mut poller = Poller::new(stop);
    let timeline = Timeline::new(buffers);
    poller.spent(count as u64)?;
    let mut placing: Vec<Placing> = buffers
        .iter()
        .enumerate()
        .map(|(index, buffer)| {
            let (lo, hi) = timeline.span(buffer.lifetime);
            let (alignment_or_offset, fixed) = match buffer.fixed_offset.get() {
                Some(offset) => (offset, true),
                None => (buffer.alignment, false),
            };
            Placing {
                size: buffer.size,
                alignment_or_offset,
                lo,
                hi,
                last_step: buffer.lifetime.last,
                index: index as u32,
                fixed,
            }
        })
        .collect();
    poller.spent(count as u64)?;
    // Stable, and the buffers come in index order: ties in (start, size) stay in index order.
    radix_sort(
        &mut placing,
        &mut RadixRoom::new(count),
        Placing::start_then_larger,
        &mut poller,
    )?;
    // From here on a buffer is named by its place in start order (its rank): every array
    // the sweep keeps per buffer is read about in that order.
    // Fixed buffers starting after buffers they overlap are met late: best fit steers around
    // them (`LateFixed`); the other gap choices leave them to the general packer.
    let late = match fixed_ones_come_first(&placing) {
        true => None,
        false if choice == GapChoice::Smallest => Some(LateFixed::new(&placing)),
        false => return Ok(None),
    };
    poller.spent(count as u64)?;
    let ending = ending_at(&placing, timeline.points.len());
    poller.spent(count as u64)?;
    // Every end stays below the highest barrier or fixed end plus every other size and
    // alignment (a buffer goes into a gap, or at most its alignment above the top or a
    // barrier): where that fits in 32 bits, so does every gap's length and start, and a
    // gap's key is half as wide.
    let highest_fixed = placing
        .iter()
        .filter(|buffer| buffer.fixed)
        .map(|buffer| buffer.alignment_or_offset.saturating_add(buffer.size))
        .max();
    let floor = highest_fixed.max(barriers.last().copied()).unwrap_or(0);
    let ends_below = placing
        .iter()
        .filter(|buffer| !buffer.fixed)
        .fold(floor, |sum, buffer| {
            sum.saturating_add(buffer.size)
                .saturating_add(buffer.alignment_or_offset)
        });
    let placed = match ends_below <= u64::from(u32::MAX) {
        true => {
            place_in_start_order::<u64>(&placing, &ending, barriers, choice, late, &mut poller)?
        }
        false => {
            place_in_start_order::<u128>(&placing, &ending, barriers, choice, late, &mut poller)?
        }
    };
    let Some((offsets_by_rank, height)) = placed else {
        return Ok(None);
    };
    let mut offsets = vec![0; count];
    for (buffer, &offset) in placing.iter().zip(&offsets_by_rank) {
        offsets[buffer.index as usize] = offset;
    }
    Ok(Some(Packing {
        offsets,
        height,
        note: String::new(),
    }))
}

/// Whether every buffer at a fixed offset is live at the first point of every buffer without
/// one that it overlaps in time (it starts no later), as the sweep needs (see the module
/// documentation). `placing` is in start order.
fn fixed_ones_come_first(placing: &[Placing]) -> bool {
    // The last point of the other buffers starting before the current point, and of those
    // starting at it.
    let mut latest_end: Option<u32> = None;
    let mut latest_end_here: Option<u32> = None;
    let mut point = 0;
    for buffer in placing {
        if buffer.lo != point {
            latest_end = latest_end.max(latest_end_here.take());
            point = buffer.lo;
        }
        match buffer.fixed {
            true if latest_end.is_some_and(|end| end >= buffer.lo) => return false,
            true => {}
            false => latest_end_here = latest_end_here.max(Some(buffer.hi)),
        }
    }
    true
}

/// Places the buffers of `placing` (in start order) one after the other among the live ones,
/// freeing those that ended first: their offsets by rank, and the highest end; `None` when
/// two buffers at fixed offsets share bytes while both live.
fn place_in_start_order<K: GapKey>(
    placing: &[Placing],
    ending: &Grouped,
    barriers: &[u64],
    choice: GapChoice,
    mut late: Option<LateFixed>,
    poller: &mut Poller,
) -> Result<Option<(Vec<u64>, u64)>, Stopped> {
    let mut live = LiveBytes::<K>::new(placing.len(), late.is_some());
    let mut blocked = Vec::new();
    // Points before this one have had their ending buffers freed.
    let mut freed_before = 0u32;
    for (rank, buffer) in placing.iter().enumerate() {
        while freed_before < buffer.lo {
            let ended = ending.get(freed_before as usize);
            ended.iter().for_each(|&gone| live.free(gone));
            poller.spent(ended.len() as u64)?;
            freed_before += 1;
        }
        let rank = rank as u32;
        if buffer.fixed {
            let offset = buffer.alignment_or_offset;
            let end = offset + buffer.size;
            let Some(place) = live.place_of_fixed(offset, end) else {
                return Ok(None);
            };
            poller.spent(1)?;
            live.insert(rank, offset, end, buffer.last_step, place);
            live.mark_fixed(rank, offset, end);
            continue;
        }
        let (size, alignment) = (buffer.size, buffer.alignment_or_offset);
        if let Some(late) = late.as_mut() {
            late.blocking(buffer.lo, buffer.hi, &mut blocked);
            if !blocked.is_empty() {
                let (offset, place, tried) =
                    live.best_fit_around(size, alignment, barriers, &blocked);
                poller.spent(1 + tried)?;
                live.insert(rank, offset, offset + size, buffer.last_step, place);
                continue;
            }
        }
        let (offset, place, tried) = match choice {
            GapChoice::Smallest => live.best_fit(size, alignment, barriers),
            GapChoice::NearestEnd => {
                live.nearest_end_fit(size, alignment, barriers, buffer.last_step)
            }
        };
        poller.spent(1 + tried)?;
        live.insert(rank, offset, offset + size, buffer.last_step, place);
    }
    Ok(Some((live.offsets, live.height)))
}

/// What the sweep reads of a buffer, sorted into start order.
#[derive(Clone, Copy, Default)]
struct Placing {
    size: u64,
    /// The alignment; for a buffer at a fixed offset (`fixed`), that offset.
    alignment_or_offset: u64,
    /// Span in points, inclusive.
    lo: u32,
    hi: u32,
    /// The last step of its lifetime: [`GapChoice::NearestEnd`] compares these (points
    /// count only the steps where a buffer starts, so ends after the last start all fall on
    /// one point).
    last_step: u32,
    index: u32,
    fixed: bool,
}

impl Placing {
    /// The sort key of start order but for the index (see [`PlacementKey::StartThenSize`]):
    /// first point, then the buffers at fixed offsets (the general packer places them before
    /// all others), then larger. A stable sort of buffers in index order then puts the lower
    /// index first among equals, and spares the sort the index's bytes.
    ///
    /// [`PlacementKey::StartThenSize`]: super::radix::PlacementKey::StartThenSize
    #[inline]
    fn start_then_larger(&self) -> (u128, u64) {
        let not_fixed = u128::from(!self.fixed);
        (
            (u128::from(self.lo) << 65) | (not_fixed << 64) | u128::from(!self.size),
            0,
        )
    }
}

/// The buffers at fixed offsets in start order, for a sweep that meets some of them after
/// buffers they overlap: a buffer placed before a fixed one starts must keep clear of its
/// bytes where their lifetimes meet, as the general packer (which places fixed buffers
/// first) has it.
struct LateFixed {
    /// (first point, offset, end) of each non-empty fixed buffer, in start order.
    fixed: Vec<(u32, u64, u64)>,
    /// The first of `fixed` not yet met: those before it start at or before the point swept.
    next: usize,
}

impl LateFixed {
    fn new(placing: &[Placing]) -> LateFixed {
        let fixed = placing
            .iter()
            .filter(|buffer| buffer.fixed && buffer.size > 0)
            .map(|buffer| {
                let offset = buffer.alignment_or_offset;
                (buffer.lo, offset, offset + buffer.size)
            })
            .collect();
        LateFixed { fixed, next: 0 }
    }

    /// Sets `blocked` to the bytes of the fixed buffers starting after point `lo` and no
    /// later than `hi` (those a buffer spanning `lo..=hi` overlaps but the sweep has not met),
    /// ascending and merged where they overlap. `lo` never decreases from call to call.
    fn blocking(&mut self, lo: u32, hi: u32, blocked: &mut Vec<(u64, u64)>) {
        blocked.clear();
        while self
            .fixed
            .get(self.next)
            .is_some_and(|&(first, _, _)| first <= lo)
        {
            self.next += 1;
        }
        let ahead = &self.fixed[self.next..];
        // Most buffers end before the next fixed one starts.
        if ahead.first().is_none_or(|&(first, _, _)| first > hi) {
            return;
        }
        let met = ahead.partition_point(|&(first, _, _)| first <= hi);
        blocked.extend(ahead[..met].iter().map(|&(_, offset, end)| (offset, end)));
        blocked.sort_unstable();
        let mut merged = 0;
        for index in 1..blocked.len() {
            let (offset, end) = blocked[index];
            if offset <= blocked[merged].1 {
                blocked[merged].1 = blocked[merged].1.max(end);
            } else {
                merged += 1;
                blocked[merged] = (offset, end);
            }
        }
        blocked.truncate(merged + 1);
    }
}

/// The ranks of the non-empty buffers grouped by their last point: those ending at each point.
fn ending_at(placing: &[Placing], points: usize) -> Grouped {
    let non_empty = placing
        .iter()
        .enumerate()
        .filter(|(_, buffer)| buffer.size > 0)
        .map(|(rank, buffer)| (rank as u32, buffer.hi as usize));
    Grouped::by_key(non_empty, points)
}

/// Where best fit puts a buffer: in the bounded gap below a live buffer, or above them all.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// The gap `start..end` below the live buffer in slot `owner`.
    Below {
        owner: u32,
        start: u64,
        end: u64,
    },
    Top,
}

/// A live buffer: its bytes and the slots of its live neighbours below and above in offset
/// order ([`NONE`]: none). One record, so that reaching a buffer costs one cache miss, not
/// one per field.
#[derive(Clone, Copy)]
struct Node {
    offset: u64,
    end: u64,
    below: u32,
    above: u32,
    /// The buffer's last step.
    last: u32,
}

/// The live buffers' bytes: a list in offset order and their gaps by (length, start).
///
/// A live buffer's [`Node`] sits in a *slot*, taken back when the buffer is freed and handed
/// to the next buffer placed: the nodes the sweep reads are those of the live buffers, few
/// enough to stay in cache, where nodes per buffer would spread over every buffer placed.
struct LiveBytes<K> {
    /// The nodes, by slot: those of the live buffers and free ones.
    nodes: Vec<Node>,
    /// The free slots.
    spare: Vec<u32>,
    /// Per rank, the slot of the buffer while it is live, with [`FIXED`] set for a buffer at
    /// a fixed offset.
    slot_of: Vec<u32>,
    /// The live buffers at fixed offsets by offset, to find where the next one goes; every
    /// live buffer where `every_by_offset` (fixed buffers met late: see [`LateFixed`]).
    by_offset: BTreeMap<u64, u32>,
    every_by_offset: bool,
    /// Per rank, the offset placing chose.
    offsets: Vec<u64>,
    /// The highest end placed.
    height: u64,
    /// The slot of the live buffer with the highest offset, [`NONE`] when none is live.
    highest: u32,
    /// Every bounded gap, by its [`GapKey`], to the slot of the live buffer just above it.
    gaps: BTreeMap<K, u32>,
}

/// A gap's key in the ordered index: its (length, start) as one integer, which compares as
/// that pair.
trait GapKey: Copy + Ord {
    /// The key of the gap `start..end`.
    fn of(start: u64, end: u64) -> Self;
    /// The lowest key of a gap `length` long.
    fn shortest(length: u64) -> Self;
    /// The gap `start..end` a key stands for.
    fn gap(self) -> (u64, u64);
}

impl GapKey for u128 {
    #[inline]
    fn of(start: u64, end: u64) -> u128 {
        (u128::from(end - start) << 64) | u128::from(start)
    }

    #[inline]
    fn shortest(length: u64) -> u128 {
        u128::from(length) << 64
    }

    #[inline]
    fn gap(self) -> (u64, u64) {
        let start = self as u64;
        (start, start + (self >> 64) as u64)
    }
}

/// Where every end fits in 32 bits: twice the keys per node of the tree.
impl GapKey for u64 {
    #[inline]
    fn of(start: u64, end: u64) -> u64 {
        debug_assert!(end <= u64::from(u32::MAX));
        ((end - start) << 32) | start
    }

    #[inline]
    fn shortest(length: u64) -> u64 {
        length << 32
    }

    #[inline]
    fn gap(self) -> (u64, u64) {
        let start = self & u64::from(u32::MAX);
        (start, start + (self >> 32))
    }
}

impl<K: GapKey> LiveBytes<K> {
    fn new(count: usize, every_by_offset: bool) -> LiveBytes<K> {
        LiveBytes {
            nodes: Vec::new(),
            spare: Vec::new(),
            slot_of: vec![NONE; count],
            by_offset: BTreeMap::new(),
            every_by_offset,
            offsets: vec![0; count],
            height: 0,
            highest: NONE,
            gaps: BTreeMap::new(),
        }
    }

    /// The end of the live buffer in `slot`, 0 for [`NONE`] (the bottom of memory).
    #[inline]
    fn end_of(&self, slot: u32) -> u64 {
        match slot {
            NONE => 0,
            _ => self.nodes[slot as usize].end,
        }
    }

    /// The offset best fit gives `size` bytes, where that is, and how many gaps it tried.
    #[inline]
    fn best_fit(&self, size: u64, alignment: u64, barriers: &[u64]) -> (u64, Place, u64) {
        let mut tried = 0;
        for (&key, &owner) in self.gaps.range(K::shortest(size)..) {
            tried += 1;
            let (start, end) = key.gap();
            if let Some(offset) = offset_in_gap(start, end, size, alignment, barriers) {
                return (offset, Place::Below { owner, start, end }, tried);
            }
        }
        (self.above_all(size, alignment, barriers), Place::Top, tried)
    }

    /// [`LiveBytes::best_fit`] where the bytes `blocked` (ascending, disjoint: those of
    /// fixed buffers the buffer overlaps but the sweep has not met) are taken too: the
    /// smallest stretch free of both the live buffers and `blocked` that fits, the lowest of
    /// equally small ones, and above them all only where none fits, as the general packer
    /// picks among the union of the buffers it overlaps. The stretch goes into the live gap
    /// that holds it (`Place`), which is what the index keeps. A gap clear of `blocked` is
    /// such a stretch as it is: the smallest of those comes from the index as in best fit;
    /// the gaps `blocked` cuts are found by offset and cut.
    fn best_fit_around(
        &self,
        size: u64,
        alignment: u64,
        barriers: &[u64],
        blocked: &[(u64, u64)],
    ) -> (u64, Place, u64) {
        // The first blocked range ending after `start`.
        let first_after = |start: u64| blocked.partition_point(|&(_, end)| end <= start);
        let cut = |start: u64, end: u64| {
            let index = first_after(start);
            index < blocked.len() && blocked[index].0 < end
        };
        let mut tried = 0;
        // (length, start, offset, place) of the smallest so far.
        let mut best: Option<(u64, u64, u64, Place)> = None;
        for (&key, &owner) in self.gaps.range(K::shortest(size)..) {
            tried += 1;
            let (start, end) = key.gap();
            if cut(start, end) {
                continue;
            }
            if let Some(offset) = offset_in_gap(start, end, size, alignment, barriers) {
                best = Some((
                    end - start,
                    start,
                    offset,
                    Place::Below { owner, start, end },
                ));
                break;
            }
        }
        // The live gaps `blocked` cuts, each named by the live buffer above it (NONE: the
        // space above them all, `u64::MAX` its end), found downwards from the lowest live
        // buffer above each blocked range.
        let mut cut_gaps: Vec<(u64, u64, u32)> = Vec::new();
        for &(from, to) in blocked {
            let mut upper = self
                .by_offset
                .range(to..)
                .next()
                .map_or(NONE, |(_, &slot)| slot);
            loop {
                tried += 1;
                let lower = match upper {
                    NONE => self.highest,
                    _ => self.nodes[upper as usize].below,
                };
                let start = self.end_of(lower);
                let end = match upper {
                    NONE => u64::MAX,
                    _ => self.nodes[upper as usize].offset,
                };
                if start < end && start < to && end > from {
                    cut_gaps.push((start, end, upper));
                }
                if lower == NONE || self.nodes[lower as usize].offset <= from {
                    break;
                }
                upper = lower;
            }
        }
        cut_gaps.sort_unstable();
        cut_gaps.dedup();
        // The lowest start of the space above every live buffer and blocked range.
        let mut unbounded = self.end_of(self.highest);
        for &(start, end, owner) in &cut_gaps {
            let place = match owner {
                NONE => Place::Top,
                _ => Place::Below { owner, start, end },
            };
            // The stretches of `start..end` between the blocked ranges.
            let mut from = start;
            for &(taken, taken_end) in &blocked[first_after(start)..] {
                if taken >= end {
                    break;
                }
                if taken > from {
                    let fits = offset_in_gap(from, taken, size, alignment, barriers);
                    if let Some(offset) = fits.filter(|_| {
                        best.is_none_or(|(length, low, _, _)| (taken - from, from) < (length, low))
                    }) {
                        best = Some((taken - from, from, offset, place));
                    }
                }
                from = from.max(taken_end);
            }
            match owner {
                NONE => unbounded = unbounded.max(from),
                _ if from < end => {
                    let fits = offset_in_gap(from, end, size, alignment, barriers);
                    if let Some(offset) = fits.filter(|_| {
                        best.is_none_or(|(length, low, _, _)| (end - from, from) < (length, low))
                    }) {
                        best = Some((end - from, from, offset, place));
                    }
                }
                _ => {}
            }
        }
        match best {
            Some((_, _, offset, place)) => (offset, place, tried),
            None => (
                lowest_start(unbounded, size, alignment, barriers),
                Place::Top,
                tried,
            ),
        }
    }

    /// Where `size` bytes go when no bounded gap fits: the lowest start above the highest
    /// live buffer.
    #[inline]
    fn above_all(&self, size: u64, alignment: u64, barriers: &[u64]) -> u64 {
        lowest_start(self.end_of(self.highest), size, alignment, barriers)
    }

    /// The offset [`GapChoice::NearestEnd`] gives `size` bytes ending at step `last`, where
    /// that is, and how many gaps it tried. Without barriers the buffer goes against the
    /// nearer-ending neighbour (the top of the gap when that is the one above); with them, at
    /// the gap's lowest fitting offset.
    #[inline]
    fn nearest_end_fit(
        &self,
        size: u64,
        alignment: u64,
        barriers: &[u64],
        last: u32,
    ) -> (u64, Place, u64) {
        let distance = |slot: u32| match slot {
            NONE => u32::MAX,
            _ => self.nodes[slot as usize].last.abs_diff(last),
        };
        let mut tried = 0;
        let mut fitting = 0;
        // (distance, offset, place) of the nearest so far.
        let mut nearest: Option<(u32, u64, Place)> = None;
        for (&key, &owner) in self.gaps.range(K::shortest(size)..) {
            tried += 1;
            let (start, end) = key.gap();
            let Some(lowest) = offset_in_gap(start, end, size, alignment, barriers) else {
                continue;
            };
            let (below, above) = (distance(self.nodes[owner as usize].below), distance(owner));
            let offset = match above < below && barriers.is_empty() {
                // Aligned down from the top: at or above `lowest`, which fits.
                true => (end - size) / alignment * alignment,
                false => lowest,
            };
            if nearest.is_none_or(|(best, _, _)| below.min(above) < best) {
                nearest = Some((below.min(above), offset, Place::Below { owner, start, end }));
            }
            fitting += 1;
            if fitting == NEAREST_END_CANDIDATES {
                break;
            }
        }
        match nearest {
            Some((_, offset, place)) => (offset, place, tried),
            None => (self.above_all(size, alignment, barriers), Place::Top, tried),
        }
    }

    /// Where the bytes `offset..end` of a buffer at a fixed offset lie among the live
    /// buffers, all at fixed offsets too (see the module documentation); `None` when they
    /// share bytes with one.
    fn place_of_fixed(&self, offset: u64, end: u64) -> Option<Place> {
        if offset == end {
            return Some(Place::Top);
        }
        let lower = match self.by_offset.range(..=offset).next_back() {
            Some((_, &slot)) => slot,
            None => NONE,
        };
        let upper = match lower {
            NONE => self.by_offset.values().next().copied().unwrap_or(NONE),
            _ => self.nodes[lower as usize].above,
        };
        let start = self.end_of(lower);
        if start > offset {
            return None;
        }
        match upper {
            NONE => Some(Place::Top),
            _ => {
                let gap_end = self.nodes[upper as usize].offset;
                (end <= gap_end).then_some(Place::Below {
                    owner: upper,
                    start,
                    end: gap_end,
                })
            }
        }
    }

    /// Records that buffer `rank`, just placed at `offset..end`, has a fixed offset.
    fn mark_fixed(&mut self, rank: u32, offset: u64, end: u64) {
        if offset < end {
            let slot = self.slot_of[rank as usize];
            self.by_offset.insert(offset, slot);
            self.slot_of[rank as usize] = slot | FIXED;
        }
    }

    /// Places buffer `rank` at `offset..end`, where [`LiveBytes::best_fit`] said; live
    /// unless it is empty (it takes no byte, so it splits no gap).
    #[inline]
    fn insert(&mut self, rank: u32, offset: u64, end: u64, last: u32, place: Place) {
        self.offsets[rank as usize] = offset;
        self.height = self.height.max(end);
        if end == offset {
            return;
        }
        let node = Node {
            offset,
            end,
            below: NONE,
            above: NONE,
            last,
        };
        let slot = match self.spare.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.slot_of[rank as usize] = slot;
        if self.every_by_offset {
            self.by_offset.insert(offset, slot);
        }
        match place {
            Place::Below {
                owner,
                start,
                end: gap_end,
            } => {
                self.gaps.remove(&K::of(start, gap_end));
                let lower = self.nodes[owner as usize].below;
                self.link(lower, slot);
                self.link(slot, owner);
                if offset > start {
                    self.gaps.insert(K::of(start, offset), slot);
                }
                if gap_end > end {
                    self.gaps.insert(K::of(end, gap_end), owner);
                }
            }
            Place::Top => {
                let lower = self.highest;
                let top = self.end_of(lower);
                self.link(lower, slot);
                self.highest = slot;
                if offset > top {
                    self.gaps.insert(K::of(top, offset), slot);
                }
            }
        }
    }

    /// Frees live buffer `rank` (placed, not empty): the gap below it joins the one below its upper neighbour,
    /// or, when it is the highest, the unbounded space above.
    #[inline]
    fn free(&mut self, rank: u32) {
        let mut slot = self.slot_of[rank as usize];
        if slot & FIXED != 0 || self.every_by_offset {
            slot &= !FIXED;
            self.by_offset.remove(&self.nodes[slot as usize].offset);
        }
        self.spare.push(slot);
        let Node {
            offset,
            end,
            below: lower,
            above: upper,
            ..
        } = self.nodes[slot as usize];
        let floor = self.end_of(lower);
        if offset > floor {
            self.gaps.remove(&K::of(floor, offset));
        }
        match upper {
            NONE => {
                self.highest = lower;
                if lower != NONE {
                    self.nodes[lower as usize].above = NONE;
                }
            }
            _ => {
                let ceiling = self.nodes[upper as usize].offset;
                if ceiling > end {
                    self.gaps.remove(&K::of(end, ceiling));
                }
                self.gaps.insert(K::of(floor, ceiling), upper);
                self.link(lower, upper);
            }
        }
    }

    /// Makes `lower` (possibly [`NONE`]) the neighbour below `upper`, and `upper` the one
    /// above `lower`.
    #[inline]
    fn link(&mut self, lower: u32, upper: u32) {
        self.nodes[upper as usize].below = lower;
        if lower != NONE {
            self.nodes[lower as usize].above = upper;
        }
    }
}
