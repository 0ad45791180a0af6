//! The critical path of one thread (`chainrec critical-path`): its timeline over a window
//! as a sequence of segments, each explained with stacks. Running segments carry the
//! thread's own on-CPU samples; runnable segments the CPU holders it waited behind (the
//! run-queue level 0 of CHAINS.md); blocked segments the chain the engine gives for that
//! wait, level by level, with each level's run-queue and on-CPU split. The chains come
//! from one ordinary engine run filtered on the thread ([`WaitRecord`]s); the segments
//! between its waits come from the thread's own switches, read in the same pass.
//! docs/REPORTS.md ("critical-path") says how a segment cut by the window is split.

use crate::analyses::timeline::{St, Timeline};
use crate::analyses::TraceInput;
use crate::checkpoint::SetupKey;
use crate::engine::config::Config;
use crate::engine::frames;
use crate::engine::mode::Mode;
use crate::engine::nodes::{NodeId, NodeTable};
use crate::engine::record::WaitRecord;
use crate::engine::sampleidx::apportion;
use crate::graph::pathframes::FrameNamer;
use crate::{Cancel, ChainError, Checkpoints, Engine, Filter, DEFAULT_MAX_DEPTH};
use chainrec_format::{
    state_is_dead, Event, FormatError, RecordingMeta, StackId, Tables, ThreadIdentity,
    ThreadSelector, Tid, STATE_RUNNABLE,
};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::HashMap;

/// What to build.
#[derive(Clone, Debug)]
pub struct CritPathOptions {
    /// The thread.
    pub tid: Tid,
    /// Trace-clock window `[start, end)`; `None`: the thread's life in the trace (from its
    /// creation, or the trace start, to its exit, or the trace end).
    pub window: Option<(u64, u64)>,
    /// Maximum hops per chain.
    pub max_depth: usize,
    /// Decode chunks in parallel.
    pub parallel: bool,
}

impl CritPathOptions {
    /// The whole life of `tid`, default depth, parallel decoding.
    pub fn new(tid: Tid) -> Self {
        CritPathOptions {
            tid,
            window: None,
            max_depth: DEFAULT_MAX_DEPTH,
            parallel: true,
        }
    }
}

/// Time split by one stack or CPU holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// Frames as the folded line shows them, root first (for a sampled stack: user frames
    /// root→leaf, `-`, kernel frames root→leaf; for a level's parts: `[run queue];holder`
    /// or `[on cpu];frames`).
    pub frames: Vec<String>,
    /// Samples behind this share (running segments; 0 elsewhere).
    pub samples: u64,
    /// Nanoseconds.
    pub ns: u64,
}

/// One level of a blocked segment's chain (the waking that ended the wait at level 1,
/// then the wakings that ended each waker's own wait).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    /// The waker's name, or the metal label (`[hardirq: timer]`, ...).
    pub name: String,
    /// Waker tid (for metal levels: the interrupted task, 0 = idle).
    pub tid: Tid,
    /// True when the level is metal (interrupt or idle: the chain ends here).
    pub metal: bool,
    /// The level's frames as a chain line shows them after its `--`: kernel frames
    /// leaf→root, `-`, user frames leaf→root, then the name.
    pub frames: Vec<String>,
    /// Nanoseconds of the segment this level explains (inside the window).
    pub ns: u64,
    /// Of `ns`: the level's own time (no run-queue or on-CPU breakdown).
    pub own_ns: u64,
    /// Of `ns`: the time its waker waited for a CPU, by holder (`[run queue];holder`).
    pub runq: Vec<Share>,
    /// Of `ns`: the time its waker ran, by its samples (`[on cpu];frames`, or
    /// `[on cpu: no sample]`).
    pub oncpu: Vec<Share>,
    /// The level it hangs under (0 = the blocked thread, k = `levels[k - 1]`):
    /// `index` for a plain chain, a waker's level for its earlier waits.
    pub parent: u32,
    /// A waker, `[earlier wait]` (its children explain it) or `[blocked: not followed]`.
    pub kind: crate::LevelKind,
}

/// Why a part of the window has no known state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// Off CPU since before the trace began: the cause was not recorded.
    BeforeTrace,
    /// The thread did not exist yet (created later in the trace).
    NotCreated,
    /// The thread had exited.
    Exited,
    /// The thread's switches contradict each other here: a switch is missing from the
    /// trace (lost events, or a switch the tracer did not see).
    SwitchMissing,
}

impl Unknown {
    /// The frame shown for it.
    pub fn label(self) -> &'static str {
        match self {
            Unknown::BeforeTrace => "[off cpu since before the trace]",
            Unknown::NotCreated => "[not yet created]",
            Unknown::Exited => "[exited]",
            Unknown::SwitchMissing => "[switch missing from the trace]",
        }
    }
}

/// A blocked segment: the thread asleep, behind the chain of the waking that ended it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// `prev_state` at switch-out (S = 1, D = 2, ...).
    pub state: u32,
    /// The thread's off-CPU frames: user root→leaf, `-`, kernel root→leaf.
    pub stack: Vec<String>,
    /// The chain, first waker first (empty: no waking seen, see `note`).
    pub levels: Vec<Level>,
    /// The chain was cut by the depth limit.
    pub truncated: bool,
    /// Lost events fell inside the wait: the chain may be incomplete.
    pub lost: bool,
    /// Without a chain: `[waker unknown]`, or `[still blocked at trace end]`.
    pub note: Option<&'static str>,
}

/// What the thread was doing in a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// On a CPU. `stacks`: the segment's time split in proportion to the thread's samples
    /// in it (`[on cpu: no sample]` when none; empty when the trace took no samples).
    Running {
        /// The split.
        stacks: Vec<Share>,
    },
    /// Waiting for a CPU: woken and not yet switched in, or preempted.
    Runnable {
        /// True for a preemption (switched out runnable), false after a waking.
        preempted: bool,
        /// Who held the CPU the thread was then switched in on: one frame each, the
        /// holder's comm, `[idle]` or `[unknown]`.
        behind: Vec<Share>,
    },
    /// Blocked, behind the chain of the waking that ended the wait.
    Blocked(Blocked),
    /// No state known (see [`Unknown`]).
    Unknown(Unknown),
}

