//! `--isolate`: running a planner in a child process, so that a plugin that crashes, aborts,
//! exits or hangs takes down only the child.
//!
//! The child is a fork of memplan taken right before the planner call: it already holds the
//! request and the plugin the host loaded and checked, so nothing is encoded, sent, decoded or
//! loaded again (an earlier design started memplan anew and sent the request through a pipe:
//! at 100,000 tensors that cost more than the planning). The child runs the planner with its
//! host context (logs to a pipe memplan copies to its stderr, [`LogRelay`]; deadline from
//! `--timeout`), writes to a pipe
//! the line [`STARTED_LINE`] when it calls the planner, then one [`WorkerReply`] in binary
//! form ([`wire`]), and ends with `_exit`, never returning into memplan's code. Its stdout
//! points at stderr, so that whatever a plugin prints cannot corrupt memplan's output.
//!
//! The host reads the pipe on a thread (a large reply would otherwise fill the pipe while the
//! host waits). As in-process, `--timeout` counts from the planner call: the host kills the
//! child at the started line plus `--timeout` plus the grace period of
//! [`run`](super::run) (so that a cooperative planner can still report that it stopped); the
//! start gets [`STARTUP_ALLOWANCE`] on top. How the child ended (signal, exit status, time
//! limit, missing or garbled reply) becomes an exit-4 error naming the planner and its file.
//!
//! Forking is safe here: memplan runs planners from its main thread, and the only other
//! threads that may exist then (a previous run's pipe reader finishing, a disarmed watchdog)
//! hold no lock the child needs (glibc's allocator makes its own locks safe across fork); the
//! child only calls the planner, writes and exits.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use memplan_plugin_api::{MemoryPlan, PlanError, PlanRequest, PlannerEntry};

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod sandbox;
pub mod wire;
pub mod worker_memory;

use super::crash::signal_meaning;
use super::run::{call_planner, grace_period, PlannerFn, RunLimits};
use crate::error::{Error, Result};
use crate::printable::escape_hidden;

/// Which planners run in a worker process (`--isolate=WHEN`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// Every planner in process (`--isolate=never`): fastest, and a trusted planner keeps the
    /// user's rights.
    Never,
    /// Every planner in a sandboxed worker (`--isolate`, `--isolate=always`).
    Always,
    /// Planners from outside memplan's installation in a sandboxed worker, memplan's own in
    /// process (the default).
    #[default]
    Auto,
}

/// The default `--plan-memory-limit`: half of the machine's physical memory (at least 1 GiB).
/// A planner that needs more is most likely broken; one that really does can be given more.
pub fn default_memory_limit() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = u64::try_from(pages)
        .unwrap_or(0)
        .saturating_mul(u64::try_from(page_size).unwrap_or(0));
    (physical / 2).max(1 << 30)
}

/// What the child writes on its pipe, before its reply, when it calls the planner.
pub const STARTED_LINE: &str = "started";

/// With `--timeout`, how long the child may take to reach the planner call before the
/// planner's own time begins.
pub const STARTUP_ALLOWANCE: Duration = Duration::from_secs(10);

/// How long to wait for the child to exit once its reply pipe has closed (a grandchild the
/// plugin started could hold the pipe open instead).
const REPLY_AFTER_EXIT: Duration = Duration::from_millis(500);

/// How long memplan waits for the relay to pass on what a worker logged once the worker is
/// done: at once, normally (the worker's end is closed), but the relay escapes and tags what
/// is left in the pipe (up to its megabyte) first, which takes time on a loaded machine; the
/// bound is for a grandchild of the planner's holding the pipe open.
const LOG_DRAIN: Duration = Duration::from_secs(5);

/// What the child writes on its pipe after the started line ([`wire::write_reply`]).
#[derive(Debug)]
pub enum WorkerReply {
    /// The planner's plan.
    Plan(MemoryPlan),
    /// The planner's own error.
    Error(PlanError),
    /// The child could not run the planner, or stopped it (threads left running), and says
    /// why. The host reports it as the planner's failure (exit 4) whatever it says: the
    /// planner's code shares the worker's memory and pipe, so a reply can always be forged by
    /// it, and must never choose memplan's exit code or speak as memplan.
    Failed { message: String },
    /// The sandbox stopped the planner at a system call it may not make.
    Violation(Violation),
}

/// A system call the sandbox stopped: its number, the system-call interface it came through
/// (an `AUDIT_ARCH_*` value) and its first two arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    pub syscall: u32,
    pub arch: u32,
    pub args: [u64; 2],
}

/// The most threads a worker may run at once (its own main thread included). A planner that
/// starts more is stopped: 2,000 threads kept alive would otherwise weigh on the whole
/// machine. memplan counts them every [`THREAD_WATCH_PERIOD`] while the worker runs (the
/// kernel's per-user process limit cannot do it: it counts every process of the user, and
/// does not apply to root).
pub const MAX_WORKER_THREADS: u32 = 256;

/// How often memplan counts a worker's threads.
const THREAD_WATCH_PERIOD: Duration = Duration::from_millis(5);

/// The most bytes memplan reads from a worker running a planner on `request`: the started
/// line and the largest reply a plan for it can take (one allocation per tensor, an arena per
/// role and pair of memories; see [`wire::reply_bound`]). A worker that writes more is
/// stopped.
pub fn reply_limit(request: &PlanRequest) -> usize {
    let (tensors, memories) = reply_counts(request);
    (STARTED_LINE.len() + 1).saturating_add(wire::reply_bound(memories, tensors))
}

