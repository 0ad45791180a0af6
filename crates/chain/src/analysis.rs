//! One analysis of one trace file: opening it with a damage policy, the trace-start rule,
//! the chunks a window needs, automatic dedup, and the run itself (folded on two threads,
//! or into any [`WaitSink`]), ending in one [`Summary`]. Every command that walks a trace (`chains`,
//! `offcpu`, `wakeup`, `offwake`, `top`, the pprof export, the demo) sets up its engine here,
//! through the engine's public API only.

use crate::analyses::critpath::{CritPathOptions, CriticalPath};
use crate::analyses::oncpu::OnCpuFold;
use crate::analyses::TraceInput;
use crate::checkpoint::{checkpoint_filter, Cancel, Checkpoints, Point, SetupKey};
use crate::graph::finished::{Collected, TraceRef};
use crate::graph::spill::SpillTo;
use crate::pipeline::fold_trace;
use crate::{ChainError, Config, Engine, Filter, Graph, Mode, NodeTable, OnCpuMode};
use crate::{GoChains, GoThreadSink, Stats, View, WaitSink, Window, DEFAULT_MAX_DEPTH};
use chainrec_format::{FormatError, RecordingMeta, Recovery, Sampling, Tables, Tid, TraceReader};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What to do with a damaged trace: corruption in the middle of the file (a bad index
/// recovered by scanning, or a bad event chunk found while reading), so that events after
/// it are unreadable. A file merely cut short at the end (a killed recorder) is always read
/// up to its last complete section, with a warning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DamagePolicy {
    /// A damaged trace is an error: the output would silently miss data.
    #[default]
    Refuse,
    /// Analyse the events before the damage, with a warning.
    Salvage,
}

/// Something the caller must show, because the output covers less than the file.
#[derive(Debug)]
pub enum TraceWarning<'a> {
    /// The index was unusable; the file was recovered by scanning.
    Recovered(&'a Recovery),
    /// [`DamagePolicy::Salvage`]: a damaged event chunk; the analysis stops there.
    SalvageStop(&'a FormatError),
}

/// Receives [`TraceWarning`]s (while opening, and while reading for salvage stops).
pub type WarnFn = Arc<dyn Fn(TraceWarning<'_>) + Send + Sync>;

/// Subchain dedup (waits shown inside another chain are not shown again as roots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dedup {
    /// On unless the filter selects threads (`-p`, `-t`, `--comm`, `-u`, `-k`): a chain
    /// of a selected thread must not disappear because an unselected one shows it.
    #[default]
    Auto,
    /// Always on.
    On,
    /// Always off (every wait is a root).
    Off,
}

/// How to run the engine over the trace.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Attribution mode.
    pub mode: Mode,
    /// Maximum hops per chain (≥ 1).
    pub max_depth: usize,
    /// Subchain dedup.
    pub dedup: Dedup,
    /// Root filter; its window also bounds the chunks decoded.
    pub filter: Filter,
    /// Decode chunks in parallel (rayon) rather than one at a time on this thread.
    pub parallel: bool,
    /// Run-queue attribution ([`Config::runqueue`]).
    pub runqueue: bool,
    /// On-CPU time without a sample ([`Config::oncpu`]).
    pub oncpu: OnCpuMode,
    /// Frames of the waiting thread's cgroup above it ([`Config::cgroup_frames`]).
    pub cgroup_frames: bool,
    /// A frame of the waiting thread's process above it ([`Config::process_frames`]).
    pub process_frames: bool,
}

impl Setup {
    /// What of this setup shapes the engine's state (all but the window), with dedup
    /// resolved to `dedup`: a checkpoint serves only runs of the same key.
    pub(crate) fn checkpoint_key(&self, dedup: bool) -> SetupKey {
        SetupKey {
            mode: self.mode,
            max_depth: self.max_depth,
            dedup,
            runqueue: self.runqueue,
            oncpu: self.oncpu,
            cgroup_frames: self.cgroup_frames,
            process_frames: self.process_frames,
        }
    }
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            mode: Mode::Bounded,
            max_depth: DEFAULT_MAX_DEPTH,
            dedup: Dedup::Auto,
            filter: Filter::default(),
            parallel: true,
            runqueue: true,
            oncpu: OnCpuMode::default(),
            cgroup_frames: false,
            process_frames: false,
        }
    }
}

