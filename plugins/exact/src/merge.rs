//! Merged instances: buffers glued into rectangular blocks where the sizes say they belong
//! together, for restarts that look for a packing at the lower bound with far fewer items.
//!
//! Blocks are glued in two ways:
//! - *joined*: two blocks as high as each other, one starting in the column after the other
//!   ends, side by side at one offset (a block living over both lifetimes);
//! - *matched stacks*: up to [`STACK_LIMIT`] blocks over one span stacked, up to as many over
//!   the span right after it stacked, when the two stacks are exactly as high, then joined.
//!
//! Gluing repeats on the blocks until no pair is left. A block covers exactly the (column,
//! unit) cells of its buffers, so the peak of live units in every column, hence the lower
//! bound, is unchanged, and any packing of the blocks is a packing of the buffers as high.
//!
//! Why the sizes are evidence: where buffers fill every column to the bound (a *perfect*
//! packing, such as an arena cut into pieces), a piece cut in time leaves two pieces of one
//! size side by side, and a piece cut in bytes leaves a stack over one span; cut again, their
//! parts still add up to heights that match across the cut. Sizes that match by chance glue
//! buffers that no packing at the bound keeps together, and then the merged instance has no
//! packing at the bound. So each glue is weighed by the odds of a chance match ([`chance`]:
//! candidate pairs over the size; small pieces in crowded columns match by chance, large
//! ones rarely), the likeliest glues go first (they thin the crowd for the rest), and glues
//! above a limit are left out. Seeded *variants* draw another limit and leave out a few more
//! glues at random; restarts go through them ([`MergedRestarts`]).
//!
//! Measured on generated cuts of 1 MiB x 50 steps, seeds 1-32, 10 s each: with 200 pieces
//! all 32 packed at the bound (slowest 0.3 s); with 300 pieces 30 of 32, where the search on
//! the buffers alone leaves most of them above the bound. A merged instance whose blocks are
//! all right can still be too hard for the search (seed 27 before groups of up to 40 were
//! matched: 170 blocks, no packing in 16 million nodes). The converse does not hold: the
//! search on a merged instance proves nothing about the buffers.

use std::collections::HashMap;

use memplan_planner_kit::XorShift64Star;

use crate::problem::{Component, Item};
use crate::search::{Branching, Deadline, Order};

/// Most blocks stacked on either side of a matched pair.
pub const STACK_LIMIT: usize = 3;
/// Same-span groups larger than this are not searched for matching stacks: their subsets
/// grow as the cube (about 10,000 at 40), and chance matches with them.
pub const GROUP_LIMIT: usize = 40;
/// Components with more items are not merged: gluing them would take much of a short time
/// limit, and cut-like instances that gain from it are far smaller.
pub const MERGE_MAX_ITEMS: usize = 4_096;
/// In a seeded variant, one glue in this many is left out.
const VARIANT_SKIP: u64 = 8;
/// Glues whose sizes would match this many times by chance (see [`chance`]) or more are
/// left out of the first blocks; variants take a limit up to [`VARIANT_SPREAD`] times
/// smaller or larger.
const MAX_CHANCE: f64 = 3.0;
const VARIANT_SPREAD: f64 = 16.0;
/// Gluing raises its limit on the odds of a chance match in this many steps, by 4 each.
const CHANCE_STEPS: i32 = 4;

/// A component whose items are blocks of the original's, and where each original item lies.
pub struct Merged {
    pub component: Component,
    /// Per item of the original component: its block and its offset in the block (units).
    place: Vec<(usize, u64)>,
}

/// A block being built: its span, height and members (original item, offset in the block).
struct Block {
    start: usize,
    end: usize,
    size: u64,
    members: Vec<(usize, u64)>,
}

impl Merged {
    /// Glues `component`'s items into blocks (see the module docs); None when nothing was
    /// glued or the component is too large. Items with a fixed offset or an alignment above
    /// one unit stay alone. Deterministic.
    pub fn new(component: &Component) -> Option<Merged> {
        Self::variant(component, 0, None)
    }