impl SegmentKind {
    /// `running`, `runnable`, `blocked` or `unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            SegmentKind::Running { .. } => "running",
            SegmentKind::Runnable { .. } => "runnable",
            SegmentKind::Blocked(_) => "blocked",
            SegmentKind::Unknown(_) => "unknown",
        }
    }
}

/// One segment of the timeline, `[start_ns, end_ns)` on the trace clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Start (inside the window).
    pub start_ns: u64,
    /// End (inside the window).
    pub end_ns: u64,
    /// The segment's whole extent when the window cut it (`(start, end)`, the end `None`
    /// when the trace ended first).
    pub cut_from: Option<(u64, Option<u64>)>,
    /// What the thread did.
    pub kind: SegmentKind,
}

impl Segment {
    /// Length in ns.
    pub fn ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// Counters: what the critical path could not place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CritPathStats {
    /// The thread's samples shown (inside its running segments).
    pub samples: u64,
    /// Its other samples inside the window: taken while its switches say it was off CPU
    /// (lost events), not shown.
    pub samples_off_cpu: u64,
    /// Switches of the thread that contradict its state (lost events): the time
    /// until the next switch is `[lost events]`.
    pub inconsistent_switches: u64,
    /// Off-CPU intervals the engine gave no record for (shown as `[waker unknown]`).
    pub unmatched_waits: u64,
    /// Segments cut by the window (their chains scaled, see docs/REPORTS.md).
    pub cut_segments: u64,
    /// Events lost in the whole trace (lost markers and recorder counts).
    pub lost_events: u64,
}

/// A thread's critical path over a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CriticalPath {
    /// The thread.
    pub tid: Tid,
    /// Its process (0 when unknown).
    pub tgid: Tid,
    /// Its name (the last one seen in the window).
    pub comm: String,
    /// Window start (trace clock, ns).
    pub start_ns: u64,
    /// Window end.
    pub end_ns: u64,
    /// The trace's start (relative times count from here).
    pub trace_start_ns: u64,
    /// CPU time one sample stands for; `None` when the trace took no samples.
    pub period_ns: Option<u64>,
    /// The segments, in time order, covering the window exactly.
    pub segments: Vec<Segment>,
    /// What could not be placed.
    pub stats: CritPathStats,
}

impl CriticalPath {
    /// Window length.
    pub fn wall_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// Nanoseconds per kind: (running, runnable, blocked, unknown); they add up to
    /// [`Self::wall_ns`].
    pub fn totals(&self) -> [u64; 4] {
        let mut t = [0u64; 4];
        for s in &self.segments {
            t[kind_index(&s.kind)] += s.ns();
        }
        t
    }

    /// The thread's running time in the window split by all its samples in the window
    /// (largest remainder; `[on cpu: no sample]` only when it has none): at 49 Hz most
    /// short running segments hold no sample, so the window's samples together estimate
    /// where its running time went better than each segment's own. Empty when the trace
    /// took no samples.
    pub fn running_profile(&self) -> Vec<Share> {
        let total = self.totals()[0];
        let mut shares: Vec<Share> = Vec::new();
        for s in &self.segments {
            if let SegmentKind::Running { stacks } = &s.kind {
                for sh in stacks.iter().filter(|x| x.samples > 0) {
                    match shares.iter_mut().find(|x| x.frames == sh.frames) {
                        Some(x) => x.samples += sh.samples,
                        None => shares.push(Share {
                            frames: sh.frames.clone(),
                            samples: sh.samples,
                            ns: 0,
                        }),
                    }
                }
            }
        }
        if self.period_ns.is_none() || total == 0 {
            return Vec::new();
        }
        if shares.is_empty() {
            return vec![Share {
                frames: vec![frames::ONCPU_NO_SAMPLE.to_string()],
                samples: 0,
                ns: total,
            }];
        }
        let w: Vec<u64> = shares.iter().map(|x| x.samples).collect();
        for (x, ns) in shares.iter_mut().zip(apportion(total, &w)) {
            x.ns = ns;
        }
        shares
    }

    /// Folded lines (`comm;[running];frames`, `comm;[runnable];behind HOLDER`,
    /// `comm;[blocked];stack;--;chain...`, `comm;[unknown reason]`) with their weights in
    /// ns, aggregated; the weights add up to the window's wall time exactly. Running time
    /// is split as [`Self::running_profile`] says.
    pub fn folded_ns(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        let mut ix: HashMap<String, usize> = HashMap::new();
        let mut add = |line: String, ns: u64| {
            if ns == 0 {
                return;
            }
            match ix.get(&line) {
                Some(&i) => out[i].1 += ns,
                None => {
                    ix.insert(line.clone(), out.len());
                    out.push((line, ns));
                }
            }
        };
        let comm = &self.comm;
        // Running time first, split by the window's samples (see `running_profile`).
        let profile = self.running_profile();
        if profile.is_empty() {
            add(format!("{comm};[running]"), self.totals()[0]);
        }
        for sh in &profile {
            add(format!("{comm};[running];{}", sh.frames.join(";")), sh.ns);
        }
        for s in &self.segments {
            match &s.kind {
                SegmentKind::Running { .. } => {}
                SegmentKind::Runnable { behind, .. } => {
                    for sh in behind {
                        add(
                            format!("{comm};[runnable];behind {}", sh.frames.join(";")),
                            sh.ns,
                        );
                    }
                }
                SegmentKind::Blocked(b) => {
                    let lost = if b.lost { ";[lost events]" } else { "" };
                    let mut prefix = format!("{comm};[blocked]");
                    for f in &b.stack {
                        prefix.push(';');
                        prefix.push_str(f);
                    }
                    if let Some(n) = b.note {
                        add(format!("{prefix};{n}{lost}"), s.ns());
                        continue;
                    }
                    for (k, l) in b.levels.iter().enumerate() {
                        prefix.push_str(";--;");
                        prefix.push_str(&l.frames.join(";"));
                        let mark = if b.truncated && k + 1 == b.levels.len() {
                            ";[truncated]"
                        } else {
                            ""
                        };
                        add(format!("{prefix}{mark}{lost}"), l.own_ns);
                        for sh in l.runq.iter().chain(&l.oncpu) {
                            add(format!("{prefix};--;{}{lost}", sh.frames.join(";")), sh.ns);
                        }
                    }
                }
                SegmentKind::Unknown(u) => add(format!("{comm};{}", u.label()), s.ns()),
            }
        }
        out
    }
}

