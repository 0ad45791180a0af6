//! View reduction, separated from trie insertion: a [`PathReducer`] turns each
//! [`WaitRecord`] into trie paths (node ids, root first, with the weight to add at each
//! level) in reusable [`PathBatch`]es, which [`crate::FoldedSink::apply`] inserts. The two
//! halves can run on two threads (engine + reduction on one, insertion on the other).

use crate::engine::mode::Mode;
use crate::engine::nodes::{
    NodeId, NodeTable, MARK_CYCLE, MARK_LOST, MARK_NO_WAKER, MARK_TRUNCATED,
};
use crate::engine::record::{WaitRecord, WaitSink};
use crate::graph::views::View;
use chainrec_format::Comm;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Node ids with this bit set name a bare target comm of the wakeup view (an index into
/// the reducer's comm table).
pub(crate) const COMM_BIT: u32 = 1 << 31;

/// A batch of reduced waits: flat, reusable buffers holding, per path, the trie path as
/// node ids (root first) and the weight to add at each level (0 = none), plus the wait
/// counters of the view. Produced by [`PathReducer`], consumed by
/// [`crate::FoldedSink::apply`]. A wait can give more than one path (lost events add a
/// `[lost events]` leaf under every level), and a path's levels all exist in the trie
/// after insertion even when their weight is 0.
#[derive(Clone, Debug, Default)]
pub struct PathBatch {
    pub(crate) nodes: Vec<NodeId>,
    pub(crate) weights: Vec<u64>,
    /// End offset (into `nodes`) of each path.
    pub(crate) ends: Vec<u32>,
    /// Waits of this batch that the view aggregates.
    pub waits_in_view: u64,
    /// Waits of this batch that the view does not show (see
    /// [`crate::FoldedSink::waits_not_in_view`]).
    pub waits_not_in_view: u64,
}

impl PathBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empty the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.weights.clear();
        self.ends.clear();
        self.waits_in_view = 0;
        self.waits_not_in_view = 0;
    }

    /// Number of paths.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when the batch holds no path and counts no wait.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty() && self.waits_in_view == 0 && self.waits_not_in_view == 0
    }

    /// Total number of levels (trie steps) over all paths.
    pub fn steps(&self) -> usize {
        self.nodes.len()
    }

    /// Path `i`: its node ids (root first) and the weight added at each level.
    pub fn path(&self, i: usize) -> (&[NodeId], &[u64]) {
        let a = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let b = self.ends[i] as usize;
        (&self.nodes[a..b], &self.weights[a..b])
    }

    /// Append a path (`nodes` root first, `weights` of the same length). For producers
    /// other than [`PathReducer`]; node ids must come from the engine's [`NodeTable`].
    pub fn push_path(&mut self, nodes: &[NodeId], weights: &[u64]) {
        assert_eq!(nodes.len(), weights.len(), "one weight per level");
        if nodes.is_empty() {
            return;
        }
        self.nodes.extend_from_slice(nodes);
        self.weights.extend_from_slice(weights);
        self.end_path();
    }

    #[inline]
    fn push(&mut self, node: NodeId, w: u64) {
        self.nodes.push(node);
        self.weights.push(w);
    }

    #[inline]
    fn end_path(&mut self) {
        self.ends.push(self.nodes.len() as u32);
    }

    /// Add `w` to the last level pushed.
    #[inline]
    fn add_last(&mut self, w: u64) {
        if let Some(x) = self.weights.last_mut() {
            *x += w;
        }
    }
}

/// The comm table of the wakeup view (target comms interned as trie nodes).
#[derive(Clone, Debug, Default)]
pub(crate) struct Comms {
    pub(crate) list: Vec<Comm>,
    ix: FxHashMap<Comm, u32>,
}

impl Comms {
    fn node(&mut self, c: Comm) -> NodeId {
        let next = self.list.len() as u32;
        let id = *self.ix.entry(c).or_insert(next);
        if id == next {
            self.list.push(c);
        }
        id | COMM_BIT
    }
}

/// The root of a wait's paths: its group node (`--cgroup-frames`), then its own node.
#[inline]
fn push_root(w: &WaitRecord, b: &mut PathBatch) {
    if let Some(g) = w.group {
        b.push(g, 0);
    }
    b.push(w.node, 0);
}

/// Push the nodes of the levels from the first down to `level` (1-based; 0 = none).
#[inline]
fn push_levels(w: &WaitRecord, b: &mut PathBatch, level: u32, linear: bool, path: &mut Vec<usize>) {
    if linear {
        for h in &w.hops[..level as usize] {
            b.push(h.node, 0);
        }
    } else {
        w.path_to(level, path);
        for &i in path.iter() {
            b.push(w.hops[i].node, 0);
        }
    }
}

