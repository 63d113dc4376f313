use std::cmp::Reverse;

use super::timeline::StabbingTree;
use super::*;
use crate::testing::{assert_valid_packing, buffer, tflm_greedy_medium};
use crate::FixedOffset;
use memplan_plugin_api::Lifetime;

#[test]
fn first_fit_reproduces_tflm_tflm_greedy_medium() {
    let buffers = tflm_greedy_medium();
    let packing = pack_greedy(&buffers, Order::Size, Fit::First);
    assert_eq!(packing.offsets, vec![50, 70, 40, 0, 0]);
    assert_eq!(packing.height, 90);
    assert_valid_packing(&buffers, &packing);
}

#[test]
fn every_order_and_fit_gives_a_valid_packing() {
    let buffers = tflm_greedy_medium();
    for (_, order) in Order::ALL {
        for (_, fit) in Fit::ALL {
            let packing = pack_greedy(&buffers, order, fit);
            assert_valid_packing(&buffers, &packing);
            assert!(
                packing.height >= 80,
                "{order:?} {fit:?}: below the lower bound"
            );
        }
    }
}

#[test]
fn best_fit_takes_the_smallest_gap_first_fit_the_lowest() {
    // Two long-lived walls leave a 100-byte gap at 0 and a 40-byte gap at 200.
    let buffers = vec![
        Buffer {
            fixed_offset: FixedOffset::at(100),
            ..buffer(100, 0, 9)
        },
        Buffer {
            fixed_offset: FixedOffset::at(240),
            ..buffer(10, 0, 9)
        },
        buffer(30, 2, 3),
    ];
    let best = pack_greedy(&buffers, Order::Size, Fit::Best);
    assert_eq!(best.offsets, vec![100, 240, 200]);
    let first = pack_greedy(&buffers, Order::Size, Fit::First);
    assert_eq!(first.offsets, vec![100, 240, 0]);
    assert_valid_packing(&buffers, &best);
    assert_valid_packing(&buffers, &first);
}

#[test]
fn alignment_is_honoured_inside_gaps() {
    let buffers = vec![
        buffer(3, 0, 5),
        Buffer {
            alignment: 16,
            ..buffer(8, 0, 5)
        },
        Buffer {
            alignment: 8,
            ..buffer(8, 1, 2)
        },
    ];
    for (_, fit) in Fit::ALL {
        let packing = pack_greedy(&buffers, Order::Size, fit);
        assert_valid_packing(&buffers, &packing);
    }
}

#[test]
fn nothing_to_pack_packs_to_nothing() {
    for (_, fit) in Fit::ALL {
        let packing = pack_greedy(&[], Order::Size, fit);
        assert!(packing.offsets.is_empty());
        assert_eq!(packing.height, 0);
    }
    let fixed_only = [Buffer {
        fixed_offset: FixedOffset::at(32),
        ..buffer(8, 3, 9)
    }];
    assert_eq!(pack_greedy(&fixed_only, Order::Size, Fit::Best).height, 40);
}

#[test]
fn buffers_disjoint_in_time_share_bytes() {
    let buffers = vec![buffer(64, 0, 1), buffer(64, 2, 3), buffer(64, 4, 4)];
    let packing = pack_greedy(&buffers, Order::Size, Fit::Best);
    assert_eq!(packing.offsets, vec![0, 0, 0]);
    assert_eq!(packing.height, 64);
}

/// Indices of the buffers without a fixed offset in placement order.
fn order_of(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u32> {
    let timeline = Timeline::new(buffers);
    let mut queue: Vec<Item<u64>> = buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.fixed_offset.is_none())
        .map(|(index, b)| Item::<u64>::new(index, b, timeline.span(b.lifetime)))
        .collect();
    let key = PlacementKey::for_order(order, fit);
    let mut room = RadixRoom::new(queue.len());
    let never = || false;
    radix_sort(
        &mut queue,
        &mut room,
        |item| key.of(item),
        &mut Poller::new(&never),
    )
    .expect("never stopped");
    queue.iter().map(|item| item.index).collect()
}

