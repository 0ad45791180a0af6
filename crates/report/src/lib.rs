//! chainrec-report: the views built on top of a trace and the chain engine.
//!
//! * [`svg`]: interactive chain-graph flame graphs (inferno + per-level colours).
//! * [`heatmap`]: subsecond-offset heat maps of off-CPU / on-CPU time or wakeups.
//! * [`perfetto`]: native Perfetto trace export (ftrace sched events, clock snapshot).
//! * [`pprof`]: chain graph as a gzipped pprof profile.
//! * [`top`]: the longest individual waits, as a table or JSON.
//! * [`script`]: every event, as text or NDJSON; [`waits`]: every wait with its chain.

pub mod demo;
pub mod heatmap;
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
    Format(#[from] chainrec_format::FormatError),
    /// I/O failure on `path`.
    #[error("{path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The input cannot be drawn or exported (empty, inconsistent).
    #[error("{0}")]
    Input(String),
    /// The flame-graph library failed or produced something unexpected.
    #[error("rendering failed: {0}")]
    Render(String),
}

/// Result alias for this crate.
pub type Result<T, E = ReportError> = std::result::Result<T, E>;
