//! The ordered walk: events in, one wait record per off-CPU interval out. The mechanisms
//! live beside it: threads (`tasks`), hops and their causes (`hops`), the chain walk
//! (`walk`), subchain dedup (`dedup`), run-queue attribution (`runqueue`), emitting a
//! record (`emit`).

use crate::engine::config::{Config, Groups};
use crate::engine::dedup::{SlotState, Slots};
use crate::engine::emit::emit_rec;
use crate::engine::explain::CpuCheck;
use crate::engine::hops::{Cause, CauseLink, Hop, Mark};
use crate::engine::ids::{HopId, SlotId};
use crate::engine::mode::{Mode, OnCpuMode};
use crate::engine::nodes::{NodeTable, HOLDER_IDLE};
use crate::engine::past::{MetalEnd, PastWait, PastWaits};
use crate::engine::record::WaitSink;
use crate::engine::runqueue::RunQueues;
use crate::engine::sampleidx::SampleIndex;
use crate::engine::stats::Stats;
use crate::engine::tasks::{Status, Task, TaskIndex, WaitRefs, WaitSlot};
use crate::engine::walk::{OwnScratch, Walker};
use chainrec_format::{
    state_is_dead, CommReason, Event, OffCpuStacks, RecordingMeta, StackId, Switch, Tables, Tid,
    WakeContext, WakeupNew, Waking, STATE_INTERRUPTIBLE, STATE_RUNNABLE,
};

/// The tables of an engine state kept apart from its trace ([`Engine::snapshot`]); empty,
/// and replaced before the state processes an event ([`Engine::resume`]).
/// How far back the histories (run-queue periods, CPU holders, past waits) reach at most
/// while a wait stays open: its chain's levels older than this lose their split (shown
/// as `[run queue];[unknown]`, left unsplit, or not checked for earlier waits, each
/// counted). Bounds memory by trace time, not by the longest open wait.
pub(crate) const HISTORY_REACH_NS: u64 = 10_000_000_000;

fn no_tables() -> &'static Tables {
    static NONE: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    NONE.get_or_init(Tables::default)
}

impl Engine<'static> {
    /// A copy of this checkpoint ([`Engine::snapshot`]) that goes on over `tables` (the
    /// trace's it was taken on) with root filter `filter`, subchain dedup `dedup` and the
    /// run's frames above the thread.
    ///
    /// Exact whatever the filter, dedup and those frames, as long as the filter has a
    /// window starting after the checkpoint: the engine consults them only for waits the
    /// filter selects (`attach_hop`'s dedup mark, emission), and before the window none is
    /// selected, as none was in the checkpoint pass (docs/ENGINE.md "Checkpoints").
    pub(crate) fn resume<'t>(
        &self,
        tables: &'t Tables,
        filter: crate::Filter,
        dedup: bool,
        cgroup_frames: bool,
        process_frames: bool,
    ) -> Engine<'t> {
        let mut e: Engine<'t> = self.snapshot();
        e.nodes = e.nodes.with_caches();
        e.tables = tables;
        e.filter_all = filter.is_empty();
        e.cfg.filter = filter;
        e.cfg.dedup = dedup;
        e.cfg.cgroup_frames = cgroup_frames;
        e.cfg.process_frames = process_frames;
        e
    }
}

/// The current name of process `tgid`'s leader thread, if it is alive in the engine.
fn leader_comm(tasks: &[Task], index: &TaskIndex, tgid: Tid) -> Option<chainrec_format::Comm> {
    index.find(tgid).map(|i| tasks[i].comm)
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
    /// Task slot by tid.
    task_index: TaskIndex,
    live_tasks: usize,
    hops: Vec<Hop>,
    /// GC marks, parallel to `hops`.
    marks: Vec<Mark>,
    free_hops: Vec<HopId>,
    live_hops: usize,
    gc_threshold: usize,
    epoch: u32,
    lost_seq: u64,
    stack_threshold_ns: u64,
    seen: Vec<Tid>,
    inner_buf: Vec<HopId>,
    /// Scratch of the walk ([`Walker::pieces`]).
    walk_pieces: Vec<(u64, u64)>,
    walk_scratch: OwnScratch,
    /// Scratch of the walk ([`Walker::branches`]).
    walk_branches: usize,
    slots: Slots,
    /// The filter keeps every wait (no per-wait check needed).
    filter_all: bool,
    /// Which task each CPU runs, to count untraced switches.
    cpu_check: CpuCheck,
    /// Run-queue attribution in effect (on in the config, time-bounded mode).
    runqueue: bool,
    /// Per-CPU and per-task (parallel to `tasks`) run-queue histories.
    rq: RunQueues,
    /// Recent on-CPU samples per thread (traces with samples, time-bounded mode).
    samples: SampleIndex,
    /// Each thread's past blocked waits (parallel to `tasks`), as far back as an open wait
    /// can ask: the earlier waits a chain level follows as branches (time-bounded mode).
    past: PastWaits,
    stats: Stats,
}

