//! The per-buffer record placement reads ([`Item`]), the word it stores sizes in ([`Word`]),
//! and the slots the time index keeps ([`Slot`]).

use std::ops::RangeInclusive;

use super::SHORT_SPAN;
use crate::Buffer;

/// What sorting and placing one buffer need, in one record, so that placement reads the
/// records of a window one after the other instead of reaching into several arrays.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Item<W> {
    pub(super) size: W,
    pub(super) alignment: W,
    pub(super) index: u32,
    /// Duration in steps (for the orders).
    pub(super) duration: u32,
    /// Span in points, inclusive.
    pub(super) lo: u32,
    pub(super) hi: u32,
}

impl<W: Word> Item<W> {
    /// The record of `buffer`, whose size and alignment fit in `W`.
    pub(super) fn new(index: usize, buffer: &Buffer, (lo, hi): (u32, u32)) -> Item<W> {
        Item {
            size: W::narrow(buffer.size),
            alignment: W::narrow(buffer.alignment),
            index: index as u32,
            duration: buffer.lifetime.duration(),
            lo,
            hi,
        }
    }

    #[inline]
    pub(super) fn size(&self) -> u64 {
        self.size.widen()
    }

    #[inline]
    pub(super) fn alignment(&self) -> u64 {
        self.alignment.widen()
    }

    #[inline]
    pub(super) fn is_short(&self) -> bool {
        self.hi - self.lo < SHORT_SPAN
    }

    /// Points whose lists record this buffer once placed.
    #[inline]
    pub(super) fn listed_at(&self) -> RangeInclusive<u32> {
        if self.is_short() {
            self.lo..=self.hi
        } else {
            self.lo..=self.lo
        }
    }
}

/// The integer the records and the time index store sizes and byte offsets in: `u32` while
/// they fit, which halves the memory placement reads, else `u64`.
pub(super) trait Word: Copy + Default + Ord + std::fmt::Debug {
    fn fits(value: u64) -> bool;
    /// `value`, which the caller has checked [`Word::fits`].
    fn narrow(value: u64) -> Self;
    fn widen(self) -> u64;
}

impl Word for u32 {
    fn fits(value: u64) -> bool {
        value <= u64::from(u32::MAX)
    }

    fn narrow(value: u64) -> u32 {
        debug_assert!(u32::fits(value));
        value as u32
    }

    fn widen(self) -> u64 {
        u64::from(self)
    }
}

impl Word for u64 {
    fn fits(_: u64) -> bool {
        true
    }

    fn narrow(value: u64) -> u64 {
        value
    }

    fn widen(self) -> u64 {
        self
    }
}

/// An entry of [`Lists`]: a placed buffer's bytes, or a free place. A placed buffer ends
/// above 0 (empty buffers are never recorded), so `end == 0` marks a free place.
pub(super) trait Slot: Copy + Default {
    fn is_free(&self) -> bool;
}

/// A placed buffer's bytes, `offset..end`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Bytes<W> {
    pub(super) offset: W,
    pub(super) end: W,
}

impl<W: Word> Bytes<W> {
    pub(super) fn new(offset: u64, end: u64) -> Bytes<W> {
        Bytes {
            offset: W::narrow(offset),
            end: W::narrow(end),
        }
    }

    #[inline]
    pub(super) fn widen(self) -> (u64, u64) {
        (self.offset.widen(), self.end.widen())
    }
}

impl<W: Word> Slot for Bytes<W> {
    fn is_free(&self) -> bool {
        self.end.widen() == 0
    }
}

/// A placed long buffer in the tree: its bytes and its span.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LongSlot<W> {
    pub(super) bytes: Bytes<W>,
    pub(super) lo: u32,
    pub(super) hi: u32,
}

impl<W: Word> Slot for LongSlot<W> {
    fn is_free(&self) -> bool {
        self.bytes.is_free()
    }
}
