//! The ordered walk: off-CPU intervals, hops, causes, attribution, dedup.

use crate::filter::Filter;
use crate::fx::FxHashMap;
use crate::nodes::{IdentId, NodeTable, HOLDER_IDLE, HOLDER_UNKNOWN};
use crate::record::{HopRecord, RunqPart, WaitRecord, WaitSink};
use chainrec_format::{
    Comm, Event, OffCpuStacks, RecordingMeta, StackId, Switch, Tables, Tid, WakeContext, Waking,
    STATE_INTERRUPTIBLE, STATE_RUNNABLE,
};
use std::collections::VecDeque;
use std::fmt;

/// Default `--max-depth` (hops per chain, metal included).
pub const DEFAULT_MAX_DEPTH: usize = 16;

/// Attribution mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Time-bounded attribution (CHAINS.md default): every ns of a wait attributed once.
    #[default]
    Bounded,
    /// Gregg's prototype: every level weighs the whole blocked time.
    Last,
}

/// Engine configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Attribution mode.
    pub mode: Mode,
    /// Maximum hops per chain (≥ 1).
    pub max_depth: usize,
    /// Subchain dedup: waits whose ending waking is an inner hop of another chain are
    /// emitted with `root == false`.
    pub dedup: bool,
    /// Root filter: only matching waits reach the sink, and only their chains count for dedup.
    pub filter: Filter,
    /// Run-queue attribution (time-bounded mode only; CHAINS.md "Run-queue time"): each
    /// record's runnable part, and the part of each level during which its waker was
    /// runnable, are split by the tasks that held the CPU ([`WaitRecord::runq`]).
    pub runqueue: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Bounded,
            max_depth: DEFAULT_MAX_DEPTH,
            dedup: true,
            filter: Filter::default(),
            runqueue: true,
        }
    }
}

/// Counters: everything skipped, ignored or uncertain is counted here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed.
    pub events: u64,
    /// Off-CPU intervals closed by a switch-in (all states).
    pub waits: u64,
    /// ... of which preemptions (state R).
    pub preemptions: u64,
    /// ... of which blocked waits ended by a waking seen in the trace.
    pub woken_waits: u64,
    /// Blocked waits switched in without any waking in the trace (shown as `[waker unknown]`).
    pub waits_without_waker: u64,
    /// Waits whose switch-out precedes the trace (not roots; their wakings still serve as causes).
    pub waits_before_trace: u64,
    /// Waits still open when the trace ended (switched out, never switched in).
    pub waits_open_at_end: u64,
    /// Records passed to the sink (after the filter).
    pub records_emitted: u64,
    /// Records marked non-root by dedup.
    pub dedup_hidden: u64,
    /// Wakings of a task that was not blocked (running, runnable, or already woken): ignored.
    pub wakings_ignored: u64,
    /// Wakings whose target is the idle task (tid 0): ignored.
    pub wakings_of_idle: u64,
    /// Hops created.
    pub hops: u64,
    /// Chains cut at the depth limit while a further cause existed.
    pub truncated: u64,
    /// `--mode last` walks stopped at a repeated thread.
    pub cycles: u64,
    /// Lost-event markers seen.
    pub lost_markers: u64,
    /// Events lost according to those markers.
    pub lost_events: u64,
    /// Emitted waits overlapping a lost marker (marked `[lost events]`).
    pub waits_with_lost: u64,
    /// Inconsistent sequences (switch-out of a thread believed off-CPU, switch-in of a
    /// thread believed running): state was reset, usually due to lost events.
    pub inconsistent: u64,
    /// ... of which switch-outs of a thread believed off-CPU (its open wait was dropped).
    pub inconsistent_out: u64,
    /// ... of which switch-ins of a thread believed running (no wait to close).
    pub inconsistent_in: u64,
    /// Time covered by the waits dropped by inconsistent switch-outs (switch-out of the
    /// dropped wait to the second switch-out; on-CPU after an untraced switch-in in part),
    /// not shown anywhere.
    pub inconsistent_dropped_ns: u64,
    /// Switches whose prev is not the task the previous switch on that CPU switched in:
    /// a switch on that CPU was not traced (lost events, or the kernel's; docs/ENGINE.md).
    pub untraced_switches: u64,
    /// The first few untraced switches: (time, CPU, task expected, task found).
    pub untraced_examples: Vec<(u64, u32, Tid, Tid)>,
    /// The first few inconsistent sequences, to look at with `chainrec script`.
    pub inconsistent_examples: Vec<crate::explain::Inconsistency>,
    /// In-trace part (trace start to switch-in) of the waits that began before the
    /// trace: not shown as roots.
    pub waits_before_trace_ns: u64,
    /// Emitted waits whose off-CPU kernel or user stack was skipped by the lazy policy.
    pub stacks_skipped: u64,
    /// Emitted waits (or their hops) with a failed or dangling stack.
    pub stacks_missing: u64,
    /// Emitted waits (or their hops) with a user stack marked exiting (`[no user stack:
    /// exiting]`, e.g. a waker in `do_exit`): not failures.
    pub stacks_exiting: u64,
    /// Emitted waits (or their first hop) longer than the lazy threshold whose stack stayed
    /// the recorder's "skipped" placeholder (no stack arrived): shown as `[no stack: not
    /// captured]`, never as `[no stack: wait < T]`.
    pub stacks_not_captured: u64,
    /// Off-CPU stack events that matched no wait.
    pub stacks_unmatched: u64,
    /// Hop arena garbage collections.
    pub gc_runs: u64,
    /// Most hops alive at once.
    pub peak_live_hops: u64,
    /// Most threads tracked at once.
    pub peak_tasks: u64,
    /// Most waits parked at once waiting for the dedup decision.
    pub peak_pending_waits: u64,
    /// Run-queue nanoseconds of emitted waits' own runnable parts (level 0).
    pub runq_root_ns: u64,
    /// Run-queue nanoseconds inside emitted chains: time their wakers were runnable.
    pub runq_inner_ns: u64,
    /// Run-queue nanoseconds (of emitted waits' own runnable parts) whose CPU holder is
    /// unknown: the CPU's switch history did not reach back that far (shown as
    /// `[run queue];[unknown]`).
    pub runq_unknown_ns: u64,
    /// Nanoseconds of inner levels that could not be split into the waker running and
    /// runnable, because the waker's run-queue history (its last 1024 runnable periods) no
    /// longer reached back that far; they stay with the waker, as without run-queue
    /// attribution.
    pub runq_unsplit_ns: u64,
    /// On-CPU nanoseconds of inner levels split by samples while part of the level lay
    /// before the waker's kept samples (its last 4096): split by the samples kept.
    pub oncpu_short_history_ns: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} events, {} waits ({} woken, {} preempted, {} without waker, {} before trace, {} open at end), \
             {} emitted, {} hidden by dedup, {} truncated, {} cycles, {} wakings ignored, {} inconsistent",
            self.events,
            self.waits,
            self.woken_waits,
            self.preemptions,
            self.waits_without_waker,
            self.waits_before_trace,
            self.waits_open_at_end,
            self.records_emitted,
            self.dedup_hidden,
            self.truncated,
            self.cycles,
            self.wakings_ignored,
            self.inconsistent
        )
    }
}

