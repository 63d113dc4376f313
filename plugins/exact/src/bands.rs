//! Band splits: a component that must fill every column to the cap exactly (a *tiling*, as
//! when an arena is cut into pieces) is cut by a line across its whole lifetime into a
//! bottom band and a top band, each tiled on its own, recursively.
//!
//! # Why it holds
//! Take a set `B` of the items and a height `y`, `0 < y < cap`, such that in every column
//! the items of `B` live there add up to exactly `y` (a *split*). Then in every column the
//! others add up to `cap - y`; a packing of `B` within `[0, y)` and one of the others within
//! `[0, cap - y)`, lifted by `y`, is a packing of the component within the cap. Each band
//! is again a tiling, of its own height, and falls apart into components in time where no
//! item of the band crosses a column boundary.
//!
//! # Why it helps
//! A tiling cut like a guillotine (every cut straight across the piece it cuts, as an arena
//! cut into pieces is) has a split in every component of two or more items: the first cut
//! of a component is across its whole lifetime, or the component would not be connected.
//! Bands across the whole lifetime can trade places, so any such cut will do, in any order.
//! Splitting down to single columns packs such a tiling where the branch and bound over all
//! packings ([`crate::search`]) may need more than 10 s (cuts of 1 MiB x 50 steps into 300
//! pieces, seeds 8 and 26). Large pieces rarely add up to a column's height by chance, so
//! near the top there are few splits and most partial ones die within a column or two;
//! deeper down, among many small pieces, sums match by chance, and a split whose band
//! cannot be tiled is refuted only further down.
//!
//! # Algorithm
//! `solve(part, cap)`, for the component and then for each part of a band:
//! 1. One column: the items stack. A part met before: its outcome (memo).
//! 2. Items over every column of the part go to the bottom, and the others are solved
//!    below the rest of the cap: in any packing, the items under such an item add up to its
//!    offset in every column, so it can trade places with them.
//! 3. A short direct search ([`Search`], tight at the cap, `SEARCH_NODES_PER_ITEM` nodes
//!    per item): parts over a few columns are packed in about one node per item, far
//!    sooner than their splits are enumerated. One that exhausts proves there is no packing.
//! 4. The heights a split can have. At the boundary between two columns, the bottom's items
//!    over both add up to some `x`, and those ending at the boundary and those starting
//!    after it each to `y - x`: so `y` is `x` plus a sum both sides can make (in anchored
//!    passes, below, the sums of the anchor's side include it). Sums are bit sets; every
//!    boundary must allow `y`.
//! 5. For each height, the splits are enumerated by depth-first search over the columns:
//!    first the one with the fewest live items, then outwards to the right and then to the
//!    left. In each column only the items that start there (going right) or end there
//!    (going left) are undecided, and those put in the bottom must bring the column's bottom
//!    units to `y` exactly: a branch is cut when the sums the column's remaining items can
//!    make (bit sets per suffix) miss that, or when an item would overflow its band in
//!    another column. Items over one column alone only make up the sum: one subset that
//!    does is taken, not every one (they would make near-identical splits, many times over
//!    where such items are small).
//! 6. For each split, both bands are cut into parts in time and each part is solved; the
//!    first split whose parts all pack gives the packing. Without one, the part has no
//!    split (it may still have a packing that no straight cut crosses whole).
//!
//! Splits that are others in another order are left out in one of two ways, and passes
//! take turns (each way complete up to that symmetry): *anchored*, only splits whose bottom
//! holds the anchor (the item over the most columns, then the largest), since full-width
//! bands stack in any order and group in any way; *halved*, only heights up to `cap / 2`,
//! since a split mirrored (bands swapped) is the split of `cap - y`. Heights go lowest
//! first in one pass, highest first in the next: which finds a packing sooner varies by
//! orders of magnitude between instances.
//!
//! # Effort
//! Where sums are dense, heights are many and chance splits are slow to refute. So each
//! part gets a node limit for its own work (the parts of its splits have their own, and its
//! clock stops while they run); a part out of nodes is given up until the next pass. The
//! recursion runs in passes, each with twice the last one's part limit and allowance,
//! spent over as many calls to [`BandSplits::run`] as it takes; parts packed or without a
//! split are remembered across passes and calls. Nodes count the bit-set work too (one
//! per 64 words), and the deadline is polled. Memory: heights are walked in their bit set,
//! sum tables are made per column when the search first gets there, and a part whose
//! tables would take more than `MAX_TABLE_WORDS` is not split. A packing returned is always
//! valid; none returned proves nothing.

use std::collections::HashMap;

use memplan_planner_kit::{Buffer, FixedOffset};
use memplan_plugin_api::Lifetime;

use crate::problem::{Component, Problem};
use crate::search::{Deadline, End, Order, Search};

