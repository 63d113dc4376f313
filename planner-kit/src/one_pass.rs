//! One-pass packing: a packing of any arena in one pass over time, several times cheaper than
//! the start-order sweep, for when the time left is too short for that sweep (a sweep of
//! 1,000,000 buffers takes 0.25-0.85 s on the 2-core machine we measure on) and a packing must
//! still come back within the limit. It is a packing to fall back on, not one to compete with
//! the sweeps: its height is well above theirs.
//!
//! # Algorithm
//!
//! Buffers at a fixed offset keep it; the others are packed above the highest of them, so
//! that none overlaps a fixed one. Those are walked in order of their first step, one of two
//! ways, chosen by how many buffers are live at a step on average (the sum of the lifetimes
//! over the steps spanned):
//!
//! - **Few live** (at most [`FEW_LIVE`]): best fit among the live buffers. The live buffers
//!   are kept in a list sorted by offset; a buffer drops those whose last step is before its
//!   first, then takes the smallest gap between them that fits (the top if none does). Each
//!   buffer costs a scan of the live list, so this is only cheap where it is short.
//! - **Many live**: size classes. Every size is rounded up to its class: sizes up to 16 bytes
//!   are classes of their own, larger ones are rounded up to `m x 2^e` with `m` in 9..=16, so
//!   a buffer gets at most 1/8 more bytes than it asked for. Each class owns a region of the
//!   arena cut into slots of the class size (rounded up to the largest alignment among the
//!   classes of the buffers that held one). A buffer takes its class's most recently freed slot, else a free
//!   slot of one of the next [`BORROWED_CLASSES`] classes (the smallest), else a new slot of
//!   its class, and gives the slot back after its last step. A region is as tall as its slot
//!   size times the most of its slots held at once: close to the bound where many buffers of
//!   every class are live at each step, above it where few are (each class then holds a
//!   region nearly alone; borrowing halves that on the generated traces measured).
//!
//! Invariants: a buffer is placed in a gap among every buffer live at its first step (few
//! live), or in a slot that no buffer live at its first step holds (many live; the regions
//! do not overlap); a buffer placed later starts no earlier, so it is live together with an
//! earlier one exactly when that one is still live at its first step. So no two buffers live
//! together share a byte.
//!
//! Measured (release build, this 2-core machine; generated traces of the kit's
//! `testing::generated_instance`, seed 1 unless given; height over the lower bound, against
//! plain best fit by start; the one pass's times are the fastest and slowest median of two
//! or three runs of `examples/one_pass_bench --runs 5` where given as a range, 2026-11-28):
//!
//! | trace | live per step (average) | one pass | best fit by start |
//! |---|---|---|---|
//! | random, 1M | 48,853 | 1.053, 47-55 ms | 1.0049, 447 ms |
//! | random, 1M, seed 3 | 48,832 | 1.062, 49-51 ms | 1.0049, 431 ms |
//! | random, 1M over 1M steps, seed 2 | 50 | 1.564, 64-65 ms | 1.0949, 349 ms |
//! | random, 400k over 400k steps, seed 6 | 50 | 1.502, 21 ms | 1.0807, 113 ms |
//! | random, 700k over 20k steps, seed 5 | 1,766 | 1.130, 29-32 ms | 1.0263, 259 ms |
//! | model-like, 1M | 11 | 1.147, 74-78 ms | 1.1762, 234 ms |
//! | model-like, 2M | 11 | 1.141, 176-196 ms | 1.1701, 452 ms |
//! | random, 2M over 10M steps, seed 6 | 10 | 1.049, 243-253 ms | |
//! | random, 2M over 700k steps, seed 219 | 144 | 1.371, 188-217 ms | |
//! | training (compiler), 1M, seed 2 | 82,412 | 1.145, 45-46 ms | 1.0001, 429 ms |
//! | training, even sizes, 300k, seed 3 | 24,633 | 1.127, 10-12 ms | 1.0015, 116 ms |
//! | band, 1M | 5,970 | 1.000, 37-39 ms | 1.0000, 146 ms |
//! | all-live, 1M | 1,000,000 | 1.041, 30-32 ms | 1.0000, 145 ms |
//!
//! Without borrowing, the size classes gave 3.04 on the 1M trace over 1M steps and 7.49 on
//! the model-like one (now packed by best fit among few); borrowing from up to 8 classes
//! gave 1.44 there but 1.245 on the training trace.
//!
//! Cost: the buffers ordered by first step (and by last step for the size classes): a
//! counting sort where the steps are few or come nearly in order, else a radix sort by step
//! (see `by_step`), O(n) either way; then the pass, O(n) for the size classes and
//! O(n x live) for few live.

