//! The recording loop: load and attach the BPF programs, drain the ring buffer, reorder,
//! deduplicate stacks, symbolize, write.

use crate::ksyms::KernelSymbols;
use crate::raw::{self, RawEv};
use crate::skel::{ChainrecLinks, ChainrecSkel, ChainrecSkelBuilder};
use crate::usyms::UserSymbolizer;
use crate::workload::monotonic_ns;
use crate::{RecordError, Result};
use chainrec_format::*;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, RingBufferBuilder};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to record and how.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Output trace file (created with mode 0600).
    pub output: PathBuf,
    /// Stack policy.
    pub stack_mode: StackMode,
    /// Lazy threshold T: waits shorter than this get no stacks (lazy mode only).
    pub stack_threshold_ns: u64,
    /// Ring buffer size in bytes (rounded up to a power of two, at least one page).
    pub ringbuf_bytes: u64,
    /// Record only these processes (thread group ids) and the tasks that wake them,
    /// transitively; empty = whole system.
    pub pids: Vec<u32>,
    /// How often the consumer drains the ring buffer (it is not woken per event).
    pub poll_period: Duration,
    /// Print a live status line on stderr (only when stderr is a terminal).
    pub status_line: bool,
    /// Recorder command line, stored in the trace metadata.
    pub command_line: Vec<String>,
    /// Capture user stacks (frame-pointer walks) as well as kernel stacks.
    pub user_stacks: bool,
    /// Derive the waking context from the interrupt tracepoints only, even when the
    /// preempt count can be read (diagnosis, and to test the fallback).
    pub force_context_fallback: bool,
    /// Lazy mode: take user stacks at `sys_exit` (the fallback for kernels without the
    /// BPF task_work kfuncs) even when the task_work path is available (A/B, tests).
    pub force_sys_exit_user_stacks: bool,
    /// Always let the kernel walk user stacks, also where a frame-pointer chain ends at
    /// once below `vm.mmap_min_addr` (A/B and tests; the result is the same).
    pub no_user_walk_shortcut: bool,
    /// Tests: let the kernel walk every user stack the shortcut finished as well, and count
    /// disagreements (metadata `user_walk_shortcut`).
    pub verify_user_walk_shortcut: bool,
    /// Do not attach the `do_softirq` programs: every softirq waking stays metal, as
    /// before they existed (A/B, and to test the fallback).
    pub no_softirq_tracking: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            output: PathBuf::from("trace.zst"),
            stack_mode: StackMode::Lazy,
            stack_threshold_ns: 100_000,
            ringbuf_bytes: 32 << 20,
            pids: Vec::new(),
            poll_period: Duration::from_millis(20),
            status_line: true,
            command_line: Vec::new(),
            user_stacks: true,
            force_context_fallback: false,
            force_sys_exit_user_stacks: false,
            no_user_walk_shortcut: false,
            verify_user_walk_shortcut: false,
            no_softirq_tracking: false,
        }
    }
}

/// When to stop recording (whichever comes first). With neither set, recording runs
/// until the process is killed.
#[derive(Clone, Debug, Default)]
pub struct StopCondition {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when this becomes true (signal handler, another thread).
    pub flag: Option<Arc<AtomicBool>>,
    /// Set to true once the programs are attached and events flow (so a caller can
    /// start its workload).
    pub started: Option<Arc<AtomicBool>>,
}

/// What a recording produced.
#[derive(Clone, Debug, Default)]
pub struct RecordSummary {
    /// The trace file.
    pub output: PathBuf,
    /// Events written.
    pub events: u64,
    /// Events by kind (indexed by `EventKind as usize`).
    pub events_by_kind: [u64; 7],
    /// File size.
    pub bytes: u64,
    /// Recording time (attach to detach).
    pub duration: Duration,
    /// Lost and skipped counts (also in the file's metadata).
    pub lost: LostCounts,
    /// Unique stacks written.
    pub stacks: u64,
    /// Symbols written.
    pub symbols: u64,
    /// CPU time of the consumer thread (user + system) from attaching the programs to the
    /// end (loading them is not included).
    pub consumer_cpu: Duration,
    /// Total BPF program run time and run count (when `kernel.bpf_stats_enabled=1`).
    pub bpf_run_time_ns: u64,
    /// See [`RecordSummary::bpf_run_time_ns`].
    pub bpf_run_cnt: u64,
    /// Wakings whose context came from the interrupt-tracepoint fallback.
    pub context_fallbacks: u64,
    /// How the waking context was obtained.
    pub context_method: String,
    /// How lazy user stacks were taken (`task_work`, `sys_exit`, or why none).
    pub user_stack_method: String,
    /// User stacks finished without the kernel walker (chain ended below mmap_min_addr).
    pub user_walks_shortcut: u64,
    /// With `verify_user_walk_shortcut`: how many of those the kernel walker disagreed with.
    pub user_walk_mismatches: Option<u64>,
    /// How user stacks were settled outside the common path (also in the metadata).
    pub lazy_user: LazyUserCounts,
    /// How softirq wakings were told apart (task / interrupt exit / ksoftirqd), or why not.
    pub softirq_method: String,
    /// Softirq wakings by how they were decided.
    pub softirq: SoftirqCounts,
}

/// User stacks settled outside the common path, counted so that none is silent. Stored in
/// the trace metadata's `extra` under the keys of [`LazyUserCounts::KEYS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyUserCounts {
    /// User stacks marked `USER_EXITING` (`[no user stack: exiting]`): wakers past
    /// `exit_mm`, and lazy user halves of tasks that exited before returning to user space.
    pub exiting: u64,
    /// Lazy user halves taken at a switch-out, because the task was switched out again
    /// (preempted, or blocked again in the same syscall) before its return to user space.
    pub at_switch_out: u64,
    /// Lazy user halves that were due when the task exited (status `USER_EXITING`).
    pub at_exit: u64,
    /// Lazy user halves that were due when the task exec'd (status `USER_EXEC`).
    pub at_exec: u64,
    /// Long waits whose user half comes from a task_work callback still queued for an
    /// earlier wait of the same syscall (no new callback could be scheduled).
    pub served_by_pending: u64,
}

impl LazyUserCounts {
    /// Metadata keys, in field order.
    pub const KEYS: [&'static str; 5] = chainrec_format::LAZY_USER_EXTRA_KEYS;

    /// The counts as metadata key/values.
    pub fn extra(&self) -> Vec<(String, String)> {
        let v = [
            self.exiting,
            self.at_switch_out,
            self.at_exit,
            self.at_exec,
            self.served_by_pending,
        ];
        Self::KEYS
            .iter()
            .zip(v)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// Softirq wakings by how the recorder decided them (docs/RECORDER.md, "Softirq wakings").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftirqCounts {
    /// Run by the waking task itself inside `do_softirq` (task hops).
    pub task: u64,
    /// Run at an interrupt's exit (metal).
    pub irq_exit: u64,
    /// Run by ksoftirqd (metal, `via ksoftirqd`).
    pub ksoftirqd: u64,
    /// Decided without `do_softirq` tracking (metal, as before it existed).
    pub untracked: u64,
    /// Softirq wakings whose kernel stack showed how the softirq ran (`do_softirq`, or an
    /// interrupt's exit / ksoftirqd); the stack decides those.
    pub stack_checked: u64,
    /// Of those, moved to task context by the stack (the BPF side said interrupt exit).
    pub stack_to_task: u64,
    /// Of those, moved to interrupt exit by the stack (the BPF side said task).
    pub stack_to_irq: u64,
}

impl std::fmt::Display for SoftirqCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} run by the task itself (task hops), {} at an interrupt's exit, {} in ksoftirqd, \
             {} not told apart (metal); {} checked against their kernel stack, which moved {} to \
             the task and {} to the interrupt",
            self.task,
            self.irq_exit,
            self.ksoftirqd,
            self.untracked,
            self.stack_checked,
            self.stack_to_task,
            self.stack_to_irq
        )
    }
}

