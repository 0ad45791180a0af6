//! Streaming trace writer. (API fixed; implementation in progress.)

use crate::*;
use std::path::Path;

/// Writer tuning.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Events per chunk (a chunk is also cut by [`TraceWriter::flush`]).
    pub chunk_events: usize,
    /// zstd level.
    pub zstd_level: i32,
    /// Unix mode of the created file (the recorder uses 0o600).
    pub mode: u32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { chunk_events: 1 << 16, zstd_level: 3, mode: 0o644 }
    }
}

/// What a finished file contains.
#[derive(Clone, Debug, Default)]
pub struct WriteSummary {
    /// Events written.
    pub events: u64,
    /// File size in bytes.
    pub bytes: u64,
    /// Event chunks written.
    pub chunks: u64,
}

/// Streams a trace to a file with bounded memory: events are buffered up to one chunk,
/// table additions until the next chunk or flush. A killed writer leaves a file that
/// reads up to its last complete section.
pub struct TraceWriter {
    _private: (),
}

impl TraceWriter {
    /// Create (truncate) `path` and write the header and initial metadata.
    pub fn create(path: &Path, meta: &RecordingMeta, options: WriterOptions) -> Result<TraceWriter> {
        let _ = (path, meta, options);
        todo!("format helper")
    }
    /// Write buffered events and table additions now (the recorder calls this at least
    /// once a second).
    pub fn flush(&mut self) -> Result<()> {
        todo!("format helper")
    }
    /// Replace the metadata (written as a new metadata section at the next flush).
    pub fn update_meta(&mut self, meta: &RecordingMeta) -> Result<()> {
        let _ = meta;
        todo!("format helper")
    }
    /// Events accepted so far.
    pub fn events_written(&self) -> u64 {
        todo!("format helper")
    }
    /// Bytes in the file so far.
    pub fn bytes_written(&self) -> u64 {
        todo!("format helper")
    }
    /// Flush, write final metadata, the index and the trailer; sync the file.
    pub fn finish(self, meta: &RecordingMeta) -> Result<WriteSummary> {
        let _ = meta;
        todo!("format helper")
    }
}

impl TraceSink for TraceWriter {
    fn push(&mut self, event: &Event) -> Result<()> {
        let _ = event;
        todo!("format helper")
    }
    fn add_stacks(&mut self, stacks: &[StackEntry]) -> Result<()> {
        let _ = stacks;
        todo!("format helper")
    }
    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> Result<()> {
        let _ = symbols;
        todo!("format helper")
    }
    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> Result<()> {
        let _ = tasks;
        todo!("format helper")
    }
    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> Result<()> {
        let _ = sources;
        todo!("format helper")
    }
}
