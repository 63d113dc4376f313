//! The time index: lifetimes mapped onto distinct start steps ([`Timeline`]), lists per key
//! ([`Lists`]) and the stabbing tree of long-lived buffers ([`StabbingTree`]).

use std::ops::RangeInclusive;

use super::item::{LongSlot, Slot, Word};
use crate::Buffer;
use memplan_plugin_api::Lifetime;

/// Lifetimes mapped onto the sorted distinct start steps, so that the time index has one
/// list per start step rather than one per op step. Public for planners that reason about
/// the live bytes per start step (they change nowhere else): `exact`'s critical steps.
pub struct Timeline {
    /// Distinct start steps, ascending.
    pub(super) points: Vec<u32>,
    /// When steps are at most [`TABLED_STEPS_PER_BUFFER`] per buffer: per step from
    /// `points[0]`, the last point at or before it (one lookup per lifetime end instead of a
    /// binary search with its cache misses).
    pub(super) last_point_at: Option<Vec<u32>>,
    /// The largest size, alignment or fixed end (saturated) of the buffers: what the time
    /// index's words must hold. Found here to spare a pass over the buffers (32 MB at a
    /// million).
    pub(super) largest_value: u64,
}

/// Steps per buffer up to which a [`Timeline`] maps steps to points by a table (4 bytes a
/// step: at most 64 a buffer) rather than by binary search. Random lifetimes of 2,000,000
/// buffers over 10,000,000 steps, out of time order, took 0.99 s to sweep in start order with
/// binary searches and 0.66 s with the table (the anchored sweep 1.24 and 1.03 s; 1,000,000
/// over 5,000,000 steps 0.41 and 0.32 s), when the table stopped at 4 steps a buffer.
const TABLED_STEPS_PER_BUFFER: usize = 16;

impl Timeline {
    pub fn new(buffers: &[Buffer]) -> Timeline {
        // Consecutive buffers often start together (a model lists an op's outputs in a row):
        // dropping repeats while collecting keeps the list, and the sort, shorter.
        let mut points: Vec<u32> = Vec::new();
        let mut top = None;
        let mut largest_value = 0;
        for buffer in buffers {
            if points.last() != Some(&buffer.lifetime.first) {
                points.push(buffer.lifetime.first);
            }
            top = top.max(Some(buffer.lifetime.last));
            let fixed_end = buffer
                .fixed_offset
                .get()
                .map_or(0, |offset| offset.saturating_add(buffer.size));
            largest_value = largest_value
                .max(buffer.size)
                .max(buffer.alignment)
                .max(fixed_end);
        }
        points.sort_unstable();
        points.dedup();
        let (Some(&base), Some(top)) = (points.first(), top) else {
            return Timeline {
                points,
                last_point_at: None,
                largest_value,
            };
        };
        let top = top.max(base);
        let steps = (top - base) as usize + 1;
        let last_point_at = (steps <= TABLED_STEPS_PER_BUFFER * buffers.len() + 1024).then(|| {
            let mut table = Vec::with_capacity(steps);
            let mut point = 0usize;
            for step in base..=top {
                while point + 1 < points.len() && points[point + 1] <= step {
                    point += 1;
                }
                table.push(point as u32);
            }
            table
        });
        Timeline {
            points,
            last_point_at,
            largest_value,
        }
    }

    /// The distinct start steps (the points), ascending.
    pub fn points(&self) -> &[u32] {
        &self.points
    }

    /// The range of points `lifetime` covers (inclusive; never empty, since a buffer's own
    /// start is a point). `lifetime` must be one of the buffers the timeline was made from.
    #[inline]
    pub fn span(&self, lifetime: Lifetime) -> (u32, u32) {
        let last = lifetime.last.max(lifetime.first);
        match &self.last_point_at {
            Some(table) => {
                let base = self.points[0];
                let point_at = |step: u32| table[(step - base) as usize];
                (point_at(lifetime.first), point_at(last))
            }
            None => {
                let lo = self.points.partition_point(|&p| p < lifetime.first);
                let hi = self.points.partition_point(|&p| p <= last) - 1;
                (lo as u32, hi.max(lo) as u32)
            }
        }
    }
}

/// The live bytes at each of `points` points (start steps), given each buffer's span over
/// them (a [`Timeline::span`]) and its size: they change only at points, so their largest is
/// the arena's peak. O(n + m).
pub fn live_bytes_at_points(
    points: usize,
    spans_and_sizes: impl IntoIterator<Item = ((u32, u32), u64)>,
) -> Vec<u64> {
    let mut change = vec![0i128; points + 1];
    for ((first, last), size) in spans_and_sizes {
        change[first as usize] += i128::from(size);
        change[last as usize + 1] -= i128::from(size);
    }
    let mut live = 0i128;
    change[..points]
        .iter()
        .map(|&delta| {
            live += delta;
            live as u64
        })
        .collect()
}