/// Components with more items are not split (the split search recurses once per item).
pub const BANDS_MAX_ITEMS: usize = 4_096;
/// Nor those higher than this (units): the sums a column can make are bit sets this long.
pub const BANDS_MAX_HEIGHT: u64 = 1 << 24;
/// Nodes each part may take for its own work in the first pass; each pass allows twice
/// the last one's.
const FIRST_ATTEMPT_LIMIT: u64 = 1 << 16;
/// A pass gets this many parts' limits, over all calls.
const ATTEMPTS_PER_PASS: u64 = 64;
/// Nodes of the short direct search of each part, per item.
const SEARCH_NODES_PER_ITEM: u64 = 16;
/// How many nodes between two polls of the deadline.
const POLL_INTERVAL: u64 = 1024;
/// A part whose sum tables (per column, per item) would take more 64-bit words is not
/// split (64 MiB; a cut of 1 MiB x 50 steps into 300 pieces takes up to 45).
const MAX_TABLE_WORDS: usize = 1 << 23;
/// Bit-set words processed per node counted.
const WORDS_PER_NODE: u64 = 64;

/// Whether every column of `component` holds exactly `cap` units, nothing is fixed or
/// aligned above one unit, and the component is small enough: then splits apply.
pub fn is_tiling(component: &Component, cap: u64) -> bool {
    if component.items.len() > BANDS_MAX_ITEMS
        || cap > BANDS_MAX_HEIGHT
        || component
            .items
            .iter()
            .any(|item| item.fixed.is_some() || item.align > 1)
    {
        return false;
    }
    column_totals(component).iter().all(|&total| total == cap)
}

/// Units live in each column.
fn column_totals(component: &Component) -> Vec<u64> {
    // Sizes added where an item starts and taken off after it ends.
    let mut change = vec![0i128; component.columns + 1];
    for item in &component.items {
        change[item.start] += i128::from(item.size);
        change[item.end + 1] -= i128::from(item.size);
    }
    let mut total = 0i128;
    change[..component.columns]
        .iter()
        .map(|delta| {
            total += delta;
            total as u64
        })
        .collect()
}

/// Band splits of one tiling, resumable: [`BandSplits::run`] goes on with the pass where
/// the last call stopped, remembering the parts it packed or found without a split.
pub struct BandSplits {
    cap: u64,
    attempt_limit: u64,
    pass: u32,
    /// Nodes the current pass may still take, over all calls.
    pass_left: u64,
    memo: HashMap<(u64, Vec<u32>), Memo>,
    nodes: u64,
    /// Set once every way to cut the component into bands failed: nothing more to do.
    exhausted: bool,
}

/// What a part came to, with its offsets per member in the key's order.
enum Memo {
    Packed(Vec<u64>),
    NoSplit,
    /// Out of nodes in this pass: not tried again before the next one.
    Cut(u32),
}

impl BandSplits {
    /// Splits for `component` tiled at `cap`, or None if it is not a tiling there
    /// ([`is_tiling`]).
    pub fn new(component: &Component, cap: u64) -> Option<BandSplits> {
        is_tiling(component, cap).then(|| BandSplits {
            cap,
            attempt_limit: FIRST_ATTEMPT_LIMIT,
            pass: 0,
            pass_left: FIRST_ATTEMPT_LIMIT * ATTEMPTS_PER_PASS,
            memo: HashMap::new(),
            nodes: 0,
            exhausted: false,
        })
    }

    /// The cap the component is tiled at.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Nodes spent over all calls.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Searches for up to `budget` more nodes: a packing of `component` within the cap, if
    /// one is found. `component` must be the one given to [`BandSplits::new`].
    pub fn run(
        &mut self,
        component: &Component,
        budget: u64,
        deadline: Deadline<'_>,
    ) -> Option<Vec<u64>> {
        if self.exhausted {
            return None;
        }
        let members: Vec<u32> = (0..component.items.len() as u32).collect();
        let mut solver = Solver {
            nodes: 0,
            limit: budget,
            pass_end: budget,
            attempt_limit: self.attempt_limit,
            pass: self.pass,
            cut_attempts: 0,
            deadline,
            timed_out: false,
            memo: std::mem::take(&mut self.memo),
        };
        let packed = loop {
            // A pass has a fixed allowance, spent over as many calls as it takes: one cut
            // short by the call's budget is run again from the top in the next call, where
            // the memo skips what it finished.
            let started = solver.nodes;
            solver.pass_end = budget.min(started.saturating_add(self.pass_left));
            let tiling = solver.solve(component, self.cap, &members);
            self.pass_left = self.pass_left.saturating_sub(solver.nodes - started);
            match tiling {
                Tiling::Packed(offsets) => break Some(offsets),
                Tiling::NoSplit => {
                    self.exhausted = true;
                    break None;
                }
                Tiling::Unknown if solver.timed_out => break None,
                Tiling::Unknown if solver.nodes >= budget && self.pass_left > 0 => break None,
                Tiling::Unknown => {
                    solver.attempt_limit = solver.attempt_limit.saturating_mul(2);
                    solver.pass += 1;
                    self.pass_left = solver.attempt_limit.saturating_mul(ATTEMPTS_PER_PASS);
                    if solver.nodes >= budget {
                        break None;
                    }
                }
            }
        };
        self.nodes += solver.nodes;
        self.attempt_limit = solver.attempt_limit;
        self.pass = solver.pass;
        self.memo = solver.memo;
        packed
    }
}

/// What solving one part came to.
enum Tiling {
    Packed(Vec<u64>),
    /// The part cannot be cut into bands down to single columns (it may still have a
    /// packing that no straight cut crosses whole).
    NoSplit,
    /// Out of nodes or time.
    Unknown,
}

