//! The C interface of planner plugins: the Rust side of `include/memplan_planner.h`.
//!
//! A C or C++ planner is a *packer*: it places the buffers of one arena (size, alignment,
//! inclusive lifetime, optional fixed offset) and returns an offset per buffer. Everything
//! around a packer (constants, persistent tensors, memories, spill, aliases, empty tensors) is
//! the planner kit's, run by the host for C packers exactly as it is compiled into Rust
//! planners. The header is written by hand; these `#[repr(C)]` types mirror it field for field,
//! and a test (`tests/tests/c_planners.rs`) compiles a C program that prints the header's sizes,
//! offsets and constants and compares them with these.
//!
//! The C ABI has its own version ([`C_ABI_VERSION`]), separate from the Rust plugin ABI
//! ([`crate::ABI_VERSION`]): a minor release appends fields to [`CPackRequest`] (a packer reads
//! them only when `abi_minor` says they are there); anything else is a new major, which the host
//! refuses by the manifest before loading the file.
//!
//! Ownership across the boundary: everything a pointer of the host reaches (the request, the
//! buffers, the options, the offsets array, the host callbacks) belongs to the host and is valid
//! during the call only; the packer writes the offsets into the host's array and nothing else.
//! Strings the packer hands to a callback (log lines, the note, the error message) are copied by
//! the host before the callback returns, so a packer may pass a buffer on its stack.

use std::ffi::{c_char, c_void};

/// The C ABI version, `MAJOR.MINOR` (`MEMPLAN_C_ABI_VERSION` in the header).
pub const C_ABI_VERSION: &str = "1.0";
/// `MEMPLAN_C_ABI_VERSION_MAJOR`: a planner built against another major is refused.
pub const C_ABI_MAJOR: u32 = 1;
/// `MEMPLAN_C_ABI_VERSION_MINOR`: what [`CPackRequest::abi_minor`] says to a packer.
pub const C_ABI_MINOR: u32 = 0;

/// `MEMPLAN_NO_FIXED_OFFSET`: the buffer has no fixed offset (no buffer of at least one byte
/// can be fixed there: it would end past 64 bits).
pub const NO_FIXED_OFFSET: u64 = u64::MAX;
/// `MEMPLAN_UNBOUNDED`: no budget limits the arena's memory.
pub const UNBOUNDED: u64 = u64::MAX;
/// `MEMPLAN_NO_DEADLINE`: what `remaining_ms` returns when there is no time limit.
pub const NO_DEADLINE: u64 = u64::MAX;

/// `memplan_status`: what a packer returns.
pub mod status {
    /// `MEMPLAN_OK`: every offset is written and `offset_count` says how many.
    pub const OK: i32 = 0;
    /// `MEMPLAN_DOES_NOT_FIT`: the buffers cannot be packed (exit 5).
    pub const DOES_NOT_FIT: i32 = 1;
    /// `MEMPLAN_INVALID_REQUEST`: options or buffers the packer does not accept (exit 2).
    pub const INVALID_REQUEST: i32 = 2;
    /// `MEMPLAN_CANCELLED`: asked to stop (`should_stop`) before it had a packing (exit 4).
    pub const CANCELLED: i32 = 3;
    /// `MEMPLAN_FAILED`: any other failure (exit 4).
    pub const FAILED: i32 = 4;
}

/// `memplan_log_level`: the level of a log line, as [`crate::LogLevel`] orders them.
pub mod log_level {
    pub const ERROR: i32 = 0;
    pub const WARN: i32 = 1;
    pub const INFO: i32 = 2;
    pub const DEBUG: i32 = 3;
    pub const TRACE: i32 = 4;
}

/// `memplan_buffer`: one buffer to place (the planner kit's `Buffer`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CBuffer {
    /// Bytes, at least 1 (empty tensors are bound without asking the packer).
    pub size: u64,
    /// The offset must be a multiple of it; a power of two.
    pub alignment: u64,
    /// First op step the buffer is live (inclusive).
    pub first: u32,
    /// Last op step the buffer is live (inclusive).
    pub last: u32,
    /// The offset the packer must use, or [`NO_FIXED_OFFSET`].
    pub fixed_offset: u64,
}

/// `memplan_host`: the host's callbacks, valid during the call only. `state` is passed back
/// to each unchanged.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CHost {
    pub state: *mut c_void,
    /// Logs one line (`message`: NUL-terminated UTF-8, copied) at a [`log_level`].
    pub log: extern "C" fn(state: *mut c_void, level: i32, message: *const c_char),
    /// Non-zero once the packer should stop: return its best packing so far, or
    /// [`status::CANCELLED`].
    pub should_stop: extern "C" fn(state: *mut c_void) -> i32,
    /// Milliseconds left before the deadline; [`NO_DEADLINE`] when there is none.
    pub remaining_ms: extern "C" fn(state: *mut c_void) -> u64,
    /// Sets the note shown beside the plan (NUL-terminated UTF-8, copied); the last call wins.
    pub set_note: extern "C" fn(state: *mut c_void, note: *const c_char),
    /// Sets the message of a failed packing (NUL-terminated UTF-8, copied); the last call wins.
    pub set_error: extern "C" fn(state: *mut c_void, message: *const c_char),
}

/// `memplan_pack_request`: what one packer call is asked.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CPackRequest {
    /// [`C_ABI_MAJOR`] of the host.
    pub abi_major: u32,
    /// [`C_ABI_MINOR`] of the host: fields appended by later minors are there when it is high
    /// enough.
    pub abi_minor: u32,
    /// `buffer_count` buffers, in the order the offsets are returned.
    pub buffers: *const CBuffer,
    pub buffer_count: u64,
    /// The planner options (`--planner-options`), a NUL-terminated JSON object (`{}` when none).
    pub options_json: *const c_char,
    /// Bytes left in the arena's memory under its budget, or [`UNBOUNDED`]. A packing higher
    /// than this is still accepted (the host spills tensors to the next memory or reports it).
    pub room: u64,
    pub host: *const CHost,
}

/// `memplan_pack_result`: where the packer writes its answer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CPackResult {
    /// The host's array of `buffer_count` offsets, each [`NO_FIXED_OFFSET`] on entry: the
    /// packer writes `offsets[i]` for buffer `i`.
    pub offsets: *mut u64,
    /// 0 on entry; the packer sets how many offsets it wrote (`buffer_count` on success).
    pub offset_count: u64,
}

/// `memplan_pack_fn`: a packer's entry function, exported under the name its manifest line
/// gives.
pub type CPackFn =
    unsafe extern "C" fn(request: *const CPackRequest, result: *mut CPackResult) -> i32;

/// The first line of a C planner's manifest after the magic names the interface and its
/// version: `c 1.0` (a Rust plugin's names the plugin ABI alone, `1.0.0`).
pub const MANIFEST_INTERFACE_PREFIX: &str = "c ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_is_the_kits_size_and_the_version_agrees_with_its_parts() {
        assert_eq!(std::mem::size_of::<CBuffer>(), 32);
        assert_eq!(C_ABI_VERSION, format!("{C_ABI_MAJOR}.{C_ABI_MINOR}"));
        // The levels are the Rust ABI's, in its order.
        assert_eq!(crate::LogLevel::Trace as i32, log_level::TRACE);
        assert_eq!(crate::LogLevel::Error as i32, log_level::ERROR);
    }
}