fn kind_index(k: &SegmentKind) -> usize {
    match k {
        SegmentKind::Running { .. } => 0,
        SegmentKind::Runnable { .. } => 1,
        SegmentKind::Blocked(_) => 2,
        SegmentKind::Unknown(_) => 3,
    }
}

/// A stretch of the thread's timeline as its own events give it.
#[derive(Clone, Copy, Debug)]
enum Piece {
    Running(u64, u64),
    /// Off CPU from a switch-out (or creation) to a switch-in; `None`: still off at the end.
    Off(u64, Option<u64>),
    Unknown(u64, u64, Unknown),
}

/// The scan of the thread's own events.
struct Scan<'t> {
    tid: Tid,
    tl: Timeline,
    tables: &'t Tables,
    pieces: Vec<Piece>,
    /// (ts, kernel stack, user stack), the thread's samples inside the window.
    samples: Vec<(u64, StackId, StackId)>,
    samples_off_cpu: u64,
    trace_start: u64,
    window: Option<(u64, u64)>,
    /// A later thread took the tid while the one the window covers was alive or gone:
    /// the rest of the trace belongs to other threads.
    ended: bool,
}

impl<'t> Scan<'t> {
    fn new(tid: Tid, tables: &'t Tables, trace_start: u64, window: Option<(u64, u64)>) -> Self {
        Self::resumed(tid, Timeline::new(tid, tables), tables, trace_start, window)
    }

    /// A scan that goes on from `tl` (its state at a checkpoint before the window).
    fn resumed(
        tid: Tid,
        tl: Timeline,
        tables: &'t Tables,
        trace_start: u64,
        window: Option<(u64, u64)>,
    ) -> Self {
        Scan {
            tid,
            tl,
            tables,
            pieces: Vec::new(),
            samples: Vec::new(),
            samples_off_cpu: 0,
            trace_start,
            ended: false,
            window,
        }
    }

    /// The thread's identity now: its own `comm` and fork events over the task table.
    fn identity(&self) -> ThreadIdentity {
        self.tl
            .identity
            .or_else(|| self.table_identity(self.tid))
            .unwrap_or_else(|| ThreadIdentity::unknown(self.tid))
    }

    fn table_identity(&self, tid: Tid) -> Option<ThreadIdentity> {
        self.tables.tasks.get(&tid).map(|t| ThreadIdentity {
            comm: t.comm,
            tgid: t.tgid,
            kernel_thread: t.kernel_thread,
        })
    }

    /// [`chainrec_format::Threads::apply`] for the thread's own `comm` and fork events, with a parent's
    /// identity from the task table (the scan follows no other thread's renames).
    fn apply_identity(&mut self, e: &Event) {
        match e {
            Event::Comm(c) => {
                let kernel_thread = self
                    .tl
                    .identity
                    .or_else(|| self.table_identity(c.tid))
                    .is_some_and(|t| t.kernel_thread);
                self.tl.identity = Some(ThreadIdentity {
                    comm: c.comm,
                    tgid: c.tgid,
                    kernel_thread,
                });
            }
            Event::WakeupNew(w) => {
                let mut child = self
                    .tl
                    .identity
                    .or_else(|| self.table_identity(w.child_tid))
                    .or_else(|| self.table_identity(w.parent_tid))
                    .unwrap_or_else(|| ThreadIdentity::unknown(w.child_tid));
                child.tgid = w.child_tgid;
                self.tl.identity = Some(child);
            }
            _ => {}
        }
    }

    /// The thread's life in the trace (the window when none is given): from its creation
    /// (or the trace start) to its exit (or the trace end).
    fn lifetime(&self, trace_end: u64) -> (u64, u64) {
        let end = self
            .pieces
            .iter()
            .rev()
            .find_map(|p| match p {
                Piece::Unknown(a, _, Unknown::Exited) => Some(*a),
                _ => None,
            })
            .unwrap_or(trace_end);
        (self.tl.created.unwrap_or(self.trace_start), end)
    }

    /// A new thread takes the tid at `ts` (a fork seen, or a switch-in after the old
    /// thread's end). When the old thread lived into the window (its final switch-out, or
    /// its last switch when its end is not in the trace, after the window's start), or the
    /// new one starts after the window, the timeline stays the old thread's: `[exited]` from there, and nothing of the new one
    /// is read. Otherwise (and without a window: the last thread with the tid) the timeline
    /// starts again at `ts`. Returns true when it does.
    fn new_life(&mut self, ts: u64) -> bool {
        let old_end = match self.tl.st {
            St::Off(a) | St::Gone(a) | St::On(a) => Some(a),
            St::Unseen => None,
        };
        if let (Some((w0, w1)), Some(end)) = (self.window, old_end) {
            if end > w0 || ts >= w1 {
                self.tl.st = St::Gone(end);
                self.ended = true;
                return false;
            }
        }
        self.pieces.clear();
        self.samples.clear();
        self.samples_off_cpu = 0;
        self.tl.inconsistent = 0;
        self.tl.created = Some(ts);
        self.tl.exiting = false;
        self.tl.woken = false;
        self.keep(Piece::Unknown(self.trace_start, ts, Unknown::NotCreated));
        true
    }

    fn keep(&mut self, p: Piece) {
        let (a, b) = match p {
            Piece::Running(a, b) | Piece::Unknown(a, b, _) => (a, Some(b)),
            Piece::Off(a, b) => (a, b),
        };
        if b.is_some_and(|b| b <= a) {
            return;
        }
        if let Some((w0, w1)) = self.window {
            if a >= w1 || b.is_some_and(|b| b <= w0) {
                return;
            }
        }
        self.pieces.push(p);
    }