/// Ends the split search early.
enum Step {
    Packed(Vec<u64>),
    Stopped,
}

struct Solver<'d> {
    nodes: u64,
    /// Nodes at which the part being solved stops its own work (the parts of its splits
    /// have limits of their own; the clock of a part stops while they run).
    limit: u64,
    /// Nodes at which the pass stops, or the call.
    pass_end: u64,
    /// Nodes each part may take for its own work in this pass.
    attempt_limit: u64,
    pass: u32,
    /// Split attempts cut short by the attempt limit so far.
    cut_attempts: u64,
    deadline: Deadline<'d>,
    timed_out: bool,
    memo: HashMap<(u64, Vec<u32>), Memo>,
}

impl Solver<'_> {
    /// Counts `nodes` more for work about to be done; false (the work is not to be done)
    /// if that would pass the part's limit, or the pass is over. Wanting more than the pass
    /// has left ends it: the call's budget is spent exactly.
    fn step(&mut self, nodes: u64) -> bool {
        if self.out() {
            return false;
        }
        let after = self.nodes.saturating_add(nodes);
        if after > self.pass_end {
            self.nodes = self.pass_end;
            return false;
        }
        if after > self.limit {
            return false;
        }
        let before = self.nodes;
        self.nodes = after;
        if after / POLL_INTERVAL != before / POLL_INTERVAL && self.deadline.passed() {
            self.timed_out = true;
        }
        !self.timed_out
    }

    /// Whether the pass is over: its end, the call's budget or the deadline reached.
    fn out(&self) -> bool {
        self.nodes >= self.pass_end || self.timed_out
    }

    /// Packs `part` within `cap`; `members` are its items' indices in the whole component.
    fn solve(&mut self, part: &Component, cap: u64, members: &[u32]) -> Tiling {
        if part.lower_bound > cap {
            return Tiling::NoSplit;
        }
        if part.columns == 1 {
            let mut top = 0;
            let offsets = part
                .items
                .iter()
                .map(|item| {
                    top += item.size;
                    top - item.size
                })
                .collect();
            return Tiling::Packed(offsets);
        }
        // The memo holds offsets in the order of the sorted members.
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_unstable_by_key(|&index| members[index]);
        let key = (cap, order.iter().map(|&index| members[index]).collect());
        match self.memo.get(&key) {
            Some(Memo::Packed(sorted)) => {
                let mut offsets = vec![0; members.len()];
                for (&index, &offset) in order.iter().zip(sorted) {
                    offsets[index] = offset;
                }
                return Tiling::Packed(offsets);
            }
            Some(Memo::NoSplit) => return Tiling::NoSplit,
            Some(Memo::Cut(pass)) if *pass == self.pass => return Tiling::Unknown,
            _ => {}
        }
        let tiling = self.split_or_search(part, cap, members);
        let memo = match &tiling {
            Tiling::Packed(offsets) => {
                Memo::Packed(order.iter().map(|&index| offsets[index]).collect())
            }
            Tiling::NoSplit => Memo::NoSplit,
            // The pass ran out: not this part's doing.
            Tiling::Unknown if self.out() => return tiling,
            Tiling::Unknown => Memo::Cut(self.pass),
        };
        self.memo.insert(key, memo);
        tiling
    }

    /// Steps 2 to 6 of the module docs for one part.
    fn split_or_search(&mut self, part: &Component, cap: u64, members: &[u32]) -> Tiling {
        self.limit = self.nodes.saturating_add(self.attempt_limit);
        // Items over every column: in any packing, those below one of them are a band, so
        // it can be moved to the bottom; the part packs if and only if the others do, lower.
        let whole: Vec<bool> = part
            .items
            .iter()
            .map(|item| item.start == 0 && item.end == part.columns - 1)
            .collect();
        let whole_height: u64 = part
            .items
            .iter()
            .zip(&whole)
            .filter(|(_, &whole)| whole)
            .map(|(item, _)| item.size)
            .sum();
        if 0 < whole_height && whole_height < cap {
            return match self.solve_bands(part, cap, members, &whole, whole_height) {
                Some(Step::Packed(offsets)) => Tiling::Packed(offsets),
                Some(Step::Stopped) => Tiling::Unknown,
                None => Tiling::NoSplit,
            };
        }
        // A short direct search first: parts over a few columns are often packed in about
        // one node per item, far sooner than their splits are enumerated.
        let budget = (SEARCH_NODES_PER_ITEM * part.items.len() as u64)
            .min(self.limit.min(self.pass_end).saturating_sub(self.nodes));
        let mut search = Search::new(part, Order::Lifetime, cap, cap);
        let end = search.run(budget, self.deadline);
        self.nodes += search.nodes();
        match (search.best(), end) {
            (Some((_, offsets)), _) => return Tiling::Packed(offsets.clone()),
            (None, End::Exhausted) => return Tiling::NoSplit,
            (None, End::Stopped) => {
                self.timed_out = true;
                return Tiling::Unknown;
            }
            _ => {}
        }
        let cut_before = self.cut_attempts;
        match Splits::new(part, cap, self) {
            Err(()) => return Tiling::Unknown,
            Ok(None) => {}
            Ok(Some(mut splits)) => match splits.each_height(self, members) {
                Some(Step::Packed(offsets)) => return Tiling::Packed(offsets),
                Some(Step::Stopped) => return Tiling::Unknown,
                None => {}
            },
        }
        if self.cut_attempts != cut_before {
            // A split cut short may still pack in a later pass.
            return Tiling::Unknown;
        }
        Tiling::NoSplit
    }

    /// Solves both bands of a split; None when one of them cannot be tiled.
    fn solve_bands(
        &mut self,
        part: &Component,
        cap: u64,
        members: &[u32],
        bottom: &[bool],
        height: u64,
    ) -> Option<Step> {
        let mut offsets = vec![0; part.items.len()];
        for (side, band_cap, base) in [(true, height, 0), (false, cap - height, height)] {
            let band: Vec<usize> = (0..part.items.len())
                .filter(|&index| bottom[index] == side)
                .collect();
            let buffers: Vec<Buffer> = band
                .iter()
                .map(|&index| {
                    let item = &part.items[index];
                    Buffer {
                        size: item.size,
                        alignment: 1,
                        lifetime: Lifetime::new(item.start as u32, item.end as u32),
                        fixed_offset: FixedOffset::NONE,
                    }
                })
                .collect();
            // Alignment 1 everywhere: the band's units are the part's.
            for piece in &Problem::new(&buffers).components {
                let piece_members: Vec<u32> = piece
                    .items
                    .iter()
                    .map(|item| members[band[item.buffer]])
                    .collect();
                match self.solve(piece, band_cap, &piece_members) {
                    Tiling::Packed(packing) => {
                        for (item, offset) in piece.items.iter().zip(packing) {
                            offsets[band[item.buffer]] = base + offset;
                        }
                    }
                    Tiling::NoSplit => return None,
                    Tiling::Unknown => return Some(Step::Stopped),
                }
            }
        }
        Some(Step::Packed(offsets))
    }
}

