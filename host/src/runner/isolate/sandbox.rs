//! The sandbox of an isolated planner (Linux): what the worker process may still do once the
//! plugin's code runs in it.
//!
//! A vendor planner is a binary the user cannot read. Inside the worker it may compute, allocate
//! memory within a limit, start threads, read the clock, log through the host context and
//! return; it may not open files, look at paths, make sockets, start processes or programs,
//! trace or signal other processes, or write anywhere but standard error and its reply pipe.
//!
//! How, in the child, before the planner is called ([`enter`]):
//! 1. Descriptors: the reply pipe becomes [`REPLY_FD`], `/proc/self/status` (opened now, read
//!    after the planner returns to count its threads) [`STATUS_FD`], standard input and output
//!    `/dev/null`; every other descriptor memplan held (its output lock, plugin files, the
//!    terminal's other handles) is closed.
//! 2. Limits: address space = what the worker holds at the fork plus `--plan-memory-limit`;
//!    CPU time = the time limit on every core; no core dumps, no file may grow.
//! 3. Not dumpable (no other process of the user may ptrace it), no new privileges.
//! 4. seccomp-bpf: an allow list of system calls, some with their arguments checked (`write`
//!    only to descriptors 2 and [`REPLY_FD`], `clone` only for threads, `mmap` no larger than
//!    the memory limit, `tgkill` only within the worker, no `SIGSYS` handler but memplan's).
//!    Anything else traps: memplan's `SIGSYS` handler writes the call and its first arguments
//!    on the reply pipe as a [`Violation`] and ends the worker with [`VIOLATION_EXIT_CODE`]; the
//!    call never runs. `clone3` answers "not implemented" instead, so that the C library starts
//!    threads with `clone`, whose flags the filter can read.
//!
//! After the planner returns, [`lingering_threads`] counts the threads it left running
//! ([`crate::runner::threads`]).

use std::collections::BTreeMap;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Violation;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The worker's reply pipe, at a fixed number so that the filter can name it.
pub const REPLY_FD: i32 = 3;
/// `/proc/self/status` of the worker, opened before the sandbox closes the door.
const STATUS_FD: i32 = 4;

/// The exit status of a worker stopped by the sandbox (its reply holds the [`Violation`]).
pub const VIOLATION_EXIT_CODE: i32 = 121;

/// What a sandboxed worker may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Bytes the planner may allocate beyond what the worker holds when it starts
    /// (`--plan-memory-limit`).
    pub memory_bytes: u64,
    /// CPU seconds, all threads together.
    pub cpu_seconds: u64,
}

impl SandboxLimits {
    /// The limits of a worker whose planner may run `time_limit` (wall clock) with up to
    /// `memory_bytes` of memory: CPU time is the time limit on every core of the machine, so
    /// that it only stops a worker the wall-clock limit could not.
    pub fn new(memory_bytes: u64, time_limit: Duration) -> SandboxLimits {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        SandboxLimits {
            memory_bytes,
            cpu_seconds: time_limit
                .as_secs()
                .saturating_add(2)
                .saturating_mul(cores)
                .max(1),
        }
    }
}

/// Everything the child needs from the parent to enter the sandbox, prepared before the fork
/// where it allocates (the child runs it before calling any plugin code).
pub struct Preparation {
    limits: SandboxLimits,
    /// The address space the parent holds at the fork, which the child inherits.
    inherited_bytes: u64,
    /// The processors online, as the C library's allocator counts them (it reads a file in
    /// `/sys` for that, which the worker may not: see [`set_allocator_arenas`]).
    processors: i64,
}

impl Preparation {
    pub fn new(limits: SandboxLimits) -> Preparation {
        Preparation {
            limits,
            inherited_bytes: address_space_bytes().unwrap_or(0),
            // SAFETY: sysconf has no preconditions.
            processors: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1),
        }
    }
}

/// glibc's allocator gives threads arenas of their own, up to a limit it works out, once
/// more than eight threads allocate, from the processors online: it reads
/// `/sys/devices/system/cpu/online` then, so that a planner's ninth thread would be stopped by
/// the sandbox for opening a file. Setting the limit first (to glibc's own default, eight per
/// processor) leaves it nothing to read.
fn set_allocator_arenas(preparation: &Preparation) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter.
    unsafe {
        let arenas = preparation
            .processors
            .saturating_mul(8)
            .min(i64::from(i32::MAX));
        libc::mallopt(libc::M_ARENA_MAX, arenas as libc::c_int);
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = preparation;
}

