//! What a run leaves for the renderers, in one value each: the finished chain graph of a
//! fold ([`Graph`]), or any other sink with what its records refer to ([`Collected`]).

use crate::engine::nodes::NodeTable;
use crate::graph::folded::{ChainGraph, FoldedSink};
use crate::graph::pathframes::PathVisit;
use crate::graph::render::WriteSummary;
use crate::graph::views::{Unit, View};
use chainrec_format::{RecordingMeta, Tables};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The trace a run read, as its results need it: the tables that name frames, the
/// metadata, and where the trace starts (for times relative to it).
#[derive(Clone, Copy, Debug)]
pub struct TraceRef<'t> {
    /// Stacks, symbols, tasks, irq sources.
    pub tables: &'t Tables,
    /// The recording's metadata.
    pub meta: &'t RecordingMeta,
    /// Trace start (trace clock, ns): see [`crate::Analysis::start_ns`].
    pub start_ns: u64,
}

/// A finished run into a sink that keeps waits of its own (the longest waits of `top`, the
/// samples of a pprof profile), with the interned nodes its records refer to and the trace
/// they came from: what renders it, in one value, as [`Graph`] is for a fold. Built by
/// [`crate::Analysis::collect`], or from an [`crate::Engine`] run by hand.
#[derive(Debug)]
pub struct Collected<'t, S> {
    sink: S,
    nodes: NodeTable,
    trace: TraceRef<'t>,
}

impl<'t, S> Collected<'t, S> {
    /// `sink` after a run whose records refer to `nodes` (the engine's, after
    /// [`crate::Engine::finish`]), over `trace`.
    pub fn new(sink: S, nodes: NodeTable, trace: TraceRef<'t>) -> Self {
        Collected { sink, nodes, trace }
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The interned nodes.
    pub fn nodes(&self) -> &NodeTable {
        &self.nodes
    }

    /// The trace read.
    pub fn trace(&self) -> TraceRef<'t> {
        self.trace
    }

    /// The trace's tables (stacks, symbols, names).
    pub fn tables(&self) -> &'t Tables {
        self.trace.tables
    }

    /// The trace's metadata.
    pub fn meta(&self) -> &'t RecordingMeta {
        self.trace.meta
    }

    /// The sink, for what comes after the run (a writer's footer).
    pub fn into_sink(self) -> S {
        self.sink
    }
}

impl<'t, A, B> Collected<'t, (A, B)> {
    /// One value per sink of a pair run together (each with a copy of the nodes).
    pub fn unzip(self) -> (Collected<'t, A>, Collected<'t, B>) {
        let (a, b) = self.sink;
        (
            Collected::new(a, self.nodes.clone(), self.trace),
            Collected::new(b, self.nodes, self.trace),
        )
    }
}

impl<'t> From<Collected<'t, FoldedSink>> for Graph<'t> {
    fn from(c: Collected<'t, FoldedSink>) -> Self {
        Graph::new(c.sink, c.nodes, c.trace.tables, c.trace.meta)
    }
}

/// A finished chain graph: the folded paths of one view (the path trie), the interned
/// nodes they refer to, and the trace's tables and metadata that name their frames. Every
/// renderer (folded text, SVG, the pprof and top reports of a fold) takes this alone;
/// nothing of the engine is kept.
#[derive(Debug)]
pub struct Graph<'t> {
    folded: FoldedSink,
    nodes: NodeTable,
    tables: &'t Tables,
    meta: &'t RecordingMeta,
}

impl<'t> Graph<'t> {
    /// The graph of `folded`, whose paths refer to `nodes` (the engine's, after
    /// [`crate::Engine::finish`]), over a trace with these tables and metadata.
    pub fn new(
        folded: FoldedSink,
        nodes: NodeTable,
        tables: &'t Tables,
        meta: &'t RecordingMeta,
    ) -> Self {
        Graph {
            folded,
            nodes,
            tables,
            meta,
        }
    }

    /// The view the paths were folded for.
    pub fn view(&self) -> View {
        self.folded.view()
    }

    /// Waits aggregated into the paths.
    pub fn waits_in_view(&self) -> u64 {
        self.folded.waits_in_view
    }

    /// Waits seen but not part of this view.
    pub fn waits_not_in_view(&self) -> u64 {
        self.folded.waits_not_in_view
    }

    /// Distinct paths (trie entries).
    pub fn paths(&self) -> usize {
        self.folded.paths()
    }

    /// Total weight of all paths (ns).
    pub fn total_ns(&self) -> u64 {
        self.folded.total_ns()
    }

    /// The interned nodes.
    pub fn nodes(&self) -> &NodeTable {
        &self.nodes
    }

    /// The trace's tables (stacks, symbols, names).
    pub fn tables(&self) -> &'t Tables {
        self.tables
    }

    /// The trace's metadata.
    pub fn meta(&self) -> &'t RecordingMeta {
        self.meta
    }

    /// The aggregation itself (its trie and counters).
    pub fn folded(&self) -> &FoldedSink {
        &self.folded
    }

    /// [`FoldedSink::for_each_line`].
    pub fn for_each_line(&self, f: impl FnMut(&str, u64)) {
        self.folded
            .for_each_line(&self.nodes, self.tables, self.meta, f)
    }

    /// [`FoldedSink::for_each_path`].
    pub fn for_each_path(&self, f: impl FnMut(&PathVisit<'_>) -> bool) {
        self.folded
            .for_each_path(&self.nodes, self.tables, self.meta, f)
    }

    /// [`FoldedSink::write_folded`].
    pub fn write_folded(&self, unit: Unit, out: &mut dyn Write) -> io::Result<WriteSummary> {
        self.folded
            .write_folded(&self.nodes, self.tables, self.meta, unit, out)
    }

    /// [`FoldedSink::spilled`]: runs written out, and their bytes.
    pub fn spilled(&self) -> (u32, u64) {
        self.folded.spilled()
    }

    /// [`FoldedSink::folded_ns`].
    pub fn folded_ns(&self) -> BTreeMap<String, u64> {
        self.folded.folded_ns(&self.nodes, self.tables, self.meta)
    }

    /// [`FoldedSink::lines`].
    pub fn lines(&self, unit: Unit) -> Vec<(String, u64)> {
        self.folded.lines(&self.nodes, self.tables, self.meta, unit)
    }

    /// [`FoldedSink::chain_graph`].
    pub fn chain_graph(&self) -> ChainGraph {
        self.folded.chain_graph()
    }
}
