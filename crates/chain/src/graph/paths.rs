//! View reduction, separated from trie insertion: a [`PathReducer`] turns each
//! [`WaitRecord`] into trie paths (node ids, root first, with the weight to add at each
//! level) in reusable [`PathBatch`]es, which [`crate::FoldedSink::apply`] inserts. The two
//! halves can run on two threads (engine + reduction on one, insertion on the other).

use crate::engine::mode::Mode;
use crate::engine::nodes::{
    NodeId, NodeTable, MARK_CYCLE, MARK_LOST, MARK_NO_WAKER, MARK_TRUNCATED,
};
use crate::engine::record::{
    is_linear, main_chain, path_to, HopRecord, Level, OnCpuPart, RunqPart, WaitRecord, WaitSink,
};
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

/// What reduction reads of a wait, apart from its levels and parts: taken from a
/// [`WaitRecord`] ([`Head::of`]), or kept in a compact copy of one (`graph::waits`) for
/// reduction on another thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head {
    node: NodeId,
    group: Option<NodeId>,
    comm: Comm,
    offcpu_ns: Option<u64>,
    blocked_ns: Option<u64>,
    last_mode: bool,
    root: bool,
    preempted: bool,
    lost: bool,
    truncated: bool,
    cycle: bool,
}

impl Head {
    /// The head of `w`.
    #[inline]
    pub(crate) fn of(w: &WaitRecord) -> Self {
        Head {
            node: w.node,
            group: w.group,
            comm: w.comm,
            offcpu_ns: w.offcpu_ns(),
            blocked_ns: w.blocked_ns(),
            last_mode: w.mode == Mode::Last,
            root: w.root,
            preempted: w.preempted(),
            lost: w.lost,
            truncated: w.truncated,
            cycle: w.cycle,
        }
    }

    /// True when `view` leaves the wait out whatever its levels: a dedup-hidden wait in
    /// the chains view (most of those that are out).
    #[inline]
    pub(crate) fn surely_out(&self, view: View) -> bool {
        view == View::Chains && !self.root
    }
}

/// A wait as reduction reads it: its [`Head`], levels (a [`WaitRecord`]'s hops or their
/// compact copies) and run-queue and on-CPU parts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitView<'a, L> {
    pub(crate) head: Head,
    pub(crate) hops: &'a [L],
    pub(crate) runq: &'a [RunqPart],
    pub(crate) oncpu: &'a [OnCpuPart],
}

impl<'a> WaitView<'a, HopRecord> {
    /// The view of `w`.
    #[inline]
    pub(crate) fn of(w: &'a WaitRecord) -> Self {
        WaitView {
            head: Head::of(w),
            hops: &w.hops,
            runq: &w.runq,
            oncpu: &w.oncpu,
        }
    }
}

impl<L: Level> WaitView<'_, L> {
    /// [`WaitRecord::runq_ns_of`].
    fn runq_ns_of(&self, level: u32) -> u64 {
        self.runq
            .iter()
            .filter(|p| p.level == level)
            .map(|p| p.ns)
            .sum()
    }

    /// [`WaitRecord::oncpu_ns_of`].
    fn oncpu_ns_of(&self, level: u32) -> u64 {
        self.oncpu
            .iter()
            .filter(|p| p.level == level)
            .map(|p| p.ns)
            .sum()
    }

    /// The root of the wait's paths: its group node (`--cgroup-frames`), then its own node.
    #[inline]
    fn push_root(&self, b: &mut PathBatch) {
        if let Some(g) = self.head.group {
            b.push(g, 0);
        }
        b.push(self.head.node, 0);
    }

    /// Push the nodes of the levels from the first down to `level` (1-based; 0 = none).
    #[inline]
    fn push_levels(&self, b: &mut PathBatch, level: u32, linear: bool, path: &mut Vec<usize>) {
        if linear {
            for h in &self.hops[..level as usize] {
                b.push(h.level().node, 0);
            }
        } else {
            path_to(self.hops, level, path);
            for &i in path.iter() {
                b.push(self.hops[i].level().node, 0);
            }
        }
    }
}

/// Applied batches kept for reuse (each keeps the room of the largest batch it held).
const SPARE_BATCHES: usize = 2;

/// A batch whose buffers can be emptied for reuse.
pub(crate) trait Reuse: Default {
    /// Empty it, keeping its buffers.
    fn reset(&mut self);
}

impl Reuse for PathBatch {
    fn reset(&mut self) {
        self.clear();
    }
}

/// The batch being filled, the completed ones not yet taken, and spares given back.
#[derive(Clone, Debug, Default)]
pub(crate) struct Batches<B> {
    pub(crate) cur: B,
    full: VecDeque<B>,
    spare: Vec<B>,
}