    /// Variant `seed` of the blocks: 0 is [`Merged::new`]'s; any other seed leaves out one
    /// glue in [`VARIANT_SKIP`] and picks among rival glues at random. A chance match of
    /// sizes can glue buffers that no packing at the bound keeps together; other variants
    /// mostly do without it. None as well once `deadline` passes (gluing thousands of buffers takes milliseconds).
    pub fn variant(
        component: &Component,
        seed: u64,
        deadline: Option<&Deadline<'_>>,
    ) -> Option<Merged> {
        if component.items.len() > MERGE_MAX_ITEMS {
            return None;
        }
        let mut gluing = Gluing {
            random: (seed != 0).then(|| XorShift64Star::new(seed)),
            max_chance: MAX_CHANCE,
        };
        if let Some(random) = &mut gluing.random {
            // Log-uniform in [MAX_CHANCE / SPREAD, MAX_CHANCE * SPREAD].
            let uniform = random.below(1 << 20) as f64 / f64::from(1 << 20);
            gluing.max_chance *= VARIANT_SPREAD.powf(2.0 * uniform - 1.0);
        }
        let mut blocks: Vec<Option<Block>> = component
            .items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                (item.fixed.is_none() && item.align == 1).then(|| Block {
                    start: item.start,
                    end: item.end,
                    size: item.size,
                    members: vec![(index, 0)],
                })
            })
            .collect();
        // The likeliest glues first: each glue leaves fewer candidates in its columns, so
        // the odds of a chance match fall for the glues after it.
        let mut glued = 0;
        let max_chance = gluing.max_chance;
        for step in (0..CHANCE_STEPS).rev() {
            gluing.max_chance = max_chance / 4f64.powi(step);
            loop {
                if deadline.is_some_and(Deadline::passed) {
                    return None;
                }
                let before = glued;
                glued += glue_joined(&mut blocks, &mut gluing);
                glued += glue_matching_stacks(&mut blocks, &mut gluing);
                if glued == before {
                    break;
                }
            }
        }
        if glued == 0 {
            return None;
        }
        let mut place = vec![(0, 0); component.items.len()];
        let mut items = Vec::new();
        // Items left alone (fixed or aligned) first, as they were.
        for (index, item) in component.items.iter().enumerate() {
            if item.fixed.is_some() || item.align > 1 {
                place[index] = (items.len(), 0);
                items.push(Item {
                    buffer: items.len(),
                    ..item.clone()
                });
            }
        }
        for block in blocks.into_iter().flatten() {
            for &(member, offset) in &block.members {
                place[member] = (items.len(), offset);
            }
            items.push(Item {
                buffer: items.len(),
                start: block.start,
                end: block.end,
                size: block.size,
                align: 1,
                fixed: None,
            });
        }
        Some(Merged {
            component: Component {
                items,
                columns: component.columns,
                lower_bound: component.lower_bound,
            },
            place,
        })
    }

    /// The same blocks with time running backwards (as [`Component::mirrored`]; the blocks
    /// of the mirrored component are these, mirrored).
    pub fn mirrored(&self) -> Merged {
        Merged {
            component: self.component.mirrored(),
            place: self.place.clone(),
        }
    }

    /// Offsets of the original items from offsets of the blocks.
    pub fn expand(&self, block_offsets: &[u64]) -> Vec<u64> {
        self.place
            .iter()
            .map(|&(block, offset)| block_offsets[block] + offset)
            .collect()
    }
}

/// Searches of merged instances for restarts to run, in turn: each variant (from 0) in every
/// fixed order, both directions and both branchings, then the next variant. On generated
/// cuts a right variant is packed at the bound in about one node per block in some fixed
/// order (lifetime first, mostly), where shuffled orders fail; a wrong variant fails in
/// every order, so the next variant is due after one pass.
pub struct MergedRestarts {
    /// The variant being tried, forwards and mirrored.
    current: Option<[Merged; 2]>,
    variant: u64,
    /// Attempts made on the current variant.
    attempt: usize,
}

/// (order, mirrored, branching) of each attempt on one variant.
const ATTEMPTS: usize = Order::ALL.len() * 4;
/// Seeds tried in a row for a variant that glues anything before the merged instance is
/// given up (a variant leaves out only one glue in [`VARIANT_SKIP`], so this is rare).
const SEEDS_IN_A_ROW: u64 = 16;

impl MergedRestarts {
    /// None when `component` has nothing to glue (or is too large).
    pub fn new(component: &Component, deadline: &Deadline<'_>) -> Option<MergedRestarts> {
        let merged = Merged::variant(component, 0, Some(deadline))?;
        Some(MergedRestarts {
            current: Some(Self::both_ways(merged)),
            variant: 0,
            attempt: 0,
        })
    }