/// Applied batches kept for reuse (each keeps the room of the largest batch it held).
const SPARE_BATCHES: usize = 2;

/// Reduces wait records to trie paths for one [`View`] (all the view logic of
/// [`crate::FoldedSink`]: which waits count, marker levels for `[waker unknown]`,
/// `[truncated]`, `[cycle]`, `[lost events]`, `--mode last`, and the comm table of the
/// wakeup view). Implements [`WaitSink`]; every `batch_waits` waits in the view a batch
/// is complete and can be taken with [`Self::take_full`]. At the end, hand the reducer
/// to [`crate::FoldedSink::absorb`] (applies what is left and adopts the comm table).
///
/// ```no_run
/// use chainrec_chain::fold::PathReducer;
/// use chainrec_chain::{Config, Engine, FoldedSink, View};
/// # fn demo(trace: &chainrec_format::MemTrace) {
/// let mut engine = Engine::new(&trace.tables, &trace.meta, Config::default());
/// let mut reducer = PathReducer::new(View::Chains, 4096);
/// let mut folded = FoldedSink::new(View::Chains);
/// for chunk in trace.events.chunks(1 << 16) {
///     engine.process(chunk, &mut reducer);
///     while let Some(batch) = reducer.take_full() {   // send to the trie thread
///         folded.apply(&batch);
///         reducer.recycle(batch);                      // (returned by it)
///     }
/// }
/// engine.finish(&mut reducer);
/// folded.absorb(reducer);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct PathReducer {
    view: View,
    batch_waits: usize,
    cur: PathBatch,
    full: VecDeque<PathBatch>,
    spare: Vec<PathBatch>,
    pub(crate) comms: Comms,
}

impl PathReducer {
    /// A reducer for `view` completing a batch every `batch_waits` waits in the view
    /// (at least 1; a few thousand hide memory latency well in [`crate::FoldedSink::apply`]).
    pub fn new(view: View, batch_waits: usize) -> Self {
        PathReducer {
            view,
            batch_waits: batch_waits.max(1),
            cur: PathBatch::default(),
            full: VecDeque::new(),
            spare: Vec::new(),
            comms: Comms::default(),
        }
    }

    /// The view.
    pub fn view(&self) -> View {
        self.view
    }

    /// The oldest completed batch, if any (in order of completion).
    pub fn take_full(&mut self) -> Option<PathBatch> {
        self.full.pop_front()
    }

    /// The batch being filled (possibly empty), for the end of the trace; call after
    /// [`crate::Engine::finish`] and after taking every full batch.
    pub fn take_partial(&mut self) -> PathBatch {
        let fresh = self.spare.pop().unwrap_or_default();
        std::mem::replace(&mut self.cur, fresh)
    }

    /// Give back an applied batch for reuse of its buffers.
    pub fn recycle(&mut self, mut b: PathBatch) {
        b.clear();
        if self.spare.len() < SPARE_BATCHES {
            self.spare.push(b);
        }
    }

