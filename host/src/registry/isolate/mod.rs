//! `--isolate`: running a planner in a child process, so that a plugin that crashes, aborts,
//! exits or hangs takes down only the child.
//!
//! The host runs its own executable with the hidden `__plan-worker` subcommand, naming the
//! plugin file, its SHA-256 as the host saw it and the planner. The request goes to the
//! child's stdin in binary form ([`wire`]); on its stdout the worker writes the line
//! [`STARTED_LINE`] when it calls the planner, then one [`WorkerReply`] in binary form. The child's stderr is the host's, so
//! plugin log lines appear as they would in-process. The worker re-applies the trust checks
//! and refuses a file whose hash changed since the host looked at it.
//!
//! Pipes are fed and drained by their own threads (a large request and a large reply would
//! otherwise deadlock on full pipe buffers). As in-process, `--timeout` counts from the
//! planner call: the host kills the child at the started line plus `--timeout` plus the grace
//! period of [`run`](super::run) (so that a cooperative planner can still report that it
//! stopped); starting the worker and loading the plugin get [`STARTUP_ALLOWANCE`] on top (a
//! debug build checks the plugin's type layouts slowly). How the child ended (signal, exit
//! status, time limit, missing or garbled reply) becomes an exit-4 error naming the planner
//! and its file.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use memplan_plugin_api::{MemoryPlan, PlanError, PlanRequest};

pub mod wire;
pub mod worker;

use super::run::grace_period;
use crate::error::{Error, ErrorKind, Result};

/// The hidden subcommand the host runs itself with.
pub const WORKER_SUBCOMMAND: &str = "__plan-worker";

/// What the worker writes on stdout, before its reply, when it calls the planner.
pub const STARTED_LINE: &str = "started";

/// With `--timeout`, how long the worker may take to start and load the plugin before the
/// planner's own time begins.
pub const STARTUP_ALLOWANCE: Duration = Duration::from_secs(10);

/// How long to wait for the reply pipe to close once the worker has exited (a grandchild the
/// plugin started could hold it open).
const REPLY_AFTER_EXIT: Duration = Duration::from_millis(500);

/// What the worker writes on its stdout after the started line ([`wire::encode_reply`]).
#[derive(Debug)]
pub enum WorkerReply {
    /// The planner's plan.
    Plan(MemoryPlan),
    /// The planner's own error.
    Error(PlanError),
    /// The worker could not run the planner (the file changed or was refused, did not load,
    /// does not export the planner); `exit_code` is the one the host should exit with.
    Failed { exit_code: u8, message: String },
}

impl WorkerReply {
    /// The reply for a host-side error of the worker.
    pub fn failed(error: &Error) -> WorkerReply {
        WorkerReply::Failed {
            exit_code: error.kind.exit_code(),
            message: error.message.clone(),
        }
    }
}

/// One planner run to do in a worker process.
#[derive(Clone, Debug)]
pub struct WorkerJob<'a> {
    pub planner: &'a str,
    pub plugin_file: &'a Path,
    /// The file's SHA-256 when the host checked it; the worker refuses any other bytes.
    pub sha256: &'a str,
    pub allow_insecure: bool,
    /// `--timeout`: handed to the worker's host context; the host kills the worker when the
    /// planner has run this plus the grace period.
    pub timeout: Option<Duration>,
    /// The host's `-v` count and `-q`, so that the worker logs at the same level.
    pub verbose: u8,
    pub quiet: bool,
}

