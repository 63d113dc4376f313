//! The starting upper bound of the search: a first-fit greedy packing of one component.
//!
//! TODO(lead): replace with kit::greedy once issue 4 lands. This is the one allowed
//! temporary copy of a greedy packer; it is kept minimal: three orders (size, lifetime,
//! area, all descending), each buffer at the lowest aligned offset clear of every placed
//! buffer overlapping it in time, the lowest of the three packings kept.

use crate::problem::{Component, Item};
use memplan_plugin_api::bounds::align_up;

/// A sort key; buffers are placed in descending key order.
type OrderKey = fn(&Item) -> (u64, u64);

/// Offsets (units) of the best of the greedy orders; fixed items keep their offset.
pub fn greedy(component: &Component) -> Vec<u64> {
    let items = &component.items;
    let orders: [OrderKey; 3] = [
        |item| (item.size, (item.end - item.start) as u64),
        |item| ((item.end - item.start) as u64, item.size),
        |item| (item.size * (item.end - item.start + 1) as u64, item.size),
    ];
    let mut best: Option<(u64, Vec<u64>)> = None;
    for key in orders {
        let mut order: Vec<usize> = (0..items.len())
            .filter(|&index| items[index].fixed.is_none())
            .collect();
        order.sort_by_key(|&index| (std::cmp::Reverse(key(&items[index])), index));
        let offsets = first_fit(component, &order);
        let height = component.height(&offsets);
        if best
            .as_ref()
            .is_none_or(|(best_height, _)| height < *best_height)
        {
            best = Some((height, offsets));
        }
    }
    best.map(|(_, offsets)| offsets).unwrap_or_default()
}

fn first_fit(component: &Component, order: &[usize]) -> Vec<u64> {
    let items = &component.items;
    let mut offsets: Vec<Option<u64>> = items.iter().map(|item| item.fixed).collect();
    let mut placed: Vec<usize> = (0..items.len())
        .filter(|&index| items[index].fixed.is_some())
        .collect();
    let mut busy: Vec<(u64, u64)> = Vec::new();
    for &index in order {
        let item = &items[index];
        busy.clear();
        busy.extend(
            placed
                .iter()
                .filter(|&&other| items[other].overlaps(item))
                .map(|&other| {
                    let offset = offsets[other].expect("placed");
                    (offset, offset + items[other].size)
                }),
        );
        busy.sort_unstable();
        let mut offset = 0;
        for &(low, high) in &busy {
            if offset + item.size <= low {
                break;
            }
            offset = offset.max(align_up(high, item.align));
        }
        offsets[index] = Some(offset);
        placed.push(index);
    }
    offsets
        .into_iter()
        .map(|offset| offset.expect("every item placed"))
        .collect()
}