static SIGNAL_STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL_COUNT: AtomicU32 = AtomicU32::new(0);
static SIGNAL_LAST: AtomicI32 = AtomicI32::new(0);
static SIGNAL_FROM_TTY: AtomicBool = AtomicBool::new(false);
static SIGNAL_TERMS: AtomicU32 = AtomicU32::new(0);
static SIGNAL_TERM_SENDER: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SI_KERNEL: generated by the kernel, e.g. by the terminal for Ctrl-C (sent to the whole
    // foreground process group); kill(2) gives SI_USER, sigqueue SI_QUEUE, tgkill SI_TKILL
    // (all <= 0: sent by a process, whose pid is in si_pid).
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler (checked for
    // null anyway); si_pid is read only for the codes that set it (sent by a process).
    let (code, sender) = unsafe {
        match info.as_ref() {
            Some(i) if i.si_code <= 0 => (i.si_code, i.si_pid()),
            Some(i) => (i.si_code, 0),
            None => (libc::SI_USER, 0),
        }
    };
    let from_tty = code == libc::SI_KERNEL;
    SIGNAL_LAST.store(sig, Ordering::SeqCst);
    SIGNAL_FROM_TTY.store(from_tty, Ordering::SeqCst);
    if sig == libc::SIGTERM && !from_tty {
        SIGNAL_TERM_SENDER.store(sender, Ordering::SeqCst);
        SIGNAL_TERMS.fetch_add(1, Ordering::SeqCst);
    }
    SIGNAL_COUNT.fetch_add(1, Ordering::SeqCst);
    SIGNAL_STOP.store(true, Ordering::SeqCst);
}

/// The stop signals (SIGINT/SIGTERM) received since [`install_stop_signals`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopSignals {
    /// How many arrived.
    pub count: u32,
    /// The last one's number (0 = none yet).
    pub last: i32,
    /// The last one was generated by the kernel (the terminal's Ctrl-C, which the whole
    /// foreground process group receives), not sent by a process with kill(2).
    pub last_from_terminal: bool,
    /// How many of them were SIGTERMs not generated by the kernel (counted before `count`
    /// is, so a reader that sees a new `count` sees them too).
    pub terms: u32,
    /// The pid that sent the last of those SIGTERMs (0 = unknown, e.g. not sent by a
    /// process). It may have exited since.
    pub term_sender: i32,
}

/// The stop signals received so far (read directly, without the stop flag's delay).
pub fn stop_signals() -> StopSignals {
    let count = SIGNAL_COUNT.load(Ordering::SeqCst);
    StopSignals {
        count,
        last: SIGNAL_LAST.load(Ordering::SeqCst),
        last_from_terminal: SIGNAL_FROM_TTY.load(Ordering::SeqCst),
        terms: SIGNAL_TERMS.load(Ordering::SeqCst),
        term_sender: SIGNAL_TERM_SENDER.load(Ordering::SeqCst),
    }
}

/// Install SIGINT/SIGTERM handlers that request a clean stop; returns the flag to pass
/// in [`StopCondition::flag`]. (A second signal still stops cleanly; SIGKILL leaves a
/// file readable up to its last flush.) [`stop_signals`] tells which signals arrived.
pub fn install_stop_signals() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    // SAFETY: on_signal only stores to atomics, which is async-signal-safe; the
    // sigaction struct is fully initialized.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
    let f = flag.clone();
    std::thread::Builder::new()
        .name("chainrec-signal".into())
        .spawn(move || loop {
            if SIGNAL_STOP.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        })
        .ok();
    flag
}

/// Recent libbpf messages (kept instead of printed; the tail is attached to load errors).
static LIBBPF_LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn libbpf_print(_level: libbpf_rs::PrintLevel, msg: String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        if log.len() >= 64 {
            log.remove(0);
        }
        log.push(msg.trim_end().to_string());
    }
}

fn bpf_err(stage: &'static str, e: libbpf_rs::Error) -> RecordError {
    let detail = format!("{e:#}");
    let perm = matches!(e.kind(), libbpf_rs::ErrorKind::PermissionDenied)
        || detail.contains("Operation not permitted")
        || detail.contains("EPERM");
    if perm {
        RecordError::Permission { detail }
    } else {
        let log = LIBBPF_LOG.lock().map(|l| l.clone()).unwrap_or_default();
        let tail: Vec<&str> = log.iter().rev().take(3).rev().map(String::as_str).collect();
        RecordError::Bpf {
            stage,
            libbpf_log: tail.join(" | "),
            source: e,
        }
    }
}

fn thread_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe_zeroed_rusage();
    // SAFETY: ru is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn unsafe_zeroed_rusage() -> libc::rusage {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

fn realtime_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

fn uname() -> (String, String) {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is valid and writable.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    (s(&u.nodename), s(&u.release))
}

const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

fn irq_name(code: u32) -> String {
    let n = code & 0xffff;
    match code & !0xffff {
        raw::SRC_TIMER => "timer".to_string(),
        raw::SRC_SOFTIRQ => {
            let vec = n & !raw::SRC_SOFTIRQ_KSOFTIRQD;
            let name = if vec == raw::SRC_SOFTIRQ_UNKNOWN {
                "vector unknown".to_string()
            } else {
                SOFTIRQ_NAMES
                    .get(vec as usize)
                    .map(|s| s.to_string())
                    .unwrap_or(format!("softirq {vec}"))
            };
            if n & raw::SRC_SOFTIRQ_KSOFTIRQD != 0 {
                format!("{name} via ksoftirqd")
            } else {
                name
            }
        }
        _ => std::fs::read_to_string(format!("/sys/kernel/irq/{n}/actions"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("irq {n}")),
    }
}

/// Converts raw records into trace events and tables.
struct Converter {
    stack_ids: HashMap<(StackKind, Tid, Vec<u64>), StackId>,
    next_stack: u32,
    new_stacks: Vec<StackEntry>,
    irq_ids: HashMap<u32, u32>,
    new_irqs: Vec<IrqSource>,
    tasks: HashSet<Tid>,
    new_tasks: Vec<TaskEntry>,
    kaddrs: HashSet<u64>,
    new_kaddrs: Vec<u64>,
    uaddrs: HashSet<(Tid, u64)>,
    new_uaddrs: HashMap<Tid, Vec<u64>>,
    lost: LostCounts,
    ksyms: KernelSymbols,
    /// Kernel stack references written as SKIPPED (lazy wakings; switches are counted
    /// in BPF at switch-in instead).
    skipped: u64,
    /// User stacks written as USER_EXITING (the task was exiting).
    user_exiting: u64,
    /// Leaf kernel addresses already classified: true = inside the BPF/tracing machinery.
    tracing_frames: HashMap<u64, bool>,
    /// Scheduler and spinlock text ranges ([`KernelSymbols::scheduler_text`]), removed from
    /// eager off-CPU kernel stacks; reused buffer for the result.
    sched_text: Vec<(u64, u64)>,
    nosched_buf: Vec<u64>,
    /// Kernel addresses already classified for softirq wakings (see `softirq_by_stack`).
    softirq_frames: HashMap<u64, SoftirqFrame>,
    /// Softirq wakings checked against their kernel stack, and how many the stack moved
    /// to task context / to interrupt exit (the BPF side had decided otherwise).
    softirq_stack_checked: u64,
    softirq_stack_to_task: u64,
    softirq_stack_to_irq: u64,
    /// Check softirq wakings against their kernel stacks (off with --no-softirq-tracking,
    /// which keeps the behaviour from before they were told apart, for A/B).
    softirq_by_stack_on: bool,
}

/// What a kernel frame says about the softirq a waking ran in (the innermost such frame
/// of the stack decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SoftirqFrame {
    /// Says nothing.
    Other,
    /// `do_softirq` (`.part.N` too) or `__local_bh_enable_ip`: run by the task itself.
    Task,
    /// An interrupt's entry or exit (`irq_exit_rcu`, `sysvec_*`, `common_interrupt`, ...).
    Irq,
}

