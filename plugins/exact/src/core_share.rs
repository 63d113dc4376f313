//! How much of a core a thread is getting: its CPU time over the wall-clock time, since a
//! start. A planner that reckons how long a packing will take from its cost on a calm machine
//! must allow more where other work shares the cores with it: with both cores of the 2-core
//! machine kept busy by two other processes, the one-pass packing of 2,000,000 buffers took
//! 0.63-1.08 s where the planner's thread had had 0.5-0.7 of a core, against 0.30-0.45 s on a
//! calm machine.

use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long a thread must have run before its share of a core is taken as known.
pub(crate) const SHARE_WINDOW: Duration = Duration::from_millis(20);

/// A share of a core from which a thread counts as having a core of its own: on the calm
/// machine the portfolio's thread had 0.96-1.0 of one (0.78-0.96 while the one-pass packing
/// ran as a third thread on two cores); with two busy processes beside it, 0.5-0.8.
const CALM_SHARE: f64 = 0.8;

/// The least share of a core reckoned with.
const MIN_SHARE: f64 = 0.25;

/// The calling thread's CPU time and the wall clock at a start ([`CoreShare::start`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CoreShare {
    wall: Instant,
    cpu: Duration,
    thread: ThreadId,
}

impl CoreShare {
    /// Now, on the calling thread; `None` where its CPU time cannot be read.
    pub(crate) fn start() -> Option<CoreShare> {
        Some(CoreShare {
            wall: Instant::now(),
            cpu: thread_cpu_time()?,
            thread: std::thread::current().id(),
        })
    }

    /// The share of a core the thread that called [`CoreShare::start`] has had since, from
    /// 0.001 to 1, asked on that thread; 0 (not known) on another thread, before
    /// [`SHARE_WINDOW`] has passed (too short a time to tell), or where its CPU time cannot be
    /// read.
    pub(crate) fn share(&self) -> f64 {
        let wall = self.wall.elapsed();
        if wall < SHARE_WINDOW || std::thread::current().id() != self.thread {
            return 0.0;
        }
        let Some(cpu) = thread_cpu_time() else {
            return 0.0;
        };
        let cpu = cpu.saturating_sub(self.cpu);
        (cpu.as_secs_f64() / wall.as_secs_f64()).clamp(0.001, 1.0)
    }
}

/// What takes `calm` on a calm machine, on a thread that has had `share` of a core (0: not
/// known): `calm` where the share is unknown or from [`CALM_SHARE`] up, else `calm` divided by
/// the share squared (at least [`MIN_SHARE`]). Squared, as measured (module documentation):
/// the work gets no more of a core than the thread measured, and its memory traffic shares the
/// caches with the other work's.
pub(crate) fn on_share(calm: Duration, share: f64) -> Duration {
    if share <= 0.0 || share >= CALM_SHARE {
        return calm;
    }
    let share = share.max(MIN_SHARE);
    calm.div_f64(share * share)
}

/// Whether a thread that has had `share` of a core (0: not known) shares the cores with
/// other work: below [`CALM_SHARE`].
pub(crate) fn shares_the_cores(share: f64) -> bool {
    share > 0.0 && share < CALM_SHARE
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
        let sleeper = CoreShare::start().expect("unix threads have a CPU clock");
        assert_eq!(sleeper.share(), 0.0, "too soon to tell");
        std::thread::sleep(SHARE_WINDOW * 3);
        let slept = sleeper.share();
        assert!(slept > 0.0 && slept < 0.2, "{slept}");
        // Asked on another thread: not known.
        assert_eq!(
            std::thread::scope(|s| s.spawn(|| sleeper.share()).join().unwrap()),
            0.0
        );
        // Working, the thread has what the machine gives it: more than it had asleep, and
        // never more than a core.
        let worker = CoreShare::start().unwrap();
        let mut spin = 0u64;
        while worker.wall.elapsed() < SHARE_WINDOW * 2 {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let worked = worker.share();
        assert!(worked > slept && worked <= 1.0, "{worked} after {slept}");
    }

    #[test]
    fn work_takes_longer_by_the_share_squared_only_below_a_calm_share() {
        let calm = Duration::from_millis(400);
        for share in [0.0, CALM_SHARE, 0.95, 1.0] {
            assert_eq!(on_share(calm, share), calm, "{share}");
            assert!(!shares_the_cores(share), "{share}");
        }
        assert_eq!(on_share(calm, 0.5), Duration::from_millis(1600));
        assert_eq!(on_share(calm, 0.7), calm.div_f64(0.49));
        assert_eq!(on_share(calm, 0.01), calm.div_f64(MIN_SHARE * MIN_SHARE));
        assert!(shares_the_cores(0.5) && shares_the_cores(0.79));
    }
}
