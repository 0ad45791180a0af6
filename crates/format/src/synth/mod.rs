//! Synthetic traces: scenarios with exactly known chains and timings, and a busy-server
//! mix that scales to 100 M+ events for benchmarks. Deterministic for a seed.

use crate::{
    CgroupEntry, Clock, Event, FormatError, IrqSource, RecordingMeta, Result, StackEntry, StackId,
    StackMode, SymbolEntry, TaskCgroup, TaskEntry, TraceSink, TraceWriter, WriteSummary,
    WriterOptions,
};
use std::path::Path;

mod busy;
mod exact;
mod scenario;
pub use exact::{CONTAINERS_DB_ID, CONTAINERS_DB_POD, CONTAINERS_WEB_ID};
pub use scenario::{Scenario, SynthParams};

/// All scenarios, exact ones first.
pub fn scenarios() -> Vec<Scenario> {
    let mut all = exact::scenarios();
    all.extend(busy::scenarios());
    all
}

/// Find a scenario by name.
pub fn find(name: &str) -> Option<Scenario> {
    scenarios().into_iter().find(|s| s.name == name)
}

/// Why [`write_trace`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// No scenario has this name.
    #[error("unknown scenario {name:?}; known: {}", scenario_names())]
    UnknownScenario {
        /// The name given.
        name: String,
    },
    /// The scenario's generator failed (an event it made could not be written).
    #[error("generating {scenario}")]
    Generate {
        /// The scenario.
        scenario: &'static str,
        /// Why.
        #[source]
        source: FormatError,
    },
    /// The trace file could not be created or completed (I/O errors name their path).
    #[error(transparent)]
    Write(FormatError),
}

/// The scenarios' names, comma-separated.
fn scenario_names() -> String {
    let names: Vec<&str> = scenarios().iter().map(|s| s.name).collect();
    names.join(", ")
}

/// Write scenario `name` made with `params` to the trace file `path`: its metadata
/// ([`meta`], with `command_line`) completed by a [`Tracker`], its tables and events.
pub fn write_trace(
    path: &Path,
    name: &str,
    params: &SynthParams,
    command_line: Vec<String>,
) -> Result<WriteSummary, SynthError> {
    write_trace_as(path, name, params, command_line, |_| {})
}

/// [`write_trace`] with the metadata changed by `edit` before anything is written (e.g. the
/// host name, so that traces of a "fleet" can be made for tests of several hosts).
pub fn write_trace_as(
    path: &Path,
    name: &str,
    params: &SynthParams,
    command_line: Vec<String>,
    edit: impl FnOnce(&mut RecordingMeta),
) -> Result<WriteSummary, SynthError> {
    let sc = find(name).ok_or_else(|| SynthError::UnknownScenario {
        name: name.to_string(),
    })?;
    let mut meta = meta(name, params, command_line);
    edit(&mut meta);
    let mut w =
        TraceWriter::create(path, &meta, WriterOptions::default()).map_err(SynthError::Write)?;
    let mut track = Tracker::new(&mut w);
    (sc.generate)(params, &mut track).map_err(|source| SynthError::Generate {
        scenario: sc.name,
        source,
    })?;
    track.complete(&mut meta);
    w.finish(&meta).map_err(SynthError::Write)
}

/// The metadata of a synthetic trace of scenario `name` made with `params`, as known
/// before generating it: synthetic host and clock, the scenario's stack policy, and for
/// the busy server its CPU count. [`Tracker::complete`] adds what generating it showed
/// (time span, skipped stacks, CPUs used).
pub fn meta(name: &str, params: &SynthParams, command_line: Vec<String>) -> RecordingMeta {
    let mut meta = RecordingMeta {
        host: "synthetic".into(),
        kernel_release: "synthetic".into(),
        clock: Clock::Synthetic,
        command_line,
        stack_mode: StackMode::Eager,
        stack_threshold_ns: 100_000,
        synthetic_scenario: Some(name.to_string()),
        extra: vec![
            ("seed".into(), params.seed.to_string()),
            ("events_requested".into(), params.events.to_string()),
        ],
        ..RecordingMeta::default()
    };
    let period = match name {
        "oncpu-worker" => Some(exact::ONCPU_WORKER_PERIOD_NS),
        "oncpu-sparse" => Some(exact::ONCPU_SPARSE_PERIOD_NS),
        _ => None,
    };
    if let Some(period_ns) = period {
        meta.set_sampling(&crate::Sampling {
            event: "cpu-clock".into(),
            freq_hz: 1_000_000_000 / period_ns,
            period_ns,
            ..Default::default()
        });
    }
    if name == "busy-server" {
        meta.cpu_count = busy::CPUS;
        meta.stack_mode = StackMode::Lazy;
        meta.stack_threshold_ns = busy::STACK_THRESHOLD_NS;
    }
    meta
}

