//! Where a recording goes: one file, numbered rotating files (`--rotate`), or the
//! flight recorder (`--flight`), which keeps the last N seconds in memory and writes a
//! dump when a trigger fires, on SIGUSR1, and at the stop.

use crate::trigger::{TriggerFilter, TriggerRule, TriggerWatch};
use crate::Result;
use chainrec_format::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How the recorder stores what it records.
#[derive(Clone, Debug, Default)]
pub enum OutputMode {
    /// One trace file (the default).
    #[default]
    File,
    /// Numbered complete files, the next one begun when the limit is reached.
    Rotate(RotateLimit),
    /// The flight recorder.
    Flight(FlightPlan),
}

/// What the flight recorder keeps, when it dumps, and how often it may.
#[derive(Clone, Debug)]
pub struct FlightPlan {
    /// Keep this much trace time in memory (0: only the size bound).
    pub window_ns: u64,
    /// Keep at most this many bytes of compressed events (0: only the time bound).
    pub max_bytes: u64,
    /// Trigger rules; none: dumps only on SIGUSR1 and at the stop.
    pub rules: Vec<TriggerRule>,
    /// Which threads' waits may trigger.
    pub filter: TriggerFilter,
    /// Keep recording this long after a trigger before writing its dump.
    pub post_ns: u64,
    /// Write at most this many trigger dumps (SIGUSR1 and the stop dump not counted).
    pub max_dumps: u32,
    /// At least this much trace time between two triggers that dump.
    pub min_interval_ns: u64,
    /// Stop dumping on triggers once the dumps hold this many bytes (0: no quota).
    pub quota_bytes: u64,
    /// Set (by a SIGUSR1 handler) to ask for a dump now; cleared when taken.
    pub dump_request: Option<Arc<AtomicBool>>,
}

impl Default for FlightPlan {
    fn default() -> Self {
        FlightPlan {
            window_ns: 30_000_000_000,
            max_bytes: 256 << 20,
            rules: Vec::new(),
            filter: TriggerFilter::default(),
            post_ns: 2_000_000_000,
            max_dumps: 10,
            min_interval_ns: 10_000_000_000,
            quota_bytes: 1 << 30,
            dump_request: None,
        }
    }
}

/// One file the flight recorder wrote.
#[derive(Clone, Debug)]
pub struct FlightDump {
    /// Where.
    pub path: PathBuf,
    /// Why.
    pub trigger: FlightTrigger,
    /// Events in it.
    pub events: u64,
    /// Its size.
    pub bytes: u64,
}

/// What the flight recorder did; every trigger that did not dump is counted.
#[derive(Clone, Debug, Default)]
pub struct FlightReport {
    /// Files written, in order.
    pub dumps: Vec<FlightDump>,
    /// Waits that passed a trigger rule and its filter.
    pub triggers: u64,
    /// Of those, inside the window of a dump already pending (so in that dump).
    pub in_pending_dump: u64,
    /// Skipped: closer than the minimum interval to the previous dump's trigger.
    pub skipped_interval: u64,
    /// Skipped: the maximum number of dumps was reached.
    pub skipped_max_dumps: u64,
    /// Skipped: the disk quota was used up.
    pub skipped_quota: u64,
    /// Dumps that failed to write (the error is in `errors`); recording went on.
    pub failed: u64,
    /// The errors of failed dumps.
    pub errors: Vec<String>,
    /// Waits over a threshold that the filter kept out.
    pub filtered_out: u64,
    /// The ring's state at the end (chunks evicted, memory in use, ...).
    pub ring: FlightStats,
    /// Most memory the ring held.
    pub peak_memory_bytes: u64,
}

/// A dump waiting for its post-trigger time to pass.
struct Pending {
    trigger: FlightTrigger,
    from: u64,
    to: u64,
    /// Triggers fired after this one, inside its window.
    covered: u64,
}

/// The flight recorder's state.
pub(crate) struct Flight {
    ring: FlightRing,
    watch: TriggerWatch,
    plan: FlightPlan,
    prefix: PathBuf,
    meta: RecordingMeta,
    pending: Option<Pending>,
    /// Trigger time (wait end) of the last dump made by a trigger.
    last_trigger_dump: Option<u64>,
    report: FlightReport,
}

