//! The binary form of a worker's reply on the pipe from memplan's `--isolate` child. Both ends
//! are the same memplan executable, so the form is private to it and may change with any
//! release.
//!
//! Why not JSON: at a million tensors the plan is tens of megabytes, and JSON made `--isolate`
//! several times slower than planning in-process. Here fields are little-endian words or
//! LEB128 numbers and strings a length and bytes. Allocations, the bulk, are written as what
//! differs from the allocation before: a plan's allocations mostly follow each other's
//! tensor, share an arena and have the two offsets equal, so a million of them take about
//! 6 MB instead of 37 MB of fixed-size records, and the bytes to write, send and read are
//! what `--isolate` cost at scale. (The request needs no form: the child is forked holding
//! it.)
//!
//! The reply comes from a process running a plugin, which may have been damaged by it:
//! decoding checks every length against what is left, every tag and every enum value, and
//! fails with an error, never a panic.

use abi_stable::std_types::{RString, RVec};
use memplan_plugin_api::{
    Allocation, Arena, ArenaRole, Binding, MemoryPlan, PlanError, PlanErrorKind,
};

use super::{Violation, WorkerReply};

/// First bytes of a reply.
const REPLY_MAGIC: &[u8; 8] = b"MPLNREP2";

/// Why bytes are not a request or a reply.
#[derive(Debug, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Decoded<T> = Result<T, WireError>;

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn count(&mut self, count: usize) {
        self.u64(count as u64);
    }
    fn str(&mut self, text: &str) {
        self.count(text.len());
        self.0.extend_from_slice(text.as_bytes());
    }
    /// LEB128: seven bits per byte, low bits first, the top bit set on all but the last.
    fn number(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push(value as u8 | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    #[inline(always)]
    fn take(&mut self, len: usize) -> Decoded<&'a [u8]> {
        if len > self.bytes.len() {
            return Err(WireError(format!(
                "{len} bytes expected, {} left",
                self.bytes.len()
            )));
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(taken)
    }
    #[inline(always)]
    fn u8(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Decoded<u32> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
    fn u64(&mut self) -> Decoded<u64> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }
    /// A count of records of at least `record_bytes` each, checked against what is left so
    /// that a damaged count cannot make the reader reserve absurd memory.
    fn count(&mut self, record_bytes: usize) -> Decoded<usize> {
        let count = self.u64()?;
        match usize::try_from(count) {
            Ok(count) if count.saturating_mul(record_bytes) <= self.bytes.len() => Ok(count),
            _ => Err(WireError(format!(
                "a count of {count} records, more than the {} bytes left can hold",
                self.bytes.len()
            ))),
        }
    }
    /// A LEB128 number ([`Writer::number`]); more than 64 bits is an error.
    #[inline(always)]
    fn number(&mut self) -> Decoded<u64> {
        // Most numbers of a plan fit in one, two or three bytes: read without the loop.
        match *self.bytes {
            [first, ref rest @ ..] if first < 0x80 => {
                self.bytes = rest;
                return Ok(first.into());
            }
            [first, second, ref rest @ ..] if second < 0x80 => {
                self.bytes = rest;
                return Ok(u64::from(first & 0x7f) | u64::from(second) << 7);
            }
            [first, second, third, ref rest @ ..] if third < 0x80 => {
                self.bytes = rest;
                return Ok(u64::from(first & 0x7f)
                    | u64::from(second & 0x7f) << 7
                    | u64::from(third) << 14);
            }
            _ => {}
        }
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError("a number of more than 64 bits".into()))
    }
    fn number_u32(&mut self) -> Decoded<u32> {
        let value = self.number()?;
        u32::try_from(value).map_err(|_| WireError(format!("{value} where a 32-bit number goes")))
    }
    fn str(&mut self) -> Decoded<&'a str> {
        let len = self.count(1)?;
        std::str::from_utf8(self.take(len)?)
            .map_err(|_| WireError("a string that is not UTF-8".into()))
    }
    fn magic(&mut self, magic: &[u8; 8], what: &str) -> Decoded<()> {
        if self.take(8).ok() == Some(&magic[..]) {
            Ok(())
        } else {
            Err(WireError(format!("not a memplan {what}")))
        }
    }
    fn end(&self) -> Decoded<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(WireError(format!(
                "{} bytes after the end",
                self.bytes.len()
            )))
        }
    }
}

fn role_code(role: ArenaRole) -> u8 {
    match role {
        ArenaRole::Scratch => 0,
        ArenaRole::Persistent => 1,
        ArenaRole::Constant => 2,
    }
}

fn role_of(code: u8) -> Decoded<ArenaRole> {
    Ok(match code {
        0 => ArenaRole::Scratch,
        1 => ArenaRole::Persistent,
        2 => ArenaRole::Constant,
        other => return Err(WireError(format!("arena role {other}"))),
    })
}

