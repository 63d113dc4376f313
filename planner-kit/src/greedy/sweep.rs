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
//! Buffers with a fixed offset are placed first by the general packer, so a buffer must also
//! avoid fixed buffers that start *after* it does, and fixed buffers may overlap others in
//! bytes; this sweep serves only packings without them ([`applies`]). An empty buffer takes
//! the offset best fit gives it but no byte, so it enters no list (as in the general packer).
//!
//! # Complexity
//!
//! O(n) to map lifetimes to points and radix sort the buffers, then per buffer one search of
//! the ordered index plus a constant number of inserts and removals: O(n log n) whatever the
//! shape of the trace (a search that meets gaps too misaligned or split by a barrier goes on
//! to the next, one step each). Memory O(n).
//!
//! [`choose_gap`]: super::fit::choose_gap

use std::collections::BTreeMap;

use super::fit::{lowest_start, offset_in_gap};
use super::heap::Placements;
use super::item::Item;
use super::radix::{radix_sort, PlacementKey, RadixRoom};
use super::timeline::Timeline;
use super::{Fit, Order, Poller, Stopped};
use crate::{Buffer, Packing};

/// No buffer: the end of a list.
const NONE: u32 = u32::MAX;

/// Whether the sweep packs `buffers` in `order` with `fit`: start order with best fit, no
/// buffer at a fixed offset (see the module documentation).
pub(super) fn applies(buffers: &[Buffer], order: Order, fit: Fit) -> bool {
    order == Order::Start
        && fit == Fit::Best
        && buffers.len() < NONE as usize
        && buffers.iter().all(|buffer| buffer.fixed_offset.is_none())
}

/// Packs `buffers` (none at a fixed offset) in start order with best fit, no buffer spanning
/// one of the `barriers`; asks `stop` as the general packer does.
pub(super) fn pack_start_best_fit(
    buffers: &[Buffer],
    barriers: &[u64],
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    let count = buffers.len();
    let mut poller = Poller::new(stop);
    let timeline = Timeline::new(buffers);
    let mut items: Vec<Item<u64>> = buffers
        .iter()
        .enumerate()
        .map(|(index, buffer)| Item::new(index, buffer, timeline.span(buffer.lifetime)))
        .collect();
    poller.spent(count as u64)?;
    let key = PlacementKey::for_order(Order::Start, Fit::Best);
    radix_sort(
        &mut items,
        &mut RadixRoom::new(count),
        |item| key.of(item),
        &mut poller,
    )?;
    // From here on a buffer is named by its place in the sorted order (its rank), so that
    // the per-buffer arrays are read about in placement order.
    let ending = EndingAt::new(&items, timeline.points.len());
    poller.spent(count as u64)?;
    let mut live = LiveBytes::new(count);
    let mut placements = Placements::new(count);
    // Points before this one have had their ending buffers freed.
    let mut freed_before = 0u32;
    for (rank, item) in items.iter().enumerate() {
        while freed_before < item.lo {
            let ended = ending.at(freed_before);
            ended.iter().for_each(|&gone| live.free(gone));
            poller.spent(ended.len() as u64)?;
            freed_before += 1;
        }
        let (size, alignment) = (item.size(), item.alignment());
        let (offset, place, tried) = live.best_fit(size, alignment, barriers);
        poller.spent(1 + tried)?;
        placements
            .record(item, offset)
            .expect("every end fits in 64 bits");
        if size > 0 {
            live.insert(rank as u32, offset, offset + size, place);
        }
    }
    Ok(placements.into_packing())
}

/// The ranks of the non-empty buffers by their last point: `at(p)` lists those ending at
/// point `p`, one array for all points.
struct EndingAt {
    /// `points + 1` bounds into `ranks`.
    bounds: Vec<u32>,
    ranks: Vec<u32>,
}

impl EndingAt {
    fn new(items: &[Item<u64>], points: usize) -> EndingAt {
        let mut bounds = vec![0u32; points + 1];
        for item in items.iter().filter(|item| item.size() > 0) {
            bounds[item.hi as usize + 1] += 1;
        }
        for point in 0..points {
            bounds[point + 1] += bounds[point];
        }
        let mut next = bounds.clone();
        let mut ranks = vec![0u32; bounds[points] as usize];
        for (rank, item) in items.iter().enumerate() {
            if item.size() > 0 {
                let slot = &mut next[item.hi as usize];
                ranks[*slot as usize] = rank as u32;
                *slot += 1;
            }
        }
        EndingAt { bounds, ranks }
    }