impl WorkerJob<'_> {
    fn command(&self) -> Result<Command> {
        let exe = std::env::current_exe().map_err(|error| {
            Error::internal(format!(
                "--isolate: cannot find memplan's own executable to start a worker: {error}"
            ))
        })?;
        let mut command = Command::new(exe);
        if self.quiet {
            command.arg("--quiet");
        }
        for _ in 0..self.verbose {
            command.arg("--verbose");
        }
        command
            .arg(WORKER_SUBCOMMAND)
            .arg("--plugin-file")
            .arg(self.plugin_file)
            .arg("--sha256")
            .arg(self.sha256)
            .arg("--planner")
            .arg(self.planner);
        if let Some(timeout) = self.timeout {
            command
                .arg("--timeout")
                .arg(timeout.as_secs_f64().to_string());
        }
        if self.allow_insecure {
            command.arg("--allow-insecure-plugins");
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        die_with_the_parent(&mut command);
        Ok(command)
    }

    /// "planner `NAME` (FILE)", the subject of every message about this run.
    fn subject(&self) -> String {
        format!(
            "planner `{}` ({})",
            self.planner,
            self.plugin_file.display()
        )
    }
}

/// Runs `job` on `request` in a worker process and returns the planner's own answer. Every
/// way the worker can fail — crash, exit, time limit, no reply — is an error (exit 4 unless
/// the worker reported another code), and memplan keeps running.
pub fn plan_in_worker(
    job: &WorkerJob,
    request: &PlanRequest,
) -> Result<Result<MemoryPlan, PlanError>> {
    let started = Instant::now();
    let mut child = job.command()?.spawn().map_err(|error| {
        Error::internal(format!("--isolate: cannot start a worker process: {error}"))
    })?;
    tracing::debug!(
        "started worker process {} for {}",
        child.id(),
        job.subject()
    );

    let stdin = child.stdin.take().expect("stdin is piped");
    widen_pipe(&stdin);
    widen_pipe(child.stdout.as_ref().expect("stdout is piped"));
    let encoding = Instant::now();
    let request_bytes = wire::encode_request(request);
    tracing::debug!(
        "request of {} bytes encoded in {:.1} ms",
        request_bytes.len(),
        encoding.elapsed().as_secs_f64() * 1e3
    );
    // Detached: if the worker dies before reading everything, the write fails with a broken
    // pipe and the thread ends; the worker's fate is reported from its exit status.
    std::thread::spawn(move || {
        let mut stdin = BufWriter::new(stdin);
        let _ = stdin.write_all(&request_bytes).and_then(|()| stdin.flush());
    });

    let stdout = child.stdout.take().expect("stdout is piped");
    let (events, worker_events) = mpsc::channel();
    std::thread::spawn(move || read_worker_output(stdout, events));

    // The reply pipe closes when the worker exits (normally or not), so waiting on it is
    // waiting on the worker, without polling. `next_event` gives `Ok(None)` when the reader is
    // gone without a word (cannot happen: it always sends `Finished`) and `Err(())` when the
    // deadline passed.
    let time_limit = job
        .timeout
        .map(|timeout| timeout.saturating_add(grace_period(timeout)));
    let next_event = |deadline: Option<Instant>| match deadline {
        None => Ok(worker_events.recv().ok()),
        Some(deadline) => {
            match worker_events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(event) => Ok(Some(event)),
                Err(mpsc::RecvTimeoutError::Disconnected) => Ok(None),
                Err(mpsc::RecvTimeoutError::Timeout) => Err(()),
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
            Ok(Some(WorkerOutput::Finished(reply))) => break Some(reply),
            Ok(None) => break None,
            Err(()) => {
                kill_and_reap(&mut child);
                let timeout = job.timeout.unwrap_or_default().as_secs_f64();
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
                         (loading the plugin hung?) and was killed",
                        job.subject(),
                        started.elapsed().as_secs_f64()
                    ),
                }));
            }
        }
    };
    let status = wait_for_exit(&mut child, kill_at)?;
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
    tracing::debug!(
        "worker for {} ended ({status}) after {:.3} s",
        job.subject(),
        started.elapsed().as_secs_f64()
    );
    interpret(job, status, &reply)
}

/// What the host hears from a worker's stdout.
enum WorkerOutput {
    /// The started line: the planner is being called.
    Started,
    /// Everything after it, up to the end of the pipe.
    Finished(std::io::Result<Vec<u8>>),
}

