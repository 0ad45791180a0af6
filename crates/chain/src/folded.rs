//! Folded aggregation of the record stream for the four views, and the interned chain
//! graph.

use crate::engine::Mode;
use crate::fx::FxHashMap;
use crate::nodes::{
    NodeId, NodeKind, NodeTable, MARK_CYCLE, MARK_LOST, MARK_NO_WAKER, MARK_TRUNCATED,
};
use crate::record::{WaitRecord, WaitSink};
use crate::ChainError;
use chainrec_format::{Comm, RecordingMeta, StackId, Tables};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{BTreeMap, HashMap};

/// Which folded view to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Multi-level chains (`chainrec chains`); only root waits, blocked time.
    Chains,
    /// Off-CPU stacks, switch-out to switch-in, all states (`offcpu`).
    OffCpu,
    /// Waker stack then target comm, blocked time (`wakeup`).
    Wakeup,
    /// Off-CPU stack with its first waker, blocked time (`offwake`).
    OffWake,
}

/// Weight unit of folded output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds.
    Ns,
    /// Microseconds (default, like bcc).
    #[default]
    Us,
    /// Milliseconds.
    Ms,
}

impl Unit {
    /// Parse `ns`, `us` or `ms`.
    pub fn parse(s: &str) -> Result<Unit, ChainError> {
        match s {
            "ns" => Ok(Unit::Ns),
            "us" => Ok(Unit::Us),
            "ms" => Ok(Unit::Ms),
            _ => Err(ChainError::BadUnit(s.to_string())),
        }
    }
    /// Nanoseconds per unit.
    pub fn ns(self) -> u64 {
        match self {
            Unit::Ns => 1,
            Unit::Us => 1_000,
            Unit::Ms => 1_000_000,
        }
    }
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
        }
    }
}

/// The interned chain graph: nodes are [`NodeId`]s of the engine's [`NodeTable`]
/// (markers included); an edge goes from a waiting node to its waker, weighted by the
/// total nanoseconds attributed through it.
pub type ChainGraph = DiGraph<NodeId, u64>;

const NO_PARENT: u32 = u32::MAX;
const STEP_CACHE_BITS: u32 = 16;
const MEMO: usize = 4096;
const MEMO_LEN: usize = 8;

/// Last chain seen for a root node (see `on_wait`).
#[derive(Clone, Copy, Debug)]
struct Memo {
    root: NodeId,
    len: u8,
    nodes: [NodeId; MEMO_LEN],
    ids: [u32; MEMO_LEN + 1],
}

const EMPTY_MEMO: Memo = Memo {
    root: u32::MAX,
    len: 0,
    nodes: [0; MEMO_LEN],
    ids: [u32::MAX; MEMO_LEN + 1],
};
/// Node ids with this bit set name a bare target comm of the wakeup view.
const COMM_BIT: u32 = 1 << 31;

/// Aggregates [`WaitRecord`]s into folded paths (a trie of interned nodes).
#[derive(Clone, Debug)]
pub struct FoldedSink {
    view: View,
    index: FxHashMap<(u32, NodeId), u32>,
    cache: Vec<(u64, u32)>,
    memo: Vec<Memo>,
    entries: Vec<(u32, NodeId)>,
    weights: Vec<u64>,
    comms: Vec<Comm>,
    comm_ix: FxHashMap<Comm, u32>,
    /// Waits seen but not part of this view (non-roots, preemptions for chain views, no
    /// switch-in for offcpu).
    pub waits_not_in_view: u64,
    /// Waits aggregated.
    pub waits_in_view: u64,
}

impl FoldedSink {
    /// Empty aggregation for `view`.
    pub fn new(view: View) -> Self {
        FoldedSink {
            view,
            index: FxHashMap::default(),
            cache: vec![(0, u32::MAX); 1 << STEP_CACHE_BITS],
            memo: vec![EMPTY_MEMO; MEMO],
            entries: Vec::new(),
            weights: Vec::new(),
            comms: Vec::new(),
            comm_ix: FxHashMap::default(),
            waits_not_in_view: 0,
            waits_in_view: 0,
        }
    }

