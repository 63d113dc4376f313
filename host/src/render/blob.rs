//! Packing a constant arena into one blob: `size` zero bytes with each constant's bytes at its
//! offset. Aliases (views of another constant) and empty tensors have no bytes of their own
//! and are skipped. The blob is described as a run of segments (tensor or padding) covering
//! it exactly, which the emitted C comments and the layout picture follow.

use crate::error::{Error, Result};

/// One stretch of a constant blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// The bytes of tensor `tensor` (index into the rendered tensors).
    Tensor {
        tensor: usize,
        offset: u64,
        size: u64,
    },
    /// Bytes no tensor owns (alignment gaps, the arena's tail): zero.
    Padding { offset: u64, size: u64 },
}

/// A constant arena's packed bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstantPayload {
    /// C symbol of the payload array: `{arena}__blob` (cold) or `{arena}__source` (staged).
    pub symbol: String,
    /// Sidecar file name written with `--external-arenas`: the symbol plus `.bin`.
    pub sidecar: String,
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes` (64 hex digits): what firmware compares with the flashed array or
    /// sidecar, since the plan hashes cover placements, not contents.
    pub sha256: String,
    /// Tensors and padding, by offset, covering `bytes` exactly.
    pub segments: Vec<Segment>,
}

/// One constant placed in the arena.
pub struct PlacedConstant<'a> {
    pub tensor: usize,
    pub id: &'a str,
    pub offset: u64,
    pub size: u64,
    /// The tensor's bytes, `None` when the model carries none (the blob keeps zeros there).
    pub data: Option<&'a [u8]>,
}

/// Packs `constants` (no aliases, no empty tensors) into an arena of `arena_size` bytes.
pub fn pack(
    arena_size: u64,
    mut constants: Vec<PlacedConstant<'_>>,
) -> Result<(Vec<u8>, Vec<Segment>)> {
    let length = usize::try_from(arena_size).map_err(|_| {
        Error::input(format!(
            "a constant arena of {arena_size} bytes does not fit in this host's memory"
        ))
    })?;
    let mut bytes = vec![0u8; length];
    let mut segments = Vec::with_capacity(constants.len() * 2 + 1);
    constants.sort_by_key(|constant| (constant.offset, constant.tensor));
    let mut cursor = 0u64;
    for constant in &constants {
        let end = constant
            .offset
            .checked_add(constant.size)
            .filter(|&end| end <= arena_size);
        let Some(end) = end else {
            return Err(Error::internal(format!(
                "constant tensor `{}` at offset {} ({} bytes) lies outside its {arena_size}-byte \
                 arena, which the checker should have rejected",
                constant.id, constant.offset, constant.size
            )));
        };
        if constant.offset < cursor {
            return Err(Error::internal(format!(
                "constant tensor `{}` at offset {} overlaps the constant before it, which the \
                 checker should have rejected",
                constant.id, constant.offset
            )));
        }
        if let Some(data) = constant.data {
            if data.len() as u64 != constant.size {
                return Err(Error::input(format!(
                    "constant tensor `{}` has {} bytes of data but a size of {} bytes; fix the \
                     model so that its data matches its shape and type",
                    constant.id,
                    data.len(),
                    constant.size
                )));
            }
            // In range: end <= arena_size, which fits usize.
            bytes[constant.offset as usize..end as usize].copy_from_slice(data);
        }
        if constant.offset > cursor {
            segments.push(Segment::Padding {
                offset: cursor,
                size: constant.offset - cursor,
            });
        }
        segments.push(Segment::Tensor {
            tensor: constant.tensor,
            offset: constant.offset,
            size: constant.size,
        });
        cursor = end;
    }
    if cursor < arena_size {
        segments.push(Segment::Padding {
            offset: cursor,
            size: arena_size - cursor,
        });
    }
    Ok((bytes, segments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constant<'a>(tensor: usize, offset: u64, data: &'a [u8]) -> PlacedConstant<'a> {
        PlacedConstant {
            tensor,
            id: "c",
            offset,
            size: data.len() as u64,
            data: Some(data),
        }
    }

    #[test]
    fn places_bytes_at_offsets_and_zero_fills_the_rest() {
        let (bytes, segments) = pack(
            12,
            vec![constant(1, 4, &[7, 8, 9]), constant(0, 0, &[1, 2])],
        )
        .unwrap();
        assert_eq!(bytes, [1, 2, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0]);
        assert_eq!(
            segments,
            [
                Segment::Tensor {
                    tensor: 0,
                    offset: 0,
                    size: 2
                },
                Segment::Padding { offset: 2, size: 2 },
                Segment::Tensor {
                    tensor: 1,
                    offset: 4,
                    size: 3
                },
                Segment::Padding { offset: 7, size: 5 },
            ]
        );
    }

    #[test]
    fn a_constant_without_data_stays_zero() {
        let placed = PlacedConstant {
            tensor: 0,
            id: "w",
            offset: 0,
            size: 4,
            data: None,
        };
        let (bytes, segments) = pack(4, vec![placed]).unwrap();
        assert_eq!(bytes, [0; 4]);
        assert_eq!(
            segments,
            [Segment::Tensor {
                tensor: 0,
                offset: 0,
                size: 4
            }]
        );
    }

    #[test]
    fn rejects_data_of_the_wrong_length_and_overlaps() {
        let short = PlacedConstant {
            tensor: 0,
            id: "w",
            offset: 0,
            size: 4,
            data: Some(&[1, 2]),
        };
        let error = pack(8, vec![short]).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Input);
        assert!(error.message.contains("`w`"));
        let error = pack(8, vec![constant(0, 0, &[1; 4]), constant(1, 2, &[2; 4])]).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Internal);
        assert!(pack(4, vec![constant(0, 2, &[1; 4])]).is_err());
    }
}
