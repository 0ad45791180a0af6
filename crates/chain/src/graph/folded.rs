//! Folded aggregation of the record stream for the four views, and the interned chain
//! graph.

use crate::engine::nodes::{NodeId, NodeTable};
use crate::engine::record::{WaitRecord, WaitSink};
use crate::graph::pathframes::{FrameNamer, PathVisit};
use crate::graph::paths::{Comms, PathBatch, PathReducer, WaitView};
use crate::graph::render::{self, PieceNames, Pieces, WriteSummary};
use crate::graph::spill::{Naming, Spill, SpillTo};
use crate::graph::trie::{PathTrie, NO_PARENT};
use crate::graph::views::{Unit, View};
use chainrec_format::{RecordingMeta, Tables};
use petgraph::graph::{DiGraph, NodeIndex};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Mutex;

/// The interned chain graph: nodes are [`NodeId`]s of the engine's [`NodeTable`]
/// (markers included); an edge goes from a waiting node to its waker, weighted by the
/// total nanoseconds attributed through it.
pub type ChainGraph = DiGraph<NodeId, u64>;

/// Aggregates [`WaitRecord`]s into folded paths (a trie of interned nodes, see
/// `docs/ENGINE.md`). Fed either record by record through [`WaitSink`], or with
/// [`PathBatch`]es from a [`PathReducer`] (possibly on another thread) through
/// [`Self::apply`] and, at the end, [`Self::absorb`]. Do not mix both ways for the
/// wakeup view (each side interns target comms in its own table).
#[derive(Debug)]
pub struct FoldedSink {
    view: View,
    trie: PathTrie,
    /// Runs written out when the trie outgrew its budget ([`Self::spill_to`]).
    spill: Option<Mutex<Spill>>,
    comms: Comms,
    /// Scratch batch of the record-by-record path.
    one: PathBatch,
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
            trie: PathTrie::default(),
            spill: None,
            comms: Comms::default(),
            one: PathBatch::default(),
            waits_not_in_view: 0,
            waits_in_view: 0,
        }
    }

    /// Bound the trie's memory: whenever it outgrows `to.budget_bytes` after a batch
    /// ([`Self::apply`]), it is written out as a run under `to.dir` and emptied, and
    /// [`Self::write_folded`] merges the runs into exactly the output of one trie (order
    /// and weights; `graph::spill`). Only `write_folded` sees the whole output: the other
    /// readers of a sink that spilled see the part since the last run.
    pub fn spill_to(&mut self, to: &SpillTo) -> io::Result<()> {
        self.spill = Some(Mutex::new(Spill::new(to)?));
        Ok(())
    }

    /// Every wait is in: when runs were written out, the trie left is written as the last
    /// one and freed, so that merging them ([`Self::write_folded`]) does not hold it too.
    pub fn finish_spill(&mut self) {
        if let Some(Ok(s)) = self.spill.as_mut().map(Mutex::get_mut) {
            if s.runs > 0 {
                if self.trie.len() > 0 {
                    s.spill(&mut self.trie);
                }
                // Its room, kept between runs, is not needed by the merge.
                self.trie = PathTrie::default();
            }
        }
    }

    /// Runs written out so far and their bytes (0, 0 without [`Self::spill_to`]).
    pub fn spilled(&self) -> (u32, u64) {
        match self.spill.as_ref().map(Mutex::lock) {
            Some(Ok(s)) => (s.runs, s.bytes),
            _ => (0, 0),
        }
    }

    /// Empty the aggregation (paths, comms, counters), keeping its allocations: one sink
    /// reused for many single waits (`chainrec serve`'s waits through a frame) instead of a
    /// new one each. Not for a sink that spills ([`Self::spill_to`]): its runs stay.
    pub fn clear(&mut self) {
        self.trie.clear();
        self.comms = Comms::default();
        self.waits_in_view = 0;
        self.waits_not_in_view = 0;
    }

    /// The view.
    pub fn view(&self) -> View {
        self.view
    }

    /// Insert a batch of reduced waits (from a [`PathReducer`] of the same view) and add
    /// its wait counters. Batches of a few thousand waits are inserted several times
    /// faster per step than single waits (the lookups of independent paths overlap).
    pub fn apply(&mut self, batch: &PathBatch) {
        if let Some(Ok(s)) = self.spill.as_mut().map(Mutex::get_mut) {
            if s.due_before(&self.trie, batch.steps()) {
                s.spill(&mut self.trie);
            }
        }
        self.trie.apply(batch);
        if let Some(Ok(s)) = self.spill.as_mut().map(Mutex::get_mut) {
            if s.due(&self.trie) {
                s.spill(&mut self.trie);
            }
        }
        self.waits_in_view += batch.waits_in_view;
        self.waits_not_in_view += batch.waits_not_in_view;
    }

    /// End of a reducer's stream: apply its completed and partial batches (in order) and
    /// adopt its comm table (wakeup view). Panics when both this sink and the reducer
    /// interned comms, or when the views differ.
    pub fn absorb(&mut self, mut reducer: PathReducer) {
        assert_eq!(reducer.view(), self.view, "reducer of another view");
        while let Some(b) = reducer.take_full() {
            self.apply(&b);
        }
        let b = reducer.take_partial();
        self.apply(&b);
        if !reducer.comms.list.is_empty() {
            assert!(
                self.comms.list.is_empty(),
                "comms interned both by the sink and by a reducer"
            );
            self.comms = reducer.comms;
        }
    }

    /// Free the path lookup index (about a third of the trie's memory) once every wait
    /// is in, so that rendering does not add its buffers on top of it. Insertion still
    /// works afterwards (it rebuilds the index).
    pub fn release_index(&mut self) {
        self.trie.release_index();
    }

    /// Number of distinct paths.
    pub fn paths(&self) -> usize {
        self.trie.len()
    }

    /// Total nanoseconds of every path (the sum of all folded weights, exact).
    pub fn total_ns(&self) -> u64 {
        self.trie.iter().map(|e| e.weight).sum()
    }

    /// Heap bytes held by the path trie (entries and index, allocated capacity).
    pub fn trie_bytes(&self) -> usize {
        self.trie.heap_bytes()
    }

    /// Call `f(line, ns)` for every distinct path with a non-zero weight, in depth-first
    /// order of the path trie, without materializing all lines (memory stays bounded by
    /// the trie). Nodes are interned by what they print, so two paths rarely render to the
    /// same text (two interrupt sources of one name can); consumers that need one line per
    /// text must sum them, as flamegraph.pl and inferno do. See [`Self::folded_ns`] for
    /// the aggregated map.
    pub fn for_each_line(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
        f: impl FnMut(&str, u64),
    ) {
        let (pieces, order) = self.prepare(nodes, tables, meta);
        render::walk(&self.trie, &pieces, &order, 0..order.len(), f);
    }

    /// Visit every path of the trie with its frames structured ([`PathVisit`]: kinds and
    /// chain levels known, no text to re-parse), in the order of [`Self::for_each_line`]
    /// (which is these frames joined by `;`). Every path is visited, weight 0 included
    /// (inner paths); `f` returns whether to descend into the paths below the one it is
    /// given, so a caller can skip subtrees too small to matter (their weight is in
    /// [`PathVisit::subtree_ns`]). Memory: the trie plus one copy of each node's frames.
    pub fn for_each_path(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
        f: impl FnMut(&PathVisit<'_>) -> bool,
    ) {
        let mut namer = FrameNamer::new(tables, meta.stack_threshold_ns);
        crate::graph::pathframes::walk_paths(&self.trie, &self.comms.list, nodes, &mut namer, f);
    }

    /// Write every line of [`Self::for_each_line`] (same order) as `{line} {weight}\n`
    /// with the weight in `unit`, rounded to nearest; lines that round to 0 are left out
    /// and counted in the summary. Numbers are formatted without `core::fmt`; with more
    /// than one rayon thread, ranges of the trie are rendered in parallel into bounded
    /// per-task buffers and written in order by the calling thread (`out` need not be
    /// `Send`). On a write error, rendering stops and the error is returned. A sink that
    /// spilled ([`Self::spill_to`]) merges its runs from disk here: a run that could not
    /// be written, or does not read back as written (truncated, changed), is an error
    /// carrying a [`crate::SpillError`] that names the file and what was wrong.
    pub fn write_folded(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
        unit: Unit,
        out: &mut dyn Write,
    ) -> io::Result<WriteSummary> {
        if let Some(spill) = &self.spill {
            let mut spill = spill
                .lock()
                .map_err(|_| io::Error::other("spill state poisoned by a panic"))?;
            if spill.runs > 0 {
                let naming = Naming {
                    comms: &self.comms.list,
                    nodes,
                    tables,
                    meta,
                };
                return spill.write_folded(&self.trie, naming, unit, out);
            }
        }
        let (pieces, order) = self.prepare(nodes, tables, meta);
        render::write_folded(&self.trie, &pieces, &order, unit, out)
    }

    /// The rendered pieces of every node and the trie's preorder, built side by side (both
    /// only read the trie; on a large graph each is a sequential pass of ~0.1 s).
    fn prepare(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
    ) -> (Pieces, Vec<u32>) {
        rayon::join(
            || Pieces::build(&self.trie, &self.comms.list, nodes, tables, meta),
            || crate::graph::trie::preorder(&self.trie),
        )
    }

    /// Nanoseconds of the lines that pass through the frame whose path is `prefix` (its
    /// frames joined by `;`, a line's prefix at a frame boundary): the sum of
    /// [`Self::for_each_line`]'s weights over lines `prefix` or `prefix;...`, found without
    /// rendering a line. Each path is compared piece by piece and left at the first piece
    /// that differs; `names` keeps the pieces' text across calls.
    pub fn ns_through(&self, nodes: &NodeTable, names: &mut PieceNames<'_>, prefix: &str) -> u64 {
        use render::Through;
        let start = if prefix.is_empty() {
            Through::Matched
        } else {
            Through::Partial(0)
        };
        let mut state: Vec<Through> = Vec::with_capacity(self.trie.len());
        let mut ns = 0u64;
        // Parents have smaller ids than their children.
        for e in self.trie.iter() {
            let before = if e.parent == NO_PARENT {
                start
            } else {
                state[e.parent as usize]
            };
            let now = match before {
                Through::Partial(_) if e.node & crate::graph::paths::COMM_BIT != 0 => {
                    let comm = self.comms.list[(e.node & !crate::graph::paths::COMM_BIT) as usize];
                    before.then(prefix, &comm.as_str())
                }
                Through::Partial(_) => {
                    let first = crate::graph::pathframes::first_of_path(&self.trie, nodes, &e);
                    before.then(prefix, names.piece(nodes, e.node, first))
                }
                s => s,
            };
            if now == Through::Matched {
                ns += e.weight;
            }
            state.push(now);
        }
        ns
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
        self.folded_ns(nodes, tables, meta)
            .into_iter()
            .map(|(l, w)| (l, unit.round(w)))
            .filter(|(_, w)| *w > 0)
            .collect()
    }

    /// The interned chain graph (see [`ChainGraph`]).
    pub fn chain_graph(&self) -> ChainGraph {
        // Subtree totals (children have larger ids than their parent).
        let mut total: Vec<u64> = self.trie.iter().map(|e| e.weight).collect();
        for i in (0..total.len()).rev() {
            let p = self.trie.get(i as u32).parent;
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
        for (i, e) in self.trie.iter().enumerate() {
            let b = ix(&mut g, e.node);
            if e.parent == NO_PARENT {
                continue;
            }
            let a = ix(&mut g, self.trie.get(e.parent).node);
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
        let mut b = std::mem::take(&mut self.one);
        let (mut path, mut chain) = (Vec::new(), Vec::new());
        PathReducer::reduce(
            self.view,
            &mut self.comms,
            &WaitView::of(w),
            &mut b,
            &mut path,
            &mut chain,
        );
        self.apply(&b);
        b.clear();
        self.one = b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::frames::same_rendering_stacks;
    use chainrec_format::{StackEntry, StackId, StackKind, SymbolEntry};

    #[test]
    fn same_named_threads_of_different_processes_share_one_node() {
        let t = Tables::default();
        let mut nodes = NodeTable::for_tables(&t);
        let comm = chainrec_format::Comm::new;
        let (web1, web2, db) = (
            nodes.ident(comm("web"), 10),
            nodes.ident(comm("web"), 20),
            nodes.ident(comm("db"), 10),
        );
        assert_ne!(
            web1, web2,
            "identities stay per process (filters and records use the tgid)"
        );
        let k = StackId(StackId::FIRST_REAL);
        let node = nodes.task(web1, k, StackId::NONE);
        assert_eq!(nodes.task(web2, k, StackId::NONE), node);
        assert_ne!(nodes.task(db, k, StackId::NONE), node);
        assert_ne!(nodes.task(web2, StackId::NONE, StackId::NONE), node);
        assert_eq!(nodes.get(node).name(), "web");
        assert_eq!(nodes.ident_of(web2), (comm("web"), 20));
    }

    #[test]
    fn stacks_that_render_alike_share_one_node() {
        let mut t = Tables::default();
        let user = |id: u32, frames: Vec<u64>| StackEntry {
            id: StackId(id),
            kind: StackKind::User,
            tgid: 7,
            frames,
        };
        // 16 and 17: two call sites in `main` under `__write`; 18: junk frame pointers (no
        // module) in place of `main`, twice with different junk; 20: another function.
        for st in [
            user(16, vec![0x1000, 0x2000]),
            user(17, vec![0x1000, 0x2010]),
            user(18, vec![0x1000, 0x25040348]),
            user(19, vec![0x1000, 0x1e1f8e10]),
            user(20, vec![0x1000, 0x3000]),
        ] {
            t.stacks.insert(st.id, st);
        }
        let sym = |addr, name: &str| SymbolEntry {
            kind: StackKind::User,
            tgid: 7,
            addr,
            name: Some(name.to_string()),
            offset: 0,
            module: None,
            build_id: None,
            file_offset: None,
        };
        for s in [
            sym(0x1000, "__write"),
            sym(0x2000, "main"),
            sym(0x2010, "main"),
            sym(0x3000, "other"),
        ] {
            t.symbols.insert(&s);
        }
        let same = same_rendering_stacks(&t);
        let mut pairs: Vec<(u32, u32)> = same.iter().map(|(a, b)| (a.0, b.0)).collect();
        pairs.sort_unstable();
        assert_eq!(pairs, [(17, 16), (19, 18)]);

        let mut nodes = NodeTable::for_tables(&t);
        let ident = nodes.ident(chainrec_format::Comm::new("app"), 7);
        let node = |nodes: &mut NodeTable, u| nodes.task(ident, StackId::NONE, StackId(u));
        let (a, b, c, d, e) = (
            node(&mut nodes, 16),
            node(&mut nodes, 17),
            node(&mut nodes, 18),
            node(&mut nodes, 19),
            node(&mut nodes, 20),
        );
        assert_eq!((a, c), (b, d));
        assert!(a != c && a != e && c != e);

        // Metal nodes too: two interrupt stacks that differ only in an offset inside
        // `hrtimer_wakeup` are one `[hardirq: timer]` node, asked for either way round.
        for (id, addr) in [(21, 0x9000), (22, 0x9010)] {
            let st = StackEntry {
                id: StackId(id),
                kind: StackKind::Kernel,
                tgid: 0,
                frames: vec![addr],
            };
            t.stacks.insert(st.id, st);
            let s = SymbolEntry {
                kind: StackKind::Kernel,
                tgid: 0,
                ..sym(addr, "hrtimer_wakeup")
            };
            t.symbols.insert(&s);
        }
        let mut nodes = NodeTable::for_tables(&t);
        let irq = chainrec_format::WakeContext::HardIrq;
        let m22 = nodes.metal(irq, 0, StackId(22), &t);
        let m21 = nodes.metal(irq, 0, StackId(21), &t);
        assert_eq!((m21, nodes.metal(irq, 0, StackId(22), &t)), (m22, m22));
        assert_eq!(nodes.get(m21).name(), "[hardirq: timer]");
        assert_eq!(nodes.get(m21).kstack, StackId(21));
    }
}
