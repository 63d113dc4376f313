//! TensorFlow Lite Micro's GreedyMemoryPlanner, simulated, to tell what arena head TFLM will
//! reach for a model: on its own, or around the offsets of an offline plan. Facts
//! (`facts/tflm-offline-plan.md`, TFLM's greedy_memory_planner.cc):
//!
//! - buffers come in TFLM's allocation order: the planned tensors of every subgraph in
//!   subgraph order, then the kernels' scratch buffers in request order;
//! - buffers with an offline offset are placed first, in that order, at their offset, never
//!   moved and never checked;
//! - the others (online) enter a list from its tail, so that list is the allocation order
//!   reversed, then a stable sort puts the largest first: equal sizes keep the later buffer
//!   first;
//! - each online buffer goes to the lowest offset where it overlaps, in bytes, no buffer
//!   already placed whose lifetime (inclusive steps) overlaps its own;
//! - the head is the highest offset + size.
//!
//! Sizes are already rounded to 16 bytes by the caller, as TFLM rounds them.
//!
//! Cost: each online buffer scans the buffers placed before it, O(n²) over a model, as TFLM
//! itself does on the device; [`MAX_SIMULATED_BUFFERS`] bounds it for hostile files (a model
//! with more buffers than that would not run on a microcontroller anyway).

use memplan_plugin_api::{ArenaRole, Lifetime, PlanRequest};

/// The most buffers a simulation takes (about a second at worst).
pub const MAX_SIMULATED_BUFFERS: usize = 20_000;

/// One buffer TFLM plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TflmBuffer {
    /// Bytes, a multiple of 16.
    pub size: u64,
    pub lifetime: Lifetime,
    /// Offset from an offline plan; `None` when TFLM places the buffer itself.
    pub offline_offset: Option<u64>,
}

/// The buffers TFLM plans for an analysed `.tflite` model, in its allocation order: the
/// non-empty scratch tensors (constants, variables and VAR_HANDLE outputs are constant or
/// persistent in the request) and the kernels' scratch buffers, which follow them. `offline`
/// gives a tensor's (by request index) offline offset, `None` to let TFLM place it.
pub fn tflm_buffers(
    request: &PlanRequest,
    offline: impl Fn(usize) -> Option<u64>,
) -> Vec<TflmBuffer> {
    request
        .tensors
        .iter()
        .enumerate()
        .filter(|(_, tensor)| tensor.kind.role() == ArenaRole::Scratch && tensor.size > 0)
        .map(|(index, tensor)| TflmBuffer {
            size: tensor.size,
            lifetime: tensor.lifetime,
            offline_offset: offline(index),
        })
        .collect()
}

/// The offset TFLM gives each buffer (same order as `buffers`), or `None` when there are more
/// than [`MAX_SIMULATED_BUFFERS`].
pub fn tflm_offsets(buffers: &[TflmBuffer]) -> Option<Vec<u64>> {
    if buffers.len() > MAX_SIMULATED_BUFFERS {
        return None;
    }
    let mut offsets = vec![0u64; buffers.len()];
    // Placed buffers, as indices into `buffers`.
    let mut placed: Vec<usize> = Vec::with_capacity(buffers.len());
    for (index, buffer) in buffers.iter().enumerate() {
        if let Some(offset) = buffer.offline_offset {
            offsets[index] = offset;
            placed.push(index);
        }
    }
    let mut online: Vec<usize> = (0..buffers.len())
        .rev()
        .filter(|&index| buffers[index].offline_offset.is_none())
        .collect();
    // Stable: equal sizes keep the reversed allocation order.
    online.sort_by(|&a, &b| buffers[b].size.cmp(&buffers[a].size));
    let mut live: Vec<(u64, u64)> = Vec::new();
    for index in online {
        let wanted = buffers[index];
        live.clear();
        live.extend(
            placed
                .iter()
                .filter(|&&other| buffers[other].lifetime.overlaps(wanted.lifetime))
                .map(|&other| (offsets[other], buffers[other].size)),
        );
        live.sort_unstable();
        let mut candidate = 0u64;
        for &(offset, size) in &live {
            if offset >= candidate && offset - candidate >= wanted.size {
                break;
            }
            candidate = candidate.max(offset.saturating_add(size));
        }
        offsets[index] = candidate;
        placed.push(index);
    }
    Some(offsets)
}

