//! chainrec-demo: `chainrec demo`. Record the built-in chain workload (cr-timer → cr-relay
//! → cr-sink over pipes) with the BPF recorder, then write `trace.zst`, `chain.folded` and
//! `chain.svg` and find the workload's top chain. Needs root (or CAP_BPF + CAP_PERFMON).
//!
//! Its own crate so that `chainrec-report` does not depend on the recorder (and builds
//! without clang, libelf and libbpf), while the report tests can still run the demo.

use chainrec_chain::{Analysis, Dedup, FoldedSink, Graph, Setup, Unit, View};
use chainrec_format::TraceReader;
use chainrec_record::Recording;
use chainrec_report::svg::{self, SvgOptions, SvgStats};
use chainrec_report::top::{TopEntry, TopReport, TopSink};
use chainrec_report::ReportError;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Demo parameters.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Output directory (created).
    pub dir: PathBuf,
    /// How long the workload runs.
    pub duration: Duration,
    /// Workload timer period.
    pub period: Duration,
    /// Recorder command line to store in the trace.
    pub command_line: Vec<String>,
}

/// What the demo produced.
#[derive(Clone, Debug)]
pub struct DemoOutcome {
    /// The trace.
    pub trace: PathBuf,
    /// Folded chain graph (microseconds).
    pub folded: PathBuf,
    /// Interactive SVG.
    pub svg: PathBuf,
    /// Events recorded.
    pub events: u64,
    /// Trace size in bytes.
    pub bytes: u64,
    /// Messages the workload passed through both pipes.
    pub messages: u64,
    /// Workload thread ids: timer, relay, sink.
    pub tids: [u32; 3],
    /// The sink thread's chain with the most total blocked time (any thread's if the sink has none).
    pub top: Option<TopEntry>,
    /// Folded lines written.
    pub lines: usize,
    /// SVG statistics.
    pub svg_stats: SvgStats,
    /// Events lost by the recorder (ring buffer full, malformed, out of order).
    pub lost_events: u64,
    /// Kernel features the recorder went without on this kernel, one line each (what it
    /// did instead and what that costs).
    pub fallbacks: Vec<String>,
}

