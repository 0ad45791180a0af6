//! `chainrec info` (fronts chainrec-format).
use anyhow::{bail, Result};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> Result<()> {
    bail!("info: not implemented yet")
}