    fn both_ways(merged: Merged) -> [Merged; 2] {
        let mirrored = merged.mirrored();
        [merged, mirrored]
    }

    /// The next search to run: blocks, order and branching; None once every variant was
    /// tried.
    pub fn next(
        &mut self,
        component: &Component,
        deadline: &Deadline<'_>,
    ) -> Option<(&Merged, Order, Branching)> {
        if self.attempt == ATTEMPTS {
            self.next_variant(component, deadline);
        }
        let attempt = self.attempt;
        self.attempt += 1;
        let [forwards, mirrored] = self.current.as_ref()?;
        let blocks = if attempt % 2 == 0 { forwards } else { mirrored };
        let branching = if attempt / 2 % 2 == 0 {
            Branching::Leftmost
        } else {
            Branching::FewestChildren
        };
        // Lifetime first: the order that most often packs a right variant at once.
        let order = Order::ALL[Order::ALL.len() - 1 - attempt / 4];
        Some((blocks, order, branching))
    }

    /// Moves on to the next variant (the current one cannot be packed at the bound).
    pub fn next_variant(&mut self, component: &Component, deadline: &Deadline<'_>) {
        self.attempt = 0;
        self.current = None;
        for _ in 0..SEEDS_IN_A_ROW {
            if self.current.is_some() {
                break;
            }
            self.variant += 1;
            self.current =
                Merged::variant(component, self.variant, Some(deadline)).map(Self::both_ways);
        }
    }
}

/// The live blocks (indices, in order) by `key`.
fn blocks_by<K: std::hash::Hash + Eq>(
    blocks: &[Option<Block>],
    key: impl Fn(&Block) -> K,
) -> HashMap<K, Vec<usize>> {
    let mut by_key: HashMap<K, Vec<usize>> = HashMap::new();
    for (index, block) in blocks.iter().enumerate() {
        if let Some(block) = block {
            by_key.entry(key(block)).or_default().push(index);
        }
    }
    by_key
}

/// The live blocks by span, spans in order.
fn blocks_by_span(blocks: &[Option<Block>]) -> Vec<((usize, usize), Vec<usize>)> {
    let mut spans: Vec<_> = blocks_by(blocks, |block| (block.start, block.end))
        .into_iter()
        .collect();
    spans.sort_unstable_by_key(|(span, _)| *span);
    spans
}

/// How glues are chosen: deterministic for the first blocks, seeded for variants.
struct Gluing {
    random: Option<XorShift64Star>,
    /// Glues more likely than this to be a chance match are left out.
    max_chance: f64,
}

impl Gluing {
    /// True when this glue is left out: too likely a chance match, or by the variant's dice.
    fn skips(&mut self, chance: f64) -> bool {
        chance >= self.max_chance
            || self
                .random
                .as_mut()
                .is_some_and(|random| random.below(VARIANT_SKIP) == 0)
    }

    /// The rival a glue takes among `count`: the first, or one at random in a variant.
    fn pick(&mut self, count: usize) -> usize {
        self.random
            .as_mut()
            .map_or(0, |random| random.below(count as u64) as usize)
    }
}

/// About how many times sizes would match by chance, for `pairs` pairs of candidates whose
/// sizes match at `size`: sizes below `size` are about as common as each other, so two
/// given ones are equal with odds about 1 in `size`. Small pieces in crowded columns match
/// by chance; large ones rarely do.
fn chance(pairs: f64, size: u64) -> f64 {
    pairs / size as f64
}