/// Reads the worker's stdout: the started line, then the reply. A worker that dies before
/// calling the planner produces only `Finished` with what it wrote (normally nothing).
fn read_worker_output(stdout: ChildStdout, events: mpsc::Sender<WorkerOutput>) {
    let mut stdout = BufReader::new(stdout);
    let mut first_line = String::new();
    let mut rest = Vec::new();
    let result = stdout.read_line(&mut first_line).and_then(|_| {
        if first_line.trim_end() == STARTED_LINE {
            let _ = events.send(WorkerOutput::Started);
        } else {
            rest.extend_from_slice(first_line.as_bytes());
        }
        stdout.read_to_end(&mut rest).map(|_| rest)
    });
    let _ = events.send(WorkerOutput::Finished(result));
}

/// Waits for a worker whose reply pipe has closed. It normally has exited already; one that
/// closed the pipe but keeps running is killed at `kill_at` (or after a short wait when there
/// is no time limit, since without its reply pipe it can no longer answer).
fn wait_for_exit(child: &mut Child, kill_at: Option<Instant>) -> Result<ExitStatus> {
    let give_up = kill_at.unwrap_or_else(|| Instant::now() + REPLY_AFTER_EXIT);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() >= give_up => {
                kill_and_reap(child);
                return child.wait().map_err(|error| {
                    Error::internal(format!("cannot wait for the worker process: {error}"))
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(error) => {
                return Err(Error::internal(format!(
                    "cannot wait for the worker process: {error}"
                )))
            }
        }
    }
}

fn kill_and_reap(child: &mut Child) {
    // Errors mean the child has exited already; `wait` reaps it either way.
    let _ = child.kill();
    let _ = child.wait();
}

/// The planner's answer from the worker's exit status and reply.
fn interpret(
    job: &WorkerJob,
    status: ExitStatus,
    reply: &[u8],
) -> Result<Result<MemoryPlan, PlanError>> {
    if let Some(signal) = status.signal() {
        return Err(Error::plugin(format!(
            "{} crashed: its worker process was killed by signal {}{}; memplan itself is \
             unaffected. Report this to the planner's author, or choose another planner",
            job.subject(),
            signal_name(signal),
            if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        )));
    }
    let decoding = Instant::now();
    let parsed: Option<WorkerReply> = wire::decode_reply(reply).ok();
    tracing::debug!(
        "reply of {} bytes decoded in {:.1} ms",
        reply.len(),
        decoding.elapsed().as_secs_f64() * 1e3
    );
    match (status.code(), parsed) {
        (Some(0), Some(WorkerReply::Plan(plan))) => Ok(Ok(plan)),
        (Some(0), Some(WorkerReply::Error(error))) => Ok(Err(error)),
        (Some(0), Some(WorkerReply::Failed { exit_code, message })) => {
            Err(Error::new(kind_of_exit_code(exit_code), message))
        }
        (Some(0), None) if reply.is_empty() => Err(Error::plugin(format!(
            "{} ended its worker process (exit status 0) without returning a plan",
            job.subject()
        ))),
        (Some(0), None) => Err(Error::plugin(format!(
            "{}: the worker's reply is not readable ({} bytes starting {:?})",
            job.subject(),
            reply.len(),
            String::from_utf8_lossy(&reply[..reply.len().min(80)])
        ))),
        (Some(code), _) => Err(Error::plugin(format!(
            "{} ended its worker process with exit status {code} instead of returning a plan \
             (a plugin must not exit the process)",
            job.subject()
        ))),
        (None, _) => Err(Error::plugin(format!(
            "{}: its worker process ended abnormally ({status})",
            job.subject()
        ))),
    }
}

fn kind_of_exit_code(code: u8) -> ErrorKind {
    match code {
        2 => ErrorKind::Input,
        3 => ErrorKind::Rejected,
        4 => ErrorKind::Plugin,
        5 => ErrorKind::DoesNotFit,
        _ => ErrorKind::Internal,
    }
}

/// The conventional name of a signal, with what it usually means.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP (hangup)",
        2 => "SIGINT (interrupt)",
        3 => "SIGQUIT (quit)",
        4 => "SIGILL (illegal instruction)",
        5 => "SIGTRAP (trace/breakpoint trap)",
        6 => "SIGABRT (abort)",
        8 => "SIGFPE (arithmetic exception)",
        9 => "SIGKILL (killed)",
        11 => "SIGSEGV (segmentation fault)",
        13 => "SIGPIPE (broken pipe)",
        14 => "SIGALRM (alarm clock)",
        15 => "SIGTERM (terminated)",
        #[cfg(target_os = "linux")]
        7 => "SIGBUS (bus error)",
        #[cfg(target_os = "linux")]
        24 => "SIGXCPU (CPU time limit exceeded)",
        #[cfg(target_os = "linux")]
        31 => "SIGSYS (bad system call)",
        #[cfg(not(target_os = "linux"))]
        10 => "SIGBUS (bus error)",
        _ => return format!("{signal}"),
    };
    format!("{signal}, {name}")
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

