//! Test and benchmark support: instances with a known optimum, and the MiniMalloc CSV format.
//!
//! - [`rectangle_cut`] cuts a `width` (bytes) x `steps` rectangle into pieces by random
//!   guillotine cuts. The pieces tile the rectangle, so the peak liveness is `width` in every
//!   step and the rectangle itself is a packing of that height: the optimum is `width`, equal
//!   to the lower bound.
//! - [`read_minimalloc_csv`] reads `id,lower,upper,size[,alignment][,offset]...` rows with
//!   half-open lifetimes `[lower, upper)`, made inclusive (`last = upper - 1`).

use memplan_plugin_api::kit::Buffer;
use memplan_plugin_api::Lifetime;

/// A buffer of `size` bytes live from step `first` to `last` (inclusive), alignment 1: the
/// kit's test helper, re-exported for this crate's tests.
pub use memplan_plugin_api::kit::testing::buffer;

/// A tiny deterministic PRNG (xorshift64*), enough for generating instances.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        // A zero state would stay zero; mix the seed so that small seeds differ a lot.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..bound` (`bound > 0`; the modulo bias is irrelevant here).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

#[derive(Clone, Copy)]
struct Piece {
    bytes: (u64, u64),
    steps: (u32, u32),
}

/// `pieces` buffers tiling a `width` x `steps` rectangle (bytes x steps), cut by seeded
/// random guillotine cuts. Fewer pieces come back only if no piece can be cut further.
pub fn rectangle_cut(width: u64, steps: u32, pieces: usize, seed: u64) -> Vec<Buffer> {
    let mut random = XorShift::new(seed);
    let mut done: Vec<Piece> = vec![Piece {
        bytes: (0, width),
        steps: (0, steps - 1),
    }];
    let mut stuck = 0;
    while done.len() < pieces && stuck < 1000 {
        let index = random.below(done.len() as u64) as usize;
        let piece = done[index];
        let height = piece.bytes.1 - piece.bytes.0;
        let length = piece.steps.1 - piece.steps.0 + 1;
        let cut_bytes = random.below(2) == 0;
        let (first, second) = if cut_bytes && height >= 2 {
            let at = piece.bytes.0 + 1 + random.below(height - 1);
            (
                Piece {
                    bytes: (piece.bytes.0, at),
                    ..piece
                },
                Piece {
                    bytes: (at, piece.bytes.1),
                    ..piece
                },
            )
        } else if !cut_bytes && length >= 2 {
            let at = piece.steps.0 + random.below(u64::from(length - 1)) as u32;
            (
                Piece {
                    steps: (piece.steps.0, at),
                    ..piece
                },
                Piece {
                    steps: (at + 1, piece.steps.1),
                    ..piece
                },
            )
        } else {
            stuck += 1;
            continue;
        };
        stuck = 0;
        done[index] = first;
        done.push(second);
    }
    done.iter()
        .map(|piece| buffer(piece.bytes.1 - piece.bytes.0, piece.steps.0, piece.steps.1))
        .collect()
}

/// Parses a MiniMalloc CSV (header required). Errors name the line.
pub fn read_minimalloc_csv(text: &str) -> Result<Vec<Buffer>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty());
    let (_, header) = lines.next().ok_or("empty file: expected a header line")?;
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let find = |name: &str| columns.iter().position(|column| *column == name);
    let (lower, upper, size) = match (find("lower"), find("upper"), find("size")) {
        (Some(lower), Some(upper), Some(size)) => (lower, upper, size),
        _ => {
            return Err(format!(
                "line 1: header `{header}` lacks lower, upper or size"
            ))
        }
    };
    let (alignment, offset) = (find("alignment"), find("offset"));
    lines
        .map(|(number, line)| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let field = |index: usize| -> Result<u64, String> {
                fields
                    .get(index)
                    .and_then(|text| text.parse().ok())
                    .ok_or_else(|| {
                        format!("line {}: field {} is not a number", number + 1, index + 1)
                    })
            };
            let (first, end) = (field(lower)?, field(upper)?);
            if end <= first || end > u64::from(u32::MAX) {
                return Err(format!(
                    "line {}: lifetime [{first}, {end}) is empty or too long",
                    number + 1
                ));
            }
            Ok(Buffer {
                size: field(size)?,
                alignment: alignment.map(field).transpose()?.unwrap_or(1).max(1),
                lifetime: Lifetime::new(first as u32, (end - 1) as u32),
                fixed_offset: offset.map(field).transpose()?.into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_plugin_api::bounds::lower_bound;

    #[test]
    fn cut_pieces_tile_the_rectangle() {
        let buffers = rectangle_cut(1000, 50, 40, 3);
        assert_eq!(buffers.len(), 40);
        let area: u64 = buffers
            .iter()
            .map(|buffer| buffer.size * u64::from(buffer.lifetime.duration()))
            .sum();
        assert_eq!(area, 1000 * 50);
        assert_eq!(
            lower_bound(buffers.iter().map(|buffer| (buffer.size, buffer.lifetime))),
            1000
        );
    }

    #[test]
    fn reads_half_open_lifetimes_as_inclusive() {
        let buffers =
            read_minimalloc_csv("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n").expect("valid");
        assert_eq!(buffers[0].lifetime, Lifetime::new(0, 2));
        assert_eq!(buffers[1].lifetime, Lifetime::new(3, 8));
        assert_eq!(buffers[1].size, 4);
        let error = read_minimalloc_csv("id,lower,upper,size\nb1,0,x,4\n").unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
    }
}