/// The recorder's output.
// One per recording, never moved in a loop: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Output {
    File(TraceWriter),
    Rotating(RotatingWriter),
    Flight(Box<Flight>),
}

/// What [`Output::finish`] wrote.
pub(crate) struct Finished {
    /// Events accepted from the recorder.
    pub events: u64,
    /// Bytes on disk (all files).
    pub bytes: u64,
    /// Every file, in order (one for a plain recording).
    pub files: Vec<PathBuf>,
    /// The flight recorder's report.
    pub flight: Option<FlightReport>,
}

impl Output {
    /// Open the output for `mode` at `path` (the dump prefix for the flight recorder).
    pub(crate) fn create(
        path: &Path,
        mode: &OutputMode,
        meta: &RecordingMeta,
        options: WriterOptions,
    ) -> Result<Output> {
        Ok(match mode {
            OutputMode::File => Output::File(TraceWriter::create(path, meta, options)?),
            OutputMode::Rotate(limit) => {
                Output::Rotating(RotatingWriter::create(path, meta, *limit, options)?)
            }
            OutputMode::Flight(plan) => Output::Flight(Box::new(Flight {
                ring: FlightRing::new(FlightOptions {
                    window_ns: plan.window_ns,
                    max_bytes: plan.max_bytes,
                    chunk_events: options.chunk_events,
                    zstd_level: options.zstd_level,
                })?,
                watch: TriggerWatch::new(plan.rules.clone(), plan.filter.clone()),
                plan: plan.clone(),
                prefix: dump_prefix(path),
                meta: meta.clone(),
                pending: None,
                last_trigger_dump: None,
                report: FlightReport::default(),
            })),
        })
    }

    /// Write (or, in flight mode, compress) what is buffered.
    pub(crate) fn flush(&mut self) -> Result<()> {
        match self {
            Output::File(w) => w.flush()?,
            Output::Rotating(w) => {
                w.flush()?;
            }
            Output::Flight(f) => {
                f.ring.seal()?;
                let mem = f.ring.stats().memory_bytes;
                f.report.peak_memory_bytes = f.report.peak_memory_bytes.max(mem);
            }
        }
        Ok(())
    }

    /// New metadata (lost counts so far, ...).
    pub(crate) fn update_meta(&mut self, meta: &RecordingMeta) -> Result<()> {
        match self {
            Output::File(w) => w.update_meta(meta)?,
            Output::Rotating(w) => w.update_meta(meta)?,
            Output::Flight(f) => f.meta = meta.clone(),
        }
        Ok(())
    }

    /// Events accepted so far.
    pub(crate) fn events_written(&self) -> u64 {
        match self {
            Output::File(w) => w.events_written(),
            Output::Rotating(w) => w.events_written(),
            Output::Flight(f) => f.ring.stats().events + f.ring.stats().evicted_events,
        }
    }

    /// Bytes on disk so far (flight mode: bytes held in memory).
    pub(crate) fn bytes_written(&self) -> u64 {
        match self {
            Output::File(w) => w.bytes_written(),
            Output::Rotating(w) => w.bytes_written(),
            Output::Flight(f) => f.ring.stats().memory_bytes,
        }
    }

    /// After events up to `newest_ts` were written: act on triggers, SIGUSR1 and dumps
    /// whose post-trigger time has passed. A dump that fails is counted and reported,
    /// and recording goes on.
    pub(crate) fn after_drain(&mut self, newest_ts: u64) -> Result<()> {
        let Output::Flight(f) = self else {
            return Ok(());
        };
        f.report.filtered_out = f.watch.filtered_out;
        for t in f.watch.take_fired() {
            f.report.triggers += 1;
            f.consider(t)?;
        }
        let asked = f
            .plan
            .dump_request
            .as_ref()
            .is_some_and(|r| r.swap(false, Ordering::SeqCst));
        if asked {
            let at = newest_ts.max(f.ring.stats().newest_ts);
            f.start_pending(FlightTrigger {
                kind: TriggerKind::Signal,
                rule: "SIGUSR1".into(),
                tid: 0,
                tgid: 0,
                comm: String::new(),
                start_ns: at,
                end_ns: at,
            });
        }
        if f.pending.as_ref().is_some_and(|p| newest_ts >= p.to) {
            f.write_pending()?;
        }
        Ok(())
    }