    fn event(&mut self, e: &Event) {
        let t = self.tid;
        if self.ended {
            return;
        }
        match e {
            Event::Switch(s) if s.prev_tid == t => {
                self.tl.seen = true;
                match self.tl.st {
                    St::On(a) => self.keep(Piece::Running(a, s.ts)),
                    St::Unseen => self.keep(Piece::Running(self.trace_start, s.ts)),
                    St::Off(a) | St::Gone(a) => {
                        self.tl.inconsistent += 1;
                        self.keep(Piece::Unknown(a, s.ts, Unknown::SwitchMissing));
                    }
                }
                // The final switch-out (state dead) ends the thread, not its exit event:
                // an exiting thread can still be preempted or block before it.
                self.tl.st = if state_is_dead(s.prev_state) {
                    St::Gone(s.ts)
                } else {
                    St::Off(s.ts)
                };
                self.tl.woken = false;
                self.tl.slept = s.prev_state != STATE_RUNNABLE;
            }
            Event::Switch(s) if s.next_tid == t => {
                self.tl.seen = true;
                // Another thread under the tid, its creation not in the trace: after the
                // old one's end, or after it exited and blocked with no waking since.
                let exited_blocked = matches!(self.tl.st, St::Off(_))
                    && self.tl.exiting
                    && self.tl.slept
                    && !self.tl.woken;
                if matches!(self.tl.st, St::Gone(_)) || exited_blocked {
                    if self.new_life(s.ts) {
                        self.tl.st = St::On(s.ts);
                    }
                    return;
                }
                match self.tl.st {
                    St::Off(a) => self.keep(Piece::Off(a, Some(s.ts))),
                    St::Unseen => {
                        self.keep(Piece::Unknown(self.trace_start, s.ts, Unknown::BeforeTrace))
                    }
                    St::On(_) => {
                        self.tl.inconsistent += 1;
                        return;
                    }
                    St::Gone(_) => {}
                }
                self.tl.st = St::On(s.ts);
            }
            Event::WakeupNew(n) if n.child_tid == t => {
                self.apply_identity(e);
                self.tl.seen = true;
                match self.tl.st {
                    St::Unseen => {
                        self.keep(Piece::Unknown(self.trace_start, n.ts, Unknown::NotCreated));
                        self.tl.created = Some(n.ts);
                        self.tl.st = St::Off(n.ts);
                    }
                    // A new thread reuses the tid: runnable from its creation.
                    _ => {
                        if self.new_life(n.ts) {
                            self.tl.st = St::Off(n.ts);
                        }
                    }
                }
            }
            Event::Exit(x) if x.tid == t => {
                self.tl.seen = true;
                self.tl.exiting = true;
            }
            Event::Comm(c) if c.tid == t => {
                self.tl.seen = true;
                self.apply_identity(e);
            }
            Event::Waking(w) if w.waker_tid == t && w.context.is_task() => {
                self.tl.seen = true;
                self.running_at(w.ts);
            }
            Event::Waking(w) if w.target_tid == t => {
                self.tl.seen = true;
                self.tl.woken = true;
            }
            Event::Waking(w) if w.waker_tid == t => self.tl.seen = true,
            Event::Sample(x) if x.tid == t => {
                self.tl.seen = true;
                self.running_at(x.ts);
                if self.window.is_some_and(|(a, b)| x.ts < a || x.ts >= b) {
                    return;
                }
                if matches!(self.tl.st, St::Gone(_)) {
                    self.samples_off_cpu += 1;
                } else {
                    self.samples.push((x.ts, x.kstack, x.ustack));
                }
            }
            _ => {}
        }
    }

    /// The thread acted on a CPU at `ts` (a waking in its own context, a sample): if its
    /// switches say it was off CPU, its switch-in is missing from the trace. The time since
    /// its switch-out is unknown, and it runs from here.
    fn running_at(&mut self, ts: u64) {
        if let St::Off(a) = self.tl.st {
            self.tl.inconsistent += 1;
            self.keep(Piece::Unknown(a, ts, Unknown::SwitchMissing));
            self.tl.st = St::On(ts);
        }
    }

    /// Close the timeline at `end`.
    fn close(&mut self, end: u64) {
        match self.tl.st {
            St::On(a) => self.keep(Piece::Running(a, end)),
            St::Off(a) => self.keep(Piece::Off(a, None)),
            St::Gone(a) => self.keep(Piece::Unknown(a, end, Unknown::Exited)),
            St::Unseen => self.keep(Piece::Unknown(self.trace_start, end, Unknown::BeforeTrace)),
        }
    }

    /// Nothing later can change the window `(w0, w1)`'s timeline, the trace read up to
    /// `now`: a switch-out after `w1` (every wait overlapping it is closed and its record
    /// emitted), or gone after `w0` (a new thread under the tid is not read: see
    /// `new_life`), or gone before it with `now` past `w1` (a thread the tid gets later
    /// starts after the window). Gone before `w0` and earlier than that, a new thread may
    /// still take the tid inside the window.
    fn done_by(&self, (w0, w1): (u64, u64), now: u64) -> bool {
        match self.tl.st {
            St::Off(a) => a > w1,
            St::Gone(a) => a > w0 || now >= w1,
            _ => false,
        }
    }
}

/// The [`Timeline`] of every thread, kept by the checkpoint pass so that a critical path
/// resumes from a checkpoint instead of scanning from the trace start: each checkpoint
/// holds the timelines that changed since the one before ([`Timelines::changed`]).
///
/// Exact: before a window's start a scan keeps no piece and no sample, and no rule of its
/// state looks at the window (a new life before the window always starts the timeline
/// again), so the state at a checkpoint before the window is the same whatever the
/// window; each thread's timeline here is the scan of that thread alone.
pub(crate) struct Timelines<'t> {
    tables: &'t Tables,
    trace_start: u64,
    /// Each thread's timeline and the checkpoint generation it last changed in.
    threads: FxHashMap<Tid, (Timeline, u32)>,
    generation: u32,
}

/// A window no event reaches: a scan with it keeps nothing.
const NO_WINDOW_YET: Option<(u64, u64)> = Some((u64::MAX, u64::MAX));

impl<'t> Timelines<'t> {
    pub(crate) fn new(tables: &'t Tables, trace_start: u64) -> Self {
        Timelines {
            tables,
            trace_start,
            threads: FxHashMap::default(),
            generation: 0,
        }
    }

    /// Follow the events of one chunk, in order.
    pub(crate) fn events(&mut self, evs: &[Event]) {
        for e in evs {
            let (a, b) = match e {
                Event::Switch(s) => (s.prev_tid, Some(s.next_tid)),
                Event::Waking(w) => (w.waker_tid, Some(w.target_tid)),
                Event::WakeupNew(n) => (n.child_tid, None),
                Event::Exit(x) => (x.tid, None),
                Event::Comm(c) => (c.tid, None),
                Event::Sample(x) => (x.tid, None),
                _ => continue,
            };
            self.event(a, e);
            if let Some(b) = b.filter(|&b| b != a) {
                self.event(b, e);
            }
        }
    }