/// Switches kept per CPU for run-queue attribution (16 B each).
const CPU_HISTORY: usize = 1 << 16;
/// Runnable periods kept per thread for splitting inner levels (24 B each; a thread that
/// switches rarely keeps few).
const TASK_RQ_HISTORY: usize = 1024;
/// CPUs beyond this number get no run-queue history (a trace is untrusted input).
const MAX_CPUS: u32 = 1 << 13;

/// One runnable period of a thread behind one CPU holder.
#[derive(Clone, Copy, Debug)]
struct RqSeg {
    start: u64,
    end: u64,
    /// [`IdentId`], [`HOLDER_IDLE`] or [`HOLDER_UNKNOWN`].
    holder: u32,
}

/// A thread's recent runnable periods (run-queue attribution of inner levels).
#[derive(Clone, Debug, Default)]
struct TaskRq {
    segs: VecDeque<RqSeg>,
    /// Periods ending before this were dropped: earlier time cannot be split.
    floor: u64,
}

impl TaskRq {
    fn push(&mut self, seg: RqSeg) {
        if let Some(last) = self.segs.back_mut() {
            if last.holder == seg.holder && last.end == seg.start {
                last.end = seg.end;
                return;
            }
        }
        if self.segs.len() == TASK_RQ_HISTORY {
            if let Some(old) = self.segs.pop_front() {
                self.floor = old.end;
            }
        }
        self.segs.push_back(seg);
    }
}

/// Tids below this are indexed directly (Linux's PID_MAX_LIMIT is 2^22).
const DIRECT_TIDS: usize = 1 << 22;

const NO_HOP: u32 = u32::MAX;
/// The cause existed but was garbage-collected (only ever beyond the depth limit).
const CUT: u32 = u32::MAX - 1;
const NO_SLOT: u32 = u32::MAX;
/// Dedup applies to this wait but its chain marked nothing: no slot unless it must wait.
const LAZY_SLOT: u32 = u32::MAX - 1;

/// A wait whose chain marked inner hops (dedup on): its record, once ready, is emitted
/// when every chain that used its own ending hop is decided.
#[derive(Debug, Default)]
struct Slot {
    occupied: bool,
    ready: bool,
    discard: bool,
    hop: u32,
    inner: Vec<u32>,
    /// Boxed: parking a task's held record here is a pointer swap.
    rec: Box<Rec>,
}

/// One cache line per hop (the arena is larger than L2; a hop straddling two lines
/// cost two misses on write and walk). GC marks live apart, in [`Engine::marks`].
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Hop {
    ts: u64,
    /// Time of the cause (the waking that ended the waker's last blocked interval).
    cause_ts: u64,
    /// Start of the waker's blocked interval that the cause ended.
    cause_s: u64,
    cause: u32,
    node: u32,
    waker_tid: Tid,
    /// Waker identity (comm, tgid); `IdentId::MAX` for metal hops.
    waker_ident: IdentId,
    kstack: StackId,
    ustack: StackId,
    context: WakeContext,
    metal: bool,
    /// Some emitted root chain used this hop as an inner hop (dedup: hide its wait).
    hidden: bool,
    /// Chains that used this hop as an inner hop and are not yet decided.
    pending_markers: u32,
    /// Pending-decision slot of the wait this hop ended (NO_SLOT if none).
    wait_slot: u32,
}

/// GC mark of a hop: the epoch it was last marked in, and the depth left at that mark.
/// Kept apart from the hops so that the sweep reads 8 bytes per hop, not a cache line.
#[derive(Clone, Copy, Debug, Default)]
struct Mark {
    epoch: u32,
    rem: u8,
}

/// A wait record on its own cache lines (two, not three: it is rewritten at every
/// switch-out).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Rec(WaitRecord);

impl std::ops::Deref for Rec {
    type Target = WaitRecord;
    #[inline]
    fn deref(&self) -> &WaitRecord {
        &self.0
    }
}

impl std::ops::DerefMut for Rec {
    #[inline]
    fn deref_mut(&mut self) -> &mut WaitRecord {
        &mut self.0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Unknown,
    Running,
    Off,
}

#[derive(Debug)]
struct Task {
    tid: Tid,
    comm: Comm,
    tgid: Tid,
    ident: IdentId,
    kthread: bool,
    exited: bool,
    status: Status,
    /// Boxed (as `held`): the switch-in hand-over open -> held and the parking of a held
    /// record in a dedup slot are pointer swaps, and the task itself stays small.
    open: Box<Rec>,
    open_hop: u32,
    open_slot: u32,
    open_lost: u64,
    open_pretrace: bool,
    held: Box<Rec>,
    held_valid: bool,
    held_hop: u32,
    held_slot: u32,
    last_cause: u32,
    last_cause_s: u64,
}

/// The chain engine. Feed it events in time order with [`Engine::process`], then call
/// [`Engine::finish`].
pub struct Engine<'t> {
    tables: &'t Tables,
    cfg: Config,
    trace_start: Option<u64>,
    nodes: NodeTable,
    tasks: Vec<Task>,
    free_tasks: Vec<u32>,
    /// Thread index by tid: direct for tids below [`DIRECT_TIDS`] (index + 1, 0 = none),
    /// hashed above (tids on Linux stay below 2^22, but a trace is untrusted input).
    task_direct: Vec<u32>,
    task_ix: FxHashMap<Tid, u32>,
    live_tasks: usize,
    hops: Vec<Hop>,
    /// GC marks, parallel to `hops`.
    marks: Vec<Mark>,
    free_hops: Vec<u32>,
    live_hops: usize,
    gc_threshold: usize,
    epoch: u32,
    lost_seq: u64,
    stack_threshold_ns: u64,
    seen: Vec<Tid>,
    inner_buf: Vec<u32>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    work: Vec<u32>,
    pending: usize,
    /// The filter keeps every wait (no per-wait check needed).
    filter_all: bool,
    /// Which task each CPU runs, to count untraced switches.
    cpu_check: crate::explain::CpuCheck,
    /// Run-queue attribution in effect (on in the config, time-bounded mode).
    runqueue: bool,
    /// Per CPU: recent switch-ins (time, holder code), oldest first.
    cpus: Vec<VecDeque<(u64, u32)>>,
    /// Per task slot (parallel to `tasks`): recent runnable periods.
    task_rq: Vec<TaskRq>,
    /// Scratch: pieces of one runnable period, newest first.
    rq_pieces: Vec<RqSeg>,
    /// Recent on-CPU samples per thread (traces with samples, time-bounded mode).
    samples: crate::sampleidx::SampleIndex,
    stats: Stats,
}

