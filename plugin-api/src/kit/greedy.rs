//! Greedy packing in the manner of XLA's heap simulator and TFLite Micro's greedy planner:
//! take the buffers one at a time in a chosen order and put each in a free gap among the
//! buffers already placed that are live at the same time.
//!
//! # Algorithm
//!
//! 1. Buffers with a fixed offset are placed first, as they are.
//! 2. The others are sorted by [`Order`]: `size` (largest first, then the longer lifetime,
//!    then the lower index: TFLM's and XLA's default), `duration` (longest lifetime first,
//!    then larger), or `area` (largest size x duration first, then larger).
//! 3. For each buffer in that order, collect the placed buffers whose lifetimes overlap its
//!    own, sort their byte ranges by offset and sweep them: every stretch of bytes not covered
//!    by any of them is a gap, and the space above the highest one is an unbounded gap. A gap
//!    fits when the buffer's aligned start plus its size stays inside it. [`Fit::First`] takes
//!    the lowest gap that fits (TFLM's greedy planner); [`Fit::Best`] takes the smallest gap
//!    that fits, the lowest of equally small ones, and the unbounded top gap only when no
//!    bounded one fits (XLA's best-fit).
//!
//! # Finding the buffers that overlap in time
//!
//! Scanning every placed buffer for each placement would be quadratic. Instead the placed
//! buffers are indexed over time. Time is counted in *points*, the distinct start steps
//! (m <= n of them); a buffer's *span* is the range of points its lifetime covers, and it is
//! *short* when that span is at most [`SHORT_SPAN`] points (most tensors of a model), *long*
//! otherwise. A buffer with span `[lo, hi]` overlaps exactly:
//!
//! - the placed buffers starting at a point in `[lo, hi]`: read from the *start lists*, one
//!   list per point, laid out in point order in one array. Every point walked begins some
//!   buffer overlapping this one, so the walk costs no more than the buffers overlapping;
//! - the placed short buffers starting in the `SHORT_SPAN - 1` points before `lo` and still
//!   live at `lo`: read from the same lists, right before the first ones in memory, keeping
//!   those that reach `lo`;
//! - the placed long buffers starting before `lo` and live at `lo`: read from a *stabbing
//!   tree*, a segment tree over blocks of a few points where each long buffer is
//!   recorded in the O(log m) nodes covering its blocks; the lists on the path from `lo`'s
//!   block to the root hold every long buffer live in that block, filtered to those live at
//!   `lo`.
//!
//! The lists store each placed buffer's byte range inline, and every list's final length is
//! known before packing, so all lists of an index share one array with each list contiguous:
//! a query for a short buffer reads a few neighbouring cache lines. That locality, not the
//! operation count, is what keeps a million buffers fast.
//!
//! # Complexity
//!
//! With n buffers and k_i buffers overlapping buffer i in time (plus the long buffers live in
//! the same block of points, and the `SHORT_SPAN - 1` points scanned before its start):
//! O(n log n) for the sort, the inserts and the tree walks, plus O(k_i log k_i) per buffer to
//! collect the overlapping placed ones and order them by offset. Mapping steps to points is a
//! table lookup when the steps are dense (at most about 4n of them), a binary search
//! otherwise.
//! For model graphs, where most tensors live a few steps and only a few live long, k_i is
//! small and the whole is O(n log n); a buffer that overlaps all others in time costs O(n log
//! n) on its own (the worst case, every buffer live together, is O(n^2 log n)). Memory: O(n)
//! for the start lists, O(l log m) for the tree of l long buffers.

use std::cmp::Reverse;

use super::{Buffer, Packing};
use crate::bounds::align_up;

/// Buffers spanning at most this many points are short (see the module documentation): in
/// a model, a tensor read by the next op or the one after. Chosen by measurement (the
/// `pack_bench` example of `greedy-bestfit`): 2, 4 and 8 cost about the same at 100,000
/// buffers; at 1,000,000, 2 was fastest, as the backward scan then reads one list.
pub const SHORT_SPAN: u32 = 2;

