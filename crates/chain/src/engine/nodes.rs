//! Interned node identities: a task node is (comm, kernel stack, user stack); a metal node
//! is (context, interrupt label, kernel stack). Nodes are interned by what they print, so
//! each distinct frame group is stored once: stacks that render alike share a node, and so
//! do same-named threads of different processes (they would print as identical lines).

use chainrec_format::{Comm, StackId, StackKind, Tables, Tid, WakeContext};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Index of a node in a [`NodeTable`].
pub type NodeId = u32;

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A thread (task-context waker, or the waiting thread itself). Threads of different
    /// processes with the same name and stacks share one node: they print alike.
    Task {
        /// Name.
        comm: Comm,
    },
    /// Where a chain ends: interrupt context or the idle task.
    Metal {
        /// Context of the waking (Task for the idle task).
        context: WakeContext,
        /// Label as printed, e.g. `[hardirq: timer]`, `[softirq: NET_RX]`, `[idle]`.
        label: String,
    },
    /// A marker frame: `[truncated]`, `[cycle]`, `[lost events]`, `[waker unknown]`.
    Marker(&'static str),
    /// A run-queue level: the thread (or the waker of the level above) was runnable while
    /// `holder` ran on the CPU it was then switched in on. Prints `[run queue];holder`.
    RunQueue {
        /// Who held the CPU.
        holder: RunqHolder,
    },
    /// Frames above the waiting thread (`--cgroup-frames`): its cgroup
    /// (`[cgroup: /system.slice/foo.service]`), or the pod and container its cgroup path
    /// names (`[pod: <uid>]`, `[container: <12 hex>]`).
    Group {
        /// The frames, root first.
        frames: Vec<String>,
    },
    /// What a waker level did while it ran: `[on cpu]` and the frames of its samples
    /// (root first; `kstack`/`ustack` of the node), or `[on cpu: no sample]` when
    /// `sampled` is false (no sample of the waker fell inside its running time).
    OnCpu {
        /// False for `[on cpu: no sample]`.
        sampled: bool,
        /// `[on cpu: estimated]`: the stacks are the waker's samples nearest in time to
        /// the level, none of which fell inside it.
        estimated: bool,
    },
    /// A waker's blocked time inside the root's wait, before the wait its chain follows
    /// (CHAINS.md, "Attribution"): `[earlier wait]` and the waker's off-CPU stacks of that
    /// wait (root first, as a blocked thread prints), its waker's level below; or, when
    /// `followed` is false, `[blocked: not followed]` alone.
    Blocked {
        /// False for `[blocked: not followed]`.
        followed: bool,
    },
}

/// Who held a CPU while a thread waited for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunqHolder {
    /// A thread (by name: threads of one name share a node, as task nodes do).
    Task(Comm),
    /// The idle task: the CPU was idle (the wake-up of an idle CPU, or a migration).
    Idle,
    /// The trace does not say: the CPU's switch history did not reach back that far (the
    /// engine keeps the last 64 Ki switches per CPU) or the CPU had no switch yet.
    Unknown,
    /// Not a CPU holder: the thread was held off by CPU-quota throttling of `group` (CHAINS.md
    /// "Throttling"). Prints `[throttled: group]`, then what unthrottled it.
    Throttled {
        /// The group whose quota ran out (its cgroup path, or `cgroup <id>`).
        group: String,
        /// What ended it: `[hardirq: timer]` (the group's quota timer), or
        /// `[unthrottle unknown]` when the trace has no refill record for it.
        ended_by: &'static str,
    },
}

impl RunqHolder {
    /// The holder's frame: its comm, `[idle]` or `[unknown]`.
    pub fn name(&self) -> std::borrow::Cow<'_, str> {
        match self {
            RunqHolder::Task(c) => c.as_str(),
            RunqHolder::Idle => "[idle]".into(),
            RunqHolder::Unknown => "[unknown]".into(),
            RunqHolder::Throttled { group, .. } => format!("[throttled: {group}]").into(),
        }
    }
}

/// The frame that opens every run-queue level.
pub const RUNQ_FRAME: &str = "[run queue]";
/// The frame that opens a waker's earlier wait (CHAINS.md, "Attribution").
pub const EARLIER_WAIT_FRAME: &str = "[earlier wait]";
/// A waker's blocked time that the DAG does not follow (CHAINS.md, "Attribution").
pub const NOT_FOLLOWED_FRAME: &str = "[blocked: not followed]";
/// The kernel frame of a fork hop: the task that created the thread the chain came
/// through (docs/ENGINE.md, "Where the engine departs from CHAINS.md").
pub const FORK_FRAME: &str = "[fork]";