fn error_kind_code(kind: PlanErrorKind) -> u8 {
    match kind {
        PlanErrorKind::DoesNotFit => 0,
        PlanErrorKind::InvalidRequest => 1,
        PlanErrorKind::Cancelled => 2,
        PlanErrorKind::Panicked => 3,
        PlanErrorKind::Failed => 4,
    }
}

fn error_kind_of(code: u8) -> Decoded<PlanErrorKind> {
    Ok(match code {
        0 => PlanErrorKind::DoesNotFit,
        1 => PlanErrorKind::InvalidRequest,
        2 => PlanErrorKind::Cancelled,
        3 => PlanErrorKind::Panicked,
        4 => PlanErrorKind::Failed,
        other => return Err(WireError(format!("plan error kind {other}"))),
    })
}

/// What an allocation is written against: the one before it (its tensor and its arena as
/// role code, memory, source memory).
#[derive(Clone, Copy)]
struct AllocationContext {
    tensor: u32,
    arena: (u8, u32, u32),
}

impl AllocationContext {
    /// Before the first allocation: as if tensor -1 had been allocated in no arena, so the
    /// first allocation of tensor 0 is "the next tensor" and its arena is written.
    const FIRST: AllocationContext = AllocationContext {
        tensor: u32::MAX,
        arena: (u8::MAX, u32::MAX, u32::MAX),
    };
}

/// An allocation's flags: its tensor is the one after the previous allocation's; ...
const NEXT_TENSOR: u8 = 1;
/// ... its arena (role, memory, source memory) is the previous allocation's; ...
const SAME_ARENA: u8 = 2;
/// ... its offset in the arena equals its binding's offset. What a flag says is not written.
const SAME_OFFSETS: u8 = 4;

/// The reply in binary form.
#[cfg(test)]
pub fn encode_reply(reply: &WorkerReply) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing into a vector cannot fail.
    write_reply(reply, &mut bytes).map_or_else(|_| Vec::new(), |()| bytes)
}

/// Bytes of a reply written before they go out: a megabyte.
const WRITE_CHUNK: usize = 1 << 20;

/// Writes the reply in binary form to `sink` a megabyte at a time, so that the reader
/// reads (and the pipe carries) one part while the next is encoded, and a large plan is
/// never held twice.
pub fn write_reply(reply: &WorkerReply, sink: &mut impl std::io::Write) -> std::io::Result<()> {
    // Room for the reply, up to a chunk and what one allocation or the summary adds past it:
    // a small model's worker does not touch a megabyte it never fills.
    let expected = match reply {
        WorkerReply::Plan(plan) => plan.allocations.len() * 8 + plan.arenas.len() * 25,
        _ => 0,
    };
    let mut out = Writer(Vec::with_capacity(expected.min(WRITE_CHUNK) + 4096));
    out.0.extend_from_slice(REPLY_MAGIC);
    match reply {
        WorkerReply::Plan(plan) => {
            out.u8(0);
            out.count(plan.arenas.len());
            for arena in plan.arenas.iter() {
                out.u8(role_code(arena.role));
                out.u32(arena.memory);
                out.u32(arena.source_memory);
                out.u64(arena.size);
                out.u64(arena.alignment);
            }
            out.count(plan.allocations.len());
            let mut previous = AllocationContext::FIRST;
            for allocation in plan.allocations.iter() {
                let binding = &allocation.binding;
                let arena = (
                    role_code(binding.role),
                    binding.memory,
                    binding.source_memory,
                );
                let next_tensor = previous.tensor.wrapping_add(1) == allocation.tensor;
                let same_arena = arena == previous.arena;
                let same_offsets = binding.offset == allocation.offset;
                let flag = |set: bool, flag: u8| if set { flag } else { 0 };
                out.u8(flag(next_tensor, NEXT_TENSOR)
                    | flag(same_arena, SAME_ARENA)
                    | flag(same_offsets, SAME_OFFSETS));
                if !next_tensor {
                    out.number(allocation.tensor.into());
                }
                if !same_arena {
                    out.u8(arena.0);
                    out.number(arena.1.into());
                    out.number(arena.2.into());
                }
                out.number(allocation.offset);
                if !same_offsets {
                    out.number(binding.offset);
                }
                out.number(allocation.size);
                previous = AllocationContext {
                    tensor: allocation.tensor,
                    arena,
                };
                if out.0.len() >= WRITE_CHUNK {
                    sink.write_all(&out.0)?;
                    out.0.clear();
                }
            }
            out.str(&plan.summary);
        }
        WorkerReply::Error(error) => {
            out.u8(1);
            out.u8(error_kind_code(error.kind));
            out.str(&error.message);
        }
        WorkerReply::Failed { exit_code, message } => {
            out.u8(2);
            out.u8(*exit_code);
            out.str(message);
        }
        // Its own fixed form, magic included.
        WorkerReply::Violation(violation) => return sink.write_all(&encode_violation(violation)),
    }
    sink.write_all(&out.0)
}

