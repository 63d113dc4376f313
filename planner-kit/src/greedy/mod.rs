//! Greedy packing in the manner of XLA's heap simulator and TFLite Micro's greedy planner:
//! take the buffers one at a time in a chosen order and put each in a free gap among the
//! buffers already placed that are live at the same time.
//!
//! # Algorithm
//!
//! 1. Buffers with a fixed offset are placed first, as they are.
//! 2. The others are sorted by [`Order`]: `size` (largest first, then the longer lifetime,
//!    then the lower index: TFLM's and XLA's default), `duration` (longest lifetime first,
//!    then larger), `area` (largest size x duration first, then larger) or `start` (earliest
//!    lifetime start first, then larger); or by given ranks ([`pack_greedy_ranked`]).
//! 3. For each buffer in that order, collect the placed buffers whose lifetimes overlap its
//!    own, sort their byte ranges by offset and sweep them: every stretch of bytes not covered
//!    by any of them is a gap, and the space above the highest one is an unbounded gap. A gap
//!    fits when the buffer's aligned start plus its size stays inside it. [`Fit::First`] takes
//!    the lowest gap that fits (TFLM's greedy planner); [`Fit::Best`] takes the smallest gap
//!    that fits, the lowest of equally small ones, and the unbounded top gap only when no
//!    bounded one fits (XLA's best-fit).
//!
//! In start order with best fit, the placed buffers a buffer overlaps in time are exactly
//! those still live at its start: packing is then one sweep over time with the gaps between
//! the live buffers in an ordered index, which gives the very same offsets in O(n log n)
//! whatever the trace (the `sweep` module; buffers at fixed offsets must share no byte while
//! live together). Everything below is about the general packer, which serves every other
//! order and fit, ranked packings, and start order where fixed offsets share bytes.
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
//! # Where many buffers live at once
//!
//! The point lists hand a placement every overlapping buffer, one entry each: with 160,000
//! buffers all live at once that is quadratic (37 s), though the bytes they take are one run.
//! While placing, the placer watches how many entries the crowded placements read and how
//! many runs of bytes those merge into ([`Crowding`]), period after period (crowding can
//! grow as the packing fills); when both ratios are high it starts over with [`DenseHeap`],
//! which keeps per node of a segment tree over time only the union of the bytes taken (the
//! `dense` module explains it). Both give the very same offsets.
//!
//! # Complexity
//!
//! With n buffers and k_i buffers overlapping buffer i in time (plus the long buffers live in
//! the same block of points): O(n) to group and sort (a radix sort on the order's key, per
//! window), O(n log n) for the inserts and the tree walks, plus O(k_i) per buffer to order
//! the overlapping ones by offset (a radix sort over the offset bytes that differ, from 256
//! of them; a comparison sort below); a crossing buffer also visits each window it covers,
//! which costs no more than reading their lists. Mapping steps to points is a table lookup
//! when the steps are dense (at most about 16n of them), a binary search otherwise. For model
//! graphs, where most tensors live a few steps and only a few live long, k_i is small and the
//! whole is O(n log n). Where many buffers live at once and fill few runs of bytes (all-live,
//! band traces), the dense index makes a placement O(log n) plus the runs it reads: O(n log n)
//! in all (1M buffers: all-live 0.8 s, band 0.8 s, where the point lists took 258 s).
//!
//! What stays superlinear in the general packer (every order but start order with best fit,
//! which the sweep packs in O(n log n): 1M buffers in 0.18-0.55 s of the planner call, see
//! the `sweep` module) is many buffers live at once in *fragmented* bytes (random
//! lifetimes over few steps, a compiler's long-lived activations under small temporaries): a
//! placement then reads every buffer overlapping it, k_i, and every run of free bytes between
//! them, r_i, and both grow with n there (random lifetimes over 1,000 steps: r_i about 140 at
//! 30,000 buffers and 410 at 100,000; k_i about 12 r_i). Reading the bytes' union instead of
//! the buffers (the dense index) does not help: its per-node sets are as fragmented as the
//! union. And no index over time avoids the r_i for best fit as defined here (the smallest gap
//! of the union over the buffer's lifetime): the union of several nodes' sets has gaps no
//! node's own gaps tell, so the smallest fitting one cannot be looked up per node; in
//! compiler traces nearly every gap fits (later buffers are smaller), so even enumerating only
//! the fitting gaps would be linear in them. Measured (`pack_bench --shapes`): random 100k
//! 5.1 s, compiler 100k 18 s; O(sum of k_i) in all. Memory: O(n) for the point lists,
//! O(l log m) for the tree of l long buffers; for the dense index O(n log n), and O(s) more per
//! short buffer of span s.