/// The depth-first search for the splits of one part (see the module docs).
struct Splits<'a> {
    part: &'a Component,
    cap: u64,
    /// The heights a split can have (a bit set), from `lowest` to `highest`, taken in
    /// that order or the other way.
    heights: Vec<u64>,
    lowest: u64,
    highest: u64,
    descending: bool,
    /// Columns in the order they are decided, with the items decided there: first the
    /// `branching[position]` ones that cross other columns, then those in that column alone.
    columns: Vec<usize>,
    deciding: Vec<Vec<u32>>,
    branching: Vec<usize>,
    /// The item every bottom band holds, if anchored.
    anchor: Option<usize>,
    /// Per position and item there: the sums that item and the ones after it can make,
    /// as bit sets of `words[position]` words, one after the other; made when the search
    /// first reaches the position (most heights fail in the first columns).
    reachable: Vec<Vec<u64>>,
    words: Vec<usize>,
    bottom: Vec<bool>,
    /// Units of the decided items per column, in the bottom band and in the top one.
    bottom_units: Vec<u64>,
    top_units: Vec<u64>,
    /// The height of the splits being enumerated.
    height: u64,
}

impl<'a> Splits<'a> {
    /// The split search of `part`: Ok(None) if no height is possible, Err if the solver ran
    /// out of nodes while computing them.
    fn new(part: &'a Component, cap: u64, solver: &mut Solver) -> Result<Option<Splits<'a>>, ()> {
        let columns = part.columns;
        let items = &part.items;
        let mut live = vec![0usize; columns];
        for item in items {
            for count in &mut live[item.start..=item.end] {
                *count += 1;
            }
        }
        // Two ways to leave out splits that are others in another order (passes alternate):
        // - anchored: the bands of a tiling cut into full-width bands can be stacked in any
        //   order and grouped in any way, so only splits whose bottom holds the anchor, the
        //   item over the most columns (then the largest), are searched; the lowest such
        //   band is the one the anchor is in;
        // - halved: a split mirrored (top and bottom swapped) is the split of `cap - y`, so
        //   only heights up to `cap / 2` are searched.
        let anchored = solver.pass % 4 < 2;
        let limit = if anchored { cap - 1 } else { cap / 2 };
        let first = (0..columns)
            .min_by_key(|&column| live[column])
            .expect("a part has columns");
        let order: Vec<usize> = std::iter::once(first)
            .chain(first + 1..columns)
            .chain((0..first).rev())
            .collect();
        let mut position_of = vec![0usize; columns];
        for (position, &column) in order.iter().enumerate() {
            position_of[column] = position;
        }
        let mut deciding: Vec<Vec<u32>> = vec![Vec::new(); columns];
        for (index, item) in items.iter().enumerate() {
            let column = if item.start <= first && first <= item.end {
                first
            } else if item.start > first {
                item.start
            } else {
                item.end
            };
            deciding[position_of[column]].push(index as u32);
        }
        // The sum tables' size is known before any bit set is made: a part whose tables would
        // be too large is not split.
        let width_of = |list: &[u32]| {
            let total: u64 = list.iter().map(|&index| items[index as usize].size).sum();
            (total.min(limit) / 64 + 1) as usize
        };
        let table_words: usize = deciding
            .iter()
            .map(|list| (list.len() + 1) * width_of(list))
            .sum();
        if table_words > MAX_TABLE_WORDS {
            return Ok(None);
        }
        let anchor = anchored.then(|| {
            (0..items.len())
                .max_by_key(|&index| {
                    let item = &items[index];
                    (item.end - item.start, item.size, std::cmp::Reverse(index))
                })
                .expect("a part has items")
        });
        // Per boundary between columns c and c + 1: the sizes of the items over both, of
        // those ending at c and of those starting at c + 1. In a split of height y, the
        // bottom's items over both add up to some x, and those ending at c and those starting
        // at c + 1 each to y - x: so y is x plus a sum that both sides can make.
        let mut across: Vec<[Vec<u64>; 3]> = vec![Default::default(); columns - 1];
        // Where the anchor is at each boundary: the sums of that side must include it.
        let mut anchor_side: Vec<Option<usize>> = vec![None; columns - 1];
        for (index, item) in items.iter().enumerate() {
            // The boundaries before, inside and after its columns.
            let first = item.start.saturating_sub(1);
            for (boundary, sizes) in across[first..=item.end.min(columns - 2)]
                .iter_mut()
                .enumerate()
            {
                let boundary = first + boundary;
                let side = match (item.start <= boundary, item.end > boundary) {
                    (true, true) => 0,
                    (true, false) => 1,
                    _ => 2,
                };
                if Some(index) == anchor {
                    anchor_side[boundary] = Some(side);
                } else {
                    sizes[side].push(item.size);
                }
            }
        }
        // Fewest items first: their sums are fewest, and the common ones may run out early.
        let mut by_count: Vec<usize> = (0..columns - 1).collect();
        by_count.sort_by_key(|&boundary| across[boundary].iter().map(Vec::len).sum::<usize>());
        let words = limit / 64 + 1;
        let mut common: Vec<u64> = Vec::new();
        for &boundary in &by_count {
            let [over, ending, starting] = &across[boundary];
            let count = (over.len() + ending.len() + starting.len()) as u64;
            if !solver.step(words * count / WORDS_PER_NODE + 1) {
                return Err(());
            }
            // The sums of the side holding the anchor include it: shifted by its size.
            let with_anchor = |sums: Vec<u64>, side: usize| match (anchor_side[boundary], anchor) {
                (Some(at), Some(anchor)) if at == side => {
                    let mut shifted = vec![0u64; sums.len()];
                    or_shifted(&mut shifted, &sums, items[anchor].size);
                    shifted
                }
                _ => sums,
            };
            let mut sums = with_anchor(subset_sums(ending, limit), 1);
            let starting = with_anchor(subset_sums(starting, limit), 2);
            for (word, other) in sums.iter_mut().zip(&starting) {
                *word &= other;
            }
            for &size in over {
                add_size(&mut sums, size);
            }
            let sums = with_anchor(sums, 0);
            if common.is_empty() {
                common = sums;
            } else {
                for (word, other) in common.iter_mut().zip(&sums) {
                    *word &= other;
                }
            }
            common[0] &= !1;
            if common.iter().all(|&word| word == 0) {
                return Ok(None);
            }
        }
        let lowest = anchor.map_or(1, |anchor| items[anchor].size);

        let mut widths = Vec::with_capacity(columns);
        let mut branching = Vec::with_capacity(columns);
        for list in &mut deciding {
            // Items over more than one column first (the search branches on them), then
            // those over this column alone, largest first in each.
            list.sort_by_key(|&index| {
                let item = &items[index as usize];
                (item.start == item.end, std::cmp::Reverse(item.size))
            });
            branching.push(
                list.iter()
                    .take_while(|&&index| items[index as usize].start != items[index as usize].end)
                    .count(),
            );
            widths.push(width_of(list));
        }
        Ok(Some(Splits {
            part,
            cap,
            heights: common,
            lowest,
            highest: limit,
            descending: solver.pass % 2 == 1,
            columns: order,
            deciding,
            branching,
            anchor,
            reachable: vec![Vec::new(); columns],
            words: widths,
            bottom: vec![false; items.len()],
            bottom_units: vec![0; columns],
            top_units: vec![0; columns],
            height: 0,
        }))
    }

    /// Puts `item` in a band; false (and nothing changed) if a column it crosses would
    /// overflow that band.
    fn assign(&mut self, item: usize, bottom: bool) -> bool {
        let it = &self.part.items[item];
        let (units, limit) = if bottom {
            (&mut self.bottom_units, self.height)
        } else {
            (&mut self.top_units, self.cap - self.height)
        };
        if units[it.start..=it.end]
            .iter()
            .any(|&used| used + it.size > limit)
        {
            return false;
        }
        for used in &mut units[it.start..=it.end] {
            *used += it.size;
        }
        self.bottom[item] = bottom;
        true
    }

    fn unassign(&mut self, item: usize) {
        let it = &self.part.items[item];
        let units = if self.bottom[item] {
            &mut self.bottom_units
        } else {
            &mut self.top_units
        };
        for used in &mut units[it.start..=it.end] {
            *used -= it.size;
        }
    }

    /// Every split, height by height, until one packs or the search stops.
    fn each_height(&mut self, solver: &mut Solver, members: &[u32]) -> Option<Step> {
        let mut next = Some(if self.descending {
            self.highest
        } else {
            self.lowest
        });
        while let Some(from) = next {
            let height = next_bit(
                &self.heights,
                from,
                self.lowest,
                self.highest,
                self.descending,
            )?;
            self.height = height;
            if let Some(step) = self.column(0, solver, members) {
                return Some(step);
            }
            next = if self.descending {
                height.checked_sub(1)
            } else {
                height.checked_add(1)
            };
        }
        None
    }

    /// Decides the column at `position` (and all after it): a split once every column is.
    fn column(&mut self, position: usize, solver: &mut Solver, members: &[u32]) -> Option<Step> {
        if position == self.columns.len() {
            // The parts of the bands count their own nodes: this part's clock stops.
            let left = solver.limit.saturating_sub(solver.nodes);
            let bottom = self.bottom.clone();
            let step = solver.solve_bands(self.part, self.cap, members, &bottom, self.height);
            solver.limit = solver.nodes.saturating_add(left);
            return match step {
                // A part of a band ran out of nodes: the next split is tried.
                Some(Step::Stopped) if !solver.out() => {
                    solver.cut_attempts += 1;
                    None
                }
                step => step,
            };
        }
        if self.reachable[position].is_empty() && !self.make_table(position, solver) {
            return Some(Step::Stopped);
        }
        let column = self.columns[position];
        let need = self.height - self.bottom_units[column];
        self.choose(position, 0, need, solver, members)
    }

    /// Makes the sum table of `position`; false if the solver is out of nodes for it.
    fn make_table(&mut self, position: usize, solver: &mut Solver) -> bool {
        let (list, width) = (&self.deciding[position], self.words[position]);
        if !solver.step((width * list.len()) as u64 / WORDS_PER_NODE + 1) {
            return false;
        }
        let mut rows = vec![0u64; (list.len() + 1) * width];
        rows[list.len() * width] = 1;
        for next in (0..list.len()).rev() {
            let (row, after) = rows[next * width..].split_at_mut(width);
            row.copy_from_slice(&after[..width]);
            or_shifted(
                row,
                &after[..width],
                self.part.items[list[next] as usize].size,
            );
        }
        self.reachable[position] = rows;
        true
    }

    /// Decides item `next` of `position` and the ones after it, `need` units still to put
    /// in the bottom band in this column.
    fn choose(
        &mut self,
        position: usize,
        next: usize,
        need: u64,
        solver: &mut Solver,
        members: &[u32],
    ) -> Option<Step> {
        if !solver.step(1) {
            return Some(Step::Stopped);
        }
        let width = self.words[position];
        let reachable = |next: usize, need: u64| {
            has_bit(
                &self.reachable[position][next * width..(next + 1) * width],
                need,
            )
        };
        if !reachable(next, need) {
            return None;
        }
        if next == self.branching[position] {
            // Items in this column alone only make up its sum: one subset that does is
            // taken (others of the same sum would make near-identical splits, many times
            // over where such items are small), the first in the order of the items.
            let mut need = need;
            let fillers = &self.deciding[position][next..];
            let mut bottom = Vec::with_capacity(fillers.len());
            for (offset, &item) in fillers.iter().enumerate() {
                let size = self.part.items[item as usize].size;
                let take = size <= need && reachable(next + offset + 1, need - size);
                if take {
                    need -= size;
                }
                bottom.push(take);
            }
            let fillers = fillers.to_vec();
            let mut assigned = 0;
            let mut step = None;
            if fillers.iter().zip(&bottom).all(|(&item, &take)| {
                let fits = self.assign(item as usize, take);
                assigned += usize::from(fits);
                fits
            }) {
                step = self.column(position + 1, solver, members);
            }
            for &item in fillers[..assigned].iter().rev() {
                self.unassign(item as usize);
            }
            return step;
        }
        let item = self.deciding[position][next] as usize;
        let size = self.part.items[item].size;
        for bottom in [true, false] {
            if (bottom && size > need) || (!bottom && Some(item) == self.anchor) {
                continue;
            }
            if self.assign(item, bottom) {
                let left = if bottom { need - size } else { need };
                let step = self.choose(position, next + 1, left, solver, members);
                self.unassign(item);
                if step.is_some() {
                    return step;
                }
            }
        }
        None
    }
}

/// The sums `0..=limit` that some subset of `sizes` adds up to, as a bit set (bit `s` of
/// word `s / 64`).
fn subset_sums(sizes: &[u64], limit: u64) -> Vec<u64> {
    let mut sums = vec![0u64; (limit / 64 + 1) as usize];
    sums[0] = 1;
    for &size in sizes {
        add_size(&mut sums, size);
    }
    sums
}

/// `sums |= sums << size`: the sums made with `size` as well. (Shifting a copy is faster
/// here than shifting in place from the top word down, which does not vectorize.)
fn add_size(sums: &mut [u64], size: u64) {
    let before = sums.to_vec();
    or_shifted(sums, &before, size);
}

/// `target |= source << shift` on bit sets of one length (bits shifted past the end are
/// dropped).
fn or_shifted(target: &mut [u64], source: &[u64], shift: u64) {
    let (shift_words, shift_bits) = ((shift / 64) as usize, (shift % 64) as u32);
    for (word, target) in target.iter_mut().enumerate().skip(shift_words) {
        let from = word - shift_words;
        let mut moved = source[from] << shift_bits;
        if shift_bits > 0 && from > 0 {
            moved |= source[from - 1] >> (64 - shift_bits);
        }
        *target |= moved;
    }
}

/// The first set bit of `bits` from `from` on (downwards if `descending`) within
/// `lowest..=highest`.
fn next_bit(bits: &[u64], from: u64, lowest: u64, highest: u64, descending: bool) -> Option<u64> {
    if from < lowest || from > highest {
        return None;
    }
    let mut word = (from / 64) as usize;
    let offset = from % 64;
    // The word holding `from`, with the bits on the wrong side of it cleared.
    let mut bits_left = if descending {
        bits[word] & (u64::MAX >> (63 - offset))
    } else {
        bits[word] & (u64::MAX << offset)
    };
    loop {
        if bits_left != 0 {
            let bit = if descending {
                63 - u64::from(bits_left.leading_zeros())
            } else {
                u64::from(bits_left.trailing_zeros())
            };
            let found = word as u64 * 64 + bit;
            return (lowest..=highest).contains(&found).then_some(found);
        }
        if descending {
            if word == 0 || (word as u64) * 64 <= lowest {
                return None;
            }
            word -= 1;
        } else {
            word += 1;
            if word >= bits.len() || word as u64 * 64 > highest {
                return None;
            }
        }
        bits_left = bits[word];
    }
}

fn has_bit(bits: &[u64], bit: u64) -> bool {
    bits.get((bit / 64) as usize)
        .is_some_and(|word| word >> (bit % 64) & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_planner_kit::testing::{buffer, rectangle_cut};
    use memplan_plugin_api::HostContext;

    fn no_deadline(context: &HostContext) -> Deadline<'_> {
        Deadline { at: None, context }
    }

    /// A pinwheel over 3 columns, 3 units high: a (1, columns 0-1) at 0, b (2, column 2)
    /// at 0, c (1, columns 1-2) at 2, d (2, column 0) at 1, e (1, column 1) at 1.
    fn pinwheel() -> Vec<Buffer> {
        vec![
            buffer(1, 0, 1),
            buffer(2, 2, 2),
            buffer(1, 1, 2),
            buffer(2, 0, 0),
            buffer(1, 1, 1),
        ]
    }

    /// A solver in the first pass, without limits.
    fn unlimited_solver(context: &HostContext) -> Solver<'_> {
        Solver {
            nodes: 0,
            limit: u64::MAX,
            pass_end: u64::MAX,
            attempt_limit: FIRST_ATTEMPT_LIMIT,
            pass: 0,
            cut_attempts: 0,
            deadline: no_deadline(context),
            timed_out: false,
            memo: HashMap::new(),
        }
    }