/// An interned node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// Identity.
    pub kind: NodeKind,
    /// Kernel stack (off-CPU stack for a root, waker stack for a hop).
    pub kstack: StackId,
    /// User stack.
    pub ustack: StackId,
    /// How many kernel frames of `kstack` the node shows, leaf first; `None` = all. A metal
    /// node keeps the frames from the interrupt entry up (docs/ENGINE.md, "Metal stacks").
    pub kframes: Option<u32>,
    /// A frame shown at the leaf end of the kernel frames: `[softirq: NET_RX]` on a task
    /// that woke the target from a softirq it ran itself (docs/ENGINE.md, "Metal labels").
    pub leaf_frame: Option<String>,
}

impl Node {
    /// The node's name frame: comm, metal label or marker text.
    pub fn name(&self) -> std::borrow::Cow<'_, str> {
        match &self.kind {
            NodeKind::Task { comm, .. } => comm.as_str(),
            NodeKind::Metal { label, .. } => label.as_str().into(),
            NodeKind::Marker(m) => (*m).into(),
            NodeKind::Group { frames } => frames.last().map_or("", |f| f.as_str()).into(),
            NodeKind::RunQueue { holder } => holder.name(),
            NodeKind::OnCpu { sampled: false, .. } => crate::engine::frames::ONCPU_NO_SAMPLE.into(),
            NodeKind::OnCpu {
                estimated: true, ..
            } => crate::engine::frames::ONCPU_ESTIMATED.into(),
            NodeKind::OnCpu { .. } => crate::engine::frames::ONCPU_FRAME.into(),
            NodeKind::Blocked { followed: true } => EARLIER_WAIT_FRAME.into(),
            NodeKind::Blocked { followed: false } => NOT_FOLLOWED_FRAME.into(),
        }
    }
    /// True for run-queue nodes.
    pub fn is_runq(&self) -> bool {
        matches!(self.kind, NodeKind::RunQueue { .. })
    }
    /// True for metal nodes.
    pub fn is_metal(&self) -> bool {
        matches!(self.kind, NodeKind::Metal { .. })
    }
    /// True for group nodes (frames above the waiting thread).
    pub fn is_group(&self) -> bool {
        matches!(self.kind, NodeKind::Group { .. })
    }
}

/// The frames `--cgroup-frames` shows above a thread in cgroup `cgroup` (None: the trace
/// does not know the thread's cgroup): `[pod: <uid>]` and/or `[container: <12 hex>]` when
/// the path names them, else `[cgroup: <path>]`.
pub fn group_frames(tables: &Tables, cgroup: Option<u64>) -> Vec<String> {
    let Some(id) = cgroup else {
        return vec!["[cgroup: unknown]".to_string()];
    };
    let path = tables.cgroup_path(id);
    match chainrec_format::container_info(&path) {
        Some(c) => {
            let mut f = Vec::new();
            if let Some(p) = &c.pod_uid {
                f.push(format!("[pod: {p}]"));
            }
            if let Some(s) = c.short_id() {
                f.push(format!("[container: {s}]"));
            }
            f
        }
        None => vec![format!("[cgroup: {path}]")],
    }
}

/// The frame of process `tgid` above its threads (`--process-frames`): its leader thread's
/// name when the wait is emitted (`leader`; it changes at exec), else as the task table
/// first saw it, and the pid: `[process: nginx (1234)]`; `[process: 1234]` when neither
/// knows the leader.
pub fn process_frame(tables: &Tables, tgid: u32, leader: Option<Comm>) -> String {
    match leader.or_else(|| tables.tasks.get(&tgid).map(|t| t.comm)) {
        Some(comm) => format!("[process: {comm} ({tgid})]"),
        None => format!("[process: {tgid}]"),
    }
}

/// Marker node: the depth limit cut the chain while a further cause existed.
pub(crate) const MARK_TRUNCATED: NodeId = 0;
/// Marker node: `--mode last` stopped at a repeated thread.
pub(crate) const MARK_CYCLE: NodeId = 1;
/// Marker node: lost events fell inside the wait.
pub(crate) const MARK_LOST: NodeId = 2;
/// Marker node: a blocked wait ended without a waking in the trace.
pub(crate) const MARK_NO_WAKER: NodeId = 3;

/// Size of the direct-mapped cache in front of the task-node map (16 B entries: 256 KiB).
const CACHE_BITS: u32 = 14;

/// Size of the direct-mapped cache in front of the metal-node map (16 B entries: 64 KiB;
/// metal wakings are a third of all wakings on a busy server).
const METAL_CACHE_BITS: u32 = 12;

