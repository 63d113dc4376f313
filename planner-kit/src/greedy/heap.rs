//! The buffers placed so far, indexed over time ([`Heap`]): short-lived buffers in lists per
//! start step, long-lived ones in a stabbing tree.

use std::ops::RangeInclusive;

use super::item::{Bytes, Item, LongSlot, Slot, Word};
use super::timeline::{Lists, StabbingTree};
use super::{Poller, Stopped, TimeIndex};
use crate::Packing;

/// Points per leaf of the long buffers' tree: coarser leaves keep the tree small enough to
/// stay in cache, at the price of filtering out long buffers live elsewhere in the block.
const TREE_BLOCK: u32 = 8;

/// Levels of the tree, from the leaves up, that warming reads: the levels above hold few
/// nodes, read by every placement, and stay in cache.
const WARM_TREE_LEVELS: usize = 3;

/// The room a [`Heap`] needs, counted buffer by buffer.
pub(super) struct HeapRoom {
    /// Per point, the buffers its list records.
    pub(super) per_point: Vec<u32>,
    /// The blocks each long buffer covers.
    pub(super) long_blocks: Vec<(u32, u32)>,
}

impl HeapRoom {
    pub(super) fn new(point_count: u32) -> HeapRoom {
        HeapRoom {
            per_point: vec![0; point_count as usize],
            long_blocks: Vec::new(),
        }
    }

    #[inline]
    pub(super) fn count<W: Word>(&mut self, item: &Item<W>) {
        for point in item.listed_at() {
            self.per_point[point as usize] += 1;
        }
        if !item.is_short() {
            self.long_blocks
                .push((item.lo / TREE_BLOCK, item.hi / TREE_BLOCK));
        }
    }
}

/// The buffers placed so far, indexed over time.
pub(super) struct Heap<W> {
    /// Per point: the placed short buffers covering it and long ones starting at it.
    pub(super) points: Lists<Bytes<W>>,
    /// Placed long buffers by the blocks of points they cover.
    pub(super) long: StabbingTree<W>,
    placed: Placements,
}

impl<W: Word> Heap<W> {
    /// An empty heap with `room`, for `buffer_count` buffers; counts the steps of its
    /// making (each one pass over the buffers or an allocation for them) with `poller`.
    pub(super) fn new(
        room: HeapRoom,
        buffer_count: usize,
        poller: &mut Poller,
    ) -> Result<Heap<W>, Stopped> {
        let leaves = room.per_point.len().div_ceil(TREE_BLOCK as usize);
        let long = StabbingTree::new(leaves, &room.long_blocks);
        poller.spent(room.long_blocks.len() as u64)?;
        let points = Lists::with_capacities(room.per_point);
        poller.spent(buffer_count as u64)?;
        Ok(Heap {
            long,
            points,
            placed: Placements::new(buffer_count),
        })
    }

    /// Reads the lists placements in `points` read (the point lists, and the lowest levels
    /// of the tree) from first to last, so that the placements about to read them at random
    /// find them in cache (see [`WARM_FROM`]); each only if it has at most `budget` entries,
    /// so that warming never costs more than the placements it serves.
    #[inline]
    pub(super) fn warm(&self, points: RangeInclusive<u32>, budget: usize) {
        let (first, last) = (*points.start() as usize, *points.end() as usize);
        self.points.warm(first..=last, budget);
        let leaves = self.long.leaves;
        let (first, last) = (
            leaves + first / TREE_BLOCK as usize,
            leaves + last / TREE_BLOCK as usize,
        );
        for level in 0..WARM_TREE_LEVELS {
            self.long.nodes.warm(first >> level..=last >> level, budget);
        }
    }
}

impl<W: Word> TimeIndex<W> for Heap<W> {
    /// Places `item` at `offset`; `None` when its end does not fit in `W`.
    #[inline]
    fn place(&mut self, item: &Item<W>, offset: u64) -> Option<()> {
        let Some(bytes) = self.placed.record(item, offset)? else {
            return Some(());
        };
        for point in item.listed_at() {
            self.points.push(point as usize, bytes);
        }
        if !item.is_short() {
            let slot = LongSlot {
                bytes,
                lo: item.lo,
                hi: item.hi,
            };
            self.long
                .insert(item.lo / TREE_BLOCK, item.hi / TREE_BLOCK, slot);
        }
        Some(())
    }

    /// Replaces `occupied` with the byte ranges of the placed buffers whose lifetimes overlap
    /// `item`'s (the two sources of the module documentation).
    #[inline]
    fn collect_overlapping(&self, item: &Item<W>, occupied: &mut Vec<Bytes<W>>) {
        occupied.clear();
        let (lo, hi) = (item.lo, item.hi);
        let lists = self.points.runs(lo as usize..=hi as usize);
        if lists.len() > occupied.capacity() {
            // A buffer live over much of the run meets most others, and the next such buffer
            // more: room for every entry at once, rather than growing query after query to a
            // million entries (fresh memory costs more than the copying).
            let all = self.points.slots.len();
            occupied.reserve_exact(if lists.len() > all / 8 {
                all
            } else {
                lists.len()
            });
        }
        occupied.extend(lists.iter().filter(|bytes| !bytes.is_free()));
        self.long.for_each_live_at(lo / TREE_BLOCK, |slots| {
            occupied.extend(
                slots
                    .iter()
                    .filter(|slot| slot.lo < lo && slot.hi >= lo && !slot.is_free())
                    .map(|slot| slot.bytes),
            );
        });
    }

    fn into_packing(self) -> Packing {
        self.placed.into_packing()
    }
}

/// The offsets chosen so far and the height they reach: what every time index keeps.
pub(super) struct Placements {
    offsets: Vec<u64>,
    height: u64,
}

impl Placements {
    pub(super) fn new(buffer_count: usize) -> Placements {
        Placements {
            offsets: vec![0; buffer_count],
            height: 0,
        }
    }

    /// Records `item` at `offset`: the bytes to index, `Some(None)` for an empty buffer (it
    /// takes no byte, so overlaps nothing: indexing it would only split gaps), `None` when
    /// its end does not fit in `W`.
    #[inline]
    pub(super) fn record<W: Word>(
        &mut self,
        item: &Item<W>,
        offset: u64,
    ) -> Option<Option<Bytes<W>>> {
        let end = offset + item.size();
        if !W::fits(end) {
            return None;
        }
        self.offsets[item.index as usize] = offset;
        self.height = self.height.max(end);
        Some((item.size() > 0).then(|| Bytes::new(offset, end)))
    }

    pub(super) fn into_packing(self) -> Packing {
        Packing {
            offsets: self.offsets,
            height: self.height,
            note: String::new(),
        }
    }
}
