//! Depth-first branch and bound over canonical packings of one component.
//!
//! One file of about 800 lines on purpose: it is one algorithm whose state (the skyline),
//! branching, pruning and no-goods hold each other's invariants, and reads best in one place;
//! its tests are in `tests.rs` beside it.
//!
//! # Canonical packings
//! Drop every buffer of a packing as low as it goes (to the lowest aligned offset clear of
//! the buffers below it); the height does not grow. In such a packing every buffer rests on
//! offset 0 or on the top of a buffer overlapping it in time, and the buffers can be placed
//! one by one in order of offset, each at the lowest point of the *skyline* built so far.
//! The search only builds those packings.
//!
//! # Branching
//! The state is a skyline: a floor per column, below which nothing more is placed. A node
//! takes the lowest run of columns at one floor `x` (the *valley*; only columns where
//! unplaced buffers are live count, and only in the leftmost independent part, see below)
//! and branches:
//! - place one unplaced buffer whose whole lifetime lies in the valley at `x` (aligned up);
//!   its columns' floor becomes its top;
//! - or *close* the valley: no buffer rests at `x` there, so the lowest buffer later placed
//!   in it would rest on a wall, and the floor rises to the lower neighbouring floor.
//!   A buffer crossing a wall is above that wall's floor anyway, so nothing is lost.
//!
//! # Pruning and inference
//! - branching column: in the valley, the column with the fewest candidates covering it
//!   is branched on (the candidates covering it, then one child where none of them is at
//!   this level). A column without slack (floor + unplaced = cap) cannot stay empty, so it
//!   gets no such child, and none at all fails the node;
//! - capacity: a placement whose top exceeds the cap is not tried;
//! - per column, `floor + units of unplaced buffers live there` bounds the height of
//!   everything below; a node where some column exceeds the cap is cut. Placing in a valley
//!   leaves that sum unchanged (bar alignment padding); closing raises it by the waste;
//! - a buffer's *release*: it cannot sit lower than the highest floor across its lifetime.
//!   The buffers live in a column stack one above the other, none below its release, so
//!   the column's lowest possible top is a single-machine schedule with release dates
//!   (max over buffers of release + sizes released no earlier); checked in every column a
//!   raised release touches (MiniMalloc's spatial inference, strengthened);
//! - dominance: a buffer is only placed where it rests on a placed buffer (or on 0); in a
//!   valley raised by closing, a buffer lying wholly over the closed part would drop lower,
//!   so that packing is reached elsewhere (as the canonical form of a lower one);
//! - no-goods: once "buffer `b` at `x`" has been explored from a node, its later siblings
//!   never place `b` at `x` again (that packing was already reached), so each canonical
//!   packing is met once;
//! - symmetry: identical buffers (same columns, size, alignment) are placed in index order
//!   and tried once per node;
//! - independent parts: columns where every buffer is placed cut the rest into parts
//!   that no longer interact. The leftmost part is finished first; when a later part has
//!   no packing, no choice made in the earlier ones since the cut can help, so the search
//!   jumps back to the node whose child made the cut.
//!
//! Buffers with a fixed offset are obstacles placed from the start; candidates that would
//! overlap one are skipped. Packings resting on an obstacle are then missed, so such a
//! search never claims a proof by exhaustion ([`Search::is_complete`]).
//!
//! The search is iterative (an explicit stack of frames), resumable across calls to
//! [`Search::run`] with node budgets, and its node order depends only on the input.

use std::time::{Duration, Instant};

use memplan_planner_kit::Grouped;
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::HostContext;

use crate::problem::Component;