/// Slot of `key` in a direct-mapped cache of 2^`bits` entries (Fibonacci hashing: the
/// top bits of the product mix every bit of the key).
#[inline]
fn cache_slot(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// Run-queue holder code for the idle task (else an [`IdentId`]).
pub(crate) const HOLDER_IDLE: u32 = u32::MAX;
/// Run-queue holder code for a CPU whose history does not cover the time.
pub(crate) const HOLDER_UNKNOWN: u32 = u32::MAX - 1;
/// Run-queue holder codes from here up to [`HOLDER_UNKNOWN`] are throttled time, one per
/// (group, ender) ([`NodeTable::throttle_holder`]); identities never come near it.
pub(crate) const HOLDER_THROTTLED: u32 = 0xC000_0000;
/// Ender of a throttled level whose group's quota timer was recorded.
pub(crate) const UNTHROTTLED_BY_TIMER: &str = "[hardirq: timer]";
/// Ender of a throttled level without a refill record (older recorder, lost record).
pub(crate) const UNTHROTTLE_UNKNOWN: &str = "[unthrottle unknown]";

/// True for a holder code of throttled time.
#[inline]
pub(crate) fn is_throttled_holder(code: u32) -> bool {
    (HOLDER_THROTTLED..HOLDER_UNKNOWN).contains(&code)
}

/// Interned (comm, tgid) pair: a thread identity, the part of a task node that changes
/// only on exec/rename, so the engine keeps it per thread and node lookups hash three
/// integers instead of a 16-byte name.
pub(crate) type IdentId = u32;

/// Interned comm: what a task node keeps of its identity (the tgid does not print), and
/// the run-queue holder code of a thread ([`NodeTable::holder_of`]).
pub(crate) type CommId = u32;

/// Entries per shared chunk of a [`SharedVec`].
const SHARED_CHUNK: usize = 1024;

/// An append-only vector whose full chunks are shared by its copies: the explorer keeps
/// up to 32 checkpoints of one engine pass, and each copies only the last, partial chunk
/// of the nodes interned so far (docs/ENGINE.md "Checkpoints").
#[derive(Clone, Debug)]
struct SharedVec<T> {
    full: Vec<Arc<[T]>>,
    tail: Vec<T>,
}

impl<T> Default for SharedVec<T> {
    fn default() -> Self {
        SharedVec {
            full: Vec::new(),
            tail: Vec::new(),
        }
    }
}

impl<T> SharedVec<T> {
    #[inline]
    fn len(&self) -> usize {
        self.full.len() * SHARED_CHUNK + self.tail.len()
    }

    fn push(&mut self, value: T) {
        if self.tail.is_empty() {
            self.tail.reserve_exact(SHARED_CHUNK);
        }
        self.tail.push(value);
        if self.tail.len() == SHARED_CHUNK {
            self.full.push(Arc::from(std::mem::take(&mut self.tail)));
        }
    }
}

impl<T> std::ops::Index<usize> for SharedVec<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        match self.full.get(i / SHARED_CHUNK) {
            Some(chunk) => &chunk[i % SHARED_CHUNK],
            None => &self.tail[i - self.full.len() * SHARED_CHUNK],
        }
    }
}