use std::cell::Cell;
use std::ops::RangeInclusive;

use crate::{Buffer, Packing};
use memplan_plugin_api::{PlanError, PlanErrorKind};

mod dense;
mod fit;
mod heap;
mod item;
mod radix;
pub(crate) mod sweep;
#[cfg(test)]
mod tests;
mod timeline;

pub use sweep::GapChoice;
pub use timeline::{live_bytes_at_points, Timeline};

use dense::*;
use fit::*;
use heap::*;
use item::*;
use radix::*;
pub(crate) use radix::{radix_sort, RadixRoom};

/// Buffers covering at most this many points are short (see the module documentation): in
/// a model, a tensor read by the next op. Short buffers are copied into the list of every
/// point they cover, so a larger value trades memory for fewer tree entries; measured with
/// the `pack_bench` example of `greedy-bestfit`.
pub const SHORT_SPAN: u32 = 2;

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
    /// Earliest lifetime start first; then the larger; then the lower index: the order of a
    /// linear scan over time, which with first fit packs streaming models tightly.
    Start,
}

impl Order {
    /// Every order with its option name, in the order they are documented.
    pub const ALL: [(&'static str, Order); 4] = [
        ("size", Order::Size),
        ("duration", Order::Duration),
        ("area", Order::Area),
        ("start", Order::Start),
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
    match pack_greedy_until(buffers, order, fit, &|| false) {
        Ok(packing) => packing,
        Err(Stopped) => unreachable!("a packing that is never asked to stop does not stop"),
    }
}

/// [`pack_greedy`] that asks `stop` whether to give up after [`STOP_FIRST_POLL_WORK`] units
/// of work, then every [`STOP_POLL_WORK`] (a placement costs one plus the buffers it is
/// compared with, a setup pass one per buffer), so that `--timeout` stops a planner within a
/// few milliseconds at any size, even where one placement compares with hundreds of
/// thousands (a planner passes its host context's `should_stop`). A packing smaller than the
/// first stretch always completes.
pub fn pack_greedy_until(
    buffers: &[Buffer],
    order: Order,
    fit: Fit,
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    pack_greedy_between(buffers, order, fit, &[], stop)
}

/// [`pack_greedy_until`] where no buffer may span one of the `barriers` (byte offsets,
/// ascending): with barriers at the budgets of memories stacked one above the other, each
/// buffer lands wholly in one memory, which is how the plan passes choose which tensors spill
/// to the next memory. A buffer with a fixed offset is kept where it is.
pub fn pack_greedy_between(
    buffers: &[Buffer],
    order: Order,
    fit: Fit,
    barriers: &[u64],
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    debug_assert!(barriers.is_sorted());
    if sweep::applies(buffers, order, fit) {
        if let Some(packing) = sweep::pack_start_best_fit(buffers, barriers, stop)? {
            return Ok(packing);
        }
    }
    let rules = Rules { fit, barriers };
    pack_narrow_first(buffers, PlacementKey::for_order(order, fit), rules, stop)
}

/// Packs `buffers` in lifetime-start order as one sweep over time, each buffer taking the gap
/// `choice` picks among the live ones (see the `sweep` module); `None` where buffers at fixed
/// offsets do not allow the sweep. [`sweep::GapChoice::Smallest`] gives [`pack_greedy_until`]'s
/// offsets in start order with best fit.
pub(crate) fn pack_start_order(
    buffers: &[Buffer],
    choice: sweep::GapChoice,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    sweep::pack_start_order(buffers, &[], choice, stop)
}

/// Packs `buffers` greedily in the order of `ranks` (lowest first; one per buffer, all
/// distinct; buffers with a fixed offset are placed first whatever their rank), each into
/// the gap `fit` picks: the packing an improvement search over the order evaluates.
pub fn pack_greedy_ranked(
    buffers: &[Buffer],
    ranks: &[u32],
    fit: Fit,
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    assert_eq!(ranks.len(), buffers.len(), "one rank per buffer");
    let rules = Rules { fit, barriers: &[] };
    pack_narrow_first(buffers, PlacementKey::Ranked(ranks), rules, stop)
}

/// Packs in `key` order. The time index holds sizes and offsets in 32 bits while they fit
/// (always, in a microcontroller's memory): a packing that outgrows them starts over with 64.
fn pack_narrow_first(
    buffers: &[Buffer],
    key: PlacementKey<'_>,
    rules: Rules,
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    let index = IndexChoice::Measured;
    match pack_in::<u32>(buffers, key, rules, WINDOW_POINTS, index, stop)? {
        Some(packing) => Ok(packing),
        None => Ok(
            pack_in::<u64>(buffers, key, rules, WINDOW_POINTS, index, stop)?
                .expect("every end fits in 64 bits"),
        ),
    }
}

/// Each buffer's rank in the order `order` and `fit` place them (0 first; buffers with a fixed
/// offset, placed before all others, ranked by the same key): the starting point of an
/// improvement search over the order ([`pack_greedy_ranked`]).
pub fn greedy_ranks(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u32> {
    let timeline = Timeline::new(buffers);
    let key = PlacementKey::for_order(order, fit);
    let mut items: Vec<Item<u64>> = buffers
        .iter()
        .enumerate()
        .map(|(index, buffer)| Item::new(index, buffer, timeline.span(buffer.lifetime)))
        .collect();
    items.sort_unstable_by_key(|item| key.of(item));
    let mut ranks = vec![0; buffers.len()];
    for (rank, item) in items.iter().enumerate() {
        ranks[item.index as usize] = rank as u32;
    }
    ranks
}

/// How a placement picks its gap: the fit, and the offsets no buffer may span.
#[derive(Clone, Copy)]
struct Rules<'a> {
    fit: Fit,
    barriers: &'a [u64],
}

/// A packing given up because its `stop` callback said so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

impl Stopped {
    /// The error a planner returns when its packing of `buffer_count` buffers stopped at the
    /// host's request (`--timeout`) before it had a complete plan: `Cancelled`, which the host
    /// reports as stopped at the time limit without a plan.
    pub fn into_plan_error(self, buffer_count: usize) -> PlanError {
        PlanError::new(
            PlanErrorKind::Cancelled,
            format!(
                "stopped at the time limit while placing {buffer_count} buffers, before every \
                 one had a place"
            ),
        )
    }
}

/// Work (placements plus buffers compared, or buffers passed over by a setup pass) between
/// two calls of a packing's `stop` callback: rare enough to cost nothing (a host's callback
/// reads the clock, tens of nanoseconds, and this much work takes tens of microseconds at
/// least), often enough to answer within a millisecond or two (a few thousand placements of
/// a crowded trace in the dense index, a pass of a sort over a few thousand buffers).
pub const STOP_POLL_WORK: u64 = 1 << 13;

/// Work a packing does before it first asks `stop`: a packing smaller than this (a few
/// thousand buffers, a millisecond's work or less) always completes, even asked to stop,
/// which is what lets a planner past its deadline still give its remaining arenas a greedy
/// plan, and its hill climbing a starting packing (the portfolio relies on both).
pub const STOP_FIRST_POLL_WORK: u64 = 1 << 16;

/// Asks a packing's `stop` callback after [`STOP_FIRST_POLL_WORK`] units of work, then once
/// per [`STOP_POLL_WORK`].
#[derive(Clone, Copy)]
pub(crate) struct Poller<'a> {
    stop: &'a dyn Fn() -> bool,
    /// Work left before `stop` is asked again.
    until_poll: u64,
}

impl<'a> Poller<'a> {
    pub(crate) fn new(stop: &'a dyn Fn() -> bool) -> Poller<'a> {
        Poller {
            stop,
            until_poll: STOP_FIRST_POLL_WORK,
        }
    }

    /// Counts `work` units done; `Err(Stopped)` when that ends a stretch and `stop` says to
    /// give up.
    #[inline]
    pub(crate) fn spent(&mut self, work: u64) -> Result<(), Stopped> {
        match self.until_poll.checked_sub(work) {
            Some(left) if left > 0 => {
                self.until_poll = left;
                Ok(())
            }
            _ => {
                self.until_poll = STOP_POLL_WORK;
                match (self.stop)() {
                    true => Err(Stopped),
                    false => Ok(()),
                }
            }
        }
    }
}

/// The greedy loop placing in `key` order, with the time index storing sizes and byte
/// offsets as `W`, over windows of `window_points` points; `None` when a size, an alignment
/// or an end does not fit in `W`.
fn pack_in<W: Word>(
    buffers: &[Buffer],
    key: PlacementKey<'_>,
    rules: Rules,
    window_points: u32,
    index: IndexChoice,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Packing>, Stopped> {
    let mut poller = Poller::new(stop);
    let count = buffers.len() as u64;
    let timeline = Timeline::new(buffers);
    if !W::fits(timeline.largest_value) {
        return Ok(None);
    }
    poller.spent(count)?;
    let windows = Windows::new(timeline.points.len() as u32, window_points);
    let item_of = |index: u32| {
        let buffer = &buffers[index as usize];
        Item::new(index as usize, buffer, timeline.span(buffer.lifetime))
    };
    // One pass (at a million buffers, each pass over them reads 32 MB from memory) sizes
    // the heap's lists, groups the buffers by window and sets aside the ones with a fixed
    // offset. Groups grow as they fill; buffers usually come in time order, so one group at
    // a time grows, in cache. Out of time order over sparse steps a buffer costs several
    // cache misses here (its span's search among the points, its group, its points' counts:
    // 0.19 s at 1,000,000 random-lifetime buffers over 5,000,000 steps), so the pass asks
    // `stop` as it goes: it ran 0.15 s past the critical-step search's deadline.
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
        poller.spent(1)?;
    }
    let halt = Cell::new(Halt::Running);
    if index != IndexChoice::Dense {
        let mut heap = Heap::<W>::new(room, buffers.len(), &mut poller)?;
        sort_groups(&mut groups, key, &mut poller)?;
        let watch = index == IndexChoice::Measured;
        let placed = place_fixed(&mut heap, &fixed).and_then(|()| {
            place_by_windows(
                &mut heap, &windows, &groups, key, rules, poller, watch, &halt,
            )
        });
        if halt.get() != Halt::Crowded {
            #[cfg(test)]
            LAST_INDEX.set(IndexChoice::PointLists);
            return finish(placed, heap, &halt);
        }
    }
    // Many buffers live at once, taking few runs of bytes between them: the dense index
    // reads those runs where the point lists read every buffer. It places in key order, one
    // buffer after the other (the windows keep point lists in cache; it reads none).
    let mut heap = DenseHeap::<W>::new(windows.point_count, buffers.len());
    poller.spent(count)?;
    let mut items: Vec<Item<W>> = groups.into_iter().flatten().collect();
    poller.spent(count)?;
    radix_sort(
        &mut items,
        &mut RadixRoom::new(buffers.len()),
        |item| key.of(item),
        &mut poller,
    )?;
    let placed = place_fixed(&mut heap, &fixed).and_then(|()| {
        let mut placer = Placer::new(&mut heap, rules, poller, false, &halt);
        items.iter().try_for_each(|item| placer.place(item))
    });
    #[cfg(test)]
    LAST_INDEX.set(IndexChoice::Dense);
    finish(placed, heap, &halt)
}

#[cfg(test)]
thread_local! {
    /// The index the last packing on this thread used, for tests.
    static LAST_INDEX: Cell<IndexChoice> = const { Cell::new(IndexChoice::Measured) };
}

/// Why placing ended before every buffer was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Halt {
    Running,
    /// `stop` said to give up.
    Stopped,
    /// The point lists were found crowded (see [`Crowding`]): start over with [`DenseHeap`].
    Crowded,
}

/// Which time index a packing uses: the point lists, switching to the dense index when they
/// turn out crowded ([`Crowding`]), or (in tests) one of them throughout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IndexChoice {
    Measured,
    #[cfg_attr(not(test), allow(dead_code))]
    PointLists,
    #[cfg_attr(not(test), allow(dead_code))]
    Dense,
}