    /// Panics unless `offsets` pack the component within `cap`.
    fn assert_packs(component: &Component, offsets: &[u64], cap: u64) {
        let items = &component.items;
        for (index, item) in items.iter().enumerate() {
            assert!(
                offsets[index] + item.size <= cap,
                "item {index} above {cap}"
            );
            for other in index + 1..items.len() {
                if item.overlaps(&items[other]) {
                    assert!(
                        offsets[index] + item.size <= offsets[other]
                            || offsets[other] + items[other].size <= offsets[index],
                        "items {index} and {other} overlap"
                    );
                }
            }
        }
    }

    /// The components of a rectangle `width` high cut into pieces, each with its splits at
    /// that height.
    fn cut_tilings(
        width: u64,
        steps: u32,
        pieces: usize,
        seed: u64,
    ) -> Vec<(Component, BandSplits)> {
        let problem = Problem::new(&rectangle_cut(width, steps, pieces, seed));
        problem
            .components
            .into_iter()
            .map(|component| {
                let splits = BandSplits::new(&component, width).expect("a tiling");
                (component, splits)
            })
            .collect()
    }

    #[test]
    fn cuts_are_tiled_by_splits() {
        let context = HostContext::detached();
        for seed in 1..=4 {
            for (component, mut splits) in cut_tilings(1 << 16, 30, 120, seed) {
                let offsets = splits
                    .run(&component, 1 << 24, no_deadline(&context))
                    .unwrap_or_else(|| panic!("seed {seed}: {} nodes", splits.nodes()));
                assert_packs(&component, &offsets, 1 << 16);
            }
        }
    }

