//! Contract 5: two tensors of one arena whose lifetimes overlap do not share bytes; and the
//! lower bound of each arena.
//!
//! The overlap check is the sweep of [`crate::placement::sweep`] per arena, O(n log n), never
//! all pairs; it also serves analysis's check of fixed placements. A slot that collides is
//! reported, naming the slot it collides with; every reported pair is a real collision, of any
//! two colliding slots at least one is reported (so moving every reported slot clear of its
//! partner and re-checking converges), and each slot is reported at most once.

use memplan_plugin_api::bounds::{align_up, arena_lower_bound};

use super::{steps, Checker, Slot, Violation, ViolationKind};
use crate::placement::sweep::{self, Span};

impl Span for Slot {
    fn offset(&self) -> u64 {
        self.offset
    }
    fn end(&self) -> u64 {
        Slot::end(self)
    }
    fn lifetime(&self) -> memplan_plugin_api::Lifetime {
        self.lifetime
    }
}

impl Checker<'_> {
    pub(super) fn check_overlaps(&mut self, slots: &[Vec<Slot>]) {
        for (arena_position, arena_slots) in slots.iter().enumerate() {
            for (slot, partner) in collisions(arena_slots) {
                self.report_overlap(arena_position, &slot, &partner);
            }
        }
    }

    fn report_overlap(&mut self, arena_position: usize, slot: &Slot, partner: &Slot) {
        let arena = &self.plan.arenas[arena_position];
        let arena_name = self.arena_name(arena.role, arena.memory, arena.source_memory);
        let name = self.tensor_name(slot.tensor);
        let partner_name = self.tensor_name(partner.tensor);
        let shared_from = slot.offset.max(partner.offset);
        let shared_to = slot.end().min(partner.end());
        let first = slot.lifetime.first.max(partner.lifetime.first);
        let last = slot.lifetime.last.min(partner.lifetime.last);
        let message = format!(
            "{name} (offset {}, {} bytes, {}) and {partner_name} (offset {}, {} bytes, {}) share \
             bytes [{shared_from}, {shared_to}) of the {arena_name} while both are live at steps \
             [{first}, {last}]; the planner must move tensor `{}` clear of it (e.g. to offset {} or \
             above) or give the two tensors disjoint bytes some other way",
            slot.offset,
            slot.size,
            steps(slot.lifetime),
            partner.offset,
            partner.size,
            steps(partner.lifetime),
            name.id,
            align_up(partner.end(), slot.alignment)
        );
        self.report(
            Violation::new(ViolationKind::Overlap, message)
                .tensor(name)
                .other_tensor(partner_name)
                .arena(arena_name),
        );
    }
}

/// Each slot that shares bytes with a slot already live when it starts, with that slot
/// (the sweep of [`crate::placement::sweep`], which the module docs describe).
fn collisions(slots: &[Slot]) -> Vec<(Slot, Slot)> {
    sweep::collisions(slots)
        .into_iter()
        .map(|(slot, other)| (slots[slot], slots[other]))
        .collect()
}