use std::time::Duration;

use crate::greedy::{radix_sort, Poller, RadixRoom};
use crate::{Buffer, Packing, Stopped};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::Lifetime;

/// Buffers placed between two calls of a one-pass packing's `stop` callback.
const ONE_PASS_POLL_BUFFERS: usize = 4096;

/// Time to reckon per buffer for the one-pass packing where a planner must know it will be done
/// in time (the portfolio and `exact` before making it to stand in for what a time limit cut
/// short; `greedy-bestfit` likewise): the slowest measured, with the lower bound found beside it
/// on the other core. Alone it took 80-120 ns a buffer at 2,000,000 buffers; with the bound
/// beside it and the kit's passes around it, the plan came 0.19-0.50 s after the call on six
/// generated traces of 2,000,000 buffers, and 0.06-0.14 s on four of 1,000,000. The cost per
/// buffer grows with the arena (its arrays outgrow the caches), so no rate fits both: with 150
/// ns, 2 runs of 36 with 0.25 s at 2,000,000 buffers came 3-8 ms past the allowance; with 170
/// ns 0.1 s at 1,000,000 buffers would get the no-reuse packing too, where the one-pass
/// packing comes within it.
pub const ONE_PASS_SLOWEST_PER_BUFFER: Duration = Duration::from_nanos(150);

/// What to reckon the one-pass packing of `count` buffers may take:
/// [`ONE_PASS_SLOWEST_PER_BUFFER`] each.
pub fn one_pass_at_the_slowest(count: usize) -> Duration {
    crate::time_limit::for_buffers(ONE_PASS_SLOWEST_PER_BUFFER, count)
}

/// Arenas with at most this many buffers live at a step on average are packed by best fit
/// among the live buffers; those with more by size classes (see the module documentation).
pub const FEW_LIVE: u64 = 16;

/// A buffer whose own size class has no free slot takes a free one of the next this many
/// classes (at most half an octave larger) before its class grows a slot.
pub const BORROWED_CLASSES: usize = 4;

/// The number of size classes: sizes 1..=16, then 8 per power of two from 2^4 to 2^64.
const CLASSES: usize = 17 + 8 * 60;

/// Packs `buffers` in one pass over time (see the module documentation).
pub fn pack_one_pass(buffers: &[Buffer]) -> Packing {
    match pack_one_pass_until(buffers, &|| false) {
        Ok(packing) => packing,
        Err(Stopped) => unreachable!("a packing that is never asked to stop does not stop"),
    }
}

/// [`pack_one_pass`] that asks `stop` whether to give up every few thousand buffers of its
/// pass (not during its sorts: 10-40 ms at 1,000,000 buffers).
pub fn pack_one_pass_until(
    buffers: &[Buffer],
    stop: &dyn Fn() -> bool,
) -> Result<Packing, Stopped> {
    let base = buffers
        .iter()
        .filter_map(|buffer| buffer.fixed_offset.get().map(|offset| offset + buffer.size))
        .max()
        .unwrap_or(0);
    let packed: Vec<u32> = (0..buffers.len() as u32)
        .filter(|&index| buffers[index as usize].fixed_offset.is_none())
        .collect();
    let mut offsets: Vec<u64> = buffers
        .iter()
        .map(|buffer| buffer.fixed_offset.get().unwrap_or(0))
        .collect();
    let starts = starts_of(buffers, &packed);
    if average_live_of(packed.iter().map(|&index| buffers[index as usize].lifetime)) <= FEW_LIVE {
        best_fit_among_few(buffers, &starts, base, &mut offsets, stop)?;
    } else {
        size_classes(buffers, &starts, base, &mut offsets, stop)?;
    }
    Ok(Packing::at(buffers, offsets))
}

/// Whether the pass should ask `stop` after `placed` buffers, and `stop`'s answer.
fn stopped(placed: usize, stop: &dyn Fn() -> bool) -> Result<(), Stopped> {
    match placed % ONE_PASS_POLL_BUFFERS == ONE_PASS_POLL_BUFFERS - 1 && stop() {
        true => Err(Stopped),
        false => Ok(()),
    }
}

