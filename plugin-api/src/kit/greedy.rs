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
//! Scanning every placed buffer for each placement would be quadratic. Instead two indexes
//! over time hold the placed buffers, and a buffer with lifetime `[first, last]` overlaps
//! exactly the placed buffers that are live at step `first` or that start in `(first, last]`:
//!
//! - a *stabbing tree*: a segment tree over the distinct start steps where each placed
//!   buffer is recorded in the O(log m) nodes that cover its lifetime; the buffers live at a
//!   step are the union of the lists on the path from that step's leaf to the root;
//! - a *start index*: per start step, the placed buffers beginning there; every start step
//!   walked in `(first, last]` begins some buffer that overlaps this one, so the walk costs
//!   no more than the buffers overlapping in time.
//!
//! Both store each placed buffer's byte range inline, so a query reads its lists and nothing
//! else.
//!
//! # Complexity
//!
//! With n buffers, m <= n distinct start steps and k_i placed buffers overlapping buffer i in
//! time: O(n log n) for the sort, the inserts and the index queries, plus O(k_i log k_i) per
//! buffer to order the overlapping ones by offset. For model graphs, where most tensors live
//! a few steps and only a handful live long, k_i is small and the whole is O(n log n); a
//! buffer that overlaps all others in time costs O(n log n) on its own (the worst case, every
//! buffer live together, is O(n^2 log n)). Memory is O(n log m) for the stabbing tree in the
//! worst case, O(n) for short lifetimes.

use std::cmp::Reverse;

use super::{Buffer, Packing};
use crate::bounds::align_up;

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
        Self::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|&(_, order)| order)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, order)| *order == self)
            .map(|&(name, _)| name)
            .expect("every order is listed in ALL")
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
        Self::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|&(_, fit)| fit)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, fit)| *fit == self)
            .map(|&(name, _)| name)
            .expect("every fit is listed in ALL")
    }
}

/// Packs `buffers` greedily (see the module documentation). Deterministic: the same buffers
/// in the same order always give the same offsets.
pub fn pack_greedy(buffers: &[Buffer], order: Order, fit: Fit) -> Packing {
    let mut heap = Heap::new(buffers);
    for (index, buffer) in buffers.iter().enumerate() {
        if let Some(offset) = buffer.fixed_offset {
            heap.place(index, offset);
        }
    }

    let mut sequence: Vec<u32> = (0..buffers.len() as u32)
        .filter(|&index| buffers[index as usize].fixed_offset.is_none())
        .collect();
    sort_by_order(&mut sequence, buffers, order);

    // Byte ranges of the placed buffers overlapping the current one in time; reused.
    let mut occupied: Vec<(u64, u64)> = Vec::new();
    for &index in &sequence {
        let index = index as usize;
        heap.collect_overlapping(index, &mut occupied);
        occupied.sort_unstable();
        let offset = choose_gap(&occupied, &buffers[index], fit);
        heap.place(index, offset);
    }

    Packing {
        offsets: heap.offsets,
        height: heap.height,
        note: String::new(),
    }
}

/// The buffers placed so far, indexed over time.
struct Heap<'a> {
    buffers: &'a [Buffer],
    timeline: Timeline,
    /// Placed buffers by the start points their lifetimes cover.
    stabbing: StabbingTree,
    /// Placed buffers by the start point they begin at.
    starts: SlotLists,
    offsets: Vec<u64>,
    height: u64,
}