/// What one run did: the engine's counters and how the run was set up, for the caller
/// to print.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The engine's counters (`stats.lost_events`: events lost according to the trace's
    /// lost markers).
    pub stats: Stats,
    /// Whether dedup was on (after [`Dedup::Auto`] was decided).
    pub dedup: bool,
    /// The resolved window (trace-clock ns), if any.
    pub window: Option<(u64, u64)>,
    /// The chunks decoded.
    pub chunks: Range<usize>,
    /// Events the recorder counted as lost (ring buffer full, malformed, out of order),
    /// from the trace metadata.
    pub lost_in_recording: u64,
}

/// A finished run: the summary, and the node table that names the records' frames (the
/// engine itself is gone).
pub struct Done {
    /// What the run did.
    pub summary: Summary,
    nodes: NodeTable,
}

impl Done {
    /// The interned nodes the sinks' records refer to.
    pub fn nodes(&self) -> &NodeTable {
        &self.nodes
    }

    /// The summary and the node table, for a caller that keeps the nodes past the run.
    pub fn into_parts(self) -> (Summary, NodeTable) {
        (self.summary, self.nodes)
    }
}

/// A trace opened for analysis.
///
/// ```no_run
/// use chainrec_chain::{Analysis, DamagePolicy, Setup, TraceWarning, Unit, View};
/// use std::sync::Arc;
/// # fn demo() -> Result<(), chainrec_chain::ChainError> {
/// let an = Analysis::open("trace.zst".as_ref(), DamagePolicy::Refuse, Arc::new(|w: TraceWarning<'_>| eprintln!("{w:?}")))?;
/// let (s, graph) = an.fold(Setup::default(), View::Chains, |_| {})?;
/// let lines = graph.lines(Unit::Us);
/// eprintln!("{} waits, {} lines; lost: {} (markers), {} (recorder)",
///     s.stats.waits, lines.len(), s.stats.lost_events, s.lost_in_recording);
/// # Ok(()) }
/// ```
pub struct Analysis {
    reader: TraceReader,
    start_ns: u64,
    /// Engine runs started on this trace ([`Analysis::engine_runs`]).
    engine_runs: AtomicUsize,
}

impl Analysis {
    /// Open `path` under `policy`. Warnings (an index recovered by scanning; with
    /// [`DamagePolicy::Salvage`], the damaged chunk a run stops at) go to `warn`.
    pub fn open(path: &Path, policy: DamagePolicy, warn: WarnFn) -> Result<Analysis, ChainError> {
        Analysis::open_files(&[path.to_path_buf()], policy, warn)
    }

    /// Open several trace files as one recording (the numbered files of one
    /// `record --rotate`, or directories holding them: see
    /// [`TraceReader::open_files`]), under `policy`, as [`Analysis::open`] does one.
    pub fn open_files(
        paths: &[PathBuf],
        policy: DamagePolicy,
        warn: WarnFn,
    ) -> Result<Analysis, ChainError> {
        let mut reader = TraceReader::open_files(paths).map_err(|e| match e {
            // These name their files already.
            FormatError::Io { .. } | FormatError::Set(_) | FormatError::InFile { .. } => {
                ChainError::Trace(e)
            }
            e => ChainError::Open {
                path: paths.first().cloned().unwrap_or_default(),
                source: e,
            },
        })?;
        if policy == DamagePolicy::Salvage {
            let w = warn.clone();
            reader.salvage_chunks(move |e| w(TraceWarning::SalvageStop(e)));
        }
        if let Some(r) = reader.recovery() {
            if r.damaged && policy == DamagePolicy::Refuse {
                return Err(ChainError::Damaged {
                    path: reader.path().to_path_buf(),
                    reason: r.reason.clone(),
                    readable_events: reader.event_count(),
                });
            }
            warn(TraceWarning::Recovered(r));
        }
        Ok(Analysis::from_reader(reader))
    }

