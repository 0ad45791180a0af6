//! Layer 3, analyses built on the engine and the graph: one thread's critical path, and
//! on-CPU folding.

pub(crate) mod critpath;
pub(crate) mod goroutines;
pub(crate) mod gothreads;
pub(crate) mod oncpu;
pub(crate) mod timeline;

use crate::engine::config::Config;
use crate::engine::filter::Filter;
use crate::engine::machine::Engine;
use chainrec_format::{RecordingMeta, Tables, TraceReader};
use std::ops::Range;

/// What an analysis reads: the trace and its span (by the driver's trace-start rule).
/// Handed down by the driver (`crate::Analysis`), which the analyses do not know.
pub(crate) struct TraceInput<'a> {
    pub(crate) reader: &'a TraceReader,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
}

impl<'a> TraceInput<'a> {
    pub(crate) fn reader(&self) -> &'a TraceReader {
        self.reader
    }

    pub(crate) fn tables(&self) -> &'a Tables {
        self.reader.tables()
    }

    pub(crate) fn meta(&self) -> &'a RecordingMeta {
        self.reader.meta()
    }

    pub(crate) fn start_ns(&self) -> u64 {
        self.start_ns
    }

    pub(crate) fn end_ns(&self) -> u64 {
        self.end_ns
    }

    /// The chunks a run with `filter` must decode (up to the end of its window).
    pub(crate) fn chunk_range(&self, filter: &Filter) -> Range<usize> {
        match filter.window {
            Some((_, end)) => 0..self.reader.chunks_in_window(0, end).end,
            None => 0..self.reader.chunks().len(),
        }
    }

    /// An engine over this trace.
    pub(crate) fn engine(&self, cfg: Config) -> Engine<'a> {
        Engine::new(self.tables(), self.meta(), cfg)
    }
}
