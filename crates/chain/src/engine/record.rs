//! The per-wait record stream: one [`WaitRecord`] per off-CPU interval, with its chain.

use crate::engine::mode::Mode;
use crate::engine::nodes::{NodeId, NodeTable};
use chainrec_format::{Comm, StackId, Tid, WakeContext, STATE_RUNNABLE};

/// Run-queue time behind one CPU holder: while a thread was runnable, `holder` (a
/// [`crate::NodeKind::RunQueue`] node: `[run queue];comm`, `[idle]` or `[unknown]`) held the
/// CPU the thread was then switched in on, for `ns` nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunqPart {
    /// Level: 0 = the waiting thread's own runnable part (waking to switch-in, or a whole
    /// preemption); k ≥ 1 = the runnable part of level k's waker (`hops[k - 1]`) inside
    /// that level's share.
    pub level: u32,
    /// Interned run-queue node of the holder.
    pub holder: NodeId,
    /// Nanoseconds.
    pub ns: u64,
}

/// What a waker did while it ran inside a level's share: a level's own on-CPU time split
/// by the waker's samples in it (docs/ENGINE.md, "What a running waker did").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnCpuPart {
    /// Level k ≥ 1 (`hops[k - 1]`, as in [`RunqPart::level`]).
    pub level: u32,
    /// Interned [`crate::NodeKind::OnCpu`] node: `[on cpu]` with the sampled stacks, or
    /// `[on cpu: no sample]`.
    pub node: NodeId,
    /// Nanoseconds: the level's on-CPU time × this stack's share of its samples.
    pub ns: u64,
}

/// What a level of a wait's wakeup DAG is (CHAINS.md, "Attribution").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LevelKind {
    /// A waking: its waker (a thread, or metal) explains part of the parent level's
    /// blocked time.
    #[default]
    Waker,
    /// `[earlier wait]`: the waker of the parent level was itself blocked inside the
    /// root's wait before the wait its chain follows; this level is that earlier wait
    /// (`kstack`/`ustack` are the thread's off-CPU stacks of it, `waker_*` the thread),
    /// and its children are the chain of the waking that ended it. Its own `ns` is 0:
    /// the time is its children's.
    EarlierWait,
    /// `[blocked: not followed]`: the parent level's waker was blocked for `ns` inside
    /// the root's wait, in waits this DAG does not follow (depth limit, unknown waker,
    /// the per-wait branch budget).
    NotFollowed,
}

/// One level of a chain: the waking that ended a blocked interval, and the time it
/// explains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HopRecord {
    /// Time of the waking.
    pub ts: u64,
    /// Waker task (for metal hops: the interrupted task, 0 = idle).
    pub waker_tid: Tid,
    /// Waker thread group (0 when unknown or metal).
    pub waker_tgid: Tid,
    /// Waker name at the time of the waking (metal hops: empty).
    pub waker_comm: Comm,
    /// Context of the waking.
    pub context: WakeContext,
    /// True when this hop is metal (interrupt context or the idle task): the chain ends here.
    pub metal: bool,
    /// Waker kernel stack (reserved ids say why there is none).
    pub kstack: StackId,
    /// Waker user stack.
    pub ustack: StackId,
    /// Interned node (comm + stacks, or metal label + kernel stack); see [`NodeTable`].
    pub node: NodeId,
    /// Nanoseconds of the root's blocked time attributed to this level (time-bounded
    /// mode: this node's own share; `--mode last`: the whole blocked time). Includes the
    /// time the waker was runnable, which [`WaitRecord::runq`] breaks down.
    pub ns: u64,
    /// Time-bounded mode: where in time `ns` lies, as up to two disjoint intervals
    /// `[x, y)` in time order (an unused one is `(0, 0)`; their lengths add up to `ns`):
    /// the waker's own time before it blocked, and after the waking that ended its
    /// blocked interval (CHAINS.md, "Attribution"). `--mode last`: the whole blocked
    /// interval. Lets a caller cut a chain at a time window (`critical-path --window`).
    pub windows: [(u64, u64); 2],
    /// The level this one hangs under: 0 = the waiting thread (the root), k = `hops[k -
    /// 1]`. A chain without branches has `parent == index` (each level under the one
    /// before); a waker's earlier waits (`LevelKind::EarlierWait`, `NotFollowed`) hang
    /// under that waker's level, the chain of an earlier wait under it. Levels are in
    /// preorder: a level's subtree follows it, its branches before the chain goes on.
    pub parent: u32,
    /// What the level is.
    pub kind: LevelKind,
    /// `[earlier wait]` levels: how many earlier waits it stands for (identical waits
    /// ended by the same interrupt are one level); 0 for other levels.
    pub waits: u32,
}

