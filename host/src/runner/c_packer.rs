//! Running a C planner: its packer (a `memplan_pack_fn` of `memplan_planner.h`) adapted into
//! the planner kit's [`Packer`], so that [`plan_with_packer`] does for it exactly what it does
//! for a Rust planner (constants, persistent tensors, memories with spill, fixed offsets,
//! aliases, empty tensors), and its answer meets the same checks and error mapping.
//!
//! Each [`Packer::pack_within`] call copies the kit's buffers into the header's layout, hands
//! the packer a host array of offsets (each `MEMPLAN_NO_FIXED_OFFSET` on entry) and callbacks
//! that reach the run's [`HostContext`], then reads back the count it wrote, its note and its
//! error message. The strings it passes are copied inside the callbacks, so it may pass
//! buffers on its stack; nothing the host lends it outlives the call.
//!
//! What the adapter checks is only what the kit cannot: a count beyond the array, an offset
//! whose end would pass 64 bits (the kit adds offset and size), an unknown status. A count
//! below the buffers is left to the kit, which refuses it as it refuses a Rust packer's
//! ("the packer returned 1 offsets for 2 buffers"); overlaps and misalignment are the
//! checker's, as for any planner.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};

use memplan_planner_kit::{plan_with_packer, Buffer, Packer, Packing};
use memplan_plugin_api::c_abi::{
    self, log_level, status, CBuffer, CHost, CPackFn, CPackRequest, CPackResult,
};
use memplan_plugin_api::{
    HostContext, LogLevel, MemoryPlan, PlanError, PlanErrorKind, PlanRequest,
};

/// A C planner's packer, found in its loaded library by the symbol its manifest names.
#[derive(Clone, Copy, Debug)]
pub struct CPlanner {
    pack: CPackFn,
}

impl CPlanner {
    /// The planner whose packer is `pack`.
    ///
    /// # Safety
    /// `pack` must be a function of type `memplan_pack_fn` in a library that stays loaded for
    /// the rest of the process (memplan never unloads one).
    pub unsafe fn new(pack: CPackFn) -> CPlanner {
        CPlanner { pack }
    }

    /// Plans `request` with the planner kit around this packer.
    pub fn plan(
        &self,
        request: &PlanRequest,
        context: &HostContext,
    ) -> Result<MemoryPlan, PlanError> {
        let options = CString::new(request.options.as_str()).map_err(|_| {
            PlanError::new(
                PlanErrorKind::InvalidRequest,
                "the planner options hold a NUL byte, which a C planner cannot be given",
            )
        })?;
        let packer = CPacker {
            pack: self.pack,
            options: &options,
        };
        plan_with_packer(request, context, &packer)
    }
}

/// One run's view of a C packer, with the options it is handed on every call.
struct CPacker<'a> {
    pack: CPackFn,
    options: &'a CStr,
}

/// What the callbacks of one packer call reach: the run's context, and the note and error
/// message the packer set.
struct CallState<'a> {
    context: &'a HostContext,
    note: RefCell<Option<String>>,
    error: RefCell<Option<String>>,
}

/// The `CallState` behind a callback's `state`. Invariant: `state` is the `CallState` of the
/// packer call in progress, which the host keeps alive until the packer returns (and the
/// header allows the callbacks during the call only).
fn call_state<'a>(state: *mut c_void) -> &'a CallState<'a> {
    // SAFETY: see the invariant above.
    unsafe { &*(state as *const CallState) }
}

/// The UTF-8 text of a NUL-terminated C string (invalid sequences replaced), `None` for a
/// null pointer.
fn text_of(text: *const c_char) -> Option<String> {
    // SAFETY: the header requires a NUL-terminated string valid during the callback.
    (!text.is_null()).then(|| {
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    })
}

extern "C" fn c_log(state: *mut c_void, level: i32, message: *const c_char) {
    let Some(message) = text_of(message) else {
        return;
    };
    let level = match level {
        log_level::ERROR => LogLevel::Error,
        log_level::WARN => LogLevel::Warn,
        log_level::DEBUG => LogLevel::Debug,
        log_level::TRACE => LogLevel::Trace,
        _ => LogLevel::Info,
    };
    call_state(state).context.log(level, &message);
}

extern "C" fn c_should_stop(state: *mut c_void) -> i32 {
    i32::from(call_state(state).context.should_stop())
}