fn softirq_frame(name: &str) -> SoftirqFrame {
    let base = name.split('.').next().unwrap_or(name);
    match base {
        "do_softirq" | "__local_bh_enable_ip" => SoftirqFrame::Task,
        "irq_exit_rcu"
        | "__irq_exit_rcu"
        | "irq_exit"
        | "common_interrupt"
        | "asm_common_interrupt"
        | "run_ksoftirqd" => SoftirqFrame::Irq,
        n if n.starts_with("sysvec_") || n.starts_with("asm_sysvec_") => SoftirqFrame::Irq,
        _ => SoftirqFrame::Other,
    }
}

impl Converter {
    fn new(ksyms: KernelSymbols) -> Self {
        Converter {
            sched_text: ksyms.scheduler_text(),
            nosched_buf: Vec::new(),
            ksyms,
            skipped: 0,
            user_exiting: 0,
            tracing_frames: HashMap::new(),
            softirq_frames: HashMap::new(),
            softirq_stack_checked: 0,
            softirq_stack_to_task: 0,
            softirq_stack_to_irq: 0,
            softirq_by_stack_on: true,
            stack_ids: HashMap::new(),
            next_stack: StackId::FIRST_REAL,
            new_stacks: Vec::new(),
            irq_ids: HashMap::new(),
            new_irqs: Vec::new(),
            tasks: HashSet::new(),
            new_tasks: Vec::new(),
            kaddrs: HashSet::new(),
            new_kaddrs: Vec::new(),
            uaddrs: HashSet::new(),
            new_uaddrs: HashMap::new(),
            lost: LostCounts::default(),
        }
    }

    fn stack(&mut self, status: u8, kind: StackKind, tgid: Tid, frames: &[u64]) -> StackId {
        let failed = |l: &mut LostCounts| match kind {
            StackKind::Kernel => l.kernel_stack_failed += 1,
            StackKind::User => l.user_stack_failed += 1,
        };
        match status {
            raw::ST_NONE => StackId::NONE,
            raw::ST_SKIPPED => StackId::SKIPPED,
            raw::ST_UPREEMPT => {
                self.lost.user_stacks_preempted += 1;
                StackId::USER_PREEMPTED
            }
            raw::ST_EXITING => {
                self.user_exiting += 1;
                StackId::USER_EXITING
            }
            raw::ST_EXEC => StackId::USER_EXEC,
            raw::ST_PRESENT if !frames.is_empty() => {
                let frames = if kind == StackKind::Kernel {
                    self.strip_tracing(frames)
                } else {
                    frames
                };
                if frames.is_empty() {
                    failed(&mut self.lost);
                    return StackId::FAILED;
                }
                let tgid = if kind == StackKind::Kernel { 0 } else { tgid };
                let key = (kind, tgid, frames.to_vec());
                if let Some(id) = self.stack_ids.get(&key) {
                    return *id;
                }
                let id = StackId(self.next_stack);
                self.next_stack += 1;
                for &a in frames {
                    match kind {
                        StackKind::Kernel => {
                            if self.kaddrs.insert(a) {
                                self.new_kaddrs.push(a);
                            }
                        }
                        StackKind::User => {
                            if self.uaddrs.insert((tgid, a)) {
                                self.new_uaddrs.entry(tgid).or_default().push(a);
                            }
                        }
                    }
                }
                self.new_stacks.push(StackEntry {
                    id,
                    kind,
                    tgid,
                    frames: frames.to_vec(),
                });
                self.stack_ids.insert(key, id);
                id
            }
            _ => {
                failed(&mut self.lost);
                StackId::FAILED
            }
        }
    }

    /// An eager off-CPU kernel stack (taken at switch-out, in the task itself), without the
    /// scheduler's own frames (`schedule`, `__schedule`, `schedule_hrtimeout_range`,
    /// `do_nanosleep`, `preempt_schedule_irq`, spinlock functions, ...). The lazy stack of the
    /// same wait, walked at switch-in with `bpf_get_task_stack`, never has them (the kernel
    /// skips `in_sched_functions()` when it walks another task's stack), so both modes give
    /// the same frames, e.g. `...;anon_pipe_read` for a pipe read, and their folded files
    /// merge. Done here, not in the engine: the kernel's rule is an address range, which
    /// only the recorder's kallsyms snapshot knows.
    fn offcpu_kstack(&mut self, status: u8, frames: &[u64]) -> StackId {
        if status != raw::ST_PRESENT || self.sched_text.is_empty() {
            return self.stack(status, StackKind::Kernel, 0, frames);
        }
        let frames = self.strip_tracing(frames);
        let mut kept = std::mem::take(&mut self.nosched_buf);
        kept.clear();
        kept.extend(
            frames
                .iter()
                .copied()
                .filter(|a| !self.sched_text.iter().any(|r| (r.0..r.1).contains(a))),
        );
        let id = self.stack(status, StackKind::Kernel, 0, &kept);
        self.nosched_buf = kept;
        id
    }

