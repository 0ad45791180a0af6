//! The recorder's options, stop condition and summary types.

use chainrec_format::LostCounts;
use chainrec_format::StackMode;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

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
    /// One file, rotating files, or the flight recorder (`output` is then the prefix of
    /// the dumps' names).
    pub output_mode: crate::output::OutputMode,
    /// Lazy mode: never take a user stack at a switch-out on a prediction (every long wait's
    /// user half then comes through the task_work or sys_exit path; A/B and tests).
    pub no_user_stash: bool,
    /// Time the sections of the BPF programs (`RecordSummary::bpf_profile`; costs two
    /// clock reads per section).
    pub profile_bpf: bool,
    /// Do not record threads' cgroups (A/B: what tracking them costs).
    pub no_cgroups: bool,
    /// On-CPU samples (`--sample-freq`, `--sample-event`); `None` = `--no-samples`.
    pub samples: Option<crate::samples::SampleConfig>,
    /// Copy up to this many bytes of the user stack (from the user sp) wherever a user
    /// stack is taken, and unwind it in the consumer with the objects' CFI (`--user-unwind
    /// cfi`); 0 = frame-pointer walks only (`--user-unwind fp`). At most
    /// [`DEFAULT_USER_STACK_COPY`] (the BPF buffers' size).
    pub user_stack_copy_bytes: u32,
    /// Goroutine parks and readies of Go programs (`--go`, `--no-go`, `--go-max-rate`).
    pub go: crate::golang::GoOptions,
}

/// The user-stack copy size of `--user-unwind cfi`, and the most the BPF side can copy.
pub const DEFAULT_USER_STACK_COPY: u32 = 16384;

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            output: PathBuf::from("trace.zst"),
            stack_mode: StackMode::Lazy,
            stack_threshold_ns: 100_000,
            ringbuf_bytes: 64 << 20,
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
            output_mode: crate::output::OutputMode::File,
            no_user_stash: false,
            profile_bpf: false,
            no_cgroups: false,
            samples: Some(crate::samples::SampleConfig::default()),
            user_stack_copy_bytes: DEFAULT_USER_STACK_COPY,
            go: Default::default(),
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
    /// Where the recording thread is in its loop (read by whoever waits for the stop).
    pub progress: Option<Arc<crate::progress::ConsumerProgress>>,
}

/// What a recording produced.
#[derive(Clone, Debug, Default)]
pub struct RecordSummary {
    /// The trace file.
    pub output: PathBuf,
    /// Events written.
    pub events: u64,
    /// Events by kind (indexed by `EventKind as usize`).
    pub events_by_kind: [u64; chainrec_format::EventKind::COUNT],
    /// File size.
    pub bytes: u64,
    /// Recording time (attach to detach).
    pub duration: Duration,
    /// Lost and skipped counts (also in the file's metadata).
    pub lost: LostCounts,
    /// Tasks recorded without per-task state because the preallocated map was full (their
    /// names and lazy stacks may be missing; also in the file's metadata, `task_state`).
    pub tasks_without_state: u64,
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
    /// Every file written, in order (one for a plain recording; the numbered files of
    /// `--rotate`; the dumps of `--flight`).
    pub files: Vec<PathBuf>,
    /// What the flight recorder did (`--flight` only).
    pub flight: Option<crate::output::FlightReport>,
    /// Lazy user stacks taken at the switch-out on a prediction.
    pub user_stash: UserStashCounts,
    /// User stacks unwound from stack copies (`--user-unwind cfi`), None with `fp`.
    pub user_unwind: Option<crate::unwind::UnwindCounts>,
    /// With [`RecordOptions::profile_bpf`]: per section of the BPF programs, its name, the
    /// ns spent in it and how often it ran (clock reads included).
    pub bpf_profile: Vec<(&'static str, u64, u64)>,
    /// On-CPU samples taken (also in the metadata), `None` with `--no-samples`.
    pub sampling: Option<chainrec_format::Sampling>,
    /// What the goroutine probes did, `None` with `--no-go` and no `--go`.
    pub goroutines: Option<crate::golang::GoCounts>,
    /// Kernel features this recording could not use, each with what was done instead and
    /// what that costs (empty on a kernel that has everything).
    pub fallbacks: Vec<Fallback>,
}

/// A kernel feature the recorder could not use on the running kernel: what it did
/// instead, and what that costs the user. Printed in the summary, stored in the trace
/// metadata (`extra.fallbacks`) and in `--summary-json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The feature (short, stable: the kernel-matrix check compares these).
    pub feature: &'static str,
    /// Why it could not be used.
    pub reason: String,
    /// What the recorder does instead.
    pub instead: &'static str,
    /// What that costs the user.
    pub cost: &'static str,
}

impl Fallback {
    /// One line: feature, reason, replacement and cost.
    pub fn line(&self) -> String {
        format!(
            "fallback: {} unavailable ({}): {} instead; cost: {}",
            self.feature, self.reason, self.instead, self.cost
        )
    }
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

/// Lazy mode: user stacks taken at a task's switch-out because its wait was predicted to be
/// longer than the threshold (its last wait in the same syscall was), so that no task_work
/// is needed at the switch-in (docs/RECORDER.md, "User stacks at the switch-out").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserStashCounts {
    /// Taken at a switch-out.
    pub taken: u64,
    /// Used: the wait was longer than the threshold. `taken - used` walks were wasted.
    pub used: u64,
    /// Long waits predicted short: their user stack came through the task_work (or
    /// sys_exit) path.
    pub missed: u64,
    /// Stashed stacks overwritten by another task before their wait ended (the fixed stash
    /// slots were all in use): those waits took the task_work (or sys_exit) path too.
    pub evicted: u64,
    /// Stash slots skipped because a program on another CPU held them.
    pub busy: u64,
}

impl std::fmt::Display for UserStashCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} taken at the switch-out on a prediction, {} used ({} wasted: the wait was \
             short), {} long waits predicted short (task_work), {} evicted from a full \
             stash, {} slots busy",
            self.taken,
            self.used,
            self.taken.saturating_sub(self.used),
            self.missed,
            self.evicted,
            self.busy
        )
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