extern "C" fn c_remaining_ms(state: *mut c_void) -> u64 {
    match call_state(state).context.remaining() {
        // Never NO_DEADLINE for a real deadline.
        Some(left) => u64::try_from(left.as_millis())
            .map_or(c_abi::NO_DEADLINE - 1, |ms| ms.min(c_abi::NO_DEADLINE - 1)),
        None => c_abi::NO_DEADLINE,
    }
}

extern "C" fn c_set_note(state: *mut c_void, note: *const c_char) {
    if let Ok(mut slot) = call_state(state).note.try_borrow_mut() {
        *slot = text_of(note);
    }
}

extern "C" fn c_set_error(state: *mut c_void, message: *const c_char) {
    if let Ok(mut slot) = call_state(state).error.try_borrow_mut() {
        *slot = text_of(message);
    }
}

impl Packer for CPacker<'_> {
    fn pack(&self, buffers: &[Buffer], context: &HostContext) -> Result<Packing, PlanError> {
        self.pack_within(buffers, None, context)
    }

    fn pack_within(
        &self,
        buffers: &[Buffer],
        room: Option<u64>,
        context: &HostContext,
    ) -> Result<Packing, PlanError> {
        if buffers.is_empty() {
            return Ok(Packing::default());
        }
        let c_buffers: Vec<CBuffer> = buffers
            .iter()
            .map(|buffer| CBuffer {
                size: buffer.size,
                alignment: buffer.alignment,
                first: buffer.lifetime.first,
                last: buffer.lifetime.last,
                fixed_offset: buffer.fixed_offset.get().unwrap_or(c_abi::NO_FIXED_OFFSET),
            })
            .collect();
        let mut offsets = vec![c_abi::NO_FIXED_OFFSET; buffers.len()];
        let call = CallState {
            context,
            note: RefCell::new(None),
            error: RefCell::new(None),
        };
        let host = CHost {
            state: &call as *const CallState as *mut c_void,
            log: c_log,
            should_stop: c_should_stop,
            remaining_ms: c_remaining_ms,
            set_note: c_set_note,
            set_error: c_set_error,
        };
        let request = CPackRequest {
            abi_major: c_abi::C_ABI_MAJOR,
            abi_minor: c_abi::C_ABI_MINOR,
            buffers: c_buffers.as_ptr(),
            buffer_count: buffers.len() as u64,
            options_json: self.options.as_ptr(),
            room: room.unwrap_or(c_abi::UNBOUNDED),
            host: &host,
        };
        let mut result = CPackResult {
            offsets: offsets.as_mut_ptr(),
            offset_count: 0,
        };
        // SAFETY: `pack` is a `memplan_pack_fn` (CPlanner::new); every pointer handed to it
        // is valid until it returns, and it writes at most `buffer_count` offsets.
        let returned = unsafe { (self.pack)(&request, &mut result) };
        let error = call.error.into_inner();
        let note = call.note.into_inner().unwrap_or_default();
        answer(returned, result.offset_count, offsets, buffers, error, note)
    }
}