    fn event(&mut self, tid: Tid, e: &Event) {
        let (tables, generation) = (self.tables, self.generation);
        let slot = self
            .threads
            .entry(tid)
            .or_insert_with(|| (Timeline::new(tid, tables), generation));
        let mut scan = Scan::resumed(tid, slot.0, tables, self.trace_start, NO_WINDOW_YET);
        scan.event(e);
        *slot = (scan.tl, generation);
    }

    /// The timelines changed since the last call (by tid), for a checkpoint taken now.
    pub(crate) fn changed(&mut self) -> Vec<(Tid, Timeline)> {
        let mut out: Vec<(Tid, Timeline)> = self
            .threads
            .iter()
            .filter(|(_, (_, g))| *g == self.generation)
            .map(|(&t, &(tl, _))| (t, tl))
            .collect();
        out.sort_unstable_by_key(|&(t, _)| t);
        self.generation += 1;
        out
    }
}

/// Why the read stopped.
enum Stop {
    Failed(ChainError),
    Done,
    /// At a checkpoint the run goes on from a later one (`Skipping`).
    Skip,
}

impl From<FormatError> for Stop {
    fn from(e: FormatError) -> Self {
        Stop::Failed(e.into())
    }
}

/// The analysis window `window` checked against the trace's span and clipped to it.
fn clip_window(
    window: Option<(u64, u64)>,
    trace_start: u64,
    trace_end: u64,
) -> Result<Option<(u64, u64)>, ChainError> {
    if let Some((a, b)) = window {
        if a >= b {
            return Err(ChainError::EmptyWindow);
        }
        if b <= trace_start || a >= trace_end {
            return Err(ChainError::WindowOutside {
                span_s: (trace_end - trace_start) as f64 / 1e9,
            });
        }
    }
    Ok(window.map(|(a, b)| (a.max(trace_start), b.min(trace_end))))
}

/// The engine run critical paths read: time-bounded chains of the threads `tids`, with
/// run-queue attribution and no dedup (every wait of each thread is a record, the same
/// whichever other threads the run selects).
fn engine_config(tids: &[Tid], max_depth: usize) -> Config {
    Config {
        mode: Mode::Bounded,
        max_depth,
        dedup: false,
        filter: Filter {
            threads: ThreadSelector {
                tids: tids.to_vec(),
                ..ThreadSelector::default()
            },
            ..Filter::default()
        },
        runqueue: true,
        oncpu: crate::OnCpuMode::default(),
        cgroup_frames: false,
        process_frames: false,
    }
}

/// Build the critical path of `opts.tid` in the trace of `an`.
pub(crate) fn critical_path(
    an: &TraceInput<'_>,
    opts: &CritPathOptions,
    checkpoints: Option<&Checkpoints>,
    cancel: Option<&Cancel>,
) -> Result<CriticalPath, ChainError> {
    let mut paths = critical_paths(an, &[opts.tid], opts, checkpoints, cancel)?;
    Ok(paths.remove(0))
}

