//! Generated instances of the shapes planners meet at scale, for tests and benchmarks, named
//! by a short spec so that every benchmark and test reads them the same way
//! ([`generated_instance`]):
//!
//! | spec                              | shape                                                   |
//! |-----------------------------------|---------------------------------------------------------|
//! | `band:N`                          | buffer i lives steps [i mod 1000, i mod 1000 + 6), 16 B |
//! | `all-live:N[:SEED]`               | every buffer live at every step, random sizes           |
//! | `random:N[:SEED[:STEPS]]`         | random starts and durations over 1,000 steps (or STEPS) |
//! | `model:N[:SEED]`                  | a model graph's trace ([`model_like_trace`])            |
//! | `compiler:N[:SEED]`               | an ML compiler's training-step trace ([`compiler_trace`]) |
//! | `even-compiler:N[:SEED]`          | the same without huge buffers ([`even_compiler_trace`]) |
//! | `cut:PIECES[:SEED[:STEPS]]`       | a 2^20-byte rectangle cut into pieces ([`rectangle_cut`]) |
//!
//! Every generator is deterministic: the same spec gives the same buffers.

use crate::{Buffer, FixedOffset, XorShift64Star};
use memplan_plugin_api::Lifetime;

use super::{model_like_trace, rectangle_cut};

/// Seed of a spec that names none.
pub const DEFAULT_SEED: u64 = 1;
/// Width of the `cut:` rectangles, so that their optimum is known: 2^20 bytes.
pub const CUT_WIDTH: u64 = 1 << 20;
/// Steps of the `cut:` rectangles when the spec names none.
pub const CUT_STEPS: u32 = 1000;
/// Steps of the `random:` traces when the spec names none.
pub const RANDOM_STEPS: u32 = 1000;

/// The generator specs [`generated_instance`] reads, for messages.
pub const GENERATED_SPECS: &str =
    "band:N, all-live:N[:SEED], random:N[:SEED[:STEPS]], model:N[:SEED], \
     compiler:N[:SEED], even-compiler:N[:SEED] or cut:PIECES[:SEED[:STEPS]]";

/// The buffers a generator spec names (see the module documentation), `None` when `spec` is
/// not a generator spec (a file name, say), and an error naming the spec when it is one but
/// its numbers do not read.
pub fn generated_instance(spec: &str) -> Option<Result<Vec<Buffer>, String>> {
    const KINDS: [&str; 7] = [
        "band",
        "all-live",
        "random",
        "model",
        "compiler",
        "even-compiler",
        "cut",
    ];
    let (kind, rest) = spec.split_once(':')?;
    if !KINDS.contains(&kind) {
        return None;
    }
    let usage = || Some(Err(format!("'{spec}': expected one of {GENERATED_SPECS}")));
    let Ok(numbers) = rest
        .split(':')
        .map(str::parse::<u64>)
        .collect::<Result<Vec<u64>, _>>()
    else {
        return usage();
    };
    let count = numbers[0] as usize;
    let seed = numbers.get(1).copied().unwrap_or(DEFAULT_SEED);
    let generated = match (kind, numbers.len()) {
        ("band", 1) => band_trace(count),
        ("all-live", 1 | 2) => all_live_trace(count, seed),
        ("random", 1..=3) => {
            let steps = numbers.get(2).map_or(RANDOM_STEPS, |&steps| steps as u32);
            if steps == 0 {
                return usage();
            }
            random_lifetime_trace_over(count, seed, steps)
        }
        ("model", 1 | 2) => model_like_trace(count, seed),
        ("compiler", 1 | 2) => compiler_trace(count, seed),
        ("even-compiler", 1 | 2) => even_compiler_trace(count, seed),
        ("cut", 1..=3) => {
            let steps = numbers.get(2).map_or(CUT_STEPS, |&steps| steps as u32);
            if steps == 0 {
                return usage();
            }
            rectangle_cut(CUT_WIDTH, steps, count, seed)
        }
        // A generator's name with too many or too few numbers.
        _ => return usage(),
    };
    Some(Ok(generated))
}

fn buffer_of(size: u64, first: u32, last: u32) -> Buffer {
    Buffer {
        size,
        alignment: 1,
        lifetime: Lifetime::new(first, last),
        fixed_offset: FixedOffset::NONE,
    }
}