    /// Analyse an already opened trace (no damage policy: a damaged chunk is an error).
    pub fn from_reader(reader: TraceReader) -> Analysis {
        let start_ns = trace_start_ns(&reader);
        Analysis {
            reader,
            start_ns,
            engine_runs: AtomicUsize::new(0),
        }
    }

    /// How many engine runs were started on this trace (each decodes and walks it): what
    /// tests of commands that write several outputs from one run check.
    pub fn engine_runs(&self) -> usize {
        self.engine_runs.load(Ordering::Relaxed)
    }

    /// The trace.
    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }

    /// Recording metadata.
    pub fn meta(&self) -> &RecordingMeta {
        self.reader.meta()
    }

    /// Tables (tasks, stacks, symbols, irq sources).
    pub fn tables(&self) -> &Tables {
        self.reader.tables()
    }

    /// Tables, to change before analysing (symbols resolved again with `--debug-dir`).
    pub fn tables_mut(&mut self) -> &mut Tables {
        self.reader.tables_mut()
    }

    /// Where the trace starts (trace clock, ns): the recording's start time, or the first
    /// event's when the metadata has none. Relative window times count from here.
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// The recording's on-CPU sampling, or [`ChainError::NoSamples`] when the trace took
    /// no samples (what `oncpu` and `hotcold` need).
    pub fn sampling(&self) -> Result<Sampling, ChainError> {
        self.meta().sampling().ok_or(ChainError::NoSamples {
            format: self.reader.version(),
        })
    }

    /// The tables, metadata and start of the trace, as one value for what renders a run.
    pub fn trace(&self) -> TraceRef<'_> {
        TraceRef {
            tables: self.tables(),
            meta: self.meta(),
            start_ns: self.start_ns,
        }
    }

    /// Where the trace ends: the recording's end time, or the last event's when the
    /// metadata has none (the start when there are no events).
    pub fn end_ns(&self) -> u64 {
        match self.meta().end_ns {
            0 => self.reader.time_span().map_or(self.start_ns, |s| s.1),
            e => e,
        }
    }

    /// The window `spec` (`--window START..END`, see [`Window::parse`]) on this trace, in
    /// trace-clock ns: relative times count from [`Analysis::start_ns`]. A window that
    /// ends before it starts, or selects none of the trace's events, is an error.
    pub fn window(&self, spec: &str) -> Result<(u64, u64), ChainError> {
        let (s, e) = Window::parse(spec)?
            .resolve(self.meta(), self.start_ns)
            .map_err(|source| ChainError::WindowUnresolved {
                spec: spec.to_string(),
                source: Box::new(source),
            })?;
        if s > e {
            return Err(ChainError::WindowReversed {
                spec: spec.to_string(),
            });
        }
        match self.reader.time_span() {
            Some((first, last)) if e < first || s > last => Err(ChainError::WindowMissesTrace {
                spec: spec.to_string(),
                span: self.describe_span(first, last),
            }),
            _ => Ok((s, e)),
        }
    }

    /// `0.000..2.345 s from the trace start (wall clock @A..@B)`.
    fn describe_span(&self, first: u64, last: u64) -> String {
        let rel = |t: u64| (t as f64 - self.start_ns as f64) / 1e9;
        let mut s = format!("{:.3}..{:.3} s from the trace start", rel(first), rel(last));
        let offset = self.meta().clock_offset_ns;
        if offset != 0 {
            let wall = |t: u64| (t as i128).saturating_add(offset) as f64 / 1e9;
            s += &format!(" (wall clock @{:.3}..@{:.3})", wall(first), wall(last));
        }
        s
    }

    /// The chunks a run with `filter` decodes: with a window, from the first chunk (causes
    /// come from before the window) to the last one that starts inside it.
    pub fn chunk_range(&self, filter: &Filter) -> Range<usize> {
        self.input().chunk_range(filter)
    }

    /// What the analyses below read of this trace.
    fn input(&self) -> TraceInput<'_> {
        TraceInput {
            reader: &self.reader,
            start_ns: self.start_ns,
            end_ns: self.end_ns(),
        }
    }

    fn dedup_of(&self, setup: &Setup) -> bool {
        match setup.dedup {
            Dedup::Auto => !setup.filter.has_thread_filter(),
            Dedup::On => true,
            Dedup::Off => false,
        }
    }

    /// The summary a run with `setup` starts with, and its dedup decision.
    fn engine_summary(&self, setup: &Setup) -> (bool, Summary) {
        let dedup = self.dedup_of(setup);
        let summary = Summary {
            stats: Stats::default(),
            dedup,
            window: setup.filter.window,
            chunks: self.chunk_range(&setup.filter),
            lost_in_recording: self.meta().lost.events(),
        };
        (dedup, summary)
    }

    pub(crate) fn engine(&self, setup: Setup) -> (Engine<'_>, Summary) {
        self.engine_runs.fetch_add(1, Ordering::Relaxed);
        let (dedup, summary) = self.engine_summary(&setup);
        let cfg = Config {
            mode: setup.mode,
            max_depth: setup.max_depth,
            dedup,
            filter: setup.filter,
            runqueue: setup.runqueue,
            oncpu: setup.oncpu,
            cgroup_frames: setup.cgroup_frames,
            process_frames: setup.process_frames,
        };
        (self.input().engine(cfg), summary)
    }

    /// Run the engine into `sink`, calling `on_chunk(events)` after each decoded chunk
    /// (progress).
    pub fn run(
        &self,
        setup: Setup,
        sink: &mut impl WaitSink,
        mut on_chunk: impl FnMut(usize),
    ) -> Result<Done, ChainError> {
        self.run_while(setup, sink, |_, n| {
            on_chunk(n);
            true
        })
    }

    /// [`Analysis::run`] for a sink that can fail on its own (a closed pipe): after each
    /// decoded chunk, `go_on(sink, events)` says whether to read on. When it says no, the
    /// run ends there, without [`Engine::finish`] (the rest of the trace is not read), and
    /// the summary's `stats` are the counters so far.
    pub fn run_while<S: WaitSink>(
        &self,
        setup: Setup,
        sink: &mut S,
        go_on: impl FnMut(&S, usize) -> bool,
    ) -> Result<Done, ChainError> {
        self.run_resumed_while(setup, sink, None, go_on)
    }

    /// [`Analysis::run`], resumed from the latest of `checkpoints` before the window when
    /// there is one for this setup (the records are the same: [`Checkpoints`]); otherwise
    /// decoded from the first chunk. The summary's `chunks` says which.
    pub fn run_from(
        &self,
        setup: Setup,
        sink: &mut impl WaitSink,
        checkpoints: Option<&Checkpoints>,
        mut on_chunk: impl FnMut(usize),
    ) -> Result<Done, ChainError> {
        self.run_resumed_while(setup, sink, checkpoints, |_, n| {
            on_chunk(n);
            true
        })
    }

    /// [`Analysis::run_from`] that stops with [`ChainError::Cancelled`] after the chunk in
    /// which `cancel` is set.
    pub fn run_from_until(
        &self,
        setup: Setup,
        sink: &mut impl WaitSink,
        checkpoints: Option<&Checkpoints>,
        cancel: &Cancel,
    ) -> Result<Done, ChainError> {
        let done =
            self.run_resumed_while(setup, sink, checkpoints, |_, _| !cancel.is_cancelled())?;
        Cancel::check(Some(cancel))?;
        Ok(done)
    }

    /// [`Analysis::run_while`] from the engine [`Analysis::resume_or_start`] gives.
    fn run_resumed_while<S: WaitSink>(
        &self,
        setup: Setup,
        sink: &mut S,
        checkpoints: Option<&Checkpoints>,
        mut go_on: impl FnMut(&S, usize) -> bool,
    ) -> Result<Done, ChainError> {
        let parallel = setup.parallel;
        let (mut engine, mut summary) = self.resume_or_start(setup, checkpoints);
        let read = self
            .reader
            .for_each_chunk::<Halt>(summary.chunks.clone(), parallel, |evs| {
                engine.process(evs, sink);
                if go_on(sink, evs.len()) {
                    Ok(())
                } else {
                    Err(Halt::Stopped)
                }
            });
        summary.stats = match read {
            Ok(()) => engine.finish(sink),
            Err(Halt::Stopped) => engine.stats().clone(),
            Err(Halt::Failed(e)) => return Err(e),
        };
        Ok(Done {
            summary,
            nodes: engine.into_nodes(),
        })
    }

    /// The engine for a run set up as `setup`: resumed from the latest of `checkpoints`
    /// that serves it, else a new one from the first chunk.
    fn resume_or_start(
        &self,
        setup: Setup,
        checkpoints: Option<&Checkpoints>,
    ) -> (Engine<'_>, Summary) {
        let dedup = self.dedup_of(&setup);
        let point = checkpoints.and_then(|c| {
            c.pick(
                setup.checkpoint_key(dedup),
                &setup.filter,
                self.chunk_range(&setup.filter).end,
            )
        });
        match point {
            Some(p) => {
                self.engine_runs.fetch_add(1, Ordering::Relaxed);
                let (_, mut summary) = self.engine_summary(&setup);
                summary.chunks.start = p.chunk;
                let (cgroup_frames, process_frames) = (setup.cgroup_frames, setup.process_frames);
                let engine = p.engine().resume(
                    self.tables(),
                    setup.filter,
                    dedup,
                    cgroup_frames,
                    process_frames,
                );
                (engine, summary)
            }
            None => self.engine(setup),
        }
    }

    /// [`Analysis::run`] into `sink`, handed back with what its records refer to: the
    /// summary and the [`Collected`] value its renderer takes.
    pub fn collect<S: WaitSink>(
        &self,
        setup: Setup,
        mut sink: S,
        on_chunk: impl FnMut(usize),
    ) -> Result<(Summary, Collected<'_, S>), ChainError> {
        let Done { summary, nodes } = self.run(setup, &mut sink, on_chunk)?;
        Ok((summary, Collected::new(sink, nodes, self.trace())))
    }

    /// Fold the run's records for `view` on two threads (`fold_trace`), calling
    /// `on_chunk(events)` after each decoded chunk: the summary and the finished graph.
    pub fn fold(
        &self,
        setup: Setup,
        view: View,
        on_chunk: impl FnMut(usize),
    ) -> Result<(Summary, Graph<'_>), ChainError> {
        self.fold_from(setup, view, None, on_chunk)
    }

    /// Checkpoints of this trace for runs set up as `setup` (its filter aside: see
    /// [`Checkpoints`]): one engine pass over the whole trace, keeping a copy of the
    /// engine's state after the first chunk that ends `every_ns` or more after the trace
    /// start or the previous checkpoint. `on_chunk(events)` after each chunk (progress).
    pub fn checkpoints(
        &self,
        setup: &Setup,
        every_ns: u64,
        on_chunk: impl FnMut(usize),
    ) -> Result<Checkpoints, ChainError> {
        let checkpoints = self.no_checkpoints(setup);
        self.take_checkpoints(&checkpoints, every_ns, setup.parallel, on_chunk)?;
        Ok(checkpoints)
    }

    /// An empty set of checkpoints for runs set up as `setup`, for
    /// [`Analysis::take_checkpoints`] to fill (on another thread, say, while runs resume
    /// from those taken so far).
    pub fn no_checkpoints(&self, setup: &Setup) -> Checkpoints {
        let probe = Setup {
            filter: checkpoint_filter(),
            ..setup.clone()
        };
        Checkpoints::new(probe.checkpoint_key(self.dedup_of(&probe)))
    }

    /// Take the checkpoints of [`Analysis::checkpoints`] into `checkpoints` (made by
    /// [`Analysis::no_checkpoints`]: their setup), decoding in parallel or not, each
    /// published as soon as it is taken; `checkpoints` is complete when this returns,
    /// failed or not.
    pub fn take_checkpoints(
        &self,
        checkpoints: &Checkpoints,
        every_ns: u64,
        parallel: bool,
        on_chunk: impl FnMut(usize),
    ) -> Result<(), ChainError> {
        self.checkpoint_pass(checkpoints, Due::Every(every_ns), parallel, on_chunk)
    }

    /// [`Analysis::take_checkpoints`] on a grid of times: a checkpoint right before the
    /// first chunk that reaches each time `grid.origin_ns + k * grid.step_ns` (k ≥ 1, on
    /// the trace's clock) after the trace start, the earliest `grid.max` of them. A window
    /// that starts at one of those times resumes with no chunk before it to decode (the
    /// explorer's heat-map columns, whole seconds, start on its grid).
    pub fn take_checkpoints_on_grid(
        &self,
        checkpoints: &Checkpoints,
        grid: Grid,
        parallel: bool,
        on_chunk: impl FnMut(usize),
    ) -> Result<(), ChainError> {
        self.checkpoint_pass(checkpoints, Due::Grid(grid), parallel, on_chunk)
    }

    fn checkpoint_pass(
        &self,
        checkpoints: &Checkpoints,
        spacing: Due,
        parallel: bool,
        mut on_chunk: impl FnMut(usize),
    ) -> Result<(), ChainError> {
        let key = checkpoints.key;
        let probe = Setup {
            mode: key.mode,
            max_depth: key.max_depth,
            dedup: if key.dedup { Dedup::On } else { Dedup::Off },
            filter: checkpoint_filter(),
            parallel,
            runqueue: key.runqueue,
            oncpu: key.oncpu,
            cgroup_frames: key.cgroup_frames,
            process_frames: key.process_frames,
        };
        let (mut engine, _) = self.engine(probe);
        let mut timelines = crate::analyses::critpath::Timelines::new(self.tables(), self.start_ns);
        let (mut chunk, mut last_ns) = (0, 0u64);
        let (every_ns, mut grid) = match spacing {
            Due::Every(every) => (Some(every), None),
            Due::Grid(g) => (None, Some(g)),
        };
        let mut due = match (every_ns, &grid) {
            (Some(every), _) => self.start_ns.saturating_add(every),
            (None, Some(g)) => g.after(self.start_ns),
            (None, None) => u64::MAX,
        };
        // The filter matches nothing: no record reaches the sink.
        let mut nothing = |_: &crate::WaitRecord, _: &NodeTable| {};
        let read = self.reader.for_each_chunk::<ChainError>(
            0..self.reader.chunks().len(),
            parallel,
            |evs| {
                let chunk_last = evs.iter().map(|e| e.ts()).fold(last_ns, u64::max);
                if let Some(g) = &mut grid {
                    // This chunk reaches the grid's next time: the state before it, every
                    // event so far before that time (none before the first chunk: a run
                    // from the start reads the same).
                    if chunk_last >= due {
                        if chunk > 0 && g.max > 0 && last_ns < due {
                            checkpoints.push(Point::new(
                                chunk,
                                last_ns,
                                engine.snapshot(),
                                timelines.changed(),
                            ));
                            g.max -= 1;
                        }
                        due = g.after(chunk_last);
                    }
                }
                engine.process(evs, &mut nothing);
                timelines.events(evs);
                chunk += 1;
                on_chunk(evs.len());
                last_ns = chunk_last;
                if let Some(every) = every_ns {
                    if last_ns >= due {
                        checkpoints.push(Point::new(
                            chunk,
                            last_ns,
                            engine.snapshot(),
                            timelines.changed(),
                        ));
                        due = last_ns.saturating_add(every);
                    }
                }
                Ok(())
            },
        );
        checkpoints.set_complete();
        read
    }

    /// [`Analysis::fold`], resumed from the latest of `checkpoints` before the window
    /// when there is one for this setup (the result is the same: [`Checkpoints`]);
    /// otherwise decoded from the first chunk. The summary's `chunks` says which.
    pub fn fold_from(
        &self,
        setup: Setup,
        view: View,
        checkpoints: Option<&Checkpoints>,
        on_chunk: impl FnMut(usize),
    ) -> Result<(Summary, Graph<'_>), ChainError> {
        self.fold_from_until(setup, view, checkpoints, None, on_chunk)
    }

    /// [`Analysis::fold`] whose path trie is written out in runs under `spill.dir`
    /// whenever it outgrows `spill.budget_bytes`, so that memory stays bounded however
    /// many distinct lines a long trace has. [`Graph::write_folded`] writes exactly what
    /// [`Analysis::fold`]'s graph writes; the graph's other readers see only the lines
    /// since the last run, so use this only for folded text.
    pub fn fold_spilling(
        &self,
        setup: Setup,
        view: View,
        spill: &SpillTo,
        on_chunk: impl FnMut(usize),
    ) -> Result<(Summary, Graph<'_>), ChainError> {
        self.fold_with(setup, view, None, None, Some(spill), on_chunk)
    }

    /// [`Analysis::fold_from`] that stops with [`ChainError::Cancelled`] after the chunk in
    /// which `cancel` is set.
    pub fn fold_from_until(
        &self,
        setup: Setup,
        view: View,
        checkpoints: Option<&Checkpoints>,
        cancel: Option<&Cancel>,
        on_chunk: impl FnMut(usize),
    ) -> Result<(Summary, Graph<'_>), ChainError> {
        self.fold_with(setup, view, checkpoints, cancel, None, on_chunk)
    }

    fn fold_with(
        &self,
        setup: Setup,
        view: View,
        checkpoints: Option<&Checkpoints>,
        cancel: Option<&Cancel>,
        spill: Option<&SpillTo>,
        mut on_chunk: impl FnMut(usize),
    ) -> Result<(Summary, Graph<'_>), ChainError> {
        let parallel = setup.parallel;
        let (mut engine, mut summary) = self.resume_or_start(setup, checkpoints);
        let (stats, folded) = fold_trace(
            &self.reader,
            summary.chunks.clone(),
            parallel,
            &mut engine,
            view,
            spill,
            |n| {
                on_chunk(n);
                Cancel::check(cancel)
            },
        )?;
        summary.stats = stats;
        let graph = Graph::new(folded, engine.into_nodes(), self.tables(), self.meta());
        Ok((summary, graph))
    }
}

