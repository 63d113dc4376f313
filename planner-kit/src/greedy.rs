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
//! (m <= n of them); a buffer's *span* is the range of points its lifetime covers. It is
//! *short* when it covers at most [`SHORT_SPAN`] points (most tensors of a model), *long*
//! otherwise. Two buffers overlap in time exactly when their spans share a point, and a
//! buffer with span `[lo, hi]` overlaps exactly:
//!
//! - the placed short buffers covering a point of `[lo, hi]`, and the placed long buffers
//!   starting at one: read from the *point lists*, one list per point, where a short buffer
//!   is recorded at every point it covers (at most [`SHORT_SPAN`] copies) and a long one at
//!   its first point. The lists are laid out in point order in one array, so this is one
//!   contiguous read, and every entry read is a buffer overlapping this one (a short buffer
//!   met twice is harmless: overlapping ranges are allowed in the sweep);
//! - the placed long buffers starting before `lo` and live at `lo`: read from a *stabbing
//!   tree*, a segment tree over blocks of a few points where each long buffer is recorded in
//!   the O(log m) nodes covering its blocks; the lists on the path from `lo`'s block to the
//!   root hold every long buffer live in that block, filtered to those live at `lo`.
//!
//! # Placing window by window
//!
//! Placement order follows sizes, not lifetimes, so taken literally it visits time at
//! random: with a million buffers nearly every list it reads would miss the CPU's caches.
//! But a buffer's offset depends only on the buffers placed before it that overlap it in
//! time, so any order that keeps, for every two buffers overlapping in time, the one that
//! comes first in placement order first gives the very same offsets. Time is cut into
//! *windows* of a few thousand points; the buffers whose span lies inside one window
//! (nearly all) are grouped by window, each group sorted by the order's key, and the few
//! that cross a window boundary are taken in order. Before placing a crossing buffer, each
//! window it covers places its own buffers that come before it; then each window places the
//! rest of its own, one window after the other. A buffer inside a window overlaps only
//! buffers of its window and crossing ones covering it, so both rules above hold, and each
//! window's placements read lists that fit in cache.
//!
//! # Memory layout
//!
//! - Every list's final length is known before packing, so all lists of an index share one
//!   array, each list a contiguous run of it with its free places at the end (marked empty).
//!   A window's lists are one stretch of that array.
//! - Entries hold only byte ranges, in 32 bits while every end fits (always, in a
//!   microcontroller's memory; a packing that outgrows them starts over with 64 bits).
//! - A window is placed in several stretches when crossing buffers come between its own in
//!   placement order, and by its next stretch its lists have left the cache. A long stretch
//!   therefore starts by reading the window's lists in order: one streaming
//!   read instead of a memory latency per cache line at random.
//!
//! # Complexity
//!
//! With n buffers and k_i buffers overlapping buffer i in time (plus the long buffers live in
//! the same block of points): O(n) to group and sort (a radix sort on the order's key, per
//! window), O(n log n) for the inserts and the tree walks, plus O(k_i log k_i) per buffer to
//! order the overlapping ones by offset; a crossing buffer also visits each window it covers,
//! which costs no more than reading their lists. Mapping steps to points is a table lookup
//! when the steps are dense (at most about 4n of them), a binary search otherwise. For model
//! graphs, where most tensors live a few steps and only a few live long, k_i is small and the
//! whole is O(n log n); a buffer that overlaps all others in time costs O(n log n) on its own
//! (the worst case, every buffer live together, is O(n^2 log n)). Memory: O(n) for the point
//! lists, O(l log m) for the tree of l long buffers.

use std::ops::RangeInclusive;

use crate::{Buffer, Packing};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::Lifetime;

/// Buffers covering at most this many points are short (see the module documentation): in
/// a model, a tensor read by the next op. Short buffers are copied into the list of every
/// point they cover, so a larger value trades memory for fewer tree entries; measured with
/// the `pack_bench` example of `greedy-bestfit`.
pub const SHORT_SPAN: u32 = 2;

/// Points per leaf of the long buffers' tree: coarser leaves keep the tree small enough to
/// stay in cache, at the price of filtering out long buffers live elsewhere in the block.
const TREE_BLOCK: u32 = 8;

/// Points per window of time (see the module documentation): small enough that the lists a
/// window's placements read stay in the CPU's cache (4096 points of a model-like trace: about
/// 100 KiB of lists), large enough that few buffers cross a window boundary. Chosen by
/// measurement (`pack_bench`).
const WINDOW_POINTS: u32 = 4096;

