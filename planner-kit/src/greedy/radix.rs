//! Placement order: a distinct key per buffer ([`PlacementKey`]) and the radix sort over it.

use super::item::{Item, Word};
use super::{Fit, Order, Poller, Stopped};

/// Placement order as a key per buffer: buffers are placed in increasing key order, and
/// every key is distinct (the buffer index breaks ties).
///
/// `Size` with first fit is TFLite Micro's greedy planner exactly: largest first, and buffers
/// of equal size in reverse model order (TFLM fills its sort array from the back before a
/// stable sort). That tie rule, not the lifetime one, is what reproduces TFLM's arena figures
/// on real models (vww_96_int8: 73728, where the lifetime tie rule gives 64512).
#[derive(Clone, Copy, Debug)]
pub(super) enum PlacementKey<'a> {
    /// Largest first, then the longest, then the lowest index.
    SizeThenDuration,
    /// Largest first, then the highest index (TFLM).
    SizeThenReverseIndex,
    /// Longest first, then the largest, then the lowest index.
    DurationThenSize,
    /// Largest size x duration first, then the largest, then the lowest index.
    AreaThenSize,
    /// Earliest start first, then the largest, then the lowest index.
    StartThenSize,
    /// Lowest rank first: `ranks[index]`, all distinct (see [`pack_greedy_ranked`]).
    Ranked(&'a [u32]),
}

impl PlacementKey<'_> {
    pub(super) fn for_order(order: Order, fit: Fit) -> PlacementKey<'static> {
        match (order, fit) {
            (Order::Start, _) => PlacementKey::StartThenSize,
            (Order::Size, Fit::First) => PlacementKey::SizeThenReverseIndex,
            (Order::Size, Fit::Best) => PlacementKey::SizeThenDuration,
            (Order::Duration, _) => PlacementKey::DurationThenSize,
            (Order::Area, _) => PlacementKey::AreaThenSize,
        }
    }

    /// The key of `item`, as a 192-bit number (high word first) compared as a tuple:
    /// "larger first" fields are stored complemented.
    #[inline]
    pub(super) fn of<W: Word>(self, item: &Item<W>) -> (u128, u64) {
        let (size, duration, index) = (item.size(), item.duration, item.index);
        let wide = |high: u64, low: u64| (u128::from(high) << 64) | u128::from(low);
        let pair = |high: u32, low: u32| (u64::from(high) << 32) | u64::from(low);
        match self {
            PlacementKey::SizeThenDuration => (wide(!size, pair(!duration, index)), 0),
            PlacementKey::SizeThenReverseIndex => (wide(!size, u64::from(!index)), 0),
            PlacementKey::StartThenSize => (wide(u64::from(item.lo), !size), u64::from(index)),
            PlacementKey::Ranked(ranks) => (u128::from(ranks[index as usize]), 0),
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
pub(super) const KEY_BYTES: usize = 24;

/// Working room for [`radix_sort`]ing up to `spare.len()` items, reused from sort to sort.
pub(crate) struct RadixRoom<T> {
    pub(super) spare: Vec<T>,
    /// Per key byte, how many items have each value.
    pub(super) counts: Box<[[u32; 256]; KEY_BYTES]>,
}

impl<T: Copy + Default> RadixRoom<T> {
    pub(crate) fn new(capacity: usize) -> RadixRoom<T> {
        RadixRoom {
            spare: vec![T::default(); capacity],
            counts: Box::new([[0; 256]; KEY_BYTES]),
        }
    }
}

/// Sorts `items` by `key`, stably (items with equal keys keep their order), with `room` (for
/// at least `items.len()` items) as working room: a least-significant-digit radix sort over
/// the 24 key bytes that skips the bytes on which all keys agree (most of them, for real
/// sizes, durations and indices). One pass finds those bytes, one counts the values of the
/// others; then O(n) per byte sorted, sequential reads and 256 streams of writes; small
/// inputs use a comparison sort. Counts each pass over the items with `poller` (at a
/// million, a pass takes a few milliseconds), and gives up with them unsorted when it says
/// to stop.
#[inline]
pub(crate) fn radix_sort<T: Copy>(
    items: &mut [T],
    room: &mut RadixRoom<T>,
    key: impl Fn(&T) -> (u128, u64),
    poller: &mut Poller,
) -> Result<(), Stopped> {
    if items.len() <= 64 {
        items.sort_by_key(&key);
        return Ok(());
    }
    // Byte `position` of a key, 0 the least significant.
    let byte = |(major, minor): (u128, u64), position: usize| -> usize {
        let bits = match position {
            0..8 => minor >> (8 * position),
            _ => (major >> (8 * (position - 8))) as u64,
        };
        (bits & 0xff) as usize
    };
    // The bits on which keys differ, as a key: counting only their bytes spares most of
    // the counting pass's work.
    let (mut ones, mut zeros) = ((0u128, 0u64), (u128::MAX, u64::MAX));
    for item in items.iter() {
        let (major, minor) = key(item);
        ones = (ones.0 | major, ones.1 | minor);
        zeros = (zeros.0 & major, zeros.1 & minor);
    }
    poller.spent(items.len() as u64)?;
    let differing = (ones.0 & !zeros.0, ones.1 & !zeros.1);
    let mut positions = [0usize; KEY_BYTES];
    let mut position_count = 0;
    for position in (0..KEY_BYTES).filter(|&position| byte(differing, position) != 0) {
        positions[position_count] = position;
        position_count += 1;
    }
    let positions = &positions[..position_count];
    let spare = &mut room.spare[..items.len()];
    let counts = &mut *room.counts;
    for &position in positions {
        counts[position].fill(0);
    }
    for item in items.iter() {
        let key = key(item);
        for &position in positions {
            counts[position][byte(key, position)] += 1;
        }
    }
    let mut sorted_in_spare = false;
    for &position in positions {
        poller.spent(items.len() as u64)?;
        let count = &counts[position];
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
    Ok(())
}
