//! Event records: what the recorder writes and the engine reads.
//!
//! These types are the contract between `chainrec-record`, `chainrec-chain` and
//! `chainrec-report`. Field meanings follow `docs/CHAINS.md` ("Events the engine
//! works from"); timestamps are nanoseconds on the trace clock (see
//! [`crate::RecordingMeta::clock`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A thread id (kernel `pid`). 0 is the idle task of whichever CPU the event is on.
pub type Tid = u32;

/// Reference to a stack in the trace's stack table, or one of the reserved
/// "no stack" reasons below [`StackId::FIRST_REAL`].
///
/// Reserved values are not errors: they say *why* a frame has no stack, so the engine
/// can label it (`[no stack: wait < 100us]`, `[missing stack]`) instead of dropping it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct StackId(pub u32);

impl StackId {
    /// No stack applies or was requested (stack mode `none`, a kernel thread's user stack).
    pub const NONE: StackId = StackId(0);
    /// Deliberately skipped by the lazy stack policy: the wait was shorter than the
    /// recording's stack threshold ([`crate::RecordingMeta::stack_threshold_ns`]).
    pub const SKIPPED: StackId = StackId(1);
    /// Capture was attempted and failed (walk error, buffer full). Counted in
    /// [`crate::LostCounts`].
    pub const FAILED: StackId = StackId(2);
    /// The lazy user stack was discarded because the task was preempted in user mode
    /// (its user registers at switch-in no longer matched at syscall exit).
    pub const USER_PREEMPTED: StackId = StackId(3);
    /// No user stack: the task was exiting (past `exit_mm`, e.g. `do_exit` waking its
    /// parent), or exited before returning to user space from its wait. Not a failure.
    pub const USER_EXITING: StackId = StackId(4);
    /// No user stack: the task exec'd after its wait, before the user stack could be taken
    /// on its return to user space (the program it waited in is gone).
    pub const USER_EXEC: StackId = StackId(6);
    /// Not in traces: assigned by the analysis when the recorder marked a stack
    /// [`StackId::SKIPPED`] (wait shorter than the threshold) but the wait turned out longer,
    /// and no lazily taken stack arrived (e.g. the recording ended first). It keeps a wait
    /// longer than the threshold from being labelled as shorter.
    pub const NOT_CAPTURED: StackId = StackId(5);
    /// The first id that names a real entry of the stack table.
    pub const FIRST_REAL: u32 = 16;

    /// True when this id names an entry of the stack table.
    pub fn is_real(self) -> bool {
        self.0 >= Self::FIRST_REAL
    }
}

/// Context a waking ran in (the waker side of a hop).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum WakeContext {
    /// Ordinary task context: the waker is the running task.
    #[default]
    Task = 0,
    /// Softirq context (the running task was interrupted).
    SoftIrq = 1,
    /// Hard interrupt context.
    HardIrq = 2,
    /// Non-maskable interrupt.
    Nmi = 3,
    /// A softirq the running task runs itself, synchronously, when it re-enables bottom
    /// halves (`local_bh_enable` → `do_softirq`; TCP over loopback or veth delivers the
    /// packet this way inside the sender's syscall). The waker is the task (a task hop,
    /// `../shared/CHAINS.md`); `source` names the vector. Format 1.1 and later.
    SoftIrqTask = 4,
}

impl WakeContext {
    /// Decode from the on-disk byte; `None` for values this version does not know.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Task,
            1 => Self::SoftIrq,
            2 => Self::HardIrq,
            3 => Self::Nmi,
            4 => Self::SoftIrqTask,
            _ => return None,
        })
    }
    /// Short lower-case name: `task`, `softirq`, `hardirq`, `nmi`, `softirq-task`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::SoftIrq => "softirq",
            Self::HardIrq => "hardirq",
            Self::Nmi => "nmi",
            Self::SoftIrqTask => "softirq-task",
        }
    }
    /// True when the running task is the waker (task context, or a softirq the task runs
    /// itself); the waking is then a task hop unless the task is the idle task.
    pub fn is_task(self) -> bool {
        matches!(self, Self::Task | Self::SoftIrqTask)
    }
}