/// The interner.
#[derive(Clone, Debug)]
pub struct NodeTable {
    nodes: SharedVec<Node>,
    /// Per identity: (comm, tgid) and the comm's [`CommId`].
    idents: SharedVec<(Comm, Tid, CommId)>,
    ident_ix: FxHashMap<(Comm, Tid), IdentId>,
    comm_ix: FxHashMap<Comm, CommId>,
    /// Per [`CommId`]: the comm.
    comms: SharedVec<Comm>,
    /// Direct-mapped cache in front of `tasks`: (ident, kstack, ustack, node).
    cache: Vec<(IdentId, StackId, StackId, NodeId)>,
    /// Task nodes by (comm, canonical kernel stack, canonical user stack).
    tasks: FxHashMap<(CommId, StackId, StackId), NodeId>,
    metal: FxHashMap<(WakeContext, u32, StackId), NodeId>,
    /// Metal nodes by what they print: (context, label, kernel frames from the interrupt
    /// entry up), so that stacks differing only in the interrupted context share a node.
    metal_cut: FxHashMap<(WakeContext, String, Vec<String>), NodeId>,
    /// Task nodes of softirqs run by the task itself: (comm, source, kstack, ustack), by
    /// raw and by canonical stacks.
    softirq_tasks: FxHashMap<(CommId, u32, StackId, StackId), NodeId>,
    /// Fork nodes by the parent's comm (see [`NodeTable::fork`]).
    forks: FxHashMap<CommId, NodeId>,
    /// Direct-mapped cache in front of `metal`: (context, source, kstack, node).
    metal_cache: Vec<(WakeContext, u32, StackId, NodeId)>,
    /// Stacks that render like a lower id, and that id: nodes are interned by rendering,
    /// so that equal folded lines are one line.
    same_stacks: Arc<FxHashMap<StackId, StackId>>,
    /// Run-queue nodes by holder: comm id, or [`HOLDER_IDLE`] / [`HOLDER_UNKNOWN`].
    runq: FxHashMap<u32, NodeId>,
    /// Run-queue node by holder comm (`NodeId::MAX` = not yet interned).
    runq_by_comm: Vec<NodeId>,
    /// On-CPU nodes by (canonical kernel stack, canonical user stack); `None` is
    /// `[on cpu: no sample]`.
    oncpu: FxHashMap<(Option<(StackId, StackId)>, bool), NodeId>,
    /// Throttled holders: (group label, ender), code = [`HOLDER_THROTTLED`] + index.
    throttle_holders: Vec<(String, &'static str)>,
    /// Group nodes by cgroup id (`u64::MAX`: unknown), and by frames.
    /// Group nodes by (cgroup key, process): see [`NodeTable::group`].
    group_by_cgroup: FxHashMap<(u64, u32, Comm), NodeId>,
    groups: FxHashMap<Vec<String>, NodeId>,
    /// `[earlier wait]` nodes by (canonical kernel stack, canonical user stack), and
    /// `[blocked: not followed]` under `None` (interned when first used, so that traces
    /// without branches keep their node ids).
    earlier: FxHashMap<Option<(StackId, StackId)>, NodeId>,
}

impl Default for NodeTable {
    fn default() -> Self {
        let mut t = NodeTable {
            nodes: SharedVec::default(),
            idents: SharedVec::default(),
            ident_ix: FxHashMap::default(),
            comm_ix: FxHashMap::default(),
            comms: SharedVec::default(),
            cache: vec![(IdentId::MAX, StackId::NONE, StackId::NONE, NodeId::MAX); 1 << CACHE_BITS],
            tasks: FxHashMap::default(),
            metal: FxHashMap::default(),
            softirq_tasks: FxHashMap::default(),
            forks: FxHashMap::default(),
            metal_cut: FxHashMap::default(),
            metal_cache: vec![
                (WakeContext::Task, 0, StackId::NONE, NodeId::MAX);
                1 << METAL_CACHE_BITS
            ],
            same_stacks: Arc::default(),
            runq: FxHashMap::default(),
            runq_by_comm: Vec::new(),
            oncpu: FxHashMap::default(),
            throttle_holders: Vec::new(),
            group_by_cgroup: FxHashMap::default(),
            groups: FxHashMap::default(),
            earlier: FxHashMap::default(),
        };
        for m in ["[truncated]", "[cycle]", "[lost events]", "[waker unknown]"] {
            t.nodes.push(Node {
                kind: NodeKind::Marker(m),
                kstack: StackId::NONE,
                ustack: StackId::NONE,
                kframes: None,
                leaf_frame: None,
            });
        }
        t
    }
}

/// Heap bytes a clone of `part` allocates: `heap()` (the process's allocated bytes, from a
/// counting allocator) read around the clone. For measuring what a checkpoint holds.
pub(crate) fn clone_cost<T: Clone>(heap: &dyn Fn() -> usize, part: &T) -> usize {
    let before = heap();
    let copy = part.clone();
    let after = heap();
    drop(copy);
    after.saturating_sub(before)
}

impl NodeTable {
    /// An empty table for the stacks of `tables` (stacks that render alike share nodes).
    pub(crate) fn for_tables(tables: &Tables) -> Self {
        NodeTable {
            same_stacks: Arc::new(crate::engine::frames::same_rendering_stacks(tables)),
            ..NodeTable::default()
        }
    }

    /// Bytes each part of the table holds ([`crate::Engine`]'s `part_bytes`).
    pub(crate) fn part_bytes(&self, heap: &dyn Fn() -> usize) -> Vec<(&'static str, usize)> {
        use clone_cost as cost;
        vec![
            ("n.nodes", cost(heap, &self.nodes)),
            ("n.idents", cost(heap, &self.idents)),
            ("n.ident_ix", cost(heap, &self.ident_ix)),
            (
                "n.comms",
                cost(heap, &(self.comm_ix.clone(), self.comms.clone())),
            ),
            ("n.cache", cost(heap, &self.cache)),
            ("n.tasks", cost(heap, &self.tasks)),
            ("n.metal", cost(heap, &self.metal)),
            ("n.metal_cut", cost(heap, &self.metal_cut)),
            ("n.softirq", cost(heap, &self.softirq_tasks)),
            ("n.forks", cost(heap, &self.forks)),
            ("n.metal_cache", cost(heap, &self.metal_cache)),
            ("n.same_stacks", cost(heap, &self.same_stacks)),
            (
                "n.runq",
                cost(heap, &(self.runq.clone(), self.runq_by_comm.clone())),
            ),
            ("n.oncpu", cost(heap, &self.oncpu)),
            (
                "n.groups",
                cost(heap, &(self.group_by_cgroup.clone(), self.groups.clone())),
            ),
        ]
    }

