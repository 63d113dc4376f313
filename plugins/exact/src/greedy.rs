//! The starting upper bound of the search: the best of the kit's greedy packings of one
//! component (every sort order, best-fit and first-fit), in the component's units and columns.
//! The kit's packer is the same one `greedy-bestfit` ships, so `exact` can never be worse.

use memplan_planner_kit::greedy::{pack_greedy, Fit, Order};
use memplan_planner_kit::Buffer;
use memplan_plugin_api::Lifetime;

use crate::problem::Component;

/// Offsets (units) of the lowest greedy packing; fixed items keep their offset.
pub fn greedy(component: &Component) -> Vec<u64> {
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
    for order in [Order::Size, Order::Duration, Order::Area] {
        for fit in [Fit::Best, Fit::First] {
            let packing = pack_greedy(&buffers, order, fit);
            let height = component.height(&packing.offsets);
            if best.as_ref().is_none_or(|(lowest, _)| height < *lowest) {
                best = Some((height, packing.offsets));
            }
        }
    }
    best.map(|(_, offsets)| offsets).unwrap_or_default()
}
