//! `chainrec synth` (fronts chainrec_format::synth).
use anyhow::{bail, Result};
use chainrec_format::synth::{self, SynthError, SynthParams};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  chainrec synth --list
  chainrec synth --scenario pipe-relay --events 1000 -o relay.zst
  chainrec chains relay.zst
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
    let sum = synth::write_trace(&out, &name, &params, std::env::args().collect()).map_err(
        |e| match e {
            SynthError::Write(e) => super::with_path(&out, e),
            e => e.into(),
        },
    )?;
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