impl<'a> Heap<'a> {
    fn new(buffers: &'a [Buffer]) -> Heap<'a> {
        let timeline = Timeline::new(buffers);
        let mut per_start = vec![0u32; timeline.points.len()];
        for &(lo, _) in &timeline.span {
            per_start[lo as usize] += 1;
        }
        Heap {
            buffers,
            stabbing: StabbingTree::new(timeline.points.len(), &timeline.span),
            starts: SlotLists::with_capacities(&per_start),
            timeline,
            offsets: vec![0; buffers.len()],
            height: 0,
        }
    }

    fn place(&mut self, index: usize, offset: u64) {
        let slot = (offset, offset + self.buffers[index].size);
        self.offsets[index] = offset;
        self.height = self.height.max(slot.1);
        let (lo, hi) = self.timeline.span[index];
        self.stabbing.insert(lo, hi, slot);
        self.starts.push(lo as usize, slot);
    }

    /// Replaces `occupied` with the byte ranges `(offset, end)` of the placed buffers whose
    /// lifetimes overlap buffer `index`'s: those live at its start, and those starting later
    /// but no later than its end. Every start point walked in `(lo, hi]` is the start of some
    /// buffer overlapping this one, so the walk is bounded by the buffers overlapping in time.
    fn collect_overlapping(&self, index: usize, occupied: &mut Vec<(u64, u64)>) {
        occupied.clear();
        let (lo, hi) = self.timeline.span[index];
        // Most lists are empty or hold a slot or two: skip the copy call for those.
        let mut take = |slots: &[(u64, u64)]| match slots {
            [] => {}
            [slot] => occupied.push(*slot),
            _ => occupied.extend_from_slice(slots),
        };
        self.stabbing.for_each_live_at(lo, &mut take);
        for point in lo as usize + 1..=hi as usize {
            take(self.starts.get(point));
        }
    }
}

/// Sorts buffer indices into placement order.
fn sort_by_order(sequence: &mut [u32], buffers: &[Buffer], order: Order) {
    let duration = |index: u32| buffers[index as usize].lifetime.duration();
    let size = |index: u32| buffers[index as usize].size;
    match order {
        Order::Size => {
            sequence.sort_unstable_by_key(|&i| (Reverse(size(i)), Reverse(duration(i)), i))
        }
        Order::Duration => {
            sequence.sort_unstable_by_key(|&i| (Reverse(duration(i)), Reverse(size(i)), i))
        }
        Order::Area => sequence.sort_unstable_by_key(|&i| {
            let area = u128::from(size(i)) * u128::from(duration(i));
            (Reverse(area), Reverse(size(i)), i)
        }),
    }
}

/// The offset for `buffer` among the `occupied` byte ranges (sorted by offset; they may
/// overlap one another).
fn choose_gap(occupied: &[(u64, u64)], buffer: &Buffer, fit: Fit) -> u64 {
    // (gap length, offset) of the best bounded gap so far.
    let mut best: Option<(u64, u64)> = None;
    let mut cursor = 0u64;
    for &(start, end) in occupied {
        if start > cursor {
            let candidate = align_up(cursor, buffer.alignment);
            if candidate.saturating_add(buffer.size) <= start {
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
        None => align_up(cursor, buffer.alignment),
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
        let span = buffers
            .iter()
            .map(|buffer| {
                let lo = points.partition_point(|&p| p < buffer.lifetime.first);
                let hi = points.partition_point(|&p| p <= buffer.lifetime.last) - 1;
                (lo as u32, hi.max(lo) as u32)
            })
            .collect();
        Timeline { points, span }
    }
}

/// Lists of byte ranges `(offset, end)`, one per key, whose final lengths are known in
/// advance: each list owns a contiguous run of one flat array (filled from its start), so that
/// reading a list is one sequential read and all lists together are one allocation.
struct SlotLists {
    /// Per key: where its run starts and how much of it is filled.
    runs: Vec<(u32, u32)>,
    slots: Vec<(u64, u64)>,
}

impl SlotLists {
    fn with_capacities(capacities: &[u32]) -> SlotLists {
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
            slots: vec![(0, 0); total as usize],
        }
    }

    fn push(&mut self, key: usize, slot: (u64, u64)) {
        let (start, filled) = &mut self.runs[key];
        self.slots[(*start + *filled) as usize] = slot;
        *filled += 1;
    }

    fn get(&self, key: usize) -> &[(u64, u64)] {
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
    nodes: SlotLists,
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
    fn insert(&mut self, lo: u32, hi: u32, slot: (u64, u64)) {
        let nodes = &mut self.nodes;
        Self::for_each_canonical_node(self.leaves, lo, hi, |node| nodes.push(node, slot));
    }

    /// Calls `visit` with the slots recorded on each node from leaf `point` to the root.
    fn for_each_live_at(&self, point: u32, mut visit: impl FnMut(&[(u64, u64)])) {
        let mut node = point as usize + self.leaves;
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
        let buffers = vec![buffer(10, 0, 9), buffer(20, 0, 0), buffer(20, 0, 1)];
        let sorted = |order| {
            let mut sequence = vec![0, 1, 2];
            sort_by_order(&mut sequence, &buffers, order);
            sequence
        };
        assert_eq!(sorted(Order::Size), vec![2, 1, 0]);
        assert_eq!(sorted(Order::Duration), vec![0, 2, 1]);
        assert_eq!(sorted(Order::Area), vec![0, 2, 1]);
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
            tree.insert(lo, hi, (item as u64, 0));
        }
        for point in 0..leaves as u32 {
            let mut found = Vec::new();
            tree.for_each_live_at(point, |slots| found.extend(slots.iter().map(|s| s.0)));
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
