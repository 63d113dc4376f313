//! The worker's memory: fresh pages for the planner, made ahead of it on a spare core.
//!
//! The worker is a fork of memplan, and the planner's allocations land first in what memplan
//! freed and kept for reuse ([`crate::allocator::keep_freed_memory`]). In process such memory
//! costs nothing to reuse; in the worker every page of it the planner writes faults:
//! - an inherited page is shared with memplan until written, and copying it on the write must
//!   flush the old mapping from every core the worker's threads run on. With a multi-threaded
//!   planner that sends an interrupt to the other core per page, which a virtual machine turns
//!   into an exit to its hypervisor. Measured here (2-core VM), writing 200 MB of inherited
//!   pages: 110 ms with one thread, 354 ms while a second thread runs, 80-95 ms for fresh
//!   zeroed pages either way;
//! - a fresh page still costs 1.3-1.5 us to fault in, one at a time (the kernel populates the
//!   same pages in bulk only 15 % faster, so the cost is the page, not the trap).
//!
//! So the worker, while it still has one thread, gives the kept free memory back to the kernel
//! ([`give_back_freed_memory`]): the planner then gets fresh pages, without flushes. And it
//! finds where that memory was ([`FreeRegions::of_this_process`]), so that a helper thread
//! ([`Populator`]) can fault those pages in while the planner runs, on the core the planner
//! leaves idle; the planner then finds most pages it writes already there. Measured at
//! 1,000,000 tensors (`memplan plan --isolate=always`, plan stage): greedy-bestfit 0.44 s
//! before, 0.40 s with the helper; portfolio 0.57-0.60 s before, 0.49-0.51 s after giving
//! back, 0.45 s with the helper too (in process: 0.35 and 0.40 s).
//!
//! The helper is started after the worker enters its sandbox, so that it runs under the same
//! system-call filter as the planner, and is stopped and joined as soon as the planner
//! returns (it works in steps of [`STEP_PAGES`]), before the worker counts the threads the
//! planner left running. Pages it populates that the planner never uses only cost the helper's
//! time. Kernels before Linux 5.14 refuse the populate request; the helper then stops at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Pages the helper populates per request: between two looks at the stop flag (1 MiB, about
/// 0.4 ms here).
pub const STEP_PAGES: usize = 256;
/// Free memory below this is not worth a helper thread (the planner faults it in quickly).
pub const LEAST_WORTH_POPULATING: usize = 16 << 20;
/// Only writable private mappings at least this large are looked at: the allocator's heaps.
const SMALLEST_REGION: usize = 1 << 20;

/// Gives the allocator's kept free pages back to the kernel. Call in the worker while it has
/// one thread (see the module documentation).
pub fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own arenas, under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Address ranges of the process's writable anonymous memory that are not resident: where the
/// allocator's freed memory was given back, and the planner's allocations will land.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FreeRegions {
    /// `(start address, bytes)`, page-aligned, in address order.
    pub runs: Vec<(usize, usize)>,
}

impl FreeRegions {
    /// The free regions of this process now. Reads `/proc/self/maps`, so call it before the
    /// sandbox closes the way to files. Empty where that or `mincore` is not available.
    pub fn of_this_process() -> FreeRegions {
        #[cfg(target_os = "linux")]
        {
            let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
                return FreeRegions::default();
            };
            let mut runs = Vec::new();
            for (start, end) in anonymous_writable_mappings(&maps) {
                if end - start >= SMALLEST_REGION {
                    push_absent_runs(start, end, &mut runs);
                }
            }
            FreeRegions { runs }
        }
        #[cfg(not(target_os = "linux"))]
        FreeRegions::default()
    }

    pub fn bytes(&self) -> usize {
        self.runs.iter().map(|&(_, bytes)| bytes).sum()
    }
}

/// `(start, end)` of every private, writable, anonymous mapping in a `/proc/self/maps` text,
/// the main heap included; stacks and file mappings are left out.
pub fn anonymous_writable_mappings(maps: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    maps.lines().filter_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let range = fields.next()?;
        let permissions = fields.next()?;
        let (_offset, _device, inode) = (fields.next()?, fields.next()?, fields.next()?);
        let path = fields.next();
        if permissions != "rw-p" || inode != "0" || !matches!(path, None | Some("[heap]")) {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        (start < end).then_some((start, end))
    })
}