    /// A copy to keep in a checkpoint: without the lookup caches (320 KiB, refilled by
    /// the run that resumes: [`Self::with_caches`]); the node and identity vectors share
    /// their full chunks with this table.
    pub(crate) fn snapshot(&self) -> NodeTable {
        NodeTable {
            cache: Vec::new(),
            metal_cache: Vec::new(),
            ..self.clone()
        }
    }

    /// This checkpoint copy ([`Self::snapshot`]) with empty lookup caches, to intern with.
    pub(crate) fn with_caches(mut self) -> NodeTable {
        let fresh = NodeTable::default();
        self.cache = fresh.cache;
        self.metal_cache = fresh.metal_cache;
        self
    }

    /// The lowest stack id rendering like `s`.
    #[inline]
    fn canonical(&self, s: StackId) -> StackId {
        if self.same_stacks.is_empty() {
            return s;
        }
        self.same_stacks.get(&s).copied().unwrap_or(s)
    }

    /// The node with id `id` (panics on an id not from this table).
    pub fn get(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }
    /// Number of interned nodes (including the 4 markers).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// True when only the markers exist.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 4
    }
    /// Intern a thread identity (called when a thread is first seen or renamed).
    pub(crate) fn ident(&mut self, comm: Comm, tgid: Tid) -> IdentId {
        let next = self.idents.len() as IdentId;
        let id = *self.ident_ix.entry((comm, tgid)).or_insert(next);
        if id == next {
            let next_comm = self.comm_ix.len() as CommId;
            let comm_id = *self.comm_ix.entry(comm).or_insert(next_comm);
            if comm_id == next_comm {
                self.comms.push(comm);
            }
            self.idents.push((comm, tgid, comm_id));
        }
        id
    }
    /// The (comm, tgid) of an identity.
    #[inline]
    pub(crate) fn ident_of(&self, ident: IdentId) -> (Comm, Tid) {
        let (comm, tgid, _) = self.idents[ident as usize];
        (comm, tgid)
    }
    /// Intern a task node of identity `ident` (from [`Self::ident`]).
    #[inline]
    pub(crate) fn task(&mut self, ident: IdentId, kstack: StackId, ustack: StackId) -> NodeId {
        let slot = cache_slot(
            (ident as u64) << 40 ^ (kstack.0 as u64) << 20 ^ ustack.0 as u64,
            CACHE_BITS,
        );
        let e = self.cache[slot];
        if e.0 == ident && e.1 == kstack && e.2 == ustack && e.3 != NodeId::MAX {
            return e.3;
        }
        let id = self.task_slow(ident, kstack, ustack);
        self.cache[slot] = (ident, kstack, ustack, id);
        id
    }

    fn task_slow(&mut self, ident: IdentId, kstack: StackId, ustack: StackId) -> NodeId {
        let (kstack, ustack) = (self.canonical(kstack), self.canonical(ustack));
        let (comm, _, comm_id) = self.idents[ident as usize];
        let next = self.nodes.len() as NodeId;
        let id = *self.tasks.entry((comm_id, kstack, ustack)).or_insert(next);
        if id == next {
            self.nodes.push(Node {
                kind: NodeKind::Task { comm },
                kstack,
                ustack,
                kframes: None,
                leaf_frame: None,
            });
        }
        id
    }
    /// Intern the group node above a waiting thread: its cgroup's frames when `cgroup` is
    /// given ([`group_frames`]; `Some(None)`: unknown), then its process's frame when
    /// `process` is ([`process_frame`]). Groups that print alike (threads of one container
    /// in several cgroups) share a node.
    pub(crate) fn group(
        &mut self,
        tables: &Tables,
        cgroup: Option<Option<u64>>,
        process: Option<(u32, Option<Comm>)>,
    ) -> NodeId {
        let key = (
            match cgroup {
                None => u64::MAX - 1,
                Some(c) => c.unwrap_or(u64::MAX),
            },
            process.map_or(u32::MAX, |p| p.0),
            process.and_then(|p| p.1).unwrap_or_default(),
        );
        if let Some(&id) = self.group_by_cgroup.get(&key) {
            return id;
        }
        let mut frames = cgroup.map_or_else(Vec::new, |c| group_frames(tables, c));
        frames.extend(process.map(|(tgid, leader)| process_frame(tables, tgid, leader)));
        let next = self.nodes.len() as NodeId;
        let id = *self.groups.entry(frames.clone()).or_insert(next);
        if id == next {
            self.nodes.push(Node {
                kind: NodeKind::Group { frames },
                kstack: StackId::NONE,
                ustack: StackId::NONE,
                kframes: None,
                leaf_frame: None,
            });
        }
        self.group_by_cgroup.insert(key, id);
        id
    }