/// The buffers `packed` (indices into `buffers`, ascending) as `first step << 32 | index`,
/// ascending ([`by_step`]).
fn starts_of(buffers: &[Buffer], packed: &[u32]) -> Vec<u64> {
    by_step(packed.len(), |item| {
        let index = packed[item];
        (buffers[index as usize].lifetime.first, index)
    })
}

/// `count` items as `step << 32 | tag`, `(step, tag)` being `item(i)` for item `i`,
/// ascending by step, the items of a step in item order.
///
/// A counting sort where the steps are few (their counters stay in cache) or the items come
/// nearly in step order (the counters are then read in order, as for model-like traces),
/// else a radix sort by step (stable). Counting over many steps in random order missed the
/// cache at every item: 2,000,000 random lifetimes over 4,000,000 steps took 0.44-0.48 s to
/// pack, with the radix sort 0.27-0.28 s; 1,000,000 over 1,000,000 steps 0.13 s, now
/// 0.10-0.11 s. Counting stays where it is quicker: `random:1000000` (1,000 steps) 93 ms, by
/// radix 101 ms; `model:1000000` (in step order) 95 ms, by radix 115 ms.
fn by_step(count: usize, item: impl Fn(usize) -> (u32, u32)) -> Vec<u64> {
    let key = |at: usize| {
        let (step, tag) = item(at);
        (u64::from(step) << 32) | u64::from(tag)
    };
    // The lowest and highest step, and how often an item's step is below the one before.
    let (low, high, descents, _) = (0..count).fold(
        (u32::MAX, 0u32, 0usize, 0u32),
        |(low, high, descents, before), at| {
            let (at, _) = item(at);
            (
                low.min(at),
                high.max(at),
                descents + usize::from(at < before),
                at,
            )
        },
    );
    if count == 0 {
        return Vec::new();
    }
    let span = (high - low) as usize + 1;
    let counting = span <= 4 * count + 1024
        && (span <= COUNTED_STEPS.max(count / 2) || descents <= count / NEARLY_IN_ORDER);
    if !counting {
        let mut keys: Vec<u64> = (0..count).map(key).collect();
        let never = || false;
        let sorted = radix_sort(
            &mut keys,
            &mut RadixRoom::new(count),
            |&key| (u128::from(key >> 32), 0),
            &mut Poller::new(&never),
        );
        debug_assert!(sorted.is_ok(), "never stopped");
        return keys;
    }
    // Counting sort, in item order: each step's items stay in that order.
    let mut first_at = vec![0usize; span + 1];
    for at in 0..count {
        first_at[(item(at).0 - low) as usize + 1] += 1;
    }
    for at in 1..first_at.len() {
        first_at[at] += first_at[at - 1];
    }
    let mut keys = vec![0u64; count];
    for at in 0..count {
        let key = key(at);
        let slot = &mut first_at[((key >> 32) as u32 - low) as usize];
        keys[*slot] = key;
        *slot += 1;
    }
    keys
}

/// Steps up to which [`by_step`] counts whatever the order (or up to half as many steps as
/// items, if more): their counters (8 bytes each) fit in a core's cache, or each is met
/// twice on average (`compiler:1000000:2`, 500,000 steps: 56-64 ms counting, 70-77 ms by
/// radix).
const COUNTED_STEPS: usize = 1 << 16;

/// [`by_step`] counts over more steps where at most one buffer in this many has a step
/// below the one before.
const NEARLY_IN_ORDER: usize = 8;

/// How many buffers are live at a step on average over the steps they span (the sum of
/// their lifetimes over the span): where it is at most [`FEW_LIVE`], a placement that looks
/// at every buffer live beside it (this packing's best fit, greedy packing in any order) sees
/// few. O(n).
pub fn average_live(buffers: &[Buffer]) -> u64 {
    average_live_of(buffers.iter().map(|buffer| buffer.lifetime))
}

/// [`average_live`] of the buffers with these lifetimes, in one pass over them (three
/// passes took 11-19 ms at 2,000,000 buffers, and a large arena asks up to three times).
fn average_live_of(lifetimes: impl Iterator<Item = Lifetime>) -> u64 {
    let (first, last, steps) =
        lifetimes.fold((u32::MAX, 0u32, 0u64), |(first, last, steps), lifetime| {
            (
                first.min(lifetime.first),
                last.max(lifetime.last),
                steps + u64::from(lifetime.last - lifetime.first) + 1,
            )
        });
    match steps {
        0 => 0,
        _ => steps / (u64::from(last - first) + 1),
    }
}

