//! The time index for traces where many buffers live at once ([`DenseHeap`]).
//!
//! The point lists of [`Heap`] hand a placement every placed buffer overlapping it in time,
//! one entry each: where thousands live at once, each placement reads thousands of entries
//! and packing turns quadratic (160,000 buffers all live at one step: 37 s). But a placement
//! needs only the *union* of the bytes those buffers occupy, and in a packing where many
//! buffers live together that union is a few runs of bytes, not thousands of buffers.
//!
//! # Algorithm
//!
//! A segment tree over the points (a power of two of leaves, so every node stands for a
//! contiguous range of points). A placed buffer with span `[lo, hi]` is recorded
//!
//! - in `cover` of the canonical nodes whose ranges partition `[lo, hi]`, and
//! - in `within` of those nodes and of every node on the paths from leaf `lo` and leaf `hi`
//!   to the root.
//!
//! So `within[v]` holds (at least) every buffer with a canonical node in `v`'s subtree, and
//! only buffers overlapping `v`'s range; `cover[v]` only buffers covering all of it. A query
//! for span `[lo, hi]` reads `within` of its own canonical nodes and `cover` of every node on
//! the two leaf paths. That finds exactly the buffers overlapping the span: a buffer and the
//! span overlap exactly when one's canonical node lies in the subtree of the other's (tree
//! nodes are nested or disjoint); the buffer's node below the span's is in the span's
//! `within`, the buffer's node above is on a leaf path (a node partly overlapping the span
//! contains one of its ends). Extra entries read are buffers that overlap the span anyway.
//!
//! Each node's sets keep only the union of their byte ranges ([`ByteUnion`]): a new range is
//! appended, and when the appended ranges outnumber the merged ones they are sorted and
//! merged again. Merging is sound because a placement reads only which bytes are taken
//! (overlapping or touching ranges leave no gap between them).
//!
//! # Complexity
//!
//! A placement reads O(log m) sets and records into O(log m); merging costs O(log r)
//! amortised per range recorded into a set of r ranges. Where the buffers overlapping a
//! placement fill their bytes in few runs (a dense packing, the case this index is for) a
//! placement is O(log n) and packing O(n log^2 n), where the point lists give O(n^2 log n).
//! Where the bytes are fragmented (many runs) a placement reads each run from several sets
//! and the point lists are faster; packing therefore starts with the point lists and
//! switches to this index when they turn out crowded ([`Crowding`]).

use super::heap::Placements;
use super::item::{Bytes, Item, Word};
use super::timeline::StabbingTree;
use super::TimeIndex;
use crate::Packing;

/// The union of byte ranges recorded into one node: merged ranges sorted by offset, then
/// ranges appended since the last merge. Reading it gives ranges that may overlap, as
/// [`choose_gap`] accepts.
#[derive(Default)]
struct ByteUnion<W> {
    ranges: Vec<Bytes<W>>,
    /// How many of `ranges`, from the start, are merged.
    merged: usize,
}

impl<W: Word> ByteUnion<W> {
    /// Ranges appended beyond this many since the last merge (and beyond as many as are
    /// merged) trigger a merge: small sets are cheaper read than merged.
    const MERGE_FROM: usize = 8;

    #[inline]
    fn insert(&mut self, bytes: Bytes<W>) {
        self.ranges.push(bytes);
        if self.ranges.len() - self.merged > self.merged.max(Self::MERGE_FROM) {
            self.merge();
        }
    }

    /// Sorts the ranges and merges the overlapping and touching ones.
    fn merge(&mut self) {
        self.ranges.sort_unstable_by_key(|bytes| bytes.offset);
        let mut kept = 0;
        for index in 0..self.ranges.len() {
            let next = self.ranges[index];
            if kept > 0 && next.offset <= self.ranges[kept - 1].end {
                let last = &mut self.ranges[kept - 1];
                last.end = last.end.max(next.end);
            } else {
                self.ranges[kept] = next;
                kept += 1;
            }
        }
        self.ranges.truncate(kept);
        self.merged = kept;
    }
}

/// The buffers placed so far, as the unions of their bytes over a segment tree of points
/// (see the module documentation).
pub(super) struct DenseHeap<W> {
    /// Leaves of the tree: the points, rounded up to a power of two.
    leaves: usize,
    cover: Vec<ByteUnion<W>>,
    within: Vec<ByteUnion<W>>,
    placed: Placements,
}

impl<W: Word> DenseHeap<W> {
    pub(super) fn new(point_count: u32, buffer_count: usize) -> DenseHeap<W> {
        let leaves = (point_count as usize).max(1).next_power_of_two();
        let nodes = || (0..2 * leaves).map(|_| ByteUnion::default()).collect();
        DenseHeap {
            leaves,
            cover: nodes(),
            within: nodes(),
            placed: Placements::new(buffer_count),
        }
    }
}

impl<W: Word> TimeIndex<W> for DenseHeap<W> {
    #[inline]
    fn place(&mut self, item: &Item<W>, offset: u64) -> Option<()> {
        let Some(bytes) = self.placed.record(item, offset)? else {
            return Some(());
        };
        let (cover, within) = (&mut self.cover, &mut self.within);
        StabbingTree::<W>::for_each_canonical_node(self.leaves, item.lo, item.hi, |node| {
            cover[node].insert(bytes);
            within[node].insert(bytes);
        });
        for_each_on_leaf_paths(self.leaves, item.lo, item.hi, |node| {
            within[node].insert(bytes)
        });
        Some(())
    }

    #[inline]
    fn collect_overlapping(&self, item: &Item<W>, occupied: &mut Vec<Bytes<W>>) {
        occupied.clear();
        StabbingTree::<W>::for_each_canonical_node(self.leaves, item.lo, item.hi, |node| {
            occupied.extend_from_slice(&self.within[node].ranges)
        });
        for_each_on_leaf_paths(self.leaves, item.lo, item.hi, |node| {
            occupied.extend_from_slice(&self.cover[node].ranges)
        });
    }

    fn into_packing(self) -> Packing {
        self.placed.into_packing()
    }
}

/// Calls `visit` with every node on the paths from leaves `lo` and `hi` to the root of a
/// tree with `leaves` leaves, the nodes the two paths share once.
#[inline]
fn for_each_on_leaf_paths(leaves: usize, lo: u32, hi: u32, mut visit: impl FnMut(usize)) {
    let (mut left, mut right) = (lo as usize + leaves, hi as usize + leaves);
    while left != right {
        visit(left);
        visit(right);
        left >>= 1;
        right >>= 1;
    }
    while left >= 1 {
        visit(left);
        left >>= 1;
    }
}