    #[test]
    fn runs_resume_where_they_stopped() {
        // Budgets of 256 nodes a call: a pass spans many calls, and the memo keeps what
        // each call finished, so the tiling is still found.
        let context = HostContext::detached();
        for seed in 1..=3 {
            for (component, mut splits) in cut_tilings(1 << 16, 20, 60, seed) {
                let mut calls = 0;
                let offsets = loop {
                    calls += 1;
                    assert!(calls < 100_000, "seed {seed}: no progress");
                    if let Some(offsets) = splits.run(&component, 256, no_deadline(&context)) {
                        break offsets;
                    }
                };
                assert_packs(&component, &offsets, 1 << 16);
                assert!(splits.nodes() <= 256 * calls, "{} nodes", splits.nodes());
            }
        }
    }

    #[test]
    fn subset_sums_are_exact() {
        let sums = subset_sums(&[3, 5, 64, 70, 200], 140);
        let reachable: Vec<u64> = (0..=140).filter(|&sum| has_bit(&sums, sum)).collect();
        assert_eq!(
            reachable,
            vec![0, 3, 5, 8, 64, 67, 69, 70, 72, 73, 75, 78, 134, 137, 139]
        );
    }

    #[test]
    fn items_over_every_column_go_to_the_bottom() {
        // A pinwheel, 3 units high, with an item of 2 over all three columns.
        let mut buffers = pinwheel();
        buffers.push(buffer(2, 0, 2));
        let problem = Problem::new(&buffers);
        let component = &problem.components[0];
        let context = HostContext::detached();
        let mut bands = BandSplits::new(component, 5).expect("a tiling");
        let offsets = bands
            .run(component, 1000, no_deadline(&context))
            .expect("packs");
        assert_packs(component, &offsets, 5);
        let whole = component
            .items
            .iter()
            .position(|item| item.size == 2 && item.start == 0 && item.end == 2);
        assert_eq!(offsets[whole.expect("the item over every column")], 0);
    }