/// The most allocations and arenas a plan for `request` may have in its reply: one allocation
/// per tensor, one arena per role, memory and source memory.
fn reply_counts(request: &PlanRequest) -> (usize, usize) {
    let memories = request.memories.len().max(1);
    (
        request.tensors.len(),
        memories.saturating_mul(memories).saturating_mul(3),
    )
}

/// Sizes in messages, in one unit system (binary, as `--plan-memory-limit` reads them):
/// "12.5 GiB", "512.0 MiB", "4096 bytes".
pub fn size_text(count: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if count >= GIB {
        format!("{:.1} GiB", count as f64 / GIB as f64)
    } else if count >= MIB {
        format!("{:.1} MiB", count as f64 / MIB as f64)
    } else {
        format!("{count} bytes")
    }
}

/// Where the worker finds the planner's code.
#[derive(Clone, Copy)]
pub enum WorkerCode<'a> {
    /// Loaded in memplan's process before the fork (a shipped planner under `--isolate`).
    Loaded(&'a PlannerEntry),
    /// In a plugin file memplan has not loaded (a third-party one): the worker loads it itself,
    /// inside its sandbox, from the file open at descriptor `fd`, by calling `load` with the
    /// path that names that descriptor in the worker.
    Load {
        fd: std::os::fd::RawFd,
        load: &'a dyn Fn(&std::path::Path) -> std::result::Result<PlannerFn, String>,
    },
}

/// One planner run to do in a child process.
#[derive(Clone, Copy)]
pub struct WorkerJob<'a> {
    pub planner: &'a str,
    /// The plugin file, for messages.
    pub origin: &'a str,
    pub code: WorkerCode<'a>,
    /// `--timeout`: handed to the child's host context; the host kills the child when the
    /// planner has run this plus the grace period.
    pub limits: &'a RunLimits,
    /// `--plan-memory-limit`: bytes the planner may allocate in the sandboxed child.
    pub memory_limit: u64,
}

impl WorkerJob<'_> {
    /// "planner `NAME` (FILE)", the subject of every message about this run.
    fn subject(&self) -> String {
        format!("planner `{}` ({})", self.planner, self.origin)
    }
}

/// Runs `job` on `request` in a child process and returns the planner's own answer. Every way
/// the child can fail — crash, exit, time limit, no reply — is an error (exit 4 unless the
/// child reported another code), and memplan keeps running.
pub fn plan_in_worker(
    job: &WorkerJob,
    request: &PlanRequest,
) -> Result<Result<MemoryPlan, PlanError>> {
    let started = Instant::now();
    let (reply_in, reply_out) = worker_pipe()?;
    let (log_in, log_out) = worker_pipe()?;
    let child = fork_child(job, request, reply_in, reply_out, log_out)?;
    let log = LogRelay::start(log_in, job.planner);
    tracing::debug!("started worker process {} for {}", child.pid, job.subject());

    let (events, worker_events) = mpsc::channel();
    let reader = child.reply.try_clone().map_err(|error| {
        Error::internal(format!("--isolate: cannot read the worker's pipe: {error}"))
    })?;
    let limit = reply_limit(request);
    std::thread::spawn(move || read_worker_output(std::fs::File::from(reader), limit, events));
    // Made while the worker plans; the reply's allocations are decoded into it.
    let room = wire::AllocationRoom::prepared(request.tensors.len());

    // The reply pipe closes when the child exits (normally or not), so waiting on it is
    // waiting on the child; meanwhile its threads are counted every THREAD_WATCH_PERIOD.
    // `next_event` gives `Ok(None)` when the reader is gone without a word (cannot happen: it
    // always sends `Finished`), `Err(Stop::Deadline)` when the deadline passed and
    // `Err(Stop::Threads(n))` when the worker runs more than MAX_WORKER_THREADS threads.
    let time_limit = job
        .limits
        .timeout
        .map(|timeout| timeout.saturating_add(grace_period(timeout)));
    let next_event = |deadline: Option<Instant>| loop {
        let now = Instant::now();
        if deadline.is_some_and(|deadline| now >= deadline) {
            return Err(Stop::Deadline);
        }
        let wait = deadline.map_or(THREAD_WATCH_PERIOD, |deadline| {
            deadline.duration_since(now).min(THREAD_WATCH_PERIOD)
        });
        match worker_events.recv_timeout(wait) {
            Ok(event) => return Ok(Some(event)),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(threads) = child.threads().filter(|&n| n > MAX_WORKER_THREADS) {
                    return Err(Stop::Threads(threads));
                }
            }
        }
    };
    let startup_deadline =
        time_limit.and_then(|limit| started.checked_add(limit.saturating_add(STARTUP_ALLOWANCE)));
    let mut kill_at = startup_deadline;
    let mut planner_started = None;
    let reply = loop {
        match next_event(kill_at) {
            Ok(Some(WorkerOutput::Started)) => {
                let now = Instant::now();
                planner_started = Some(now);
                kill_at = time_limit.and_then(|limit| now.checked_add(limit));
            }
            Ok(Some(WorkerOutput::Finished(reply))) => {
                if let Some(planner_started) = planner_started {
                    tracing::debug!(
                        "worker {}: started planning {:.1} ms after the fork, its reply was \
                         read {:.1} ms later",
                        child.pid,
                        (planner_started - started).as_secs_f64() * 1e3,
                        planner_started.elapsed().as_secs_f64() * 1e3
                    );
                }
                break Some(reply);
            }
            Ok(Some(WorkerOutput::TooLarge)) => {
                child.kill_and_reap();
                log.finish();
                return Err(Error::plugin(format!(
                    "{} wrote more than {} on its reply pipe, more than any reply to this \
                     request ({} tensors) can take, and was stopped; memplan itself is \
                     unaffected. Report this to the planner's author, or choose another planner",
                    job.subject(),
                    size_text(limit as u64),
                    request.tensors.len()
                )));
            }
            Ok(None) => break None,
            Err(Stop::Threads(threads)) => {
                child.kill_and_reap();
                log.finish();
                return Err(Error::plugin(format!(
                    "{} was stopped by the sandbox: it ran {threads} threads at once, more \
                     than the {MAX_WORKER_THREADS} a sandboxed planner may run; memplan itself \
                     is unaffected. A planner should start about one thread per core",
                    job.subject()
                )));
            }
            Err(Stop::Deadline) => {
                child.kill_and_reap();
                log.finish();
                let timeout = job.limits.timeout.unwrap_or_default().as_secs_f64();
                return Err(Error::plugin(match planner_started {
                    Some(planner_started) => format!(
                        "{} did not finish within the time limit of {timeout} s (--timeout) \
                         and was stopped: memplan killed its worker process after {:.1} s of \
                         planning. Give it more time or choose a faster planner",
                        job.subject(),
                        planner_started.elapsed().as_secs_f64()
                    ),
                    None => format!(
                        "{}: its worker process did not even start planning within {:.1} s \
                         and was killed",
                        job.subject(),
                        started.elapsed().as_secs_f64()
                    ),
                }));
            }
        }
    };
    let reply = match reply {
        Some(Ok(bytes)) => bytes,
        Some(Err(error)) => {
            return Err(Error::plugin(format!(
                "{}: cannot read the worker's reply: {error}",
                job.subject()
            )))
        }
        None => Vec::new(),
    };
    let decoding = Instant::now();
    let decoded = wire::decode_reply_into(&reply, room);
    tracing::debug!(
        "reply of {} bytes decoded in {:.1} ms",
        reply.len(),
        decoding.elapsed().as_secs_f64() * 1e3
    );
    // A whole plan or planner error is the last thing the worker writes before it exits, so
    // its exit status can add nothing: the host goes on while the worker's memory is torn
    // down (15 ms at a million tensors), and a thread reaps it. Anything else is read
    // together with how the worker ended.
    let answer = match decoded {
        Ok(WorkerReply::Plan(plan)) => Some(Ok(plan)),
        Ok(WorkerReply::Error(error)) => Some(Err(error)),
        _ => None,
    };
    if let Some(answer) = answer {
        log.finish();
        let subject = job.subject();
        std::thread::spawn(move || {
            let ending = child.wait_for_exit(None);
            log_ending(&subject, ending.as_ref().copied(), started);
        });
        return Ok(answer);
    }
    let ending = child.wait_for_exit(kill_at);
    log.finish();
    log_ending(&job.subject(), ending.as_ref().copied(), started);
    interpret(&job.subject(), ending?, &reply, job.memory_limit)
}