    /// The view.
    pub fn view(&self) -> View {
        self.view
    }

    #[inline]
    fn step(&mut self, parent: u32, node: NodeId) -> u32 {
        // Direct-mapped cache in front of the trie index: hot paths repeat.
        let key = ((parent as u64) << 32) | node as u64;
        let slot = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - STEP_CACHE_BITS)) as usize;
        let c = self.cache[slot];
        if c.0 == key && c.1 != u32::MAX {
            return c.1;
        }
        let id = self.step_slow(parent, node);
        self.cache[slot] = (key, id);
        id
    }

    fn step_slow(&mut self, parent: u32, node: NodeId) -> u32 {
        let next = self.entries.len() as u32;
        let id = *self.index.entry((parent, node)).or_insert(next);
        if id == next {
            self.entries.push((parent, node));
            self.weights.push(0);
        }
        id
    }

    fn comm_node(&mut self, c: Comm) -> NodeId {
        let next = self.comms.len() as u32;
        let id = *self.comm_ix.entry(c).or_insert(next);
        if id == next {
            self.comms.push(c);
        }
        id | COMM_BIT
    }

    /// Number of distinct paths.
    pub fn paths(&self) -> usize {
        self.entries.len()
    }

    /// Call `f(line, ns)` for every distinct path with a non-zero weight, in depth-first
    /// order of the path trie, without materializing all lines (memory stays bounded by
    /// the trie). Two different paths can render to the same text (e.g. the same comm in
    /// two processes); consumers that need one line per text must sum them, as
    /// flamegraph.pl and inferno do. See [`Self::folded_ns`] for the aggregated map.
    pub fn for_each_line(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
        mut f: impl FnMut(&str, u64),
    ) {
        let n = self.entries.len();
        // Children in CSR form.
        let mut start = vec![0u32; n + 1];
        for &(p, _) in &self.entries {
            if p != NO_PARENT {
                start[p as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut kids = vec![0u32; start[n] as usize];
        let mut stack: Vec<(u32, usize)> = Vec::new();
        for (i, &(p, _)) in self.entries.iter().enumerate() {
            if p == NO_PARENT {
                stack.push((i as u32, 0));
            } else {
                kids[fill[p as usize] as usize] = i as u32;
                fill[p as usize] += 1;
            }
        }
        stack.reverse();
        let mut r = Renderer {
            tables,
            threshold: meta.stack_threshold_ns,
            cache: HashMap::new(),
        };
        let mut pieces: HashMap<(NodeId, bool), String> = HashMap::new();
        let mut buf = String::new();
        while let Some((e, len)) = stack.pop() {
            buf.truncate(len);
            let (p, node) = self.entries[e as usize];
            let first = p == NO_PARENT;
            if !first {
                buf.push(';');
            }
            let piece = pieces
                .entry((node, first))
                .or_insert_with(|| self.piece(node, first, nodes, &mut r));
            buf.push_str(piece);
            let w = self.weights[e as usize];
            if w > 0 {
                f(&buf, w);
            }
            let l = buf.len();
            let (a, b) = (start[e as usize] as usize, start[e as usize + 1] as usize);
            for &k in kids[a..b].iter().rev() {
                stack.push((k, l));
            }
        }
    }

    /// Exact aggregated nanoseconds per rendered line, sorted by line.
    pub fn folded_ns(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
    ) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        self.for_each_line(nodes, tables, meta, |l, w| {
            *out.entry(l.to_string()).or_insert(0) += w;
        });
        out
    }

    /// Folded lines with weights in `unit` (rounded to nearest), aggregated and sorted;
    /// lines that round to 0 are left out (see [`Self::folded_ns`] for exact values).
    pub fn lines(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
        unit: Unit,
    ) -> Vec<(String, u64)> {
        let d = unit.ns();
        self.folded_ns(nodes, tables, meta)
            .into_iter()
            .map(|(l, w)| (l, (w + d / 2) / d))
            .filter(|(_, w)| *w > 0)
            .collect()
    }

    /// Render one node of a path (`first`: the path's first node).
    fn piece(&self, id: NodeId, first: bool, nodes: &NodeTable, r: &mut Renderer<'_>) -> String {
        let mut f: Vec<String> = Vec::new();
        if id & COMM_BIT != 0 {
            return self.comms[(id & !COMM_BIT) as usize].as_str().into_owned();
        }
        let n = nodes.get(id);
        match &n.kind {
            NodeKind::Marker(m) => f.push((*m).to_string()),
            NodeKind::Metal { label, .. } => {
                if first {
                    f.push(label.clone());
                    f.extend(r.frames(n.kstack).iter().rev().cloned());
                } else {
                    f.push("--".into());
                    f.extend(r.frames(n.kstack).iter().cloned());
                    f.push(label.clone());
                }
            }
            NodeKind::Task { comm, .. } => {
                let k = r.frames(n.kstack).to_vec();
                let u = r.frames(n.ustack).to_vec();
                let any = !k.is_empty() || !u.is_empty();
                if first {
                    f.push(comm.as_str().into_owned());
                    f.extend(u.into_iter().rev());
                    if any {
                        f.push("-".into());
                    }
                    f.extend(k.into_iter().rev());
                } else {
                    f.push("--".into());
                    f.extend(k);
                    if any {
                        f.push("-".into());
                    }
                    f.extend(u);
                    f.push(comm.as_str().into_owned());
                }
            }
        }
        f.join(";")
    }

    /// The interned chain graph (see [`ChainGraph`]).
    pub fn chain_graph(&self) -> ChainGraph {
        let mut total = self.weights.clone();
        for i in (0..self.entries.len()).rev() {
            let p = self.entries[i].0;
            if p != NO_PARENT {
                total[p as usize] += total[i];
            }
        }
        let mut g = ChainGraph::new();
        let mut gnode: FxHashMap<NodeId, NodeIndex> = FxHashMap::default();
        let mut gedge: FxHashMap<(NodeIndex, NodeIndex), petgraph::graph::EdgeIndex> =
            FxHashMap::default();
        let mut ix =
            |g: &mut ChainGraph, n: NodeId| *gnode.entry(n).or_insert_with(|| g.add_node(n));
        for (i, &(p, n)) in self.entries.iter().enumerate() {
            let b = ix(&mut g, n);
            if p == NO_PARENT {
                continue;
            }
            let a = ix(&mut g, self.entries[p as usize].1);
            match gedge.get(&(a, b)) {
                Some(&e) => g[e] += total[i],
                None => {
                    let e = g.add_edge(a, b, total[i]);
                    gedge.insert((a, b), e);
                }
            }
        }
        g
    }
}

impl WaitSink for FoldedSink {
    fn on_wait(&mut self, w: &WaitRecord, _nodes: &NodeTable) {
        match self.view {
            View::OffCpu => {
                let Some(d) = w.offcpu_ns() else {
                    self.waits_not_in_view += 1;
                    return;
                };
                let mut p = self.step(NO_PARENT, w.node);
                if w.lost {
                    p = self.step(p, MARK_LOST);
                }
                self.weights[p as usize] += d;
            }
            View::Chains | View::OffWake => {
                if w.preempted() || (self.view == View::Chains && !w.root) {
                    self.waits_not_in_view += 1;
                    return;
                }
                let root = self.step(NO_PARENT, w.node);
                if w.hops.is_empty() {
                    let Some(d) = w.offcpu_ns() else {
                        self.waits_not_in_view += 1;
                        return;
                    };
                    let mut p = self.step(root, MARK_NO_WAKER);
                    if w.lost {
                        p = self.step(p, MARK_LOST);
                    }
                    self.weights[p as usize] += d;
                } else if self.view == View::OffWake {
                    let mut p = self.step(root, w.hops[0].node);
                    if w.lost {
                        p = self.step(p, MARK_LOST);
                    }
                    self.weights[p as usize] += w.blocked_ns().unwrap_or(0);
                } else {
                    // Per-root memo of the last chain's path ids: steady workloads repeat
                    // the same chain, so most levels need no trie lookup at all.
                    let n = w.hops.len();
                    let slot = (w.node as usize).wrapping_mul(0x9E37_79B9) >> 7 & (MEMO - 1);
                    let mut memo = self.memo[slot];
                    let mut same = 0;
                    if memo.root == w.node && memo.ids[0] == root {
                        let m = (memo.len as usize).min(n);
                        while same < m && memo.nodes[same] == w.hops[same].node {
                            same += 1;
                        }
                    } else {
                        memo.root = w.node;
                        memo.ids[0] = root;
                    }
                    let mut p = root;
                    let last = n - 1;
                    for (k, h) in w.hops.iter().enumerate() {
                        p = if k < same {
                            memo.ids[k + 1]
                        } else {
                            self.step(p, h.node)
                        };
                        if k < MEMO_LEN && k >= same {
                            memo.nodes[k] = h.node;
                            memo.ids[k + 1] = p;
                        }
                        let mut q = p;
                        if k == last {
                            if w.truncated {
                                q = self.step(q, MARK_TRUNCATED);
                            }
                            if w.cycle {
                                q = self.step(q, MARK_CYCLE);
                            }
                        }
                        if w.mode == Mode::Last && k != last {
                            continue; // one line per wait: the whole chain, whole blocked time
                        }
                        if w.lost {
                            q = self.step(q, MARK_LOST);
                        }
                        self.weights[q as usize] += h.ns;
                    }
                    memo.len = n.min(MEMO_LEN).max(same) as u8;
                    self.memo[slot] = memo;
                }
            }
            View::Wakeup => {
                let (Some(h), Some(d)) = (w.hops.first(), w.blocked_ns()) else {
                    self.waits_not_in_view += 1;
                    return;
                };
                let c = self.comm_node(w.comm);
                let a = self.step(NO_PARENT, h.node);
                let mut p = self.step(a, c);
                if w.lost {
                    p = self.step(p, MARK_LOST);
                }
                self.weights[p as usize] += d;
            }
        }
        self.waits_in_view += 1;
    }
}

struct Renderer<'a> {
    tables: &'a Tables,
    threshold: u64,
    cache: HashMap<StackId, Vec<String>>,
}

