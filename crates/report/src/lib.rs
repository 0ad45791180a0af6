//! chainrec-report: the views built on top of a trace and the chain engine.
//!
//! * [`svg`]: interactive chain-graph flame graphs (inferno + per-level colours).
//! * [`heatmap`]: subsecond-offset heat maps of off-CPU / on-CPU time or wakeups.
//! * [`perfetto`]: native Perfetto trace export (ftrace sched events, clock snapshot).
//! * [`pprof`]: chain graph as a gzipped pprof profile.
//! * [`export`]: `chainrec export`'s outputs of one trace, checked and written together.
//! * [`top`]: the longest individual waits, as a table or JSON.
//! * [`critpath`]: one thread's critical path as text or JSON.
//! * [`output`]: output files that appear whole or not at all.
//! * [`script`]: every event, as text or NDJSON; [`waits`]: every wait with its chain.

pub mod cgroup;
pub mod critpath;
pub mod export;
pub mod heatmap;
pub mod info;
pub mod output;
pub mod perfetto;
pub mod pprof;
pub mod progress;
pub mod script;
pub mod source;
pub mod svg;
pub mod top;
pub mod waits;

use std::path::PathBuf;

/// Errors of the report crate.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Reading the trace failed.
    #[error(transparent)]
    Format(chainrec_format::FormatError),
    /// An event chunk failed its checksum or did not decode, so the events after it are
    /// unreadable (the source is the [`chainrec_format::FormatError`]).
    #[error("the trace is damaged in the middle")]
    DamagedChunk(#[source] chainrec_format::FormatError),
    /// I/O failure on `path`.
    #[error("{path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The trace has no events.
    #[error("the trace has no events")]
    NoEvents,
    /// An unknown heat-map metric name.
    #[error("unknown metric {0:?} (offcpu, oncpu, wakeups)")]
    UnknownMetric(String),
    /// An unknown heat-map colour-map name.
    #[error("unknown colour map {0:?} (rank, linear)")]
    UnknownColorMap(String),
    /// A heat-map `comm` regex that does not compile.
    #[error("bad comm regex: {0}")]
    BadRegex(String),
    /// Heat-map rows per second out of range.
    #[error("rows per second must be 1..=1000, not {0}")]
    BadRows(u32),
    /// The trace spans too many seconds for a heat map at this resolution.
    #[error(
        "the trace spans {span} seconds: too many columns for a heat map at {rows} rows per second"
    )]
    TooManyColumns {
        /// Seconds spanned.
        span: i64,
        /// Rows per second asked for.
        rows: u32,
    },
    /// A folded line with an empty stack.
    #[error("a folded line has an empty stack")]
    EmptyStack,
    /// Nothing to draw: every line has zero weight.
    #[error("nothing to draw: no stack has a non-zero weight")]
    NothingToDraw,
    /// Nothing to export: every line has zero weight.
    #[error("nothing to export: no stack has a non-zero weight")]
    NothingToExport,
    /// The weights add up to more than 64 bits.
    #[error("total weight overflows 64 bits")]
    TotalOverflow,
    /// A weight larger than pprof's int64.
    #[error("weight {0} does not fit pprof's int64")]
    WeightOverflow(u64),
    /// The flame-graph library failed.
    #[error("rendering failed")]
    Inferno(#[source] std::io::Error),
    /// The flame-graph library produced something this crate cannot post-process (a bug).
    #[error("rendering failed: unexpected inferno output: {0}")]
    UnexpectedSvg(String),
    /// Encoding a protobuf message failed.
    #[error("rendering failed")]
    Encode(#[source] prost::EncodeError),
    /// A profile this crate encoded did not decode (a bug).
    #[error("decoding the encoded profile failed")]
    Decode(#[source] prost::DecodeError),
}

impl ReportError {
    /// Whether the report failed on damage in the middle of the trace.
    pub fn is_damage(&self) -> bool {
        matches!(self, ReportError::DamagedChunk(_))
    }
}

impl From<chainrec_format::FormatError> for ReportError {
    fn from(e: chainrec_format::FormatError) -> Self {
        if e.is_chunk_damage() {
            ReportError::DamagedChunk(e)
        } else {
            ReportError::Format(e)
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = ReportError> = std::result::Result<T, E>;