/// Placing at least this many buffers of a window in a row starts with one sequential read
/// of the window's point lists. A window is placed in several stretches when buffers that
/// cross it come between its own in placement order (four buffers live throughout make
/// five stretches for every window), and by the next stretch its lists have left the cache:
/// read at random they cost a memory latency per line, read in order a fraction of that.
const WARM_FROM: usize = 16;

/// Warming reads at most this many list entries (16 cache lines of 32-bit entries) per
/// placement it serves: streamed, that costs about what one cache miss does, and a
/// placement reads a few lines at random. It keeps warming linear in the placements.
const WARM_PER_PLACEMENT: usize = 128;

/// Levels of the tree, from the leaves up, that warming reads: the levels above hold few
/// nodes, read by every placement, and stay in cache.
const WARM_TREE_LEVELS: usize = 3;

/// The order in which buffers are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Largest first; then the longer lifetime; then the lower index. With first fit, equal
    /// sizes go in reverse index order instead, as in TFLite Micro's greedy planner.
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
    // The time index holds sizes and offsets in 32 bits while they fit (always, in a
    // microcontroller's memory): a packing that outgrows them starts over with 64.
    pack_in::<u32>(buffers, order, fit, WINDOW_POINTS)
        .or_else(|| pack_in::<u64>(buffers, order, fit, WINDOW_POINTS))
        .expect("every end fits in 64 bits")
}

/// The greedy loop, with the time index storing sizes and byte offsets as `W`, over
/// windows of `window_points` points; `None` when a size, an alignment or an end does not
/// fit in `W`.
fn pack_in<W: Word>(
    buffers: &[Buffer],
    order: Order,
    fit: Fit,
    window_points: u32,
) -> Option<Packing> {
    let timeline = Timeline::new(buffers);
    if !W::fits(timeline.largest_value) {
        return None;
    }
    let windows = Windows::new(timeline.points.len() as u32, window_points);
    let item_of = |index: u32| {
        let buffer = &buffers[index as usize];
        Item::new(index as usize, buffer, timeline.span(buffer.lifetime))
    };
    // One pass (at a million buffers, each pass over them reads 32 MB from memory) sizes
    // the heap's lists, groups the buffers by window and sets aside the ones with a fixed
    // offset. Groups grow as they fill; buffers usually come in time order, so one group at
    // a time grows, in cache.
    let mut room = HeapRoom::new(windows.point_count);
    let mut groups: Vec<Vec<Item<W>>> = (0..=windows.count).map(|_| Vec::new()).collect();
    let mut fixed = Vec::new();
    for (index, buffer) in buffers.iter().enumerate() {
        let item = item_of(index as u32);
        room.count(&item);
        match buffer.fixed_offset.get() {
            Some(offset) => fixed.push((item, offset)),
            None => groups[windows.group_of(&item)].push(item),
        }
    }
    let mut heap = Heap::<W>::new(room, buffers.len());
    for (item, offset) in &fixed {
        heap.place(item, *offset)?;
    }
    let key = PlacementKey::for_order(order, fit);
    sort_groups(&mut groups, key);
    place_by_windows(&mut heap, &windows, &groups, key, fit)?;
    Some(Packing {
        offsets: heap.offsets,
        height: heap.height,
        note: String::new(),
    })
}

/// Places the buffers of `groups` (see [`Windows::group_of`], each sorted by `key`) window
/// by window, with the offsets placing them in `key` order
/// would give (see the module documentation); `None` when an end does not fit in `W`.
fn place_by_windows<W: Word>(
    heap: &mut Heap<W>,
    windows: &Windows,
    groups: &[Vec<Item<W>>],
    key: PlacementKey,
    fit: Fit,
) -> Option<()> {
    let mut placer = Placer {
        heap,
        occupied: Vec::new(),
        fit,
    };
    let (inside, crossing) = groups.split_at(windows.count);
    // Per window, the next of its buffers to place.
    let mut next = vec![0usize; windows.count];
    // Places window `window`'s buffers that come before `limit` in placement order.
    let mut place_window_before =
        |placer: &mut Placer<W>, window: usize, limit: Option<&Item<W>>| {
            let waiting = &inside[window][next[window]..];
            let count = match limit {
                Some(limit) => waiting.partition_point(|item| key.of(item) < key.of(limit)),
                None => waiting.len(),
            };
            if count >= WARM_FROM {
                placer
                    .heap
                    .warm(windows.points(window), count * WARM_PER_PLACEMENT);
            }
            for item in &waiting[..count] {
                placer.place(item)?;
            }
            next[window] += count;
            Some(())
        };
    for item in &crossing[0] {
        for window in windows.of(item.lo)..=windows.of(item.hi) {
            place_window_before(&mut placer, window, Some(item))?;
        }
        placer.place(item)?;
    }
    (0..windows.count).try_for_each(|window| place_window_before(&mut placer, window, None))
}