/// Points per leaf of the long buffers' tree: coarser leaves keep the tree small enough to
/// stay in cache, at the price of filtering out long buffers live elsewhere in the block.
const TREE_BLOCK: u32 = 8;

/// The order in which buffers are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Largest first; then the longer lifetime; then the lower index.
    #[default]
    Size,
    /// Longest lifetime first; then the larger; then the lower index.
    Duration,
    /// Largest size x duration first; then the larger; then the lower index.
    Area,
}

impl Order {
    /// Every order with its option name, in the order they are documented.
    pub const ALL: [(&'static str, Order); 3] = [
        ("size", Order::Size),
        ("duration", Order::Duration),
        ("area", Order::Area),
    ];

    /// The order called `name` (`size`, `duration`, `area`).
    pub fn from_name(name: &str) -> Option<Order> {
        value_named(&Self::ALL, name)
    }

    pub fn name(self) -> &'static str {
        name_of(&Self::ALL, self)
    }
}

/// Which fitting gap a buffer goes into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fit {
    /// The smallest gap that fits; ties go to the lowest offset.
    #[default]
    Best,
    /// The lowest gap that fits.
    First,
}

impl Fit {
    /// Every fit with its option name.
    pub const ALL: [(&'static str, Fit); 2] = [("best", Fit::Best), ("first", Fit::First)];

    /// The fit called `name` (`best`, `first`).
    pub fn from_name(name: &str) -> Option<Fit> {
        value_named(&Self::ALL, name)
    }

    pub fn name(self) -> &'static str {
        name_of(&Self::ALL, self)
    }
}

fn value_named<T: Copy>(choices: &[(&'static str, T)], name: &str) -> Option<T> {
    choices
        .iter()
        .find(|(known, _)| *known == name)
        .map(|&(_, value)| value)
}

fn name_of<T: PartialEq>(choices: &[(&'static str, T)], value: T) -> &'static str {
    choices
        .iter()
        .find(|(_, known)| *known == value)
        .map(|&(name, _)| name)
        .expect("every value is listed in its ALL")
}

/// Packs `buffers` greedily (see the module documentation). Deterministic: the same buffers
/// in the same order always give the same offsets.
pub fn pack_greedy(buffers: &[Buffer], order: Order, fit: Fit) -> Packing {
    let timeline = Timeline::new(buffers);
    let mut heap = Heap::new(buffers, &timeline);
    let mut queue: Vec<Item> = Vec::with_capacity(buffers.len());
    for (index, buffer) in buffers.iter().enumerate() {
        let item = Item::new(index, buffer, timeline.span[index]);
        match buffer.fixed_offset {
            Some(offset) => heap.place(&item, offset),
            None => queue.push(item),
        }
    }
    sort_by_order(&mut queue, order);

    // Byte ranges of the placed buffers overlapping the current one in time; reused.
    let mut occupied: Vec<(u64, u64)> = Vec::new();
    for item in &queue {
        heap.collect_overlapping(item, &mut occupied);
        occupied.sort_unstable_by_key(|&(offset, _)| offset);
        let offset = choose_gap(&occupied, item.size, item.alignment, fit);
        heap.place(item, offset);
    }

    Packing {
        offsets: heap.offsets,
        height: heap.height,
        note: String::new(),
    }
}

/// What placing one buffer needs, gathered so that the packing loop reads one record per
/// buffer in placement order instead of reaching into several arrays at random.
#[derive(Clone, Copy, Debug)]
struct Item {
    size: u64,
    alignment: u64,
    index: u32,
    /// Duration in steps (for the orders).
    duration: u32,
    /// Span in points, inclusive.
    lo: u32,
    hi: u32,
}

impl Item {
    fn new(index: usize, buffer: &Buffer, (lo, hi): (u32, u32)) -> Item {
        Item {
            size: buffer.size,
            alignment: buffer.alignment,
            index: index as u32,
            duration: buffer.lifetime.duration(),
            lo,
            hi,
        }
    }

    fn is_long(&self) -> bool {
        self.hi - self.lo >= SHORT_SPAN
    }
}

/// A placed buffer in a start list: its bytes, its last point and whether it is long.
#[derive(Clone, Copy, Debug, Default)]
struct StartSlot {
    offset: u64,
    end: u64,
    hi: u32,
    long: bool,
}

/// A placed long buffer in the tree: its bytes and its span.
#[derive(Clone, Copy, Debug, Default)]
struct LongSlot {
    offset: u64,
    end: u64,
    lo: u32,
    hi: u32,
}

/// The buffers placed so far, indexed over time.
struct Heap {
    /// Placed buffers by the point they start at.
    starts: SlotLists<StartSlot>,
    /// Placed long buffers by the blocks of points they cover.
    long: StabbingTree,
    offsets: Vec<u64>,
    height: u64,
}

impl Heap {
    fn new(buffers: &[Buffer], timeline: &Timeline) -> Heap {
        let mut per_start = vec![0u32; timeline.points.len()];
        let mut long_blocks = Vec::new();
        for &(lo, hi) in &timeline.span {
            per_start[lo as usize] += 1;
            if hi - lo >= SHORT_SPAN {
                long_blocks.push((lo / TREE_BLOCK, hi / TREE_BLOCK));
            }
        }
        let blocks = timeline.points.len().div_ceil(TREE_BLOCK as usize);
        Heap {
            starts: SlotLists::with_capacities(&per_start),
            long: StabbingTree::new(blocks, &long_blocks),
            offsets: vec![0; buffers.len()],
            height: 0,
        }
    }

    fn place(&mut self, item: &Item, offset: u64) {
        let end = offset + item.size;
        self.offsets[item.index as usize] = offset;
        self.height = self.height.max(end);
        let long = item.is_long();
        let slot = StartSlot {
            offset,
            end,
            hi: item.hi,
            long,
        };
        self.starts.push(item.lo as usize, slot);
        if long {
            let slot = LongSlot {
                offset,
                end,
                lo: item.lo,
                hi: item.hi,
            };
            self.long
                .insert(item.lo / TREE_BLOCK, item.hi / TREE_BLOCK, slot);
        }
    }

    /// Replaces `occupied` with the byte ranges `(offset, end)` of the placed buffers whose
    /// lifetimes overlap `item`'s (the three sources of the module documentation).
    fn collect_overlapping(&self, item: &Item, occupied: &mut Vec<(u64, u64)>) {
        occupied.clear();
        let (lo, hi) = (item.lo, item.hi);
        for point in lo.saturating_sub(SHORT_SPAN - 1)..lo {
            for slot in self.starts.get(point as usize) {
                if !slot.long && slot.hi >= lo {
                    occupied.push((slot.offset, slot.end));
                }
            }
        }
        for point in lo..=hi {
            for slot in self.starts.get(point as usize) {
                occupied.push((slot.offset, slot.end));
            }
        }
        self.long.for_each_live_at(lo / TREE_BLOCK, |slots| {
            for slot in slots {
                if slot.lo < lo && slot.hi >= lo {
                    occupied.push((slot.offset, slot.end));
                }
            }
        });
    }
}

/// Sorts buffers into placement order.
fn sort_by_order(queue: &mut [Item], order: Order) {
    match order {
        Order::Size => {
            queue.sort_unstable_by_key(|i| (Reverse(i.size), Reverse(i.duration), i.index))
        }
        Order::Duration => {
            queue.sort_unstable_by_key(|i| (Reverse(i.duration), Reverse(i.size), i.index))
        }
        Order::Area => queue.sort_unstable_by_key(|i| {
            let area = u128::from(i.size) * u128::from(i.duration);
            (Reverse(area), Reverse(i.size), i.index)
        }),
    }
}

/// The offset for a buffer of `size` bytes among the `occupied` byte ranges (sorted by
/// offset; they may overlap one another).
fn choose_gap(occupied: &[(u64, u64)], size: u64, alignment: u64, fit: Fit) -> u64 {
    // (gap length, offset) of the best bounded gap so far.
    let mut best: Option<(u64, u64)> = None;
    let mut cursor = 0u64;
    for &(start, end) in occupied {
        if start > cursor {
            let candidate = align_up(cursor, alignment);
            if candidate.saturating_add(size) <= start {
                let length = start - cursor;
                match fit {
                    Fit::First => return candidate,
                    Fit::Best => {
                        if best.is_none_or(|(best_length, _)| length < best_length) {
                            best = Some((length, candidate));
                        }
                    }
                }
            }
        }
        cursor = cursor.max(end);
    }
    match best {
        Some((_, offset)) => offset,
        None => align_up(cursor, alignment),
    }
}

/// Lifetimes mapped onto the sorted distinct start steps, so that the stabbing tree has one
/// leaf per start step rather than one per op step.
struct Timeline {
    /// Distinct start steps, ascending.
    points: Vec<u32>,
    /// Per buffer, the range of `points` indices its lifetime covers (inclusive; never empty,
    /// since a buffer's own start is a point).
    span: Vec<(u32, u32)>,
}

impl Timeline {
    fn new(buffers: &[Buffer]) -> Timeline {
        let mut points: Vec<u32> = buffers.iter().map(|b| b.lifetime.first).collect();
        points.sort_unstable();
        points.dedup();
        let (Some(&base), Some(top)) = (
            points.first(),
            buffers.iter().map(|b| b.lifetime.last).max(),
        ) else {
            return Timeline {
                points,
                span: Vec::new(),
            };
        };
        let steps = (top.max(base) - base) as usize + 1;
        let span = if steps <= 4 * buffers.len() + 1024 {
            // Steps are dense enough for a table from step to the last point at or before it:
            // one lookup per end instead of a binary search with its cache misses.
            let mut last_point_at = Vec::with_capacity(steps);
            let mut point = 0usize;
            for step in base..=top.max(base) {
                while point + 1 < points.len() && points[point + 1] <= step {
                    point += 1;
                }
                last_point_at.push(point as u32);
            }
            buffers
                .iter()
                .map(|b| {
                    let lo = last_point_at[(b.lifetime.first - base) as usize];
                    let hi = last_point_at[(b.lifetime.last.max(b.lifetime.first) - base) as usize];
                    (lo, hi)
                })
                .collect()
        } else {
            buffers
                .iter()
                .map(|b| {
                    let lo = points.partition_point(|&p| p < b.lifetime.first);
                    let hi = points.partition_point(|&p| p <= b.lifetime.last) - 1;
                    (lo as u32, hi.max(lo) as u32)
                })
                .collect()
        };
        Timeline { points, span }
    }
}

/// Lists of slots, one per key, whose final lengths are known in advance: each list owns a
/// contiguous run of one flat array (filled from its start), so that reading a list is one
/// sequential read, neighbouring keys are neighbours in memory, and all lists together are
/// one allocation.
struct SlotLists<T> {
    /// Per key: where its run starts and how much of it is filled.
    runs: Vec<(u32, u32)>,
    slots: Vec<T>,
}

impl<T: Copy + Default> SlotLists<T> {
    fn with_capacities(capacities: &[u32]) -> SlotLists<T> {
        let mut total = 0u32;
        let runs = capacities
            .iter()
            .map(|&capacity| {
                let start = total;
                total = total
                    .checked_add(capacity)
                    .expect("fewer than 2^32 list entries");
                (start, 0)
            })
            .collect();
        SlotLists {
            runs,
            slots: vec![T::default(); total as usize],
        }
    }

    fn push(&mut self, key: usize, slot: T) {
        let (start, filled) = &mut self.runs[key];
        self.slots[(*start + *filled) as usize] = slot;
        *filled += 1;
    }

    fn get(&self, key: usize) -> &[T] {
        let (start, filled) = self.runs[key];
        &self.slots[start as usize..(start + filled) as usize]
    }
}

/// A segment tree over `m` leaves answering "which inserted intervals contain leaf p".
///
/// Iterative layout: leaves at `[m, 2m)`, node `i`'s parent is `i / 2`. An interval is stored
/// in the canonical nodes of its decomposition (at most 2 log m); the intervals containing a
/// leaf are exactly those stored on its path to the root, each exactly once. Every interval
/// that will be inserted is known when the tree is built, so each node's list gets exactly
/// the room it needs.
struct StabbingTree {
    leaves: usize,
    nodes: SlotLists<LongSlot>,
}

impl StabbingTree {
    /// A tree over `leaves` leaves with room for the intervals `spans` (inclusive).
    fn new(leaves: usize, spans: &[(u32, u32)]) -> StabbingTree {
        let mut capacities = vec![0u32; 2 * leaves];
        for &(lo, hi) in spans {
            Self::for_each_canonical_node(leaves, lo, hi, |node| capacities[node] += 1);
        }
        StabbingTree {
            leaves,
            nodes: SlotLists::with_capacities(&capacities),
        }
    }

    /// The nodes whose leaf ranges partition `lo..=hi`.
    fn for_each_canonical_node(leaves: usize, lo: u32, hi: u32, mut visit: impl FnMut(usize)) {
        let mut left = lo as usize + leaves;
        let mut right = hi as usize + 1 + leaves;
        while left < right {
            if left & 1 == 1 {
                visit(left);
                left += 1;
            }
            if right & 1 == 1 {
                right -= 1;
                visit(right);
            }
            left >>= 1;
            right >>= 1;
        }
    }

    /// Records `slot` on the leaves `lo..=hi` (an interval given to [`StabbingTree::new`]).
    fn insert(&mut self, lo: u32, hi: u32, slot: LongSlot) {
        let nodes = &mut self.nodes;
        Self::for_each_canonical_node(self.leaves, lo, hi, |node| nodes.push(node, slot));
    }

    /// Calls `visit` with the slots recorded on each node from leaf `leaf` to the root.
    fn for_each_live_at(&self, leaf: u32, mut visit: impl FnMut(&[LongSlot])) {
        let mut node = leaf as usize + self.leaves;
        while node >= 1 {
            visit(self.nodes.get(node));
            node >>= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Lifetime;
    use crate::kit::testing::{assert_valid_packing, buffer};

    /// TFLite Micro's `greedy_medium` test trace: sizes with inclusive lifetimes.
    fn greedy_medium() -> Vec<Buffer> {
        vec![
            buffer(10, 0, 1),
            buffer(20, 1, 2),
            buffer(30, 2, 3),
            buffer(40, 3, 4),
            buffer(50, 0, 1),
        ]
    }

    #[test]
    fn first_fit_reproduces_tflm_greedy_medium() {
        let buffers = greedy_medium();
        let packing = pack_greedy(&buffers, Order::Size, Fit::First);
        assert_eq!(packing.offsets, vec![50, 70, 40, 0, 0]);
        assert_eq!(packing.height, 90);
        assert_valid_packing(&buffers, &packing);
    }

    #[test]
    fn every_order_and_fit_gives_a_valid_packing() {
        let buffers = greedy_medium();
        for (_, order) in Order::ALL {
            for (_, fit) in Fit::ALL {
                let packing = pack_greedy(&buffers, order, fit);
                assert_valid_packing(&buffers, &packing);
                assert!(
                    packing.height >= 80,
                    "{order:?} {fit:?}: below the lower bound"
                );
            }
        }
    }

    #[test]
    fn best_fit_takes_the_smallest_gap_first_fit_the_lowest() {
        // Two long-lived walls leave a 100-byte gap at 0 and a 40-byte gap at 200.
        let buffers = vec![
            Buffer {
                fixed_offset: Some(100),
                ..buffer(100, 0, 9)
            },
            Buffer {
                fixed_offset: Some(240),
                ..buffer(10, 0, 9)
            },
            buffer(30, 2, 3),
        ];
        let best = pack_greedy(&buffers, Order::Size, Fit::Best);
        assert_eq!(best.offsets, vec![100, 240, 200]);
        let first = pack_greedy(&buffers, Order::Size, Fit::First);
        assert_eq!(first.offsets, vec![100, 240, 0]);
        assert_valid_packing(&buffers, &best);
        assert_valid_packing(&buffers, &first);
    }

    #[test]
    fn alignment_is_honoured_inside_gaps() {
        let buffers = vec![
            buffer(3, 0, 5),
            Buffer {
                alignment: 16,
                ..buffer(8, 0, 5)
            },
            Buffer {
                alignment: 8,
                ..buffer(8, 1, 2)
            },
        ];
        for (_, fit) in Fit::ALL {
            let packing = pack_greedy(&buffers, Order::Size, fit);
            assert_valid_packing(&buffers, &packing);
        }
    }

    #[test]
    fn buffers_disjoint_in_time_share_bytes() {
        let buffers = vec![buffer(64, 0, 1), buffer(64, 2, 3), buffer(64, 4, 4)];
        let packing = pack_greedy(&buffers, Order::Size, Fit::Best);
        assert_eq!(packing.offsets, vec![0, 0, 0]);
        assert_eq!(packing.height, 64);
    }

    #[test]
    fn orders_sort_as_documented() {
        let buffers = [buffer(10, 0, 9), buffer(20, 0, 0), buffer(20, 0, 1)];
        let sorted = |order| {
            let mut queue: Vec<Item> = buffers
                .iter()
                .enumerate()
                .map(|(index, b)| Item::new(index, b, (0, 0)))
                .collect();
            sort_by_order(&mut queue, order);
            queue.iter().map(|item| item.index).collect::<Vec<u32>>()
        };
        assert_eq!(sorted(Order::Size), vec![2, 1, 0]);
        assert_eq!(sorted(Order::Duration), vec![0, 2, 1]);
        assert_eq!(sorted(Order::Area), vec![0, 2, 1]);
    }

    /// The same greedy packing with the overlapping buffers found by brute force.
    fn pack_by_brute_force(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u64> {
        let mut queue: Vec<Item> = buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.fixed_offset.is_none())
            .map(|(index, b)| Item::new(index, b, (0, 0)))
            .collect();
        sort_by_order(&mut queue, order);
        let mut placed: Vec<Option<u64>> = buffers.iter().map(|b| b.fixed_offset).collect();
        for item in queue {
            let own = buffers[item.index as usize].lifetime;
            let mut occupied: Vec<(u64, u64)> = (0..buffers.len())
                .filter_map(|j| placed[j].map(|offset| (j, offset)))
                .filter(|&(j, _)| buffers[j].lifetime.overlaps(own))
                .map(|(j, offset)| (offset, offset + buffers[j].size))
                .collect();
            occupied.sort_unstable_by_key(|&(offset, _)| offset);
            placed[item.index as usize] =
                Some(choose_gap(&occupied, item.size, item.alignment, fit));
        }
        placed.into_iter().map(Option::unwrap).collect()
    }

    #[test]
    fn the_time_indexes_find_exactly_the_overlapping_buffers() {
        // Short, long (beyond SHORT_SPAN points), whole-run, fixed and sparse-start buffers.
        let mut buffers: Vec<Buffer> = (0..600u32)
            .map(|i| {
                let first = (i * 37) % 150;
                let duration = match i % 10 {
                    0 => 20 + i % 60,
                    1 => 9 + i % 3,
                    _ => i % 4,
                };
                Buffer {
                    size: u64::from(i * 7919 % 113 + 1),
                    alignment: 1 << (i % 3),
                    lifetime: Lifetime::new(first, first + duration),
                    fixed_offset: None,
                }
            })
            .collect();
        buffers.push(buffer(50, 0, 400));
        buffers.push(Buffer {
            fixed_offset: Some(1000),
            ..buffer(64, 30, 90)
        });
        for (_, order) in Order::ALL {
            for (_, fit) in Fit::ALL {
                let packing = pack_greedy(&buffers, order, fit);
                assert_valid_packing(&buffers, &packing);
                assert_eq!(
                    packing.offsets,
                    pack_by_brute_force(&buffers, order, fit),
                    "{order:?} {fit:?}"
                );
            }
        }
    }

    #[test]
    fn sparse_and_dense_steps_give_the_same_spans() {
        let dense = vec![
            buffer(1, 5, 9),
            buffer(1, 7, 7),
            buffer(1, 9, 12),
            buffer(1, 12, 12),
        ];
        let sparse: Vec<Buffer> = dense
            .iter()
            .map(|b| {
                let (first, last) = (b.lifetime.first, b.lifetime.last);
                buffer(1, first * 100_000, last * 100_000)
            })
            .collect();
        let expected = vec![(0, 2), (1, 1), (2, 3), (3, 3)];
        assert_eq!(Timeline::new(&dense).span, expected);
        assert_eq!(Timeline::new(&sparse).span, expected);
        assert!(Timeline::new(&[]).span.is_empty());
    }

    #[test]
    fn names_round_trip() {
        for (name, order) in Order::ALL {
            assert_eq!(Order::from_name(name), Some(order));
            assert_eq!(order.name(), name);
        }
        for (name, fit) in Fit::ALL {
            assert_eq!(Fit::from_name(name), Some(fit));
            assert_eq!(fit.name(), name);
        }
        assert_eq!(Order::from_name("random"), None);
    }

    #[test]
    fn stabbing_tree_reports_exactly_the_live_intervals() {
        // Brute force over every leaf of a small tree with intervals of all shapes.
        let leaves = 13;
        let mut intervals = Vec::new();
        for lo in 0..leaves as u32 {
            for hi in (lo..leaves as u32).step_by(3) {
                intervals.push((lo, hi));
            }
        }
        let mut tree = StabbingTree::new(leaves, &intervals);
        for (item, &(lo, hi)) in intervals.iter().enumerate() {
            let slot = LongSlot {
                offset: item as u64,
                ..LongSlot::default()
            };
            tree.insert(lo, hi, slot);
        }
        for point in 0..leaves as u32 {
            let mut found = Vec::new();
            tree.for_each_live_at(point, |slots| found.extend(slots.iter().map(|s| s.offset)));
            found.sort_unstable();
            let expected: Vec<u64> = (0..intervals.len() as u64)
                .filter(|&i| intervals[i as usize].0 <= point && point <= intervals[i as usize].1)
                .collect();
            assert_eq!(found, expected, "leaf {point}");
        }
    }

    #[test]
    fn packing_is_deterministic() {
        let buffers: Vec<Buffer> = (0..200u32)
            .map(|i| Buffer {
                size: u64::from(i * 7919 % 97 + 1),
                alignment: 1 << (i % 4),
                lifetime: Lifetime::new(i % 23, i % 23 + i % 5),
                fixed_offset: None,
            })
            .collect();
        let first = pack_greedy(&buffers, Order::Size, Fit::Best);
        assert_valid_packing(&buffers, &first);
        for _ in 0..3 {
            assert_eq!(pack_greedy(&buffers, Order::Size, Fit::Best), first);
        }
    }
}