/// Buffer i lives steps `i mod 1000 ..= i mod 1000 + 5` and holds 16 bytes: every step has
/// about `6 * count / 1000` buffers live, all of one size, in long runs of equal lifetimes.
/// A greedy packer whose fit scans every placed buffer it overlaps in time is quadratic here.
pub fn band_trace(count: usize) -> Vec<Buffer> {
    (0..count)
        .map(|index| {
            let first = (index % 1000) as u32;
            buffer_of(16, first, first + 5)
        })
        .collect()
}

/// `count` buffers all live at every one of 10 steps, sizes uniform in 1..=4096 bytes: the
/// lower bound is their sum and any stacking reaches it; a packer that looks for gaps among
/// everything placed is quadratic here.
pub fn all_live_trace(count: usize, seed: u64) -> Vec<Buffer> {
    let mut random = XorShift64Star::new(seed);
    (0..count)
        .map(|_| buffer_of(1 + random.below(4096), 0, 9))
        .collect()
}

/// `count` buffers with uniformly random starts over 1,000 steps, durations uniform in 1..=100
/// steps (cut at the last step) and sizes uniform in 1..=1000 bytes: many small pieces, so
/// that the lower bound is reachable, and a packing's slack shows.
pub fn random_lifetime_trace(count: usize, seed: u64) -> Vec<Buffer> {
    random_lifetime_trace_over(count, seed, RANDOM_STEPS)
}

/// [`random_lifetime_trace`] over `steps` steps (at least 1): about `50 * count / steps`
/// buffers live at each step. Over as many steps as buffers, about 50 are live at a time and
/// the live bytes come near their peak at a few steps only, as on an allocator's trace of a
/// long run.
pub fn random_lifetime_trace_over(count: usize, seed: u64, steps: u32) -> Vec<Buffer> {
    let steps = u64::from(steps.max(1));
    let mut random = XorShift64Star::new(seed);
    (0..count)
        .map(|_| {
            let first = random.below(steps);
            let last = (first + random.below(100)).min(steps - 1);
            buffer_of(1 + random.below(1000), first as u32, last as u32)
        })
        .collect()
}

/// A training step's trace as ML compilers hand it to their allocators (XLA's heap simulator,
/// MindSpore's SOMAS): a forward pass over `count / 4` steps, then the backward pass mirroring
/// it. A third of the buffers are activations saved in the forward pass at step t and freed
/// when the backward pass reaches it (step about `2T - t`), nested one inside the other over
/// thousands of steps; the rest are temporaries live 1-8 steps, and one in 200 a workspace
/// live up to 64. Sizes are log-uniform from 1 byte to 2^30 bytes and one in a thousand
/// buffers is huge, up to 2^36.5 (about 10^11) bytes; sizes are multiples of 1, 4 or 64
/// bytes in equal shares, alignment 1.
pub fn compiler_trace(count: usize, seed: u64) -> Vec<Buffer> {
    training_trace(count, seed, TrainingSizes::WithHuge)
}

/// [`compiler_trace`]'s shape with sizes log-uniform from 4 KiB to 2 MiB, no huge buffers,
/// and temporaries live up to 64 steps: no single buffer fixes the lower bound, so saved
/// activations and temporaries of like sizes compete for the peak. Greedy packs `compiler:`
/// traces at or within 0.001 % of their bound; these it leaves 0.03-0.6 % above it (3,000
/// buffers: up to 2.5 %; the gap shrinks as traces grow).
pub fn even_compiler_trace(count: usize, seed: u64) -> Vec<Buffer> {
    training_trace(count, seed, TrainingSizes::Even)
}

/// The size distributions of the training-step traces.
#[derive(Clone, Copy)]
enum TrainingSizes {
    /// 1 B to 2^31 B log-uniform, one in a thousand up to 2^37 B.
    WithHuge,
    /// 2^12 B to 2^21 B log-uniform, temporaries live up to 64 steps.
    Even,
}