/// Logs how the worker for `subject`, started at `started`, ended.
fn log_ending(subject: &str, ending: std::result::Result<Ending, &Error>, started: Instant) {
    match ending {
        Ok(ending) => tracing::debug!(
            "worker for {subject} ended ({}) {:.3} s after the fork, peak memory {} KiB",
            ending.status,
            started.elapsed().as_secs_f64(),
            ending.peak_kib.unwrap_or(0)
        ),
        Err(error) => tracing::debug!("worker for {subject}: {error}"),
    }
}

/// What the worker writes on its standard error, passed on to memplan's.
///
/// The worker may not make any file grow (see [`sandbox`]), so when memplan's standard error is
/// a file (`memplan plan ... 2> build.log`) the worker's log lines cannot go there directly:
/// the first one would end it with `SIGXFSZ`. Its standard error is a pipe instead, which a
/// thread of memplan copies to its own. What the planner writes there is its own, raw writes
/// included: every line is passed on with `[planner NAME] ` in front and its control
/// characters escaped ([`crate::printable`]), so that it can neither drive the terminal nor
/// pass for a line of memplan's (`memplan: error: ...`).
struct LogRelay {
    done: mpsc::Receiver<()>,
}

impl LogRelay {
    fn start(log: OwnedFd, planner: &str) -> LogRelay {
        let (finished, done) = mpsc::channel();
        let prefix = format!("[planner {}] ", escape_hidden(planner));
        std::thread::spawn(move || {
            let mut log = std::fs::File::from(log);
            let mut relay = LineRelay::new(prefix);
            let mut buffer = vec![0u8; 64 << 10];
            loop {
                match log.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        let text = relay.push(&buffer[..read]);
                        let _ = std::io::stderr().write_all(text.as_bytes());
                    }
                }
            }
            let _ = std::io::stderr().write_all(relay.finish().as_bytes());
            let _ = finished.send(());
        });
        LogRelay { done }
    }

    /// Waits until everything the worker logged is passed on: the worker closes its end
    /// before it writes its reply, and it has ended on every other path, so this is at once
    /// but for a short bound in case something in the worker still holds the pipe open.
    fn finish(self) {
        let _ = self.done.recv_timeout(LOG_DRAIN);
    }
}

/// A worker's log made printable a chunk at a time, each line tagged with a prefix.
///
/// Only whole lines are passed on (each in one write): memplan's own log lines go to the same
/// standard error from other threads, and a line of the worker's cut where a pipe read
/// happened to end would have one of them in its middle. A line longer than
/// [`LONGEST_HELD_LINE`] is passed on in parts rather than held without bound.
struct LineRelay {
    prefix: String,
    text: crate::printable::PrintableStream,
    at_line_start: bool,
    /// Printable text of a line not ended yet.
    held: String,
}