/// A task name as the kernel keeps it: up to 15 bytes, NUL padded.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Comm(pub [u8; 16]);

impl Comm {
    /// Build from a string, truncating to 15 bytes like the kernel does.
    pub fn new(s: &str) -> Self {
        let mut b = [0u8; 16];
        let n = s.len().min(15);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        Comm(b)
    }
    /// The name up to the first NUL, lossily decoded.
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        let end = self.0.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.0[..end])
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}
impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// `prev_state` value of a switch-out that was a preemption (task still runnable).
pub const STATE_RUNNABLE: u32 = 0;

/// The `--state MASK` rule shared by the analysis filters and the flight-recorder
/// triggers: a switch-out `state` passes when it has a bit of `mask`; mask 0 keeps only
/// preemptions ([`STATE_RUNNABLE`]), as in bcc offcputime.
pub fn state_matches(mask: u32, state: u32) -> bool {
    if mask == 0 {
        state == STATE_RUNNABLE
    } else {
        state & mask != 0
    }
}

/// Kernel `TASK_INTERRUPTIBLE` (S).
pub const STATE_INTERRUPTIBLE: u32 = 0x1;
/// Kernel `TASK_UNINTERRUPTIBLE` (D).
pub const STATE_UNINTERRUPTIBLE: u32 = 0x2;
/// Kernel `TASK_DEAD` (`x`): the `prev_state` of a thread's final switch-out
/// (`do_task_dead`). Its tid may be reused by an unrelated thread from then on.
pub const STATE_TASK_DEAD: u32 = 0x80;
/// The state bits that end a thread: [`STATE_TASK_DEAD`], and `EXIT_DEAD` (`X`, 0x10) and
/// `EXIT_ZOMBIE` (`Z`, 0x20), which other tools report for the final switch-out
/// (perf's `TASK_REPORT` mapping of older kernels) and the synthetic traces use.
pub const STATE_DEAD_MASK: u32 = STATE_TASK_DEAD | 0x10 | 0x20;

/// True when a switch-out in `state` is the thread's last: it exited, and nothing it did
/// afterwards (no wait) belongs to it. A task switched in later under the same tid is
/// another thread.
pub fn state_is_dead(state: u32) -> bool {
    state & STATE_DEAD_MASK != 0
}

/// sched_switch: `prev` leaves the CPU, `next` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// Time of the switch.
    pub ts: u64,
    /// CPU of the switch.
    pub cpu: u32,
    /// Task switched out.
    pub prev_tid: Tid,
    /// Kernel task state bits of prev at switch-out ([`STATE_RUNNABLE`] = preempted).
    pub prev_state: u32,
    /// Task switched in.
    pub next_tid: Tid,
    /// Off-CPU kernel stack of prev taken at switch-out (eager mode), else reserved.
    pub prev_kstack: StackId,
    /// Off-CPU user stack of prev taken at switch-out (eager mode), else reserved.
    pub prev_ustack: StackId,
}

/// sched_waking: taken in the waker's context, so the stacks are the waker's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waking {
    /// Time of the waking.
    pub ts: u64,
    /// CPU the waker ran on.
    pub cpu: u32,
    /// Task running when the waking happened (the interrupted task for irq contexts; 0 = idle).
    pub waker_tid: Tid,
    /// Task being woken.
    pub target_tid: Tid,
    /// Context of the waking.
    pub context: WakeContext,
    /// Interrupt source id in [`crate::Tables::irq_sources`] (0 = unknown / not irq).
    pub source: u32,
    /// Waker kernel stack.
    pub waker_kstack: StackId,
    /// Waker user stack.
    pub waker_ustack: StackId,
}