/// The lower bound of each arena ([`arena_lower_bound`], the one memplan reports everywhere).
pub(super) fn lower_bounds(slots: &[Vec<Slot>]) -> Vec<u64> {
    slots
        .iter()
        .map(|arena_slots| {
            arena_lower_bound(
                arena_slots
                    .iter()
                    .map(|slot| (slot.size, slot.alignment, slot.lifetime)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_plugin_api::Lifetime;

    fn slot(tensor: u32, offset: u64, size: u64, first: u32, last: u32) -> Slot {
        Slot {
            tensor,
            offset,
            size,
            alignment: 1,
            lifetime: Lifetime::new(first, last),
        }
    }

    fn pairs(slots: &[Slot]) -> Vec<(u32, u32)> {
        collisions(slots)
            .into_iter()
            .map(|(a, b)| (a.tensor, b.tensor))
            .collect()
    }

    #[test]
    fn disjoint_bytes_or_disjoint_steps_do_not_collide() {
        let slots = [
            slot(0, 0, 10, 0, 5),
            slot(1, 10, 10, 0, 5), // touching bytes
            slot(2, 0, 10, 6, 9),  // same bytes, later steps
            slot(3, 5, 10, 6, 6),  // overlaps 2's bytes... and 2 is live at 6
        ];
        assert_eq!(pairs(&slots), vec![(3, 2)]);
    }

    #[test]
    fn inclusive_lifetimes_touching_at_one_step_collide() {
        let slots = [slot(0, 0, 8, 0, 3), slot(1, 4, 8, 3, 7)];
        assert_eq!(pairs(&slots), vec![(1, 0)]);
    }

    #[test]
    fn a_slot_inside_a_larger_live_slot_is_found() {
        let slots = [slot(0, 0, 100, 0, 9), slot(1, 40, 10, 2, 4)];
        assert_eq!(pairs(&slots), vec![(1, 0)]);
    }

    #[test]
    fn the_neighbour_above_is_found() {
        let slots = [slot(0, 50, 10, 0, 9), slot(1, 10, 41, 1, 1)];
        assert_eq!(pairs(&slots), vec![(1, 0)]);
    }

    #[test]
    fn equal_offsets_collide_both_ways() {
        let slots = [slot(7, 16, 16, 0, 0), slot(3, 16, 16, 0, 0)];
        assert_eq!(pairs(&slots).len(), 1);
    }

    #[test]
    fn every_slot_colliding_with_a_live_one_is_reported() {
        // One long slot, then five short ones each overlapping it.
        let mut slots = vec![slot(0, 0, 1000, 0, 99)];
        slots.extend((1..=5).map(|i| slot(i, i as u64 * 100, 50, i, i)));
        assert_eq!(pairs(&slots).len(), 5);
    }

    fn collide(a: &Slot, b: &Slot) -> bool {
        a.lifetime.overlaps(b.lifetime) && a.offset < b.end() && b.offset < a.end()
    }

    /// Against all pairs on small random arenas: every report is a real collision, and of
    /// every colliding pair at least one slot is reported.
    #[test]
    fn the_sweep_agrees_with_all_pairs() {
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut below = |n: u64| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..2000 {
            let count = 1 + below(12) as u32;
            let slots: Vec<Slot> = (0..count)
                .map(|tensor| {
                    let first = below(8) as u32;
                    let last = first + below(4) as u32;
                    slot(tensor, below(64), 1 + below(24), first, last)
                })
                .collect();
            let found = collisions(&slots);
            for (a, b) in &found {
                assert!(collide(a, b), "{a:?} and {b:?} do not collide");
            }
            let reported: Vec<u32> = found.iter().map(|(a, _)| a.tensor).collect();
            let mut unique = reported.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(
                unique.len(),
                reported.len(),
                "a slot reported twice: {found:?}"
            );
            for a in &slots {
                for b in &slots {
                    if a.tensor < b.tensor && collide(a, b) {
                        assert!(
                            reported.contains(&a.tensor) || reported.contains(&b.tensor),
                            "neither of {a:?} and {b:?} is reported: {found:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn lower_bound_counts_the_padding_no_placement_avoids() {
        // Both aligned to 16 and live at step 1: the lower one is padded to 16.
        let mut a = slot(0, 0, 10, 0, 1);
        a.alignment = 16;
        let mut b = slot(1, 16, 10, 1, 2);
        b.alignment = 16;
        assert_eq!(lower_bounds(&[vec![a, b], vec![]]), vec![26, 0]);
        // The second unaligned: it can go first, at 0..10, and the aligned one at 16..26, or
        // the aligned one first and the other right after it, at 10..20.
        b.alignment = 1;
        assert_eq!(lower_bounds(&[vec![a, b]]), vec![20]);
    }
}