    /// The run-queue holder code of a thread of identity `ident`: its comm's id. A holder
    /// prints by name only, so threads of one name held the CPU alike, and a CPU or thread
    /// history that names them by comm keeps one period where it would keep one per
    /// process (hackbench's processes, PostgreSQL's backends: hundreds of holders of one
    /// name behind one runnable thread).
    #[inline]
    pub(crate) fn holder_of(&self, ident: IdentId) -> u32 {
        self.idents[ident as usize].2
    }

    /// Intern the run-queue node of a CPU holder: a [`CommId`] ([`Self::holder_of`]),
    /// [`HOLDER_IDLE`], [`HOLDER_UNKNOWN`] or a throttled code.
    #[inline]
    pub(crate) fn runq(&mut self, holder: u32) -> NodeId {
        if let Some(&id) = self.runq_by_comm.get(holder as usize) {
            if id != NodeId::MAX {
                return id;
            }
        }
        let id = self.runq_slow(holder);
        if (holder as usize) < self.comms.len() {
            if self.runq_by_comm.len() < self.comms.len() {
                self.runq_by_comm.resize(self.comms.len(), NodeId::MAX);
            }
            self.runq_by_comm[holder as usize] = id;
        }
        id
    }

    /// The holder code of throttled time in `group` ended by `ended_by`
    /// ([`UNTHROTTLED_BY_TIMER`] or [`UNTHROTTLE_UNKNOWN`]).
    pub(crate) fn throttle_holder(&mut self, group: &str, ended_by: &'static str) -> u32 {
        let i = match self
            .throttle_holders
            .iter()
            .position(|(g, e)| g == group && *e == ended_by)
        {
            Some(i) => i,
            None => {
                self.throttle_holders.push((group.to_string(), ended_by));
                self.throttle_holders.len() - 1
            }
        };
        (HOLDER_THROTTLED + i as u32).min(HOLDER_UNKNOWN - 1)
    }

    fn runq_slow(&mut self, holder: u32) -> NodeId {
        let (key, holder) = match holder {
            HOLDER_IDLE => (HOLDER_IDLE, RunqHolder::Idle),
            HOLDER_UNKNOWN => (HOLDER_UNKNOWN, RunqHolder::Unknown),
            code if is_throttled_holder(code) => {
                let (group, ended_by) =
                    self.throttle_holders[(code - HOLDER_THROTTLED) as usize].clone();
                (code, RunqHolder::Throttled { group, ended_by })
            }
            comm_id => (comm_id, RunqHolder::Task(self.comms[comm_id as usize])),
        };
        let next = self.nodes.len() as NodeId;
        let id = *self.runq.entry(key).or_insert(next);
        if id == next {
            self.nodes.push(Node {
                kind: NodeKind::RunQueue { holder },
                kstack: StackId::NONE,
                ustack: StackId::NONE,
                kframes: None,
                leaf_frame: None,
            });
        }
        id
    }

    /// Intern the `[earlier wait]` node of a waker's off-CPU stacks of an earlier wait
    /// (`Some`), or the `[blocked: not followed]` node (`None`).
    pub(crate) fn blocked(&mut self, stacks: Option<(StackId, StackId)>) -> NodeId {
        let key = stacks.map(|(k, u)| (self.canonical(k), self.canonical(u)));
        let next = self.nodes.len() as NodeId;
        let id = *self.earlier.entry(key).or_insert(next);
        if id == next {
            let (kstack, ustack) = key.unwrap_or((StackId::NONE, StackId::NONE));
            self.nodes.push(Node {
                kind: NodeKind::Blocked {
                    followed: key.is_some(),
                },
                kstack,
                ustack,
                kframes: None,
                leaf_frame: None,
            });
        }
        id
    }

    /// Intern the on-CPU node of a sampled stack pair (`[on cpu]`, or `[on cpu:
    /// estimated]` when `estimated`), or `[on cpu: no sample]` (`None`).
    pub(crate) fn oncpu(&mut self, stacks: Option<(StackId, StackId)>, estimated: bool) -> NodeId {
        let key = stacks.map(|(k, u)| (self.canonical(k), self.canonical(u)));
        let estimated = estimated && key.is_some();
        let next = self.nodes.len() as NodeId;
        let id = *self.oncpu.entry((key, estimated)).or_insert(next);
        if id == next {
            let (kstack, ustack) = key.unwrap_or((StackId::NONE, StackId::NONE));
            self.nodes.push(Node {
                kind: NodeKind::OnCpu {
                    sampled: key.is_some(),
                    estimated,
                },
                kstack,
                ustack,
                kframes: None,
                leaf_frame: None,
            });
        }
        id
    }