/// The head TFLM reaches: the highest offset + size of the buffers, given their offsets.
pub fn head(buffers: &[TflmBuffer], offsets: &[u64]) -> u64 {
    buffers
        .iter()
        .zip(offsets)
        .map(|(buffer, &offset)| offset.saturating_add(buffer.size))
        .max()
        .unwrap_or(0)
}

/// The head TFLM reaches for `buffers`, or `None` when there are too many to simulate.
pub fn tflm_head(buffers: &[TflmBuffer]) -> Option<u64> {
    tflm_offsets(buffers).map(|offsets| head(buffers, &offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(size: u64, first: u32, last: u32, offline: Option<u64>) -> TflmBuffer {
        TflmBuffer {
            size,
            lifetime: Lifetime::new(first, last),
            offline_offset: offline,
        }
    }

    #[test]
    fn online_buffers_go_largest_first_to_the_lowest_gap() {
        // a [0,1] 32, b [1,2] 16, c [2,3] 32: a at 0, c at 0 (a is dead by 2), b above both.
        let buffers = [
            buffer(32, 0, 1, None),
            buffer(16, 1, 2, None),
            buffer(32, 2, 3, None),
        ];
        assert_eq!(tflm_offsets(&buffers), Some(vec![0, 32, 0]));
        assert_eq!(tflm_head(&buffers), Some(48));
    }

    #[test]
    fn equal_sizes_take_the_later_buffer_first() {
        // Both live together: the later one (index 1) is placed first, at 0.
        let buffers = [buffer(16, 0, 1, None), buffer(16, 0, 1, None)];
        assert_eq!(tflm_offsets(&buffers), Some(vec![16, 0]));
    }

    #[test]
    fn online_buffers_fill_gaps_around_offline_ones_or_stack_on_top() {
        // Offline: x at 0..16 and y at 32..48, both live at step 1. The 32-byte online buffer
        // (placed first, larger) does not fit the gap at 16 and goes on top, at 48; the
        // 16-byte one fits the gap.
        let buffers = [
            buffer(16, 0, 2, Some(0)),
            buffer(16, 0, 2, Some(32)),
            buffer(16, 1, 1, None),
            buffer(32, 1, 1, None),
        ];
        let offsets = tflm_offsets(&buffers).unwrap();
        assert_eq!(offsets, vec![0, 32, 16, 48]);
        assert_eq!(head(&buffers, &offsets), 80);
    }

    #[test]
    fn ties_in_reverse_order_reproduce_vww_96_int8() {
        // The shape of vww_96_int8's first layers, where the order of ties decides: 64 at 0;
        // 48 at 0 (before it in time); the later 32 overlaps the 64: at 64; the earlier 32
        // overlaps the 48 and the later 32: at 96. (Model order would put the earlier 32 at 48
        // and the later one at 80, ending at 112, and miss TFLM's 73728 on the real model.)
        let buffers = [
            buffer(48, 0, 1, None),
            buffer(32, 1, 2, None),
            buffer(32, 2, 3, None),
            buffer(64, 3, 4, None),
        ];
        assert_eq!(tflm_offsets(&buffers), Some(vec![0, 96, 64, 0]));
        assert_eq!(tflm_head(&buffers), Some(128));
    }

    #[test]
    fn too_many_buffers_are_not_simulated() {
        let buffers = vec![buffer(16, 0, 0, None); MAX_SIMULATED_BUFFERS + 1];
        assert_eq!(tflm_head(&buffers), None);
    }
}
