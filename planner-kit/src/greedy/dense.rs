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
//! - when it spans fewer than [`SPREAD_SPAN`] points (band traces, a model's tensors): in
//!   `spread` of every node whose range overlaps `[lo, hi]` (about `2 (hi - lo) + log m`
//!   nodes), so that `spread[v]` holds exactly the short buffers overlapping `v`'s range;
//! - otherwise in `cover` of the canonical nodes whose ranges partition `[lo, hi]`, and in
//!   `within` of those nodes and of every node on the paths from leaf `lo` and leaf `hi` to
//!   the root (O(log m) nodes whatever the span).
//!
//! So `within[v]` holds (at least) every long buffer with a canonical node in `v`'s subtree,
//! and only buffers overlapping `v`'s range; `cover[v]` only buffers covering all of it. A
//! query for span `[lo, hi]` reads `within` and `spread` of its own canonical nodes and
//! `cover` of every node on the two leaf paths. That finds exactly the buffers overlapping
//! the span: a short one overlaps the span exactly when it overlaps one of its canonical
//! nodes' ranges; a long one and the span overlap exactly when one's canonical node lies in
//! the subtree of the other's (tree nodes are nested or disjoint); the buffer's node below the
//! span's is in the span's `within`, the buffer's node above is on a leaf path (a node partly
//! overlapping the span contains one of its ends). Extra entries read are buffers that
//! overlap the span anyway.
//!
//! Each node's sets keep only the union of their byte ranges ([`ByteUnion`]), as sorted
//! disjoint runs, a new range merged with the runs it overlaps or touches as it is recorded.
//! Merging is sound because a placement reads only which bytes are taken (overlapping or
//! touching ranges leave no gap between them). It is also why `spread` exists: the buffers
//! of one node's `cover` are interleaved in bytes with those of its neighbours', so each set
//! alone is fragmented even where the bytes taken over a stretch of time are one run; the
//! union of everything overlapping a stretch of time (`spread`) is that run.
//!
//! # Complexity
//!
//! A placement reads O(log m) sets and records into O(log m) (a short buffer of span `s`
//! into O(s + log m)); recording into a set of r runs costs O(log r) to find the place plus
//! moving the runs above it. Where the buffers overlapping a placement fill their bytes in
//! few runs (a dense packing, the case this index is for) a placement is O(log n) and
//! packing O(n log n) (band 1M: 0.8 s, where the point lists took 258 s). Where the bytes are
//! fragmented (many runs) a placement reads each run from several sets and the point lists
//! are faster; packing therefore starts with the point lists and switches to this index when
//! they turn out crowded ([`Crowding`]).

use super::heap::Placements;
use super::item::{Bytes, Item, Word};
use super::timeline::StabbingTree;
use super::TimeIndex;
use crate::Packing;

/// The union of byte ranges recorded into one node, as its runs: sorted by offset, disjoint
/// and not touching (a range overlapping or touching others merges with them). A placement
/// reads a few dozen of these sets, so keeping each merged keeps what it reads and sorts to
/// the runs themselves.
///
/// A set of one run, the common case in a dense packing, is kept in place: with a million
/// buffers the tree has millions of sets, and an allocation each cost as much to free as the
/// packing took (0.5 s at the end of a stopped compiler trace of 1M buffers).
#[derive(Default)]
enum ByteUnion<W> {
    #[default]
    Empty,
    One(Bytes<W>),
    Many(Vec<Bytes<W>>),
}

impl<W: Word> ByteUnion<W> {
    #[inline]
    fn runs(&self) -> &[Bytes<W>] {
        match self {
            ByteUnion::Empty => &[],
            ByteUnion::One(run) => std::slice::from_ref(run),
            ByteUnion::Many(runs) => runs,
        }
    }