/// Times on a grid ([`Analysis::take_checkpoints_on_grid`]): `origin_ns + k * step_ns`,
/// nanoseconds of the trace's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// A time on the grid (at or before the trace start).
    pub origin_ns: u64,
    /// Between two times of the grid (positive).
    pub step_ns: u64,
    /// At most this many checkpoints (the earliest times).
    pub max: usize,
}

impl Grid {
    /// The grid's first time after `t`.
    fn after(&self, t: u64) -> u64 {
        let step = self.step_ns.max(1);
        match t.checked_sub(self.origin_ns) {
            Some(d) => self
                .origin_ns
                .saturating_add((d / step).saturating_add(1).saturating_mul(step)),
            None => self.origin_ns,
        }
    }
}

/// Where the checkpoint pass takes its checkpoints.
enum Due {
    /// After the first chunk that ends this long after the trace start or the previous one.
    Every(u64),
    /// Before the chunks that reach the grid's times.
    Grid(Grid),
}

/// Why [`Analysis::run_while`] stopped reading.
enum Halt {
    /// The trace could not be read.
    Failed(ChainError),
    /// The caller asked to stop.
    Stopped,
}

impl From<FormatError> for Halt {
    fn from(e: FormatError) -> Self {
        Halt::Failed(e.into())
    }
}