    /// Intern the task node of a waking from a softirq the task ran itself
    /// ([`WakeContext::SoftIrqTask`]): the task's node with a `[softirq: VECTOR]` frame at
    /// the leaf end of its kernel frames (`source` names the vector).
    pub(crate) fn softirq_task(
        &mut self,
        ident: IdentId,
        source: u32,
        kstack: StackId,
        ustack: StackId,
        tables: &Tables,
    ) -> NodeId {
        let (comm, _, comm_id) = self.idents[ident as usize];
        if let Some(&id) = self.softirq_tasks.get(&(comm_id, source, kstack, ustack)) {
            return id;
        }
        let key = (
            comm_id,
            source,
            self.canonical(kstack),
            self.canonical(ustack),
        );
        let id = match self.softirq_tasks.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.nodes.len() as NodeId;
                self.nodes.push(Node {
                    kind: NodeKind::Task { comm },
                    kstack: key.2,
                    ustack: key.3,
                    kframes: None,
                    leaf_frame: Some(metal_label(WakeContext::SoftIrq, source, key.2, tables)),
                });
                self.softirq_tasks.insert(key, id);
                id
            }
        };
        self.softirq_tasks
            .insert((comm_id, source, kstack, ustack), id);
        id
    }
    /// Intern the node of a fork: the task (`ident`) that created a thread, its kernel
    /// frames one [`FORK_FRAME`] (the recorder takes no stack at `sched_wakeup_new`).
    pub(crate) fn fork(&mut self, ident: IdentId) -> NodeId {
        let (comm, _, comm_id) = self.idents[ident as usize];
        if let Some(&id) = self.forks.get(&comm_id) {
            return id;
        }
        let id = self.nodes.len() as NodeId;
        self.nodes.push(Node {
            kind: NodeKind::Task { comm },
            kstack: StackId::NONE,
            ustack: StackId::NONE,
            kframes: None,
            leaf_frame: Some(FORK_FRAME.to_string()),
        });
        self.forks.insert(comm_id, id);
        id
    }

    /// Intern a metal node (label computed once per distinct key).
    #[inline]
    pub(crate) fn metal(
        &mut self,
        context: WakeContext,
        source: u32,
        kstack: StackId,
        tables: &Tables,
    ) -> NodeId {
        let slot = cache_slot(
            (context as u64) << 56 ^ (source as u64) << 28 ^ kstack.0 as u64,
            METAL_CACHE_BITS,
        );
        let e = self.metal_cache[slot];
        if e.0 == context && e.1 == source && e.2 == kstack && e.3 != NodeId::MAX {
            return e.3;
        }
        let id = self.metal_slow(context, source, kstack, tables);
        self.metal_cache[slot] = (context, source, kstack, id);
        id
    }

    fn metal_slow(
        &mut self,
        context: WakeContext,
        source: u32,
        kstack: StackId,
        tables: &Tables,
    ) -> NodeId {
        // Keyed by the raw stack too, so that a repeat costs one lookup, not two.
        if let Some(&id) = self.metal.get(&(context, source, kstack)) {
            return id;
        }
        let canonical = self.canonical(kstack);
        let id = match self.metal.get(&(context, source, canonical)) {
            Some(&id) => id,
            None => {
                let label = metal_label(context, source, canonical, tables);
                let (kframes, frames) = interrupt_frames(tables, canonical);
                let next = self.nodes.len() as NodeId;
                let id = *self
                    .metal_cut
                    .entry((context, label.clone(), frames))
                    .or_insert(next);
                if id == next {
                    self.nodes.push(Node {
                        kind: NodeKind::Metal { context, label },
                        kstack: canonical,
                        ustack: StackId::NONE,
                        kframes,
                        leaf_frame: None,
                    });
                }
                self.metal.insert((context, source, canonical), id);
                id
            }
        };
        self.metal.insert((context, source, kstack), id);
        id
    }
}

/// Whether kernel function `name` is where an interrupt entered, or where ksoftirqd runs
/// softirqs: a metal stack keeps the frames up to it and drops the rest, which belong to
/// whatever the interrupt happened to hit (docs/ENGINE.md, "Metal stacks").
fn is_interrupt_entry(name: &str) -> bool {
    name.starts_with("asm_sysvec_")
        || name.starts_with("asm_fred_")
        || matches!(
            name,
            "asm_common_interrupt" | "asm_exc_nmi" | "asm_spurious_interrupt" | "run_ksoftirqd"
        )
}