/// The most of an unfinished line [`LineRelay`] holds back (bytes).
const LONGEST_HELD_LINE: usize = 64 << 10;

impl LineRelay {
    fn new(prefix: String) -> LineRelay {
        LineRelay {
            prefix,
            text: Default::default(),
            at_line_start: true,
            held: String::new(),
        }
    }

    /// What to print for `chunk` of the log: the lines it ends.
    fn push(&mut self, chunk: &[u8]) -> String {
        self.held.push_str(&self.text.push(chunk));
        let whole = match self.held.rfind('\n') {
            Some(end) => end + 1,
            None if self.held.len() > LONGEST_HELD_LINE => self.held.len(),
            None => return String::new(),
        };
        let rest = self.held.split_off(whole);
        let lines = std::mem::replace(&mut self.held, rest);
        self.tag(&lines)
    }

    /// What to print at the end of the log: a line it did not end is ended.
    fn finish(&mut self) -> String {
        let rest = self.text.finish();
        self.held.push_str(&rest);
        let held = std::mem::take(&mut self.held);
        let mut text = self.tag(&held);
        if !self.at_line_start {
            text.push('\n');
        }
        text
    }

    fn tag(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + self.prefix.len());
        for piece in text.split_inclusive('\n') {
            if self.at_line_start {
                out.push_str(&self.prefix);
            }
            out.push_str(piece);
            self.at_line_start = piece.ends_with('\n');
        }
        out
    }
}

/// A pipe between memplan and the worker: (read end, write end), both closed on exec.
fn worker_pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills `fds` with two new descriptors, which we own from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::internal(format!(
            "--isolate: cannot create a pipe for the worker: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    widen_pipe(&read);
    Ok((read, write))
}

/// Why the host stops waiting for a worker before it ends.
enum Stop {
    /// The time limit passed.
    Deadline,
    /// The worker runs this many threads, more than [`MAX_WORKER_THREADS`].
    Threads(u32),
}

/// The child process, from the host's side.
struct ForkedChild {
    pid: libc::pid_t,
    /// The read end of the reply pipe.
    reply: OwnedFd,
}

/// How a child ended.
#[derive(Clone, Copy, Debug)]
struct Ending {
    status: ExitStatus,
    /// The most memory the child held (resident, KiB), when known.
    peak_kib: Option<u64>,
    /// memplan killed it (time limit, or a closed pipe with the child still running).
    killed_by_memplan: bool,
}

impl ForkedChild {
    /// How many threads the child runs now (`None` once it is gone, or where `/proc` cannot
    /// tell).
    fn threads(&self) -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        super::threads::parse_thread_count(&status)
    }

    /// Waits for a child whose reply pipe has closed. It normally has exited already; one that
    /// closed the pipe but keeps running is killed at `kill_at` (or after a short wait when
    /// there is no time limit, since without its reply pipe it can no longer answer).
    fn wait_for_exit(&self, kill_at: Option<Instant>) -> Result<Ending> {
        let give_up = kill_at.unwrap_or_else(|| Instant::now() + REPLY_AFTER_EXIT);
        loop {
            match self.reap(libc::WNOHANG) {
                Ok(Some(ending)) => return Ok(ending),
                Ok(None) if Instant::now() >= give_up => return Ok(self.kill_and_reap()),
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(error) => {
                    return Err(Error::internal(format!(
                        "cannot wait for the worker process: {error}"
                    )))
                }
            }
        }
    }

    /// Reaps the child if it has ended (or waits for it without `WNOHANG`), with its peak
    /// memory.
    fn reap(&self, flags: libc::c_int) -> std::io::Result<Option<Ending>> {
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, with valid pointers for its status and usage.
        match unsafe { libc::wait4(self.pid, &mut status, flags, &mut usage) } {
            pid if pid == self.pid => Ok(Some(Ending {
                status: ExitStatus::from_raw(status),
                peak_kib: u64::try_from(usage.ru_maxrss).ok().filter(|&kib| kib > 0),
                killed_by_memplan: false,
            })),
            0 => Ok(None),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Kills the child (if it still runs) and reaps it.
    fn kill_and_reap(&self) -> Ending {
        // SAFETY: signalling our own child; an error means it is gone already.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let ending = self.reap(0).ok().flatten().unwrap_or(Ending {
            status: ExitStatus::from_raw(libc::SIGKILL),
            peak_kib: None,
            killed_by_memplan: true,
        });
        Ending {
            killed_by_memplan: true,
            ..ending
        }
    }
}

/// Forks the child that runs `job` on `request` (see the module docs) and returns it.
fn fork_child(
    job: &WorkerJob,
    request: &PlanRequest,
    reply_in: OwnedFd,
    reply_out: OwnedFd,
    log_out: OwnedFd,
) -> Result<ForkedChild> {
    let sandbox = SandboxSetup::prepare(job);
    // What Rust buffered for stdout and stderr would otherwise be written twice.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: memplan forks from its main thread while no other thread holds a lock the child
    // needs (see the module docs), so the child's copy of memory is consistent; the child only
    // runs `run_child`, which never returns.
    match unsafe { libc::fork() } {
        -1 => Err(Error::internal(format!(
            "--isolate: cannot start a worker process: {}",
            std::io::Error::last_os_error()
        ))),
        0 => {
            drop(reply_in);
            log_to(log_out);
            run_child(job, request, reply_out, parent, &sandbox)
        }
        pid => {
            drop(reply_out);
            drop(log_out);
            Ok(ForkedChild {
                pid,
                reply: reply_in,
            })
        }
    }
}