/// The process's address space (VmSize), in bytes.
fn address_space_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page_size = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    Some(pages.saturating_mul(page_size))
}

/// Enters the sandbox in the worker: `reply` becomes [`REPLY_FD`] (returned as a file, also
/// when the rest fails), everything listed in the module docs is set up, and from then on only
/// the allowed system calls run. With `plugin`, the descriptor of a plugin file the worker is
/// to load itself, that file stays open as [`plugin_path`] and the worker enters the loading
/// stage ([`Entered::seal`] ends it); without, it is sealed at once. An error is a message for
/// the user: the worker reports it and exits without calling the planner (a sandbox that
/// cannot be set up is not silently skipped).
pub fn enter(
    reply: OwnedFd,
    preparation: &Preparation,
    plugin: Option<i32>,
) -> (std::fs::File, Result<Entered, String>) {
    // Above the fixed numbers first, so that arranging them cannot close it.
    let plugin = match plugin.map(|fd| {
        // SAFETY: F_DUPFD_CLOEXEC on an open descriptor the child inherited.
        unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) }
    }) {
        Some(moved) if moved < 0 => {
            let problem = format!(
                "cannot keep the plugin file open: {}",
                std::io::Error::last_os_error()
            );
            // SAFETY: `reply` is the pipe, owned by nothing else from here on.
            return (std::fs::File::from(reply), Err(problem));
        }
        other => other,
    };
    let reply_fd = reply.into_raw_fd();
    let moved = above(reply_fd).and_then(|moved| {
        // SAFETY: dup2 onto the process's own descriptor number; `moved` is open.
        if unsafe { libc::dup2(moved, REPLY_FD) } < 0 {
            return Err(format!(
                "cannot arrange the worker's descriptors: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `moved` is a copy we own; REPLY_FD now refers to the pipe.
        unsafe { libc::close(moved) };
        Ok(REPLY_FD)
    });
    let (fd, result) = match moved {
        Ok(fd) => (fd, enter_with_reply_in_place(preparation, plugin)),
        Err(message) => (reply_fd, Err(message)),
    };
    // SAFETY: `fd` is the reply pipe, owned by nothing else from here on.
    (unsafe { std::fs::File::from_raw_fd(fd) }, result)
}

/// A worker in the sandbox, still loading its plugin file or sealed.
pub struct Entered {
    /// The planner's filter, until [`Entered::seal`] installs it.
    planner_filter: Option<BpfProgram>,
    /// The layers in force, for `-v`.
    layers: Vec<String>,
}

impl Entered {
    /// Ends the loading stage (if any): no file access at all (Landlock, where the kernel has
    /// it) and the planner's allow list; the plugin file's descriptor is closed.
    pub fn seal(&mut self) -> Result<(), String> {
        let Some(filter) = self.planner_filter.take() else {
            return Ok(());
        };
        // Filters and Landlock domains bind the thread that sets them up: a thread the file's
        // constructors started would keep the loading stage's rights.
        if thread_count().is_some_and(|threads| threads > 1) {
            return Err(
                "the plugin file started a thread while it was loaded, which would run \
                 outside the sandbox's last stage"
                    .to_string(),
            );
        }
        // SAFETY: the plugin is mapped; its descriptor is not needed any more.
        unsafe { libc::close(PLUGIN_FD) };
        self.layers.push(landlock_layer(Stage::Planning));
        seccompiler::apply_filter(&filter)
            .map_err(|error| format!("cannot install the system-call filter: {error}"))?;
        self.layers.push(format!(
            "seccomp (the planner's allow list{})",
            if self.layers.iter().any(|layer| layer.contains("loading")) {
                ", after the loader's"
            } else {
                ""
            }
        ));
        Ok(())
    }

    /// The layers in force, "seccomp (...), landlock (...), ...".
    pub fn layers(&self) -> String {
        self.layers.join("; ")
    }
}

/// What the worker is doing while a layer is set up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Loading a third-party plugin file itself: it may read that file and the system's
    /// libraries.
    Loading,
    /// Calling the planner: no file access at all.
    Planning,
}

/// Where a plugin's own dependencies (the C library, libgcc, a C++ runtime ...) may be read
/// from while the worker loads it: the system's library directories and the loader's cache.
const LIBRARY_PATHS: &[&str] = &[
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
];

/// Sets up a Landlock layer for `stage` and says what it is ("landlock ABI 7: ..."), or why
/// there is none. Best effort: a kernel without Landlock (before 5.13, or with it disabled)
/// keeps the other layers, and `-v` says so.
fn landlock_layer(stage: Stage) -> String {
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, ABI,
    };
    let abi = ABI::V6;
    let restricted = landlock::Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|ruleset| ruleset.handle_access(AccessNet::from_all(abi)))
        .and_then(|ruleset| ruleset.scope(Scope::from_all(abi)))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| match stage {
            Stage::Planning => Ok(ruleset),
            Stage::Loading => ruleset
                .add_rules(path_beneath_rules(
                    [plugin_path()],
                    AccessFs::from_read(abi),
                ))
                .and_then(|ruleset| {
                    ruleset.add_rules(path_beneath_rules(LIBRARY_PATHS, AccessFs::from_read(abi)))
                }),
        })
        .and_then(|ruleset| ruleset.restrict_self());
    let what = match stage {
        Stage::Loading => "while loading: read only the plugin file and the system's libraries",
        Stage::Planning => "no file access, no network",
    };
    match restricted {
        Ok(status) => match (status.ruleset, status.landlock) {
            (RulesetStatus::NotEnforced, _) => {
                "no landlock (this kernel does not have it)".to_string()
            }
            (enforced, landlock::LandlockStatus::Available { effective_abi, .. }) => format!(
                "landlock{} ({effective_abi:?}; {what})",
                if enforced == RulesetStatus::PartiallyEnforced {
                    ", partly"
                } else {
                    ""
                }
            ),
            (_, _) => format!("landlock ({what})"),
        },
        Err(error) => format!("no landlock ({error})"),
    }
}