impl Waking {
    /// Why this waking cannot be stored in a trace file, if it cannot (the file format
    /// tells [`WakeContext::SoftIrqTask`] from a task waking by its source, docs/FORMAT.md):
    /// a task-context waking with a source, or a task-context softirq without one.
    pub fn unencodable(&self) -> Option<&'static str> {
        match (self.context, self.source) {
            (WakeContext::Task, s) if s != 0 => {
                Some("a task-context waking has no interrupt source (source must be 0)")
            }
            (WakeContext::SoftIrqTask, 0) => {
                Some("a task-context softirq waking needs its vector (source must not be 0)")
            }
            _ => None,
        }
    }
}

/// sched_wakeup_new: a new task became runnable for the first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupNew {
    /// Time of the event.
    pub ts: u64,
    /// CPU it ran on.
    pub cpu: u32,
    /// Task that created the child (running task).
    pub parent_tid: Tid,
    /// The new task.
    pub child_tid: Tid,
    /// Thread group of the new task.
    pub child_tgid: Tid,
}

/// Why a task's identity record was emitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum CommReason {
    /// First sighting of the task during the recording.
    #[default]
    Seen = 0,
    /// The task exec'd a new program.
    Exec = 1,
    /// The task renamed itself (prctl PR_SET_NAME, /proc/.../comm).
    Rename = 2,
    /// A new task (fork/clone) got its initial name.
    Fork = 3,
}

impl CommReason {
    /// Decode from the on-disk byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Seen,
            1 => Self::Exec,
            2 => Self::Rename,
            3 => Self::Fork,
            _ => return None,
        })
    }
}

/// Task identity change: from `ts` on, `tid` (of group `tgid`) is named `comm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskComm {
    /// Time of the change.
    pub ts: u64,
    /// The task.
    pub tid: Tid,
    /// Its thread group (process id).
    pub tgid: Tid,
    /// The new name.
    pub comm: Comm,
    /// What caused the change.
    pub reason: CommReason,
}

/// A task exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Time of exit.
    pub ts: u64,
    /// The task.
    pub tid: Tid,
    /// Its thread group.
    pub tgid: Tid,
}

/// Off-CPU stacks of `tid` captured lazily (after the fact): they belong to the most
/// recent switch-out of `tid` at or before `ts`. The lazy recorder takes the kernel
/// stack at switch-in (`bpf_get_task_stack`) and the user stack at the next syscall exit,
/// so one wait may get two of these (one with `ustack == NONE`, then one with
/// `kstack == NONE`). A field equal to [`StackId::NONE`] leaves that side unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpuStacks {
    /// Time the stacks were taken.
    pub ts: u64,
    /// The task whose last wait they describe.
    pub tid: Tid,
    /// Kernel off-CPU stack, or NONE to leave unchanged.
    pub kstack: StackId,
    /// User off-CPU stack, or NONE to leave unchanged.
    pub ustack: StackId,
}

/// Why events were lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum LostCause {
    /// The BPF ring buffer was full (reserve failed).
    #[default]
    RingBufferFull = 0,
    /// The consumer dropped records it could not parse.
    Malformed = 1,
    /// Events were dropped because they arrived too far out of order to be merged.
    OutOfOrder = 2,
}

impl LostCause {
    /// Decode from the on-disk byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::RingBufferFull,
            1 => Self::Malformed,
            2 => Self::OutOfOrder,
            _ => return None,
        })
    }
}

/// Marker: `count` events were lost on `cpu` at or before `ts` (since the previous
/// marker for that cpu and cause). The engine treats state around it as unreliable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lost {
    /// Time the loss was noticed.
    pub ts: u64,
    /// CPU whose events were lost (u32::MAX = unknown).
    pub cpu: u32,
    /// Number of lost events.
    pub count: u64,
    /// Why.
    pub cause: LostCause,
}