    /// Adds `bytes`: O(log r) to find its place, plus moving the runs above it (this index
    /// serves packings whose bytes form few runs). Returns the work, in units of the stop
    /// request's polling: one, plus one per eight runs held (moving them costs about that).
    #[inline]
    fn insert(&mut self, bytes: Bytes<W>) -> u64 {
        let runs = match self {
            ByteUnion::Empty => {
                *self = ByteUnion::One(bytes);
                return 1;
            }
            ByteUnion::One(run) => {
                let run = *run;
                if run.end < bytes.offset {
                    *self = ByteUnion::Many(vec![run, bytes]);
                } else if bytes.end < run.offset {
                    *self = ByteUnion::Many(vec![bytes, run]);
                } else {
                    *self = ByteUnion::One(Bytes {
                        offset: bytes.offset.min(run.offset),
                        end: bytes.end.max(run.end),
                    });
                }
                return 1;
            }
            ByteUnion::Many(runs) => runs,
        };
        let moved = 1 + (runs.len() / 8) as u64;
        // Runs ending before `bytes` starts (not touching it) stay below; runs starting after
        // it ends stay above; the ones between merge with it.
        let below = runs.partition_point(|run| run.end < bytes.offset);
        let above = below + runs[below..].partition_point(|run| run.offset <= bytes.end);
        if below == above {
            runs.insert(below, bytes);
            return moved;
        }
        let merged = Bytes {
            offset: bytes.offset.min(runs[below].offset),
            end: bytes.end.max(runs[above - 1].end),
        };
        runs[below] = merged;
        runs.drain(below + 1..above);
        moved
    }
}

/// The buffers placed so far, as the unions of their bytes over a segment tree of points
/// (see the module documentation).
pub(super) struct DenseHeap<W> {
    /// Leaves of the tree: the points, rounded up to a power of two.
    leaves: usize,
    cover: Vec<ByteUnion<W>>,
    within: Vec<ByteUnion<W>>,
    /// Per node, the bytes of every placed buffer spanning fewer than [`SPREAD_SPAN`] points
    /// that overlaps the node's range.
    spread: Vec<ByteUnion<W>>,
    placed: Placements,
    /// Work recording placements since [`TimeIndex::take_work`] last took it.
    work: u64,
}

/// Buffers spanning fewer points than this are recorded in `spread` of every node their span
/// overlaps (about twice their span plus the tree's height), so that a placement finds them
/// in the few sets of its own canonical nodes, each the union of a stretch of time, which in
/// a dense packing is a run or two. Longer buffers go to `cover` and `within`, recorded in
/// O(log m) nodes whatever their span.
const SPREAD_SPAN: u32 = 32;

impl<W: Word> DenseHeap<W> {
    pub(super) fn new(point_count: u32, buffer_count: usize) -> DenseHeap<W> {
        let leaves = (point_count as usize).max(1).next_power_of_two();
        let nodes = || (0..2 * leaves).map(|_| ByteUnion::default()).collect();
        DenseHeap {
            leaves,
            cover: nodes(),
            within: nodes(),
            spread: nodes(),
            work: 0,
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
        let work = &mut self.work;
        if item.hi - item.lo < SPREAD_SPAN {
            let spread = &mut self.spread;
            for_each_overlapping_node(self.leaves, item.lo, item.hi, |node| {
                *work += spread[node].insert(bytes)
            });
            return Some(());
        }
        let (cover, within) = (&mut self.cover, &mut self.within);
        StabbingTree::<W>::for_each_canonical_node(self.leaves, item.lo, item.hi, |node| {
            *work += cover[node].insert(bytes) + within[node].insert(bytes);
        });
        for_each_on_leaf_paths(self.leaves, item.lo, item.hi, |node| {
            *work += within[node].insert(bytes)
        });
        Some(())
    }

    #[inline]
    fn collect_overlapping(&self, item: &Item<W>, occupied: &mut Vec<Bytes<W>>) {
        occupied.clear();
        StabbingTree::<W>::for_each_canonical_node(self.leaves, item.lo, item.hi, |node| {
            occupied.extend_from_slice(self.within[node].runs());
            occupied.extend_from_slice(self.spread[node].runs());
        });
        for_each_on_leaf_paths(self.leaves, item.lo, item.hi, |node| {
            occupied.extend_from_slice(self.cover[node].runs())
        });
    }

    fn take_work(&mut self) -> u64 {
        std::mem::take(&mut self.work)
    }

    fn into_packing(self) -> Packing {
        self.placed.into_packing()
    }
}

/// Calls `visit` with every node of a tree with `leaves` leaves whose range overlaps
/// `lo..=hi`: at each level, from the one holding `lo` to the one holding `hi`.
#[inline]
fn for_each_overlapping_node(leaves: usize, lo: u32, hi: u32, mut visit: impl FnMut(usize)) {
    let (mut first, mut last, mut level_start) = (lo as usize, hi as usize, leaves);
    while level_start >= 1 {
        (level_start + first..=level_start + last).for_each(&mut visit);
        first >>= 1;
        last >>= 1;
        level_start >>= 1;
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