/// Build the critical paths of the threads `tids` (in that order; `opts.tid` is not used)
/// with `opts`'s window, depth and decoding, in one engine run: each equals what
/// [`critical_path`] gives for that thread alone. The first thread that fails is the
/// error. With `checkpoints` (and a window) the run resumes from the latest one before
/// the window, with the same result.
pub(crate) fn critical_paths(
    an: &TraceInput<'_>,
    tids: &[Tid],
    opts: &CritPathOptions,
    checkpoints: Option<&Checkpoints>,
    cancel: Option<&Cancel>,
) -> Result<Vec<CriticalPath>, ChainError> {
    let (trace_start, trace_end) = (an.start_ns(), an.end_ns().max(an.start_ns()));
    let window = clip_window(opts.window, trace_start, trace_end)?;
    let cfg = engine_config(tids, opts.max_depth);
    let chunks = an.reader().chunks().len();
    let key = SetupKey {
        mode: cfg.mode,
        max_depth: cfg.max_depth,
        dedup: cfg.dedup,
        runqueue: cfg.runqueue,
        oncpu: cfg.oncpu,
        cgroup_frames: cfg.cgroup_frames,
        process_frames: cfg.process_frames,
    };
    // With a window, resume from the latest checkpoint before it that serves this setup
    // (dedup aside: `SetupKey::serves`, `Engine::resume`); the thread filter selects nothing
    // before the window either (the sink drops waits that end before it).
    let resumed = match (window, checkpoints) {
        (Some((w0, _)), Some(c)) => c.latest_before(key, w0, chunks).map(|(i, p)| (c, i, p)),
        _ => None,
    };
    // The checkpoints a run may also skip ahead to (see `Skipping`): with a window only, as
    // resuming.
    let points = match (window, checkpoints) {
        (Some(_), Some(c)) => c.points_for(key),
        _ => Vec::new(),
    };
    let mut pos = resumed.as_ref().map_or(0, |(_, _, p)| p.chunk);
    let mut engine = match &resumed {
        Some((_, _, p)) => p
            .engine()
            .resume(an.tables(), cfg.filter.clone(), false, false, false),
        None => an.engine(cfg.clone()),
    };
    // The same thread asked twice is read once; its copies are made at the end.
    let slot: HashMap<Tid, usize> = tids
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &t)| (t, i))
        .collect();
    let mut scans: Vec<Scan> = tids
        .iter()
        .map(|&tid| match &resumed {
            Some((c, i, _)) => {
                let tl = c
                    .timeline(*i, tid)
                    .unwrap_or_else(|| Timeline::new(tid, an.tables()));
                Scan::resumed(tid, tl, an.tables(), trace_start, window)
            }
            None => Scan::new(tid, an.tables(), trace_start, window),
        })
        .collect();
    // Each thread's wait records inside the window, by switch-out time, with the run
    // (engine) whose node table they name nodes of.
    let mut records: Vec<HashMap<u64, (WaitRecord, usize)>> = vec![HashMap::new(); tids.len()];
    // Lost events the engine had counted when a thread's reading ended (with a window: its
    // scan past the end for good), so that each path reads as its run alone would.
    let ended: Vec<Cell<Option<u64>>> = vec![Cell::new(None); tids.len()];
    let mut open = slot.len();
    // Engines of the runs before the current one, kept while records name their nodes.
    let mut earlier: Vec<Option<Engine<'_>>> = Vec::new();
    let mut skipped = 0u64;
    let skip = Skipping {
        points: &points,
        tids: &slot,
    };
    let finished = loop {
        if let Some(k) = skip.skip_to(pos, &scans, &ended) {
            // Nothing of the threads happens before checkpoint `k`'s chunk: go on from
            // its engine (the whole run's state there), keeping this run's node table only
            // if a record names it.
            let run = earlier.len();
            let p = &points[k];
            let next = p
                .engine()
                .resume(an.tables(), cfg.filter.clone(), false, false, false);
            let old = std::mem::replace(&mut engine, next);
            let named = records.iter().flat_map(|r| r.values()).any(|r| r.1 == run);
            earlier.push(named.then_some(old));
            skipped += 1;
            pos = p.chunk;
            continue;
        }
        let run = earlier.len();
        let mut sink = |w: &WaitRecord, _: &NodeTable| {
            if window.is_some_and(|(a, b)| {
                w.switch_out_ns >= b || w.switch_in_ns.is_some_and(|i| i <= a)
            }) {
                return;
            }
            if let Some(&i) = slot.get(&w.tid) {
                if ended[i].get().is_none() {
                    records[i].insert(w.switch_out_ns, (w.clone(), run));
                }
            }
        };
        let read = an
            .reader()
            .for_each_chunk::<Stop>(pos..chunks, opts.parallel, |evs| {
                engine.process(evs, &mut sink);
                pos += 1;
                let now = evs.iter().map(Event::ts).max().unwrap_or(0);
                for &i in slot.values() {
                    if ended[i].get().is_some() {
                        continue;
                    }
                    let scan = &mut scans[i];
                    for e in evs {
                        scan.event(e);
                    }
                    if window.is_some_and(|w| scan.done_by(w, now)) {
                        ended[i].set(Some(engine.stats().lost_events));
                        open -= 1;
                    }
                }
                if let Err(e) = Cancel::check(cancel) {
                    return Err(Stop::Failed(e));
                }
                if open == 0 {
                    return Err(Stop::Done);
                }
                match skip.skip_to(pos, &scans, &ended) {
                    Some(_) => Err(Stop::Skip),
                    None => Ok(()),
                }
            });
        match read {
            Ok(()) => break Some(engine.finish(&mut sink).lost_events),
            Err(Stop::Done) => break None,
            Err(Stop::Failed(e)) => return Err(e),
            Err(Stop::Skip) => {}
        }
    };
    if let Some(c) = checkpoints.filter(|_| skipped > 0) {
        c.count_skipped(skipped);
    }
    let lost_at_finish = finished.unwrap_or_else(|| engine.stats().lost_events);
    let nodes: Vec<&NodeTable> = earlier
        .iter()
        .map(|e| e.as_ref().map_or(engine.nodes(), Engine::nodes))
        .chain([engine.nodes()])
        .collect();
    let mut paths: Vec<CriticalPath> = Vec::with_capacity(tids.len());
    for (i, (scan, recs)) in scans.iter_mut().zip(&records).enumerate() {
        let first = slot[&tids[i]];
        if first != i {
            let copy = paths[first].clone();
            paths.push(copy);
            continue;
        }
        let lost = ended[i].get().unwrap_or(lost_at_finish);
        paths.push(build(an, &nodes, scan, recs, window, trace_end, lost)?);
    }
    Ok(paths)
}

/// Where a critical path's run may skip ahead (counted in `Checkpoints::skipped` per
/// jump). Between two checkpoints where none of its
/// threads has an event (`Point::touched`), its scans read nothing, and no wait of theirs
/// ends, so the engine emits none of their records there: the run may go on from the
/// later checkpoint's engine (the whole run's state at that chunk: `crate::checkpoint`)
/// with the same result. Not past a thread gone before the window (its scan ends by the
/// time read, `Scan::done_by`), and never past the last checkpoint: the trace's end
/// (`Engine::finish`) is read by the engine that read up to it.
struct Skipping<'a> {
    points: &'a [std::sync::Arc<crate::checkpoint::Point>],
    tids: &'a HashMap<Tid, usize>,
}

impl Skipping<'_> {
    /// At chunk `pos`, the checkpoint to go on from when the run need not read the
    /// chunks up to it (`None`: it reads on).
    fn skip_to(&self, pos: usize, scans: &[Scan], ended: &[Cell<Option<u64>>]) -> Option<usize> {
        // Interval `m` is the chunks from checkpoint `m - 1` (or the first) to checkpoint
        // `m`; point `m` knows whose timelines changed in it.
        let m = match pos {
            0 => 0,
            _ => self.points.iter().position(|p| p.chunk == pos)? + 1,
        };
        let open: Vec<&Scan> = self
            .tids
            .values()
            .filter(|&&i| ended[i].get().is_none())
            .map(|&i| &scans[i])
            .collect();
        if open.iter().any(|s| matches!(s.tl.st, St::Gone(_))) {
            return None;
        }
        let needed = |j: usize| {
            self.points
                .get(j)
                .is_none_or(|p| open.iter().any(|s| p.touched(s.tid)))
        };
        let j = (m..=self.points.len()).find(|&j| needed(j))?;
        (j > m).then(|| j - 1)
    }
}