/// Lists of slots, one per key, whose final lengths are known in advance: list `k` owns the
/// run `slots[bounds[k]..bounds[k + 1]]`, filled from its start, its free places (see
/// [`Slot`]) after the filled ones. All lists are one allocation, neighbouring keys are
/// neighbours in memory, and the lists of consecutive keys read together are one contiguous
/// slice.
pub(super) struct Lists<T> {
    /// `keys + 1` run bounds.
    pub(super) bounds: Vec<u32>,
    pub(super) slots: Vec<T>,
}

impl<T: Slot> Lists<T> {
    /// Lists with room for `capacities[k]` slots under key `k`.
    pub(super) fn with_capacities(capacities: Vec<u32>) -> Lists<T> {
        let mut bounds = capacities;
        let mut total = 0u32;
        for bound in bounds.iter_mut() {
            let capacity = *bound;
            *bound = total;
            total = total
                .checked_add(capacity)
                .expect("fewer than 2^32 list entries");
        }
        bounds.push(total);
        Lists {
            bounds,
            slots: vec![T::default(); total as usize],
        }
    }

    #[inline]
    pub(super) fn run(&self, key: usize) -> std::ops::Range<usize> {
        self.bounds[key] as usize..self.bounds[key + 1] as usize
    }

    /// Adds `slot` to list `key`, which must have room left. The free places of a run are
    /// its last ones, so this scans only slots a query of the same key reads anyway.
    #[inline]
    pub(super) fn push(&mut self, key: usize, slot: T) {
        let run = self.run(key);
        let free = self.slots[run.clone()]
            .iter()
            .position(Slot::is_free)
            .expect("every list was given room for all its slots");
        self.slots[run.start + free] = slot;
    }

    /// The runs of `keys`, one slice, free places included.
    #[inline]
    pub(super) fn runs(&self, keys: RangeInclusive<usize>) -> &[T] {
        &self.slots[self.bounds[*keys.start()] as usize..self.bounds[keys.end() + 1] as usize]
    }

    /// Reads one value per cache line of the lists of `keys` and of their bounds, in order,
    /// when they hold at most `budget` entries (see [`Heap::warm`]).
    #[inline]
    pub(super) fn warm(&self, keys: RangeInclusive<usize>, budget: usize) {
        let lists = self.runs(keys.clone());
        if lists.len() > budget {
            return;
        }
        fn touch<T>(values: &[T], mut read: impl FnMut(&T) -> u64) -> u64 {
            let per_line = (64 / std::mem::size_of::<T>()).max(1);
            values
                .iter()
                .step_by(per_line)
                .fold(0, |sum, value| sum ^ read(value))
        }
        let bounds = &self.bounds[*keys.start()..=keys.end() + 1];
        let touched = touch(bounds, |&bound| u64::from(bound))
            ^ touch(lists, |slot| u64::from(slot.is_free()));
        std::hint::black_box(touched);
    }
}

/// A segment tree over `m` leaves answering "which inserted intervals contain leaf p".
///
/// Iterative layout: leaves at `[m, 2m)`, node `i`'s parent is `i / 2`. An interval is stored
/// in the canonical nodes of its decomposition (at most 2 log m); the intervals containing a
/// leaf are exactly those stored on its path to the root, each exactly once. Every interval
/// that will be inserted is known when the tree is built, so each node's list gets exactly
/// the room it needs.
pub(super) struct StabbingTree<W> {
    pub(super) leaves: usize,
    pub(super) nodes: Lists<LongSlot<W>>,
}

impl<W: Word> StabbingTree<W> {
    /// A tree over `leaves` leaves with room for the intervals `spans` (inclusive).
    pub(super) fn new(leaves: usize, spans: &[(u32, u32)]) -> StabbingTree<W> {
        let mut capacities = vec![0u32; 2 * leaves];
        for &(lo, hi) in spans {
            Self::for_each_canonical_node(leaves, lo, hi, |node| capacities[node] += 1);
        }
        StabbingTree {
            leaves,
            nodes: Lists::with_capacities(capacities),
        }
    }

    /// The nodes whose leaf ranges partition `lo..=hi`.
    #[inline]
    pub(super) fn for_each_canonical_node(
        leaves: usize,
        lo: u32,
        hi: u32,
        mut visit: impl FnMut(usize),
    ) {
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
    #[inline]
    pub(super) fn insert(&mut self, lo: u32, hi: u32, slot: LongSlot<W>) {
        let nodes = &mut self.nodes;
        Self::for_each_canonical_node(self.leaves, lo, hi, |node| nodes.push(node, slot));
    }

    /// Calls `visit` with the slots (free places included) recorded on each node from leaf
    /// `leaf` to the root.
    #[inline]
    pub(super) fn for_each_live_at(&self, leaf: u32, mut visit: impl FnMut(&[LongSlot<W>])) {
        let mut node = leaf as usize + self.leaves;
        while node >= 1 {
            visit(self.nodes.runs(node..=node));
            node >>= 1;
        }
    }
}
