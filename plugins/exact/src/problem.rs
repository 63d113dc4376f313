//! The packing problem in the form the search works on.
//!
//! - Sizes, offsets and alignments are counted in *units* of the smallest alignment among the
//!   buffers: every offset is a multiple of it, so a buffer occupies its size rounded up to a
//!   unit and no placement is lost by the rounding.
//! - Lifetimes are compressed to *columns*: the time between two consecutive distinct lifetime
//!   boundaries. Two buffers overlap in time exactly when their column spans overlap.
//! - Buffers are split into *components*: maximal groups chained by overlapping lifetimes.
//!   Components never constrain each other, so each is searched on its own and the arena
//!   height is the highest component height.

use std::ops::Range;

use memplan_planner_kit::Buffer;
use memplan_plugin_api::bounds::lower_bound;
use memplan_plugin_api::Lifetime;

/// One buffer of a component, in units and columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// Index of the buffer in the caller's slice.
    pub buffer: usize,
    /// First and last column (inclusive, local to the component).
    pub start: usize,
    pub end: usize,
    /// Units occupied (for a fixed buffer: from `fixed` to the unit above its last byte).
    pub size: u64,
    /// Alignment in units, at least 1.
    pub align: u64,
    /// Offset in units of a buffer the caller fixed.
    pub fixed: Option<u64>,
}

impl Item {
    pub fn overlaps(&self, other: &Item) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// Buffers chained by overlapping lifetimes.
#[derive(Clone, Debug)]
pub struct Component {
    pub items: Vec<Item>,
    pub columns: usize,
    /// No packing of the component is lower (units): the peak of live units over columns,
    /// and the top of every fixed buffer.
    pub lower_bound: u64,
}

impl Component {
    /// The same component with time running backwards (items keep their index).
    pub fn mirrored(&self) -> Component {
        let last = self.columns - 1;
        let mut mirrored = self.clone();
        for item in &mut mirrored.items {
            (item.start, item.end) = (last - item.end, last - item.start);
        }
        mirrored
    }

    /// Columns summed over the items: the size of per-column item lists.
    pub fn span_total(&self) -> usize {
        self.items
            .iter()
            .map(|item| item.end - item.start + 1)
            .sum()
    }

    /// Highest top of the items at `offsets` (units).
    pub fn height(&self, offsets: &[u64]) -> u64 {
        self.items
            .iter()
            .zip(offsets)
            .map(|(item, offset)| offset + item.size)
            .max()
            .unwrap_or(0)
    }
}

/// All buffers of one pack call.
#[derive(Clone, Debug)]
pub struct Problem {
    /// Bytes per unit: the smallest alignment (a power of two).
    pub unit: u64,
    pub components: Vec<Component>,
    /// Buffers of size 0: placed at their fixed offset or 0, outside the search.
    pub empty: Vec<usize>,
}

/// The runs of `sorted` (in order of first step; `first_last` gives an item's first and
/// last step, inclusive) chained by lifetimes that overlap: a run ends where the next item
/// starts after every item of the run has ended. Each run is a component of the items.
pub(crate) fn overlap_runs<T>(
    sorted: &[T],
    first_last: impl Fn(&T) -> (usize, usize),
) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut reach = 0;
    for (at, item) in sorted.iter().enumerate() {
        let (first, last) = first_last(item);
        if at > start && first > reach {
            runs.push(start..at);
            start = at;
        }
        reach = if at == start { last } else { reach.max(last) };
    }
    if start < sorted.len() {
        runs.push(start..sorted.len());
    }
    runs
}

impl Problem {
    pub fn new(buffers: &[Buffer]) -> Problem {
        let unit = buffers
            .iter()
            .filter(|buffer| buffer.size > 0)
            .map(|buffer| buffer.alignment.max(1))
            .min()
            .unwrap_or(1);
        let mut order: Vec<usize> = Vec::with_capacity(buffers.len());
        let mut empty = Vec::new();
        for (index, buffer) in buffers.iter().enumerate() {
            if buffer.size == 0 {
                empty.push(index);
            } else {
                order.push(index);
            }
        }
        order.sort_by_key(|&index| (buffers[index].lifetime.first, index));
        let components = overlap_runs(&order, |&index| {
            let lifetime = buffers[index].lifetime;
            (lifetime.first as usize, lifetime.last as usize)
        })
        .into_iter()
        .map(|run| Self::component(buffers, &order[run], unit))
        .collect();
        Problem {
            unit,
            components,
            empty,
        }
    }