impl<'t> Engine<'t> {
    /// New engine. `meta.start_ns` (when non-zero) is the trace start used for waits that
    /// began before the trace; otherwise the first event's time.
    pub fn new(tables: &'t Tables, meta: &RecordingMeta, mut cfg: Config) -> Self {
        cfg.max_depth = cfg.max_depth.clamp(1, 250);
        let filter_all = cfg.filter.is_empty();
        let runqueue = cfg.runqueue && cfg.mode == Mode::Bounded;
        let cfg_bounded = cfg.mode == Mode::Bounded;
        Engine {
            tables,
            cfg,
            trace_start: (meta.start_ns != 0).then_some(meta.start_ns),
            nodes: NodeTable::for_tables(tables),
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            task_direct: Vec::new(),
            task_ix: FxHashMap::default(),
            live_tasks: 0,
            hops: Vec::new(),
            marks: Vec::new(),
            free_hops: Vec::new(),
            live_hops: 0,
            gc_threshold: 1 << 16,
            epoch: 0,
            lost_seq: 0,
            stack_threshold_ns: meta.stack_threshold_ns,
            seen: Vec::new(),
            inner_buf: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            work: Vec::new(),
            pending: 0,
            filter_all,
            cpu_check: crate::explain::CpuCheck::default(),
            runqueue,
            cpus: Vec::new(),
            task_rq: Vec::new(),
            rq_pieces: Vec::new(),
            samples: crate::sampleidx::SampleIndex::new(meta.sampling().is_some() && cfg_bounded),
            stats: Stats::default(),
        }
    }