/// Subsets of `k` out of `n`.
fn subsets(n: usize, k: usize) -> f64 {
    (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
}

/// Joins blocks of one height where one starts in the column after the other ends, each
/// block at most once per call, rivals taken in index order (at random in a variant).
/// Returns the pairs joined.
fn glue_joined(blocks: &mut [Option<Block>], gluing: &mut Gluing) -> usize {
    let by_start = blocks_by(blocks, |block| (block.size, block.start));
    // Blocks starting and ending in each column: the candidates for a chance match.
    let mut starting: HashMap<usize, usize> = HashMap::new();
    let mut ending: HashMap<usize, usize> = HashMap::new();
    for block in blocks.iter().flatten() {
        *starting.entry(block.start).or_default() += 1;
        *ending.entry(block.end).or_default() += 1;
    }
    let mut used = vec![false; blocks.len()];
    let mut glued = 0;
    for left in 0..blocks.len() {
        let Some(block) = &blocks[left] else { continue };
        if used[left] {
            continue;
        }
        let rivals: Vec<usize> = by_start
            .get(&(block.size, block.end + 1))
            .map(|rivals| {
                rivals
                    .iter()
                    .copied()
                    .filter(|&right| !used[right])
                    .collect()
            })
            .unwrap_or_default();
        if rivals.is_empty() {
            continue;
        }
        let pairs = ending[&block.end] * starting[&(block.end + 1)];
        if gluing.skips(chance(pairs as f64, block.size)) {
            continue;
        }
        let right = rivals[gluing.pick(rivals.len())];
        used[left] = true;
        used[right] = true;
        join(blocks, left, right);
        glued += 1;
    }
    glued
}

/// Glues matched stacks (see the module docs) between adjacent spans, each block at most once
/// per call, the match of fewest blocks for each pair of spans (in a variant, one of those at
/// random). Returns the blocks glued away.
fn glue_matching_stacks(blocks: &mut [Option<Block>], gluing: &mut Gluing) -> usize {
    let spans = blocks_by_span(blocks);
    let mut used = vec![false; blocks.len()];
    let mut glued = 0;
    for (left_span, left) in &spans {
        if left.len() > GROUP_LIMIT {
            continue;
        }
        let first_right = spans.partition_point(|(span, _)| span.0 <= left_span.1);
        for (_, right) in spans[first_right..]
            .iter()
            .take_while(|(span, _)| span.0 == left_span.1 + 1)
        {
            if right.len() > GROUP_LIMIT {
                continue;
            }
            let sizes = |group: &[usize]| -> Vec<(usize, u64)> {
                group
                    .iter()
                    .filter(|&&index| !used[index])
                    .map(|&index| (index, blocks[index].as_ref().map_or(0, |block| block.size)))
                    .collect()
            };
            let (left_sizes, right_sizes) = (sizes(left), sizes(right));
            let left_sums: HashMap<u64, Members> =
                subset_sums(&left_sizes).into_iter().rev().collect();
            // The matches of fewest blocks, with their height.
            let mut best: Vec<(u64, Members, Members)> = Vec::new();
            for (sum, right_members) in subset_sums(&right_sizes) {
                let Some(&left_members) = left_sums.get(&sum) else {
                    continue;
                };
                let count = left_members.len + right_members.len;
                let fewest = best.first().map_or(usize::MAX, |(_, l, r)| l.len + r.len);
                // One and one is a plain join, left to `glue_joined`.
                if count > 2 && count <= fewest {
                    if count < fewest {
                        best.clear();
                    }
                    best.push((sum, left_members, right_members));
                }
            }
            if best.is_empty() {
                continue;
            }
            let (sum, left_members, right_members) = best.swap_remove(gluing.pick(best.len()));
            let (left_members, right_members) = (left_members.as_slice(), right_members.as_slice());
            let pairs = subsets(left_sizes.len(), left_members.len())
                * subsets(right_sizes.len(), right_members.len());
            if gluing.skips(chance(pairs, sum)) {
                continue;
            }
            for &member in left_members.iter().chain(right_members) {
                used[member] = true;
            }
            let left_block = stack(blocks, left_members);
            let right_block = stack(blocks, right_members);
            join(blocks, left_block, right_block);
            glued += left_members.len() + right_members.len() - 1;
        }
    }
    glued
}

/// One to [`STACK_LIMIT`] blocks, by index (a value, not an allocation: groups have
/// thousands of subsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Members {
    blocks: [usize; STACK_LIMIT],
    len: usize,
}

impl Members {
    fn as_slice(&self) -> &[usize] {
        &self.blocks[..self.len]
    }
}

