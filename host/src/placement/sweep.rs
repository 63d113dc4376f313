//! The sweep that finds byte ranges sharing bytes while their lifetimes overlap: the checker's
//! contract 5 on plans, and analysis's check of fixed placements a model gives.
//!
//! A sweep over time, O(n log n), never all pairs. Spans are taken in order of their first
//! step. The spans live at that step are kept in an ordered set keyed by offset and are
//! pairwise disjoint, so a new span can only collide with one of them if it collides with its
//! nearest neighbour below (the live span with the greatest offset not above its own) or above
//! (the live span with the least offset above it). Spans whose last step has passed leave the
//! set through a min-heap keyed by last step.
//!
//! A span that collides is reported, naming the span it collides with, and is not added to
//! the live set, which keeps the set disjoint. Every reported pair is a real collision, and of
//! any two colliding spans at least one is reported (two spans both in the live set never
//! collide: the later one was compared with the earlier when it started). Each span is
//! reported at most once: the report stays O(n) even when one span collides with thousands.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use memplan_plugin_api::Lifetime;

/// Bytes `offset..end` held during an inclusive lifetime.
pub trait Span {
    fn offset(&self) -> u64;
    /// One past the last byte.
    fn end(&self) -> u64;
    fn lifetime(&self) -> Lifetime;
}

/// Each span that shares bytes with a span already live when it starts, with that span, as
/// positions in `slots`. See the module docs.
pub fn collisions<S: Span>(slots: &[S]) -> Vec<(usize, usize)> {
    // Positions in `slots` ordered by first step, as packed integers (first step in the high
    // half): at a million slots, sorting plain integers is several times faster than sorting
    // the slots themselves.
    let mut order: Vec<u64> = slots
        .iter()
        .enumerate()
        .map(|(position, slot)| (u64::from(slot.lifetime().first) << 32) | position as u64)
        .collect();
    order.sort_unstable();
    // Live slots keyed by (offset, position): unique even when two slots share an offset.
    let mut live: BTreeSet<(u64, u32)> = BTreeSet::new();
    // (last step, position) of each live slot, soonest to expire on top.
    let mut expiries: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
    let mut found = Vec::new();
    for packed in order {
        let position = packed as u32;
        let slot = &slots[position as usize];
        while let Some(&Reverse((last, expiring))) = expiries.peek() {
            if last >= slot.lifetime().first {
                break;
            }
            live.remove(&(slots[expiring as usize].offset(), expiring));
            expiries.pop();
        }
        let key = (slot.offset(), position);
        let below = live
            .range(..key)
            .next_back()
            .filter(|&&(_, other)| slots[other as usize].end() > slot.offset());
        let above = live
            .range(key..)
            .next()
            .filter(|&&(offset, _)| offset < slot.end());
        match below.or(above) {
            Some(&(_, other)) => found.push((position as usize, other as usize)),
            None => {
                live.insert(key);
                expiries.push(Reverse((slot.lifetime().last, position)));
            }
        }
    }
    found
}