impl Renderer<'_> {
    /// Frames of a stack, leaf first; reserved ids become one explanatory frame.
    fn frames(&mut self, id: StackId) -> &[String] {
        let (tables, threshold) = (self.tables, self.threshold);
        self.cache
            .entry(id)
            .or_insert_with(|| stack_frames(tables, id, threshold))
    }
}

/// Frames of stack `id`, leaf first. Reserved ids: NONE → nothing; SKIPPED →
/// `[no stack: wait < Nus]`; FAILED, dangling or unknown reserved → `[missing stack]`;
/// USER_PREEMPTED → `[no user stack: preempted]`. Unresolved addresses → `0x...`.
pub(crate) fn stack_frames(tables: &Tables, id: StackId, threshold_ns: u64) -> Vec<String> {
    match id {
        StackId::NONE => Vec::new(),
        StackId::SKIPPED => vec![if threshold_ns == 0 {
            "[no stack: skipped]".to_string()
        } else if threshold_ns % 1000 == 0 {
            format!("[no stack: wait < {}us]", threshold_ns / 1000)
        } else {
            format!("[no stack: wait < {}ns]", threshold_ns)
        }],
        StackId::USER_PREEMPTED => vec!["[no user stack: preempted]".to_string()],
        _ => match tables.stacks.get(&id) {
            Some(st) if id.is_real() => st
                .frames
                .iter()
                .map(
                    |&a| match tables.symbol(st, a).and_then(|s| s.name.as_deref()) {
                        Some(n) => n.to_string(),
                        None => format!("0x{a:x}"),
                    },
                )
                .collect(),
            _ => vec!["[missing stack]".to_string()],
        },
    }
}
