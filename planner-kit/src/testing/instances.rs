//! Instances for planner tests and benchmarks: generated ones (a model-like trace, guillotine
//! cuts with a known optimum), the shared corpus's location, and conversions between packer
//! buffers, plan requests and MiniMalloc CSV files (through `memplan-minimalloc`, the reader
//! and writer the host uses too).

use std::path::{Path, PathBuf};

use memplan_plugin_api::abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::bounds::align_up;
use memplan_plugin_api::{Lifetime, PlanRequest, TensorKind, TensorRequest};

use super::{buffer, memory, tensor};
use crate::{Buffer, FixedOffset, XorShift64Star};

/// The `.csv` files in `dir`, sorted by path (panics naming `dir` when it cannot be read).
pub fn csv_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "csv"))
        .collect();
    files.sort();
    files
}

/// The buffers of the MiniMalloc CSV at `path` (a missing alignment is 1); the error names
/// the file and line.
pub fn read_minimalloc(path: &Path) -> Result<Vec<Buffer>, String> {
    let file = path.display();
    let rows = memplan_minimalloc::read_file(path)?;
    rows.into_iter()
        .map(|row| {
            let last = u32::try_from(row.upper - 1).map_err(|_| {
                format!(
                    "{file}: buffer '{}': upper {} is past 2^32",
                    row.id, row.upper
                )
            })?;
            if row.offset == Some(u64::MAX) {
                return Err(format!(
                    "{file}: buffer '{}': offset {} is past 64 bits",
                    row.id,
                    u64::MAX
                ));
            }
            Ok(Buffer {
                size: row.size,
                alignment: row.alignment.unwrap_or(1).max(1),
                // `lower < upper`: the format's rule.
                lifetime: Lifetime::new(row.lower as u32, last),
                fixed_offset: row.offset.into(),
            })
        })
        .collect()
}

/// TFLite Micro's `greedy_medium` planner test trace (sizes with inclusive lifetimes): its
/// greedy planner, first fit by decreasing size, needs 90 bytes.
pub fn tflm_greedy_medium() -> Vec<Buffer> {
    vec![
        buffer(10, 0, 1),
        buffer(20, 1, 2),
        buffer(30, 2, 3),
        buffer(40, 3, 4),
        buffer(50, 0, 1),
    ]
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
    let mut random = XorShift64Star::new(seed);
    // One step per two buffers, the last one alone when `count` is odd.
    let steps = count.div_ceil(2).max(1) as u32;
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

/// `buffers` as a MiniMalloc CSV (`id,lower,upper,size,alignment`, half-open lifetimes,
/// ids their indices), which `memplan` reads; fixed offsets are not written.
pub fn minimalloc_csv(buffers: &[Buffer]) -> String {
    memplan_minimalloc::write_problem(buffers.iter().enumerate().map(|(index, buffer)| {
        let (first, last) = (buffer.lifetime.first, buffer.lifetime.last);
        (
            index,
            u64::from(first),
            u64::from(last) + 1,
            buffer.size,
            buffer.alignment,
        )
    }))
}

/// The shared corpus, `$MEMPLAN_CORPUS`, when it is set (panics if it is set but is not a
/// folder: corpus tests must not skip silently then). The one reading of the variable for
/// every crate's tests.
pub fn corpus_root() -> Option<PathBuf> {
    let root = PathBuf::from(std::env::var_os("MEMPLAN_CORPUS")?);
    assert!(
        root.is_dir(),
        "MEMPLAN_CORPUS={} is not a directory{}",
        root.display(),
        if root.is_relative() {
            " (tests run in their own crate's folder, so a relative path is read from there: \
             give an absolute one, e.g. MEMPLAN_CORPUS=$PWD/../shared/data from the workspace \
             root)"
        } else {
            ""
        }
    );
    Some(root)
}

/// `$MEMPLAN_CORPUS/sub`, when `MEMPLAN_CORPUS` is set (panics if it is set but the folder is
/// missing: corpus tests must not skip silently then).
pub fn corpus_dir(sub: &str) -> Option<PathBuf> {
    let dir = corpus_root()?.join(sub);
    assert!(
        dir.is_dir(),
        "MEMPLAN_CORPUS: {} is not a directory",
        dir.display()
    );
    Some(dir)
}

/// `tflm_head` of the corpus's `models/README.md`: the arena head TFLite Micro plans for each
/// model (bytes, measured with TFLite Micro), its kernels' scratch buffers included. memplan's
/// simulation of TFLite Micro's planner must reproduce it, and its planners match or beat it.
pub const TFLM_HEAD: [(&str, u64); 8] = [
    ("hello_world_float.tflite", 128),
    ("hello_world_int8.tflite", 32),
    ("micro_speech_quantized.tflite", 5968),
    ("person_detect.tflite", 55296),
    ("keyword_scrambled.tflite", 672),
    ("simple_add_model.tflite", 49152),
    ("kws_ref_model.tflite", 16000),
    ("vww_96_int8.tflite", 73728),
];

#[derive(Clone, Copy)]
struct Piece {
    bytes: (u64, u64),
    steps: (u32, u32),
}

/// `pieces` buffers tiling a `width` x `steps` rectangle (bytes x steps), cut by seeded
/// random guillotine cuts. Fewer pieces come back only if no piece can be cut further.
pub fn rectangle_cut(width: u64, steps: u32, pieces: usize, seed: u64) -> Vec<Buffer> {
    let mut random = XorShift64Star::new(seed);
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
    fn generated_traces_are_seeded_and_model_like() {
        let trace = model_like_trace(1000, 3);
        assert_eq!(trace, model_like_trace(1000, 3));
        let short = trace.iter().filter(|b| b.lifetime.duration() <= 2).count();
        assert!(
            (850..950).contains(&short),
            "{short} of 1000 live at most 2 steps"
        );
        let text = minimalloc_csv(&trace[..2]);
        let first = &trace[0];
        assert!(
            text.starts_with("id,lower,upper,size,alignment\n0,"),
            "{text}"
        );
        assert!(
            text.contains(&format!(",{},{},16\n", first.lifetime.last + 1, first.size)),
            "{text}"
        );
    }

    #[test]
    fn written_buffers_read_back_the_same_with_alignment_at_least_one() {
        let mut buffers = model_like_trace(50, 7);
        buffers[3].alignment = 1;
        let dir = std::env::temp_dir().join(format!("memplan-kit-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.csv");
        std::fs::write(&path, minimalloc_csv(&buffers)).unwrap();
        let read = read_minimalloc(&path);
        std::fs::write(&path, "id,lower,upper,size\nx,2,5,10\n").unwrap();
        let bare = read_minimalloc(&path);
        std::fs::write(&path, "id,lower,upper,size\nx,2,2,10\n").unwrap();
        let bad = read_minimalloc(&path);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(read.unwrap(), buffers);
        assert_eq!(bare.unwrap(), [buffer(10, 2, 4)]);
        let error = bad.unwrap_err();
        assert!(error.ends_with("trace.csv:2: buffer 'x': lower 2 must be below upper 2 (the lifetime [lower, upper) is half-open)"), "{error}");
    }
}