/// Every sum of one to [`STACK_LIMIT`] of the `(block, size)` pairs, with its blocks; fewer
/// blocks before more.
fn subset_sums(group: &[(usize, u64)]) -> Vec<(u64, Members)> {
    // (sum, members, position in `group` of the last member) of the previous length.
    let mut last: Vec<(u64, Members, usize)> = group
        .iter()
        .enumerate()
        .map(|(position, &(index, size))| {
            let mut blocks = [0; STACK_LIMIT];
            blocks[0] = index;
            (size, Members { blocks, len: 1 }, position)
        })
        .collect();
    let mut sums: Vec<(u64, Members)> = last
        .iter()
        .map(|&(sum, members, _)| (sum, members))
        .collect();
    for _ in 1..STACK_LIMIT {
        let mut next = Vec::new();
        for &(sum, members, after) in &last {
            for (position, &(index, size)) in group.iter().enumerate().skip(after + 1) {
                let mut grown = members;
                grown.blocks[grown.len] = index;
                grown.len += 1;
                next.push((sum + size, grown, position));
            }
        }
        sums.extend(next.iter().map(|&(sum, members, _)| (sum, members)));
        last = next;
    }
    sums
}

/// Stacks `members` into the first of them (each on the one before) and returns its index.
fn stack(blocks: &mut [Option<Block>], members: &[usize]) -> usize {
    let first = members[0];
    for &other in &members[1..] {
        let top = blocks[other].take().expect("a live member");
        let bottom = blocks[first].as_mut().expect("a live member");
        let lift = bottom.size;
        bottom.size += top.size;
        bottom.members.extend(
            top.members
                .into_iter()
                .map(|(item, offset)| (item, offset + lift)),
        );
    }
    first
}

