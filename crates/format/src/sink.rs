//! Where a trace is written ([`TraceSink`]), and the in-memory trace ([`MemTrace`]).

use crate::error::check_encodable;
use crate::{
    CgroupEntry, Event, FormatError, GoDelta, IrqSource, MappingEntry, RecordingMeta, Result,
    StackEntry, SymbolEntry, Tables, TaskCgroup, TaskEntry, ThrottleDelta,
};

/// Where a trace is written: a file ([`TraceWriter`](crate::TraceWriter)) or memory ([`MemTrace`](crate::MemTrace)).
/// Producers (recorder, synthetic scenarios) write through this trait.
pub trait TraceSink {
    /// Append one event (non-decreasing `ts`).
    fn push(&mut self, event: &Event) -> Result<()>;
    /// Add stacks to the stack table (before any event that references them).
    fn add_stacks(&mut self, stacks: &[StackEntry]) -> Result<()>;
    /// Add resolved symbols.
    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> Result<()>;
    /// Add tasks (first sightings).
    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> Result<()>;
    /// Add interrupt sources (before any waking that references them).
    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> Result<()>;
    /// Add (or update, by id) executable mappings of user processes (the ones frames
    /// used; optional section kind 0x82). Sinks that keep no mappings ignore them.
    fn add_mappings(&mut self, _mappings: &[MappingEntry]) -> Result<()> {
        Ok(())
    }
    /// Add CPU-quota throttling records (optional throttle sections: nothing in the event
    /// chunks refers to them, so they may come at any time before the end).
    fn add_throttles(&mut self, throttles: &ThrottleDelta) -> Result<()>;
    /// Add goroutine parks and readies and the Go processes they are of (optional
    /// goroutine sections, format 2.2: nothing in the event chunks refers to them, so they
    /// may come at any time before the end; the stacks they name must be added first).
    /// Sinks that keep none ignore them.
    fn add_goroutines(&mut self, _goroutines: &GoDelta) -> Result<()> {
        Ok(())
    }
    /// Add cgroup paths and threads' cgroup memberships (optional cgroup sections: nothing
    /// in the event chunks refers to them, so they may come at any time before the end).
    fn add_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> Result<()>;
}

/// Per-chunk index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// File offset of the chunk's section.
    pub offset: u64,
    /// Length of the section in bytes (header + zstd frame).
    pub len: u64,
    /// Number of events.
    pub events: u32,
    /// First event timestamp.
    pub first_ts: u64,
    /// Last event timestamp.
    pub last_ts: u64,
}

/// In-memory trace: the same content a file holds, for tests and synthetic scenarios.
#[derive(Clone, Debug, Default)]
pub struct MemTrace {
    /// Recording metadata.
    pub meta: RecordingMeta,
    /// Tables.
    pub tables: Tables,
    /// Events in time order.
    pub events: Vec<Event>,
}

impl TraceSink for MemTrace {
    fn push(&mut self, event: &Event) -> Result<()> {
        check_encodable(event)?;
        if let Some(prev) = self.events.last() {
            if event.ts() < prev.ts() {
                return Err(FormatError::OutOfOrder {
                    ts: event.ts(),
                    prev: prev.ts(),
                });
            }
        }
        self.events.push(*event);
        Ok(())
    }
    fn add_stacks(&mut self, stacks: &[StackEntry]) -> Result<()> {
        for s in stacks {
            self.tables.stacks.insert(s.id, s.clone());
        }
        Ok(())
    }
    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> Result<()> {
        self.tables.symbols.extend(symbols);
        Ok(())
    }
    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> Result<()> {
        for t in tasks {
            self.tables.tasks.entry(t.tid).or_insert_with(|| t.clone());
        }
        Ok(())
    }
    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> Result<()> {
        for s in sources {
            self.tables.irq_sources.insert(s.id, s.clone());
        }
        Ok(())
    }
    fn add_mappings(&mut self, mappings: &[MappingEntry]) -> Result<()> {
        for m in mappings {
            self.tables.mappings.insert_stored(m.clone());
        }
        Ok(())
    }
    fn add_throttles(&mut self, throttles: &ThrottleDelta) -> Result<()> {
        self.tables.throttling.merge(throttles);
        Ok(())
    }
    fn add_goroutines(&mut self, goroutines: &GoDelta) -> Result<()> {
        self.tables.goroutines.merge(goroutines);
        Ok(())
    }
    fn add_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> Result<()> {
        self.tables.merge_cgroups(cgroups, members);
        Ok(())
    }
}
