//! chainrec-explore: `chainrec serve`, a local read-only web page on one trace, in
//! FlameScope's manner: the subsecond-offset heat map of waits, a time range selected on
//! it, the chain graph of that range, and the longest waits through a frame of it.
//!
//! * [`Explorer`] holds the opened trace and answers requests ([`Explorer::handle`]: a
//!   URL in, a [`Response`] out; no socket, so every answer is testable as a function).
//! * [`server`] puts an [`Explorer`] behind a loopback HTTP socket (tiny_http).
//!
//! The page and its script are built into the binary (`include_str!`): nothing is read
//! from the file system but the trace, and nothing is fetched from the network. The
//! range's chain graph is the engine run that `chainrec chains --window` makes, read
//! through the graph's structured paths (the frames its folded lines join), so the two
//! agree exactly.

mod api;
mod merged;
mod query;
pub mod server;
mod tree;

pub use api::{
    Explorer, Response, CHECKPOINT_EVERY_NS, DEFAULT_REPORT_PX, DEFAULT_REPORT_RANGES,
    MAX_CHECKPOINTS, MAX_PX,
};
pub use tree::{Frame, Tree};

/// Errors of the explorer outside a request (a request's errors are HTTP answers).
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// The engine failed on the trace.
    #[error(transparent)]
    Chain(#[from] chainrec_chain::ChainError),
    /// A report (the heat map) failed on the trace.
    #[error(transparent)]
    Report(#[from] chainrec_report::ReportError),
    /// A precomputed range of a static report could not be computed.
    #[error("static report: {0}")]
    Range(String),
    /// The socket could not be opened.
    #[error("cannot listen on {addr}: {reason}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why not.
        reason: String,
    },
}