/// The documented orders, written as plain comparison sorts: the reference the radix
/// sort must agree with.
fn reference_order(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u32> {
    let mut indices: Vec<u32> = (0..buffers.len() as u32)
        .filter(|&i| buffers[i as usize].fixed_offset.is_none())
        .collect();
    let size = |i: u32| buffers[i as usize].size;
    let duration = |i: u32| buffers[i as usize].lifetime.duration();
    match (order, fit) {
        (Order::Size, Fit::First) => indices.sort_by_key(|&i| (Reverse(size(i)), Reverse(i))),
        (Order::Size, Fit::Best) => {
            indices.sort_by_key(|&i| (Reverse(size(i)), Reverse(duration(i)), i))
        }
        (Order::Duration, _) => {
            indices.sort_by_key(|&i| (Reverse(duration(i)), Reverse(size(i)), i))
        }
        (Order::Area, _) => indices.sort_by_key(|&i| {
            let area = u128::from(size(i)) * u128::from(duration(i));
            (Reverse(area), Reverse(size(i)), i)
        }),
        (Order::Start, _) => {
            indices.sort_by_key(|&i| (buffers[i as usize].lifetime.first, Reverse(size(i)), i))
        }
    }
    indices
}

#[test]
fn orders_sort_as_documented() {
    let buffers = [buffer(10, 0, 9), buffer(20, 0, 0), buffer(20, 0, 1)];
    assert_eq!(order_of(&buffers, Order::Size, Fit::Best), vec![2, 1, 0]);
    // TFLite Micro's order: equal sizes in reverse model order, lifetimes ignored.
    let tflm = [buffer(20, 0, 1), buffer(20, 0, 0), buffer(10, 0, 9)];
    assert_eq!(order_of(&tflm, Order::Size, Fit::First), vec![1, 0, 2]);
    assert_eq!(
        order_of(&buffers, Order::Duration, Fit::Best),
        vec![0, 2, 1]
    );
    assert_eq!(order_of(&buffers, Order::Area, Fit::Best), vec![0, 2, 1]);
}

#[test]
fn radix_sorted_orders_match_comparison_sorts() {
    // Sizes and durations spread over every key byte, with many ties.
    let buffers: Vec<Buffer> = (0..3000u64)
        .map(|i| {
            let size = match i % 5 {
                0 => i % 7 + 1,
                1 => (i * 2_654_435_761) % (1 << 40) + 1,
                2 => u64::MAX - i % 3,
                3 => 1 << (i % 64),
                _ => 4096,
            };
            let first = (i * 31 % 500) as u32;
            let duration = [0, 1, 300, 70_000, u32::MAX - first][(i % 5) as usize];
            Buffer {
                size,
                alignment: 1,
                lifetime: Lifetime::new(first, first.saturating_add(duration)),
                fixed_offset: (i % 97 == 0).then_some(i).into(),
            }
        })
        .collect();
    for (_, order) in Order::ALL {
        for (_, fit) in Fit::ALL {
            assert_eq!(
                order_of(&buffers, order, fit),
                reference_order(&buffers, order, fit),
                "{order:?} {fit:?}"
            );
        }
    }
}

/// The same greedy packing with the overlapping buffers found by brute force.
fn pack_by_brute_force(buffers: &[Buffer], order: Order, fit: Fit) -> Vec<u64> {
    pack_in_order_by_brute_force(buffers, &reference_order(buffers, order, fit), fit)
}

/// Greedy packing of the buffers without a fixed offset in the order of `indices`, the
/// overlapping buffers found by brute force.
fn pack_in_order_by_brute_force(buffers: &[Buffer], indices: &[u32], fit: Fit) -> Vec<u64> {
    pack_between_by_brute_force(buffers, indices, fit, &[])
}

/// The reference packer: each buffer compared with every placed buffer overlapping it in
/// time (quadratic, obviously right), no buffer spanning one of the `barriers`.
fn pack_between_by_brute_force(
    buffers: &[Buffer],
    indices: &[u32],
    fit: Fit,
    barriers: &[u64],
) -> Vec<u64> {
    let mut placed: Vec<Option<u64>> = buffers.iter().map(|b| b.fixed_offset.get()).collect();
    for &index in indices {
        let own = &buffers[index as usize];
        let mut occupied: Vec<(u64, u64)> = (0..buffers.len())
            .filter_map(|j| placed[j].map(|offset| (j, offset)))
            .filter(|&(j, _)| buffers[j].lifetime.overlaps(own.lifetime))
            // An empty buffer takes no byte: it splits no gap (the packers skip it too).
            .filter(|&(j, _)| buffers[j].size > 0)
            .map(|(j, offset)| (offset, offset + buffers[j].size))
            .collect();
        occupied.sort_unstable_by_key(|&(offset, _)| offset);
        placed[index as usize] = Some(choose_gap(occupied, own.size, own.alignment, fit, barriers));
    }
    placed.into_iter().map(Option::unwrap).collect()
}

#[test]
fn the_time_indexes_find_exactly_the_overlapping_buffers() {
    // Short, long (beyond SHORT_SPAN points), whole-run, fixed and sparse-start buffers.
    let mut buffers: Vec<Buffer> = (0..600u32)
        .map(|i| {
            let first = (i * 37) % 150;
            let duration = match i % 10 {
                0 => 20 + i % 60,
                1 => 9 + i % 3,
                _ => i % 4,
            };
            Buffer {
                size: u64::from(i * 7919 % 113 + 1),
                alignment: 1 << (i % 3),
                lifetime: Lifetime::new(first, first + duration),
                fixed_offset: FixedOffset::NONE,
            }
        })
        .collect();
    buffers.push(buffer(50, 0, 400));
    buffers.push(Buffer {
        fixed_offset: FixedOffset::at(1000),
        ..buffer(64, 30, 90)
    });
    // The same buffers scaled past 4 GiB, so that the index stores 64-bit offsets.
    let scaled: Vec<Buffer> = buffers
        .iter()
        .map(|b| Buffer {
            size: b.size << 28,
            alignment: b.alignment << 28,
            fixed_offset: b.fixed_offset.get().map(|offset| offset << 28).into(),
            ..*b
        })
        .collect();
    let never = &|| false;
    assert!(pack_in::<u32>(
        &buffers,
        PlacementKey::for_order(Order::Size, Fit::Best),
        rules(Fit::Best),
        WINDOW_POINTS,
        IndexChoice::PointLists,
        never
    )
    .unwrap()
    .is_some());
    assert!(pack_in::<u32>(
        &scaled,
        PlacementKey::for_order(Order::Size, Fit::Best),
        rules(Fit::Best),
        WINDOW_POINTS,
        IndexChoice::Dense,
        &|| false
    )
    .unwrap()
    .is_none());
    for buffers in [buffers, scaled] {
        for (_, order) in Order::ALL {
            for (_, fit) in Fit::ALL {
                let expected = pack_by_brute_force(&buffers, order, fit);
                let packing = pack_greedy(&buffers, order, fit);
                assert_valid_packing(&buffers, &packing);
                assert_eq!(packing.offsets, expected, "{order:?} {fit:?}");
                // Windows of a few points: most buffers cross a window boundary.
                for window_points in [1, 3, 16] {
                    for index in [IndexChoice::PointLists, IndexChoice::Dense] {
                        let windowed = pack_in::<u64>(
                            &buffers,
                            PlacementKey::for_order(order, fit),
                            rules(fit),
                            window_points,
                            index,
                            &|| false,
                        )
                        .unwrap()
                        .expect("64 bits");
                        assert_eq!(
                            windowed.offsets, expected,
                            "{order:?} {fit:?} {window_points} {index:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn offsets_narrow_to_32_bits_only_while_every_end_fits() {
    let top = u64::from(u32::MAX);
    // The larger buffer goes first, the other on top, ending at 2^32 - 1 or one byte above.
    for (size, fits) in [(top - 10, true), (top - 9, false)] {
        let buffers = vec![buffer(10, 0, 1), buffer(size, 0, 1)];
        for index in [IndexChoice::PointLists, IndexChoice::Dense] {
            let narrow = pack_in::<u32>(
                &buffers,
                PlacementKey::for_order(Order::Duration, Fit::Best),
                rules(Fit::Best),
                WINDOW_POINTS,
                index,
                &|| false,
            )
            .unwrap();
            assert_eq!(narrow.is_some(), fits, "size {size} {index:?}");
        }
        let packing = pack_greedy(&buffers, Order::Duration, Fit::Best);
        assert_eq!(packing.offsets, vec![size, 0]);
        assert_eq!(packing.height, size + 10);
    }
    let fixed = Buffer {
        fixed_offset: FixedOffset::at(top),
        ..buffer(1, 0, 1)
    };
    let packing = pack_greedy(&[fixed, buffer(4, 0, 1)], Order::Size, Fit::Best);
    assert_eq!(packing.offsets, vec![top, 0]);
}

#[test]
fn live_bytes_at_points_sum_the_sizes_over_each_span() {
    // Points 0-3 (start steps 5, 7, 9, 12): a (8 bytes) over 5-9, b (4) at 7, c (2) over
    // 9-12, d (1) at 12.
    let buffers = vec![
        buffer(8, 5, 9),
        buffer(4, 7, 7),
        buffer(2, 9, 12),
        buffer(1, 12, 12),
    ];
    let timeline = Timeline::new(&buffers);
    let spans = buffers.iter().map(|b| (timeline.span(b.lifetime), b.size));
    assert_eq!(live_bytes_at_points(4, spans), vec![8, 12, 10, 3]);
    assert_eq!(live_bytes_at_points(0, []), Vec::<u64>::new());
}

#[test]
fn sparse_and_dense_steps_give_the_same_spans() {
    let dense = vec![
        buffer(1, 5, 9),
        buffer(1, 7, 7),
        buffer(1, 9, 12),
        buffer(1, 12, 12),
    ];
    let sparse: Vec<Buffer> = dense
        .iter()
        .map(|b| {
            let (first, last) = (b.lifetime.first, b.lifetime.last);
            buffer(1, first * 100_000, last * 100_000)
        })
        .collect();
    let expected = vec![(0, 2), (1, 1), (2, 3), (3, 3)];
    let spans = |buffers: &[Buffer]| {
        let timeline = Timeline::new(buffers);
        assert_eq!(
            timeline.last_point_at.is_some(),
            buffers[0].lifetime.first < 100,
            "the table is for dense steps only"
        );
        let spans: Vec<(u32, u32)> = buffers.iter().map(|b| timeline.span(b.lifetime)).collect();
        spans
    };
    assert_eq!(spans(&dense), expected);
    assert_eq!(spans(&sparse), expected);
    assert!(Timeline::new(&[]).points.is_empty());
}

#[test]
fn names_round_trip() {
    for (name, order) in Order::ALL {
        assert_eq!(Order::from_name(name), Some(order));
        assert_eq!(order.name(), name);
    }
    for (name, fit) in Fit::ALL {
        assert_eq!(Fit::from_name(name), Some(fit));
        assert_eq!(fit.name(), name);
    }
    assert_eq!(Order::from_name("random"), None);
}

#[test]
fn stabbing_tree_reports_exactly_the_live_intervals() {
    // Brute force over every leaf of a small tree with intervals of all shapes.
    let leaves = 13;
    let mut intervals = Vec::new();
    for lo in 0..leaves as u32 {
        for hi in (lo..leaves as u32).step_by(3) {
            intervals.push((lo, hi));
        }
    }
    let mut tree = StabbingTree::<u32>::new(leaves, &intervals);
    for (item, &(lo, hi)) in intervals.iter().enumerate() {
        let slot = LongSlot {
            bytes: Bytes::new(item as u64, item as u64 + 1),
            lo,
            hi,
        };
        tree.insert(lo, hi, slot);
    }
    for point in 0..leaves as u32 {
        let mut found = Vec::new();
        tree.for_each_live_at(point, |slots| {
            found.extend(
                slots
                    .iter()
                    .filter(|s| !s.is_free())
                    .map(|s| s.bytes.widen().0),
            )
        });
        found.sort_unstable();
        let expected: Vec<u64> = (0..intervals.len() as u64)
            .filter(|&i| intervals[i as usize].0 <= point && point <= intervals[i as usize].1)
            .collect();
        assert_eq!(found, expected, "leaf {point}");
    }
}

#[test]
fn packing_is_deterministic() {
    let buffers: Vec<Buffer> = (0..200u32)
        .map(|i| Buffer {
            size: u64::from(i * 7919 % 97 + 1),
            alignment: 1 << (i % 4),
            lifetime: Lifetime::new(i % 23, i % 23 + i % 5),
            fixed_offset: FixedOffset::NONE,
        })
        .collect();
    let first = pack_greedy(&buffers, Order::Size, Fit::Best);
    assert_valid_packing(&buffers, &first);
    for _ in 0..3 {
        assert_eq!(pack_greedy(&buffers, Order::Size, Fit::Best), first);
    }
}

#[test]
fn a_packing_asked_to_stop_gives_up_between_placements() {
    // Every buffer live at once: the slow case, where each placement compares with every
    // buffer placed before it. Asked to stop at its first poll, the packing gives up there;
    // never asked, it finishes.
    let buffers: Vec<Buffer> = (0..4096u64)
        .map(|index| buffer(16 + index % 7, 0, 1))
        .collect();
    let polls = std::cell::Cell::new(0);
    let stop = || {
        polls.set(polls.get() + 1);
        true
    };
    // The dense index reads a run or two per placement: more buffers to reach a poll.
    let many: Vec<Buffer> = (0..100_000u64)
        .map(|index| buffer(16 + index % 7, 0, 1))
        .collect();
    for (index, buffers) in [
        (IndexChoice::PointLists, &buffers),
        (IndexChoice::Dense, &many),
    ] {
        polls.set(0);
        let packing = pack_in::<u32>(
            buffers,
            PlacementKey::for_order(Order::Size, Fit::Best),
            rules(Fit::Best),
            8,
            index,
            &stop,
        );
        assert!(matches!(packing, Err(Stopped)), "{index:?}");
        assert_eq!(polls.get(), 1, "{index:?}");
    }
    // The work of 4096 all-live placements in the point lists (about 8 million comparisons)
    // passes the polling interval several times.
    let polls = std::cell::Cell::new(0);
    let never = || {
        polls.set(polls.get() + 1);
        false
    };
    let index = IndexChoice::PointLists;
    let packing = pack_in::<u32>(
        &buffers,
        PlacementKey::for_order(Order::Size, Fit::Best),
        rules(Fit::Best),
        8,
        index,
        &never,
    );
    let packing = packing.unwrap().expect("32 bits");
    assert_valid_packing(&buffers, &packing);
    assert!(polls.get() >= 64, "asked {} times", polls.get());
}

#[test]
fn a_small_packing_completes_even_asked_to_stop() {
    // A planner past its deadline still packs its remaining small arenas greedily (the
    // portfolio's fallback, and its hill climbing's starting packing): a packing is asked
    // only once it has done STOP_FIRST_POLL_WORK. 600 buffers in 200 steps, three live at
    // once in each column.
    let mut buffers = tflm_greedy_medium();
    buffers.extend(crate::testing::rectangle_cut(1 << 20, 200, 600, 1));
    for (_, order) in Order::ALL {
        for (_, fit) in Fit::ALL {
            let packing = pack_greedy_until(&buffers, order, fit, &|| true);
            assert_eq!(
                packing,
                Ok(pack_greedy(&buffers, order, fit)),
                "{order:?} {fit:?}"
            );
        }
    }
    let ranks = greedy_ranks(&buffers, Order::Size, Fit::Best);
    assert!(pack_greedy_ranked(&buffers, &ranks, Fit::Best, &|| true).is_ok());
}

#[test]
fn crowded_point_lists_hand_over_to_the_dense_index() {
    // Thousands of buffers live at once, stacked into one run of bytes: the point lists
    // read every one of them per placement, the dense index one run. The packing starts
    // over with the dense index, with the very offsets the point lists give.
    let mut buffers: Vec<Buffer> = (0..3000u64)
        .map(|index| buffer(16 + index % 7 * 8, 0, 1))
        .collect();
    buffers.extend((0..200u32).map(|i| buffer(8, 2 + i, 3 + i)));
    let watched = |buffers: &[Buffer]| {
        let packing = pack_in::<u32>(
            buffers,
            PlacementKey::for_order(Order::Size, Fit::Best),
            rules(Fit::Best),
            WINDOW_POINTS,
            IndexChoice::Measured,
            &|| false,
        );
        (packing.unwrap().expect("32 bits"), LAST_INDEX.get())
    };
    let lists = pack_greedy_with(&buffers, IndexChoice::PointLists);
    let (packing, index) = watched(&buffers);
    assert_eq!(index, IndexChoice::Dense);
    assert_eq!(packing.offsets, lists.offsets);
    // Bytes in fragments: 2000 fixed 8-byte buffers 32 bytes apart leave gaps too small for
    // the 32-byte buffers placed on top, so every placement meets 2000 runs; the lists stay.
    let mut fragmented: Vec<Buffer> = (0..2000u64)
        .map(|k| Buffer {
            fixed_offset: FixedOffset::at(32 * k),
            ..buffer(8, 0, 1)
        })
        .collect();
    fragmented.extend((0..3000).map(|_| buffer(32, 0, 1)));
    let (packing, index) = watched(&fragmented);
    assert_eq!(index, IndexChoice::PointLists);
    // Crowding that grows as the packing fills: each band buffer meets more placed ones than
    // the one before, too few when the watch first decides. It keeps watching and hands over
    // once they are many (it once stopped watching there: band 1M took 258 s).
    let band = crate::testing::band_trace(30_000);
    let (band_packing, index) = watched(&band);
    assert_eq!(index, IndexChoice::Dense);
    assert_valid_packing(&band, &band_packing);
    assert_eq!(band_packing.height, crate::arena_lower_bound(&band));
    assert_eq!(
        packing.offsets,
        pack_greedy_with(&fragmented, IndexChoice::Dense).offsets
    );
}

#[test]
fn a_few_placements_reading_most_of_the_index_do_not_hand_over_to_the_dense_one() {
    // A chain of 50,000 short buffers, then (smallest, so placed last) 44 buffers live
    // throughout, each reading about 50,000 entries. The first 21 of those fill a period of
    // the watch and leave it undecided (few entries per placement over the whole chain);
    // counted in full, the next 21 decided a period of their own, 21 placements reading a
    // million entries between them, and the packing started over with the dense index,
    // slower on the chain (`model:2000000:3499` took 4.5-4.7 s there instead of 0.6-1.0 s).
    let mut buffers: Vec<Buffer> = (0..50_000u32)
        .map(|step| buffer(16 + u64::from(step % 7) * 8, step, step + 1))
        .collect();
    buffers.extend((0..44).map(|_| buffer(8, 0, 50_000)));
    let packing = pack_in::<u32>(
        &buffers,
        PlacementKey::for_order(Order::Size, Fit::Best),
        rules(Fit::Best),
        WINDOW_POINTS,
        IndexChoice::Measured,
        &|| false,
    )
    .unwrap()
    .expect("32 bits");
    assert_eq!(LAST_INDEX.get(), IndexChoice::PointLists);
    assert_valid_packing(&buffers, &packing);
}

fn pack_greedy_with(buffers: &[Buffer], index: IndexChoice) -> Packing {
    pack_in::<u64>(
        buffers,
        PlacementKey::for_order(Order::Size, Fit::Best),
        rules(Fit::Best),
        WINDOW_POINTS,
        index,
        &|| false,
    )
    .unwrap()
    .expect("64 bits")
}

/// The rules of a packing without barriers.
fn rules(fit: Fit) -> Rules<'static> {
    Rules { fit, barriers: &[] }
}

#[test]
fn no_buffer_spans_a_barrier() {
    // Two 24-byte buffers live together and a 32-byte barrier: the second cannot sit at
    // 24..48, it goes to the barrier. A later 8-byte one fits below it.
    let buffers = vec![buffer(24, 0, 3), buffer(24, 0, 3), buffer(8, 1, 2)];
    for fit in [Fit::First, Fit::Best] {
        let packing = pack_greedy_between(&buffers, Order::Size, fit, &[32], &|| false)
            .expect("never stopped");
        let mut big_ones = [packing.offsets[0], packing.offsets[1]];
        big_ones.sort_unstable();
        assert_eq!((big_ones, packing.offsets[2]), ([0, 32], 24), "{fit:?}");
        // Without the barrier, the usual stack.
        let plain = pack_greedy(&buffers, Order::Size, fit);
        assert_eq!(plain.height, 56, "{fit:?}");
    }
    // A buffer larger than the space below the first barrier starts at it.
    let big = vec![Buffer {
        alignment: 8,
        ..buffer(40, 0, 1)
    }];
    let packing = pack_greedy_between(&big, Order::Size, Fit::First, &[16, 32], &|| false)
        .expect("never stopped");
    assert_eq!(packing.offsets, vec![32]);
}

#[test]
fn ranked_packing_places_in_rank_order() {
    let buffers: Vec<Buffer> = (0..400u32)
        .map(|i| {
            let first = (i * 37) % 90;
            buffer(u64::from(i * 7919 % 113 + 1), first, first + i % 9)
        })
        .collect();
    // An order's ranks give that order's packing.
    for (_, order) in Order::ALL {
        for (_, fit) in Fit::ALL {
            let ranks = greedy_ranks(&buffers, order, fit);
            let expected: Vec<u32> = reference_order(&buffers, order, fit);
            let mut by_rank: Vec<u32> = (0..buffers.len() as u32).collect();
            by_rank.sort_by_key(|&index| ranks[index as usize]);
            assert_eq!(by_rank, expected, "{order:?} {fit:?}");
            let ranked = pack_greedy_ranked(&buffers, &ranks, fit, &|| false).unwrap();
            assert_eq!(ranked.offsets, pack_greedy(&buffers, order, fit).offsets);
        }
    }
    let mut ranks = vec![0u32; buffers.len()];
    // Any permutation: as brute force places it.
    let mut random = crate::XorShift64Star::new(7);
    let mut shuffled: Vec<u32> = (0..buffers.len() as u32).collect();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, random.below(i as u64 + 1) as usize);
    }
    for (rank, &index) in shuffled.iter().enumerate() {
        ranks[index as usize] = rank as u32;
    }
    for (_, fit) in Fit::ALL {
        let packing = pack_greedy_ranked(&buffers, &ranks, fit, &|| false).unwrap();
        assert_valid_packing(&buffers, &packing);
        assert_eq!(
            packing.offsets,
            pack_in_order_by_brute_force(&buffers, &shuffled, fit),
            "{fit:?}"
        );
    }
}

/// A small random instance: up to 40 buffers over up to 80 steps (spans short and long, so
/// that both kinds of every index are met), sizes up to 64 bytes, alignments 1 to 16, about
/// one in ten at a fixed offset (each in a slot of its own above the rest, so that fixed
/// buffers never collide).
fn random_small_instance(random: &mut crate::XorShift64Star) -> Vec<Buffer> {
    let count = 1 + random.below(40) as usize;
    let steps = 1 + random.below(80);
    let long_from = random.below(steps + 1);
    (0..count)
        .map(|k| {
            let first = random.below(steps);
            let duration = if random.percent(20) {
                random.below(steps - first)
            } else {
                random.below(long_from.min(steps - first) + 1)
            };
            let mut buffer = Buffer {
                size: 1 + random.below(64),
                alignment: random.pick(&[1, 1, 2, 4, 8, 16]),
                ..buffer(0, first as u32, (first + duration) as u32)
            };
            if random.percent(10) {
                buffer.fixed_offset = FixedOffset::at(4096 + 128 * k as u64);
            }
            buffer
        })
        .collect()
}

#[test]
fn random_small_instances_pack_as_the_reference_packer() {
    // The reference compares each buffer with every placed one overlapping it in time: the
    // packer, with either time index and windows of any width, must give the very same
    // offsets for every order and fit, with and without barriers.
    let mut random = crate::XorShift64Star::new(31);
    for instance in 0..3000 {
        let buffers = random_small_instance(&mut random);
        let barriers: Vec<u64> = match instance % 3 {
            0 => vec![],
            1 => vec![16 + random.below(64)],
            _ => vec![32, 64 + random.below(64)],
        };
        for (_, order) in Order::ALL {
            for (_, fit) in Fit::ALL {
                let sorted = reference_order(&buffers, order, fit);
                let expected = pack_between_by_brute_force(&buffers, &sorted, fit, &barriers);
                let packing = pack_greedy_between(&buffers, order, fit, &barriers, &|| false)
                    .expect("never stopped");
                assert_eq!(
                    packing.offsets, expected,
                    "instance {instance}, {order:?} {fit:?}: {buffers:?} {barriers:?}"
                );
                assert_valid_packing(&buffers, &packing);
                if order == Order::Size {
                    // Ranks in any order (an improvement search's): as the reference places
                    // the buffers in that order.
                    let mut ranks: Vec<u32> = (0..buffers.len() as u32).collect();
                    for i in (1..ranks.len()).rev() {
                        ranks.swap(i, random.below(i as u64 + 1) as usize);
                    }
                    let mut by_rank: Vec<u32> = (0..buffers.len() as u32)
                        .filter(|&i| buffers[i as usize].fixed_offset.is_none())
                        .collect();
                    by_rank.sort_by_key(|&i| ranks[i as usize]);
                    let ranked = pack_greedy_ranked(&buffers, &ranks, fit, &|| false)
                        .expect("never stopped");
                    assert_eq!(
                        ranked.offsets,
                        pack_in_order_by_brute_force(&buffers, &by_rank, fit),
                        "instance {instance}, ranked, {fit:?}"
                    );
                }
                let window_points = 1 + random.below(8) as u32;
                for index in [IndexChoice::PointLists, IndexChoice::Dense] {
                    let rules = Rules {
                        fit,
                        barriers: &barriers,
                    };
                    let key = PlacementKey::for_order(order, fit);
                    let packing =
                        pack_in::<u32>(&buffers, key, rules, window_points, index, &|| false)
                            .expect("never stopped")
                            .expect("32 bits");
                    assert_eq!(
                        packing.offsets, expected,
                        "instance {instance}, {order:?} {fit:?} {index:?} {window_points}"
                    );
                }
            }
        }
    }
}

/// The general packer (time index over the placed buffers) in start order with best fit:
/// what the sweep over time must equal, offset for offset.
fn pack_start_best_fit_generally(buffers: &[Buffer], barriers: &[u64]) -> Packing {
    let rules = Rules {
        fit: Fit::Best,
        barriers,
    };
    let key = PlacementKey::for_order(Order::Start, Fit::Best);
    pack_narrow_first(buffers, key, rules, &|| false).expect("never stopped")
}

/// The sweep's packing of `buffers`, checked valid and equal to the general packer's.
fn assert_sweep_packs_as_the_general_packer(buffers: &[Buffer], barriers: &[u64], name: &str) {
    assert!(sweep::applies(buffers, Order::Start, Fit::Best), "{name}");
    let swept = sweep::pack_start_best_fit(buffers, barriers, &|| false)
        .expect("never stopped")
        .expect("the sweep applies");
    let general = pack_start_best_fit_generally(buffers, barriers);
    assert_eq!(swept, general, "{name}: {barriers:?}");
    assert_valid_packing(buffers, &swept);
    // And what every caller gets.
    let dispatched = pack_greedy_between(buffers, Order::Start, Fit::Best, barriers, &|| false);
    assert_eq!(dispatched, Ok(swept), "{name}");
}

#[test]
fn the_sweep_packs_random_small_instances_as_the_general_packer() {
    // Alignments up to 16, barriers, empty buffers, offsets past 32 bits (where the general
    // packer starts over with 64-bit words), and buffers at fixed offsets: none; as
    // random_small_instance makes them (many start after buffers they overlap: the sweep
    // keeps those clear of their bytes); all starting at step 0; or all at one offset from
    // step 0 (it takes them unless two are live together). The very offsets of the general
    // packer and of the reference.
    let mut random = crate::XorShift64Star::new(53);
    let mut swept_with_fixed = 0;
    let mut swept_late = 0;
    for instance in 0..8000 {
        let mut buffers = random_small_instance(&mut random);
        let fixed = instance % 4;
        for buffer in &mut buffers {
            if random.percent(5) {
                buffer.size = 0;
            }
            match (fixed, buffer.fixed_offset.is_some()) {
                (0, _) => buffer.fixed_offset = FixedOffset::NONE,
                (2, true) => buffer.lifetime.first = 0,
                (3, true) => {
                    buffer.lifetime.first = 0;
                    buffer.fixed_offset = FixedOffset::at(4096);
                }
                _ => {}
            }
        }
        let mut barriers: Vec<u64> = match instance % 3 {
            0 => vec![],
            1 => vec![16 + random.below(64)],
            _ => vec![32, 64 + random.below(64)],
        };
        if instance % 5 == 4 {
            for buffer in &mut buffers {
                buffer.size <<= 30;
                buffer.alignment <<= 30;
                buffer.fixed_offset = buffer.fixed_offset.get().map(|o| o << 30).into();
            }
            barriers.iter_mut().for_each(|barrier| *barrier <<= 30);
        }
        let name = format!("instance {instance}: {buffers:?} {barriers:?}");
        let has_fixed = buffers.iter().any(|buffer| buffer.fixed_offset.is_some());
        // A fixed buffer starting after a buffer it overlaps: the sweep meets it late.
        let met_late = buffers.iter().any(|fixed| {
            fixed.fixed_offset.is_some()
                && buffers.iter().any(|other| {
                    other.fixed_offset.is_none()
                        && other.lifetime.first < fixed.lifetime.first
                        && other.lifetime.last >= fixed.lifetime.first
                })
        });
        let swept = sweep::pack_start_best_fit(&buffers, &barriers, &|| false).unwrap();
        let general = pack_start_best_fit_generally(&buffers, &barriers);
        match &swept {
            Some(swept) => {
                assert_eq!(swept, &general, "{name}");
                swept_with_fixed += usize::from(has_fixed);
                swept_late += usize::from(met_late);
            }
            None => assert!(fixed == 3, "{name}: not swept"),
        }
        let dispatched =
            pack_greedy_between(&buffers, Order::Start, Fit::Best, &barriers, &|| false);
        assert_eq!(dispatched, Ok(general.clone()), "{name}");
        if fixed != 3 {
            // (Fixed buffers sharing bytes make any packing invalid.)
            assert_valid_packing(&buffers, &general);
        }
        let sorted = reference_order(&buffers, Order::Start, Fit::Best);
        let expected = pack_between_by_brute_force(&buffers, &sorted, Fit::Best, &barriers);
        assert_eq!(general.offsets, expected, "{name}");
    }
    assert!(
        swept_with_fixed >= 1000,
        "{swept_with_fixed} swept with fixed offsets"
    );
    assert!(
        swept_late >= 500,
        "{swept_late} swept meeting fixed ones late"
    );
}

#[test]
fn the_sweep_takes_fixed_offsets_that_come_first() {
    // A stack at fixed offsets live from step 0, and buffers after it (as a sweep out of the
    // busiest step packs its side): swept, around the stack.
    let stacked = |first: u32, offset: u64, size: u64, last: u32| Buffer {
        fixed_offset: FixedOffset::at(offset),
        ..buffer(size, first, last)
    };
    let buffers = vec![
        stacked(0, 0, 16, 9),
        stacked(0, 16, 32, 3),
        stacked(1, 48, 8, 9),
        buffer(24, 4, 9),
        buffer(8, 2, 9),
    ];
    let swept = sweep::pack_start_best_fit(&buffers, &[], &|| false).unwrap();
    assert_eq!(swept, Some(pack_start_best_fit_generally(&buffers, &[])));
    // The 8 bytes go above the stack at step 2 (56); the 24 into the 32 freed at step 4,
    // below the 8-byte fixed buffer.
    assert_eq!(swept.unwrap().offsets, vec![0, 16, 48, 16, 56]);
    // A fixed buffer starting after a buffer it overlaps is one a sweep over start points
    // has not met yet: the buffers before it keep clear of its bytes. The 16 bytes from step
    // 1 would go at 32 but for the 8 fixed at 40 from step 5, and 48 is the lowest clear.
    let late = vec![buffer(32, 0, 9), stacked(5, 40, 8, 6), buffer(16, 1, 9)];
    let swept = sweep::pack_start_best_fit(&late, &[], &|| false).unwrap();
    assert_eq!(swept.as_ref().unwrap().offsets, vec![0, 40, 48]);
    assert_eq!(swept, Some(pack_start_best_fit_generally(&late, &[])));
    // Between a blocked stretch and a live buffer, the smallest stretch wins: the 8 bytes
    // from step 1 take 16..24 (below the fixed 24..40 of step 3), not the 32 free above.
    let between = vec![
        buffer(16, 0, 9),
        stacked(3, 24, 16, 9),
        buffer(8, 1, 9),
        stacked(0, 72, 8, 9),
    ];
    let swept = sweep::pack_start_best_fit(&between, &[], &|| false).unwrap();
    assert_eq!(swept.as_ref().unwrap().offsets, vec![0, 24, 16, 72]);
    assert_eq!(swept, Some(pack_start_best_fit_generally(&between, &[])));
    // Two fixed buffers live together may share bytes: start order with best fit goes the
    // general way then, with its offsets.
    let overlapping = vec![stacked(0, 0, 16, 9), stacked(2, 8, 16, 4), buffer(8, 3, 4)];
    assert_eq!(
        sweep::pack_start_best_fit(&overlapping, &[], &|| false),
        Ok(None)
    );
    let packing = pack_greedy(&overlapping, Order::Start, Fit::Best);
    assert_eq!(packing, pack_start_best_fit_generally(&overlapping, &[]));
    // Other orders and first fit never take the sweep.
    let free: Vec<Buffer> = [buffer(32, 0, 9), buffer(16, 1, 9)].into();
    assert!(sweep::applies(&free, Order::Start, Fit::Best));
    assert!(!sweep::applies(&free, Order::Start, Fit::First));
    assert!(!sweep::applies(&free, Order::Size, Fit::Best));
}

#[test]
fn the_sweep_packs_every_generated_shape_as_the_general_packer() {
    for spec in [
        "band:20000",
        "all-live:20000",
        "random:20000",
        "model:20000",
        "compiler:20000",
        "even-compiler:20000",
        "cut:20000",
    ] {
        let buffers = crate::testing::generated_instance(spec)
            .expect("a generator")
            .expect("a valid spec");
        assert_sweep_packs_as_the_general_packer(&buffers, &[], spec);
    }
    let model = crate::testing::model_like_trace(20_000, 3);
    let budget = crate::arena_lower_bound(&model) / 3;
    assert_sweep_packs_as_the_general_packer(&model, &[budget, 2 * budget], "model, barriers");
}

#[test]
fn the_sweep_packs_generated_shapes_around_held_buffers_as_the_general_packer() {
    // As the critical-step search holds them: the buffers live at a few steps in the middle
    // of the timeline kept at the offsets a packing gave them (so that no two of them share
    // bytes), the others packed around them, many starting before held buffers they overlap.
    for spec in [
        "random:20000",
        "random:20000:2:20000",
        "random:20000:3:60000",
        "model:20000",
        "compiler:20000",
        "band:20000",
    ] {
        let mut buffers = crate::testing::generated_instance(spec)
            .expect("a generator")
            .expect("a valid spec");
        let placed = pack_greedy(&buffers, Order::Size, Fit::Best);
        let last = buffers.iter().map(|b| b.lifetime.last).max().unwrap_or(0);
        let held_steps = [last / 5, last / 2, last / 2 + 1, 4 * last / 5];
        let mut held = 0;
        for (buffer, &offset) in buffers.iter_mut().zip(&placed.offsets) {
            let lifetime = buffer.lifetime;
            if held_steps
                .iter()
                .any(|&step| lifetime.first <= step && step <= lifetime.last)
            {
                buffer.fixed_offset = FixedOffset::at(offset);
                held += 1;
            }
        }
        assert!(held > 0 && held < buffers.len(), "{spec}: {held} held");
        assert_sweep_packs_as_the_general_packer(&buffers, &[], spec);
    }
}

#[test]
fn the_sweep_packs_minimalloc_and_corpus_traces_as_the_general_packer() {
    let mut dirs =
        vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/minimalloc")];
    dirs.extend(crate::testing::corpus_dir("minimalloc"));
    dirs.extend(crate::testing::corpus_dir("tflm-traces"));
    let mut packed = 0;
    for dir in dirs {
        for path in crate::testing::csv_files(&dir) {
            let buffers = crate::testing::read_minimalloc(&path).unwrap();
            let name = path.display().to_string();
            assert_sweep_packs_as_the_general_packer(&buffers, &[], &name);
            packed += 1;
        }
    }
    // A-K at least.
    assert!(packed >= 11, "{packed} traces");
}

#[test]
fn the_sweep_asked_to_stop_gives_up_at_its_first_poll() {
    let buffers = crate::testing::random_lifetime_trace(1_000_000, 1);
    let polls = Cell::new(0);
    let stop = || {
        polls.set(polls.get() + 1);
        true
    };
    let start = std::time::Instant::now();
    let packing = pack_greedy_until(&buffers, Order::Start, Fit::Best, &stop);
    assert_eq!(packing, Err(Stopped));
    assert_eq!(polls.get(), 1);
    // Its first poll comes after STOP_FIRST_POLL_WORK units: a pass over the buffers, well
    // under a second even on a loaded machine (the whole packing takes about 0.6 s).
    assert!(start.elapsed().as_secs_f64() < 2.0, "{:?}", start.elapsed());
    // Never asked to stop, it asks again and again and finishes.
    let asked = Cell::new(0);
    let never = || {
        asked.set(asked.get() + 1);
        false
    };
    let few = &buffers[..20_000];
    let packing = pack_greedy_until(few, Order::Start, Fit::Best, &never).expect("never stopped");
    assert_valid_packing(few, &packing);
    assert!(asked.get() >= 10, "asked {} times", asked.get());
}

#[test]
fn radix_sort_keeps_equal_keys_in_their_order() {
    // The sweep sorts by (start, size) and leaves the index to the sort's stability.
    for count in [40usize, 5000] {
        let mut pairs: Vec<(u32, u32)> = (0..count as u32).map(|i| (i * 7919 % 13, i)).collect();
        let mut poller = Poller::new(&|| false);
        radix_sort(
            &mut pairs,
            &mut RadixRoom::new(count),
            |&(key, _)| (u128::from(key), 0),
            &mut poller,
        )
        .expect("never stopped");
        let mut expected: Vec<(u32, u32)> = (0..count as u32).map(|i| (i * 7919 % 13, i)).collect();
        expected.sort_by_key(|&(key, _)| key);
        assert_eq!(pairs, expected, "{count}");
    }
}
