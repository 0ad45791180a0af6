//! Trace reader. (API fixed; implementation in progress.)

use crate::*;
use std::ops::Range;
use std::path::Path;

/// How a file without a valid index was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes at the end of the file that did not form a complete section.
    pub trailing_bytes: u64,
    /// Why the index was not used (missing, damaged).
    pub reason: String,
}

/// Result of [`TraceReader::verify`].
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Events decoded.
    pub events: u64,
    /// Events by kind (indexed by `EventKind as usize`).
    pub events_by_kind: [u64; 7],
    /// Event stack references that are reserved "no stack" values, by reserved id (0..16).
    pub reserved_stack_refs: [u64; 16],
}

/// A memory-mapped trace file.
pub struct TraceReader {
    _private: (),
}

impl TraceReader {
    /// Open and check `path`: header, sections, index (or recover by scanning), tables.
    pub fn open(path: &Path) -> Result<TraceReader> {
        let _ = path;
        todo!("format helper")
    }
    /// Recording metadata (the last metadata section in the file).
    pub fn meta(&self) -> &RecordingMeta {
        todo!("format helper")
    }
    /// All tables, merged.
    pub fn tables(&self) -> &Tables {
        todo!("format helper")
    }
    /// Event chunks in file (= time) order.
    pub fn chunks(&self) -> &[ChunkInfo] {
        todo!("format helper")
    }
    /// Some when the file had no usable index and was recovered by scanning.
    pub fn recovery(&self) -> Option<&Recovery> {
        todo!("format helper")
    }
    /// Total events in all chunks.
    pub fn event_count(&self) -> u64 {
        todo!("format helper")
    }
    /// File size in bytes.
    pub fn file_len(&self) -> u64 {
        todo!("format helper")
    }
    /// Chunks that may hold events with `start_ns <= ts <= end_ns`.
    pub fn chunks_in_window(&self, start_ns: u64, end_ns: u64) -> Range<usize> {
        let _ = (start_ns, end_ns);
        todo!("format helper")
    }
    /// Decode chunk `index`, appending its events to `out`.
    pub fn decode_chunk(&self, index: usize, out: &mut Vec<Event>) -> Result<()> {
        let _ = (index, out);
        todo!("format helper")
    }
    /// Decode the chunks in `range` in order, `parallel` ones at a time with rayon
    /// (bounded read-ahead), calling `f` with each chunk's events in time order.
    pub fn for_each_chunk<E: From<FormatError>>(
        &self,
        range: Range<usize>,
        parallel: bool,
        f: impl FnMut(&[Event]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let _ = (range, parallel, f);
        todo!("format helper")
    }
    /// Decode every chunk and check every reference against the tables.
    pub fn verify(&self) -> Result<VerifyReport> {
        todo!("format helper")
    }
    /// Read everything into memory (small traces, tests).
    pub fn to_mem(&self) -> Result<MemTrace> {
        todo!("format helper")
    }
}