/// The frames a metal node of stack `id` keeps, leaf first: up to and including the
/// innermost interrupt entry (`Some(count)`), or all when there is none (`None`), and
/// their rendered names (the node's identity).
fn interrupt_frames(tables: &Tables, id: StackId) -> (Option<u32>, Vec<String>) {
    let frames = crate::engine::frames::stack_frames(tables, id, 0);
    match frames.iter().position(|f| is_interrupt_entry(f)) {
        Some(i) if i + 1 < frames.len() => {
            let mut frames = frames;
            frames.truncate(i + 1);
            (Some(frames.len() as u32), frames)
        }
        _ => (None, frames),
    }
}

/// Kernel functions that identify an interrupt source when the waking carries none:
/// (symbol, hardirq label, softirq label).
const INFER: &[(&str, &str, &str)] = &[
    ("hrtimer_wakeup", "timer", "HRTIMER"),
    ("__hrtimer_run_queues", "timer", "HRTIMER"),
    ("hrtimer_interrupt", "timer", "HRTIMER"),
    ("call_timer_fn", "timer", "TIMER"),
    ("__run_timers", "timer", "TIMER"),
    ("run_timer_softirq", "timer", "TIMER"),
    ("net_rx_action", "NET_RX", "NET_RX"),
    ("net_tx_action", "NET_TX", "NET_TX"),
    ("blk_mq_complete_request", "disk", "BLOCK"),
    ("blk_complete_reqs", "disk", "BLOCK"),
    ("blk_done_softirq", "disk", "BLOCK"),
    ("rcu_core", "rcu", "RCU"),
    ("rcu_do_batch", "rcu", "RCU"),
    ("tasklet_action", "tasklet", "TASKLET"),
    ("sched_balance_softirq", "sched", "SCHED"),
    ("irq_work_run", "irq_work", "irq_work"),
];

/// Label of a metal hop; see docs/ENGINE.md ("Metal labels").
pub(crate) fn metal_label(
    context: WakeContext,
    source: u32,
    kstack: StackId,
    tables: &Tables,
) -> String {
    let kind = match context {
        WakeContext::Nmi => return "[nmi]".to_string(),
        WakeContext::Task => return "[idle]".to_string(),
        WakeContext::HardIrq => "hardirq",
        // SoftIrqTask is metal only when the idle task ran it (else a task hop).
        WakeContext::SoftIrq | WakeContext::SoftIrqTask => "softirq",
    };
    if source != 0 {
        return match tables.irq_sources.get(&source) {
            Some(s) => format!("[{kind}: {}]", s.name),
            None => format!("[{kind}: source {source}]"),
        };
    }
    if let Some(st) = tables.stacks.get(&kstack) {
        if st.kind == StackKind::Kernel {
            for &addr in &st.frames {
                let Some(name) = tables.symbol(st, addr).and_then(|s| s.name) else {
                    continue;
                };
                let hit = INFER
                    .iter()
                    .find(|(f, _, _)| *f == name)
                    .map(|&(_, h, s)| (h, s))
                    .or_else(|| name.ends_with("_complete_rq").then_some(("disk", "BLOCK")));
                if let Some((h, s)) = hit {
                    let l = if context == WakeContext::HardIrq {
                        h
                    } else {
                        s
                    };
                    return format!("[{kind}: {l}]");
                }
            }
        }
    }
    format!("[{kind}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint copy shares the full chunks and goes on apart: nodes interned after it
    /// (past a chunk boundary, in another order) get the ids a copy of the whole table
    /// would give, and the original is untouched.
    #[test]
    fn snapshot_shares_chunks_and_goes_on_apart() {
        let mut table = NodeTable::default();
        let ident = table.ident(Comm::new("worker"), 7);
        let intern = |t: &mut NodeTable, s: u32| t.task(ident, StackId(s), StackId::NONE);
        for s in 1..=2500 {
            intern(&mut table, s);
        }
        let mut copy = table.snapshot().with_caches();
        assert_eq!(copy.len(), table.len());
        // Shared: the copy holds the same chunks, not copies of them.
        assert!(Arc::ptr_eq(&copy.nodes.full[1], &table.nodes.full[1]));
        for s in (2400..=3200).rev() {
            let got = intern(&mut copy, s);
            assert_eq!(copy.get(got).kstack, StackId(s));
            assert_eq!(got < 2504, s <= 2500, "stack {s}: node {got}");
        }
        // Ids below the copy point are the original's; new ones continue from it.
        assert_eq!(copy.len(), 3204);
        assert_eq!(intern(&mut copy, 1), intern(&mut table, 1));
        assert_eq!(copy.get(3203).kstack, StackId(2501));
        assert_eq!(table.len(), 2504);
        for s in 2501..=2600 {
            intern(&mut table, s);
        }
        assert_eq!(table.get(2504).kstack, StackId(2501));
        assert_eq!(copy.get(2504).kstack, StackId(3200));
    }
}
