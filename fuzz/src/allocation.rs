//! Measuring what a reader allocates: a counting global allocator and the bound a reader's
//! peak must stay within. Shared by the fuzz targets (`fuzz/src/lib.rs`) and the regression
//! tests (`host/tests/fuzz_regressions.rs`, which includes this file by path), so that both
//! check the same promise the same way.
//!
//! Counts are per thread (the readers are single-threaded; test harnesses run tests on
//! several threads at once), and only the requested sizes are counted, not the allocator's
//! own overhead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's live heap bytes and their peak.
pub struct CountingAllocator;

thread_local! {
    // Signed: a block freed on another thread than the one that allocated it lowers this
    // thread's count below what it allocated.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn adjust(change: isize) {
    // `try_with`: the allocator also runs while a thread's locals are torn down. These
    // cells have no destructor, so in practice it always succeeds.
    let _ = LIVE.try_with(|live| {
        let now = live.get().wrapping_add(change);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            adjust(layout.size() as isize);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            adjust(layout.size() as isize);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        adjust(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            // Count the new block before releasing the old one: a moving realloc holds both.
            adjust(new_size as isize);
            adjust(-(layout.size() as isize));
        }
        moved
    }
}

/// Heap bytes a reader may hold at its peak for an input of `input_len` bytes.
///
/// `K = 64` per input byte: a reader keeps at most a few owned copies of what it read
/// (constant data and names copied once into the model, lossy UTF-8 turning one invalid
/// byte into three, `Vec` doubling reserving up to twice what it holds), and every model
/// entity it builds (a tensor is about 200 bytes with its id and name) costs several input
/// bytes to describe. 64x leaves room for that honest linear overhead, while super-linear
/// growth (one shared string copied once per referrer, a subgraph walked exponentially
/// often) breaks it quickly.
///
/// `C = 1 MiB`: costs that do not depend on the input (error messages, hash tables' first
/// buckets, parser scratch space), which dominate for the small inputs libFuzzer generates.
pub fn allocation_bound(input_len: usize) -> usize {
    const BYTES_PER_INPUT_BYTE: usize = 64;
    const FIXED_BYTES: usize = 1 << 20;
    input_len
        .saturating_mul(BYTES_PER_INPUT_BYTE)
        .saturating_add(FIXED_BYTES)
}

/// Runs `read` on `input` and returns the peak of heap bytes this thread held during it,
/// above what it held before. What `read` returns is still live at its end, so it counts.
pub fn peak_allocation<T>(input: &[u8], read: impl FnOnce(&[u8]) -> T) -> (T, usize) {
    let baseline = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(baseline));
    let result = read(input);
    let peak = PEAK.with(Cell::get).saturating_sub(baseline);
    (result, peak.max(0) as usize)
}

/// Runs `read` on `input`, panicking (a fuzzing finding, a test failure) if the peak of
/// heap bytes it held exceeds [`allocation_bound`] of the input's length.
pub fn within_allocation_bound<T>(input: &[u8], read: impl FnOnce(&[u8]) -> T) -> T {
    let (result, peak) = peak_allocation(input, read);
    let bound = allocation_bound(input.len());
    assert!(
        peak <= bound,
        "allocation bound exceeded: the read held {peak} heap bytes at its peak for an \
         input of {} bytes (bound {bound})",
        input.len()
    );
    result
}