/// A packer's answer: `returned` (its status) with `count` offsets written into `offsets`
/// (the host's array, one slot per buffer), its error message and its note.
fn answer(
    returned: i32,
    count: u64,
    mut offsets: Vec<u64>,
    buffers: &[Buffer],
    error: Option<String>,
    note: String,
) -> Result<Packing, PlanError> {
    let kind =
        match returned {
            status::OK => None,
            status::DOES_NOT_FIT => Some(PlanErrorKind::DoesNotFit),
            status::INVALID_REQUEST => Some(PlanErrorKind::InvalidRequest),
            status::CANCELLED => Some(PlanErrorKind::Cancelled),
            status::FAILED => Some(PlanErrorKind::Failed),
            unknown => {
                return Err(PlanError::new(
                    PlanErrorKind::Failed,
                    format!(
                    "the packer returned status {unknown}, which is none of memplan_planner.h's \
                     (MEMPLAN_OK, MEMPLAN_DOES_NOT_FIT, MEMPLAN_INVALID_REQUEST, \
                     MEMPLAN_CANCELLED, MEMPLAN_FAILED){}",
                    error.map(|message| format!(": {message}")).unwrap_or_default()
                ),
                ))
            }
        };
    if let Some(kind) = kind {
        let message = error.unwrap_or_else(|| {
            "the packer gave no message (it should call set_error before it fails)".to_string()
        });
        return Err(PlanError::new(kind, message));
    }
    if count > offsets.len() as u64 {
        return Err(PlanError::new(
            PlanErrorKind::Failed,
            format!(
                "the packer says it wrote {count} offsets into the host's array of {} (one \
                 per buffer)",
                offsets.len()
            ),
        ));
    }
    // The kit refuses a short count with the message it gives a Rust packer.
    offsets.truncate(count as usize);
    let mut height = 0u64;
    for (index, (buffer, &offset)) in buffers.iter().zip(&offsets).enumerate() {
        let end = offset.checked_add(buffer.size).ok_or_else(|| {
            PlanError::new(
                PlanErrorKind::Failed,
                format!(
                    "the packer placed buffer {index} ({} bytes) at offset {offset}, where it \
                     would end past 64 bits",
                    buffer.size
                ),
            )
        })?;
        height = height.max(end);
    }
    Ok(Packing {
        offsets,
        height,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_plugin_api::Lifetime;

    fn buffers(count: usize) -> Vec<Buffer> {
        (0..count)
            .map(|index| Buffer {
                size: 16,
                alignment: 16,
                lifetime: Lifetime::new(index as u32, index as u32 + 1),
                fixed_offset: Default::default(),
            })
            .collect()
    }

    /// Stacks the buffers (no reuse), notes it, and logs once.
    unsafe extern "C" fn stacking(request: *const CPackRequest, result: *mut CPackResult) -> i32 {
        let request = &*request;
        let result = &mut *result;
        let host = &*request.host;
        let buffers = std::slice::from_raw_parts(request.buffers, request.buffer_count as usize);
        let offsets = std::slice::from_raw_parts_mut(result.offsets, buffers.len());
        let mut top = 0;
        for (buffer, offset) in buffers.iter().zip(offsets) {
            *offset = top;
            top += buffer.size;
        }
        result.offset_count = buffers.len() as u64;
        (host.set_note)(host.state, c"stacked".as_ptr());
        (host.log)(host.state, log_level::INFO, c"stacked them".as_ptr());
        status::OK
    }

    /// Fails with a message built on its stack.
    unsafe extern "C" fn refusing(request: *const CPackRequest, _: *mut CPackResult) -> i32 {
        let host = &*(*request).host;
        let message =
            CString::new(format!("{} buffers is too many", (*request).buffer_count)).unwrap();
        (host.set_error)(host.state, message.as_ptr());
        status::DOES_NOT_FIT
    }

    fn pack(pack: CPackFn, count: usize) -> Result<Packing, PlanError> {
        let options = CString::new("{}").unwrap();
        let packer = CPacker {
            pack,
            options: &options,
        };
        packer.pack_within(&buffers(count), Some(100), &HostContext::detached())
    }

    #[test]
    fn a_c_packers_offsets_and_note_come_back() {
        let packing = pack(stacking, 3).unwrap();
        assert_eq!(packing.offsets, [0, 16, 32]);
        assert_eq!(packing.height, 48);
        assert_eq!(packing.note, "stacked");
    }

    #[test]
    fn a_c_packers_status_and_message_become_its_error() {
        let error = pack(refusing, 3).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::DoesNotFit);
        assert_eq!(error.message.as_str(), "3 buffers is too many");
    }

    #[test]
    fn counts_offsets_and_statuses_a_packer_cannot_mean_are_failures() {
        let bufs = buffers(2);
        let error = answer(7, 2, vec![0, 16], &bufs, None, String::new()).unwrap_err();
        assert!(error.message.contains("status 7"), "{}", error.message);
        let error = answer(status::OK, 3, vec![0, 16], &bufs, None, String::new()).unwrap_err();
        assert!(
            error.message.contains("wrote 3 offsets"),
            "{}",
            error.message
        );
        let error = answer(
            status::OK,
            2,
            vec![0, u64::MAX - 1],
            &bufs,
            None,
            String::new(),
        )
        .unwrap_err();
        assert!(error.message.contains("past 64 bits"), "{}", error.message);
        let error = answer(status::FAILED, 0, vec![0, 0], &bufs, None, String::new()).unwrap_err();
        assert_eq!(error.kind, PlanErrorKind::Failed);
        assert!(error.message.contains("no message"), "{}", error.message);
        // A short count is handed on for the kit to refuse.
        let short = answer(status::OK, 1, vec![0, 16], &bufs, None, String::new()).unwrap();
        assert_eq!(short.offsets, [0]);
    }
}