const UNPLACED: u64 = u64::MAX;
const NONE: u64 = u64::MAX;
const NO_JUMP: usize = usize::MAX;
/// How many nodes between two polls of the host's context (its cancellation, and in the
/// portfolio the race), and the most between two polls of the clock: see [`Polls`] for how
/// many come between those. The deadline (the sooner of the planner's and the host's time
/// limits) is the clock's; the context is polled at node counts only, so that the work it
/// counts depends on the search's path and not on the machine's speed.
const MOST_NODES_BETWEEN_POLLS: u64 = 1024;
/// About how long the search runs between two polls of the clock.
const POLL_PERIOD: Duration = Duration::from_millis(1);
/// The column check sums the units of items with one release; it looks this far back for
/// the release (equal releases that it misses only make the sort longer).
const DISTINCT_RELEASES_SEEN: usize = 8;
/// A search of a component with more items, or whose lifetimes cover more (buffer, column)
/// pairs than [`LARGE_SEARCH_SPAN`], is *large*, and trades pruning for time and memory
/// linear in the input; it stays complete:
/// - it branches on the leftmost column a candidate covers, and a node gathers only the
///   candidates starting there: choosing the column with the fewest children needs every
///   candidate of the valley and their coverage, and at the first nodes of a large
///   component the valley is every column, the candidates every item (a node of a
///   100,000-buffer trace took 150 us, where a packing needs 100,000 nodes). A column that
///   cannot stay empty right of the chosen one is left for deeper nodes to find;
/// - no release inference: it needs the items live in each column, as many as the pairs
///   (10,000 saved activations over 30,000 columns: 3 * 10^8), and took 65 % of the time
///   on a 10,000-buffer training trace (1.5 ms a node, so the deadline was polled late);
/// - no dominance by resting points, so no per-column record of the highest top: a placed
///   buffer or a closed valley raises a run of columns all at one floor, undone as one
///   change (per column, the trail of one dive held as many changes as pairs: 3.3 GB on a
///   62,000-buffer trace).
pub const LARGE_SEARCH_ITEMS: usize = 4096;
/// See [`LARGE_SEARCH_ITEMS`]: 2^22 pairs (the per-column lists: 16 MiB).
pub const LARGE_SEARCH_SPAN: usize = 1 << 22;

/// The order candidates are tried in, largest first. The search is complete in any order
/// but its speed is very sensitive to it, so several orders are run side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Lifetime (in columns), then size.
    Lifetime,
    /// Size, then lifetime.
    Size,
    /// Size times lifetime, then size.
    Area,
    /// Size and lifetime weighted at random (seeded), for restarts.
    Shuffled(u64),
}

impl Order {
    pub const ALL: [Order; 3] = [Order::Size, Order::Area, Order::Lifetime];
}

/// Which valley column a node branches on. Either is complete; which is faster depends on
/// the instance by orders of magnitude, so both are run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Branching {
    /// The column with the fewest children (fail first).
    FewestChildren,
    /// The leftmost column that some candidate covers (bottom-left first).
    Leftmost,
}

/// Why [`Search::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// A packing at or below the `stop_at` height was found.
    Target,
    /// The whole tree was searched: no packing lower than `cap + 1` exists beyond those found.
    Exhausted,
    /// The node budget of this call is spent; `run` may be called again.
    Budget,
    /// The deadline passed or the host asked to stop.
    Stopped,
}

/// Where the search stops for lack of time.
#[derive(Clone, Copy)]
pub struct Deadline<'a> {
    pub at: Option<Instant>,
    pub context: &'a HostContext,
}

impl Deadline<'_> {
    /// The sooner of `at` and the deadline of the host's `context` (`--timeout`), where it
    /// has one.
    pub fn sooner_than_host(at: Instant, context: &HostContext) -> Instant {
        context
            .remaining()
            .map_or(at, |left| at.min(Instant::now() + left))
    }

    pub fn passed(&self) -> bool {
        self.context.should_stop() || self.time_is_up()
    }

    /// The clock alone, not the host's context: asking the context counts as work in the
    /// portfolio's race (its `Lane`), and so must come at points fixed by the search's path.
    pub fn time_is_up(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }
}

/// When the search next polls the clock of its [`Deadline`]. A node costs from tens of
/// nanoseconds to milliseconds: the release inference over thousands of columns took 2.2 ms
/// a node on the 2,542 critical buffers of a 10,000-buffer training trace, and a large
/// search's first nodes gather every item (a millisecond each at 1,000,000 buffers). A fixed
/// count of nodes between polls either polls far more often than needed or overruns the
/// deadline (1,024 nodes there took 2.3 s: the portfolio ended 1.6 s past its 1 s limit).
/// So the count follows the measured cost of the nodes since the last poll, for a poll about
/// every [`POLL_PERIOD`]: it starts at one node and at most doubles from one poll to the
/// next (cheap first nodes do not hide dearer ones deeper down), up to
/// [`MOST_NODES_BETWEEN_POLLS`].
struct Polls {
    /// Nodes between this poll and the next.
    every: u64,
    /// The node count at the last poll, and when it was.
    nodes: u64,
    at: Instant,
}

impl Polls {
    fn new() -> Polls {
        Polls {
            every: 1,
            nodes: 0,
            at: Instant::now(),
        }
    }

    fn due(&self, nodes: u64) -> bool {
        nodes >= self.nodes + self.every
    }