    /// Reduce one wait into `b` (shared with [`crate::FoldedSink`]'s own [`WaitSink`]).
    pub(crate) fn reduce(view: View, comms: &mut Comms, w: &WaitRecord, b: &mut PathBatch) {
        match view {
            View::OffCpu => {
                let Some(d) = w.offcpu_ns() else {
                    b.waits_not_in_view += 1;
                    return;
                };
                push_root(w, b);
                if w.lost {
                    b.push(MARK_LOST, 0);
                }
                b.add_last(d);
                b.end_path();
            }
            View::Chains | View::OffWake => {
                if view == View::Chains && !w.root {
                    b.waits_not_in_view += 1;
                    return;
                }
                if w.preempted() {
                    // Run-queue attribution on: a preemption is its run-queue level alone.
                    if view == View::OffWake || w.runq.is_empty() {
                        b.waits_not_in_view += 1;
                        return;
                    }
                    Self::runq_paths(w, b, 0, true);
                } else if w.hops.is_empty() {
                    let Some(d) = w.offcpu_ns() else {
                        b.waits_not_in_view += 1;
                        return;
                    };
                    push_root(w, b);
                    b.push(MARK_NO_WAKER, 0);
                    if w.lost {
                        b.push(MARK_LOST, 0);
                    }
                    b.add_last(d);
                    b.end_path();
                } else if view == View::OffWake {
                    push_root(w, b);
                    b.push(w.hops[0].node, 0);
                    if w.lost {
                        b.push(MARK_LOST, 0);
                    }
                    b.add_last(w.blocked_ns().unwrap_or(0));
                    b.end_path();
                } else {
                    let last = w.hops.len() - 1;
                    let whole = w.mode == Mode::Last;
                    // A level's own weight: its share less the time its waker was runnable
                    // (that part goes to the level's `[run queue]` paths) and, with
                    // samples, less its on-CPU time (the level's `[on cpu]` paths).
                    let own = |k: usize| {
                        w.hops[k].ns - w.runq_ns_of(k as u32 + 1) - w.oncpu_ns_of(k as u32 + 1)
                    };
                    let markers = |b: &mut PathBatch| {
                        if w.truncated {
                            b.push(MARK_TRUNCATED, 0);
                        }
                        if w.cycle {
                            b.push(MARK_CYCLE, 0);
                        }
                    };
                    let linear = w.is_linear();
                    if !whole && !linear {
                        // A wakeup DAG (earlier waits as branches): one path per level,
                        // carrying that level's own share; the main chain's last level
                        // carries the markers.
                        let chain_end = w.main_chain().last().copied();
                        let mut path = Vec::new();
                        for k in 0..w.hops.len() {
                            w.path_to(k as u32 + 1, &mut path);
                            push_root(w, b);
                            for &i in &path {
                                b.push(w.hops[i].node, 0);
                            }
                            if chain_end == Some(k) {
                                markers(b);
                            }
                            if w.lost {
                                b.push(MARK_LOST, 0);
                            }
                            b.add_last(own(k));
                            b.end_path();
                        }
                    } else if !w.lost || whole {
                        // One path; each level carries its share (last mode: only the
                        // end of the chain, the whole blocked time).
                        push_root(w, b);
                        for (k, h) in w.hops.iter().enumerate() {
                            let o = if whole || k == last { 0 } else { own(k) };
                            b.push(h.node, o);
                        }
                        markers(b);
                        if w.lost {
                            b.push(MARK_LOST, 0);
                        }
                        b.add_last(if whole { w.hops[last].ns } else { own(last) });
                        b.end_path();
                    } else {
                        // Lost events: every level's share goes to a `[lost events]` leaf
                        // under it, one path per level.
                        for k in 0..=last {
                            push_root(w, b);
                            for h in &w.hops[..=k] {
                                b.push(h.node, 0);
                            }
                            if k == last {
                                markers(b);
                            }
                            b.push(MARK_LOST, own(k));
                            b.end_path();
                        }
                    }
                    Self::runq_paths(w, b, 0, linear);
                    Self::oncpu_paths(w, b, linear);
                }
            }
            View::Wakeup => {
                let (Some(h), Some(d)) = (w.hops.first(), w.blocked_ns()) else {
                    b.waits_not_in_view += 1;
                    return;
                };
                b.push(h.node, 0);
                b.push(comms.node(w.comm), 0);
                if w.lost {
                    b.push(MARK_LOST, 0);
                }
                b.add_last(d);
                b.end_path();
            }
        }
        b.waits_in_view += 1;
    }
}

impl PathReducer {
    /// The run-queue paths of a record, from `first_part` on: per part, the path to its
    /// level (the root, then the hops above it) and the holder's `[run queue]` node
    /// weighted by the part (under `[lost events]` when events were lost inside the wait).
    fn runq_paths(w: &WaitRecord, b: &mut PathBatch, first_part: usize, linear: bool) {
        let mut path = Vec::new();
        for p in &w.runq[first_part..] {
            push_root(w, b);
            push_levels(w, b, p.level, linear, &mut path);
            b.push(p.holder, 0);
            if w.lost {
                b.push(MARK_LOST, 0);
            }
            b.add_last(p.ns);
            b.end_path();
        }
    }
}

impl PathReducer {
    /// The on-CPU paths of a record: per part, the path to its level and the `[on cpu]`
    /// node weighted by the part (under `[lost events]` when events were lost inside the
    /// wait), as [`Self::runq_paths`] does for run-queue parts.
    fn oncpu_paths(w: &WaitRecord, b: &mut PathBatch, linear: bool) {
        let mut path = Vec::new();
        for p in &w.oncpu {
            push_root(w, b);
            push_levels(w, b, p.level, linear, &mut path);
            b.push(p.node, 0);
            if w.lost {
                b.push(MARK_LOST, 0);
            }
            b.add_last(p.ns);
            b.end_path();
        }
    }
}

impl WaitSink for PathReducer {
    fn on_wait(&mut self, w: &WaitRecord, _nodes: &NodeTable) {
        PathReducer::reduce(self.view, &mut self.comms, w, &mut self.cur);
        if self.cur.waits_in_view as usize >= self.batch_waits {
            let fresh = self.spare.pop().unwrap_or_default();
            self.full.push_back(std::mem::replace(&mut self.cur, fresh));
        }
    }
}