    /// Drop the leading frames of the BPF program and the tracepoint glue
    /// (`bpf_prog_*`, `bpf_trace_run*`, `__bpf_trace_*`) from a kernel stack.
    fn strip_tracing<'f>(&mut self, frames: &'f [u64]) -> &'f [u64] {
        let mut cut = 0;
        for (i, &a) in frames.iter().enumerate().take(6) {
            let ksyms = &self.ksyms;
            let tracing = *self.tracing_frames.entry(a).or_insert_with(|| {
                let s = ksyms.resolve(a);
                match s.name.as_deref() {
                    Some(n) => {
                        n.starts_with("bpf_prog_")
                            || n.starts_with("bpf_trace_run")
                            || n.starts_with("__bpf_trace_")
                            || n.starts_with("__traceiter_")
                            || n == "bpf_get_stack"
                            || n.starts_with("bpf_get_stack")
                    }
                    None => false,
                }
            });
            if tracing {
                cut = i + 1;
            }
        }
        &frames[cut..]
    }

    /// Whether the kernel stack of a softirq waking shows the softirq run by the task
    /// itself (`Some(true)`), at an interrupt's exit or in ksoftirqd (`Some(false)`), or
    /// neither (`None`): the innermost `do_softirq` / interrupt frame decides.
    fn softirq_by_stack(&mut self, frames: &[u64]) -> Option<bool> {
        for &a in frames {
            let ksyms = &self.ksyms;
            let class = *self.softirq_frames.entry(a).or_insert_with(|| {
                ksyms
                    .resolve(a)
                    .name
                    .as_deref()
                    .map_or(SoftirqFrame::Other, softirq_frame)
            });
            match class {
                SoftirqFrame::Other => {}
                SoftirqFrame::Task => return Some(true),
                SoftirqFrame::Irq => return Some(false),
            }
        }
        None
    }

    /// Context and source code of a softirq waking, checked against its kernel stack when
    /// it has one: the stack is exact where the BPF side used the preempt-count rule.
    fn softirq_checked(
        &mut self,
        e: &RawEv,
        kf: &[u64],
        context: WakeContext,
    ) -> (WakeContext, u32) {
        let ksoftirqd = e.c & !0xffff == raw::SRC_SOFTIRQ && e.c & raw::SRC_SOFTIRQ_KSOFTIRQD != 0;
        if e.kst != raw::ST_PRESENT || ksoftirqd || !self.softirq_by_stack_on {
            return (context, e.c);
        }
        let Some(task) = self.softirq_by_stack(kf) else {
            return (context, e.c);
        };
        self.softirq_stack_checked += 1;
        match (task, context) {
            (true, WakeContext::SoftIrq) if e.a != 0 => {
                self.softirq_stack_to_task += 1;
                // An hrtimer expiring in the softirq was sent as the timer source.
                let code = if e.c == raw::SRC_TIMER {
                    raw::SRC_SOFTIRQ | 8
                } else {
                    e.c
                };
                (WakeContext::SoftIrqTask, code)
            }
            (false, WakeContext::SoftIrqTask) => {
                self.softirq_stack_to_irq += 1;
                (WakeContext::SoftIrq, e.c)
            }
            _ => (context, e.c),
        }
    }

    fn irq(&mut self, code: u32) -> u32 {
        if code == 0 {
            return 0;
        }
        let next = self.irq_ids.len() as u32 + 1;
        *self.irq_ids.entry(code).or_insert_with(|| {
            self.new_irqs.push(IrqSource {
                id: next,
                name: irq_name(code),
            });
            next
        })
    }

    fn convert(&mut self, e: &RawEv, pool: &[u64]) -> Event {
        let at = e.frames_at as usize;
        let kf = &pool[at..at + e.nk as usize];
        let uf = &pool[at + e.nk as usize..at + e.nk as usize + e.nu as usize];
        if e.kind == raw::EV_WAKING && e.kst == raw::ST_SKIPPED {
            // lazy mode: skipped waker stacks are counted here, skipped off-CPU stacks in BPF
            self.skipped += 1;
        }
        match e.kind {
            raw::EV_SWITCH => Event::Switch(Switch {
                ts: e.ts,
                cpu: e.cpu as u32,
                prev_tid: e.a,
                prev_state: e.c,
                next_tid: e.b,
                prev_kstack: self.offcpu_kstack(e.kst, kf),
                prev_ustack: self.stack(e.ust, StackKind::User, e.d, uf),
            }),
            raw::EV_WAKING => {
                let mut context = WakeContext::from_u8(e.aux).unwrap_or(WakeContext::Task);
                let mut code = e.c;
                if matches!(context, WakeContext::SoftIrq | WakeContext::SoftIrqTask) {
                    (context, code) = self.softirq_checked(e, kf, context);
                }
                // The format ties the source to the context (Waking::unencodable): a task
                // waking has none, a task-context softirq always names its vector.
                let code = match context {
                    WakeContext::Task => 0,
                    WakeContext::SoftIrqTask if code == 0 => {
                        raw::SRC_SOFTIRQ | raw::SRC_SOFTIRQ_UNKNOWN
                    }
                    _ => code,
                };
                Event::Waking(Waking {
                    ts: e.ts,
                    cpu: e.cpu as u32,
                    waker_tid: e.a,
                    target_tid: e.b,
                    context,
                    source: self.irq(code),
                    waker_kstack: self.stack(e.kst, StackKind::Kernel, 0, kf),
                    waker_ustack: self.stack(e.ust, StackKind::User, e.d, uf),
                })
            }
            raw::EV_WAKEUP_NEW => Event::WakeupNew(WakeupNew {
                ts: e.ts,
                cpu: e.cpu as u32,
                parent_tid: e.a,
                child_tid: e.b,
                child_tgid: e.c,
            }),
            raw::EV_COMM => {
                let comm = Comm(e.comm);
                if self.tasks.insert(e.a) {
                    self.new_tasks.push(TaskEntry {
                        tid: e.a,
                        tgid: e.b,
                        comm,
                        kernel_thread: e.c & 1 != 0,
                    });
                }
                Event::Comm(TaskComm {
                    ts: e.ts,
                    tid: e.a,
                    tgid: e.b,
                    comm,
                    reason: CommReason::from_u8(e.aux).unwrap_or(CommReason::Seen),
                })
            }
            raw::EV_EXIT => Event::Exit(Exit {
                ts: e.ts,
                tid: e.a,
                tgid: e.b,
            }),
            _ => Event::OffCpuStacks(OffCpuStacks {
                ts: e.ts,
                tid: e.a,
                kstack: self.stack(e.kst, StackKind::Kernel, 0, kf),
                ustack: self.stack(e.ust, StackKind::User, e.b, uf),
            }),
        }
    }
}

/// Holds events until they are older than the drain bound, so that the slightly
/// out-of-order ring buffer (shared by all CPUs) is written in time order.
struct Reorder {
    buf: Vec<Event>,
    last_ts: u64,
    out_of_order: u64,
}

impl Reorder {
    /// Push every buffered event with `ts <= bound` (all when bound is u64::MAX).
    fn drain(
        &mut self,
        bound: u64,
        sink: &mut impl TraceSink,
        by_kind: &mut [u64; 7],
    ) -> Result<()> {
        if !self.buf.is_sorted_by_key(|e| e.ts()) {
            self.buf.sort_by_key(|e| e.ts());
        }
        let n = self.buf.partition_point(|e| e.ts() <= bound);
        let mut late: Option<Lost> = None;
        for ev in self.buf.drain(..n) {
            if ev.ts() < self.last_ts {
                // Arrived after newer events were already written: count it, never
                // reorder the file.
                self.out_of_order += 1;
                let l = late.get_or_insert(Lost {
                    ts: self.last_ts,
                    cpu: u32::MAX,
                    count: 0,
                    cause: LostCause::OutOfOrder,
                });
                l.count += 1;
                continue;
            }
            self.last_ts = ev.ts();
            by_kind[ev.kind() as usize] += 1;
            sink.push(&ev)?;
        }
        if let Some(mut l) = late {
            l.ts = self.last_ts;
            by_kind[EventKind::Lost as usize] += 1;
            sink.push(&Event::Lost(l))?;
        }
        Ok(())
    }
}

fn prog_stats(fd: i32) -> (u64, u64) {
    // SAFETY: bpf_prog_info is plain old data; all-zero is valid.
    let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info/len point to a valid buffer of `len` bytes; fd is a live program fd.
    let r = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if r != 0 {
        return (0, 0);
    }
    (info.run_time_ns, info.run_cnt)
}

/// `vm.mmap_min_addr`: no user mapping lies below it. None when unreadable or 0.
fn mmap_min_addr() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&v: &u64| v > 0)
}