    fn at(&self, point: u32) -> &[u32] {
        let point = point as usize;
        &self.ranks[self.bounds[point] as usize..self.bounds[point + 1] as usize]
    }
}

/// Where best fit puts a buffer: in the bounded gap below a live buffer, or above them all.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// The gap `start..end` below live buffer `owner`.
    Below {
        owner: u32,
        start: u64,
        end: u64,
    },
    Top,
}

/// The live buffers' bytes: a list in offset order and their gaps by (length, start).
struct LiveBytes {
    /// Per rank, the bytes of the buffer while it is live.
    bytes: Vec<(u64, u64)>,
    /// Per rank, the live neighbours below and above in offset order ([`NONE`]: none).
    below: Vec<u32>,
    above: Vec<u32>,
    /// The live buffer with the highest offset, [`NONE`] when none is live.
    highest: u32,
    /// Every bounded gap, keyed by [`gap_key`], to the live buffer just above it.
    gaps: BTreeMap<u128, u32>,
}

/// The key ordering gaps by length, then start.
#[inline]
fn gap_key(start: u64, end: u64) -> u128 {
    (u128::from(end - start) << 64) | u128::from(start)
}

impl LiveBytes {
    fn new(count: usize) -> LiveBytes {
        LiveBytes {
            bytes: vec![(0, 0); count],
            below: vec![NONE; count],
            above: vec![NONE; count],
            highest: NONE,
            gaps: BTreeMap::new(),
        }
    }

    /// The end of live buffer `rank`, 0 for [`NONE`] (the bottom of memory).
    #[inline]
    fn end_of(&self, rank: u32) -> u64 {
        match rank {
            NONE => 0,
            _ => self.bytes[rank as usize].1,
        }
    }

    /// The offset best fit gives `size` bytes, where that is, and how many gaps it tried.
    #[inline]
    fn best_fit(&self, size: u64, alignment: u64, barriers: &[u64]) -> (u64, Place, u64) {
        let mut tried = 0;
        for (&key, &owner) in self.gaps.range(u128::from(size) << 64..) {
            tried += 1;
            let start = key as u64;
            let end = start + (key >> 64) as u64;
            if let Some(offset) = offset_in_gap(start, end, size, alignment, barriers) {
                return (offset, Place::Below { owner, start, end }, tried);
            }
        }
        let top = self.end_of(self.highest);
        (
            lowest_start(top, size, alignment, barriers),
            Place::Top,
            tried,
        )
    }

    /// Makes buffer `rank` live at `offset..end`, where [`LiveBytes::best_fit`] said.
    #[inline]
    fn insert(&mut self, rank: u32, offset: u64, end: u64, place: Place) {
        self.bytes[rank as usize] = (offset, end);
        match place {
            Place::Below {
                owner,
                start,
                end: gap_end,
            } => {
                self.gaps.remove(&gap_key(start, gap_end));
                let lower = self.below[owner as usize];
                self.link(lower, rank);
                self.link(rank, owner);
                if offset > start {
                    self.gaps.insert(gap_key(start, offset), rank);
                }
                if gap_end > end {
                    self.gaps.insert(gap_key(end, gap_end), owner);
                }
            }
            Place::Top => {
                let lower = self.highest;
                let top = self.end_of(lower);
                self.link(lower, rank);
                self.above[rank as usize] = NONE;
                self.highest = rank;
                if offset > top {
                    self.gaps.insert(gap_key(top, offset), rank);
                }
            }
        }
    }

    /// Frees live buffer `rank`: the gap below it joins the one below its upper neighbour,
    /// or, when it is the highest, the unbounded space above.
    #[inline]
    fn free(&mut self, rank: u32) {
        let (offset, end) = self.bytes[rank as usize];
        let (lower, upper) = (self.below[rank as usize], self.above[rank as usize]);
        let floor = self.end_of(lower);
        if offset > floor {
            self.gaps.remove(&gap_key(floor, offset));
        }
        match upper {
            NONE => {
                self.highest = lower;
                if lower != NONE {
                    self.above[lower as usize] = NONE;
                }
            }
            _ => {
                let ceiling = self.bytes[upper as usize].0;
                if ceiling > end {
                    self.gaps.remove(&gap_key(end, ceiling));
                }
                self.gaps.insert(gap_key(floor, ceiling), upper);
                self.link(lower, upper);
            }
        }
    }

    /// Makes `lower` (possibly [`NONE`]) the neighbour below `upper`, and `upper` the one
    /// above `lower`.
    #[inline]
    fn link(&mut self, lower: u32, upper: u32) {
        self.below[upper as usize] = lower;
        if lower != NONE {
            self.above[lower as usize] = upper;
        }
    }
}