/// A [`TraceSink`] in front of another that notes what the metadata must say about the
/// events written through it.
pub struct Tracker<'a> {
    inner: &'a mut dyn TraceSink,
    first: Option<u64>,
    last: u64,
    /// Events carrying a stack the (simulated) lazy policy skipped.
    skipped: u64,
    /// Highest CPU number seen (+1), 0 before any.
    cpus: u32,
    /// On-CPU samples, and those without a kernel / user stack (FAILED).
    samples: [u64; 3],
}

impl<'a> Tracker<'a> {
    /// Track the events written to `inner`.
    pub fn new(inner: &'a mut dyn TraceSink) -> Self {
        Tracker {
            inner,
            first: None,
            last: 0,
            skipped: 0,
            cpus: 0,
            samples: [0; 3],
        }
    }

    /// Complete `meta` (from [`meta`]) with the events seen: start and end time, the
    /// CPU count when the scenario did not fix one, and the lazy policy with its skipped
    /// stacks when a scenario simulates the lazy recorder.
    pub fn complete(&self, meta: &mut RecordingMeta) {
        meta.start_ns = self.first.unwrap_or(0);
        meta.end_ns = self.last;
        if meta.cpu_count == 0 {
            meta.cpu_count = self.cpus.max(1);
        }
        if self.skipped > 0 {
            meta.stack_mode = StackMode::Lazy;
            meta.lost.stacks_skipped = self.skipped;
        }
        if let Some(mut s) = meta.sampling() {
            [s.samples, s.no_kstack, s.no_ustack] = self.samples;
            meta.set_sampling(&s);
        }
    }
}

impl TraceSink for Tracker<'_> {
    fn push(&mut self, e: &Event) -> Result<()> {
        self.first.get_or_insert(e.ts());
        self.last = e.ts();
        let (skipped, cpu) = match e {
            Event::Switch(s) => (
                s.prev_kstack == StackId::SKIPPED || s.prev_ustack == StackId::SKIPPED,
                Some(s.cpu),
            ),
            Event::Waking(w) => (
                w.waker_kstack == StackId::SKIPPED || w.waker_ustack == StackId::SKIPPED,
                Some(w.cpu),
            ),
            Event::Sample(x) => {
                self.samples[0] += 1;
                self.samples[1] += u64::from(x.kstack == StackId::FAILED);
                self.samples[2] += u64::from(x.ustack == StackId::FAILED);
                (false, Some(x.cpu))
            }
            _ => (false, None),
        };
        self.skipped += u64::from(skipped);
        if let Some(c) = cpu.filter(|&c| c != u32::MAX) {
            self.cpus = self.cpus.max(c + 1);
        }
        self.inner.push(e)
    }
    fn add_stacks(&mut self, s: &[StackEntry]) -> Result<()> {
        self.inner.add_stacks(s)
    }
    fn add_symbols(&mut self, s: &[SymbolEntry]) -> Result<()> {
        self.inner.add_symbols(s)
    }
    fn add_tasks(&mut self, t: &[TaskEntry]) -> Result<()> {
        self.inner.add_tasks(t)
    }
    fn add_irq_sources(&mut self, s: &[IrqSource]) -> Result<()> {
        self.inner.add_irq_sources(s)
    }
    fn add_throttles(&mut self, t: &crate::ThrottleDelta) -> Result<()> {
        self.inner.add_throttles(t)
    }
    fn add_cgroups(&mut self, c: &[CgroupEntry], m: &[TaskCgroup]) -> Result<()> {
        self.inner.add_cgroups(c, m)
    }
}