/// The tag (a buffer's index, or its position in start order) and the step of a key of
/// [`by_step`].
fn split(key: u64) -> (usize, u32) {
    (key as u32 as usize, (key >> 32) as u32)
}

/// Places the buffers of `starts` (see [`by_step`]) from `base` up, each in the smallest gap
/// among the buffers live at its first step that fits it.
fn best_fit_among_few(
    buffers: &[Buffer],
    starts: &[u64],
    base: u64,
    offsets: &mut [u64],
    stop: &dyn Fn() -> bool,
) -> Result<(), Stopped> {
    /// A placed buffer: its offset, its end (offset + size) and its last step.
    #[derive(Clone, Copy)]
    struct Live {
        offset: u64,
        end: u64,
        last: u32,
    }
    // What placing needs of each buffer (16 bytes: its size, last step and alignment's
    // power of two), gathered in start order by a loop of its own, where the cache misses of
    // buffers out of time order overlap: read in the placing loop, each miss stalled it
    // (2,000,000 random-lifetime buffers over 10,000,000 steps: 0.50 s, with the gather
    // 0.36 s; in time order, as model-like traces come, the same time).
    let placing: Vec<(u64, u32, u32)> = starts
        .iter()
        .map(|&key| {
            let buffer = &buffers[split(key).0];
            let alignment = buffer.alignment.max(1).trailing_zeros();
            (buffer.size, buffer.lifetime.last, alignment)
        })
        .collect();
    // Ascending by offset.
    let mut live: Vec<Live> = Vec::new();
    // The offsets in start order, put in place by a loop of their own at the end: written in
    // the placing loop, each write out of buffer order missed the cache in its way
    // (2,000,000 buffers over 10,000,000 steps: 0.41 s, this way 0.29 s).
    let mut in_start_order = Vec::with_capacity(starts.len());
    for (placed, (&key, &(size, last, alignment))) in starts.iter().zip(&placing).enumerate() {
        stopped(placed, stop)?;
        let first = split(key).1;
        // Alignments are powers of two: aligning is masking (`align_up` divides, and did so
        // at every live buffer).
        let mask = (1u64 << alignment) - 1;
        let align = |at: u64| at.checked_add(mask).map_or(u64::MAX, |at| at & !mask);
        // One pass over the live list drops the buffers whose last step is before this one's
        // first (moving the others down over them) and finds the smallest gap that fits
        // between those kept: (its size, its offset, where it goes in `live`; `usize::MAX`
        // for none). Written without branches on the buffers met, which the processor could
        // not foretell.
        let mut best = (u64::MAX, 0u64, usize::MAX);
        let mut below = base;
        let mut kept = 0;
        for read in 0..live.len() {
            let placed = live[read];
            let alive = placed.last >= first;
            let offset = align(below);
            let gap = placed.offset.wrapping_sub(below);
            if alive & (offset.saturating_add(size) <= placed.offset) & (gap < best.0) {
                best = (gap, offset, kept);
            }
            below = if alive { below.max(placed.end) } else { below };
            live[kept] = placed;
            kept += usize::from(alive);
        }
        live.truncate(kept);
        let (offset, position) = match best {
            (_, offset, position) if position != usize::MAX => (offset, position),
            _ => (align(below), live.len()),
        };
        in_start_order.push(offset);
        let end = offset.saturating_add(size);
        live.insert(position, Live { offset, end, last });
    }
    for (&key, &offset) in starts.iter().zip(&in_start_order) {
        offsets[split(key).0] = offset;
    }
    Ok(())
}

/// The size class of `size` (an index below [`CLASSES`]) and its size, at least `size`.
fn size_class(size: u64) -> (usize, u64) {
    if size <= 16 {
        return (size as usize, size);
    }
    // The class size is m x 2^shift with m in 9..=16: `shift` keeps the top four bits of
    // size - 1 (8..=15), and one more of them rounds it up.
    let bits = 64 - (size - 1).leading_zeros();
    let shift = bits - 4;
    let top = (size - 1) >> shift;
    let class_size = u64::try_from(u128::from(top + 1) << shift).unwrap_or(u64::MAX);
    let index = 17 + 8 * (shift as usize - 1) + (top as usize - 8);
    (index, class_size)
}