/// The critical path of one thread from its scan and records (each with the index in
/// `nodes` of the node table it names; `lost`: the engine's count of lost events when its
/// reading ended).
fn build(
    an: &TraceInput<'_>,
    nodes: &[&NodeTable],
    scan: &mut Scan,
    records: &HashMap<u64, (WaitRecord, usize)>,
    window: Option<(u64, u64)>,
    trace_end: u64,
    lost: u64,
) -> Result<CriticalPath, ChainError> {
    let trace_start = an.start_ns();
    let tid = scan.tid;
    if !scan.tl.seen {
        return Err(ChainError::NoSuchThread(tid));
    }
    scan.close(trace_end);
    let (w0, w1) = window.unwrap_or_else(|| scan.lifetime(trace_end));
    if w1 <= w0 {
        return Err(ChainError::NoTime(tid));
    }
    let ThreadIdentity { comm, tgid, .. } = scan.identity();
    let lost_events = lost + an.meta().lost.events();
    let mut b = Builder {
        tables: an.tables(),
        meta: an.meta(),
        // The last run's; each record's own is set before it is read.
        nodes: nodes[nodes.len() - 1],
        r: FrameNamer::new(an.tables(), an.meta().stack_threshold_ns),
        w: (w0, w1),
        sampled: an.meta().sampling().is_some(),
        segs: Vec::new(),
        st: CritPathStats {
            samples_off_cpu: scan.samples_off_cpu,
            inconsistent_switches: scan.tl.inconsistent,
            lost_events,
            ..CritPathStats::default()
        },
    };
    let mut smp = scan.samples.as_slice();
    for p in std::mem::take(&mut scan.pieces) {
        match p {
            Piece::Running(a, e) => b.running(a, e, &mut smp),
            Piece::Unknown(a, e, why) => b.push(a, Some(e), SegmentKind::Unknown(why), None),
            Piece::Off(a, e) => match records.get(&a) {
                Some((rec, run)) => {
                    b.nodes = nodes[*run];
                    b.off(rec, e)
                }
                None => b.off_without_record(a, e),
            },
        }
    }
    b.fill_gaps();
    // Samples inside the window that no running segment took: taken where the switches
    // say the thread was not running (lost events), or in an unknown part.
    let inside = scan
        .samples
        .iter()
        .filter(|x| x.0 >= w0 && x.0 < w1)
        .count() as u64;
    b.st.samples_off_cpu += inside - b.st.samples;
    Ok(CriticalPath {
        tid,
        tgid,
        comm: comm.as_str().into_owned(),
        start_ns: w0,
        end_ns: w1,
        trace_start_ns: trace_start,
        period_ns: an.meta().sampling().map(|s| s.period_ns).filter(|&p| p > 0),
        segments: b.segs,
        stats: b.st,
    })
}

/// Turns pieces and records into resolved segments inside the window.
struct Builder<'a> {
    tables: &'a Tables,
    meta: &'a RecordingMeta,
    nodes: &'a NodeTable,
    r: FrameNamer<'a>,
    w: (u64, u64),
    sampled: bool,
    segs: Vec<Segment>,
    st: CritPathStats,
}