/// The child's whole life: set up, enter the sandbox, say it starts, call the planner, write
/// the reply, exit. Every path ends in `_exit`, so the child never returns into the host's
/// code, runs no destructor and flushes nothing of the host's.
fn run_child(
    job: &WorkerJob,
    request: &PlanRequest,
    reply_out: OwnedFd,
    parent: libc::pid_t,
    sandbox: &SandboxSetup,
) -> ! {
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        die_with_the_parent(parent);
        // Fresh pages for the planner, faulted in ahead of it (see `worker_memory`).
        worker_memory::give_back_freed_memory();
        let free_regions = worker_memory::FreeRegions::of_this_process();
        // The environment is emptied inside (so a Rust plugin's panic prints no backtrace,
        // which would open files, and a planner reads none of the user's variables).
        let plugin_fd = match job.code {
            WorkerCode::Loaded(_) => None,
            WorkerCode::Load { fd, .. } => Some(fd),
        };
        let (mut out, entered) = sandbox.enter(reply_out, plugin_fd);
        let fail = |out: &mut std::fs::File, message: String| {
            end_log();
            match wire::write_reply(&WorkerReply::Failed { message }, out) {
                Ok(()) => 0,
                Err(_) => 1,
            }
        };
        let mut entered = match entered {
            Ok(entered) => entered,
            Err(problem) => {
                let message = format!(
                    "memplan could not sandbox its worker process ({problem}), so the planner \
                     was not run. Run it in process with --isolate=never if you trust it"
                );
                return fail(&mut out, message);
            }
        };
        // A third-party file is loaded here, its constructors running under the loading
        // stage of the sandbox; then the sandbox is sealed.
        let code = match job.code {
            WorkerCode::Loaded(entry) => PlannerFn::Rust(*entry),
            WorkerCode::Load { load, .. } => match load(&SandboxSetup::plugin_path(plugin_fd)) {
                Ok(code) => code,
                Err(reason) => return fail(&mut out, format!("cannot be loaded: {reason}")),
            },
        };
        if let Err(problem) = entered.seal() {
            let message = format!(
                "memplan could not sandbox its worker process ({problem}), so the planner was \
                 not run. Run it in process with --isolate=never if you trust it"
            );
            return fail(&mut out, message);
        }
        tracing::debug!(
            "worker for {}: sandbox layers: {}",
            job.subject(),
            entered.layers()
        );
        if writeln!(out, "{STARTED_LINE}").is_err() {
            return 1;
        }
        let populator = worker_memory::Populator::start(free_regions);
        let reply = match call_planner(job.planner, &code, request, job.limits) {
            Ok(plan) => within_reply_limit(plan, request),
            Err(error) => WorkerReply::Error(error),
        };
        if let Some(populator) = populator {
            let populated = populator.finish();
            tracing::debug!(
                "worker: {:.1} MB of free memory populated ahead of the planner",
                populated as f64 / 1e6
            );
        }
        let reply = match SandboxSetup::lingering_threads() {
            0 => reply,
            threads => WorkerReply::Failed {
                message: format!(
                    "{}, and was stopped; a planner must join the threads it starts (and shut \
                     down any thread pool) before it returns",
                    super::threads::left_running(threads)
                ),
            },
        };
        end_log();
        match wire::write_reply(&reply, &mut out) {
            Ok(()) => 0,
            Err(_) => 1,
        }
    }))
    .unwrap_or(1);
    // SAFETY: _exit ends the process at once; nothing of the host's state is touched.
    unsafe { libc::_exit(code) }
}

/// The reply for `plan`: the plan, or a failure when it has more allocations or arenas than a
/// plan for `request` can have, whose reply the host would not read ([`reply_limit`]).
fn within_reply_limit(plan: MemoryPlan, request: &PlanRequest) -> WorkerReply {
    let (tensors, arenas) = reply_counts(request);
    if plan.allocations.len() <= tensors && plan.arenas.len() <= arenas {
        return WorkerReply::Plan(plan);
    }
    WorkerReply::Failed {
        message: format!(
            "returned a plan of {} allocations in {} arenas for {} tensors in {} memories; a \
             plan has one allocation per tensor and at most one arena per role and memory",
            plan.allocations.len(),
            plan.arenas.len(),
            request.tensors.len(),
            request.memories.len()
        ),
    }
}

/// Makes `log` the child's standard error ([`LogRelay`]).
fn log_to(log: OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 onto the process's own standard error from a descriptor it owns; the
    // original is closed when `log` drops.
    unsafe { libc::dup2(log.as_raw_fd(), 2) };
}

/// Closes the child's standard error and output (the latter is standard error too where there
/// is no sandbox) before the reply, so that memplan's [`LogRelay`] is done once the reply is
/// read. Nothing is logged after this.
fn end_log() {
    // SAFETY: closing the process's own standard descriptors; nothing uses them from here on.
    unsafe {
        libc::close(1);
        libc::close(2);
    }
}

/// The sandbox of the child where there is one (Linux on x86-64 and AArch64; see
/// [`sandbox`]).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
struct SandboxSetup(sandbox::Preparation);

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
impl SandboxSetup {
    fn prepare(job: &WorkerJob) -> SandboxSetup {
        let time_limit = job.limits.timeout.map_or(Duration::MAX, |timeout| {
            timeout.saturating_add(grace_period(timeout))
        });
        SandboxSetup(sandbox::Preparation::new(sandbox::SandboxLimits::new(
            job.memory_limit,
            time_limit,
        )))
    }