/// The bytes of a [`WorkerReply::Violation`], built without allocating: the sandbox's signal
/// handler writes them.
pub fn encode_violation(violation: &Violation) -> [u8; VIOLATION_BYTES] {
    let mut bytes = [0u8; VIOLATION_BYTES];
    bytes[..8].copy_from_slice(REPLY_MAGIC);
    bytes[8] = 3;
    bytes[9..13].copy_from_slice(&violation.syscall.to_le_bytes());
    bytes[13..21].copy_from_slice(&violation.args[0].to_le_bytes());
    bytes[21..29].copy_from_slice(&violation.args[1].to_le_bytes());
    bytes
}

/// Magic, kind, system call number, two arguments.
pub const VIOLATION_BYTES: usize = 8 + 1 + 4 + 8 + 8;

/// Room for the allocations of a reply, its memory already written once: a new vector of a
/// million allocations is 40 MB of pages the kernel hands out on first touch (about 20 ms
/// here), which the host can pay while the worker plans instead of after.
pub struct AllocationRoom(RVec<Allocation>);

impl AllocationRoom {
    /// No room made: decoding allocates what it needs.
    pub fn none() -> Self {
        AllocationRoom(RVec::new())
    }

    /// Room for `count` allocations, every page of it touched.
    pub fn prepared(count: usize) -> Self {
        let mut allocations: RVec<Allocation> = RVec::with_capacity(count);
        // SAFETY: the capacity holds `count` allocations; writing bytes into it creates no
        // value (the length stays 0), so nothing is read or dropped as an Allocation.
        unsafe { std::ptr::write_bytes(allocations.as_mut_ptr(), 0, count) };
        AllocationRoom(allocations)
    }
}

/// A reply from its binary form.
pub fn decode_reply(bytes: &[u8]) -> Decoded<WorkerReply> {
    decode_reply_into(bytes, AllocationRoom::none())
}

