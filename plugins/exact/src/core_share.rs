//! How much of a core a thread is getting: its CPU time over the wall-clock time, since a
//! start. A planner that reckons how long a packing will take from its cost on a core of its
//! own must allow more where other work shares the cores with it: with both cores of the
//! 2-core machine kept busy by other processes, a packing takes two to three times as long.

use std::time::{Duration, Instant};

/// The calling thread's CPU time and the wall clock at a start ([`CoreShare::start`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CoreShare {
    wall: Instant,
    cpu: Duration,
}

impl CoreShare {
    /// Now, on the calling thread; `None` where its CPU time cannot be read.
    pub(crate) fn start() -> Option<CoreShare> {
        Some(CoreShare {
            wall: Instant::now(),
            cpu: thread_cpu_time()?,
        })
    }

    /// The share of a core the calling thread (the one that called [`CoreShare::start`]) has
    /// had since the start, from 0 to 1; `None` before `window` has passed (too short a time
    /// to tell) or where its CPU time cannot be read.
    pub(crate) fn since_start(&self, window: Duration) -> Option<f64> {
        let wall = self.wall.elapsed();
        if wall < window {
            return None;
        }
        let cpu = thread_cpu_time()?.saturating_sub(self.cpu);
        Some((cpu.as_secs_f64() / wall.as_secs_f64()).min(1.0))
    }
}

/// The calling thread's CPU time.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable timespec; the clock id is a constant POSIX names.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    (status == 0).then(|| Duration::new(time.tv_sec as u64, time.tv_nsec as u32))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_thread_that_sleeps_has_little_of_a_core_and_one_that_works_more() {
        let window = Duration::from_millis(30);
        let sleeper = CoreShare::start().expect("unix threads have a CPU clock");
        assert_eq!(sleeper.since_start(window), None, "too soon to tell");
        std::thread::sleep(Duration::from_millis(60));
        let slept = sleeper.since_start(window).expect("known after the window");
        assert!(slept < 0.2, "{slept}");
        // Working, the thread has what the machine gives it: more than it had asleep, and
        // never more than a core.
        let worker = CoreShare::start().unwrap();
        let mut spin = 0u64;
        while worker.since_start(window).is_none() {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let worked = worker.since_start(window).unwrap();
        assert!(worked > slept && worked <= 1.0, "{worked} after {slept}");
    }
}