/// Makes the worker die with memplan: a worker whose parent was killed (`kill -TERM`, a
/// terminal closed) would otherwise be re-parented to init and go on running a planner nobody
/// waits for. Linux's parent-death signal is set in the child before `exec` and kept across
/// it; it fires when the thread that spawned the worker ends, which is memplan's main thread
/// (planners are run from it). Elsewhere the worker stops at its own deadline, if any.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn die_with_the_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: runs in the forked child before exec, where only async-signal-safe calls are
    // allowed: prctl, getppid and _exit are.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // memplan died before the signal was set: nobody would send it now.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn die_with_the_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_plugin_api::PlanErrorKind;

    fn job() -> WorkerJob<'static> {
        WorkerJob {
            planner: "p",
            plugin_file: Path::new("/plugins/libp.so"),
            sha256: "00",
            allow_insecure: false,
            timeout: None,
            verbose: 0,
            quiet: false,
        }
    }

    /// An exit status as `waitpid` reports it: `code << 8` for an exit, the signal number
    /// (plus 0x80 for a core dump) for a signal.
    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn replies_are_read_back_as_the_worker_wrote_them() {
        let error = WorkerReply::Error(PlanError::new(PlanErrorKind::Cancelled, "stopped"));
        let plan = wire::encode_reply(&WorkerReply::Plan(MemoryPlan::default()));
        assert_eq!(
            interpret(&job(), exited(0), &plan).unwrap().unwrap(),
            MemoryPlan::default()
        );
        let answer = interpret(&job(), exited(0), &wire::encode_reply(&error)).unwrap();
        assert_eq!(answer.unwrap_err().kind, PlanErrorKind::Cancelled);
        // The JSON replies of earlier releases, or anything else, are not a reply.
        let json = br#"{"error":{"kind":"cancelled","message":"stopped"}}"#;
        let garbled = interpret(&job(), exited(0), json).unwrap_err();
        assert!(garbled.message.contains("not readable"), "{garbled}");
    }

    #[test]
    fn worker_failures_keep_their_exit_code() {
        let failed = WorkerReply::failed(&Error::input("bad options"));
        let reply = wire::encode_reply(&failed);
        let error = interpret(&job(), exited(0), &reply).unwrap_err();
        assert_eq!(
            (error.kind, error.message.as_str()),
            (ErrorKind::Input, "bad options")
        );
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
            let error = interpret(&job(), status, b"").unwrap_err();
            assert_eq!(error.kind, ErrorKind::Plugin);
            assert!(error.message.contains(expected), "{}", error.message);
            assert!(
                error.message.contains("planner `p` (/plugins/libp.so)"),
                "{}",
                error.message
            );
        }
        let garbled = interpret(&job(), exited(0), b"{\"plan\": [").unwrap_err();
        assert!(
            garbled.message.contains("not readable"),
            "{}",
            garbled.message
        );
    }

    #[test]
    fn unknown_signals_are_shown_by_number() {
        assert_eq!(signal_name(11), "11, SIGSEGV (segmentation fault)");
        assert_eq!(signal_name(63), "63");
    }
}
