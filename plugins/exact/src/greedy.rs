//! The starting upper bound of the search: the best of the kit's greedy packings of one
//! component (every sort order, best-fit and first-fit), in the component's units and columns.
//! The kit's packer is the same one `greedy-bestfit` ships, so `exact` can never be worse.
//!
//! The greedy packings count against the search's deadline: where many buffers live at once
//! one of them can take seconds (see the kit's complexity notes), so each asks the deadline as
//! it goes, and those not begun by then are skipped. When even the first is cut short, the
//! component starts from a stack (every buffer above the previous one), which is valid, and
//! the search's note says the time limit was reached.

use memplan_planner_kit::greedy::{pack_greedy_until, Fit, Order};
use memplan_planner_kit::Buffer;

use crate::problem::Component;
use crate::search::Deadline;

/// Offsets (units) of the lowest greedy packing found before `deadline`; fixed items keep
/// their offset. `buffers` are the caller's, in bytes (`unit` bytes per unit).
///
/// The kit packs the component's buffers in bytes and in the caller's order: it breaks ties
/// by index and compares sizes in bytes, so each packing is the whole arena's greedy packing
/// (what `greedy-bestfit` and the portfolio's candidates give) restricted to the component,
/// and the portfolio, passing its candidates to [`best_start`], starts where `exact` alone
/// does.
pub fn greedy(
    component: &Component,
    buffers: &[Buffer],
    unit: u64,
    deadline: &Deadline,
) -> Vec<u64> {
    let mut members: Vec<usize> = component.items.iter().map(|item| item.buffer).collect();
    members.sort_unstable();
    let own: Vec<Buffer> = members.iter().map(|&index| buffers[index]).collect();
    let stop = || deadline.passed();
    let mut packings: Vec<Vec<u64>> = Vec::new();
    'orders: for (_, order) in Order::ALL {
        for fit in [Fit::Best, Fit::First] {
            let Ok(packing) = pack_greedy_until(&own, order, fit, &stop) else {
                break 'orders;
            };
            packings.push(packing.offsets);
        }
    }
    let position = |buffer: usize| {
        members
            .binary_search(&buffer)
            .expect("a buffer of the component")
    };
    lowest(component, unit, &packings, position).unwrap_or_else(|| stacked(component))
}

/// Offsets (units) of the lowest of `starts` (packings of the whole arena in bytes, one
/// offset per buffer of the caller: the portfolio's greedy candidates) restricted to
/// `component`; `None` when there are none. Given the packings [`greedy`] makes, in the same
/// order, it picks the same one, so a caller that already made them saves their time.
pub fn best_start(component: &Component, unit: u64, starts: &[Vec<u64>]) -> Option<Vec<u64>> {
    lowest(component, unit, starts, |buffer| buffer)
}

/// The lowest of `packings` (bytes; the offset of buffer b at `position(b)`) as offsets of
/// `component`'s items in units; the first of equal heights.
fn lowest(
    component: &Component,
    unit: u64,
    packings: &[Vec<u64>],
    position: impl Fn(usize) -> usize,
) -> Option<Vec<u64>> {
    let mut best: Option<(u64, Vec<u64>)> = None;
    for packing in packings {
        // Offsets are multiples of every alignment, so of the unit: the division is exact.
        let offsets: Vec<u64> = component
            .items
            .iter()
            .map(|item| item.fixed.unwrap_or(packing[position(item.buffer)] / unit))
            .collect();
        let height = component.height(&offsets);
        if best.as_ref().is_none_or(|(lowest, _)| height < *lowest) {
            best = Some((height, offsets));
        }
    }
    best.map(|(_, offsets)| offsets)
}

/// Every movable item above the fixed ones and the previous movable one: a valid packing in
/// O(n), the fallback when no greedy packing finished in time.
pub fn stacked(component: &Component) -> Vec<u64> {
    let mut top = component
        .items
        .iter()
        .filter_map(|item| item.fixed.map(|offset| offset + item.size))
        .max()
        .unwrap_or(0);
    component
        .items
        .iter()
        .map(|item| match item.fixed {
            Some(offset) => offset,
            None => {
                let offset = top.div_ceil(item.align) * item.align;
                top = offset + item.size;
                offset
            }
        })
        .collect()
}