    fn enter(
        &self,
        reply: OwnedFd,
        plugin: Option<std::os::fd::RawFd>,
    ) -> (std::fs::File, std::result::Result<sandbox::Entered, String>) {
        sandbox::enter(reply, &self.0, plugin)
    }

    /// The path the worker loads its plugin file by.
    fn plugin_path(_fd: Option<std::os::fd::RawFd>) -> std::path::PathBuf {
        sandbox::plugin_path()
    }

    fn lingering_threads() -> u32 {
        sandbox::lingering_threads()
    }
}

/// Elsewhere the worker is a separate process without a sandbox: its stdout points at
/// stderr, so that whatever a plugin prints cannot corrupt memplan's output.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
struct SandboxSetup;

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
impl SandboxSetup {
    fn prepare(_job: &WorkerJob) -> SandboxSetup {
        SandboxSetup
    }

    fn enter(
        &self,
        reply: OwnedFd,
        _plugin: Option<std::os::fd::RawFd>,
    ) -> (std::fs::File, std::result::Result<Unsandboxed, String>) {
        // SAFETY: dup2 on the process's own standard descriptors; 2 is open for the whole run.
        unsafe { libc::dup2(2, 1) };
        (std::fs::File::from(reply), Ok(Unsandboxed))
    }

    /// The path the worker loads its plugin file by: its descriptor, where the system names
    /// one (`/dev/fd/N`).
    fn plugin_path(fd: Option<std::os::fd::RawFd>) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/dev/fd/{}", fd.unwrap_or(-1)))
    }

    fn lingering_threads() -> u32 {
        0
    }
}