impl<B: Reuse> Batches<B> {
    /// The batch being filled is complete: queue it and start another.
    pub(crate) fn complete(&mut self) {
        let fresh = self.spare.pop().unwrap_or_default();
        self.full.push_back(std::mem::replace(&mut self.cur, fresh));
    }

    /// The oldest completed batch, if any.
    pub(crate) fn take_full(&mut self) -> Option<B> {
        self.full.pop_front()
    }

    /// The batch being filled (possibly empty).
    pub(crate) fn take_partial(&mut self) -> B {
        let fresh = self.spare.pop().unwrap_or_default();
        std::mem::replace(&mut self.cur, fresh)
    }

    /// Keep a used batch for reuse (up to [`SPARE_BATCHES`]).
    pub(crate) fn recycle(&mut self, mut b: B) {
        b.reset();
        if self.spare.len() < SPARE_BATCHES {
            self.spare.push(b);
        }
    }
}

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
    batches: Batches<PathBatch>,
    pub(crate) comms: Comms,
    /// Scratch of the reduction (level paths, the main chain).
    path: Vec<usize>,
    chain: Vec<usize>,
}

impl PathReducer {
    /// A reducer for `view` completing a batch every `batch_waits` waits in the view
    /// (at least 1; a few thousand hide memory latency well in [`crate::FoldedSink::apply`]).
    pub fn new(view: View, batch_waits: usize) -> Self {
        PathReducer {
            view,
            batch_waits: batch_waits.max(1),
            batches: Batches::default(),
            comms: Comms::default(),
            path: Vec::new(),
            chain: Vec::new(),
        }
    }

    /// The view.
    pub fn view(&self) -> View {
        self.view
    }

    /// The oldest completed batch, if any (in order of completion).
    pub fn take_full(&mut self) -> Option<PathBatch> {
        self.batches.take_full()
    }

    /// The batch being filled (possibly empty), for the end of the trace; call after
    /// [`crate::Engine::finish`] and after taking every full batch.
    pub fn take_partial(&mut self) -> PathBatch {
        self.batches.take_partial()
    }

    /// Give back an applied batch for reuse of its buffers.
    pub fn recycle(&mut self, b: PathBatch) {
        self.batches.recycle(b);
    }

    /// Reduce one wait into `b` (shared with [`crate::FoldedSink`]'s own [`WaitSink`]);
    /// `path` and `chain` are scratch.
    pub(crate) fn reduce<L: Level>(
        view: View,
        comms: &mut Comms,
        w: &WaitView<'_, L>,
        b: &mut PathBatch,
        path: &mut Vec<usize>,
        chain: &mut Vec<usize>,
    ) {
        let head = &w.head;
        match view {
            View::OffCpu => {
                let Some(d) = head.offcpu_ns else {
                    b.waits_not_in_view += 1;
                    return;
                };
                w.push_root(b);
                if head.lost {
                    b.push(MARK_LOST, 0);
                }
                b.add_last(d);
                b.end_path();
            }
            View::Chains | View::OffWake => {
                if head.surely_out(view) {
                    b.waits_not_in_view += 1;
                    return;
                }
                if head.preempted {
                    // Run-queue attribution on: a preemption is its run-queue level alone.
                    if view == View::OffWake || w.runq.is_empty() {
                        b.waits_not_in_view += 1;
                        return;
                    }
                    Self::runq_paths(w, b, true, path);
                } else if w.hops.is_empty() {
                    let Some(d) = head.offcpu_ns else {
                        b.waits_not_in_view += 1;
                        return;
                    };
                    w.push_root(b);
                    b.push(MARK_NO_WAKER, 0);
                    if head.lost {
                        b.push(MARK_LOST, 0);
                    }
                    b.add_last(d);
                    b.end_path();
                } else if view == View::OffWake {
                    w.push_root(b);
                    b.push(w.hops[0].level().node, 0);
                    if head.lost {
                        b.push(MARK_LOST, 0);
                    }
                    b.add_last(head.blocked_ns.unwrap_or(0));
                    b.end_path();
                } else {
                    let hops = w.hops;
                    let last = hops.len() - 1;
                    let whole = head.last_mode;
                    // A level's own weight: its share less the time its waker was runnable
                    // (that part goes to the level's `[run queue]` paths) and, with
                    // samples, less its on-CPU time (the level's `[on cpu]` paths).
                    let own = |k: usize| {
                        hops[k].level().ns
                            - w.runq_ns_of(k as u32 + 1)
                            - w.oncpu_ns_of(k as u32 + 1)
                    };
                    let markers = |b: &mut PathBatch| {
                        if head.truncated {
                            b.push(MARK_TRUNCATED, 0);
                        }
                        if head.cycle {
                            b.push(MARK_CYCLE, 0);
                        }
                    };
                    let linear = is_linear(hops);
                    if !whole && !linear {
                        // A wakeup DAG (earlier waits as branches): one path per level,
                        // carrying that level's own share; the main chain's last level
                        // carries the markers.
                        main_chain(hops, chain);
                        let chain_end = chain.last().copied();
                        for k in 0..hops.len() {
                            path_to(hops, k as u32 + 1, path);
                            w.push_root(b);
                            for &i in path.iter() {
                                b.push(hops[i].level().node, 0);
                            }
                            if chain_end == Some(k) {
                                markers(b);
                            }
                            if head.lost {
                                b.push(MARK_LOST, 0);
                            }
                            b.add_last(own(k));
                            b.end_path();
                        }
                    } else if !head.lost || whole {
                        // One path; each level carries its share (last mode: only the
                        // end of the chain, the whole blocked time).
                        w.push_root(b);
                        for (k, h) in hops.iter().enumerate() {
                            let o = if whole || k == last { 0 } else { own(k) };
                            b.push(h.level().node, o);
                        }
                        markers(b);
                        if head.lost {
                            b.push(MARK_LOST, 0);
                        }
                        b.add_last(if whole {
                            hops[last].level().ns
                        } else {
                            own(last)
                        });
                        b.end_path();
                    } else {
                        // Lost events: every level's share goes to a `[lost events]` leaf
                        // under it, one path per level.
                        for k in 0..=last {
                            w.push_root(b);
                            for h in &hops[..=k] {
                                b.push(h.level().node, 0);
                            }
                            if k == last {
                                markers(b);
                            }
                            b.push(MARK_LOST, own(k));
                            b.end_path();
                        }
                    }
                    Self::runq_paths(w, b, linear, path);
                    Self::oncpu_paths(w, b, linear, path);
                }
            }
            View::Wakeup => {
                let (Some(h), Some(d)) = (w.hops.first(), head.blocked_ns) else {
                    b.waits_not_in_view += 1;
                    return;
                };
                b.push(h.level().node, 0);
                b.push(comms.node(head.comm), 0);
                if head.lost {
                    b.push(MARK_LOST, 0);
                }
                b.add_last(d);
                b.end_path();
            }
        }
        b.waits_in_view += 1;
    }

