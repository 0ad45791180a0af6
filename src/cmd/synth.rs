//! `chainrec synth` (fronts chainrec_format::synth).
use anyhow::{bail, Result};
use chainrec_format::synth::{self, SynthError, SynthParams};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  chainrec synth --list
  chainrec synth --scenario pipe-relay --events 1000 -o relay.zst
  chainrec chains relay.zst
  chainrec synth --scenario busy-server --events 50000000 -o busy.zst
  # another host's trace, with a wall clock (try export --parquet-dir)
  chainrec synth --scenario pipe-relay --host web1 \\
      --wall-clock 1795000000 -o web1.zst";

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
    /// Host name written in the trace (default `synthetic`): traces of several "hosts".
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// Give the trace a wall clock: trace time 0 (the trace starts 1 s later) is this Unix
    /// time, in seconds (default: none, as a synthetic clock).
    #[arg(long, value_name = "UNIX_S")]
    wall_clock: Option<u32>,
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
    let params = SynthParams {
        events: a.events,
        seed: a.seed,
    };
    let t0 = std::time::Instant::now();
    let (host, wall_clock) = (a.host, a.wall_clock);
    let edit_meta = |m: &mut chainrec_format::RecordingMeta| {
        if let Some(h) = host {
            m.host = h;
        }
        if let Some(s) = wall_clock {
            m.clock_offset_ns = i128::from(s) * 1_000_000_000;
        }
    };
    let sum = synth::write_trace_as(&out, &name, &params, std::env::args().collect(), edit_meta)
        .map_err(|e| match e {
            SynthError::Write(e) => super::with_path(&out, e),
            e => e.into(),
        })?;
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