impl<'t> Engine<'t> {
    /// New engine. `meta.start_ns` (when non-zero) is the trace start used for waits that
    /// began before the trace; otherwise the first event's time.
    pub fn new(tables: &'t Tables, meta: &RecordingMeta, mut cfg: Config) -> Self {
        cfg.max_depth = cfg.max_depth.clamp(1, 250);
        let filter_all = cfg.filter.is_empty();
        let runqueue = cfg.runqueue && cfg.mode == Mode::Bounded;
        let bounded = cfg.mode == Mode::Bounded;
        let sampling = meta.sampling();
        // The period a sample stands for (cpu-clock: exact; cycles: approximate).
        let estimate_period = sampling
            .as_ref()
            .map(|s| match (s.period_ns, s.freq_hz) {
                (0, 0) => 0,
                (0, f) => 1_000_000_000 / f,
                (p, _) => p,
            })
            .filter(|&p| p > 0 && cfg.oncpu == OnCpuMode::Estimate);
        Engine {
            tables,
            cfg,
            trace_start: (meta.start_ns != 0).then_some(meta.start_ns),
            nodes: NodeTable::for_tables(tables),
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            task_index: TaskIndex::default(),
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
            walk_pieces: Vec::new(),
            walk_scratch: OwnScratch::default(),
            walk_branches: 0,
            slots: Slots::default(),
            filter_all,
            cpu_check: CpuCheck::default(),
            runqueue,
            rq: RunQueues::default(),
            samples: SampleIndex::new(sampling.is_some() && bounded, estimate_period),
            past: PastWaits::default(),
            stats: Stats::default(),
        }
    }