/// Places the buffers of `starts` (see [`starts_of`]) from `base` up, by size class.
///
/// Every array the pass reads and writes is indexed by position in start order, so the pass
/// reads them in order, and a buffer that gives its slot back started shortly before the
/// buffer placed (its data is still in cache). What the pass needs of each buffer (its own
/// class, its last step) is gathered in start order by a loop of its own, where the cache
/// misses of buffers out of time order overlap; and the buffers are ordered by last step
/// carrying their position in start order. Indexed by buffer instead, every placement missed
/// the cache twice and every slot given back twice more: 2,000,000 random lifetimes over
/// 700,000 steps took 272-377 ms (median of 5 runs, two runs of `examples/one_pass_bench`),
/// now 188-217 ms; 1,000,000 over 1,000 steps 77-85 ms, now 47-55 ms; the same heights.
fn size_classes(
    buffers: &[Buffer],
    starts: &[u64],
    base: u64,
    offsets: &mut [u64],
    stop: &dyn Fn() -> bool,
) -> Result<(), Stopped> {
    let mut class_size = vec![0u64; CLASSES];
    // Per class, the largest alignment of its own buffers, then of those holding its slots.
    let mut own_alignment = vec![1u64; CLASSES];
    // Each buffer's own class and last step, found in buffer order (a pass over the buffers
    // in order) as `last step << 16 | own class`, then gathered in start order from that
    // array, a quarter of the buffers' bytes, into `class_at` (per position in start order:
    // the own class, then the class whose slot the buffer holds) and `last_at`.
    let mut own_and_last = vec![0u64; buffers.len()];
    for (index, buffer) in buffers.iter().enumerate() {
        if buffer.fixed_offset.is_none() {
            let (own, size) = size_class(buffer.size);
            class_size[own] = size;
            own_alignment[own] = own_alignment[own].max(buffer.alignment);
            own_and_last[index] = (u64::from(buffer.lifetime.last) << 16) | own as u64;
        }
    }
    let mut class_at = Vec::with_capacity(starts.len());
    let mut last_at = Vec::with_capacity(starts.len());
    for &key in starts {
        let own_and_last = own_and_last[split(key).0];
        class_at.push(own_and_last as u16);
        last_at.push((own_and_last >> 16) as u32);
    }
    drop(own_and_last);
    let ends = by_step(starts.len(), |position| {
        (last_at[position], position as u32)
    });
    drop(last_at);
    let mut slot_at = vec![0u32; starts.len()];
    let mut alignment = vec![1u64; CLASSES];
    let mut free_slots: Vec<Vec<u32>> = vec![Vec::new(); CLASSES];
    let mut slots = vec![0u32; CLASSES];
    let mut ends = ends.iter().map(|&key| split(key)).peekable();
    for (position, &key) in starts.iter().enumerate() {
        stopped(position, stop)?;
        let first = split(key).1;
        // Buffers whose last step is before this one's first give their slots back.
        while let Some((ended, _)) = ends.next_if(|&(_, last)| last < first) {
            free_slots[usize::from(class_at[ended])].push(slot_at[ended]);
        }
        let own = usize::from(class_at[position]);
        // Its own class's free slot, else the smallest free one of the next few classes,
        // else a new one of its own class.
        let class = (own..(own + 1 + BORROWED_CLASSES).min(CLASSES))
            .find(|&class| !free_slots[class].is_empty())
            .unwrap_or(own);
        alignment[class] = alignment[class].max(own_alignment[own]);
        let slot = free_slots[class].pop().unwrap_or_else(|| {
            slots[class] += 1;
            slots[class] - 1
        });
        class_at[position] = class as u16;
        slot_at[position] = slot;
    }
    // The regions one after another from `base`, the most aligned first so that little is
    // lost to aligning their starts: (start, slot size) per class.
    let mut classes: Vec<usize> = (0..CLASSES).filter(|&class| slots[class] > 0).collect();
    classes.sort_unstable_by_key(|&class| std::cmp::Reverse(alignment[class]));
    let mut region = vec![(0u64, 0u64); CLASSES];
    let mut top = base;
    for class in classes {
        let slot_size = align_up(class_size[class], alignment[class]);
        let start = align_up(top, alignment[class]);
        region[class] = (start, slot_size);
        top = start.saturating_add(u64::from(slots[class]).saturating_mul(slot_size));
    }
    for ((&key, &class), &slot) in starts.iter().zip(&class_at).zip(&slot_at) {
        let (start, slot_size) = region[usize::from(class)];
        offsets[split(key).0] = start.saturating_add(u64::from(slot).saturating_mul(slot_size));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{generated_instance, packing_violations};
    use crate::{arena_lower_bound, FixedOffset};
    use memplan_plugin_api::Lifetime;

    fn buffer(size: u64, alignment: u64, first: u32, last: u32) -> Buffer {
        Buffer {
            size,
            alignment,
            lifetime: Lifetime::new(first, last),
            fixed_offset: FixedOffset::NONE,
        }
    }

    #[test]
    fn the_average_live_count_is_the_lifetimes_over_the_steps_they_span() {
        assert_eq!(average_live(&[]), 0);
        // 4 + 4 steps of lifetime over steps 10..=15, then 2 more over 10..=20.
        let mut buffers = vec![buffer(8, 1, 10, 13), buffer(8, 1, 12, 15)];
        assert_eq!(average_live(&buffers), 8 / 6);
        buffers.push(buffer(8, 1, 20, 20));
        buffers.push(buffer(8, 1, 11, 11));
        assert_eq!(average_live(&buffers), 10 / 11);
        let crowded: Vec<Buffer> = (0..64).map(|_| buffer(8, 1, 5, 9)).collect();
        assert_eq!(average_live(&crowded), 64);
    }

    #[test]
    fn size_classes_round_up_by_at_most_an_eighth() {
        let mut sizes: Vec<u64> = (1..5000).collect();
        sizes.extend([
            1 << 20,
            (1 << 20) + 1,
            u64::MAX / 3,
            (1 << 62) + 12345,
            u64::MAX,
        ]);
        for size in sizes {
            let (class, class_size) = size_class(size);
            assert!(class < CLASSES, "size {size}: class {class}");
            assert!(class_size >= size, "size {size}: class size {class_size}");
            assert!(
                class_size - size <= size / 8,
                "size {size}: class size {class_size}"
            );
            // Every size of a class rounds up to the same class size.
            assert_eq!(size_class(class_size), (class, class_size), "size {size}");
        }
    }

    #[test]
    fn every_generated_shape_is_packed_without_overlaps_both_ways() {
        for spec in [
            "random:3000",
            "random:2000:2:20000",
            "band:5000",
            "all-live:2000",
            "model:4000",
            "compiler:3000",
            "even-compiler:2000",
        ] {
            let buffers = generated_instance(spec)
                .expect("a generator spec")
                .expect("a valid spec");
            let bound = arena_lower_bound(&buffers);
            let packed: Vec<u32> = (0..buffers.len() as u32).collect();
            let starts = starts_of(&buffers, &packed);
            let mut by_scan = vec![0; buffers.len()];
            best_fit_among_few(&buffers, &starts, 0, &mut by_scan, &|| false).unwrap();
            let mut by_class = vec![0; buffers.len()];
            size_classes(&buffers, &starts, 0, &mut by_class, &|| false).unwrap();
            let whole = pack_one_pass(&buffers);
            for offsets in [by_scan, by_class] {
                let height = buffers.iter().zip(&offsets).map(|(b, o)| o + b.size).max();
                let packing = Packing {
                    offsets,
                    height: height.unwrap_or(0),
                    note: String::new(),
                };
                assert_eq!(
                    packing_violations(&buffers, &packing),
                    Vec::<String>::new(),
                    "{spec}"
                );
                assert!(packing.height >= bound, "{spec}");
            }
            assert!(packing_violations(&buffers, &whole).is_empty(), "{spec}");
        }
    }

    #[test]
    fn the_steps_are_ordered_by_counting_or_by_radix() {
        // Few steps, or steps nearly in order, take the counting sort; many steps in random
        // order, or steps far apart, the radix sort; all give the buffers by step, then by
        // index.
        for spread in [1u32, 1_000_000] {
            let buffers: Vec<Buffer> = [5u32, 2, 5, 0, 2]
                .iter()
                .map(|&step| buffer(8, 1, step * spread, step * spread + 1))
                .collect();
            let keys = starts_of(&buffers, &[0, 1, 2, 3, 4]);
            let order: Vec<usize> = keys.iter().map(|&key| split(key).0).collect();
            assert_eq!(order, vec![3, 1, 4, 0, 2], "spread {spread}");
            // Any tag is carried (the size classes order the buffers by last step carrying
            // their position in start order), the items of a step in item order.
            let steps = [5u32, 2, 5, 0, 2].map(|step| step * spread);
            let keys = by_step(5, |item| (steps[item], 70 - item as u32));
            let tags: Vec<usize> = keys.iter().map(|&key| split(key).0).collect();
            assert_eq!(tags, vec![67, 69, 66, 70, 68], "spread {spread}");
        }
        let mut random = crate::XorShift64Star::new(7);
        let count = 100_000u32;
        let random_steps = |steps: u64, random: &mut crate::XorShift64Star| -> Vec<u32> {
            (0..count).map(|_| random.below(steps) as u32).collect()
        };
        let in_order: Vec<u32> = (0..count).map(|index| 3 * index).collect();
        for (name, steps) in [
            ("few steps", random_steps(1000, &mut random)),
            (
                "many steps in random order",
                random_steps(3 * u64::from(count), &mut random),
            ),
            (
                "steps far apart",
                random_steps(u64::from(u32::MAX) - 8, &mut random),
            ),
            ("many steps in order", in_order),
        ] {
            let buffers: Vec<Buffer> = steps
                .iter()
                .map(|&step| buffer(8, 1, step, step.saturating_add(3)))
                .collect();
            // Every third buffer at a fixed offset: left out.
            let packed: Vec<u32> = (0..count).filter(|index| index % 3 != 0).collect();
            let keys = starts_of(&buffers, &packed);
            let mut expected: Vec<u64> = packed
                .iter()
                .map(|&index| (u64::from(steps[index as usize]) << 32) | u64::from(index))
                .collect();
            expected.sort_unstable();
            assert_eq!(keys, expected, "{name}");
        }
    }

    #[test]
    fn few_live_buffers_take_the_smallest_gap_that_fits() {
        // At step 2 the buffers live are at [0, 100), [300, 350) and [400, 410) (those at
        // [100, 300) and [350, 400) ended at step 1): a 40-byte buffer takes the 50-byte gap
        // at 350, not the 200-byte one at 100.
        let buffers = [
            buffer(100, 1, 0, 5),
            buffer(200, 1, 0, 1),
            buffer(50, 1, 0, 5),
            buffer(50, 1, 0, 1),
            buffer(10, 1, 0, 5),
            buffer(40, 1, 2, 3),
        ];
        let packing = pack_one_pass(&buffers);
        assert_eq!(packing.offsets, vec![0, 100, 300, 350, 400, 350]);
        assert_eq!(packing.height, 410);
    }

    #[test]
    fn buffers_of_one_class_reuse_slots_as_their_lifetimes_end() {
        // 40 buffers of 100 bytes (class 104, slots of 112 with 16-byte alignment), two live
        // at every step, over as many steps: many live on average is false here, so the
        // size classes are called directly. Two slots, reused.
        let buffers: Vec<Buffer> = (0..40).map(|i| buffer(100, 16, i, i + 1)).collect();
        let packed: Vec<u32> = (0..40).collect();
        let starts = starts_of(&buffers, &packed);
        let mut offsets = vec![0; buffers.len()];
        size_classes(&buffers, &starts, 0, &mut offsets, &|| false).unwrap();
        for (i, offset) in offsets.iter().enumerate() {
            assert_eq!(*offset, (i as u64 % 2) * 112, "buffer {i}");
        }
    }

    #[test]
    fn a_one_pass_packing_stops_when_asked_both_ways() {
        for spec in ["model:20000", "random:20000"] {
            let buffers = generated_instance(spec)
                .expect("a generator spec")
                .expect("a valid spec");
            assert_eq!(
                pack_one_pass_until(&buffers, &|| true),
                Err(Stopped),
                "{spec}"
            );
            // A packing of fewer buffers than are placed between polls always completes.
            let few = &buffers[..ONE_PASS_POLL_BUFFERS - 1];
            assert!(pack_one_pass_until(few, &|| true).is_ok(), "{spec}");
        }
    }

    #[test]
    fn fixed_buffers_keep_their_offsets_and_the_others_go_above_them() {
        let mut fixed = buffer(64, 1, 0, 9);
        fixed.fixed_offset = FixedOffset::at(1000);
        let buffers = [fixed, buffer(7, 8, 0, 9), buffer(5, 1, 3, 4)];
        let packing = pack_one_pass(&buffers);
        assert_eq!(packing.offsets, vec![1000, 1064, 1071]);
        assert_eq!(packing.height, 1076);
        assert!(packing_violations(&buffers, &packing).is_empty());
    }
}
