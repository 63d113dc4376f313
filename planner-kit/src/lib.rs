//! memplan-planner-kit: the planner SDK. Ordinary Rust helpers compiled into each plugin, so
//! that a planner only writes its packing algorithm. It sits beside `memplan-plugin-api` (the
//! stable ABI, which changes only when the ABI does) and can evolve freely: nothing here crosses
//! the plugin boundary.
//!
//! A planner implements [`Packer`] — place a set of buffers with lifetimes in one arena —
//! and calls [`plan_with_packer`], which does every pass planners share: constants
//! bump-allocated per destination memory (cold or staged), persistent tensors per memory,
//! scratch per memory in the target's preferred order with spill to the next writable memory
//! when a budget would be exceeded, fixed offsets kept, aliases given their root's binding
//! plus the view offset, empty tensors bound without space. The `plan` module (behind
//! [`plan_with_packer`]) documents those passes and the spill algorithm.
//!
//! Packing algorithms shared by several planners live here too, so that no planner
//! duplicates another: [`bump`] (no reuse: `linear`, constants, persistent tensors) and
//! [`greedy`] (size-ordered best/first fit: `greedy-bestfit`, and the start of searches),
//! [`sweep_variants`] (start-order packing run backwards or out of the busiest step),
//! [`one_pass`] (a packing several times cheaper than a sweep, to fall back on when time is
//! too short for one).
//! [`options`] parses `--planner-options` uniformly; [`threads`] joins a helper thread on the
//! second core while the planner's own thread keeps answering for the host.
//!
//! Test helpers (request builders, a seeded generator, packing and plan validity checks) are
//! in the `testing` module behind the `testing` feature: enable it in `[dev-dependencies]`
//! only, so that shipped plugins do not carry them.

pub mod bump;
pub mod greedy;
pub mod grouped;
pub mod one_pass;
pub mod options;
mod plan;
pub mod random;
pub mod sweep_variants;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod threads;
pub mod time_limit;

pub use bump::{pack_bump_until, BumpPacker, BUMP_POLL_BUFFERS};
pub use greedy::{
    greedy_ranks, live_bytes_at_points, pack_greedy, pack_greedy_between, pack_greedy_ranked,
    pack_greedy_until, Fit, GapChoice, Order, Stopped, Timeline,
};
pub use grouped::Grouped;
pub use one_pass::{
    average_live, one_pass_at_the_slowest, pack_one_pass, pack_one_pass_until, FEW_LIVE,
    ONE_PASS_SLOWEST_PER_BUFFER,
};
pub use options::PlannerOptions;
pub use plan::plan_with_packer;
pub use random::XorShift64Star;
pub use sweep_variants::{
    busy_steps, pack_sweep_variant, pack_sweep_variant_on_two_threads, PeakStacking, SweepVariant,
    ANCHOR_SPACING,
};

use memplan_plugin_api::{bounds, HostContext, Lifetime, PlanError};

/// One buffer to place in an arena.
///
/// 32 bytes: a million-tensor request hands its packer a million of them, written once and
/// read by several passes, so every byte saved is saved many times over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Bytes; never 0 (the kit binds empty tensors without asking the packer).
    pub size: u64,
    /// Offset alignment, a power of two.
    pub alignment: u64,
    /// Inclusive lifetime.
    pub lifetime: Lifetime,
    /// An offset the packer must use as it is, if any.
    pub fixed_offset: FixedOffset,
}

const _: () = assert!(std::mem::size_of::<Buffer>() == 32);

/// An optional fixed offset in 8 bytes (an `Option<u64>` takes 16).
///
/// Invariant: `u64::MAX` means none. It cannot be a real fixed offset: a buffer has at least
/// one byte, so one placed there would end past 64 bits (the kit rejects fixed offsets whose
/// end overflows before any packer runs).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedOffset(u64);

impl FixedOffset {
    /// No fixed offset: the packer chooses.
    pub const NONE: FixedOffset = FixedOffset(u64::MAX);

    /// The fixed offset `offset`.
    ///
    /// # Panics
    /// When `offset` is `u64::MAX`, where no buffer fits.
    pub fn at(offset: u64) -> FixedOffset {
        assert!(
            offset != u64::MAX,
            "a buffer fixed at offset u64::MAX would end past 64 bits"
        );
        FixedOffset(offset)
    }

    /// The offset, or `None` when the packer chooses.
    pub fn get(self) -> Option<u64> {
        (self.0 != u64::MAX).then_some(self.0)
    }

    pub fn is_none(self) -> bool {
        self.0 == u64::MAX
    }

    pub fn is_some(self) -> bool {
        !self.is_none()
    }
}

impl Default for FixedOffset {
    fn default() -> FixedOffset {
        FixedOffset::NONE
    }
}

impl From<Option<u64>> for FixedOffset {
    /// # Panics
    /// On `Some(u64::MAX)`, like [`FixedOffset::at`].
    fn from(offset: Option<u64>) -> FixedOffset {
        offset.map_or(FixedOffset::NONE, FixedOffset::at)
    }
}

impl std::fmt::Debug for FixedOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// The lower bound of one arena holding `buffers`: no packing of them is lower. The figure
/// memplan reports everywhere (`memplan plan` and `memplan bench` beside each arena, the
/// checker's tables, the shipped planners' notes), [`bounds::arena_lower_bound`] over the
/// buffers' sizes, alignments and lifetimes. O(n log n).
pub fn arena_lower_bound(buffers: &[Buffer]) -> u64 {
    bounds::arena_lower_bound(
        buffers
            .iter()
            .map(|buffer| (buffer.size, buffer.alignment, buffer.lifetime)),
    )
}

/// A packer's answer: an offset per buffer, in the order the buffers were given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packing {
    pub offsets: Vec<u64>,
    /// Highest `offset + size` (0 when there are no buffers).
    pub height: u64,
    /// What the packer wants the user to know (e.g. "proven optimal"); may be empty.
    pub note: String,
}

impl Packing {
    /// The packing of `buffers` at `offsets` (one per buffer, in order), with its height
    /// and no note.
    pub fn at(buffers: &[Buffer], offsets: Vec<u64>) -> Packing {
        let height = buffers
            .iter()
            .zip(&offsets)
            .map(|(buffer, offset)| offset.saturating_add(buffer.size))
            .max()
            .unwrap_or(0);
        Packing {
            offsets,
            height,
            note: String::new(),
        }
    }
}

/// A packing algorithm for one arena: buffers whose lifetimes overlap must not overlap in
/// bytes; offsets honour alignment and fixed offsets.
pub trait Packer {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError>;

    /// [`Packer::pack`] told the bytes `room` left in the arena's memory under its budget
    /// (`None`: unbounded), for packers that can use it, e.g. to stop at the first packing
    /// that fits. The plan passes call this one; a height above `room` is still accepted
    /// (the passes spill or report it).
    fn pack_within(
        &self,
        buffers: &[Buffer],
        room: Option<u64>,
        context: &HostContext,
    ) -> Result<Packing, PlanError> {
        let _ = room;
        self.pack(buffers, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::buffer;

    #[test]
    fn a_packing_at_offsets_is_as_high_as_its_highest_buffer_ends() {
        let buffers = [buffer(10, 0, 1), buffer(20, 0, 1), buffer(5, 2, 3)];
        let packing = Packing::at(&buffers, vec![20, 0, 40]);
        assert_eq!(packing.offsets, [20, 0, 40]);
        assert_eq!(packing.height, 45);
        assert!(packing.note.is_empty());
        assert_eq!(Packing::at(&[], Vec::new()).height, 0);
    }
}