/// Places the buffers with a fixed offset where they are; `None` when an end does not fit.
fn place_fixed<W: Word>(heap: &mut impl TimeIndex<W>, fixed: &[(Item<W>, u64)]) -> Option<()> {
    fixed
        .iter()
        .try_for_each(|(item, offset)| heap.place(item, *offset))
}

/// What a packing into `heap` came to, given what placing returned (`None` when an end did
/// not fit in `W` or when `halt` says why it stopped).
fn finish<W: Word>(
    placed: Option<()>,
    heap: impl TimeIndex<W>,
    halt: &Cell<Halt>,
) -> Result<Option<Packing>, Stopped> {
    match placed {
        Some(()) => Ok(Some(heap.into_packing())),
        None if halt.get() == Halt::Stopped => Err(Stopped),
        None => Ok(None),
    }
}

/// Places the buffers of `groups` (see [`Windows::group_of`], each sorted by `key`) window
/// by window, with the offsets placing them in `key` order
/// would give (see the module documentation); `None` when an end does not fit in `W`, or
/// when `halt` says why placing ended (`stop` said to give up, or with `watch`, the lists
/// are crowded).
#[allow(clippy::too_many_arguments)]
fn place_by_windows<W: Word>(
    heap: &mut Heap<W>,
    windows: &Windows,
    groups: &[Vec<Item<W>>],
    key: PlacementKey<'_>,
    rules: Rules,
    poller: Poller,
    watch: bool,
    halt: &Cell<Halt>,
) -> Option<()> {
    let mut placer = Placer::new(heap, rules, poller, watch, halt);
    let (inside, crossing) = groups.split_at(windows.count);
    // Per window, the next of its buffers to place.
    let mut next = vec![0usize; windows.count];
    // Places window `window`'s buffers that come before `limit` in placement order.
    let mut place_window_before =
        |placer: &mut Placer<W, Heap<W>>, window: usize, limit: Option<&Item<W>>| {
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
/// the sorting costs about the same per buffer at a million buffers as at a thousand. Asks
/// `stop` between the passes of each sort.
fn sort_groups<W: Word>(
    groups: &mut [Vec<Item<W>>],
    key: PlacementKey<'_>,
    poller: &mut Poller,
) -> Result<(), Stopped> {
    // One working room, for the largest group, serves every group's sort, rather than an
    // allocation per group (hundreds at a million buffers).
    let largest = groups.iter().map(Vec::len).max();
    let mut room = RadixRoom::new(largest.unwrap_or(0));
    for group in groups {
        radix_sort(group, &mut room, |item| key.of(item), poller)?;
    }
    Ok(())
}

/// What a placement needs of the buffers placed so far: which bytes the ones overlapping a
/// buffer in time take, and recording a new one. [`Heap`] (point lists) serves most traces,
/// [`DenseHeap`] those where many buffers live at once.
trait TimeIndex<W> {
    /// Places `item` at `offset`; `None` when its end does not fit in `W`.
    fn place(&mut self, item: &Item<W>, offset: u64) -> Option<()>;
    /// Replaces `occupied` with byte ranges covering exactly the bytes of the placed buffers
    /// whose lifetimes overlap `item`'s (ranges may overlap, repeat or merge buffers).
    fn collect_overlapping(&self, item: &Item<W>, occupied: &mut Vec<Bytes<W>>);
    /// Work done recording placements since the last call, beyond one unit a placement (the
    /// dense index records into many sets): counted towards the next stop request.
    fn take_work(&mut self) -> u64 {
        0
    }
    fn into_packing(self) -> Packing;
}

/// Below this many byte ranges, a placement sorts them by comparison; from it on, by radix.
const RADIX_SORT_FROM: usize = 256;

/// Sorts `ranges` by offset, with `spare` as working room. A placement meeting thousands of
/// placed buffers (random lifetimes over few steps, a compiler's long-lived activations)
/// spends most of its time here: a least-significant-digit radix sort over the offset's
/// bytes that differ (two or three for offsets below 16 MiB) takes a fraction of a
/// comparison sort's time there.
fn sort_by_offset<W: Word>(ranges: &mut Vec<Bytes<W>>, spare: &mut Vec<Bytes<W>>) {
    if ranges.len() < RADIX_SORT_FROM {
        ranges.sort_unstable_by_key(|bytes| bytes.offset);
        return;
    }
    let (mut all_ones, mut all_zeros) = (0u64, u64::MAX);
    for bytes in ranges.iter() {
        let offset = bytes.offset.widen();
        all_ones |= offset;
        all_zeros &= offset;
    }
    // The bits on which offsets differ.
    let differing = all_ones & !all_zeros;
    spare.clear();
    spare.resize(ranges.len(), Bytes::default());
    let mut counts = [0u32; 256];
    for shift in (0..64).step_by(8) {
        if (differing >> shift) & 0xff == 0 {
            continue;
        }
        let digit = |bytes: &Bytes<W>| ((bytes.offset.widen() >> shift) & 0xff) as usize;
        counts.fill(0);
        for bytes in ranges.iter() {
            counts[digit(bytes)] += 1;
        }
        let mut total = 0;
        for count in counts.iter_mut() {
            let here = *count;
            *count = total;
            total += here;
        }
        for bytes in ranges.iter() {
            let slot = &mut counts[digit(bytes)];
            spare[*slot as usize] = *bytes;
            *slot += 1;
        }
        std::mem::swap(ranges, spare);
    }
}

/// How many runs of bytes `occupied` (sorted by offset) covers: ranges overlapping or
/// touching one another make one run.
fn count_runs<W: Word>(occupied: &[Bytes<W>]) -> u64 {
    let mut runs = 0;
    let mut end = None;
    for bytes in occupied {
        if end.is_none_or(|end| bytes.offset > end) {
            runs += 1;
        }
        end = end.max(Some(bytes.end));
    }
    runs
}

/// Places buffers one at a time into a [`TimeIndex`].
struct Placer<'a, W, H> {
    heap: &'a mut H,
    /// Byte ranges of the placed buffers overlapping the current one in time; reused.
    occupied: Vec<Bytes<W>>,
    /// Working room for sorting `occupied`; reused.
    spare: Vec<Bytes<W>>,
    rules: Rules<'a>,
    poller: Poller<'a>,
    halt: &'a Cell<Halt>,
    /// Watches for crowded time: `None` when not watching (any more).
    crowding: Option<Crowding>,
}

/// How crowded the time index is: with every buffer live at once, a placement reads every
/// placed buffer from the point lists, though they take one run of bytes between them.
/// Placements reading many entries count them and the runs they merge into; once enough
/// were read to tell (a few milliseconds' work), many entries per placement and to a run
/// mean the dense index would read far less, and the packing starts over with it. Few per
/// placement mean most placements are cheap so far (a model's few tensors live throughout
/// meet many, the rest a handful), few to a run that the bytes are fragmented ([`DenseHeap`]
/// reads each run from several of its sets): either way the counts start over for another
/// period, since crowding can grow as the packing fills (in a band trace each placement meets
/// more placed buffers than the one before). Starting over late costs at most the work done
/// so far: the packing stays within about twice what the better index alone would take.
#[derive(Default)]
struct Crowding {
    placements: u64,
    /// Entries read, and the runs they merged into, by placements reading many.
    entries: u64,
    runs: u64,
}

impl Crowding {
    /// Placements reading fewer entries are not counted: the common case costs nothing.
    const COUNTED_FROM: usize = 64;
    /// Entries read before deciding.
    const DECIDE_AFTER: u64 = 1 << 20;
    /// Entries per run from which the dense index is faster (measured with all-live,
    /// staircase and random-span traces: it reads each run from up to ~2 log n sets).
    const DENSE_FROM: u64 = 64;
    /// Entries per placement (all placements) from which the dense index is faster
    /// (measured with the model-like traces of `pack_bench`, where it is not).
    const DENSE_FROM_PER_PLACEMENT: u64 = 256;
    /// The most entries one placement counts for. A model's few tensors live throughout are
    /// placed one after another (smallest last), and at 2,000,000 buffers each read millions
    /// of entries. Counted in full, one of them filled a period of the watch by itself, right
    /// after the one before had ended the last period, and the packing started over with the
    /// dense index, several times slower on the rest of such a trace (`model:2000000:3499`:
    /// 4.5-4.7 s, where 1,900,000 buffers of the same generator took 0.64 s). The cost: where
    /// fewer than a quarter of the placements read many entries and the rest few (counted,
    /// they average below DENSE_FROM_PER_PLACEMENT), the packing stays on the point lists,
    /// though each of those placements reads all its entries there.
    const MOST_PER_PLACEMENT: u64 = 4 * Crowding::DENSE_FROM_PER_PLACEMENT;
}

impl<'a, W: Word, H: TimeIndex<W>> Placer<'a, W, H> {
    fn new(
        heap: &'a mut H,
        rules: Rules<'a>,
        poller: Poller<'a>,
        watch: bool,
        halt: &'a Cell<Halt>,
    ) -> Self {
        Placer {
            heap,
            occupied: Vec::new(),
            spare: Vec::new(),
            rules,
            poller,
            halt,
            crowding: watch.then(Crowding::default),
        }
    }

    /// Places `item` in the gap [`choose_gap`] picks; `None` when its end does not fit in `W`
    /// or when placing is to end (then `halt` says why).
    fn place(&mut self, item: &Item<W>) -> Option<()> {
        self.heap.collect_overlapping(item, &mut self.occupied);
        let work = 1 + self.occupied.len() as u64 + self.heap.take_work();
        if self.poller.spent(work).is_err() {
            self.halt.set(Halt::Stopped);
            return None;
        }
        sort_by_offset(&mut self.occupied, &mut self.spare);
        if let Some(crowding) = &mut self.crowding {
            crowding.placements += 1;
            if self.occupied.len() >= Crowding::COUNTED_FROM {
                // A placement counts for at most MOST_PER_PLACEMENT entries, its runs in
                // proportion, so that a few placements reading most of the index cannot
                // decide a period between them.
                let read = self.occupied.len() as u64;
                let counted = read.min(Crowding::MOST_PER_PLACEMENT);
                crowding.entries += counted;
                crowding.runs += (count_runs(&self.occupied) * counted).div_ceil(read);
                if crowding.entries >= Crowding::DECIDE_AFTER {
                    if crowding.entries >= Crowding::DENSE_FROM * crowding.runs
                        && crowding.entries
                            >= Crowding::DENSE_FROM_PER_PLACEMENT * crowding.placements
                    {
                        self.halt.set(Halt::Crowded);
                        return None;
                    }
                    *crowding = Crowding::default();
                }
            }
        }
        let ranges = self.occupied.iter().map(|bytes| bytes.widen());
        let offset = choose_gap(
            ranges,
            item.size(),
            item.alignment(),
            self.rules.fit,
            self.rules.barriers,
        );
        self.heap.place(item, offset)
    }
}