    /// Sets the count to the next poll from the cost of the nodes since the last one.
    fn polled(&mut self, nodes: u64) {
        let now = Instant::now();
        let spent = now.duration_since(self.at).as_nanos().max(1);
        let count = u128::from(nodes - self.nodes);
        let in_period = (POLL_PERIOD.as_nanos() * count / spent).min(u128::from(u64::MAX)) as u64;
        self.every = in_period.clamp(1, (2 * self.every).min(MOST_NODES_BETWEEN_POLLS));
        self.nodes = nodes;
        self.at = now;
    }
}

#[derive(Clone, Copy, Debug)]
enum Change {
    Floor {
        column: u32,
        old: u64,
        old_rest: u64,
    },
    /// Columns `first..=last` were all at floor `old` (a valley, in a large search).
    Floors {
        first: u32,
        last: u32,
        old: u64,
    },
    Place {
        item: u32,
    },
    Ban {
        class: u32,
        old: u64,
    },
    Release {
        item: u32,
        old: u64,
    },
}

/// What a node tries once its candidates are done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LastChild {
    /// Nothing: the branching column must be covered at this level.
    None,
    /// The candidates all cover one column and none of them is at this level: search on
    /// with them excluded.
    Exclude,
    /// No candidate is left in the valley: close it.
    Close,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    /// Trail length to undo to before trying the next child.
    mark: usize,
    /// Candidates are `candidates[first..first + count]`, in the order they are tried.
    first: usize,
    count: usize,
    next: usize,
    valley: (usize, usize),
    level: u64,
    /// Floor the valley rises to when closed; NONE when it is walled in on both sides.
    wall: u64,
    /// The child tried after the candidates.
    last: LastChild,
    /// First column of the part the valley is in.
    part: usize,
    /// The frame to return to when this one is exhausted, or NO_JUMP.
    jump_to: usize,
    /// Lower bound of any packing below this node, and highest top placed so far.
    bound: u64,
    height: u64,
}

/// A resumable search for packings of one component lower than a cap.
pub struct Search<'a> {
    component: &'a Component,
    /// Items whose offset is free, sorted per start column in the order they are tried.
    by_start: Grouped,
    /// Items with a fixed offset: obstacles, placed from the start.
    fixed: Vec<u32>,
    class: Vec<u32>,
    class_members: Grouped,
    class_placed: Vec<u32>,
    banned_at: Vec<u64>,
    rank: Vec<u32>,
    floor: Vec<u64>,
    /// Per column, the top of the highest placed buffer (0 if none): below the floor when
    /// the column's valley was closed.
    rest: Vec<u64>,
    remaining: Vec<u64>,
    live: Vec<u32>,
    offset: Vec<u64>,
    trail: Vec<Change>,
    candidates: Vec<u32>,
    branching: Branching,
    /// A large component (see [`LARGE_SEARCH_ITEMS`]): branches on the leftmost column
    /// covered, found without a look at the rest of the valley, keeps no `rest` nor release
    /// inference, and records a raised valley as one change.
    large: bool,
    /// Per done column, the frame whose child placed its last buffer.
    done_at: Vec<usize>,
    /// Free items live in each column; empty in a large search ([`LARGE_SEARCH_ITEMS`]).
    live_items: Vec<Vec<u32>>,
    /// Per item, the highest floor across its lifetime: it cannot be placed lower.
    release: Vec<u64>,
    /// Scratch for [`Search::propagate`]: epoch stamps per item and column, the items whose
    /// release rose, and (release, size) pairs of one column.
    epoch: u32,
    item_stamp: Vec<u32>,
    column_stamp: Vec<u32>,
    raised: Vec<u32>,
    stack: Vec<(u64, u64)>,
    /// Scratch: per valley column, how many candidates cover it.
    coverage: Vec<u32>,
    frames: Vec<Frame>,
    started: bool,
    finished: Option<End>,
    cap: u64,
    stop_at: u64,
    best: Option<(u64, Vec<u64>)>,
    nodes: u64,
    polls: Polls,
    /// Whether exhausting the tree proves optimality (not with fixed offsets in the way).
    complete: bool,
}