    /// The run-queue paths of a wait: per part, the path to its level (the root, then the
    /// hops above it) and the holder's `[run queue]` node weighted by the part (under
    /// `[lost events]` when events were lost inside the wait).
    fn runq_paths<L: Level>(
        w: &WaitView<'_, L>,
        b: &mut PathBatch,
        linear: bool,
        path: &mut Vec<usize>,
    ) {
        let parts = w.runq.iter().map(|p| (p.level, p.holder, p.ns));
        Self::part_paths(w, b, linear, path, parts);
    }

    /// The on-CPU paths of a wait: per part, the path to its level and the `[on cpu]`
    /// node weighted by the part, as [`Self::runq_paths`] does for run-queue parts.
    fn oncpu_paths<L: Level>(
        w: &WaitView<'_, L>,
        b: &mut PathBatch,
        linear: bool,
        path: &mut Vec<usize>,
    ) {
        let parts = w.oncpu.iter().map(|p| (p.level, p.node, p.ns));
        Self::part_paths(w, b, linear, path, parts);
    }

    /// Per part `(level, node, ns)`: the path to its level, then its node weighted by it
    /// (under `[lost events]` when events were lost inside the wait).
    #[inline]
    fn part_paths<L: Level>(
        w: &WaitView<'_, L>,
        b: &mut PathBatch,
        linear: bool,
        path: &mut Vec<usize>,
        parts: impl Iterator<Item = (u32, NodeId, u64)>,
    ) {
        for (level, node, ns) in parts {
            w.push_root(b);
            w.push_levels(b, level, linear, path);
            b.push(node, 0);
            if w.head.lost {
                b.push(MARK_LOST, 0);
            }
            b.add_last(ns);
            b.end_path();
        }
    }

    /// Reduce one wait into the batch being filled, completing it every `batch_waits`
    /// waits in the view.
    pub(crate) fn add<L: Level>(&mut self, w: &WaitView<'_, L>) {
        PathReducer::reduce(
            self.view,
            &mut self.comms,
            w,
            &mut self.batches.cur,
            &mut self.path,
            &mut self.chain,
        );
        if self.batches.cur.waits_in_view as usize >= self.batch_waits {
            self.batches.complete();
        }
    }

    /// Count `n` waits the view leaves out (found so before reduction: [`Head::surely_out`]).
    pub(crate) fn add_out(&mut self, n: u64) {
        self.batches.cur.waits_not_in_view += n;
    }
}

impl WaitSink for PathReducer {
    fn on_wait(&mut self, w: &WaitRecord, _nodes: &NodeTable) {
        self.add(&WaitView::of(w));
    }
}
