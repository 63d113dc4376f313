//! Joining a helper thread that a planner runs on the second core, while this thread goes on
//! answering for the host.
//!
//! The host's context may be asked only on the thread that owns it, so a thread that waits
//! for a helper keeps asking it (and passes a stop request on to the helper) instead of
//! blocking in `join`. The helper unparks the waiting thread when it is done, so the wait
//! costs no more than the helper takes; the poll only bounds how late a stop request is
//! passed on.

use std::thread::ScopedJoinHandle;
use std::time::Duration;

/// How long a waiting thread sleeps between two calls of its `meanwhile`: a stop request
/// reaches the helper at most this late.
const WAIT_POLL: Duration = Duration::from_millis(2);

/// What `helper` returned, once it has: until then `meanwhile` is called about every
/// [`WAIT_POLL`] on this thread. `helper` should unpark this thread when done (else the wait
/// ends up to [`WAIT_POLL`] late). A panic of the helper goes on on this thread.
pub fn join_asking<T>(helper: ScopedJoinHandle<'_, T>, meanwhile: &dyn Fn()) -> T {
    while !helper.is_finished() {
        meanwhile();
        std::thread::park_timeout(WAIT_POLL);
    }
    join_or_resume(helper)
}

/// What `helper` returned; its panic, if it panicked, goes on on this thread (as a panic on
/// this thread would), not as a value the caller must handle.
pub fn join_or_resume<T>(helper: ScopedJoinHandle<'_, T>) -> T {
    match helper.join() {
        Ok(made) => made,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Instant;

    #[test]
    fn the_waiting_thread_passes_a_stop_on_until_the_helper_takes_it() {
        let stop = AtomicBool::new(false);
        let asked = AtomicUsize::new(0);
        let this = std::thread::current();
        let gave_up_at = Instant::now() + Duration::from_secs(5);
        let stopped_by_request = std::thread::scope(|scope| {
            // The helper runs until asked to stop, or gives up after 5 s.
            let helper = scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) && Instant::now() < gave_up_at {
                    std::thread::yield_now();
                }
                this.unpark();
                stop.load(Ordering::Relaxed)
            });
            join_asking(helper, &|| {
                // The host asks to stop on the third question.
                if asked.fetch_add(1, Ordering::Relaxed) + 1 == 3 {
                    stop.store(true, Ordering::Relaxed);
                }
            })
        });
        assert!(stopped_by_request);
        assert!(asked.load(Ordering::Relaxed) >= 3);
    }

    #[test]
    #[should_panic(expected = "helper failed")]
    fn a_helper_panic_goes_on_on_the_joining_thread() {
        std::thread::scope(|scope| {
            let helper = scope.spawn(|| -> u32 { panic!("helper failed") });
            join_or_resume(helper)
        });
    }
}