impl<'a> Search<'a> {
    /// A search for packings with height at most `cap`, stopping at the first one with
    /// height at most `stop_at`. Every packing found lowers the cap below it.
    pub fn new(component: &'a Component, order: Order, cap: u64, stop_at: u64) -> Search<'a> {
        let items = &component.items;
        let columns = component.columns;
        let mut rank_order: Vec<u32> = (0..items.len() as u32)
            .filter(|&index| items[index as usize].fixed.is_none())
            .collect();
        let noise: Vec<u64> = match order {
            Order::Shuffled(seed) => {
                let mut random = memplan_planner_kit::XorShift64Star::new(seed);
                items.iter().map(|_| 64 + random.below(64)).collect()
            }
            _ => Vec::new(),
        };
        rank_order.sort_by_key(|&index| {
            let item = &items[index as usize];
            let columns = (item.end - item.start + 1) as u64;
            let (first_key, second_key) = match order {
                Order::Lifetime => (columns, item.size),
                Order::Size => (item.size, columns),
                Order::Area => (item.size * columns, item.size),
                // Sizes scaled by a random factor in [1, 2): near-equal sizes swap places.
                Order::Shuffled(_) => (item.size * noise[index as usize], columns),
            };
            (
                std::cmp::Reverse(first_key),
                std::cmp::Reverse(second_key),
                item.align,
                index,
            )
        });
        let mut rank = vec![u32::MAX; items.len()];
        for (position, &index) in rank_order.iter().enumerate() {
            rank[index as usize] = position as u32;
        }
        let by_start = Grouped::by_key(
            rank_order
                .iter()
                .map(|&index| (index, items[index as usize].start)),
            columns,
        );
        // Symmetry classes: consecutive in rank order when identical, and so in index order
        // within a class (the index is the rank's last key).
        let mut class = vec![u32::MAX; items.len()];
        let mut classes = 0;
        let mut previous: Option<u32> = None;
        for &index in &rank_order {
            let item = &items[index as usize];
            let same = previous.is_some_and(|prev| {
                let other = &items[prev as usize];
                (other.start, other.end, other.size, other.align)
                    == (item.start, item.end, item.size, item.align)
            });
            if !same {
                classes += 1;
            }
            class[index as usize] = classes as u32 - 1;
            previous = Some(index);
        }
        let class_members = Grouped::by_key(
            rank_order
                .iter()
                .map(|&index| (index, class[index as usize] as usize)),
            classes,
        );
        // Units and items live per column, by differences at the ends of each lifetime:
        // O(items + columns), where a long-lived buffer would cost one step per column.
        let mut remaining_change = vec![0u64; columns + 1];
        let mut live_change = vec![0i64; columns + 1];
        let mut offset = vec![UNPLACED; items.len()];
        let mut fixed = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match item.fixed {
                Some(at) => {
                    offset[index] = at;
                    fixed.push(index as u32);
                }
                None => {
                    // Wrapping: a column's changes may go below zero before they are summed.
                    remaining_change[item.start] =
                        remaining_change[item.start].wrapping_add(item.size);
                    remaining_change[item.end + 1] =
                        remaining_change[item.end + 1].wrapping_sub(item.size);
                    live_change[item.start] += 1;
                    live_change[item.end + 1] -= 1;
                }
            }
        }
        let (mut units, mut count) = (0u64, 0i64);
        let (remaining, live): (Vec<u64>, Vec<u32>) = (0..columns)
            .map(|column| {
                units = units.wrapping_add(remaining_change[column]);
                count += live_change[column];
                (units, count as u32)
            })
            .unzip();
        // The release inference needs the items live in each column; a large search does
        // without (see LARGE_SEARCH_ITEMS).
        let large = items.len() > LARGE_SEARCH_ITEMS || component.span_total() > LARGE_SEARCH_SPAN;
        let mut live_items: Vec<Vec<u32>> = Vec::new();
        if !large {
            live_items = vec![Vec::new(); columns];
            for &index in &rank_order {
                let item = &items[index as usize];
                for live in &mut live_items[item.start..=item.end] {
                    live.push(index);
                }
            }
        }
        Search {
            component,
            by_start,
            complete: fixed.is_empty(),
            fixed,
            class,
            class_members,
            class_placed: vec![0; classes],
            banned_at: vec![NONE; classes],
            rank,
            floor: vec![0; columns],
            rest: vec![0; columns],
            remaining,
            live,
            offset,
            trail: Vec::new(),
            candidates: Vec::new(),
            coverage: Vec::new(),
            live_items,
            done_at: vec![NO_JUMP; columns],
            branching: Branching::FewestChildren,
            large,
            release: vec![0; items.len()],
            epoch: 0,
            item_stamp: vec![0; items.len()],
            column_stamp: vec![0; columns],
            raised: Vec::new(),
            stack: Vec::new(),
            frames: Vec::new(),
            started: false,
            finished: None,
            cap,
            stop_at,
            best: None,
            nodes: 0,
            polls: Polls::new(),
        }
    }

