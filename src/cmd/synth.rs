//! `chainrec synth` (fronts chainrec_format::synth).
use anyhow::{bail, Context, Result};
use chainrec_format::synth::{self, SynthParams};
use chainrec_format::{
    Clock, Event, IrqSource, RecordingMeta, StackEntry, StackId, StackMode, SymbolEntry, TaskEntry,
    TraceSink, TraceWriter, WriterOptions,
};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  chainrec synth --list
  chainrec synth --scenario pipe-relay --events 1000 -o relay.zst && chainrec chains relay.zst
  chainrec synth --scenario busy-server --events 50000000 -o busy.zst";

/// Arguments of `chainrec synth`.
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Scenario name (see --list).
    #[arg(long, required_unless_present = "list")]
    scenario: Option<String>,
    /// Approximate number of events (scripts repeat to reach it).
    #[arg(long, default_value_t = 10_000)]
    events: u64,
    /// Seed for randomized scenarios.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output trace file.
    #[arg(short = 'o', long, required_unless_present = "list")]
    output: Option<PathBuf>,
}

/// Forwards to the writer and remembers the time span.
struct Track<'a> {
    w: &'a mut TraceWriter,
    first: Option<u64>,
    last: u64,
    /// Events carrying a stack the (simulated) lazy policy skipped.
    skipped: u64,
}

impl TraceSink for Track<'_> {
    fn push(&mut self, e: &Event) -> chainrec_format::Result<()> {
        self.first.get_or_insert(e.ts());
        self.last = e.ts();
        let skipped = match e {
            Event::Switch(s) => {
                s.prev_kstack == StackId::SKIPPED || s.prev_ustack == StackId::SKIPPED
            }
            Event::Waking(w) => {
                w.waker_kstack == StackId::SKIPPED || w.waker_ustack == StackId::SKIPPED
            }
            _ => false,
        };
        self.skipped += u64::from(skipped);
        self.w.push(e)
    }
    fn add_stacks(&mut self, s: &[StackEntry]) -> chainrec_format::Result<()> {
        self.w.add_stacks(s)
    }
    fn add_symbols(&mut self, s: &[SymbolEntry]) -> chainrec_format::Result<()> {
        self.w.add_symbols(s)
    }
    fn add_tasks(&mut self, t: &[TaskEntry]) -> chainrec_format::Result<()> {
        self.w.add_tasks(t)
    }
    fn add_irq_sources(&mut self, s: &[IrqSource]) -> chainrec_format::Result<()> {
        self.w.add_irq_sources(s)
    }
}

/// `chainrec synth`.
pub fn run(a: Args) -> Result<()> {
    if a.list {
        let list: String = synth::scenarios()
            .iter()
            .map(|s| format!("{:<14} {}\n", s.name, s.about))
            .collect();
        return super::write_stdout(&list);
    }
    let (Some(name), Some(out)) = (a.scenario, a.output) else {
        bail!("--scenario and -o are required")
    };
    let Some(sc) = synth::find(&name) else {
        let names: Vec<&str> = synth::scenarios().iter().map(|s| s.name).collect();
        bail!("unknown scenario {name:?}; known: {}", names.join(", "));
    };
    let mut meta = RecordingMeta {
        host: "synthetic".into(),
        kernel_release: "synthetic".into(),
        cpu_count: 4,
        clock: Clock::Synthetic,
        command_line: std::env::args().collect(),
        stack_mode: StackMode::Eager,
        stack_threshold_ns: 100_000,
        synthetic_scenario: Some(name.clone()),
        extra: vec![
            ("seed".into(), a.seed.to_string()),
            ("events_requested".into(), a.events.to_string()),
        ],
        ..RecordingMeta::default()
    };
    let t0 = std::time::Instant::now();
    let mut w = TraceWriter::create(&out, &meta, WriterOptions::default())
        .map_err(|e| super::with_path(&out, e))?;
    let mut track = Track {
        w: &mut w,
        first: None,
        last: 0,
        skipped: 0,
    };
    (sc.generate)(
        &SynthParams {
            events: a.events,
            seed: a.seed,
        },
        &mut track,
    )
    .with_context(|| format!("generating {name}"))?;
    meta.start_ns = track.first.unwrap_or(0);
    meta.end_ns = track.last;
    // Scenarios that simulate the lazy recorder say so, with what it skipped.
    if track.skipped > 0 {
        meta.stack_mode = StackMode::Lazy;
        meta.lost.stacks_skipped = track.skipped;
    }
    let sum = w.finish(&meta).map_err(|e| super::with_path(&out, e))?;
    say!(
        "chainrec: synth: {name}: {} events, {} chunks, {} bytes -> {} in {:.2} s",
        sum.events,
        sum.chunks,
        sum.bytes,
        out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
