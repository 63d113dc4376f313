//! Shared support for memplan's fuzz targets.
//!
//! The readers promise, whatever the bytes: they return an error rather than panic
//! (libFuzzer reports a panic as a crash), and they never allocate more than a small
//! multiple of the input size. Every target runs its reader inside
//! [`within_allocation_bound`], with the counting allocator below installed.

mod allocation;

pub use allocation::{allocation_bound, peak_allocation, within_allocation_bound};

#[global_allocator]
static ALLOCATOR: allocation::CountingAllocator = allocation::CountingAllocator;