/// The windows of time that placement proceeds by (see the module documentation).
struct Windows {
    point_count: u32,
    points_per_window: u32,
    count: usize,
}

impl Windows {
    fn new(point_count: u32, points_per_window: u32) -> Windows {
        Windows {
            point_count,
            points_per_window,
            count: point_count.div_ceil(points_per_window) as usize,
        }
    }

    fn of(&self, point: u32) -> usize {
        (point / self.points_per_window) as usize
    }

    /// The points of window `window`.
    fn points(&self, window: usize) -> RangeInclusive<u32> {
        let first = window as u32 * self.points_per_window;
        first..=(first + self.points_per_window - 1).min(self.point_count - 1)
    }

    /// `item`'s group: its window when its span lies inside one, `count` when it crosses a
    /// window boundary.
    fn group_of<W: Word>(&self, item: &Item<W>) -> usize {
        match self.of(item.lo) {
            window if window == self.of(item.hi) => window,
            _ => self.count,
        }
    }
}

/// Sorts each of `groups` by `key` on its own: a group is small enough to stay in cache, so
/// the sorting costs about the same per buffer at a million buffers as at a thousand.
fn sort_groups<W: Word>(groups: &mut [Vec<Item<W>>], key: PlacementKey) {
    // One working room, for the largest group, serves every group's sort, rather than an
    // allocation per group (hundreds at a million buffers).
    let largest = groups.iter().map(Vec::len).max();
    let mut room = RadixRoom::new(largest.unwrap_or(0));
    for group in groups {
        radix_sort(group, &mut room, |item| key.of(item));
    }
}

/// Places buffers one at a time into a [`Heap`].
struct Placer<'a, W> {
    heap: &'a mut Heap<W>,
    /// Byte ranges of the placed buffers overlapping the current one in time; reused.
    occupied: Vec<Bytes<W>>,
    fit: Fit,
}

impl<W: Word> Placer<'_, W> {
    /// Places `item` in the gap [`choose_gap`] picks; `None` when its end does not fit in `W`.
    fn place(&mut self, item: &Item<W>) -> Option<()> {
        self.heap.collect_overlapping(item, &mut self.occupied);
        self.occupied.sort_unstable_by_key(|bytes| bytes.offset);
        let ranges = self.occupied.iter().map(|bytes| bytes.widen());
        let offset = choose_gap(ranges, item.size(), item.alignment(), self.fit);
        self.heap.place(item, offset)
    }
}

/// What sorting and placing one buffer need, in one record, so that placement reads the
/// records of a window one after the other instead of reaching into several arrays.
#[derive(Clone, Copy, Debug, Default)]
struct Item<W> {
    size: W,
    alignment: W,
    index: u32,
    /// Duration in steps (for the orders).
    duration: u32,
    /// Span in points, inclusive.
    lo: u32,
    hi: u32,
}

impl<W: Word> Item<W> {
    /// The record of `buffer`, whose size and alignment fit in `W`.
    fn new(index: usize, buffer: &Buffer, (lo, hi): (u32, u32)) -> Item<W> {
        Item {
            size: W::narrow(buffer.size),
            alignment: W::narrow(buffer.alignment),
            index: index as u32,
            duration: buffer.lifetime.duration(),
            lo,
            hi,
        }
    }

    fn size(&self) -> u64 {
        self.size.widen()
    }

    fn alignment(&self) -> u64 {
        self.alignment.widen()
    }

    fn is_short(&self) -> bool {
        self.hi - self.lo < SHORT_SPAN
    }

    /// Points whose lists record this buffer once placed.
    fn listed_at(&self) -> RangeInclusive<u32> {
        if self.is_short() {
            self.lo..=self.hi
        } else {
            self.lo..=self.lo
        }
    }
}

/// The integer the records and the time index store sizes and byte offsets in: `u32` while
/// they fit, which halves the memory placement reads, else `u64`.
trait Word: Copy + Default + Ord + std::fmt::Debug {
    fn fits(value: u64) -> bool;
    /// `value`, which the caller has checked [`Word::fits`].
    fn narrow(value: u64) -> Self;
    fn widen(self) -> u64;
}

impl Word for u32 {
    fn fits(value: u64) -> bool {
        value <= u64::from(u32::MAX)
    }

    fn narrow(value: u64) -> u32 {
        debug_assert!(u32::fits(value));
        value as u32
    }

    fn widen(self) -> u64 {
        u64::from(self)
    }
}