    #[test]
    fn set_bits_are_found_both_ways() {
        let mut bits = vec![0u64; 4];
        for bit in [3, 64, 70, 200] {
            bits[bit / 64] |= 1 << (bit % 64);
        }
        let walk = |from: u64, descending: bool| {
            let mut found = Vec::new();
            let mut next = Some(from);
            while let Some(at) = next.and_then(|at| next_bit(&bits, at, 4, 200, descending)) {
                found.push(at);
                next = if descending {
                    at.checked_sub(1)
                } else {
                    Some(at + 1)
                };
            }
            found
        };
        assert_eq!(walk(4, false), vec![64, 70, 200]);
        assert_eq!(walk(200, true), vec![200, 70, 64]);
        assert_eq!(walk(69, true), vec![64]);
        assert_eq!(next_bit(&bits, 3, 4, 200, false), None);
    }

    #[test]
    fn only_tilings_are_split() {
        // Column 1 holds 7 units, the others fewer: not a tiling at 7.
        let problem = Problem::new(&[buffer(4, 0, 1), buffer(3, 1, 2)]);
        let component = &problem.components[0];
        assert!(BandSplits::new(component, component.lower_bound).is_none());
        // Every column at 6, but an item aligned to 2 units is not split.
        let mut buffers = vec![
            buffer(4, 0, 1),
            buffer(2, 0, 0),
            buffer(2, 1, 2),
            buffer(4, 2, 2),
        ];
        assert!(BandSplits::new(&Problem::new(&buffers).components[0], 6).is_some());
        buffers[3].alignment = 2;
        let problem = Problem::new(&buffers);
        assert!(BandSplits::new(&problem.components[0], 3).is_none());
    }

