//! Where readers take events from: a trace file ([`TraceReader`]) or an in-memory trace
//! ([`MemTrace`]), behind one trait. Events arrive in time order, in batches.

use crate::{Event, FormatError, MemTrace, RecordingMeta, Tables, TraceReader};

/// A trace that can be streamed (more than once) in time order. `E` is the caller's error
/// type (a trace's own errors convert into it), so a caller's batch function can fail
/// with its own errors.
pub trait EventSource<E = FormatError> {
    /// Recording metadata.
    fn meta(&self) -> &RecordingMeta;
    /// Tables (tasks, stacks, symbols, irq sources).
    fn tables(&self) -> &Tables;
    /// Total number of events (for progress).
    fn event_count(&self) -> u64;
    /// Call `f` with consecutive batches of events, in time order.
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<(), E>) -> Result<(), E>;
}

/// Batch size of an in-memory trace (as many events as a typical file chunk).
const MEM_BATCH: usize = 65536;

impl<E> EventSource<E> for MemTrace {
    fn meta(&self) -> &RecordingMeta {
        &self.meta
    }
    fn tables(&self) -> &Tables {
        &self.tables
    }
    fn event_count(&self) -> u64 {
        self.events.len() as u64
    }
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<(), E>) -> Result<(), E> {
        for batch in self.events.chunks(MEM_BATCH) {
            f(batch)?;
        }
        Ok(())
    }
}

impl<E: From<FormatError>> EventSource<E> for TraceReader {
    fn meta(&self) -> &RecordingMeta {
        TraceReader::meta(self)
    }
    fn tables(&self) -> &Tables {
        TraceReader::tables(self)
    }
    fn event_count(&self) -> u64 {
        TraceReader::event_count(self)
    }
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<(), E>) -> Result<(), E> {
        self.for_each_chunk(0..self.chunks().len(), true, |events| f(events))
    }
}