/// Build the critical path of `opts.tid` in the trace of `an`.
pub fn critical_path(an: &Analysis, opts: &CritPathOptions) -> Result<CriticalPath, ChainError> {
    critical_path_from(an, opts, None, None)
}

/// [`critical_path`], resumed from the latest of `checkpoints` before `opts`'s window when
/// they serve it (taken with this setup but for dedup); the same result.
/// With `cancel`, it stops with [`ChainError::Cancelled`] after the chunk in which the
/// flag is set.
pub fn critical_path_from(
    an: &Analysis,
    opts: &CritPathOptions,
    checkpoints: Option<&Checkpoints>,
    cancel: Option<&Cancel>,
) -> Result<CriticalPath, ChainError> {
    an.engine_runs.fetch_add(1, Ordering::Relaxed);
    crate::analyses::critpath::critical_path(&an.input(), opts, checkpoints, cancel)
}

/// Build the critical paths of the threads `tids` (in that order) in the trace of `an`, in
/// one engine run, with `opts`'s window, depth and decoding (`opts.tid` is not used): each
/// equals [`critical_path`] of that thread. The first thread that fails is the error.
pub fn critical_paths(
    an: &Analysis,
    tids: &[Tid],
    opts: &CritPathOptions,
) -> Result<Vec<CriticalPath>, ChainError> {
    an.engine_runs.fetch_add(1, Ordering::Relaxed);
    crate::analyses::critpath::critical_paths(&an.input(), tids, opts, None, None)
}