fn training_trace(count: usize, seed: u64, sizes: TrainingSizes) -> Vec<Buffer> {
    let mut random = XorShift64Star::new(seed);
    let forward = (count as u64 / 4).max(1);
    let steps = 2 * forward;
    (0..count)
        .map(|index| {
            // Buffers are created in step order, four per forward step's worth of ops.
            let first = (index as u64 * steps / count.max(1) as u64).min(steps - 1);
            let duration = if first < forward && random.percent(33) {
                // Saved activation: freed when the backward pass reaches its step.
                2 * (forward - first) + random.below(4)
            } else if random.below(200) == 0 {
                1 + random.below(64)
            } else if matches!(sizes, TrainingSizes::Even) {
                // Temporaries of fused ops and recomputation, live up to 64 steps.
                1 + random.below(64)
            } else {
                1 + random.below(8)
            };
            let last = (first + duration - 1).min(steps - 1);
            let exponent = match sizes {
                TrainingSizes::WithHuge if random.below(1000) == 0 => 30 + random.below(7),
                TrainingSizes::WithHuge => random.below(31),
                TrainingSizes::Even => 12 + random.below(9),
            };
            let size = (1u64 << exponent) + random.below(1u64 << exponent);
            let granule = random.pick(&[1u64, 4, 64]);
            let size = size.div_ceil(granule) * granule;
            buffer_of(size, first as u32, last as u32)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena_lower_bound;

    #[test]
    fn specs_name_the_generators_and_bad_numbers_are_errors() {
        let band = generated_instance("band:3000").unwrap().unwrap();
        assert_eq!(band.len(), 3000);
        assert_eq!(band[1001].lifetime, Lifetime::new(1, 6));
        // Three buffers per start, each live six steps: 18 live at every full step.
        assert_eq!(arena_lower_bound(&band), 18 * 16);
        assert_eq!(generated_instance("cut:40:3").unwrap().unwrap().len(), 40);
        assert!(generated_instance("A.1048576.csv").is_none());
        assert!(generated_instance("C:/models/x.csv").is_none());
        let error = generated_instance("band:many").unwrap().unwrap_err();
        assert!(error.contains("'band:many'"), "{error}");
        assert!(generated_instance("band:10:2").unwrap().is_err());
        assert!(generated_instance("cut:10:1:0").unwrap().is_err());
    }

    #[test]
    fn generators_are_deterministic_and_seeded() {
        for kind in ["all-live", "random", "model", "compiler", "even-compiler"] {
            let one = generated_instance(&format!("{kind}:500:7"))
                .unwrap()
                .unwrap();
            let again = generated_instance(&format!("{kind}:500:7"))
                .unwrap()
                .unwrap();
            let other = generated_instance(&format!("{kind}:500:8"))
                .unwrap()
                .unwrap();
            assert_eq!(one.len(), 500);
            assert_eq!(one, again, "{kind}");
            assert_ne!(one, other, "{kind}");
            assert!(one
                .iter()
                .all(|b| b.size > 0 && b.lifetime.first <= b.lifetime.last));
        }
    }

    #[test]
    fn all_live_bound_is_the_sum_of_sizes() {
        let buffers = all_live_trace(1000, 3);
        let sum: u64 = buffers.iter().map(|b| b.size).sum();
        assert_eq!(arena_lower_bound(&buffers), sum);
    }

    #[test]
    fn compiler_traces_nest_saved_activations_over_thousands_of_steps() {
        let buffers = compiler_trace(20_000, 1);
        let longest = buffers
            .iter()
            .map(|b| b.lifetime.last - b.lifetime.first)
            .max();
        assert!(longest.unwrap() >= 9000, "{longest:?}");
        let short = buffers
            .iter()
            .filter(|b| b.lifetime.last - b.lifetime.first < 8)
            .count();
        assert!(short > buffers.len() / 2, "{short}");
        let largest = buffers.iter().map(|b| b.size).max().unwrap();
        assert!(largest > 1 << 30, "{largest}");
        assert!(buffers.iter().any(|b| b.size < 16));
    }

    #[test]
    fn even_compiler_traces_keep_the_shape_without_huge_buffers() {
        let buffers = even_compiler_trace(20_000, 1);
        let longest = buffers
            .iter()
            .map(|b| b.lifetime.last - b.lifetime.first)
            .max();
        assert!(longest.unwrap() >= 9000, "{longest:?}");
        assert!(buffers.iter().all(|b| (1 << 12..1 << 22).contains(&b.size)));
    }
}
