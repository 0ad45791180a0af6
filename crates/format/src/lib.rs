//! The chainrec trace format: a sequence of zstd frames holding columnar event chunks,
//! table sections and an index. See `docs/FORMAT.md` for the byte-level specification.
//!
//! * [`TraceWriter`] streams events to a file with bounded memory (for the recorder).
//! * [`TraceReader`] mmaps a file, checks it, and decodes chunks (in parallel if asked).
//! * [`MemTrace`] keeps a whole trace in memory (tests, synthetic scenarios).
//! * [`synth`] generates synthetic traces with exactly known chains.

mod cgroup;
mod chunk;
mod event;
mod flight;
mod mappings;
mod reader;
mod section;
mod summary;
pub mod synth;
mod tables;
mod throttle;
mod writer;

pub use cgroup::{container_info, ContainerInfo};
pub use event::*;
pub use flight::*;
pub use mappings::{MappingEntry, MappingHistory};
pub use reader::*;
pub use section::{FORMAT_MAJOR, FORMAT_MINOR, FORMAT_MIN_MAJOR};
pub use summary::TraceFacts;
pub use tables::*;
pub use throttle::*;
pub use writer::*;

use std::path::PathBuf;

/// Everything that can be wrong with a trace file, or with writing one.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// I/O failure on `path`.
    #[error("{path}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is empty (0 bytes).
    #[error("empty file (0 bytes), not a chainrec trace")]
    Empty,
    /// The file does not start with the chainrec magic.
    #[error("not a chainrec trace (bad magic at offset 0)")]
    NotChainrec,
    /// The file's format version is not one this build reads.
    #[error("unsupported trace format version {found} (this chainrec reads versions {min}..={max}); upgrade chainrec")]
    UnsupportedVersion {
        /// Version in the file.
        found: u16,
        /// Oldest readable.
        min: u16,
        /// Newest readable.
        max: u16,
    },
    /// The file ends inside a section.
    #[error(
        "truncated trace: section at offset {offset} needs {needed} bytes, file has {available}"
    )]
    Truncated {
        /// Offset of the damaged section.
        offset: u64,
        /// Bytes the section declares.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A checksum did not match.
    #[error("checksum mismatch in {what} at offset {offset}")]
    Checksum {
        /// Which structure.
        what: &'static str,
        /// Offset of it.
        offset: u64,
    },
    /// A chunk or table decoded to something impossible.
    #[error("corrupt {what} at offset {offset}: {detail}")]
    Corrupt {
        /// Which structure.
        what: &'static str,
        /// Offset of it.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// An event references a stack / irq source / task missing from the tables.
    #[error("dangling {what} id {id} (referenced in chunk at offset {offset})")]
    Dangling {
        /// Kind of id.
        what: &'static str,
        /// The id.
        id: u64,
        /// Offset of the referencing chunk.
        offset: u64,
    },
    /// An event the file format cannot hold (see [`crate::Waking::unencodable`]).
    #[error("event at ts {ts} cannot be written: {detail}")]
    InvalidEvent {
        /// Its timestamp.
        ts: u64,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// Events given to the writer out of timestamp order.
    #[error("event at ts {ts} is older than the previous event at {prev}; events must be written in time order")]
    OutOfOrder {
        /// Offending timestamp.
        ts: u64,
        /// Previous timestamp.
        prev: u64,
    },
}

/// The `what` of errors about an event chunk (one constant, so that
/// [`FormatError::is_chunk_damage`] cannot drift from the places that report them).
pub(crate) const EVENT_CHUNK: &str = "event chunk";

impl FormatError {
    /// Whether this is damage inside an event chunk (checksum or decoding), found while
    /// reading: the events after it are unreadable, those before it are fine.
    pub fn is_chunk_damage(&self) -> bool {
        matches!(
            self,
            FormatError::Checksum { what, .. } | FormatError::Corrupt { what, .. }
                if *what == EVENT_CHUNK
        )
    }
}

/// [`FormatError::InvalidEvent`] for an event no trace file can hold; [`MemTrace`] checks
/// too, so that an in-memory trace is always one a file could store.
pub(crate) fn check_encodable(event: &Event) -> Result<()> {
    match event {
        Event::Waking(w) => match w.unencodable() {
            Some(detail) => Err(FormatError::InvalidEvent { ts: w.ts, detail }),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Metadata `extra` keys under which the recorder stores how lazy user stacks were settled
/// outside the common path (chainrec_record's `LazyUserCounts`, in field order: exiting
/// stacks, halves taken at a switch-out, due at exit, due at exec, served by a callback
/// already queued). Here, so that `info` reads them without the recorder.
pub const LAZY_USER_EXTRA_KEYS: [&str; 5] = [
    "user_stacks_exiting",
    "user_halves_at_switch_out",
    "user_halves_at_exit",
    "user_halves_at_exec",
    "user_halves_served_by_pending",
];

/// Result alias for this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

/// Where a trace is written: a file ([`TraceWriter`]) or memory ([`MemTrace`]).
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
        for s in symbols {
            self.tables
                .symbols
                .insert((s.kind, s.tgid, s.addr), s.clone());
        }
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
    fn add_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> Result<()> {
        self.tables.merge_cgroups(cgroups, members);
        Ok(())
    }
}

/// Entry points for fuzzing the payload decoders below the checksums (not a stable API).
#[doc(hidden)]
pub mod __fuzz {
    use crate::*;

    /// Decode a raw (decompressed) event chunk payload (format 2: samples allowed).
    pub fn decode_chunk_payload(raw: &[u8]) -> std::result::Result<Vec<Event>, String> {
        let mut out = Vec::new();
        let mut scratch = crate::chunk::DecodeScratch::default();
        crate::chunk::decode(raw, &mut out, &mut scratch, true)?;
        Ok(out)
    }

    /// Encode events as a raw chunk payload (for round-trip checks).
    pub fn encode_chunk_payload(events: &[Event]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::chunk::ChunkEncoder::default().encode(events, &mut out);
        out
    }

    /// Decode a raw table-section payload and merge it into empty tables.
    pub fn decode_tables_payload(raw: &[u8]) -> Result<Tables> {
        crate::reader::decode_tables_for_fuzz(raw)
    }
}