fn enter_with_reply_in_place(
    preparation: &Preparation,
    plugin: Option<i32>,
) -> Result<Entered, String> {
    let status = above(open("/proc/self/status", libc::O_RDONLY)?)?;
    let null = above(open("/dev/null", libc::O_RDWR)?)?;
    let mut arrangement = vec![(status, STATUS_FD), (null, 0), (null, 1)];
    arrangement.extend(plugin.map(|plugin| (plugin, PLUGIN_FD)));
    for (from, to) in arrangement {
        // SAFETY: dup2 onto the process's own descriptor numbers; `from` is open.
        if unsafe { libc::dup2(from, to) } < 0 {
            return Err(format!(
                "cannot arrange the worker's descriptors: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    close_from(PLUGIN_FD + 1);
    if plugin.is_none() {
        // SAFETY: closing a descriptor number the worker does not use.
        unsafe { libc::close(PLUGIN_FD) };
    }
    clear_environment();
    set_allocator_arenas(preparation);
    set_limits(preparation)?;
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    install_violation_handler()?;
    let filters = filters(preparation.limits.memory_bytes)?;
    let apply = |filter: &BpfProgram| {
        seccompiler::apply_filter(filter)
            .map_err(|error| format!("cannot install the system-call filter: {error}"))
    };
    let mut layers = vec![
        format!(
            "limits (address space {} over what it inherited, CPU {} s, no core dumps, no \
             file growth, at most {} threads)",
            super::size_text(preparation.limits.memory_bytes),
            preparation.limits.cpu_seconds,
            super::MAX_WORKER_THREADS
        ),
        "empty environment".to_string(),
        "descriptors: standard error and its reply only".to_string(),
        "not dumpable, no new privileges".to_string(),
    ];
    apply(&filters.not_implemented)?;
    let mut entered = Entered {
        planner_filter: Some(filters.planner),
        layers: Vec::new(),
    };
    if plugin.is_some() {
        layers.push(landlock_layer(Stage::Loading));
        apply(&filters.loader)?;
        layers.push("seccomp (the loader's allow list while loading)".to_string());
        entered.layers = layers;
    } else {
        entered.layers = layers;
        entered.seal()?;
    }
    Ok(entered)
}

/// The worker's plugin file, when it loads the file itself, at a fixed number.
const PLUGIN_FD: i32 = 5;

/// The path the worker's dynamic loader opens the plugin file by: its descriptor, so that the
/// bytes loaded are the bytes memplan checked and hashed. Named through the worker's own
/// process id, not `/proc/self`: the dynamic loader takes a path it has loaded before for the
/// library it loaded then, and memplan loads its own plugins as `/proc/self/fd/N` (the same
/// `/proc/self/fd/5` would give the worker one of those instead of its file).
pub fn plugin_path() -> std::path::PathBuf {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    std::path::PathBuf::from(format!("/proc/{pid}/fd/{PLUGIN_FD}"))
}

/// Empties the worker's environment before any plugin code runs in it: the host's variables
/// (tokens, keys, paths) are none of a planner's business. The strings themselves are zeroed,
/// not only unlinked, since a planner could read its own memory: the worker's copy of the
/// process's initial stack (where `/proc/self/environ` points) holds them too.
fn clear_environment() {
    extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    // SAFETY: the worker is single-threaded here; every entry of `environ` is a NUL-terminated
    // string in writable memory (the initial stack, or the C library's own copies).
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = *entry;
            std::ptr::write_bytes(text, 0, libc::strlen(text));
            entry = entry.add(1);
        }
        libc::clearenv();
    }
}

fn open(path: &str, flags: libc::c_int) -> Result<i32, String> {
    let c_path = std::ffi::CString::new(path).expect("no NUL in a constant path");
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!(
            "cannot open {path}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(fd)
}

/// A copy of `fd` numbered above the fixed descriptors (the original is closed on success).
fn above(fd: i32) -> Result<i32, String> {
    // SAFETY: F_DUPFD_CLOEXEC on an open descriptor; close on the original, which we own.
    unsafe {
        let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
        if moved < 0 {
            return Err(format!(
                "cannot arrange the worker's descriptors: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::close(fd);
        Ok(moved)
    }
}

/// Closes every descriptor from `first` up.
fn close_from(first: i32) {
    // SAFETY: close_range only closes descriptors; nothing in the child uses them afterwards.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) };
    if closed != 0 {
        // Kernels before 5.9: one by one, up to the descriptor limit.
        // SAFETY: sysconf has no preconditions; close of any number is harmless.
        let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(1024, 1 << 20) as i32;
        for fd in first..max {
            unsafe { libc::close(fd) };
        }
    }
}

fn set_limits(preparation: &Preparation) -> Result<(), String> {
    let address_space = preparation
        .inherited_bytes
        .saturating_add(preparation.limits.memory_bytes);
    let cpu = preparation.limits.cpu_seconds;
    for (resource, soft, hard, what) in [
        (libc::RLIMIT_AS, address_space, address_space, "memory"),
        (libc::RLIMIT_CPU, cpu, cpu.saturating_add(5), "CPU time"),
        (libc::RLIMIT_CORE, 0, 0, "core dump"),
        (libc::RLIMIT_FSIZE, 0, 0, "file size"),
    ] {
        let limit = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads a valid rlimit.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(format!(
                "cannot set the worker's {what} limit: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Set by the first violation, so that a second thread's does not write a second record.
static VIOLATION_REPORTED: AtomicBool = AtomicBool::new(false);

fn install_violation_handler() -> Result<(), String> {
    // SAFETY: installs an async-signal-safe handler (write and _exit only) for SIGSYS.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_violation as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut()) != 0 {
            return Err(format!(
                "cannot install the sandbox's signal handler: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The `SIGSYS` handler. A `newfstatat` with an empty path and `AT_EMPTY_PATH` — `fstat` of a
/// descriptor the worker holds, as the C library issues it — is answered with `fstat` (see
/// [`allow_list`]); any other trapped call writes the violation on the reply pipe and ends
/// the worker. Only async-signal-safe calls (`syscall`, `write`, `_exit`), no allocation.
extern "C" fn on_violation(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for SIGSYS (the system call number and the
    // architecture sit after the faulting address, as in `struct siginfo._sigsys`) and the
    // thread's ucontext.
    let (syscall, arch, args) = unsafe {
        let fields = (info as *const u8).add(16);
        let number = fields.add(std::mem::size_of::<usize>());
        let syscall = *(number as *const i32);
        let arch = *(number.add(4) as *const u32);
        (syscall as u32, arch, arguments(context))
    };
    if arch == NATIVE_ARCH && i64::from(syscall) == libc::SYS_newfstatat {
        let [fd, path, stat, flags] = args;
        // SAFETY: a path the caller passes is readable, or the call would fault anyway; the
        // fstat writes where the caller asked the kernel to.
        let empty_path = path != 0 && unsafe { *(path as *const u8) } == 0;
        if empty_path && flags & libc::AT_EMPTY_PATH as u64 != 0 {
            // SAFETY: errno is the thread's own; fstat of a descriptor writes one stat.
            unsafe {
                let errno = libc::__errno_location();
                let saved = *errno;
                let result = libc::syscall(libc::SYS_fstat, fd as libc::c_int, stat);
                let value = if result < 0 {
                    -i64::from(*errno)
                } else {
                    result
                };
                *errno = saved;
                set_result(context, value);
            }
            return;
        }
    }
    if !VIOLATION_REPORTED.swap(true, Ordering::SeqCst) {
        let record = super::wire::encode_violation(&Violation {
            syscall,
            arch,
            args: [args[0], args[1]],
        });
        // SAFETY: write of a stack buffer to the reply pipe.
        unsafe { libc::write(REPLY_FD, record.as_ptr().cast(), record.len()) };
    }
    // SAFETY: ends the process at once.
    unsafe { libc::_exit(VIOLATION_EXIT_CODE) }
}

/// The first four arguments of the trapped call, from the registers saved in `context`.
#[cfg(target_arch = "x86_64")]
unsafe fn arguments(context: *mut libc::c_void) -> [u64; 4] {
    let context = &*(context as *const libc::ucontext_t);
    let registers = &context.uc_mcontext.gregs;
    [libc::REG_RDI, libc::REG_RSI, libc::REG_RDX, libc::REG_R10]
        .map(|register| registers[register as usize] as u64)
}

#[cfg(target_arch = "aarch64")]
unsafe fn arguments(context: *mut libc::c_void) -> [u64; 4] {
    let context = &*(context as *const libc::ucontext_t);
    let registers = &context.uc_mcontext.regs;
    [registers[0], registers[1], registers[2], registers[3]]
}

/// Makes the trapped call return `value` (a result, or minus an errno) when the handler
/// returns.
#[cfg(target_arch = "x86_64")]
unsafe fn set_result(context: *mut libc::c_void, value: i64) {
    let context = &mut *(context as *mut libc::ucontext_t);
    context.uc_mcontext.gregs[libc::REG_RAX as usize] = value;
}

#[cfg(target_arch = "aarch64")]
unsafe fn set_result(context: *mut libc::c_void, value: i64) {
    let context = &mut *(context as *mut libc::ucontext_t);
    context.uc_mcontext.regs[0] = value as u64;
}

#[cfg(target_arch = "x86_64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;

/// The `AUDIT_ARCH_*` value of this machine's own system-call interface.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xc000_00b7;

/// `SECCOMP_RET_TRAP`, `SECCOMP_RET_KILL_PROCESS`.
const RET_TRAP: u32 = 0x0003_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// seccompiler's filters start by killing the process at a system call made through another
/// interface than the machine's own (on x86-64, the 32-bit `int 0x80`): the worker would then
/// die of `SIGSYS` without a word, which reads like a call made with signals blocked. This
/// makes that first check trap instead, so that the violation handler names it.
fn trap_foreign_calls(mut program: BpfProgram) -> BpfProgram {
    const BPF_RET_K: u16 = 0x06;
    for instruction in program.iter_mut().take(3) {
        if instruction.code == BPF_RET_K && instruction.k == RET_KILL_PROCESS {
            instruction.k = RET_TRAP;
        }
    }
    program
}

/// The filters: calls that answer ENOSYS, `clone3` (its flags sit in memory, where a filter
/// cannot read them; the C library then uses `clone`), `statx` (it takes a path; the C
/// library and Rust then use `fstat`) and `sysinfo` (the C library's `qsort` asks it how much
/// memory the machine has before sorting a large array, and sorts all the same without an
/// answer: a C planner that sorts must not be stopped for it); the loader's list (while a third-party plugin file is
/// loaded in the worker, see [`Stage::Loading`]); and the planner's allow list, which traps
/// the rest.
fn filters(memory_bytes: u64) -> Result<Filters, String> {
    let compile = |filter: Result<SeccompFilter, seccompiler::BackendError>| {
        filter
            .and_then(BpfProgram::try_from)
            .map(trap_foreign_calls)
            .map_err(|error| format!("cannot build the system-call filter: {error}"))
    };
    let not_implemented = compile(SeccompFilter::new(
        BTreeMap::from([
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_statx, Vec::new()),
            (libc::SYS_sysinfo, Vec::new()),
        ]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    ))?;
    let planner = compile(allow_list(memory_bytes).and_then(|rules| {
        SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, ARCH)
    }))?;
    let loader = compile(loader_list(memory_bytes).and_then(|rules| {
        SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, ARCH)
    }))?;
    Ok(Filters {
        not_implemented,
        loader,
        planner,
    })
}

/// The compiled system-call filters of [`filters`].
struct Filters {
    not_implemented: BpfProgram,
    loader: BpfProgram,
    planner: BpfProgram,
}

/// What a worker that loads its plugin file itself may do on top of the planner's allow list
/// while it loads it: open files for reading (the file itself, through `/proc/self/fd`; the
/// libraries it needs that memplan has not loaded), read them, map them executable, and set up
/// the next layers of the sandbox (Landlock, the planner's filter). Writing, creating, network,
/// processes: refused as for the planner. Landlock, where the kernel has it, narrows the
/// reading to the plugin file and the system's library directories.
fn loader_list(
    memory_bytes: u64,
) -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
    let mut rules = allow_list(memory_bytes)?;
    let read_only = (libc::O_ACCMODE | libc::O_CREAT | libc::O_TRUNC | libc::O_APPEND) as u64;
    rules.insert(
        libc::SYS_openat,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            2,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(read_only),
            0,
        )?])?],
    );
    for syscall in [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_restrict_self,
        libc::SYS_seccomp,
    ] {
        rules.insert(syscall, Vec::new());
    }
    rules
        .entry(libc::SYS_prctl)
        .or_default()
        .push(SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::PR_SET_NO_NEW_PRIVS as u64,
        )?])?);
    Ok(rules)
}

/// The system calls a planner may make, each unconditionally (no rules) or when one of its
/// rules holds.
fn allow_list(
    memory_bytes: u64,
) -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
    use SeccompCmpArgLen::{Dword, Qword};
    let when = |conditions: Vec<(u8, SeccompCmpArgLen, SeccompCmpOp, u64)>| {
        conditions
            .into_iter()
            .map(|(arg, len, op, value)| SeccompCondition::new(arg, len, op, value))
            .collect::<Result<Vec<_>, _>>()
            .and_then(SeccompRule::new)
    };
    let to_own_descriptors = vec![
        when(vec![(0, Dword, SeccompCmpOp::Eq, 2)])?,
        when(vec![(0, Dword, SeccompCmpOp::Eq, REPLY_FD as u64)])?,
    ];
    // SAFETY: getpid has no preconditions.
    let own_pid = unsafe { libc::getpid() } as u64;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for syscall in [
        libc::SYS_read,
        libc::SYS_readv,
        libc::SYS_pread64,
        libc::SYS_lseek,
        libc::SYS_close,
        libc::SYS_munmap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_set_robust_list,
        libc::SYS_get_robust_list,
        libc::SYS_rseq,
        libc::SYS_set_tid_address,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_gettimeofday,
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_getrandom,
        libc::SYS_getpid,
        libc::SYS_getppid,
        libc::SYS_gettid,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_restart_syscall,
        libc::SYS_getrusage,
        libc::SYS_fstat,
        // Answered ENOSYS by the first filter.
        libc::SYS_clone3,
        libc::SYS_statx,
        libc::SYS_sysinfo,
    ] {
        rules.insert(syscall, Vec::new());
    }
    rules.insert(libc::SYS_write, to_own_descriptors.clone());
    rules.insert(libc::SYS_writev, to_own_descriptors);
    // Memory: no single mapping beyond the limit (the address-space limit bounds the sum).
    rules.insert(
        libc::SYS_mmap,
        vec![when(vec![(1, Qword, SeccompCmpOp::Le, memory_bytes)])?],
    );
    rules.insert(
        libc::SYS_mremap,
        vec![when(vec![(2, Qword, SeccompCmpOp::Le, memory_bytes)])?],
    );
    // Threads, not processes.
    rules.insert(
        libc::SYS_clone,
        vec![when(vec![(
            0,
            Qword,
            SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
            libc::CLONE_THREAD as u64,
        )])?],
    );
    // Signals within the worker (abort raises SIGABRT with tgkill), and no handler for
    // SIGSYS but memplan's.
    rules.insert(
        libc::SYS_tgkill,
        vec![when(vec![(0, Dword, SeccompCmpOp::Eq, own_pid)])?],
    );
    rules.insert(
        libc::SYS_rt_sigaction,
        vec![when(vec![(
            0,
            Dword,
            SeccompCmpOp::Ne,
            libc::SIGSYS as u64,
        )])?],
    );
    // Descriptor flags only (Rust's debug builds check a descriptor is open before closing).
    rules.insert(
        libc::SYS_fcntl,
        vec![
            when(vec![(1, Dword, SeccompCmpOp::Eq, libc::F_GETFD as u64)])?,
            when(vec![(1, Dword, SeccompCmpOp::Eq, libc::F_GETFL as u64)])?,
        ],
    );
    // Thread names.
    rules.insert(
        libc::SYS_prctl,
        vec![
            when(vec![(0, Dword, SeccompCmpOp::Eq, libc::PR_SET_NAME as u64)])?,
            when(vec![(0, Dword, SeccompCmpOp::Eq, libc::PR_GET_NAME as u64)])?,
        ],
    );
    // Not `newfstatat`, although the C library's `fstat` is `newfstatat(fd, "",
    // AT_EMPTY_PATH)`: with a path that is not empty it looks the path up, and a filter cannot
    // read the path. It traps, and the violation handler answers the empty-path form itself
    // with `fstat` (which takes no path).
    Ok(rules)
}

/// The threads other than the calling one still running in the worker after the planner
/// returned (see [`crate::runner::threads`]).
pub fn lingering_threads() -> u32 {
    crate::runner::threads::threads_left_running(1, thread_count)
}

/// The thread count of the worker's `/proc/self/status`, read through [`STATUS_FD`] (opened
/// before the sandbox, since it may not open files).
fn thread_count() -> Option<u32> {
    let mut buffer = [0u8; 4096];
    // SAFETY: pread into a stack buffer of the given length.
    let read = unsafe { libc::pread(STATUS_FD, buffer.as_mut_ptr().cast(), buffer.len(), 0) };
    let read = usize::try_from(read).ok()?;
    crate::runner::threads::parse_thread_count(&String::from_utf8_lossy(&buffer[..read]))
}

/// What a violation means, for the user: "tried to ..." and what it reveals.
pub fn describe(violation: &Violation, memory_bytes: u64) -> String {
    let [first, second] = violation.args;
    if violation.arch != NATIVE_ARCH {
        return format!(
            "made a system call through another interface than this machine's own (the \
             32-bit `int 0x80` on x86-64: architecture {:#x}, system call {}), which the \
             sandbox does not allow",
            violation.arch, violation.syscall
        );
    }
    let call = syscall_name(violation.syscall);
    let number = i64::from(violation.syscall);
    let what = match number {
        n if n == libc::SYS_openat || n == libc::SYS_openat2 || is_legacy_open(n) => {
            "tried to open a file"
        }
        n if n == libc::SYS_newfstatat
            || n == libc::SYS_statx
            || n == libc::SYS_faccessat
            || n == libc::SYS_faccessat2
            || n == libc::SYS_readlinkat
            || n == libc::SYS_getdents64 =>
        {
            "tried to look at the file system"
        }
        n if n == libc::SYS_write || n == libc::SYS_writev || n == libc::SYS_pwrite64 => {
            return match first {
                1 => format!("tried to write on standard output ({call}); a planner's output goes through the host context's log"),
                fd => format!("tried to write to descriptor {fd} ({call}), which is not its reply pipe or standard error"),
            };
        }
        n if n == libc::SYS_socket
            || n == libc::SYS_socketpair
            || n == libc::SYS_connect
            || n == libc::SYS_bind
            || n == libc::SYS_sendto =>
        {
            "tried to use the network"
        }
        n if n == libc::SYS_execve || n == libc::SYS_execveat => "tried to run a program",
        n if n == libc::SYS_clone || is_legacy_fork(n) => "tried to start a process",
        n if n == libc::SYS_ptrace
            || n == libc::SYS_process_vm_readv
            || n == libc::SYS_process_vm_writev =>
        {
            "tried to trace or read another process"
        }
        n if n == libc::SYS_kill || n == libc::SYS_tgkill || n == libc::SYS_tkill => {
            "tried to signal another process"
        }
        n if n == libc::SYS_mmap || n == libc::SYS_mremap => {
            let size = if n == libc::SYS_mmap { second } else { 0 };
            return format!(
                "tried to allocate {} at once ({call}), over its memory limit of {} \
                 (--plan-memory-limit)",
                super::size_text(size),
                super::size_text(memory_bytes)
            );
        }
        n if n == libc::SYS_rt_sigaction => "tried to take over the sandbox's signal handler",
        n if n == libc::SYS_chdir || n == libc::SYS_fchdir => "tried to change directory",
        _ => "made a system call the sandbox does not allow",
    };
    format!("{what} ({call})")
}

#[cfg(target_arch = "x86_64")]
fn is_legacy_open(n: i64) -> bool {
    n == libc::SYS_open || n == libc::SYS_creat
}
#[cfg(not(target_arch = "x86_64"))]
fn is_legacy_open(_n: i64) -> bool {
    false
}
#[cfg(target_arch = "x86_64")]
fn is_legacy_fork(n: i64) -> bool {
    n == libc::SYS_fork || n == libc::SYS_vfork
}
#[cfg(not(target_arch = "x86_64"))]
fn is_legacy_fork(_n: i64) -> bool {
    false
}

/// The name of system call `number` where memplan knows it, else "system call N".
fn syscall_name(number: u32) -> String {
    let n = i64::from(number);
    let known: &[(i64, &str)] = &[
        (libc::SYS_openat, "openat"),
        (libc::SYS_openat2, "openat2"),
        (libc::SYS_newfstatat, "newfstatat"),
        (libc::SYS_statx, "statx"),
        (libc::SYS_faccessat, "faccessat"),
        (libc::SYS_faccessat2, "faccessat2"),
        (libc::SYS_readlinkat, "readlinkat"),
        (libc::SYS_getdents64, "getdents64"),
        (libc::SYS_write, "write"),
        (libc::SYS_writev, "writev"),
        (libc::SYS_pwrite64, "pwrite64"),
        (libc::SYS_socket, "socket"),
        (libc::SYS_socketpair, "socketpair"),
        (libc::SYS_connect, "connect"),
        (libc::SYS_bind, "bind"),
        (libc::SYS_sendto, "sendto"),
        (libc::SYS_execve, "execve"),
        (libc::SYS_execveat, "execveat"),
        (libc::SYS_clone, "clone"),
        (libc::SYS_ptrace, "ptrace"),
        (libc::SYS_process_vm_readv, "process_vm_readv"),
        (libc::SYS_process_vm_writev, "process_vm_writev"),
        (libc::SYS_kill, "kill"),
        (libc::SYS_tgkill, "tgkill"),
        (libc::SYS_tkill, "tkill"),
        (libc::SYS_mmap, "mmap"),
        (libc::SYS_mremap, "mremap"),
        (libc::SYS_rt_sigaction, "rt_sigaction"),
        (libc::SYS_chdir, "chdir"),
        (libc::SYS_fchdir, "fchdir"),
        (libc::SYS_prctl, "prctl"),
        (libc::SYS_ioctl, "ioctl"),
        (libc::SYS_unlinkat, "unlinkat"),
        (libc::SYS_mkdirat, "mkdirat"),
        (libc::SYS_renameat2, "renameat2"),
        (libc::SYS_io_uring_setup, "io_uring_setup"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_open, "open"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_creat, "creat"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_fork, "fork"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_vfork, "vfork"),
    ];
    known
        .iter()
        .find(|(known, _)| *known == n)
        .map(|(_, name)| (*name).to_string())
        .unwrap_or_else(|| format!("system call {number}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_say_what_the_planner_tried() {
        let open = Violation {
            syscall: libc::SYS_openat as u32,
            arch: NATIVE_ARCH,
            args: [0, 0],
        };
        assert_eq!(describe(&open, 1 << 30), "tried to open a file (openat)");
        let stdout = Violation {
            syscall: libc::SYS_write as u32,
            arch: NATIVE_ARCH,
            args: [1, 0],
        };
        assert!(describe(&stdout, 1 << 30).starts_with("tried to write on standard output"));
        let huge = Violation {
            syscall: libc::SYS_mmap as u32,
            arch: NATIVE_ARCH,
            args: [0, 50 << 30],
        };
        assert_eq!(
            describe(&huge, 12 << 30),
            "tried to allocate 50.0 GiB at once (mmap), over its memory limit of 12.0 GiB \
             (--plan-memory-limit)"
        );
        let unknown = Violation {
            syscall: 9999,
            arch: NATIVE_ARCH,
            args: [0, 0],
        };
        assert_eq!(
            describe(&unknown, 1 << 30),
            "made a system call the sandbox does not allow (system call 9999)"
        );
    }

    #[test]
    fn a_call_through_the_32_bit_interface_is_named_as_such() {
        let legacy = Violation {
            syscall: 20,
            arch: 0x4000_0003,
            args: [0, 0],
        };
        let what = describe(&legacy, 1 << 30);
        assert!(what.contains("int 0x80"), "{what}");
        assert!(!what.contains("start a process"), "{what}");
    }

    #[test]
    fn the_filters_compile_for_this_machine_and_trap_foreign_calls() {
        let filters = filters(1 << 30).unwrap();
        for program in [&filters.not_implemented, &filters.loader, &filters.planner] {
            assert!(!program.is_empty());
            // The architecture check traps (so the handler names the call), never kills.
            assert!(program[..3]
                .iter()
                .any(|instruction| instruction.k == RET_TRAP));
            assert!(!program[..3]
                .iter()
                .any(|instruction| instruction.k == RET_KILL_PROCESS));
        }
    }

    #[test]
    fn cpu_time_covers_the_time_limit_on_every_core() {
        let limits = SandboxLimits::new(1 << 30, Duration::from_secs(10));
        assert!(limits.cpu_seconds >= 12, "{limits:?}");
    }
}