impl Word for u64 {
    fn fits(_: u64) -> bool {
        true
    }

    fn narrow(value: u64) -> u64 {
        value
    }

    fn widen(self) -> u64 {
        self
    }
}

/// An entry of [`Lists`]: a placed buffer's bytes, or a free place. A placed buffer ends
/// above 0 (empty buffers are never recorded), so `end == 0` marks a free place.
trait Slot: Copy + Default {
    fn is_free(&self) -> bool;
}

/// A placed buffer's bytes, `offset..end`.
#[derive(Clone, Copy, Debug, Default)]
struct Bytes<W> {
    offset: W,
    end: W,
}

impl<W: Word> Bytes<W> {
    fn new(offset: u64, end: u64) -> Bytes<W> {
        Bytes {
            offset: W::narrow(offset),
            end: W::narrow(end),
        }
    }

    fn widen(self) -> (u64, u64) {
        (self.offset.widen(), self.end.widen())
    }
}

impl<W: Word> Slot for Bytes<W> {
    fn is_free(&self) -> bool {
        self.end.widen() == 0
    }
}

/// A placed long buffer in the tree: its bytes and its span.
#[derive(Clone, Copy, Debug, Default)]
struct LongSlot<W> {
    bytes: Bytes<W>,
    lo: u32,
    hi: u32,
}

impl<W: Word> Slot for LongSlot<W> {
    fn is_free(&self) -> bool {
        self.bytes.is_free()
    }
}

/// The room a [`Heap`] needs, counted buffer by buffer.
struct HeapRoom {
    /// Per point, the buffers its list records.
    per_point: Vec<u32>,
    /// The blocks each long buffer covers.
    long_blocks: Vec<(u32, u32)>,
}

impl HeapRoom {
    fn new(point_count: u32) -> HeapRoom {
        HeapRoom {
            per_point: vec![0; point_count as usize],
            long_blocks: Vec::new(),
        }
    }

