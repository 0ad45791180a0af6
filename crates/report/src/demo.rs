//! `chainrec demo`: record the built-in chain workload (cr-timer → cr-relay → cr-sink over
//! pipes) with the BPF recorder, then write `trace.zst`, `chain.folded` and `chain.svg`
//! and find the workload's top chain. Needs root (or CAP_BPF + CAP_PERFMON).

use crate::svg::{self, SvgOptions, SvgStats};
use crate::top::{TopEntry, TopSink};
use crate::{ReportError, Result};
use chainrec_chain::{Config, Engine, FoldedSink, Mode, Unit, View};
use chainrec_format::TraceReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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
}

fn err(what: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Input(format!("{what}: {e}"))
}

/// `e` and all its causes on one line (a message that repeats its cause's text, as
/// "path: cause" does, is not repeated).
fn full_message(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !msg.contains(&t) {
            msg = format!("{msg}: {t}");
        }
        cur = c.source();
    }
    msg
}

/// A recorder failure with its whole cause. Only a refused BPF load is about privileges
/// (and that error says so itself).
fn record_err(e: chainrec_record::RecordError) -> ReportError {
    ReportError::Input(format!("recording failed: {}", full_message(&e)))
}

/// Check and create the demo's output directory (done by [`run`] too; callers that
/// announce the recording call it first, so that a bad `-o` fails before the announcement).
pub fn prepare_dir(dir: &std::path::Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(ReportError::Input(format!(
            "{} exists and is not a directory (the demo writes trace.zst, chain.folded and \
             chain.svg into the directory given with -o)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| ReportError::Input(format!("cannot create directory {}: {e}", dir.display())))
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
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let cond = chainrec_record::StopCondition {
        duration: None,
        flag: Some(stop.clone()),
        started: Some(started.clone()),
    };
    let handle = std::thread::Builder::new()
        .name("chainrec-consumer".into())
        .spawn(move || chainrec_record::record(&ropts, cond))
        .map_err(|e| err("cannot start the recorder thread", e))?;
    let panicked = || err("recording failed", "recorder thread panicked");
    while !started.load(Ordering::SeqCst) && !handle.is_finished() {
        std::thread::sleep(Duration::from_millis(5));
    }
    if !started.load(Ordering::SeqCst) {
        handle.join().map_err(|_| panicked())?.map_err(record_err)?;
        return Err(err(
            "recording failed",
            "the recorder stopped before the workload started",
        ));
    }
    let wopts = chainrec_record::workload::WorkloadOptions {
        duration: opts.duration,
        period: opts.period,
    };
    let mut tids = [0u32; 3];
    let wl = chainrec_record::workload::run_with(&wopts, |t, r, s| tids = [t, r, s]);
    stop.store(true, Ordering::SeqCst);
    let summary = handle.join().map_err(|_| panicked())?.map_err(|e| {
        let mut r = format!("recording failed: {}", full_message(&e));
        if let Some(n) = chainrec_record::partial_trace_note(&trace) {
            r = format!("{r}; {n}");
        }
        ReportError::Input(r)
    })?;
    let wl = wl.map_err(|e| err("the chain workload failed", e))?;

    // 2. Chain graph of the workload's threads (dedup on: the sink's chain shows the
    //    relay's and timer's waits inside it), and the top chain.
    let reader = TraceReader::open(&trace)?;
    let meta = reader.meta();
    let tables = reader.tables();
    let filter = chainrec_chain::Filter {
        tids: tids.to_vec(),
        ..Default::default()
    };
    let cfg = Config {
        mode: Mode::Bounded,
        max_depth: chainrec_chain::DEFAULT_MAX_DEPTH,
        dedup: true,
        filter,
        runqueue: true,
    };
    let mut engine = Engine::new(tables, meta, cfg);
    let mut sinks = (FoldedSink::new(View::Chains), TopSink::default());
    reader.for_each_chunk::<ReportError>(0..reader.chunks().len(), true, |evs| {
        engine.process(evs, &mut sinks);
        Ok(())
    })?;
    engine.finish(&mut sinks);
    let (folded, topsink) = sinks;
    let lines = folded.lines(engine.nodes(), tables, meta, Unit::Us);
    if lines.is_empty() {
        return Err(ReportError::Input(format!(
            "the recording has no waits of the workload threads {tids:?}: nothing to draw"
        )));
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
    let start = if meta.start_ns != 0 {
        meta.start_ns
    } else {
        reader.time_span().map(|s| s.0).unwrap_or(0)
    };
    let report = topsink.finish(usize::MAX, engine.nodes(), tables, meta, start);
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
    let l = &meta.lost;
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
        lost_events: l.ringbuf_full + l.malformed + l.out_of_order,
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