    /// A copy of the whole state apart from the trace's tables: a checkpoint
    /// ([`crate::checkpoint`]) to resume from with [`Engine::resume`].
    pub(crate) fn snapshot(&self) -> Engine<'static> {
        Engine {
            tables: no_tables(),
            cfg: self.cfg.clone(),
            trace_start: self.trace_start,
            nodes: self.nodes.snapshot(),
            tasks: self.tasks.clone(),
            free_tasks: self.free_tasks.clone(),
            task_index: self.task_index.clone(),
            live_tasks: self.live_tasks,
            hops: self.hops.clone(),
            marks: self.marks.clone(),
            free_hops: self.free_hops.clone(),
            live_hops: self.live_hops,
            gc_threshold: self.gc_threshold,
            epoch: self.epoch,
            lost_seq: self.lost_seq,
            stack_threshold_ns: self.stack_threshold_ns,
            seen: self.seen.clone(),
            inner_buf: self.inner_buf.clone(),
            walk_pieces: Vec::new(),
            walk_scratch: OwnScratch::default(),
            walk_branches: 0,
            slots: self.slots.clone(),
            filter_all: self.filter_all,
            cpu_check: self.cpu_check.clone(),
            runqueue: self.runqueue,
            rq: self.rq.clone(),
            samples: self.samples.clone(),
            past: self.past.clone(),
            stats: self.stats.clone(),
        }
    }

    /// Bytes each part of a checkpoint holds: each part is cloned alone and `heap()` (the
    /// process's allocated bytes, from a counting allocator) read around the clone
    /// (docs/BENCHMARKS.md "Explorer": what to share between checkpoints).
    pub(crate) fn part_bytes(&self, heap: &dyn Fn() -> usize) -> Vec<(&'static str, usize)> {
        use crate::engine::nodes::clone_cost as cost;
        let mut v = self.nodes.part_bytes(heap);
        v.extend([
            ("nodes", cost(heap, &self.nodes.snapshot())),
            ("tasks", cost(heap, &self.tasks)),
            ("task_index", cost(heap, &self.task_index)),
            ("hops", cost(heap, &self.hops)),
            ("marks", cost(heap, &self.marks)),
            ("free_hops", cost(heap, &self.free_hops)),
            ("slots (dedup)", cost(heap, &self.slots)),
            ("run queues", cost(heap, &self.rq)),
            ("samples", cost(heap, &self.samples)),
            ("past waits", cost(heap, &self.past)),
            ("cpu_check", cost(heap, &self.cpu_check)),
            (
                "seen+inner_buf+free_tasks",
                cost(
                    heap,
                    &(
                        self.seen.clone(),
                        self.inner_buf.clone(),
                        self.free_tasks.clone(),
                    ),
                ),
            ),
            (
                "config+stats",
                cost(heap, &(self.cfg.clone(), self.stats.clone())),
            ),
        ]);
        v
    }

    /// Interned nodes (to render records and folded paths).
    pub fn nodes(&self) -> &NodeTable {
        &self.nodes
    }

    /// The interned nodes, keeping nothing else of the engine (after [`Engine::finish`]).
    pub fn into_nodes(self) -> NodeTable {
        self.nodes
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
                    // A new task: whatever the tid did before was another thread.
                    self.begin_new_thread(n.child_tid, n.ts, sink);
                    let t = self.task(n.child_tid);
                    if self.tasks[t].tgid != n.child_tgid {
                        self.tasks[t].tgid = n.child_tgid;
                        self.tasks[t].ident = self.nodes.ident(self.tasks[t].comm, n.child_tgid);
                    }
                    self.fork_cause(t, n);
                    let task = &mut self.tasks[t];
                    if !task.status.is_off() {
                        // A new task is runnable from here: an off-CPU (run-queue) interval.
                        task.open_wait(
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
                    if c.reason == CommReason::Fork {
                        // Emitted by the recorder with the child's sched_wakeup_new.
                        self.begin_new_thread(c.tid, c.ts, sink);
                    }
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
                Event::Sample(x) => {
                    let clock = if self.samples.estimating() {
                        self.samples.clock(self.find_task(x.tid), x.ts)
                    } else {
                        None
                    };
                    self.samples.push(x, clock)
                }
            }
        }
    }

    /// End of trace: emit held waits and waits woken but not yet switched in; count the rest.
    pub fn finish(&mut self, sink: &mut impl WaitSink) -> Stats {
        for t in 0..self.tasks.len() {
            if self.tasks[t].held_refs.is_some() {
                self.emit_held(t, sink);
            }
            let task = &mut self.tasks[t];
            if task.status.is_off() {
                self.stats.waits_open_at_end += 1;
                if task.status.is_traced_wait() && task.open_refs.hop.is_some() {
                    // Blocked part complete: emit with switch_in_ns = None.
                    task.hand_over(None, self.lost_seq);
                    self.emit_held(t, sink);
                }
                self.tasks[t].status = Status::Unknown;
            }
        }
        // Every wait is ready now, so every decision resolves (markers are strictly later
        // chains); anything left would be a bug, but emit it rather than lose it.
        for s in self.slots.ids().collect::<Vec<_>>() {
            let sl = self.slots.get_mut(s);
            if sl.state == SlotState::Free {
                continue;
            }
            if sl.state == SlotState::Waiting {
                sl.state = SlotState::Ready;
            }
            self.hops[sl.hop.index()].pending_markers = 0;
            self.decide(s, sink);
        }
        self.stats.peak_live_hops = self.stats.peak_live_hops.max(self.live_hops as u64);
        self.stats.oncpu_short_history_ns = self.samples.short_history_ns.get();
        self.stats.peak_runq_history = self.rq.peak_kept() as u64;
        self.stats.peak_past_waits = self.past.peak as u64;
        self.stats.runq_capped = self.rq.capped;
        self.stats.clone()
    }

    #[inline]
    fn find_task(&self, tid: Tid) -> Option<usize> {
        self.task_index.find(tid)
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
            None => (chainrec_format::unknown_thread_comm(tid), 0, false),
        };
        let ident = self.nodes.ident(comm, tgid);
        let task = Task::new(tid, comm, tgid, ident, kthread);
        let i = if let Some(i) = self.free_tasks.pop() {
            self.tasks[i as usize] = task;
            i as usize
        } else {
            self.tasks.push(task);
            self.rq.add_task();
            self.tasks.len() - 1
        };
        self.samples.reset_task(i);
        self.task_index.insert(tid, i);
        self.live_tasks += 1;
        self.stats.peak_tasks = self.stats.peak_tasks.max(self.live_tasks as u64);
        i
    }

    fn on_switch(&mut self, s: &Switch, sink: &mut impl WaitSink) {
        if s.prev_tid != 0 {
            let t = self.task(s.prev_tid);
            self.samples.switch_out(t, s.ts);
            if self.tasks[t].held_refs.is_some() {
                self.emit_held(t, sink);
            }
            if state_is_dead(s.prev_state) {
                // The thread's final switch-out: its life ends here. No wait opens; a task
                // switched in later under this tid is another thread.
                if self.tasks[t].status.is_off() {
                    if self.tasks[t].status.is_pretrace() {
                        // As below: assumed blocked since before the trace, but running.
                        self.stats.wakings_ignored += 1;
                    } else {
                        let dropped = s.ts.saturating_sub(self.tasks[t].open.switch_out_ns);
                        self.stats
                            .note_inconsistent(s.ts, s.prev_tid, false, dropped);
                    }
                    self.drop_open_wait(t, sink);
                }
                self.stats.threads_exited += 1;
                self.remove_task(s.prev_tid, t);
            } else {
                if self.tasks[t].status.is_pretrace() {
                    // First seen in a waking, assumed blocked since before the trace, but it
                    // was still running (woken before it switched out): not inconsistent.
                    self.stats.wakings_ignored += 1;
                } else if self.tasks[t].status.is_off() {
                    let dropped = s.ts.saturating_sub(self.tasks[t].open.switch_out_ns);
                    self.stats
                        .note_inconsistent(s.ts, s.prev_tid, false, dropped);
                    self.drop_open_wait(t, sink);
                }
                self.tasks[t].open_wait(
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
                self.rq.push_cpu(s.cpu, s.ts, HOLDER_IDLE);
            }
        } else {
            let mut t = self.task(s.next_tid);
            let mut fresh = false;
            if self.tasks[t].racing_hop.is_some() {
                self.woken_before_block(t);
            }
            let task = &self.tasks[t];
            if task.exited
                && task.status.is_traced_wait()
                && task.open.state != STATE_RUNNABLE
                && task.open_refs.hop.is_none()
            {
                // A thread that had exited, blocked, and is switched in with no waking:
                // the trace cannot tell this from a new task that reuses the tid after the
                // old one's final switch-out was lost. Not a wait: dropped and counted.
                let dropped = s.ts.saturating_sub(task.open.switch_out_ns);
                self.stats.reused_waits_dropped += 1;
                self.stats.reused_dropped_ns += dropped;
                self.drop_open_wait(t, sink);
                self.remove_task(s.next_tid, t);
                t = self.new_task(s.next_tid);
                self.tasks[t].status = Status::Running;
                fresh = true;
            }
            self.samples.switch_in(t, s.ts);
            if self.runqueue {
                let task = &self.tasks[t];
                if task.status.is_traced_wait() {
                    // Runnable from the waking (or the whole of a preemption / a new task's
                    // first wait for a CPU) to now.
                    let preempted = task.open.state == STATE_RUNNABLE;
                    let (tid, out) = (task.tid, task.open.switch_out_ns);
                    let r0 = if preempted {
                        Some(out)
                    } else {
                        task.open.wake_ns
                    };
                    if let Some(mut r0) = r0 {
                        if preempted {
                            // Held off by CPU-quota throttling until its group's quota
                            // timer refilled it (CHAINS.md "Throttling")?
                            if let Some((code, until)) = self.throttled_until(tid, out, s.ts) {
                                self.rq
                                    .throttled(t, r0, until, code, &mut self.tasks[t].open);
                                r0 = until;
                            }
                        }
                        self.rq
                            .split_runnable(t, s.cpu, r0, s.ts, &mut self.tasks[t].open);
                    }
                }
                let holder = self.nodes.holder_of(self.tasks[t].ident);
                self.rq.push_cpu(s.cpu, s.ts, holder);
                if self.rq.needs_trim() || self.past.needs_trim() {
                    self.trim_runqueues(s.ts);
                }
            }
            if fresh {
                return;
            }
            let task = &mut self.tasks[t];
            match task.status {
                Status::Off { pretrace } => {
                    if self.cfg.mode == Mode::Bounded && task.open.state != STATE_RUNNABLE {
                        // Its blocked part (to the waking, else to now) may lie inside a
                        // later chain's level of this thread: an earlier wait.
                        let o = &task.open;
                        let end = o.wake_ns.unwrap_or(s.ts);
                        if end > o.switch_out_ns {
                            let hop = task.open_refs.hop;
                            let metal = hop
                                .map(|h| &self.hops[h.index()])
                                .filter(|h| h.metal())
                                .map(|h| MetalEnd {
                                    node: h.node,
                                    kstack: h.kstack,
                                    waker_tid: h.waker_tid,
                                    context: h.context,
                                });
                            self.past.push(
                                t,
                                PastWait {
                                    start: o.switch_out_ns,
                                    end,
                                    hop: hop.filter(|_| metal.is_none()),
                                    metal,
                                    kstack: o.kstack,
                                    ustack: o.ustack,
                                },
                            );
                        }
                    }
                    self.stats.waits += 1;
                    if pretrace {
                        self.stats.waits_before_trace += 1;
                        self.stats.waits_before_trace_ns +=
                            s.ts.saturating_sub(task.open.switch_out_ns);
                        task.open_refs = WaitRefs::default();
                    } else {
                        if task.open.state == STATE_RUNNABLE {
                            self.stats.preemptions += 1;
                        } else if task.open_refs.hop.is_some() {
                            self.stats.woken_waits += 1;
                        } else {
                            self.stats.waits_without_waker += 1;
                        }
                        task.hand_over(Some(s.ts), self.lost_seq);
                    }
                }
                Status::Unknown => self.stats.waits_before_trace += 1,
                Status::Running => self.stats.note_inconsistent(s.ts, s.next_tid, true, 0),
            }
            task.status = Status::Running;
            if !self.runqueue && self.past.needs_trim() {
                self.trim_runqueues(s.ts);
            }
        }
    }

    /// Trim the run-queue histories to what the waits open at `now` can still ask for
    /// ([`RunQueues::trim`]; docs/ENGINE.md, "How far back the histories reach").
    fn trim_runqueues(&mut self, now: u64) {
        let (mut waits_from, mut runnable_from) = self.open_bounds(now);
        // One long sleeper must not pin every thread's history back to its switch-out
        // (busy100m: 144 MB of run-queue blocks at the peak): no further back than
        // HISTORY_REACH_NS, counted when an open wait began before that.
        let reach = now.saturating_sub(HISTORY_REACH_NS);
        if waits_from < reach || runnable_from < reach {
            self.stats.history_reach_cuts += 1;
            waits_from = waits_from.max(reach);
            runnable_from = runnable_from.max(reach);
            // What is dropped could still be asked for: the walks must know the histories
            // start there (time before is unsplit or unchecked, and counted), not read it
            // as time the waker ran.
            if self.runqueue {
                self.rq.raise_floors(waits_from);
            }
            self.past.raise_floors(waits_from);
        }
        if self.runqueue {
            self.rq.trim(waits_from, runnable_from);
        }
        self.past.trim(waits_from);
    }

    /// What the waits open at `now` can still ask of the histories: the oldest switch-out
    /// of a blocked wait not yet woken (`waits_from`) and the oldest start of a runnable
    /// period not yet switched in (`runnable_from`); `now` when there is none.
    fn open_bounds(&self, now: u64) -> (u64, u64) {
        let (mut waits_from, mut runnable_from) = (now, now);
        // Freed task slots have status Unknown: skipped like any thread not off-CPU.
        for task in &self.tasks {
            if !task.status.is_traced_wait() {
                continue;
            }
            let out = task.open.switch_out_ns;
            let runnable = task.open.state == STATE_RUNNABLE;
            if !runnable && task.open_refs.hop.is_none() {
                // Blocked, not yet woken: its chain, walked at its waking, reaches back to
                // its switch-out. A waking that raced the block ends it at the switch-out.
                waits_from = waits_from.min(out);
                if task.racing_hop.is_some() {
                    runnable_from = runnable_from.min(out);
                }
            } else if runnable {
                runnable_from = runnable_from.min(out);
            } else if let Some(w) = task.open.wake_ns {
                runnable_from = runnable_from.min(w);
            }
        }
        (waits_from, runnable_from)
    }

    /// When `tid`'s runnable switch-out at `out` was forced by CPU-quota throttling: the
    /// holder code of its throttled level and when that level ends (its group's latest
    /// refill before the switch-in at `switch_in`, or the switch-in when the trace has no
    /// refill record).
    fn throttled_until(&mut self, tid: Tid, out: u64, switch_in: u64) -> Option<(u32, u64)> {
        let th = &self.tables.throttling;
        let group = th.switch_out(tid, out)?;
        let refill = th.refill_in(group, out, switch_in);
        let ended_by = if refill.is_some() {
            crate::engine::nodes::UNTHROTTLED_BY_TIMER
        } else {
            self.stats.throttle_unknown_end += 1;
            crate::engine::nodes::UNTHROTTLE_UNKNOWN
        };
        let label = self.tables.throttle_group_name(group);
        let code = self.nodes.throttle_holder(&label, ended_by);
        Some((code, refill.unwrap_or(switch_in)))
    }

    /// Drop task `t`'s open wait (never emitted): release its dedup decision, if one was
    /// pending. The task's status is left to the caller.
    fn drop_open_wait(&mut self, t: usize, sink: &mut impl WaitSink) {
        let refs = std::mem::take(&mut self.tasks[t].open_refs);
        if let WaitSlot::At(slot) = refs.slot {
            self.slots.get_mut(slot).state = SlotState::Discarded;
            self.decide(slot, sink);
        }
    }

    /// A new thread (fork/clone) takes `tid` at `ts`. If the engine still holds an earlier
    /// thread with that tid (its final switch-out was not in the trace), that thread ends
    /// here: its held wait is emitted, an open wait is dropped (counted), never ended by
    /// the new thread's first switch-in.
    fn begin_new_thread(&mut self, tid: Tid, ts: u64, sink: &mut impl WaitSink) {
        let Some(t) = self.find_task(tid) else {
            return;
        };
        let task = &self.tasks[t];
        // A task created by the fork's own comm record a moment ago has no state yet.
        if task.status == Status::Unknown && task.held_refs.is_none() && task.last_cause.is_none() {
            return;
        }
        if task.held_refs.is_some() {
            self.emit_held(t, sink);
        }
        let task = &self.tasks[t];
        if let Status::Off { pretrace } = task.status {
            if !pretrace {
                self.stats.reused_waits_dropped += 1;
                self.stats.reused_dropped_ns += ts.saturating_sub(task.open.switch_out_ns);
            }
            self.drop_open_wait(t, sink);
        }
        self.stats.threads_reused += 1;
        self.remove_task(tid, t);
    }

    fn remove_task(&mut self, tid: Tid, t: usize) {
        self.task_index.remove(tid);
        self.live_tasks -= 1;
        self.rq.clear_task(t);
        self.past.clear_task(t);
        self.samples.forget(tid);
        let task = &mut self.tasks[t];
        task.last_cause = None;
        task.open_refs = WaitRefs::default();
        task.held_refs = None;
        task.racing_hop = None;
        task.status = Status::Unknown;
        self.free_tasks.push(t as u32);
    }

    fn on_stacks(&mut self, o: &OffCpuStacks) {
        let Some(t) = self.find_task(o.tid) else {
            self.stats.stacks_unmatched += 1;
            return;
        };
        let task = &mut self.tasks[t];
        let rec = match task.status {
            Status::Off { pretrace: false } => &mut task.open,
            Status::Running if task.held_refs.is_some() => {
                self.past
                    .set_stacks(t, task.held.switch_out_ns, o.kstack, o.ustack);
                &mut task.held
            }
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

    fn alloc_hop(&mut self, hop: Hop) -> HopId {
        self.live_hops += 1;
        self.stats.hops += 1;
        if let Some(i) = self.free_hops.pop() {
            self.hops[i.index()] = hop;
            i
        } else {
            self.hops.push(hop);
            self.marks.push(Mark::default());
            HopId::at(self.hops.len() - 1)
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
                Status::Off { .. }
                    if task.open.state != STATE_RUNNABLE && task.open_refs.hop.is_none() => {}
                Status::Unknown => {
                    // Blocked since before the trace: not a root, but a cause with s = trace start.
                    task.open_wait(
                        trace_start,
                        STATE_INTERRUPTIBLE,
                        StackId::NONE,
                        StackId::NONE,
                        self.lost_seq,
                        self.cfg.mode,
                    );
                    task.status = Status::Off { pretrace: true };
                }
                Status::Running => {
                    // The thread runs, but its state had already left TASK_RUNNING (the
                    // kernel emits `sched_waking` only then): it is about to block. If
                    // that block's switch-out is traced anyway and no other waking ends it,
                    // this one did (see `woken_before_block`). Ignored until then.
                    self.stats.wakings_ignored += 1;
                    let h = self.make_hop(t, w);
                    self.tasks[t].racing_hop = Some(h);
                    return;
                }
                _ => {
                    self.stats.wakings_ignored += 1;
                    return;
                }
            }
        }
        let h = self.make_hop(t, w);
        self.attach_hop(t, h, w.ts);
    }

    /// A blocked wait of task `t` is being switched in with no waking of its own. When a
    /// waking targeted the thread while it still ran, shortly before this switch-out, that
    /// waking raced the block and ended it: `sched_waking` fires before the waker takes the
    /// run-queue lock, the switch-out (already committed to blocking) is traced, and the
    /// waker then puts the thread back (a delayed dequeue re-enqueued, or a full wakeup once
    /// it is off the CPU) without another event. Measured on fio's io-wq workers (6.18): 760
    /// of 863 waits without a waking had one, 0.7 µs before the switch-out (median, at most
    /// 9 µs). The hop ends the wait at its switch-out: no blocked time, the whole wait is
    /// run-queue time behind whoever held the CPU, and the chain goes on through the waker.
    fn woken_before_block(&mut self, t: usize) {
        /// A waking further back than this before the switch-out is not taken for a race.
        const RACE_WINDOW_NS: u64 = 1_000_000;
        let task = &mut self.tasks[t];
        let Some(h) = task.racing_hop.take() else {
            return;
        };
        if !task.status.is_traced_wait()
            || task.open.state == STATE_RUNNABLE
            || task.open_refs.hop.is_some()
        {
            return;
        }
        let out = task.open.switch_out_ns;
        let hop = &mut self.hops[h.index()];
        if hop.ts > out || out - hop.ts > RACE_WINDOW_NS {
            return;
        }
        hop.ts = out;
        self.stats.wakings_ignored = self.stats.wakings_ignored.saturating_sub(1);
        self.stats.woken_before_block += 1;
        self.attach_hop(t, h, out);
    }

    /// A new thread's life is caused by its parent's fork: that is the child's first cause,
    /// as if it had been blocked since the trace began and the fork woke it. A chain that
    /// comes through the child then goes on to the parent (`[fork]`) for the time before
    /// the child existed, instead of counting that time as the child's own (running).
    fn fork_cause(&mut self, t: usize, n: &WakeupNew) {
        if n.parent_tid == 0 || n.parent_tid == n.child_tid {
            return;
        }
        let pt = self.task(n.parent_tid);
        let parent = &mut self.tasks[pt];
        if parent.status == Status::Unknown {
            // It runs: it is forking.
            parent.status = Status::Running;
        }
        let mut hop = Hop {
            ts: n.ts,
            cause_ts: 0,
            cause_s: 0,
            cause: CauseLink::NONE,
            node: self.nodes.fork(parent.ident),
            waker_tid: n.parent_tid,
            waker_ident: parent.ident,
            kstack: StackId::NONE,
            ustack: StackId::NONE,
            context: WakeContext::Task,
            hidden: false,
            pending_markers: 0,
            wait_slot: None,
        };
        self.link_cause(&mut hop, pt);
        let h = self.alloc_hop(hop);
        let before = self.trace_start.unwrap_or(n.ts);
        let child = &mut self.tasks[t];
        child.last_cause = Some(h);
        // Before its fork the child was not: none of that time is its own.
        child.last_cause_s = before;
        if self.cfg.mode == Mode::Bounded && n.ts > before {
            // Nor later, when the child is a level whose chain follows a later wait: the
            // time before the fork is an earlier wait of the child, ended by the fork.
            self.past.push(
                t,
                PastWait {
                    start: before,
                    end: n.ts,
                    hop: Some(h),
                    metal: None,
                    kstack: StackId::NONE,
                    ustack: StackId::NONE,
                },
            );
        }
        self.stats.fork_causes += 1;
    }

    /// `hop`'s cause: the waking that ended task slot `waker`'s most recent blocked
    /// interval (CHAINS.md's cause(w)), with that interval's start, if there is one.
    #[inline]
    fn link_cause(&self, hop: &mut Hop, waker: usize) {
        let w = &self.tasks[waker];
        if let Some(cause) = w.last_cause {
            hop.cause = CauseLink::hop(cause);
            hop.cause_s = w.last_cause_s;
            hop.cause_ts = self.hops[cause.index()].ts;
        }
    }

    /// The hop of waking `w` (target task `t`), its node and cause resolved now.
    fn make_hop(&mut self, t: usize, w: &Waking) -> HopId {
        let (wk, wu) = self.waker_stacks(t, w);
        // Build the hop.
        // A softirq the waker ran itself (SoftIrqTask) is a task hop: CHAINS.md.
        let metal = !w.context.is_task() || w.waker_tid == 0;
        let mut hop = Hop {
            ts: w.ts,
            cause_ts: 0,
            cause_s: 0,
            cause: CauseLink::NONE,
            node: 0,
            waker_tid: w.waker_tid,
            waker_ident: Hop::METAL,
            kstack: wk,
            ustack: if metal { StackId::NONE } else { wu },
            context: w.context,
            hidden: false,
            pending_markers: 0,
            wait_slot: None,
        };
        if metal {
            hop.node = self.nodes.metal(w.context, w.source, wk, self.tables);
        } else {
            let wt = self.task(w.waker_tid);
            let waker = &mut self.tasks[wt];
            if waker.status == Status::Unknown {
                waker.status = Status::Running;
            }
            let ident = waker.ident;
            hop.waker_ident = ident;
            self.link_cause(&mut hop, wt);
            hop.node = if w.context == WakeContext::SoftIrqTask {
                self.nodes
                    .softirq_task(ident, w.source, wk, wu, self.tables)
            } else {
                self.nodes.task(ident, wk, wu)
            };
        }
        self.alloc_hop(hop)
    }

    /// Hop `h` ends task `t`'s open wait at `wake_ns`: walk its chain.
    fn attach_hop(&mut self, t: usize, h: HopId, wake_ns: u64) {
        let task = &mut self.tasks[t];
        task.open.wake_ns = Some(wake_ns);
        task.open_refs.hop = Some(h);
        task.last_cause = Some(h);
        task.last_cause_s = task.open.switch_out_ns;
        if !task.status.is_pretrace() {
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
                rq: self.runqueue.then(|| self.rq.view(&self.task_index)),
                unsplit: &mut self.stats.runq_unsplit_ns,
                samples: &self.samples,
                index: &self.task_index,
                pieces: &mut self.walk_pieces,
                scratch: &mut self.walk_scratch,
                past: &self.past,
                branches: &mut self.walk_branches,
                unchecked: &mut self.stats.past_unchecked_ns,
            };
            walker.walk(h, &mut self.tasks[t].open, mark);
            if mark && self.inner_buf.is_empty() {
                // No inner hops to release later: decide lazily when the wait is ready.
                self.tasks[t].open_refs.slot = WaitSlot::Lazy;
            } else if mark {
                let slot = self.alloc_slot(h);
                for &ih in &self.slots.get(slot).inner {
                    self.hops[ih.index()].pending_markers += 1;
                }
                self.tasks[t].open_refs.slot = WaitSlot::At(slot);
                self.hops[h.index()].wait_slot = Some(slot);
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
        if task.status.is_traced_wait()
            && task.open.state != STATE_RUNNABLE
            && task.open_refs.hop.is_none()
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

    /// The held wait of task `t` is final (its task switched out again, exited, or the
    /// trace ended): emit it now, or park it until dedup can decide whether it is a root.
    fn emit_held(&mut self, t: usize, sink: &mut impl WaitSink) {
        let refs = self.tasks[t].held_refs.take().unwrap_or_default();
        let slot = match (refs.slot, refs.hop) {
            (WaitSlot::At(s), _) => Some(s),
            (WaitSlot::Lazy, Some(hop)) => {
                let h = &self.hops[hop.index()];
                if h.hidden || h.pending_markers > 0 {
                    self.inner_buf.clear();
                    let s = self.alloc_slot(hop);
                    self.hops[hop.index()].wait_slot = Some(s);
                    Some(s)
                } else {
                    None
                }
            }
            (WaitSlot::Lazy, None) | (WaitSlot::None, _) => None,
        };
        let groups = self.groups_for(self.tasks[t].held.tgid);
        let task = &mut self.tasks[t];
        if let Some(slot) = slot {
            let sl = self.slots.get_mut(slot);
            std::mem::swap(&mut task.held, &mut sl.rec);
            sl.state = SlotState::Ready;
            self.decide(slot, sink);
        } else {
            // Emitted in place (disjoint field borrows): no move of the record out and back.
            task.held.root = true;
            emit_rec(
                &mut self.nodes,
                &mut self.stats,
                &self.cfg.filter,
                self.filter_all,
                self.stack_threshold_ns,
                groups,
                &mut task.held,
                sink,
            );
        }
    }

    /// A dedup slot for the wait ended by `hop`, whose chain marked the hops in
    /// `inner_buf`.
    fn alloc_slot(&mut self, hop: HopId) -> SlotId {
        let s = self.slots.alloc(hop, &mut self.inner_buf);
        self.stats.peak_pending_waits =
            self.stats.peak_pending_waits.max(self.slots.pending as u64);
        s
    }

    /// Decide ready slots, starting at `first` ([`Slots::decide`]), emitting to `sink`.
    fn decide(&mut self, first: SlotId, sink: &mut impl WaitSink) {
        let (nodes, stats) = (&mut self.nodes, &mut self.stats);
        let (filter, filter_all) = (&self.cfg.filter, self.filter_all);
        let threshold_ns = self.stack_threshold_ns;
        let (kinds, tables) = (self.cfg.group_kinds(), self.tables);
        let (tasks, index) = (&self.tasks, &self.task_index);
        self.slots.decide(first, &mut self.hops, |rec| {
            let groups = kinds.map(|kinds| Groups {
                tables,
                kinds,
                leader: kinds
                    .process
                    .then(|| leader_comm(tasks, index, rec.tgid))
                    .flatten(),
            });
            emit_rec(
                nodes,
                stats,
                filter,
                filter_all,
                threshold_ns,
                groups,
                rec,
                sink,
            )
        });
    }

    /// The frames above a waiting thread of process `tgid`, if this run shows any.
    fn groups_for(&self, tgid: Tid) -> Option<Groups<'t>> {
        self.cfg.group_kinds().map(|kinds| Groups {
            tables: self.tables,
            kinds,
            leader: kinds
                .process
                .then(|| leader_comm(&self.tasks, &self.task_index, tgid))
                .flatten(),
        })
    }

    /// Mark hops reachable within the depth limit from live roots; free the rest and cut
    /// cause pointers into freed hops (keeping the cause's times).
    fn gc(&mut self) {
        self.stats.gc_runs += 1;
        // Past waits pin their hops: drop those no open wait can reach first.
        let (waits_from, _) = self.open_bounds(u64::MAX);
        self.past.trim(waits_from);
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
        let mut mark = |mut next: Option<HopId>, mut rem: u8, live: &mut usize| {
            while let Some(h) = next.filter(|_| rem > 0) {
                let m = &mut marks[h.index()];
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
                next = hops[h.index()].cause.hop_id();
            }
        };
        // Freed task slots hold no hops (remove_task clears them): no liveness check needed.
        for t in &self.tasks {
            mark(t.last_cause, depth, &mut live);
            mark(t.open_refs.hop, 1, &mut live);
            // It may still become an open hop, whose causes the walk then follows.
            mark(t.racing_hop, depth, &mut live);
            if let Some(held) = t.held_refs {
                mark(held.hop, 1, &mut live);
            }
        }
        // Earlier waits a later chain may follow, with their chains.
        for h in self.past.hops() {
            mark(Some(h), depth, &mut live);
        }
        for sl in self.slots.occupied() {
            mark(Some(sl.hop), 1, &mut live);
            for &h in &sl.inner {
                mark(Some(h), 1, &mut live);
            }
        }
        self.free_hops.clear();
        for i in 0..self.hops.len() {
            if self.marks[i].epoch != epoch {
                self.free_hops.push(HopId::at(i));
                continue;
            }
            if let Cause::Hop(c) = self.hops[i].cause.get() {
                if self.marks[c.index()].epoch != epoch {
                    self.hops[i].cause = CauseLink::CUT;
                }
            }
        }
        // Reuse low indices first (keeps the arena dense).
        self.free_hops.reverse();
        self.live_hops = live;
        self.gc_threshold = (2 * live).max(1 << 16);
    }
}