    fn component(buffers: &[Buffer], group: &[usize], unit: u64) -> Component {
        // Column boundaries: every first step and every step after a last one.
        let mut bounds: Vec<u64> = group
            .iter()
            .flat_map(|&index| {
                let lifetime = buffers[index].lifetime;
                [u64::from(lifetime.first), u64::from(lifetime.last) + 1]
            })
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let column = |step: u64| bounds.binary_search(&step).expect("a boundary");
        let items: Vec<Item> = group
            .iter()
            .map(|&index| {
                let buffer = &buffers[index];
                let (size, fixed) = match buffer.fixed_offset.get() {
                    Some(offset) => {
                        let low = offset / unit;
                        ((offset + buffer.size).div_ceil(unit) - low, Some(low))
                    }
                    None => (buffer.size.div_ceil(unit), None),
                };
                Item {
                    buffer: index,
                    start: column(u64::from(buffer.lifetime.first)),
                    end: column(u64::from(buffer.lifetime.last) + 1) - 1,
                    size,
                    align: (buffer.alignment.max(1) / unit).max(1),
                    fixed,
                }
            })
            .collect();
        let peak = lower_bound(
            items
                .iter()
                .map(|item| (item.size, Lifetime::new(item.start as u32, item.end as u32))),
        );
        let fixed_top = items
            .iter()
            .filter_map(|item| item.fixed.map(|offset| offset + item.size))
            .max()
            .unwrap_or(0);
        Component {
            columns: bounds.len() - 1,
            lower_bound: peak.max(fixed_top),
            items,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_planner_kit::testing::buffer;
    use memplan_planner_kit::FixedOffset;

    #[test]
    fn splits_at_steps_no_lifetime_crosses() {
        let problem = Problem::new(&[
            buffer(4, 0, 2),
            buffer(4, 5, 6),
            buffer(2, 2, 3),
            buffer(1, 7, 7),
        ]);
        let groups: Vec<Vec<usize>> = problem
            .components
            .iter()
            .map(|component| component.items.iter().map(|item| item.buffer).collect())
            .collect();
        assert_eq!(groups, vec![vec![0, 2], vec![1], vec![3]]);
        assert_eq!(problem.components[0].columns, 3);
        assert_eq!(problem.components[0].lower_bound, 6);
    }

    #[test]
    fn runs_chain_through_overlapping_lifetimes() {
        // [0, 2] and [4, 6] meet only through [1, 5]; [2, 2] touches the first's last step.
        let spans = [(0, 2), (1, 5), (2, 2), (4, 6), (7, 8), (9, 9)];
        assert_eq!(overlap_runs(&spans, |&span| span), vec![0..4, 4..5, 5..6]);
        assert_eq!(overlap_runs(&[(3, 3)], |&span| span), vec![0..1]);
        assert!(overlap_runs(&[] as &[(usize, usize)], |&span| span).is_empty());
    }

    #[test]
    fn counts_in_units_of_the_smallest_alignment() {
        let mut buffers = vec![buffer(20, 0, 1), buffer(16, 1, 2)];
        buffers[0].alignment = 16;
        buffers[1].alignment = 32;
        buffers[1].fixed_offset = FixedOffset::at(48);
        let problem = Problem::new(&buffers);
        assert_eq!(problem.unit, 16);
        let items = &problem.components[0].items;
        assert_eq!((items[0].size, items[0].align), (2, 1));
        assert_eq!(
            (items[1].size, items[1].align, items[1].fixed),
            (1, 2, Some(3))
        );
        assert_eq!(problem.components[0].lower_bound, 4);
    }
}