/// How lazy-mode user stacks are collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UserStackPath {
    /// Not collected here (eager/none mode, or `--no-user-stacks`).
    Off,
    /// A BPF task_work callback scheduled at switch-in, run on the return to user space.
    TaskWork,
    /// The `sys_exit` tracepoint program (fallback).
    SysExit,
}

/// Open, configure and load the BPF object with the given lazy user-stack path.
fn open_and_load<'obj>(
    open_obj: &'obj mut MaybeUninit<OpenObject>,
    opts: &RecordOptions,
    delta: &std::result::Result<i64, String>,
    rb_size: u32,
    path: UserStackPath,
    softirq_tracking: bool,
    irq_stack: Option<&IrqStackInfo>,
) -> Result<ChainrecSkel<'obj>> {
    let builder = ChainrecSkelBuilder::default();
    let mut open = builder.open(open_obj).map_err(|e| bpf_err("open", e))?;
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .ok_or(RecordError::Skeleton(".rodata"))?;
        ro.stack_mode = match opts.stack_mode {
            StackMode::Lazy => 0,
            StackMode::Eager => 1,
            StackMode::None => 2,
        };
        ro.threshold_ns = opts.stack_threshold_ns;
        ro.wake_mark = rb_size as u64 / 4;
        ro.filter_enabled = !opts.pids.is_empty();
        ro.user_stacks = opts.user_stacks;
        ro.use_task_work = path == UserStackPath::TaskWork;
        ro.softirq_heuristic = !opts.no_softirq_tracking;
        if let Some(i) = irq_stack {
            ro.have_irqstack = true;
            ro.irqstack_ptr_delta = i.ptr_delta;
            ro.irqstack_inuse_delta = i.inuse_delta;
            (ro.bh_enable_start, ro.bh_enable_end) = i.bh_enable;
            (ro.do_softirq_start, ro.do_softirq_end) = i.do_softirq;
        }
        if let Some(min) = mmap_min_addr() {
            ro.user_walk_shortcut = !opts.no_user_walk_shortcut;
            ro.verify_user_walk = opts.verify_user_walk_shortcut;
            ro.min_user_addr = min;
        }
        if let Ok(d) = delta {
            ro.preempt_delta = *d;
            ro.have_preempt_delta = true;
        }
        if let Ok(d) = crate::btfinfo::ksoftirqd_delta() {
            ro.ksoftirqd_delta = d;
            ro.have_ksoftirqd_delta = true;
        }
    }
    open.maps
        .rb
        .set_max_entries(rb_size)
        .map_err(|e| bpf_err("open", e))?;
    if path != UserStackPath::TaskWork {
        open.maps
            .twmap
            .set_max_entries(1)
            .map_err(|e| bpf_err("open", e))?;
    }
    if path != UserStackPath::SysExit {
        // Attaching sys_exit at all puts every syscall exit on the slow path.
        open.progs.on_sys_exit.set_autoload(false);
    }
    // The do_softirq programs are attached by hand, in order (see attach_softirq).
    open.progs.on_do_softirq.set_autoattach(false);
    open.progs.on_do_softirq_exit.set_autoattach(false);
    if !softirq_tracking {
        open.progs.on_do_softirq.set_autoload(false);
        open.progs.on_do_softirq_exit.set_autoload(false);
    }
    open.load().map_err(|e| bpf_err("load", e))
}

/// What the BPF side needs to tell softirqs run by a task from those at an interrupt's
/// exit by the irq stack (`softirq_by_irqstack` in bpf/chainrec.bpf.c).
struct IrqStackInfo {
    ptr_delta: i64,
    inuse_delta: i64,
    bh_enable: (u64, u64),
    do_softirq: (u64, u64),
}

impl IrqStackInfo {
    fn find(ksyms: &KernelSymbols) -> std::result::Result<IrqStackInfo, String> {
        if !cfg!(target_arch = "x86_64") {
            return Err("irq stack layout known on x86_64 only".into());
        }
        let (ptr_delta, inuse_delta) = crate::btfinfo::irq_stack_deltas()?;
        let range = |n: &str| {
            ksyms
                .range(n)
                .ok_or_else(|| format!("no unique `{n}` in /proc/kallsyms"))
        };
        Ok(IrqStackInfo {
            ptr_delta,
            inuse_delta,
            bh_enable: range("__local_bh_enable_ip")?,
            do_softirq: range("do_softirq")?,
        })
    }
}

/// Attach the `do_softirq` fexit program, then the fentry one (so that the per-CPU flag the
/// entry sets is always cleared), then tell the programs they may trust it. The links
/// must be dropped in the reverse order: entry first ([`SoftirqLinks`] does).
fn attach_softirq(skel: &mut ChainrecSkel<'_>) -> std::result::Result<SoftirqLinks, String> {
    let exit = skel
        .progs
        .on_do_softirq_exit
        .attach_trace()
        .map_err(|e| format!("fexit do_softirq: {e}"))?;
    let entry = skel
        .progs
        .on_do_softirq
        .attach_trace()
        .map_err(|e| format!("fentry do_softirq: {e}"))?;
    let bss = skel
        .maps
        .bss_data
        .as_deref_mut()
        .ok_or("skeleton has no .bss")?;
    bss.sirq_tracked = true;
    Ok(SoftirqLinks {
        entry: Some(entry),
        _exit: Some(exit),
    })
}

/// The `do_softirq` links; fields drop in declaration order: the entry program first.
#[derive(Default)]
struct SoftirqLinks {
    entry: Option<libbpf_rs::Link>,
    _exit: Option<libbpf_rs::Link>,
}

impl SoftirqLinks {
    fn attached(&self) -> bool {
        self.entry.is_some()
    }
}

/// After a recording failed once it had started: where the events recorded before the
/// failure are (a sentence to append to the error), if `output` holds any.
pub fn partial_trace_note(output: &std::path::Path) -> Option<String> {
    std::fs::metadata(output)
        .is_ok_and(|m| m.is_file() && m.len() > 0)
        .then(|| {
            format!(
                "the events recorded before the failure are in {o} (`chainrec info {o}` reads it \
                 and tells how to analyse it)",
                o = output.display()
            )
        })
}

/// Fail before loading anything when `path` cannot be the trace file: a directory, or in
/// a directory that does not exist (or is not a directory).
pub fn check_output(path: &std::path::Path) -> Result<()> {
    let bad = |detail: String| RecordError::Output {
        path: path.to_path_buf(),
        detail,
    };
    if path.is_dir() {
        return Err(bad("is a directory".into()));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        match std::fs::metadata(parent) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(bad(format!("{} is not a directory", parent.display())));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(bad(format!(
                    "directory {} does not exist",
                    parent.display()
                )));
            }
            Err(e) => return Err(bad(format!("{}: {e}", parent.display()))),
        }
    }
    Ok(())
}