/// A reply from its binary form, a plan's allocations written into `room`.
pub fn decode_reply_into(bytes: &[u8], room: AllocationRoom) -> Decoded<WorkerReply> {
    let mut input = Reader { bytes };
    input.magic(REPLY_MAGIC, "worker reply")?;
    let reply = match input.u8()? {
        0 => {
            let arena_count = input.count(25)?;
            let mut arenas = RVec::with_capacity(arena_count);
            for _ in 0..arena_count {
                arenas.push(Arena {
                    role: role_of(input.u8()?)?,
                    memory: input.u32()?,
                    source_memory: input.u32()?,
                    size: input.u64()?,
                    alignment: input.u64()?,
                });
            }
            // At least a flags byte, an offset and a size each.
            let allocation_count = input.count(3)?;
            let mut allocations = room.0;
            allocations.reserve(allocation_count);
            let mut previous = AllocationContext::FIRST;
            for _ in 0..allocation_count {
                let flags = input.u8()?;
                if flags & !(NEXT_TENSOR | SAME_ARENA | SAME_OFFSETS) != 0 {
                    return Err(WireError(format!("allocation flags {flags:#x}")));
                }
                let tensor = match flags & NEXT_TENSOR {
                    0 => input.number_u32()?,
                    _ => previous.tensor.wrapping_add(1),
                };
                let arena = match flags & SAME_ARENA {
                    0 => (input.u8()?, input.number_u32()?, input.number_u32()?),
                    _ => previous.arena,
                };
                // Both offsets travel, so that a plan whose two offsets disagree reaches the
                // checker as the planner made it.
                let offset = input.number()?;
                let binding_offset = match flags & SAME_OFFSETS {
                    0 => input.number()?,
                    _ => offset,
                };
                allocations.push(Allocation {
                    tensor,
                    binding: Binding {
                        role: role_of(arena.0)?,
                        memory: arena.1,
                        source_memory: arena.2,
                        offset: binding_offset,
                    },
                    offset,
                    size: input.number()?,
                });
                previous = AllocationContext { tensor, arena };
            }
            WorkerReply::Plan(MemoryPlan {
                arenas,
                allocations,
                summary: RString::from(input.str()?),
            })
        }
        1 => WorkerReply::Error(PlanError {
            kind: error_kind_of(input.u8()?)?,
            message: RString::from(input.str()?),
        }),
        2 => WorkerReply::Failed {
            exit_code: input.u8()?,
            message: input.str()?.to_string(),
        },
        3 => WorkerReply::Violation(Violation {
            syscall: input.u32()?,
            args: [input.u64()?, input.u64()?],
        }),
        other => return Err(WireError(format!("reply kind {other}"))),
    };
    input.end()?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_comes_back_as_it_went() {
        let binding = Binding {
            role: ArenaRole::Scratch,
            memory: 0,
            source_memory: 0,
            offset: 64,
        };
        let plan = MemoryPlan {
            arenas: RVec::from(vec![Arena {
                role: ArenaRole::Scratch,
                memory: 0,
                source_memory: 0,
                size: 128,
                alignment: 16,
            }]),
            allocations: RVec::from(vec![Allocation {
                tensor: 2,
                binding,
                offset: 80,
                size: 48,
            }]),
            summary: RString::from("proven optimal"),
        };
        // Every way an allocation can differ from the one before, and numbers of every width.
        let at =
            |tensor: u32, role, memory, offset: u64, binding_offset: u64, size: u64| Allocation {
                tensor,
                binding: Binding {
                    role,
                    memory,
                    source_memory: memory / 2,
                    offset: binding_offset,
                },
                offset,
                size,
            };
        let varied = MemoryPlan {
            arenas: RVec::new(),
            allocations: RVec::from(vec![
                at(0, ArenaRole::Scratch, 0, 0, 0, 1),
                at(1, ArenaRole::Scratch, 0, 127, 127, 128),
                at(2, ArenaRole::Scratch, 0, 16_384, 0, 0),
                at(
                    u32::MAX,
                    ArenaRole::Constant,
                    0,
                    u64::MAX,
                    u64::MAX,
                    u64::MAX,
                ),
                at(0, ArenaRole::Constant, 0, 1 << 63, 1, 1 << 35),
                at(1, ArenaRole::Persistent, 3, 5, 5, 5),
                at(2, ArenaRole::Persistent, u32::MAX, 5, 5, 5),
                at(7, ArenaRole::Persistent, u32::MAX, 5, 5, 5),
            ]),
            summary: RString::new(),
        };
        for reply in [
            WorkerReply::Plan(plan),
            WorkerReply::Plan(varied),
            WorkerReply::Error(PlanError::new(PlanErrorKind::DoesNotFit, "too big")),
            WorkerReply::Failed {
                exit_code: 4,
                message: "not loaded".into(),
            },
            WorkerReply::Violation(Violation {
                syscall: 257,
                args: [u64::MAX, 7],
            }),
        ] {
            let decoded = decode_reply(&encode_reply(&reply)).expect("decodes");
            assert_eq!(format!("{decoded:?}"), format!("{reply:?}"));
            for room in [AllocationRoom::prepared(1), AllocationRoom::prepared(100)] {
                let decoded = decode_reply_into(&encode_reply(&reply), room).expect("decodes");
                assert_eq!(format!("{decoded:?}"), format!("{reply:?}"));
            }
        }
    }

    #[test]
    fn numbers_of_more_than_64_bits_are_errors() {
        let mut ten_bytes = vec![0xff; 9];
        ten_bytes.push(0x01);
        assert_eq!(Reader { bytes: &ten_bytes }.number(), Ok(u64::MAX));
        let too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader { bytes: &too_big }.number().is_err());
        let too_long = [0x80; 11];
        assert!(Reader { bytes: &too_long }.number().is_err());
        assert!(Reader { bytes: &[0x80] }.number().is_err());
    }

    #[test]
    fn damaged_bytes_are_errors_never_panics() {
        let plan = MemoryPlan {
            arenas: RVec::from(vec![Arena {
                role: ArenaRole::Scratch,
                memory: 0,
                source_memory: 0,
                size: 128,
                alignment: 16,
            }]),
            allocations: RVec::from(vec![
                Allocation {
                    tensor: 0,
                    binding: Binding {
                        role: ArenaRole::Scratch,
                        memory: 0,
                        source_memory: 0,
                        offset: 0,
                    },
                    offset: 0,
                    size: 48,
                };
                3
            ]),
            summary: RString::from("vue/ü"),
        };
        let bytes = encode_reply(&WorkerReply::Plan(plan));
        for cut in 0..bytes.len() {
            assert!(decode_reply(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            let mut damaged = bytes.clone();
            for _ in 0..3 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % damaged.len() as u64) as usize;
                damaged[at] = (state >> 32) as u8;
            }
            let _ = decode_reply(&damaged);
        }
        let reply = encode_reply(&WorkerReply::Failed {
            exit_code: 4,
            message: "x".into(),
        });
        let mut huge_count = reply.clone();
        huge_count[8] = 0;
        huge_count.splice(9..9, u64::MAX.to_le_bytes());
        assert!(decode_reply(&huge_count).is_err());
        assert!(decode_reply(b"{\"plan\":{}}").is_err());
        let mut trailing = reply;
        trailing.push(0);
        assert!(decode_reply(&trailing).is_err());
    }
}
