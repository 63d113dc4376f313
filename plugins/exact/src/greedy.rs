//! The starting upper bound of the search: the best of the kit's greedy packings of one
//! component (every sort order, best-fit and first-fit; on large components the kit's first
//! start-order sweep variant and then best fit by start first: [`greedy_starts`]), in the
//! component's units and columns.
//! The kit's packer is the same one `greedy-bestfit` ships, so `exact` can never be worse.
//!
//! The greedy packings count against the search's deadline: on large components one of them
//! can take seconds (see the kit's complexity notes), so each asks the deadline as it goes,
//! and those after the first stop where the caller says (the packer leaves the search half
//! its time). One at the component's lower bound ends the
//! list: no other can be lower (a 28,000-buffer trace packed at its bound by the first one
//! spent its whole 10 s on the other seven). When even the first is cut short there is no
//! greedy start ([`greedy`] returns None): the packer then starts the searches from a stack
//! ([`stacked`], valid but with no reuse at all) and returns the kit's one-pass packing of
//! the arena if they find nothing lower before the deadline.

use memplan_planner_kit::greedy::{pack_greedy_until, Fit, Order};
use memplan_planner_kit::{pack_sweep_variant, Buffer, SweepVariant};
use memplan_plugin_api::Lifetime;

use crate::problem::Component;
use crate::search::Deadline;

/// The kit's orders, the first one by duration: it may be the only one to finish, and on
/// training traces it is the quick one (62,000 buffers: 0.4-0.6 s by duration, 12-22 s by
/// size or area, at a load of 4.8) and the lowest (1.00001 x the bound).
pub const ORDERS: [Order; 4] = [Order::Duration, Order::Size, Order::Area, Order::Start];

/// Components (and the portfolio's arenas) with at least this many buffers take best fit by
/// lifetime start first: it is O(n log n) on every trace shape (the kit packs it as one sweep
/// over time), where the other orders are superlinear on random and training traces (random
/// lifetimes, 100,000 buffers: 5 s by duration or size; 1,000,000: not done in 30 s), so it
/// is the start that is there in time whatever the shape.
pub const SWEEP_FIRST_FROM: usize = 10_000;

/// The (order, fit) pairs [`greedy`] tries on a component of `item_count` items, in turn:
/// every order of [`ORDERS`] with best and then first fit, best fit by start first from
/// [`SWEEP_FIRST_FROM`] items on.
pub fn greedy_starts(item_count: usize) -> Vec<(Order, Fit)> {
    let mut starts: Vec<(Order, Fit)> = ORDERS
        .iter()
        .flat_map(|&order| [(order, Fit::Best), (order, Fit::First)])
        .collect();
    if item_count >= SWEEP_FIRST_FROM {
        // A stable sort: the others keep their order.
        starts.sort_by_key(|&start| start != (Order::Start, Fit::Best));
    }
    starts
}

/// Offsets (units) of the lowest greedy packing found, the first one before `deadline`, the
/// others before `others_by` (cut short there); None if not even the
/// first finished in time. Fixed items keep their offset.
pub fn greedy(
    component: &Component,
    deadline: &Deadline,
    others_by: &Deadline,
) -> Option<Vec<u64>> {
    greedy_after_sweep(component, None, deadline, others_by)
}

/// Every component's [`greedy`] start, the first packing before `deadline` for each: what
/// the searches' tests start them from.
#[cfg(test)]
pub fn starts_of(problem: &crate::problem::Problem, deadline: &Deadline) -> Vec<Vec<u64>> {
    problem
        .components
        .iter()
        .map(|component| greedy(component, deadline, deadline).expect("a start in time"))
        .collect()
}

/// [`greedy`], given the component's share of the kit's first sweep variant of the whole
/// input (`swept`, offsets in units; the packer makes it before setting the problem up on
/// large inputs) instead of making that sweep of its own: the component's buffers live at
/// no step with any other's, so that share is the sweep of the component.
pub fn greedy_after_sweep(
    component: &Component,
    swept: Option<Vec<u64>>,
    deadline: &Deadline,
    others_by: &Deadline,
) -> Option<Vec<u64>> {
    let buffers: Vec<Buffer> = component
        .items
        .iter()
        .map(|item| Buffer {
            size: item.size,
            alignment: item.align,
            lifetime: Lifetime::new(item.start as u32, item.end as u32),
            fixed_offset: item.fixed.into(),
        })
        .collect();
    let mut best: Option<(u64, Vec<u64>)> = None;
    // On large components the kit's first sweep variant first, as the portfolio takes it:
    // about as quick as best fit by start and lower on most large traces (its module gives
    // the figures). Where it does not apply (fixed offsets), best fit by start comes next.
    let swept = match swept {
        Some(offsets) => Some(offsets),
        None if buffers.len() >= SWEEP_FIRST_FROM => {
            match pack_sweep_variant(&buffers, SweepVariant::ALL[0], &|| deadline.passed()) {
                Ok(Some(packing)) => Some(packing.offsets),
                _ => None,
            }
        }
        None => None,
    };
    if let Some(offsets) = swept {
        let height = component.height(&offsets);
        if height <= component.lower_bound {
            return Some(offsets);
        }
        best = Some((height, offsets));
    }
    for (order, fit) in greedy_starts(buffers.len()) {
        let until = if best.is_some() { others_by } else { deadline };
        let Ok(packing) = pack_greedy_until(&buffers, order, fit, &|| until.passed()) else {
            break;
        };
        let height = component.height(&packing.offsets);
        if best.as_ref().is_none_or(|(lowest, _)| height < *lowest) {
            best = Some((height, packing.offsets));
        }
        if height <= component.lower_bound {
            break;
        }
    }
    best.map(|(_, offsets)| offsets)
}

/// Offsets (units) of the lowest of `starts` (packings of the whole arena in bytes, one
/// offset per buffer of the caller: the portfolio's greedy candidates) restricted to
/// `component`; `None` when there are none. A caller that already made greedy packings of
/// the whole arena saves the time of [`greedy`]'s.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_order_of_the_kit_is_tried() {
        for (name, order) in Order::ALL {
            assert!(ORDERS.contains(&order), "{name}");
        }
        assert_eq!(ORDERS.len(), Order::ALL.len());
    }

    #[test]
    fn large_components_start_with_best_fit_by_start_and_try_every_pair() {
        let small = greedy_starts(SWEEP_FIRST_FROM - 1);
        assert_eq!(small[0], (Order::Duration, Fit::Best));
        let large = greedy_starts(SWEEP_FIRST_FROM);
        assert_eq!(large[0], (Order::Start, Fit::Best));
        assert_eq!(large[1], (Order::Duration, Fit::Best));
        for starts in [small, large] {
            assert_eq!(starts.len(), 2 * ORDERS.len());
            for order in ORDERS {
                for fit in [Fit::Best, Fit::First] {
                    assert!(starts.contains(&(order, fit)), "{order:?} {fit:?}");
                }
            }
        }
    }
}