/// Record until `stop` says so, writing `opts.output`. See the crate docs.
pub fn record(opts: &RecordOptions, stop: StopCondition) -> Result<RecordSummary> {
    if opts.ringbuf_bytes < 4096 || opts.ringbuf_bytes > (1 << 31) {
        return Err(RecordError::Invalid(format!(
            "ring buffer size {} bytes out of range (4 KiB ..= 2 GiB)",
            opts.ringbuf_bytes
        )));
    }
    let rb_size = opts.ringbuf_bytes.next_power_of_two() as u32;
    check_output(&opts.output)?;
    if opts.pids.len() > 1024 {
        return Err(RecordError::Invalid("at most 1024 -p pids".into()));
    }

    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, libbpf_print)));
    let delta = if opts.force_context_fallback {
        Err("forced by option".to_string())
    } else {
        crate::btfinfo::preempt_count_delta()
    };
    // Lazy user stacks: task_work when the kernel has the kfunc, else sys_exit. If the
    // task_work variant fails to load (verifier), fall back to sys_exit and say why.
    let lazy_user = opts.stack_mode == StackMode::Lazy && opts.user_stacks;
    let (mut path, mut path_note) = if !lazy_user {
        (UserStackPath::Off, String::new())
    } else if opts.force_sys_exit_user_stacks {
        (UserStackPath::SysExit, "forced by option".to_string())
    } else {
        match crate::btfinfo::kernel_has_func(crate::btfinfo::TASK_WORK_KFUNC) {
            Ok(true) => (UserStackPath::TaskWork, String::new()),
            Ok(false) => (
                UserStackPath::SysExit,
                format!("kernel has no {}", crate::btfinfo::TASK_WORK_KFUNC),
            ),
            Err(e) => (UserStackPath::SysExit, e),
        }
    };
    // Snapshot kernel symbols before starting (module loads during recording are rare).
    let ksyms = KernelSymbols::load().unwrap_or_default();
    let irq_stack = IrqStackInfo::find(&ksyms);
    // Softirq wakings told apart by fentry/fexit on do_softirq (docs/RECORDER.md). Without
    // them (no such function, no trampolines, rejected), softirq wakings stay metal.
    let (mut softirq_tracking, mut softirq_note) = if opts.no_softirq_tracking {
        (false, "off (--no-softirq-tracking)".to_string())
    } else {
        match crate::btfinfo::kernel_has_func("do_softirq") {
            Ok(true) => (true, String::new()),
            Ok(false) => (false, "kernel BTF has no do_softirq".to_string()),
            Err(e) => (false, e),
        }
    };
    // Load; on a rejection, retry without the optional part that was rejected (the
    // do_softirq programs, then the task_work path), saying why.
    let mut open_objs: [MaybeUninit<OpenObject>; 3] =
        std::array::from_fn(|_| MaybeUninit::uninit());
    let mut slots = open_objs.iter_mut();
    let mut skel = loop {
        let slot = slots.next().expect("at most three load attempts");
        match open_and_load(
            slot,
            opts,
            &delta,
            rb_size,
            path,
            softirq_tracking,
            irq_stack.as_ref().ok(),
        ) {
            Ok(s) => break s,
            // The optional do_softirq programs first: whatever failed (this kernel refuses
            // every fentry program with EPERM), retry without them.
            Err(e) if softirq_tracking => {
                softirq_tracking = false;
                softirq_note = match e {
                    RecordError::Permission { .. } => "refused by the kernel (EPERM)".into(),
                    e => format!("rejected: {e}"),
                };
            }
            Err(e @ RecordError::Bpf { .. }) if path == UserStackPath::TaskWork => {
                path = UserStackPath::SysExit;
                let source =
                    std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s:#}"));
                path_note = format!("task_work program rejected: {e}{source}");
            }
            Err(e) => return Err(e),
        }
    };
    let user_stack_method = match path {
        UserStackPath::Off if opts.stack_mode != StackMode::Lazy => {
            "none (lazy mode only)".to_string()
        }
        UserStackPath::Off => "none (--no-user-stacks)".to_string(),
        UserStackPath::TaskWork => format!(
            "task_work ({} at switch-in, callback on return to user space)",
            crate::btfinfo::TASK_WORK_KFUNC
        ),
        UserStackPath::SysExit => format!("sys_exit tracepoint ({path_note})"),
    };
    for pid in &opts.pids {
        skel.maps
            .filter_tgids
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(|e| bpf_err("filter setup", e))?;
    }

    let usyms = UserSymbolizer::new();

    let (host, release) = uname();
    let cpu_count = libbpf_rs::num_possible_cpus().unwrap_or(1) as u32;
    let context_method = match &delta {
        Ok(d) => format!("preempt_count at runqueues{d:+}"),
        Err(e) => format!("irq tracepoints fallback ({e})"),
    };
    let mut meta = RecordingMeta {
        host,
        kernel_release: release,
        cpu_count,
        clock: Clock::Monotonic,
        clock_offset_ns: realtime_ns() - monotonic_ns() as i128,
        command_line: opts.command_line.clone(),
        start_ns: 0,
        end_ns: 0,
        stack_mode: opts.stack_mode,
        stack_threshold_ns: if opts.stack_mode == StackMode::Lazy {
            opts.stack_threshold_ns
        } else {
            0
        },
        lost: LostCounts::default(),
        synthetic_scenario: None,
        extra: vec![
            (
                "recorder".into(),
                format!("chainrec-record {}", env!("CARGO_PKG_VERSION")),
            ),
            ("ringbuf_bytes".into(), rb_size.to_string()),
            (
                "filter_pids".into(),
                opts.pids
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("wake_context".into(), context_method.clone()),
            ("lazy_user_stacks".into(), user_stack_method.clone()),
            ("kallsyms_symbols".into(), ksyms.len().to_string()),
            (
                "kernel_stacks".into(),
                "BPF program and tracepoint frames removed from the leaf end".into(),
            ),
        ],
    };

    let wopts = WriterOptions {
        mode: 0o600,
        ..WriterOptions::default()
    };
    // A stop requested while the programs were loading: leave any previous file alone.
    if stop.flag.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
        return Err(RecordError::Stopped {
            path: opts.output.clone(),
        });
    }
    let mut writer = TraceWriter::create(&opts.output, &meta, wopts)?;

    // Ring buffer consumer: decode into a batch, converted after each drain.
    let batch: RefCell<(Vec<RawEv>, Vec<u64>, u64)> =
        RefCell::new((Vec::with_capacity(1 << 16), Vec::new(), 0));
    let mut rbb = RingBufferBuilder::new();
    rbb.add(&skel.maps.rb, |data: &[u8]| {
        let mut b = batch.borrow_mut();
        let (evs, pool, malformed) = &mut *b;
        match raw::decode(data, pool) {
            Some(e) => evs.push(e),
            None => *malformed += 1,
        }
        0
    })
    .map_err(|e| bpf_err("ring buffer", e))?;
    let ring = rbb.build().map_err(|e| bpf_err("ring buffer", e))?;

    let mut softirq_links = SoftirqLinks::default();
    if softirq_tracking {
        match attach_softirq(&mut skel) {
            Ok(l) => softirq_links = l,
            Err(e) => softirq_note = format!("attach failed: {e}"),
        }
    }
    let softirq_method = if softirq_links.attached() {
        "fentry/fexit on do_softirq".to_string()
    } else if opts.no_softirq_tracking {
        format!("not told apart, softirq wakings stay metal ({softirq_note})")
    } else {
        match &irq_stack {
            Ok(_) => format!(
                "saved stack pointer on the irq stack, checked against the kernel stack where \
                 one was taken (fentry: {softirq_note})"
            ),
            Err(e) => format!(
                "not told apart ({e}; fentry: {softirq_note}): softirq wakings stay metal \
                 unless their kernel stack shows do_softirq"
            ),
        }
    };
    meta.extra
        .push(("softirq_context".into(), softirq_method.clone()));
    skel.attach().map_err(|e| bpf_err("attach", e))?;
    let start_ns = monotonic_ns();
    meta.start_ns = start_ns;
    writer.update_meta(&meta)?;
    let t_start = Instant::now();
    // Consumer CPU counts from here: loading and verifying the programs is not consuming.
    let cpu_at_attach = thread_cpu();
    if let Some(s) = &stop.started {
        s.store(true, Ordering::SeqCst);
    }

    let mut conv = Converter::new(ksyms);
    conv.softirq_by_stack_on = !opts.no_softirq_tracking;
    let mut reorder = Reorder {
        buf: Vec::with_capacity(1 << 16),
        last_ts: 0,
        out_of_order: 0,
    };
    let mut by_kind = [0u64; 7];
    let mut lost_seen: Vec<u64> = vec![0; cpu_count as usize];
    let mut last_flush = Instant::now();
    let mut last_status = (Instant::now(), 0u64);
    let status = opts.status_line && std::io::stderr().is_terminal();
    let window_ns: u64 = 10_000_000;
    let mut counters_total = [0u64; raw::C_NR];

    let mut stopping = false;
    loop {
        if !stopping {
            let dur_over = stop.duration.is_some_and(|d| t_start.elapsed() >= d);
            let flagged = stop.flag.as_ref().is_some_and(|f| f.load(Ordering::SeqCst));
            if dur_over || flagged {
                stopping = true;
                // Detach first so that nothing new arrives, then drain everything.
                skel.links = ChainrecLinks::default();
                drop(std::mem::take(&mut softirq_links));
            }
        }
        let now = monotonic_ns();
        if !stopping {
            // Sleeps until the period ends or BPF forces a wakeup past the fill mark.
            let _ = ring.poll(opts.poll_period);
        }
        ring.consume()
            .map_err(|e| bpf_err("ring buffer consume", e))?;
        {
            let mut b = batch.borrow_mut();
            let (evs, pool, malformed) = &mut *b;
            for e in evs.iter() {
                let ev = conv.convert(e, pool);
                reorder.buf.push(ev);
            }
            evs.clear();
            pool.clear();
            if *malformed > 0 {
                conv.lost.malformed += *malformed;
                reorder.buf.push(Event::Lost(Lost {
                    ts: now,
                    cpu: u32::MAX,
                    count: *malformed,
                    cause: LostCause::Malformed,
                }));
                *malformed = 0;
            }
        }
        if !conv.new_irqs.is_empty() {
            writer.add_irq_sources(&conv.new_irqs)?;
            conv.new_irqs.clear();
        }
        if !conv.new_tasks.is_empty() {
            writer.add_tasks(&conv.new_tasks)?;
            conv.new_tasks.clear();
        }
        if !conv.new_stacks.is_empty() {
            writer.add_stacks(&conv.new_stacks)?;
            conv.new_stacks.clear();
        }

        let periodic = last_flush.elapsed() >= Duration::from_millis(500);
        if periodic || stopping {
            // Ring buffer reserve failures, per CPU -> Lost markers.
            let mut totals = [0u64; raw::C_NR];
            for idx in 0..raw::C_NR as u32 {
                if let Ok(Some(vals)) = skel
                    .maps
                    .counters
                    .lookup_percpu(&idx.to_ne_bytes(), MapFlags::ANY)
                {
                    for (cpu, v) in vals.iter().enumerate() {
                        let n = v
                            .get(..8)
                            .and_then(|b| b.try_into().ok())
                            .map(u64::from_ne_bytes)
                            .unwrap_or(0);
                        totals[idx as usize] += n;
                        if idx == raw::C_RB_FULL && cpu < lost_seen.len() && n > lost_seen[cpu] {
                            reorder.buf.push(Event::Lost(Lost {
                                ts: now,
                                cpu: cpu as u32,
                                count: n - lost_seen[cpu],
                                cause: LostCause::RingBufferFull,
                            }));
                            lost_seen[cpu] = n;
                        }
                    }
                }
            }
            counters_total = totals;
        }

        let bound = if stopping {
            u64::MAX
        } else {
            now.saturating_sub(window_ns)
        };
        reorder.drain(bound, &mut writer, &mut by_kind)?;

        if periodic && !stopping {
            // Flush first: symbolization below may take a while on first sight of a big binary.
            writer.flush()?;
        }
        // Symbolize new addresses at once (every poll), while their processes are still
        // alive: short-lived processes would be gone by the next periodic flush.
        if !conv.new_kaddrs.is_empty() {
            let addrs = std::mem::take(&mut conv.new_kaddrs);
            let syms: Vec<SymbolEntry> = addrs.iter().map(|&a| conv.ksyms.resolve(a)).collect();
            conv.lost.unresolved_symbols += syms.iter().filter(|s| s.name.is_none()).count() as u64;
            writer.add_symbols(&syms)?;
        }
        for (tgid, addrs) in std::mem::take(&mut conv.new_uaddrs) {
            let syms = usyms.resolve(tgid, &addrs);
            conv.lost.unresolved_symbols += syms.iter().filter(|s| s.name.is_none()).count() as u64;
            writer.add_symbols(&syms)?;
        }
        if periodic || stopping {
            meta.lost = lost_counts(&conv, &counters_total, reorder.out_of_order);
            if periodic && !stopping {
                writer.update_meta(&meta)?;
                writer.flush()?;
                last_flush = Instant::now();
            }
            if status {
                let dt = last_status.0.elapsed().as_secs_f64().max(1e-3);
                let evs = writer.events_written();
                let rate = (evs - last_status.1) as f64 / dt;
                let lost = meta.lost.ringbuf_full + meta.lost.out_of_order + meta.lost.malformed;
                // Not eprint!: a terminal gone away (EIO) must not panic the consumer and
                // lose the trace's end.
                let _ = write!(
                    std::io::stderr(),
                    "\r\x1b[K[chainrec] {:6.1} s  {:>9.0} ev/s  {:>11} events  lost {}  {:.1} MiB",
                    t_start.elapsed().as_secs_f64(),
                    rate,
                    evs,
                    lost,
                    writer.bytes_written() as f64 / (1 << 20) as f64
                );
                let _ = std::io::stderr().flush();
                last_status = (Instant::now(), evs);
            }
        }
        if stopping {
            break;
        }
    }
    if status {
        let _ = writeln!(std::io::stderr());
    }
    let end_ns = monotonic_ns();
    let (mut run_ns, mut run_cnt) = (0, 0);
    for prog in skel.object().progs() {
        use std::os::fd::{AsFd, AsRawFd};
        let (t, c) = prog_stats(prog.as_fd().as_raw_fd());
        run_ns += t;
        run_cnt += c;
    }
    meta.end_ns = end_ns.max(reorder.last_ts);
    meta.lost = lost_counts(&conv, &counters_total, reorder.out_of_order);
    let consumer_cpu = thread_cpu().saturating_sub(cpu_at_attach);
    meta.extra.push((
        "consumer_cpu_ns".into(),
        consumer_cpu.as_nanos().to_string(),
    ));
    meta.extra.push((
        "user_walk_shortcut".into(),
        format!(
            "{} user stacks finished below vm.mmap_min_addr without the kernel walker{}",
            counters_total[raw::C_UWALK_SHORT as usize],
            if opts.verify_user_walk_shortcut {
                format!(
                    "; verified: {} disagreed with the kernel walker",
                    counters_total[raw::C_UWALK_MISMATCH as usize]
                )
            } else {
                String::new()
            }
        ),
    ));
    if path == UserStackPath::TaskWork {
        meta.extra.push((
            "task_work_failed".into(),
            counters_total[raw::C_TW_FAILED as usize].to_string(),
        ));
    }
    let lazy_user = LazyUserCounts {
        exiting: conv.user_exiting,
        at_switch_out: counters_total[raw::C_USER_AT_SWITCH as usize],
        at_exit: counters_total[raw::C_USER_AT_EXIT as usize],
        served_by_pending: counters_total[raw::C_USER_PENDING_OVERWRITTEN as usize],
        at_exec: counters_total[raw::C_USER_AT_EXEC as usize],
    };
    meta.extra.extend(lazy_user.extra());
    let c = |i: u32| counters_total[i as usize];
    let softirq = SoftirqCounts {
        task: c(raw::C_SIRQ_TASK),
        irq_exit: c(raw::C_SIRQ_IRQ),
        ksoftirqd: c(raw::C_SIRQ_KSOFTIRQD),
        untracked: c(raw::C_SIRQ_UNTRACKED),
        stack_checked: conv.softirq_stack_checked,
        stack_to_task: conv.softirq_stack_to_task,
        stack_to_irq: conv.softirq_stack_to_irq,
    };
    meta.extra
        .push(("softirq_wakings".into(), softirq.to_string()));
    if run_cnt > 0 {
        meta.extra
            .push(("bpf_run_time_ns".into(), run_ns.to_string()));
        meta.extra.push(("bpf_run_cnt".into(), run_cnt.to_string()));
    }
    let ws = writer.finish(&meta)?;
    Ok(RecordSummary {
        output: opts.output.clone(),
        events: ws.events,
        events_by_kind: by_kind,
        bytes: ws.bytes,
        duration: t_start.elapsed(),
        lost: meta.lost.clone(),
        stacks: (conv.next_stack - StackId::FIRST_REAL) as u64,
        symbols: (conv.kaddrs.len() + conv.uaddrs.len()) as u64,
        consumer_cpu,
        bpf_run_time_ns: run_ns,
        bpf_run_cnt: run_cnt,
        context_fallbacks: counters_total[raw::C_CTX_FALLBACK as usize],
        context_method,
        user_stack_method,
        user_walks_shortcut: counters_total[raw::C_UWALK_SHORT as usize],
        lazy_user,
        user_walk_mismatches: opts
            .verify_user_walk_shortcut
            .then_some(counters_total[raw::C_UWALK_MISMATCH as usize]),
        softirq_method,
        softirq,
    })
}

