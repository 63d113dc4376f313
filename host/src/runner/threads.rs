//! Counting the process's threads, to find planners that return while threads they started
//! are still running: code still running after the planner returned could change the plan
//! after memplan checked it (in process), or race with the worker's reply (isolated). A planner
//! must join its threads, and shut down any thread pool, before it returns.

use std::time::Duration;

/// How long a thread that was joined may take to leave the kernel's count.
const SETTLE: Duration = Duration::from_millis(200);

/// The `Threads:` figure of a `/proc/PID/status` text.
pub fn parse_thread_count(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|count| count.trim().parse().ok())
}

/// The threads of this process now, where the system says (Linux); `None` elsewhere.
pub fn count_threads() -> Option<u32> {
    parse_thread_count(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// How many threads beyond `baseline` are still running, by `count`, once threads that were
/// joined have had [`SETTLE`] to go. 0 when `count` cannot tell.
pub fn threads_left_running(baseline: u32, count: impl Fn() -> Option<u32>) -> u32 {
    let started = std::time::Instant::now();
    loop {
        let extra = count().map_or(0, |now| now.saturating_sub(baseline));
        if extra == 0 || started.elapsed() >= SETTLE {
            return extra;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// "left 1 thread running" / "left 3 threads running".
pub fn left_running(threads: u32) -> String {
    format!(
        "left {threads} thread{} running after it returned",
        if threads == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_comes_from_the_status_text() {
        let status = "Name:\tmemplan\nState:\tR (running)\nThreads:\t3\nSigQ:\t0/9\n";
        assert_eq!(parse_thread_count(status), Some(3));
        assert_eq!(parse_thread_count("Name:\tx\n"), None);
    }

    #[test]
    fn threads_that_end_are_waited_for_and_threads_that_run_on_are_counted() {
        // A thread that was joined leaves the count a moment later.
        let counts = std::cell::Cell::new(0);
        let ending = || {
            counts.set(counts.get() + 1);
            Some(if counts.get() < 3 { 5 } else { 4 })
        };
        assert_eq!(threads_left_running(4, ending), 0);
        assert_eq!(counts.get(), 3);
        // One that runs on is still counted after the settling time.
        let started = std::time::Instant::now();
        assert_eq!(threads_left_running(4, || Some(6)), 2);
        assert!(started.elapsed() >= SETTLE);
        // Nothing to count: nothing left.
        assert_eq!(threads_left_running(4, || None), 0);
    }

    #[test]
    fn this_process_has_threads() {
        if cfg!(target_os = "linux") {
            assert!(count_threads().is_some_and(|threads| threads >= 1));
        }
    }

    #[test]
    fn the_message_counts_threads() {
        assert_eq!(left_running(1), "left 1 thread running after it returned");
        assert_eq!(left_running(2), "left 2 threads running after it returned");
    }
}