    /// Finish: the file's index and trailer; the last rotated file; in flight mode, a
    /// pending dump (cut at the stop) and then the whole window as a `stop` dump.
    pub(crate) fn finish(self, meta: &RecordingMeta) -> Result<Finished> {
        match self {
            Output::File(w) => {
                let path = w.path().to_owned();
                let s = w.finish(meta)?;
                Ok(Finished {
                    events: s.events,
                    bytes: s.bytes,
                    files: vec![path],
                    flight: None,
                })
            }
            Output::Rotating(w) => {
                let files = w.finish(meta)?;
                Ok(Finished {
                    events: files.iter().map(|f| f.1.events).sum(),
                    bytes: files.iter().map(|f| f.1.bytes).sum(),
                    files: files.into_iter().map(|f| f.0).collect(),
                    flight: None,
                })
            }
            Output::Flight(mut f) => {
                f.meta = meta.clone();
                let events = f.ring.stats().events + f.ring.stats().evicted_events;
                if f.pending.is_some() {
                    f.write_pending()?;
                }
                let newest = f.ring.stats().newest_ts;
                let at = meta.end_ns.max(newest);
                if f.ring.stats().events > 0 {
                    let stop = FlightTrigger {
                        kind: TriggerKind::Stop,
                        rule: "stop".into(),
                        tid: 0,
                        tgid: 0,
                        comm: String::new(),
                        start_ns: at,
                        end_ns: at,
                    };
                    f.pending = Some(Pending {
                        from: 0,
                        to: u64::MAX,
                        trigger: stop,
                        covered: 0,
                    });
                    f.write_pending()?;
                }
                f.report.ring = f.ring.stats();
                f.report.filtered_out = f.watch.filtered_out;
                Ok(Finished {
                    events,
                    bytes: f.report.dumps.iter().map(|d| d.bytes).sum(),
                    files: f.report.dumps.iter().map(|d| d.path.clone()).collect(),
                    flight: Some(f.report),
                })
            }
        }
    }
}

impl Flight {
    /// A trigger fired: dump, or count why not. Triggers come in batches (one per drain),
    /// so a pending dump whose window this trigger is past is written first.
    fn consider(&mut self, t: FlightTrigger) -> Result<()> {
        if let Some(p) = &mut self.pending {
            if t.end_ns <= p.to {
                p.covered += 1;
                self.report.in_pending_dump += 1;
                return Ok(());
            }
            self.write_pending()?;
        }
        let trigger_dumps = (self.report.dumps.iter())
            .filter(|d| matches!(d.trigger.kind, TriggerKind::Wait | TriggerKind::RunQueue))
            .count() as u64;
        if trigger_dumps >= self.plan.max_dumps as u64 {
            self.report.skipped_max_dumps += 1;
            return Ok(());
        }
        if self
            .last_trigger_dump
            .is_some_and(|last| t.end_ns < last.saturating_add(self.plan.min_interval_ns))
        {
            self.report.skipped_interval += 1;
            return Ok(());
        }
        let written: u64 = self.report.dumps.iter().map(|d| d.bytes).sum();
        if self.plan.quota_bytes != 0 && written >= self.plan.quota_bytes {
            self.report.skipped_quota += 1;
            return Ok(());
        }
        self.last_trigger_dump = Some(t.end_ns);
        self.start_pending(t);
        Ok(())
    }

    /// Keep [trigger − window (or the wait's start, if earlier), trigger + post] and
    /// write it once the post time has passed.
    fn start_pending(&mut self, t: FlightTrigger) {
        if let Some(p) = &mut self.pending {
            p.covered += 1;
            return;
        }
        let from = t.end_ns.saturating_sub(self.plan.window_ns).min(t.start_ns);
        let to = t.end_ns.saturating_add(self.plan.post_ns);
        self.ring.pin(Some(from));
        self.pending = Some(Pending {
            trigger: t,
            from,
            to,
            covered: 0,
        });
    }

