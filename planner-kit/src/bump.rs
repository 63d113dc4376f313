//! Bump packing: every buffer gets bytes of its own, one after another in the order given,
//! whatever the lifetimes. Buffers with a fixed offset keep it and the others are bumped past
//! them (a buffer that would run into a fixed slot starts after it instead).
//!
//! The kit uses it for constant and persistent arenas, where every tensor lives the whole run
//! so no packing can do better than the sum of the aligned sizes; the `linear` planner uses it
//! for scratch too, as the no-reuse reference point.
//!
//! Cost: O(n + f log f) for n buffers of which f have fixed offsets. As a [`Packer`] it asks
//! the host whether to stop every few thousand buffers, so that `--timeout` holds for the
//! `linear` planner at any size.

use crate::{Buffer, Packer, Packing, Stopped};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::HostContext;
use memplan_plugin_api::PlanError;

/// The [`Packer`] that never reuses bytes (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct BumpPacker;

impl Packer for BumpPacker {
    /// Asks the host every [`BUMP_POLL_BUFFERS`] buffers whether to stop (`--timeout`).
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        pack_bump_until(buffers, &|| context.should_stop())
            .map_err(|stopped| stopped.into_plan_error(buffers.len()))
    }
}

/// Buffers placed between two calls of a bump packing's `stop` callback: a few microseconds'
/// work, against tens of nanoseconds for the call.
pub const BUMP_POLL_BUFFERS: usize = 4096;

/// Places `buffers` one after another in the given order, around the fixed slots.
pub fn pack_bump(buffers: &[Buffer]) -> Packing {
    match pack_bump_until(buffers, &|| false) {
        Ok(packing) => packing,
        Err(Stopped) => unreachable!("a packing that is never asked to stop does not stop"),
    }
}

/// [`pack_bump`] that asks `stop` whether to give up after every [`BUMP_POLL_BUFFERS`]
/// buffers (so a smaller packing always completes, as a greedy one does).
pub fn pack_bump_until(buffers: &[Buffer], stop: &dyn Fn() -> bool) -> Result<Packing, Stopped> {
    // Fixed slots as (offset, end), ascending.
    let mut fixed: Vec<(u64, u64)> = buffers
        .iter()
        .filter_map(|b| b.fixed_offset.get().map(|offset| (offset, offset + b.size)))
        .collect();
    fixed.sort_unstable();

    let mut offsets = Vec::with_capacity(buffers.len());
    let mut height = fixed.iter().map(|&(_, end)| end).max().unwrap_or(0);
    let mut cursor = 0u64;
    // Fixed slots before `next_fixed` end at or below the cursor: no later buffer can hit them.
    let mut next_fixed = 0usize;
    for (index, buffer) in buffers.iter().enumerate() {
        if index % BUMP_POLL_BUFFERS == BUMP_POLL_BUFFERS - 1 && stop() {
            return Err(Stopped);
        }
        if let Some(offset) = buffer.fixed_offset.get() {
            offsets.push(offset);
            continue;
        }
        let mut candidate = align_up(cursor, buffer.alignment);
        let mut scan = next_fixed;
        while scan < fixed.len() {
            let (start, end) = fixed[scan];
            if end <= candidate {
                if scan == next_fixed {
                    next_fixed += 1;
                }
            } else if start >= candidate + buffer.size {
                break;
            } else {
                candidate = align_up(end, buffer.alignment);
            }
            scan += 1;
        }
        offsets.push(candidate);
        cursor = candidate + buffer.size;
        height = height.max(cursor);
    }
    Ok(Packing {
        offsets,
        height,
        note: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_valid_packing, buffer};
    use crate::FixedOffset;

    #[test]
    fn buffers_follow_one_another_aligned() {
        let buffers = vec![
            buffer(3, 0, 0),
            Buffer {
                alignment: 8,
                ..buffer(5, 1, 1)
            },
            buffer(1, 2, 2),
        ];
        let packing = pack_bump(&buffers);
        assert_eq!(packing.offsets, vec![0, 8, 13]);
        assert_eq!(packing.height, 14);
        assert_valid_packing(&buffers, &packing);
    }

    #[test]
    fn fixed_slots_are_kept_and_bumped_past() {
        let buffers = vec![
            buffer(10, 0, 0),
            Buffer {
                fixed_offset: FixedOffset::at(12),
                ..buffer(8, 0, 0)
            },
            buffer(4, 0, 0),
            buffer(4, 0, 0),
            Buffer {
                fixed_offset: FixedOffset::at(40),
                ..buffer(4, 0, 0)
            },
        ];
        let packing = pack_bump(&buffers);
        // 10 fills [0,10); 4 does not fit in [10,12) so goes to 20; the next to 24.
        assert_eq!(packing.offsets, vec![0, 12, 20, 24, 40]);
        assert_eq!(packing.height, 44);
        assert_valid_packing(&buffers, &packing);
    }

    #[test]
    fn a_bump_packing_asked_to_stop_gives_up_between_buffers() {
        let buffers: Vec<Buffer> = (0..3 * BUMP_POLL_BUFFERS as u32)
            .map(|i| buffer(8, i, i))
            .collect();
        // Asked after each stretch of buffers: it stops at the first `true`, and never asked
        // to stop it places them all; fewer buffers than a stretch are never asked.
        for stop_at_poll in 1..=3 {
            let polls = std::cell::Cell::new(0);
            let stop = || {
                polls.set(polls.get() + 1);
                polls.get() == stop_at_poll
            };
            assert_eq!(pack_bump_until(&buffers, &stop), Err(Stopped));
            assert_eq!(polls.get(), stop_at_poll);
        }
        let packing = pack_bump_until(&buffers, &|| false).unwrap();
        assert_eq!(packing.height, 8 * buffers.len() as u64);
        let few = &buffers[..BUMP_POLL_BUFFERS - 1];
        assert_eq!(
            pack_bump_until(few, &|| true).unwrap().height,
            8 * few.len() as u64
        );
    }

    #[test]
    fn no_buffers_give_height_zero() {
        assert_eq!(pack_bump(&[]), Packing::default());
    }
}