fn lost_counts(conv: &Converter, counters: &[u64; raw::C_NR], out_of_order: u64) -> LostCounts {
    LostCounts {
        ringbuf_full: counters[raw::C_RB_FULL as usize],
        out_of_order,
        stacks_skipped: counters[raw::C_SKIP_OFFCPU as usize] + conv.skipped,
        ..conv.lost.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(ts: u64) -> Event {
        Event::Switch(Switch {
            ts,
            cpu: 0,
            prev_tid: 1,
            prev_state: 1,
            next_tid: 2,
            prev_kstack: StackId::NONE,
            prev_ustack: StackId::NONE,
        })
    }

    #[test]
    fn reorder_sorts_and_counts_late_events() {
        let mut r = Reorder {
            buf: vec![sw(30), sw(10), sw(20), sw(50)],
            last_ts: 0,
            out_of_order: 0,
        };
        let mut mem = MemTrace::default();
        let mut k = [0u64; 7];
        r.drain(30, &mut mem, &mut k).unwrap();
        let ts: Vec<u64> = mem.events.iter().map(|e| e.ts()).collect();
        assert_eq!(ts, vec![10, 20, 30]);
        // 25 arrives after 30 was written: counted, not written; 50 and 60 go out.
        r.buf.push(sw(25));
        r.buf.push(sw(60));
        r.drain(u64::MAX, &mut mem, &mut k).unwrap();
        let ts: Vec<u64> = mem.events.iter().map(|e| e.ts()).collect();
        assert_eq!(ts, vec![10, 20, 30, 50, 60, 60]);
        assert_eq!(r.out_of_order, 1);
        match mem.events[5] {
            Event::Lost(l) => {
                assert_eq!((l.count, l.cause, l.ts), (1, LostCause::OutOfOrder, 60));
            }
            e => panic!("expected a Lost marker, got {e:?}"),
        }
        assert_eq!(k[EventKind::Switch as usize], 5);
        assert_eq!(k[EventKind::Lost as usize], 1);
    }

    #[test]
    fn converter_dedups_stacks_and_maps_statuses() {
        let mut c = Converter::new(KernelSymbols::default());
        let pool = vec![0xffff_ffff_8100_0010u64, 0xffff_ffff_8100_0020, 0x4000_1000];
        let mut e = RawEv {
            kind: raw::EV_WAKING,
            kst: raw::ST_PRESENT,
            ust: raw::ST_PRESENT,
            nk: 2,
            nu: 1,
            a: 5,
            b: 6,
            d: 5,
            ..Default::default()
        };
        let Event::Waking(w1) = c.convert(&e, &pool) else {
            panic!("not a waking")
        };
        assert_eq!(w1.waker_kstack, StackId(StackId::FIRST_REAL));
        assert_eq!(w1.waker_ustack, StackId(StackId::FIRST_REAL + 1));
        let Event::Waking(w2) = c.convert(&e, &pool) else {
            panic!("not a waking")
        };
        assert_eq!(
            (w2.waker_kstack, w2.waker_ustack),
            (w1.waker_kstack, w1.waker_ustack)
        );
        assert_eq!(c.new_stacks.len(), 2);
        assert_eq!(c.new_kaddrs.len(), 2);
        assert_eq!(c.new_uaddrs[&5], vec![0x4000_1000]);
        // same user frames in another process: a different stack
        e.d = 7;
        let Event::Waking(w3) = c.convert(&e, &pool) else {
            panic!("not a waking")
        };
        assert_eq!(w3.waker_ustack, StackId(StackId::FIRST_REAL + 2));
        e.kst = raw::ST_FAILED;
        e.ust = raw::ST_UPREEMPT;
        let Event::Waking(w4) = c.convert(&e, &pool) else {
            panic!("not a waking")
        };
        assert_eq!(
            (w4.waker_kstack, w4.waker_ustack),
            (StackId::FAILED, StackId::USER_PREEMPTED)
        );
        assert_eq!(c.lost.kernel_stack_failed, 1);
        assert_eq!(c.lost.user_stacks_preempted, 1);
        // present but empty counts as failed
        e.kst = raw::ST_PRESENT;
        e.nk = 0;
        e.nu = 0;
        e.ust = raw::ST_SKIPPED;
        let Event::Waking(w5) = c.convert(&e, &pool) else {
            panic!("not a waking")
        };
        assert_eq!(
            (w5.waker_kstack, w5.waker_ustack),
            (StackId::FAILED, StackId::SKIPPED)
        );
        assert_eq!(c.lost.kernel_stack_failed, 2);
    }

    #[test]
    fn irq_sources_get_stable_ids() {
        let mut c = Converter::new(KernelSymbols::default());
        assert_eq!(c.irq(0), 0);
        assert_eq!(c.irq(raw::SRC_TIMER), 1);
        assert_eq!(c.irq(raw::SRC_SOFTIRQ | 3), 2);
        assert_eq!(c.irq(raw::SRC_TIMER), 1);
        let names: Vec<&str> = c.new_irqs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["timer", "NET_RX"]);
    }
}
