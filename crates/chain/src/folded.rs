//! Folded aggregation of the record stream for the four views, and the interned chain
//! graph.

use crate::fx::FxHashMap;
use crate::nodes::{NodeId, NodeTable};
use crate::paths::{Comms, PathBatch, PathReducer};
use crate::record::{WaitRecord, WaitSink};
use crate::render::{self, Pieces, WriteSummary};
use crate::trie::{PathTrie, NO_PARENT};
use crate::ChainError;
use chainrec_format::{RecordingMeta, StackId, Tables};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::BTreeMap;
use std::io::{self, Write};

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

/// Aggregates [`WaitRecord`]s into folded paths (a trie of interned nodes, see
/// `docs/ENGINE.md`). Fed either record by record through [`WaitSink`], or with
/// [`PathBatch`]es from a [`PathReducer`] (possibly on another thread) through
/// [`Self::apply`] and, at the end, [`Self::absorb`]. Do not mix both ways for the
/// wakeup view (each side interns target comms in its own table).
#[derive(Clone, Debug)]
pub struct FoldedSink {
    view: View,
    trie: PathTrie,
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
            comms: Comms::default(),
            one: PathBatch::default(),
            waits_not_in_view: 0,
            waits_in_view: 0,
        }
    }

    /// The view.
    pub fn view(&self) -> View {
        self.view
    }

    /// Insert a batch of reduced waits (from a [`PathReducer`] of the same view) and add
    /// its wait counters. Batches of a few thousand waits are inserted several times
    /// faster per step than single waits (the lookups of independent paths overlap).
    pub fn apply(&mut self, batch: &PathBatch) {
        self.trie.apply(batch);
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

    /// Heap bytes held by the path trie (entries and index, allocated capacity).
    pub fn trie_bytes(&self) -> usize {
        self.trie.heap_bytes()
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
        f: impl FnMut(&str, u64),
    ) {
        let pieces = Pieces::build(&self.trie, &self.comms.list, nodes, tables, meta);
        let order = render::preorder(&self.trie);
        render::walk(&self.trie, &pieces, &order, 0..order.len(), f);
    }

    /// Write every line of [`Self::for_each_line`] (same order) as `{line} {weight}\n`
    /// with the weight in `unit`, rounded to nearest; lines that round to 0 are left out
    /// and counted in the summary. Numbers are formatted without `core::fmt`; with more
    /// than one rayon thread, ranges of the trie are rendered in parallel into bounded
    /// per-task buffers and written in order by the calling thread (`out` need not be
    /// `Send`). On a write error, rendering stops and the error is returned.
    pub fn write_folded(
        &self,
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
        unit: Unit,
        out: &mut dyn Write,
    ) -> io::Result<WriteSummary> {
        let pieces = Pieces::build(&self.trie, &self.comms.list, nodes, tables, meta);
        render::write_folded(&self.trie, &pieces, unit, out)
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

    /// The interned chain graph (see [`ChainGraph`]).
    pub fn chain_graph(&self) -> ChainGraph {
        let entries: Vec<(u32, NodeId, u64)> = self
            .trie
            .iter()
            .map(|e| (e.parent, e.node, e.weight))
            .collect();
        let mut total: Vec<u64> = entries.iter().map(|e| e.2).collect();
        for i in (0..entries.len()).rev() {
            let p = entries[i].0;
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
        for (i, &(p, n, _)) in entries.iter().enumerate() {
            let b = ix(&mut g, n);
            if p == NO_PARENT {
                continue;
            }
            let a = ix(&mut g, entries[p as usize].1);
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
        PathReducer::reduce(self.view, &mut self.comms, w, &mut b);
        self.apply(&b);
        b.clear();
        self.one = b;
    }
}

/// Frames of stack `id`, leaf first. Reserved ids: NONE → nothing; SKIPPED →
/// `[no stack: wait < Nus]`; FAILED, dangling or unknown reserved → `[missing stack]`;
/// USER_PREEMPTED → `[no user stack: preempted]`. Unresolved addresses: see
/// [`unresolved_or_name`].
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
                .map(|&a| unresolved_or_name(tables.symbol(st, a)))
                .collect(),
            _ => vec!["[missing stack]".to_string()],
        },
    }
}

/// A frame's name; without one, `[MODULE+0xOFFSET]` (file offset in the module, stable
/// across processes and enough to re-symbolize), or `[unknown]` for an address in no
/// known module. Such addresses are mostly what a frame-pointer walk reads past code
/// built without frame pointers: printing each as a raw address would split one stack
/// into as many flame-graph towers as there are stale values.
fn unresolved_or_name(sym: Option<&chainrec_format::SymbolEntry>) -> String {
    match sym {
        Some(s) => match (&s.name, &s.module, s.file_offset) {
            (Some(name), _, _) => name.clone(),
            (None, Some(module), Some(off)) => {
                let base = module.rsplit('/').next().unwrap_or(module);
                format!("[{base}+0x{off:x}]")
            }
            _ => "[unknown]".to_string(),
        },
        None => "[unknown]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainrec_format::{StackEntry, StackKind, SymbolEntry};

    #[test]
    fn unresolved_frames_name_their_module_or_say_unknown() {
        let mut t = Tables::default();
        let id = StackId(StackId::FIRST_REAL);
        t.stacks.insert(
            id,
            StackEntry {
                id,
                kind: StackKind::User,
                tgid: 7,
                frames: vec![0x1000, 0x2000, 0x3000, 0x4000],
            },
        );
        let sym = |addr, name: Option<&str>, module: Option<&str>| SymbolEntry {
            kind: StackKind::User,
            tgid: 7,
            addr,
            name: name.map(str::to_string),
            offset: 0,
            module: module.map(str::to_string),
            build_id: None,
            file_offset: module.map(|_| addr - 0x800),
        };
        for s in [
            sym(0x1000, Some("__write"), Some("/usr/lib/libc.so.6")),
            sym(0x2000, None, Some("/usr/lib/libc.so.6")),
            sym(0x3000, None, None),
        ] {
            t.symbols.insert((s.kind, s.tgid, s.addr), s);
        }
        // 0x4000 has no symbol entry at all.
        assert_eq!(
            stack_frames(&t, id, 0),
            ["__write", "[libc.so.6+0x1800]", "[unknown]", "[unknown]"]
        );
    }
}