/// A worker without a sandbox (elsewhere than Linux on x86-64 and AArch64).
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
struct Unsandboxed;

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
impl Unsandboxed {
    fn seal(&mut self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn layers(&self) -> String {
        "none (no sandbox on this system): a separate process".to_string()
    }
}

/// Makes the child die with memplan: a child whose parent was killed (`kill -TERM`, a terminal
/// closed) would otherwise be re-parented to init and go on running a planner nobody waits
/// for. Linux's parent-death signal fires when the thread that forked the child ends, which is
/// memplan's main thread (planners are run from it). Elsewhere the child stops at its own
/// deadline, if any.
fn die_with_the_parent(parent: libc::pid_t) {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl and getppid have no memory-safety preconditions.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        // memplan died before the signal was set: nobody would send it now.
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
}

/// What the host hears from a worker's reply pipe.
enum WorkerOutput {
    /// The started line: the planner is being called.
    Started,
    /// Everything after it, up to the end of the pipe.
    Finished(std::io::Result<Vec<u8>>),
    /// More than the reply limit: the reader stopped reading.
    TooLarge,
}

/// Reads the worker's reply pipe: the started line, then the reply, at most `limit` bytes in
/// all (past it: `TooLarge`, and the rest is never read). A worker that dies before calling
/// the planner produces only `Finished` with what it wrote (normally nothing).
fn read_worker_output(pipe: std::fs::File, limit: usize, events: mpsc::Sender<WorkerOutput>) {
    // One byte more than allowed tells "exactly the limit" from "more".
    let mut pipe = BufReader::new(pipe.take(limit as u64 + 1));
    let mut first_line = Vec::new();
    let mut rest = Vec::new();
    let result = pipe
        .read_until(b'\n', &mut first_line)
        .and_then(|_| {
            if first_line.strip_suffix(b"\n") == Some(STARTED_LINE.as_bytes()) {
                let _ = events.send(WorkerOutput::Started);
            } else {
                rest.extend_from_slice(&first_line);
            }
            pipe.read_to_end(&mut rest)
        })
        .map(|_| rest);
    // The whole allowance and its extra byte were taken: the worker wrote more.
    let _ = events.send(if pipe.get_ref().limit() == 0 {
        WorkerOutput::TooLarge
    } else {
        WorkerOutput::Finished(result)
    });
}

/// The planner's answer from the worker's exit status and reply; `memory_limit` is the
/// sandbox's `--plan-memory-limit`.
fn interpret(
    subject: &str,
    ending: Ending,
    reply: &[u8],
    memory_limit: u64,
) -> Result<Result<MemoryPlan, PlanError>> {
    let status = ending.status;
    let peak = ending
        .peak_kib
        .map(|kib| format!(" (it held up to {})", size_text(kib.saturating_mul(1024))))
        .unwrap_or_default();
    if let Some(signal) = status.signal() {
        #[cfg(target_os = "linux")]
        if signal == libc::SIGXCPU || signal == libc::SIGSYS {
            return Err(Error::plugin(format!(
                "{subject} was stopped by the sandbox: {}{peak}; memplan itself is unaffected",
                if signal == libc::SIGXCPU {
                    "it used up the CPU time its worker process may use (its time limit on \
                     every core)"
                } else {
                    "it made a system call the sandbox does not allow while it blocked \
                     signals, so memplan cannot say which"
                }
            )));
        }
        // SIGKILL that memplan did not send: on Linux, the kernel's out-of-memory killer.
        if signal == libc::SIGKILL && !ending.killed_by_memplan {
            return Err(Error::plugin(format!(
                "{subject} ran out of memory, most likely: its worker process was killed by \
                 signal {}, which memplan did not send (the kernel's out-of-memory killer sends \
                 it){peak}; memplan itself is unaffected. Give the planner a smaller problem or \
                 the machine more memory, or choose another planner",
                signal_name(signal)
            )));
        }
        // A failed allocation aborts a Rust planner (and says so on stderr first); a
        // segmentation fault is a bug of the planner's, whatever its memory limit.
        let out_of_memory = if signal == libc::SIGABRT {
            format!(
                "; if it printed \"memory allocation of N bytes failed\" above, it ran out of \
                 its memory limit of {} (--plan-memory-limit)",
                size_text(memory_limit)
            )
        } else {
            String::new()
        };
        return Err(Error::plugin(format!(
            "{} crashed: its worker process was killed by signal {}{}{peak}{out_of_memory}; \
             memplan itself is unaffected. Report this to the planner's author, or choose \
             another planner",
            subject,
            signal_name(signal),
            if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        )));
    }
    let parsed: Option<WorkerReply> = wire::decode_reply(reply).ok();
    match (status.code(), parsed) {
        (Some(0), Some(WorkerReply::Plan(plan))) => Ok(Ok(plan)),
        (Some(0), Some(WorkerReply::Error(error))) => Ok(Err(error)),
        // Whatever the worker says, it says for the planner: its code could have written it.
        (Some(0), Some(WorkerReply::Failed { message })) => Err(Error::plugin(format!(
            "{subject}: {}",
            escape_hidden(&message)
        ))),
        (Some(_), Some(WorkerReply::Violation(violation))) => Err(Error::plugin(format!(
            "{subject} was stopped by the sandbox: it {}. Planners from outside memplan's \
             installation run sandboxed (--isolate=auto): no files, network, processes or \
             other programs' memory. Nothing was written. If you trust this planner with your \
             rights, run it with --isolate=never",
            describe_violation(&violation, memory_limit)
        ))),
        (Some(0), None) if reply.is_empty() => Err(Error::plugin(format!(
            "{} ended its worker process (exit status 0) without returning a plan",
            subject
        ))),
        (Some(0), None) => Err(Error::plugin(format!(
            "{}: the worker's reply is not readable ({} bytes starting \"{}\")",
            subject,
            reply.len(),
            escape_hidden(&String::from_utf8_lossy(&reply[..reply.len().min(80)]))
        ))),
        (Some(code), _) => Err(Error::plugin(format!(
            "{} ended its worker process with exit status {code} instead of returning a plan \
             (a plugin must not exit the process)",
            subject
        ))),
        (None, _) => Err(Error::plugin(format!(
            "{}: its worker process ended abnormally ({status})",
            subject
        ))),
    }
}

/// "tried to open a file (openat)", ...
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn describe_violation(violation: &Violation, memory_limit: u64) -> String {
    sandbox::describe(violation, memory_limit)
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn describe_violation(violation: &Violation, _memory_limit: u64) -> String {
    format!("made system call {}", violation.syscall)
}

/// The signal's number, with its conventional name and what it usually means when known
/// ([`signal_meaning`]).
pub fn signal_name(signal: i32) -> String {
    match signal_meaning(signal) {
        Some(name) => format!("{signal}, {name}"),
        None => format!("{signal}"),
    }
}

/// Gives a pipe a 1 MiB buffer (Linux's default limit for unprivileged processes) instead of
/// 64 KiB: the request and the reply of a million tensors are tens of megabytes, and with small
/// buffers the two processes spend their time switching. Best effort: a refusal keeps the
/// default size, which is only slower.
#[cfg(target_os = "linux")]
fn widen_pipe(pipe: &impl std::os::fd::AsRawFd) {
    // SAFETY: F_SETPIPE_SZ only resizes the pipe's buffer; the descriptor is open (borrowed).
    unsafe {
        libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

#[cfg(not(target_os = "linux"))]
fn widen_pipe(_pipe: &impl std::os::fd::AsRawFd) {}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_plugin_api::PlanErrorKind;

    const SUBJECT: &str = "planner `p` (/plugins/libp.so)";
    /// The memory limit of the workers in these tests.
    const LIMIT: u64 = 1 << 30;

    /// An exit status as `waitpid` reports it: `code << 8` for an exit, the signal number
    /// (plus 0x80 for a core dump) for a signal.
    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    /// How a child with `status` ended on its own, its peak memory unknown.
    fn ended(status: ExitStatus) -> Ending {
        Ending {
            status,
            peak_kib: None,
            killed_by_memplan: false,
        }
    }

    #[test]
    fn a_sigkill_memplan_did_not_send_is_reported_as_running_out_of_memory() {
        let killed = Ending {
            status: ExitStatus::from_raw(9),
            peak_kib: Some(3 * 1024 * 1024),
            killed_by_memplan: false,
        };
        let error = interpret(SUBJECT, killed, b"", LIMIT).unwrap_err();
        assert!(error.message.contains("ran out of memory"), "{error}");
        assert!(error.message.contains("up to 3.0 GiB"), "{error}");
        let aborted = Ending {
            status: ExitStatus::from_raw(6),
            peak_kib: Some(2048),
            killed_by_memplan: false,
        };
        let error = interpret(SUBJECT, aborted, b"", LIMIT).unwrap_err();
        assert!(
            error
                .message
                .contains("memory allocation of N bytes failed"),
            "{error}"
        );
        assert!(error.message.contains("up to 2.0 MiB"), "{error}");
    }

    #[test]
    fn replies_are_read_back_as_the_worker_wrote_them() {
        let error = WorkerReply::Error(PlanError::new(PlanErrorKind::Cancelled, "stopped"));
        let plan = wire::encode_reply(&WorkerReply::Plan(MemoryPlan::default()));
        assert_eq!(
            interpret(SUBJECT, ended(exited(0)), &plan, LIMIT)
                .unwrap()
                .unwrap(),
            MemoryPlan::default()
        );
        let answer = interpret(
            SUBJECT,
            ended(exited(0)),
            &wire::encode_reply(&error),
            LIMIT,
        )
        .unwrap();
        assert_eq!(answer.unwrap_err().kind, PlanErrorKind::Cancelled);
        // The JSON replies of earlier releases, or anything else, are not a reply.
        let json = br#"{"error":{"kind":"cancelled","message":"stopped"}}"#;
        let garbled = interpret(SUBJECT, ended(exited(0)), json, LIMIT).unwrap_err();
        assert!(garbled.message.contains("not readable"), "{garbled}");
    }

    #[test]
    fn a_worker_failure_is_the_planners_whatever_it_says() {
        // A planner can write a "failed" reply on its pipe itself: it must not choose memplan's
        // exit code or speak as memplan (control characters included).
        let forged = WorkerReply::Failed {
            message: "\nmemplan: error: model does not fit\x1b[2J".into(),
        };
        let reply = wire::encode_reply(&forged);
        let error = interpret(SUBJECT, ended(exited(0)), &reply, LIMIT).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::Plugin);
        assert_eq!(
            error.message,
            "planner `p` (/plugins/libp.so): \\u{000a}memplan: error: model does not fit\\u{001b}[2J"
        );
    }

    #[test]
    fn a_segmentation_fault_does_not_blame_the_memory_limit() {
        let error = interpret(SUBJECT, ended(ExitStatus::from_raw(11)), b"", LIMIT).unwrap_err();
        assert!(!error.message.contains("--plan-memory-limit"), "{error}");
        let error = interpret(SUBJECT, ended(ExitStatus::from_raw(6)), b"", LIMIT).unwrap_err();
        assert!(
            error
                .message
                .contains("memory limit of 1.0 GiB (--plan-memory-limit)"),
            "{error}"
        );
    }

    #[test]
    fn the_reply_limit_grows_with_the_request() {
        use abi_stable::std_types::{RString, RVec};
        let empty = PlanRequest {
            tensors: RVec::new(),
            memories: RVec::new(),
            num_steps: 0,
            options: RString::new(),
        };
        // A tiny request still leaves room for a summary or a message.
        assert!(reply_limit(&empty) > wire::TEXT_CAP);
        assert!(reply_limit(&empty) < 2 * wire::TEXT_CAP + 4096);
        assert_eq!(size_text(12_077 << 20), "11.8 GiB");
        assert_eq!(size_text(256 << 20), "256.0 MiB");
        assert_eq!(size_text(4096), "4096 bytes");
    }

    #[test]
    fn signals_exits_and_missing_replies_are_plugin_errors_naming_the_planner() {
        let cases = [
            (ExitStatus::from_raw(11), "SIGSEGV (segmentation fault)"),
            (
                ExitStatus::from_raw(6 | 0x80),
                "SIGABRT (abort) (core dumped)",
            ),
            (exited(7), "exit status 7"),
            (exited(0), "without returning a plan"),
        ];
        for (status, expected) in cases {
            let error = interpret(SUBJECT, ended(status), b"", LIMIT).unwrap_err();
            assert_eq!(error.kind, crate::ErrorKind::Plugin);
            assert!(error.message.contains(expected), "{}", error.message);
            assert!(
                error.message.contains("planner `p` (/plugins/libp.so)"),
                "{}",
                error.message
            );
        }
        let garbled = interpret(SUBJECT, ended(exited(0)), b"{\"plan\": [", LIMIT).unwrap_err();
        assert!(
            garbled.message.contains("not readable"),
            "{}",
            garbled.message
        );
    }

    #[test]
    fn a_workers_log_is_tagged_line_by_line_and_cannot_drive_the_terminal() {
        let mut relay = LineRelay::new("[planner p] ".into());
        let mut out = relay.push(b"one\nmemplan: error: fake\x1b[31m");
        // Only whole lines are passed on: the rest waits for its end.
        assert_eq!(out, "[planner p] one\n");
        out += &relay.push(b" still\r\n\n");
        assert_eq!(relay.push(b"last"), "");
        out += &relay.finish();
        assert_eq!(
            out,
            "[planner p] one\n[planner p] memplan: error: fake\\u{001b}[31m still\\u{000d}\n\
             [planner p] \n[planner p] last\n"
        );
    }

    #[test]
    fn a_line_cut_by_a_pipe_read_is_passed_on_whole() {
        // memplan's own log lines are written to the same standard error from other threads:
        // a worker's line written in two parts could get one of them in its middle.
        let mut relay = LineRelay::new("[planner p] ".into());
        assert_eq!(relay.push(b"chatty line 5 of 10 plan"), "");
        assert_eq!(
            relay.push(b"ner=p\nchatty line 6"),
            "[planner p] chatty line 5 of 10 planner=p\n"
        );
        assert_eq!(relay.finish(), "[planner p] chatty line 6\n");
        // A line without end is not held without bound.
        let mut relay = LineRelay::new("[p] ".into());
        let long = vec![b'x'; LONGEST_HELD_LINE + 1];
        let out = relay.push(&long);
        assert_eq!(out.len(), "[p] ".len() + LONGEST_HELD_LINE + 1);
        assert_eq!(relay.push(b"y\n"), "y\n");
    }

    #[test]
    fn unknown_signals_are_shown_by_number() {
        assert_eq!(signal_name(11), "11, SIGSEGV (segmentation fault)");
        assert_eq!(signal_name(63), "63");
    }
}
