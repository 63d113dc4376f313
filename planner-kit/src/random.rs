//! The one seeded pseudo-random generator of memplan: for planners that randomise (restart
//! orders in searches) and for test and benchmark instances.

/// A small seeded pseudo-random generator (SplitMix64, Steele, Lea and Flood 2014): the same
/// seed gives the same numbers on every platform and run, so a search's restarts, a failing
/// test seed and a benchmark instance all reproduce.
///
/// The state is the seed itself; each step adds the golden-ratio increment and mixes the
/// result. Statistical quality is ample for shuffling search orders and spreading test cases;
/// it is not cryptographic, and [`SplitMix64::below`] has a modulo bias that neither cares
/// about. Changing this sequence changes every seeded test and benchmark
/// instance built from it: the unit tests pin its first values.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound > 0`), from one call to [`SplitMix64::next_u64`].
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    /// True `percent` times in a hundred.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items` (not empty), each as likely.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}