/// Appends the runs of non-resident pages of `start..end` (page-aligned) to `runs`.
#[cfg(target_os = "linux")]
fn push_absent_runs(start: usize, end: usize, runs: &mut Vec<(usize, usize)>) {
    let page = page_size();
    let mut resident = vec![0u8; (end - start).div_ceil(page)];
    // SAFETY: `start..end` is a mapping of this process (a page-aligned range from its maps;
    // if it was unmapped since, mincore fails and nothing is read), and `resident` has one
    // byte per page of it.
    if unsafe {
        libc::mincore(
            start as *mut libc::c_void,
            end - start,
            resident.as_mut_ptr(),
        )
    } != 0
    {
        return;
    }
    let mut index = 0;
    while index < resident.len() {
        if resident[index] & 1 == 1 {
            index += 1;
            continue;
        }
        let first = index;
        while index < resident.len() && resident[index] & 1 == 0 {
            index += 1;
        }
        runs.push((start + first * page, (index - first) * page));
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// A helper thread populating free regions while the planner runs; see the module docs.
pub struct Populator {
    stop: Arc<AtomicBool>,
    populated: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl Populator {
    /// Starts populating `regions`, or returns `None` when they are too small to be worth a
    /// thread or no thread can be started.
    pub fn start(regions: FreeRegions) -> Option<Populator> {
        if regions.bytes() < LEAST_WORTH_POPULATING {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let populated = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, populated) = (Arc::clone(&stop), Arc::clone(&populated));
            std::thread::Builder::new()
                .name("populate".into())
                .spawn(move || populate(&regions, &stop, &populated))
                .ok()?
        };
        Some(Populator {
            stop,
            populated,
            thread,
        })
    }

    /// Stops the helper, waits for it, and returns the bytes it populated.
    pub fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.populated.load(Ordering::Relaxed)
    }
}

/// Faults in `regions` step by step until done, refused, or told to stop.
fn populate(regions: &FreeRegions, stop: &AtomicBool, populated: &AtomicUsize) {
    let step = STEP_PAGES * page_size();
    for &(start, bytes) in &regions.runs {
        let mut at = start;
        while at < start + bytes {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let length = step.min(start + bytes - at);
            if !populate_for_writing(at, length) {
                // Not supported by this kernel, or the range is gone: either way more
                // requests would not do better.
                return;
            }
            populated.fetch_add(length, Ordering::Relaxed);
            at += length;
        }
    }
}

#[cfg(target_os = "linux")]
fn populate_for_writing(start: usize, length: usize) -> bool {
    // SAFETY: MADV_POPULATE_WRITE faults pages in as a write would, without changing what they
    // hold: a page already there (the planner wrote it meanwhile) is left as it is. On a range
    // no longer mapped it fails.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            length,
            libc::MADV_POPULATE_WRITE,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn populate_for_writing(_start: usize, _length: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_writable_anonymous_mappings_are_looked_at() {
        let maps = "\
5581d2a00000-5581d2a21000 r--p 00000000 fd:01 1234   /usr/bin/memplan
5581d4000000-5581d8000000 rw-p 00000000 00:00 0      [heap]
7f0000000000-7f0004000000 rw-p 00000000 00:00 0
7f0004000000-7f0008000000 ---p 00000000 00:00 0
7f1000000000-7f1000100000 rw-s 00000000 00:01 99     /dev/zero (deleted)
7f2000000000-7f2000021000 rw-p 00021000 fd:01 5678   /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]
";
        let found: Vec<_> = anonymous_writable_mappings(maps).collect();
        assert_eq!(
            found,
            [
                (0x5581d4000000, 0x5581d8000000),
                (0x7f0000000000, 0x7f0004000000)
            ]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn given_back_pages_are_found_and_populated_without_changing_what_is_there() {
        let page = page_size();
        let pages = 64;
        // SAFETY: a fresh private anonymous mapping, unmapped at the end of the test.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(start, libc::MAP_FAILED);
        let start = start as usize;
        // SAFETY: the mapping is `pages * page` bytes, readable and writable.
        let memory = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, pages * page) };
        memory.fill(7);
        // Pages 10..20 and 40..64 given back, as malloc_trim does.
        for (first, end) in [(10, 20), (40, 64)] {
            // SAFETY: within the mapping.
            let given_back = unsafe {
                libc::madvise(
                    (start + first * page) as *mut libc::c_void,
                    (end - first) * page,
                    libc::MADV_DONTNEED,
                )
            };
            assert_eq!(given_back, 0);
        }
        let mut runs = Vec::new();
        push_absent_runs(start, start + pages * page, &mut runs);
        assert_eq!(
            runs,
            [
                (start + 10 * page, 10 * page),
                (start + 40 * page, 24 * page)
            ]
        );

        let regions = FreeRegions { runs };
        let (stop, populated) = (AtomicBool::new(false), AtomicUsize::new(0));
        populate(&regions, &stop, &populated);
        let supported = populated.load(Ordering::Relaxed) > 0;
        let mut after = Vec::new();
        push_absent_runs(start, start + pages * page, &mut after);
        if supported {
            assert_eq!(populated.load(Ordering::Relaxed), 34 * page);
            assert!(after.is_empty(), "still absent: {after:?}");
        }
        // Populating never changes contents: kept pages keep theirs, given-back ones read 0.
        assert!(memory[..10 * page].iter().all(|&byte| byte == 7));
        assert!(memory[10 * page..20 * page].iter().all(|&byte| byte == 0));
        assert!(memory[20 * page..40 * page].iter().all(|&byte| byte == 7));
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(start as *mut libc::c_void, pages * page) };
    }

    #[test]
    fn a_stopped_helper_populates_nothing_more() {
        let regions = FreeRegions {
            runs: vec![(page_size(), 1 << 30)],
        };
        let (stop, populated) = (AtomicBool::new(true), AtomicUsize::new(0));
        populate(&regions, &stop, &populated);
        assert_eq!(populated.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn small_free_memory_gets_no_helper() {
        let regions = FreeRegions {
            runs: vec![(page_size(), LEAST_WORTH_POPULATING - 1)],
        };
        assert!(Populator::start(regions).is_none());
    }
}
