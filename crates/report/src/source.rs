//! Where reports read events from: a trace file ([`chainrec_format::TraceReader`]) or an
//! in-memory trace ([`chainrec_format::MemTrace`]). Events arrive in time order, in batches.

use crate::Result;
use chainrec_format::{Comm, Event, MemTrace, RecordingMeta, Tables, Tid, TraceReader};
use std::collections::HashMap;

/// A trace that can be streamed (more than once) in time order.
pub trait EventSource {
    /// Recording metadata.
    fn meta(&self) -> &RecordingMeta;
    /// Tables (tasks, stacks, symbols, irq sources).
    fn tables(&self) -> &Tables;
    /// Total number of events (for progress).
    fn event_count(&self) -> u64;
    /// Call `f` with consecutive batches of events, in time order.
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<()>) -> Result<()>;
}

impl EventSource for MemTrace {
    fn meta(&self) -> &RecordingMeta {
        &self.meta
    }
    fn tables(&self) -> &Tables {
        &self.tables
    }
    fn event_count(&self) -> u64 {
        self.events.len() as u64
    }
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<()>) -> Result<()> {
        for batch in self.events.chunks(65536) {
            f(batch)?;
        }
        Ok(())
    }
}

impl EventSource for TraceReader {
    fn meta(&self) -> &RecordingMeta {
        TraceReader::meta(self)
    }
    fn tables(&self) -> &Tables {
        TraceReader::tables(self)
    }
    fn event_count(&self) -> u64 {
        TraceReader::event_count(self)
    }
    fn for_each_batch(&self, f: &mut dyn FnMut(&[Event]) -> Result<()>) -> Result<()> {
        self.for_each_chunk(0..self.chunks().len(), true, |events| f(events))
    }
}

/// Names of threads over time: the tables' first sighting, updated by comm events.
#[derive(Clone, Debug, Default)]
pub struct Names {
    comm: HashMap<Tid, Comm>,
    tgid: HashMap<Tid, Tid>,
}

impl Names {
    /// Start from the task table.
    pub fn new(tables: &Tables) -> Self {
        let mut n = Names::default();
        for t in tables.tasks.values() {
            n.comm.insert(t.tid, t.comm);
            n.tgid.insert(t.tid, t.tgid);
        }
        n
    }
    /// Apply an event (comm changes, new tasks). Returns the previous name on a comm change.
    pub fn apply(&mut self, e: &Event) -> Option<Comm> {
        match e {
            Event::Comm(c) => {
                self.tgid.insert(c.tid, c.tgid);
                self.comm.insert(c.tid, c.comm)
            }
            Event::WakeupNew(w) => {
                self.tgid.insert(w.child_tid, w.child_tgid);
                if let Some(&parent) = self.comm.get(&w.parent_tid) {
                    self.comm.entry(w.child_tid).or_insert(parent);
                }
                None
            }
            _ => None,
        }
    }
    /// Current name of `tid` (`<tid>` in angle brackets when unknown; `swapper` for 0).
    pub fn comm(&self, tid: Tid) -> String {
        match self.comm.get(&tid) {
            Some(c) => c.to_string(),
            None if tid == 0 => "swapper".to_string(),
            None => format!("<{tid}>"),
        }
    }
    /// Raw name, if known.
    pub fn get(&self, tid: Tid) -> Option<Comm> {
        self.comm.get(&tid).copied()
    }
    /// Process (thread group) of `tid`; `tid` itself when unknown.
    pub fn tgid(&self, tid: Tid) -> Tid {
        self.tgid.get(&tid).copied().unwrap_or(tid)
    }
}

pub use chainrec_format::format_wall;

#[cfg(test)]
mod tests {
    #[test]
    fn wall_clock_format() {
        assert_eq!(super::format_wall(0), "1970-01-01 00:00:00.000 UTC");
        // 2026-11-21 19:47:07.250 UTC
        assert_eq!(
            super::format_wall(1_795_290_427_250_000_000),
            "2026-11-21 19:47:07.250 UTC"
        );
        assert_eq!(
            super::format_wall(951_782_400_000_000_000),
            "2000-02-29 00:00:00.000 UTC"
        );
    }
}