/// Joins block `right` (starting after `left` ends, as high) to `left`.
fn join(blocks: &mut [Option<Block>], left: usize, right: usize) {
    let right = blocks[right].take().expect("a live block");
    let left = blocks[left].as_mut().expect("a live block");
    left.end = right.end;
    left.members.extend(right.members);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problem;
    use memplan_planner_kit::testing::{buffer, rectangle_cut};

    fn valid(component: &Component, offsets: &[u64], cap: u64) -> bool {
        let items = &component.items;
        items.iter().zip(offsets).all(|(item, &offset)| {
            offset + item.size <= cap && item.fixed.is_none_or(|fixed| fixed == offset)
        }) && (0..items.len()).all(|a| {
            (a + 1..items.len()).all(|b| {
                !items[a].overlaps(&items[b])
                    || offsets[a] + items[a].size <= offsets[b]
                    || offsets[b] + items[b].size <= offsets[a]
            })
        })
    }

    fn area(component: &Component) -> u64 {
        component
            .items
            .iter()
            .map(|item| item.size * (item.end - item.start + 1) as u64)
            .sum()
    }

    #[test]
    fn blocks_cover_the_same_cells_and_expand_to_a_valid_packing() {
        for (seed, variant) in (1..10).zip([0, 0, 0, 1, 2, 3, 5, 8, 13]) {
            let problem = Problem::new(&rectangle_cut(1 << 20, 50, 200, seed));
            let component = &problem.components[0];
            let merged =
                Merged::variant(component, variant, None).expect("a cut has pieces to glue");
            assert!(merged.component.items.len() < component.items.len());
            assert_eq!(area(&merged.component), area(component));
            assert_eq!(merged.component.lower_bound, component.lower_bound);
            // Blocks one above the other are a valid packing of the blocks; expanded, of the
            // buffers.
            for blocks in [&merged, &merged.mirrored()] {
                let mut offsets = Vec::new();
                let mut top = 0;
                for item in &blocks.component.items {
                    offsets.push(top);
                    top += item.size;
                }
                assert!(valid(component, &blocks.expand(&offsets), top));
            }
        }
    }

    #[test]
    fn joined_pieces_and_matched_stacks_are_glued_and_the_rest_kept() {
        let mut buffers = vec![
            buffer(4, 0, 1), // with the next, a stack as high as the third: matched
            buffer(2, 0, 1),
            buffer(6, 2, 3),
            buffer(3, 4, 5), // joined with the next
            buffer(3, 6, 7),
            buffer(5, 1, 6), // alone
            buffer(1, 0, 7), // aligned: alone
        ];
        buffers[6].alignment = 2;
        let problem = Problem::new(&buffers);
        let component = &problem.components[0];
        // Column boundaries at steps 0, 1, 2, 4, 6, 7, 8: six columns.
        assert_eq!(component.columns, 6);
        let merged = Merged::new(component).unwrap();
        let mut shapes: Vec<(usize, usize, u64, u64)> = merged
            .component
            .items
            .iter()
            .map(|item| (item.start, item.end, item.size, item.align))
            .collect();
        shapes.sort_unstable();
        assert_eq!(
            shapes,
            [(0, 2, 6, 1), (0, 5, 1, 2), (1, 4, 5, 1), (3, 5, 3, 1)]
        );
        let offsets: Vec<u64> = (0..4).map(|block| 100 * block as u64).collect();
        let expanded = merged.expand(&offsets);
        let at = |size: u64| -> Vec<u64> {
            let mut found: Vec<u64> = component
                .items
                .iter()
                .zip(&expanded)
                .filter(|(item, _)| item.size == size)
                .map(|(_, &offset)| offset)
                .collect();
            found.sort_unstable();
            found
        };
        // The stack: 4 and 2 one on the other, 6 beside them from the same offset.
        let (four, two, six) = (at(4)[0], at(2)[0], at(6)[0]);
        assert!(four + 4 == two || two + 2 == four, "{four} {two}");
        assert_eq!(six, four.min(two));
        // The joined pair: side by side at one offset.
        let threes = at(3);
        assert_eq!(threes.len(), 2);
        assert_eq!(threes[0], threes[1]);
    }

    #[test]
    fn restarts_try_each_variant_in_every_order_then_another_variant() {
        let problem = Problem::new(&rectangle_cut(1 << 20, 50, 200, 12));
        let component = &problem.components[0];
        let context = memplan_plugin_api::HostContext::detached();
        let deadline = Deadline {
            at: None,
            context: &context,
        };
        let mut restarts = MergedRestarts::new(component, &deadline).unwrap();
        let shape = |merged: &Merged| -> Vec<(usize, usize, u64)> {
            let mut shape: Vec<_> = merged
                .component
                .items
                .iter()
                .map(|item| (item.start, item.end, item.size))
                .collect();
            shape.sort_unstable();
            shape
        };
        let first = shape(&Merged::new(component).unwrap());
        let mut tried = Vec::new();
        for _ in 0..ATTEMPTS {
            let (blocks, order, branching) = restarts.next(component, &deadline).unwrap();
            assert_eq!(blocks.component.items.len(), first.len());
            tried.push((blocks.component.items[0].start, order, branching));
        }
        tried.sort_unstable_by_key(|attempt| format!("{attempt:?}"));
        tried.dedup();
        assert_eq!(tried.len(), ATTEMPTS, "every attempt differs");
        // Variants differ from the first blocks, and exhaustion moves on at once.
        let (blocks, ..) = restarts.next(component, &deadline).unwrap();
        let second = shape(blocks);
        assert_ne!(second, first);
        restarts.next_variant(component, &deadline);
        let (blocks, ..) = restarts.next(component, &deadline).unwrap();
        assert_ne!(shape(blocks), second);
    }

    #[test]
    fn sums_of_one_to_three_blocks() {
        let sums: Vec<(u64, Vec<usize>)> = subset_sums(&[(7, 1), (8, 2), (9, 4), (10, 8)])
            .into_iter()
            .map(|(sum, members)| (sum, members.as_slice().to_vec()))
            .collect();
        assert_eq!(sums.len(), 4 + 6 + 4);
        assert_eq!(sums[0], (1, vec![7]));
        assert!(sums.contains(&(14, vec![8, 9, 10])));
        assert!(sums.contains(&(9, vec![7, 10])));
        // Fewer blocks first.
        assert!(sums
            .windows(2)
            .all(|pair| pair[0].1.len() <= pair[1].1.len()));
    }

    #[test]
    fn gluing_stops_when_the_deadline_has_passed() {
        let problem = Problem::new(&rectangle_cut(1 << 20, 50, 200, 1));
        let context = memplan_plugin_api::HostContext::detached();
        let passed = Deadline {
            at: Some(std::time::Instant::now()),
            context: &context,
        };
        assert!(Merged::variant(&problem.components[0], 0, Some(&passed)).is_none());
        assert!(MergedRestarts::new(&problem.components[0], &passed).is_none());
        assert!(Merged::variant(&problem.components[0], 0, None).is_some());
    }

    #[test]
    fn nothing_to_glue_gives_none() {
        let problem = Problem::new(&[buffer(4, 0, 1), buffer(2, 1, 2)]);
        assert!(Merged::new(&problem.components[0]).is_none());
    }
}
