//! Test and benchmark support (not part of the planner): reads MiniMalloc-style CSV traces
//! straight into packer buffers, so this crate's tests and its `pack_bench` example can run the
//! packing on the shared corpus without the host. The host has the real MiniMalloc reader
//! (with its error reporting); this one only needs the corpus files to work.

use std::path::PathBuf;

use memplan_plugin_api::abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::bounds::{align_up, lower_bound};
use memplan_plugin_api::kit::testing::{memory, tensor, SplitMix64};
use memplan_plugin_api::kit::{Buffer, FixedOffset};
use memplan_plugin_api::{Lifetime, PlanRequest, TensorKind, TensorRequest};

/// Buffers of a CSV with header columns `lower`, `upper` (half-open), `size` and optionally
/// `alignment` and `offset` (fixed), in row order.
pub fn parse_minimalloc_csv(text: &str) -> Result<Vec<Buffer>, String> {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .ok_or("empty file")?
        .split(',')
        .map(str::trim)
        .collect();
    let column = |name: &str| header.iter().position(|&h| h == name);
    let need = |name: &str| column(name).ok_or(format!("no `{name}` column"));
    let (lower, upper, size) = (need("lower")?, need("upper")?, need("size")?);
    let (alignment, offset) = (column("alignment"), column("offset"));
    lines
        .enumerate()
        .map(|(row, line)| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let number = |index: usize| -> Result<u64, String> {
                fields
                    .get(index)
                    .and_then(|field| field.parse().ok())
                    .ok_or(format!("row {}: bad field {}", row + 2, index + 1))
            };
            let optional = |index: Option<usize>| match index {
                Some(index) if fields.get(index).is_some_and(|f| !f.is_empty()) => {
                    number(index).map(Some)
                }
                _ => Ok(None),
            };
            let (first, end) = (number(lower)?, number(upper)?);
            if end <= first {
                return Err(format!("row {}: empty lifetime", row + 2));
            }
            Ok(Buffer {
                size: number(size)?,
                alignment: optional(alignment)?.unwrap_or(1),
                lifetime: Lifetime::new(first as u32, (end - 1) as u32),
                fixed_offset: optional(offset)?.into(),
            })
        })
        .collect()
}

/// A plan request placing `buffers` as intermediate tensors in one unbounded memory.
pub fn single_memory_request(buffers: &[Buffer]) -> PlanRequest {
    let tensors: Vec<TensorRequest> = buffers
        .iter()
        .enumerate()
        .map(|(index, buffer)| {
            let (first, last) = (buffer.lifetime.first, buffer.lifetime.last);
            let kind = TensorKind::Intermediate;
            TensorRequest {
                alignment: buffer.alignment,
                fixed_offset: buffer.fixed_offset.get().into(),
                ..tensor(&index.to_string(), kind, buffer.size, first, last)
            }
        })
        .collect();
    PlanRequest {
        num_steps: buffers
            .iter()
            .map(|b| b.lifetime.last + 1)
            .max()
            .unwrap_or(0),
        tensors: RVec::from(tensors),
        memories: RVec::from(vec![memory("SRAM", None, true, Some(0))]),
        options: RString::from("{}"),
    }
}

/// A trace shaped like a model graph, the same for the same `count` and `seed`: two tensors
/// produced per op step; most consumed by the next op or the one after (90%), some by a
/// later op (9%, up to 16 steps: residual and concat inputs), a few much later (1%, up to 256
/// steps: skip connections), and four live the whole run (graph inputs and outputs). Sizes
/// log-uniform from 16 B to 128 KiB, in multiples of 16, alignment 16.
pub fn model_like_trace(count: usize, seed: u64) -> Vec<Buffer> {
    let mut random = SplitMix64::new(seed);
    let steps = (count / 2).max(1) as u32;
    (0..count)
        .map(|index| {
            let first = (index / 2) as u32;
            let duration = match random.below(100) {
                0..90 => 1 + random.below(2),
                90..99 => 3 + random.below(14),
                _ => 17 + random.below(240),
            } as u32;
            let lifetime = if index < 4 {
                Lifetime::new(0, steps - 1)
            } else {
                Lifetime::new(first, (first + duration - 1).min(steps - 1))
            };
            let exponent = 4 + random.below(13);
            let size = align_up((1u64 << exponent) + random.below(1u64 << exponent), 16);
            Buffer {
                size,
                alignment: 16,
                lifetime,
                fixed_offset: FixedOffset::NONE,
            }
        })
        .collect()
}

/// `buffers` as a MiniMalloc CSV (`id,lower,upper,size,alignment`, half-open lifetimes),
/// which `memplan` reads; fixed offsets are not written.
pub fn minimalloc_csv(buffers: &[Buffer]) -> String {
    let mut text = String::from("id,lower,upper,size,alignment\n");
    for (index, buffer) in buffers.iter().enumerate() {
        let (first, last) = (buffer.lifetime.first, buffer.lifetime.last);
        let line = format!(
            "{index},{first},{},{},{}\n",
            last + 1,
            buffer.size,
            buffer.alignment
        );
        text.push_str(&line);
    }
    text
}

/// The lower bound of one arena holding `buffers`, each size rounded to its alignment (the
/// figure `memplan bench` prints beside a height).
pub fn aligned_lower_bound(buffers: &[Buffer]) -> u64 {
    lower_bound(
        buffers
            .iter()
            .map(|b| (align_up(b.size, b.alignment), b.lifetime)),
    )
}

/// `$MEMPLAN_CORPUS/sub`, when `MEMPLAN_CORPUS` is set (panics if it is set but the folder is
/// missing: corpus tests must not skip silently then).
pub fn corpus_dir(sub: &str) -> Option<PathBuf> {
    let root = PathBuf::from(std::env::var_os("MEMPLAN_CORPUS")?);
    let dir = root.join(sub);
    assert!(
        dir.is_dir(),
        "MEMPLAN_CORPUS: {} is not a directory",
        dir.display()
    );
    Some(dir)
}

/// Reads and parses one corpus file.
pub fn read_buffers(path: &std::path::Path) -> Vec<Buffer> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    parse_minimalloc_csv(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_open_lifetimes_become_inclusive_and_optional_columns_are_read() {
        let buffers = parse_minimalloc_csv(
            "id,lower,upper,size,alignment,offset\nx,2,5,10,8,\ny,0,1,3,,16\n",
        )
        .unwrap();
        assert_eq!(buffers[0].lifetime, Lifetime::new(2, 4));
        assert_eq!(
            (buffers[0].alignment, buffers[0].fixed_offset.get()),
            (8, None)
        );
        assert_eq!(
            (buffers[1].alignment, buffers[1].fixed_offset.get()),
            (1, Some(16))
        );
        assert!(parse_minimalloc_csv("id,lower,size\n").is_err());
        assert!(parse_minimalloc_csv("id,lower,upper,size\n0,3,3,1\n").is_err());
    }

    #[test]
    fn generated_traces_round_trip_through_csv() {
        let trace = model_like_trace(1000, 3);
        assert_eq!(trace, model_like_trace(1000, 3));
        assert_eq!(
            parse_minimalloc_csv(&minimalloc_csv(&trace)).unwrap(),
            trace
        );
        let short = trace.iter().filter(|b| b.lifetime.duration() <= 2).count();
        assert!(
            (850..950).contains(&short),
            "{short} of 1000 live at most 2 steps"
        );
    }
}