impl HopRecord {
    /// How the level's waker woke the level above: its [`WakeContext::label`], or `fork`
    /// when the level is the fork that created the thread above (docs/ENGINE.md, "Where
    /// the engine departs from CHAINS.md"), as `waits` and the exports print it.
    pub fn context_label(&self, nodes: &NodeTable) -> &'static str {
        if nodes.get(self.node).leaf_frame.as_deref() == Some(crate::engine::nodes::FORK_FRAME) {
            "fork"
        } else {
            self.context.label()
        }
    }
}

/// One off-CPU interval of a thread (switch-out to switch-in), with the chain of
/// wakeups that ended it. Passed by reference to [`WaitSink::on_wait`]; copy what you keep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitRecord {
    /// The waiting thread.
    pub tid: Tid,
    /// Its thread group (0 when unknown).
    pub tgid: Tid,
    /// Its name at switch-out.
    pub comm: Comm,
    /// True for kernel threads (from the trace's task table).
    pub kernel_thread: bool,
    /// `prev_state` at switch-out ([`STATE_RUNNABLE`] = preempted: no chain).
    pub state: u32,
    /// Switch-out time (start of the wait).
    pub switch_out_ns: u64,
    /// Time of the waking that ended the blocked part, if one was seen.
    pub wake_ns: Option<u64>,
    /// Switch-in time; None when the trace ended first.
    pub switch_in_ns: Option<u64>,
    /// Off-CPU kernel stack (eager at switch-out, or attached lazily).
    pub kstack: StackId,
    /// Off-CPU user stack.
    pub ustack: StackId,
    /// Interned root node (comm + off-CPU stacks).
    pub node: NodeId,
    /// `--cgroup-frames`: the node of the thread's cgroup or container at switch-out,
    /// shown above `node` (None when not asked for).
    pub group: Option<NodeId>,
    /// The chain, first waker first, ending at metal, an unknown cause, a cycle or the
    /// depth limit.
    pub hops: Vec<HopRecord>,
    /// Run-queue time, by level and CPU holder (run-queue attribution on, time-bounded
    /// mode): level 0 is this wait's runnable part (waking to switch-in, or the whole of
    /// a preemption); level k the part of `hops[k - 1].ns` during which that waker was
    /// runnable. Ordered by level. Empty with `--no-runqueue` and in `--mode last`.
    pub runq: Vec<RunqPart>,
    /// On-CPU time of the wakers, by level and sampled stack, when the trace has samples
    /// (time-bounded mode): the part of `hops[k - 1].ns` that is neither run-queue time
    /// nor a cut, split in proportion to that waker's samples inside it. Ordered by
    /// level. Empty for traces without samples.
    pub oncpu: Vec<OnCpuPart>,
    /// More windows of DAG levels (level k ≥ 1 as in [`RunqPart::level`], `[x, y)`):
    /// identical earlier waits of one waker that end at the same interrupt are one
    /// `[earlier wait]` level and one metal level (their `ns` summed); each further wait
    /// adds its window here for both, so that [`Self::level_inside`] stays exact.
    pub extra_windows: Vec<(u32, u64, u64)>,
    /// The chain was cut by the depth limit while a further cause existed.
    pub truncated: bool,
    /// `--mode last` only: the walk stopped because a thread repeated.
    pub cycle: bool,
    /// A lost-events marker fell inside this wait: its chain may be incomplete.
    pub lost: bool,
    /// Attribution mode the hops' `ns` follow.
    pub mode: Mode,
    /// Interned (comm, tgid) of the waiting thread, for the engine's node interning.
    pub(crate) ident: crate::engine::nodes::IdentId,
    /// On-CPU parts as the walk finds them (stacks, not yet interned nodes): turned into
    /// [`Self::oncpu`] when the record is emitted.
    pub(crate) oncpu_raw: Vec<crate::engine::sampleidx::RawOnCpu>,
    /// False when subchain dedup hides this wait as a root (its ending waking is an
    /// inner hop of another chain). Always true with dedup off.
    pub root: bool,
}

