//! The finished chain graph: what a run leaves for the renderers, in one value.

use crate::engine::nodes::NodeTable;
use crate::graph::folded::{ChainGraph, FoldedSink};
use crate::graph::pathframes::PathVisit;
use crate::graph::render::WriteSummary;
use crate::graph::views::{Unit, View};
use chainrec_format::{RecordingMeta, Tables};
use std::collections::BTreeMap;
use std::io::{self, Write};

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
