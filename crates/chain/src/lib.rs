//! chainrec-chain: rebuilds the wakeup chain behind every wait of a trace.
//!
//! Semantics follow `docs/CHAINS.md` (a copy of the project-wide `../shared/CHAINS.md`, kept
//! in step with it); every choice it leaves open is written down in
//! `docs/ENGINE.md`. The engine is fed event batches in time order:
//!
//! ```no_run
//! use chainrec_chain::{Config, Engine, FoldedSink, Graph, View};
//! # fn demo(trace: &chainrec_format::MemTrace) {
//! let mut engine = Engine::new(&trace.tables, &trace.meta, Config::default());
//! let mut folded = FoldedSink::new(View::Chains);
//! engine.process(&trace.events, &mut folded);
//! let stats = engine.finish(&mut folded);
//! let graph = Graph::new(folded, engine.into_nodes(), &trace.tables, &trace.meta);
//! let lines = graph.lines(chainrec_chain::Unit::Us);
//! # let _ = (stats, lines); }
//! ```
//!
//! Layers, each importing only those below it (`docs/ARCHITECTURE.md`): `engine` (events
//! to [`WaitRecord`]s), `graph` (paths, trie, views, rendering, the finished [`Graph`]),
//! `analyses` ([`critical_path`], on-CPU folding), the drivers ([`Analysis`],
//! [`fold_trace`]) and the user-facing wording (summary headline and notes).
//!
//! * [`Engine`] walks the events (O(1) amortized per event, memory bounded by live state)
//!   and produces one [`WaitRecord`] per off-CPU interval, passed to a [`WaitSink`].
//! * [`FoldedSink`] aggregates records into folded lines for the `chains`, `offcpu`,
//!   `wakeup` and `offwake` views, and exports the interned chain graph
//!   ([`FoldedSink::chain_graph`]) as a petgraph graph.
//! * [`Filter`] selects root waits (pid, tid, comm, state, duration, window, ...).
//! * [`critical_path`] gives one thread's timeline: running, runnable (behind whom) and
//!   blocked (behind which chain) segments, with stacks.

mod analyses;
mod analysis;
mod engine;
mod error;
mod fx;
mod graph;
mod pipeline;
mod wording;

pub use analyses::critpath::{
    Blocked, CritPathOptions, CritPathStats, CriticalPath, Level, Segment, SegmentKind, Share,
    Unknown,
};
pub use analyses::oncpu::{hot_cold, HotCold, OnCpuFold, OnCpuStats, OFFCPU_FRAME};
pub use analysis::{
    critical_path, fold_oncpu, trace_start_ns, Analysis, DamagePolicy, Dedup, Done, Setup, Summary,
    TraceWarning, WarnFn,
};
pub use engine::config::{Config, DEFAULT_MAX_DEPTH};
pub use engine::filter::{Duration, Filter, Window, WindowBound};
pub use engine::frames::stack_frames;
pub use engine::frames::{sample_frames, IDLE_COMM, ONCPU_ESTIMATED, ONCPU_FRAME, ONCPU_NO_SAMPLE};
pub use engine::machine::Engine;
pub use engine::mode::{Mode, OnCpuMode};
pub use engine::nodes::{
    Node, NodeId, NodeKind, NodeTable, RunqHolder, UNTHROTTLED_BY_TIMER, UNTHROTTLE_UNKNOWN,
};
pub use engine::record::{HopRecord, OnCpuPart, RunqPart, WaitRecord, WaitSink};
pub use engine::sampleidx::{apportion, ESTIMATE_PERIODS};
pub use engine::stats::{Inconsistency, Stats};
pub use error::{ChainError, WindowProblem};
pub use graph::finished::Graph;
pub use graph::folded::{ChainGraph, FoldedSink};
pub use graph::pathframes::{FrameKind, FrameNamer, NodeFrames, PathFrame, PathVisit};
pub use graph::paths::{PathBatch, PathReducer};
pub use graph::render::WriteSummary;
pub use graph::views::{Rounded, Unit, View};
pub use pipeline::fold_trace;
/// Re-exported for `Filter`'s comm selector ([`chainrec_format::ThreadSelector::comm`]).
pub use regex;
