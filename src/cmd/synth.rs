//! `chainrec synth` (fronts chainrec_format::synth).
use anyhow::{bail, Result};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> Result<()> {
    bail!("synth: not implemented yet")
}
