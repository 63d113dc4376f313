//! How the process's C allocator treats freed memory.
//!
//! A memplan run is short and allocates in waves: the reader, the analysis, each planner
//! run (a best-of selection or `memplan bench` runs several on the same request), the
//! checker and the renderer each build large arrays and free them. glibc's defaults return
//! such memory to the kernel as soon as it is freed: blocks above its mmap threshold (at most
//! 32 MiB) are unmapped on `free`, and the top of the heap is given back once more than
//! twice that is free. The next wave then faults the same amount back in, page by page,
//! zeroed by the kernel. At a million tensors that was about 29,000 pages (118 MB) per
//! greedy-bestfit run, and on a virtual machine each fresh 4 KiB page costs microseconds
//! (75-100 ms per 131 MB measured here, against 12 ms to write the same memory again once
//! mapped).
//!
//! So memplan asks glibc to keep what it frees for the rest of the run: no trimming of the
//! heap's top and no separate mappings for large blocks, so a freed block serves the next
//! request of its size without a page fault. The cost is that the process's resident size
//! does not shrink before it exits (peak resident size: 1.80 GB instead of 1.72 GB for
//! `memplan plan --planner greedy-bestfit,linear` on a million tensors). Plugins share the process's allocator, so
//! their allocations are served the same way. Other C libraries keep their own policy.

/// Makes the C allocator keep freed memory for reuse instead of returning it to the kernel
/// (see the module documentation). Call once, at start-up, before any large allocation.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters, takes glibc's own lock, and is called
    // with parameters and values glibc documents: -1 disables trimming, 0 disables mmap for
    // large blocks. A refused setting leaves the default, which is correct, only slower.
    unsafe {
        if libc::mallopt(libc::M_TRIM_THRESHOLD, -1) == 0 {
            tracing::debug!("glibc refused to stop trimming the heap; it keeps its default");
        }
        if libc::mallopt(libc::M_MMAP_MAX, 0) == 0 {
            tracing::debug!(
                "glibc refused to serve large blocks from the heap; it keeps mapping them"
            );
        }
    }
}

/// Set by the `memplan` process (not by code using the library): the run's largest structures
/// are left to the operating system at exit instead of being freed one allocation at a time.
static LEAVE_TO_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Called by the process entry point: the process ends right after the command, so freeing
/// what the command built is wasted work (a million tensors' names, tables and plans: about
/// 0.1 s of `free` calls) that the kernel does at once when the process exits.
pub fn leave_memory_to_exit() {
    LEAVE_TO_EXIT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Drops `value`, or, in the `memplan` process ([`leave_memory_to_exit`]), leaves its memory
/// to the operating system at exit. Commands call it with what they built once they are done.
pub fn release<T>(value: T) {
    if LEAVE_TO_EXIT.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(value);
    } else {
        drop(value);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::keep_freed_memory;

    /// Bytes glibc holds in separate mappings (blocks it would unmap when freed), and bytes
    /// of its heaps.
    fn mapped_and_heap_bytes() -> (usize, usize) {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let info = unsafe { libc::mallinfo2() };
        (info.hblkhd, info.arena)
    }

    #[test]
    fn a_large_block_comes_from_the_heap_and_stays_there_when_freed() {
        keep_freed_memory();
        // 48 MB: above the largest mmap threshold glibc allows (32 MiB), so by default it
        // would be a separate mapping, unmapped again on free. Other tests may free mapped
        // blocks meanwhile, but none can add one once mmap is off, and no heap shrinks once
        // trimming is off.
        // An allocation another test began before mmap was turned off may still complete
        // meanwhile and add a mapping: a few attempts, one of which must see none.
        let mut attempts = 0;
        let (block, heap) = loop {
            attempts += 1;
            let (mapped_before, _) = mapped_and_heap_bytes();
            let block = std::hint::black_box(vec![1u8; 48_000_000]);
            let (mapped, heap) = mapped_and_heap_bytes();
            if mapped <= mapped_before {
                break (block, heap);
            }
            assert!(
                attempts < 5,
                "the block was mapped on its own, {attempts} times"
            );
        };
        assert!(
            heap >= 48_000_000,
            "the heap does not hold the block: {heap} bytes"
        );
        drop(block);
        let (_, heap_after) = mapped_and_heap_bytes();
        assert!(heap_after >= heap, "the heap gave back the freed block");
    }
}
