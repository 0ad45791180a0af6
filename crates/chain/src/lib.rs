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
//! `analyses` ([`critical_path`], on-CPU folding), the drivers ([`Analysis`]: a run folded
//! on two threads, or into any sink) and the user-facing wording (summary headline and
//! notes).
//!
//! What a run leaves is one value its renderer takes alone: a fold's [`Graph`], or any
//! other sink as [`Collected`] (the sink, the interned nodes, the trace as a [`TraceRef`]).
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
mod checkpoint;
mod engine;
mod error;
mod graph;
mod pipeline;
mod wording;

// Opening a trace and running the engine over it.
pub use analysis::{
    critical_path, critical_path_from, critical_paths, fold_oncpu, goroutine_chains_of, Analysis,
    DamagePolicy, Dedup, Done, Grid, Setup, Summary, TraceWarning, WarnFn,
};
pub use checkpoint::{Cancel, Checkpoints};
pub use error::{ChainError, SpillError, SpillFile, SpillProblem, WindowProblem};

// How a run is set up: what it selects and how it attributes.
pub use engine::config::{Config, DEFAULT_MAX_DEPTH};
pub use engine::filter::{Duration, Filter, Window, WindowBound};
pub use engine::mode::{Mode, OnCpuMode};

// The engine and what it hands its sinks: one record per wait, over interned nodes.
pub use engine::machine::Engine;
pub use engine::nodes::{
    Node, NodeId, NodeKind, NodeTable, RunqHolder, EARLIER_WAIT_FRAME, FORK_FRAME,
    NOT_FOLLOWED_FRAME,
};
pub use engine::record::{HopRecord, LevelKind, OnCpuPart, RunqPart, WaitRecord, WaitSink};
pub use engine::stats::{Inconsistency, Stats};

// What a run leaves for the renderers, and how they name its frames.
pub use analyses::goroutines::{goroutine_chains, GoChainStats, GoChains, NetpollShares};
pub use analyses::gothreads::{GoThreadSink, GoThreadWakes, Sleep, ThreadWake};
pub use engine::frames::{is_inlined, sample_frames, split_inlined, stack_frames, INLINED_MARK};
pub use graph::finished::{Collected, Graph, TraceRef};
pub use graph::folded::FoldedSink;
pub use graph::pathframes::{FrameKind, FrameNamer, PathFrame, PathVisit};
pub use graph::render::PieceNames;
pub use graph::spill::SpillTo;
pub use graph::views::{Unit, View};

/// One thread's critical path ([`critical_path`]): its timeline in segments, and what
/// each blocked or runnable one waited on.
pub mod critpath {
    pub use crate::analyses::critpath::{
        Blocked, CritPathOptions, CritPathStats, CriticalPath, Level, Segment, SegmentKind, Share,
        Unknown,
    };
}

/// On-CPU samples ([`fold_oncpu`]): the CPU flame graph, hot/cold, and time split by
/// sample counts.
pub mod oncpu {
    pub use crate::analyses::oncpu::{hot_cold, HotCold, OnCpuFold, OnCpuStats};
    pub use crate::engine::sampleidx::apportion;
}

/// The parts of a fold, for callers that assemble their own (benchmarks, tests): waits
/// reduced to path batches, what writing the folded text did, one node's frames, rounded
/// lines, and the interned chain graph as a petgraph graph.
pub mod fold {
    pub use crate::graph::folded::ChainGraph;
    pub use crate::graph::pathframes::NodeFrames;
    pub use crate::graph::paths::{PathBatch, PathReducer};
    pub use crate::graph::render::WriteSummary;
    pub use crate::graph::views::Rounded;
}

/// Re-exported for `Filter`'s comm selector ([`chainrec_format::ThreadSelector::comm`]).
pub use regex;