    fn count<W: Word>(&mut self, item: &Item<W>) {
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
struct Heap<W> {
    /// Per point: the placed short buffers covering it and long ones starting at it.
    points: Lists<Bytes<W>>,
    /// Placed long buffers by the blocks of points they cover.
    long: StabbingTree<W>,
    offsets: Vec<u64>,
    height: u64,
}

impl<W: Word> Heap<W> {
    /// An empty heap with `room`, for `buffer_count` buffers.
    fn new(room: HeapRoom, buffer_count: usize) -> Heap<W> {
        let leaves = room.per_point.len().div_ceil(TREE_BLOCK as usize);
        Heap {
            long: StabbingTree::new(leaves, &room.long_blocks),
            points: Lists::with_capacities(room.per_point),
            offsets: vec![0; buffer_count],
            height: 0,
        }
    }

    /// Places `item` at `offset`; `None` when its end does not fit in `W`.
    fn place(&mut self, item: &Item<W>, offset: u64) -> Option<()> {
        let end = offset + item.size();
        if !W::fits(end) {
            return None;
        }
        self.offsets[item.index as usize] = offset;
        self.height = self.height.max(end);
        if item.size() == 0 {
            // Occupies no byte, so overlaps nothing: recording it would only split gaps.
            return Some(());
        }
        let bytes = Bytes::new(offset, end);
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

    /// Reads the lists placements in `points` read (the point lists, and the lowest levels
    /// of the tree) from first to last, so that the placements about to read them at random
    /// find them in cache (see [`WARM_FROM`]); each only if it has at most `budget` entries,
    /// so that warming never costs more than the placements it serves.
    fn warm(&self, points: RangeInclusive<u32>, budget: usize) {
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

    /// Replaces `occupied` with the byte ranges of the placed buffers whose lifetimes overlap
    /// `item`'s (the two sources of the module documentation).
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
}

/// Placement order as a key per buffer: buffers are placed in increasing key order, and
/// every key is distinct (the buffer index breaks ties).
///
/// `Size` with first fit is TFLite Micro's greedy planner exactly: largest first, and buffers
/// of equal size in reverse model order (TFLM fills its sort array from the back before a
/// stable sort). That tie rule, not the lifetime one, is what reproduces TFLM's arena figures
/// on real models (vww_96_int8: 73728, where the lifetime tie rule gives 64512).
#[derive(Clone, Copy, Debug)]
enum PlacementKey {
    /// Largest first, then the longest, then the lowest index.
    SizeThenDuration,
    /// Largest first, then the highest index (TFLM).
    SizeThenReverseIndex,
    /// Longest first, then the largest, then the lowest index.
    DurationThenSize,
    /// Largest size x duration first, then the largest, then the lowest index.
    AreaThenSize,
}

impl PlacementKey {
    fn for_order(order: Order, fit: Fit) -> PlacementKey {
        match (order, fit) {
            (Order::Size, Fit::First) => PlacementKey::SizeThenReverseIndex,
            (Order::Size, Fit::Best) => PlacementKey::SizeThenDuration,
            (Order::Duration, _) => PlacementKey::DurationThenSize,
            (Order::Area, _) => PlacementKey::AreaThenSize,
        }
    }

    /// The key of `item`, as a 192-bit number (high word first) compared as a tuple:
    /// "larger first" fields are stored complemented.
    fn of<W: Word>(self, item: &Item<W>) -> (u128, u64) {
        let (size, duration, index) = (item.size(), item.duration, item.index);
        let wide = |high: u64, low: u64| (u128::from(high) << 64) | u128::from(low);
        let pair = |high: u32, low: u32| (u64::from(high) << 32) | u64::from(low);
        match self {
            PlacementKey::SizeThenDuration => (wide(!size, pair(!duration, index)), 0),
            PlacementKey::SizeThenReverseIndex => (wide(!size, u64::from(!index)), 0),
            PlacementKey::DurationThenSize => {
                // 32 + 64 + 32 bits: (!duration, !size, index).
                let high = (u64::from(!duration) << 32) | (!size >> 32);
                (wide(high, pair(!size as u32, index)), 0)
            }
            PlacementKey::AreaThenSize => {
                // Area takes at most 96 bits; then !size and index in 96 more.
                let area = u128::from(size) * u128::from(duration);
                let not_area = !area & ((1u128 << 96) - 1);
                (
                    (not_area << 32) | u128::from(!size >> 32),
                    pair(!size as u32, index),
                )
            }
        }
    }
}

/// Bytes in a [`PlacementKey`] value: a `u128` and a `u64`.
const KEY_BYTES: usize = 24;

/// Working room for [`radix_sort`]ing up to `spare.len()` items, reused from sort to sort.
struct RadixRoom<T> {
    spare: Vec<T>,
    /// Per key byte, how many items have each value.
    counts: Box<[[u32; 256]; KEY_BYTES]>,
}

impl<T: Copy + Default> RadixRoom<T> {
    fn new(capacity: usize) -> RadixRoom<T> {
        RadixRoom {
            spare: vec![T::default(); capacity],
            counts: Box::new([[0; 256]; KEY_BYTES]),
        }
    }
}

/// Sorts `items` by `key` (every key distinct), with `room` (for at least `items.len()`
/// items) as working room: a least-significant-digit radix sort over the 24 key bytes that
/// skips the bytes on which all keys agree (most of them, for real sizes, durations and
/// indices). O(n) per byte sorted, sequential reads and 256 streams of writes; small inputs
/// use a comparison sort.
fn radix_sort<T: Copy>(items: &mut [T], room: &mut RadixRoom<T>, key: impl Fn(&T) -> (u128, u64)) {
    if items.len() <= 64 {
        items.sort_unstable_by_key(&key);
        return;
    }
    // Byte `position` of a key, 0 the least significant.
    let byte = |(major, minor): (u128, u64), position: usize| -> usize {
        let bits = match position {
            0..8 => minor >> (8 * position),
            _ => (major >> (8 * (position - 8))) as u64,
        };
        (bits & 0xff) as usize
    };
    let spare = &mut room.spare[..items.len()];
    let counts = &mut *room.counts;
    for count in counts.iter_mut() {
        count.fill(0);
    }
    for item in items.iter() {
        let key = key(item);
        for (position, count) in counts.iter_mut().enumerate() {
            count[byte(key, position)] += 1;
        }
    }
    let mut sorted_in_spare = false;
    for (position, count) in counts.iter().enumerate() {
        if count.contains(&(items.len() as u32)) {
            continue;
        }
        let mut next = [0u32; 256];
        let mut total = 0;
        for (bucket, &c) in count.iter().enumerate() {
            next[bucket] = total;
            total += c;
        }
        let (from, to): (&[T], &mut [T]) = if sorted_in_spare {
            (spare, items)
        } else {
            (items, spare)
        };
        for item in from.iter() {
            let bucket = &mut next[byte(key(item), position)];
            to[*bucket as usize] = *item;
            *bucket += 1;
        }
        sorted_in_spare = !sorted_in_spare;
    }
    if sorted_in_spare {
        items.copy_from_slice(spare);
    }
}

/// The offset for a buffer of `size` bytes among the `occupied` byte ranges `(offset, end)`
/// (sorted by offset; they may overlap one another).
fn choose_gap(
    occupied: impl IntoIterator<Item = (u64, u64)>,
    size: u64,
    alignment: u64,
    fit: Fit,
) -> u64 {
    // (gap length, offset) of the best bounded gap so far.
    let mut best: Option<(u64, u64)> = None;
    let mut cursor = 0u64;
    for (start, end) in occupied {
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

/// Lifetimes mapped onto the sorted distinct start steps, so that the time index has one
/// list per start step rather than one per op step.
struct Timeline {
    /// Distinct start steps, ascending.
    points: Vec<u32>,
    /// When steps are dense: per step from `points[0]`, the last point at or before it (one
    /// lookup per lifetime end instead of a binary search with its cache misses).
    last_point_at: Option<Vec<u32>>,
    /// The largest size, alignment or fixed end (saturated) of the buffers: what the time
    /// index's words must hold. Found here to spare a pass over the buffers (32 MB at a
    /// million).
    largest_value: u64,
}

impl Timeline {
    fn new(buffers: &[Buffer]) -> Timeline {
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
        let last_point_at = (steps <= 4 * buffers.len() + 1024).then(|| {
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

    /// The range of points `lifetime` covers (inclusive; never empty, since a buffer's own
    /// start is a point). `lifetime` must be one of the buffers the timeline was made from.
    fn span(&self, lifetime: Lifetime) -> (u32, u32) {
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

/// Lists of slots, one per key, whose final lengths are known in advance: list `k` owns the
/// run `slots[bounds[k]..bounds[k + 1]]`, filled from its start, its free places (see
/// [`Slot`]) after the filled ones. All lists are one allocation, neighbouring keys are
/// neighbours in memory, and the lists of consecutive keys read together are one contiguous
/// slice.
struct Lists<T> {
    /// `keys + 1` run bounds.
    bounds: Vec<u32>,
    slots: Vec<T>,
}

impl<T: Slot> Lists<T> {
    /// Lists with room for `capacities[k]` slots under key `k`.
    fn with_capacities(capacities: Vec<u32>) -> Lists<T> {
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

    fn run(&self, key: usize) -> std::ops::Range<usize> {
        self.bounds[key] as usize..self.bounds[key + 1] as usize
    }

    /// Adds `slot` to list `key`, which must have room left. The free places of a run are
    /// its last ones, so this scans only slots a query of the same key reads anyway.
    fn push(&mut self, key: usize, slot: T) {
        let run = self.run(key);
        let free = self.slots[run.clone()]
            .iter()
            .position(Slot::is_free)
            .expect("every list was given room for all its slots");
        self.slots[run.start + free] = slot;
    }

    /// The runs of `keys`, one slice, free places included.
    fn runs(&self, keys: RangeInclusive<usize>) -> &[T] {
        &self.slots[self.bounds[*keys.start()] as usize..self.bounds[keys.end() + 1] as usize]
    }

    /// Reads one value per cache line of the lists of `keys` and of their bounds, in order,
    /// when they hold at most `budget` entries (see [`Heap::warm`]).
    fn warm(&self, keys: RangeInclusive<usize>, budget: usize) {
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
struct StabbingTree<W> {
    leaves: usize,
    nodes: Lists<LongSlot<W>>,
}

impl<W: Word> StabbingTree<W> {
    /// A tree over `leaves` leaves with room for the intervals `spans` (inclusive).
    fn new(leaves: usize, spans: &[(u32, u32)]) -> StabbingTree<W> {
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
    fn insert(&mut self, lo: u32, hi: u32, slot: LongSlot<W>) {
        let nodes = &mut self.nodes;
        Self::for_each_canonical_node(self.leaves, lo, hi, |node| nodes.push(node, slot));
    }

    /// Calls `visit` with the slots (free places included) recorded on each node from leaf
    /// `leaf` to the root.
    fn for_each_live_at(&self, leaf: u32, mut visit: impl FnMut(&[LongSlot<W>])) {
        let mut node = leaf as usize + self.leaves;
        while node >= 1 {
            visit(self.nodes.runs(node..=node));
            node >>= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;

    use super::*;
    use crate::testing::{assert_valid_packing, buffer};
    use crate::FixedOffset;
    use memplan_plugin_api::Lifetime;

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
                fixed_offset: FixedOffset::at(100),
                ..buffer(100, 0, 9)
            },
            Buffer {
                fixed_offset: FixedOffset::at(240),
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
    fn nothing_to_pack_packs_to_nothing() {
        for (_, fit) in Fit::ALL {
            let packing = pack_greedy(&[], Order::Size, fit);
            assert!(packing.offsets.is_empty());
            assert_eq!(packing.height, 0);
        }
        let fixed_only = [Buffer {
            fixed_offset: FixedOffset::at(32),
            ..buffer(8, 3, 9)
        }];
        assert_eq!(pack_greedy(&fixed_only, Order::Size, Fit::Best).height, 40);
    }

    #[test]
    fn buffers_disjoint_in_time_share_bytes() {
        let buffers = vec![buffer(64, 0, 1), buffer(64, 2, 3), buffer(64, 4, 4)];
        let packing = pack_greedy(&buffers, Order::Size, Fit::Best);
        assert_eq!(packing.offsets, vec![0, 0, 0]);
        assert_eq!(packing.height, 64);
    }

    /// Indices of the buffers without a fixed offset in placement order.
    fn order_of(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u32> {
        let mut queue: Vec<Item<u64>> = buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.fixed_offset.is_none())
            .map(|(index, b)| Item::<u64>::new(index, b, (0, 0)))
            .collect();
        let key = PlacementKey::for_order(order, fit);
        let mut room = RadixRoom::new(queue.len());
        radix_sort(&mut queue, &mut room, |item| key.of(item));
        queue.iter().map(|item| item.index).collect()
    }

    /// The documented orders, written as plain comparison sorts: the reference the radix
    /// sort must agree with.
    fn reference_order(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u32> {
        let mut indices: Vec<u32> = (0..buffers.len() as u32)
            .filter(|&i| buffers[i as usize].fixed_offset.is_none())
            .collect();
        let size = |i: u32| buffers[i as usize].size;
        let duration = |i: u32| buffers[i as usize].lifetime.duration();
        match (order, fit) {
            (Order::Size, Fit::First) => indices.sort_by_key(|&i| (Reverse(size(i)), Reverse(i))),
            (Order::Size, Fit::Best) => {
                indices.sort_by_key(|&i| (Reverse(size(i)), Reverse(duration(i)), i))
            }
            (Order::Duration, _) => {
                indices.sort_by_key(|&i| (Reverse(duration(i)), Reverse(size(i)), i))
            }
            (Order::Area, _) => indices.sort_by_key(|&i| {
                let area = u128::from(size(i)) * u128::from(duration(i));
                (Reverse(area), Reverse(size(i)), i)
            }),
        }
        indices
    }

    #[test]
    fn orders_sort_as_documented() {
        let buffers = [buffer(10, 0, 9), buffer(20, 0, 0), buffer(20, 0, 1)];
        assert_eq!(order_of(&buffers, Order::Size, Fit::Best), vec![2, 1, 0]);
        // TFLite Micro's order: equal sizes in reverse model order, lifetimes ignored.
        let tflm = [buffer(20, 0, 1), buffer(20, 0, 0), buffer(10, 0, 9)];
        assert_eq!(order_of(&tflm, Order::Size, Fit::First), vec![1, 0, 2]);
        assert_eq!(
            order_of(&buffers, Order::Duration, Fit::Best),
            vec![0, 2, 1]
        );
        assert_eq!(order_of(&buffers, Order::Area, Fit::Best), vec![0, 2, 1]);
    }

    #[test]
    fn radix_sorted_orders_match_comparison_sorts() {
        // Sizes and durations spread over every key byte, with many ties.
        let buffers: Vec<Buffer> = (0..3000u64)
            .map(|i| {
                let size = match i % 5 {
                    0 => i % 7 + 1,
                    1 => (i * 2_654_435_761) % (1 << 40) + 1,
                    2 => u64::MAX - i % 3,
                    3 => 1 << (i % 64),
                    _ => 4096,
                };
                let first = (i * 31 % 500) as u32;
                let duration = [0, 1, 300, 70_000, u32::MAX - first][(i % 5) as usize];
                Buffer {
                    size,
                    alignment: 1,
                    lifetime: Lifetime::new(first, first.saturating_add(duration)),
                    fixed_offset: (i % 97 == 0).then_some(i).into(),
                }
            })
            .collect();
        for (_, order) in Order::ALL {
            for (_, fit) in Fit::ALL {
                assert_eq!(
                    order_of(&buffers, order, fit),
                    reference_order(&buffers, order, fit),
                    "{order:?} {fit:?}"
                );
            }
        }
    }

    /// The same greedy packing with the overlapping buffers found by brute force.
    fn pack_by_brute_force(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u64> {
        let mut placed: Vec<Option<u64>> = buffers.iter().map(|b| b.fixed_offset.get()).collect();
        for index in reference_order(buffers, order, fit) {
            let own = &buffers[index as usize];
            let mut occupied: Vec<(u64, u64)> = (0..buffers.len())
                .filter_map(|j| placed[j].map(|offset| (j, offset)))
                .filter(|&(j, _)| buffers[j].lifetime.overlaps(own.lifetime))
                .map(|(j, offset)| (offset, offset + buffers[j].size))
                .collect();
            occupied.sort_unstable_by_key(|&(offset, _)| offset);
            placed[index as usize] = Some(choose_gap(occupied, own.size, own.alignment, fit));
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
                    fixed_offset: FixedOffset::NONE,
                }
            })
            .collect();
        buffers.push(buffer(50, 0, 400));
        buffers.push(Buffer {
            fixed_offset: FixedOffset::at(1000),
            ..buffer(64, 30, 90)
        });
        // The same buffers scaled past 4 GiB, so that the index stores 64-bit offsets.
        let scaled: Vec<Buffer> = buffers
            .iter()
            .map(|b| Buffer {
                size: b.size << 28,
                alignment: b.alignment << 28,
                fixed_offset: b.fixed_offset.get().map(|offset| offset << 28).into(),
                ..*b
            })
            .collect();
        assert!(pack_in::<u32>(&buffers, Order::Size, Fit::Best, WINDOW_POINTS).is_some());
        assert!(pack_in::<u32>(&scaled, Order::Size, Fit::Best, WINDOW_POINTS).is_none());
        for buffers in [buffers, scaled] {
            for (_, order) in Order::ALL {
                for (_, fit) in Fit::ALL {
                    let expected = pack_by_brute_force(&buffers, order, fit);
                    let packing = pack_greedy(&buffers, order, fit);
                    assert_valid_packing(&buffers, &packing);
                    assert_eq!(packing.offsets, expected, "{order:?} {fit:?}");
                    // Windows of a few points: most buffers cross a window boundary.
                    for window_points in [1, 3, 16] {
                        let windowed =
                            pack_in::<u64>(&buffers, order, fit, window_points).expect("64 bits");
                        assert_eq!(
                            windowed.offsets, expected,
                            "{order:?} {fit:?} {window_points}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn offsets_narrow_to_32_bits_only_while_every_end_fits() {
        let top = u64::from(u32::MAX);
        // The larger buffer goes first, the other on top, ending at 2^32 - 1 or one byte above.
        for (size, fits) in [(top - 10, true), (top - 9, false)] {
            let buffers = vec![buffer(10, 0, 1), buffer(size, 0, 1)];
            let narrow = pack_in::<u32>(&buffers, Order::Duration, Fit::Best, WINDOW_POINTS);
            assert_eq!(narrow.is_some(), fits, "size {size}");
            let packing = pack_greedy(&buffers, Order::Duration, Fit::Best);
            assert_eq!(packing.offsets, vec![size, 0]);
            assert_eq!(packing.height, size + 10);
        }
        let fixed = Buffer {
            fixed_offset: FixedOffset::at(top),
            ..buffer(1, 0, 1)
        };
        let packing = pack_greedy(&[fixed, buffer(4, 0, 1)], Order::Size, Fit::Best);
        assert_eq!(packing.offsets, vec![top, 0]);
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
        let spans = |buffers: &[Buffer]| {
            let timeline = Timeline::new(buffers);
            assert_eq!(
                timeline.last_point_at.is_some(),
                buffers[0].lifetime.first < 100,
                "the table is for dense steps only"
            );
            let spans: Vec<(u32, u32)> =
                buffers.iter().map(|b| timeline.span(b.lifetime)).collect();
            spans
        };
        assert_eq!(spans(&dense), expected);
        assert_eq!(spans(&sparse), expected);
        assert!(Timeline::new(&[]).points.is_empty());
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
        let mut tree = StabbingTree::<u32>::new(leaves, &intervals);
        for (item, &(lo, hi)) in intervals.iter().enumerate() {
            let slot = LongSlot {
                bytes: Bytes::new(item as u64, item as u64 + 1),
                lo,
                hi,
            };
            tree.insert(lo, hi, slot);
        }
        for point in 0..leaves as u32 {
            let mut found = Vec::new();
            tree.for_each_live_at(point, |slots| {
                found.extend(
                    slots
                        .iter()
                        .filter(|s| !s.is_free())
                        .map(|s| s.bytes.widen().0),
                )
            });
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
                fixed_offset: FixedOffset::NONE,
            })
            .collect();
        let first = pack_greedy(&buffers, Order::Size, Fit::Best);
        assert_valid_packing(&buffers, &first);
        for _ in 0..3 {
            assert_eq!(pack_greedy(&buffers, Order::Size, Fit::Best), first);
        }
    }
}