    /// Interned nodes (to render records and folded paths).
    pub fn nodes(&self) -> &NodeTable {
        &self.nodes
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Lazy-stack threshold of the recording (for labels).
    pub fn stack_threshold_ns(&self) -> u64 {
        self.stack_threshold_ns
    }

    /// Process a batch of events (time order, continuing the previous batch).
    pub fn process(&mut self, events: &[Event], sink: &mut impl WaitSink) {
        if self.trace_start.is_none() {
            if let Some(e) = events.first() {
                self.trace_start = Some(e.ts());
            }
        }
        for ev in events {
            self.stats.events += 1;
            match ev {
                Event::Switch(s) => {
                    self.cpu_check.check(s, &mut self.stats);
                    self.on_switch(s, sink)
                }
                Event::Waking(w) => self.on_waking(w),
                Event::WakeupNew(n) => {
                    let t = self.task(n.child_tid);
                    if self.tasks[t].tgid != n.child_tgid {
                        self.tasks[t].tgid = n.child_tgid;
                        self.tasks[t].ident = self.nodes.ident(self.tasks[t].comm, n.child_tgid);
                    }
                    let task = &mut self.tasks[t];
                    if task.status != Status::Off {
                        // A new task is runnable from here: an off-CPU (run-queue) interval.
                        Self::open_wait(
                            task,
                            n.ts,
                            STATE_RUNNABLE,
                            StackId::NONE,
                            StackId::NONE,
                            self.lost_seq,
                            self.cfg.mode,
                        );
                    }
                }
                Event::Comm(c) => {
                    let t = self.task(c.tid);
                    self.tasks[t].comm = c.comm;
                    self.tasks[t].tgid = c.tgid;
                    self.tasks[t].ident = self.nodes.ident(c.comm, c.tgid);
                }
                Event::Exit(x) => {
                    if let Some(t) = self.find_task(x.tid) {
                        self.tasks[t].exited = true;
                    }
                }
                Event::OffCpuStacks(o) => self.on_stacks(o),
                Event::Lost(l) => {
                    self.lost_seq += 1;
                    self.stats.lost_markers += 1;
                    self.stats.lost_events += l.count;
                }
                // On-CPU samples do not change scheduling state: kept for `[on cpu]`.
                Event::Sample(x) => self.samples.push(x),
            }
        }
    }

    /// End of trace: emit held waits and waits woken but not yet switched in; count the rest.
    pub fn finish(&mut self, sink: &mut impl WaitSink) -> Stats {
        for t in 0..self.tasks.len() {
            if self.tasks[t].held_valid {
                self.emit_held(t, sink);
            }
            let task = &mut self.tasks[t];
            if task.status == Status::Off {
                self.stats.waits_open_at_end += 1;
                if task.open_hop != NO_HOP && !task.open_pretrace {
                    // Blocked part complete: emit with switch_in_ns = None.
                    std::mem::swap(&mut task.open, &mut task.held);
                    task.held.lost |= task.open_lost != self.lost_seq;
                    task.held_valid = true;
                    task.held_hop = task.open_hop;
                    task.held_slot = task.open_slot;
                    task.open_hop = NO_HOP;
                    task.open_slot = NO_SLOT;
                    task.status = Status::Unknown;
                    self.emit_held(t, sink);
                }
                self.tasks[t].status = Status::Unknown;
            }
        }
        // Every wait is ready now, so every decision resolves (markers are strictly later
        // chains); anything left would be a bug, but emit it rather than lose it.
        for s in 0..self.slots.len() {
            if self.slots[s].occupied {
                self.slots[s].ready = true;
                self.hops[self.slots[s].hop as usize].pending_markers = 0;
                self.decide(s as u32, sink);
            }
        }
        self.stats.peak_live_hops = self.stats.peak_live_hops.max(self.live_hops as u64);
        self.stats.oncpu_short_history_ns = self.samples.short_history_ns.get();
        self.stats.clone()
    }

    #[inline]
    fn find_task(&self, tid: Tid) -> Option<usize> {
        if (tid as usize) < DIRECT_TIDS {
            match self.task_direct.get(tid as usize) {
                Some(&i) if i != 0 => Some(i as usize - 1),
                _ => None,
            }
        } else {
            self.task_ix.get(&tid).map(|&i| i as usize)
        }
    }

    #[inline]
    fn task(&mut self, tid: Tid) -> usize {
        match self.find_task(tid) {
            Some(i) => i,
            None => self.new_task(tid),
        }
    }

    fn new_task(&mut self, tid: Tid) -> usize {
        let (comm, tgid, kthread) = match self.tables.tasks.get(&tid) {
            Some(e) => (e.comm, e.tgid, e.kernel_thread),
            None => (Comm::new(&format!("tid-{tid}")), 0, false),
        };
        let ident = self.nodes.ident(comm, tgid);
        let task = Task {
            tid,
            comm,
            tgid,
            ident,
            kthread,
            exited: false,
            status: Status::Unknown,
            open: Box::default(),
            open_hop: NO_HOP,
            open_slot: NO_SLOT,
            open_lost: 0,
            open_pretrace: false,
            held: Box::default(),
            held_valid: false,
            held_hop: NO_HOP,
            held_slot: NO_SLOT,
            last_cause: NO_HOP,
            last_cause_s: 0,
        };
        let i = if let Some(i) = self.free_tasks.pop() {
            self.tasks[i as usize] = task;
            i as usize
        } else {
            self.tasks.push(task);
            self.task_rq.push(TaskRq::default());
            self.tasks.len() - 1
        };
        if (tid as usize) < DIRECT_TIDS {
            if self.task_direct.len() <= tid as usize {
                // Grow through a zeroed allocation (calloc: large ones come as untouched
                // zero pages), not `resize`, which would write every new slot: a single
                // tid near 2^22 must not make 16 MB resident.
                let mut grown = vec![0u32; (tid as usize + 1).next_power_of_two()];
                grown[..self.task_direct.len()].copy_from_slice(&self.task_direct);
                self.task_direct = grown;
            }
            self.task_direct[tid as usize] = i as u32 + 1;
        } else {
            self.task_ix.insert(tid, i as u32);
        }
        self.live_tasks += 1;
        self.stats.peak_tasks = self.stats.peak_tasks.max(self.live_tasks as u64);
        i
    }

    #[allow(clippy::too_many_arguments)]
    fn open_wait(
        task: &mut Task,
        ts: u64,
        state: u32,
        k: StackId,
        u: StackId,
        lost_seq: u64,
        mode: Mode,
    ) {
        task.status = Status::Off;
        let o = &mut task.open;
        o.tid = task.tid;
        o.comm = task.comm;
        o.tgid = task.tgid;
        o.ident = task.ident;
        o.kernel_thread = task.kthread;
        o.state = state;
        o.switch_out_ns = ts;
        o.wake_ns = None;
        o.switch_in_ns = None;
        o.kstack = k;
        o.ustack = u;
        o.hops.clear();
        o.runq.clear();
        o.oncpu_raw.clear();
        o.truncated = false;
        o.cycle = false;
        o.lost = false;
        o.root = true;
        o.mode = mode;
        task.open_hop = NO_HOP;
        task.open_lost = lost_seq;
        task.open_pretrace = false;
    }

    fn on_switch(&mut self, s: &Switch, sink: &mut impl WaitSink) {
        if s.prev_tid != 0 {
            let t = self.task(s.prev_tid);
            if self.tasks[t].held_valid {
                self.emit_held(t, sink);
            }
            if self.tasks[t].exited {
                self.remove_task(s.prev_tid, t);
            } else {
                if self.tasks[t].status == Status::Off && self.tasks[t].open_pretrace {
                    // First seen in a waking, assumed blocked since before the trace, but it
                    // was still running (woken before it switched out): not inconsistent.
                    self.stats.wakings_ignored += 1;
                } else if self.tasks[t].status == Status::Off {
                    let dropped = s.ts.saturating_sub(self.tasks[t].open.switch_out_ns);
                    self.stats
                        .note_inconsistent(s.ts, s.prev_tid, false, dropped);
                    let slot = std::mem::replace(&mut self.tasks[t].open_slot, NO_SLOT);
                    if slot != NO_SLOT && slot != LAZY_SLOT {
                        self.slots[slot as usize].ready = true;
                        self.slots[slot as usize].discard = true;
                        self.decide(slot, sink);
                    }
                }
                Self::open_wait(
                    &mut self.tasks[t],
                    s.ts,
                    s.prev_state,
                    s.prev_kstack,
                    s.prev_ustack,
                    self.lost_seq,
                    self.cfg.mode,
                );
            }
        }
        if s.next_tid == 0 {
            if self.runqueue {
                self.push_cpu(s.cpu, s.ts, HOLDER_IDLE);
            }
        } else {
            let t = self.task(s.next_tid);
            if self.runqueue {
                let task = &self.tasks[t];
                if task.status == Status::Off && !task.open_pretrace {
                    // Runnable from the waking (or the whole of a preemption / a new task's
                    // first wait for a CPU) to now.
                    let r0 = if task.open.state == STATE_RUNNABLE {
                        Some(task.open.switch_out_ns)
                    } else {
                        task.open.wake_ns
                    };
                    if let Some(r0) = r0 {
                        self.split_runnable(t, s.cpu, r0, s.ts);
                    }
                }
                let holder = self.tasks[t].ident;
                self.push_cpu(s.cpu, s.ts, holder);
            }
            let task = &mut self.tasks[t];
            match task.status {
                Status::Off => {
                    self.stats.waits += 1;
                    if task.open_pretrace {
                        self.stats.waits_before_trace += 1;
                        self.stats.waits_before_trace_ns +=
                            s.ts.saturating_sub(task.open.switch_out_ns);
                    } else {
                        if task.open.state == STATE_RUNNABLE {
                            self.stats.preemptions += 1;
                        } else if task.open_hop != NO_HOP {
                            self.stats.woken_waits += 1;
                        } else {
                            self.stats.waits_without_waker += 1;
                        }
                        std::mem::swap(&mut task.open, &mut task.held);
                        task.held.switch_in_ns = Some(s.ts);
                        task.held.lost |= task.open_lost != self.lost_seq;
                        task.held_valid = true;
                        task.held_hop = task.open_hop;
                        task.held_slot = task.open_slot;
                        task.open_slot = NO_SLOT;
                    }
                    task.open_hop = NO_HOP;
                    task.open_pretrace = false;
                }
                Status::Unknown => self.stats.waits_before_trace += 1,
                Status::Running => self.stats.note_inconsistent(s.ts, s.next_tid, true, 0),
            }
            task.status = Status::Running;
        }
    }

    fn remove_task(&mut self, tid: Tid, t: usize) {
        if (tid as usize) < DIRECT_TIDS {
            self.task_direct[tid as usize] = 0;
        } else {
            self.task_ix.remove(&tid);
        }
        self.live_tasks -= 1;
        let rq = &mut self.task_rq[t];
        rq.segs.clear();
        rq.floor = 0;
        self.samples.forget(tid);
        let task = &mut self.tasks[t];
        task.last_cause = NO_HOP;
        task.open_hop = NO_HOP;
        task.held_hop = NO_HOP;
        task.held_valid = false;
        task.status = Status::Unknown;
        self.free_tasks.push(t as u32);
    }

    /// Record that `holder` went on `cpu` at `ts` (run-queue attribution).
    fn push_cpu(&mut self, cpu: u32, ts: u64, holder: u32) {
        if cpu >= MAX_CPUS {
            return;
        }
        if self.cpus.len() <= cpu as usize {
            self.cpus.resize_with(cpu as usize + 1, VecDeque::new);
        }
        let q = &mut self.cpus[cpu as usize];
        if q.len() == CPU_HISTORY {
            q.pop_front();
        }
        q.push_back((ts, holder));
    }

    /// Task `t` was runnable over `[r0, end)` and is switched in on `cpu` at `end`: split
    /// that time by who held `cpu` (before this switch-in is pushed to its history), add
    /// the pieces to the task's run-queue history and to its open record (level 0).
    fn split_runnable(&mut self, t: usize, cpu: u32, r0: u64, end: u64) {
        let pieces = &mut self.rq_pieces;
        pieces.clear();
        let mut hi = end;
        if let Some(q) = self.cpus.get(cpu as usize) {
            for &(ts, holder) in q.iter().rev() {
                if ts >= hi {
                    continue;
                }
                let lo = ts.max(r0);
                if hi > lo {
                    pieces.push(RqSeg {
                        start: lo,
                        end: hi,
                        holder,
                    });
                }
                hi = lo;
                if ts <= r0 {
                    break;
                }
            }
        }
        if hi > r0 {
            pieces.push(RqSeg {
                start: r0,
                end: hi,
                holder: HOLDER_UNKNOWN,
            });
        }
        let rq = &mut self.task_rq[t];
        let rec = &mut self.tasks[t].open;
        for &p in pieces.iter().rev() {
            rq.push(p);
            add_runq(&mut rec.runq, 0, p.holder, p.end - p.start);
        }
    }

    fn on_stacks(&mut self, o: &OffCpuStacks) {
        let Some(t) = self.find_task(o.tid) else {
            self.stats.stacks_unmatched += 1;
            return;
        };
        let task = &mut self.tasks[t];
        let rec = match task.status {
            Status::Off if !task.open_pretrace => &mut task.open,
            Status::Running if task.held_valid => &mut task.held,
            _ => {
                self.stats.stacks_unmatched += 1;
                return;
            }
        };
        if o.kstack != StackId::NONE {
            rec.kstack = o.kstack;
        }
        if o.ustack != StackId::NONE {
            rec.ustack = o.ustack;
        }
    }

    fn alloc_hop(&mut self, hop: Hop) -> u32 {
        self.live_hops += 1;
        self.stats.hops += 1;
        if let Some(i) = self.free_hops.pop() {
            self.hops[i as usize] = hop;
            i
        } else {
            self.hops.push(hop);
            self.marks.push(Mark::default());
            (self.hops.len() - 1) as u32
        }
    }

    fn on_waking(&mut self, w: &Waking) {
        if w.target_tid == 0 {
            self.stats.wakings_of_idle += 1;
            return;
        }
        let t = self.task(w.target_tid);
        let trace_start = self.trace_start.unwrap_or(w.ts);
        {
            let task = &mut self.tasks[t];
            match task.status {
                Status::Off if task.open.state != STATE_RUNNABLE && task.open_hop == NO_HOP => {}
                Status::Unknown => {
                    // Blocked since before the trace: not a root, but a cause with s = trace start.
                    Self::open_wait(
                        task,
                        trace_start,
                        STATE_INTERRUPTIBLE,
                        StackId::NONE,
                        StackId::NONE,
                        self.lost_seq,
                        self.cfg.mode,
                    );
                    task.open_pretrace = true;
                }
                _ => {
                    self.stats.wakings_ignored += 1;
                    return;
                }
            }
        }
        let (wk, wu) = self.waker_stacks(t, w);
        // Build the hop.
        // A softirq the waker ran itself (SoftIrqTask) is a task hop: CHAINS.md.
        let metal = !w.context.is_task() || w.waker_tid == 0;
        let mut hop = Hop {
            ts: w.ts,
            cause_ts: 0,
            cause_s: 0,
            cause: NO_HOP,
            node: 0,
            waker_tid: w.waker_tid,
            waker_ident: IdentId::MAX,
            kstack: wk,
            ustack: if metal { StackId::NONE } else { wu },
            context: w.context,
            metal,
            hidden: false,
            pending_markers: 0,
            wait_slot: NO_SLOT,
        };
        if metal {
            hop.node = self.nodes.metal(w.context, w.source, wk, self.tables);
        } else {
            let wt = self.task(w.waker_tid);
            let waker = &mut self.tasks[wt];
            if waker.status == Status::Unknown {
                waker.status = Status::Running;
            }
            hop.waker_ident = waker.ident;
            if waker.last_cause != NO_HOP {
                hop.cause = waker.last_cause;
                hop.cause_s = waker.last_cause_s;
                hop.cause_ts = self.hops[waker.last_cause as usize].ts;
            }
            hop.node = if w.context == WakeContext::SoftIrqTask {
                self.nodes
                    .softirq_task(waker.ident, w.source, wk, wu, self.tables)
            } else {
                self.nodes.task(waker.ident, wk, wu)
            };
        }
        let h = self.alloc_hop(hop);
        let task = &mut self.tasks[t];
        task.open.wake_ns = Some(w.ts);
        task.open_hop = h;
        task.last_cause = h;
        task.last_cause_s = task.open.switch_out_ns;
        if !task.open_pretrace {
            let mark = self.cfg.dedup && (self.filter_all || self.cfg.filter.matches(&task.open));
            self.inner_buf.clear();
            // Disjoint field borrows: the record is walked in place (no move of the
            // task's open record in and out).
            let mut walker = Walker {
                hops: &self.hops,
                nodes: &self.nodes,
                cfg: &self.cfg,
                inner: &mut self.inner_buf,
                seen: &mut self.seen,
                rq: self.runqueue.then_some(RqView {
                    task_rq: &self.task_rq,
                    task_direct: &self.task_direct,
                    task_ix: &self.task_ix,
                }),
                unsplit: &mut self.stats.runq_unsplit_ns,
                samples: &self.samples,
                pieces: Vec::new(),
            };
            walker.walk(h, &mut self.tasks[t].open, mark);
            if mark && self.inner_buf.is_empty() {
                // No inner hops to release later: decide lazily when the wait is ready.
                self.tasks[t].open_slot = LAZY_SLOT;
            } else if mark {
                let slot = self.alloc_slot(h);
                for &ih in &self.slots[slot as usize].inner {
                    self.hops[ih as usize].pending_markers += 1;
                }
                self.tasks[t].open_slot = slot;
                self.hops[h as usize].wait_slot = slot;
            }
        }
        if self.live_hops >= self.gc_threshold {
            self.gc();
        }
    }

    /// The waker stacks of `w`, whose target is task `t`. The recorder skips them when the
    /// target had waited less than the threshold at the waking; a longer wait whose hop
    /// still says so was not captured (see `emit_rec`), and is labelled that way.
    fn waker_stacks(&mut self, t: usize, w: &Waking) -> (StackId, StackId) {
        let (mut k, mut u) = (w.waker_kstack, w.waker_ustack);
        let task = &self.tasks[t];
        // Only for a waking that will end the wait (see on_waking's status check).
        if task.status == Status::Off
            && task.open.state != STATE_RUNNABLE
            && task.open_hop == NO_HOP
            && !task.open_pretrace
            && self.stack_threshold_ns > 0
            && w.ts.saturating_sub(task.open.switch_out_ns) > self.stack_threshold_ns
            && (k == StackId::SKIPPED || u == StackId::SKIPPED)
        {
            self.stats.stacks_not_captured += 1;
            for s in [&mut k, &mut u] {
                if *s == StackId::SKIPPED {
                    *s = StackId::NOT_CAPTURED;
                }
            }
        }
        (k, u)
    }

    #[inline]
    fn hop_record(nodes: &NodeTable, h: &Hop) -> HopRecord {
        let (waker_comm, waker_tgid) = if h.waker_ident == IdentId::MAX {
            (Comm::default(), 0)
        } else {
            nodes.ident_of(h.waker_ident)
        };
        HopRecord {
            ts: h.ts,
            waker_tid: h.waker_tid,
            waker_tgid,
            waker_comm,
            context: h.context,
            metal: h.metal,
            kstack: h.kstack,
            ustack: h.ustack,
            node: h.node,
            ns: 0,
        }
    }

    fn alloc_slot(&mut self, hop: u32) -> u32 {
        let s = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.pending += 1;
        self.stats.peak_pending_waits = self.stats.peak_pending_waits.max(self.pending as u64);
        let slot = &mut self.slots[s as usize];
        slot.occupied = true;
        slot.ready = false;
        slot.discard = false;
        slot.hop = hop;
        std::mem::swap(&mut slot.inner, &mut self.inner_buf);
        self.inner_buf.clear();
        s
    }

    /// The held wait of task `t` is final (its task switched out again, exited, or the
    /// trace ended): emit it now, or park it until dedup can decide whether it is a root.
    fn emit_held(&mut self, t: usize, sink: &mut impl WaitSink) {
        let task = &mut self.tasks[t];
        task.held_valid = false;
        let hop = std::mem::replace(&mut task.held_hop, NO_HOP);
        let mut slot = std::mem::replace(&mut task.held_slot, NO_SLOT);
        if slot == LAZY_SLOT && hop == NO_HOP {
            slot = NO_SLOT;
        }
        if slot == LAZY_SLOT {
            let h = &self.hops[hop as usize];
            slot = if h.hidden || h.pending_markers > 0 {
                self.inner_buf.clear();
                let s = self.alloc_slot(hop);
                self.hops[hop as usize].wait_slot = s;
                s
            } else {
                NO_SLOT
            };
        }
        let task = &mut self.tasks[t];
        if slot == NO_SLOT {
            // Emitted in place (disjoint field borrows): no move of the record out and back.
            task.held.root = true;
            Self::emit_rec(
                &mut self.nodes,
                &mut self.stats,
                &self.cfg.filter,
                self.filter_all,
                self.stack_threshold_ns,
                &mut task.held,
                sink,
            );
        } else {
            let sl = &mut self.slots[slot as usize];
            std::mem::swap(&mut task.held, &mut sl.rec);
            sl.ready = true;
            self.decide(slot, sink);
        }
    }

    /// Decide ready slots whose ending hop is settled (hidden by an emitted root chain,
    /// or no undecided chain uses it), cascading to the waits their chains used.
    fn decide(&mut self, first: u32, sink: &mut impl WaitSink) {
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.push(first);
        while let Some(s) = work.pop() {
            let sl = &self.slots[s as usize];
            if !sl.occupied || !sl.ready {
                continue;
            }
            let hop = &self.hops[sl.hop as usize];
            let root = if sl.discard || hop.hidden {
                false
            } else if hop.pending_markers == 0 {
                true
            } else {
                continue;
            };
            let sl = &mut self.slots[s as usize];
            sl.rec.root = root;
            let emitted = !sl.discard
                && Self::emit_rec(
                    &mut self.nodes,
                    &mut self.stats,
                    &self.cfg.filter,
                    self.filter_all,
                    self.stack_threshold_ns,
                    &mut sl.rec,
                    sink,
                );
            let counts = root && emitted;
            sl.occupied = false;
            let own = sl.hop;
            let inner = std::mem::take(&mut sl.inner);
            self.hops[own as usize].wait_slot = NO_SLOT;
            for &ih in &inner {
                let h = &mut self.hops[ih as usize];
                h.hidden |= counts;
                h.pending_markers = h.pending_markers.saturating_sub(1);
                if h.wait_slot != NO_SLOT && (h.hidden || h.pending_markers == 0) {
                    work.push(h.wait_slot);
                }
            }
            let sl = &mut self.slots[s as usize];
            sl.inner = inner;
            sl.inner.clear();
            self.free_slots.push(s);
            self.pending -= 1;
        }
        self.work = work;
    }

    /// Filter, intern the root node, count, and pass to the sink. True when emitted.
    /// Takes the engine's parts rather than `self`, so that `rec` can be a record the
    /// engine owns (a task's held record, a slot's record), emitted where it lies.
    #[allow(clippy::too_many_arguments)]
    fn emit_rec(
        nodes: &mut NodeTable,
        st: &mut Stats,
        filter: &Filter,
        filter_all: bool,
        threshold_ns: u64,
        rec: &mut WaitRecord,
        sink: &mut impl WaitSink,
    ) -> bool {
        if !filter_all && !filter.matches(rec) {
            return false;
        }
        // The recorder marks every switch-out SKIPPED and replaces that with the stacks it
        // takes once the wait proves longer than the threshold. If none arrived (recording
        // ended first, ring buffer full, ...), the placeholder would claim "wait <
        // threshold" for a longer wait: say "not captured" instead.
        let end = rec.switch_in_ns.or(rec.wake_ns);
        if threshold_ns > 0
            && end.is_some_and(|e| e.saturating_sub(rec.switch_out_ns) > threshold_ns)
        {
            let mut fixed = false;
            for s in [&mut rec.kstack, &mut rec.ustack] {
                if *s == StackId::SKIPPED {
                    *s = StackId::NOT_CAPTURED;
                    fixed = true;
                }
            }
            st.stacks_not_captured += u64::from(fixed);
        }
        rec.node = nodes.task(rec.ident, rec.kstack, rec.ustack);
        // Run-queue parts carry holder codes until here (the walk cannot intern nodes).
        // Level 0 (added at switch-in) comes after the levels of the walk (at the waking).
        rec.runq.sort_by_key(|p| p.level);
        for p in &mut rec.runq {
            if p.level == 0 {
                st.runq_root_ns += p.ns;
                if p.holder == HOLDER_UNKNOWN {
                    st.runq_unknown_ns += p.ns;
                }
            } else {
                st.runq_inner_ns += p.ns;
            }
            p.holder = nodes.runq(p.holder);
        }
        // Same-named holders of different processes share a node: merge their parts.
        if rec.runq.len() > 1 {
            let mut i = 1;
            while i < rec.runq.len() {
                let (level, holder, ns) = (rec.runq[i].level, rec.runq[i].holder, rec.runq[i].ns);
                match rec.runq[..i]
                    .iter_mut()
                    .rev()
                    .take_while(|p| p.level == level)
                    .find(|p| p.holder == holder)
                {
                    Some(p) => {
                        p.ns += ns;
                        rec.runq.remove(i);
                    }
                    None => i += 1,
                }
            }
        }
        // On-CPU parts carry stacks until here, like the run-queue holders.
        rec.oncpu.clear();
        for p in &rec.oncpu_raw {
            rec.oncpu.push(crate::OnCpuPart {
                level: p.level,
                node: nodes.oncpu(p.stacks),
                ns: p.ns,
            });
        }
        // Stack pairs that render alike share a node: merge their parts (same level).
        let mut i = 1;
        while i < rec.oncpu.len() {
            let (level, node, ns) = (rec.oncpu[i].level, rec.oncpu[i].node, rec.oncpu[i].ns);
            match rec.oncpu[..i]
                .iter_mut()
                .find(|p| p.level == level && p.node == node)
            {
                Some(p) => {
                    p.ns += ns;
                    rec.oncpu.remove(i);
                }
                None => i += 1,
            }
        }
        st.records_emitted += 1;
        st.dedup_hidden += u64::from(!rec.root);
        st.truncated += u64::from(rec.truncated);
        st.cycles += u64::from(rec.cycle);
        st.waits_with_lost += u64::from(rec.lost);
        let is_skip = |s: StackId| s == StackId::SKIPPED;
        // Dangling ids are rendered as [missing stack] too, but checking them here would
        // cost a table lookup per stack; `chainrec info --verify` reports them.
        let is_missing = |s: StackId| s == StackId::FAILED;
        if is_skip(rec.kstack)
            || is_skip(rec.ustack)
            || rec
                .hops
                .iter()
                .any(|h| is_skip(h.kstack) || is_skip(h.ustack))
        {
            st.stacks_skipped += 1;
        }
        if is_missing(rec.kstack)
            || is_missing(rec.ustack)
            || rec
                .hops
                .iter()
                .any(|h| is_missing(h.kstack) || is_missing(h.ustack))
        {
            st.stacks_missing += 1;
        }
        let exiting = StackId::USER_EXITING;
        if rec.ustack == exiting || rec.hops.iter().any(|h| h.ustack == exiting) {
            st.stacks_exiting += 1;
        }
        sink.on_wait(rec, nodes);
        true
    }

    /// Mark hops reachable within the depth limit from live roots; free the rest and cut
    /// cause pointers into freed hops (keeping the cause's times).
    fn gc(&mut self) {
        self.stats.gc_runs += 1;
        self.stats.peak_live_hops = self.stats.peak_live_hops.max(self.live_hops as u64);
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.epoch = 1;
            for m in &mut self.marks {
                m.epoch = 0;
            }
        }
        let epoch = self.epoch;
        let depth = (self.cfg.max_depth + 1).min(255) as u8;
        let mut live = 0usize;
        let hops = &self.hops;
        let marks = &mut self.marks;
        let mut mark = |mut h: u32, mut rem: u8, live: &mut usize| {
            while h < CUT && rem > 0 {
                let m = &mut marks[h as usize];
                if m.epoch == epoch {
                    if m.rem >= rem {
                        return;
                    }
                } else {
                    *live += 1;
                    m.epoch = epoch;
                }
                m.rem = rem;
                rem -= 1;
                h = hops[h as usize].cause;
            }
        };
        // Freed task slots hold no hops (remove_task clears them): no liveness check needed.
        for t in &self.tasks {
            mark(t.last_cause, depth, &mut live);
            mark(t.open_hop, 1, &mut live);
            if t.held_valid {
                mark(t.held_hop, 1, &mut live);
            }
        }
        for sl in self.slots.iter().filter(|s| s.occupied) {
            mark(sl.hop, 1, &mut live);
            for &h in &sl.inner {
                mark(h, 1, &mut live);
            }
        }
        self.free_hops.clear();
        for i in 0..self.hops.len() {
            if self.marks[i].epoch != epoch {
                self.free_hops.push(i as u32);
                continue;
            }
            let c = self.hops[i].cause;
            if c < CUT && self.marks[c as usize].epoch != epoch {
                self.hops[i].cause = CUT;
            }
        }
        // Reuse low indices first (keeps the arena dense).
        self.free_hops.reverse();
        self.live_hops = live;
        self.gc_threshold = (2 * live).max(1 << 16);
    }
}