/// Fold the samples of `an` that pass `filter`: its thread part, and its window (on the
/// sample's time). Duration and state filters do not apply to samples and are refused.
pub fn fold_oncpu(an: &Analysis, filter: &Filter, parallel: bool) -> Result<OnCpuFold, ChainError> {
    crate::analyses::oncpu::fold_oncpu(&an.input(), filter, parallel)
}

/// The goroutine chains of `an` (`chains --goroutines`): a run over the Go processes'
/// thread-level wakeups (first levels only, [`crate::GoThreadSink`]), which join each
/// netpoll ready to the kernel chain behind it, then [`crate::goroutine_chains`] of the
/// trace's goroutine records with them, at most `max_depth` levels per chain, `dedup`
/// hiding the waits another chain shows as an inner level. Fails when the trace has no
/// goroutine records ([`ChainError::NoGoroutines`]).
pub fn goroutine_chains_of(
    an: &Analysis,
    max_depth: usize,
    dedup: bool,
) -> Result<GoChains, ChainError> {
    let tables = an.tables();
    if tables.goroutines.is_empty() {
        return Err(ChainError::NoGoroutines);
    }
    let threshold = an.meta().stack_threshold_ns;
    let mut sink = GoThreadSink::new(tables, threshold);
    // Only the Go processes' waits are walked and kept.
    let mut filter = Filter::default();
    filter.threads.pids = tables.goroutines.processes().map(|p| p.tgid).collect();
    let setup = Setup {
        max_depth: 1,
        dedup: Dedup::Off,
        runqueue: false,
        filter,
        ..Setup::default()
    };
    an.run(setup, &mut sink, |_| {})
        .map_err(|e| ChainError::GoThreadWakes(Box::new(e)))?;
    let threads = sink.into_wakes();
    Ok(crate::goroutine_chains(
        tables,
        Some(&threads),
        max_depth,
        threshold,
        dedup,
    ))
}

/// The trace-start rule of [`Analysis::start_ns`], for a bare reader.
pub(crate) fn trace_start_ns(reader: &TraceReader) -> u64 {
    match reader.meta().start_ns {
        0 => reader.time_span().map_or(0, |s| s.0),
        s => s,
    }
}
