//! The chainrec trace format: a sequence of zstd frames holding columnar event chunks,
//! table sections and an index. See `docs/FORMAT.md` for the byte-level specification.
//!
//! * [`TraceWriter`] streams events to a file with bounded memory (for the recorder).
//! * [`TraceReader`] mmaps a file, checks it, and decodes chunks (in parallel if asked).
//! * [`MemTrace`] keeps a whole trace in memory (tests, synthetic scenarios).
//! * [`TraceReader::open_files`] reads the numbered files of one rotated recording as one.
//! * [`EventSource`] streams either of them in time order.
//! * [`Threads`] and [`ThreadSelector`]: who a thread is over time, and whether it is selected.
//! * [`synth`] generates synthetic traces with exactly known chains.

mod cgroup;
mod chunk;
mod error;
mod event;
mod flight;
mod goroutine;
mod intern;
mod mappings;
mod reader;
mod section;
mod set;
mod sink;
mod source;
mod summary;
pub mod synth;
mod tables;
mod thread;
mod throttle;
mod writer;

pub use cgroup::{container_info, ContainerInfo};
pub use error::{FormatError, Result};
pub use event::*;
pub use flight::*;
pub use goroutine::*;
pub use mappings::{MappingEntry, MappingHistory};
pub use reader::*;
pub use section::{FORMAT_MAJOR, FORMAT_MINOR, FORMAT_MIN_MAJOR};
pub use set::*;
pub use sink::{ChunkInfo, MemTrace, TraceSink};
pub use source::EventSource;
pub use summary::TraceFacts;
pub use tables::*;
pub use thread::{
    unknown_thread_comm, CgroupSelector, ThreadIdentity, ThreadSelector, Threads, TidHasher,
    IDLE_COMM,
};
pub use throttle::*;
pub use writer::*;

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

/// Entry points for fuzzing the payload decoders below the checksums (not a stable API).
#[doc(hidden)]
pub mod __fuzz;
