use super::*;
use crate::problem::Problem;
use memplan_planner_kit::testing::buffer;
use memplan_planner_kit::Buffer;

/// Searches in every order, and as a large search too; panics unless they agree.
fn solve(buffers: &[Buffer], cap: u64) -> (End, Option<u64>) {
    let problem = Problem::new(buffers);
    assert_eq!(problem.components.len(), 1);
    let context = HostContext::detached();
    let results: Vec<(End, Option<u64>)> = Order::ALL
        .iter()
        .flat_map(|&order| {
            [
                (Branching::FewestChildren, false),
                (Branching::Leftmost, false),
                (Branching::Leftmost, true),
            ]
            .map(move |(branching, large)| (order, branching, large))
        })
        .map(|(order, branching, large)| {
            let mut search =
                Search::new(&problem.components[0], order, cap, 0).with_branching(branching);
            if large {
                search = search.into_large();
            }
            let end = search.run(
                u64::MAX,
                Deadline {
                    at: None,
                    context: &context,
                },
            );
            (end, search.best().map(|(height, _)| *height))
        })
        .collect();
    assert!(
        results.windows(2).all(|pair| pair[0] == pair[1]),
        "{results:?}"
    );
    results[0]
}

#[test]
fn finds_the_minimum_of_minimallocs_example() {
    // input.12.csv: half-open [lower, upper) made inclusive.
    let buffers = [
        buffer(4, 0, 2),
        buffer(4, 3, 8),
        buffer(4, 0, 8),
        buffer(4, 9, 20),
        buffer(4, 0, 20),
    ];
    assert_eq!(solve(&buffers, 100), (End::Exhausted, Some(12)));
    assert_eq!(solve(&buffers, 11), (End::Exhausted, None));
}

/// The smallest height by trying every offset of every buffer (tiny instances only).
fn brute_force(buffers: &[Buffer]) -> u64 {
    fn fits(buffers: &[Buffer], offsets: &mut Vec<u64>, height: u64) -> bool {
        let index = offsets.len();
        if index == buffers.len() {
            return true;
        }
        let buffer = &buffers[index];
        for offset in 0..=height.saturating_sub(buffer.size) {
            let clear = (0..index).all(|other| {
                !buffers[other].lifetime.overlaps(buffer.lifetime)
                    || offsets[other] + buffers[other].size <= offset
                    || offset + buffer.size <= offsets[other]
            });
            if clear {
                offsets.push(offset);
                if fits(buffers, offsets, height) {
                    return true;
                }
                offsets.pop();
            }
        }
        false
    }
    (1..)
        .find(|&height| fits(buffers, &mut Vec::new(), height))
        .expect("a height")
}

#[test]
fn agrees_with_brute_force_on_small_random_instances() {
    let mut random = memplan_planner_kit::XorShift64Star::new(7);
    for _ in 0..100 {
        let count = 3 + random.below(5) as usize;
        let buffers: Vec<Buffer> = (0..count)
            .map(|_| {
                let first = random.below(4) as u32;
                let last = first + random.below(3) as u32;
                buffer(1 + random.below(5), first, last)
            })
            .collect();
        // Chain them in time so that they form one component.
        let mut buffers = buffers;
        buffers.push(buffer(1, 0, 5));
        let expected = brute_force(&buffers);
        assert_eq!(
            solve(&buffers, 100),
            (End::Exhausted, Some(expected)),
            "{buffers:?}"
        );
    }
}

#[test]
fn a_large_search_keeps_memory_linear_in_items_and_columns() {
    // 3,000 buffers over 3,000 steps each, one step apart: 9 million (buffer, column)
    // pairs. A dive to the first packing used to leave a trail of changes per column (as
    // many as the pairs, 3.3 GB on a 62,000-buffer training trace) and per-column item
    // lists as long; a large search keeps neither.
    let buffers: Vec<Buffer> = (0..3000u32)
        .map(|i| buffer(u64::from(1 + i % 7), i, i + 2999))
        .collect();
    let problem = Problem::new(&buffers);
    let component = &problem.components[0];
    assert!(component.span_total() > LARGE_SEARCH_SPAN);
    let context = HostContext::detached();
    let mut search = Search::new(component, Order::Size, u64::MAX - 1, u64::MAX - 1);
    assert!(search.large);
    assert!(search.live_items.is_empty());
    let end = search.run(
        u64::MAX,
        Deadline {
            at: None,
            context: &context,
        },
    );
    assert_eq!(end, End::Target);
    let items = component.items.len();
    assert!(
        search.trail.len() <= 8 * items,
        "{} changes for {items} items",
        search.trail.len()
    );
}

#[test]
fn polls_come_sooner_after_dear_nodes_and_at_most_twice_as_far_apart_after_cheap_ones() {
    // 1,024 nodes in 2 s: 2 ms a node, so the next poll comes after the next node.
    let mut polls = Polls {
        every: MOST_NODES_BETWEEN_POLLS,
        nodes: 0,
        at: Instant::now() - Duration::from_secs(2),
    };
    assert!(!polls.due(MOST_NODES_BETWEEN_POLLS - 1));
    assert!(polls.due(MOST_NODES_BETWEEN_POLLS));
    polls.polled(MOST_NODES_BETWEEN_POLLS);
    assert_eq!(polls.every, 1);
    assert!(polls.due(MOST_NODES_BETWEEN_POLLS + 1));
    // Cheap nodes (the last poll in the future: no time spent at all, whatever the load of
    // the machine): the gap doubles, no more, up to the most.
    for every in [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1024] {
        let nodes = polls.nodes + polls.every;
        polls.at = Instant::now() + Duration::from_secs(60);
        polls.polled(nodes);
        assert_eq!(polls.every, every);
    }
}