/// Errors of the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// `-o` names something that is not a directory.
    #[error("{} exists and is not a directory (the demo writes trace.zst, chain.folded and chain.svg into the directory given with -o)", .0.display())]
    NotADirectory(PathBuf),
    /// The output directory could not be created.
    #[error("cannot create directory {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The recorder failed. Only a refused BPF load is about privileges (and that error
    /// says so itself).
    #[error("recording failed{}", partial.as_ref().map(|n| format!(" ({n})")).unwrap_or_default())]
    Record {
        /// The recorder's error.
        #[source]
        source: chainrec_record::RecordError,
        /// Where the events recorded before the failure are, if anywhere
        /// ([`chainrec_record::partial_trace_note`]).
        partial: Option<String>,
    },
    /// The recorder stopped before the workload could start.
    #[error("recording failed: the recorder stopped before the workload started")]
    StoppedEarly,
    /// The workload itself failed.
    #[error("the chain workload failed")]
    Workload(#[source] std::io::Error),
    /// The recording holds no wait of the workload threads.
    #[error("the recording has no waits of the workload threads {0:?}: nothing to draw")]
    NoWaits([u32; 3]),
    /// Reading the trace or drawing failed.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// Analysing the trace failed.
    #[error(transparent)]
    Chain(#[from] chainrec_chain::ChainError),
}

/// Result alias for this crate.
pub type Result<T, E = DemoError> = std::result::Result<T, E>;

/// Check and create the demo's output directory (done by [`run`] too; callers that
/// announce the recording call it first, so that a bad `-o` fails before the announcement).
pub fn prepare_dir(dir: &std::path::Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(DemoError::NotADirectory(dir.to_path_buf()));
    }
    std::fs::create_dir_all(dir).map_err(|source| DemoError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// Run the demo.
pub fn run(opts: &DemoOptions) -> Result<DemoOutcome> {
    prepare_dir(&opts.dir)?;
    let trace = opts.dir.join("trace.zst");
    let folded_path = opts.dir.join("chain.folded");
    let svg_path = opts.dir.join("chain.svg");

    // 1. Record this process (and whatever wakes it) while the workload runs.
    let ropts = chainrec_record::RecordOptions {
        output: trace.clone(),
        pids: vec![std::process::id()],
        status_line: false,
        command_line: opts.command_line.clone(),
        ..Default::default()
    };
    let failed = |source| DemoError::Record {
        source,
        partial: None,
    };
    let recording =
        Recording::start(ropts, None, Arc::new(AtomicBool::new(false))).map_err(failed)?;
    if !recording.wait_started(|| false) {
        recording.join().map_err(failed)?;
        return Err(DemoError::StoppedEarly);
    }
    let wopts = chainrec_record::workload::WorkloadOptions {
        duration: opts.duration,
        period: opts.period,
        stall: None,
    };
    let mut tids = [0u32; 3];
    let wl = chainrec_record::workload::run_with(&wopts, |t, r, s| tids = [t, r, s]);
    recording.stop();
    let summary = recording.join().map_err(|source| DemoError::Record {
        source,
        partial: chainrec_record::partial_trace_note(&trace),
    })?;
    let wl = wl.map_err(DemoError::Workload)?;

    // 2. Chain graph of the workload's threads (dedup on: the sink's chain shows the
    //    relay's and timer's waits inside it), and the top chain.
    let an = Analysis::from_reader(TraceReader::open(&trace).map_err(ReportError::from)?);
    let setup = Setup {
        dedup: Dedup::On,
        filter: chainrec_chain::Filter {
            threads: chainrec_format::ThreadSelector {
                tids: tids.to_vec(),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Setup::default()
    };
    let sinks = (FoldedSink::new(View::Chains), TopSink::default());
    let (run_summary, run) = an.collect(setup, sinks, |_| {})?;
    let (graph, waits) = run.unzip();
    let lines = Graph::from(graph).lines(Unit::Us);
    if lines.is_empty() {
        return Err(DemoError::NoWaits(tids));
    }
    let mut text = String::new();
    for (l, w) in &lines {
        text.push_str(l);
        text.push(' ');
        text.push_str(&w.to_string());
        text.push('\n');
    }
    std::fs::write(&folded_path, text).map_err(|e| ReportError::Io {
        path: folded_path.clone(),
        source: e,
    })?;
    let mut svg_bytes = Vec::new();
    let svg_stats = svg::render(
        &lines,
        &SvgOptions::new(
            "chainrec demo: cr-sink <- cr-relay <- cr-timer <- timer",
            "us",
            true,
        ),
        &mut svg_bytes,
    )?;
    std::fs::write(&svg_path, svg_bytes).map_err(|e| ReportError::Io {
        path: svg_path.clone(),
        source: e,
    })?;
    let report = TopReport::new(&waits, usize::MAX);
    // The sink's chain with the most total blocked time: the whole relay of the workload.
    // (The timer's own waits, timer <- [hardirq: timer], are as long but say less.)
    let top = report
        .entries
        .iter()
        .filter(|e| e.tid == tids[2])
        .max_by_key(|e| (e.total_ns, std::cmp::Reverse(e.rank)))
        .or_else(|| {
            report
                .entries
                .iter()
                .max_by_key(|e| (e.total_ns, std::cmp::Reverse(e.rank)))
        })
        .cloned();
    Ok(DemoOutcome {
        trace,
        folded: folded_path,
        svg: svg_path,
        events: summary.events,
        bytes: summary.bytes,
        messages: wl.messages,
        tids,
        top,
        lines: lines.len(),
        svg_stats,
        lost_events: run_summary.lost_in_recording,
        fallbacks: summary
            .fallbacks
            .iter()
            .map(chainrec_record::Fallback::line)
            .collect(),
    })
}

/// True when this process may load BPF programs (root).
pub fn can_record() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Paths in a demo directory.
pub fn paths(dir: &Path) -> [PathBuf; 3] {
    [
        dir.join("trace.zst"),
        dir.join("chain.folded"),
        dir.join("chain.svg"),
    ]
}