    #[test]
    fn a_tiling_no_straight_cut_crosses_whole_is_left_to_the_direct_search() {
        // No line crosses all three columns of a pinwheel between items: no split.
        let problem = Problem::new(&pinwheel());
        let component = &problem.components[0];
        let context = HostContext::detached();
        let mut solver = unlimited_solver(&context);
        // Sums may match at some heights; no split is found at any of them.
        if let Some(mut splits) = Splits::new(component, 3, &mut solver).expect("within limits") {
            assert!(splits.each_height(&mut solver, &[0, 1, 2, 3, 4]).is_none());
        }
        // The direct search packs it.
        let mut bands = BandSplits::new(component, 3).expect("a tiling");
        let offsets = bands
            .run(component, 1000, no_deadline(&context))
            .expect("packs");
        assert_packs(component, &offsets, 3);
    }

    #[test]
    fn parts_whose_sum_tables_would_be_too_large_are_not_split() {
        // 600 distinct items over both columns, 16 million units high: the table of the
        // first column would take 600 x 2^18 words.
        let buffers: Vec<Buffer> = (0..600).map(|index| buffer(27_000 + index, 0, 1)).collect();
        let problem = Problem::new(&buffers);
        let component = &problem.components[0];
        let cap = component.lower_bound;
        assert!(is_tiling(component, cap));
        let context = HostContext::detached();
        let mut solver = unlimited_solver(&context);
        assert!(matches!(Splits::new(component, cap, &mut solver), Ok(None)));
        assert_eq!(solver.nodes, 0);
    }

    #[test]
    fn the_node_limit_holds() {
        let context = HostContext::detached();
        for (component, mut splits) in cut_tilings(1 << 20, 50, 300, 26) {
            for _ in 0..3 {
                splits.run(&component, 1000, no_deadline(&context));
            }
            assert!(splits.nodes() <= 3000, "{} nodes", splits.nodes());
        }
    }

    #[test]
    fn the_deadline_holds() {
        let context = HostContext::detached();
        let (component, mut splits) = cut_tilings(1 << 20, 50, 300, 26).remove(0);
        let started = std::time::Instant::now();
        let deadline = Deadline {
            at: Some(started + std::time::Duration::from_millis(50)),
            context: &context,
        };
        // Packed or stopped, soon.
        splits.run(&component, u64::MAX, deadline);
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
    }
}