/// The chain walk, borrowing only what it reads from the engine (so that the record it
/// fills can be a task's own record, borrowed mutably at the same time).
struct Walker<'a> {
    hops: &'a [Hop],
    nodes: &'a NodeTable,
    cfg: &'a Config,
    inner: &'a mut Vec<u32>,
    seen: &'a mut Vec<Tid>,
    /// Run-queue histories, when run-queue attribution is on.
    rq: Option<RqView<'a>>,
    /// [`Stats::runq_unsplit_ns`].
    unsplit: &'a mut u64,
    /// On-CPU samples, for the `[on cpu]` split of a level's running time.
    samples: &'a crate::sampleidx::SampleIndex,
    /// Scratch: a level's running pieces.
    pieces: Vec<(u64, u64)>,
}

/// The engine's run-queue histories, and how to find a thread's.
struct RqView<'a> {
    task_rq: &'a [TaskRq],
    task_direct: &'a [u32],
    task_ix: &'a FxHashMap<Tid, u32>,
}

impl RqView<'_> {
    fn of(&self, tid: Tid) -> Option<&TaskRq> {
        let i = if (tid as usize) < DIRECT_TIDS {
            match self.task_direct.get(tid as usize) {
                Some(&i) if i != 0 => i as usize - 1,
                _ => return None,
            }
        } else {
            *self.task_ix.get(&tid)? as usize
        };
        self.task_rq.get(i)
    }
}

