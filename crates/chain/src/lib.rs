//! chainrec-chain: rebuilds the wakeup chain behind every wait of a trace.
//!
//! Semantics follow `docs/CHAINS.md` (a copy of the project-wide `../shared/CHAINS.md`, kept
//! in step with it); every choice it leaves open is written down in
//! `docs/ENGINE.md`. The engine is fed event batches in time order:
//!
//! ```no_run
//! use chainrec_chain::{Config, Engine, FoldedSink, View};
//! # fn demo(trace: &chainrec_format::MemTrace) {
//! let mut engine = Engine::new(&trace.tables, &trace.meta, Config::default());
//! let mut folded = FoldedSink::new(View::Chains);
//! engine.process(&trace.events, &mut folded);
//! let stats = engine.finish(&mut folded);
//! let lines = folded.lines(engine.nodes(), &trace.tables, &trace.meta, chainrec_chain::Unit::Us);
//! # let _ = (stats, lines); }
//! ```
//!
//! * [`Engine`] walks the events (O(1) amortized per event, memory bounded by live state)
//!   and produces one [`WaitRecord`] per off-CPU interval, passed to a [`WaitSink`].
//! * [`FoldedSink`] aggregates records into folded lines for the `chains`, `offcpu`,
//!   `wakeup` and `offwake` views, and exports the interned chain graph
//!   ([`FoldedSink::chain_graph`]) as a petgraph graph.
//! * [`Filter`] selects root waits (pid, tid, comm, state, duration, window, ...).

mod analysis;
mod engine;
mod explain;
mod filter;
mod folded;
mod fx;
mod nodes;
mod pathframes;
mod paths;
mod pipeline;
mod record;
mod render;
mod trie;

pub use analysis::{
    trace_start_ns, Analysis, DamagePolicy, Dedup, Done, Setup, Summary, TraceWarning, WarnFn,
};
pub use engine::{Config, Engine, Mode, Stats, DEFAULT_MAX_DEPTH};
pub use explain::Inconsistency;
pub use filter::{Duration, Filter, Window, WindowBound};
pub use folded::{stack_frames, ChainGraph, FoldedSink, Unit, View};
pub use nodes::{Node, NodeId, NodeKind, NodeTable, RunqHolder};
pub use pathframes::{FrameKind, FrameNamer, NodeFrames, PathFrame, PathVisit};
pub use paths::{PathBatch, PathReducer};
pub use pipeline::fold_trace;
pub use record::{HopRecord, RunqPart, WaitRecord, WaitSink};
/// Re-exported for [`Filter::comm`].
pub use regex;
pub use render::WriteSummary;

/// Errors of the chain library (bad user input; the engine itself never fails on a trace).
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A `--window` specification could not be parsed.
    #[error("bad window {spec:?}: {reason}")]
    BadWindow {
        /// The text given.
        spec: String,
        /// What was wrong.
        reason: String,
    },
    /// A wall-clock or time-of-day window on a trace that has no wall-clock time.
    #[error("this trace has no wall-clock time (synthetic, or recorded without it); give seconds from its start, e.g. 0.5..1")]
    NoWallClock,
    /// An unknown `--unit`.
    #[error("unknown unit {0:?} (expected ns, us or ms)")]
    BadUnit(String),
    /// The trace could not be opened (not a trace, unsupported version, ...).
    #[error("{}", path.display())]
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: chainrec_format::FormatError,
    },
    /// [`DamagePolicy::Refuse`]: the trace's index was unusable and a scan found damage in
    /// the middle of the file, so the events after it are unreadable.
    #[error("{}: trace is damaged ({reason}); {readable_events} events before the damage are readable", path.display())]
    Damaged {
        /// The file.
        path: std::path::PathBuf,
        /// What the scan found.
        reason: String,
        /// Events before the damage.
        readable_events: u64,
    },
    /// [`DamagePolicy::Refuse`]: an event chunk failed its checksum or did not decode, so
    /// the events after it are unreadable (the source is the [`FormatError`]).
    ///
    /// [`FormatError`]: chainrec_format::FormatError
    #[error("the trace is damaged in the middle")]
    DamagedChunk(#[source] chainrec_format::FormatError),
    /// The trace could not be read.
    #[error(transparent)]
    Trace(chainrec_format::FormatError),
    /// The path-trie thread of [`fold_trace`] failed (a bug).
    #[error("the path-trie thread {0}")]
    FoldThread(&'static str),
}

impl ChainError {
    /// Whether the analysis failed on damage in the middle of the trace (which
    /// [`DamagePolicy::Salvage`] would have analysed up to).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            ChainError::Damaged { .. } | ChainError::DamagedChunk(_)
        )
    }
}

impl From<chainrec_format::FormatError> for ChainError {
    fn from(e: chainrec_format::FormatError) -> Self {
        if e.is_chunk_damage() {
            ChainError::DamagedChunk(e)
        } else {
            ChainError::Trace(e)
        }
    }
}