    /// The same search branching on other columns.
    pub fn with_branching(mut self, branching: Branching) -> Search<'a> {
        self.branching = branching;
        self
    }

    /// The same search as a large one ([`LARGE_SEARCH_ITEMS`]), for tests on small
    /// instances.
    #[cfg(test)]
    fn into_large(mut self) -> Search<'a> {
        self.large = true;
        self.live_items = Vec::new();
        self
    }

    /// Best packing found so far: height and offsets (units) per item of the component.
    pub fn best(&self) -> Option<&(u64, Vec<u64>)> {
        self.best.as_ref()
    }

    /// Packings at or below this height are still searched for.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Searches only for packings at or below `cap` from now on (another search found one
    /// at `cap + 1`).
    pub fn lower_cap(&mut self, cap: u64) {
        self.cap = self.cap.min(cap);
    }

    /// Stops at the first packing at or below `stop_at` from now on.
    pub fn set_stop_at(&mut self, stop_at: u64) {
        self.stop_at = stop_at;
    }

    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Whether [`End::Exhausted`] proves that no lower packing exists.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Searches for up to `budget` more nodes. Deterministic as long as `deadline` does
    /// not pass.
    pub fn run(&mut self, budget: u64, deadline: Deadline<'_>) -> End {
        if let Some(end) = self.finished {
            return end;
        }
        let limit = self.nodes.saturating_add(budget);
        if !self.started {
            self.started = true;
            let bound = self.remaining.iter().copied().max().unwrap_or(0);
            let height = self
                .fixed
                .iter()
                .map(|&index| self.top(index as usize))
                .max()
                .unwrap_or(0);
            if bound.max(height) > self.cap {
                return self.finish(End::Exhausted);
            }
            if let Some(end) = self.open(bound, height) {
                return self.finish(end);
            }
        }
        while let Some(&frame) = self.frames.last() {
            self.undo_to(frame.mark);
            if frame.bound > self.cap || frame.height > self.cap {
                self.pop();
                continue;
            }
            if self.nodes >= limit {
                return End::Budget;
            }
            // The host's context at nodes the search's path fixes (a large search's nodes
            // are dear: at each), the clock as often as the nodes' cost asks.
            if (self.large || self.nodes % MOST_NODES_BETWEEN_POLLS == 0)
                && deadline.context.should_stop()
            {
                return End::Stopped;
            }
            if self.polls.due(self.nodes) {
                if deadline.time_is_up() {
                    return End::Stopped;
                }
                self.polls.polled(self.nodes);
            }
            let top = self.frames.len() - 1;
            if frame.next < frame.count {
                self.frames[top].next += 1;
                if frame.next > 0 {
                    // The previous sibling explored its buffer at this level: a no-good for
                    // the remaining siblings, kept below this frame's mark.
                    let previous = self.candidates[frame.first + frame.next - 1];
                    self.ban(previous as usize, frame.level);
                    self.frames[top].mark = self.trail.len();
                }
                let item = self.candidates[frame.first + frame.next] as usize;
                self.nodes += 1;
                if let Some((bound, height)) = self.place(item, &frame) {
                    if let Some(end) = self.open(bound, height) {
                        return self.finish(end);
                    }
                }
            } else if frame.next == frame.count && frame.last == LastChild::Close {
                self.frames[top].next += 1;
                self.nodes += 1;
                if let Some(bound) = self.close(&frame) {
                    if let Some(end) = self.open(bound, frame.height) {
                        return self.finish(end);
                    }
                }
            } else if frame.next == frame.count && frame.last == LastChild::Exclude {
                self.frames[top].next += 1;
                self.nodes += 1;
                let previous = self.candidates[frame.first + frame.count - 1];
                self.ban(previous as usize, frame.level);
                self.frames[top].mark = self.trail.len();
                if let Some(end) = self.open(frame.bound, frame.height) {
                    return self.finish(end);
                }
            } else {
                self.pop();
            }
        }
        self.finish(End::Exhausted)
    }

    fn finish(&mut self, end: End) -> End {
        self.finished = Some(end);
        end
    }

    fn top(&self, item: usize) -> u64 {
        self.offset[item] + self.component.items[item].size
    }

    fn pop(&mut self) {
        let frame = self.frames.pop().expect("a frame");
        self.candidates.truncate(frame.first);
        if frame.jump_to != NO_JUMP && frame.jump_to + 1 < self.frames.len() {
            let keep = frame.jump_to + 1;
            let first = self.frames[keep].first;
            self.frames.truncate(keep);
            self.candidates.truncate(first);
        }
    }

    fn undo_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop().expect("longer than mark") {
                Change::Floor {
                    column,
                    old,
                    old_rest,
                } => {
                    self.floor[column as usize] = old;
                    self.rest[column as usize] = old_rest;
                }
                Change::Floors { first, last, old } => {
                    self.floor[first as usize..=last as usize].fill(old);
                }
                Change::Place { item } => {
                    let item = item as usize;
                    let it = &self.component.items[item];
                    for column in it.start..=it.end {
                        self.remaining[column] += it.size;
                        self.live[column] += 1;
                    }
                    self.offset[item] = UNPLACED;
                    self.class_placed[self.class[item] as usize] -= 1;
                }
                Change::Ban { class, old } => self.banned_at[class as usize] = old,
                Change::Release { item, old } => self.release[item as usize] = old,
            }
        }
    }

    fn ban(&mut self, item: usize, level: u64) {
        let class = self.class[item];
        self.trail.push(Change::Ban {
            class,
            old: self.banned_at[class as usize],
        });
        self.banned_at[class as usize] = level;
    }

    /// Raises a column's floor; `rest` is the new top of its highest placed buffer.
    fn set_floor(&mut self, column: usize, value: u64, rest: u64) {
        self.trail.push(Change::Floor {
            column: column as u32,
            old: self.floor[column],
            old_rest: self.rest[column],
        });
        self.floor[column] = value;
        self.rest[column] = rest;
    }

    /// Raises the floor of columns `first..=last`, all at `old`, to `value`, as one change
    /// (large searches, which keep no `rest`).
    fn raise_floors(&mut self, first: usize, last: usize, old: u64, value: u64) {
        self.trail.push(Change::Floors {
            first: first as u32,
            last: last as u32,
            old,
        });
        self.floor[first..=last].fill(value);
    }

    /// Whether `item` at `offset` would rest on a placed buffer (or on 0): otherwise it
    /// would drop lower, and the packing is not canonical.
    fn rests(&self, item: usize, offset: u64) -> bool {
        let it = &self.component.items[item];
        let support = (it.start..=it.end)
            .map(|column| self.rest[column])
            .max()
            .unwrap_or(0);
        align_up(support, it.align) == offset
    }

    /// Whether `item` at `offset` would overlap a fixed item.
    fn hits_fixed(&self, item: usize, offset: u64) -> bool {
        let it = &self.component.items[item];
        self.fixed.iter().any(|&other| {
            let other = other as usize;
            let ot = &self.component.items[other];
            ot.overlaps(it) && self.offset[other] < offset + it.size && offset < self.top(other)
        })
    }

    /// Places `item` at the frame's level; the new bound and height, or None if that cannot
    /// lead to a packing under the cap.
    fn place(&mut self, item: usize, frame: &Frame) -> Option<(u64, u64)> {
        let it = &self.component.items[item];
        let (start, end, size) = (it.start, it.end, it.size);
        let offset = align_up(frame.level, it.align);
        if offset + size > self.cap {
            return None;
        }
        let mut bound = frame.bound;
        for column in start..=end {
            bound = bound.max(offset + self.remaining[column]);
        }
        if bound > self.cap {
            return None;
        }
        if self.large {
            // The whole lifetime lies in the valley, all at the frame's level: one change.
            self.raise_floors(start, end, frame.level, offset + size);
        }
        for column in start..=end {
            if !self.large {
                self.set_floor(column, offset + size, offset + size);
            }
            self.remaining[column] -= size;
            self.live[column] -= 1;
            if self.live[column] == 0 {
                self.done_at[column] = self.frames.len() - 1;
            }
        }
        self.offset[item] = offset;
        self.class_placed[self.class[item] as usize] += 1;
        self.trail.push(Change::Place { item: item as u32 });
        let bound = self.propagate(start, end, offset + size, bound)?;
        Some((bound, frame.height.max(offset + size)))
    }

    /// Closes the frame's valley; the new bound, or None if the waste cannot fit.
    fn close(&mut self, frame: &Frame) -> Option<u64> {
        if frame.wall == NONE {
            return None;
        }
        let (first, last) = frame.valley;
        let mut bound = frame.bound;
        for column in first..=last {
            bound = bound.max(frame.wall + self.remaining[column]);
        }
        if bound > self.cap {
            return None;
        }
        if self.large {
            self.raise_floors(first, last, frame.level, frame.wall);
        } else {
            for column in first..=last {
                self.set_floor(column, frame.wall, self.rest[column]);
            }
        }
        self.propagate(first, last, frame.wall, bound)
    }

    /// After the floor of columns `first..=last` rose to `floor`: raises the release of the
    /// unplaced items there, then checks every column those items cross. A column's items
    /// stack one above the other, none below its release, so the lowest possible top of the
    /// column is that of the single-machine schedule with release dates: the maximum over
    /// items of (release + sizes of the items released no earlier). The new bound, or None
    /// if a column cannot fit under the cap.
    fn propagate(&mut self, first: usize, last: usize, floor: u64, bound: u64) -> Option<u64> {
        if self.live_items.is_empty() {
            // A large search (see [`LARGE_SEARCH_ITEMS`]).
            return Some(bound);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.item_stamp.fill(0);
            self.column_stamp.fill(0);
            self.epoch = 1;
        }
        let epoch = self.epoch;
        self.raised.clear();
        // The items live in `first..=last`: those live in `first`, and those starting after
        // it (an item live further right that started before `first` is live in `first`).
        for position in 0..self.live_items[first].len() {
            let item = self.live_items[first][position];
            self.raise(item as usize, floor, epoch);
        }
        for column in first + 1..=last {
            for position in 0..self.by_start.get(column).len() {
                let item = self.by_start.get(column)[position];
                self.raise(item as usize, floor, epoch);
            }
        }
        if self.raised.is_empty() {
            return Some(bound);
        }
        let mut bound = bound;
        // No release is above the highest floor: a column whose units all fit above it
        // passes without a look at its items.
        let highest_floor = self.floor.iter().copied().max().unwrap_or(0);
        for position in 0..self.raised.len() {
            let it = &self.component.items[self.raised[position] as usize];
            for column in it.start..=it.end {
                if self.column_stamp[column] == epoch {
                    continue;
                }
                self.column_stamp[column] = epoch;
                let total = self.remaining[column];
                if total == 0 {
                    continue;
                }
                if highest_floor + total <= self.cap {
                    bound = bound.max(self.floor[column] + total);
                    continue;
                }
                // (release, units released there): releases are floors, so few distinct
                // values; summing per value keeps the sort below short.
                self.stack.clear();
                let (mut lowest, mut highest) = (u64::MAX, 0);
                for &other in &self.live_items[column] {
                    let other = other as usize;
                    if self.offset[other] == UNPLACED {
                        let release = self.release[other];
                        let size = self.component.items[other].size;
                        lowest = lowest.min(release);
                        highest = highest.max(release);
                        match self
                            .stack
                            .iter_mut()
                            .rev()
                            .take(DISTINCT_RELEASES_SEEN)
                            .find(|(seen, _)| *seen == release)
                        {
                            Some((_, units)) => *units += size,
                            None => self.stack.push((release, size)),
                        }
                    }
                }
                // Fast path: if even the highest release plus everything fits, the schedule
                // does, and the lowest release plus everything bounds the column.
                if highest + total <= self.cap {
                    bound = bound.max(lowest + total);
                    continue;
                }
                self.stack.sort_unstable_by(|a, b| b.cmp(a));
                let mut above = 0;
                for &(release, size) in &self.stack {
                    above += size;
                    bound = bound.max(release + above);
                }
                if bound > self.cap {
                    return None;
                }
            }
        }
        Some(bound)
    }

    /// Raises the release of unplaced `item` to `floor` if it is lower (once per epoch).
    fn raise(&mut self, item: usize, floor: u64, epoch: u32) {
        if self.offset[item] != UNPLACED
            || self.release[item] >= floor
            || self.item_stamp[item] == epoch
        {
            return;
        }
        self.item_stamp[item] = epoch;
        self.trail.push(Change::Release {
            item: item as u32,
            old: self.release[item],
        });
        self.release[item] = floor;
        self.raised.push(item as u32);
    }

    /// Opens a node at the current state: records a packing if every item is placed, else
    /// pushes a frame with its candidates. Returns an end if the search should stop.
    fn open(&mut self, bound: u64, height: u64) -> Option<End> {
        let columns = self.component.columns;
        // The leftmost part: columns between two done ones (or the ends) are independent of
        // the rest, so each part is finished before the next one starts.
        // Placing only ends lifetimes, so the leftmost live column is never left of the
        // parent node's part: the scan starts there (amortised, not O(columns) a node).
        let from = self.frames.last().map_or(0, |parent| parent.part);
        let Some(part) = (from..columns).find(|&column| self.live[column] > 0) else {
            return self.record(height);
        };
        let (level, first) = (part..columns)
            .take_while(|&column| self.live[column] > 0)
            .map(|column| (self.floor[column], column))
            .min()
            .expect("a live column");
        // The first node of a new part: if its subtree fails, no choice made on the left
        // since the part was cut off can help, so the search jumps back to the node whose
        // child cut it off.
        let jump_to = match self.frames.last() {
            Some(parent) if parent.part != part => self.done_at[part - 1],
            _ => NO_JUMP,
        };
        let mut last = first;
        while last + 1 < columns && self.live[last + 1] > 0 && self.floor[last + 1] == level {
            last += 1;
        }
        let wall_at = |column: Option<usize>| match column {
            Some(column) if column < columns && self.live[column] > 0 => self.floor[column],
            _ => NONE,
        };
        let wall = wall_at(first.checked_sub(1)).min(wall_at(Some(last + 1)));

        let candidates_first = self.candidates.len();
        for column in first..=last {
            for &item in self.by_start.get(column) {
                let index = item as usize;
                let it = &self.component.items[index];
                let class = self.class[index] as usize;
                if self.offset[index] != UNPLACED
                    || it.end > last
                    || self.banned_at[class] == level
                    || self.class_members.get(class)[self.class_placed[class] as usize] != item
                    || align_up(level, it.align) + it.size > self.cap
                {
                    continue;
                }
                let offset = align_up(level, it.align);
                if self.fixed.is_empty() {
                    if !self.large && !self.rests(index, offset) {
                        continue;
                    }
                } else if self.hits_fixed(index, offset) {
                    continue;
                }
                self.candidates.push(item);
            }
            if self.large && self.candidates.len() > candidates_first {
                // Every candidate found starts here, the leftmost column any covers.
                break;
            }
        }
        let rank = &self.rank;
        self.candidates[candidates_first..].sort_unstable_by_key(|&item| rank[item as usize]);
        let mut count = self.candidates.len() - candidates_first;
        let last_child = if count == 0 {
            if wall == NONE {
                self.candidates.truncate(candidates_first);
                return None;
            }
            LastChild::Close
        } else if self.large {
            // The candidates all start at the leftmost column any covers; the columns before
            // it stay empty at this level, which needs slack there.
            let column = self.component.items[self.candidates[candidates_first] as usize].start;
            let slack = |column: usize| self.cap.saturating_sub(level + self.remaining[column]) > 0;
            if !(first..column).all(slack) {
                self.candidates.truncate(candidates_first);
                return None;
            }
            if slack(column) {
                LastChild::Exclude
            } else {
                LastChild::None
            }
        } else {
            // Branch on the valley column with the fewest ways to be covered at this level.
            // A column without slack cannot stay empty here (closing wastes at least a
            // unit), so only the buffers covering it are tried; otherwise one more child
            // excludes them all.
            // Counted by differences at the candidates' ends: O(valley + candidates), where
            // long-lived candidates in a wide valley would cost their spans summed.
            self.coverage.clear();
            self.coverage.resize(last - first + 2, 0);
            for &item in &self.candidates[candidates_first..] {
                let it = &self.component.items[item as usize];
                self.coverage[it.start - first] = self.coverage[it.start - first].wrapping_add(1);
                self.coverage[it.end + 1 - first] =
                    self.coverage[it.end + 1 - first].wrapping_sub(1);
            }
            let mut covering = 0u32;
            for count in &mut self.coverage {
                covering = covering.wrapping_add(*count);
                *count = covering;
            }
            let mut choice: Option<(u32, usize, bool)> = None;
            for column in first..=last {
                let slack = self.cap.saturating_sub(level + self.remaining[column]) > 0;
                let covering = self.coverage[column - first];
                if covering == 0 {
                    if slack {
                        // Stays empty at this level: no choice to make here.
                        continue;
                    }
                    self.candidates.truncate(candidates_first);
                    return None;
                }
                let children = covering + u32::from(slack);
                let better = match (choice, self.branching) {
                    (None, _) => true,
                    (Some((best, _, _)), Branching::FewestChildren) => children < best,
                    (Some(_), Branching::Leftmost) => false,
                };
                if better {
                    choice = Some((children, column, slack));
                }
            }
            let (_, column, slack) = choice.expect("a nonempty valley");
            let items = &self.component.items;
            let mut kept = candidates_first;
            for position in candidates_first..self.candidates.len() {
                let it = &items[self.candidates[position] as usize];
                if it.start <= column && column <= it.end {
                    self.candidates[kept] = self.candidates[position];
                    kept += 1;
                }
            }
            self.candidates.truncate(kept);
            count = kept - candidates_first;
            if slack {
                LastChild::Exclude
            } else {
                LastChild::None
            }
        };
        self.frames.push(Frame {
            mark: self.trail.len(),
            first: candidates_first,
            count,
            next: 0,
            valley: (first, last),
            level,
            wall,
            last: last_child,
            part,
            jump_to,
            bound,
            height,
        });
        None
    }

    fn record(&mut self, height: u64) -> Option<End> {
        self.best = Some((height, self.offset.clone()));
        self.cap = height.saturating_sub(1);
        if height <= self.stop_at {
            Some(End::Target)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