impl WaitRecord {
    /// Blocked time (switch-out to waking), when a waking was seen.
    pub fn blocked_ns(&self) -> Option<u64> {
        self.wake_ns.map(|w| w.saturating_sub(self.switch_out_ns))
    }
    /// Off-CPU time (switch-out to switch-in), when the switch-in was seen.
    pub fn offcpu_ns(&self) -> Option<u64> {
        self.switch_in_ns
            .map(|w| w.saturating_sub(self.switch_out_ns))
    }
    /// Run-queue latency (waking to switch-in).
    pub fn runq_ns(&self) -> Option<u64> {
        match (self.wake_ns, self.switch_in_ns) {
            (Some(w), Some(i)) => Some(i.saturating_sub(w)),
            _ => None,
        }
    }
    /// True when the thread was preempted (no blocked part, no chain).
    pub fn preempted(&self) -> bool {
        self.state == STATE_RUNNABLE
    }
    /// True when the chain has no branches: level k hangs under level k - 1.
    pub fn is_linear(&self) -> bool {
        is_linear(&self.hops)
    }
    /// The levels from the root's first level down to level `level` (1-based, as
    /// [`RunqPart::level`]), as indices into [`Self::hops`], first level first.
    pub fn path_to(&self, level: u32, out: &mut Vec<usize>) {
        path_to(&self.hops, level, out);
    }
    /// The main chain: from the first level, each level's [`LevelKind::Waker`] child, as
    /// indices into [`Self::hops`] (branches hang beside it).
    pub fn main_chain(&self) -> Vec<usize> {
        let mut out = Vec::new();
        main_chain(&self.hops, &mut out);
        out
    }
    /// Nanoseconds of level `k`'s own share (`hops[k]`) that lie inside `[x, y)`: its
    /// windows' part, less the parts of the earlier waits hanging under it (which its
    /// windows enclose). 0 for an `[earlier wait]` level, whose time is its children's.
    pub fn level_inside(&self, k: usize, x: u64, y: u64) -> u64 {
        let clip = |p: u64, q: u64| q.min(y).saturating_sub(p.max(x));
        let extra = |level: usize| -> u64 {
            self.extra_windows
                .iter()
                .filter(|e| e.0 as usize == level)
                .map(|e| clip(e.1, e.2))
                .sum()
        };
        let part = |k: usize| -> u64 {
            self.hops[k]
                .windows
                .iter()
                .map(|&(p, q)| clip(p, q))
                .sum::<u64>()
                + extra(k + 1)
        };
        let h = &self.hops[k];
        match h.kind {
            LevelKind::EarlierWait => 0,
            LevelKind::NotFollowed => part(k),
            LevelKind::Waker => {
                let holes: u64 = (k + 1..self.hops.len())
                    .filter(|&c| {
                        let c = &self.hops[c];
                        c.parent as usize == k + 1 && c.kind != LevelKind::Waker
                    })
                    .map(part)
                    .sum();
                part(k).saturating_sub(holes)
            }
        }
    }
    /// Sum of the hops' attributed time (equals [`Self::blocked_ns`] in time-bounded mode).
    pub fn attributed_ns(&self) -> u64 {
        self.hops.iter().map(|h| h.ns).sum()
    }
    /// Run-queue parts of one level (0 = the waiting thread itself; k = `hops[k - 1]`).
    pub fn runq_of(&self, level: u32) -> impl Iterator<Item = &RunqPart> + '_ {
        self.runq.iter().filter(move |p| p.level == level)
    }
    /// Run-queue nanoseconds of one level (see [`Self::runq_of`]).
    pub fn runq_ns_of(&self, level: u32) -> u64 {
        self.runq_of(level).map(|p| p.ns).sum()
    }
    /// On-CPU nanoseconds of one level k ≥ 1 (see [`Self::oncpu`]).
    pub fn oncpu_ns_of(&self, level: u32) -> u64 {
        self.oncpu
            .iter()
            .filter(|p| p.level == level)
            .map(|p| p.ns)
            .sum()
    }
}