/// Add `ns` behind `holder` at `level` to `parts` (holders of one level merged; a record
/// has a handful of parts, sorted by level when it is emitted).
fn add_runq(parts: &mut Vec<RunqPart>, level: u32, holder: u32, ns: u64) {
    if ns == 0 {
        return;
    }
    for p in parts.iter_mut() {
        if p.level == level && p.holder == holder {
            p.ns += ns;
            return;
        }
    }
    parts.push(RunqPart { level, holder, ns });
}

impl Walker<'_> {
    /// Split level `level`'s own time windows by the waker's runnable periods: the parts
    /// where it was runnable go to [`WaitRecord::runq`] behind its CPU's holders.
    fn split_level(
        &mut self,
        level: u32,
        waker: Tid,
        windows: [(u64, u64); 2],
        rec: &mut WaitRecord,
    ) {
        let h = self.rq.as_ref().and_then(|rq| rq.of(waker));
        if let Some(h) = h {
            for (x, y) in windows {
                if y <= x {
                    continue;
                }
                if x < h.floor {
                    *self.unsplit += h.floor.min(y) - x;
                }
                // Periods are in time order and disjoint: the first that ends after x, then
                // on until one starts at or after y.
                let first = h.segs.partition_point(|seg| seg.end <= x);
                for seg in h.segs.range(first..) {
                    if seg.start >= y {
                        break;
                    }
                    let ns = seg.end.min(y) - seg.start.max(x);
                    add_runq(&mut rec.runq, level, seg.holder, ns);
                }
            }
        }
        if !self.samples.enabled {
            return;
        }
        // The rest of the windows is the waker's on-CPU time: split it by its samples.
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.clear();
        let busy = |x: u64, y: u64, f: &mut dyn FnMut(u64, u64)| {
            if let Some(h) = h {
                let first = h.segs.partition_point(|seg| seg.end <= x);
                for seg in h.segs.range(first..) {
                    if seg.start >= y {
                        break;
                    }
                    f(seg.start, seg.end);
                }
            }
        };
        crate::sampleidx::minus(&windows, busy, &mut pieces);
        self.samples
            .split(waker, level, &pieces, &mut rec.oncpu_raw);
        self.pieces = pieces;
    }

    /// Build the chain of `rec` (woken by hop `first`), marking inner hops as used when
    /// `mark` (the root passes the filter).
    fn walk(&mut self, first: u32, rec: &mut WaitRecord, mark: bool) {
        rec.hops.clear();
        rec.runq.clear();
        rec.oncpu_raw.clear();
        rec.truncated = false;
        rec.cycle = false;
        let a = rec.switch_out_ns;
        let t1 = rec.wake_ns.unwrap_or(a);
        let max = self.cfg.max_depth;
        let mut cur = first;
        let mut depth = 1;
        match self.cfg.mode {
            Mode::Bounded => {
                let mut l = a;
                let mut t = t1;
                loop {
                    let h = &self.hops[cur as usize];
                    let mut r = Engine::hop_record(self.nodes, h);
                    if h.metal || h.cause == NO_HOP || h.cause_ts <= l {
                        r.ns = t.saturating_sub(l);
                        rec.hops.push(r);
                        if !h.metal {
                            self.split_level(depth as u32, h.waker_tid, [(l, t), (0, 0)], rec);
                        }
                        break;
                    }
                    if depth >= max || h.cause == CUT {
                        r.ns = t.saturating_sub(l);
                        rec.hops.push(r);
                        rec.truncated = true;
                        break;
                    }
                    let l2 = l.max(h.cause_s);
                    r.ns = t.saturating_sub(l) - h.cause_ts.min(t).saturating_sub(l2);
                    rec.hops.push(r);
                    // Own time: before the waker blocked, and after its waking.
                    self.split_level(
                        depth as u32,
                        h.waker_tid,
                        [(l, l2), (h.cause_ts.min(t), t)],
                        rec,
                    );
                    if mark {
                        self.inner.push(h.cause);
                    }
                    l = l2;
                    t = h.cause_ts.min(t);
                    cur = h.cause;
                    depth += 1;
                }
            }
            Mode::Last => {
                let weight = t1.saturating_sub(a);
                self.seen.clear();
                self.seen.push(rec.tid);
                loop {
                    let h = &self.hops[cur as usize];
                    let mut r = Engine::hop_record(self.nodes, h);
                    r.ns = weight;
                    rec.hops.push(r);
                    if h.metal || h.cause == NO_HOP {
                        break;
                    }
                    if depth >= max || h.cause == CUT {
                        rec.truncated = true;
                        break;
                    }
                    self.seen.push(h.waker_tid);
                    let next = &self.hops[h.cause as usize];
                    if !next.metal && self.seen.contains(&next.waker_tid) {
                        rec.cycle = true;
                        break;
                    }
                    if mark {
                        self.inner.push(h.cause);
                    }
                    cur = h.cause;
                    depth += 1;
                }
            }
        }
    }
}