/// An on-CPU sample: `tid` was running on `cpu` when the sampling timer (or cycle counter)
/// fired. Each sample stands for one sampling period of that CPU's time
/// ([`crate::RecordingMeta::sampling`]). Format 2.0 and later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Time of the sample.
    pub ts: u64,
    /// CPU sampled.
    pub cpu: u32,
    /// Task running on it (0 = the idle task).
    pub tid: Tid,
    /// Kernel stack at the sample (NONE when the CPU was in user mode).
    pub kstack: StackId,
    /// User stack at the sample (NONE for kernel threads and the idle task).
    pub ustack: StackId,
}

/// One trace event. Events in a file are in non-decreasing `ts` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// Context switch.
    Switch(Switch),
    /// A task was woken (sched_waking).
    Waking(Waking),
    /// A new task was woken for the first time.
    WakeupNew(WakeupNew),
    /// Task identity (name) change or first sighting.
    Comm(TaskComm),
    /// Task exit.
    Exit(Exit),
    /// Lazily captured off-CPU stacks.
    OffCpuStacks(OffCpuStacks),
    /// Lost-data marker.
    Lost(Lost),
    /// On-CPU sample (format 2.0).
    Sample(Sample),
}

impl Event {
    /// Timestamp of the event.
    pub fn ts(&self) -> u64 {
        match self {
            Event::Switch(e) => e.ts,
            Event::Waking(e) => e.ts,
            Event::WakeupNew(e) => e.ts,
            Event::Comm(e) => e.ts,
            Event::Exit(e) => e.ts,
            Event::OffCpuStacks(e) => e.ts,
            Event::Lost(e) => e.ts,
            Event::Sample(e) => e.ts,
        }
    }
    /// Kind of the event.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Switch(_) => EventKind::Switch,
            Event::Waking(_) => EventKind::Waking,
            Event::WakeupNew(_) => EventKind::WakeupNew,
            Event::Comm(_) => EventKind::Comm,
            Event::Exit(_) => EventKind::Exit,
            Event::OffCpuStacks(_) => EventKind::OffCpuStacks,
            Event::Lost(_) => EventKind::Lost,
            Event::Sample(_) => EventKind::Sample,
        }
    }
}

/// Event kind tag (also the on-disk kind byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum EventKind {
    /// [`Event::Switch`].
    Switch = 0,
    /// [`Event::Waking`].
    Waking = 1,
    /// [`Event::WakeupNew`].
    WakeupNew = 2,
    /// [`Event::Comm`].
    Comm = 3,
    /// [`Event::Exit`].
    Exit = 4,
    /// [`Event::OffCpuStacks`].
    OffCpuStacks = 5,
    /// [`Event::Lost`].
    Lost = 6,
    /// [`Event::Sample`] (format 2.0).
    Sample = 7,
}

impl EventKind {
    /// Number of kinds (the length of per-kind count arrays).
    pub const COUNT: usize = 8;
    /// All kinds, in tag order.
    pub const ALL: [EventKind; Self::COUNT] = [
        EventKind::Switch,
        EventKind::Waking,
        EventKind::WakeupNew,
        EventKind::Comm,
        EventKind::Exit,
        EventKind::OffCpuStacks,
        EventKind::Lost,
        EventKind::Sample,
    ];
    /// Lower-case name (`switch`, `waking`, `wakeup_new`, `comm`, `exit`, `offcpu_stacks`, `lost`, `sample`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Switch => "switch",
            EventKind::Waking => "waking",
            EventKind::WakeupNew => "wakeup_new",
            EventKind::Comm => "comm",
            EventKind::Exit => "exit",
            EventKind::OffCpuStacks => "offcpu_stacks",
            EventKind::Lost => "lost",
            EventKind::Sample => "sample",
        }
    }

    /// `(name, count)` per kind, in tag order, from a per-kind count array (the labelled
    /// form that `info --json` and `record --summary-json` print).
    pub fn named_counts(
        counts: &[u64; Self::COUNT],
    ) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Self::ALL.iter().map(|k| (k.name(), counts[*k as usize]))
    }
}