/// What path reduction reads of a level ([`HopRecord`]): kept in compact copies for
/// reduction on another thread (`graph::waits`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LevelCopy {
    /// [`HopRecord::ns`].
    pub(crate) ns: u64,
    /// [`HopRecord::node`].
    pub(crate) node: NodeId,
    /// [`HopRecord::parent`].
    pub(crate) parent: u32,
    /// [`HopRecord::kind`].
    pub(crate) kind: LevelKind,
}

/// A level as path reduction and the DAG's shape read it: a [`HopRecord`] or its copy.
pub(crate) trait Level {
    /// The level's [`LevelCopy`].
    fn level(&self) -> LevelCopy;
}

impl Level for HopRecord {
    #[inline]
    fn level(&self) -> LevelCopy {
        LevelCopy {
            ns: self.ns,
            node: self.node,
            parent: self.parent,
            kind: self.kind,
        }
    }
}

impl Level for LevelCopy {
    #[inline]
    fn level(&self) -> LevelCopy {
        *self
    }
}

/// [`WaitRecord::is_linear`] of `hops`.
pub(crate) fn is_linear(hops: &[impl Level]) -> bool {
    hops.iter()
        .enumerate()
        .all(|(i, h)| h.level().parent as usize == i)
}

/// [`WaitRecord::path_to`] of `hops`.
pub(crate) fn path_to(hops: &[impl Level], level: u32, out: &mut Vec<usize>) {
    out.clear();
    let mut k = level as usize;
    while k > 0 && k <= hops.len() && out.len() <= hops.len() {
        out.push(k - 1);
        k = hops[k - 1].level().parent as usize;
    }
    out.reverse();
}

/// [`WaitRecord::main_chain`] of `hops`, into `out` (cleared first).
pub(crate) fn main_chain(hops: &[impl Level], out: &mut Vec<usize>) {
    out.clear();
    let mut cur = 0u32;
    for (i, h) in hops.iter().enumerate() {
        let h = h.level();
        if h.parent == cur && h.kind == LevelKind::Waker {
            out.push(i);
            cur = i as u32 + 1;
        }
    }
}

/// Consumer of the per-wait record stream.
pub trait WaitSink {
    /// Called once per off-CPU interval that passes the engine's filter, in order of
    /// emission (a wait is emitted at the thread's next switch-out, exit, or end of
    /// trace, once its lazily captured stacks can no longer change).
    fn on_wait(&mut self, wait: &WaitRecord, nodes: &NodeTable);
}

impl<F: FnMut(&WaitRecord, &NodeTable)> WaitSink for F {
    fn on_wait(&mut self, wait: &WaitRecord, nodes: &NodeTable) {
        self(wait, nodes)
    }
}

/// Fan a record stream out to two sinks.
impl<A: WaitSink, B: WaitSink> WaitSink for (A, B) {
    fn on_wait(&mut self, wait: &WaitRecord, nodes: &NodeTable) {
        self.0.on_wait(wait, nodes);
        self.1.on_wait(wait, nodes);
    }
}

/// A wait record on its own cache lines (two, not three: it is rewritten at every
/// switch-out).
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
pub(crate) struct Rec(WaitRecord);

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