    fn write_pending(&mut self) -> Result<()> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        self.ring.pin(None);
        let path = self.dump_path(&p.trigger);
        let mut meta = self.meta.clone();
        meta.extra.extend(p.trigger.to_extra());
        meta.extra.extend([
            ("flight.window_ns".into(), self.plan.window_ns.to_string()),
            ("flight.post_ns".into(), self.plan.post_ns.to_string()),
            (
                "flight.triggers_in_dump".into(),
                (p.covered + 1).to_string(),
            ),
            (
                "flight.lost_scope".into(),
                "lost counts cover the recording up to this dump, not only its window".into(),
            ),
        ]);
        let options = WriterOptions {
            mode: 0o600,
            ..WriterOptions::default()
        };
        match self.ring.dump(&path, &meta, p.from, p.to, options) {
            Ok(s) => self.report.dumps.push(FlightDump {
                path,
                trigger: p.trigger,
                events: s.events,
                bytes: s.bytes,
            }),
            Err(e) => {
                self.report.failed += 1;
                self.report.errors.push(format!("{}: {e}", path.display()));
            }
        }
        let mem = self.ring.stats().memory_bytes;
        self.report.peak_memory_bytes = self.report.peak_memory_bytes.max(mem);
        Ok(())
    }

    /// `PREFIX-<UTC time of the trigger>-<tid>.zst`, unique among the dumps so far.
    fn dump_path(&self, t: &FlightTrigger) -> PathBuf {
        let wall = UtcTime::from_unix_ns(t.end_ns as i128 + self.meta.clock_offset_ns);
        let who = match t.kind {
            TriggerKind::Wait | TriggerKind::RunQueue => t.tid.to_string(),
            k => k.name().to_string(),
        };
        let prefix = self.prefix.to_string_lossy();
        let base = format!("{prefix}-{}-{who}", wall.compact());
        let mut path = PathBuf::from(format!("{base}.zst"));
        let mut n = 2;
        while path.exists() || self.report.dumps.iter().any(|d| d.path == path) {
            path = PathBuf::from(format!("{base}-{n}.zst"));
            n += 1;
        }
        path
    }
}

/// `-o dir/stall.zst` or `-o dir/stall` → dumps named `dir/stall-….zst`.
fn dump_prefix(path: &Path) -> PathBuf {
    let s = path.to_string_lossy();
    PathBuf::from(s.strip_suffix(".zst").unwrap_or(&s))
}

impl TraceSink for Output {
    fn push(&mut self, event: &Event) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.push(event),
            Output::Rotating(w) => w.push(event),
            Output::Flight(f) => {
                f.watch.observe(event);
                f.ring.push(event)
            }
        }
    }

    fn add_stacks(&mut self, stacks: &[StackEntry]) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_stacks(stacks),
            Output::Rotating(w) => w.add_stacks(stacks),
            Output::Flight(f) => f.ring.add_stacks(stacks),
        }
    }

    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_symbols(symbols),
            Output::Rotating(w) => w.add_symbols(symbols),
            Output::Flight(f) => f.ring.add_symbols(symbols),
        }
    }

    fn add_mappings(&mut self, mappings: &[MappingEntry]) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_mappings(mappings),
            Output::Rotating(w) => w.add_mappings(mappings),
            Output::Flight(f) => f.ring.add_mappings(mappings),
        }
    }

    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_tasks(tasks),
            Output::Rotating(w) => w.add_tasks(tasks),
            Output::Flight(f) => {
                f.watch.add_tasks(tasks);
                f.ring.add_tasks(tasks)
            }
        }
    }

    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_irq_sources(sources),
            Output::Rotating(w) => w.add_irq_sources(sources),
            Output::Flight(f) => f.ring.add_irq_sources(sources),
        }
    }

    fn add_goroutines(
        &mut self,
        goroutines: &chainrec_format::GoDelta,
    ) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_goroutines(goroutines),
            Output::Rotating(w) => w.add_goroutines(goroutines),
            Output::Flight(f) => f.ring.add_goroutines(goroutines),
        }
    }

    fn add_throttles(
        &mut self,
        throttles: &chainrec_format::ThrottleDelta,
    ) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_throttles(throttles),
            Output::Rotating(w) => w.add_throttles(throttles),
            Output::Flight(f) => f.ring.add_throttles(throttles),
        }
    }

    fn add_cgroups(
        &mut self,
        cgroups: &[CgroupEntry],
        members: &[TaskCgroup],
    ) -> chainrec_format::Result<()> {
        match self {
            Output::File(w) => w.add_cgroups(cgroups, members),
            Output::Rotating(w) => w.add_cgroups(cgroups, members),
            Output::Flight(f) => f.ring.add_cgroups(cgroups, members),
        }
    }
}