impl Builder<'_> {
    /// A blocked piece from `a` to `e` with no wait record: its waker is unknown, or it is
    /// still blocked at the trace end.
    fn off_without_record(&mut self, a: u64, e: Option<u64>) {
        self.st.unmatched_waits += u64::from(e.is_some());
        let note = if e.is_none() {
            "[still blocked at trace end]"
        } else {
            "[waker unknown]"
        };
        let kind = SegmentKind::Blocked(Blocked {
            state: 0,
            stack: Vec::new(),
            levels: Vec::new(),
            truncated: false,
            lost: false,
            note: Some(note),
        });
        self.push(a, e, kind, None);
    }

    /// Clip `[a, e)` (`e` None: to the end) to the window: the part inside, if any.
    fn clip(&self, a: u64, e: Option<u64>) -> Option<(u64, u64)> {
        let (x, y) = (a.max(self.w.0), e.unwrap_or(u64::MAX).min(self.w.1));
        (y > x).then_some((x, y))
    }

    /// Add a segment over `[a, e)` clipped to the window; `kind` is built for the clipped
    /// part already (or needs no clipping).
    fn push(&mut self, a: u64, e: Option<u64>, kind: SegmentKind, clip: Option<(u64, u64)>) {
        let Some((x, y)) = clip.or_else(|| self.clip(a, e)) else {
            return;
        };
        let cut = (x != a || Some(y) != e).then_some((a, e));
        self.st.cut_segments += u64::from(cut.is_some());
        self.segs.push(Segment {
            start_ns: x,
            end_ns: y,
            cut_from: cut,
            kind,
        });
    }

    fn running(&mut self, a: u64, e: u64, smp: &mut &[(u64, StackId, StackId)]) {
        let Some((x, y)) = self.clip(a, Some(e)) else {
            return;
        };
        // Samples are in time order; those before this segment belong to none (taken in
        // a part of the window the switches say was not running: counted as off CPU).
        let first = smp.partition_point(|s| s.0 < x);
        let n = smp[first..].partition_point(|s| s.0 < y);
        let mine = &smp[first..first + n];
        *smp = &smp[first + n..];
        self.st.samples += n as u64;
        let stacks = if !self.sampled {
            Vec::new()
        } else if mine.is_empty() {
            vec![Share {
                frames: vec![frames::ONCPU_NO_SAMPLE.to_string()],
                samples: 0,
                ns: y - x,
            }]
        } else {
            // By rendered frames, in order of first sample.
            let mut shares: Vec<Share> = Vec::new();
            for &(_, k, u) in mine {
                let f = frames::sample_frames(self.tables, self.meta, k, u);
                match shares.iter_mut().find(|s| s.frames == f) {
                    Some(s) => s.samples += 1,
                    None => shares.push(Share {
                        frames: f,
                        samples: 1,
                        ns: 0,
                    }),
                }
            }
            let w: Vec<u64> = shares.iter().map(|s| s.samples).collect();
            for (s, ns) in shares.iter_mut().zip(apportion(y - x, &w)) {
                s.ns = ns;
            }
            shares
        };
        self.push(a, Some(e), SegmentKind::Running { stacks }, Some((x, y)));
    }

    /// Shares of `ns` nodes, scaled from their total to `to` when it differs.
    fn shares(&mut self, parts: &[(NodeId, u64)], to: u64) -> Vec<Share> {
        let w: Vec<u64> = parts.iter().map(|p| p.1).collect();
        let total: u64 = w.iter().sum();
        let ns = if total == to { w } else { apportion(to, &w) };
        parts
            .iter()
            .zip(ns)
            .filter(|(_, ns)| *ns > 0)
            .map(|(&(node, _), ns)| Share {
                frames: self.frames(node),
                samples: 0,
                ns,
            })
            .collect()
    }

    /// A non-root node's frames without the level separator.
    fn frames(&mut self, node: NodeId) -> Vec<String> {
        let mut f = node_texts(&mut self.r, self.nodes, node, false);
        if f.first().is_some_and(|s| s == "--") {
            f.remove(0);
        }
        f
    }

    /// One wait of the thread: its blocked part and its runnable part.
    fn off(&mut self, rec: &WaitRecord, end: Option<u64>) {
        let a = rec.switch_out_ns;
        let runq0: Vec<(NodeId, u64)> = rec.runq_of(0).map(|p| (p.holder, p.ns)).collect();
        let runnable = |b: &mut Self, from: u64, preempted: bool| {
            let Some((x, y)) = b.clip(from, end) else {
                return;
            };
            let behind = if runq0.is_empty() {
                // No switch-in (the trace ended first): nobody to name.
                vec![Share {
                    frames: vec!["[unknown]".into()],
                    samples: 0,
                    ns: y - x,
                }]
            } else {
                // The holder alone: `[runnable];behind HOLDER` says the rest.
                let mut v = b.shares(&runq0, y - x);
                for s in &mut v {
                    s.frames.drain(..s.frames.len().saturating_sub(1));
                }
                v
            };
            b.push(
                from,
                end,
                SegmentKind::Runnable { preempted, behind },
                Some((x, y)),
            );
        };
        if rec.preempted() {
            runnable(self, a, true);
            return;
        }
        let mut root = node_texts(&mut self.r, self.nodes, rec.node, true);
        root.remove(0);
        let wake = match rec.wake_ns {
            Some(w) if !rec.hops.is_empty() => w,
            _ => {
                let kind = SegmentKind::Blocked(Blocked {
                    state: rec.state,
                    stack: root,
                    levels: Vec::new(),
                    truncated: false,
                    lost: rec.lost,
                    note: Some("[waker unknown]"),
                });
                self.push(a, end, kind, None);
                return;
            }
        };
        if let Some((x, y)) = self.clip(a, Some(wake)) {
            // Each level's time inside [x, y): where its windows meet it. The windows
            // tile the blocked part; should they not (a bug), scale the levels instead.
            let all: Vec<u64> = rec.hops.iter().map(|h| h.ns).collect();
            let mut inside: Vec<u64> = if x == a && y == wake {
                all.clone()
            } else {
                (0..rec.hops.len())
                    .map(|k| rec.level_inside(k, x, y))
                    .collect()
            };
            if inside.iter().sum::<u64>() != y - x {
                inside = apportion(y - x, &all);
            }
            let mut levels = Vec::new();
            for (k, h) in rec.hops.iter().enumerate() {
                let l = k as u32 + 1;
                let ns = inside[k];
                let runq: Vec<(NodeId, u64)> = rec.runq_of(l).map(|p| (p.holder, p.ns)).collect();
                let oncpu: Vec<(NodeId, u64)> = rec
                    .oncpu
                    .iter()
                    .filter(|p| p.level == l)
                    .map(|p| (p.node, p.ns))
                    .collect();
                let own = h.ns - runq.iter().chain(&oncpu).map(|p| p.1).sum::<u64>();
                // Scale own, run-queue and on-CPU parts together to the time inside.
                let mut w = vec![own];
                w.extend(runq.iter().chain(&oncpu).map(|p| p.1));
                let scaled = if ns == h.ns { w } else { apportion(ns, &w) };
                let rq: Vec<(NodeId, u64)> = runq
                    .iter()
                    .zip(&scaled[1..])
                    .map(|(p, &n)| (p.0, n))
                    .collect();
                let oc: Vec<(NodeId, u64)> = oncpu
                    .iter()
                    .zip(&scaled[1 + runq.len()..])
                    .map(|(p, &n)| (p.0, n))
                    .collect();
                let node = self.nodes.get(h.node);
                let name = if h.metal || h.kind != crate::LevelKind::Waker {
                    node.name().into_owned()
                } else {
                    h.waker_comm.as_str().into_owned()
                };
                let (rq_sum, oc_sum): (u64, u64) =
                    (rq.iter().map(|p| p.1).sum(), oc.iter().map(|p| p.1).sum());
                levels.push(Level {
                    name,
                    tid: h.waker_tid,
                    metal: h.metal,
                    frames: self.frames(h.node),
                    ns,
                    own_ns: scaled[0],
                    runq: self.shares(&rq, rq_sum),
                    oncpu: self.shares(&oc, oc_sum),
                    parent: h.parent,
                    kind: h.kind,
                });
            }
            let kind = SegmentKind::Blocked(Blocked {
                state: rec.state,
                stack: root,
                levels,
                truncated: rec.truncated,
                lost: rec.lost,
                note: None,
            });
            self.push(a, Some(wake), kind, Some((x, y)));
        }
        if rec.state != STATE_RUNNABLE {
            runnable(self, wake, false);
        }
    }

    /// Sort, and make the segments tile the window: what no piece covers is unknown
    /// (lost events).
    fn fill_gaps(&mut self) {
        self.segs.sort_by_key(|s| s.start_ns);
        let mut out = Vec::with_capacity(self.segs.len());
        let mut cur = self.w.0;
        for s in std::mem::take(&mut self.segs) {
            if s.start_ns > cur {
                out.push(Segment {
                    start_ns: cur,
                    end_ns: s.start_ns,
                    cut_from: None,
                    kind: SegmentKind::Unknown(Unknown::SwitchMissing),
                });
            }
            if s.end_ns <= cur {
                continue;
            }
            let mut s = s;
            if s.start_ns < cur {
                // Overlap (contradicting events): the earlier segment keeps its time, and
                // the rest of this one is unknown (its split would no longer add up).
                s.start_ns = cur;
                s.kind = SegmentKind::Unknown(Unknown::SwitchMissing);
                self.st.inconsistent_switches += 1;
            }
            cur = s.end_ns;
            out.push(s);
        }
        if cur < self.w.1 {
            out.push(Segment {
                start_ns: cur,
                end_ns: self.w.1,
                cut_from: None,
                kind: SegmentKind::Unknown(Unknown::SwitchMissing),
            });
        }
        self.segs = out;
    }
}

/// The frames of node `id` as folded text prints them (`first`: the path's first node).
fn node_texts(r: &mut FrameNamer<'_>, nodes: &NodeTable, id: NodeId, first: bool) -> Vec<String> {
    r.node(nodes, id, first)
        .frames
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}
